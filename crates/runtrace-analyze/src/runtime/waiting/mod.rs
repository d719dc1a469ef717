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
use runtrace_model::lifecycle::{Poll, Running, Task, Wake};
use runtrace_model::model::Model;
use serde_json::Value;

/// The poll open on a thread: its task, slot, location and worker (the
/// lifecycle's [`Running`]).
pub(crate) type Open = Running;

/// The waiting analysis's state (see the module docs).
#[derive(Clone, Default)]
pub(crate) struct Waiting {
    pub(crate) tasks: tasks::Tasks,
    pub(crate) locks: locks::Locks,
    pub(crate) resources: resources::Resources,
}

impl Waiting {
    /// A poll started; `delay_ns`: its wake -> poll delay, when the wake
    /// was seen (the engine converts it once for both).
    #[inline(always)]
    pub(crate) fn poll_start(&mut self, p: &Poll, delay_ns: Option<u64>) {
        self.tasks.poll_start(p, delay_ns);
    }

    /// A poll ended, after `ns` (converted once by the engine).
    #[inline(always)]
    pub(crate) fn poll_end(&mut self, p: &Poll, ns: u64, m: &Model) {
        self.tasks.poll_end(p, ns);
        self.resources.poll_end(p, m);
    }

    /// A task was woken.
    #[inline(always)]
    pub(crate) fn wake(&mut self, w: &Wake, m: &Model) {
        // Woken by itself: inside its own poll (wake_by_ref, then
        // Pending); right after it is `Poll::self_woken`.
        let own = w.by.is_some_and(|o| o.task == w.task);
        if self.resources.waiting() {
            self.resources.wake(w, w.by, m);
        }
        self.tasks.woken(w, own);
    }

    /// A task was spawned, or first seen.
    #[inline(always)]
    pub(crate) fn born(&mut self, t: &Task) {
        self.tasks.born(t);
    }

    /// A task's life is over: `terminated` at that tick, or alive at the
    /// recording's end (None).
    #[inline]
    pub(crate) fn end(&mut self, t: &Task, terminated: Option<u64>, m: &Model) {
        let on = self.resources.task_end(t.proc, t.task);
        self.tasks.end(t, terminated, on, m);
    }

    /// Application and resource events (the lifecycle comes through
    /// [`Waiting::life`]); `open`: the poll open on the event's thread.
    #[inline]
    pub(crate) fn event(&mut self, ev: &Ev, open: Option<&Poll>, m: &Model) {
        let open = open.map(Running::of);
        match ev.kind {
            kind::LOCK_WAIT | kind::LOCK_HOLD => self.locks.event(ev, open, m),
            kind::TASK_DUMP_START => {
                let proc = m.threads[ev.thread as usize].proc;
                self.tasks.dump_start(proc, ev.x as u32, ev.ticks);
            }
            kind::TASK_DUMP => {
                let proc = m.threads[ev.thread as usize].proc;
                self.tasks.dumped(proc, ev.x, ev.a, ev.worker);
            }
            k if resources::is_resource(k) => {
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
