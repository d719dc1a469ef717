//! Windows over a followed recording that share one lifecycle.
//!
//! Following, `top` shows every second the window ending at the newest
//! event. Computed whole each time ([`crate::window::analyze`]), each event
//! goes through the lifecycle tracker (pairing polls, wakes and tasks) and
//! the engine once per refresh its window spans: five times with the
//! default 5 s window. The tracker is half of that pass's instructions
//! (callgrind of `replay_cost`, docs/measurements/top.md), and its state at
//! an instant does not depend on which window asks. So here one tracker
//! runs over the followed events once, and its records go to one pass per
//! window still open: a new window starts at every refresh, and the one
//! that began about a window ago is finished and shown.
//!
//! A window joined to a running tracker is handed the records a tracker
//! seeded at the window's start would have made (what
//! [`crate::window::analyze`] and a replay do): the end of a poll begun
//! before the window is an unmatched end, a poll's wake before the window
//! is not its wake, a span's exit of an enter before it is not handed
//! over, a wake during a poll begun before it has no waker, and a span
//! live at its start counts its enters, busy and delay time from there; a
//! task never spawned in the trace (first seen by a poll) is first seen
//! at its first poll in the window. A task spawned before the window
//! keeps its first poll from before it (a `Task` record's `first_poll`),
//! which a seeded tracker does not know: nothing the windows show reads
//! it.
//!
//! ```
//! use runtrace_analyze::Thresholds;
//! use runtrace_top::stagger::Staggered;
//! use runtrace_analyze::runtime::Engine;
//! // Following recording 0 from ticks 1,000 on.
//! let mut s: Staggered<Engine> = Staggered::new(0, 1_000);
//! s.start_window(Engine::new(Thresholds::default()));
//! s.start_window(Engine::new(Thresholds::default())); // no event since: the same window
//! assert_eq!(s.windows(), 1);
//! // None began within 100 ticks of 500 (the one of 1,000 is kept for
//! // later); one began within 100 of 1,100.
//! assert!(s.take(500, 100).is_none());
//! assert_eq!(s.take(1_100, 100).map(|j| j.start), Some(1_000));
//! assert_eq!(s.windows(), 0);
//! ```

use crate::lives::Lives;
use crate::shared_now::{SharedNow, Since};
use crate::window::{analysed, Analysed, Losses, Window};
use runtrace_analyze::runtime::Engine;
use runtrace_analyze::{Report, Thresholds};
use runtrace_format::NO_WORKER;
use runtrace_model::event::{kind, Ev};
use runtrace_model::fxhash::{FxHashMap, FxHashSet};
use runtrace_model::input::ReadStats;
use runtrace_model::lifecycle::{Life, LifeSink, Task, Tracker, NO_SLOT};
use runtrace_model::model::{Model, UNKNOWN_LOC};
use runtrace_model::pass::{Kinds, Pass};
use runtrace_model::profile::{Profile, ProfilePass};
use runtrace_model::records::Span;
use std::collections::VecDeque;

/// One window's pass, joined to the tracker at `start`.
#[derive(Clone)]
pub struct Joined<P> {
    /// Ticks of the last event before the window: it has every record
    /// made after.
    pub start: u64,
    /// The window's passes.
    pub pass: P,
    /// The events it was fed (of its recording; counted when taken).
    pub events: u64,
    /// [`Staggered`]'s events fed when it opened.
    fed_at: u64,
    /// The spans live, by (recording, id), with what a tracker seeded at
    /// `start` counts of them: their close says that.
    spans: FxHashMap<(u32, u64), SpanCount>,
    /// By thread: the start and the wake (as handed to this window) of
    /// the last poll started there whose wake was before `start`.
    rewakes: Vec<(u64, Option<u64>)>,
    /// Tasks live at `start` that were not spawned in the trace (first
    /// seen by a poll) and not polled since: a tracker seeded at `start`
    /// first sees them at their next poll.
    unseen: FxHashSet<u64>,
    /// The highest id in `unseen` (0: none): tasks above are not looked
    /// for there (tokio's ids grow; tasks begun before a recording are
    /// the oldest).
    unseen_hi: u64,
    /// Tasks whose wake (or spawn) before `start` was not yet answered by
    /// a poll, woken again since: that first wake after `start`, the one a
    /// seeded tracker's next poll of them answers.
    rewoken: FxHashMap<u64, u64>,
    /// What its [`crate::window::Now`] needs beside the state kept for
    /// all windows ([`SharedNow`]).
    since: Since,
}

/// One lifecycle tracker over a followed recording's events, and the
/// windows' passes joined to it.
pub struct Staggered<P> {
    tracker: Tracker,
    proc: u32,
    /// The passes' raw kinds ([`Pass::raw_kinds`]; the same for all).
    kinds: Option<Kinds>,
    /// Oldest first (a handful: one per refresh over a window).
    joined: Vec<Joined<P>>,
    /// Ticks of the last event fed.
    last: u64,
    /// Events fed.
    fed: u64,
    /// What every window's [`crate::window::Now`] says, kept once.
    now: SharedNow,
}

/// A span's enters, busy and delay ticks since a window's start, as the
/// lifecycle counts them ([`runtrace_model::spans`]).
#[derive(Clone, Copy)]
struct SpanCount {
    /// When it was created (a poll answering a wake before counts none).
    new: u64,
    /// Entered first before the window: a seeded span does not say by
    /// which task, worker and thread.
    entered_before: bool,
    /// The first enter since, when not `entered_before`: (task, worker,
    /// thread).
    first: Option<(u64, u32, u32)>,
    enters: u32,
    busy: u64,
    delay: u64,
    /// The poll whose delay was counted last (each poll once).
    last_poll: u64,
}

impl SpanCount {
    fn new(new: u64, entered_before: bool) -> SpanCount {
        SpanCount {
            new,
            entered_before,
            first: None,
            enters: 0,
            busy: 0,
            delay: 0,
            last_poll: u64::MAX,
        }
    }
}

/// Hands a record to every window, as a tracker seeded at its start
/// would have made it.
struct Fan<'a, P> {
    joined: &'a mut [Joined<P>],
    now: &'a mut SharedNow,
    /// The event's sequence number.
    seq: u64,
    model: &'a Model,
    ev: &'a Ev,
    /// For a wake or a span's enter: the poll open on its thread (its
    /// waker; what it ran in) as (start, wake).
    open: Option<(u64, Option<u64>)>,
}

impl<P: Pass> LifeSink for Fan<'_, P> {
    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>) {
        self.now.life(rec, self.seq, self.model.threads.len());
        for j in self.joined.iter_mut() {
            j.life(rec, self.ev, self.open, self.model);
        }
    }
}

impl<P: Pass> Joined<P> {
    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>, ev: &Ev, open: Option<(u64, Option<u64>)>, model: &Model) {
        let start = self.start;
        match *rec {
            Life::Wake(w) => {
                let by_before = w.by.is_some() && open.is_some_and(|o| o.0 <= start);
                let answers_before = w.pending.is_some_and(|p| p <= start);
                if !by_before && !answers_before {
                    return self.pass.life(rec, model);
                }
                let mut w = *w;
                if by_before {
                    // Its waker's poll began before: not open to a tracker
                    // seeded at `start`.
                    w.by = None;
                }
                if answers_before {
                    match self.rewoken.get(&w.task) {
                        Some(&first) => w.pending = Some(first),
                        None => {
                            self.rewoken.insert(w.task, w.ticks);
                            w.pending = None;
                        }
                    }
                }
                self.pass.life(&Life::Wake(&w), model);
            }
            // A tracker seeded at `start` had no such poll open.
            Life::PollEnd(p) if p.start <= start => {
                self.since.ended_before(p.thread, p.worker);
                self.pass.life(&Life::EndUnmatched(ev), model);
            }
            // Its start was handed here with the wake a seeded tracker
            // pairs it with (below): its end says the same.
            Life::PollEnd(p) if p.wake.is_some_and(|w| w <= start) => {
                let mut q = *p;
                q.wake = match self.rewakes.get(p.thread as usize) {
                    Some(&(s, wake)) if s == p.start => wake,
                    _ => None,
                };
                self.since.rewoken(p.thread, p.start, q.wake);
                self.pass.life(&Life::PollEnd(&q), model);
            }
            Life::PollLost(p) if p.start <= start => {}
            Life::PollStart(p) => {
                let rewake = p.wake.is_some_and(|w| w <= start);
                let unseen = p.task <= self.unseen_hi && self.unseen.remove(&p.task);
                if !rewake && !unseen {
                    return self.pass.life(rec, model);
                }
                let mut q = *p;
                if rewake {
                    q.wake = self.rewoken.remove(&p.task);
                    // Its wake as handed here, for the spans entered in it.
                    let th = p.thread as usize;
                    if th >= self.rewakes.len() {
                        self.rewakes.resize(th + 1, (u64::MAX, None));
                    }
                    self.rewakes[th] = (q.start, q.wake);
                }
                if unseen {
                    let t = Task {
                        task: p.task,
                        serial: p.serial,
                        slot: p.slot,
                        proc: model.threads[p.thread as usize].proc,
                        loc: UNKNOWN_LOC,
                        parent: 0,
                        queue: 0,
                        spawn: None,
                        spawn_thread: p.thread,
                        first_poll: Some(p.start),
                        end: None,
                    };
                    self.pass.life(&Life::Seen(&t), model);
                }
                self.pass.life(&Life::PollStart(&q), model);
            }
            Life::End(t) | Life::Alive(t)
                if t.task <= self.unseen_hi || !self.rewoken.is_empty() =>
            {
                self.rewoken.remove(&t.task);
                if !self.unseen.remove(&t.task) {
                    return self.pass.life(rec, model);
                }
                // Never polled since `start`: a seeded tracker does not
                // know it is alive, and meets its terminate as a task's
                // it never saw.
                if let Life::End(t) = rec {
                    let t = Task {
                        slot: NO_SLOT,
                        first_poll: None,
                        ..**t
                    };
                    self.pass.life(&Life::End(&t), model);
                }
            }
            Life::SpanNew(sp) => {
                self.spans
                    .insert((sp.proc, sp.id), SpanCount::new(sp.new, false));
                self.pass.life(rec, model);
            }
            Life::SpanEnter(e) => {
                let proc = model.threads[e.thread as usize].proc;
                let c = self
                    .spans
                    .entry((proc, e.span))
                    .or_insert_with(|| SpanCount::new(e.start, false));
                c.enters = c.enters.saturating_add(1);
                // The poll it ran in, if a seeded tracker had it open, with
                // its wake as handed here.
                let poll = e.poll_start.filter(|&p| p > start).map(|p| {
                    match self.rewakes.get(e.thread as usize) {
                        Some(&(s, wake)) if s == p => (p, wake),
                        _ => (p, open.and_then(|o| o.1)),
                    }
                });
                let mut e = *e;
                if poll.is_none() && e.poll_start.is_some() {
                    e.poll_start = None;
                    e.task = 0;
                    e.worker = NO_WORKER;
                    e.loc = UNKNOWN_LOC;
                }
                if !c.entered_before && c.first.is_none() {
                    c.first = Some((e.task, e.worker, e.thread));
                }
                if let Some((ps, wake)) = poll {
                    if c.last_poll != ps {
                        c.last_poll = ps;
                        if let Some(w) = wake.filter(|&w| w >= c.new) {
                            c.delay += ps.saturating_sub(w);
                        }
                    }
                }
                self.pass.life(&Life::SpanEnter(&e), model);
            }
            Life::SpanExit(e) if e.start <= start => {}
            Life::SpanExit(e) => {
                let proc = model.threads[e.thread as usize].proc;
                if let Some(c) = self.spans.get_mut(&(proc, e.span)) {
                    c.busy += e.end.saturating_sub(e.start);
                }
                self.pass.life(rec, model);
            }
            Life::SpanClose(sp) | Life::SpanAlive(sp) => {
                let c = self
                    .spans
                    .remove(&(sp.proc, sp.id))
                    .unwrap_or_else(|| SpanCount::new(sp.new, false));
                let (task, worker, enter_thread) = match c.first {
                    Some(f) => f,
                    None => (0, NO_WORKER, 0),
                };
                let since = Span {
                    enters: c.enters,
                    busy_ticks: c.busy,
                    delay_ticks: c.delay,
                    task,
                    worker,
                    enter_thread,
                    ..*sp
                };
                let rec = match rec {
                    Life::SpanClose(_) => Life::SpanClose(&since),
                    _ => Life::SpanAlive(&since),
                };
                self.pass.life(&rec, model);
            }
            _ => self.pass.life(rec, model),
        }
    }
}

impl<P: Pass> Staggered<P> {
    /// No windows yet, for recording `proc`; its first event fed is the
    /// first event at or after `at` (ticks).
    pub fn new(proc: u32, at: u64) -> Staggered<P> {
        Staggered {
            tracker: Tracker::default(),
            proc,
            kinds: None,
            joined: Vec::new(),
            last: at,
            fed: 0,
            now: SharedNow::default(),
        }
    }

    /// The recording followed.
    pub fn proc(&self) -> u32 {
        self.proc
    }

    /// The tracker, to seed it with what was alive before the first event
    /// fed.
    pub fn tracker(&mut self) -> &mut Tracker {
        &mut self.tracker
    }

    /// Windows open.
    pub fn windows(&self) -> usize {
        self.joined.len()
    }

    /// Opens a window with `pass`, given every record from the next event
    /// on; none when the newest one began at the last event fed (no event
    /// since: it would be the same window).
    pub fn start_window(&mut self, pass: P) {
        if self.joined.last().is_some_and(|j| j.start == self.last) {
            return;
        }
        self.kinds.get_or_insert_with(|| pass.raw_kinds());
        let spans = self
            .tracker
            .spans
            .live_spans()
            .map(|s| {
                (
                    (s.proc, s.id),
                    SpanCount::new(s.new, s.first_enter.is_some()),
                )
            })
            .collect();
        let unseen: FxHashSet<u64> = self
            .tracker
            .live_tasks()
            .filter(|t| t.spawn.is_none())
            .map(|t| t.task)
            .collect();
        let since = self.now.since(self.last, self.fed);
        self.joined.push(Joined {
            since,
            start: self.last,
            pass,
            events: 0,
            fed_at: self.fed,
            spans,
            rewakes: Vec::new(),
            unseen_hi: unseen.iter().copied().max().unwrap_or(0),
            unseen,
            rewoken: FxHashMap::default(),
        });
    }

    /// Runs `evs` (in time order, after every event fed so far) through
    /// the tracker into every open window; events of other recordings, or
    /// of threads the model does not know, are skipped.
    pub fn feed<'a>(&mut self, evs: impl Iterator<Item = &'a Ev>, model: &Model) {
        let proc = self.proc;
        let kinds = self.kinds.unwrap_or_default();
        for ev in evs {
            let Some(th) = model.threads.get(ev.thread as usize) else {
                continue;
            };
            if th.proc != proc {
                continue;
            }
            self.last = self.last.max(ev.ticks);
            self.fed += 1;
            let open = if ev.kind == kind::WAKE || ev.kind == kind::SPAN_ENTER {
                self.tracker.open_on(ev.thread).map(|p| (p.start, p.wake))
            } else {
                None
            };
            if ev.kind == kind::PARK {
                self.now.park(ev, self.fed);
            }
            let mut fan = Fan {
                joined: &mut self.joined[..],
                now: &mut self.now,
                seq: self.fed,
                model,
                ev,
                open,
            };
            self.tracker.step(ev, model, &mut fan);
            if kinds.has(ev.kind) {
                let open = self.tracker.open_on(ev.thread);
                for j in self.joined.iter_mut() {
                    // A poll open since before the window: not open to a
                    // tracker seeded at its start.
                    let open = open.filter(|p| p.start > j.start);
                    j.pass.event_in(ev, open, model);
                }
            }
        }
    }

    /// The window that began nearest to `t0`, at most `tolerance` ticks
    /// away, taken out (not yet closed: [`Staggered::close`]); the windows
    /// that began before it are dropped. None: no window began near `t0`
    /// (those that began more than `tolerance` before it are dropped, the
    /// others kept).
    pub fn take(&mut self, t0: u64, tolerance: u64) -> Option<Joined<P>> {
        let i = self.nearest(t0, tolerance)?;
        let mut j = self.joined.drain(..=i).next_back()?;
        j.events = self.fed - j.fed_at;
        Some(j)
    }

    /// As [`Staggered::take`], but the window stays open (it may be the
    /// nearest at the next refreshes too): what is taken is a copy of it.
    ///
    /// ```
    /// use runtrace_analyze::Thresholds;
    /// use runtrace_analyze::runtime::Engine;
    /// use runtrace_top::stagger::Staggered;
    /// let mut s: Staggered<Engine> = Staggered::new(0, 1_000);
    /// s.start_window(Engine::new(Thresholds::default()));
    /// assert_eq!(s.take_copy(1_100, 200).map(|j| j.start), Some(1_000));
    /// assert_eq!(s.take_copy(900, 200).map(|j| j.start), Some(1_000));
    /// assert_eq!(s.windows(), 1);
    /// ```
    pub fn take_copy(&mut self, t0: u64, tolerance: u64) -> Option<Joined<P>>
    where
        P: Clone,
    {
        let i = self.nearest(t0, tolerance)?;
        self.joined.drain(..i);
        let mut j = self.joined.first()?.clone();
        j.events = self.fed - j.fed_at;
        Some(j)
    }

    /// Drops the windows too old for `t0` and says which of the others
    /// began nearest to it, if within `tolerance`.
    fn nearest(&mut self, t0: u64, tolerance: u64) -> Option<usize> {
        // Too old for this window, and so for every later one.
        let old = self
            .joined
            .iter()
            .take_while(|j| j.start.saturating_add(tolerance) < t0)
            .count();
        self.joined.drain(..old);
        let (i, d) = self
            .joined
            .iter()
            .enumerate()
            .map(|(i, j)| (i, j.start.abs_diff(t0)))
            .min_by_key(|&(_, d)| d)?;
        (d <= tolerance).then_some(i)
    }

    /// Where the newest window began (ticks), if one is open.
    pub fn newest_start(&self) -> Option<u64> {
        self.joined.last().map(|j| j.start)
    }

    /// Hands `j` the records of what is alive now ([`Tracker::report_alive`]).
    pub fn close(&self, j: &mut Joined<P>, model: &Model) {
        // As any record: a task or span a seeded tracker would not know
        // alive is not. (No event: `Alive` and `SpanAlive` read none.)
        let ev = Ev {
            ticks: self.last,
            x: 0,
            a: 0,
            thread: 0,
            worker: NO_WORKER,
            kind: 0,
            flag: 0,
        };
        let mut to = |rec: &Life<'_>| j.life(rec, &ev, None, model);
        self.tracker.report_alive(&mut to);
    }
}

/// The windows while following: [`Staggered`] over a window's passes
/// (the engine, and the profile's pass for a recording with a CPU
/// profile; what each worker polls now and the recent polls are kept for
/// all windows, [`SharedNow`]).
pub enum Following {
    /// Without a CPU profile.
    Plain(Staggered<Engine>),
    /// With one.
    Profiled(Staggered<(Engine, ProfilePass)>),
}

impl Following {
    /// Follows recording `proc` from the first event after `at` (ticks),
    /// its tracker seeded with the tasks and spans `lives` says were alive
    /// then.
    pub fn new(model: &Model, proc: u32, lives: &Lives, at: u64) -> Following {
        fn seeded<P: Pass>(proc: u32, lives: &Lives, at: u64) -> Staggered<P> {
            let mut s = Staggered::new(proc, at);
            for l in lives.alive_at(proc, at) {
                s.tracker().seed(proc, l.task, l.loc, l.from);
            }
            for sp in lives.spans.alive_at(proc, at) {
                s.tracker().spans.seed(sp.span());
            }
            s
        }
        if model.profiles.is_empty() {
            Following::Plain(seeded(proc, lives, at))
        } else {
            Following::Profiled(seeded(proc, lives, at))
        }
    }

    /// Whether these windows are still right for recording `proc` of
    /// `model` (a CPU profile that appeared needs the profile's pass).
    pub fn fits(&self, model: &Model, proc: u32) -> bool {
        match self {
            Following::Plain(s) => s.proc() == proc && model.profiles.is_empty(),
            Following::Profiled(s) => s.proc() == proc,
        }
    }

    /// See [`Staggered::feed`].
    pub fn feed<'a>(&mut self, evs: impl Iterator<Item = &'a Ev>, model: &Model) {
        match self {
            Following::Plain(s) => s.feed(evs, model),
            Following::Profiled(s) => s.feed(evs, model),
        }
    }

    /// Opens a window judging by `th` from the next event on.
    pub fn start_window(&mut self, th: Thresholds) {
        match self {
            Following::Plain(s) => s.start_window(Engine::new(th)),
            Following::Profiled(s) => s.start_window((Engine::new(th), ProfilePass::default())),
        }
    }

    /// Follows recording `proc` from `t0` (ticks) with windows already
    /// open over the events kept since (`evs`, in time order): one at
    /// `t0` and one every `step` ticks after it, each fed every event
    /// since it began. A view that starts following holds the last
    /// window's events: this way its first refresh and the next ones are
    /// joined windows from the start, where otherwise each would be
    /// computed whole for a window's length of seconds (every event then
    /// went through the lifecycle and the engine once per refresh).
    ///
    /// ```
    /// use runtrace_analyze::Thresholds;
    /// use runtrace_model::{input, synth::TraceBuilder};
    /// use runtrace_top::stagger::Following;
    /// use runtrace_top::window::Collector;
    /// let mut b = TraceBuilder::new();
    /// b.location(1, "src/main.rs", 3, 1);
    /// for k in 0..10u64 {
    ///     b.spawn(7, k * 1_000_000_000 + 1, k + 1, 0, 1, 0);
    ///     b.poll_start(7, 0, k * 1_000_000_000 + 2, k + 1, 0, 0);
    ///     b.poll_end(7, 0, k * 1_000_000_000 + 3, k + 1, true);
    /// }
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("trace.0.bin");
    /// std::fs::write(&path, b.finish()).unwrap();
    /// let mut c = Collector::default();
    /// let (model, _) = input::read(&[path], &mut c, None);
    /// // 9 s of events kept; windows from 4 s, one a second.
    /// let f = Following::warm(&model, 0, &c.lives, &c.evs, 4_000_000_000, 1_000_000_000, Thresholds::default());
    /// assert_eq!(f.windows(), 6);
    /// ```
    pub fn warm(
        model: &Model,
        proc: u32,
        lives: &Lives,
        evs: &VecDeque<Ev>,
        t0: u64,
        step: u64,
        th: Thresholds,
    ) -> Following {
        let mut f = Following::new(model, proc, lives, t0);
        let mut at = evs.partition_point(|e| e.ticks <= t0);
        let mut s = t0;
        loop {
            f.start_window(th);
            s = s.saturating_add(step.max(1));
            let b = evs.partition_point(|e| e.ticks <= s).max(at);
            if b >= evs.len() {
                break;
            }
            f.feed(evs.range(at..b), model);
            at = b;
        }
        f.feed(evs.range(at..), model);
        f
    }

    /// Windows open.
    pub fn windows(&self) -> usize {
        match self {
            Following::Plain(s) => s.windows(),
            Following::Profiled(s) => s.windows(),
        }
    }

    /// Opens a window judging by `th` ([`Following::start_window`]) unless
    /// one began less than `every` ticks before `now`, less `slack`: how a
    /// view refreshing about every `slack * 2` ticks opens one every
    /// `every` ([`crate::source::opening`]).
    ///
    /// ```
    /// use runtrace_analyze::Thresholds;
    /// use runtrace_model::model::Model;
    /// use runtrace_top::{lives::Lives, stagger::Following};
    /// let mut f = Following::new(&Model::new(), 0, &Lives::default(), 0);
    /// let th = Thresholds::default();
    /// f.start_window_every(th, 0, 2_000, 500);
    /// assert_eq!(f.windows(), 1);
    /// // (No event fed: the same window, whenever asked.)
    /// f.start_window_every(th, 1_000, 2_000, 500);
    /// assert_eq!(f.windows(), 1);
    /// ```
    pub fn start_window_every(&mut self, th: Thresholds, now: u64, every: u64, slack: u64) {
        let newest = match self {
            Following::Plain(s) => s.newest_start(),
            Following::Profiled(s) => s.newest_start(),
        };
        if newest.is_none_or(|s| now.saturating_sub(s) >= every.saturating_sub(slack)) {
            self.start_window(th);
        }
    }

    /// The analysis of the window `ask` asks for, and where it begins.
    /// None: no window began near enough.
    pub fn window(
        &mut self,
        model: &mut Model,
        lives: &Lives,
        ask: Ask,
    ) -> Option<(u64, Analysed)> {
        match self {
            Following::Plain(s) => report(s, model, lives, ask, |e, m, st| (e.report(m, st), None)),
            Following::Profiled(s) => report(s, model, lives, ask, |(e, p), m, st| {
                (e.report(m, st.clone()), Some(p.profile(m, st)))
            }),
        }
    }
}

/// Which window to show: the one that began nearest to `t0` (at most
/// `tolerance` ticks away), ending at `t1`, the newest event fed; `lost`:
/// what its events lost; `keep`: the window stays open for the next
/// refreshes (a copy of it is reported, [`Staggered::take_copy`]).
///
/// ```
/// use runtrace_top::stagger::Ask;
/// use runtrace_top::window::Losses;
/// // The 5 s window ending 12 s in (ticks of 1 ns), within 0.75 s.
/// let ask = Ask { t0: 7_000_000_000, t1: 12_000_000_000, tolerance: 750_000_000, lost: Losses::default(), keep: false };
/// assert_eq!(ask.t1 - ask.t0, 5_000_000_000);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// Where the window should begin (ticks).
    pub t0: u64,
    /// Where it ends (ticks).
    pub t1: u64,
    /// How far from `t0` a window may begin (ticks).
    pub tolerance: u64,
    /// What its events lost.
    pub lost: Losses,
    /// Keep the window open: it may be shown at the next refreshes too.
    pub keep: bool,
}

fn report<P: Pass + Clone>(
    s: &mut Staggered<P>,
    model: &mut Model,
    lives: &Lives,
    ask: Ask,
    take: fn(P, &Model, ReadStats) -> (Report, Option<Profile>),
) -> Option<(u64, Analysed)> {
    let Ask {
        t0,
        t1,
        tolerance,
        lost,
        keep,
    } = ask;
    let j = if keep {
        s.take_copy(t0, tolerance)?
    } else {
        s.take(t0, tolerance)?
    };
    let proc = s.proc();
    // It has the records of the events after the one at `start`.
    let w = Window {
        proc,
        lives,
        t0: j.start.saturating_add(1).min(t1),
        t1,
        lost,
    };
    let now = s.now.window(&j.since);
    let ((report, profile), n) = w.report(
        model,
        j.events,
        j,
        |j, m| {
            s.close(j, m);
            j.pass.finish(m);
        },
        |j, m, st| take(j.pass, m, st),
    );
    Some((w.t0, analysed(report, now, profile, lives, proc, t1, n)))
}
