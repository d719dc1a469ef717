//! The compact event every pass consumes ([`Ev`], 32 bytes) and its kinds.
//!
//! A kind is the wire id of the built-in event it comes from, and its
//! group the event's `group` in the catalog (`probes/events.toml`, as
//! runtrace-format's build script generates it), so there is no second
//! numbering or grouping to keep in step: an event added to the catalog
//! is a kind of its group at once.
//!
//! ```
//! use runtrace_model::event::{kind, Ev};
//! let ev = Ev { ticks: 5, x: 7, a: 0, thread: 0, worker: 1, kind: kind::TERMINATE, flag: 0 };
//! assert!(kind::is_runtime(ev.kind));
//! assert!(kind::is_app(kind::ENQUEUE));
//! ```

use crate::model::Model;

/// The built-in events as generated from `probes/events.toml`: one module
/// per event with its wire id (`ID`) and the catalog position of each
/// field (`task_poll_start::LOCAL_Q`, ...).
pub use runtrace_format::schema::catalog;

/// Event kinds of [`Ev`]: the wire ids of the built-in events, and their
/// groups. The named constants are the kinds passes match on; any other
/// built-in id is a kind too, of its catalog group.
pub mod kind {
    use super::catalog as c;
    use runtrace_format::schema::{Group, ID_FACTS};

    // Built-in ids are at most 127 (the catalog's rule), so `as u8` keeps
    // them whole.

    /// `task_spawn`.
    pub const SPAWN: u8 = c::task_spawn::ID as u8;
    /// `task_poll_start`.
    pub const POLL_START: u8 = c::task_poll_start::ID as u8;
    /// `task_poll_end`.
    pub const POLL_END: u8 = c::task_poll_end::ID as u8;
    /// `task_wake`.
    pub const WAKE: u8 = c::task_wake::ID as u8;
    /// `task_terminate`.
    pub const TERMINATE: u8 = c::task_terminate::ID as u8;
    /// `worker_park`.
    pub const PARK: u8 = c::worker_park::ID as u8;
    /// `worker_unpark`.
    pub const UNPARK: u8 = c::worker_unpark::ID as u8;
    /// `queue_sample`.
    pub const QUEUE_SAMPLE: u8 = c::queue_sample::ID as u8;
    /// `worker_start`.
    pub const WORKER_START: u8 = c::worker_start::ID as u8;
    /// `worker_stop`.
    pub const WORKER_STOP: u8 = c::worker_stop::ID as u8;
    /// `lock_wait` (application instrumentation, as all below).
    pub const LOCK_WAIT: u8 = c::lock_wait::ID as u8;
    /// `lock_hold`.
    pub const LOCK_HOLD: u8 = c::lock_hold::ID as u8;
    /// `enqueue`.
    pub const ENQUEUE: u8 = c::enqueue::ID as u8;
    /// `dequeue`.
    pub const DEQUEUE: u8 = c::dequeue::ID as u8;
    /// `processing_end`.
    pub const PROCESSING_END: u8 = c::processing_end::ID as u8;
    /// `item_dropped`.
    pub const ITEM_DROPPED: u8 = c::item_dropped::ID as u8;
    /// `queue_snapshot`.
    pub const QUEUE_SNAPSHOT: u8 = c::queue_snapshot::ID as u8;
    /// `backlog_trigger`.
    pub const BACKLOG_TRIGGER: u8 = c::backlog_trigger::ID as u8;
    /// `io`.
    pub const IO: u8 = c::io::ID as u8;
    /// `thread_heartbeat`.
    pub const HEARTBEAT: u8 = c::thread_heartbeat::ID as u8;
    /// `resource_new` (tokio's async resources, as the next two).
    pub const RESOURCE_NEW: u8 = c::resource_new::ID as u8;
    /// `resource_poll`.
    pub const RESOURCE_POLL: u8 = c::resource_poll::ID as u8;
    /// `resource_release`.
    pub const RESOURCE_RELEASE: u8 = c::resource_release::ID as u8;
    /// `cpu_sample` (CPU profiles, as the next).
    pub const CPU_SAMPLE: u8 = c::cpu_sample::ID as u8;
    /// `off_cpu`.
    pub const OFF_CPU: u8 = c::off_cpu::ID as u8;
    /// `span_new` (the application's spans, as the next three).
    pub const SPAN_NEW: u8 = c::span_new::ID as u8;
    /// `span_enter`.
    pub const SPAN_ENTER: u8 = c::span_enter::ID as u8;
    /// `span_exit`.
    pub const SPAN_EXIT: u8 = c::span_exit::ID as u8;
    /// `span_close`.
    pub const SPAN_CLOSE: u8 = c::span_close::ID as u8;
    /// `runtime_name` (a runtime group event).
    pub const RUNTIME_NAME: u8 = c::runtime_name::ID as u8;
    /// `task_dump_start`: a task dump begins (runtrace-tokio's `dump()`).
    pub const TASK_DUMP_START: u8 = c::task_dump_start::ID as u8;
    /// `task_dump`: one pending task's await point in a dump.
    pub const TASK_DUMP: u8 = c::task_dump::ID as u8;
    /// A sampled heap allocation (the memory profile, `profile::AllocSample`).
    pub const ALLOC_SAMPLE: u8 = c::alloc_sample::ID as u8;
    /// The free (or move by realloc) of a sampled allocation (the live set).
    pub const ALLOC_FREE: u8 = c::alloc_free::ID as u8;
    /// What the live set lost track of.
    pub const ALLOC_NOTE: u8 = c::alloc_note::ID as u8;
    /// A flight-recorder snapshot trigger (group `recorder`): not an
    /// [`super::Ev`] for the passes, kept in [`crate::model::Model::snapshots`].
    pub const SNAPSHOT_TRIGGER: u8 = c::snapshot_trigger::ID as u8;
    /// The application asked for a snapshot (`runtrace::snapshot!`, group
    /// `recorder`): kept in [`crate::model::Model::snapshots`] as a request.
    pub const SNAPSHOT_REQUEST: u8 = c::snapshot_request::ID as u8;

    /// The catalog group of kind `k` (None: no built-in event): one table
    /// load, cheap enough for every event.
    ///
    /// ```
    /// use runtrace_model::event::kind;
    /// use runtrace_format::schema::Group;
    /// assert_eq!(kind::group(kind::IO), Some(Group::App));
    /// assert_eq!(kind::group(0), None);
    /// ```
    #[inline(always)]
    pub const fn group(k: u8) -> Option<Group> {
        ID_FACTS[k as usize].group
    }

    /// A runtime event (group `runtime`: `runtrace analyze`'s input).
    #[inline(always)]
    pub const fn is_runtime(k: u8) -> bool {
        matches!(group(k), Some(Group::Runtime))
    }

    /// An application-instrumentation event (group `app`: `runtrace
    /// backlog`'s input).
    #[inline(always)]
    pub const fn is_app(k: u8) -> bool {
        matches!(group(k), Some(Group::App))
    }

    /// An event of the application's spans (group `span`).
    #[inline(always)]
    pub const fn is_span(k: u8) -> bool {
        matches!(group(k), Some(Group::Span))
    }

    /// A CPU profile sample (group `profile`: the CPU profile pass's
    /// input, `runtrace_model::profile`).
    #[inline(always)]
    pub const fn is_profile(k: u8) -> bool {
        matches!(group(k), Some(Group::Profile))
    }
}

/// One decoded event of interest, 32 bytes. Field use by kind:
///
/// | kind | `x` | `a` | `worker` | `flag` |
/// |---|---|---|---|---|
/// | SPAWN | task | location index ([`crate::model::Model::locs`]) | parent (packed: [`Ev::spawn_parent`]) | queue (packed: [`Ev::spawn_queue`]) |
/// | POLL_START | task | local_q | worker | 1: named queue (executor) |
/// | POLL_END | task | - | worker | ready |
/// | WAKE | woken task | - | waking worker | - |
/// | TERMINATE | task | - | - | - |
/// | PARK | - | local_q | worker | - |
/// | UNPARK | sched_wait_ns | cpu_ns in whole ms (saturating) | worker | - |
/// | QUEUE_SAMPLE | depth | global_q | queue index ([`crate::model::Model::queues`], `u32::MAX`: none) | - |
/// | WORKER_START/STOP | - | runtime | worker | - |
/// | RESOURCE_NEW | resource id | creation site (location index) | concrete type (name index) | internal |
/// | RESOURCE_POLL | task | resource id | - | ready |
/// | RESOURCE_RELEASE | task | resource id | - | - |
///
/// Application events: `worker` is the name index
/// ([`crate::model::Model::names`]) of the queue, lock, I/O op or role.
///
/// | kind | `x` | `a` | `flag` |
/// |---|---|---|---|
/// | LOCK_WAIT / LOCK_HOLD | wait_ns / hold_ns | - | write |
/// | ENQUEUE | seqno | queue_size | - |
/// | DEQUEUE | queue_delay_ns | queue_size | - |
/// | PROCESSING_END | processing_ns | - | success |
/// | ITEM_DROPPED | cause (name index) | queue_size | - |
/// | QUEUE_SNAPSHOT | produced_total | queue_size | - |
/// | BACKLOG_TRIGGER | index in [`crate::model::Model::side`] of (growth rate, reason name index) | queue_size | - |
/// | IO | io_ns | bytes (flag 1: index in `side` of the bytes) | 1: big |
/// | HEARTBEAT | gap_ns | - | - |
///
/// Spans (group `span`) and runtime names:
///
/// | kind | `x` | `a` | `worker` | `flag` |
/// |---|---|---|---|---|
/// | SPAN_NEW | span id | 0, or 1 + index in [`crate::model::Model::side`] of (parent span id, name index of its fields' text) | name index of the span's name | - |
/// | SPAN_ENTER / SPAN_EXIT / SPAN_CLOSE | span id | - | worker register | - |
/// | RUNTIME_NAME | runtime | - | name index of its name | - |
/// | TASK_DUMP_START | dump number | - | - | - |
/// | TASK_DUMP | task | dump number | name index of its await point | - |
///
/// CPU profile samples (written in the recorder's writer thread's chunks,
/// so `thread` is the writer): `worker` is the *sampled* thread's index
/// ([`crate::model::Model::threads`]), `a` its stack's index
/// ([`crate::model::Model::stacks`], 0: none).
///
/// | kind | `x` | `flag` |
/// |---|---|---|
/// | CPU_SAMPLE | - | 1: the stack id was never defined (`a` is 0) |
/// | OFF_CPU | off_ns | as CPU_SAMPLE |
/// | ALLOC_SAMPLE | index in [`crate::model::Model::side`] of (size, weight, addr) | `live` (0, 1, 2) + 4 if the stack id was never defined |
///
/// Allocation frees and notes (also the writer's; `worker` of ALLOC_FREE
/// is the freeing thread's index):
///
/// | kind | `x` | `a` | `worker` | `flag` |
/// |---|---|---|---|---|
/// | ALLOC_FREE | addr | 0: freed; else 1 + index in `side` of the new address (moved) | freeing thread | - |
/// | ALLOC_NOTE | untracked | lost_frees (at most `u32::MAX`) | - | - |
///
/// Any other built-in event of a group a pass reads (one added to the
/// catalog, with no packing of its own in `input/roles.rs`) is packed by
/// its field types: `x` its `task` field, else its first integer; `a` its
/// next integer (at most `u32::MAX`); `worker` its `worker` field, else
/// the name index of its first `istr`; `flag` its first `bool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    /// Timestamp, in the recording's ticks.
    pub ticks: u64,
    /// Kind-specific (table above).
    pub x: u64,
    /// Kind-specific (table above).
    pub a: u32,
    /// Thread index ([`crate::model::Model::threads`]).
    pub thread: u32,
    /// Worker index from the trace, or a name index (table above).
    pub worker: u32,
    /// One of [`kind`].
    pub kind: u8,
    /// Kind-specific (table above).
    pub flag: u8,
}

/// `flag` of a SPAWN whose parent and queue are in [`Model::side`] (at
/// `worker`, `worker + 1`): the rare spawn whose parent is not within
/// 2^32 ids below it, or whose queue's name index is 255 or more.
const SPAWN_IN_SIDE: u8 = u8::MAX;

impl Ev {
    /// A SPAWN's parent task id (0: spawned outside a task). The common
    /// case costs no memory: `worker` holds `task - parent` (0: no
    /// parent), which fits whenever the parent is less than 2^32 task ids
    /// older than the child; otherwise both values are in [`Model::side`].
    ///
    /// ```
    /// use runtrace_model::event::{kind, Ev};
    /// use runtrace_model::model::Model;
    /// let mut m = Model::new();
    /// let (worker, flag) = Ev::pack_spawn(10, 7, 3, &mut m);
    /// let ev = Ev { ticks: 5, x: 10, a: 0, thread: 0, worker, kind: kind::SPAWN, flag };
    /// assert_eq!((ev.spawn_parent(&m), ev.spawn_queue(&m)), (7, 3));
    /// assert!(m.side.is_empty());
    /// let (worker, flag) = Ev::pack_spawn(1 << 40, 1, 300, &mut m);
    /// let ev = Ev { x: 1 << 40, worker, flag, ..ev };
    /// assert_eq!((ev.spawn_parent(&m), ev.spawn_queue(&m)), (1, 300));
    /// ```
    #[inline]
    pub fn spawn_parent(&self, m: &Model) -> u64 {
        match (self.flag, self.worker) {
            (SPAWN_IN_SIDE, i) => m.side.get(i as usize).copied().unwrap_or(0),
            (_, 0) => 0,
            (_, d) => self.x.wrapping_sub(d as u64),
        }
    }

    /// A SPAWN's queue: the [`Model::names`] index of its name (0: none,
    /// as for tokio). See [`Ev::spawn_parent`].
    #[inline]
    pub fn spawn_queue(&self, m: &Model) -> u32 {
        match self.flag {
            SPAWN_IN_SIDE => m
                .side
                .get(self.worker as usize + 1)
                .map_or(0, |&q| q.min(u32::MAX as u64) as u32),
            q => q as u32,
        }
    }

    /// Packs a SPAWN's `parent` task id and `queue` name index into
    /// (`worker`, `flag`), spilling to [`Model::side`] when they do not fit
    /// (see [`Ev::spawn_parent`]).
    #[inline]
    pub fn pack_spawn(task: u64, parent: u64, queue: u32, m: &mut Model) -> (u32, u8) {
        let d = task.wrapping_sub(parent);
        if (parent == 0 || (d != 0 && d <= u32::MAX as u64)) && queue < SPAWN_IN_SIDE as u32 {
            return (if parent == 0 { 0 } else { d as u32 }, queue as u8);
        }
        match u32::try_from(m.side(&[parent, queue as u64])) {
            Ok(i) => (i, SPAWN_IN_SIDE),
            // Over 4G side values: unreachable in memory; say "unknown"
            // rather than something wrong.
            Err(_) => (0, 0),
        }
    }
}
