//! `runtrace backlog` end to end: the JSON keys the issue requires, the
//! text report, directories as input, and usage errors.

use runtrace_model::synth::TraceBuilder;
use serde_json::Value as Json;
use std::path::PathBuf;
use std::process::{Command, Output};

const MS: u64 = 1_000_000;

fn runtrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .expect("run runtrace")
}

/// A producer, a consumer that logs under lock "log" every item, and a
/// logger that holds "log" for 400 ms of I/O ("rotate") at 2.0 s; the queue
/// triggers at 2.3 s.
fn trace(name: &str) -> PathBuf {
    let mut b = TraceBuilder::new();
    for (id, s) in [
        (1, "jobs"),
        (2, "log"),
        (3, "rotate"),
        (4, "size_threshold"),
        (5, "full"),
        (6, "file_write"),
    ] {
        b.string(id, s);
    }
    b.thread_name(1, "producer");
    b.thread_name(2, "consumer");
    b.thread_name(3, "logger");
    let (mut free, mut size, mut waited) = (0u64, 0u32, false);
    // The consumer: each item 300 us, plus one 400 ms wait for "log".
    let mut cons = Vec::new();
    let mut prod = Vec::new();
    let mut deq_at: Vec<u64> = Vec::new();
    for i in 1..=3_000u64 {
        let t = i * MS;
        prod.push((t, i));
        let start = free.max(t) + 10_000;
        let mut end = start;
        if (2_000 * MS..2_400 * MS).contains(&start) && !waited {
            waited = true;
            end = 2_400 * MS + 5_000;
            cons.push((end, 'w', end - start));
        }
        end += 300_000;
        cons.push((start, 'd', start - t));
        cons.push((end, 'p', end - start));
        deq_at.push(start);
        free = end;
    }
    cons.sort_by_key(|c| c.0);
    for (t, i) in prod {
        let done = deq_at.iter().filter(|&&d| d <= t).count() as u32;
        size = (i as u32).saturating_sub(done);
        b.enqueue(1, t, 1, i, size);
    }
    b.item_dropped(1, 3_000 * MS + 1, 1, 3_001, size, 5);
    // A second trigger at the end, after the spike.
    b.backlog_trigger(1, 3_000 * MS + 2, 1, size, 100, 4);
    let mut seq = 0;
    for (t, k, v) in cons {
        match k {
            'd' => {
                seq += 1;
                b.dequeue(2, t, 1, seq, v, 0)
            }
            'p' => b.processing_end(2, t, 1, seq, v, true),
            _ => b.lock_wait(2, t, 2, v, true),
        }
    }
    b.io(3, 2_399 * MS, 3, 4096, 398 * MS);
    b.lock_hold(3, 2_400 * MS, 2, 401 * MS, true);
    b.io(3, 2_500 * MS, 6, 100, 50_000);
    // The spike's trigger, from a monitor thread, while the logger blocks.
    b.backlog_trigger(9, 2_300 * MS, 1, 300, 1_000, 4);
    let bytes = b.finish();
    let d = std::env::temp_dir().join(format!(
        "runtrace-cli-backlog-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("trace.0.bin");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn json_keys_and_verdict() {
    let p = trace("json");
    let out = runtrace(&["backlog", "--json", p.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    for (section, keys) in [
        (
            "queues",
            &["name", "enqueued", "dequeued", "dropped", "max_size"][..],
        ),
        (
            "locks",
            &[
                "name",
                "waits",
                "wait_ns_total",
                "wait_ns_p99",
                "hold_ns_max",
            ][..],
        ),
        (
            "io",
            &["op", "count", "io_ns_p50", "io_ns_p99", "io_ns_max"][..],
        ),
        (
            "triggers",
            &["timestamp_ns", "queue", "queue_size", "reason", "verdicts"][..],
        ),
    ] {
        let first = &j[section][0];
        assert!(first.is_object(), "{section}: {j}");
        for k in keys {
            assert!(first.get(k).is_some(), "{section}.{k} missing: {first}");
        }
    }
    let q = &j["queues"][0];
    assert_eq!(q["name"], "jobs");
    assert_eq!(q["enqueued"], 3_000);
    assert_eq!(q["dequeued"], 3_000);
    assert_eq!(q["dropped"], 1);
    assert_eq!(j["locks"][0]["waits"], 1);
    assert_eq!(j["io"][0]["op"], "rotate");
    assert_eq!(j["io"][0]["io_ns_max"], 398 * MS);
    let t = &j["triggers"][0];
    assert_eq!(t["timestamp_ns"], 2_300 * MS);
    assert_eq!(t["reason"], "size_threshold");
    let v = &t["verdicts"][0];
    for k in ["cause", "score", "lock", "thread", "evidence"] {
        assert!(v.get(k).is_some(), "verdicts.{k} missing: {v}");
    }
    assert_eq!(v["cause"], "io_blocking", "{t}");
    assert_eq!(v["lock"], "log");
    assert_eq!(v["thread"], "logger (tid 3)");
    assert!(v["score"].as_f64().unwrap() > 0.5);
    // Verdict lists are best first.
    let _ = std::fs::remove_dir_all(p.parent().unwrap());
    let scores: Vec<f64> = t["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
}

#[test]
fn text_report_and_directory_input() {
    let p = trace("text");
    let dir = p.parent().unwrap();
    let out = runtrace(&[
        "backlog",
        "--window",
        "500ms",
        "--lookback",
        "1s",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for s in [
        "=== Queues",
        "=== Rates: \"jobs\" per 500.00 ms window",
        "=== Locks",
        "=== I/O",
        "=== Backlog triggers (2)",
        "io_blocking",
        "lock \"log\"",
    ] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_flags_and_inputs() {
    let p = trace("bad");
    let f = p.to_str().unwrap();
    let out = runtrace(&["backlog", "--window", "fast", f]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--window") && err.contains("not a duration"),
        "{err}"
    );
    let out = runtrace(&["backlog", "--lookback", "0s", f]);
    assert_eq!(out.status.code(), Some(2));
    let out = runtrace(&["backlog", "--frobnicate", f]);
    assert_eq!(out.status.code(), Some(2));
    let out = runtrace(&["backlog"]);
    assert_eq!(out.status.code(), Some(2));
    // A missing file and a cut one: exit 1 with the file named.
    let out = runtrace(&["backlog", "/nonexistent/trace.0.bin"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/trace.0.bin"));
    let bytes = std::fs::read(&p).unwrap();
    let cut = p.with_file_name("trace.1.bin");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = runtrace(&["backlog", "--json", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trace.1.bin") && err.contains("byte"), "{err}");
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["damaged"], true);
    let _ = std::fs::remove_dir_all(p.parent().unwrap());
}
