//! Decoded events and field values.
//!
//! ```
//! use runtrace_format::Value;
//! assert_eq!(Value::U(7).as_u64(), Some(7));
//! assert_eq!(Value::Bool(true).as_u64(), Some(1));
//! ```

use crate::schema::Schema;
use std::sync::Arc;

/// One decoded field value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Unsigned integer (also task ids).
    U(u64),
    /// Signed integer.
    I(i64),
    /// Boolean.
    Bool(bool),
    /// Float.
    F(f64),
    /// Text (inline or interned).
    Str(Arc<str>),
    /// Spawn location: id, and `file:line:col` (None for id 0).
    Loc {
        /// Interned id (0: unknown).
        id: u64,
        /// `file:line:col`.
        text: Option<Arc<str>>,
    },
    /// Worker index, None when the thread is not a worker.
    Worker(Option<u32>),
}

impl Value {
    /// The value as an unsigned integer where that makes sense.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U(v) => Some(v),
            Value::I(v) => u64::try_from(v).ok(),
            Value::Bool(b) => Some(b as u64),
            Value::Loc { id, .. } => Some(id),
            Value::Worker(w) => w.map(u64::from),
            _ => None,
        }
    }

    /// The value as text, for strings.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            Value::Loc { text, .. } => text.as_deref(),
            _ => None,
        }
    }
}

/// One decoded event.
#[derive(Debug, Clone)]
pub struct Event {
    /// Timestamp in trace ticks.
    pub ticks: u64,
    /// Nanoseconds since the recording started (docs/format.md section 4).
    pub ns: i64,
    /// OS thread id of the recording thread.
    pub tid: u64,
    /// The event's schema.
    pub schema: Arc<Schema>,
    /// Field values in schema order.
    pub values: Vec<Value>,
}

impl Event {
    /// The value of the field called `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schema
            .fields
            .iter()
            .position(|f| f.name == name)
            .map(|i| &self.values[i])
    }

    /// The value of field `name` as an unsigned integer.
    pub fn u64(&self, name: &str) -> Option<u64> {
        self.get(name).and_then(Value::as_u64)
    }
}
