//! One window of a recording, analysed: runtrace-analyze's runtime
//! [`Engine`] (the pass and the findings' rules of `runtrace analyze`)
//! run over the events of `[t0, t1]`, beside [`Now`], a small pass for
//! what only a live view asks (what each worker polls at `t1`, the recent
//! polls of each location) and, for a recording with a CPU profile, the
//! profile's pass (its samples attributed to the polls they were taken
//! in: [`Analysed::add_functions`]). Tasks and spans alive at `t0` are seeded
//! into the window's lifecycle ([`Lives`]), so a task spawned before the
//! window is not `<unknown>` in it, nor a span created before it nameless.
//!
//! Nothing here knows the terminal: [`crate::snapshot`] turns the result
//! into rows, `crate::ui` draws them.
//!
//! ```
//! use runtrace_model::{input, lifecycle::Tracked, synth::TraceBuilder};
//! use runtrace_top::window::{analyze, Collector, Losses};
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 3, 1);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000_000_000, 1, 0, 0); // polled 2 s later, for 60 ms
//! b.poll_end(7, 0, 2_060_000_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut c = Collector::default();
//! let (mut model, _) = input::read(&[path], &mut c, None);
//! // The window [1.5 s, 2.1 s] holds the poll, not the spawn.
//! let w = analyze(&mut model, 0, c.evs.iter(), &c.lives, 1_500_000_000, 2_100_000_000, Default::default(), Losses::default());
//! assert_eq!(w.report.spawn_locations[0].location, "src/main.rs:3:1");
//! assert!(w.report.findings.iter().any(|f| f.kind.as_str() == "long_poll"));
//! ```

use crate::lives::Lives;
use crate::workers::ByWorker;
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::runtime::{location_functions, Engine, FunctionShare};
use runtrace_analyze::{Report, Thresholds};
use runtrace_model::event::Ev;
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::input::ReadStats;
use runtrace_model::lifecycle::{Life, Tracked};
use runtrace_model::model::Model;
use runtrace_model::pass::{Kinds, Pass, Wants};
use runtrace_model::profile::{Profile, ProfilePass};
use std::collections::{HashMap, VecDeque};

/// Recent polls kept per spawn location for the details pane.
pub const RECENT: usize = 12;

/// The pass that collects a recording for windows: the events a window
/// analyses in time order (the runtime's, the application's, its spans'
/// and CPU samples), the task and span lives, and the memory profile's
/// changes.
#[derive(Default)]
pub struct Collector {
    /// The window's events, in time order.
    pub evs: VecDeque<Ev>,
    /// Task and span lives.
    pub lives: Lives,
    /// The sampled heap (profile events go there, not to `evs`).
    pub heap: crate::heap::Heap,
    /// Events pushed to `evs` so far (the newest `pushed - n` of them are
    /// those pushed after the `n`-th).
    pub pushed: u64,
}

/// [`ROUTE`]: an event only kept in [`Collector::evs`]...
const KEEP: u8 = 0;
/// ... also given to the lives (spawns, terminates, spans)...
const TO_LIVES: u8 = 1;
/// ... or given to the heap instead (the memory profile's changes: any
/// other value).
const TO_HEAP: u8 = 2;

/// What [`Collector`] does with an event, by kind (one load per event,
/// where the tests of its kind and group were a third of its
/// instructions).
const ROUTE: [u8; 256] = {
    use runtrace_model::event::kind;
    let mut t = [KEEP; 256];
    let mut k = 0;
    while k < t.len() {
        let kk = k as u8;
        if kk == kind::SPAWN || kk == kind::TERMINATE || kind::is_span(kk) {
            t[k] = TO_LIVES;
        } else if Wants::PROFILE.has(kk) && kk != kind::CPU_SAMPLE && kk != kind::OFF_CPU {
            t[k] = TO_HEAP;
        }
        k += 1;
    }
    t
};

impl Pass for Collector {
    #[inline]
    fn wants(&self) -> Wants {
        // The raw events a window's engine pairs and reads (the runtime's,
        // the application's, spans'), and the profile's. No lifecycle
        // records: the windows pair their own, and the lives need the
        // spawns and terminates only ([`Lives`]).
        Wants::RUNTIME
            .or(Wants::APP)
            .or(Wants::SPAN_EVENTS)
            .or(Wants::PROFILE)
    }
    fn event(&mut self, ev: &Ev, model: &Model) {
        self.events(std::slice::from_ref(ev), model);
    }

    /// The run goes to `evs`; the few events that also go elsewhere are
    /// picked out by kind.
    fn events(&mut self, evs: &[Ev], model: &Model) {
        let mut from = 0;
        for (i, ev) in evs.iter().enumerate() {
            match ROUTE[ev.kind as usize] {
                KEEP => {}
                TO_LIVES => self.lives.event(ev, model),
                // The memory profile's changes go to the heap, not to
                // `evs`.
                _ => {
                    self.keep(&evs[from..i]);
                    self.heap.event(ev, model);
                    from = i + 1;
                }
            }
        }
        self.keep(&evs[from..]);
    }
}

impl Collector {
    /// Appends `evs` to the window's events. A push each: extending the
    /// deque from the slice took 4% fewer of reading's instructions but
    /// left `top` following 1M events/s at 391 MiB of peak RSS instead of
    /// 310 MiB in every run measured (why was not found).
    #[inline]
    fn keep(&mut self, evs: &[Ev]) {
        for ev in evs {
            self.evs.push_back(*ev);
        }
        self.pushed += evs.len() as u64;
    }
}

/// A poll, as the details pane lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentPoll {
    /// Task id.
    pub task: u64,
    /// Worker index (`runtrace_format::NO_WORKER`: none).
    pub worker: u32,
    /// Ticks of its start.
    pub start: u64,
    /// Its length, in ticks.
    pub ticks: u64,
    /// Its wake -> poll delay, in ticks (None: no wake seen).
    pub delay: Option<u64>,
}

/// What a worker was doing at the window's end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerNow {
    /// The poll open at `t1`: (task, location, start ticks).
    pub polling: Option<(u64, u32, u64)>,
    /// The local queue depth last seen.
    pub local_q: u32,
    /// Its polls in the window.
    pub polls: u64,
}

/// The last [`RECENT`] polls of one location, oldest first when read.
#[derive(Debug, Clone, Copy)]
struct Recent {
    ring: [RecentPoll; RECENT],
    /// The slot the next poll goes to (the oldest once the ring is full).
    /// A wrapping index, not a count taken modulo [`RECENT`]: that was a
    /// division per poll end, a tenth of the pass's instructions with the
    /// call around it (callgrind of `replay_cost`).
    next: usize,
    /// Polls held (at most [`RECENT`]).
    n: usize,
}

const NO_POLL: RecentPoll = RecentPoll {
    task: 0,
    worker: 0,
    start: 0,
    ticks: 0,
    delay: None,
};

/// The pass beside the engine: what each worker polls now, recent polls
/// per location.
///
/// Both are kept in vectors indexed by the model's dense thread and
/// location indexes: this pass sees every poll of the window at every
/// refresh, and its two hash maps (by (thread, worker) and by location)
/// were 16% of `top`'s CPU while following (`perf record` of `top` on the
/// demo service, docs/measurements/top.md).
///
/// ```
/// use runtrace_model::{input, synth::TraceBuilder};
/// use runtrace_top::window::Now;
/// let mut b = TraceBuilder::new();
/// b.location(1, "src/main.rs", 3, 1);
/// b.spawn(7, 1_000, 1, 0, 1, 0);
/// b.poll_start(7, 0, 2_000, 1, 0, 0);
/// b.poll_end(7, 0, 3_000, 1, false);
/// b.poll_start(7, 0, 4_000, 1, 0, 0);
/// b.poll_end(7, 0, 5_000, 1, true);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let mut now = Now::default(); // the reader pairs its polls
/// let (model, _) = input::read(&[path], &mut now, None);
/// let w = now.worker(0, 0).unwrap();
/// assert_eq!((w.polls, w.polling), (2, None));
/// let loc = model.locs.iter().position(|l| &*l.text == "src/main.rs:3:1").unwrap();
/// let starts: Vec<u64> = now.recent(loc as u32).map(|p| p.start).collect();
/// assert_eq!(starts.len(), 2);
/// assert!(starts[0] < starts[1], "oldest first");
/// ```
#[derive(Default)]
pub struct Now {
    /// By thread and worker index.
    workers: ByWorker<WorkerNow>,
    /// By location index.
    recent: Vec<Recent>,
}

impl Now {
    /// What worker `worker` on thread index `thread` was doing at the
    /// window's end.
    pub fn worker(&self, thread: u32, worker: u32) -> Option<&WorkerNow> {
        self.workers.get(thread, worker)
    }

    /// The last [`RECENT`] polls of location `loc` in the window, oldest
    /// first.
    pub fn recent(&self, loc: u32) -> impl DoubleEndedIterator<Item = &RecentPoll> {
        let (ring, first, n) = match self.recent.get(loc as usize) {
            Some(r) if r.n == RECENT => (&r.ring[..], r.next, r.n),
            Some(r) => (&r.ring[..], 0, r.n),
            None => (&[][..], 0, 0),
        };
        (0..n).map(move |i| &ring[(first + i) % RECENT])
    }

    /// Sets what `worker` on `thread` was doing (for a window said by
    /// [`crate::shared_now::SharedNow`]).
    pub(crate) fn set_worker(&mut self, thread: u32, worker: u32, now: WorkerNow) {
        *self.workers.entry(thread, worker) = now;
    }

    /// Adds a poll of location `loc` (newest last).
    #[inline(always)]
    pub(crate) fn push_recent(&mut self, loc: u32, poll: RecentPoll) {
        let li = loc as usize;
        if li >= self.recent.len() {
            self.recent.resize(
                li + 1,
                Recent {
                    ring: [NO_POLL; RECENT],
                    next: 0,
                    n: 0,
                },
            );
        }
        let r = &mut self.recent[li];
        r.ring[r.next] = poll;
        r.next = if r.next + 1 == RECENT { 0 } else { r.next + 1 };
        r.n = (r.n + 1).min(RECENT);
    }
}

impl Pass for Now {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE
    }
    /// Tasks, polls and wakes as records only (of the raw events, it
    /// reads parks).
    fn raw_kinds(&self) -> Kinds {
        Wants::LIFECYCLE.kinds().without_lifecycle()
    }
    #[inline]
    fn event(&mut self, ev: &Ev, _: &Model) {
        use runtrace_model::event::kind;
        if ev.kind == kind::PARK {
            self.workers.entry(ev.thread, ev.worker).local_q = ev.a;
        }
    }
    // Inlined into the tracker's step: most records (spawns, wakes, ends)
    // are no-ops here, and the call's prologue and epilogue were as costly
    // as the work (callgrind of `replay_cost`).
    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>, _: &Model) {
        match *rec {
            Life::PollStart(p) => {
                let w = self.workers.entry(p.thread, p.worker);
                w.polling = Some((p.task, p.loc, p.start));
                w.local_q = p.local_q;
            }
            Life::PollEnd(p) => {
                let w = self.workers.entry(p.thread, p.worker);
                w.polls += 1;
                if w.polling.is_some_and(|(t, ..)| t == p.task) {
                    w.polling = None;
                }
                self.push_recent(
                    p.loc,
                    RecentPoll {
                        task: p.task,
                        worker: p.worker,
                        start: p.start,
                        ticks: p.ticks(),
                        delay: p.delay_ticks(),
                    },
                );
            }
            Life::PollLost(p) => {
                if let Some(w) = self.workers.get_mut(p.thread, p.worker) {
                    w.polling = None;
                }
            }
            _ => {}
        }
    }
}

/// A window's analysis.
pub struct Analysed {
    /// `runtrace analyze`'s report over the window.
    pub report: Report,
    /// What the workers and locations were doing.
    pub now: Now,
    /// Tasks alive at the window's end, by location.
    pub alive: FxHashMap<u32, u64>,
    /// Events in the window.
    pub events: u64,
    /// The window's CPU samples, attributed to the polls they were taken
    /// in (None: the recording has no CPU profile).
    pub profile: Option<Profile>,
    /// The functions each location's polls ran or blocked in, by location
    /// text (empty until [`Analysed::add_functions`]).
    pub functions: HashMap<String, Vec<FunctionShare>>,
}

impl Analysed {
    /// Names the window's CPU samples with `names` (kept by the caller
    /// from window to window: stacks repeat) and adds what they say, as
    /// `runtrace analyze` does: each finding's functions and verdict
    /// (burning CPU, or blocked, in which function), and every location's
    /// functions ([`Analysed::functions`]). Nothing without a CPU profile.
    pub fn add_functions(&mut self, names: &mut StackNames) {
        let Some(p) = &self.profile else {
            return;
        };
        self.report.add_functions(p, names);
        self.functions = location_functions(p, names);
    }
}

/// What the events a window analyses lost: events the recorder reported
/// dropped (over the window, when known), and whether a file they came
/// from was damaged. `runtrace analyze` judges `task_leak` and
/// `stuck_task` (wakes that never came) with a caveat on such a read, and
/// a window does the same.
///
/// ```
/// use runtrace_top::window::Losses;
/// // A replay of a recording whose recorder reported 3 events dropped.
/// let lost = Losses { dropped: 3, ..Losses::default() };
/// assert!(!lost.damaged);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Losses {
    /// Events the recorder reported dropped, its lost profiler samples
    /// left out (they hide no wake).
    pub dropped: u64,
    /// A file was damaged or cut short.
    pub damaged: bool,
}

/// Analyses the events of recording `proc` in `[t0, t1]` (ticks) of
/// `evs` (in time order; others are skipped) with the engine of
/// `runtrace analyze` and thresholds `th`, seeding the tasks and spans
/// `lives` says were alive at `t0`. The model's extent of `proc` is set to
/// the window while the report is built, and restored. A recording with a
/// CPU profile also has its window's samples attributed to polls
/// ([`Analysed::profile`]; named by [`Analysed::add_functions`]).
/// `lost`: what the events lost ([`Losses`]).
#[allow(clippy::too_many_arguments)]
pub fn analyze<'a>(
    model: &mut Model,
    proc: u32,
    evs: impl Iterator<Item = &'a Ev>,
    lives: &Lives,
    t0: u64,
    t1: u64,
    th: Thresholds,
    lost: Losses,
) -> Analysed {
    let w = Window {
        proc,
        lives,
        t0,
        t1,
        lost,
    };
    // The profile's pass costs a poll's bookkeeping per poll: only for a
    // recording with a CPU profile, and then as a pass of its own type
    // (a disabled pass beside the engine made a 5 s window 50-55 ms
    // instead of 47-48, `replay_cost` on the demo's 12 s recording).
    let ((report, now, profile), n) = if model.profiles.is_empty() {
        w.run(model, evs, plain(th), take_plain)
    } else {
        w.run(model, evs, profiled(th), take_profiled)
    };
    analysed(report, now, profile, lives, proc, t1, n)
}

/// A window's passes: the engine and [`Now`].
pub type Plain = (Engine, Now);
/// A window's passes with a CPU profile: [`Plain`] and the profile's.
pub type Profiled = (Plain, ProfilePass);

/// Fresh [`Plain`] passes judging by `th`.
pub fn plain(th: Thresholds) -> Plain {
    (Engine::new(th), Now::default())
}

/// Fresh [`Profiled`] passes judging by `th`.
pub fn profiled(th: Thresholds) -> Profiled {
    (plain(th), ProfilePass::default())
}

/// What a window's finished passes say: the report, [`Now`], and the
/// profile's attribution (None: no CPU profile).
pub type Taken = (Report, Now, Option<Profile>);

/// What finished [`Plain`] passes say.
pub fn take_plain((e, now): Plain, m: &Model, st: ReadStats) -> Taken {
    (e.report(m, st), now, None)
}

/// What finished [`Profiled`] passes say.
pub fn take_profiled(((e, now), p): Profiled, m: &Model, st: ReadStats) -> Taken {
    (e.report(m, st.clone()), now, Some(p.profile(m, st)))
}

/// The window's analysis from its passes' results: `n` events, ending at
/// `t1`.
pub(crate) fn analysed(
    report: Report,
    now: Now,
    profile: Option<Profile>,
    lives: &Lives,
    proc: u32,
    t1: u64,
    n: u64,
) -> Analysed {
    let mut alive: FxHashMap<u32, u64> = FxHashMap::default();
    lives.alive_locs_at(proc, t1, |loc| *alive.entry(loc).or_default() += 1);
    Analysed {
        report,
        now,
        alive,
        events: n,
        profile,
        functions: HashMap::new(),
    }
}

/// Where a window is: recording `proc` over `[t0, t1]`, seeded from
/// `lives`.
pub(crate) struct Window<'l> {
    pub(crate) proc: u32,
    pub(crate) lives: &'l Lives,
    pub(crate) t0: u64,
    pub(crate) t1: u64,
    pub(crate) lost: Losses,
}

impl Window<'_> {
    /// Runs `pass` (through a lifecycle tracker seeded with the tasks and
    /// spans alive at `t0`) over the window's events of `evs`, and `take`s
    /// its results with the model's extent of the recording set to the
    /// window (the others empty), then restored. Also returns the events
    /// run.
    fn run<'a, P: Pass, R>(
        &self,
        model: &mut Model,
        evs: impl Iterator<Item = &'a Ev>,
        pass: P,
        take: impl FnOnce(P, &Model, ReadStats) -> R,
    ) -> (R, u64) {
        let (proc, t0, t1) = (self.proc, self.t0, self.t1);
        let mut passes = Tracked::new(pass);
        for l in self.lives.alive_at(proc, t0) {
            passes.tracker().seed(proc, l.task, l.loc, l.from);
        }
        for s in self.lives.spans.alive_at(proc, t0) {
            passes.tracker().spans.seed(s.span());
        }
        let mut n = 0u64;
        for ev in evs {
            if ev.ticks < t0 || ev.ticks > t1 {
                continue;
            }
            let Some(th) = model.threads.get(ev.thread as usize) else {
                continue;
            };
            if th.proc != proc {
                continue;
            }
            passes.event(ev, model);
            n += 1;
        }
        self.report(
            model,
            n,
            passes,
            |p, m| p.finish(m),
            |p, m, st| take(p.pass, m, st),
        )
    }

    /// Finishes `pass` (fed `n` events of the window) with `finish`, and
    /// `take`s its results, with the model's extent of the recording set to
    /// the window (the others empty), then restored. Also returns `n`.
    pub(crate) fn report<P, R>(
        &self,
        model: &mut Model,
        n: u64,
        mut pass: P,
        finish: impl FnOnce(&mut P, &Model),
        take: impl FnOnce(P, &Model, ReadStats) -> R,
    ) -> (R, u64) {
        let (proc, t0, t1) = (self.proc, self.t0, self.t1);
        let saved: Vec<(u64, u64, u64)> = model
            .procs
            .iter()
            .map(|p| (p.first_ticks, p.last_ticks, p.events))
            .collect();
        for (i, p) in model.procs.iter_mut().enumerate() {
            if i as u32 == proc {
                p.first_ticks = t0;
                p.last_ticks = t1;
                p.events = n;
            } else {
                p.events = 0;
            }
        }
        finish(&mut pass, model);
        let stats = ReadStats {
            events: n,
            dropped: self.lost.dropped,
            damaged: self.lost.damaged,
            ..ReadStats::default()
        };
        let r = take(pass, model, stats);
        for (p, s) in model.procs.iter_mut().zip(saved) {
            (p.first_ticks, p.last_ticks, p.events) = s;
        }
        (r, n)
    }
}
