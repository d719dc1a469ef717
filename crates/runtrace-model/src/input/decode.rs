//! Decoding: chunk bodies to compact [`Ev`]s without building `Event`s,
//! filling the [`Model`]'s locations, queues and names as ids resolve.
//!
//! This is [`runtrace_format::chunk::walk`] specialised for the analysis:
//! the same rules and error messages (a test checks them against `walk`),
//! but field values go to a fixed array instead of a `Vec<RawValue>`, and
//! only the events a pass reads are kept ([`super::roles`]).

use super::order::{Orderer, ThreadQueue};
use super::roles::{Plans, NO_FIELD};
use crate::event::{kind, Ev};
use crate::model::{Location, Model, UNKNOWN_LOC};
use runtrace_format::chunk::ChunkState;
use runtrace_format::dense;
use runtrace_format::reader::{RawChunk, Tables};
use runtrace_format::schema::catalog as cat;
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
    /// Queue index ([`Model::queues`]) by string id (`u32::MAX`: not
    /// cached): a queue's name is hashed once per file, not per sample.
    queues: Vec<u32>,
    big_queues: HashMap<u64, u32>,
    /// Stack index by stack id (`u32::MAX`: not cached).
    stacks: Vec<u32>,
    big_stacks: HashMap<u64, u32>,
}

/// Spawn locations, named queues and application names, interned across
/// files by text (indexes into the [`Model`]).
#[derive(Default)]
pub(crate) struct Names {
    loc_by_text: HashMap<Arc<str>, u32>,
    queue_by_text: HashMap<Arc<str>, u32>,
    app_by_text: HashMap<Arc<str>, u32>,
    stack_by_addrs: HashMap<Arc<[u64]>, u32>,
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

/// Type ids remembered per chunk by [`decode_events`] (the catalog's
/// built-in events have the smallest ids).
const QUICK_IDS: usize = 32;

/// The kinds [`decode_events`] pushes straight to the queue from their
/// built-in layout, with nothing resolved.
#[inline(always)]
fn is_quick(k: u8) -> bool {
    matches!(
        k,
        kind::POLL_START | kind::POLL_END | kind::WAKE | kind::TERMINATE
    )
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
    let res = if c.dense {
        decode_events::<true>(
            c.body, c.tables, &mut state, cache, names, model, thread, out,
        )
    } else {
        decode_events::<false>(
            c.body, c.tables, &mut state, cache, names, model, thread, out,
        )
    };
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

/// A dense slot's fixed fields ([`dense::Slot::fixed`]) by field index:
/// bit `i` of `mask` says field `i` is fixed, to `vals[i]`. A search of
/// the slot's list for every field read was a fifth of decoding's
/// instructions (callgrind of `runtrace top --once`).
struct Fixed {
    mask: u64,
    vals: [u8; 64],
}

/// A plain record's: nothing fixed.
const NOT_FIXED: Fixed = Fixed {
    mask: 0,
    vals: [0; 64],
};

/// [`Fixed`] of each slot of [`dense::SLOTS`], in its order.
const FIXED: [Fixed; dense::SLOTS.len()] = {
    let mut t = [NOT_FIXED; dense::SLOTS.len()];
    let mut k = 0;
    while k < t.len() {
        let f = dense::SLOTS[k].fixed;
        let mut j = 0;
        while j < f.len() {
            let (i, v) = f[j];
            assert!(i < 64, "a slot fixes a field past the mask");
            t[k].mask |= 1 << i;
            t[k].vals[i] = v;
            j += 1;
        }
        k += 1;
    }
    t
};

/// The encoded value a dense record's slot fixes for field `i` (a varint
/// or zigzag below 128, or a bool: one byte), if it fixes it (never for a
/// plain record: [`NOT_FIXED`]).
#[inline(always)]
fn fixed_at(fixed: &Fixed, i: usize) -> Option<u64> {
    if i < 64 && fixed.mask >> i & 1 != 0 {
        Some(fixed.vals[i] as u64)
    } else {
        None
    }
}

/// The event loop of [`decode_chunk`]: returns (events, first event's
/// ticks, last event's ticks), with the damage if any.
///
/// `DENSE`: `body` holds a `DCHUNK`'s records (docs/format.md section
/// 6.1), decoded as they are: a record's head gives its delta and slot,
/// and the fields its slot fixes are taken from [`dense::SLOTS`] instead
/// of the body. Expanding them into plain records first and decoding those
/// (what the reader does for its other callers) was a third of
/// `runtrace analyze` on a recorder's files (docs/measurements/density.md).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) fn decode_events<const DENSE: bool>(
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
    // Dense: the slots whose type's schema was checked to have the slot's
    // fields, once per chunk (as `dense::decode` does).
    let mut slot_ok = [false; dense::SLOTS.len()];
    // By type id, for this chunk: the kind of a type whose checked plan
    // is a built-in layout that goes straight to the queue ([`is_quick`];
    // 0: not known yet). A chunk's tables do not change while it is
    // decoded, so the plan lookup per event is skipped for those.
    let mut quick_kinds = [0u8; QUICK_IDS];
    // One more than the fields: `roles::ZERO_FIELD`, always 0.
    let mut vals = [0u64; runtrace_format::MAX_FIELDS + 1];
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
        // The record's type, delta and (dense) the fields its slot fixes:
        // (catalog position, encoded byte), in field order.
        let (id, dt, fixed): (u32, u64, &'static Fixed) = if DENSE {
            let head = get!(c.varint());
            // `sn`: the slot's number (not `n`, the events so far).
            let (dt, sn) = (
                head >> dense::SLOT_BITS,
                head & ((1 << dense::SLOT_BITS) - 1),
            );
            if sn == 0 {
                let v = get!(c.varint());
                match u32::try_from(v) {
                    Ok(v) => (v, dt, &NOT_FIXED),
                    Err(_) => fail!(DecodeError::new(start, format!("type id {v} out of range"))),
                }
            } else {
                let k = sn as usize - 1;
                let slot = &dense::SLOTS[k];
                if !slot_ok[k] {
                    let s = tables.schema(slot.id).map(|s| &**s);
                    if let Err(what) = dense::slot_schema(k + 1, s) {
                        fail!(DecodeError::new(start, what));
                    }
                    slot_ok[k] = true;
                }
                (slot.id, dt, &FIXED[k])
            }
        } else {
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
            (id, get!(c.varint()), &NOT_FIXED)
        };
        // A field's encoded value: fixed by the record's slot, or read.
        macro_rules! enc {
            ($i:expr) => {
                match fixed_at(fixed, $i) {
                    Some(v) => v,
                    None => get!(c.varint()),
                }
            };
        }
        let ticks = st.ticks.wrapping_add(dt);
        if id == runtrace_format::SET_WORKER {
            let w = get!(c.varint());
            let Some(reg) = runtrace_format::chunk::worker_reg(w) else {
                fail!(DecodeError::new(start, "set_worker value out of range"));
            };
            st.ticks = ticks;
            st.worker_reg = reg;
            continue;
        }
        let mut task_reg = st.task_reg;
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
        // The built-in layouts: task first, then by role. The common
        // events go straight to the queue (and `continue`).
        macro_rules! fast {
            ($kind:expr) => {{
                let z = enc!(0);
                task_reg = task_reg.wrapping_add(varint::unzigzag(z) as u64);
                vals[0] = task_reg;
                match $kind {
                    kind::POLL_START => {
                        let q = enc!(cat::task_poll_start::QUEUE);
                        let local_q = enc!(cat::task_poll_start::LOCAL_Q);
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
                        let ready = match fixed_at(fixed, cat::task_poll_end::READY) {
                            Some(v) => v as u8,
                            None => match c.b.get(c.pos) {
                                Some(&b @ (0 | 1)) => {
                                    c.pos += 1;
                                    b
                                }
                                Some(&b) => {
                                    fail!(DecodeError::new(start, format!("bool byte {b}")))
                                }
                                None => {
                                    fail!(at(DecodeError::new(c.pos, "unexpected end of data")))
                                }
                            },
                        };
                        done!(kind::POLL_END, 0, ready);
                    }
                    kind::WAKE => {
                        enc!(cat::task_wake::WAKER_TASK_ID);
                        done!(kind::WAKE, 0, 0);
                    }
                    kind::TERMINATE => done!(kind::TERMINATE, 0, 0),
                    kind::SPAWN => {
                        vals[1] = enc!(1);
                        vals[2] = enc!(2);
                        vals[3] = enc!(3);
                    }
                    _ => {}
                }
            }};
        }
        // A kind that always goes straight to the queue, its plan checked
        // in this chunk: no plan lookup.
        let quick = quick_kinds.get(id as usize).copied().unwrap_or(0);
        if quick != 0 {
            fast!(quick);
        }
        let Some(plan) = plans.plan(id, tables, epoch) else {
            fail!(DecodeError::new(
                start,
                format!("event type {id} has no schema")
            ));
        };
        if plan.fast {
            if is_quick(plan.role.kind) {
                if let Some(q) = quick_kinds.get_mut(id as usize) {
                    *q = plan.role.kind;
                }
            }
            fast!(plan.role.kind);
        } else {
            for (i, ty) in plan.types.iter().enumerate() {
                if let Some(v) = fixed_at(fixed, i) {
                    // A slot fixes only varints, zigzags and bools.
                    vals[i] = match ty {
                        FieldType::Task => {
                            task_reg = task_reg.wrapping_add(varint::unzigzag(v) as u64);
                            task_reg
                        }
                        _ => v,
                    };
                    continue;
                }
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
                    // Its position: the few kinds that keep text re-read it.
                    FieldType::Str => {
                        let p = c.pos as u64;
                        c.skip_str().map(|_| p).map_err(at)
                    }
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
        let generic = plan.role.generic;
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
                // The queue's name, checked like any string id; with the
                // parent packed into `worker` and `flag` (`Ev::pack_spawn`).
                let q = match resolve_app(cache, names, model, tables, g(2), start) {
                    Ok(q) => q,
                    Err(x) => fail!(x),
                };
                let (parent, queue) = Ev::pack_spawn(g(0), g(3), q, model);
                push(k, g(0), l as u64, parent as u64, queue);
            }
            kind::TERMINATE => push(k, g(0), 0, 0, 0),
            kind::PARK => push(k, 0, g(1), g(0), 0),
            // CPU time in whole ms: u32 holds 49 days of it.
            kind::UNPARK => push(k, g(1), g(2) / 1_000_000, g(0), 0),
            kind::QUEUE_SAMPLE => {
                let qi = match resolve_queue(cache, names, model, tables, g(1), start) {
                    Ok(q) => q,
                    Err(x) => fail!(x),
                };
                push(k, g(2), g(0), qi as u64, 0);
            }
            kind::WORKER_START | kind::WORKER_STOP => push(k, 0, g(1), g(0), 0),
            kind::RESOURCE_NEW => {
                let l = match resolve_loc(cache, names, model, tables, g(1), start) {
                    Ok(l) => l,
                    Err(x) => fail!(x),
                };
                let ty = match resolve_app(cache, names, model, tables, g(2), start) {
                    Ok(n) => n,
                    Err(x) => fail!(x),
                };
                push(k, g(0), l as u64, ty as u64, g(3) as u8);
            }
            kind::CPU_SAMPLE | kind::OFF_CPU => {
                // The sampled thread (not this chunk's: the writer's) and
                // its stack; an undefined stack id is flagged, not damage
                // (the field is a plain u64 to the format).
                let proc = model.threads[thread as usize].proc;
                let sampled = model.thread(proc, g(0));
                let (stack, undefined) = resolve_stack(cache, names, model, tables, g(1));
                let off_ns = if k == kind::OFF_CPU { g(2) } else { 0 };
                push(k, off_ns, stack as u64, sampled as u64, undefined as u8)
            }
            kind::ALLOC_SAMPLE => {
                // Packed as CPU samples (the allocating thread in `worker`),
                // its three numbers in `side`.
                let proc = model.threads[thread as usize].proc;
                let sampled = model.thread(proc, g(0));
                let (stack, undefined) = resolve_stack(cache, names, model, tables, g(1));
                let i = model.side(&[g(2), g(3), g(4)]);
                let flag = (g(5).min(3) as u8) | ((undefined as u8) << 2);
                push(k, i, stack as u64, sampled as u64, flag)
            }
            kind::ALLOC_FREE => {
                let proc = model.threads[thread as usize].proc;
                let freeing = model.thread(proc, g(0));
                let moved = match g(2) {
                    0 => 0,
                    to => model.side(&[to]) + 1,
                };
                push(k, g(1), moved, freeing as u64, 0)
            }
            kind::ALLOC_NOTE => push(k, g(0), g(1).min(u32::MAX as u64), 0, 0),
            kind::SPAN_NEW => {
                let name = match resolve_app(cache, names, model, tables, g(2), start) {
                    Ok(n) => n,
                    Err(x) => fail!(x),
                };
                // `g(3)` is the fields' position in the body (see the
                // field loop); the text was checked there.
                let text = Cursor::new(&body[g(3) as usize..]).str().unwrap_or("");
                let fields = intern_text(names, model, text);
                let (parent, extra) = (g(1), fields);
                let a = if parent == 0 && extra == 0 {
                    0
                } else {
                    model.side(&[parent, extra as u64]) + 1
                };
                push(k, g(0), a, name as u64, 0)
            }
            kind::SPAN_ENTER | kind::SPAN_EXIT | kind::SPAN_CLOSE => {
                push(k, g(0), 0, st.worker_reg as u64, 0)
            }
            kind::SNAPSHOT_TRIGGER | kind::SNAPSHOT_REQUEST => {
                // Not an event for the passes: kept in the model (the text
                // was checked by the field loop; `g(0)` is its position).
                if model.snapshots.len() < crate::model::MAX_SNAPSHOT_MARKS {
                    let text = Cursor::new(&body[g(0) as usize..]).str().unwrap_or("");
                    let n = intern_text(names, model, text);
                    let proc = model.threads[thread as usize].proc;
                    let reason = model.name_shared(n);
                    model.snapshots.push(crate::model::SnapshotMark {
                        proc,
                        ticks,
                        reason,
                        request: k == kind::SNAPSHOT_REQUEST,
                    });
                } else {
                    model.snapshots_omitted += 1;
                }
            }
            _ if generic => {
                // An event without a packing of its own (`roles::generic`):
                // x, a, worker (or a name), flag by field type.
                let slot = |i: usize| match f[i] {
                    NO_FIELD => None,
                    p => Some((vals[p as usize], plan.types[p as usize])),
                };
                let int = |i: usize| match slot(i) {
                    // The loop above leaves signed integers zigzagged.
                    Some((v, FieldType::I64 | FieldType::I32)) => varint::unzigzag(v) as u64,
                    Some((v, _)) => v,
                    None => 0,
                };
                let worker = match slot(2) {
                    Some((id, FieldType::Istr)) => {
                        match resolve_app(cache, names, model, tables, id, start) {
                            Ok(n) => n as u64,
                            Err(x) => fail!(x),
                        }
                    }
                    Some((w, _)) => w,
                    None => 0,
                };
                push(k, int(0), int(1), worker, int(3) as u8)
            }
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
    remember(&mut cache.app, &mut cache.big_app, id, n);
    Ok(n)
}

/// The [`Model::names`] index of `text` (0: empty), interned by text (an
/// inline string, such as a span's fields).
fn intern_text(names: &mut Names, model: &mut Model, text: &str) -> u32 {
    if text.is_empty() {
        return 0;
    }
    if let Some(&n) = names.app_by_text.get(text) {
        return n;
    }
    let text: Arc<str> = Arc::from(text);
    let n = model.names.len() as u32;
    names.app_by_text.insert(text.clone(), n);
    model.names.push(text);
    n
}

/// The [`Model::queues`] index of string `id` (`u32::MAX` for 0: the
/// runtime's global queue only), interned across files by text and cached
/// per file, so a sample costs a table lookup however long the name.
fn resolve_queue(
    cache: &mut Ids,
    names: &mut Names,
    model: &mut Model,
    tables: &Tables,
    id: u64,
    at: usize,
) -> Result<u32, DecodeError> {
    if id == 0 {
        return Ok(u32::MAX);
    }
    if let Some(&q) = cache.queues.get(id as usize) {
        if q != u32::MAX {
            return Ok(q);
        }
    } else if let Some(&q) = cache.big_queues.get(&id) {
        return Ok(q);
    }
    let Some(text) = tables.string(id) else {
        return Err(undefined("string", id, at));
    };
    let next = model.queues.len() as u32;
    let q = *names.queue_by_text.entry(text.clone()).or_insert(next);
    if q == next {
        model.queues.push(text.to_string());
    }
    remember(&mut cache.queues, &mut cache.big_queues, id, q);
    Ok(q)
}

/// Caches index `value` for trace id `id`: small ids in a table
/// (`u32::MAX` marks a gap), large ones in a map.
fn remember(small: &mut Vec<u32>, big: &mut HashMap<u64, u32>, id: u64, value: u32) {
    if id < 1 << 16 {
        if id as usize >= small.len() {
            small.resize(id as usize + 1, u32::MAX);
        }
        small[id as usize] = value;
    } else {
        big.insert(id, value);
    }
}

/// The [`Model::stacks`] index of stack `id`, interned across files by
/// content, and whether `id` was never defined (then index 0, the empty
/// stack, as for id 0).
fn resolve_stack(
    cache: &mut Ids,
    names: &mut Names,
    model: &mut Model,
    tables: &Tables,
    id: u64,
) -> (u32, bool) {
    if id == 0 {
        return (0, false);
    }
    if let Some(&s) = cache.stacks.get(id as usize) {
        if s != u32::MAX {
            return (s, false);
        }
    } else if let Some(&s) = cache.big_stacks.get(&id) {
        return (s, false);
    }
    let Some(addrs) = tables.stack(id) else {
        return (0, true);
    };
    let next = model.stacks.len() as u32;
    let s = *names.stack_by_addrs.entry(addrs.clone()).or_insert(next);
    if s == next {
        model.stacks.push(addrs.clone());
    }
    remember(&mut cache.stacks, &mut cache.big_stacks, id, s);
    (s, false)
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
    remember(&mut cache.locs, &mut cache.big_locs, id, l);
    Ok(l)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
