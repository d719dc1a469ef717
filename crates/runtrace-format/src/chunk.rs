//! CHUNK payloads: the chunk header, and a walker over event records.
//!
//! The walker is the reader's (it resolves values); [`scan`] is the
//! recorder's writer thread's, which only counts events and tracks
//! registers when it takes part of a buffer that is still being written.
//!
//! ```
//! use runtrace_format::chunk::{walk, ChunkState, RawValue};
//! use runtrace_format::schema::{builtin, builtin_schemas, ids};
//! let schemas = builtin_schemas();
//! // task_terminate: tag, dt, task (zigzag delta 5 from register 0)
//! let bytes = [ids::TASK_TERMINATE as u8, 3, 10];
//! let mut st = ChunkState { ticks: 100, task_reg: 0, worker_reg: u32::MAX };
//! let mut seen = vec![];
//! walk(&bytes, &mut st, |id| schemas.iter().find(|s| s.id == id), |ev| {
//!     seen.push((ev.ticks, ev.values.to_vec()));
//!     Ok(())
//! }).unwrap();
//! assert_eq!(seen, vec![(103, vec![RawValue::Task(5)])]);
//! ```

use crate::schema::{FieldType, Schema};
use crate::varint::{self, Cursor, DecodeError};

/// The fixed part of a CHUNK payload (docs/format.md section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkHeader {
    /// OS thread id.
    pub tid: u64,
    /// Initial registers.
    pub state: ChunkState,
    /// Number of events (`set_worker` records are not counted).
    pub count: u64,
}

/// The registers a chunk's decoding carries from event to event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkState {
    /// Timestamp of the previous event (trace ticks).
    pub ticks: u64,
    /// Last task id seen in a `task` field.
    pub task_reg: u64,
    /// Current worker index (`NO_WORKER`: none).
    pub worker_reg: u32,
}

impl Default for ChunkState {
    fn default() -> Self {
        ChunkState {
            ticks: 0,
            task_reg: 0,
            worker_reg: crate::NO_WORKER,
        }
    }
}

impl ChunkHeader {
    /// Appends the header part of a CHUNK payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        varint::put(out, self.tid);
        varint::put(out, (self.state.worker_reg as u64 + 1) & 0xffff_ffff);
        varint::put(out, self.state.task_reg);
        varint::put(out, self.state.ticks);
        varint::put(out, self.count);
    }

    /// Reads the header part of a CHUNK payload.
    pub fn decode(c: &mut Cursor<'_>) -> Result<ChunkHeader, DecodeError> {
        let tid = c.varint()?;
        let at = c.pos();
        let w = c.varint()?;
        let worker_reg =
            worker_reg(w).ok_or_else(|| DecodeError::new(at, "worker out of range"))?;
        let task_reg = c.varint()?;
        let ticks = c.varint()?;
        let count = c.varint()?;
        Ok(ChunkHeader {
            tid,
            state: ChunkState {
                ticks,
                task_reg,
                worker_reg,
            },
            count,
        })
    }
}

/// The worker register a wire value sets (a chunk header's worker, a
/// `set_worker` record): 0 is no worker ([`crate::NO_WORKER`]), `w + 1`
/// is worker `w`; `None` when the value is out of range.
///
/// ```
/// use runtrace_format::chunk::worker_reg;
/// assert_eq!(worker_reg(0), Some(runtrace_format::NO_WORKER));
/// assert_eq!(worker_reg(3), Some(2));
/// assert_eq!(worker_reg(1 << 40), None);
/// ```
#[inline]
pub fn worker_reg(wire: u64) -> Option<u32> {
    match wire {
        0 => Some(crate::NO_WORKER),
        w if w <= u32::MAX as u64 => Some((w - 1) as u32),
        _ => None,
    }
}

/// A field value as it sits in the chunk, before ids are resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RawValue<'a> {
    /// Unsigned integer.
    U(u64),
    /// Signed integer.
    I(i64),
    /// Boolean.
    Bool(bool),
    /// Float.
    F(f64),
    /// Inline string.
    Str(&'a str),
    /// Interned string id.
    Istr(u64),
    /// Spawn location id.
    Loc(u64),
    /// Task id (register already applied).
    Task(u64),
    /// Worker index (`NO_WORKER`: none).
    Worker(u32),
}

/// One event record as the walker sees it.
#[derive(Debug)]
pub struct RawEvent<'s, 'v, 'a> {
    /// Timestamp (trace ticks).
    pub ticks: u64,
    /// Offset of the record within the walked bytes.
    pub offset: usize,
    /// The record's schema.
    pub schema: &'s Schema,
    /// Field values in schema order.
    pub values: &'v [RawValue<'a>],
}

/// Walks the event records in `bytes`, starting from the registers in
/// `state` and leaving them as they are after the last record. Calls `f` for
/// every event (not for `set_worker` records). Returns the number of events
/// walked (`set_worker` records are not events and are not counted).
///
/// `schema` looks up an event type id. An error carries the offset of the
/// offending record within `bytes`; `state` then holds the registers after
/// the last good record.
pub fn walk<'s, 'a, F, S>(
    bytes: &'a [u8],
    state: &mut ChunkState,
    schema: S,
    f: F,
) -> Result<u64, DecodeError>
where
    S: Fn(u32) -> Option<&'s Schema>,
    F: FnMut(&RawEvent<'s, '_, 'a>) -> Result<(), DecodeError>,
{
    walk_from(bytes, 0, state, schema, f)
}

/// [`walk`] resumed at record offset `from` of `bytes`, with `state` the
/// registers after the record before it (what `walk` leaves in `state`
/// when `f` stops it with an error at that record's
/// [`offset`](RawEvent::offset)). Offsets stay relative to `bytes`, so
/// errors read the same as from one whole walk. This is how a reader
/// decodes a huge chunk a bounded batch at a time.
///
/// ```
/// use runtrace_format::chunk::{walk_from, ChunkState};
/// let st = &mut ChunkState { ticks: 0, task_reg: 0, worker_reg: u32::MAX };
/// assert_eq!(walk_from(&[], 0, st, |_| None, |_| Ok(())).unwrap(), 0);
/// ```
pub fn walk_from<'s, 'a, F, S>(
    bytes: &'a [u8],
    from: usize,
    state: &mut ChunkState,
    schema: S,
    mut f: F,
) -> Result<u64, DecodeError>
where
    S: Fn(u32) -> Option<&'s Schema>,
    F: FnMut(&RawEvent<'s, '_, 'a>) -> Result<(), DecodeError>,
{
    let mut c = Cursor::new(bytes);
    c.bytes(from.min(bytes.len()))?;
    let mut values: Vec<RawValue<'a>> = Vec::with_capacity(8);
    let mut n = 0u64;
    while !c.is_empty() {
        let start = c.pos();
        let at = |e: DecodeError| DecodeError::new(start, format!("event at +{start}: {}", e.what));
        let tag = c.u8().map_err(at)?;
        let id = if tag == crate::TAG_ESCAPE {
            let v = c.varint().map_err(at)?;
            u32::try_from(v)
                .map_err(|_| DecodeError::new(start, format!("type id {v} out of range")))?
        } else {
            tag as u32
        };
        let dt = c.varint().map_err(at)?;
        let ticks = state.ticks.wrapping_add(dt);
        if id == crate::SET_WORKER {
            let w = c.varint().map_err(at)?;
            state.worker_reg = worker_reg(w)
                .ok_or_else(|| DecodeError::new(start, "set_worker value out of range"))?;
            state.ticks = ticks;
            continue;
        }
        let sch = schema(id)
            .ok_or_else(|| DecodeError::new(start, format!("event type {id} has no schema")))?;
        values.clear();
        let mut task_reg = state.task_reg;
        for fd in &sch.fields {
            let v = match fd.ty {
                FieldType::U64 | FieldType::U32 | FieldType::U16 | FieldType::U8 => {
                    RawValue::U(c.varint().map_err(at)?)
                }
                FieldType::I64 | FieldType::I32 => {
                    RawValue::I(varint::unzigzag(c.varint().map_err(at)?))
                }
                FieldType::Bool => match c.u8().map_err(at)? {
                    0 => RawValue::Bool(false),
                    1 => RawValue::Bool(true),
                    b => return Err(DecodeError::new(start, format!("bool byte {b}"))),
                },
                FieldType::F64 => {
                    let b = c.bytes(8).map_err(at)?;
                    RawValue::F(f64::from_le_bytes(b.try_into().unwrap()))
                }
                FieldType::Str => RawValue::Str(c.str().map_err(at)?),
                FieldType::Istr => RawValue::Istr(c.varint().map_err(at)?),
                FieldType::Loc => RawValue::Loc(c.varint().map_err(at)?),
                FieldType::Task => {
                    let d = varint::unzigzag(c.varint().map_err(at)?);
                    task_reg = task_reg.wrapping_add(d as u64);
                    RawValue::Task(task_reg)
                }
                FieldType::Worker => RawValue::Worker(state.worker_reg),
            };
            values.push(v);
        }
        f(&RawEvent {
            ticks,
            offset: start,
            schema: sch,
            values: &values,
        })?;
        state.ticks = ticks;
        state.task_reg = task_reg;
        n += 1;
    }
    Ok(n)
}

/// Counts the event records in `bytes` and leaves `state` as it is after
/// the last one, like [`walk`] without building any value: the recorder's
/// writer thread calls it on every partly written buffer it takes (most of
/// what it takes on a server), so it costs a few instructions per field.
/// The walker's decoding of every value cost the HTTP server benchmark
/// ~240 instructions per event, about 1% of its CPU (callgrind and `perf`,
/// docs/recorder.md).
///
/// It checks what the counting needs: every type id has a schema, and
/// every varint, inline string and fixed-size field ends inside `bytes`.
/// It does not check a bool's byte or a string's UTF-8 (readers do, when
/// they decode the values). On an error, `state` holds the registers after
/// the last whole record, and the error the record's offset.
///
/// ```
/// use runtrace_format::chunk::{scan, ChunkState};
/// use runtrace_format::schema::{builtin_schemas, ids};
/// let schemas = builtin_schemas();
/// // task_terminate: tag, dt, task (zigzag delta 5 from register 0)
/// let bytes = [ids::TASK_TERMINATE as u8, 3, 10];
/// let mut st = ChunkState { ticks: 100, task_reg: 0, worker_reg: u32::MAX };
/// let n = scan(&bytes, &mut st, |id| schemas.iter().find(|s| s.id == id)).unwrap();
/// assert_eq!((n, st.ticks, st.task_reg), (1, 103, 5));
/// ```
pub fn scan<'s, S>(bytes: &[u8], state: &mut ChunkState, schema: S) -> Result<u64, DecodeError>
where
    S: Fn(u32) -> Option<&'s Schema>,
{
    let mut pos = 0;
    let mut n = 0u64;
    while pos < bytes.len() {
        let start = pos;
        let bad = |what: &str| DecodeError::new(start, format!("event at +{start}: {what}"));
        let tag = bytes[pos];
        pos += 1;
        let id = if tag == crate::TAG_ESCAPE {
            let (v, p) = read_varint(bytes, pos).ok_or_else(|| bad("bad type id varint"))?;
            pos = p;
            u32::try_from(v).map_err(|_| bad("type id out of range"))?
        } else {
            tag as u32
        };
        let (dt, p) = read_varint(bytes, pos).ok_or_else(|| bad("bad time delta varint"))?;
        pos = p;
        let ticks = state.ticks.wrapping_add(dt);
        if id == crate::SET_WORKER {
            let (w, p) = read_varint(bytes, pos).ok_or_else(|| bad("bad set_worker varint"))?;
            state.worker_reg = worker_reg(w).ok_or_else(|| bad("set_worker value out of range"))?;
            pos = p;
            state.ticks = ticks;
            continue;
        }
        let sch = schema(id).ok_or_else(|| bad(&format!("event type {id} has no schema")))?;
        let mut task_reg = state.task_reg;
        for fd in &sch.fields {
            pos = match fd.ty {
                FieldType::Task => {
                    let (d, p) = read_varint(bytes, pos).ok_or_else(|| bad("bad task varint"))?;
                    task_reg = task_reg.wrapping_add(varint::unzigzag(d) as u64);
                    p
                }
                FieldType::Worker => pos,
                FieldType::Bool => pos + 1,
                FieldType::F64 => pos + 8,
                FieldType::Str => {
                    let (len, p) =
                        read_varint(bytes, pos).ok_or_else(|| bad("bad string length"))?;
                    p.saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
                }
                _ => skip_varint(bytes, pos).ok_or_else(|| bad("bad varint"))?,
            };
            if pos > bytes.len() {
                return Err(bad("record runs past the end"));
            }
        }
        state.ticks = ticks;
        state.task_reg = task_reg;
        n += 1;
    }
    Ok(n)
}

/// The time of the first record in `bytes` (an event or a `set_worker`
/// record) decoded from registers `state`, reading only its tag and time
/// delta: the recorder's writer uses it for the earliest event it leaves
/// in a buffer. `None` when `bytes` is empty or that record's header is
/// cut or malformed.
///
/// ```
/// use runtrace_format::chunk::{first_ticks, ChunkState};
/// use runtrace_format::schema::ids;
/// let st = ChunkState { ticks: 100, task_reg: 0, worker_reg: u32::MAX };
/// let bytes = [ids::TASK_TERMINATE as u8, 3, 10];
/// assert_eq!(first_ticks(&bytes, &st), Some(103));
/// assert_eq!(first_ticks(&[], &st), None);
/// ```
pub fn first_ticks(bytes: &[u8], state: &ChunkState) -> Option<u64> {
    let mut pos = 1;
    if *bytes.first()? == crate::TAG_ESCAPE {
        pos = read_varint(bytes, pos)?.1;
    }
    let (dt, _) = read_varint(bytes, pos)?;
    Some(state.ticks.wrapping_add(dt))
}

/// The varint at `bytes[pos..]` and the position after it; `None` if it
/// runs past the end or past 10 bytes.
#[inline(always)]
fn read_varint(bytes: &[u8], pos: usize) -> Option<(u64, usize)> {
    let b = *bytes.get(pos)?;
    if b < 0x80 {
        return Some((b as u64, pos + 1));
    }
    let mut v = (b & 0x7f) as u64;
    for i in 1..varint::MAX_LEN {
        let b = *bytes.get(pos + i)?;
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Some((v, pos + i + 1));
        }
    }
    None
}

/// The position after the varint at `bytes[pos..]`; `None` if it runs
/// past the end or past 10 bytes.
#[inline(always)]
fn skip_varint(bytes: &[u8], pos: usize) -> Option<usize> {
    let end = bytes.len().min(pos + varint::MAX_LEN);
    (pos..end).find(|&i| bytes[i] < 0x80).map(|i| i + 1)
}
