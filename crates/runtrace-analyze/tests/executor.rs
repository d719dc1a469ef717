//! A trace of the real runtrace executor (two executors on two threads,
//! recorded in process): the analysis sees executor workers, polls, wakes
//! and a long poll at the spawn location of this file that caused it.

use runtrace_analyze::{analyze_files, FindingKind, Options, Severity};
use runtrace_executor::{Executor, QueueConfig};
use runtrace_recorder::Recorder;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Returns Pending once, waking itself: one wake and a second poll.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn executor_trace() {
    let dir = std::env::temp_dir().join(format!("runtrace-analyze-exec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .start()
        .expect("start recording");
    let slow_line = line!() + 11;
    std::thread::scope(|s| {
        for k in 0..2 {
            s.spawn(move || {
                let ex = Executor::builder()
                    .queue("latency", QueueConfig::fifo().share(4))
                    .queue("batch", QueueConfig::las())
                    .build()
                    .expect("executor");
                ex.block_on(async {
                    let slow = if k == 0 {
                        Some(ex.spawn(async { std::thread::sleep(Duration::from_millis(60)) }))
                    } else {
                        None
                    };
                    let mut hs = Vec::new();
                    for i in 0..300 {
                        let q = if i % 3 == 0 { "batch" } else { "latency" };
                        hs.push(ex.spawn_on(q, YieldOnce(false)).expect("spawn"));
                    }
                    for h in hs {
                        h.await.expect("task");
                    }
                    if let Some(h) = slow {
                        h.await.expect("slow task");
                    }
                });
            });
        }
    });
    let st = guard.finish().expect("finish");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    let r = analyze_files(&files, Options::default());
    assert!(!r.damaged, "{:?}", r.errors);
    assert_eq!(r.events, st.events);
    let ex: Vec<_> = r
        .workers
        .iter()
        .filter(|w| w.id.kind == "executor")
        .collect();
    assert_eq!(ex.len(), 2, "{:#?}", r.workers);
    assert_ne!(ex[0].id.tid, ex[1].id.tid);
    // 300 tasks per executor polled twice, plus the slow one.
    assert!(r.poll_ns.count >= 1201, "{:?}", r.poll_ns);
    assert!(r.wake_to_poll_ns.count >= 1201, "{:?}", r.wake_to_poll_ns);
    assert!(r.tasks_spawned >= 601);
    // The 60 ms poll (other polls may be long too on a loaded machine, if
    // the thread is descheduled mid-poll: look for this one).
    let at = format!("tests/executor.rs:{slow_line}:");
    let lp = r
        .findings_of(FindingKind::LongPoll)
        .find(|f| f.spawn_loc.as_deref().is_some_and(|l| l.contains(&at)))
        .unwrap_or_else(|| panic!("no long poll at {at}: {:#?}", r.findings));
    assert_eq!(lp.severity, Severity::Critical);
    assert!(lp.evidence["worst_poll_ns"].as_u64().unwrap() >= 60_000_000);
    assert!(r.queues.is_empty() || r.queues.iter().all(|q| !q.name.is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}
