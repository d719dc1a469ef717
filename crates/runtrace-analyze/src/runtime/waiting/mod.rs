//! What tasks waited *for*, as opposed to waiting for a worker: tasks
//! that were never woken again (`task_leak`, `stuck_task`, from the
//! lifecycle alone), named locks of `runtrace::sync` held while others
//! waited (`lock_convoy`, from `lock_wait` / `lock_hold` joined with the
//! polls they happened in), and tokio's async resources (`resource_wait`,
//! `lock_held_across_await`, from the `resource_*` events runtrace-tokio's
//! layer records). docs/analysis.md ("Waiting") states the rules.
//!
//! [`Waiting`] is a part of the runtime [`super::Engine`]: it sees the
//! same lifecycle records, plus the application and resource events; its
//! findings join the others and are ordered by the same blame rules.
//!
//! ```
//! use runtrace_analyze::{analyze_bytes, Options};
//! use runtrace_model::synth::TraceBuilder;
//! let ms = 1_000_000;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/watch.rs", 9, 5);
//! // 60 watchers, one every 10 ms, each polled once and never woken.
//! for i in 0..60u64 {
//!     let t = 100 + i;
//!     b.spawn(t, i * 10 * ms, 1, 0, 1, 0);
//!     b.poll_start(t, 0, i * 10 * ms + 1_000, 1, 0, 0);
//!     b.poll_end(t, 0, i * 10 * ms + 2_000, 1, false);
//! }
//! b.poll_start(1, 0, 700 * ms, 1, 0, 0);
//! b.poll_end(1, 0, 700 * ms + 1_000, 1, true);
//! let r = analyze_bytes(&b.finish(), Options::default());
//! assert_eq!(r.findings[0].kind.as_str(), "task_leak");
//! assert_eq!(r.findings[0].spawn_loc.as_deref(), Some("src/watch.rs:9:5"));
//! ```

mod locks;
mod resources;
mod tasks;

use super::ctx::Ctx;
use super::report::Finding;
use super::thresholds::Thresholds;
use runtrace_model::event::{kind, Ev};
use runtrace_model::lifecycle::{Life, Poll};
use runtrace_model::model::Model;
use serde_json::Value;

const NONE: u64 = u64::MAX;

/// The poll open on a thread: its task, location and worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Open {
    pub task: u64,
    /// Its lifecycle slot ([`runtrace_model::lifecycle::Task::slot`]).
    pub slot: u32,
    pub loc: u32,
    pub worker: u32,
}

/// What the waiting analysis keeps per thread.
#[derive(Default)]
struct ThreadW {
    /// Polls open, innermost last (nested executors).
    open: Vec<Open>,
    /// The task whose poll ended last here while no poll has started
    /// since (NONE: one has, or the worker parked).
    last_ended: u64,
    /// That task when the thread then woke it: its deferred self-wake
    /// (tokio's `yield_now` wakes the task after its poll has returned, on
    /// the same worker, before polling it again), if the thread's next
    /// poll is that task's.
    deferred: u64,
}

/// The waiting analysis's state (see the module docs).
#[derive(Default)]
pub(crate) struct Waiting {
    /// By thread index.
    threads: Vec<ThreadW>,
    pub(crate) tasks: tasks::Tasks,
    pub(crate) locks: locks::Locks,
    pub(crate) resources: resources::Resources,
}

impl Waiting {
    /// The poll open on `thread` now (the innermost), if any.
    pub(crate) fn open_on(&self, thread: u32) -> Option<Open> {
        self.threads
            .get(thread as usize)
            .and_then(|t| t.open.last().copied())
    }

    #[inline(always)]
    fn thread(&mut self, thread: u32) -> &mut ThreadW {
        let th = thread as usize;
        if th >= self.threads.len() {
            self.threads.resize_with(th + 1, || ThreadW {
                open: Vec::new(),
                last_ended: NONE,
                deferred: NONE,
            });
        }
        &mut self.threads[th]
    }

    #[inline(always)]
    pub(crate) fn life(&mut self, rec: &Life<'_>, m: &Model) {
        match *rec {
            Life::PollStart(p) => {
                let t = self.thread(p.thread);
                t.last_ended = NONE;
                let deferred = std::mem::replace(&mut t.deferred, NONE);
                if t.open.capacity() == 0 {
                    // One open poll per thread is the rule (memory_bound's
                    // 600k threads).
                    t.open.reserve_exact(1);
                }
                t.open.push(Open {
                    task: p.task,
                    slot: p.slot,
                    loc: p.loc,
                    worker: p.worker,
                });
                if deferred == p.task {
                    self.tasks.self_woken(p.slot);
                }
                self.tasks.poll_start(p, m);
            }
            Life::PollEnd(p) => {
                let t = self.thread(p.thread);
                close(&mut t.open, p);
                t.last_ended = if p.ready || p.depth > 0 { NONE } else { p.task };
                self.tasks.poll_end(p, m);
                self.resources.poll_end(p, m);
            }
            Life::PollLost(p) => close(&mut self.thread(p.thread).open, p),
            Life::Wake(w) => {
                let t = self.thread(w.thread);
                let by = t.open.last().copied();
                // Woken by itself: inside its own poll (wake_by_ref, then
                // Pending), or right after it on the same thread and
                // polled next there (confirmed at that poll's start).
                let own = by.is_some_and(|o| o.task == w.task);
                if by.is_none() && t.last_ended == w.task {
                    t.deferred = w.task;
                }
                if self.resources.waiting() {
                    self.resources.wake(w, by, m);
                }
                self.tasks.woken(w, own);
            }
            Life::Spawn(t) | Life::Seen(t) => self.tasks.born(t),
            Life::End(t) | Life::Alive(t) => {
                let on = self.resources.task_end(t.proc, t.task);
                let terminated = if matches!(rec, Life::End(_)) {
                    t.end
                } else {
                    None
                };
                self.tasks.end(t, terminated, on, m);
            }
            _ => {}
        }
    }

    /// A worker thread parked: a wake from it after this (tokio's I/O
    /// driver's, in the park) is not its last task's own.
    #[inline]
    pub(crate) fn parked(&mut self, thread: u32) {
        if let Some(t) = self.threads.get_mut(thread as usize) {
            t.last_ended = NONE;
            t.deferred = NONE;
        }
    }

    /// Application and resource events (the lifecycle comes through
    /// [`Waiting::life`]).
    #[inline]
    pub(crate) fn event(&mut self, ev: &Ev, m: &Model) {
        match ev.kind {
            kind::LOCK_WAIT | kind::LOCK_HOLD => {
                let open = self.open_on(ev.thread);
                self.locks.event(ev, open, m);
            }
            kind::TASK_DUMP_START => {
                let proc = m.threads[ev.thread as usize].proc;
                self.tasks.dump_start(proc, ev.x as u32, ev.ticks);
            }
            kind::TASK_DUMP => {
                let proc = m.threads[ev.thread as usize].proc;
                self.tasks.dumped(proc, ev.x, ev.a, ev.worker);
            }
            k if resources::is_resource(k) => {
                let open = self.open_on(ev.thread);
                if let Some((slot, ns)) = self.resources.event(ev, open, m) {
                    self.tasks.resource_wait(slot, ns);
                }
            }
            _ => {}
        }
    }

    /// The read is over.
    pub(crate) fn finish(&mut self, m: &Model) {
        self.tasks.finish(m);
        self.resources.finish(m);
    }
}

/// Poll `p` is no longer open in `open` (its thread's).
#[inline]
fn close(open: &mut Vec<Open>, p: &Poll) {
    match open.last() {
        // Normally the innermost.
        Some(o) if o.task == p.task => {
            open.pop();
        }
        _ => {
            if let Some(i) = open.iter().rposition(|o| o.task == p.task) {
                open.remove(i);
            }
        }
    }
}

/// Every waiting finding (the caller arranges them with the others).
pub(crate) fn findings(c: &Ctx<'_>, w: &Waiting, th: &Thresholds, out: &mut Vec<Finding>) {
    tasks::findings(c, &w.tasks, &w.resources, th, out);
    locks::findings(c, &w.locks, th, out);
    resources::findings(c, &w.resources, th, out);
}

/// Every resource site waited on ([`crate::runtime::ResourceSite`]).
pub(crate) fn resource_sites(c: &Ctx<'_>, w: &Waiting) -> Vec<crate::runtime::ResourceSite> {
    resources::sites(c, &w.resources)
}

/// The report's `waiting`: `task_life` (per location: running, waiting
/// for a worker, waiting on resources, other) and `resources` (events
/// read, resources tracked and forgotten, events naming an unknown one).
pub(crate) fn report_json(c: &Ctx<'_>, w: &Waiting) -> Value {
    let r = &w.resources;
    serde_json::json!({
        "task_life": w.tasks.breakdown_json(c),
        "resources": {
            "events": r.events,
            "tracked": r.res.len(),
            "forgotten": r.forgotten,
            "unknown_resource_events": r.unknown,
        },
    })
}
