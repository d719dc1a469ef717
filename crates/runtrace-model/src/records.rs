//! The lifecycle's records: what [`crate::lifecycle::Tracker`] (tasks,
//! polls, wakes) and [`crate::spans::SpanTracker`] (the application's
//! spans) hand a pass, as [`Life`] records, and where they hand them
//! ([`LifeSink`]). Data only, at the bottom of the model: the trackers,
//! [`crate::pass::Pass`] and every consumer import it, it imports none of
//! them. The types are re-exported where they are documented for users:
//! [`crate::lifecycle`] and [`crate::spans`].
//!
//! ```
//! use runtrace_model::records::{Life, Wake, NO_SLOT};
//! let w = Wake { task: 7, ticks: 100, thread: 0, slot: NO_SLOT, pending: None, by: None };
//! assert!(w.first());
//! assert!(matches!(Life::Wake(&w), Life::Wake(x) if x.task == 7));
//! ```

use crate::event::Ev;

/// The slot of no live task ([`Poll::slot`], [`Wake::slot`]).
pub const NO_SLOT: u32 = u32::MAX;

/// A poll as the lifecycle pairs it: at its start (`end == start`,
/// `ready == false`) and at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// The polled task.
    pub task: u64,
    /// Its life's serial number ([`Task::serial`]).
    pub serial: u32,
    /// Its live task's slot ([`Task::slot`]; [`NO_SLOT`] for a poll after
    /// the task's end, rule 4).
    pub slot: u32,
    /// Thread index ([`Model::threads`](crate::model::Model::threads)).
    pub thread: u32,
    /// Worker index from the trace (`runtrace_format::NO_WORKER`: none).
    pub worker: u32,
    /// The task's spawn location ([`Model::locs`](crate::model::Model::locs) index).
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
    /// This thread woke the task after the task's previous poll here
    /// returned Pending, with no poll or park on the thread since, and
    /// polls it now: a wake the task deferred to after its own poll
    /// (tokio's `yield_now`), so a wake by itself.
    pub self_woken: bool,
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
    /// A dense index of the live task, below the most tasks alive at once
    /// in the read: given at its spawn or first sight, free again after
    /// its [`Life::End`] or [`Life::Alive`]. A pass keeps per-task state
    /// in a [`Slots`](crate::lifecycle::Slots) by it (a Vec index, not a hash lookup per record).
    pub slot: u32,
    /// Its recording ([`Model::procs`](crate::model::Model::procs) index).
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
    /// The woken task's slot ([`Task::slot`]; [`NO_SLOT`]: a task not
    /// seen yet, or ended).
    pub slot: u32,
    /// When not the first wake since the task's last poll start (or
    /// spawn): the ticks of the wake (or spawn) its next poll answers
    /// (rule 2). None: this is the one ([`Wake::first`]).
    pub pending: Option<u64>,
    /// The poll the wake came from: the innermost poll open on the waking
    /// thread (None: no poll, as the I/O driver's or a timer's wakes).
    pub by: Option<Running>,
}

impl Wake {
    /// The first wake since the task's last poll start (or spawn): the one
    /// its next poll answers (rule 2).
    pub fn first(&self) -> bool {
        self.pending.is_none()
    }
}

/// A poll running on a thread, as much of it as a wake or an event there
/// needs to say who it came from.
///
/// ```
/// use runtrace_model::records::{Poll, Running};
/// let p = Poll { task: 3, serial: 0, slot: 1, thread: 0, worker: 2, loc: 5, start: 10,
///     end: 10, local_q: 0, executor: false, queue: 0, ready: false, wake: None, depth: 0,
///     self_woken: false };
/// assert_eq!(Running::of(&p), Running { task: 3, slot: 1, loc: 5, worker: 2 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running {
    /// Its task.
    pub task: u64,
    /// Its task's slot ([`Task::slot`]).
    pub slot: u32,
    /// Its task's spawn location.
    pub loc: u32,
    /// Its worker (`runtrace_format::NO_WORKER`: none).
    pub worker: u32,
}

impl Running {
    /// What of poll `p` this keeps.
    #[inline(always)]
    pub fn of(p: &Poll) -> Running {
        Running {
            task: p.task,
            slot: p.slot,
            loc: p.loc,
            worker: p.worker,
        }
    }
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

/// Where the lifecycle's records go: a closure `FnMut(&Life)`, or (in
/// [`Tracked`](crate::lifecycle::Tracked)) a pass, called directly so that a pass whose
/// [`Pass::life`](crate::pass::Pass::life) is inlined is specialized for each kind of record (one
/// branch on the event's kind per event, not one more per pass).
///
/// ```
/// use runtrace_model::lifecycle::{Life, LifeSink};
/// let mut n = 0;
/// let mut count = |_: &Life<'_>| n += 1;
/// count.life(&Life::WakesForgotten(3));
/// assert_eq!(n, 1);
/// ```
pub trait LifeSink {
    /// One record.
    fn life(&mut self, rec: &Life<'_>);
}

impl<F: FnMut(&Life<'_>)> LifeSink for F {
    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>) {
        self(rec)
    }
}

/// A span's life, as far as the trace says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Its id (rule 1).
    pub id: u64,
    /// Its recording ([`Model::procs`](crate::model::Model::procs) index).
    pub proc: u32,
    /// Name index ([`Model::names`](crate::model::Model::names)) of its name (0: not seen created).
    pub name: u32,
    /// Name index of its recorded fields' text (`key=value ...`; 0: none).
    pub fields: u32,
    /// Its parent's id (0: a root span, or unknown).
    pub parent: u64,
    /// Ticks of its creation (or first sight, rule 5).
    pub new: u64,
    /// Thread index of its creation.
    pub thread: u32,
    /// Ticks of its first enter.
    pub first_enter: Option<u64>,
    /// Ticks of its close (None: still open).
    pub close: Option<u64>,
    /// Enters seen.
    pub enters: u32,
    /// Ticks spent entered (rule 3).
    pub busy_ticks: u64,
    /// Wake-to-poll delay suffered, in ticks (rule 4).
    pub delay_ticks: u64,
    /// The task of its first enter (0: none, rule 2).
    pub task: u64,
    /// The worker of its first enter (`runtrace_format::NO_WORKER`: none).
    pub worker: u32,
    /// The thread of its first enter (its creation's until entered).
    pub enter_thread: u32,
}

impl Span {
    /// Span `id` of recording `proc` as first seen at `ticks` (on thread
    /// index 0): no name, fields or parent, never entered. A start for
    /// [`SpanTracker::seed`](crate::spans::SpanTracker::seed).
    ///
    /// ```
    /// let s = runtrace_model::spans::Span::seen(42, 0, 1_000);
    /// assert_eq!((s.id, s.name, s.new, s.first_enter), (42, 0, 1_000, None));
    /// ```
    pub fn seen(id: u64, proc: u32, ticks: u64) -> Span {
        Span {
            id,
            proc,
            name: 0,
            fields: 0,
            parent: 0,
            new: ticks,
            thread: 0,
            first_enter: None,
            close: None,
            enters: 0,
            busy_ticks: 0,
            delay_ticks: 0,
            task: 0,
            worker: runtrace_format::NO_WORKER,
            enter_thread: 0,
        }
    }

    /// Span `ev.x` as first seen at `ev` in process `proc`: no name,
    /// fields or parent, never entered.
    pub(crate) fn unnamed(ev: &Ev, proc: u32) -> Span {
        Span {
            thread: ev.thread,
            enter_thread: ev.thread,
            ..Span::seen(ev.x, proc, ev.ticks)
        }
    }

    /// Ticks from its first enter to its close (rule 3), when both are known.
    pub fn wall_ticks(&self) -> Option<u64> {
        Some(self.close?.saturating_sub(self.first_enter?))
    }
}

/// One enter of a span on a thread, to its exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entered {
    /// The span's id.
    pub span: u64,
    /// Its name and fields' name indexes ([`Span::name`], [`Span::fields`]).
    pub name: u32,
    /// See [`Span::fields`].
    pub fields: u32,
    /// Thread index.
    pub thread: u32,
    /// Worker of the poll it ran in (`runtrace_format::NO_WORKER`: none).
    pub worker: u32,
    /// Task of the poll it ran in (0: none, rule 2).
    pub task: u64,
    /// Ticks of the start of the poll it ran in (None: no poll).
    pub poll_start: Option<u64>,
    /// Ticks of the enter.
    pub start: u64,
    /// Ticks of the exit (the enter, at the enter).
    pub end: u64,
    /// Spans entered on this thread around this one (0: outermost).
    pub depth: u32,
    /// The spawn location of the task of the poll it ran in
    /// ([`UNKNOWN_LOC`](crate::model::UNKNOWN_LOC) when no poll).
    pub loc: u32,
}
