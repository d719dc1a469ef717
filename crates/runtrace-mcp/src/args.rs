//! Tool arguments: typed reads from the JSON object of a `tools/call`,
//! with errors that name the argument and what was wrong.
//!
//! ```
//! use runtrace_mcp::args::Args;
//! let v = serde_json::json!({"trace_id": "a", "limit": 5});
//! let a = Args::new(&v).unwrap();
//! assert_eq!(a.str("trace_id").unwrap(), "a");
//! assert_eq!(a.opt_u64("limit").unwrap(), Some(5));
//! assert!(a.str("missing").unwrap_err().contains("missing"));
//! ```

use serde_json::{Map, Value};

/// The largest `limit` any tool takes (events, list entries, outliers):
/// a JSON event is about 200-1,000 bytes, so an answer stays in the tens
/// of MB. Stated in every tool's description of `limit`.
pub const MAX_LIMIT: usize = 10_000;

/// The arguments of one call.
pub struct Args<'a>(&'a Map<String, Value>);

/// An empty argument object, for calls without arguments.
static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl<'a> Args<'a> {
    /// Wraps a JSON object (`null` counts as no arguments).
    pub fn new(v: &'a Value) -> Result<Args<'a>, String> {
        match v {
            Value::Object(m) => Ok(Args(m)),
            Value::Null => Ok(Args(&EMPTY)),
            other => Err(format!("arguments must be a JSON object, got {other}")),
        }
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// A required string.
    pub fn str(&self, name: &str) -> Result<&'a str, String> {
        self.opt_str(name)?
            .ok_or_else(|| format!("missing required argument `{name}`"))
    }

    /// An optional string.
    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("argument `{name}` must be a string, got {v}")),
        }
    }

    /// A string or a number, as text (ids a client may send either way).
    pub fn opt_text(&self, name: &str) -> Result<Option<String>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(v) => Err(format!(
                "argument `{name}` must be a string or a number, got {v}"
            )),
        }
    }

    /// One string or an array of strings.
    pub fn strs(&self, name: &str) -> Result<Vec<String>, String> {
        let bad =
            |v: &Value| format!("argument `{name}` must be a path or an array of paths, got {v}");
        match self.get(name) {
            None => Err(format!("missing required argument `{name}`")),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad(v)))
                .collect(),
            Some(v) => Err(bad(v)),
        }
    }

    /// An optional non-negative integer (a string of digits is accepted).
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .map(Some)
                .ok_or_else(|| {
                    format!("argument `{name}` must be a non-negative integer, got {v}")
                }),
        }
    }

    /// An optional integer (a string of digits is accepted).
    pub fn opt_i64(&self, name: &str) -> Result<Option<i64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .map(Some)
                .ok_or_else(|| format!("argument `{name}` must be an integer, got {v}")),
        }
    }

    /// An optional number of seconds: finite and not negative.
    pub fn opt_seconds(&self, name: &str) -> Result<Option<f64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v
                .as_f64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
                _ => Err(format!(
                    "argument `{name}` must be a number of seconds (0 or more), got {v}"
                )),
            },
        }
    }

    /// A required non-negative integer.
    pub fn u64(&self, name: &str) -> Result<u64, String> {
        self.opt_u64(name)?
            .ok_or_else(|| format!("missing required argument `{name}`"))
    }

    /// An optional count, `default` when absent, at most [`MAX_LIMIT`]
    /// (a larger one is taken as `MAX_LIMIT`: the answer says what it
    /// cut, and its size stays bounded whatever the client asks).
    pub fn limit(&self, default: usize) -> Result<usize, String> {
        Ok(self
            .opt_u64("limit")?
            .map_or(default, |n| n.min(MAX_LIMIT as u64) as usize)
            .min(MAX_LIMIT))
    }
}
