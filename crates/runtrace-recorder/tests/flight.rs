//! The flight recorder (`in_memory`): segments kept in memory within a
//! budget, and snapshots of them (docs/flight-recorder.md).
//!
//! One recording runs per process at a time, so the tests take a lock.

use runtrace_recorder::{Istr, Loc, RecordError, Recorder};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-flight-{name}-"))
        .tempdir()
        .unwrap()
}

/// Every path under `dir`, recursively.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(all_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A steady load of poll events from one thread, `n` of them, paced so
/// the writer keeps up.
fn steady_load(n: u64) {
    let q = Istr::new("steady");
    let loc = Loc::caller();
    runtrace_recorder::task_spawn(1, 0, loc, q);
    for i in 0..n {
        runtrace_recorder::task_poll_start(1, 0, q, i as u32);
        runtrace_recorder::task_poll_end(1, 0, false);
        if i % 2_000 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Under a load that makes several times the budget of segments, the
/// bytes held stay within the budget (plus the one round a segment can
/// pass its size by), the oldest segments are dropped and counted, and
/// nothing is written to disk.
#[test]
fn memory_mode_keeps_within_its_budget() {
    let _g = serial();
    let tmp = tempdir("budget");
    let budget = 256 << 10;
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(budget)
        .max_file_size(32 << 10)
        .buffer_size(64 << 10)
        .flush_interval(Duration::from_millis(5))
        .start()
        .unwrap();
    steady_load(400_000);
    let stats = guard.finish().unwrap();
    eprintln!("{stats:?}");
    assert!(
        stats.bytes > 4 * budget,
        "the load made {} bytes, not several budgets' worth",
        stats.bytes
    );
    assert!(stats.segments_dropped > 0, "{stats:?}");
    // Dropped segments plus those the ring can hold account for them all.
    assert!(stats.files - stats.segments_dropped <= budget / (32 << 10), "{stats:?}");
    // One round's output is at most a thread's buffer plus its framing.
    let slack = (64 << 10) + (16 << 10);
    assert!(
        stats.memory_peak <= budget + slack,
        "held {} bytes at most, budget {budget}",
        stats.memory_peak
    );
    assert!(stats.memory_peak > budget / 2, "{stats:?}");
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}

/// Bad settings of the flight recorder are refused before anything
/// starts, naming the setting.
#[test]
fn flight_configuration_errors() {
    let _g = serial();
    let tmp = tempdir("config");
    let path = tmp.path().join("trace");
    let config_err = |r: Result<runtrace_recorder::RecordingGuard, RecordError>| match r {
        Err(RecordError::Config(m)) => m,
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("started"),
    };
    let m = config_err(
        Recorder::builder()
            .path(&path)
            .in_memory(100 << 10)
            .max_file_size(64 << 10)
            .start(),
    );
    assert!(m.contains("in_memory") && m.contains("two segments"), "{m}");
    let m = config_err(
        Recorder::builder()
            .path(&path)
            .in_memory(1 << 20)
            .snapshot_signal("USR3")
            .start(),
    );
    assert!(m.contains("snapshot_signal") && m.contains("USR3"), "{m}");
    assert!(!runtrace_recorder::is_recording());
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}
