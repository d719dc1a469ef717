//! The task lifecycle, paired once for every consumer: which spawn
//! location a task belongs to, which wake a poll answers and how long it
//! waited, which poll start a poll end closes, and a task's whole life
//! (spawn, parent, first poll, end).
//!
//! A pass that sets [`Wants::lifecycle`] receives these derived records
//! through [`Pass::life`], computed once per read however many passes
//! want them (the reader and [`crate::pass::Pass`] replays wrap the
//! passes in a [`Tracked`]); it still receives the raw events it wants.
//! For one raw event the derived records come first.
//!
//! The rules, one place for all (docs/analysis.md states them for users):
//! 1. A task's location is its spawn's; a task first seen otherwise (a
//!    poll, before any spawn in the trace) is at [`UNKNOWN_LOC`] and is
//!    reported once as [`Life::Seen`].
//! 2. A poll answers the first wake (or the spawn) since the task's last
//!    poll start ([`Poll::wake`]); none seen: `None`, the delay cannot be
//!    measured.
//! 3. Wakes of a task not seen yet are kept (bounded, [`MAX_ORPHAN_WAKES`];
//!    when full they are forgotten and counted in
//!    [`Life::WakesForgotten`]) for its first poll or its spawn.
//! 4. A poll after the task's terminate (tokio polls once more at
//!    shutdown) keeps the task's location; the terminated tasks kept for
//!    that are bounded ([`ENDED_ENTRIES`], direct-mapped by task id).
//! 5. Poll starts and ends pair per thread on a stack (an executor polls
//!    inside a tokio poll on the same thread): a poll start on a worker
//!    whose innermost poll is still open means that poll lost its end
//!    ([`Life::PollLost`]); so does a stack [`MAX_OPEN`] deep. A poll end
//!    closes the innermost open poll of its task; none: [`Life::EndUnmatched`].
//! 6. A task's [`Life::End`] comes at its terminate, or when its id is
//!    spawned again (the old one first, `end: None`); a task still alive
//!    when its recording's events are over gets [`Life::Alive`] (in
//!    task-id order).
//!
//! ```
//! use runtrace_model::event::Ev;
//! use runtrace_model::lifecycle::Life;
//! use runtrace_model::model::Model;
//! use runtrace_model::pass::{Pass, Wants};
//! use runtrace_model::synth::TraceBuilder;
//!
//! /// Wake -> poll delays in ticks.
//! #[derive(Default)]
//! struct Delays(Vec<u64>);
//! impl Pass for Delays {
//!     fn wants(&self) -> Wants {
//!         Wants::LIFECYCLE
//!     }
//!     fn event(&mut self, _: &Ev, _: &Model) {}
//!     fn life(&mut self, rec: &Life<'_>, _: &Model) {
//!         if let Life::PollStart(p) = rec {
//!             self.0.extend(p.delay_ticks());
//!         }
//!     }
//! }
//! let mut b = TraceBuilder::new();
//! b.spawn(7, 1_000, 1, 0, 0, 0);
//! b.poll_start(7, 0, 4_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, false);
//! b.wake(7, 0, 6_000, 1, 0);
//! b.poll_start(7, 0, 6_500, 1, 0, 0);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut d = Delays::default();
//! runtrace_model::input::read(&[path], &mut d, None);
//! assert_eq!(d.0, [3_000, 500]);
//! ```

use crate::event::{kind, Ev};
use crate::fxhash::FxHashMap;
use crate::idmap::IdMap;
use crate::model::{Model, UNKNOWN_LOC};
use crate::pass::{Kinds, Pass, Wants};
pub use crate::records::{Life, LifeSink, Poll, Running, Task, Wake, NO_SLOT};
use crate::spans::SpanTracker;

/// Polls one thread may have open at once (nested executors); more means
/// lost poll ends.
pub const MAX_OPEN: usize = 16;
/// Wakes of tasks not seen yet kept at once per recording (a wake for a
/// task that already terminated is common and must not leak).
pub const MAX_ORPHAN_WAKES: usize = 1 << 16;
/// Entries of the table of terminated tasks remembered for a late poll
/// (rule 4), per recording: direct-mapped by task id, so remembering one
/// is a store rather than a hash-map insert for every task; a task whose
/// entry a later one took is forgotten.
pub const ENDED_ENTRIES: usize = 1 << 12;
const NONE: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct TaskState {
    serial: u32,
    slot: u32,
    loc: u32,
    queue: u32,
    /// Ticks of the first wake (or the spawn) not yet followed by a poll.
    pending: u64,
    parent: u64,
    spawn: u64,
    spawn_thread: u32,
    first_poll: u64,
}

impl TaskState {
    fn life(&self, task: u64, proc: u32, end: Option<u64>) -> Task {
        let some = |t: u64| (t != NONE).then_some(t);
        Task {
            task,
            serial: self.serial,
            slot: self.slot,
            proc,
            loc: self.loc,
            parent: self.parent,
            queue: self.queue,
            spawn: some(self.spawn),
            spawn_thread: self.spawn_thread,
            first_poll: some(self.first_poll),
            end,
        }
    }
}

/// A terminated task remembered for a late poll (rule 4).
#[derive(Clone, Copy)]
struct Ended {
    task: u64,
    loc: u32,
    serial: u32,
}

/// One thread's polls.
struct ThreadPolls {
    /// Open, innermost last (nested executors).
    open: Vec<Poll>,
    /// The task whose poll ended last here, Pending and outermost, while
    /// no poll has started and the worker has not parked since (NONE:
    /// none).
    last_ended: u64,
    /// That task, when this thread then woke it: confirmed a self-wake
    /// ([`Poll::self_woken`]) if the thread's next poll is that task's.
    deferred: u64,
}

impl ThreadPolls {
    fn new() -> ThreadPolls {
        ThreadPolls {
            open: Vec::new(),
            last_ended: NONE,
            deferred: NONE,
        }
    }
}

/// The live tasks of one recording.
#[derive(Default)]
struct Tasks {
    /// By task id: tokio's ids come from one counter, so an [`IdMap`]
    /// finds them without hashing (a lookup per poll start, end and wake).
    live: IdMap<TaskState>,
    /// Wakes of tasks not live (rule 4), by task id: the first one's ticks.
    orphan_wakes: OrphanWakes,
    /// Tasks that terminated recently (rule 4): [`ENDED_ENTRIES`] entries
    /// once one has, indexed by [`ended_entry`].
    ended: Vec<Option<Ended>>,
}

/// Wakes of tasks not live, kept for the task's first poll.
///
/// With the highest id ever kept: spawns look their new id up here, and
/// new ids are above every orphan's (orphans are of tasks that ended or
/// began before the trace), so most skip the hash probe that was a
/// tenth of a spawn's cost whenever any orphan was kept.
#[derive(Default)]
struct OrphanWakes {
    by_task: FxHashMap<u64, u64>,
    hi: u64,
}

impl OrphanWakes {
    /// Takes the wake kept for `task`.
    #[inline(always)]
    fn take(&mut self, task: u64) -> Option<u64> {
        if task > self.hi || self.by_task.is_empty() {
            return None;
        }
        self.by_task.remove(&task)
    }

    /// Keeps a wake of `task` at `ticks` unless one is kept: the ticks of
    /// the one kept before ([`NONE`]: this is the first).
    fn keep(&mut self, task: u64, ticks: u64) -> u64 {
        self.hi = self.hi.max(task);
        let mut before = NONE;
        self.by_task
            .entry(task)
            .and_modify(|t| before = *t)
            .or_insert(ticks);
        before
    }

    fn len(&self) -> usize {
        self.by_task.len()
    }

    fn clear(&mut self) {
        self.by_task.clear();
        self.hi = 0;
    }
}

/// The entry of task `task` in [`Tasks::ended`] (Fibonacci hashing: task
/// ids are often sequential).
#[inline(always)]
fn ended_entry(task: u64) -> usize {
    (task.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - ENDED_ENTRIES.trailing_zeros())) as usize
}

impl Tasks {
    /// The terminated task `task`'s (location, serial), if remembered.
    #[inline(always)]
    fn ended(&self, task: u64) -> Option<(u32, u32)> {
        match self.ended.get(ended_entry(task)) {
            Some(Some(e)) if e.task == task => Some((e.loc, e.serial)),
            _ => None,
        }
    }
}

/// A pass as a [`LifeSink`].
struct ToPass<'a, P> {
    pass: &'a mut P,
    model: &'a Model,
}

impl<P: Pass> LifeSink for ToPass<'_, P> {
    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>) {
        self.pass.life(rec, self.model)
    }
}

/// The lifecycle state of a read: live tasks per recording and open polls
/// per thread, bounded by them (not by the trace's length).
#[derive(Default)]
pub struct Tracker {
    procs: Vec<Tasks>,
    /// By thread index.
    threads: Vec<ThreadPolls>,
    /// The next task life's serial.
    serials: u32,
    /// Slots free for the next live task ([`Task::slot`]) and the next
    /// never used.
    free_slots: Vec<u32>,
    slots: u32,
    /// The application's spans, paired against the open polls.
    pub spans: SpanTracker,
}

impl Tracker {
    /// Makes task `task` of recording `proc` known, as if spawned at
    /// `spawn` at location `loc`, with no wake pending: for a tracker that
    /// starts in the middle of a recording (`runtrace top`'s windows), so
    /// a task spawned before the window keeps its location (rule 1) and
    /// its first poll in the window measures no delay it cannot see
    /// (rule 2). Emits no record.
    ///
    /// ```
    /// use runtrace_model::{event::{kind, Ev}, lifecycle::{Life, Tracker}, model::Model};
    /// let mut m = Model::new();
    /// # let h = runtrace_format::frame::Header { version_major: 1, version_minor: 2,
    /// #     ticks_per_sec: 1_000_000_000, anchor_ticks: 0, anchor_wall_ns: 0, pid: 1,
    /// #     process_name: "p".into(), recording_id: 1, file_index: 0, schemas: vec![] };
    /// m.add_proc(runtrace_model::model::Process::new(&h));
    /// let th = m.thread(0, 1);
    /// let mut t = Tracker::default();
    /// t.seed(0, 9, 3, 100);
    /// let ev = Ev { ticks: 500, x: 9, a: 0, thread: th, worker: 0, kind: kind::POLL_START, flag: 0 };
    /// let mut seen = Vec::new();
    /// t.step(&ev, &m, &mut |r: &Life<'_>| if let Life::PollStart(p) = r { seen.push((p.loc, p.wake)) });
    /// assert_eq!(seen, [(3, None)]);
    /// ```
    pub fn seed(&mut self, proc: u32, task: u64, loc: u32, spawn: u64) {
        let serial = self.serial();
        let slot = self.slot();
        if proc as usize >= self.procs.len() {
            self.procs.resize_with(proc as usize + 1, Tasks::default);
        }
        // Live now: its orphan wake, if any, goes (see `terminate`).
        self.procs[proc as usize].orphan_wakes.take(task);
        if let Some(old) = self.procs[proc as usize].live.insert(
            task,
            TaskState {
                serial,
                slot,
                loc,
                spawn,
                ..unseen(0)
            },
        ) {
            self.free_slot(old.slot);
        }
    }

    /// Takes raw event `ev` and hands `out` the records it makes.
    #[inline]
    pub fn step(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        match ev.kind {
            kind::POLL_START => self.poll_start(ev, m, out),
            kind::POLL_END => self.poll_end(ev, out),
            kind::WAKE => self.wake(ev, m, out),
            kind::SPAWN => self.spawn(ev, m, out),
            kind::TERMINATE => self.terminate(ev, m, out),
            kind::PARK => {
                // A wake from a parked worker is the driver's (I/O,
                // timers), not its last task's own.
                if let Some(t) = self.threads.get_mut(ev.thread as usize) {
                    t.last_ended = NONE;
                    t.deferred = NONE;
                }
            }
            k if kind::is_span(k) => {
                let polls = self
                    .threads
                    .get(ev.thread as usize)
                    .map_or(&[][..], |t| &t.open[..]);
                self.spans.step(ev, m, polls, out)
            }
            _ => {}
        }
    }

    /// The poll open on thread `thread` now (the innermost), if any: what
    /// an event there happened in.
    #[inline(always)]
    pub fn open_on(&self, thread: u32) -> Option<&Poll> {
        self.threads.get(thread as usize)?.open.last()
    }

    #[inline(always)]
    fn tasks(&mut self, m: &Model, thread: u32) -> (u32, &mut Tasks) {
        let p = m.threads[thread as usize].proc;
        if p as usize >= self.procs.len() {
            self.procs.resize_with(p as usize + 1, Tasks::default);
        }
        (p, &mut self.procs[p as usize])
    }

    /// A serial for a new task life (saturating at the end of the range:
    /// 4G lives in one read).
    fn serial(&mut self) -> u32 {
        let s = self.serials;
        self.serials = s.saturating_add(1);
        s
    }

    /// A slot for a new live task.
    #[inline(always)]
    fn slot(&mut self) -> u32 {
        self.free_slots.pop().unwrap_or_else(|| {
            let s = self.slots;
            self.slots = s.saturating_add(1);
            s
        })
    }

    /// Slot `s` is free again (its task's last record is out).
    #[inline(always)]
    fn free_slot(&mut self, s: u32) {
        if s != NO_SLOT {
            self.free_slots.push(s);
        }
    }

    fn spawn(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let serial = self.serial();
        let slot = self.slot();
        let (p, t) = self.tasks(m, ev.thread);
        t.orphan_wakes.take(ev.x);
        let st = TaskState {
            serial,
            slot,
            loc: ev.a,
            queue: ev.spawn_queue(m),
            pending: ev.ticks,
            parent: ev.spawn_parent(m),
            spawn: ev.ticks,
            spawn_thread: ev.thread,
            first_poll: NONE,
        };
        if let Some(old) = t.live.insert(ev.x, st) {
            out.life(&Life::End(&old.life(ev.x, p, None)));
            self.free_slot(old.slot);
        }
        out.life(&Life::Spawn(&st.life(ev.x, p, None)));
    }

    fn terminate(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let (_, t) = self.tasks(m, ev.thread);
        let st = match t.live.remove(ev.x) {
            // A live task has no orphan wake: a task's wakes are orphans
            // only while it is not live, and becoming live takes them.
            Some(st) => {
                if t.ended.is_empty() {
                    t.ended = vec![None; ENDED_ENTRIES];
                }
                t.ended[ended_entry(ev.x)] = Some(Ended {
                    task: ev.x,
                    loc: st.loc,
                    serial: st.serial,
                });
                st
            }
            None => {
                t.orphan_wakes.take(ev.x);
                let serial = self.serial();
                TaskState {
                    serial,
                    ..unseen(ev.thread)
                }
            }
        };
        let p = m.threads[ev.thread as usize].proc;
        out.life(&Life::End(&st.life(ev.x, p, Some(ev.ticks))));
        self.free_slot(st.slot);
    }

    #[inline(always)]
    fn wake(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let (_, t) = self.tasks(m, ev.thread);
        let (pending, slot) = match t.live.get_mut(ev.x) {
            Some(st) => {
                let pending = st.pending;
                if pending == NONE {
                    st.pending = ev.ticks;
                }
                (pending, st.slot)
            }
            None => {
                // A task not seen yet (spawned before the trace began), or
                // one that already terminated: keep the wake, bounded.
                if t.orphan_wakes.len() >= MAX_ORPHAN_WAKES {
                    let n = t.orphan_wakes.len() as u64;
                    t.orphan_wakes.clear();
                    out.life(&Life::WakesForgotten(n));
                }
                (t.orphan_wakes.keep(ev.x, ev.ticks), NO_SLOT)
            }
        };
        let by = match self.threads.get_mut(ev.thread as usize) {
            Some(t) => {
                let by = t.open.last().map(Running::of);
                if by.is_none() && t.last_ended == ev.x {
                    t.deferred = ev.x;
                }
                by
            }
            None => None,
        };
        out.life(&Life::Wake(&Wake {
            task: ev.x,
            ticks: ev.ticks,
            thread: ev.thread,
            slot,
            pending: (pending != NONE).then_some(pending),
            by,
        }));
    }

    #[inline(always)]
    fn poll_start(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let next_serial = self.serials;
        let (p, t) = self.tasks(m, ev.thread);
        let (serial, slot, loc, queue, pending) = match t.live.get_mut(ev.x) {
            Some(st) => {
                let r = (st.serial, st.slot, st.loc, st.queue, st.pending);
                st.pending = NONE;
                if st.first_poll == NONE {
                    st.first_poll = ev.ticks;
                }
                r
            }
            // A poll after the task's terminate: still that task (rule 4).
            None => match t.ended(ev.x) {
                Some((loc, serial)) => (serial, NO_SLOT, loc, 0, NONE),
                None => {
                    let pending = t.orphan_wakes.take(ev.x).unwrap_or(NONE);
                    let slot = self.slot();
                    let (_, t) = self.tasks(m, ev.thread);
                    let st = TaskState {
                        serial: next_serial,
                        slot,
                        first_poll: ev.ticks,
                        ..unseen(ev.thread)
                    };
                    t.live.insert(ev.x, st);
                    out.life(&Life::Seen(&st.life(ev.x, p, None)));
                    self.serials = next_serial.saturating_add(1);
                    (next_serial, slot, UNKNOWN_LOC, 0, pending)
                }
            },
        };
        let th = ev.thread as usize;
        if th >= self.threads.len() {
            self.threads.resize_with(th + 1, ThreadPolls::new);
        }
        let t = &mut self.threads[th];
        let self_woken = t.deferred == ev.x;
        t.deferred = NONE;
        t.last_ended = NONE;
        let open = &mut t.open;
        if open.capacity() == 0 {
            // One poll open per thread is the rule (nesting is rare): a
            // trace of 600k threads must not cost four slots each.
            open.reserve_exact(1);
        }
        if let Some(&top) = open.last() {
            if top.worker == ev.worker || open.len() >= MAX_OPEN {
                open.pop();
                out.life(&Life::PollLost(&top));
            }
        }
        let poll = Poll {
            task: ev.x,
            serial,
            slot,
            thread: ev.thread,
            worker: ev.worker,
            loc,
            start: ev.ticks,
            end: ev.ticks,
            local_q: ev.a,
            executor: ev.flag != 0,
            queue,
            ready: false,
            wake: (pending != NONE).then_some(pending),
            depth: open.len() as u32,
            self_woken,
        };
        // Handed out before it is copied onto the stack: the copy right
        // after the fields' stores stalled on store forwarding (~2% of a
        // read, perf annotate).
        out.life(&Life::PollStart(&poll));
        open.push(poll);
    }

    #[inline(always)]
    fn poll_end(&mut self, ev: &Ev, out: &mut impl LifeSink) {
        let Some(t) = self.threads.get_mut(ev.thread as usize) else {
            out.life(&Life::EndUnmatched(ev));
            return;
        };
        let open = &mut t.open;
        // The open poll of this task: normally the innermost, ended in
        // place (no copy of the record out of the stack first).
        let i = match open.last() {
            Some(top) if top.task == ev.x => open.len() - 1,
            _ => match open.iter().rposition(|o| o.task == ev.x) {
                Some(i) => i,
                None => return out.life(&Life::EndUnmatched(ev)),
            },
        };
        let poll = &mut open[i];
        poll.end = ev.ticks;
        poll.ready = ev.flag != 0;
        out.life(&Life::PollEnd(poll));
        let pending_outermost = !poll.ready && poll.depth == 0;
        if i + 1 == open.len() {
            open.pop();
        } else {
            open.remove(i);
        }
        t.last_ended = if pending_outermost { ev.x } else { NONE };
    }

    /// The tasks live now, of every recording, in no order, as their
    /// records.
    pub fn live_tasks(&self) -> impl Iterator<Item = Task> + '_ {
        self.procs.iter().enumerate().flat_map(|(p, t)| {
            t.live
                .iter()
                .map(move |(id, st)| st.life(id, p as u32, None))
        })
    }

    /// Hands `out` the records [`Tracker::close`] would (every live task's
    /// [`Life::Alive`] in (recording, task id) order, then the live spans'
    /// [`Life::SpanAlive`]), leaving the state as it is: for a pass that
    /// joined this tracker while it ran and ends before it (`runtrace
    /// top`'s windows while following share one tracker).
    ///
    /// ```
    /// use runtrace_model::event::{kind, Ev};
    /// use runtrace_model::lifecycle::{Life, Tracker};
    /// use runtrace_model::model::Model;
    /// let mut m = Model::new();
    /// # let h = runtrace_format::frame::Header { version_major: 1, version_minor: 2,
    /// #     ticks_per_sec: 1_000_000_000, anchor_ticks: 0, anchor_wall_ns: 0, pid: 1,
    /// #     process_name: "p".into(), recording_id: 1, file_index: 0, schemas: vec![] };
    /// m.add_proc(runtrace_model::model::Process::new(&h));
    /// let th = m.thread(0, 1);
    /// let spawn = Ev { ticks: 5, x: 42, a: 0, thread: th, worker: 0, kind: kind::SPAWN, flag: 0 };
    /// let mut t = Tracker::default();
    /// t.step(&spawn, &m, &mut |_: &Life<'_>| {});
    /// let mut alive = Vec::new();
    /// for _ in 0..2 {
    ///     t.report_alive(&mut |r: &Life<'_>| if let Life::Alive(task) = r { alive.push(task.task) });
    /// }
    /// assert_eq!(alive, [42, 42]);
    /// ```
    pub fn report_alive(&self, out: &mut impl LifeSink) {
        for (p, t) in self.procs.iter().enumerate() {
            for (id, st) in t.live.sorted() {
                out.life(&Life::Alive(&st.life(id, p as u32, None)));
            }
        }
        self.spans.report_alive(out);
    }

    /// The end of a recording's events (or of the read): every live task's
    /// [`Life::Alive`], in (recording, task id) order, and the state is
    /// cleared.
    pub fn close(&mut self, out: &mut impl LifeSink) {
        for (p, t) in self.procs.iter_mut().enumerate() {
            for (id, st) in t.live.drain_sorted() {
                out.life(&Life::Alive(&st.life(id, p as u32, None)));
            }
            *t = Tasks::default();
        }
        self.free_slots.clear();
        self.slots = 0;
        for t in &mut self.threads {
            t.open.clear();
            t.last_ended = NONE;
            t.deferred = NONE;
        }
        self.spans.close(out);
    }
}

/// A task first seen other than by its spawn (rule 1).
fn unseen(thread: u32) -> TaskState {
    TaskState {
        serial: 0,
        slot: NO_SLOT,
        loc: UNKNOWN_LOC,
        queue: 0,
        pending: NONE,
        parent: 0,
        spawn: NONE,
        spawn_thread: thread,
        first_poll: NONE,
    }
}

/// A pass's per-task state by [`Task::slot`]: a Vec index where a map of
/// (recording, task id) would cost a hash lookup per record. Insert at the
/// task's [`Life::Spawn`] or [`Life::Seen`], remove at its [`Life::End`]
/// or [`Life::Alive`] (the slot is given to another task after those);
/// [`NO_SLOT`] is never present. Memory: the most tasks alive at once.
///
/// ```
/// use runtrace_model::lifecycle::{Slots, NO_SLOT};
/// let mut polls: Slots<u32> = Slots::default();
/// polls.insert(3, 0);
/// *polls.get_mut(3).unwrap() += 1;
/// assert_eq!(polls.get(NO_SLOT), None);
/// assert_eq!(polls.remove(3), Some(1));
/// assert_eq!(polls.get(3), None);
/// ```
#[derive(Debug, Clone)]
pub struct Slots<T> {
    v: Vec<Option<T>>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { v: Vec::new() }
    }
}

impl<T> Slots<T> {
    /// Sets the state of `slot` (ignored for [`NO_SLOT`]).
    #[inline]
    pub fn insert(&mut self, slot: u32, t: T) {
        if slot == NO_SLOT {
            return;
        }
        let i = slot as usize;
        if i >= self.v.len() {
            self.v.resize_with(i + 1, || None);
        }
        self.v[i] = Some(t);
    }

    /// The state of `slot`, set to `f()` first if unset (None for
    /// [`NO_SLOT`]).
    #[inline]
    pub fn get_or_insert_with(&mut self, slot: u32, f: impl FnOnce() -> T) -> Option<&mut T> {
        if slot == NO_SLOT {
            return None;
        }
        let i = slot as usize;
        if i >= self.v.len() {
            self.v.resize_with(i + 1, || None);
        }
        Some(self.v[i].get_or_insert_with(f))
    }

    /// The state of `slot`, if set.
    #[inline(always)]
    pub fn get(&self, slot: u32) -> Option<&T> {
        self.v.get(slot as usize).and_then(Option::as_ref)
    }

    /// The state of `slot`, if set, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, slot: u32) -> Option<&mut T> {
        self.v.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// Takes the state of `slot` out.
    #[inline]
    pub fn remove(&mut self, slot: u32) -> Option<T> {
        self.v.get_mut(slot as usize).and_then(Option::take)
    }

    /// Forgets every state (keeps the memory).
    pub fn clear(&mut self) {
        self.v.iter_mut().for_each(|e| *e = None);
    }

    /// The states set, by slot.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.v
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|t| (i as u32, t)))
    }
}

/// A pass with the lifecycle computed for it: what the reader runs when a
/// pass [wants](Wants::lifecycle) lifecycle records.
pub struct Tracked<P> {
    /// The pass.
    pub pass: P,
    tracker: Tracker,
    /// The pass's groups, asked once (a pass's wants do not change during
    /// a read; the reader decodes by them too).
    wants: Wants,
    /// The kinds the pass takes raw ([`Pass::raw_kinds`]), checked for
    /// every event.
    kinds: Kinds,
}

impl<P: Pass> Tracked<P> {
    /// `pass` with a fresh [`Tracker`].
    pub fn new(pass: P) -> Tracked<P> {
        let wants = pass.wants();
        Tracked {
            wants,
            kinds: pass.raw_kinds(),
            pass,
            tracker: Tracker::default(),
        }
    }

    /// Its tracker (to [seed](Tracker::seed) it).
    pub fn tracker(&mut self) -> &mut Tracker {
        &mut self.tracker
    }
}

impl<P: Pass> Pass for Tracked<P> {
    #[inline]
    fn wants(&self) -> Wants {
        self.wants
    }

    fn raw_kinds(&self) -> Kinds {
        self.kinds
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, model: &Model) {
        let mut to = ToPass {
            pass: &mut self.pass,
            model,
        };
        self.tracker.step(ev, model, &mut to);
        if self.kinds.has(ev.kind) {
            let open = self.tracker.open_on(ev.thread);
            self.pass.event_in(ev, open, model);
        }
    }

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        self.pass.life(rec, model);
    }

    fn end_recording(&mut self, model: &Model) {
        let mut to = ToPass {
            pass: &mut self.pass,
            model,
        };
        self.tracker.close(&mut to);
        self.pass.end_recording(model);
    }

    fn finish(&mut self, model: &Model) {
        let mut to = ToPass {
            pass: &mut self.pass,
            model,
        };
        self.tracker.close(&mut to);
        self.pass.finish(model);
    }
}
