//! Issue 6's main job, end to end: `examples/backlog_pipeline` records a
//! trace in which log rotations stall under lock "log", and
//! `runtrace backlog` on it names that I/O stall under that lock, held by
//! the logging thread, as the cause of every backlog trigger.

mod common;
use common::example;
use runtrace_analyze::backlog::{analyze_files, BacklogOptions, Cause};
use std::path::PathBuf;
use std::process::Command;

#[test]
fn backlog_names_the_rotation_under_the_log_lock() {
    let dir =
        std::env::temp_dir().join(format!("runtrace-backlog-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(example("backlog_pipeline"))
        .args(["--out", dir.to_str().unwrap(), "--secs", "2.5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The example prints the report itself, as `runtrace backlog` would.
    assert!(stdout.contains("=== Backlog triggers"), "{stdout}");

    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    runtrace::format::merge::sort_trace_paths(&mut files);
    let r = analyze_files(&files, &BacklogOptions::default());
    assert!(r.errors.is_empty() && !r.damaged, "{:?}", r.errors);

    let q = r
        .queues
        .iter()
        .find(|q| q.name == "requests")
        .expect("queue");
    assert!(q.enqueued > 5_000, "{q:?}");
    assert_eq!(q.enqueued, q.dequeued, "every item is consumed by the end");
    assert!(q.max_size >= 300, "{q:?}");
    let log = r.locks.iter().find(|l| l.name == "log").expect("lock log");
    assert!(log.hold_ns_max >= 100_000_000, "{log:?}");
    let rotate = r.io.iter().find(|i| i.op == "rotate").expect("rotate io");
    assert!(rotate.count >= 2, "{rotate:?}");

    // About one rotation per second: two triggers in 2.5 s (the first
    // rotation comes 0.7 s in).
    assert!(r.triggers.len() >= 2, "{stdout}");
    for (i, t) in r.triggers.iter().enumerate() {
        assert_eq!(t.queue, "requests");
        // Judged over its own spike: after the previous trigger's, and at
        // most one 120 ms rotation's worth of lost time.
        if i > 0 {
            assert!(t.window_ns[0] > r.triggers[i - 1].timestamp_ns, "{t:?}");
        }
        assert!(t.lost_ns < 150_000_000, "{t:?}");
        let top = t
            .verdicts
            .first()
            .unwrap_or_else(|| panic!("no verdict: {t:?}"));
        assert_eq!(top.cause, Cause::IoBlocking, "{t:?}");
        assert_eq!(top.lock.as_deref(), Some("log"), "{t:?}");
        assert!(
            top.thread.as_deref().unwrap_or("").starts_with("logger"),
            "{t:?}"
        );
        assert!(top.evidence.contains("rotate"), "{t:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
