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
//! Targets (2-core reference machine): fifo <= 1.0x tokio, las <= 1.15x,
//! fifo_recording <= 1.3x.
//!
//! Run: `cargo bench --bench overhead_profile` (rounds: `--rounds N` or
//! `OVERHEAD_ROUNDS=N`, default 7). Naming variants, e.g.
//! `cargo bench --bench overhead_profile -- fifo`, runs only those (for a
//! profiler); the JSON summary is then not written. `OVERHEAD_KEEP_TRACE=1`
//! keeps the recordings (their paths are printed). Results:
//! `target/bench-results/overhead_profile.json`.

mod common;
use common::cpu::{cpu_snap, other_cores};
use common::{median, Recording};
use runtrace_executor::{Executor, QueueConfig};
use std::time::{Duration, Instant};

const WARMUP_TASKS: usize = 1_000;
const TASKS: usize = 50_000;
const YIELDS: usize = 5;
const DEFAULT_ROUNDS: usize = 7;
/// Per-thread recorder buffer: large enough that nothing is dropped.
const RECORD_BUFFER: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Tokio,
    Fifo,
    Las,
    FifoRecording,
    LasRecording,
}

const VARIANTS: [Variant; 5] = [
    Variant::Tokio,
    Variant::Fifo,
    Variant::Las,
    Variant::FifoRecording,
    Variant::LasRecording,
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Tokio => "tokio",
            Variant::Fifo => "fifo",
            Variant::Las => "las",
            Variant::FifoRecording => "fifo_recording",
            Variant::LasRecording => "las_recording",
        }
    }

    fn recording(self) -> bool {
        matches!(self, Variant::FifoRecording | Variant::LasRecording)
    }

    /// The target ratio to tokio, where the brief sets one.
    fn target(self) -> Option<f64> {
        match self {
            Variant::Fifo => Some(1.0),
            Variant::Las => Some(1.15),
            Variant::FifoRecording => Some(1.3),
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

/// Baseline: tokio current-thread runtime with a `LocalSet`.
fn run_tokio() -> Duration {
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

        let t0 = Instant::now();
        let hs: Vec<_> = (0..TASKS)
            .map(|_| tokio::task::spawn_local(work()))
            .collect();
        for h in hs {
            h.await.expect("tokio task");
        }
        t0.elapsed()
    })
}

/// The runtrace executor with one queue; `block_on` builds a fresh tokio
/// current-thread runtime (`enable_all`).
fn run_executor(cfg: QueueConfig) -> Duration {
    let ex = Executor::builder()
        .queue("main", cfg)
        .build()
        .expect("build executor");
    ex.block_on(async {
        for _ in 0..WARMUP_TASKS {
            drop(ex.spawn(work()));
        }
        tokio::task::yield_now().await;

        let t0 = Instant::now();
        let hs: Vec<_> = (0..TASKS).map(|_| ex.spawn(work())).collect();
        for h in hs {
            h.await.expect("runtrace task");
        }
        t0.elapsed()
    })
}

/// What one run measured.
struct Run {
    elapsed: Duration,
    /// (events, dropped) for recording variants.
    recorded: Option<(u64, u64)>,
}

fn run(v: Variant) -> Run {
    let cfg = match v {
        Variant::Tokio => {
            return Run {
                elapsed: run_tokio(),
                recorded: None,
            }
        }
        Variant::Fifo | Variant::FifoRecording => QueueConfig::fifo(),
        Variant::Las | Variant::LasRecording => QueueConfig::las(),
    };
    if !v.recording() {
        return Run {
            elapsed: run_executor(cfg),
            recorded: None,
        };
    }
    let rec = Recording::start(&format!("overhead-{}", v.name()), |b| {
        b.buffer_size(RECORD_BUFFER)
    });
    let elapsed = run_executor(cfg);
    let keep = std::env::var_os("OVERHEAD_KEEP_TRACE").is_some();
    if keep {
        println!("{}: trace kept in {}", v.name(), rec.dir().display());
    }
    let st = rec.finish_keeping(keep);
    Run {
        elapsed,
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
        } else if let Some(v) = VARIANTS.iter().find(|v| v.name() == a) {
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
        "overhead_profile: {TASKS} tasks x {YIELDS} yield_now (+{WARMUP_TASKS} warm-up), {} rounds, variants {:?}",
        o.rounds,
        variants.iter().map(|v| v.name()).collect::<Vec<_>>()
    );

    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut events: Vec<Vec<(u64, u64)>> = vec![Vec::new(); variants.len()];
    for round in 0..o.rounds {
        let c0 = cpu_snap();
        let mut line = format!("round {}:", round + 1);
        for (i, v) in variants.iter().enumerate() {
            let r = run(*v);
            let per_task = r.elapsed.as_nanos() as f64 / TASKS as f64;
            ns[i].push(per_task);
            line += &format!(" {}={per_task:.0}", v.name());
            if let Some(e) = r.recorded {
                events[i].push(e);
            }
        }
        println!(
            "{line} (ns/task; others used {:.2} cores)",
            other_cores(c0, cpu_snap())
        );
    }

    let med: Vec<f64> = ns.iter().map(|x| median(x)).collect();
    let tokio_med = variants
        .iter()
        .position(|v| *v == Variant::Tokio)
        .map(|i| med[i]);
    println!();
    println!(
        "{:<16} {:>14} {:>12} {:>12} {:>10} {:>8}",
        "variant", "median ns/task", "min", "max", "x tokio", "target"
    );
    for (i, v) in variants.iter().enumerate() {
        let min = ns[i].iter().copied().fold(f64::INFINITY, f64::min);
        let max = ns[i].iter().copied().fold(0.0, f64::max);
        let ratio = tokio_med.map(|t| med[i] / t);
        let verdict = match (ratio, v.target()) {
            (Some(r), Some(t)) if r <= t => format!("<={t:.2} ok"),
            (Some(_), Some(t)) => format!("<={t:.2} MISSED"),
            _ => String::new(),
        };
        println!(
            "{:<16} {:>14.1} {:>12.1} {:>12.1} {:>10} {verdict}",
            v.name(),
            med[i],
            min,
            max,
            ratio.map_or("-".into(), |r| format!("{r:.3}")),
        );
    }
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

    if variants.len() != VARIANTS.len() {
        println!("(a subset of variants ran: overhead_profile.json not written)");
        return;
    }
    // Written by hand to keep the documented key order (serde_json's map
    // sorts keys).
    let t = med[0];
    let json = format!(
        "{{\"rounds\": {}, \"median_ns_per_task\": {{\"tokio\": {:.1}, \"fifo\": {:.1}, \"las\": {:.1}, \"fifo_recording\": {:.1}, \"las_recording\": {:.1}}}, \"ratios\": {{\"fifo\": {:.4}, \"las\": {:.4}, \"fifo_recording\": {:.4}, \"las_recording\": {:.4}}}}}\n",
        o.rounds,
        med[0],
        med[1],
        med[2],
        med[3],
        med[4],
        med[1] / t,
        med[2] / t,
        med[3] / t,
        med[4] / t,
    );
    let path = common::write_result("overhead_profile.json", &json);
    println!("wrote {}", path.display());
}
