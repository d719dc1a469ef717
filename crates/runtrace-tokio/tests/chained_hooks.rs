//! Hooks that chain (issue 34): an application's own tokio runtime hook,
//! given to [`runtrace_tokio::Instrumentation`], keeps working beside
//! runtrace's. One test per hook: the application's hook runs (a counter)
//! and so does runtrace's (its events are in the recording). Each runtime
//! is built and dropped inside its recording, so no other test's runtime
//! adds events to it.

mod common;

use common::record;
use runtrace_format::Event;
use runtrace_tokio::Instrumentation;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Records a two-worker runtime instrumented by `add(Instrumentation)`
/// (which registers the application's hook, counting into the counter it
/// is given) running `work`, and returns the events and the count.
fn with_hook(
    name: &str,
    add: impl FnOnce(Instrumentation, Arc<AtomicUsize>) -> Instrumentation,
    work: impl std::future::Future<Output = ()> + Send,
) -> (Vec<Event>, usize) {
    let calls = Arc::new(AtomicUsize::new(0));
    let dir = tempfile::tempdir().unwrap();
    let c = calls.clone();
    let events = record(dir.path(), move || {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2).enable_all();
        add(Instrumentation::new().name(name), c).apply(&mut b);
        let rt = b.build().unwrap();
        rt.block_on(work);
        drop(rt);
    });
    (events, calls.load(Ordering::Relaxed))
}

fn count(events: &[Event], name: &str) -> usize {
    events.iter().filter(|e| e.schema.name == name).count()
}

/// Tasks that yield and sleep: spawns, polls, parks and unparks.
async fn some_tasks() {
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(async {
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn on_thread_start_both_run() {
    // No task is polled: the global queue samples come from the sampler
    // thread that runtrace's on_thread_start starts.
    let (ev, n) = with_hook(
        "thread_start",
        |i, c| i.on_thread_start(move || bump(&c)),
        async { tokio::time::sleep(Duration::from_millis(250)).await },
    );
    assert!(n >= 2, "the application's hook ran {n} times");
    assert!(count(&ev, "queue_sample") >= 1, "runtrace's sampler ran");
}

#[test]
fn on_thread_stop_both_run() {
    let (ev, n) = with_hook(
        "thread_stop",
        |i, c| i.on_thread_stop(move || bump(&c)),
        some_tasks(),
    );
    assert!(n >= 2, "the application's hook ran {n} times");
    assert!(count(&ev, "worker_stop") >= 1);
}

#[test]
fn on_thread_park_both_run() {
    let (ev, n) = with_hook(
        "thread_park",
        |i, c| i.on_thread_park(move || bump(&c)),
        some_tasks(),
    );
    assert!(n >= 1, "the application's hook ran {n} times");
    assert!(count(&ev, "worker_park") >= 1);
}

#[test]
fn on_thread_unpark_both_run() {
    let (ev, n) = with_hook(
        "thread_unpark",
        |i, c| i.on_thread_unpark(move || bump(&c)),
        some_tasks(),
    );
    assert!(n >= 1, "the application's hook ran {n} times");
    assert!(count(&ev, "worker_unpark") >= 1);
}

#[test]
fn on_task_spawn_both_run() {
    let (ev, n) = with_hook(
        "task_spawn",
        |i, c| i.on_task_spawn(move |_| bump(&c)),
        some_tasks(),
    );
    assert!(n >= 4, "the application's hook ran {n} times");
    assert!(count(&ev, "task_spawn") >= 4);
}

#[test]
fn on_task_terminate_both_run() {
    let (ev, n) = with_hook(
        "task_terminate",
        |i, c| i.on_task_terminate(move |_| bump(&c)),
        some_tasks(),
    );
    assert!(n >= 4, "the application's hook ran {n} times");
    assert!(count(&ev, "task_terminate") >= 4);
}

#[test]
fn on_before_task_poll_both_run() {
    let (ev, n) = with_hook(
        "before_poll",
        |i, c| i.on_before_task_poll(move |_| bump(&c)),
        some_tasks(),
    );
    assert!(n >= 8, "the application's hook ran {n} times");
    assert!(count(&ev, "task_poll_start") >= 8);
}

#[test]
fn on_after_task_poll_both_run() {
    let (ev, n) = with_hook(
        "after_poll",
        |i, c| i.on_after_task_poll(move |_| bump(&c)),
        some_tasks(),
    );
    assert!(n >= 8, "the application's hook ran {n} times");
    assert!(count(&ev, "task_poll_end") >= 8);
}

#[test]
fn several_hooks_of_one_kind_run_in_registration_order() {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (o1, o2) = (order.clone(), order.clone());
    let (ev, _) = with_hook(
        "order",
        move |i, _| {
            i.on_task_spawn(move |_| o1.lock().unwrap().push(1))
                .on_task_spawn(move |_| o2.lock().unwrap().push(2))
        },
        async {
            tokio::spawn(async {}).await.unwrap();
        },
    );
    assert_eq!(*order.lock().unwrap(), [1, 2]);
    assert_eq!(count(&ev, "task_spawn"), 1);
}
