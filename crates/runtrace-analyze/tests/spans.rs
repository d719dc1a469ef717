//! The span table and findings that name the span a slow location was
//! serving (issue 34 item 3), on a synthetic trace: one connection
//! handler location serving fast and slow requests, the slow ones in a
//! 60 ms poll (a long_poll finding).

use runtrace_analyze::analyze_bytes;
use runtrace_model::synth::TraceBuilder;

const MS: u64 = 1_000_000;

fn trace() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/server.rs", 40, 9);
    let mut t = 1_000;
    for i in 0..20u64 {
        let (task, span) = (100 + i, 1_000 + i);
        let slow = i % 10 == 9;
        let uri = if slow { "/slow?x=1" } else { "/item" };
        b.spawn(1, t, task, 0, 1, 0);
        b.poll_start(1, 0, t + 10, task, 0, 0);
        b.span_new(
            1,
            t + 20,
            span,
            0,
            "request",
            &format!("method=GET uri={uri} version=HTTP/1.1"),
        );
        b.span_enter(1, t + 30, span);
        let busy = if slow { 60 * MS } else { 100_000 };
        b.span_exit(1, t + 30 + busy, span);
        b.poll_end(1, 0, t + 40 + busy, task, false);
        // The response waits on a wake: 2 ms of delay inside the span.
        b.wake(2, 1, t + 50 + busy, task, 0);
        b.poll_start(1, 0, t + 50 + busy + 2 * MS, task, 0, 0);
        b.span_enter(1, t + 60 + busy + 2 * MS, span);
        b.span_exit(1, t + 70 + busy + 2 * MS, span);
        b.poll_end(1, 0, t + 80 + busy + 2 * MS, task, true);
        b.span_close(1, t + 90 + busy + 2 * MS, span);
        b.terminate(1, t + 100 + busy + 2 * MS, task);
        t += busy + 10 * MS;
    }
    b.finish()
}

#[test]
fn the_table_has_each_route_and_the_long_poll_names_the_slow_one() {
    let r = analyze_bytes(&trace(), Default::default());
    let labels: Vec<&str> = r.spans.spans.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["GET /slow", "GET /item"], "slowest first");
    let slow = &r.spans.spans[0];
    assert_eq!((slow.count, slow.open, slow.enters), (2, 0, 4));
    assert!(
        slow.wall_ns.p99 >= 62 * MS && slow.wall_ns.p99 < 63 * MS,
        "{:?}",
        slow.wall_ns
    );
    assert!(slow.busy_ns.max >= 60 * MS);
    // 2 ms wake -> poll delay per request, suffered inside the span.
    assert_eq!(slow.delay_ns_total, 2 * 2 * MS);
    let item = &r.spans.spans[1];
    assert_eq!(item.count, 18);
    assert_eq!(item.delay_ns_total, 18 * 2 * MS);

    let long = r
        .findings
        .iter()
        .find(|f| f.kind.as_str() == "long_poll")
        .expect("a long_poll finding");
    assert_eq!(long.spawn_loc.as_deref(), Some("src/server.rs:40:9"));
    assert!(
        long.spans[0].starts_with("GET /slow (p99 62"),
        "the slow route first: {:?}",
        long.spans
    );
    let text = r.to_string();
    assert!(text.contains("=== Spans"), "{text}");
    assert!(text.contains("spans: GET /slow (p99 62"), "{text}");
    let json = r.to_json();
    assert_eq!(json["spans"]["spans"][0]["label"], "GET /slow");
    assert!(json["findings"][0]["spans"].is_array());
}

#[test]
fn a_trace_without_spans_has_no_span_keys() {
    let mut b = TraceBuilder::new();
    b.poll_start(1, 0, 1_000, 7, 0, 0);
    b.poll_end(1, 0, 3_000, 7, true);
    let r = analyze_bytes(&b.finish(), Default::default());
    assert!(r.spans.spans.is_empty());
    assert!(r.to_json().get("spans").is_none());
    assert!(!r.to_string().contains("=== Spans"));
}

/// Two runtimes of one process, each with a worker 0 (issue 34 item 5):
/// two workers in the report, each with its runtime's id and name.
#[test]
fn two_runtimes_workers_stay_apart_and_are_named() {
    let mut b = TraceBuilder::new();
    for (tid, rt, name) in [(100, 0, "api"), (200, 1, "blocking-io")] {
        b.runtime_name(tid, 400, rt, name);
        b.worker_start(tid, 0, 500, rt);
        for i in 0..(3 + rt as u64) {
            let task = tid + i;
            b.poll_start(tid, 0, 1_000 + i * 1_000, task, 0, 0);
            b.poll_end(tid, 0, 1_500 + i * 1_000, task, true);
        }
    }
    let r = analyze_bytes(&b.finish(), Default::default());
    /// (runtime, its name, worker index, polls) of a worker.
    type Row = (Option<u32>, Option<String>, Option<u32>, u64);
    let mut w: Vec<Row> = r
        .workers
        .iter()
        .map(|w| (w.runtime, w.runtime_name.clone(), w.id.worker, w.polls))
        .collect();
    w.sort();
    assert_eq!(
        w,
        [
            (Some(0), Some("api".to_string()), Some(0), 3),
            (Some(1), Some("blocking-io".to_string()), Some(0), 4),
        ]
    );
    let json = r.to_json();
    let names: Vec<&str> = json["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["runtime_name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"api") && names.contains(&"blocking-io"));
    assert!(r.to_string().contains("[runtime blocking-io]"));
}
