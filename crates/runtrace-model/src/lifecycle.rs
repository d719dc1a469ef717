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
//!    that are bounded like the wakes.
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
use crate::model::{Model, UNKNOWN_LOC};
use crate::pass::{Pass, Wants};
use crate::spans::{Entered, Span, SpanTracker};

/// Polls one thread may have open at once (nested executors); more means
/// lost poll ends.
pub const MAX_OPEN: usize = 16;
/// Wakes of tasks not seen yet kept at once per recording (a wake for a
/// task that already terminated is common and must not leak), and
/// terminated tasks remembered for a late poll.
pub const MAX_ORPHAN_WAKES: usize = 1 << 16;

const NONE: u64 = u64::MAX;

/// A poll as the lifecycle pairs it: at its start (`end == start`,
/// `ready == false`) and at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// The polled task.
    pub task: u64,
    /// Its life's serial number ([`Task::serial`]).
    pub serial: u32,
    /// Thread index ([`Model::threads`]).
    pub thread: u32,
    /// Worker index from the trace (`runtrace_format::NO_WORKER`: none).
    pub worker: u32,
    /// The task's spawn location ([`Model::locs`] index).
    pub loc: u32,
    /// Ticks of the poll's start.
    pub start: u64,
    /// Ticks of its end (the start, at the start).
    pub end: u64,
    /// Local queue depth at the start.
    pub local_q: u32,
    /// The poll came from a named queue (the runtrace executor).
    pub executor: bool,
    /// The name index of the queue the task was spawned on (0: none).
    pub queue: u32,
    /// The poll returned Ready (at its end).
    pub ready: bool,
    /// Ticks of the wake (or spawn) this poll answers, if seen (rule 2).
    pub wake: Option<u64>,
    /// Polls of this thread still open around this one (0: outermost).
    pub depth: u32,
}

impl Poll {
    /// The wake -> poll delay, in ticks, when the wake was seen.
    #[inline]
    pub fn delay_ticks(&self) -> Option<u64> {
        self.wake.map(|w| self.start.saturating_sub(w))
    }

    /// The poll's length in ticks.
    #[inline]
    pub fn ticks(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A task's life: what the trace says of it so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// The task id.
    pub task: u64,
    /// A dense number for this life of the task, unique within the read
    /// (0, 1, 2, ... in order of spawn or first sight; a task id spawned
    /// again is a new life): group by it where a map of task ids would
    /// cost a lookup per event.
    pub serial: u32,
    /// Its recording ([`Model::procs`] index).
    pub proc: u32,
    /// Its spawn location (rule 1).
    pub loc: u32,
    /// The task that spawned it (0: none, or not spawned in the trace).
    pub parent: u64,
    /// Name index of the queue it was spawned on (0: none).
    pub queue: u32,
    /// Ticks of its spawn (None: not spawned in the trace).
    pub spawn: Option<u64>,
    /// Thread index of its spawn, or of its first sight.
    pub spawn_thread: u32,
    /// Ticks of its first poll.
    pub first_poll: Option<u64>,
    /// Ticks of its terminate (None: alive when its recording ended, or
    /// replaced by a new spawn of its id).
    pub end: Option<u64>,
}

/// A wake, with what the lifecycle knows of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// The woken task.
    pub task: u64,
    /// Ticks of the wake.
    pub ticks: u64,
    /// Thread index of the waker.
    pub thread: u32,
    /// The first wake since the task's last poll start (or spawn): the one
    /// its next poll answers (rule 2).
    pub first: bool,
}

/// A derived record of the lifecycle layer.
#[derive(Debug, Clone, Copy)]
pub enum Life<'a> {
    /// A task was spawned.
    Spawn(&'a Task),
    /// A task not spawned in the trace was first seen, by a poll.
    Seen(&'a Task),
    /// A task was woken.
    Wake(&'a Wake),
    /// A poll started.
    PollStart(&'a Poll),
    /// A poll ended.
    PollEnd(&'a Poll),
    /// A poll whose end was lost (rule 5); `end` is its start.
    PollLost(&'a Poll),
    /// A poll end with no open poll of its task on its thread.
    EndUnmatched(&'a Ev),
    /// Wakes of unseen tasks forgotten to bound memory (rule 3).
    WakesForgotten(u64),
    /// A task's life is over: terminated, or its id spawned again (rule 6).
    End(&'a Task),
    /// A task still alive when its recording's events are over (rule 6).
    Alive(&'a Task),
    /// A span was created ([`crate::spans`]; for passes that want spans,
    /// as the four below).
    SpanNew(&'a Span),
    /// A thread entered a span (`end` is its start).
    SpanEnter(&'a Entered),
    /// A thread left a span.
    SpanExit(&'a Entered),
    /// A span was closed.
    SpanClose(&'a Span),
    /// A span still open when its recording's events are over (or whose
    /// id was created again: its close was lost).
    SpanAlive(&'a Span),
}

#[derive(Clone, Copy)]
struct TaskState {
    serial: u32,
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

/// The live tasks of one recording.
#[derive(Default)]
struct Tasks {
    live: FxHashMap<u64, TaskState>,
    orphan_wakes: FxHashMap<u64, u64>,
    /// Location and serial of tasks that terminated recently (rule 4).
    ended: FxHashMap<u64, (u32, u32)>,
}

/// The lifecycle state of a read: live tasks per recording and open polls
/// per thread, bounded by them (not by the trace's length).
#[derive(Default)]
pub struct Tracker {
    procs: Vec<Tasks>,
    open: Vec<Vec<Poll>>,
    /// The next task life's serial.
    serials: u32,
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
        if proc as usize >= self.procs.len() {
            self.procs.resize_with(proc as usize + 1, Tasks::default);
        }
        self.procs[proc as usize].live.insert(
            task,
            TaskState {
                serial,
                loc,
                spawn,
                ..unseen(0)
            },
        );
    }

    /// Takes raw event `ev` and hands `out` the records it makes.
    #[inline]
    pub fn step(&mut self, ev: &Ev, m: &Model, out: &mut impl FnMut(&Life<'_>)) {
        match ev.kind {
            kind::POLL_START => self.poll_start(ev, m, out),
            kind::POLL_END => self.poll_end(ev, out),
            kind::WAKE => self.wake(ev, m, out),
            kind::SPAWN => self.spawn(ev, m, out),
            kind::TERMINATE => self.terminate(ev, m, out),
            k if kind::is_span(k) => {
                let polls = self
                    .open
                    .get(ev.thread as usize)
                    .map_or(&[][..], |v| &v[..]);
                self.spans.step(ev, m, polls, out)
            }
            _ => {}
        }
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

    fn spawn(&mut self, ev: &Ev, m: &Model, out: &mut impl FnMut(&Life<'_>)) {
        let serial = self.serial();
        let (p, t) = self.tasks(m, ev.thread);
        if !t.orphan_wakes.is_empty() {
            t.orphan_wakes.remove(&ev.x);
        }
        let st = TaskState {
            serial,
            loc: ev.a,
            queue: ev.spawn_queue(m),
            pending: ev.ticks,
            parent: ev.spawn_parent(m),
            spawn: ev.ticks,
            spawn_thread: ev.thread,
            first_poll: NONE,
        };
        if let Some(old) = t.live.insert(ev.x, st) {
            out(&Life::End(&old.life(ev.x, p, None)));
        }
        out(&Life::Spawn(&st.life(ev.x, p, None)));
    }

    fn terminate(&mut self, ev: &Ev, m: &Model, out: &mut impl FnMut(&Life<'_>)) {
        let (_, t) = self.tasks(m, ev.thread);
        if !t.orphan_wakes.is_empty() {
            t.orphan_wakes.remove(&ev.x);
        }
        let st = match t.live.remove(&ev.x) {
            Some(st) => {
                if t.ended.len() >= MAX_ORPHAN_WAKES {
                    t.ended.clear();
                }
                t.ended.insert(ev.x, (st.loc, st.serial));
                st
            }
            None => {
                let serial = self.serial();
                TaskState {
                    serial,
                    ..unseen(ev.thread)
                }
            }
        };
        let p = m.threads[ev.thread as usize].proc;
        out(&Life::End(&st.life(ev.x, p, Some(ev.ticks))));
    }

    #[inline(always)]
    fn wake(&mut self, ev: &Ev, m: &Model, out: &mut impl FnMut(&Life<'_>)) {
        let (_, t) = self.tasks(m, ev.thread);
        let first = match t.live.get_mut(&ev.x) {
            Some(st) => {
                let first = st.pending == NONE;
                if first {
                    st.pending = ev.ticks;
                }
                first
            }
            None => {
                // A task not seen yet (spawned before the trace began), or
                // one that already terminated: keep the wake, bounded.
                if t.orphan_wakes.len() >= MAX_ORPHAN_WAKES {
                    let n = t.orphan_wakes.len() as u64;
                    t.orphan_wakes.clear();
                    out(&Life::WakesForgotten(n));
                }
                let mut first = false;
                t.orphan_wakes.entry(ev.x).or_insert_with(|| {
                    first = true;
                    ev.ticks
                });
                first
            }
        };
        out(&Life::Wake(&Wake {
            task: ev.x,
            ticks: ev.ticks,
            thread: ev.thread,
            first,
        }));
    }

    #[inline(always)]
    fn poll_start(&mut self, ev: &Ev, m: &Model, out: &mut impl FnMut(&Life<'_>)) {
        let next_serial = self.serials;
        let (p, t) = self.tasks(m, ev.thread);
        let (serial, loc, queue, pending) = match t.live.get_mut(&ev.x) {
            Some(st) => {
                let r = (st.serial, st.loc, st.queue, st.pending);
                st.pending = NONE;
                if st.first_poll == NONE {
                    st.first_poll = ev.ticks;
                }
                r
            }
            // A poll after the task's terminate: still that task (rule 4).
            None if t.ended.contains_key(&ev.x) => {
                let (loc, serial) = t.ended[&ev.x];
                (serial, loc, 0, NONE)
            }
            None => {
                let pending = if t.orphan_wakes.is_empty() {
                    NONE
                } else {
                    t.orphan_wakes.remove(&ev.x).unwrap_or(NONE)
                };
                let st = TaskState {
                    serial: next_serial,
                    first_poll: ev.ticks,
                    ..unseen(ev.thread)
                };
                t.live.insert(ev.x, st);
                out(&Life::Seen(&st.life(ev.x, p, None)));
                self.serials = next_serial.saturating_add(1);
                (next_serial, UNKNOWN_LOC, 0, pending)
            }
        };
        let th = ev.thread as usize;
        if th >= self.open.len() {
            self.open.resize_with(th + 1, Vec::new);
        }
        let open = &mut self.open[th];
        if let Some(&top) = open.last() {
            if top.worker == ev.worker || open.len() >= MAX_OPEN {
                open.pop();
                out(&Life::PollLost(&top));
            }
        }
        let poll = Poll {
            task: ev.x,
            serial,
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
        };
        open.push(poll);
        out(&Life::PollStart(&poll));
    }

    #[inline(always)]
    fn poll_end(&mut self, ev: &Ev, out: &mut impl FnMut(&Life<'_>)) {
        let Some(open) = self.open.get_mut(ev.thread as usize) else {
            out(&Life::EndUnmatched(ev));
            return;
        };
        // The open poll of this task: normally the innermost.
        let o = match open.last() {
            Some(top) if top.task == ev.x => open.pop(),
            _ => open
                .iter()
                .rposition(|o| o.task == ev.x)
                .map(|i| open.remove(i)),
        };
        match o {
            Some(mut poll) => {
                poll.end = ev.ticks;
                poll.ready = ev.flag != 0;
                out(&Life::PollEnd(&poll));
            }
            None => out(&Life::EndUnmatched(ev)),
        }
    }

    /// The end of a recording's events (or of the read): every live task's
    /// [`Life::Alive`], in (recording, task id) order, and the state is
    /// cleared.
    pub fn close(&mut self, out: &mut impl FnMut(&Life<'_>)) {
        for (p, t) in self.procs.iter_mut().enumerate() {
            let mut live: Vec<(u64, TaskState)> = t.live.drain().collect();
            live.sort_unstable_by_key(|&(id, _)| id);
            for (id, st) in live {
                out(&Life::Alive(&st.life(id, p as u32, None)));
            }
            *t = Tasks::default();
        }
        self.open.iter_mut().for_each(Vec::clear);
        self.spans.close(out);
    }
}

/// A task first seen other than by its spawn (rule 1).
fn unseen(thread: u32) -> TaskState {
    TaskState {
        serial: 0,
        loc: UNKNOWN_LOC,
        queue: 0,
        pending: NONE,
        parent: 0,
        spawn: NONE,
        spawn_thread: thread,
        first_poll: NONE,
    }
}

/// A pass with the lifecycle computed for it: what the reader runs when a
/// pass [wants](Wants::lifecycle) lifecycle records.
pub struct Tracked<P> {
    /// The pass.
    pub pass: P,
    tracker: Tracker,
}

impl<P: Pass> Tracked<P> {
    /// `pass` with a fresh [`Tracker`].
    pub fn new(pass: P) -> Tracked<P> {
        Tracked {
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
    fn wants(&self) -> Wants {
        self.pass.wants()
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, model: &Model) {
        let pass = &mut self.pass;
        self.tracker
            .step(ev, model, &mut |rec: &Life<'_>| pass.life(rec, model));
        if self.pass.wants().has(ev.kind) {
            self.pass.event(ev, model);
        }
    }

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        self.pass.life(rec, model);
    }

    fn end_recording(&mut self, model: &Model) {
        let pass = &mut self.pass;
        self.tracker
            .close(&mut |rec: &Life<'_>| pass.life(rec, model));
        self.pass.end_recording(model);
    }

    fn finish(&mut self, model: &Model) {
        let pass = &mut self.pass;
        self.tracker
            .close(&mut |rec: &Life<'_>| pass.life(rec, model));
        self.pass.finish(model);
    }
}
