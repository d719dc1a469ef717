//! The event catalog: the TOML file (`probes/events.toml`, an
//! application's `probes/<provider>.toml`) every backend is generated from,
//! read and checked.
//!
//! ```
//! let cat = runtrace_build::Catalog::parse(
//!     "provider = \"myapp\"\n[[event]]\nname = \"done\"\ndoc = \"d\"\n\
//!      fields = [{ name = \"status\", type = \"u16\", doc = \"s\" }]\n",
//! )
//! .unwrap();
//! assert_eq!(cat.events[0].fields[0].ty, "u16");
//! ```

use crate::symbols::RUNTRACE_PROVIDER;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// A field type of the catalog (see `probes/events.toml`).
pub const FIELD_TYPES: &[&str] = &[
    "u64", "u32", "u16", "u8", "i64", "i32", "bool", "f64", "str", "istr", "loc", "task", "worker",
];

/// An event catalog.
#[derive(Debug, Clone, Deserialize)]
pub struct Catalog {
    /// Provider name (`runtrace` for the built-ins).
    #[serde(default = "default_provider")]
    pub provider: String,
    /// The events.
    #[serde(rename = "event")]
    pub events: Vec<Event>,
}

fn default_provider() -> String {
    RUNTRACE_PROVIDER.into()
}

/// One event of a catalog.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// snake_case name.
    pub name: String,
    /// Wire id (built-ins only; application events get theirs at run time).
    pub id: Option<u32>,
    /// Name printed by `runtrace jsonl` (built-ins).
    pub json: Option<String>,
    /// `runtime`, `meta` or `profile` (built-ins; see [`Event::has_probe_site`]).
    pub kind: Option<String>,
    /// One-line description.
    pub doc: String,
    /// Fields in order.
    pub fields: Vec<Field>,
}

/// One field of an event.
#[derive(Debug, Clone, Deserialize)]
pub struct Field {
    /// snake_case name.
    pub name: String,
    /// One of [`FIELD_TYPES`].
    #[serde(rename = "type")]
    pub ty: String,
    /// One-line description.
    pub doc: String,
}

/// The `kind` of events only the recorder writes (CPU samples): they have
/// no probe site, so the USDT, LTTng and perf-probe backends skip them.
pub const PROFILE_KIND: &str = "profile";

impl Event {
    /// Whether code fires this event at a probe site (every event but
    /// kind `profile`, which the recorder's writer thread writes itself).
    ///
    /// ```
    /// let cat = runtrace_build::Catalog::parse(
    ///     "[[event]]\nname = \"s\"\nid = 1\njson = \"S\"\nkind = \"profile\"\ndoc = \"\"\nfields = []\n",
    /// )
    /// .unwrap();
    /// assert!(!cat.events[0].has_probe_site());
    /// ```
    pub fn has_probe_site(&self) -> bool {
        self.kind.as_deref() != Some(PROFILE_KIND)
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

impl Catalog {
    /// Reads and checks a catalog; errors name the file and the problem.
    pub fn load(path: impl AsRef<Path>) -> Result<Catalog, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Catalog::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The catalog without the events that have no probe site (see
    /// [`Event::has_probe_site`]): what the USDT, LTTng and perf-probe
    /// backends generate from.
    pub fn probe_sites(&self) -> Catalog {
        Catalog {
            provider: self.provider.clone(),
            events: self
                .events
                .iter()
                .filter(|e| e.has_probe_site())
                .cloned()
                .collect(),
        }
    }

    /// Parses and checks catalog text.
    pub fn parse(text: &str) -> Result<Catalog, String> {
        let cat: Catalog = toml::from_str(text).map_err(|e| e.to_string())?;
        cat.check()?;
        Ok(cat)
    }

    fn check(&self) -> Result<(), String> {
        if !is_ident(&self.provider) {
            return Err(format!("provider {:?} must be snake_case", self.provider));
        }
        let builtin = self.provider == RUNTRACE_PROVIDER;
        let mut names = HashSet::new();
        let mut ids = HashSet::new();
        for ev in &self.events {
            if !is_ident(&ev.name) {
                return Err(format!("event {:?}: names are snake_case", ev.name));
            }
            if !names.insert(&ev.name) {
                return Err(format!("event {} defined twice", ev.name));
            }
            match (builtin, ev.id) {
                (true, Some(id)) if (1..=127).contains(&id) => {
                    if !ids.insert(id) {
                        return Err(format!("{}: id {id} used twice", ev.name));
                    }
                }
                (true, _) => {
                    return Err(format!(
                        "{}: built-in events need an id in 1..=127",
                        ev.name
                    ))
                }
                (false, Some(_)) => {
                    return Err(format!(
                        "{}: application events get their id at run time; remove `id`",
                        ev.name
                    ))
                }
                (false, None) => {}
            }
            if let Some(k) = &ev.kind {
                if k != "runtime" && k != "meta" && k != PROFILE_KIND {
                    return Err(format!(
                        "{}: kind must be runtime, meta or profile",
                        ev.name
                    ));
                }
                if k == PROFILE_KIND && !builtin {
                    return Err(format!(
                        "{}: kind profile is for the recorder's built-in events",
                        ev.name
                    ));
                }
            }
            if ev.fields.len() > 32 {
                return Err(format!("{}: at most 32 fields", ev.name));
            }
            let mut fnames = HashSet::new();
            for f in &ev.fields {
                if !is_ident(&f.name) || f.name == "args" {
                    return Err(format!(
                        "{}.{}: field names are snake_case (not `args`)",
                        ev.name, f.name
                    ));
                }
                if !fnames.insert(&f.name) {
                    return Err(format!("{}.{} repeated", ev.name, f.name));
                }
                if !FIELD_TYPES.contains(&f.ty.as_str()) {
                    return Err(format!(
                        "{}.{}: unknown type {:?} (one of {FIELD_TYPES:?})",
                        ev.name, f.name, f.ty
                    ));
                }
                if !builtin && matches!(f.ty.as_str(), "task" | "worker") {
                    return Err(format!(
                        "{}.{}: `{}` is for built-in events; use u64/u32",
                        ev.name, f.name, f.ty
                    ));
                }
            }
        }
        Ok(())
    }
}
