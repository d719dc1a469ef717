//! `lock_convoy`: named locks of `runtrace::sync` (`lock_wait`,
//! `lock_hold`) joined with the polls they happened in. A wait
//! (`[acquired - wait_ns, acquired]`) is charged to the holds of the same
//! lock that overlap it (a hold is recorded at its release, so the holds
//! that kept a waiter out are already read when its wait, recorded at
//! acquisition, arrives); the location whose holds overlapped others'
//! waits longest is blamed. A wait inside a poll blocked its worker thread
//! (a blocking lock in async code).

use super::super::ctx::{finding, Ctx};
use super::super::report::{FindingKind, Severity, Victim};
use super::super::thresholds::Thresholds;
use super::Open;
use runtrace_model::event::{kind, Ev};
use runtrace_model::fmt_ns;
use runtrace_model::hist::Histogram;
use runtrace_model::model::Model;
use serde_json::json;
use std::collections::VecDeque;

/// Recent holds kept per lock for charging waits.
const RECENT_HOLDS: usize = 256;
/// "Not in a task": the location index used for waits and holds outside
/// any poll (plain threads).
pub(crate) const NO_TASK: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Hold {
    proc: u32,
    thread: u32,
    start: u64,
    end: u64,
    loc: u32,
}

/// One location's part in a lock.
#[derive(Default, Clone)]
pub(crate) struct Party {
    pub holds: u64,
    pub hold: Histogram,
    /// ns its holds overlapped other threads' waits for the lock.
    pub blocking_ns: u64,
    pub waits: u64,
    pub wait: Histogram,
    /// Waits inside a poll on a worker: the worker thread was blocked.
    pub blocked_worker_waits: u64,
}

/// One named lock.
#[derive(Clone, Default)]
pub(crate) struct Lock {
    recent: VecDeque<Hold>,
    /// By location index; [`NO_TASK`] at `parties_outside`.
    pub parties: Vec<Party>,
    pub outside: Party,
    pub wait: Histogram,
    pub blocked_worker_waits: u64,
    /// Wait ns charged to no recorded hold (holds under the lock's hold
    /// threshold, or before the recording).
    pub unexplained_ns: u64,
}

impl Lock {
    fn party(&mut self, loc: u32) -> &mut Party {
        if loc == NO_TASK {
            return &mut self.outside;
        }
        if loc as usize >= self.parties.len() {
            self.parties.resize_with(loc as usize + 1, Party::default);
        }
        &mut self.parties[loc as usize]
    }
}

/// Every named lock of the trace, by name index.
#[derive(Clone, Default)]
pub(crate) struct Locks {
    pub locks: Vec<Option<Lock>>,
}

impl Locks {
    pub(crate) fn event(&mut self, ev: &Ev, open: Option<Open>, m: &Model) {
        let name = ev.worker as usize;
        if name >= self.locks.len() {
            self.locks.resize_with(name + 1, || None);
        }
        let lock = self.locks[name].get_or_insert_with(Lock::default);
        let proc = m.threads[ev.thread as usize].proc;
        let scale = m.procs[proc as usize].scale;
        let loc = open.map_or(NO_TASK, |o| o.loc);
        let dur = ev.x;
        // ns -> ticks of this recording, for overlaps in ticks.
        let ticks_of = |ns: u64| {
            let per = scale.ns(1_000_000).max(1);
            (ns as u128 * 1_000_000 / per as u128).min(u64::MAX as u128) as u64
        };
        match ev.kind {
            kind::LOCK_HOLD => {
                let h = Hold {
                    proc,
                    thread: ev.thread,
                    start: ev.ticks.saturating_sub(ticks_of(dur)),
                    end: ev.ticks,
                    loc,
                };
                if lock.recent.len() >= RECENT_HOLDS {
                    lock.recent.pop_front();
                }
                lock.recent.push_back(h);
                let p = lock.party(loc);
                p.holds += 1;
                p.hold.record(dur);
            }
            kind::LOCK_WAIT => {
                let start = ev.ticks.saturating_sub(ticks_of(dur));
                let mut charged = 0;
                let mut charges: Vec<(u32, u64)> = Vec::new();
                for h in lock.recent.iter().rev() {
                    if h.end <= start {
                        break;
                    }
                    if h.proc != proc || h.thread == ev.thread {
                        continue;
                    }
                    let ov = h.end.min(ev.ticks).saturating_sub(h.start.max(start));
                    if ov > 0 {
                        let ns = scale.ns(ov);
                        charged += ns;
                        charges.push((h.loc, ns));
                    }
                }
                for (l, ns) in charges {
                    lock.party(l).blocking_ns += ns;
                }
                lock.unexplained_ns += dur.saturating_sub(charged);
                lock.wait.record(dur);
                let blocked = open.is_some_and(|o| o.worker != runtrace_format::NO_WORKER);
                lock.blocked_worker_waits += blocked as u64;
                let p = lock.party(loc);
                p.waits += 1;
                p.wait.record(dur);
                p.blocked_worker_waits += blocked as u64;
            }
            _ => {}
        }
    }
}

/// `lock_convoy`: one finding per lock whose waits' p99 exceeds the wake
/// delay threshold (10 ms) or whose waits add up to over 100 ms, blaming
/// the location whose holds overlapped others' waits longest.
pub(crate) fn findings(c: &Ctx<'_>, l: &Locks, th: &Thresholds, out: &mut Vec<super::Finding>) {
    for (name, lock) in l.locks.iter().enumerate() {
        let Some(lock) = lock else { continue };
        let p99 = lock.wait.quantile_permille(990);
        if lock.wait.count() == 0 || (p99 <= th.wake_delay_ns && lock.wait.sum() < 100_000_000) {
            continue;
        }
        let parties = lock
            .parties
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u32, p))
            .chain(std::iter::once((NO_TASK, &lock.outside)));
        let Some((hl, holder)) = parties.clone().filter(|(_, p)| p.holds > 0).max_by(|a, b| {
            a.1.blocking_ns
                .cmp(&b.1.blocking_ns)
                .then(a.1.hold.sum().cmp(&b.1.hold.sum()))
                .then(b.0.cmp(&a.0))
        }) else {
            continue;
        };
        let lock_name = c.m.name(name as u32);
        let who = |l: u32| {
            if l == NO_TASK {
                "threads outside any task".to_string()
            } else {
                format!("tasks of {}", c.loc(l))
            }
        };
        let mut waiters: Vec<(u32, &Party)> = parties.filter(|(_, p)| p.waits > 0).collect();
        waiters.sort_by(|a, b| b.1.wait.sum().cmp(&a.1.wait.sum()).then(a.0.cmp(&b.0)));
        let blocked = lock.blocked_worker_waits;
        let sev = if p99 > th.wake_delay_critical_ns || (blocked > 0 && p99 > th.wake_delay_ns) {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let waiter_text: Vec<String> = waiters
            .iter()
            .take(3)
            .map(|(w, p)| {
                format!(
                    "{} ({} waits, {} in all, p99 {})",
                    who(*w),
                    p.waits,
                    fmt_ns(p.wait.sum()),
                    fmt_ns(p.wait.quantile_permille(990))
                )
            })
            .collect();
        let mut detail = format!(
            "lock \"{lock_name}\" was held by {} ({} holds, p99 {}, longest {}) while others waited for it {} in all ({} waits, p99 {}, longest {}); waiting: {}",
            who(hl),
            holder.holds,
            fmt_ns(holder.hold.quantile_permille(990)),
            fmt_ns(holder.hold.max()),
            fmt_ns(holder.blocking_ns),
            lock.wait.count(),
            fmt_ns(p99),
            fmt_ns(lock.wait.max()),
            waiter_text.join(", "),
        );
        if blocked > 0 {
            detail.push_str(&format!(
                "; {blocked} of the waits blocked a worker thread inside a poll (a blocking lock in async code: every task queued on that worker waited too; hold it for less, or use an async lock)"
            ));
        }
        let locs: Vec<u32> = std::iter::once(hl)
            .chain(waiters.iter().map(|w| w.0))
            .filter(|&l| l != NO_TASK)
            .fold(Vec::new(), |mut v, l| {
                if !v.contains(&l) {
                    v.push(l);
                }
                v
            });
        let mut f = finding(
            FindingKind::LockConvoy,
            sev,
            c,
            &locs,
            None,
            None,
            detail,
            json!({
                "lock": lock_name,
                "holder": if hl == NO_TASK { serde_json::Value::Null } else { json!(c.loc(hl)) },
                "holds": holder.holds,
                "hold_p99_ns": holder.hold.quantile_permille(990),
                "hold_max_ns": holder.hold.max(),
                "blocking_ns": holder.blocking_ns,
                "waits": lock.wait.count(),
                "wait_ns_total": lock.wait.sum(),
                "wait_p99_ns": p99,
                "wait_max_ns": lock.wait.max(),
                "blocked_worker_waits": blocked,
                "unexplained_wait_ns": lock.unexplained_ns,
                "waiters": waiters.iter().map(|(w, p)| json!({
                    "spawn_loc": if *w == NO_TASK { serde_json::Value::Null } else { json!(c.loc(*w)) },
                    "waits": p.waits,
                    "wait_ns_total": p.wait.sum(),
                    "wait_p99_ns": p.wait.quantile_permille(990),
                    "blocked_worker_waits": p.blocked_worker_waits,
                })).collect::<Vec<_>>(),
            }),
        );
        if hl == NO_TASK {
            f.spawn_loc = None;
            f.spawn_loc_id = None;
        }
        f.victims = waiters
            .iter()
            .filter(|(w, _)| *w != NO_TASK)
            .map(|(w, p)| Victim {
                location: c.loc(*w),
                delayed_polls: p.waits,
                worst_delay_ns: p.wait.max(),
            })
            .collect();
        super::super::blame::sort_victims(&mut f.victims);
        out.push(f);
    }
}
