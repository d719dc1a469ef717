//! tokio's waker events reach the trace when the recording starts after
//! the runtime ran: `wakes` caches the waker callsites' interest as
//! `never` while nothing records (in builds whose only backend is the
//! recorder), and a recording's start must rebuild it. Its own process:
//! the waker callsites must first register while no recording runs.
//! `.ci/run` also runs this file alone (`cargo test -p runtrace-tokio
//! --test wakes_cached`), a build without the outside backends, where the
//! cached path is the one taken.

use runtrace_format::merge::EventStream;
use runtrace_recorder::Recorder;

/// A plain task woken by a plain task; returns (waiter id, waker id).
async fn one_wake() -> (u64, u64) {
    let me = || runtrace_tokio::task_id(tokio::task::id());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let waiter = tokio::spawn(async move {
        rx.await.unwrap();
        me()
    });
    tokio::task::yield_now().await;
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let sender = tokio::spawn(async move {
        tx.send(()).unwrap();
        me()
    });
    let s = sender.await.unwrap();
    (waiter.await.unwrap(), s)
}

#[test]
fn wakes_are_recorded_when_the_recording_starts_after_the_runtime() {
    let rt = runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .unwrap();
    assert!(runtrace_tokio::wakes::installed());
    // Every waker callsite this workload uses registers now, unrecorded.
    rt.block_on(one_wake());
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();
    let (waiter, sender) = rt.block_on(one_wake());
    g.finish().unwrap();
    // After the end, waker events cost nothing again, and nothing breaks.
    rt.block_on(one_wake());
    drop(rt);
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    let mut s = EventStream::open(&files).unwrap();
    let mut wakes = Vec::new();
    while let Some(e) = s.next_event() {
        if e.schema.name == "task_wake" && e.u64("woken_task_id") == Some(waiter) {
            wakes.push(e.u64("waker_task_id"));
        }
    }
    assert_eq!(
        wakes,
        vec![Some(sender)],
        "the waiter's wake, by the sender (probes' outside backends compiled in: {})",
        runtrace_probes::EXTERNAL_BACKENDS
    );
}
