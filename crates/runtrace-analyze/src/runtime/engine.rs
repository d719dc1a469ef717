//! The analysis state machine: consumes compact events in timestamp order
//! and keeps only bounded state (live tasks, one entry per worker, thread
//! and spawn location, fixed-size histograms and per-worker rings of recent
//! polls).

use super::ctx::Ctx;
use super::state::*;
use super::thresholds::Thresholds;
use super::waiting::Waiting;
use runtrace_model::event::{kind, Ev};
use runtrace_model::hist::Histogram;
use runtrace_model::lifecycle::{Life, Poll};
use runtrace_model::model::{Model, UNKNOWN_LOC};
use runtrace_model::pass::{Kinds, Pass, Wants};

/// How stale a sampled schedstat read may be (docs/analysis.md: read at
/// most every 10 ms per worker by the tokio hooks, SCHED_SAMPLE_HZ in
/// runtrace-tokio).
const SCHED_SAMPLE_SLACK_NS: u64 = 10_000_000;
/// Polls remembered per worker for the delayed-window analysis.
const RING_CAP: usize = 1 << 14;

/// The runtime analysis (`runtrace analyze`) as a [`Pass`]: per-worker
/// and per-location statistics, percentiles and the evidence of findings,
/// in state bounded by live tasks, workers and locations. Its report:
/// [`Engine::report`].
///
/// ```
/// use runtrace_analyze::runtime::Engine;
/// use runtrace_model::{input, synth::TraceBuilder};
/// let mut b = TraceBuilder::new();
/// b.poll_start(1, 0, 1_000, 7, 0, 0);
/// b.poll_end(1, 0, 3_000, 7, true);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let mut e = Engine::new(Default::default());
/// let (model, stats) = input::read(&[path], &mut e, None);
/// assert_eq!(e.report(&model, stats).poll_ns.max, 2_000);
/// ```
#[derive(Clone)]
pub struct Engine {
    pub(crate) th: Thresholds,
    pub(crate) procs: Vec<ProcState>,
    pub(crate) threads: Vec<ThreadState>,
    pub(crate) workers: Vec<Worker>,
    pub(crate) locs: Vec<LocStats>,
    pub(crate) poll: Histogram,
    pub(crate) wake: Histogram,
    pub(crate) global_q: QueueStats,
    /// By [`Model::queues`] index.
    pub(crate) queues: Vec<QueueStats>,
    pub(crate) spawns: u64,
    pub(crate) terminated: u64,
    /// Of those, tasks with no spawn or poll in the trace.
    pub(crate) terminated_unseen: u64,
    pub(crate) unmatched_poll_ends: u64,
    pub(crate) unmatched_poll_starts: u64,
    pub(crate) late_events: u64,
    pub(crate) dropped_orphan_wakes: u64,
    last_ticks_seen: u64,
    /// Every delayed window, when kept ([`Engine::keep_waits`]; the
    /// `runtrace blocked` analysis), at most `waits_cap` of them.
    pub(crate) waits: Vec<Window>,
    pub(crate) waits_cap: usize,
    /// Delayed windows not kept (over `waits_cap`).
    pub(crate) waits_lost: u64,
    /// (location, victim-attributed ns, buildup-attributed ns, raw overlap
    /// ns) of the polls in one delayed window.
    scratch: Vec<(u32, u64, u64, u64)>,
    /// What tasks waited for (leaks, stuck tasks, locks, resources).
    pub(crate) waiting: Waiting,
    /// The span table, from the same records.
    pub(crate) spans: crate::spans::SpanPass,
    /// Runtime names (name index) by (process, runtime).
    pub(crate) runtime_names: std::collections::HashMap<(u32, u32), u32>,
}

impl Pass for Engine {
    /// The lifecycle, and the application events (`runtrace::sync`'s
    /// named locks, for `lock_convoy`).
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE.or(Wants::APP).or(Wants::SPANS)
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, model: &Model) {
        self.event_in(ev, None, model)
    }

    /// Tasks, polls and wakes come as records only (and are counted as
    /// events there: see `Engine::seen`).
    fn raw_kinds(&self) -> Kinds {
        self.wants().kinds().without_lifecycle()
    }

    #[inline(always)]
    fn event_in(&mut self, ev: &Ev, open: Option<&Poll>, model: &Model) {
        if matches!(
            ev.kind,
            // Tasks and polls come paired, as lifecycle records (a pass run
            // beside this one may still want them raw).
            kind::POLL_START | kind::POLL_END | kind::WAKE | kind::SPAWN | kind::TERMINATE
        ) {
            return;
        }
        self.seen(ev.ticks);
        if ev.thread as usize >= self.threads.len() {
            self.sync(model);
        }
        self.step(ev, model, open);
    }

    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        match *rec {
            Life::PollStart(p) => {
                self.seen(p.start);
                if p.thread as usize >= self.threads.len() {
                    self.sync(model);
                }
                let delay = self.poll_start(p);
                self.waiting.poll_start(p, delay);
            }
            Life::PollEnd(p) => {
                self.seen(p.end);
                self.spans.poll_end(p, model);
                let ns = self.poll_end(p);
                self.waiting.poll_end(p, ns, model);
            }
            Life::Wake(w) => {
                self.seen(w.ticks);
                self.waiting.wake(w, model);
            }
            Life::Spawn(t) => {
                self.seen(t.spawn.unwrap_or(0));
                self.spawns += 1;
                if t.loc as usize >= self.locs.len() {
                    self.sync(model);
                }
                self.locs[t.loc as usize].tasks += 1;
                self.waiting.born(t);
            }
            Life::Seen(t) => {
                self.locs[UNKNOWN_LOC as usize].tasks += 1;
                self.waiting.born(t);
            }
            Life::End(t) => {
                // Its terminate (None: its id spawned again, and that
                // spawn's record is counted).
                if let Some(end) = t.end {
                    self.seen(end);
                }
                self.terminated += t.end.is_some() as u64;
                self.terminated_unseen +=
                    (t.end.is_some() && t.spawn.is_none() && t.first_poll.is_none()) as u64;
                self.waiting.end(t, t.end, model);
            }
            Life::Alive(t) => {
                if t.proc as usize >= self.procs.len() {
                    self.sync(model);
                }
                self.procs[t.proc as usize].live_tasks += 1;
                self.waiting.end(t, None, model);
            }
            Life::PollLost(_) => self.unmatched_poll_starts += 1,
            Life::EndUnmatched(ev) => {
                self.seen(ev.ticks);
                self.unmatched_poll_ends += 1;
            }
            Life::WakesForgotten(n) => self.dropped_orphan_wakes += n,
            Life::SpanNew(_)
            | Life::SpanEnter(_)
            | Life::SpanExit(_)
            | Life::SpanClose(_)
            | Life::SpanAlive(_) => self.spans.life(rec, model),
        }
    }

    /// A new recording starts after this one: forget its order.
    fn end_recording(&mut self, _model: &Model) {
        self.last_ticks_seen = 0;
    }

    fn finish(&mut self, model: &Model) {
        self.sync(model);
        self.close(model);
        self.waiting.finish(model);
    }
}

impl Engine {
    /// What findings need to name workers and locations.
    pub(crate) fn ctx<'a>(&'a self, m: &'a Model) -> Ctx<'a> {
        Ctx {
            m,
            workers: &self.workers,
            locs: &self.locs,
        }
    }

    /// An engine judging findings by `th`.
    pub fn new(th: Thresholds) -> Engine {
        Engine {
            th,
            procs: Vec::new(),
            threads: Vec::new(),
            workers: Vec::new(),
            locs: vec![LocStats::new()], // UNKNOWN_LOC
            poll: Histogram::new(),
            wake: Histogram::new(),
            global_q: QueueStats::default(),
            queues: Vec::new(),
            spawns: 0,
            terminated: 0,
            terminated_unseen: 0,
            unmatched_poll_ends: 0,
            unmatched_poll_starts: 0,
            late_events: 0,
            dropped_orphan_wakes: 0,
            last_ticks_seen: 0,
            waits: Vec::new(),
            waits_cap: 0,
            waits_lost: 0,
            scratch: Vec::new(),
            waiting: Waiting::default(),
            spans: Default::default(),
            runtime_names: Default::default(),
        }
    }

    /// Keeps every delayed window (a poll that started more than
    /// `wake_delay_ns` after its wake), up to `cap` of them, for
    /// [`Engine::waits`]. Off by default (the report needs only counts).
    pub fn keep_waits(&mut self, cap: usize) {
        self.waits_cap = cap;
    }

    /// An event at `ticks`, in the order read: counted in `late_events`
    /// when older than one before it. Every event comes here once: the
    /// lifecycle's kinds as their records (one [`Life::Spawn`],
    /// [`Life::Wake`], [`Life::PollStart`], [`Life::PollEnd`] or
    /// [`Life::EndUnmatched`], or [`Life::End`] with its terminate, per
    /// event), the others raw.
    #[inline(always)]
    fn seen(&mut self, ticks: u64) {
        // Without a branch (most events are in order, but which are not
        // is not predictable).
        self.late_events += (ticks < self.last_ticks_seen) as u64;
        self.last_ticks_seen = self.last_ticks_seen.max(ticks);
    }

    /// Grows the per-process, per-thread, per-location and per-queue state
    /// to the model's tables (cold: new threads are rare).
    #[cold]
    fn sync(&mut self, m: &Model) {
        for p in &m.procs[self.procs.len()..] {
            self.procs.push(ProcState {
                scale: p.scale,
                live_tasks: 0,
                last_sample_q: 0,
                global_q: 0,
                idle: Idle::default(),
            });
        }
        for t in &m.threads[self.threads.len()..] {
            self.threads.push(ThreadState {
                proc: t.proc,
                first: None,
                workers: Vec::new(),
            });
        }
        if self.locs.len() < m.locs.len() {
            self.locs.resize_with(m.locs.len(), LocStats::new);
        }
        if self.queues.len() < m.queues.len() {
            self.queues.resize_with(m.queues.len(), QueueStats::default);
        }
    }

    /// The engine's index of `worker` on `thread`.
    #[inline]
    fn worker_idx(&mut self, thread: u32, worker: u32) -> u32 {
        let t = &self.threads[thread as usize];
        if let Some((w, i)) = t.first {
            if w == worker {
                return i;
            }
        }
        for &(w, i) in &t.workers {
            if w == worker {
                return i;
            }
        }
        self.new_worker(thread, worker)
    }

    #[cold]
    fn new_worker(&mut self, thread: u32, worker: u32) -> u32 {
        let proc = self.threads[thread as usize].proc;
        let idx = self.workers.len() as u32;
        self.workers.push(Worker {
            proc,
            thread,
            worker,
            runtime: None,
            saw_executor: false,
            saw_tokio: false,
            polls: 0,
            busy_ns: 0,
            parked_ns: 0,
            parks: 0,
            max_local_q: 0,
            local_q: 0,
            sched_wait_ns: 0,
            run_ms: 0,
            first_cpu_ms: None,
            parked: false,
            park_start: 0,
            over: false,
            last_sched_wait: None,
            scale: self.procs[proc as usize].scale,
            ring: Vec::new(),
            ring_head: 0,
            loc_polls: Vec::new(),
            upto_victim: Vec::new(),
            buildup: Box::default(),
            long_since_unpark: Vec::new(),
            last_unpark: 0,
        });
        let t = &mut self.threads[thread as usize];
        if t.first.is_none() {
            t.first = Some((worker, idx));
        } else {
            t.workers.push((worker, idx));
        }
        idx
    }

    /// Processes one event other than the lifecycle's (those come as
    /// records). Events must come in timestamp order; a late one is still
    /// processed (counted in `late_events` by [`Pass::event`]).
    #[inline(always)]
    fn step(&mut self, ev: &Ev, m: &Model, open: Option<&Poll>) {
        match ev.kind {
            kind::PARK => self.park(ev),
            kind::UNPARK => self.unpark(ev),
            kind::QUEUE_SAMPLE => self.queue_sample(ev, m),
            kind::WORKER_START | kind::WORKER_STOP => {
                let w = self.worker_idx(ev.thread, ev.worker);
                self.workers[w as usize].runtime = Some(ev.a);
            }
            kind::RUNTIME_NAME => {
                let proc = self.proc_of(ev.thread);
                self.runtime_names.insert((proc, ev.x as u32), ev.worker);
            }
            _ => self.waiting.event(ev, open, m),
        }
    }

    fn proc_of(&self, thread: u32) -> u32 {
        self.threads[thread as usize].proc
    }

    #[inline(always)]
    /// Returns the wake -> poll delay in ns, when the wake was seen.
    fn poll_start(&mut self, p: &Poll) -> Option<u64> {
        let wi = self.worker_idx(p.thread, p.worker);
        let pi = self.threads[p.thread as usize].proc as usize;
        let loc = p.loc;
        let local_q = p.local_q;
        let w = &mut self.workers[wi as usize];
        if p.executor {
            if !w.saw_executor {
                w.saw_executor = true;
            }
        } else if !w.saw_tokio {
            w.saw_tokio = true;
        }
        w.local_q = local_q;
        w.max_local_q = w.max_local_q.max(local_q);
        let was_parked = w.parked;
        let over = local_q > self.th.idle_local_q;
        let over_changed = over != w.over;
        if was_parked || over_changed {
            self.worker_state(wi, p.start, false, over);
        } else if over && self.procs[pi].idle.active {
            let idle = &mut self.procs[pi].idle;
            idle.cur_max_q = idle.cur_max_q.max(local_q);
        }
        // Wake -> poll delay.
        match p.wake {
            None => {
                self.locs[loc as usize].uncovered_polls += 1;
                None
            }
            Some(wake) => {
                let scale = self.procs[pi].scale;
                let delay = scale.ns(p.start.saturating_sub(wake));
                self.locs[loc as usize].wake.record(delay);
                if delay > self.th.wake_delay_ns {
                    self.delayed_window(wi, loc, wake, p.start, delay, p.task, local_q);
                }
                Some(delay)
            }
        }
    }

    #[inline(always)]
    /// Returns the poll's length in ns.
    fn poll_end(&mut self, o: &Poll) -> u64 {
        let wi = self.worker_idx(o.thread, o.worker);
        let w = &mut self.workers[wi as usize];
        let ns = w.scale.ns(o.ticks());
        w.polls += 1;
        w.busy_ns = w.busy_ns.saturating_add(ns);
        let li = o.loc as usize;
        if li >= w.loc_polls.len() {
            w.loc_polls.resize(li + 1, (0, 0));
        }
        w.loc_polls[li].0 += 1;
        w.loc_polls[li].1 = w.loc_polls[li].1.saturating_add(ns);
        let e = RingEntry {
            start: o.start,
            end: o.end,
            loc: o.loc,
            local_q: o.local_q,
        };
        if w.ring.len() < RING_CAP {
            w.ring.push(e);
        } else {
            w.ring[w.ring_head] = e;
        }
        w.ring_head = (w.ring_head + 1) % RING_CAP;
        let loc = &mut self.locs[li];
        loc.poll.record(ns);
        if ns > self.th.long_poll_ns {
            loc.long_polls += 1;
            if ns > self.th.long_poll_critical_ns {
                loc.critical_polls += 1;
            }
            long_poll_seen(loc, o.task, ns);
            if w.long_since_unpark.len() < MAX_PENDING_LONG {
                w.long_since_unpark.push((o.loc, ns));
            }
        }
        if loc.worst_poll.is_none_or(|p| ns > p.ns) {
            loc.worst_poll = Some(PollRef {
                ns,
                start: o.start,
                worker: wi,
                task: o.task,
            });
        }
        let (pi, scale, parked) = (w.proc as usize, w.scale, w.parked);
        let idle = &mut self.procs[pi].idle;
        if idle.active && !parked {
            let from = o.start.max(idle.start);
            if o.end > from {
                let n = scale.ns(o.end - from);
                if o.loc as usize >= idle.cur_locs.len() {
                    idle.cur_locs.resize(o.loc as usize + 1, 0);
                }
                if idle.cur_locs[o.loc as usize] == 0 {
                    idle.touched.push(o.loc);
                }
                idle.cur_locs[o.loc as usize] =
                    idle.cur_locs[o.loc as usize].saturating_add(n.max(1));
            }
        }
        ns
    }

    fn park(&mut self, ev: &Ev) {
        let wi = self.worker_idx(ev.thread, ev.worker);
        let w = &mut self.workers[wi as usize];
        w.local_q = ev.a;
        w.max_local_q = w.max_local_q.max(ev.a);
        if w.parked {
            return; // A lost unpark: keep the first park.
        }
        w.parks += 1;
        self.worker_state(wi, ev.ticks, true, false);
    }

    fn unpark(&mut self, ev: &Ev) {
        let wi = self.worker_idx(ev.thread, ev.worker);
        let w = &mut self.workers[wi as usize];
        if let Some(prev) = w.last_sched_wait {
            let waited = ev.x.saturating_sub(prev);
            w.sched_wait_ns = w.sched_wait_ns.saturating_add(waited);
            // A long poll since the last unpark is preempted when, even if
            // the worker waited for a CPU during all the rest of the time
            // from that unpark to this one (other polls and the park
            // included: the wait to run after a wake-up ends at the
            // unpark), plus the staleness of a sampled schedstat read, at
            // least half of its time was still waiting. A poll that slept
            // (a blocking call) is not runnable: it never counts as waiting.
            let span = w.scale.ns(ev.ticks.saturating_sub(w.last_unpark));
            for &(l, ns) in &w.long_since_unpark {
                let rest = span
                    .saturating_sub(ns)
                    .saturating_add(SCHED_SAMPLE_SLACK_NS);
                if waited >= rest.saturating_add(ns / 2) {
                    self.locs[l as usize].preempted_polls += 1;
                }
            }
        }
        let w = &mut self.workers[wi as usize];
        let first = *w.first_cpu_ms.get_or_insert(ev.a);
        w.run_ms = w.run_ms.max(ev.a.saturating_sub(first) as u64);
        w.long_since_unpark.clear();
        w.last_sched_wait = Some(ev.x);
        w.last_unpark = ev.ticks;
        if w.parked {
            let over = w.over;
            self.worker_state(wi, ev.ticks, false, over);
        }
    }

    /// Moves worker `wi` to parked / unparked with local queue `over` the
    /// idle threshold, keeping the process's idle-while-queued counters.
    fn worker_state(&mut self, wi: u32, ticks: u64, parked: bool, over: bool) {
        let w = &mut self.workers[wi as usize];
        let pi = w.proc as usize;
        let tokio_like = !w.is_executor();
        let idle = &mut self.procs[pi].idle;
        if w.parked != parked {
            if parked {
                w.park_start = ticks;
                idle.parked += 1;
                idle.parked_tokio += tokio_like as u32;
                idle.last_parked = wi;
            } else {
                w.parked_ns = w
                    .parked_ns
                    .saturating_add(w.scale.ns(ticks.saturating_sub(w.park_start)));
                idle.parked = idle.parked.saturating_sub(1);
                idle.parked_tokio = idle.parked_tokio.saturating_sub(tokio_like as u32);
            }
            w.parked = parked;
        }
        // Only work-stealing workers count: a runtrace executor neither
        // takes nor gives away queued tasks, so its queue is nobody else's
        // idle time, and its parking does not leave stealable work behind.
        let over = over && !parked && tokio_like;
        if over != w.over {
            if over {
                idle.over += 1;
            } else {
                idle.over = idle.over.saturating_sub(1);
            }
            w.over = over;
        }
        self.idle_update(pi, ticks);
    }

    fn queue_sample(&mut self, ev: &Ev, m: &Model) {
        if ev.worker != u32::MAX && ev.worker as usize >= self.queues.len() {
            self.sync(m);
        }
        let g = ev.a as u64;
        self.global_q.samples += 1;
        self.global_q.sum = self.global_q.sum.saturating_add(g);
        self.global_q.max = self.global_q.max.max(g);
        if ev.worker != u32::MAX {
            if let Some(q) = self.queues.get_mut(ev.worker as usize) {
                q.samples += 1;
                q.sum = q.sum.saturating_add(ev.x);
                q.max = q.max.max(ev.x);
            }
        }
        let pi = self.proc_of(ev.thread) as usize;
        let p = &mut self.procs[pi];
        p.global_q = if p.last_sample_q > 0 { ev.a } else { 0 };
        p.last_sample_q = ev.a;
        let (gq, idle) = (p.global_q, &mut p.idle);
        if idle.active {
            idle.cur_max_global = idle.cur_max_global.max(gq);
        }
        self.idle_update(pi, ev.ticks);
    }

    fn idle_update(&mut self, pi: usize, ticks: u64) {
        let p = &mut self.procs[pi];
        let idle = &mut p.idle;
        let cond = idle.parked_tokio > 0 && (idle.over > 0 || p.global_q > 0);
        if cond == idle.active {
            return;
        }
        if cond {
            // Name the worker parked longest, and the deepest queue.
            let (mut parked, mut since) = (idle.last_parked, u64::MAX);
            let (mut over, mut depth) = (u32::MAX, 0);
            for (i, w) in self.workers.iter().enumerate() {
                if w.proc as usize != pi {
                    continue;
                }
                if w.parked && !w.is_executor() && w.park_start < since {
                    (parked, since) = (i as u32, w.park_start);
                }
                if w.over && w.local_q > depth {
                    (over, depth) = (i as u32, w.local_q);
                }
            }
            idle.active = true;
            idle.start = ticks;
            idle.cur_parked = parked;
            idle.cur_over = over;
            idle.cur_max_q = depth;
            idle.cur_max_global = p.global_q;
            return;
        }
        idle.active = false;
        let ns = p.scale.ns(ticks.saturating_sub(idle.start));
        let keep = ns >= self.th.idle_min_window_ns;
        for &l in &idle.touched {
            let v = std::mem::take(&mut idle.cur_locs[l as usize]);
            if keep {
                bump(&mut idle.locs, l, v);
            }
        }
        idle.touched.clear();
        if !keep {
            return;
        }
        idle.windows += 1;
        idle.total_ns = idle.total_ns.saturating_add(ns);
        if idle.longest.is_none_or(|l| ns > l.ns) {
            idle.longest = Some(IdleWindow {
                start: idle.start,
                end: ticks,
                ns,
                parked: idle.cur_parked,
                queued: idle.cur_over,
                max_local_q: idle.cur_max_q,
                max_global_q: idle.cur_max_global,
            });
        }
    }

    /// A poll of a task of location `victim` on worker `wi` started `delay`
    /// ns after its wake: find what the worker ran meanwhile (from its ring
    /// of recent polls) and whether its local queue was deep.
    #[allow(clippy::too_many_arguments)]
    #[cold]
    fn delayed_window(
        &mut self,
        wi: u32,
        victim: u32,
        wake: u64,
        poll: u64,
        delay: u64,
        task: u64,
        local_q: u32,
    ) {
        let th_q = self.th.local_q;
        let w = &mut self.workers[wi as usize];
        if victim as usize >= w.upto_victim.len() {
            w.upto_victim.resize(victim as usize + 1, 0);
        }
        let upto_v = w.upto_victim[victim as usize];
        let upto_w = w.buildup.upto;
        let mut max_q = local_q;
        self.scratch.clear();
        let n = w.ring.len();
        for k in 0..n {
            let i = (w.ring_head + RING_CAP - 1 - k) % RING_CAP;
            let Some(e) = w.ring.get(i) else { break };
            if e.end <= wake {
                break;
            }
            if e.start >= poll {
                continue;
            }
            max_q = max_q.max(e.local_q);
            let hi = e.end.min(poll);
            let raw = hi.saturating_sub(e.start.max(wake));
            let v = hi.saturating_sub(e.start.max(wake).max(upto_v));
            let b = hi.saturating_sub(e.start.max(wake).max(upto_w));
            if raw > 0 {
                let ns = |t| w.scale.ns(t);
                self.scratch.push((e.loc, ns(v), ns(b), ns(raw)));
            }
            if v == 0 && b == 0 && max_q > th_q {
                break; // Already attributed, and the queue was deep.
            }
        }
        let culprit = culprit(&self.scratch);
        w.upto_victim[victim as usize] = upto_v.max(poll);
        let win = Window {
            delay_ns: delay,
            wake,
            poll,
            worker: wi,
            task,
            victim,
            max_local_q: max_q,
        };
        if self.waits.len() < self.waits_cap {
            self.waits.push(win);
        } else if self.waits_cap > 0 {
            self.waits_lost += 1;
        }
        let d = &mut self.locs[victim as usize].delayed;
        d.count += 1;
        if d.worst.is_none_or(|x| delay > x.delay_ns) {
            d.worst = Some(win);
        }
        for &(l, v, _, _) in &self.scratch {
            bump(&mut d.blockers, l, v);
        }
        match culprit {
            Some(c) => {
                let c = c as usize;
                if c >= d.by_culprit.len() {
                    d.by_culprit.resize(c + 1, (0, 0));
                }
                d.by_culprit[c].0 += 1;
                d.by_culprit[c].1 = d.by_culprit[c].1.max(delay);
            }
            None => d.unexplained += 1,
        }
        if max_q > th_q {
            let bu = &mut w.buildup;
            bu.upto = upto_w.max(poll);
            bu.count += 1;
            bu.max_local_q = bu.max_local_q.max(max_q);
            if bu.worst.is_none_or(|x| delay > x.delay_ns) {
                bu.worst = Some(win);
            }
            bump(&mut bu.victims, victim, 1);
            bump(&mut bu.victims_worst, victim, 0);
            let vw = &mut bu.victims_worst[victim as usize];
            *vw = (*vw).max(delay);
            for &(l, _, b, _) in &self.scratch {
                bump(&mut bu.blockers, l, b);
            }
        }
    }

    /// Closes what is still open at the end of the trace, and sums the
    /// per-location histograms into the overall ones.
    fn close(&mut self, m: &Model) {
        for l in &self.locs {
            self.poll.merge(&l.poll);
            self.wake.merge(&l.wake);
        }
        for wi in 0..self.workers.len() {
            let w = &mut self.workers[wi];
            if w.parked {
                let end = m.procs[w.proc as usize].last_ticks.max(w.park_start);
                w.parked_ns = w.parked_ns.saturating_add(w.scale.ns(end - w.park_start));
            }
        }
        for pi in 0..self.procs.len() {
            if self.procs[pi].idle.active {
                let end = m.procs[pi].last_ticks;
                // Force the window closed.
                let p = &mut self.procs[pi];
                p.idle.over = 0;
                p.idle.parked = 0;
                p.idle.parked_tokio = 0;
                self.idle_update(pi, end);
            }
        }
    }
}

/// The location that occupied the worker longest in one delayed window
/// (the sum of its polls' overlap with the window), if any ran.
fn culprit(scratch: &[(u32, u64, u64, u64)]) -> Option<u32> {
    let mut best: Option<(u32, u64)> = None;
    for (i, &(l, ..)) in scratch.iter().enumerate() {
        if scratch[..i].iter().any(|x| x.0 == l) {
            continue; // Summed at its first entry.
        }
        let sum: u64 = scratch[i..].iter().filter(|x| x.0 == l).map(|x| x.3).sum();
        if best.is_none_or(|b| sum > b.1) {
            best = Some((l, sum));
        }
    }
    best.map(|b| b.0)
}

/// Counts a long poll of `task` for the spread of its location's long
/// polls over tasks (bounded).
fn long_poll_seen(loc: &mut LocStats, task: u64, ns: u64) {
    let n = loc.bad_tasks.len();
    match loc.bad_tasks.get_mut(&task) {
        Some(t) => {
            t.0 += 1;
            t.1 += ns;
        }
        None if n < MAX_BAD_TASKS => {
            loc.bad_tasks.insert(task, (1, ns));
        }
        None => loc.bad_tasks_overflow += 1,
    }
}
