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

/// The poll open on a thread: its task, location and worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Open {
    pub task: u64,
    /// Its lifecycle slot ([`runtrace_model::lifecycle::Task::slot`]).
    pub slot: u32,
    pub loc: u32,
    pub worker: u32,
}

/// The waiting analysis's state (see the module docs).
#[derive(Default)]
pub(crate) struct Waiting {
    /// Polls open per thread, innermost last (nested executors).
    open: Vec<Vec<Open>>,
    pub(crate) tasks: tasks::Tasks,
    pub(crate) locks: locks::Locks,
    pub(crate) resources: resources::Resources,
}

impl Waiting {
    /// The poll open on `thread` now (the innermost), if any.
    pub(crate) fn open_on(&self, thread: u32) -> Option<Open> {
        self.open
            .get(thread as usize)
            .and_then(|v| v.last().copied())
    }

    #[inline(always)]
    pub(crate) fn life(&mut self, rec: &Life<'_>, m: &Model) {
        match *rec {
            Life::PollStart(p) => {
                let th = p.thread as usize;
                if th >= self.open.len() {
                    self.open.resize_with(th + 1, Vec::new);
                }
                let open = &mut self.open[th];
                if open.capacity() == 0 {
                    // One open poll per thread is the rule (memory_bound's
                    // 600k threads).
                    open.reserve_exact(1);
                }
                open.push(Open {
                    task: p.task,
                    slot: p.slot,
                    loc: p.loc,
                    worker: p.worker,
                });
                self.tasks.poll_start(p, m);
            }
            Life::PollEnd(p) => {
                self.close(p);
                self.tasks.poll_end(p, m);
                self.resources.poll_end(p, m);
            }
            Life::PollLost(p) => self.close(p),
            Life::Wake(w) => {
                if self.resources.waiting() {
                    let by = self.open_on(w.thread);
                    self.resources.wake(w, by, m);
                }
                self.tasks.woken(w);
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

    /// Poll `p` is no longer open on its thread.
    #[inline]
    fn close(&mut self, p: &Poll) {
        if let Some(v) = self.open.get_mut(p.thread as usize) {
            match v.last() {
                // Normally the innermost.
                Some(o) if o.task == p.task => {
                    v.pop();
                }
                _ => {
                    if let Some(i) = v.iter().rposition(|o| o.task == p.task) {
                        v.remove(i);
                    }
                }
            }
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

/// Every waiting finding (the caller arranges them with the others).
pub(crate) fn findings(c: &Ctx<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let w = &c.e.waiting;
    tasks::findings(c, &w.tasks, &w.resources, th, out);
    locks::findings(c, &w.locks, th, out);
    resources::findings(c, &w.resources, th, out);
}

/// Every resource site waited on ([`crate::runtime::ResourceSite`]).
pub(crate) fn resource_sites(c: &Ctx<'_>) -> Vec<crate::runtime::ResourceSite> {
    resources::sites(c, &c.e.waiting.resources)
}

/// The report's `waiting`: `task_life` (per location: running, waiting
/// for a worker, waiting on resources, other) and `resources` (events
/// read, resources tracked and forgotten, events naming an unknown one).
pub(crate) fn report_json(c: &Ctx<'_>) -> Value {
    let w = &c.e.waiting;
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
