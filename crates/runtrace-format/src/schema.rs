//! Event schemas: the built-in catalog generated from `probes/events.toml`,
//! and the self-describing schemas written into every trace.
//!
//! ```
//! use runtrace_format::schema::{builtin_by_name, FieldType};
//! let e = builtin_by_name("task_poll_end").unwrap();
//! assert_eq!(e.json_name, "PollEnd");
//! assert_eq!(e.fields[2].ty, FieldType::Bool);
//! ```

use crate::varint::{self, Cursor, DecodeError};

/// The type of an event field, as declared in the catalog.
///
/// On the wire, integer widths collapse to one code (see [`FieldType::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// Unsigned 64-bit integer (varint).
    U64,
    /// Unsigned 32-bit integer (varint).
    U32,
    /// Unsigned 16-bit integer (varint).
    U16,
    /// Unsigned 8-bit integer (varint).
    U8,
    /// Signed 64-bit integer (zigzag varint).
    I64,
    /// Signed 32-bit integer (zigzag varint).
    I32,
    /// Boolean (one byte).
    Bool,
    /// 64-bit float (8 bytes LE).
    F64,
    /// Short inline string (<= 255 bytes).
    Str,
    /// Interned string (id).
    Istr,
    /// Interned spawn location (id).
    Loc,
    /// Task id, delta-encoded against the chunk's task register.
    Task,
    /// Worker index, taken from the chunk's worker register (no bytes).
    Worker,
}

impl FieldType {
    /// The wire type code (docs/format.md section 5).
    pub fn code(self) -> u8 {
        match self {
            FieldType::U64 | FieldType::U32 | FieldType::U16 | FieldType::U8 => 1,
            FieldType::I64 | FieldType::I32 => 2,
            FieldType::Bool => 3,
            FieldType::F64 => 4,
            FieldType::Str => 5,
            FieldType::Istr => 6,
            FieldType::Loc => 7,
            FieldType::Task => 8,
            FieldType::Worker => 9,
        }
    }

    /// The type a wire code decodes as, if known.
    pub fn from_code(code: u8) -> Option<FieldType> {
        Some(match code {
            1 => FieldType::U64,
            2 => FieldType::I64,
            3 => FieldType::Bool,
            4 => FieldType::F64,
            5 => FieldType::Str,
            6 => FieldType::Istr,
            7 => FieldType::Loc,
            8 => FieldType::Task,
            9 => FieldType::Worker,
            _ => return None,
        })
    }

    /// Most bytes one value of this type takes in an event record.
    pub fn max_encoded_len(self) -> usize {
        match self {
            FieldType::Bool => 1,
            FieldType::F64 => 8,
            FieldType::Str => 2 + crate::MAX_INLINE_STR,
            FieldType::Worker => 0,
            _ => varint::MAX_LEN,
        }
    }
}

/// A field of a built-in event (static, generated).
#[derive(Debug)]
pub struct BuiltinField {
    /// Field name.
    pub name: &'static str,
    /// Declared type.
    pub ty: FieldType,
    /// One-line description.
    pub doc: &'static str,
}

/// A built-in event (static, generated from `probes/events.toml`).
#[derive(Debug)]
pub struct BuiltinEvent {
    /// Wire id.
    pub id: u32,
    /// Event name (provider `runtrace`).
    pub name: &'static str,
    /// Name printed in `"event"` by `runtrace jsonl`.
    pub json_name: &'static str,
    /// `runtime`, `meta` or `profile` (see [`BuiltinEvent::has_probe_site`]).
    pub kind: &'static str,
    /// One-line description.
    pub doc: &'static str,
    /// Fields in wire order.
    pub fields: &'static [BuiltinField],
}

impl BuiltinEvent {
    /// Whether code fires this event at a probe site, so USDT, LTTng and
    /// perf-probe see it too: every event but kind `profile` (CPU samples,
    /// which the recorder's writer thread writes itself).
    ///
    /// ```
    /// use runtrace_format::schema::builtin_by_name;
    /// assert!(builtin_by_name("task_spawn").unwrap().has_probe_site());
    /// assert!(!builtin_by_name("cpu_sample").unwrap().has_probe_site());
    /// ```
    pub fn has_probe_site(&self) -> bool {
        self.kind != "profile"
    }

    /// This event's schema as written into trace files.
    pub fn schema(&self) -> Schema {
        Schema {
            id: self.id,
            provider: "runtrace".into(),
            name: self.name.into(),
            fields: self
                .fields
                .iter()
                .map(|f| SchemaField {
                    name: f.name.into(),
                    ty: f.ty,
                })
                .collect(),
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// Looks up a built-in event by wire id.
pub fn builtin(id: u32) -> Option<&'static BuiltinEvent> {
    BUILTIN_EVENTS.iter().find(|e| e.id == id)
}

/// Looks up a built-in event by name.
pub fn builtin_by_name(name: &str) -> Option<&'static BuiltinEvent> {
    BUILTIN_EVENTS.iter().find(|e| e.name == name)
}

/// One field of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaField {
    /// Field name.
    pub name: String,
    /// Field type (on decode: the wire type, widths collapsed).
    pub ty: FieldType,
}

/// The self-description of one event type, as stored in a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// Wire id.
    pub id: u32,
    /// Provider (`runtrace` for built-ins).
    pub provider: String,
    /// Event name.
    pub name: String,
    /// Fields in wire order.
    pub fields: Vec<SchemaField>,
}

impl Schema {
    /// Appends this schema's encoding (docs/format.md section 5).
    pub fn encode(&self, out: &mut Vec<u8>) {
        varint::put(out, self.id as u64);
        varint::put_str(out, &self.provider);
        varint::put_str(out, &self.name);
        varint::put(out, self.fields.len() as u64);
        for f in &self.fields {
            varint::put_str(out, &f.name);
            out.push(f.ty.code());
        }
    }

    /// Decodes one schema.
    pub fn decode(c: &mut Cursor<'_>) -> Result<Schema, DecodeError> {
        let at = c.pos();
        let id = c.varint()?;
        if id == crate::SET_WORKER as u64 || id > u32::MAX as u64 {
            return Err(DecodeError::new(at, format!("invalid event type id {id}")));
        }
        let provider = c.str()?.to_owned();
        let name = c.str()?.to_owned();
        let n = c.varint()?;
        if n > crate::MAX_FIELDS as u64 {
            return Err(DecodeError::new(
                at,
                format!("schema {name} has {n} fields (max 32)"),
            ));
        }
        let mut fields = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let fname = c.str()?.to_owned();
            let pos = c.pos();
            let code = c.u8()?;
            let ty = FieldType::from_code(code).ok_or_else(|| {
                DecodeError::new(
                    pos,
                    format!("{name}.{fname}: unknown field type code {code}"),
                )
            })?;
            fields.push(SchemaField { name: fname, ty });
        }
        Ok(Schema {
            id: id as u32,
            provider,
            name,
            fields,
        })
    }

    /// The name `runtrace jsonl` prints for this event: the seed-000 name for
    /// built-ins, `provider:name` otherwise.
    pub fn display_name(&self) -> String {
        if self.provider == "runtrace" {
            if let Some(b) = builtin(self.id).filter(|b| b.name == self.name) {
                return b.json_name.to_string();
            }
        }
        format!("{}:{}", self.provider, self.name)
    }
}

/// All built-in schemas.
pub fn builtin_schemas() -> Vec<Schema> {
    BUILTIN_EVENTS.iter().map(|e| e.schema()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_consistent() {
        assert!(BUILTIN_EVENTS.len() >= 10);
        for (i, e) in BUILTIN_EVENTS.iter().enumerate() {
            assert!(e.id >= 1 && e.id < crate::FIRST_USER_EVENT_ID);
            if i > 0 {
                assert!(BUILTIN_EVENTS[i - 1].id < e.id, "sorted by id");
            }
        }
        assert_eq!(
            ids::TASK_POLL_START,
            builtin_by_name("task_poll_start").unwrap().id
        );
    }

    #[test]
    fn schema_round_trip() {
        for s in builtin_schemas() {
            let mut b = Vec::new();
            s.encode(&mut b);
            let mut c = Cursor::new(&b);
            let mut back = Schema::decode(&mut c).unwrap();
            // Widths collapse on the wire.
            for (f, g) in back.fields.iter_mut().zip(&s.fields) {
                assert_eq!(f.ty.code(), g.ty.code());
                f.ty = g.ty;
            }
            assert_eq!(back, s);
            assert!(c.is_empty());
        }
    }
}
