//! Issue 34: a trace whose tasks were polled again and again with no wake
//! recorded before (a tokio application without runtrace's tracing layer)
//! gets a note saying why and the one line that fixes it, in `analyze`'s
//! notes and in `summary`; a trace with the wakes gets none.

use runtrace_analyze::registry::summary;
use runtrace_analyze::reports::OneRead;
use runtrace_analyze::runtime::WAKES_HINT;
use runtrace_analyze::summary::text;
use runtrace_analyze::{analyze_files, Options};
use runtrace_model::synth::TraceBuilder;

/// Tasks 1..=3 of location 1, each polled 8 times; `wakes`: a wake before
/// every poll after the first.
fn trace(wakes: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let mut b = TraceBuilder::new();
    b.location(1, "src/server.rs", 42, 9);
    let mut t = 1_000;
    for task in 1..=3 {
        b.spawn(1, t, task, 0, 1, 0);
        for i in 0..8 {
            t += 1_000;
            if wakes && i > 0 {
                b.wake(1, 0, t, task, 0);
                t += 100;
            }
            b.poll_start(1, 0, t, task, 0, 0);
            t += 500;
            b.poll_end(1, 0, t, task, i == 7);
        }
        b.terminate(1, t + 1, task);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();
    (dir, path)
}

#[test]
fn a_trace_without_wakes_says_which_line_adds_them() {
    let (_dir, path) = trace(false);
    let r = analyze_files(std::slice::from_ref(&path), Options::default());
    assert!(r.wakes_missing());
    assert!(r.notes.iter().any(|n| n == WAKES_HINT), "{:?}", r.notes);
    assert!(r.to_string().contains(".with(runtrace::tokio::layer())"));
    let s = summary(&OneRead::read(&[path], None));
    assert_eq!(s["notes"][0], WAKES_HINT);
    assert!(text(&s).contains("note:         most polls had no wake recorded"));
}

#[test]
fn a_trace_with_wakes_has_no_such_note() {
    let (_dir, path) = trace(true);
    let r = analyze_files(std::slice::from_ref(&path), Options::default());
    assert!(!r.wakes_missing(), "{:?}", r.spawn_locations);
    assert!(!r.notes.iter().any(|n| n == WAKES_HINT));
    let s = summary(&OneRead::read(&[path], None));
    assert_eq!(s["notes"].as_array().unwrap().len(), 0);
    assert!(!text(&s).contains("note:"));
}
