//! Decoding: chunk bodies to compact [`Ev`]s without building `Event`s,
//! filling the [`Model`]'s locations, queues and names as ids resolve.
//!
//! This is [`runtrace_format::chunk::walk`] specialised for the analysis:
//! the same rules and error messages (a test checks them against `walk`),
//! but field values go to a fixed array instead of a `Vec<RawValue>`, and
//! only the events a pass reads are kept ([`super::roles`]).

use super::order::{Orderer, ThreadQueue};
use super::roles::Plans;
use crate::event::{kind, Ev};
use crate::model::{Location, Model, UNKNOWN_LOC};
use runtrace_format::chunk::ChunkState;
use runtrace_format::reader::{RawChunk, Tables};
use runtrace_format::schema::FieldType;
use runtrace_format::varint::{self, Cursor, DecodeError};
use std::collections::HashMap;
use std::sync::Arc;

/// Per-file caches (ids are per file: every file repeats its definitions).
#[derive(Default)]
pub(crate) struct FileCache {
    pub plans: Plans,
    ids: Ids,
    /// Chunks decoded.
    epoch: u64,
}

/// Resolved ids.
#[derive(Default)]
struct Ids {
    /// Location index by location id (`u32::MAX`: not cached).
    locs: Vec<u32>,
    big_locs: HashMap<u64, u32>,
    /// Defined string ids (checked once each).
    strings: Vec<bool>,
    /// Name index by string id (`u32::MAX`: not cached).
    app: Vec<u32>,
    big_app: HashMap<u64, u32>,
}

/// Spawn locations, named queues and application names, interned across
/// files by text (indexes into the [`Model`]).
#[derive(Default)]
pub(crate) struct Names {
    loc_by_text: HashMap<Arc<str>, u32>,
    queue_by_text: HashMap<String, u32>,
    app_by_text: HashMap<Arc<str>, u32>,
}

/// A read position in a chunk body; the same checks and messages as
/// `runtrace_format::varint::Cursor` (its slow paths are `Cursor`'s), with
/// varints of up to three bytes inlined.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cur<'_> {
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, DecodeError> {
        if let Some(&b0) = self.b.get(self.pos) {
            if b0 < 0x80 {
                self.pos += 1;
                return Ok(b0 as u64);
            }
            if let Some(&b1) = self.b.get(self.pos + 1) {
                if b1 < 0x80 {
                    self.pos += 2;
                    return Ok((b0 & 0x7f) as u64 | (b1 as u64) << 7);
                }
                if let Some(&b2) = self.b.get(self.pos + 2) {
                    if b2 < 0x80 {
                        self.pos += 3;
                        return Ok((b0 & 0x7f) as u64
                            | ((b1 & 0x7f) as u64) << 7
                            | (b2 as u64) << 14);
                    }
                }
            }
        }
        self.slow(|c| c.varint())
    }

    #[cold]
    fn slow<T>(
        &mut self,
        f: impl FnOnce(&mut Cursor<'_>) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let mut c = Cursor::new(&self.b[self.pos..]);
        match f(&mut c) {
            Ok(v) => {
                self.pos += c.pos();
                Ok(v)
            }
            Err(e) => Err(DecodeError::new(self.pos + e.pos, e.what)),
        }
    }

    fn skip_f64(&mut self) -> Result<(), DecodeError> {
        self.slow(|c| c.bytes(8).map(|_| ()))
    }

    fn skip_str(&mut self) -> Result<(), DecodeError> {
        self.slow(|c| c.str().map(|_| ()))
    }
}

/// Decodes one chunk, appending the events of interest to its thread's
/// queue. Returns the number of events decoded and the damage found, if any
/// (the events before it are kept, as the reader keeps them).
///
/// This is [`runtrace_format::chunk::walk`] specialised for the analysis:
/// the same rules and error messages (a test checks them against `walk`),
/// but field values go to a fixed array instead of a `Vec<RawValue>`, and
/// only the built-in events the analysis uses are kept.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_chunk(
    c: &RawChunk<'_>,
    thread: u32,
    cache: &mut FileCache,
    names: &mut Names,
    model: &mut Model,
    proc: u32,
    order: &mut Orderer,
) -> (u64, Option<runtrace_format::ReadError>) {
    let mut state = c.header.state;
    let out = order.queue(thread);
    let before = out.len;
    let res = decode_events(
        c.body, c.tables, &mut state, cache, names, model, thread, out,
    );
    let n = (out.len - before) as u64;
    order.pending += n as usize;
    let (walked, lo, hi) = match &res {
        Ok(x) | Err((x, _)) => *x,
    };
    if walked > 0 {
        let p = &mut model.procs[proc as usize];
        p.first_ticks = p.first_ticks.min(lo);
        p.last_ticks = p.last_ticks.max(hi);
        p.events += walked;
    }
    let err = match res {
        Ok((k, _, _)) if k != c.header.count => Some(c.error(
            0,
            &format!("chunk says {} events but holds {k}", c.header.count),
        )),
        Ok(_) => None,
        Err((_, d)) => Some(c.error(d.pos, &d.what)),
    };
    (walked, err)
}

type Walked = (u64, u64, u64);

/// The event loop of [`decode_chunk`]: returns (events, first event's
/// ticks, last event's ticks), with the damage if any.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) fn decode_events(
    body: &[u8],
    tables: &Tables,
    state: &mut ChunkState,
    cache: &mut FileCache,
    names: &mut Names,
    model: &mut Model,
    thread: u32,
    out: &mut ThreadQueue,
) -> Result<Walked, (Walked, DecodeError)> {
    cache.epoch += 1;
    let epoch = cache.epoch;
    let FileCache {
        plans, ids: cache, ..
    } = cache;
    let mut c = Cur { b: body, pos: 0 };
    let mut vals = [0u64; runtrace_format::MAX_FIELDS];
    let (mut n, mut lo, mut hi) = (0u64, u64::MAX, 0u64);
    // The registers live in locals (not behind `state`) in the loop.
    let mut st = *state;
    macro_rules! fail {
        ($e:expr) => {{
            *state = st;
            return Err(((n, lo, hi), $e));
        }};
    }
    while c.pos < body.len() {
        let start = c.pos;
        let at = |e: DecodeError| DecodeError::new(start, format!("event at +{start}: {}", e.what));
        macro_rules! get {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(x) => fail!(at(x)),
                }
            };
        }
        let tag = body[c.pos];
        c.pos += 1;
        let id = if tag == runtrace_format::TAG_ESCAPE {
            let v = get!(c.varint());
            match u32::try_from(v) {
                Ok(v) => v,
                Err(_) => fail!(DecodeError::new(start, format!("type id {v} out of range"))),
            }
        } else {
            tag as u32
        };
        let dt = get!(c.varint());
        let ticks = st.ticks.wrapping_add(dt);
        if id == runtrace_format::SET_WORKER {
            let w = get!(c.varint());
            if w > u32::MAX as u64 {
                fail!(DecodeError::new(start, "set_worker value out of range"));
            }
            st.ticks = ticks;
            st.worker_reg = if w == 0 {
                runtrace_format::NO_WORKER
            } else {
                (w - 1) as u32
            };
            continue;
        }
        let Some(plan) = plans.plan(id, tables, epoch) else {
            fail!(DecodeError::new(
                start,
                format!("event type {id} has no schema")
            ));
        };
        let mut task_reg = st.task_reg;
        if plan.fast {
            // Built-in layouts: task first, then by role.
            let z = get!(c.varint());
            task_reg = task_reg.wrapping_add(varint::unzigzag(z) as u64);
            vals[0] = task_reg;
            // The common events go straight to the queue.
            macro_rules! done {
                ($kind:expr, $a:expr, $flag:expr) => {{
                    out.push(Ev {
                        ticks,
                        x: task_reg,
                        a: $a,
                        thread,
                        worker: st.worker_reg,
                        kind: $kind,
                        flag: $flag,
                    });
                    st.ticks = ticks;
                    st.task_reg = task_reg;
                    if n == 0 {
                        lo = ticks;
                    }
                    n += 1;
                    hi = ticks;
                    continue;
                }};
            }
            match plan.role.kind {
                kind::POLL_START => {
                    let q = get!(c.varint());
                    let local_q = get!(c.varint());
                    if q != 0 {
                        if let Err(x) = check_string(cache, tables, q, start) {
                            fail!(x);
                        }
                    }
                    done!(
                        kind::POLL_START,
                        local_q.min(u32::MAX as u64) as u32,
                        (q != 0) as u8
                    );
                }
                kind::POLL_END => {
                    let ready = match c.b.get(c.pos) {
                        Some(&b @ (0 | 1)) => {
                            c.pos += 1;
                            b
                        }
                        Some(&b) => fail!(DecodeError::new(start, format!("bool byte {b}"))),
                        None => fail!(at(DecodeError::new(c.pos, "unexpected end of data"))),
                    };
                    done!(kind::POLL_END, 0, ready);
                }
                kind::WAKE => {
                    get!(c.varint()); // waker_task_id
                    done!(kind::WAKE, 0, 0);
                }
                kind::TERMINATE => done!(kind::TERMINATE, 0, 0),
                kind::SPAWN => {
                    vals[1] = get!(c.varint());
                    vals[2] = get!(c.varint());
                    vals[3] = get!(c.varint());
                }
                _ => {}
            }
        } else {
            for (i, ty) in plan.types.iter().enumerate() {
                let v = match ty {
                    FieldType::U64
                    | FieldType::U32
                    | FieldType::U16
                    | FieldType::U8
                    | FieldType::I64
                    | FieldType::I32
                    | FieldType::Istr
                    | FieldType::Loc => c.varint().map_err(at),
                    FieldType::Task => c.varint().map_err(at).map(|z| {
                        task_reg = task_reg.wrapping_add(varint::unzigzag(z) as u64);
                        task_reg
                    }),
                    FieldType::Worker => Ok(st.worker_reg as u64),
                    FieldType::Bool => match c.b.get(c.pos) {
                        Some(&b @ (0 | 1)) => {
                            c.pos += 1;
                            Ok(b as u64)
                        }
                        Some(&b) => Err(DecodeError::new(start, format!("bool byte {b}"))),
                        None => Err(at(DecodeError::new(c.pos, "unexpected end of data"))),
                    },
                    FieldType::F64 => c.skip_f64().map(|_| 0).map_err(at),
                    FieldType::Str => c.skip_str().map(|_| 0).map_err(at),
                };
                match v {
                    Ok(v) => vals[i] = v,
                    Err(x) => fail!(x),
                }
            }
        }
        // Other layouts: check every id in field order, as the reader
        // does (section 7: an undefined id is corruption).
        if !plan.fast {
            for (i, ty) in plan.types.iter().enumerate() {
                let r = match ty {
                    FieldType::Istr if vals[i] != 0 => check_string(cache, tables, vals[i], start),
                    FieldType::Loc if vals[i] != 0 => {
                        resolve_loc(cache, names, model, tables, vals[i], start).map(|_| ())
                    }
                    _ => Ok(()),
                };
                if let Err(x) = r {
                    fail!(x);
                }
            }
        }
        let k = plan.role.kind;
        let f = plan.role.f;
        let g = |i: usize| vals[f[i] as usize];
        let mut push = |kind: u8, x: u64, a: u64, worker: u64, flag: u8| {
            out.push(Ev {
                ticks,
                x,
                a: a.min(u32::MAX as u64) as u32,
                thread,
                worker: worker as u32,
                kind,
                flag,
            })
        };
        // Packing: the table in `event::Ev`'s doc; `g(i)` is the i-th field
        // `roles::wanted` lists for the kind.
        match k {
            0 => {}
            kind::POLL_START => {
                let q = g(2);
                if q != 0 {
                    if let Err(x) = check_string(cache, tables, q, start) {
                        fail!(x);
                    }
                }
                push(k, g(0), g(3), g(1), (q != 0) as u8);
            }
            kind::POLL_END => push(k, g(0), 0, g(1), g(2) as u8),
            kind::WAKE => push(k, g(0), 0, g(1), 0),
            kind::SPAWN => {
                // Ids are checked in field order (the built-in layout has
                // the location first), as the reader resolves them.
                let l = match resolve_loc(cache, names, model, tables, g(1), start) {
                    Ok(l) => l,
                    Err(x) => fail!(x),
                };
                let q = g(2);
                if q != 0 {
                    if let Err(x) = check_string(cache, tables, q, start) {
                        fail!(x);
                    }
                }
                push(k, g(0), l as u64, 0, 0);
            }
            kind::TERMINATE => push(k, g(0), 0, 0, 0),
            kind::PARK => push(k, 0, g(1), g(0), 0),
            kind::UNPARK => push(k, g(1), 0, g(0), 0),
            kind::QUEUE_SAMPLE => {
                let q = g(1);
                let qi = if q == 0 {
                    u32::MAX
                } else {
                    let Some(text) = tables.string(q) else {
                        fail!(undefined("string", q, start));
                    };
                    let next = model.queues.len() as u32;
                    let qi = *names.queue_by_text.entry(text.to_string()).or_insert(next);
                    if qi == next {
                        model.queues.push(text.to_string());
                    }
                    qi
                };
                push(k, g(2), g(0), qi as u64, 0);
            }
            kind::WORKER_START | kind::WORKER_STOP => push(k, 0, g(1), g(0), 0),
            _ => {
                // Application events. The name (queue, lock, op, role) goes
                // in `worker`, which these events do not have.
                let name = match resolve_app(cache, names, model, tables, g(0), start) {
                    Ok(n) => n as u64,
                    Err(x) => fail!(x),
                };
                match k {
                    kind::LOCK_WAIT | kind::LOCK_HOLD | kind::PROCESSING_END => {
                        push(k, g(1), 0, name, g(2) as u8)
                    }
                    kind::ENQUEUE | kind::DEQUEUE | kind::QUEUE_SNAPSHOT => {
                        push(k, g(1), g(2), name, 0)
                    }
                    kind::ITEM_DROPPED => {
                        let cause = match resolve_app(cache, names, model, tables, g(2), start) {
                            Ok(n) => n as u64,
                            Err(x) => fail!(x),
                        };
                        push(k, cause, g(1), name, 0)
                    }
                    kind::BACKLOG_TRIGGER => {
                        let reason = match resolve_app(cache, names, model, tables, g(3), start) {
                            Ok(n) => n as u64,
                            Err(x) => fail!(x),
                        };
                        // Rare: the growth rate and reason go to the side
                        // table, `x` is their index.
                        // (The generic decoder leaves i64 fields zigzagged.)
                        let growth = varint::unzigzag(g(2)) as u64;
                        let side = model.side(&[growth, reason]);
                        push(k, side, g(1), name, 0)
                    }
                    kind::IO => {
                        let bytes = g(1);
                        if bytes < u32::MAX as u64 {
                            push(k, g(2), bytes, name, 0)
                        } else {
                            // Over 4 GiB in one operation: exact, in the
                            // side table (flag 1: `a` is its index).
                            let side = model.side(&[bytes]);
                            push(k, g(2), side, name, 1)
                        }
                    }
                    _ => push(k, g(1), 0, name, 0), // HEARTBEAT
                }
            }
        }
        st.ticks = ticks;
        st.task_reg = task_reg;
        if n == 0 {
            lo = ticks;
        }
        n += 1;
        hi = ticks;
    }
    *state = st;
    Ok((n, lo, hi))
}

pub(crate) fn undefined(what: &str, id: u64, at: usize) -> DecodeError {
    DecodeError::new(
        at,
        format!("event at +{at}: {what} id {id} was never defined"),
    )
}

#[inline]
fn check_string(cache: &mut Ids, tables: &Tables, id: u64, at: usize) -> Result<(), DecodeError> {
    if (id as usize) < cache.strings.len() && cache.strings[id as usize] {
        return Ok(());
    }
    if tables.string(id).is_none() {
        return Err(undefined("string", id, at));
    }
    if id < 1 << 16 {
        if id as usize >= cache.strings.len() {
            cache.strings.resize(id as usize + 1, false);
        }
        cache.strings[id as usize] = true;
    }
    Ok(())
}

/// The [`Model::names`] index of string `id` (0: the empty string), interned
/// across files by text.
fn resolve_app(
    cache: &mut Ids,
    names: &mut Names,
    model: &mut Model,
    tables: &Tables,
    id: u64,
    at: usize,
) -> Result<u32, DecodeError> {
    if id == 0 {
        // The empty string: `Model::names[0]`.
        return Ok(0);
    }
    if let Some(&n) = cache.app.get(id as usize) {
        if n != u32::MAX {
            return Ok(n);
        }
    } else if let Some(&n) = cache.big_app.get(&id) {
        return Ok(n);
    }
    let text: Arc<str> = match tables.string(id) {
        Some(t) => t.clone(),
        None => return Err(undefined("string", id, at)),
    };
    let n = if text.is_empty() {
        0
    } else {
        let next = model.names.len() as u32;
        let n = *names.app_by_text.entry(text.clone()).or_insert(next);
        if n == next {
            model.names.push(text);
        }
        n
    };
    if id < 1 << 16 {
        if id as usize >= cache.app.len() {
            cache.app.resize(id as usize + 1, u32::MAX);
        }
        cache.app[id as usize] = n;
    } else {
        cache.big_app.insert(id, n);
    }
    Ok(n)
}

#[allow(clippy::too_many_arguments)]
fn resolve_loc(
    cache: &mut Ids,
    names: &mut Names,
    model: &mut Model,
    tables: &Tables,
    id: u64,
    at: usize,
) -> Result<u32, DecodeError> {
    if id == 0 {
        return Ok(UNKNOWN_LOC);
    }
    if let Some(&l) = cache.locs.get(id as usize) {
        if l != u32::MAX {
            return Ok(l);
        }
    } else if let Some(&l) = cache.big_locs.get(&id) {
        return Ok(l);
    }
    let Some(text) = tables.location(id) else {
        return Err(undefined("location", id, at));
    };
    let next = model.locs.len() as u32;
    let l = *names.loc_by_text.entry(text.clone()).or_insert(next);
    if l == next {
        model.locs.push(Location {
            text: text.clone(),
            trace_id: id,
        });
    }
    if id < 1 << 16 {
        if id as usize >= cache.locs.len() {
            cache.locs.resize(id as usize + 1, u32::MAX);
        }
        cache.locs[id as usize] = l;
    } else {
        cache.big_locs.insert(id, l);
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    //! The specialised decoder against `runtrace_format::chunk::walk` (plus
    //! the reader's id checks): same events, same damage at the same place
    //! with the same message, on random records and garbage.

    use super::*;
    use crate::event::kind;
    use crate::model::Process;
    use crate::pass::Wants;
    use proptest::prelude::*;
    use runtrace_format::chunk::{walk, ChunkHeader, RawValue};
    use runtrace_format::frame::{self, FrameType, Header, LocationDef};
    use runtrace_format::reader::RawRecord;
    use runtrace_format::schema::Schema;
    use runtrace_format::schema::{builtin_schemas, ids, SchemaField};
    use runtrace_format::FileReader;

    #[derive(Debug, Clone)]
    enum Rec {
        PollStart(i64, u64, u64),
        PollEnd(i64, u8),
        Wake(i64, u64),
        Spawn(i64, u64, u64),
        Terminate(i64),
        Park(u64),
        Unpark(u64),
        Sample(u64, u64),
        Select(u64),
        SetWorker(u64),
        /// The application event: u64, str, f64, bool, loc, i64, task.
        App(u64, String, u8, u64, i64),
        Escaped(i64),
        Garbage(Vec<u8>),
        /// `enqueue` (queue string id, seqno, size) and `backlog_trigger`
        /// (queue, size, growth, reason): `runtrace backlog`'s events.
        Enqueue(u64, u64, u64),
        Trigger(u64, u64, i64, u64),
    }

    fn rec() -> impl Strategy<Value = Rec> {
        let d = -3i64..4;
        let id = 0u64..4; // 3 is never defined
        prop_oneof![
            4 => (d.clone(), id.clone(), 0u64..300).prop_map(|(a, b, c)| Rec::PollStart(a, b, c)),
            4 => (d.clone(), 0u8..3).prop_map(|(a, b)| Rec::PollEnd(a, b)),
            2 => (d.clone(), 0u64..9).prop_map(|(a, b)| Rec::Wake(a, b)),
            2 => (d.clone(), id.clone(), id.clone()).prop_map(|(a, b, c)| Rec::Spawn(a, b, c)),
            1 => d.clone().prop_map(Rec::Terminate),
            1 => (0u64..50).prop_map(Rec::Park),
            1 => any::<u64>().prop_map(Rec::Unpark),
            1 => (0u64..9, id.clone()).prop_map(|(a, b)| Rec::Sample(a, b)),
            1 => id.clone().prop_map(Rec::Select),
            1 => (0u64..5).prop_map(Rec::SetWorker),
            1 => (any::<u64>(), "[a-z]{0,5}", 0u8..3, id.clone(), d.clone())
                .prop_map(|(a, b, c, l, t)| Rec::App(a, b, c, l, t)),
            1 => d.clone().prop_map(Rec::Escaped),
            1 => (id.clone(), any::<u64>(), 0u64..1000).prop_map(|(a, b, c)| Rec::Enqueue(a, b, c)),
            1 => (id.clone(), 0u64..1000, any::<i64>(), id.clone())
                .prop_map(|(a, b, c, r)| Rec::Trigger(a, b, c, r)),
            1 => proptest::collection::vec(any::<u8>(), 1..6).prop_map(Rec::Garbage),
        ]
    }

    fn encode(recs: &[Rec], dts: &[u64]) -> Vec<u8> {
        use runtrace_format::varint::{put, put_str, zigzag};
        let mut b = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            let dt = dts[i % dts.len()];
            let ev = |id: u32, b: &mut Vec<u8>| {
                b.push(id as u8);
                put(b, dt);
            };
            match r {
                Rec::PollStart(t, q, lq) => {
                    ev(ids::TASK_POLL_START, &mut b);
                    put(&mut b, zigzag(*t));
                    put(&mut b, *q);
                    put(&mut b, *lq);
                }
                Rec::PollEnd(t, r) => {
                    ev(ids::TASK_POLL_END, &mut b);
                    put(&mut b, zigzag(*t));
                    b.push(*r);
                }
                Rec::Wake(t, w) => {
                    ev(ids::TASK_WAKE, &mut b);
                    put(&mut b, zigzag(*t));
                    put(&mut b, *w);
                }
                Rec::Spawn(t, l, q) => {
                    ev(ids::TASK_SPAWN, &mut b);
                    put(&mut b, zigzag(*t));
                    put(&mut b, 0);
                    put(&mut b, *l);
                    put(&mut b, *q);
                }
                Rec::Terminate(t) => {
                    ev(ids::TASK_TERMINATE, &mut b);
                    put(&mut b, zigzag(*t));
                }
                Rec::Park(q) => {
                    ev(ids::WORKER_PARK, &mut b);
                    put(&mut b, *q);
                    put(&mut b, 7);
                }
                Rec::Unpark(s) => {
                    ev(ids::WORKER_UNPARK, &mut b);
                    put(&mut b, 7);
                    put(&mut b, *s);
                }
                Rec::Sample(g, q) => {
                    ev(ids::QUEUE_SAMPLE, &mut b);
                    put(&mut b, *g);
                    put(&mut b, *q);
                    put(&mut b, 4);
                }
                Rec::Select(q) => {
                    ev(ids::QUEUE_SELECT, &mut b);
                    put(&mut b, *q);
                    put(&mut b, 1);
                    put(&mut b, 2);
                }
                Rec::SetWorker(w) => {
                    b.push(0);
                    put(&mut b, dt);
                    put(&mut b, *w);
                }
                Rec::App(u, s, bo, l, t) => {
                    b.push(255);
                    put(&mut b, 300);
                    put(&mut b, dt);
                    put(&mut b, *u);
                    put_str(&mut b, s);
                    b.extend_from_slice(&1.5f64.to_le_bytes());
                    b.push(*bo);
                    put(&mut b, *l);
                    put(&mut b, zigzag(-5));
                    put(&mut b, zigzag(*t));
                }
                Rec::Escaped(t) => {
                    b.push(255);
                    put(&mut b, ids::TASK_TERMINATE as u64);
                    put(&mut b, dt);
                    put(&mut b, zigzag(*t));
                }
                Rec::Garbage(g) => b.extend_from_slice(g),
                Rec::Enqueue(q, seq, size) => {
                    ev(ids::ENQUEUE, &mut b);
                    put(&mut b, *q);
                    put(&mut b, *seq);
                    put(&mut b, *size);
                }
                Rec::Trigger(q, size, growth, reason) => {
                    ev(ids::BACKLOG_TRIGGER, &mut b);
                    put(&mut b, *q);
                    put(&mut b, *size);
                    put(&mut b, zigzag(*growth));
                    put(&mut b, *reason);
                }
            }
        }
        b
    }

    /// A file with the definitions and one chunk holding `body`.
    fn file(body: &[u8], worker: u32) -> Vec<u8> {
        let mut schemas = builtin_schemas();
        use FieldType as T;
        schemas.push(Schema {
            id: 300,
            provider: "app".into(),
            name: "everything".into(),
            fields: [
                ("u", T::U64),
                ("s", T::Str),
                ("f", T::F64),
                ("b", T::Bool),
                ("l", T::Loc),
                ("i", T::I64),
                ("t", T::Task),
            ]
            .iter()
            .map(|(n, ty)| SchemaField {
                name: (*n).into(),
                ty: *ty,
            })
            .collect(),
        });
        let h = Header {
            version_major: 1,
            version_minor: 0,
            ticks_per_sec: 1_000_000_000,
            anchor_ticks: 0,
            anchor_wall_ns: 0,
            pid: 1,
            process_name: "t".into(),
            recording_id: 1,
            file_index: 0,
            schemas,
        };
        let mut out = runtrace_format::MAGIC.to_vec();
        frame::write(&mut out, FrameType::Header, &h.encode());
        frame::write(
            &mut out,
            FrameType::Strings,
            &frame::strings([(1, "a"), (2, "b")].into_iter()),
        );
        let locs: Vec<LocationDef> = (1..=2)
            .map(|id| LocationDef {
                id,
                file: "x.rs".into(),
                line: id as u32,
                col: 1,
            })
            .collect();
        frame::write(
            &mut out,
            FrameType::Locations,
            &frame::locations(locs.iter()),
        );
        let mut p = Vec::new();
        ChunkHeader {
            tid: 9,
            state: ChunkState {
                ticks: 1_000,
                task_reg: 10,
                worker_reg: worker,
            },
            count: 0,
        }
        .encode(&mut p);
        p.extend_from_slice(body);
        frame::write(&mut out, FrameType::Chunk, &p);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn decoder_agrees_with_walk(
            recs in proptest::collection::vec(rec(), 0..40),
            dts in proptest::collection::vec(prop_oneof![0u64..130, 0u64..20_000, any::<u64>()], 1..4),
            worker in prop_oneof![Just(u32::MAX), 0u32..3],
        ) {
            let body = encode(&recs, &dts);
            let bytes = file(&body, worker);
            let mut r = FileReader::new(&bytes[..], "mem.bin");
            let mut seen = false;
            while let Some(item) = r.next_raw() {
                let Ok(RawRecord::Chunk(c)) = item else { continue };
                seen = true;
                // walk, with the reader's id checks, collecting the
                // (ticks, task) of the events the analysis keeps.
                let tables = c.tables;
                let mut st = c.header.state;
                let mut want = Vec::new();
                let mut want_app = Vec::new();
                let mut walked = 0u64;
                let res = walk(c.body, &mut st, |id| tables.schema(id).map(|s| &**s), |ev| {
                    for v in ev.values {
                        let bad = match *v {
                            RawValue::Istr(id) if id != 0 && tables.string(id).is_none() => Some(("string", id)),
                            RawValue::Loc(id) if id != 0 && tables.location(id).is_none() => Some(("location", id)),
                            _ => None,
                        };
                        if let Some((what, id)) = bad {
                            return Err(undefined(what, id, ev.offset));
                        }
                    }
                    let task = ev.values.iter().find_map(|v| match v {
                        RawValue::Task(t) => Some(*t),
                        _ => None,
                    });
                    // `runtrace analyze` keeps the runtime events (ids
                    // below queue_select), `runtrace backlog` the
                    // application events (lock_wait..=thread_heartbeat).
                    if ev.schema.provider == "runtrace" && ev.schema.id < ids::QUEUE_SELECT {
                        want.push((ev.ticks, task.unwrap_or(0)));
                    }
                    if ev.schema.provider == "runtrace"
                        && (ids::LOCK_WAIT..=ids::THREAD_HEARTBEAT).contains(&ev.schema.id)
                    {
                        want_app.push((ev.ticks, ev.schema.id as u8));
                    }
                    walked += 1;
                    Ok(())
                });
                for backlog in [false, true] {
                    let mut model = Model::new();
                    let p = model.add_proc(Process::new(&Header::decode(&bytes[17..]).unwrap_or_else(|_| unreachable!())));
                    let t = model.add_thread(p, 9);
                    let mut cache = FileCache::default();
                    cache.plans.wants = if backlog { Wants::APP } else { Wants::RUNTIME };
                    let mut names = Names::default();
                    let mut q = ThreadQueue::default();
                    let mut state = c.header.state;
                    let got = decode_events(c.body, tables, &mut state, &mut cache, &mut names, &mut model, t, &mut q);
                    let mut evs = Vec::new();
                    let mut app = Vec::new();
                    while let Some(ev) = q.front() {
                        // Spawn/terminate/polls/wakes carry the task in `x`.
                        let task = match ev.kind {
                            kind::SPAWN | kind::POLL_START | kind::POLL_END | kind::WAKE | kind::TERMINATE => ev.x,
                            _ => 0,
                        };
                        evs.push((ev.ticks, task));
                        app.push((ev.ticks, ev.kind));
                        q.pop();
                    }
                    if backlog {
                        prop_assert_eq!(&app, &want_app);
                    } else {
                        prop_assert_eq!(&evs, &want);
                    }
                    match (&res, got) {
                        (Ok(n), Ok((m, _, _))) => {
                            prop_assert_eq!(*n, m);
                            prop_assert_eq!(st, state);
                        }
                        (Err(a), Err(((m, _, _), b))) => {
                            prop_assert_eq!(walked, m);
                            prop_assert_eq!((a.pos, &a.what), (b.pos, &b.what));
                        }
                        (a, b) => prop_assert!(false, "walk {:?} vs decoder {:?}", a, b),
                    }
                }
            }
            prop_assert!(seen);
        }
    }
}
