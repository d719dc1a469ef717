//! What the runtrace-tokio tests share (`mod common;`): a recording of some
//! work read back in time order, an instrumented two-worker runtime, and a
//! plain task woken by a plain task.
#![allow(dead_code)] // each test file uses a part

use runtrace_format::merge::EventStream;
use runtrace_format::Event;
use runtrace_recorder::Recorder;

/// Records what `work` does into `dir` and returns the events in time
/// order; no event may be dropped, no file damaged.
pub fn record(dir: &std::path::Path, work: impl FnOnce()) -> Vec<Event> {
    // One recording per process at a time (tests run in parallel).
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let _ = std::fs::remove_dir_all(dir);
    let g = Recorder::builder().path(dir.join("trace")).start().unwrap();
    work();
    let st = g.finish().unwrap();
    assert_eq!(st.dropped, 0);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    let mut s = EventStream::open(&files).unwrap();
    let mut v = Vec::new();
    while let Some(e) = s.next_event() {
        v.push(e);
    }
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    v
}

/// An instrumented multi-thread runtime with 2 workers.
/// Two workers, runtrace's hooks, no tracing subscriber of runtrace's.
pub fn two_workers_plain() -> tokio::runtime::Runtime {
    runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .unwrap()
}

/// (With runtrace's minimal global subscriber for tokio's wakes: these
/// tests' processes set no subscriber of their own.)
pub fn two_workers() -> tokio::runtime::Runtime {
    runtrace_tokio::wakes::install_global();
    runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .unwrap()
}

/// A plain task woken by a plain task through a oneshot channel (its
/// receiver clones the waker, and drops it); returns (waiter, waker).
pub async fn one_wake() -> (u64, u64) {
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

/// The wakers (`waker_task_id`) of each wake of task `woken` in `events`.
pub fn wakers_of(events: &[Event], woken: u64) -> Vec<Option<u64>> {
    events
        .iter()
        .filter(|e| e.schema.name == "task_wake" && e.u64("woken_task_id") == Some(woken))
        .map(|e| e.u64("waker_task_id"))
        .collect()
}
