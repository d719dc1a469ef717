//! Tasks that were never woken again, from the lifecycle alone, and each
//! location's task life broken into running, waiting for a worker,
//! waiting on resources and other waiting.
//!
//! A task is *stranded* when its last poll returned Pending and no wake
//! came after it until the task's end: the recording's end (still alive),
//! or a terminate without a Ready poll (cancelled: aborted, or dropped by
//! the runtime's shutdown). Stranded tasks are judged per spawn location:
//! - `task_leak`: at least [`LEAK_MIN_TASKS`] stranded tasks (or
//!   [`LEAK_MIN_SHARE_TASKS`] that are at least half of the location's
//!   tasks), each unwoken for at least half its life, spawned over at
//!   least a quarter of the recording: they pile up.
//! - `stuck_task` (a lost wake-up): otherwise, stranded tasks unwoken for
//!   at least the stuck threshold (1 s, or half the recording if shorter)
//!   at a location whose other tasks complete ([`STUCK_MIN_COMPLETED`] or
//!   more), and over ten times as long as those live (p99): the same code
//!   finishes for others, so these were not woken when they should have
//!   been. A location whose tasks never complete (an accept loop, a
//!   ticker) is not judged: long idle waits are its normal life.

use super::super::ctx::{finding, Ctx};
use super::super::report::{fmt_at, FindingKind, Severity};
use super::super::thresholds::Thresholds;
use super::resources::Resources;
use runtrace_model::fmt_ns;
use runtrace_model::hist::Histogram;
use runtrace_model::lifecycle::{Poll, Slots, Task, Wake};
use runtrace_model::model::Model;
use serde_json::{json, Value};

/// Stranded tasks that make a leak at least.
pub(crate) const LEAK_MIN_TASKS: usize = 50;
/// ... or this many, when they are at least half of the location's tasks.
pub(crate) const LEAK_MIN_SHARE_TASKS: usize = 20;
/// Completed tasks a location needs before its stranded ones are judged
/// stuck.
pub(crate) const STUCK_MIN_COMPLETED: u64 = 3;
/// Polls a location needs before its self-wakes are judged.
pub(crate) const SELF_WAKE_MIN_POLLS: u64 = 1_000;
/// The share of a location's polls followed by a wake of the task by
/// itself that makes it a busy-yield loop (tokio-console's lint: half).
pub(crate) const SELF_WAKE_MIN_PERMILLE: u64 = 500;
/// ... when its polls took at least this share of one worker's time over
/// the recording (a loop that yields a few times is no problem).
pub(crate) const SELF_WAKE_MIN_BUSY_PERMILLE: u64 = 50;
/// Stranded tasks kept for the findings at most (counted beyond).
const MAX_STRANDED: usize = 1 << 17;
const NONE: u64 = u64::MAX;

/// One live task's waiting state.
#[derive(Clone, Copy)]
struct TaskW {
    task: u64,
    loc: u32,
    proc: u32,
    /// `pending_since` from before a task dump (NONE: none held): tokio
    /// wakes each task it traced and polls it again, so the first wake
    /// (or poll) of a pending task after a dump began is taken as the
    /// dump's, and its waiting since before is restored once the task is
    /// known to be in the dump and that poll returned Pending.
    held: u64,
    /// The dump that wake belonged to.
    held_dump: u32,
    /// Ticks of its spawn (or first sight).
    born: u64,
    spawned: bool,
    /// Ticks of the end of its last poll that returned Pending with no
    /// wake since (NONE: woken since, never polled, or Ready).
    pending_since: u64,
    /// Ticks of the start of its last poll.
    last_poll: u64,
    /// Ticks of its first wake since its last poll (NONE: none).
    woken: u64,
    last_ready: bool,
    /// A poll of it is open (tokio terminates a task inside its last
    /// poll, before the poll's end).
    polling: bool,
    polls: u32,
    run_ns: u64,
    sched_ns: u64,
    resource_ns: u64,
}

/// A task that ended (or the recording did) stranded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stranded {
    pub proc: u32,
    pub loc: u32,
    pub task: u64,
    /// Ticks of its spawn (or first sight).
    pub born: u64,
    /// Ticks of the start of its last poll.
    pub last_poll: u64,
    /// Ticks since which it waited unwoken.
    pub since: u64,
    /// Ticks of its end: terminate (cancelled), or the recording's last
    /// event (alive).
    pub end: u64,
    /// Still alive when the recording ended.
    pub alive: bool,
    pub polls: u32,
    /// The resource it was waiting on (`resource_poll` not ready), if the
    /// trace has tokio's resources.
    pub waiting_on: Option<u32>,
}

/// Per location: how its tasks ended and where their life went.
#[derive(Default, Clone)]
pub(crate) struct LocW {
    pub completed: u64,
    /// Lives (ns) of the tasks that completed (a Ready poll, then their
    /// terminate).
    pub life: Histogram,
    /// Tasks spawned in the trace whose life is summed below.
    pub tasks: u64,
    pub life_ns: u64,
    pub run_ns: u64,
    pub sched_ns: u64,
    pub resource_ns: u64,
    /// Wakes of its tasks by themselves (see [`super::Waiting::life`]).
    pub self_wakes: u64,
}

/// The task dumps in the trace (runtrace-tokio's `dump()`, feature
/// `taskdump`): where each dumped task sat.
#[derive(Clone, Default)]
pub(crate) struct Dumps {
    /// Dumps begun (task_dump_start events).
    pub started: u64,
    /// Per recording: the latest dump and the ticks it began at.
    latest: Vec<(u32, u64)>,
    /// (recording, task id) -> (dump, name index of its await point) in
    /// its last dump (name 0: in no tokio future).
    pub points: std::collections::HashMap<(u32, u64), (u32, u32)>,
    /// Live slots of the tasks holding a wait from before a dump whose
    /// record has not come yet (a dump's records come after its wakes,
    /// mostly; by ticks, not by arrival).
    held_slots: std::collections::HashMap<(u32, u64), u32>,
}

impl Dumps {
    /// The latest dump of recording `proc` that began at or before
    /// `ticks`: (dump, its first ticks), dump 0 for none.
    fn at(&self, proc: u32, ticks: u64) -> (u32, u64) {
        match self.latest.get(proc as usize) {
            Some(&(d, from)) if d != 0 && ticks >= from => (d, from),
            _ => (0, 0),
        }
    }

    /// Task `task` is in dump `dump`.
    fn has(&self, proc: u32, task: u64, dump: u32) -> bool {
        self.points.get(&(proc, task)).is_some_and(|p| p.0 == dump)
    }
}

/// The task part of the waiting analysis.
#[derive(Clone, Default)]
pub(crate) struct Tasks {
    live: Slots<TaskW>,
    pub(crate) dumps: Dumps,
    pub(crate) locs: Vec<LocW>,
    pub(crate) stranded: Vec<Stranded>,
    pub(crate) stranded_lost: u64,
}

impl Tasks {
    fn loc_mut(&mut self, l: u32) -> &mut LocW {
        loc_in(&mut self.locs, l)
    }

    /// Task `t` was spawned, or first seen.
    #[inline]
    pub(crate) fn born(&mut self, t: &Task) {
        let born = t.spawn.or(t.first_poll).unwrap_or(0);
        self.live.insert(
            t.slot,
            TaskW {
                task: t.task,
                loc: t.loc,
                proc: t.proc,
                held: NONE,
                held_dump: 0,
                born,
                spawned: t.spawn.is_some(),
                pending_since: NONE,
                last_poll: NONE,
                woken: NONE,
                last_ready: false,
                polling: false,
                polls: 0,
                run_ns: 0,
                sched_ns: 0,
                resource_ns: 0,
            },
        );
    }

    /// A task was woken (`own`: by itself).
    #[inline(always)]
    pub(crate) fn woken(&mut self, w: &Wake, own: bool) {
        if let Some(t) = self.live.get_mut(w.slot) {
            hold(t, &mut self.dumps, w.slot, w.ticks, true);
            t.pending_since = NONE;
            if t.woken == NONE {
                t.woken = w.ticks;
            }
            if own {
                let l = t.loc;
                self.loc_mut(l).self_wakes += 1;
            }
        }
    }

    /// A poll started; `delay_ns`: its wake -> poll delay, when seen.
    #[inline(always)]
    pub(crate) fn poll_start(&mut self, p: &Poll, delay_ns: Option<u64>) {
        if let Some(t) = self.live.get_mut(p.slot) {
            // A dump's poll whose wake was not recorded.
            hold(t, &mut self.dumps, p.slot, p.start, false);
            // A poll nested in its own task's poll (never seen) or
            // answering a wake: either way no longer unwoken.
            t.pending_since = NONE;
            t.woken = NONE;
            t.polling = true;
            t.last_poll = p.start;
            if let Some(d) = delay_ns {
                t.sched_ns += d;
            }
            // Woken by itself right after its previous poll on this
            // thread (tokio's `yield_now`), confirmed now.
            if p.self_woken {
                loc_in(&mut self.locs, t.loc).self_wakes += 1;
            }
        }
    }

    /// A poll ended, after `ns`.
    #[inline(always)]
    pub(crate) fn poll_end(&mut self, p: &Poll, ns: u64) {
        if let Some(t) = self.live.get_mut(p.slot) {
            t.polls = t.polls.saturating_add(1);
            t.polling = false;
            t.run_ns += ns;
            t.last_ready = p.ready;
            // A wake during the poll (the task woke itself, or was
            // woken meanwhile) means it will be polled again.
            let pending = !(p.ready || t.woken != NONE);
            t.pending_since = if !pending {
                NONE
            } else if t.held != NONE && self.dumps.has(t.proc, t.task, t.held_dump) {
                // The dump's poll, Pending again: still waiting since.
                t.held
            } else {
                p.end
            };
            // Restored, or over (Ready, woken meanwhile); else kept for
            // the dump's record.
            if !pending || t.pending_since == t.held {
                if t.held != NONE {
                    self.dumps.held_slots.remove(&(t.proc, t.task));
                }
                t.held = NONE;
            }
        }
    }

    /// A task dump began (`task_dump_start`): the first wake and poll of
    /// each pending task after it are tokio's tracing.
    pub(crate) fn dump_start(&mut self, proc: u32, dump: u32, ticks: u64) {
        self.dumps.started += 1;
        if proc as usize >= self.dumps.latest.len() {
            self.dumps.latest.resize(proc as usize + 1, (0, 0));
        }
        self.dumps.latest[proc as usize] = (dump.max(1), ticks);
    }

    /// Task `task` sat at await point `point` (name index) in dump `dump`.
    pub(crate) fn dumped(&mut self, proc: u32, task: u64, dump: u32, point: u32) {
        let dump = dump.max(1);
        self.dumps.points.insert((proc, task), (dump, point));
        // Its dump's poll came first (it is pending again): restore the
        // wait it held. Else that poll restores it when it ends.
        let Some(&slot) = self.dumps.held_slots.get(&(proc, task)) else {
            return;
        };
        let Some(t) = self.live.get_mut(slot).filter(|t| t.task == task) else {
            self.dumps.held_slots.remove(&(proc, task));
            return;
        };
        if t.held_dump != dump {
            return;
        }
        if t.pending_since != NONE {
            t.pending_since = t.held;
            t.held = NONE;
            self.dumps.held_slots.remove(&(proc, task));
        }
    }

    /// A resource wait of `ns` by the live task in `slot`.
    pub(crate) fn resource_wait(&mut self, slot: u32, ns: u64) {
        if let Some(t) = self.live.get_mut(slot) {
            t.resource_ns += ns;
        }
    }

    /// Task `life` is over: terminated at `terminated`, or alive at the
    /// recording's end (None); `on`: the resource it was waiting on.
    pub(crate) fn end(&mut self, life: &Task, terminated: Option<u64>, on: Option<u32>, m: &Model) {
        let Some(t) = self.live.remove(life.slot) else {
            return;
        };
        if t.held != NONE {
            self.dumps.held_slots.remove(&(t.proc, t.task));
        }
        let p = &m.procs[life.proc as usize];
        let end = terminated.unwrap_or(p.last_ticks.max(t.born));
        let life_ns = p.scale.ns(end.saturating_sub(t.born));
        // Terminated inside a poll (tokio's order) or after a Ready one.
        let completed = terminated.is_some() && (t.last_ready || t.polling);
        let l = self.loc_mut(t.loc);
        if completed {
            l.completed += 1;
            if t.spawned {
                l.life.record(life_ns);
            }
        }
        if t.spawned {
            l.tasks += 1;
            l.life_ns += life_ns;
            l.run_ns += t.run_ns;
            l.sched_ns += t.sched_ns;
            l.resource_ns += t.resource_ns;
        }
        if !completed && t.pending_since != NONE {
            if self.stranded.len() < MAX_STRANDED {
                self.stranded.push(Stranded {
                    proc: life.proc,
                    loc: t.loc,
                    task: life.task,
                    born: t.born,
                    last_poll: t.last_poll,
                    since: t.pending_since,
                    end,
                    alive: terminated.is_none(),
                    polls: t.polls,
                    waiting_on: on,
                });
            } else {
                self.stranded_lost += 1;
            }
        }
    }

    pub(crate) fn finish(&mut self, _m: &Model) {
        // Every live task got its Alive record: nothing is left open.
        self.live.clear();
    }

    /// `{spawn_loc, tasks, life_ns, running_ns, scheduling_ns,
    /// resource_ns, other_ns}` per location, the longest total life first.
    pub(crate) fn breakdown_json(&self, c: &Ctx<'_>) -> Value {
        let mut ls: Vec<(usize, &LocW)> = self
            .locs
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tasks > 0)
            .collect();
        ls.sort_by(|a, b| b.1.life_ns.cmp(&a.1.life_ns).then(a.0.cmp(&b.0)));
        Value::Array(
            ls.iter()
                .map(|(i, l)| {
                    let known = l.run_ns + l.sched_ns + l.resource_ns;
                    json!({
                        "spawn_loc": c.loc(*i as u32),
                        "tasks": l.tasks,
                        "life_ns": l.life_ns,
                        "running_ns": l.run_ns,
                        "scheduling_ns": l.sched_ns,
                        "resource_ns": l.resource_ns,
                        "other_ns": l.life_ns.saturating_sub(known),
                    })
                })
                .collect(),
        )
    }
}

/// Location `l`'s state, grown to it.
#[inline(always)]
fn loc_in(locs: &mut Vec<LocW>, l: u32) -> &mut LocW {
    if l as usize >= locs.len() {
        locs.resize_with(l as usize + 1, LocW::default);
    }
    &mut locs[l as usize]
}

/// Task `t` (in `slot`) is woken or polled at `ticks`: the first time
/// since a dump began, while pending since before it, that is most likely
/// tokio's tracing: keep its wait (see [`TaskW::held`]). A second wake
/// since the dump is the application's: nothing is held any more.
#[inline(always)]
fn hold(t: &mut TaskW, d: &mut Dumps, slot: u32, ticks: u64, wake: bool) {
    // Most traces have no task dump: one test per poll and wake then.
    if d.started != 0 {
        hold_in_dump(t, d, slot, ticks, wake);
    }
}

fn hold_in_dump(t: &mut TaskW, d: &mut Dumps, slot: u32, ticks: u64, wake: bool) {
    let (dump, from) = d.at(t.proc, ticks);
    if dump == 0 {
        return;
    }
    if t.held_dump == dump {
        if wake && t.held != NONE && t.pending_since == NONE {
            d.held_slots.remove(&(t.proc, t.task));
            t.held = NONE;
        }
        return;
    }
    if t.pending_since != NONE && t.pending_since <= from {
        t.held = t.pending_since;
        t.held_dump = dump;
        d.held_slots.insert((t.proc, t.task), slot);
    }
}

/// A stranded task's numbers in ns.
struct Judged<'a> {
    s: &'a Stranded,
    unwoken_ns: u64,
    life_ns: u64,
    born_ns: i64,
}

fn judge<'a>(c: &Ctx<'_>, s: &'a Stranded) -> Judged<'a> {
    let p = &c.m.procs[s.proc as usize];
    Judged {
        s,
        unwoken_ns: p.scale.ns(s.end.saturating_sub(s.since)),
        life_ns: p.scale.ns(s.end.saturating_sub(s.born)),
        born_ns: p.ns(s.born),
    }
}

/// The recording's length in ns.
fn duration_ns(c: &Ctx<'_>, proc: u32) -> u64 {
    let p = &c.m.procs[proc as usize];
    p.scale.ns(p.last_ticks.saturating_sub(p.first_ticks))
}

/// The stuck threshold of recording `proc`: 1 s, or half the recording
/// when that is shorter.
pub(crate) fn stuck_ns(c: &Ctx<'_>, proc: u32) -> u64 {
    (duration_ns(c, proc) / 2).min(1_000_000_000)
}

pub(crate) fn findings(
    c: &Ctx<'_>,
    t: &Tasks,
    rs: &Resources,
    _th: &Thresholds,
    out: &mut Vec<super::Finding>,
) {
    self_wakes(c, t, out);
    // Stranded tasks by location (and recording).
    let mut by: std::collections::BTreeMap<(u32, u32), Vec<Judged<'_>>> = Default::default();
    for s in &t.stranded {
        by.entry((s.loc, s.proc)).or_default().push(judge(c, s));
    }
    for ((l, proc), mut ss) in by {
        ss.sort_by_key(|j| (j.s.born, j.s.task));
        let loc = t.locs.get(l as usize).cloned().unwrap_or_default();
        let dur = duration_ns(c, proc);
        let piled: Vec<&Judged<'_>> = ss
            .iter()
            .filter(|j| j.unwoken_ns * 2 >= j.life_ns && j.life_ns > 0)
            .collect();
        let span = match (piled.first(), piled.last()) {
            (Some(a), Some(b)) => (b.born_ns - a.born_ns).max(0) as u64,
            _ => 0,
        };
        let n = piled.len();
        let leak = (n >= LEAK_MIN_TASKS
            || (n >= LEAK_MIN_SHARE_TASKS && n as u64 * 2 >= loc.tasks.max(n as u64)))
            && span * 4 >= dur;
        if leak {
            out.push(leak_finding(
                c,
                l,
                &piled,
                &loc,
                span,
                dur,
                Awaiting {
                    resource: awaited(c, rs, &piled),
                    points: AwaitPoints::of(c, &t.dumps, &piled),
                },
            ));
            continue;
        }
        let stuck_th = stuck_ns(c, proc);
        let p99_life = loc.life.quantile_permille(990);
        let stuck: Vec<&Judged<'_>> = ss
            .iter()
            .filter(|j| j.unwoken_ns >= stuck_th && j.unwoken_ns > p99_life.saturating_mul(10))
            .collect();
        if stuck.is_empty() || loc.completed < STUCK_MIN_COMPLETED {
            continue;
        }
        out.push(stuck_finding(
            c,
            l,
            &stuck,
            &loc,
            stuck_th,
            Awaiting {
                resource: awaited(c, rs, &stuck),
                points: AwaitPoints::of(c, &t.dumps, &stuck),
            },
        ));
    }
}

/// `self_wake`: locations whose tasks mostly wake themselves (see
/// [`SELF_WAKE_MIN_PERMILLE`]).
fn self_wakes(c: &Ctx<'_>, t: &Tasks, out: &mut Vec<super::Finding>) {
    let dur = (0..c.m.procs.len() as u32)
        .map(|p| duration_ns(c, p))
        .max()
        .unwrap_or(0);
    for (l, lw) in t.locs.iter().enumerate() {
        let Some(ls) = c.locs.get(l) else {
            continue;
        };
        let polls = ls.poll.count();
        let busy = ls.poll.sum();
        if polls < SELF_WAKE_MIN_POLLS
            || lw.self_wakes * 1_000 < polls * SELF_WAKE_MIN_PERMILLE
            || (busy as u128) * 1_000 < dur as u128 * SELF_WAKE_MIN_BUSY_PERMILLE as u128
        {
            continue;
        }
        let share = lw.self_wakes.min(polls) * 100 / polls;
        let detail = format!(
            "tasks spawned at {} woke themselves after {share}% of their {polls} polls ({} self-wakes), polling {} in all ({}% of one worker's time over {}): a busy-yield loop, a task that wakes itself (yield_now, wake_by_ref) and returns Pending instead of waiting for what it needs; await the event (a channel, a Notify, a timer) or do the work in one poll",
            c.loc(l as u32),
            lw.self_wakes,
            fmt_ns(busy),
            (busy as u128 * 100 / dur.max(1) as u128),
            fmt_ns(dur),
        );
        out.push(finding(
            FindingKind::SelfWake,
            Severity::Warning,
            c,
            &[l as u32],
            None,
            None,
            detail,
            json!({
                "self_wakes": lw.self_wakes,
                "polls": polls,
                "poll_ns": busy,
                "recording_ns": dur,
            }),
        ));
    }
}

/// The resource most of `tasks` were waiting on, when the trace says
/// (tokio's resources recorded): "a oneshot created at src/x.rs:3:9 (40 of
/// 50 tasks)".
fn awaited(c: &Ctx<'_>, rs: &Resources, tasks: &[&Judged<'_>]) -> Option<String> {
    // By what the resource is (type and site): a oneshot per request is
    // one site.
    let mut n: std::collections::BTreeMap<String, usize> = Default::default();
    for j in tasks {
        if let Some(what) = j.s.waiting_on.and_then(|r| rs.describe_key(c, j.s.proc, r)) {
            *n.entry(what).or_default() += 1;
        }
    }
    let (what, k) = n
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
    Some(format!("{what} ({k} of {} tasks)", tasks.len()))
}

/// What stranded tasks waited on: the resource (tokio's resources
/// recorded) and where they sat (task dumps).
struct Awaiting {
    resource: Option<String>,
    points: AwaitPoints,
}

impl Awaiting {
    /// The detail's tail: "; they wait on R; task dump: ...".
    fn clauses(&self) -> String {
        let mut s = String::new();
        if let Some(a) = &self.resource {
            s.push_str(&format!("; they wait on {a}"));
        }
        s.push_str(&self.points.clause());
        s
    }
}

/// Where stranded tasks sat in the trace's task dumps.
struct AwaitPoints {
    /// The trace has task dumps.
    dumped: bool,
    /// (await point, tasks), most tasks first; "" is no tokio future.
    points: Vec<(String, usize)>,
    /// Tasks in no dump (spawned after the last, or left out).
    undumped: usize,
}

/// How to get await points when the trace has no task dump.
pub(crate) const ENABLE_DUMPS: &str = "to see the await point each task sits at, take a task dump: runtrace's feature `taskdump` (tokio's task dumps), then RUNTRACE_TASK_DUMP=end (when #[runtrace::main]'s body returns) or =USR1 (on a signal), or call runtrace::tokio::dump()";

impl AwaitPoints {
    fn of(c: &Ctx<'_>, d: &Dumps, tasks: &[&Judged<'_>]) -> AwaitPoints {
        let mut n: std::collections::HashMap<u32, usize> = Default::default();
        let mut undumped = 0;
        for j in tasks {
            match d.points.get(&(j.s.proc, j.s.task)) {
                Some(&(_, p)) => *n.entry(p).or_default() += 1,
                None => undumped += 1,
            }
        }
        let mut points: Vec<(String, usize)> = n
            .into_iter()
            .map(|(p, k)| {
                (
                    if p == 0 {
                        String::new()
                    } else {
                        c.m.name(p).to_string()
                    },
                    k,
                )
            })
            .collect();
        points.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        AwaitPoints {
            dumped: d.started > 0,
            points,
            undumped,
        }
    }

    /// The detail's clause: "; task dumps: 48 sit at src/x.rs:9 watch ->
    /// oneshot::Receiver, 2 in no tokio future".
    fn clause(&self) -> String {
        if !self.dumped {
            return format!("; {ENABLE_DUMPS}");
        }
        if self.points.is_empty() {
            return "; none of them was in a task dump (spawned after the last)".to_string();
        }
        let parts: Vec<String> = self
            .points
            .iter()
            .take(3)
            .map(|(p, k)| {
                if p.is_empty() {
                    format!("{k} in no tokio future (a future of the application's own returned Pending: does it keep the waker?)")
                } else {
                    format!("{k} sit at {p}")
                }
            })
            .collect();
        let mut s = format!("; task dump: {}", parts.join(", "));
        if self.points.len() > 3 {
            s.push_str(&format!(" and {} more await points", self.points.len() - 3));
        }
        if self.undumped > 0 {
            s.push_str(&format!(" ({} not in a dump)", self.undumped));
        }
        s
    }

    /// JSON `await_points`: null without task dumps in the trace.
    fn json(&self) -> Value {
        if !self.dumped {
            return Value::Null;
        }
        Value::Array(
            self.points
                .iter()
                .map(|(p, k)| json!({"await_point": p, "tasks": k}))
                .collect(),
        )
    }
}

fn task_json(c: &Ctx<'_>, j: &Judged<'_>) -> Value {
    let p = &c.m.procs[j.s.proc as usize];
    json!({
        "task": j.s.task,
        "spawned_at_ns": j.born_ns,
        "last_poll_at_ns": (j.s.last_poll != NONE).then(|| p.ns(j.s.last_poll)),
        "unwoken_ns": j.unwoken_ns,
        "life_ns": j.life_ns,
        "polls": j.s.polls,
        "alive_at_end": j.s.alive,
    })
}

fn leak_finding(
    c: &Ctx<'_>,
    l: u32,
    piled: &[&Judged<'_>],
    loc: &LocW,
    span: u64,
    dur: u64,
    awaiting: Awaiting,
) -> super::Finding {
    let n = piled.len() as u64;
    let alive = piled.iter().filter(|j| j.s.alive).count() as u64;
    let rate = n as f64 / (span.max(1) as f64 / 1e9);
    let oldest = piled[0];
    let first = piled.first().map_or(0, |j| j.born_ns);
    let last = piled.last().map_or(0, |j| j.born_ns);
    let ended = if alive == n {
        "all still alive when the recording ended".to_string()
    } else if alive == 0 {
        "all cancelled at their end (dropped by the runtime's shutdown, or aborted) without ever being woken"
            .to_string()
    } else {
        format!(
            "{alive} still alive when the recording ended, {} cancelled without being woken",
            n - alive
        )
    };
    let detail = format!(
        "tasks spawned at {} pile up: {n} of its {} tasks waited unwoken for most of their life (pending after their last poll, never woken again), spawned over {} of the {} recording ({rate:.0} per second); {ended}; the oldest: task {} spawned at {}, unwoken for {} after {} polls. Each holds its future's memory: whatever it awaits is never completed (a sender kept but never used, a missing notify) or nobody cancels it",
        c.loc(l),
        loc.tasks.max(n),
        fmt_ns(span),
        fmt_ns(dur),
        oldest.s.task,
        fmt_at(oldest.born_ns),
        fmt_ns(oldest.unwoken_ns),
        oldest.s.polls,
    );
    let detail = detail + &awaiting.clauses();
    finding(
        FindingKind::TaskLeak,
        Severity::Critical,
        c,
        &[l],
        None,
        Some((first, last)),
        detail,
        json!({
            "stranded_tasks": n,
            "alive_at_end": alive,
            "cancelled_unwoken": n - alive,
            "tasks": loc.tasks.max(n),
            "completed_tasks": loc.completed,
            "spawn_span_ns": span,
            "recording_ns": dur,
            "per_second": rate,
            "waiting_on": awaiting.resource,
            "await_points": awaiting.points.json(),
            "oldest": piled.iter().take(5).map(|j| task_json(c, j)).collect::<Vec<_>>(),
        }),
    )
}

fn stuck_finding(
    c: &Ctx<'_>,
    l: u32,
    stuck: &[&Judged<'_>],
    loc: &LocW,
    stuck_th: u64,
    awaiting: Awaiting,
) -> super::Finding {
    let n = stuck.len() as u64;
    let worst = stuck.iter().max_by_key(|j| j.unwoken_ns).unwrap();
    let p = &c.m.procs[worst.s.proc as usize];
    let last_poll = (worst.s.last_poll != NONE).then(|| p.ns(worst.s.last_poll));
    let detail = format!(
        "{n} tasks spawned at {} stayed pending with no wake for over {} (the longest {}: task {}, last polled at {}, after {} polls), while {} other tasks of the same location completed (p99 life {}): a lost wake-up, a future that returned Pending without arranging a wake (keeping the waker)",
        c.loc(l),
        fmt_ns(stuck_th),
        fmt_ns(worst.unwoken_ns),
        worst.s.task,
        last_poll.map_or("-".into(), fmt_at),
        worst.s.polls,
        loc.completed,
        fmt_ns(loc.life.quantile_permille(990)),
    );
    let detail = detail + &awaiting.clauses();
    let win = (last_poll.unwrap_or(worst.born_ns), p.ns(worst.s.end));
    finding(
        FindingKind::StuckTask,
        if n >= 5 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        c,
        &[l],
        None,
        Some(win),
        detail,
        json!({
            "stuck_tasks": n,
            "threshold_ns": stuck_th,
            "completed_tasks": loc.completed,
            "completed_life_p99_ns": loc.life.quantile_permille(990),
            "waiting_on": awaiting.resource,
            "await_points": awaiting.points.json(),
            "tasks": stuck.iter().take(5).map(|j| task_json(c, j)).collect::<Vec<_>>(),
        }),
    )
}
