//! What following costs `runtrace top` per window, and whether the
//! windows computed from one lifecycle ([`runtrace_top::stagger`]) say
//! what windows computed whole say: a finished recording is played as if
//! followed, one refresh per second of its time, each refresh's window
//! (default 5 s) computed both ways, each way timed over the whole
//! recording (CPU time of this thread, one way after the other).
//!
//! ```text
//! cargo run --release -p runtrace-top --example follow_cost -- DIR [--window S]
//! ```
//!
//! Prints the time per event followed each way and with no window open
//! (the lifecycle alone), and the windows where the two ways disagree on
//! a location's polls or on the findings' rules.

use runtrace_analyze::Thresholds;
use runtrace_model::event::Ev;
use runtrace_model::input;
use runtrace_top::stagger::{Ask, Following};
use runtrace_top::window::{self, Analysed, Collector, Losses};
use std::time::Duration;

/// This thread's CPU time.
fn cpu() -> Duration {
    Duration::from_nanos(runtrace_core::thread_time::clock_ns(
        libc::CLOCK_THREAD_CPUTIME_ID,
    ))
}

/// What two ways of computing a window are compared on.
#[derive(Debug, PartialEq)]
struct Seen {
    /// (location, polls, tasks, wake-to-poll delays and p99, polls with
    /// no wake, poll time) per location.
    locs: Vec<(String, u64, u64, u64, u64, u64, u64)>,
    /// (busy ns, polls) per worker.
    workers: Vec<(u64, u64)>,
    /// (label, closed, open, busy p50) per span name.
    spans: Vec<String>,
    /// (kind, location) of each finding.
    findings: Vec<String>,
    /// `runtrace analyze --json` of the window.
    json: String,
}

fn seen(w: &Analysed) -> Seen {
    let mut locs: Vec<_> = w
        .report
        .spawn_locations
        .iter()
        .map(|l| {
            (
                l.location.clone(),
                l.polls,
                l.tasks,
                l.wake_to_poll_ns.count,
                l.wake_to_poll_ns.p99,
                l.uncovered_polls,
                l.poll_ns_total,
            )
        })
        .collect();
    let workers = w
        .report
        .workers
        .iter()
        .map(|x| (x.busy_ns, x.polls))
        .collect();
    let spans = match w.report.spans.to_json().get("spans") {
        Some(v) => vec![v.to_string()],
        None => Vec::new(),
    };
    locs.sort();
    let mut findings: Vec<String> = w
        .report
        .findings
        .iter()
        .map(|f| format!("{:?} {:?}", f.kind, f.spawn_loc))
        .collect();
    findings.sort();
    Seen {
        locs,
        workers,
        spans,
        findings,
        json: w.report.to_json().to_string(),
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: follow_cost DIR [--window S]");
        return std::process::ExitCode::from(2);
    };
    let window_s = match args.iter().position(|a| a == "--window") {
        Some(i) => match args.get(i + 1).and_then(|v| v.parse::<f64>().ok()) {
            Some(s) if s > 0.0 => s,
            _ => {
                eprintln!("--window: a number of seconds over 0");
                return std::process::ExitCode::from(2);
            }
        },
        None => 5.0,
    };
    // In index order (`input::read` reads the files in the order given).
    let files = match runtrace_format::files::expand(&[std::path::PathBuf::from(dir)]) {
        Ok(f) if !f.is_empty() => input::sorted(&f),
        _ => {
            eprintln!("{dir}: no trace files");
            return std::process::ExitCode::from(1);
        }
    };
    let mut coll = Collector::default();
    let (mut model, _) = input::read(&files, &mut coll, None);
    let Some(proc) = (0..model.procs.len() as u32).max_by_key(|&p| model.procs[p as usize].events)
    else {
        eprintln!("{dir}: no events");
        return std::process::ExitCode::from(1);
    };
    let mut evs: Vec<Ev> = Vec::from(std::mem::take(&mut coll.evs));
    evs.retain(|e| model.threads[e.thread as usize].proc == proc);
    evs.sort_by_key(|e| e.ticks);
    let (Some(first), Some(last)) = (evs.first().map(|e| e.ticks), evs.last().map(|e| e.ticks))
    else {
        eprintln!("{dir}: no events");
        return std::process::ExitCode::from(1);
    };
    let tps = model.procs[proc as usize].ticks_per_sec;
    let span = (window_s * tps as f64) as u64;
    // As `runtrace top` opens and picks them.
    let (every, tolerance) = runtrace_top::source::opening(window_s);
    let (every, tolerance) = ((every * tps as f64) as u64, (tolerance * tps as f64) as u64);
    let th = Thresholds::default();
    // A window computed whole, as a replay does.
    let whole_window = |model: &mut runtrace_model::model::Model, t0: u64, t1: u64| {
        let a = evs.partition_point(|e| e.ticks < t0);
        let b = evs.partition_point(|e| e.ticks <= t1);
        window::analyze(
            model,
            proc,
            evs[a..b].iter(),
            &coll.lives,
            t0,
            t1,
            th,
            Losses::default(),
        )
    };
    let ends: Vec<u64> = (1..)
        .map(|k| first + k * tps)
        .take_while(|&t| t <= last)
        .collect();

    // From one lifecycle.
    let c0 = cpu();
    let mut joined = Vec::new();
    let mut f = Following::new(&model, proc, &coll.lives, first);
    let mut fed = evs.partition_point(|e| e.ticks <= first);
    let mut whole_fallbacks = 0;
    let mut joined_each = Vec::new();
    for &t1 in &ends {
        let r0 = cpu();
        let b = evs.partition_point(|e| e.ticks <= t1);
        f.feed(evs[fed..b].iter(), &model);
        fed = b;
        let t0 = t1.saturating_sub(span).max(first);
        let ask = Ask {
            t0,
            t1,
            tolerance,
            lost: Losses::default(),
            keep: every > tps,
        };
        let w = match f.window(&mut model, &coll.lives, ask) {
            Some((s, w)) => Some((s, w)),
            None => {
                whole_fallbacks += 1;
                std::hint::black_box(whole_window(&mut model, t0, t1));
                None
            }
        };
        joined.push(w);
        f.start_window_every(th, t1, every, tps / 2);
        joined_each.push(cpu() - r0);
    }
    let joined_cpu = cpu() - c0;

    // Whole windows.
    let c0 = cpu();
    let mut whole = Vec::new();
    let mut whole_each = Vec::new();
    for (i, &t1) in ends.iter().enumerate() {
        let r0 = cpu();
        // From where the joined window began, to compare like with like.
        let t0 = match &joined[i] {
            Some((s, _)) => *s,
            None => t1.saturating_sub(span).max(first),
        };
        let w = whole_window(&mut model, t0, t1);
        whole.push((t0, w));
        whole_each.push(cpu() - r0);
    }
    let whole_cpu = cpu() - c0;

    // The lifecycle alone: the same events through the one tracker (and
    // what every window's `Now` keeps), no window open. What following
    // costs here before any window's engine.
    let c0 = cpu();
    let mut alone = Following::new(&model, proc, &coll.lives, first);
    let from = evs.partition_point(|e| e.ticks <= first);
    let to = evs.partition_point(|e| e.ticks <= *ends.last().unwrap_or(&first));
    alone.feed(evs[from..to].iter(), &model);
    std::hint::black_box(&alone);
    let alone_cpu = cpu() - c0;

    let n = to as f64;
    println!(
        "{dir}: {} events, {} refreshes of a {window_s} s window",
        n,
        ends.len()
    );
    println!(
        "whole windows: {:.0} ms, {:.1} ns per event followed",
        whole_cpu.as_secs_f64() * 1e3,
        whole_cpu.as_secs_f64() * 1e9 / n
    );
    println!(
        "one lifecycle: {:.0} ms, {:.1} ns per event followed ({} windows computed whole at the start); ratio {:.3}",
        joined_cpu.as_secs_f64() * 1e3,
        joined_cpu.as_secs_f64() * 1e9 / n,
        whole_fallbacks,
        joined_cpu.as_secs_f64() / whole_cpu.as_secs_f64()
    );
    println!(
        "lifecycle alone (no window open): {:.0} ms, {:.1} ns per event followed",
        alone_cpu.as_secs_f64() * 1e3,
        alone_cpu.as_secs_f64() * 1e9 / (to - from).max(1) as f64
    );
    // Steady: the refreshes whose window was joined, and the events
    // followed between them and the refresh before.
    let (mut ws, mut js, mut ne) = (Duration::ZERO, Duration::ZERO, 0usize);
    for (i, j) in joined.iter().enumerate() {
        if j.is_some() && i > 0 {
            ws += whole_each[i];
            js += joined_each[i];
            ne += evs.partition_point(|e| e.ticks <= ends[i])
                - evs.partition_point(|e| e.ticks <= ends[i - 1]);
        }
    }
    if ne > 0 {
        println!(
            "steady (refreshes with a joined window): whole {:.1} ns, one lifecycle {:.1} ns per event followed; ratio {:.3}",
            ws.as_secs_f64() * 1e9 / ne as f64,
            js.as_secs_f64() * 1e9 / ne as f64,
            js.as_secs_f64() / ws.as_secs_f64()
        );
    }
    let mut compared = 0;
    for (i, j) in joined.iter().enumerate() {
        let Some((s, a)) = j else {
            continue;
        };
        compared += 1;
        let (a, b) = (seen(a), seen(&whole[i].1));
        if a != b {
            let (x, y) = (&a.json, &b.json);
            let at = x
                .bytes()
                .zip(y.bytes())
                .position(|(p, q)| p != q)
                .unwrap_or(0);
            let from = at.saturating_sub(300);
            println!(
                "refresh {i} (window from {s}): differs at {at}\n  one lifecycle ...{}\n  whole ...{}",
                &x[from..(at + 200).min(x.len())],
                &y[from..(at + 200).min(y.len())]
            );
        }
    }
    println!("{compared} windows compared");
    std::process::ExitCode::SUCCESS
}
