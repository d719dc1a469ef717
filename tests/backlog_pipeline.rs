//! Issue 6's main job, end to end: `examples/backlog_pipeline` records a
//! trace in which log rotations stall under lock "log", and
//! `runtrace backlog` on it names that I/O stall under that lock, held by
//! the logging thread, as the cause of every backlog trigger a rotation
//! produced.

mod common;
use common::{example, scratch_dir, trace_files};
use runtrace_analyze::backlog::{analyze_files, BacklogOptions, Cause};
use std::process::Command;

#[test]
fn backlog_names_the_rotation_under_the_log_lock() {
    let scratch = scratch_dir("backlog-pipeline");
    let dir = scratch.path();
    let out = Command::new(example("backlog_pipeline"))
        .args(["--out", dir.to_str().unwrap(), "--secs", "3.5"])
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

    let files = trace_files(dir);
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

    // When each rotation ran, [start, end] in ns since the recording began
    // (an `io` event is stamped at its end).
    let mut rotations = Vec::new();
    let mut s = runtrace::format::merge::EventStream::open(&files).unwrap();
    while let Some(e) = s.next_event() {
        let op = e.get("op").and_then(|v| v.as_str());
        if e.schema.name == "io" && op == Some("rotate") {
            let end = e.ns.max(0) as u64;
            rotations.push((end.saturating_sub(e.u64("io_ns").unwrap()), end));
        }
    }
    assert_eq!(rotations.len() as u64, rotate.count);

    // About one rotation per second, the first 0.7 s in: three in 3.5 s.
    // A trigger fires during each; a machine that stops the consumer for
    // ~25 ms may add one of its own (a real stall, judged on its own
    // evidence), which the rate limit may let suppress one rotation's.
    let mut from_rotation = 0;
    for (i, t) in r.triggers.iter().enumerate() {
        assert_eq!(&*t.queue, "requests");
        // Judged over its own spike: after the previous trigger's.
        if i > 0 {
            assert!(t.window_ns[0] > r.triggers[i - 1].timestamp_ns, "{t:?}");
        }
        let during_rotation = rotations
            .iter()
            .any(|&(start, end)| start <= t.timestamp_ns && end >= t.window_ns[0]);
        if !during_rotation {
            eprintln!("a trigger without a rotation (a scheduling stall?): {t:?}");
            continue;
        }
        from_rotation += 1;
        // At most one 120 ms rotation's worth of lost time.
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
    assert!(from_rotation >= 2, "{rotations:?}\n{stdout}");
}
