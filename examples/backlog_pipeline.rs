//! Seed 001's server in miniature: a producer -> bounded queue -> consumer
//! pipeline whose consumer logs every item under a shared lock, and a
//! logging thread that writes the log out under that lock and, about once
//! a second, "rotates" it: flush, rename and a slow reopen (a deliberate
//! 120 ms stall standing in for slow storage) while still holding the lock.
//! Each rotation blocks the consumer on the lock and the queue backs up:
//! an intermittent backlog spike with a root cause two threads away.
//!
//! ```text
//! cargo run --release --example backlog_pipeline -- --out /tmp/bp
//! runtrace backlog /tmp/bp          # names the rotation under lock "log"
//! ```
//!
//! Options: `--out DIR` records a trace to `DIR/trace.N.bin` (without it
//! nothing is recorded, but LTTng/perf/bpftrace still see the probes when
//! built with their features); `--secs N` (default 3); `--rate N` items per
//! second (default 4000); `--stall-ms N` (default 120); `--no-report` skips
//! the `runtrace backlog` report printed at the end of a recording.
//!
//! The primitives are `runtrace::sync`'s (`runtrace-sync`; an application
//! enables them with the facade's `sync` feature): a named
//! [`Mutex`](runtrace_sync::Mutex) for the log, an instrumented
//! [`queue`](runtrace_sync::queue) with a backlog detector, `io::timed`
//! around the writes, flushes and rotations, and `heartbeat` in every
//! thread's loop.

use runtrace_recorder::Recorder;
use runtrace_sync::{backlog, heartbeat, io, queue, Mutex};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `println!` that ignores a reader gone early (`| head`): the recording
/// and its files are what matter, and `println!` would panic there.
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

struct Options {
    out: Option<PathBuf>,
    secs: f64,
    rate: u64,
    stall: Duration,
    report: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        out: None,
        secs: 3.0,
        rate: 4_000,
        stall: Duration::from_millis(120),
        report: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match a.as_str() {
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            "--secs" => {
                o.secs = value("--secs")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0 && s.is_finite())
                    .ok_or("--secs: expected a positive number of seconds")?
            }
            "--rate" => {
                o.rate = value("--rate")?
                    .parse()
                    .ok()
                    .filter(|r| (1..=1_000_000).contains(r))
                    .ok_or("--rate: expected items per second, 1 to 1000000")?
            }
            "--stall-ms" => {
                o.stall = Duration::from_millis(
                    value("--stall-ms")?
                        .parse()
                        .map_err(|_| "--stall-ms: expected milliseconds")?,
                )
            }
            "--no-report" => o.report = false,
            "-h" | "--help" => {
                return Err("usage: backlog_pipeline [--out DIR] [--secs N] [--rate N] \
                            [--stall-ms N] [--no-report]"
                    .into())
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    Ok(o)
}

/// The application log: lines buffered by the consumer, written out by the
/// logging thread.
struct Log {
    lines: Vec<String>,
    file: File,
    path: PathBuf,
    rotations: u32,
}

/// A request's work: ~30 us of CPU.
fn process(item: u64) -> u64 {
    let until = Instant::now() + Duration::from_micros(30);
    let mut h = item;
    while Instant::now() < until {
        h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(7);
    }
    h
}

fn producer(tx: queue::Sender<u64>, rate: u64, stop: Arc<AtomicBool>) {
    // Items in batches every millisecond (sleep granularity), at `rate`.
    let start = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while sent < due {
            if tx.try_send(sent).is_err() {
                // Full: seed 001 counts the loss (item_dropped) and moves on.
            }
            sent += 1;
        }
        heartbeat("producer");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn consumer(rx: queue::Receiver<u64>, log: Arc<Mutex<Log>>) -> u64 {
    let mut n = 0;
    for item in rx.iter() {
        let h = process(*item);
        log.lock()
            .lines
            .push(format!("item {} seqno {} -> {h:x}\n", *item, item.seqno()));
        drop(item); // processing_end: processing included the log append
        n += 1;
        heartbeat("consumer");
    }
    n
}

fn logger(log: Arc<Mutex<Log>>, stall: Duration, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    let mut next_rotation = Instant::now() + Duration::from_millis(700);
    let mut round = 0u32;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        {
            let mut l = log.lock();
            let text: String = l.lines.drain(..).collect();
            let bytes = text.len() as u64;
            io::timed(io::FILE_WRITE, bytes, || l.file.write_all(text.as_bytes()))?;
            if Instant::now() >= next_rotation && !stopping {
                // The bug being hunted: rotation under the log lock.
                io::timed(io::FLUSH, 0, || l.file.sync_data())?;
                let rotated = l.path.with_extension(format!("log.{}", l.rotations));
                let path = l.path.clone();
                let file = io::timed(io::ROTATE, 0, || {
                    std::fs::rename(&path, &rotated)?;
                    std::thread::sleep(stall); // slow storage
                    File::create(&path)
                })?;
                l.file = file;
                l.rotations += 1;
                round += 1;
                // Jittered so spikes are intermittent: 0.8-1.2 s apart.
                next_rotation =
                    Instant::now() + Duration::from_millis(800 + 97 * (round as u64 % 5));
            }
        }
        heartbeat("logging");
        if stopping {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run(o: &Options, workdir: &Path) -> Result<(), String> {
    let alerts = backlog::subscribe();
    let (tx, rx) = queue::builder("requests", 20_000)
        .size_threshold(300)
        .growth_rate(2_000, Duration::from_millis(200))
        .trigger_interval(Duration::from_millis(500))
        // Status every 100 ms even while the consumer is blocked.
        .periodic_snapshots()
        .build::<u64>()
        .map_err(|e| e.to_string())?;
    let path = workdir.join("app.log");
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let log = Arc::new(Mutex::new(
        "log",
        Log {
            lines: Vec::new(),
            file,
            path,
            rotations: 0,
        },
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let spawn = |name: &str| std::thread::Builder::new().name(name.to_string());
    let p = {
        let stop = stop.clone();
        let rate = o.rate;
        spawn("producer")
            .spawn(move || producer(tx, rate, stop))
            .map_err(|e| e.to_string())?
    };
    let c = {
        let log = log.clone();
        spawn("consumer")
            .spawn(move || consumer(rx, log))
            .map_err(|e| e.to_string())?
    };
    let l = {
        let stop = stop.clone();
        let log = log.clone();
        let stall = o.stall;
        spawn("logger")
            .spawn(move || logger(log, stall, stop))
            .map_err(|e| e.to_string())?
    };
    std::thread::sleep(Duration::from_secs_f64(o.secs));
    stop.store(true, Ordering::Relaxed);
    p.join().map_err(|_| "producer panicked")?;
    let consumed = c.join().map_err(|_| "consumer panicked")?;
    l.join()
        .map_err(|_| "logger panicked")?
        .map_err(|e| format!("logger: {e}"))?;
    let rotations = log.lock().rotations;
    let triggers: Vec<backlog::Backlog> = alerts.try_iter().collect();
    say!(
        "backlog_pipeline: {:.1} s at {}/s: {consumed} items processed, {rotations} log rotations \
         ({} ms stall each), {} backlog triggers",
        o.secs,
        o.rate,
        o.stall.as_millis(),
        triggers.len()
    );
    for t in &triggers {
        say!(
            "  backlog on {:?}: {} items, growing {}/s ({})",
            t.queue,
            t.queue_size,
            t.growth_rate_per_sec,
            t.reason.as_str()
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("backlog_pipeline: {e}");
            return ExitCode::from(2);
        }
    };
    let (workdir, guard) = match &o.out {
        Some(dir) => {
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!("backlog_pipeline: {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
            // A fresh recording: old trace files would mix into the report.
            for f in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = f.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("trace.") && name.contains(".bin") {
                    let _ = std::fs::remove_file(f.path());
                }
            }
            match Recorder::builder().path(dir.join("trace")).start() {
                Ok(g) => (dir.clone(), Some(g)),
                Err(e) => {
                    eprintln!("backlog_pipeline: cannot record to {}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
            }
        }
        None => (
            std::env::temp_dir().join(format!("backlog-pipeline-{}", std::process::id())),
            None,
        ),
    };
    if let Err(e) = std::fs::create_dir_all(&workdir) {
        eprintln!("backlog_pipeline: {}: {e}", workdir.display());
        return ExitCode::FAILURE;
    }
    let result = run(&o, &workdir);
    // The application's own log files are not part of the trace.
    for f in std::fs::read_dir(&workdir).into_iter().flatten().flatten() {
        if f.file_name().to_string_lossy().starts_with("app.log") {
            let _ = std::fs::remove_file(f.path());
        }
    }
    if o.out.is_none() {
        let _ = std::fs::remove_dir(&workdir);
    }
    if let Err(e) = result {
        eprintln!("backlog_pipeline: {e}");
        return ExitCode::FAILURE;
    }
    if let Some(g) = guard {
        match g.finish() {
            Ok(s) => say!(
                "recorded {} events ({} dropped) to {}",
                s.events,
                s.dropped,
                workdir.display()
            ),
            Err(e) => {
                eprintln!("backlog_pipeline: recording failed: {e}");
                return ExitCode::FAILURE;
            }
        }
        if o.report {
            // What `runtrace backlog DIR` prints.
            say!("\n$ runtrace backlog {}", workdir.display());
            let mut files: Vec<PathBuf> = std::fs::read_dir(&workdir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "bin"))
                .collect();
            runtrace::format::merge::sort_trace_paths(&mut files);
            let report = runtrace_analyze::backlog::analyze_files(&files, &Default::default());
            let _ = write!(std::io::stdout().lock(), "{report}");
        }
    }
    ExitCode::SUCCESS
}
