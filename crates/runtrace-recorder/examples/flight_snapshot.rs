//! Measures the flight recorder under a steady load: memory held against
//! the budget, and how long a snapshot takes to appear after its trigger
//! (docs/flight-recorder.md, "Measured").
//!
//! ```sh
//! cargo run --release -p runtrace-recorder --example flight_snapshot -- /tmp/flight-out 40 [BUDGET_MIB]
//! runtrace check /tmp/flight-out/snapshot-*
//! ```
//!
//! One thread records 4,000 events every ~2.5 ms into a budget (default
//! 256 MiB; at format 1.3's density 40 s of this load make ~150 MB, so a
//! budget of 64 makes the ring drop its oldest segments),
//! triggers a snapshot (30 s before, 1 s after) 3 s before the end, and
//! notes when the snapshot directory appears. At the end it prints the
//! process's peak resident memory (`VmHWM`) beside the recorder's own
//! count of the bytes it held (`memory_peak`), and the RSS of the same
//! program before recording started.

use runtrace_recorder::{Istr, Loc, Recorder};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(secs)) = (args.next(), args.next()) else {
        eprintln!("usage: flight_snapshot DIR SECONDS [BUDGET_MIB]");
        std::process::exit(2);
    };
    let dir = std::path::PathBuf::from(dir);
    let secs: u64 = secs.parse().expect("SECONDS: a whole number");
    let budget_mib: u64 = args
        .next()
        .map_or(256, |b| b.parse().expect("BUDGET_MIB: a whole number"));
    let rss_before = status_kib("VmRSS");
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .in_memory(budget_mib << 20)
        .snapshot_window(Duration::from_secs(30), Duration::from_secs(1))
        .start()
        .expect("start the recording");
    let q = Istr::new("demo");
    let loc = Loc::caller();
    let stop = Instant::now() + Duration::from_secs(secs);
    let has_snapshot = || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("snapshot-"))
            })
            .unwrap_or(false)
    };
    let (mut t, mut trigger, mut appeared) = (0u64, None::<Instant>, None);
    while Instant::now() < stop || (trigger.is_some() && appeared.is_none()) {
        for _ in 0..1000 {
            t += 1;
            runtrace_recorder::task_spawn(t, 0, loc, q);
            runtrace_recorder::task_poll_start(t, 0, q, 0);
            runtrace_recorder::task_poll_end(t, 0, true);
            runtrace_recorder::task_terminate(t);
        }
        std::thread::sleep(Duration::from_micros(2500));
        if trigger.is_none() && Instant::now() + Duration::from_secs(3) > stop {
            guard.snapshot("demo");
            trigger = Some(Instant::now());
        }
        if let (Some(at), None) = (trigger, appeared) {
            if has_snapshot() {
                appeared = Some(at.elapsed());
            }
        }
    }
    let st = guard.finish().expect("finish the recording");
    println!("{st:?}");
    println!("trigger to snapshot directory: {appeared:?} (post-trigger period 1 s)");
    println!(
        "resident memory: {} KiB before recording, peak {} KiB (VmHWM); recorder's memory_peak {} KiB",
        rss_before.unwrap_or(0),
        status_kib("VmHWM").unwrap_or(0),
        st.memory_peak >> 10
    );
}

/// A `kB` line of /proc/self/status (read twice per run, never per event).
fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
