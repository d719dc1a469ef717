//! `runtrace mcp`'s speed: loading a generated trace of 10M events into a
//! `TraceIndex` (one read: runtime and backlog analyses, event counts,
//! every event kept), and queries over a 100K-event trace (and the 10M
//! one), as the MCP tools run them. Medians of wall-clock times on this
//! machine; targets: load < 2 s, a query over 100K events < 15 ms.
//!
//! Run: `cargo bench -p runtrace-analyze --bench index`
//! (`-- --events N` for another size of the large trace, `--runs R`).
//! Writes the figures to `target/bench-results/index.json`.

use runtrace_analyze::index::TraceIndex;
use runtrace_analyze::outliers::{Category, Method};
use runtrace_analyze::query::{query, timeline, Query};
use runtrace_model::synth::{workload, Workload};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median wall ms of `runs` calls of `f`.
fn time_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

fn write_trace(dir: &Path, name: &str, events: u64) -> (PathBuf, u64) {
    let (bytes, n) = workload(&Workload {
        events,
        ..Workload::default()
    });
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("temp dir");
    let path = d.join("trace.0.bin");
    std::fs::write(&path, bytes).expect("write trace");
    (path, n)
}

/// The queries of the benchmark: (name, query).
fn queries(ix: &TraceIndex) -> Vec<(&'static str, Query)> {
    let mid = ix.runtime().duration_ns as i64 / 2;
    let task = ix.events[ix.events.len() / 2].x;
    vec![
        ("all events (limit 100)", Query::default()),
        (
            "task_poll_end on worker 1",
            Query {
                event_type: Some("task_poll_end".into()),
                worker: Some(1),
                ..Query::default()
            },
        ),
        (
            "one task",
            Query {
                task_id: Some(task),
                ..Query::default()
            },
        ),
        (
            "spawn_loc service_3",
            Query {
                spawn_loc: Some("service_3".into()),
                ..Query::default()
            },
        ),
        (
            "10% time window",
            Query {
                start_ns: Some(mid),
                end_ns: Some(mid + ix.runtime().duration_ns as i64 / 10),
                ..Query::default()
            },
        ),
    ]
}

/// Median ms of each query (and a task timeline) over `ix`, printed.
fn bench_queries(label: &str, ix: &TraceIndex, runs: usize) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    // The spawn-location map is built once per loaded trace, at first use.
    let t = Instant::now();
    let _ = ix.task_loc(0, 0);
    println!(
        "{label}: task->location map built in {:.2} ms (once per trace)",
        t.elapsed().as_secs_f64() * 1e3
    );
    for (name, q) in queries(ix) {
        let mut matched = 0;
        let ms = time_ms(runs, || {
            let r = query(ix, &q).expect("query");
            matched = r["matched"].as_u64().unwrap_or(0);
            // What the MCP tool sends: the JSON text.
            std::hint::black_box(r.to_string());
        });
        println!("{label}: query {name:<28} {ms:8.3} ms  ({matched} matched)");
        out.push((name.to_string(), ms));
    }
    let task = ix.events[ix.events.len() / 2].x;
    let ms = time_ms(runs, || {
        std::hint::black_box(timeline(ix, task, None).expect("timeline").to_string());
    });
    println!("{label}: get_task_timeline             {ms:8.3} ms");
    out.push(("task timeline".into(), ms));
    out
}

fn main() {
    let mut events = 10_000_000u64;
    let mut runs = 3;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => events = args.next().and_then(|v| v.parse().ok()).unwrap_or(events),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(runs),
            _ => {} // `cargo bench` passes --bench
        }
    }
    let dir = std::env::temp_dir().join(format!("runtrace-bench-index-{}", std::process::id()));

    // Queries over 100K events.
    let (small, n_small) = write_trace(&dir, "small", 100_000);
    let ix = TraceIndex::load(&[&small]);
    assert_eq!(ix.events.len() as u64, n_small);
    let small_q = bench_queries("100K", &ix, 51);
    drop(ix);

    // Loading 10M events.
    let (big, n) = write_trace(&dir, "big", events);
    let bytes = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    let mut loads = Vec::new();
    let mut ix = None;
    for run in 0..runs {
        drop(ix.take());
        let t = Instant::now();
        let loaded = TraceIndex::load(&[&big]);
        let s = t.elapsed().as_secs_f64();
        assert_eq!(loaded.stats.events, n, "every event read");
        assert!(!loaded.stats.damaged, "{:?}", loaded.stats.errors);
        println!(
            "large: load run {run}: {n} events ({} MB) in {s:.3} s ({:.1} M events/s)",
            bytes >> 20,
            n as f64 / s / 1e6
        );
        loads.push(s);
        ix = Some(loaded);
    }
    let load = median(loads);
    println!("large: load median {load:.3} s (target < 2 s)");
    // Side by side: `runtrace analyze` alone over the same file.
    drop(ix.take());
    let analyze = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                let r =
                    runtrace_analyze::analyze_files(std::slice::from_ref(&big), Default::default());
                assert_eq!(r.events, n);
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    println!(
        "large: runtrace analyze alone: median {analyze:.3} s; load / analyze = {:.2}",
        load / analyze
    );
    let ix = TraceIndex::load(&[&big]);
    let big_q = bench_queries("large", &ix, 5);
    let t = Instant::now();
    let o = ix.outliers(Method::Iqr, Category::All, 100);
    std::hint::black_box(o.to_string());
    let outliers_s = t.elapsed().as_secs_f64();
    println!("large: detect_outliers (IQR, all) {outliers_s:.3} s");
    let t = Instant::now();
    std::hint::black_box(ix.run_all().to_string());
    let run_all_s = t.elapsed().as_secs_f64();
    println!("large: run_all_analyzers {run_all_s:.3} s");

    let fmt = |v: &[(String, f64)]| {
        v.iter()
            .map(|(k, ms)| format!("\"{k}\": {ms:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-results");
    if std::fs::create_dir_all(&out).is_ok() {
        let _ = std::fs::write(
            out.join("index.json"),
            format!(
                "{{\"events\": {n}, \"load_median_s\": {load:.4}, \"analyze_median_s\": {analyze:.4}, \"query_ms_100k\": {{{}}}, \"query_ms_large\": {{{}}}, \"outliers_large_s\": {outliers_s:.3}, \"run_all_large_s\": {run_all_s:.3}}}\n",
                fmt(&small_q),
                fmt(&big_q)
            ),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
