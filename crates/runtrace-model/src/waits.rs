//! Finished waits on tokio's async resources, one record per wait, for
//! the outputs that draw or store each wait (Perfetto slices, the Parquet
//! `resource_waits` table). `runtrace analyze` judges the same waits in
//! aggregate (its waiting analysis); the rules are the same:
//!
//! - A wait runs from a task's first Pending `resource_poll` of a
//!   resource to its Ready `resource_poll` of the same resource (a Ready
//!   poll of another resource, or the task's end, forgets it).
//! - The waiting task's location is that of its poll open when the wait
//!   began (the `resource_poll` happens inside the task's poll).
//! - Who let it go (`released_by`): the last task, other than the waiter,
//!   whose poll woke the waiter during the wait (a contended release, a
//!   freed slot, an answer); else the last `resource_release` of the
//!   resource by another task during the wait; else unknown.
//!
//! State is bounded: open polls per thread, one open wait per live task,
//! and at most [`MAX_RESOURCES`] resources per read (the oldest are
//! forgotten, and counted).
//!
//! ```
//! use runtrace_format::schema::catalog;
//! use runtrace_model::synth::TraceBuilder;
//! use runtrace_model::waits::WaitTracker;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/db.rs", 12, 9);
//! b.location(2, "src/req.rs", 4, 5);
//! b.string(7, "Mutex");
//! b.record(1, Some(0), 0, catalog::resource_new::ID, &[1, 7, 1, 0]);
//! b.spawn(1, 1, 50, 0, 2, 0);
//! b.poll_start(1, 0, 10, 50, 0, 0);
//! b.record(1, Some(0), 11, catalog::resource_poll::ID, &[50, 1, 0]); // waits
//! b.poll_end(1, 0, 12, 50, false);
//! b.wake(1, 0, 900, 50, 0);
//! b.poll_start(1, 0, 1_000, 50, 0, 0);
//! b.record(1, Some(0), 1_001, catalog::resource_poll::ID, &[50, 1, 1]); // got it
//! b.poll_end(1, 0, 1_002, 50, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//!
//! /// Collects the waits.
//! #[derive(Default)]
//! struct Collect(WaitTracker, Vec<(u64, u64, String)>);
//! impl runtrace_model::pass::Pass for Collect {
//!     fn wants(&self) -> runtrace_model::pass::Wants {
//!         WaitTracker::wants()
//!     }
//!     fn life(&mut self, rec: &runtrace_model::lifecycle::Life<'_>, m: &runtrace_model::model::Model) {
//!         self.0.life(rec, m);
//!     }
//!     fn event(&mut self, ev: &runtrace_model::event::Ev, m: &runtrace_model::model::Model) {
//!         if let Some(w) = self.0.event(ev, m) {
//!             self.1.push((w.task, w.ns(m), w.resource.label(m)));
//!         }
//!     }
//! }
//! let mut c = Collect::default();
//! runtrace_model::input::read(&[path], &mut c, None);
//! assert_eq!(c.1, [(50, 990, "Mutex src/db.rs:12:9".to_string())]);
//! ```

use crate::event::{kind, Ev};
use crate::fxhash::FxHashMap;
use crate::lifecycle::Life;
use crate::model::{Model, UNKNOWN_LOC};
use crate::pass::Wants;
use std::collections::VecDeque;

/// Resources tracked at once per read; beyond, the oldest is forgotten
/// (a oneshot per request must not grow the state without bound).
pub const MAX_RESOURCES: usize = 1 << 16;

/// What a resource is (from its `resource_new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// runtrace's id for it, unique within its recording.
    pub id: u32,
    /// Name index of tokio's concrete type (`Mutex`, `Semaphore`, ...).
    pub ty: u32,
    /// Its creation site (location index; [`UNKNOWN_LOC`]: none given).
    pub loc: u32,
    /// A tokio-internal resource (a bounded mpsc channel's capacity).
    pub internal: bool,
}

impl Resource {
    /// Its kind as the outputs show it: tokio's concrete type, with
    /// `Sender|Receiver` (a oneshot's) said as `oneshot`.
    ///
    /// ```
    /// let m = runtrace_model::model::Model::new();
    /// let r = runtrace_model::waits::Resource { id: 1, ty: 0, loc: 0, internal: false };
    /// assert_eq!(r.kind(&m), "");
    /// ```
    pub fn kind<'m>(&self, m: &'m Model) -> &'m str {
        match m.name(self.ty) {
            "Sender|Receiver" => "oneshot",
            t => t,
        }
    }

    /// Its creation site (`file:line:col`), if tokio gave one.
    ///
    /// ```
    /// let m = runtrace_model::model::Model::new();
    /// let r = runtrace_model::waits::Resource { id: 1, ty: 0, loc: 0, internal: true };
    /// assert_eq!(r.created_at(&m), None);
    /// ```
    pub fn created_at<'m>(&self, m: &'m Model) -> Option<&'m str> {
        (self.loc != UNKNOWN_LOC)
            .then(|| m.locs.get(self.loc as usize).map(|l| &*l.text))
            .flatten()
    }

    /// "Mutex src/db.rs:12:9", "Semaphore (tokio-internal)", or the kind
    /// alone.
    ///
    /// ```
    /// let m = runtrace_model::model::Model::new();
    /// let r = runtrace_model::waits::Resource { id: 1, ty: 0, loc: 0, internal: true };
    /// assert_eq!(r.label(&m), " (tokio-internal)");
    /// ```
    pub fn label(&self, m: &Model) -> String {
        match (self.created_at(m), self.internal) {
            (Some(at), _) => format!("{} {at}", self.kind(m)),
            (None, true) => format!("{} (tokio-internal)", self.kind(m)),
            (None, false) => self.kind(m).to_string(),
        }
    }
}

/// Whose poll let a wait go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Releaser {
    /// The task.
    pub task: u64,
    /// Its location.
    pub loc: u32,
    /// Thread index where it happened.
    pub thread: u32,
    /// Ticks of the wake or release.
    pub ticks: u64,
    /// A `resource_release` (true) or a wake of the waiter (false).
    pub release: bool,
}

/// One finished wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishedWait {
    /// The recording (model process index).
    pub proc: u32,
    /// The waiting task.
    pub task: u64,
    /// Its location (of its poll open when the wait began;
    /// [`UNKNOWN_LOC`] when no poll of it was open).
    pub loc: u32,
    /// Thread index of the Ready poll that ended it.
    pub thread: u32,
    /// The resource.
    pub resource: Resource,
    /// Ticks of the first Pending poll.
    pub start: u64,
    /// Ticks of the Ready poll.
    pub end: u64,
    /// Who let it go, where known.
    pub released_by: Option<Releaser>,
}

impl FinishedWait {
    /// Its length in ns (its recording's clock; the module example
    /// shows one: 990 ticks of 1 ns).
    pub fn ns(&self, m: &Model) -> u64 {
        m.procs[self.proc as usize]
            .scale
            .ns(self.end.saturating_sub(self.start))
    }
}

#[derive(Clone, Copy)]
struct OpenWait {
    res: u32,
    start: u64,
    loc: u32,
    by: Option<Releaser>,
}

struct Res {
    info: Resource,
    last_release: Option<Releaser>,
}

/// Derives [`FinishedWait`]s from a read's lifecycle records and resource
/// events (see the module docs); feed it every [`Life`] record and every
/// event of a pass that wants at least [`WaitTracker::wants`].
#[derive(Default)]
pub struct WaitTracker {
    /// Polls open per thread (task, location), innermost last.
    open: Vec<Vec<(u64, u32)>>,
    res: FxHashMap<(u32, u32), Res>,
    order: VecDeque<(u32, u32)>,
    waits: FxHashMap<(u32, u64), OpenWait>,
    /// Resources forgotten beyond [`MAX_RESOURCES`].
    pub forgotten: u64,
    /// Resource polls naming a resource whose `resource_new` was not read
    /// (or was forgotten).
    pub unknown: u64,
}

impl WaitTracker {
    /// What a pass needs to read for it.
    ///
    /// ```
    /// assert!(runtrace_model::waits::WaitTracker::wants().lifecycle);
    /// ```
    pub fn wants() -> Wants {
        Wants::LIFECYCLE
    }

    fn open_on(&self, thread: u32) -> Option<(u64, u32)> {
        self.open
            .get(thread as usize)
            .and_then(|v| v.last().copied())
    }

    /// A lifecycle record (open polls, wakes, task ends).
    pub fn life(&mut self, rec: &Life<'_>, m: &Model) {
        match *rec {
            Life::PollStart(p) => {
                let th = p.thread as usize;
                if th >= self.open.len() {
                    self.open.resize_with(th + 1, Vec::new);
                }
                self.open[th].push((p.task, p.loc));
            }
            Life::PollEnd(p) | Life::PollLost(p) => {
                if let Some(v) = self.open.get_mut(p.thread as usize) {
                    if let Some(i) = v.iter().rposition(|o| o.0 == p.task) {
                        v.remove(i);
                    }
                }
            }
            Life::Wake(w) if !self.waits.is_empty() => {
                let proc = m.threads[w.thread as usize].proc;
                let by = self.open_on(w.thread);
                if let (Some(wo), Some((task, loc))) = (self.waits.get_mut(&(proc, w.task)), by) {
                    if task != w.task {
                        wo.by = Some(Releaser {
                            task,
                            loc,
                            thread: w.thread,
                            ticks: w.ticks,
                            release: false,
                        });
                    }
                }
            }
            Life::End(t) | Life::Alive(t) if !self.waits.is_empty() => {
                self.waits.remove(&(t.proc, t.task));
            }
            _ => {}
        }
    }

    /// An event: a resource event may end a wait.
    pub fn event(&mut self, ev: &Ev, m: &Model) -> Option<FinishedWait> {
        let proc = m.threads[ev.thread as usize].proc;
        match ev.kind {
            kind::RESOURCE_NEW => {
                let key = (proc, ev.x as u32);
                if self.res.len() >= MAX_RESOURCES {
                    if let Some(k) = self.order.pop_front() {
                        self.res.remove(&k);
                        self.forgotten += 1;
                    }
                }
                let info = Resource {
                    id: ev.x as u32,
                    ty: ev.worker,
                    loc: ev.a,
                    internal: ev.flag != 0,
                };
                let r = Res {
                    info,
                    last_release: None,
                };
                if self.res.insert(key, r).is_none() {
                    self.order.push_back(key);
                }
                None
            }
            kind::RESOURCE_RELEASE => {
                let loc = self
                    .open_on(ev.thread)
                    .filter(|o| o.0 == ev.x)
                    .map_or(UNKNOWN_LOC, |o| o.1);
                if let Some(r) = self.res.get_mut(&(proc, ev.a)) {
                    r.last_release = Some(Releaser {
                        task: ev.x,
                        loc,
                        thread: ev.thread,
                        ticks: ev.ticks,
                        release: true,
                    });
                }
                None
            }
            kind::RESOURCE_POLL => self.poll(ev, proc),
            _ => None,
        }
    }

    fn poll(&mut self, ev: &Ev, proc: u32) -> Option<FinishedWait> {
        let task = ev.x;
        let Some(r) = self.res.get(&(proc, ev.a)) else {
            self.unknown += 1;
            return None;
        };
        let tk = (proc, task);
        if ev.flag == 0 {
            let loc = self
                .open_on(ev.thread)
                .filter(|o| o.0 == task)
                .map_or(UNKNOWN_LOC, |o| o.1);
            self.waits.entry(tk).or_insert(OpenWait {
                res: ev.a,
                start: ev.ticks,
                loc,
                by: None,
            });
            return None;
        }
        let w = *self.waits.get(&tk)?;
        if w.res != ev.a {
            return None;
        }
        self.waits.remove(&tk);
        let released_by = w.by.or(r
            .last_release
            .filter(|x| x.task != task && x.ticks >= w.start && x.ticks <= ev.ticks));
        Some(FinishedWait {
            proc,
            task,
            loc: w.loc,
            thread: ev.thread,
            resource: r.info,
            start: w.start,
            end: ev.ticks,
            released_by,
        })
    }

    /// The resource `id` of recording `proc`, if known.
    pub fn resource(&self, proc: u32, id: u32) -> Option<Resource> {
        self.res.get(&(proc, id)).map(|r| r.info)
    }
}
