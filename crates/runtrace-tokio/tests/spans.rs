//! The application's spans through `runtrace_tokio::layer()` (issue 34
//! item 3), on two named runtimes (item 5): each span's creation (name,
//! fields, parent), enters and exits on the worker threads that polled
//! it, its close; spans outside the selected targets and levels are not
//! recorded; each runtime's workers say its name. Its own process: the
//! subscriber is process-wide.

mod common;

use common::record;
use runtrace_format::Event;
use tracing::Instrument;
use tracing_subscriber::prelude::*;

fn named(name: &str) -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2).enable_all();
    runtrace_tokio::Instrumentation::new()
        .name(name)
        .apply(&mut b);
    b.build().unwrap()
}

fn of<'a>(events: &'a [Event], name: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.schema.name == name).collect()
}

#[test]
fn spans_of_the_selected_targets_are_recorded_on_each_runtime() {
    // This test crate's own spans at INFO (its target is `spans`).
    runtrace_tokio::spans::record(runtrace_tokio::app_spans!()).unwrap();
    tracing_subscriber::registry()
        .with(runtrace_tokio::layer())
        .try_init()
        .unwrap();
    let api = named("api");
    let io = named("blocking-io");
    let dir = tempfile::tempdir().unwrap();
    let events = record(dir.path(), || {
        api.block_on(async {
            let req = tracing::info_span!("request", method = "GET", uri = "/item/7");
            tokio::spawn(
                async {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    let _db = tracing::info_span!("db_query", table = "items").entered();
                }
                .instrument(req),
            )
            .await
            .unwrap();
            // Below the selected level: not recorded.
            tokio::spawn(async {}.instrument(tracing::debug_span!("chatty")))
                .await
                .unwrap();
        });
        io.block_on(async {
            tokio::spawn(async {}.instrument(tracing::info_span!("job", kind = 3)))
                .await
                .unwrap();
        });
    });
    drop((api, io));

    let news = of(&events, "span_new");
    let text = |e: &Event, f: &str| e.get(f).and_then(|v| v.as_str()).unwrap_or("").to_string();
    let name = |e: &Event| text(e, "name");
    let names: Vec<String> = news.iter().map(|e| name(e)).collect();
    assert_eq!(names, ["request", "db_query", "job"], "{news:?}");
    let id = |e: &Event| e.u64("span").unwrap();
    let (req, db, job) = (id(news[0]), id(news[1]), id(news[2]));
    assert_eq!(text(news[0], "fields"), "method=GET uri=/item/7");
    assert_eq!(
        news[1].u64("parent"),
        Some(req),
        "db_query is inside the request"
    );
    assert_eq!(text(news[2], "fields"), "kind=3");

    // The request span is entered at each poll of its task (twice: before
    // and after the sleep), on a worker thread, and exited as often.
    let enters = |s: u64| {
        of(&events, "span_enter")
            .into_iter()
            .filter(|e| id(e) == s)
            .count()
    };
    let exits = |s: u64| {
        of(&events, "span_exit")
            .into_iter()
            .filter(|e| id(e) == s)
            .count()
    };
    assert!(enters(req) >= 2, "{}", enters(req));
    assert_eq!(enters(req), exits(req));
    assert_eq!((enters(db), exits(db)), (1, 1));
    // (An instrumented future is also entered to be dropped.)
    assert!(enters(job) >= 1 && enters(job) == exits(job));
    let pollers: Vec<u64> = of(&events, "task_poll_start")
        .iter()
        .map(|e| e.tid)
        .collect();
    for e in of(&events, "span_enter") {
        assert!(
            pollers.contains(&e.tid),
            "entered on a worker thread: {e:?}"
        );
    }
    let closed: Vec<u64> = of(&events, "span_close").iter().map(|e| id(e)).collect();
    for s in [req, db, job] {
        assert!(closed.contains(&s), "span {s} closed: {closed:?}");
    }

    // Each runtime's name, by its runtime id as WorkerStart says it.
    let mut runtimes: Vec<(u64, String)> = of(&events, "runtime_name")
        .iter()
        .map(|e| (e.u64("runtime").unwrap(), name(e)))
        .collect();
    runtimes.sort();
    runtimes.dedup();
    assert_eq!(runtimes.len(), 2, "{runtimes:?}");
    assert_eq!(runtimes[0].1, "api");
    assert_eq!(runtimes[1].1, "blocking-io");
    let starts: Vec<u64> = of(&events, "worker_start")
        .iter()
        .map(|e| e.u64("runtime").unwrap())
        .collect();
    assert!(starts.contains(&runtimes[0].0) && starts.contains(&runtimes[1].0));
}
