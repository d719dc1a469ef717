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

pub mod wire;

// `FieldType`, `Group` and the recorder's `__field_type!` macro, from
// runtrace-build's table of field types and its groups (build.rs).
include!(concat!(env!("OUT_DIR"), "/types.rs"));

// Each encoding's longest value is what `FieldType::max_encoded_len` and
// every encoder's reservation rely on: the table's `Str` must be the
// format's longest inline string.
const _: () = assert!(FieldType::Str.max_encoded_len() == 2 + crate::MAX_INLINE_STR);
const _: () = assert!(FieldType::U64.max_encoded_len() == varint::MAX_LEN);

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
    /// What reads it, and whether it has a probe site.
    pub group: Group,
    /// One-line description.
    pub doc: &'static str,
    /// Fields in wire order.
    pub fields: &'static [BuiltinField],
}

impl BuiltinEvent {
    /// Whether code fires this event at a probe site, so USDT, LTTng and
    /// perf-probe see it too: every event but those of group `profile`
    /// (CPU samples, which the recorder's writer thread writes itself).
    ///
    /// ```
    /// use runtrace_format::schema::builtin_by_name;
    /// assert!(builtin_by_name("task_spawn").unwrap().has_probe_site());
    /// assert!(!builtin_by_name("cpu_sample").unwrap().has_probe_site());
    /// ```
    pub fn has_probe_site(&self) -> bool {
        self.group.has_probe_site()
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

/// What the catalog says about one wire id at a glance ([`ID_FACTS`]):
/// its group and whether the event has a `task` and a `worker` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdFacts {
    /// The event's group; None when the id is no built-in event.
    pub group: Option<Group>,
    /// It has a field of type `task` (at most one: "the event's task").
    pub task: bool,
    /// It has a field of type `worker` (at most one: "its worker").
    pub worker: bool,
}

impl IdFacts {
    /// The facts of an id that is no built-in event.
    pub const NONE: IdFacts = IdFacts {
        group: None,
        task: false,
        worker: false,
    };
}

// `ids`, `catalog`, `BUILTIN_EVENTS`, `ID_FACTS`, `for_each_builtin_event!`
// (build.rs, from probes/events.toml).
include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// The catalog's facts about wire id `id` ([`IdFacts::NONE`] when it is no
/// built-in event): one table load.
///
/// ```
/// use runtrace_format::schema::{id_facts, ids, Group};
/// let f = id_facts(ids::TASK_POLL_START);
/// assert_eq!((f.group, f.task, f.worker), (Some(Group::Runtime), true, true));
/// assert_eq!(id_facts(ids::LOCK_WAIT).group, Some(Group::App));
/// assert_eq!(id_facts(1000).group, None);
/// ```
#[inline(always)]
pub const fn id_facts(id: u32) -> IdFacts {
    if id < 256 {
        ID_FACTS[id as usize]
    } else {
        IdFacts::NONE
    }
}

/// Looks up a built-in event by wire id.
pub fn builtin(id: u32) -> Option<&'static BuiltinEvent> {
    BUILTIN_EVENTS.iter().find(|e| e.id == id)
}

/// Looks up a built-in event by name.
pub fn builtin_by_name(name: &str) -> Option<&'static BuiltinEvent> {
    BUILTIN_EVENTS.iter().find(|e| e.name == name)
}

/// Looks up a built-in event by either of its public names: the catalog
/// name (`task_poll_start`) or the JSON name `runtrace jsonl` and
/// `runtrace check` print (`PollStart`).
///
/// ```
/// use runtrace_format::schema::{builtin_by_any_name, ids};
/// assert_eq!(builtin_by_any_name("PollStart").unwrap().id, ids::TASK_POLL_START);
/// assert_eq!(builtin_by_any_name("task_poll_start").unwrap().id, ids::TASK_POLL_START);
/// assert!(builtin_by_any_name("pollstart").is_none());
/// ```
pub fn builtin_by_any_name(name: &str) -> Option<&'static BuiltinEvent> {
    BUILTIN_EVENTS
        .iter()
        .find(|e| e.name == name || e.json_name == name)
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

    /// The generated per-event modules, facts and types agree with the
    /// catalog table (all four come from the one build script).
    #[test]
    fn generated_tables_agree() {
        use catalog::task_poll_start as ps;
        let e = builtin(ps::ID).unwrap();
        assert_eq!(e.fields[ps::LOCAL_Q].name, "local_q");
        assert_eq!(e.fields[ps::TASK_ID].ty, FieldType::Task);
        for id in 0..300u32 {
            let f = id_facts(id);
            match builtin(id) {
                Some(b) => {
                    assert_eq!(f.group, Some(b.group), "{}", b.name);
                    assert_eq!(f.task, b.fields.iter().any(|x| x.ty == FieldType::Task));
                    assert_eq!(f.worker, b.fields.iter().any(|x| x.ty == FieldType::Worker));
                }
                None => assert_eq!(f, IdFacts::NONE, "{id}"),
            }
        }
        for t in FieldType::ALL {
            assert_eq!(FieldType::from_name(t.name()), Some(t));
            assert_eq!(
                FieldType::from_code(t.code()).map(FieldType::code),
                Some(t.code())
            );
            assert_eq!(t.max_encoded_len(), t.encoding().max_len());
        }
        assert_eq!(FieldType::from_code(0), None);
        for g in Group::ALL {
            assert_eq!(Group::from_name(g.name()), Some(g));
        }
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
