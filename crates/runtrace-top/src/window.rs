//! One window of a recording, analysed: runtrace-analyze's runtime
//! [`Engine`] (the pass and the findings' rules of `runtrace analyze`)
//! run over the events of `[t0, t1]`, beside [`Now`], a small pass for
//! what only a live view asks (what each worker polls at `t1`, the recent
//! polls of each location). Tasks alive at `t0` are seeded into the
//! window's lifecycle with their spawn location ([`Lives`]), so a task
//! spawned before the window is not `<unknown>` in it.
//!
//! Nothing here knows the terminal: [`crate::snapshot`] turns the result
//! into rows, `crate::ui` draws them.
//!
//! ```
//! use runtrace_model::{input, lifecycle::Tracked, synth::TraceBuilder};
//! use runtrace_top::window::{analyze, Collector};
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
//! let w = analyze(&mut model, 0, c.evs.iter(), &c.lives, 1_500_000_000, 2_100_000_000, Default::default());
//! assert_eq!(w.report.spawn_locations[0].location, "src/main.rs:3:1");
//! assert!(w.report.findings.iter().any(|f| f.kind.as_str() == "long_poll"));
//! ```

use runtrace_analyze::runtime::Engine;
use runtrace_analyze::{Report, Thresholds};
use runtrace_model::event::Ev;
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::input::ReadStats;
use runtrace_model::lifecycle::{Life, Tracked};
use runtrace_model::model::{Model, UNKNOWN_LOC};
use runtrace_model::pass::{Pass, Wants};
use std::collections::VecDeque;

/// Recent polls kept per spawn location for the details pane.
pub const RECENT: usize = 12;

/// One task life: where and when it began and ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifeSpan {
    /// Its recording ([`Model::procs`] index).
    pub proc: u32,
    /// Task id.
    pub task: u64,
    /// Spawn location ([`Model::locs`] index).
    pub loc: u32,
    /// Ticks of its spawn, or of its first sight.
    pub from: u64,
    /// Ticks of its end (`u64::MAX`: alive).
    pub end: u64,
}

/// Task lives by the lifecycle's serial number: what a window needs to
/// seed (tasks alive at its start) and to count tasks alive per location.
///
/// Kept as a vector in serial order (serials grow with each new life):
/// an append per life and a binary search per end. A hash map by serial
/// cost a quarter of opening a 9M-event recording (cache misses on a
/// table of a million lives); the vector is written in order. An end
/// finds its life through the live task's slot (a direct index), else by
/// binary search.
#[derive(Debug, Default, Clone)]
pub struct Lives {
    by_serial: Vec<(u32, LifeSpan)>,
    /// By live task slot ([`Task::slot`](runtrace_model::lifecycle::Task)):
    /// its life's position in `by_serial`, plus one (0: not known).
    at_slot: Vec<u32>,
}

impl Lives {
    /// Takes one lifecycle record.
    pub fn record(&mut self, rec: &Life<'_>) {
        match *rec {
            Life::Spawn(t) | Life::Seen(t) => {
                let from = t.spawn.or(t.first_poll).unwrap_or(0);
                let life = LifeSpan {
                    proc: t.proc,
                    task: t.task,
                    loc: t.loc,
                    from,
                    end: u64::MAX,
                };
                match self.by_serial.last() {
                    Some(&(last, _)) if last >= t.serial => {
                        match self.by_serial.binary_search_by_key(&t.serial, |e| e.0) {
                            Ok(i) => self.by_serial[i].1 = life,
                            Err(i) => {
                                // Positions after `i` move: forget them all.
                                self.by_serial.insert(i, (t.serial, life));
                                self.at_slot.clear();
                            }
                        }
                    }
                    _ => {
                        self.by_serial.push((t.serial, life));
                        let slot = t.slot as usize;
                        if slot < (1 << 24) {
                            if self.at_slot.len() <= slot {
                                self.at_slot.resize(slot + 1, 0);
                            }
                            self.at_slot[slot] = self.by_serial.len().min(u32::MAX as usize) as u32;
                        }
                    }
                }
            }
            Life::End(t) => {
                let by_slot = match self.at_slot.get(t.slot as usize) {
                    Some(&p) if p > 0 => Some(p as usize - 1)
                        .filter(|&i| self.by_serial.get(i).is_some_and(|e| e.0 == t.serial)),
                    _ => None,
                };
                let found = by_slot.map_or_else(
                    || self.by_serial.binary_search_by_key(&t.serial, |e| e.0),
                    Ok,
                );
                if let Ok(i) = found {
                    let l = &mut self.by_serial[i].1;
                    // Replaced by a new spawn of its id (`end: None`): over
                    // now, at the latest time known, its last event.
                    l.end = t.end.unwrap_or(l.from.max(t.first_poll.unwrap_or(0)));
                }
            }
            _ => {}
        }
    }

    /// Forgets lives that ended before `t` (a live view's window moved on).
    pub fn forget_before(&mut self, t: u64) {
        self.by_serial.retain(|(_, l)| l.end >= t);
        // Positions moved: ends of older lives take the binary search.
        self.at_slot.clear();
    }

    /// Lives alive at `t` (began at or before, not ended before) of
    /// recording `proc`.
    pub fn alive_at(&self, proc: u32, t: u64) -> impl Iterator<Item = &LifeSpan> {
        self.by_serial
            .iter()
            .map(|(_, l)| l)
            .filter(move |l| l.proc == proc && l.from <= t && l.end > t)
    }

    /// How many lives are kept.
    pub fn len(&self) -> usize {
        self.by_serial.len()
    }

    /// None kept.
    pub fn is_empty(&self) -> bool {
        self.by_serial.is_empty()
    }
}

/// The pass that collects a recording for windows: the runtime events in
/// time order, the task lives, and the memory profile's changes.
#[derive(Default)]
pub struct Collector {
    /// Runtime events, in time order.
    pub evs: VecDeque<Ev>,
    /// Task lives.
    pub lives: Lives,
    /// The sampled heap (profile events go there, not to `evs`).
    pub heap: crate::heap::Heap,
}

impl Pass for Collector {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE.or(Wants::PROFILE)
    }
    fn event(&mut self, ev: &Ev, model: &Model) {
        if Wants::PROFILE.has(ev.kind) {
            self.heap.event(ev, model);
            return;
        }
        self.evs.push_back(*ev);
    }
    fn life(&mut self, rec: &Life<'_>, _: &Model) {
        self.lives.record(rec);
    }
}

impl Collector {
    /// A collector fed through the lifecycle (what [`runtrace_model::input::follow`] needs).
    pub fn tracked() -> Tracked<Collector> {
        Tracked::new(Collector::default())
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
    /// Polls written (the newest is at `(n - 1) % RECENT`).
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
    /// By thread index: (worker, its state), one entry per worker index
    /// the thread ran as (one, but for a thread that changed runtimes).
    workers: Vec<Vec<(u32, WorkerNow)>>,
    /// By location index.
    recent: Vec<Recent>,
}

impl Now {
    /// What worker `worker` on thread index `thread` was doing at the
    /// window's end.
    pub fn worker(&self, thread: u32, worker: u32) -> Option<&WorkerNow> {
        self.workers
            .get(thread as usize)?
            .iter()
            .find(|(w, _)| *w == worker)
            .map(|(_, n)| n)
    }

    /// The last [`RECENT`] polls of location `loc` in the window, oldest
    /// first.
    pub fn recent(&self, loc: u32) -> impl DoubleEndedIterator<Item = &RecentPoll> {
        let (ring, n) = match self.recent.get(loc as usize) {
            Some(r) => (&r.ring[..], r.n),
            None => (&[][..], 0),
        };
        let first = n.saturating_sub(RECENT);
        (first..n).map(move |i| &ring[i % RECENT])
    }

    #[inline(always)]
    fn worker_mut(&mut self, thread: u32, worker: u32) -> &mut WorkerNow {
        let th = thread as usize;
        if th >= self.workers.len() {
            self.workers.resize_with(th + 1, Vec::new);
        }
        let ws = &mut self.workers[th];
        let i = match ws.iter().position(|(w, _)| *w == worker) {
            Some(i) => i,
            None => {
                ws.push((worker, WorkerNow::default()));
                ws.len() - 1
            }
        };
        &mut ws[i].1
    }
}

impl Pass for Now {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE
    }
    #[inline]
    fn event(&mut self, ev: &Ev, _: &Model) {
        use runtrace_model::event::kind;
        if ev.kind == kind::PARK {
            self.worker_mut(ev.thread, ev.worker).local_q = ev.a;
        }
    }
    #[inline]
    fn life(&mut self, rec: &Life<'_>, _: &Model) {
        match *rec {
            Life::PollStart(p) => {
                let w = self.worker_mut(p.thread, p.worker);
                w.polling = Some((p.task, p.loc, p.start));
                w.local_q = p.local_q;
            }
            Life::PollEnd(p) => {
                let w = self.worker_mut(p.thread, p.worker);
                w.polls += 1;
                if w.polling.is_some_and(|(t, ..)| t == p.task) {
                    w.polling = None;
                }
                let li = p.loc as usize;
                if li >= self.recent.len() {
                    self.recent.resize(
                        li + 1,
                        Recent {
                            ring: [NO_POLL; RECENT],
                            n: 0,
                        },
                    );
                }
                let r = &mut self.recent[li];
                r.ring[r.n % RECENT] = RecentPoll {
                    task: p.task,
                    worker: p.worker,
                    start: p.start,
                    ticks: p.ticks(),
                    delay: p.delay_ticks(),
                };
                r.n += 1;
            }
            Life::PollLost(p) => {
                if let Some(ws) = self.workers.get_mut(p.thread as usize) {
                    if let Some((_, w)) = ws.iter_mut().find(|(w, _)| *w == p.worker) {
                        w.polling = None;
                    }
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
}

/// Analyses the events of recording `proc` in `[t0, t1]` (ticks) of
/// `evs` (in time order; others are skipped) with the engine of
/// `runtrace analyze` and thresholds `th`, seeding the tasks `lives` says
/// were alive at `t0`. The model's extent of `proc` is set to the window
/// while the report is built, and restored.
pub fn analyze<'a>(
    model: &mut Model,
    proc: u32,
    evs: impl Iterator<Item = &'a Ev>,
    lives: &Lives,
    t0: u64,
    t1: u64,
    th: Thresholds,
) -> Analysed {
    let mut passes = Tracked::new((Engine::new(th), Now::default()));
    for l in lives.alive_at(proc, t0) {
        passes.tracker().seed(proc, l.task, l.loc, l.from);
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
    // The report sees the window as the recording's extent; the other
    // recordings as empty.
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
    passes.finish(model);
    let stats = ReadStats {
        events: n,
        ..ReadStats::default()
    };
    let (engine, now) = passes.pass;
    let report = engine.report(model, stats);
    for (p, s) in model.procs.iter_mut().zip(saved) {
        (p.first_ticks, p.last_ticks, p.events) = s;
    }
    let mut alive: FxHashMap<u32, u64> = FxHashMap::default();
    for l in lives.alive_at(proc, t1) {
        *alive.entry(l.loc).or_default() += 1;
    }
    let _ = UNKNOWN_LOC;
    Analysed {
        report,
        now,
        alive,
        events: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_model::lifecycle::Task;

    fn task(task: u64, serial: u32, slot: u32, from: u64, end: Option<u64>) -> Task {
        Task {
            task,
            serial,
            slot,
            proc: 0,
            loc: task as u32,
            parent: 0,
            queue: 0,
            spawn: Some(from),
            spawn_thread: 0,
            first_poll: None,
            end,
        }
    }

    fn alive(l: &Lives, t: u64) -> Vec<u64> {
        let mut v: Vec<u64> = l.alive_at(0, t).map(|x| x.task).collect();
        v.sort();
        v
    }

    /// Ends find their lives by slot (a reused slot ends the life that
    /// holds it now), by binary search after a forget or an out-of-order
    /// serial.
    #[test]
    fn ends_find_their_lives_by_slot_or_search() {
        let mut l = Lives::default();
        l.record(&Life::Spawn(&task(1, 0, 0, 10, None)));
        l.record(&Life::Spawn(&task(2, 1, 1, 20, None)));
        l.record(&Life::End(&task(1, 0, 0, 10, Some(30))));
        // Slot 0 reused by a new life.
        l.record(&Life::Spawn(&task(3, 2, 0, 40, None)));
        assert_eq!(alive(&l, 35), vec![2]);
        assert_eq!(alive(&l, 45), vec![2, 3]);
        l.forget_before(35);
        assert_eq!(l.len(), 2);
        // After the forget: found by search.
        l.record(&Life::End(&task(2, 1, 1, 20, Some(60))));
        assert_eq!(alive(&l, 65), vec![3]);
        // An out-of-order serial is inserted in place.
        l.record(&Life::Seen(&task(9, 1, 5, 70, None)));
        l.record(&Life::End(&task(3, 2, 0, 40, Some(80))));
        l.record(&Life::End(&task(9, 1, 5, 70, Some(90))));
        assert_eq!(alive(&l, 75), vec![3, 9]);
        assert!(alive(&l, 95).is_empty());
    }
}
