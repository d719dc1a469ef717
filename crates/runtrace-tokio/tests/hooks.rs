//! A stock tokio runtime recorded through `instrument`: the hook trace is
//! consistent (every poll start has its end on the same worker and thread,
//! task ids of spawn, poll and terminate agree, no poll outlives its task),
//! wakes of `runtrace_tokio::spawn` tasks name the waking task, and two
//! runtimes in one process are told apart.

mod common;

use common::{record, two_workers};
use runtrace_format::{Event, Value};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

#[test]
fn multi_thread_runtime_trace_is_consistent() {
    let dir = std::env::temp_dir().join(format!("runtrace-tokio-{}", std::process::id()));
    let events = record(&dir, || {
        let rt = two_workers();
        let rt2 =
            runtrace_tokio::instrument(tokio::runtime::Builder::new_current_thread().enable_all())
                .build()
                .unwrap();
        rt.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            // The waiter is woken by the sender task: its WakeEvent names it.
            let waiter = runtrace_tokio::spawn(async move { rx.await.unwrap() });
            tokio::time::sleep(Duration::from_millis(5)).await;
            let sender = runtrace_tokio::spawn(async move { tx.send(7).unwrap() });
            sender.await.unwrap();
            assert_eq!(waiter.await.unwrap(), 7);
            let hs: Vec<_> = (0..200)
                .map(|i| {
                    tokio::spawn(async move {
                        for _ in 0..3 {
                            tokio::task::yield_now().await;
                        }
                        i
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            // Queue samples come every 10 ms from a sampler thread; 100 ms
            // leaves room for a loaded machine to delay it.
            tokio::time::sleep(Duration::from_millis(100)).await;
        });
        rt2.block_on(async { tokio::spawn(async {}).await.unwrap() });
        drop(rt);
        drop(rt2);
    });

    let name = |e: &Event| e.schema.name.clone();
    let mut open: HashMap<(u64, u64), (u64, u32)> = HashMap::new(); // (tid) -> (task, worker)
    let mut spawned = HashSet::new();
    let mut terminated = HashSet::new();
    let mut polls = 0;
    let mut runtimes = HashSet::new();
    for e in &events {
        match name(e).as_str() {
            "task_spawn" => {
                spawned.insert(e.u64("task_id").unwrap());
            }
            "task_poll_start" => {
                let t = e.u64("task_id").unwrap();
                assert!(spawned.contains(&t), "poll of a task never spawned: {t}");
                assert!(!terminated.contains(&t), "poll after terminate: {t}");
                let w = match e.get("worker") {
                    Some(Value::Worker(Some(w))) => *w,
                    other => panic!("poll without worker: {other:?}"),
                };
                assert!(
                    open.insert((e.tid, 0), (t, w)).is_none(),
                    "nested poll on one thread"
                );
                polls += 1;
            }
            "task_poll_end" => {
                let (t, w) = open
                    .remove(&(e.tid, 0))
                    .expect("poll end without start on this thread");
                assert_eq!(e.u64("task_id"), Some(t));
                assert_eq!(e.get("worker"), Some(&Value::Worker(Some(w))));
            }
            "task_terminate" => {
                let t = e.u64("task_id").unwrap();
                // tokio calls the terminate hook, but not the spawn hook, for
                // blocking tasks (spawn_blocking, the multi-thread runtime's
                // worker launches); those are never polled through the hooks.
                if !spawned.contains(&t) {
                    let polled = events
                        .iter()
                        .any(|x| x.schema.name == "task_poll_start" && x.u64("task_id") == Some(t));
                    assert!(!polled, "task {t} polled but never spawned");
                    continue;
                }
                terminated.insert(t);
            }
            "worker_start" => {
                runtimes.insert(e.u64("runtime").unwrap());
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "every poll start has its end");
    assert!(polls >= 200 * 4, "{polls} polls");
    assert!(
        spawned.len() >= 203 && terminated.len() >= 203,
        "{} {}",
        spawned.len(),
        terminated.len()
    );
    assert!(runtimes.len() >= 2, "two runtimes told apart: {runtimes:?}");
    // A spawn location is interned for tokio tasks.
    let loc = events
        .iter()
        .find(|e| e.schema.name == "task_spawn")
        .and_then(|e| {
            e.get("spawn_loc")
                .and_then(|v| v.as_str())
                .map(String::from)
        });
    assert!(loc.is_some_and(|l| l.contains("hooks.rs")));
    // The oneshot wake names the sender task as the waker.
    let wakes: Vec<&Event> = events
        .iter()
        .filter(|e| e.schema.name == "task_wake")
        .collect();
    assert!(
        wakes
            .iter()
            .any(|e| e.u64("waker_task_id").is_some_and(|w| w != 0)),
        "a task-to-task wake"
    );
    assert!(events.iter().any(|e| e.schema.name == "queue_sample"));
    assert!(events.iter().any(|e| e.schema.name == "worker_park"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without `--cfg tokio_unstable` the crate does not compile, and the error
/// says what to add (never a silently empty trace).
#[test]
fn missing_tokio_unstable_is_a_clear_compile_error() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["check", "--quiet", "-p", "runtrace-tokio", "--target-dir"])
        .arg(root.join("target/no-tokio-unstable"))
        // Replaces the workspace's rustflags (which add the cfg).
        .env("RUSTFLAGS", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must not compile without the cfg");
    assert!(
        err.contains("--cfg")
            && err.contains("tokio_unstable")
            && err.contains(".cargo/config.toml"),
        "{err}"
    );
}

/// Plain `tokio::spawn` tasks get WakeEvents from tokio's waker
/// instrumentation, naming the waking task; a `runtrace_tokio::spawn` task
/// gets exactly one WakeEvent per wake (not one from tokio and one from
/// `traced`).
#[test]
fn plain_tokio_spawn_tasks_get_one_wake_per_wake() {
    let dir = std::env::temp_dir().join(format!("runtrace-tokio-wakes-{}", std::process::id()));
    let ids = std::sync::Mutex::new(Vec::new());
    let events = record(&dir, || {
        let rt = two_workers();
        assert!(runtrace_tokio::wakes::installed());
        rt.block_on(async {
            let me = |id: tokio::task::Id| runtrace_tokio::task_id(id);
            // A plain waiter woken by a plain sender, and a traced waiter
            // woken by a plain sender.
            let (tx1, rx1) = tokio::sync::oneshot::channel::<()>();
            let (tx2, rx2) = tokio::sync::oneshot::channel::<()>();
            let w1 = tokio::spawn(async move {
                rx1.await.unwrap();
                me(tokio::task::id())
            });
            let w2 = runtrace_tokio::spawn(async move {
                rx2.await.unwrap();
                me(tokio::task::id())
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            let s = tokio::spawn(async move {
                tx1.send(()).unwrap();
                tx2.send(()).unwrap();
                me(tokio::task::id())
            });
            let s = s.await.unwrap();
            let (w1, w2) = (w1.await.unwrap(), w2.await.unwrap());
            ids.lock().unwrap().extend([w1, w2, s]);
        });
        drop(rt);
    });
    let ids = ids.into_inner().unwrap();
    let (plain, traced, sender) = (ids[0], ids[1], ids[2]);
    let wakes_of = |t: u64| -> Vec<&Event> {
        events
            .iter()
            .filter(|e| e.schema.name == "task_wake" && e.u64("woken_task_id") == Some(t))
            .collect()
    };
    let p = wakes_of(plain);
    assert_eq!(p.len(), 1, "the plain waiter was woken once: {p:?}");
    assert_eq!(p[0].u64("waker_task_id"), Some(sender));
    let t = wakes_of(traced);
    assert_eq!(t.len(), 1, "the traced waiter was woken once: {t:?}");
    assert_eq!(t[0].u64("waker_task_id"), Some(sender));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wake a task issues names the worker tokio says that task runs on
/// (`tokio::runtime::worker_index()` read inside it): the wake reuses its
/// poll's worker lookup, and must agree with tokio's.
#[test]
fn a_task_to_task_wake_names_the_wakers_worker() {
    let dir = tempfile::tempdir().unwrap();
    let rt = two_workers();
    let mut senders: Vec<(u64, Option<usize>)> = Vec::new();
    let events = record(dir.path(), || {
        senders = rt.block_on(async {
            let mut out = Vec::new();
            for _ in 0..50 {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let waiter = tokio::spawn(async move { rx.await.unwrap() });
                tokio::task::yield_now().await;
                let sender = tokio::spawn(async move {
                    let at = tokio::runtime::worker_index();
                    tx.send(()).unwrap();
                    (runtrace_tokio::task_id(tokio::task::id()), at)
                });
                out.push(sender.await.unwrap());
                waiter.await.unwrap();
            }
            out
        })
    });
    drop(rt);
    let mut checked = 0;
    for (sender, at) in &senders {
        for e in events
            .iter()
            .filter(|e| e.schema.name == "task_wake" && e.u64("waker_task_id") == Some(*sender))
        {
            assert_eq!(
                e.get("worker"),
                Some(&Value::Worker(at.map(|w| w as u32))),
                "the wake by task {sender}"
            );
            checked += 1;
        }
    }
    // A waiter still pending when its sender runs is woken by it.
    assert!(checked >= 10, "{checked} task-to-task wakes checked");
}

/// A wake the timer or the I/O driver issues while a worker is parked
/// names that worker (it reuses the park hook's lookup: the worker of the
/// thread's polls before the park, tokio's `worker_index` looked up at
/// each PollStart, as the park and its unpark say) and no waking task; and
/// a wake naming a task comes from inside a poll of that task on the same
/// thread (not from the worker's launch task, which tokio reports as the
/// current task between polls).
#[test]
fn a_wake_from_a_parked_worker_names_that_worker_and_no_task() {
    let dir = tempfile::tempdir().unwrap();
    let rt = two_workers();
    let events = record(dir.path(), || {
        rt.block_on(async {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    tokio::spawn(async move {
                        for j in 0..20 {
                            tokio::time::sleep(Duration::from_micros(300 + 50 * i)).await;
                            if j % 4 == 0 {
                                // Task-to-task wakes (the child's end wakes
                                // this task too), and deferred wakes, which
                                // the worker issues between polls.
                                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                                let child = tokio::spawn(async move { rx.await.unwrap() });
                                tokio::task::yield_now().await;
                                tx.send(()).unwrap();
                                child.await.unwrap();
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
        })
    });
    drop(rt);
    let worker = |e: &Event| match e.get("worker") {
        Some(Value::Worker(w)) => *w,
        other => panic!("no worker field: {other:?}"),
    };
    // Per thread: the worker of its last poll, the task it is polling, and
    // the worker it parked as.
    let mut polled_as: HashMap<u64, Option<u32>> = HashMap::new();
    let mut polling: HashMap<u64, u64> = HashMap::new();
    let mut parked_as: HashMap<u64, Option<u32>> = HashMap::new();
    let (mut parked_wakes, mut task_wakes, mut unparks) = (0, 0, 0);
    for e in &events {
        match e.schema.name.as_str() {
            "task_poll_start" => {
                polled_as.insert(e.tid, worker(e));
                polling.insert(e.tid, e.u64("task_id").unwrap());
            }
            "task_poll_end" => {
                polling.remove(&e.tid);
            }
            "worker_park" => {
                let w = worker(e);
                if let Some(p) = polled_as.get(&e.tid) {
                    assert_eq!(w, *p, "park on thread {} after its polls", e.tid);
                }
                parked_as.insert(e.tid, w);
            }
            "worker_unpark" => {
                if let Some(p) = parked_as.remove(&e.tid) {
                    assert_eq!(worker(e), p, "unpark on thread {}", e.tid);
                    unparks += 1;
                }
            }
            "task_wake" => {
                let waker = e.u64("waker_task_id").unwrap();
                if let Some(p) = parked_as.get(&e.tid) {
                    assert_eq!(waker, 0, "wake from parked thread {}: {e:?}", e.tid);
                    assert_eq!(worker(e), *p, "wake from parked thread {}", e.tid);
                    assert!(p.is_some(), "a parked worker has an index");
                    parked_wakes += 1;
                } else if waker != 0 {
                    assert_eq!(
                        polling.get(&e.tid),
                        Some(&waker),
                        "wake by a task not polled: {e:?}"
                    );
                    task_wakes += 1;
                }
            }
            _ => {}
        }
    }
    assert!(
        parked_wakes >= 20,
        "{parked_wakes} wakes from parked workers checked"
    );
    assert!(task_wakes >= 10, "{task_wakes} wakes from polls checked");
    assert!(unparks >= 20, "{unparks} unparks checked");
}
