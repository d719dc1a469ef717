//! Dense chunks (format 1.3, docs/format.md section 6.1): the `DCHUNK`
//! frame, a `CHUNK` whose records fold the event type into the timestamp
//! delta and leave out field values a fixed table of *slots* implies.
//!
//! The recorder's threads still write ordinary records into their buffers
//! (the hot path does not change); the writer thread rewrites each chunk
//! with [`encode`] as it frames it, and readers expand a `DCHUNK` back into
//! the ordinary records with [`decode`], so everything that walks chunks
//! reads both. Nothing is lost: [`decode`] gives back the exact bytes
//! [`encode`] was given.
//!
//! ```text
//! record := head:varint [type_id:varint if slot == 0] field*
//! head   := dt << 4 | slot            (slot: the low 4 bits)
//! ```
//!
//! Slot 0 is the escape: the type id follows and every field is written,
//! as in a `CHUNK` (type id 0 is the `set_worker` record). Slots 1 to 15
//! name a built-in event type and the values of some of its fields
//! ([`SLOTS`]); only the other fields follow, in schema order.
//!
//! ```
//! use runtrace_format::dense;
//! use runtrace_format::schema::builtin_schemas;
//! let schemas = builtin_schemas();
//! let look = |id: u32| schemas.iter().find(|s| s.id == id);
//! // task_poll_end (id 3) of the task just polled (task delta 0), not
//! // ready, 100 ticks after the previous event: 4 bytes as a record...
//! let body = [3u8, 100, 0, 0];
//! let mut d = Vec::new();
//! dense::encode(&body, &look, &mut d).unwrap();
//! // ...2 in a dense chunk: the head (100 << 4 | slot 4) alone.
//! assert_eq!(d.len(), 2);
//! let mut back = Vec::new();
//! dense::decode(&d, &look, &mut back).unwrap();
//! assert_eq!(back, body);
//! ```

use crate::schema::catalog as c;
use crate::schema::{FieldType, Schema};
use crate::varint::{self, Cursor, DecodeError};

/// A slot: a built-in event type and the encoded values of some of its
/// fields (catalog positions), which its records leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The event type id.
    pub id: u32,
    /// Catalog field position and the field's encoded bytes (one byte: a
    /// varint or zigzag below 128, or a bool), in field order.
    pub fixed: &'static [(usize, u8)],
}

/// Bits of the head that hold the slot.
pub const SLOT_BITS: u32 = 4;

/// Heads hold `dt << 4`: a chunk with a larger delta is written as a
/// plain `CHUNK` (292 years of 8 ns ticks: never in practice).
pub const MAX_DT: u64 = u64::MAX >> SLOT_BITS;

/// Slots 1 to 15 (index 0 here is slot 1), version 1.3. Normative: the
/// table in docs/format.md section 6.1 and `tools/rtdecode.py` repeat it.
/// For one type, the slots with more fixed fields come first: a writer
/// takes the first that matches.
pub const SLOTS: [Slot; 15] = [
    // Polls: a tokio worker's (no executor queue), nothing queued behind.
    Slot {
        id: c::task_poll_start::ID,
        fixed: &[
            (c::task_poll_start::QUEUE, 0),
            (c::task_poll_start::LOCAL_Q, 0),
        ],
    },
    Slot {
        id: c::task_poll_start::ID,
        fixed: &[(c::task_poll_start::QUEUE, 0)],
    },
    Slot {
        id: c::task_poll_start::ID,
        fixed: &[],
    },
    // A poll's end names the task its start named (task delta 0).
    Slot {
        id: c::task_poll_end::ID,
        fixed: &[(c::task_poll_end::TASK_ID, 0), (c::task_poll_end::READY, 0)],
    },
    Slot {
        id: c::task_poll_end::ID,
        fixed: &[(c::task_poll_end::TASK_ID, 0), (c::task_poll_end::READY, 1)],
    },
    Slot {
        id: c::task_poll_end::ID,
        fixed: &[],
    },
    // Wakes from outside any task (waker 0: timers, I/O, other threads).
    Slot {
        id: c::task_wake::ID,
        fixed: &[(c::task_wake::WAKER_TASK_ID, 0)],
    },
    Slot {
        id: c::task_wake::ID,
        fixed: &[],
    },
    // The next task id (delta +1, zigzag 2) spawned outside any task on
    // no executor queue.
    Slot {
        id: c::task_spawn::ID,
        fixed: &[
            (c::task_spawn::TASK_ID, 2),
            (c::task_spawn::PARENT_TASK_ID, 0),
            (c::task_spawn::QUEUE, 0),
        ],
    },
    Slot {
        id: c::task_spawn::ID,
        fixed: &[],
    },
    // A task ends where it was last polled (task delta 0).
    Slot {
        id: c::task_terminate::ID,
        fixed: &[(c::task_terminate::TASK_ID, 0)],
    },
    Slot {
        id: c::task_terminate::ID,
        fixed: &[],
    },
    // Workers park with nothing queued locally.
    Slot {
        id: c::worker_park::ID,
        fixed: &[(c::worker_park::LOCAL_Q, 0)],
    },
    Slot {
        id: c::worker_unpark::ID,
        fixed: &[],
    },
    Slot {
        id: c::cpu_sample::ID,
        fixed: &[],
    },
];

/// The slots of type `id` (their numbers, 1 to 15), most fixed first.
fn slots_of(id: u32) -> impl Iterator<Item = (u64, &'static Slot)> {
    SLOTS
        .iter()
        .enumerate()
        .filter(move |(_, s)| s.id == id)
        .map(|(i, s)| (i as u64 + 1, s))
}

/// Whether `schema` has, at each of `slot`'s fixed positions, the catalog
/// field (same name and type): a slot is only used, and only read, with
/// the built-in layout of its type.
fn fits(slot: &Slot, schema: &Schema) -> bool {
    let Some(b) = crate::schema::builtin(slot.id) else {
        return false;
    };
    slot.fixed.iter().all(|&(i, _)| {
        matches!((b.fields.get(i), schema.fields.get(i)), (Some(x), Some(y))
            if x.name == y.name && x.ty.code() == y.ty.code())
    })
}

/// The schema the records of slot `n` (1 to 15) are read with, given
/// `schema`, the file's schema of the slot's type (None: the file defines
/// none); `Err` says why the slot cannot stand for that type (no schema,
/// or one without the fields the slot fixes). Readers check it once per
/// chunk and slot: the schemas do not change within a chunk.
///
/// # Panics
///
/// When `n` is not 1 to 15 (a record's head gives 0 to 15; 0 is no slot).
///
/// ```
/// use runtrace_format::dense::{slot_schema, SLOTS};
/// use runtrace_format::schema::builtin_schemas;
/// let all = builtin_schemas();
/// let of = |id: u32| all.iter().find(|s| s.id == id);
/// assert!(slot_schema(1, of(SLOTS[0].id)).is_ok()); // task_poll_start's
/// let e = slot_schema(1, of(SLOTS[3].id)).unwrap_err(); // task_poll_end's
/// assert!(e.contains("does not have slot 1's fields"));
/// assert!(slot_schema(1, None).unwrap_err().contains("has no schema"));
/// ```
pub fn slot_schema(n: usize, schema: Option<&Schema>) -> Result<&Schema, String> {
    let slot = &SLOTS[n - 1];
    let s = schema.ok_or_else(|| format!("slot {n}'s event type {} has no schema", slot.id))?;
    if fits(slot, s) {
        Ok(s)
    } else {
        Err(format!(
            "the schema of type {} does not have slot {n}'s fields",
            slot.id
        ))
    }
}

/// Skips one field of type `ty` (as `chunk::walk` reads it).
fn skip(c: &mut Cursor<'_>, ty: FieldType) -> Result<(), DecodeError> {
    match ty {
        FieldType::U64
        | FieldType::U32
        | FieldType::U16
        | FieldType::U8
        | FieldType::I64
        | FieldType::I32
        | FieldType::Istr
        | FieldType::Loc
        | FieldType::Task => c.varint().map(|_| ()),
        FieldType::Bool => c.u8().map(|_| ()),
        FieldType::F64 => c.bytes(8).map(|_| ()),
        FieldType::Str => c.str().map(|_| ()),
        FieldType::Worker => Ok(()),
    }
}

/// Rewrites the records `body` of a `CHUNK` (section 6) as the records of
/// a `DCHUNK`, appended to `out`; `schema` gives each type's schema.
/// `Err` when `body` does not decode (a bug in the writer: the caller then
/// writes the plain chunk) or a delta is above [`MAX_DT`].
///
/// Not generic (`schema` is a `dyn Fn`): it is compiled, optimized, in this
/// crate, whatever the caller's build profile (the recorder's writer calls
/// it for every chunk).
pub fn encode<'s>(
    body: &[u8],
    schema: &dyn Fn(u32) -> Option<&'s Schema>,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let mut c = Cursor::new(body);
    // Field boundaries of the current record (start offsets, then end).
    let mut bounds: Vec<usize> = Vec::with_capacity(crate::MAX_FIELDS + 1);
    let mut usable: [Option<bool>; 15] = [None; 15];
    while c.pos() < body.len() {
        let start = c.pos();
        let tag = c.u8()?;
        let id = if tag == crate::TAG_ESCAPE {
            u32::try_from(c.varint()?)
                .map_err(|_| DecodeError::new(start, "type id out of range"))?
        } else {
            tag as u32
        };
        let dt = c.varint()?;
        if dt > MAX_DT {
            return Err(DecodeError::new(
                start,
                "timestamp delta too large for a head",
            ));
        }
        let fields_at = c.pos();
        if id == crate::SET_WORKER {
            c.varint()?;
            varint::put(out, dt << SLOT_BITS);
            varint::put(out, 0);
            out.extend_from_slice(&body[fields_at..c.pos()]);
            continue;
        }
        let s = schema(id)
            .ok_or_else(|| DecodeError::new(start, format!("event type {id} has no schema")))?;
        bounds.clear();
        for f in &s.fields {
            bounds.push(c.pos());
            skip(&mut c, f.ty)?;
        }
        bounds.push(c.pos());
        let field = |i: usize| &body[bounds[i]..bounds[i + 1]];
        let chosen = slots_of(id).find(|&(n, slot)| {
            // Whether the slot fits this type's schema, once per call
            // (the schemas do not change within a chunk).
            let k = n as usize - 1;
            let ok = *usable[k].get_or_insert_with(|| fits(slot, s));
            ok && slot
                .fixed
                .iter()
                .all(|&(i, v)| i < s.fields.len() && field(i) == [v])
        });
        match chosen {
            Some((n, slot)) => {
                varint::put(out, dt << SLOT_BITS | n);
                let mut fixed = slot.fixed.iter().map(|&(i, _)| i).peekable();
                for i in 0..s.fields.len() {
                    if fixed.peek() == Some(&i) {
                        fixed.next();
                        continue;
                    }
                    out.extend_from_slice(field(i));
                }
            }
            None => {
                varint::put(out, dt << SLOT_BITS);
                varint::put(out, id as u64);
                out.extend_from_slice(&body[fields_at..c.pos()]);
            }
        }
    }
    Ok(())
}

/// Expands the records `body` of a `DCHUNK` into the records of a `CHUNK`
/// (section 6), appended to `out`; `schema` gives each type's schema (the
/// file's definitions). `Err` names the offset in `body` of the record
/// that does not decode.
pub fn decode<'s>(
    body: &[u8],
    schema: &dyn Fn(u32) -> Option<&'s Schema>,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let mut c = Cursor::new(body);
    // Each slot's schema, looked up and checked to have the slot's fields
    // once per call (the schemas do not change within a chunk): a lookup
    // through `schema` per record was a tenth of expanding a chunk.
    let mut schemas: [Option<&'s Schema>; 15] = [None; 15];
    while c.pos() < body.len() {
        let start = c.pos();
        let at =
            |e: DecodeError| DecodeError::new(start, format!("record at +{start}: {}", e.what));
        let head = c.varint().map_err(at)?;
        let (dt, n) = (head >> SLOT_BITS, head & ((1 << SLOT_BITS) - 1));
        if n == 0 {
            let id = c.varint().map_err(at)?;
            let id = u32::try_from(id)
                .map_err(|_| at(DecodeError::new(start, "type id out of range")))?;
            put_tag(out, id);
            varint::put(out, dt);
            let fields_at = c.pos();
            if id == crate::SET_WORKER {
                c.varint().map_err(at)?;
            } else {
                let s = schema(id).ok_or_else(|| {
                    DecodeError::new(
                        start,
                        format!("record at +{start}: event type {id} has no schema"),
                    )
                })?;
                for f in &s.fields {
                    skip(&mut c, f.ty).map_err(at)?;
                }
            }
            out.extend_from_slice(&body[fields_at..c.pos()]);
            continue;
        }
        let k = n as usize - 1;
        let slot = &SLOTS[k];
        let s = match schemas[k] {
            Some(s) => s,
            None => {
                let s = slot_schema(n as usize, schema(slot.id)).map_err(|what| {
                    DecodeError::new(start, format!("record at +{start}: {what}"))
                })?;
                schemas[k] = Some(s);
                s
            }
        };
        put_tag(out, slot.id);
        varint::put(out, dt);
        // The fields between two fixed ones lie side by side in both
        // encodings: one copy per run of them, not one per field.
        let mut fixed = slot.fixed.iter();
        let mut next_fixed = fixed.next();
        let mut run = c.pos();
        for (i, f) in s.fields.iter().enumerate() {
            if let Some(&(fi, v)) = next_fixed {
                if fi == i {
                    out.extend_from_slice(&body[run..c.pos()]);
                    out.push(v);
                    next_fixed = fixed.next();
                    run = c.pos();
                    continue;
                }
            }
            skip(&mut c, f.ty).map_err(at)?;
        }
        out.extend_from_slice(&body[run..c.pos()]);
    }
    Ok(())
}

/// A record's tag (section 6: the id, or the escape and the id).
fn put_tag(out: &mut Vec<u8>, id: u32) {
    if id < crate::TAG_ESCAPE as u32 {
        out.push(id as u8);
    } else {
        out.push(crate::TAG_ESCAPE);
        varint::put(out, id as u64);
    }
}
