//! What each stage of following costs `runtrace top`, measured while a
//! recording is being written: this follows DIR as `top` does (a
//! [`Live`] refreshed once a second, [`runtrace_top::ui::REFRESH`]), with
//! only the stages `--stages` names, and prints the CPU it took:
//!
//! - `read`: following the files as they grow, decoding, ordering, and
//!   keeping the window's events and lives (memory bounded by the window);
//! - `lifecycle`: that, and the one lifecycle tracker the windows share
//!   (pairing polls, wakes and tasks), no window open;
//! - `all`: what `top` does (the windows too), without drawing.
//!
//! Paired with the `paced` example (a finished recording written out
//! again at `--rate` events per second), the three give what following
//! 1M events/s costs before any window is analysed (docs/top.md "Cost"):
//!
//! ```text
//! cargo run --release -p runtrace-top --example paced -- SRC_DIR /tmp/p/trace --rate 1000000 &
//! cargo run --release -p runtrace-top --example follow_stages -- /tmp/p --stages read [--seconds 20] [--skip 9] [--window 5]
//! ```
//!
//! The CPU is this process's over `--seconds` minus the first `--skip`
//! (the first read of what was already written), as a share of one core.

use runtrace_top::source::{Live, Options, Stages};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// This process's CPU time.
fn cpu() -> Duration {
    Duration::from_nanos(runtrace_core::thread_time::clock_ns(
        libc::CLOCK_PROCESS_CPUTIME_ID,
    ))
}

/// Peak resident memory (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The value after `flag`, parsed; `default` when absent.
fn opt<T: std::str::FromStr>(args: &[String], flag: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag}: a value is missing or malformed")),
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: follow_stages DIR [--stages read|lifecycle|all] [--seconds S] [--skip K] [--window W]";
    let Some(dir) = args.first().filter(|a| !a.starts_with("--")) else {
        eprintln!("{usage}");
        return std::process::ExitCode::from(2);
    };
    let parsed = (|| {
        let stages = match opt(&args, "--stages", "all".to_string())?.as_str() {
            "read" => Stages::Read,
            "lifecycle" => Stages::Lifecycle,
            "all" => Stages::All,
            s => return Err(format!("--stages: read, lifecycle or all, not {s:?}")),
        };
        let seconds: f64 = opt(&args, "--seconds", 20.0)?;
        let skip: f64 = opt(&args, "--skip", 9.0)?;
        let window_s =
            runtrace_top::source::parse_window(&opt(&args, "--window", "5".to_string())?)?;
        if !(skip >= 0.0 && seconds > skip) {
            return Err("--seconds must be over --skip (both seconds, --skip from 0)".into());
        }
        Ok((stages, seconds, skip, window_s))
    })();
    let (stages, seconds, skip, window_s) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("follow_stages: {e}\n{usage}");
            return std::process::ExitCode::from(2);
        }
    };
    let opts = Options {
        window_s,
        stages,
        ..Options::default()
    };
    let path = PathBuf::from(dir);
    // The writer may not have begun its first file yet.
    let t0 = Instant::now();
    let mut live = loop {
        match Live::open(&path, opts) {
            Ok(l) => break l,
            Err(e) if t0.elapsed() > Duration::from_secs(10) => {
                eprintln!("follow_stages: {e}");
                return std::process::ExitCode::from(1);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let start = Instant::now();
    let mut from: Option<(Instant, Duration)> = None;
    let mut shown = 0u32;
    let mut next = start;
    while start.elapsed().as_secs_f64() < seconds {
        shown += live.refresh().is_some() as u32;
        if from.is_none() && start.elapsed().as_secs_f64() >= skip {
            from = Some((Instant::now(), cpu()));
        }
        // A refresh a second, as `top`'s, whatever the refresh took.
        next += runtrace_top::ui::REFRESH;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let Some((w0, c0)) = from else {
        eprintln!("follow_stages: nothing measured");
        return std::process::ExitCode::from(1);
    };
    let (wall, used) = (w0.elapsed(), cpu() - c0);
    println!(
        "stages {:?}: {:.2}% of one core over {:.1} s; peak RSS {:.1} MiB; {} windows shown",
        stages,
        100.0 * used.as_secs_f64() / wall.as_secs_f64(),
        wall.as_secs_f64(),
        peak_rss_kib() as f64 / 1024.0,
        shown
    );
    std::process::ExitCode::SUCCESS
}
