//! From files to ordered compact events: reads frames with
//! [`FileReader::next_raw`] (no `Event`/`Value` allocation), walks chunks
//! with [`chunk::walk`], keeps the built-in events the analysis uses as
//! 32-byte [`Ev`]s, and releases them in timestamp order one writer round
//! behind (docs/format.md section 8), as `merge::EventStream` does.

use crate::engine::{kind, Engine, Ev, Proc, QueueStats, UNKNOWN_LOC};
use crate::fxhash::FxHashMap;
use runtrace_format::chunk::ChunkState;
use runtrace_format::reader::{RawChunk, RawRecord, Tables};
use runtrace_format::schema::{FieldType, Schema};
use runtrace_format::varint::{self, Cursor, DecodeError};
use runtrace_format::{FileReader, Record};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Events held for ordering beyond which the oldest half is released even
/// without a ROUND frame (a file written without rounds, or a huge round):
/// bounds memory at ~64 MiB of pending events.
const MAX_PENDING: usize = 1 << 21;

/// What the reading side found, besides the events.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReadStats {
    pub files: Vec<PathBuf>,
    pub bytes: u64,
    pub events: u64,
    pub dropped: u64,
    pub errors: Vec<String>,
    pub damaged: bool,
    pub unsealed: Vec<PathBuf>,
    pub forced_releases: u64,
    pub unrecognised_schemas: u64,
}

/// How the analysis uses an event type: field positions in its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Skip,
    Spawn {
        task: u8,
        loc: u8,
        queue: u8,
    },
    PollStart {
        task: u8,
        worker: u8,
        queue: u8,
        local_q: u8,
    },
    PollEnd {
        task: u8,
        worker: u8,
        ready: u8,
    },
    Wake {
        task: u8,
        worker: u8,
    },
    Terminate {
        task: u8,
    },
    Park {
        worker: u8,
        local_q: u8,
    },
    Unpark {
        worker: u8,
        sched_wait: u8,
    },
    QueueSample {
        global_q: u8,
        queue: u8,
        depth: u8,
    },
    WorkerStartStop {
        kind: u8,
        worker: u8,
        runtime: u8,
    },
    /// An application-instrumentation event (runtrace-sync's, seed 001's)
    /// for `runtrace backlog`: `f` holds the positions of the fields listed
    /// for its kind in [`backlog_role`].
    Backlog {
        kind: u8,
        f: [u8; 4],
    },
}

/// The role of an application-instrumentation event: the fields
/// `runtrace backlog` takes, by name and wire type, in the order the
/// decoder packs them (see `engine::Ev`).
fn backlog_role(s: &Schema) -> Option<Role> {
    use FieldType as T;
    let (kind, want): (u8, &[(&str, FieldType)]) = match s.name.as_str() {
        "lock_wait" => (
            kind::LOCK_WAIT,
            &[
                ("lock_name", T::Istr),
                ("wait_ns", T::U64),
                ("write", T::Bool),
            ],
        ),
        "lock_hold" => (
            kind::LOCK_HOLD,
            &[
                ("lock_name", T::Istr),
                ("hold_ns", T::U64),
                ("write", T::Bool),
            ],
        ),
        "enqueue" => (
            kind::ENQUEUE,
            &[
                ("queue", T::Istr),
                ("seqno", T::U64),
                ("queue_size", T::U64),
            ],
        ),
        "dequeue" => (
            kind::DEQUEUE,
            &[
                ("queue", T::Istr),
                ("queue_delay_ns", T::U64),
                ("queue_size", T::U64),
            ],
        ),
        "processing_end" => (
            kind::PROCESSING_END,
            &[
                ("queue", T::Istr),
                ("processing_ns", T::U64),
                ("success", T::Bool),
            ],
        ),
        "item_dropped" => (
            kind::ITEM_DROPPED,
            &[
                ("queue", T::Istr),
                ("queue_size", T::U64),
                ("cause", T::Istr),
            ],
        ),
        "queue_snapshot" => (
            kind::QUEUE_SNAPSHOT,
            &[
                ("queue", T::Istr),
                ("produced_total", T::U64),
                ("queue_size", T::U64),
            ],
        ),
        "backlog_trigger" => (
            kind::BACKLOG_TRIGGER,
            &[
                ("queue", T::Istr),
                ("queue_size", T::U64),
                ("growth_rate_per_sec", T::I64),
                ("reason", T::Istr),
            ],
        ),
        "io" => (
            kind::IO,
            &[("op", T::Istr), ("bytes", T::U64), ("io_ns", T::U64)],
        ),
        "thread_heartbeat" => (kind::HEARTBEAT, &[("role", T::Istr), ("gap_ns", T::U64)]),
        _ => return None,
    };
    let mut f = [0u8; 4];
    for (i, (name, ty)) in want.iter().enumerate() {
        f[i] = s
            .fields
            .iter()
            .position(|x| x.name == *name && x.ty.code() == ty.code())? as u8;
    }
    Some(Role::Backlog { kind, f })
}

/// The role of a schema: built-in events by name, fields by name and wire
/// type, so a reordered or extended schema still works and a mismatched one
/// is skipped rather than misread.
///
/// `backlog`: the analysis is `runtrace backlog`, which takes the
/// application-instrumentation events and none of the runtime's (and
/// `runtrace analyze` the reverse, so neither pays for the other's events).
fn role_of(s: &Schema, backlog: bool) -> Role {
    if s.provider != "runtrace" {
        return Role::Skip;
    }
    if backlog {
        return backlog_role(s).unwrap_or(Role::Skip);
    }
    let f = |name: &str, ty: FieldType| -> Option<u8> {
        s.fields
            .iter()
            .position(|x| x.name == name && x.ty.code() == ty.code())
            .map(|i| i as u8)
    };
    use FieldType as T;
    let r = match s.name.as_str() {
        "task_spawn" => (|| {
            Some(Role::Spawn {
                task: f("task_id", T::Task)?,
                loc: f("spawn_loc", T::Loc)?,
                queue: f("queue", T::Istr)?,
            })
        })(),
        "task_poll_start" => (|| {
            Some(Role::PollStart {
                task: f("task_id", T::Task)?,
                worker: f("worker", T::Worker)?,
                queue: f("queue", T::Istr)?,
                local_q: f("local_q", T::U64)?,
            })
        })(),
        "task_poll_end" => (|| {
            Some(Role::PollEnd {
                task: f("task_id", T::Task)?,
                worker: f("worker", T::Worker)?,
                ready: f("ready", T::Bool)?,
            })
        })(),
        "task_wake" => (|| {
            Some(Role::Wake {
                task: f("woken_task_id", T::Task)?,
                worker: f("worker", T::Worker)?,
            })
        })(),
        "task_terminate" => (|| {
            Some(Role::Terminate {
                task: f("task_id", T::Task)?,
            })
        })(),
        "worker_park" => (|| {
            Some(Role::Park {
                worker: f("worker", T::Worker)?,
                local_q: f("local_q", T::U64)?,
            })
        })(),
        "worker_unpark" => (|| {
            Some(Role::Unpark {
                worker: f("worker", T::Worker)?,
                sched_wait: f("sched_wait_ns", T::U64)?,
            })
        })(),
        "queue_sample" => (|| {
            Some(Role::QueueSample {
                global_q: f("global_q", T::U64)?,
                queue: f("queue", T::Istr)?,
                depth: f("depth", T::U64)?,
            })
        })(),
        "worker_start" | "worker_stop" => (|| {
            Some(Role::WorkerStartStop {
                kind: if s.name == "worker_start" {
                    kind::WORKER_START
                } else {
                    kind::WORKER_STOP
                },
                worker: f("worker", T::Worker)?,
                runtime: f("runtime", T::U64)?,
            })
        })(),
        _ => return Role::Skip,
    };
    r.unwrap_or(Role::Skip)
}

/// How to decode one event type: its field types, and what the analysis
/// takes from it.
struct Plan {
    /// Address of the schema the plan was made from (a redefined schema is
    /// a new allocation, so the plan is rebuilt).
    addr: usize,
    /// The chunk in which the plan was last checked against the tables.
    epoch: u64,
    role: Role,
    /// The schema is exactly the built-in layout of its role.
    fast: bool,
    types: Box<[FieldType]>,
}

/// The wire type codes of the built-in layouts that have a fast path.
fn builtin_layout(role: Role) -> Option<&'static [u8]> {
    // task=8 worker=9 istr=6 u64=1 bool=3 loc=7
    Some(match role {
        Role::PollStart {
            task: 0,
            worker: 1,
            queue: 2,
            local_q: 3,
        } => &[8, 9, 6, 1],
        Role::PollEnd {
            task: 0,
            worker: 1,
            ready: 2,
        } => &[8, 9, 3],
        Role::Wake { task: 0, worker: 2 } => &[8, 1, 9],
        Role::Spawn {
            task: 0,
            loc: 2,
            queue: 3,
        } => &[8, 1, 7, 6],
        Role::Terminate { task: 0 } => &[8],
        _ => return None,
    })
}

/// Per-file caches (ids are per file: every file repeats its definitions).
#[derive(Default)]
struct FileCache {
    plans: Plans,
    ids: Ids,
    /// Chunks decoded.
    epoch: u64,
}

/// Plans by event type id (ids up to 4095; larger ones in `big_plans`,
/// checked on every use).
#[derive(Default)]
struct Plans {
    /// Decode for `runtrace backlog` (see [`role_of`]).
    backlog: bool,
    plans: Vec<Option<Plan>>,
    big_plans: HashMap<u32, Plan>,
    unrecognised: u64,
}

/// Resolved ids.
#[derive(Default)]
struct Ids {
    /// Location index by location id (`u32::MAX`: not cached).
    locs: Vec<u32>,
    big_locs: HashMap<u64, u32>,
    /// Defined string ids (checked once each).
    strings: Vec<bool>,
    /// Backlog name index by string id (`u32::MAX`: not cached).
    app: Vec<u32>,
    big_app: HashMap<u64, u32>,
}

impl Plans {
    /// The plan for event type `id`, or None when it has no schema. A
    /// chunk's tables do not change while it is decoded, so a plan checked
    /// against the tables once in chunk `epoch` is used as is after that.
    #[inline(always)]
    fn plan(&mut self, id: u32, tables: &Tables, epoch: u64) -> Option<&Plan> {
        let i = id as usize;
        if let Some(Some(p)) = self.plans.get(i) {
            if p.epoch == epoch {
                return self.plans[i].as_ref();
            }
        }
        self.check(id, tables, epoch)
    }

    #[cold]
    fn check(&mut self, id: u32, tables: &Tables, epoch: u64) -> Option<&Plan> {
        let s = &**tables.schema(id)?;
        let addr = s as *const Schema as usize;
        let i = id as usize;
        if let Some(Some(p)) = self.plans.get_mut(i) {
            if p.addr == addr {
                p.epoch = epoch;
                return self.plans[i].as_ref();
            }
        }
        if let Some(p) = self.big_plans.get(&id) {
            if p.addr == addr {
                return self.big_plans.get(&id);
            }
        }
        let role = role_of(s, self.backlog);
        // A built-in this analyser has no use for (queue_select, ...) is
        // fine; only a built-in whose fields differ from the catalog's is
        // worth a note.
        if role == Role::Skip && s.provider == "runtrace" && s.id < 128 && !matches_catalog(s) {
            self.unrecognised += 1;
        }
        let types: Box<[FieldType]> = s.fields.iter().map(|f| f.ty).collect();
        let fast = builtin_layout(role)
            .is_some_and(|l| l.iter().copied().eq(types.iter().map(|t| t.code())));
        let plan = Plan {
            addr,
            epoch,
            role,
            fast,
            types,
        };
        if i < 4096 {
            if i >= self.plans.len() {
                self.plans.resize_with(i + 1, || None);
            }
            self.plans[i] = Some(plan);
            self.plans[i].as_ref()
        } else {
            self.big_plans.insert(id, plan);
            self.big_plans.get(&id)
        }
    }
}

/// Spawn locations and named queues, interned across files by text.
#[derive(Default)]
pub(crate) struct Names {
    loc_by_text: HashMap<Arc<str>, u32>,
    queue_by_text: HashMap<String, u32>,
    /// Names of the application events (queues, locks, I/O ops, roles,
    /// reasons, causes), as indexes into `backlog::State::names`.
    app_by_text: HashMap<Arc<str>, u32>,
}

/// One thread's pending events, in its recording order (= time order): a
/// ring with a power-of-two capacity, so releasing the old part of a round
/// moves nothing.
#[derive(Default)]
struct ThreadQueue {
    buf: Vec<Ev>,
    head: usize,
    len: usize,
}

const EMPTY_EV: Ev = Ev {
    ticks: 0,
    x: 0,
    a: 0,
    thread: 0,
    worker: 0,
    kind: 0,
    flag: 0,
};

impl ThreadQueue {
    #[inline(always)]
    fn push(&mut self, ev: Ev) {
        if self.len == self.buf.len() {
            self.grow();
        }
        let mask = self.buf.len() - 1;
        self.buf[(self.head + self.len) & mask] = ev;
        self.len += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(256);
        let mut buf = Vec::with_capacity(cap);
        let mask = self.buf.len().wrapping_sub(1);
        for i in 0..self.len {
            buf.push(self.buf[(self.head + i) & mask]);
        }
        buf.resize(cap, EMPTY_EV);
        self.buf = buf;
        self.head = 0;
    }

    #[inline(always)]
    fn front(&self) -> Option<&Ev> {
        if self.len == 0 {
            None
        } else {
            self.buf.get(self.head)
        }
    }

    #[inline(always)]
    fn pop(&mut self) {
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
    }
}

/// Orders events across threads: each thread's events are already in time
/// order, so releasing is a k-way merge of per-thread queues.
#[derive(Default)]
struct Orderer {
    queues: Vec<ThreadQueue>,
    /// Threads with pending events.
    active: Vec<u32>,
    in_active: Vec<bool>,
    pending: usize,
    last_watermark: u64,
    heap: BinaryHeap<Reverse<u128>>,
    heads: Vec<u128>,
}

/// Merge key: time, then wakes and spawns before other events of the same
/// tick on other threads (a wake stamped in the same tick as the poll it
/// causes happened before it), then thread.
#[inline(always)]
fn key(ev: &Ev, thread: u32) -> u128 {
    let pri = !matches!(ev.kind, kind::WAKE | kind::SPAWN) as u128;
    (ev.ticks as u128) << 64 | pri << 32 | thread as u128
}

#[inline(always)]
fn key_thread(k: u128) -> u32 {
    k as u32
}

impl Orderer {
    /// The queue of engine thread `t`, marked active.
    fn queue(&mut self, t: u32) -> &mut ThreadQueue {
        let i = t as usize;
        if i >= self.queues.len() {
            self.queues.resize_with(i + 1, ThreadQueue::default);
            self.in_active.resize(i + 1, false);
        }
        if !self.in_active[i] {
            self.in_active[i] = true;
            self.active.push(t);
        }
        &mut self.queues[i]
    }

    fn round(&mut self, watermark: u64, e: &mut Engine) {
        let below = self.last_watermark;
        self.last_watermark = watermark;
        self.release(e, below);
    }

    /// Processes every pending event older than `below`, in order.
    fn release(&mut self, e: &mut Engine, below: u64) {
        self.heap.clear();
        for &t in &self.active {
            let q = &self.queues[t as usize];
            if let Some(ev) = q.front() {
                if ev.ticks < below {
                    self.heap.push(Reverse(key(ev, t)));
                }
            }
        }
        if self.heap.len() <= 8 {
            // Few threads (the usual case): scan for the smallest and the
            // second smallest head, and take the smallest thread's events
            // while they come before the second.
            let heads = &mut self.heads;
            heads.clear();
            heads.extend(self.heap.drain().map(|r| r.0));
            while !heads.is_empty() {
                let (mut mi, mut m1, mut m2) = (0, heads[0], u128::MAX);
                for (i, &k) in heads.iter().enumerate().skip(1) {
                    if k < m1 {
                        (m2, m1, mi) = (m1, k, i);
                    } else if k < m2 {
                        m2 = k;
                    }
                }
                let t = key_thread(m1);
                let q = &mut self.queues[t as usize];
                loop {
                    if let Some(ev) = q.front() {
                        e.event(ev);
                    }
                    q.pop();
                    self.pending -= 1;
                    match q.front() {
                        Some(ev) if ev.ticks < below => {
                            let k = key(ev, t);
                            if k > m2 {
                                heads[mi] = k;
                                break;
                            }
                        }
                        _ => {
                            heads.swap_remove(mi);
                            break;
                        }
                    }
                }
            }
        }
        // Many threads: a heap (empty here when the scan above ran).
        while let Some(mut top) = self.heap.peek_mut() {
            let t = key_thread(top.0);
            let q = &mut self.queues[t as usize];
            if let Some(ev) = q.front() {
                e.event(ev);
            }
            q.pop();
            self.pending -= 1;
            match q.front() {
                Some(ev) if ev.ticks < below => *top = Reverse(key(ev, t)),
                _ => {
                    std::collections::binary_heap::PeekMut::pop(top);
                }
            }
        }
        let (queues, in_active) = (&self.queues, &mut self.in_active);
        self.active.retain(|&t| {
            let keep = queues[t as usize].len > 0;
            in_active[t as usize] = keep;
            keep
        });
    }

    fn flush(&mut self, e: &mut Engine) {
        self.release(e, u64::MAX);
        // u64::MAX itself is a valid timestamp.
        for t in std::mem::take(&mut self.active) {
            let q = &mut self.queues[t as usize];
            self.in_active[t as usize] = false;
            while let Some(ev) = q.front() {
                e.event(ev);
                q.pop();
                self.pending -= 1;
            }
        }
        self.last_watermark = 0;
    }

    /// Releases everything when too much is pending (a file written
    /// without ROUND frames, or a huge round).
    fn bound(&mut self, e: &mut Engine) -> bool {
        if self.pending < MAX_PENDING {
            return false;
        }
        self.flush(e);
        true
    }
}

/// Progress callback: (bytes read, bytes in all files).
pub(crate) type Progress<'a> = Option<&'a mut dyn FnMut(u64, u64)>;

/// Reads `paths` (already sorted) into `e`.
pub(crate) fn read_files(
    paths: &[PathBuf],
    e: &mut Engine,
    mut progress: Progress<'_>,
) -> ReadStats {
    let mut st = ReadStats::default();
    let mut names = Names::default();
    let mut order = Orderer::default();
    let mut threads: FxHashMap<(u32, u64), u32> = FxHashMap::default();
    let mut procs: HashMap<(u64, u64), u32> = HashMap::new();
    let mut cur_proc: Option<u32> = None;
    let total: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let mut done_bytes = 0u64;
    for path in paths {
        st.files.push(path.clone());
        match std::fs::metadata(path) {
            Err(err) => {
                st.errors
                    .push(format!("{}: cannot open: {err}", path.display()));
                st.damaged = true;
                continue;
            }
            Ok(m) if m.is_dir() => {
                st.errors.push(format!(
                    "{}: is a directory, not a trace file",
                    path.display()
                ));
                st.damaged = true;
                continue;
            }
            Ok(_) => {}
        }
        let mut r = match FileReader::open(path) {
            Ok(r) => r,
            Err(err) => {
                st.errors
                    .push(format!("{}: cannot open: {err}", path.display()));
                st.damaged = true;
                continue;
            }
        };
        let mut cache = FileCache::default();
        cache.plans.backlog = e.backlog.is_some();
        let mut proc: Option<u32> = None;
        let (mut file_events, mut file_dropped) = (0u64, 0u64);
        let (mut end, mut file_damaged) = (None, false);
        let mut last_progress = 0u64;
        while let Some(item) = r.next_raw() {
            match item {
                Ok(RawRecord::Chunk(c)) => {
                    let Some(p) = proc else { continue };
                    let thread = *threads
                        .entry((p, c.header.tid))
                        .or_insert_with(|| e.add_thread(p, c.header.tid));
                    let (n, err) =
                        decode_chunk(&c, thread, &mut cache, &mut names, e, p, &mut order);
                    file_events += n;
                    if let Some(err) = err {
                        st.errors.push(err.to_string());
                        file_damaged = true;
                    }
                    if order.bound(e) {
                        st.forced_releases += 1;
                    }
                    let at = c.offset + c.frame_len;
                    if let Some(cb) = progress.as_mut() {
                        if at - last_progress >= 1 << 20 {
                            last_progress = at;
                            cb(done_bytes + at, total);
                        }
                    }
                }
                Ok(RawRecord::Record(rec)) => match rec {
                    Record::Header(h) => {
                        let key = (h.recording_id, h.pid);
                        let p = match procs.get(&key) {
                            Some(&p) => p,
                            None => {
                                let p = e.add_proc(Proc::new(&h));
                                procs.insert(key, p);
                                p
                            }
                        };
                        if cur_proc != Some(p) {
                            // Another recording: finish ordering the last one.
                            order.flush(e);
                            e.reset_order();
                            cur_proc = Some(p);
                        }
                        proc = Some(p);
                    }
                    Record::Round { watermark_ticks } => order.round(watermark_ticks, e),
                    Record::Dropped { count, .. } => {
                        file_dropped = file_dropped.saturating_add(count)
                    }
                    Record::Thread { tid, name } => {
                        if let Some(p) = proc {
                            let t = *threads
                                .entry((p, tid))
                                .or_insert_with(|| e.add_thread(p, tid));
                            e.threads[t as usize].name = Some(name);
                        }
                    }
                    Record::End { events, dropped } => end = Some((events, dropped)),
                    _ => {}
                },
                Err(err) => {
                    // Truncation is damage too: the tail is lost.
                    st.errors.push(err.to_string());
                    file_damaged = true;
                }
            }
        }
        st.events += file_events;
        st.unrecognised_schemas += cache.plans.unrecognised;
        st.dropped = st.dropped.saturating_add(file_dropped);
        if let (Some((want_events, want_dropped)), false) = (end, file_damaged) {
            if want_events != file_events {
                file_damaged = true;
                st.errors.push(format!(
                    "{}: corrupt END frame: it says the file holds {want_events} events, but its chunks hold {file_events}",
                    path.display()
                ));
            }
            if want_dropped != file_dropped {
                file_damaged = true;
                st.errors.push(format!(
                    "{}: corrupt END frame: it says {want_dropped} events were dropped, but the DROPPED frames report {file_dropped}",
                    path.display()
                ));
            }
        }
        if !r.sealed() && !file_damaged {
            st.unsealed.push(path.clone());
        }
        st.damaged |= file_damaged;
        st.bytes += r.offset();
        done_bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if let Some(cb) = progress.as_mut() {
            cb(done_bytes, total);
        }
    }
    order.flush(e);
    st
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
fn decode_chunk(
    c: &RawChunk<'_>,
    thread: u32,
    cache: &mut FileCache,
    names: &mut Names,
    e: &mut Engine,
    proc: u32,
    order: &mut Orderer,
) -> (u64, Option<runtrace_format::ReadError>) {
    let mut state = c.header.state;
    let out = order.queue(thread);
    let before = out.len;
    let res = decode_events(c.body, c.tables, &mut state, cache, names, e, thread, out);
    let n = (out.len - before) as u64;
    order.pending += n as usize;
    let (walked, lo, hi) = match &res {
        Ok(x) | Err((x, _)) => *x,
    };
    if walked > 0 {
        let p = &mut e.procs[proc as usize];
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
fn decode_events(
    body: &[u8],
    tables: &Tables,
    state: &mut ChunkState,
    cache: &mut FileCache,
    names: &mut Names,
    e: &mut Engine,
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
            match plan.role {
                Role::PollStart { .. } => {
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
                Role::PollEnd { .. } => {
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
                Role::Wake { .. } => {
                    get!(c.varint()); // waker_task_id
                    done!(kind::WAKE, 0, 0);
                }
                Role::Terminate { .. } => done!(kind::TERMINATE, 0, 0),
                Role::Spawn { .. } => {
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
                        resolve_loc(cache, names, e, tables, vals[i], start).map(|_| ())
                    }
                    _ => Ok(()),
                };
                if let Err(x) = r {
                    fail!(x);
                }
            }
        }
        let role = plan.role;
        let v = &vals;
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
        match role {
            Role::Skip => {}
            Role::PollStart {
                task,
                worker,
                queue,
                local_q,
            } => {
                let q = v[queue as usize];
                if q != 0 {
                    if let Err(x) = check_string(cache, tables, q, start) {
                        fail!(x);
                    }
                }
                push(
                    kind::POLL_START,
                    v[task as usize],
                    v[local_q as usize],
                    v[worker as usize],
                    (q != 0) as u8,
                );
            }
            Role::PollEnd {
                task,
                worker,
                ready,
            } => push(
                kind::POLL_END,
                v[task as usize],
                0,
                v[worker as usize],
                v[ready as usize] as u8,
            ),
            Role::Wake { task, worker } => {
                push(kind::WAKE, v[task as usize], 0, v[worker as usize], 0)
            }
            Role::Spawn { task, loc, queue } => {
                // Ids are checked in field order (the built-in layout has
                // the location first), as the reader resolves them.
                let l = match resolve_loc(cache, names, e, tables, v[loc as usize], start) {
                    Ok(l) => l,
                    Err(x) => fail!(x),
                };
                let q = v[queue as usize];
                if q != 0 {
                    if let Err(x) = check_string(cache, tables, q, start) {
                        fail!(x);
                    }
                }
                push(kind::SPAWN, v[task as usize], l as u64, 0, 0);
            }
            Role::Terminate { task } => push(kind::TERMINATE, v[task as usize], 0, 0, 0),
            Role::Park { worker, local_q } => {
                push(kind::PARK, 0, v[local_q as usize], v[worker as usize], 0)
            }
            Role::Unpark { worker, sched_wait } => push(
                kind::UNPARK,
                v[sched_wait as usize],
                0,
                v[worker as usize],
                0,
            ),
            Role::QueueSample {
                global_q,
                queue,
                depth,
            } => {
                let q = v[queue as usize];
                let qi = if q == 0 {
                    u32::MAX
                } else {
                    let Some(text) = tables.string(q) else {
                        fail!(undefined("string", q, start));
                    };
                    let next = e.queues.len() as u32;
                    let qi = *names.queue_by_text.entry(text.to_string()).or_insert(next);
                    if qi == next {
                        e.queues.push((text.to_string(), QueueStats::default()));
                    }
                    qi
                };
                push(
                    kind::QUEUE_SAMPLE,
                    v[depth as usize],
                    v[global_q as usize],
                    qi as u64,
                    0,
                );
            }
            Role::WorkerStartStop {
                kind,
                worker,
                runtime,
            } => push(kind, 0, v[runtime as usize], v[worker as usize], 0),
            Role::Backlog { kind: k, f } => {
                // Packing: docs of `engine::Ev`. The name (queue, lock, op,
                // role) goes in `worker`, which these events do not have.
                let g = |i: usize| v[f[i] as usize];
                let name = match resolve_app(cache, names, e, tables, g(0), start) {
                    Ok(n) => n as u64,
                    Err(x) => fail!(x),
                };
                match k {
                    kind::LOCK_WAIT | kind::LOCK_HOLD | kind::PROCESSING_END => {
                        push(k, g(1), 0, name, g(2) as u8)
                    }
                    kind::ENQUEUE => push(k, g(1), g(2), name, 0),
                    kind::DEQUEUE | kind::QUEUE_SNAPSHOT => push(k, g(1), g(2), name, 0),
                    kind::ITEM_DROPPED => {
                        let cause = match resolve_app(cache, names, e, tables, g(2), start) {
                            Ok(n) => n as u64,
                            Err(x) => fail!(x),
                        };
                        push(k, cause, g(1), name, 0)
                    }
                    kind::BACKLOG_TRIGGER => {
                        let reason = match resolve_app(cache, names, e, tables, g(3), start) {
                            Ok(n) => n as u64,
                            Err(x) => fail!(x),
                        };
                        // Rare: the growth rate and reason go to a side
                        // table, `x` is their index.
                        // (The generic decoder leaves i64 fields zigzagged.)
                        let growth = varint::unzigzag(g(2)) as u64;
                        let side = e
                            .backlog
                            .as_deref_mut()
                            .map_or(0, |b| b.side(&[growth, reason]));
                        push(k, side, g(1), name, 0)
                    }
                    kind::IO => {
                        let bytes = g(1);
                        if bytes < u32::MAX as u64 {
                            push(k, g(2), bytes, name, 0)
                        } else {
                            // Over 4 GiB in one operation: exact, in the
                            // side table (flag 1: `a` is its index).
                            let side = e.backlog.as_deref_mut().map_or(0, |b| b.side(&[bytes]));
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

fn undefined(what: &str, id: u64, at: usize) -> DecodeError {
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

/// The backlog name index of string `id` (0: the empty string), interned
/// across files by text.
fn resolve_app(
    cache: &mut Ids,
    names: &mut Names,
    e: &mut Engine,
    tables: &Tables,
    id: u64,
    at: usize,
) -> Result<u32, DecodeError> {
    if id == 0 {
        // The empty string: `backlog::State::names[0]`.
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
    let Some(b) = e.backlog.as_deref_mut() else {
        return Ok(0);
    };
    let n = if text.is_empty() {
        0
    } else {
        let next = b.names.len() as u32;
        let n = *names.app_by_text.entry(text.clone()).or_insert(next);
        if n == next {
            b.names.push(text);
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
    e: &mut Engine,
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
    let next = e.locs.len() as u32;
    let l = *names.loc_by_text.entry(text.clone()).or_insert(next);
    if l == next {
        e.locs.push(crate::engine::Loc::new(text.clone(), id));
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

/// Sorts trace paths as `trace.0.bin`, `trace.1.bin`, ..., `trace.10.bin`.
pub(crate) fn sorted(paths: &[impl AsRef<Path>]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
    runtrace_format::merge::sort_trace_paths(&mut v);
    v
}

/// Whether `s` is exactly the catalog's built-in event of that id.
fn matches_catalog(s: &Schema) -> bool {
    runtrace_format::schema::builtin(s.id).is_some_and(|b| {
        b.name == s.name
            && b.fields.len() == s.fields.len()
            && b.fields
                .iter()
                .zip(&s.fields)
                .all(|(x, y)| x.name == y.name && x.ty.code() == y.ty.code())
    })
}

#[cfg(test)]
mod tests {
    //! The specialised decoder against `runtrace_format::chunk::walk` (plus
    //! the reader's id checks): same events, same damage at the same place
    //! with the same message, on random records and garbage.

    use super::*;
    use proptest::prelude::*;
    use runtrace_format::chunk::{walk, ChunkHeader, RawValue};
    use runtrace_format::frame::{self, FrameType, Header, LocationDef};
    use runtrace_format::schema::{builtin_schemas, ids, SchemaField};

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
                    let mut e = Engine::new(crate::Thresholds::default());
                    if backlog {
                        e.backlog = Some(Box::new(crate::backlog::State::new(Default::default())));
                    }
                    let p = e.add_proc(Proc::new(&Header::decode(&bytes[17..]).unwrap_or_else(|_| unreachable!())));
                    let t = e.add_thread(p, 9);
                    let mut cache = FileCache::default();
                    cache.plans.backlog = backlog;
                    let mut names = Names::default();
                    let mut q = ThreadQueue::default();
                    let mut state = c.header.state;
                    let got = decode_events(c.body, tables, &mut state, &mut cache, &mut names, &mut e, t, &mut q);
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
