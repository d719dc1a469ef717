//! The `cpu_samples` table through DuckDB: two hosts' recordings with CPU
//! samples whose stacks are addresses of functions of this test binary
//! (mapped as `/proc/self/maps` says, with its build id), so that they
//! symbolize to real names. Each sample must land on the poll (task,
//! spawn location, worker, poll start) it was taken in, or on none, on or
//! off CPU, with its stack symbolized leaf first; and docs/parquet.md's
//! "top functions per spawn location across hosts" query must answer
//! what the samples say.
//!
//! Needs python3 with `duckdb`: outside CI a missing one skips with a
//! message; with CI=true it fails.

mod common;

use common::{duckdb, have_duckdb};
use runtrace_format::frame::{Mapping, ProfileInfo};
use runtrace_model::synth::TraceBuilder;
use runtrace_parquet::{export, ExportOptions};
use serde_json::Value;
use std::path::Path;

/// The tables the queries read.
const TABLES: &[&str] = &["polls", "cpu_samples"];

#[inline(never)]
fn hot_leaf() -> u64 {
    std::hint::black_box(1)
}

#[inline(never)]
fn hot_caller() -> u64 {
    hot_leaf() + 1
}

/// The executable mapping of this binary that holds `addr`.
fn own_mapping(addr: u64) -> Mapping {
    let exe = std::env::current_exe().unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (lo, hi) = f[0].split_once('-').unwrap();
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).unwrap(),
            u64::from_str_radix(hi, 16).unwrap(),
        );
        if f[1] == "r-xp" && (lo..hi).contains(&addr) {
            return Mapping {
                start: lo,
                end: hi,
                file_offset: u64::from_str_radix(f[2], 16).unwrap(),
                build_id: runtrace_symbolize::build_id(&exe)
                    .unwrap()
                    .unwrap_or_default(),
                path: f[5..].join(" "),
            };
        }
    }
    panic!("no r-xp mapping holds {addr:#x}");
}

/// Epoch ns of tick 0 in a synthetic trace (its wall-clock anchor).
const ANCHOR: i64 = 1_700_000_000_000_000_000;
const WRITER: u64 = 1;
const WORKER_TID: u64 = 100;

/// A host's recording: task 7 (src/api.rs) polled with `leaf_samples`
/// samples in `hot_leaf` (called from `hot_caller`), task 8 (src/db.rs)
/// with 2 samples in `hot_caller` and one off-CPU stretch that began in
/// its poll, and one sample outside any poll at an address in no mapping.
fn host_trace(dir: &Path, rid: u64, leaf_samples: u64) -> std::path::PathBuf {
    let leaf = hot_leaf as *const () as usize as u64;
    let caller = hot_caller as *const () as usize as u64;
    let mut b = TraceBuilder::with_header(1_000_000_000, rid, 10 + rid);
    b.profile(&ProfileInfo {
        mode: 1,
        hz: 99,
        flags: 1,
        message: String::new(),
    });
    b.mappings(&[own_mapping(leaf)]);
    // Frames after the first are return addresses (looked up at addr - 1).
    b.stacks(&[
        (1, &[leaf, caller + 1][..]),
        (2, &[caller][..]),
        (3, &[0x10][..]),
    ]);
    b.location(1, "src/api.rs", 10, 5);
    b.location(2, "src/db.rs", 20, 5);
    b.thread_name(WORKER_TID, "worker-0");
    b.spawn(WORKER_TID, 1_000, 7, 0, 1, 0);
    b.spawn(WORKER_TID, 1_100, 8, 0, 2, 0);
    b.poll_start(WORKER_TID, 0, 2_000, 7, 0, 0);
    for k in 0..leaf_samples {
        b.cpu_sample(WRITER, 2_100 + k, WORKER_TID, 1);
    }
    b.poll_end(WORKER_TID, 0, 3_000, 7, true);
    b.poll_start(WORKER_TID, 0, 4_000, 8, 0, 0);
    b.cpu_sample(WRITER, 4_100, WORKER_TID, 2);
    b.cpu_sample(WRITER, 4_200, WORKER_TID, 2);
    // Off CPU from 4_300 to 4_800: it switched out inside task 8's poll.
    b.off_cpu(WRITER, 4_800, WORKER_TID, 1, 500);
    b.poll_end(WORKER_TID, 0, 5_000, 8, true);
    b.cpu_sample(WRITER, 6_000, WORKER_TID, 3);
    let d = dir.join(format!("r{rid}"));
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();
    path
}

/// docs/parquet.md's block tagged `sql duckdb-cpu`, on `ds`.
fn doc_query(ds: &Path) -> String {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/parquet.md");
    let text = std::fs::read_to_string(doc).unwrap();
    let start = text
        .find("```sql duckdb-cpu\n")
        .expect("a duckdb-cpu block")
        + 18;
    let end = start + text[start..].find("```").unwrap();
    text[start..end]
        .trim()
        .trim_end_matches(';')
        .replace("'dataset/", &format!("'{}/", ds.display()))
}

#[test]
fn samples_attributed_and_symbolized_through_duckdb() {
    if !have_duckdb() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    for (host, rid, leaf) in [("web-1", 1, 3), ("web-2", 2, 5)] {
        let trace = host_trace(dir.path(), rid, leaf);
        let opts = ExportOptions {
            host: Some(host.into()),
            service: Some("api".into()),
            replace: false,
        };
        let s = export(&[trace], &ds, &opts).unwrap();
        assert_eq!(s.rows("cpu_samples"), leaf + 4);
        assert!(!s.notes.iter().any(|n| n.contains("web-")), "{:?}", s.notes);
    }
    let rows = duckdb(
        &ds,
        TABLES,
        "SELECT host, tid, ts_ns, task_id, spawn_loc, worker, poll_start_ns, on_cpu, off_ns, \
         thread, function, len(stack), stack[1], stack[2] \
         FROM cpu_samples ORDER BY host, ts_ns",
    );
    assert_eq!(rows.len(), 3 + 4 + 5 + 4);
    let text = |v: &Value| v.as_str().map(str::to_string);
    for r in &rows {
        let ts: i64 = r[2].as_str().unwrap().parse().unwrap();
        let t = ts - ANCHOR;
        assert_eq!(r[1], "100");
        assert_eq!(text(&r[9]).as_deref(), Some("worker-0"));
        let function = text(&r[10]).unwrap();
        assert_eq!(text(&r[12]), Some(function.clone()), "function = stack[1]");
        let (task, loc, poll_start, on_cpu, off) = (
            text(&r[3]),
            text(&r[4]),
            text(&r[6]),
            text(&r[7]),
            text(&r[8]),
        );
        match t {
            2_100..=2_104 => {
                assert_eq!(task.as_deref(), Some("7"));
                assert_eq!(loc.as_deref(), Some("src/api.rs:10:5"));
                assert_eq!(poll_start, Some((ANCHOR + 2_000).to_string()));
                assert!(function.ends_with("hot_leaf"), "{r:?}");
                let caller = text(&r[13]).unwrap();
                assert!(caller.ends_with("hot_caller"), "{r:?}");
                assert_eq!(r[11], "2");
            }
            4_100 | 4_200 => {
                assert_eq!(task.as_deref(), Some("8"));
                assert_eq!(loc.as_deref(), Some("src/db.rs:20:5"));
                assert!(function.ends_with("hot_caller"), "{r:?}");
            }
            4_800 => {
                assert_eq!(task.as_deref(), Some("8"), "off-CPU from 4300, in the poll");
                assert_eq!(on_cpu.as_deref(), Some("False"));
                assert_eq!(off.as_deref(), Some("500"));
                assert!(function.ends_with("hot_leaf"), "{r:?}");
                continue;
            }
            6_000 => {
                assert_eq!((task, loc, poll_start), (None, None, None), "outside polls");
                assert_eq!(text(&r[5]), None, "no worker outside polls");
                assert!(function.starts_with("[unknown]"), "{r:?}");
            }
            other => panic!("a sample at {other}: {r:?}"),
        }
        assert_eq!(on_cpu.as_deref(), Some("True"));
        assert_eq!(off, None);
    }
    // A sample joins its poll row.
    let joined = duckdb(
        &ds,
        TABLES,
        "SELECT COUNT(*) FROM cpu_samples s JOIN polls p ON s.host = p.host \
         AND s.task_id = p.task_id AND s.poll_start_ns = p.start_ns \
         WHERE s.ts_ns BETWEEN p.start_ns AND p.start_ns + p.duration_ns",
    );
    assert_eq!(joined[0][0], (3 + 3 + 5 + 3).to_string());
    // The doc's query: the top functions per spawn location, across hosts.
    let top = duckdb(&ds, TABLES, &doc_query(&ds));
    let top: Vec<(String, String, String, String)> = top
        .iter()
        .map(|r| {
            let s = |i: usize| r[i].as_str().unwrap().to_string();
            (s(0), s(1), s(2), s(3))
        })
        .collect();
    let short = |f: &str| f.rsplit("::").next().unwrap().to_string();
    let got: Vec<(String, String, String, String)> = top
        .into_iter()
        .map(|(l, f, n, h)| (l, short(&f), n, h))
        .collect();
    assert_eq!(
        got,
        [
            (
                "src/api.rs:10:5".into(),
                "hot_leaf".into(),
                "8".into(),
                "2".into()
            ),
            (
                "src/db.rs:20:5".into(),
                "hot_caller".into(),
                "4".into(),
                "2".into()
            ),
        ]
    );
}
