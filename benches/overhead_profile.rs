//! Executor overhead on the peer's workload (seed 003): 50,000 tasks of
//! five `tokio::task::yield_now()` each, spawned into a Vec of handles and
//! awaited in order, after a warm-up of 1,000 such tasks (not awaited) and
//! one `yield_now`. Every run gets a fresh tokio current-thread runtime
//! (`enable_all`).
//!
//! Variants, alternated A B C D E A B C D E ... so drift on a shared machine
//! hits them all alike:
//! - `tokio`: `LocalSet` + `spawn_local` (the baseline);
//! - `fifo`: the runtrace executor with one `RunnableFifo` queue;
//! - `las`: one `Las` queue;
//! - `fifo_recording` / `las_recording`: the same while a runtrace recording
//!   runs (started before and finished after the run, outside the timed
//!   section), so the executor's probes record every spawn, poll, wake and
//!   terminate.
//!
//! Each timed section is measured in wall-clock time and in the process's
//! CPU time (all threads, so a recording's writer counts): on a shared
//! machine the CPU time leaves out the time the thread waited for a CPU.
//! A ratio is the median over rounds of the two variants' ratio within the
//! round (they ran next to each other).
//!
//! Targets (issue 40, 2-core reference machine): fifo <= 0.5x tokio, las
//! <= 0.8x, and each recording variant <= 1.15x the same executor not
//! recording.
//!
//! Run: `cargo bench --bench overhead_profile` (rounds: `--rounds N` or
//! `OVERHEAD_ROUNDS=N`, default 7). Naming variants, e.g.
//! `cargo bench --bench overhead_profile -- fifo`, runs only those (for a
//! profiler); `OVERHEAD_TASKS=N` changes the task count (per-task cost
//! against the working set); the JSON summary is then not written.
//! `OVERHEAD_RECORD_BUFFER_MIB` sets the recording's per-thread buffer
//! (default 64; smaller ones may drop events, which fails the run).
//! `OVERHEAD_KEEP_TRACE=1` keeps the recordings (their paths are printed).
//!
//! Diagnosis variants, run only when named (not in the default set, the
//! ratios or the JSON): `rec_floor` fires, while a recording runs, the same
//! 20 events per task the executor records on this workload (spawn, 6
//! wakes, 6 poll starts, 6 poll ends, terminate), with the same fields,
//! the same clock reads (12 per task) and the same interleaving of tasks
//! (all spawned first, then passes of 128 polls followed by their 128
//! wakes), but no executor and no tasks: the recorder's own cost of a
//! task's events, the floor under `fifo_recording - fifo`.
//! `rec_floor_noclock` is the same with a counter for a clock (the share
//! of the clock reads). E.g. `cargo bench --bench overhead_profile --
//! fifo fifo_recording rec_floor rec_floor_noclock`.
//! Results: `target/bench-results/overhead_profile.json`;
//! `tools/check_executor_bench.py` compares them with docs/executor.md.

mod common;
use common::cpu::{cpu_snap, other_cores};
use common::{median, Recording};
use runtrace_executor::{Executor, QueueConfig};
use std::cell::Cell;
use std::time::{Duration, Instant};

const WARMUP_TASKS: usize = 1_000;
const TASKS: usize = 50_000;

/// Tasks per run: `TASKS`, or `OVERHEAD_TASKS` for a diagnosis (per-task
/// cost against the working set's size); the JSON is then not written.
fn tasks() -> usize {
    common::env_num("OVERHEAD_TASKS", TASKS).max(1)
}
const YIELDS: usize = 5;
const DEFAULT_ROUNDS: usize = 7;
/// Target for a recording variant against the same executor not recording
/// (issue 40).
const RECORDING_TARGET: f64 = 1.15;
/// Per-thread recorder buffer: large enough that nothing is dropped.
const RECORD_BUFFER: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Tokio,
    Fifo,
    Las,
    FifoRecording,
    LasRecording,
    /// Diagnosis: the recorder alone, fed the executor's events.
    RecFloor,
    /// Diagnosis: the same with a counter instead of clock reads.
    RecFloorNoClock,
}

const VARIANTS: [Variant; 5] = [
    Variant::Tokio,
    Variant::Fifo,
    Variant::Las,
    Variant::FifoRecording,
    Variant::LasRecording,
];

/// Run only when named on the command line.
const DIAG_VARIANTS: [Variant; 2] = [Variant::RecFloor, Variant::RecFloorNoClock];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Tokio => "tokio",
            Variant::Fifo => "fifo",
            Variant::Las => "las",
            Variant::FifoRecording => "fifo_recording",
            Variant::LasRecording => "las_recording",
            Variant::RecFloor => "rec_floor",
            Variant::RecFloorNoClock => "rec_floor_noclock",
        }
    }

    fn recording(self) -> bool {
        matches!(
            self,
            Variant::FifoRecording
                | Variant::LasRecording
                | Variant::RecFloor
                | Variant::RecFloorNoClock
        )
    }

    /// The target ratio to tokio (issue 40), where one is set.
    fn target(self) -> Option<f64> {
        match self {
            Variant::Fifo => Some(0.5),
            Variant::Las => Some(0.8),
            _ => None,
        }
    }
}

/// One task of the workload.
async fn work() {
    for _ in 0..YIELDS {
        tokio::task::yield_now().await;
    }
}

/// CPU time of the whole process so far (all threads: a recording's
/// writer thread counts).
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; the clock id is a
    // constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The timed section's wall-clock and process CPU time.
#[derive(Clone, Copy)]
struct Timed {
    wall: Duration,
    cpu: Duration,
}

/// Starts timing; `Start::stop` ends it.
struct Start(Instant, Duration);

impl Start {
    fn now() -> Start {
        Start(Instant::now(), process_cpu())
    }
    fn stop(self) -> Timed {
        Timed {
            wall: self.0.elapsed(),
            cpu: process_cpu().saturating_sub(self.1),
        }
    }
}

/// Baseline: tokio current-thread runtime with a `LocalSet`.
fn run_tokio() -> Timed {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        for _ in 0..WARMUP_TASKS {
            drop(tokio::task::spawn_local(work()));
        }
        tokio::task::yield_now().await;

        let t0 = Start::now();
        let hs: Vec<_> = (0..tasks())
            .map(|_| tokio::task::spawn_local(work()))
            .collect();
        for h in hs {
            h.await.expect("tokio task");
        }
        t0.stop()
    })
}

/// The runtrace executor with one queue; `block_on` builds a fresh tokio
/// current-thread runtime (`enable_all`).
fn run_executor(cfg: QueueConfig) -> Timed {
    let ex = Executor::builder()
        .queue("main", cfg)
        .build()
        .expect("build executor");
    ex.block_on(async {
        for _ in 0..WARMUP_TASKS {
            drop(ex.spawn(work()));
        }
        tokio::task::yield_now().await;

        let t0 = Start::now();
        let hs: Vec<_> = (0..tasks()).map(|_| ex.spawn(work())).collect();
        for h in hs {
            h.await.expect("runtrace task");
        }
        t0.stop()
    })
}

/// Polls per executor turn (the executor's default `max_polls_per_turn`):
/// the floor interleaves its events in passes of this many tasks.
const TURN: usize = 128;

/// The recorder's floor (`rec_floor`): the events `fifo_recording` records
/// for the same tasks, in the same order and with the same fields and
/// clock reads, fired straight at the probes with no executor. With
/// `clocked` false a counter stands in for the clock.
fn run_rec_floor(clocked: bool) -> Timed {
    use runtrace_probes::builtin as probes;
    let clock = runtrace_core::clock::TraceClock::get();
    let fake = Cell::new(clock.now());
    let now = || {
        if clocked {
            clock.now()
        } else {
            fake.set(fake.get() + 1);
            fake.get()
        }
    };
    let queue = runtrace_core::Istr::new("main");
    let loc = runtrace_core::Loc::caller();
    let worker = 0;
    let n = tasks();
    // Ids as the executor gives them: high, ascending.
    let first = 1u64 << 48;
    let t = Start::now();
    for id in first..first + n as u64 {
        // Spawn: one read for TaskSpawn and the first schedule's TaskWake.
        let t = now();
        probes::task_spawn::fire_at(
            t,
            probes::task_spawn::Args {
                task_id: id,
                parent_task_id: 0,
                spawn_loc: loc,
                queue,
            },
        );
        probes::task_wake::fire_at(
            t,
            probes::task_wake::Args {
                woken_task_id: id,
                waker_task_id: 0,
                worker,
            },
        );
    }
    let mut t0 = now();
    for pass in 0..=YIELDS {
        let last = pass == YIELDS;
        let mut start = first;
        while start < first + n as u64 {
            let end = (start + TURN as u64).min(first + n as u64);
            for id in start..end {
                probes::task_poll_start::fire_at(
                    t0,
                    probes::task_poll_start::Args {
                        task_id: id,
                        worker,
                        queue,
                        local_q: (first + n as u64 - id) as u32,
                    },
                );
                let t1 = now();
                probes::task_poll_end::fire_at(
                    t1,
                    probes::task_poll_end::Args {
                        task_id: id,
                        worker,
                        ready: last,
                    },
                );
                if last {
                    probes::task_terminate::fire_at(
                        t1,
                        probes::task_terminate::Args { task_id: id },
                    );
                }
                t0 = t1;
            }
            if !last {
                // tokio's deferred `yield_now` wakes, at the driver turn:
                // each reads the clock.
                for id in start..end {
                    let t = now();
                    probes::task_wake::fire_at(
                        t,
                        probes::task_wake::Args {
                            woken_task_id: id,
                            waker_task_id: 0,
                            worker,
                        },
                    );
                }
            }
            t0 = now();
            start = end;
        }
    }
    t.stop()
}

/// What one run measured.
struct Run {
    timed: Timed,
    /// (events, dropped) for recording variants.
    recorded: Option<(u64, u64)>,
}

fn run(v: Variant) -> Run {
    let cfg = match v {
        Variant::Tokio => {
            return Run {
                timed: run_tokio(),
                recorded: None,
            }
        }
        Variant::Fifo | Variant::FifoRecording => QueueConfig::fifo(),
        Variant::Las | Variant::LasRecording => QueueConfig::las(),
        Variant::RecFloor | Variant::RecFloorNoClock => QueueConfig::fifo(),
    };
    if !v.recording() {
        return Run {
            timed: run_executor(cfg),
            recorded: None,
        };
    }
    let buffer = common::env_num("OVERHEAD_RECORD_BUFFER_MIB", RECORD_BUFFER >> 20) << 20;
    let rec = Recording::start(&format!("overhead-{}", v.name()), |b| b.buffer_size(buffer));
    let timed = match v {
        Variant::RecFloor => run_rec_floor(true),
        Variant::RecFloorNoClock => run_rec_floor(false),
        _ => run_executor(cfg),
    };
    let keep = std::env::var_os("OVERHEAD_KEEP_TRACE").is_some();
    if keep {
        println!("{}: trace kept in {}", v.name(), rec.dir().display());
    }
    let st = rec.finish_keeping(keep);
    Run {
        timed,
        recorded: Some((st.events, st.dropped)),
    }
}

struct Opts {
    rounds: usize,
    only: Vec<Variant>,
}

fn opts() -> Opts {
    let mut rounds = common::env_num("OVERHEAD_ROUNDS", DEFAULT_ROUNDS);
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--rounds takes a number");
        } else if let Some(v) = VARIANTS
            .iter()
            .chain(&DIAG_VARIANTS)
            .find(|v| v.name() == a)
        {
            only.push(*v);
        }
        // Anything else (`--bench` from cargo, filters) is ignored.
    }
    Opts {
        rounds: rounds.max(1),
        only,
    }
}

fn main() {
    let o = opts();
    let variants: Vec<Variant> = if o.only.is_empty() {
        VARIANTS.to_vec()
    } else {
        o.only.clone()
    };
    println!(
        "overhead_profile: {} tasks x {YIELDS} yield_now (+{WARMUP_TASKS} warm-up), {} rounds, variants {:?}",
        tasks(),
        o.rounds,
        variants.iter().map(|v| v.name()).collect::<Vec<_>>()
    );

    // Per variant and round: wall-clock and CPU ns per task.
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut others: Vec<f64> = Vec::new();
    let mut events: Vec<Vec<(u64, u64)>> = vec![Vec::new(); variants.len()];
    for round in 0..o.rounds {
        let c0 = cpu_snap();
        let mut line = format!("round {}:", round + 1);
        for (i, v) in variants.iter().enumerate() {
            let r = run(*v);
            let per = |d: Duration| d.as_nanos() as f64 / tasks() as f64;
            let (w, c) = (per(r.timed.wall), per(r.timed.cpu));
            wall[i].push(w);
            cpu[i].push(c);
            line += &format!(" {}={w:.0}/{c:.0}", v.name());
            if let Some(e) = r.recorded {
                events[i].push(e);
            }
        }
        let oc = other_cores(c0, cpu_snap());
        others.push(oc);
        println!("{line} (ns/task wall/cpu; others used {oc:.2} cores)");
    }

    let pos = |v: Variant| variants.iter().position(|x| *x == v);
    // A ratio is the median over rounds of the two variants' ratio in the
    // same round (run next to each other), so drift between rounds cancels.
    let paired = |xs: &[Vec<f64>], a: usize, b: usize| {
        median(
            &xs[a]
                .iter()
                .zip(&xs[b])
                .map(|(x, y)| x / y)
                .collect::<Vec<_>>(),
        )
    };
    let tokio = pos(Variant::Tokio);
    println!();
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>9} {:>9}   target",
        "variant", "wall ns", "min", "max", "x tokio", "cpu x"
    );
    let mut ratio = vec![f64::NAN; variants.len()];
    let mut cpu_ratio = vec![f64::NAN; variants.len()];
    for (i, v) in variants.iter().enumerate() {
        let min = wall[i].iter().copied().fold(f64::INFINITY, f64::min);
        let max = wall[i].iter().copied().fold(0.0, f64::max);
        if let Some(t) = tokio {
            ratio[i] = paired(&wall, i, t);
            cpu_ratio[i] = paired(&cpu, i, t);
        }
        let verdict = match v.target() {
            Some(t) if ratio[i] <= t => format!("<={t:.2} ok"),
            Some(t) if ratio[i].is_finite() => format!("<={t:.2} MISSED"),
            _ => String::new(),
        };
        println!(
            "{:<16} {:>10.1} {:>10.1} {:>10.1} {:>9.3} {:>9.3}   {verdict}",
            v.name(),
            median(&wall[i]),
            min,
            max,
            ratio[i],
            cpu_ratio[i],
        );
    }
    // Recording's cost: each recording variant against the same executor
    // not recording, paired by round.
    let mut overhead = [f64::NAN; 2];
    let mut cpu_overhead = [f64::NAN; 2];
    for (k, (rec, plain)) in [
        (Variant::FifoRecording, Variant::Fifo),
        (Variant::LasRecording, Variant::Las),
    ]
    .into_iter()
    .enumerate()
    {
        if let (Some(a), Some(b)) = (pos(rec), pos(plain)) {
            overhead[k] = paired(&wall, a, b);
            cpu_overhead[k] = paired(&cpu, a, b);
            let verdict = if overhead[k] <= RECORDING_TARGET {
                "ok"
            } else {
                "MISSED"
            };
            println!(
                "{} x {}: {:.3} wall, {:.3} cpu (target <= {RECORDING_TARGET:.2}: {verdict})",
                rec.name(),
                plain.name(),
                overhead[k],
                cpu_overhead[k]
            );
        }
    }
    // The recorder's floor against what recording adds to the executor,
    // per round (CPU ns per task).
    if let (Some(a), Some(b)) = (pos(Variant::FifoRecording), pos(Variant::Fifo)) {
        let added: Vec<f64> = cpu[a].iter().zip(&cpu[b]).map(|(x, y)| x - y).collect();
        println!(
            "fifo_recording - fifo: {:.0} cpu ns/task (median of per-round differences)",
            median(&added)
        );
        for v in DIAG_VARIANTS {
            if let Some(f) = pos(v) {
                let share: Vec<f64> = cpu[f].iter().zip(&added).map(|(x, y)| x / y).collect();
                println!(
                    "{}: {:.0} cpu ns/task, {:.2} of what recording adds to fifo, {:.3}x fifo (medians)",
                    v.name(),
                    median(&cpu[f]),
                    median(&share),
                    paired(&cpu, f, b)
                );
            }
        }
    }
    println!(
        "others used {:.2} cores (median over rounds; max {:.2})",
        median(&others),
        others.iter().copied().fold(0.0, f64::max)
    );
    for (i, v) in variants.iter().enumerate() {
        if events[i].is_empty() {
            continue;
        }
        let total: u64 = events[i].iter().map(|e| e.0).sum();
        let dropped: u64 = events[i].iter().map(|e| e.1).sum();
        println!(
            "{}: {} events recorded per run (median; {} over {} runs), {} dropped",
            v.name(),
            median(&events[i].iter().map(|e| e.0 as f64).collect::<Vec<_>>()),
            total,
            events[i].len(),
            dropped
        );
        assert_eq!(
            dropped,
            0,
            "{}: the recorder dropped events: raise RECORD_BUFFER",
            v.name()
        );
    }

    if variants.len() != VARIANTS.len() || tasks() != TASKS {
        println!("(a subset of variants or OVERHEAD_TASKS: overhead_profile.json not written)");
        return;
    }
    // Written by hand to keep the documented key order (serde_json's map
    // sorts keys). Variants are in `VARIANTS` order here.
    let five = |xs: &[f64], prec: usize| {
        VARIANTS
            .iter()
            .zip(xs)
            .map(|(v, x)| format!("\"{}\": {x:.prec$}", v.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let meds: Vec<f64> = wall.iter().map(|x| median(x)).collect();
    let cpu_meds: Vec<f64> = cpu.iter().map(|x| median(x)).collect();
    let ratios: Vec<f64> = ratio[1..].to_vec();
    let cpu_ratios: Vec<f64> = cpu_ratio[1..].to_vec();
    let named = |xs: &[f64]| {
        VARIANTS[1..]
            .iter()
            .zip(xs)
            .map(|(v, x)| format!("\"{}\": {x:.4}", v.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let json = format!(
        "{{\"rounds\": {}, \"tasks\": {}, \"others_cores_median\": {:.2}, \"median_ns_per_task\": {{{}}}, \"median_cpu_ns_per_task\": {{{}}}, \"ratios\": {{{}}}, \"cpu_ratios\": {{{}}}, \"recording_overhead\": {{\"fifo\": {:.4}, \"las\": {:.4}}}, \"cpu_recording_overhead\": {{\"fifo\": {:.4}, \"las\": {:.4}}}}}\n",
        o.rounds,
        TASKS,
        median(&others),
        five(&meds, 1),
        five(&cpu_meds, 1),
        named(&ratios),
        named(&cpu_ratios),
        overhead[0],
        overhead[1],
        cpu_overhead[0],
        cpu_overhead[1],
    );
    let path = common::write_result("overhead_profile.json", &json);
    println!("wrote {}", path.display());
}
