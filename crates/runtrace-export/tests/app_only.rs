//! A trace holding only application events (runtrace-sync's locks,
//! queues, I/O) still gives a Perfetto timeline with them (issue 37: the
//! file came out empty).

use runtrace_model::synth::TraceBuilder;

#[test]
fn a_trace_of_application_events_only_gives_a_timeline() {
    let mut b = TraceBuilder::new();
    b.string(1, "jobs");
    b.string(2, "log");
    b.enqueue(10, 1_000, 1, 1, 1);
    b.lock_hold(11, 5_000, 2, 2_000, true);
    b.io(11, 9_000, 2, 512, 3_000);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, b.finish()).unwrap();
    let out = dir.path().join("t.pftrace");
    let c = runtrace_export::perfetto::convert(&[&input], &out).unwrap();
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    assert_eq!(c.stats.app_slices, 2, "{:?}", c.stats);
    assert!(c.stats.counter_values >= 1, "{:?}", c.stats);
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.len() > 100, "{} bytes", bytes.len());
}

runtrace_recorder::user_events! {
    provider = "myapp";
    /// A request finished.
    fn request_done(status: u16, ok: bool);
}

/// User-defined events only: the timeline is not shown them yet, but the
/// file is a valid trace with the recording's process track, and the
/// conversion says why it holds nothing else (it was an empty file).
#[test]
fn a_trace_of_user_defined_events_only_is_not_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let g = runtrace_recorder::Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();
    for i in 0..10 {
        request_done(200 + i, true);
    }
    g.finish().unwrap();
    let out = dir.path().join("t.pftrace");
    let files = runtrace_format::files::expand(&[dir.path().to_path_buf()]).unwrap();
    let c = runtrace_export::perfetto::convert(&files, &out).unwrap();
    assert_eq!(c.events, 10);
    assert!(c.stats.packets > 0, "{:?}", c.stats);
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
    assert!(c.notes[0].contains("user-defined events"), "{:?}", c.notes);
}
