//! tokio reports waker clones and drops through their own callsites, which
//! never give a WakeEvent: `wakes` disables each of them after its first
//! event, and must not disable the wake callsites with them. Its own
//! process: the callsites' interest is global.

use runtrace_format::merge::EventStream;
use runtrace_recorder::Recorder;

/// A plain task woken by a plain task through a oneshot channel (its
/// receiver clones the waker, and drops it); returns (waiter, waker).
async fn one_wake() -> (u64, u64) {
    let me = || runtrace_tokio::task_id(tokio::task::id());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let waiter = tokio::spawn(async move {
        rx.await.unwrap();
        me()
    });
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let sender = tokio::spawn(async move {
        tx.send(()).unwrap();
        me()
    });
    let s = sender.await.unwrap();
    (waiter.await.unwrap(), s)
}

/// Records `rounds` of [`one_wake`]; the wakers of each waiter, by round.
fn record(rt: &tokio::runtime::Runtime, rounds: usize) -> Vec<Vec<Option<u64>>> {
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();
    let pairs: Vec<_> = (0..rounds).map(|_| rt.block_on(one_wake())).collect();
    g.finish().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    let mut wakes = vec![Vec::new(); rounds];
    let mut s = EventStream::open(&files).unwrap();
    while let Some(e) = s.next_event() {
        if e.schema.name != "task_wake" {
            continue;
        }
        for (i, (waiter, _)) in pairs.iter().enumerate() {
            if e.u64("woken_task_id") == Some(*waiter) {
                wakes[i].push(e.u64("waker_task_id"));
            }
        }
    }
    // Each waiter was woken once, by its sender.
    for (i, (_, sender)) in pairs.iter().enumerate() {
        assert_eq!(wakes[i], vec![Some(*sender)], "round {i}");
    }
    wakes
}

#[test]
fn clone_and_drop_callsites_are_disabled_and_wakes_still_recorded() {
    let rt = runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .unwrap();
    assert!(runtrace_tokio::wakes::installed());
    assert_eq!(runtrace_tokio::wakes::disabled_callsites(), 0);
    record(&rt, 3);
    // The receiver's waker clone and its drop: tokio's two non-wake
    // operations, each its own callsite.
    let learned = runtrace_tokio::wakes::disabled_callsites();
    assert_eq!(learned, 2, "tokio's waker.clone and waker.drop callsites");
    // A later recording, with those callsites off, still has every wake.
    record(&rt, 3);
    assert_eq!(runtrace_tokio::wakes::disabled_callsites(), learned);
}
