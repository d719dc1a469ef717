//! tokio's async resources (`resource_new`, `resource_poll`,
//! `resource_release`, recorded by runtrace-tokio's layer from tokio's
//! own resource instrumentation): which task waited on which resource,
//! from when to when, and who kept it waiting.
//!
//! - A *wait* runs from a task's first Pending poll of an operation on a
//!   resource (`resource_poll`, ready false) to its Ready poll.
//! - A *hold* of a lock-like resource (Mutex, RwLock, Semaphore) runs
//!   from a task's Ready poll (it acquired) to its release: a
//!   `resource_release` of that task, or its wake of a waiter of the same
//!   resource (a contended release hands the lock or permit over with a
//!   wake and nothing else). A hold during which its task's polls returned
//!   Pending was held *across an await*.
//! - A wait is charged to the holds by other tasks that overlap it; the
//!   location whose holds were charged the most is blamed
//!   (`lock_held_across_await` when most of its charged holds spanned an
//!   await, else `resource_wait`). When holds explain less than half of
//!   the waiting (channels, oneshots: nobody holds them), the location
//!   whose wakes ended the waits (the consumer that freed capacity, the
//!   sender that answered) is blamed, as `resource_wait`.

use super::super::ctx::{finding, Ctx};
use super::super::report::{FindingKind, Severity, Victim};
use super::super::thresholds::Thresholds;
use super::Open;
use runtrace_model::event::{kind, Ev};
use runtrace_model::fmt_ns;
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::hist::Histogram;
use runtrace_model::lifecycle::{Poll, Wake};
use runtrace_model::model::{Model, UNKNOWN_LOC};
use serde_json::{json, Value};
use std::collections::VecDeque;

const NEW: u8 = kind::RESOURCE_NEW;
const POLL: u8 = kind::RESOURCE_POLL;
const RELEASE: u8 = kind::RESOURCE_RELEASE;

/// Whether kind `k` is a resource event.
#[inline(always)]
pub(crate) fn is_resource(k: u8) -> bool {
    k == NEW || k == POLL || k == RELEASE
}

/// Closed holds kept per resource for charging waits.
const RECENT_HOLDS: usize = 512;
/// Open holds kept per task (a task holding more at once is rare; the
/// oldest are forgotten).
const OPEN_PER_TASK: usize = 16;
/// Longest finished waits kept per resource (for
/// [`crate::runtime::ResourceSite::longest_waits`]).
pub(crate) const LONGEST: usize = 8;
/// Resources tracked at once per read (the oldest forgotten beyond:
/// a oneshot per request must not grow the state without bound).
const MAX_RESOURCES: usize = 1 << 16;

type Key = (u32, u32);

#[derive(Clone, Copy)]
struct HoldOpen {
    res: u32,
    since: u64,
    loc: u32,
    /// Polls of the holding task that returned Pending during the hold.
    pending_polls: u32,
}

#[derive(Clone, Copy)]
struct HoldDone {
    task: u64,
    loc: u32,
    start: u64,
    end: u64,
    across_await: bool,
}

#[derive(Clone, Copy)]
struct WaitOpen {
    res: u32,
    start: u64,
    loc: u32,
    /// The location of the task whose wake came last during the wait.
    released_by: Option<u32>,
}

/// One location's part in a resource.
#[derive(Default, Clone)]
pub(crate) struct Part {
    pub waits: u64,
    pub wait: Histogram,
    pub holds: u64,
    pub hold: Histogram,
    pub holds_across_await: u64,
    /// Wait ns of others its holds overlapped.
    pub charged_ns: u64,
    /// Holds of it charged with some waiting, and of those across an await.
    pub charged_holds: u64,
    pub charged_across_await: u64,
    /// Waits of others its wakes ended, and their ns.
    pub released: u64,
    pub released_ns: u64,
}

/// One finished wait, among the longest of its resource.
#[derive(Clone, Copy)]
pub(crate) struct LongWait {
    pub task: u64,
    pub loc: u32,
    pub start: u64,
    pub ns: u64,
    pub released_by: Option<u32>,
}

/// One resource's story.
#[derive(Clone)]
pub(crate) struct Res {
    /// Name index of its concrete type (`Mutex`, `Semaphore`, ...).
    pub ty: u32,
    /// Its creation site (location index; [`UNKNOWN_LOC`]: none given).
    pub loc: u32,
    pub internal: bool,
    /// The location of the task that created it, if one did.
    pub created_by: Option<u32>,
    /// Whether tasks hold it (a lock or a semaphore).
    pub lock_like: bool,
    recent: VecDeque<HoldDone>,
    pub parts: FxHashMap<u32, Part>,
    pub wait: Histogram,
    pub charged_ns: u64,
    /// Its [`LONGEST`] longest finished waits, in no order.
    pub longest: Vec<LongWait>,
}

impl Res {
    /// Keeps `w` if it is among the [`LONGEST`] longest waits.
    fn keep_longest(&mut self, w: LongWait) {
        if self.longest.len() < LONGEST {
            if self.longest.capacity() == 0 {
                // Most resources (a oneshot per request) see one wait.
                self.longest.reserve_exact(1);
            }
            self.longest.push(w);
        } else if let Some(min) = self.longest.iter_mut().min_by_key(|x| x.ns) {
            if w.ns > min.ns {
                *min = w;
            }
        }
    }

    fn part(&mut self, loc: u32) -> &mut Part {
        self.parts.entry(loc).or_default()
    }
}

/// The resource part of the waiting analysis.
#[derive(Clone, Default)]
pub(crate) struct Resources {
    pub(crate) res: FxHashMap<Key, Res>,
    /// Resources in creation order, to forget the oldest ones beyond
    /// [`MAX_RESOURCES`] (those with no waits).
    order: VecDeque<Key>,
    pub(crate) forgotten: u64,
    open: FxHashMap<(u32, u64), Vec<HoldOpen>>,
    waits: FxHashMap<(u32, u64), WaitOpen>,
    /// Events naming a resource whose `resource_new` was not read.
    pub(crate) unknown: u64,
    pub(crate) events: u64,
}

fn lock_like(ty: &str) -> bool {
    matches!(ty, "Mutex" | "RwLock" | "Semaphore")
}

impl Resources {
    /// A resource event; returns a finished wait as (the waiting task's
    /// lifecycle slot, ns), when that task's poll is the one open.
    pub(crate) fn event(&mut self, ev: &Ev, open: Option<Open>, m: &Model) -> Option<(u32, u64)> {
        self.events += 1;
        let proc = m.threads[ev.thread as usize].proc;
        match ev.kind {
            NEW => {
                self.new_resource(ev, proc, open, m);
                None
            }
            POLL => self.poll(ev, proc, open, m),
            RELEASE => {
                self.release(proc, ev.x, ev.a, ev.ticks, m);
                None
            }
            _ => None,
        }
    }

    fn new_resource(&mut self, ev: &Ev, proc: u32, open: Option<Open>, m: &Model) {
        let key = (proc, ev.x as u32);
        if self.res.len() >= MAX_RESOURCES {
            self.forget_one();
        }
        let ty = ev.worker;
        let r = Res {
            ty,
            loc: ev.a,
            internal: ev.flag != 0,
            created_by: open.map(|o| o.loc),
            lock_like: ev.flag == 0 && lock_like(m.name(ty)),
            recent: VecDeque::new(),
            parts: FxHashMap::default(),
            wait: Histogram::new(),
            charged_ns: 0,
            longest: Vec::new(),
        };
        if self.res.insert(key, r).is_none() {
            self.order.push_back(key);
        }
    }

    /// Forgets the oldest resource that was never waited on (or the
    /// oldest at all).
    #[cold]
    fn forget_one(&mut self) {
        let n = self.order.len().min(64);
        let pick = (0..n)
            .find(|&i| {
                self.res
                    .get(&self.order[i])
                    .is_none_or(|r| r.wait.count() == 0)
            })
            .unwrap_or(0);
        if let Some(k) = self.order.remove(pick) {
            self.res.remove(&k);
            self.forgotten += 1;
        }
    }

    fn poll(&mut self, ev: &Ev, proc: u32, open: Option<Open>, m: &Model) -> Option<(u32, u64)> {
        let key = (proc, ev.a);
        let task = ev.x;
        let loc = open
            .filter(|o| o.task == task)
            .map_or(UNKNOWN_LOC, |o| o.loc);
        let Some(r) = self.res.get_mut(&key) else {
            self.unknown += 1;
            return None;
        };
        let ready = ev.flag != 0;
        let tk = (proc, task);
        if !ready {
            self.waits.entry(tk).or_insert(WaitOpen {
                res: ev.a,
                start: ev.ticks,
                loc,
                released_by: None,
            });
            return None;
        }
        // Ready: the wait (if any) is over, and a lock-like resource is
        // held from now on.
        if r.lock_like {
            let v = self.open.entry(tk).or_default();
            if v.len() >= OPEN_PER_TASK {
                v.remove(0);
            }
            v.push(HoldOpen {
                res: ev.a,
                since: ev.ticks,
                loc,
                pending_polls: 0,
            });
        }
        let w = self.waits.get(&tk).copied()?;
        if w.res != ev.a {
            return None;
        }
        self.waits.remove(&tk);
        let scale = m.procs[proc as usize].scale;
        let ns = scale.ns(ev.ticks.saturating_sub(w.start));
        r.wait.record(ns);
        r.keep_longest(LongWait {
            task,
            loc: w.loc,
            start: w.start,
            ns,
            released_by: w.released_by,
        });
        {
            let p = r.part(w.loc);
            p.waits += 1;
            p.wait.record(ns);
        }
        // Charge the wait to the overlapping holds of other tasks.
        let mut charged = 0u64;
        let mut charges: Vec<(u32, u64, bool)> = Vec::new();
        for h in r.recent.iter().rev() {
            if h.end <= w.start {
                break;
            }
            if h.task == task {
                continue;
            }
            let ov = h.end.min(ev.ticks).saturating_sub(h.start.max(w.start));
            if ov > 0 {
                let ns = scale.ns(ov);
                charged += ns;
                charges.push((h.loc, ns, h.across_await));
            }
        }
        for (l, ns, across) in charges {
            let p = r.part(l);
            p.charged_ns += ns;
            p.charged_holds += 1;
            p.charged_across_await += across as u64;
        }
        r.charged_ns += charged.min(ns);
        if let Some(by) = w.released_by {
            let p = r.part(by);
            p.released += 1;
            p.released_ns += ns;
        }
        let slot = open.filter(|o| o.task == task).map(|o| o.slot)?;
        Some((slot, ns))
    }

    /// Task `task` released resource `res` at `ticks`.
    fn release(&mut self, proc: u32, task: u64, res: u32, ticks: u64, m: &Model) {
        let Some(v) = self.open.get_mut(&(proc, task)) else {
            return;
        };
        let Some(i) = v.iter().rposition(|h| h.res == res) else {
            return;
        };
        let h = v.remove(i);
        if v.is_empty() {
            self.open.remove(&(proc, task));
        }
        self.close_hold(proc, task, h, ticks, m);
    }

    fn close_hold(&mut self, proc: u32, task: u64, h: HoldOpen, ticks: u64, m: &Model) {
        let Some(r) = self.res.get_mut(&(proc, h.res)) else {
            return;
        };
        let ns = m.procs[proc as usize]
            .scale
            .ns(ticks.saturating_sub(h.since));
        let across = h.pending_polls > 0;
        let p = r.part(h.loc);
        p.holds += 1;
        p.hold.record(ns);
        p.holds_across_await += across as u64;
        if r.recent.len() >= RECENT_HOLDS {
            r.recent.pop_front();
        }
        r.recent.push_back(HoldDone {
            task,
            loc: h.loc,
            start: h.since,
            end: ticks,
            across_await: across,
        });
    }

    /// Some task waits on a resource now (only then can a wake release
    /// one: [`Resources::wake`]).
    #[inline(always)]
    pub(crate) fn waiting(&self) -> bool {
        !self.waits.is_empty()
    }

    /// A wake: if the woken task waits on a resource, the waker released
    /// it (or answered it); a contended release is only seen this way.
    pub(crate) fn wake(&mut self, w: &Wake, by: Option<Open>, m: &Model) {
        let proc = m.threads[w.thread as usize].proc;
        let Some(wo) = self.waits.get_mut(&(proc, w.task)) else {
            return;
        };
        let Some(by) = by.filter(|b| b.task != w.task) else {
            return;
        };
        wo.released_by = Some(by.loc);
        let res = wo.res;
        let lock_like = self.res.get(&(proc, res)).is_some_and(|r| r.lock_like);
        if lock_like {
            self.release(proc, by.task, res, w.ticks, m);
        }
    }

    /// A poll ended: a Pending poll of a task holding resources is an
    /// await while holding them; a Ready one ends the task and its holds.
    #[inline(always)]
    pub(crate) fn poll_end(&mut self, p: &Poll, m: &Model) {
        if !self.open.is_empty() {
            self.poll_end_holding(p, m);
        }
    }

    fn poll_end_holding(&mut self, p: &Poll, m: &Model) {
        let proc = m.threads[p.thread as usize].proc;
        if p.ready {
            if let Some(v) = self.open.remove(&(proc, p.task)) {
                for h in v {
                    self.close_hold(proc, p.task, h, p.end, m);
                }
            }
        } else if let Some(v) = self.open.get_mut(&(proc, p.task)) {
            for h in v {
                h.pending_polls = h.pending_polls.saturating_add(1);
            }
        }
    }

    /// Task `task` of recording `proc` is over (or the recording): its
    /// open wait, if any, as the resource it waited on.
    #[inline(always)]
    pub(crate) fn task_end(&mut self, proc: u32, task: u64) -> Option<u32> {
        if self.open.is_empty() && self.waits.is_empty() {
            return None;
        }
        self.task_end_holding(proc, task)
    }

    fn task_end_holding(&mut self, proc: u32, task: u64) -> Option<u32> {
        if !self.open.is_empty() {
            self.open.remove(&(proc, task));
        }
        if self.waits.is_empty() {
            return None;
        }
        self.waits.remove(&(proc, task)).map(|w| w.res)
    }

    pub(crate) fn finish(&mut self, _m: &Model) {
        self.open.clear();
        self.waits.clear();
    }

    /// What resource `res` of recording `proc` is, if still known.
    pub(crate) fn describe_key(&self, c: &Ctx<'_>, proc: u32, res: u32) -> Option<String> {
        self.res.get(&(proc, res)).map(|r| describe(c, r))
    }
}

/// "Mutex created at src/db.rs:12:9".
fn describe(c: &Ctx<'_>, r: &Res) -> String {
    let ty = match c.m.name(r.ty) {
        "Sender|Receiver" => "oneshot channel",
        t => t,
    };
    if r.loc != UNKNOWN_LOC {
        format!("{ty} created at {}", c.loc(r.loc))
    } else if r.internal {
        let by = r.created_by.map_or(String::new(), |l| {
            format!(", created by a task of {}", c.loc(l))
        });
        format!("a tokio-internal {ty} (a bounded mpsc channel's capacity, or another tokio primitive{by})")
    } else {
        ty.to_string()
    }
}

/// Resources of one kind created at one site (a oneshot per request is
/// one site): what the findings judge.
struct Site<'a> {
    first: &'a Res,
    parts: Vec<(u32, Part)>,
    wait: Histogram,
    charged_ns: u64,
}

fn merge(into: &mut Part, p: &Part) {
    into.waits += p.waits;
    into.wait.merge(&p.wait);
    into.holds += p.holds;
    into.hold.merge(&p.hold);
    into.holds_across_await += p.holds_across_await;
    into.charged_ns += p.charged_ns;
    into.charged_holds += p.charged_holds;
    into.charged_across_await += p.charged_across_await;
    into.released += p.released;
    into.released_ns += p.released_ns;
}

/// `resource_wait` / `lock_held_across_await`: one finding per resource
/// site (type and creation site; an internal one per creating location)
/// whose waits' p99 exceeds the wake delay threshold (10 ms).
pub(crate) fn findings(
    c: &Ctx<'_>,
    rs: &Resources,
    th: &Thresholds,
    out: &mut Vec<super::Finding>,
) {
    let mut sites: std::collections::BTreeMap<SiteKey, Site<'_>> = Default::default();
    for (key, _, r) in waited_by_site(rs) {
        let s = sites.entry(key).or_insert_with(|| Site {
            first: r,
            parts: Vec::new(),
            wait: Histogram::new(),
            charged_ns: 0,
        });
        s.wait.merge(&r.wait);
        s.charged_ns += r.charged_ns;
        for (&l, p) in &r.parts {
            match s.parts.iter_mut().find(|x| x.0 == l) {
                Some(x) => merge(&mut x.1, p),
                None => s.parts.push((l, p.clone())),
            }
        }
    }
    for s in sites.values_mut() {
        if s.wait.quantile_permille(990) <= th.wake_delay_ns {
            continue;
        }
        s.parts.sort_by_key(|x| x.0);
        out.push(resource_finding(c, s, th));
    }
}

fn resource_finding(c: &Ctx<'_>, s: &Site<'_>, th: &Thresholds) -> super::Finding {
    let r = s.first;
    let p99 = s.wait.quantile_permille(990);
    let parts: Vec<(u32, &Part)> = s.parts.iter().map(|(l, p)| (*l, p)).collect();
    // Holds overlap a wait several at a time (a semaphore's permits), so
    // charges can add up to more than the waiting itself.
    let charged: u64 = parts.iter().map(|(_, p)| p.charged_ns).sum();
    let by_holds = s.charged_ns * 2 >= s.wait.sum();
    let mean_hold = |p: &Part| p.hold.sum() / p.holds.max(1);
    // Among the locations charged with a fifth of the waiting or more, the
    // one whose holds are longest: a queue forms behind long service
    // times, not behind the many short ones it delays.
    let blamed = if by_holds {
        parts
            .iter()
            .filter(|(_, p)| p.charged_ns > 0 && p.charged_ns * 5 >= charged)
            .max_by(|a, b| {
                mean_hold(a.1)
                    .cmp(&mean_hold(b.1))
                    .then(a.1.charged_ns.cmp(&b.1.charged_ns))
                    .then(b.0.cmp(&a.0))
            })
            .copied()
    } else {
        parts
            .iter()
            .filter(|(_, p)| p.released > 0)
            .max_by(|a, b| a.1.released_ns.cmp(&b.1.released_ns).then(b.0.cmp(&a.0)))
            .copied()
    };
    let mut waiters: Vec<(u32, &Part)> =
        parts.iter().filter(|(_, p)| p.waits > 0).copied().collect();
    waiters.sort_by(|a, b| b.1.wait.sum().cmp(&a.1.wait.sum()).then(a.0.cmp(&b.0)));
    let what = describe(c, r);
    let waiter_text: Vec<String> = waiters
        .iter()
        .take(3)
        .map(|(l, p)| {
            format!(
                "tasks of {} waited {} times, p99 {}, {} in all",
                c.loc(*l),
                p.waits,
                fmt_ns(p.wait.quantile_permille(990)),
                fmt_ns(p.wait.sum())
            )
        })
        .collect();
    let across =
        blamed.is_some_and(|(_, p)| by_holds && p.charged_across_await * 2 > p.charged_holds);
    let kind = if across {
        FindingKind::LockHeldAcrossAwait
    } else {
        FindingKind::ResourceWait
    };
    let mut detail = format!("{} on {what}", waiter_text.join("; "));
    let blamed_json = match blamed {
        Some((l, p)) if by_holds => {
            detail.push_str(&format!(
                "; tasks of {} held it meanwhile ({} holds, mean {}, p99 {}, longest {}; {} of them across an await), overlapping {:.0}% of that waiting",
                c.loc(l),
                p.holds,
                fmt_ns(mean_hold(p)),
                fmt_ns(p.hold.quantile_permille(990)),
                fmt_ns(p.hold.max()),
                p.holds_across_await,
                100.0 * p.charged_ns.min(s.wait.sum()) as f64 / s.wait.sum().max(1) as f64,
            ));
            if across {
                detail.push_str(": the holder keeps it locked while it awaits something else; release it before the await, or shorten what it awaits");
            }
            json!({"spawn_loc": c.loc(l), "by": "holding", "holds": p.holds, "hold_p99_ns": p.hold.quantile_permille(990), "hold_max_ns": p.hold.max(), "holds_across_await": p.holds_across_await, "charged_wait_ns": p.charged_ns})
        }
        Some((l, p)) => {
            detail.push_str(&format!(
                "; the waits were ended by tasks of {} ({} waits, {} of waiting): {}",
                c.loc(l),
                p.released,
                fmt_ns(p.released_ns),
                if r.lock_like {
                    "they released it"
                } else {
                    "they freed capacity or answered (a slow consumer, or a slow responder)"
                }
            ));
            json!({"spawn_loc": c.loc(l), "by": "releasing", "waits_ended": p.released, "wait_ns_ended": p.released_ns})
        }
        None => Value::Null,
    };
    let lock_like_kind = r.lock_like;
    let sev = if (lock_like_kind && s.wait.count() >= 10) || p99 > th.wake_delay_critical_ns {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut locs: Vec<u32> = blamed.map(|b| b.0).into_iter().collect();
    for (l, _) in &waiters {
        if !locs.contains(l) {
            locs.push(*l);
        }
    }
    let mut f = finding(
        kind,
        sev,
        c,
        &locs,
        None,
        None,
        detail,
        json!({
            "resource": {
                "type": c.m.name(r.ty),
                "created_at": (r.loc != UNKNOWN_LOC).then(|| c.loc(r.loc)),
                "internal": r.internal,
                "created_by": r.created_by.map(|l| c.loc(l)),
            },
            "waits": s.wait.count(),
            "wait_p99_ns": p99,
            "wait_max_ns": s.wait.max(),
            "wait_ns_total": s.wait.sum(),
            "charged_to_holds_ns": s.charged_ns,
            "blamed": blamed_json,
            "waiters": waiters.iter().map(|(l, p)| json!({
                "spawn_loc": c.loc(*l),
                "waits": p.waits,
                "wait_p99_ns": p.wait.quantile_permille(990),
                "wait_ns_total": p.wait.sum(),
            })).collect::<Vec<_>>(),
        }),
    );
    if blamed.is_none() {
        f.spawn_loc = None;
        f.spawn_loc_id = None;
    }
    f.victims = waiters
        .iter()
        .filter(|(l, _)| Some(*l) != blamed.map(|b| b.0))
        .map(|(l, p)| Victim {
            location: c.loc(*l),
            delayed_polls: p.waits,
            worst_delay_ns: p.wait.max(),
        })
        .collect();
    super::super::blame::sort_victims(&mut f.victims);
    f
}

/// Every resource site waited on ([`crate::runtime::ResourceSite`]), most
/// total waiting first: the sites the findings judge, grouped the same
/// way (type, creation site, internal, and for one without a site the
/// location that created it).
pub(crate) fn sites(c: &Ctx<'_>, rs: &Resources) -> Vec<crate::runtime::ResourceSite> {
    use crate::runtime::{LongestWait, ResourceSite, SiteHolder, SiteReleaser, SiteWaiter};
    struct Acc<'a> {
        first: &'a Res,
        resources: u64,
        parts: FxHashMap<u32, Part>,
        wait: Histogram,
        longest: Vec<(u32, LongWait)>,
    }
    let mut by: std::collections::BTreeMap<SiteKey, Acc<'_>> = Default::default();
    for (key, k, r) in waited_by_site(rs) {
        let a = by.entry(key).or_insert_with(|| Acc {
            first: r,
            resources: 0,
            parts: FxHashMap::default(),
            wait: Histogram::new(),
            longest: Vec::new(),
        });
        a.resources += 1;
        a.wait.merge(&r.wait);
        for (&l, p) in &r.parts {
            merge(a.parts.entry(l).or_default(), p);
        }
        a.longest.extend(r.longest.iter().map(|w| (k.0, *w)));
    }
    let mut out: Vec<ResourceSite> = by
        .into_values()
        .map(|mut a| {
            let r = a.first;
            let mut parts: Vec<(u32, Part)> = a.parts.into_iter().collect();
            parts.sort_by_key(|x| x.0);
            let mut waiters: Vec<SiteWaiter> = parts
                .iter()
                .filter(|(_, p)| p.waits > 0)
                .map(|(l, p)| SiteWaiter {
                    spawn_loc: c.loc(*l),
                    waits: p.waits,
                    wait_p50_ns: p.wait.quantile_permille(500),
                    wait_p99_ns: p.wait.quantile_permille(990),
                    wait_ns_total: p.wait.sum(),
                })
                .collect();
            waiters.sort_by_key(|w| std::cmp::Reverse(w.wait_ns_total));
            let mut holders: Vec<SiteHolder> = parts
                .iter()
                .filter(|(_, p)| p.holds > 0 || p.charged_ns > 0)
                .map(|(l, p)| SiteHolder {
                    spawn_loc: c.loc(*l),
                    holds: p.holds,
                    hold_p99_ns: p.hold.quantile_permille(990),
                    hold_max_ns: p.hold.max(),
                    holds_across_await: p.holds_across_await,
                    charged_wait_ns: p.charged_ns,
                    charged_holds: p.charged_holds,
                    charged_across_await: p.charged_across_await,
                })
                .collect();
            holders.sort_by(|a, b| {
                b.charged_wait_ns
                    .cmp(&a.charged_wait_ns)
                    .then(b.holds.cmp(&a.holds))
            });
            let mut released_by: Vec<SiteReleaser> = parts
                .iter()
                .filter(|(_, p)| p.released > 0)
                .map(|(l, p)| SiteReleaser {
                    spawn_loc: c.loc(*l),
                    waits_ended: p.released,
                    wait_ns_ended: p.released_ns,
                })
                .collect();
            released_by.sort_by_key(|r| std::cmp::Reverse(r.wait_ns_ended));
            a.longest
                .sort_by(|x, y| y.1.ns.cmp(&x.1.ns).then(x.1.start.cmp(&y.1.start)));
            a.longest.truncate(LONGEST);
            let longest_waits = a
                .longest
                .iter()
                .map(|(proc, w)| LongestWait {
                    task: w.task,
                    spawn_loc: c.loc(w.loc),
                    start_ns: c.ns_at(*proc, w.start),
                    wait_ns: w.ns,
                    released_by: w.released_by.map(|l| c.loc(l)),
                })
                .collect();
            ResourceSite {
                kind: match c.m.name(r.ty) {
                    "Sender|Receiver" => "oneshot".to_string(),
                    t => t.to_string(),
                },
                created_at: (r.loc != UNKNOWN_LOC).then(|| c.loc(r.loc)),
                internal: r.internal,
                created_by: if r.loc == UNKNOWN_LOC {
                    r.created_by.map(|l| c.loc(l))
                } else {
                    None
                },
                resources: a.resources,
                waits: a.wait.count(),
                wait_p50_ns: a.wait.quantile_permille(500),
                wait_p99_ns: a.wait.quantile_permille(990),
                wait_max_ns: a.wait.max(),
                wait_ns_total: a.wait.sum(),
                waiters,
                holders,
                released_by,
                longest_waits,
            }
        })
        .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.wait_ns_total));
    out
}

/// A resource site: type, creation location, tokio-internal, and (for a
/// resource of no known location) the task that created it.
type SiteKey = (u32, u32, bool, Option<u32>);

/// The resources that were waited on, in key order, each with its site
/// and key.
fn waited_by_site(rs: &Resources) -> impl Iterator<Item = (SiteKey, &Key, &Res)> {
    let mut keys: Vec<&Key> = rs.res.keys().collect();
    keys.sort();
    keys.into_iter().filter_map(|k| {
        let r = &rs.res[k];
        if r.wait.count() == 0 {
            return None;
        }
        let created_by = if r.loc == UNKNOWN_LOC {
            r.created_by
        } else {
            None
        };
        Some(((r.ty, r.loc, r.internal, created_by), k, r))
    })
}
