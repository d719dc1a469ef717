//! The windows `top` computes while following from one lifecycle tracker
//! (`runtrace_top::stagger`) say exactly what windows computed whole say
//! (`window::analyze`, what a replay computes): the same `runtrace analyze
//! --json` report and the same recent polls and workers, on a workload
//! that puts at every window's start what a joined window must hide (a
//! poll begun before it, a wake before it answered after it, a task woken
//! both before and after it, a waker's poll begun before it, a span
//! entered before it and left after, tasks never spawned in the trace,
//! wakes of tasks that ended, locks waited for in a poll begun before it,
//! a task woken before it and polled after).

use runtrace_analyze::functions::StackNames;
use runtrace_analyze::Thresholds;
use runtrace_format::NO_WORKER;
use runtrace_model::event::{kind, Ev};
use runtrace_model::input;
use runtrace_model::synth::TraceBuilder;
use runtrace_top::stagger::{Ask, Following};
use runtrace_top::window::{self, Analysed, Collector, Losses, RecentPoll, WorkerNow};
use std::collections::VecDeque;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
/// The driver's thread (I/O and timer wakes, from no poll).
const DRIVER: u64 = 9;

/// splitmix64: the same workload on every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// One event of the workload, emitted in time order.
enum E {
    Spawn(u64, u64, u64),
    PollStart(u64, u32, u64),
    PollEnd(u64, u32, u64, bool),
    Wake(u64, u32, u64),
    Terminate(u64, u64),
    Park(u64, u32),
    Unpark(u64, u32),
    SpanNew(u64, u64, &'static str),
    SpanEnter(u64, u64),
    SpanExit(u64, u64),
    SpanClose(u64, u64),
    /// A CPU sample of a thread, with a stack id.
    Sample(u64, u64),
    /// An off-CPU interval of a thread ending now: (tid, stack, ns off).
    OffCpu(u64, u64, u64),
    /// A lock got after a wait, or released after a hold, in the poll
    /// running on the thread: (tid, lock, ns).
    LockWait(u64, u64, u64),
    LockHold(u64, u64, u64),
}

/// The recorder's writer thread (CPU samples are in its chunks).
const WRITER: u64 = 8;

/// Two workers' 12 s, tasks owned by one worker each, a third's rarely
/// polled task, a fourth's poll longer than a window and a fifth's
/// polls of its location; `profiled`: with a CPU profile (on- and off-CPU
/// samples of every worker, in polls and between them).
fn workload(profiled: bool) -> Vec<u8> {
    let mut evs: Vec<(u64, u64, E)> = Vec::new();
    let mut seq = 0u64;
    let mut push = |t: u64, e: E, evs: &mut Vec<(u64, u64, E)>| {
        seq += 1;
        evs.push((t, seq, e));
    };
    let mut rng = Rng(7);
    let mut next_task = 1u64;
    let mut next_span = 1u64;
    for worker in 0..2u32 {
        let tid = worker as u64 + 1;
        // (task, span, polls left); tasks never spawned in the trace
        // (ids from 1 << 40) on worker 0.
        let mut runnable: VecDeque<(u64, u64, u32)> = VecDeque::new();
        if worker == 0 {
            for k in 0..3 {
                runnable.push_back(((1 << 40) + k, 0, u32::MAX));
            }
            // Two more polled once: one then idle to the end, one then
            // terminated 7.2 s in without a poll since.
            push(200 * MS, E::PollStart(tid, worker, (1 << 40) + 3), &mut evs);
            push(
                200 * MS + 20 * US,
                E::PollEnd(tid, worker, (1 << 40) + 3, false),
                &mut evs,
            );
            push(300 * MS, E::PollStart(tid, worker, (1 << 40) + 4), &mut evs);
            push(
                300 * MS + 20 * US,
                E::PollEnd(tid, worker, (1 << 40) + 4, false),
                &mut evs,
            );
            push(7_200 * MS, E::Terminate(DRIVER, (1 << 40) + 4), &mut evs);
        }
        let mut waiting: Vec<(u64, u64, u64, u32)> = Vec::new(); // (wake at, task, span, left)
        let mut ended: Vec<u64> = Vec::new();
        let mut t = MS;
        let mut long_polls = 0;
        while t < 12 * S {
            // The driver's wakes due, some twice before the task's poll.
            waiting.sort_by_key(|w| std::cmp::Reverse(w.0));
            while waiting.last().is_some_and(|w| w.0 <= t) {
                let (at, task, span, left) = waiting.pop().unwrap();
                push(at, E::Wake(DRIVER, NO_WORKER, task), &mut evs);
                if rng.below(4) == 0 {
                    push(
                        at + (t - at) / 2,
                        E::Wake(DRIVER, NO_WORKER, task),
                        &mut evs,
                    );
                }
                runnable.push_back((task, span, left));
            }
            // Now and then, a wake of a task that ended.
            if rng.below(50) == 0 {
                if let Some(&gone) = ended.get(rng.below(ended.len().max(1) as u64) as usize) {
                    push(t, E::Wake(DRIVER, NO_WORKER, gone), &mut evs);
                }
            }
            if runnable.is_empty() || rng.below(3) == 0 {
                let task = next_task;
                next_task += 1;
                let loc = 1 + rng.below(3);
                push(t, E::Spawn(tid, task, loc), &mut evs);
                let span = if rng.below(3) == 0 {
                    let s = next_span;
                    next_span += 1;
                    let name = if loc == 1 { "GET /item" } else { "POST /order" };
                    push(t, E::SpanNew(tid, s, name), &mut evs);
                    s
                } else {
                    0
                };
                runnable.push_back((task, span, 1 + rng.below(4) as u32));
                t += US;
            }
            let (task, span, left) = runnable.pop_front().unwrap();
            // Short polls, and every 3.5 s one of 1.3 s: across a window's
            // start, with the tasks woken meanwhile waiting (some woken
            // again) and its own wakes.
            let d = if t / (3_500 * MS) != long_polls {
                long_polls = t / (3_500 * MS);
                1_300 * MS
            } else {
                5 * US + rng.below(300 * US)
            };
            push(t, E::PollStart(tid, worker, task), &mut evs);
            if span != 0 {
                push(t + US / 2, E::SpanEnter(tid, span), &mut evs);
            }
            // A poll that wakes a task of its worker: the waker is this poll.
            if rng.below(4) == 0 && !waiting.is_empty() {
                let i = rng.below(waiting.len() as u64) as usize;
                let (_, woken, wspan, wleft) = waiting.swap_remove(i);
                push(t + d / 2, E::Wake(tid, worker, woken), &mut evs);
                runnable.push_back((woken, wspan, wleft));
            }
            if span != 0 {
                push(t + d - US / 2, E::SpanExit(tid, span), &mut evs);
            }
            // Now and then a lock waited for and held in the poll (late in
            // a long one: after a window's start).
            if rng.below(3) == 0 || d > S {
                let at = t + d / 4 * 3;
                let lock = 101 + rng.below(2);
                push(at, E::LockWait(tid, lock, 1 + rng.below(d / 8)), &mut evs);
                push(at + d / 8, E::LockHold(tid, lock, d / 8), &mut evs);
            }
            let done = left == 1;
            if d > S && !done {
                // A long poll wakes its own task (then yields).
                push(t + d / 2 + US, E::Wake(tid, worker, task), &mut evs);
            }
            if d > S && span != 0 {
                // And enters its span again midway.
                push(t + d / 2 + 2 * US, E::SpanEnter(tid, span), &mut evs);
                push(t + d / 2 + 90 * US, E::SpanExit(tid, span), &mut evs);
            }
            if done {
                push(t + d - US / 4, E::Terminate(tid, task), &mut evs);
                ended.push(task);
            }
            push(t + d, E::PollEnd(tid, worker, task, done), &mut evs);
            if done {
                if span != 0 {
                    push(t + d, E::SpanClose(tid, span), &mut evs);
                }
            } else {
                let at = t + d + 10 * US + rng.below(40 * MS);
                waiting.push((at, task, span, left.saturating_sub(1).max(1)));
            }
            t += d + US + rng.below(100 * US);
            // Idle now and then: the worker parks.
            if runnable.is_empty() && rng.below(2) == 0 {
                push(t, E::Park(tid, worker), &mut evs);
                t += MS + rng.below(20 * MS);
                push(t, E::Unpark(tid, worker), &mut evs);
            }
        }
    }
    // A third worker's one task, polled every 0.7 s, 0.4 s after its
    // wake (some woken again 0.2 s in): its location keeps fewer polls
    // than a window's recent polls hold, so a window beginning between a
    // wake and its poll shows that poll's delay as a tracker seeded at
    // its start sees it.
    let rare = next_task;
    let mut t = 100 * MS;
    push(t, E::Spawn(3, rare, 4), &mut evs);
    while t + S < 12 * S {
        push(t, E::Wake(DRIVER, NO_WORKER, rare), &mut evs);
        if (t / (700 * MS)).is_multiple_of(2) {
            push(t + 200 * MS, E::Wake(DRIVER, NO_WORKER, rare), &mut evs);
        }
        push(t + 400 * MS, E::PollStart(3, 2, rare), &mut evs);
        push(
            t + 400 * MS + 50 * US,
            E::PollEnd(3, 2, rare, false),
            &mut evs,
        );
        t += 700 * MS;
    }
    // A fourth worker's one poll of 6.5 s, longer than a window (open at
    // its end though begun before it), of a location a fifth worker polls
    // every 0.15 s (so its end is among that location's recent polls, and
    // not one of a window's that began inside it).
    let (long, short) = (rare + 1, rare + 2);
    push(900 * MS, E::Spawn(4, long, 5), &mut evs);
    push(S, E::PollStart(4, 3, long), &mut evs);
    // Its worker parks midway, the poll still open (as a trace that lost
    // the poll's end would have it): in a window begun after that poll
    // began, the worker is there, polling nothing.
    push(4_000 * MS, E::Park(4, 3), &mut evs);
    push(4_100 * MS, E::Unpark(4, 3), &mut evs);
    push(7_500 * MS, E::PollEnd(4, 3, long, false), &mut evs);
    push(900 * MS, E::Spawn(5, short, 5), &mut evs);
    let mut t = S;
    while t + S < 12 * S {
        push(t - 10 * MS, E::Wake(DRIVER, NO_WORKER, short), &mut evs);
        push(t, E::PollStart(5, 4, short), &mut evs);
        push(t + 20 * US, E::PollEnd(5, 4, short, false), &mut evs);
        t += 150 * MS;
    }
    if profiled {
        // Every 2.5 ms a sample of each worker, on-CPU (one of two
        // stacks) or now and then off-CPU.
        let mut t = 3 * MS;
        while t < 12 * S {
            for tid in 1..=3 {
                let stack = 1 + rng.below(2);
                if rng.below(8) == 0 {
                    push(t + tid, E::OffCpu(tid, stack, 300 * US), &mut evs);
                } else {
                    push(t + tid, E::Sample(tid, stack), &mut evs);
                }
            }
            t += 2_500 * US;
        }
    }
    evs.sort_by_key(|e| (e.0, e.1));
    let mut b = TraceBuilder::new();
    if profiled {
        b.profile_elsewhere(99);
        b.stacks(&[(1, &[0x40_1000, 0x40_2000]), (2, &[0x40_3000, 0x40_2000])]);
    }
    b.location(1, "src/a.rs", 1, 1);
    b.location(2, "src/b.rs", 2, 1);
    b.location(3, "src/c.rs", 3, 1);
    b.location(4, "src/d.rs", 4, 1);
    b.location(5, "src/e.rs", 5, 1);
    b.string(101, "cache");
    b.string(102, "db");
    for (t, _, e) in evs {
        match e {
            E::Spawn(tid, task, loc) => b.spawn(tid, t, task, 0, loc, 0),
            E::PollStart(tid, w, task) => b.poll_start(tid, w, t, task, 0, 0),
            E::PollEnd(tid, w, task, ready) => b.poll_end(tid, w, t, task, ready),
            E::Wake(tid, w, task) => b.wake(tid, w, t, task, 0),
            E::Terminate(tid, task) => b.terminate(tid, t, task),
            E::Park(tid, w) => b.park(tid, w, t, 0, 0),
            E::Unpark(tid, w) => b.unpark(tid, w, t, 0, 0),
            E::SpanNew(tid, s, name) => b.span_new(tid, t, s, 0, name, ""),
            E::SpanEnter(tid, s) => b.span_enter(tid, t, s),
            E::SpanExit(tid, s) => b.span_exit(tid, t, s),
            E::SpanClose(tid, s) => b.span_close(tid, t, s),
            E::Sample(tid, stack) => b.cpu_sample(WRITER, t, tid, stack),
            E::OffCpu(tid, stack, off) => b.off_cpu(WRITER, t, tid, stack, off),
            E::LockWait(tid, lock, ns) => b.lock_wait(tid, t, lock, ns, false),
            E::LockHold(tid, lock, ns) => b.lock_hold(tid, t, lock, ns, false),
        }
    }
    b.finish()
}

/// What a window says, to compare: the report as `runtrace analyze
/// --json` prints it (with the functions its CPU samples name, if any),
/// each location's recent polls, each worker now, and the samples as
/// attributed to polls.
type Said = (String, Vec<Vec<RecentPoll>>, Vec<Option<WorkerNow>>, String);

fn said(w: &mut Analysed, threads: u32, locs: u32) -> Said {
    if let Some(p) = &w.profile {
        let mut names = StackNames::recorded(p);
        w.add_functions(&mut names);
    }
    let recent = (0..locs)
        .map(|l| w.now.recent(l).copied().collect())
        .collect();
    let workers = (0..threads)
        .flat_map(|t| [0, 1, 2, 3, 4, NO_WORKER].map(|k| w.now.worker(t, k).copied()))
        .collect();
    let samples = format!("{:?}", w.profile.as_ref().map(|p| &p.samples));
    (w.report.to_json().to_string(), recent, workers, samples)
}

#[test]
fn joined_windows_say_what_whole_windows_say() {
    joined_windows_agree(false, false, 1);
}

/// Windows opened every 2 s (as a long window's are, `source::opening`),
/// each kept open and a copy of it shown at every refresh it is the
/// nearest for: each copy says what the whole window from its start says,
/// and the window copied goes on as if never copied.
#[test]
fn windows_shown_at_several_refreshes_say_what_whole_windows_say() {
    joined_windows_agree(false, false, 2);
    joined_windows_agree(true, true, 2);
}

/// Windows opened over the events kept when following begins
/// (`Following::warm`): every refresh from the first is a joined window,
/// and says what the whole one says.
#[test]
fn warm_started_windows_say_what_whole_windows_say() {
    joined_windows_agree(false, true, 1);
    joined_windows_agree(true, true, 1);
}

/// The same with a CPU profile: the windows' profile pass joined too
/// (`Following::Profiled`), its samples attributed to the same polls.
#[test]
fn joined_windows_with_a_cpu_profile_say_what_whole_windows_say() {
    joined_windows_agree(true, false, 1);
}

/// Follows the workload with a 5 s window refreshed about every second,
/// a window opened every `every` seconds (more than 1: kept open and
/// copied, as `source::Live` does for long windows), and compares every
/// window shown with the one computed whole from its start.
fn joined_windows_agree(profiled: bool, warm: bool, every: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, workload(profiled)).unwrap();
    let mut coll = Collector::default();
    let (mut model, _) = input::read(&[path], &mut coll, None);
    let evs: Vec<Ev> = Vec::from(std::mem::take(&mut coll.evs));
    assert!(evs.is_sorted_by_key(|e| e.ticks));
    let (first, last) = (evs[0].ticks, evs[evs.len() - 1].ticks);
    let th = Thresholds::default();
    let (threads, locs) = (model.threads.len() as u32, model.locs.len() as u32);
    // Refreshes a second apart, give or take 0.3 s.
    let mut refreshes = Vec::new();
    let mut t = first;
    while t + S <= last {
        t += 700 * MS + (t / 7) % (600 * MS);
        refreshes.push(t);
    }
    // Warm: following begins 6 s in, its windows opened over the events
    // kept then (`Following::warm`), a second apart from 5 s before.
    if warm {
        refreshes.retain(|&t| t >= first + 6 * S);
    }
    let (mut f, mut fed) = if warm {
        let t1 = refreshes[0];
        let fed = evs.partition_point(|e| e.ticks <= t1);
        let kept: VecDeque<Ev> = evs[..fed].iter().copied().collect();
        let f = Following::warm(&model, 0, &coll.lives, &kept, t1 - 5 * S, every * S, th);
        (f, fed)
    } else {
        // A window from the start, as `Live` opens one at its first
        // refresh: while the recording is younger than the window, it is
        // the window asked for (kept, and a copy shown, at each refresh).
        // (Just before the first event, as the recording's start is.)
        let mut f = Following::new(&model, 0, &coll.lives, first - 1);
        f.start_window(th);
        (f, 0)
    };
    let mut compared = 0;
    // The polls over a second: (start, end).
    let mut open = std::collections::HashMap::new();
    let mut long = Vec::new();
    for e in &evs {
        match e.kind {
            kind::POLL_START => {
                open.insert(e.x, e.ticks);
            }
            kind::POLL_END => {
                if let Some(a) = open.remove(&e.x) {
                    if e.ticks - a > S {
                        long.push((a, e.ticks));
                    }
                }
            }
            _ => {}
        }
    }
    assert!(long.len() >= 4, "{} long polls", long.len());
    let mut inside_polls = 0u32;
    let mut between_wake_and_poll = 0u32;
    // Where the windows shown began.
    let mut shown = Vec::new();
    for &t1 in &refreshes {
        let b = evs.partition_point(|e| e.ticks <= t1);
        f.feed(evs[fed..b].iter(), &model);
        fed = b;
        let t0 = t1.saturating_sub(5 * S).max(first);
        let tolerance = if every > 1 {
            every * S / 2 + 500 * MS
        } else {
            750 * MS
        };
        let ask = Ask {
            t0,
            t1,
            tolerance,
            lost: Losses::default(),
            keep: every > 1 || t0 == first,
        };
        let joined = f.window(&mut model, &coll.lives, ask);
        f.start_window_every(th, t1, every * S, S / 2);
        let Some((s, mut j)) = joined else {
            assert!(!warm, "the refresh at {t1}: no window joined");
            continue;
        };
        assert!(s.abs_diff(t0) <= tolerance + 1, "{s} is near {t0}");
        shown.push(s);
        let a = evs.partition_point(|e| e.ticks < s);
        let mut whole = window::analyze(
            &mut model,
            0,
            evs[a..b].iter(),
            &coll.lives,
            s,
            t1,
            th,
            Losses::default(),
        );
        assert_eq!(
            j.events, whole.events,
            "events of the window from {s} to {t1}"
        );
        inside_polls += long.iter().any(|&(a, b)| a < s && s < b) as u32;
        // The rare task (workload): woken at 0.1 s + k * 0.7 s, polled
        // 0.4 s later.
        let k = s.saturating_sub(100 * MS) / (700 * MS);
        let woken = 100 * MS + k * 700 * MS;
        between_wake_and_poll += (woken < s && s < woken + 400 * MS) as u32;
        let (x, y) = (said(&mut j, threads, locs), said(&mut whole, threads, locs));
        if x.0 != y.0 {
            let at =
                x.0.bytes()
                    .zip(y.0.bytes())
                    .position(|(p, q)| p != q)
                    .unwrap_or(0);
            let from = at.saturating_sub(400);
            panic!(
                "window from {s} to {t1}: the reports differ at byte {at}\njoined: ...{}\nwhole:  ...{}",
                &x.0[from..(at + 200).min(x.0.len())],
                &y.0[from..(at + 200).min(y.0.len())]
            );
        }
        assert_eq!(x.1, y.1, "recent polls, window from {s} to {t1}");
        assert_eq!(x.2, y.2, "workers now, window from {s} to {t1}");
        assert_eq!(x.3, y.3, "samples, window from {s} to {t1}");
        if profiled {
            let samples = j.profile.as_ref().map_or(0, |p| p.samples.len());
            assert!(samples > 500, "{samples} samples in the window from {s}");
        }
        compared += 1;
    }
    assert!(compared >= 4, "only {compared} windows were joined");
    // The window from the start, shown at the refreshes while the
    // recording was younger than the window.
    let young = shown.iter().filter(|&&s| s == first).count();
    assert!(
        warm || young >= 3,
        "the window from the start shown {young} times"
    );
    shown.dedup();
    if every > 1 {
        // Some window was shown at more than one refresh (a copy each time).
        assert!(
            shown.len() < compared,
            "{compared} windows shown: {shown:?}"
        );
    } else {
        // Only that one.
        assert_eq!(
            shown.len() + young.saturating_sub(1),
            compared,
            "a window shown twice: {shown:?}"
        );
    }
    if warm {
        return;
    }
    // What the workload was made for happened: windows began inside polls.
    assert!(
        inside_polls >= 2,
        "only {inside_polls} windows began inside a poll"
    );
    assert!(
        between_wake_and_poll >= 2,
        "only {between_wake_and_poll} windows began between the rare task's wake and poll"
    );
}
