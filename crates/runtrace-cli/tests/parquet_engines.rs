//! `runtrace export parquet` against real query engines: recordings of
//! three simulated hosts go into one dataset, and DuckDB and Spark (local
//! mode) must give, per host and spawn location, exactly the poll counts
//! and total poll time of `runtrace analyze --json` on that host's trace,
//! and a wake->poll p99 within the analysis's histogram error (1/128 of
//! the value, docs/analysis.md). The same SQL runs on both engines
//! (tests/parquet/query.py).
//!
//! DataFusion (Python `datafusion`) runs the doc's Athena/Trino queries.
//!
//! Needs python3 with `duckdb`, `pyspark` and `datafusion`, and a Java runtime for Spark:
//! outside CI a missing one skips its test with a message; with CI=true
//! it fails. Also the command's exit codes and messages for good, damaged
//! and bad input (the dataset rules themselves are tested in
//! runtrace-parquet's tests/dataset.rs).
#![cfg(feature = "parquet")]

use runtrace_model::synth::{workload, TraceBuilder, Workload};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_runtrace");

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// True if `ok`; else skips with a message, or fails under CI=true.
fn require(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!ci(), "required in CI but missing: {what}");
        eprintln!("skipping: {what} is missing (install it, see .ci/run)");
    }
    ok
}

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A host's recording: `workers` workers running tasks of 6 spawn
/// locations whose polls and wake delays differ by location (and by
/// host), some parks, queue samples and application events. `tps` is the
/// clock rate (a non-ns clock checks the tick conversion).
fn host_trace(seed: u64, recording_id: u64, pid: u64, tps: u64, workers: u32) -> Vec<u8> {
    let mut b = TraceBuilder::with_header(tps, recording_id, pid);
    for l in 1..=6u64 {
        b.location(l, &format!("src/svc/handler_{l}.rs"), 10 * l as u32, 5);
    }
    b.string(1, "jobs");
    b.string(2, "db_pool");
    b.string(3, "read");
    b.string(4, "consumer_stall");
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut rand = move |lo: u64, hi: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        lo + rng % (hi - lo + 1)
    };
    let mut clock: Vec<u64> = vec![1_000; workers as usize];
    // Per worker: (task, location, polls so far, wake tick).
    let mut live: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); workers as usize];
    let mut next_task = 1u64;
    let mut next_round = 1_000_000u64;
    let mut polls = 0;
    while polls < 6_000 {
        let k = (0..workers as usize).min_by_key(|&k| clock[k]).unwrap();
        let tid = 100 + k as u64;
        let now = clock[k];
        while next_round <= now {
            b.queue_sample(99, next_round, (next_round / 1_000_000 % 5) as u32, 0, 0);
            b.round(next_round);
            next_round += 1_000_000;
        }
        if live[k].len() < 8 {
            let task = next_task;
            next_task += 1;
            let loc = 1 + rand(0, 5);
            b.spawn(tid, now, task, 0, loc, 0);
            live[k].push((task, loc, 0));
            clock[k] = now + rand(50, 500);
            continue;
        }
        let i = rand(0, live[k].len() as u64 - 1) as usize;
        let (task, loc, n) = live[k][i];
        b.poll_start(tid, k as u32, now, task, 0, live[k].len() as u32);
        // Worker 0 works harder on odd seeds (an imbalanced host).
        let heavy = if k == 0 && seed % 2 == 1 { 4 } else { 1 };
        let end = now + rand(500, 2_000 * loc) * heavy;
        b.poll_end(tid, k as u32, end, task, n + 1 == 4);
        polls += 1;
        if n + 1 == 4 {
            b.terminate(tid, end, task);
            live[k].swap_remove(i);
        } else {
            b.wake(tid, k as u32, end + rand(1, 100), task, 0);
            live[k][i].2 += 1;
        }
        if polls % 97 == 0 {
            b.park(tid, k as u32, end + 1, 0, 0);
            b.unpark(tid, k as u32, end + rand(1_000, 50_000), 0, 0);
            b.lock_wait(tid, end + 2, 2, rand(10, 5_000), true);
            b.io(tid, end + 3, 3, rand(1, 1 << 20), rand(1_000, 90_000));
            b.queue_snapshot(tid, end + 4, 1, rand(0, 100) as u32, polls, polls, 0);
        }
        if polls % 1_999 == 0 {
            b.backlog_trigger(tid, end + 5, 1, 500, 1_000, 4);
        }
        clock[k] = end + rand(100, 3_000 * loc);
    }
    b.finish()
}

/// (host, trace directory) of the simulated fleet, written under `dir`.
fn fleet(dir: &Path) -> Vec<(String, PathBuf)> {
    let hosts = [
        ("host-a", 1u64, 1_000_000_000u64, 4u32),
        ("host-b", 2, 125_000_000, 3), // 8 ns ticks
        ("host-c", 3, 1_000_000_000, 4),
    ];
    hosts
        .iter()
        .map(|&(name, seed, tps, workers)| {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            let bytes = host_trace(seed, 0xfeed_0000 + seed, 1000 + seed, tps, workers);
            std::fs::write(d.join("trace.0.bin"), bytes).unwrap();
            (name.to_string(), d)
        })
        .collect()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Exports the fleet into one dataset; returns it.
fn export_fleet(dir: &Path, fleet: &[(String, PathBuf)]) -> PathBuf {
    let ds = dir.join("dataset");
    for (host, trace) in fleet {
        let (code, out, err) = run(&[
            "export",
            "parquet",
            trace.to_str().unwrap(),
            "-o",
            ds.to_str().unwrap(),
            "--service",
            "api",
            "--host",
            host,
        ]);
        assert_eq!(code, 0, "export of {host}: {out}{err}");
    }
    ds
}

/// What `runtrace analyze --json` says of each host.
struct Analysis {
    /// Per location (polls, poll_ns_total, wake p99), by (host, location).
    locs: BTreeMap<(String, String), (u64, u64, u64)>,
    /// Hosts with a `worker_imbalance` finding.
    imbalanced: Vec<String>,
}

fn analysis(fleet: &[(String, PathBuf)]) -> Analysis {
    let mut out = BTreeMap::new();
    let mut imbalanced = Vec::new();
    for (host, trace) in fleet {
        let (code, json, err) = run(&["analyze", "--json", trace.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&json).unwrap();
        if v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "worker_imbalance")
        {
            imbalanced.push(host.clone());
        }
        for l in v["spawn_locations"].as_array().unwrap() {
            if l["polls"].as_u64().unwrap() == 0 {
                continue;
            }
            out.insert(
                (host.clone(), l["location"].as_str().unwrap().to_string()),
                (
                    l["polls"].as_u64().unwrap(),
                    l["poll_ns_total"].as_u64().unwrap(),
                    l["wake_to_poll_ns"]["p99"].as_u64().unwrap(),
                ),
            );
        }
    }
    Analysis {
        locs: out,
        imbalanced,
    }
}

fn query(engine: &str, ds: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parquet/query.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(engine)
        .arg(ds)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/parquet.md"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{engine}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    // Spark may print a line of its own before ours: ours is the last.
    serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap()
}

/// The engine's results agree with the analysis: counts and totals
/// exactly, p99 within the histogram's 1/128; and docs/parquet.md's
/// queries for this engine run and answer as the analysis does.
fn check_against_analysis(engine: &str, q: &Value, a: &Analysis) {
    let want = &a.locs;
    let stats = q["poll_stats"].as_array().unwrap();
    assert_eq!(stats.len(), want.len(), "{engine}: {q}");
    for r in stats {
        let key = (
            r[0].as_str().unwrap().to_string(),
            r[1].as_str().unwrap().to_string(),
        );
        let (polls, total, _) = want[&key];
        assert_eq!(r[2].as_u64().unwrap(), polls, "{engine} polls of {key:?}");
        assert_eq!(
            r[3].as_u64().unwrap(),
            total,
            "{engine} poll_ns_total of {key:?}"
        );
    }
    let p99s = q["wake_p99"].as_array().unwrap();
    assert_eq!(p99s.len(), want.len(), "{engine}: {q}");
    for r in p99s {
        let key = (
            r[0].as_str().unwrap().to_string(),
            r[1].as_str().unwrap().to_string(),
        );
        let exact = r[2].as_u64().unwrap() as f64;
        let hist = want[&key].2 as f64;
        assert!(
            (hist - exact).abs() <= exact / 128.0 + 1.0,
            "{engine} wake p99 of {key:?}: SQL {exact}, analysis {hist}"
        );
    }
    let hosts: Vec<&str> = q["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["host-a", "host-b", "host-c"]);
    for (t, n) in q["rows"].as_object().unwrap() {
        assert!(n.as_u64().unwrap() > 0, "{engine}: table {t} is empty");
    }
    check_docs(engine, &q["docs"], a);
}

/// docs/parquet.md's blocks for the engine: the view, the worst p99s, the
/// busiest locations per host, the imbalanced hosts.
fn check_docs(engine: &str, docs: &Value, a: &Analysis) {
    let docs = docs.as_array().unwrap();
    assert_eq!(docs.len(), 4, "{engine}: docs/parquet.md blocks: {docs:?}");
    let rows = |i: usize| docs[i].as_array().unwrap();
    let p99 = rows(1);
    assert!(!p99.is_empty() && p99.len() <= 20, "{engine}: {p99:?}");
    // The busiest location of each host is the analysis's.
    let hosts: std::collections::BTreeSet<&String> = a.locs.keys().map(|k| &k.0).collect();
    for host in &hosts {
        let top = rows(2).iter().find(|r| r[0] == host.as_str()).unwrap();
        let busiest = a
            .locs
            .iter()
            .filter(|(k, _)| k.0.as_str() == host.as_str())
            .max_by_key(|(_, v)| v.1)
            .unwrap();
        assert_eq!(top[1], busiest.0 .1.as_str(), "{engine}: busiest of {host}");
        assert_eq!(
            top[3],
            busiest.1 .1.to_string(),
            "{engine}: busiest of {host}"
        );
    }
    let imbalanced: Vec<&str> = rows(3).iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(imbalanced, a.imbalanced, "{engine}: imbalanced hosts");
}

fn have_duckdb() -> bool {
    require(
        python_has("duckdb"),
        "python3 module duckdb (pip install duckdb)",
    )
}

/// The fleet exported into one dataset under `dir`, and its analysis.
fn fleet_dataset(dir: &Path) -> (PathBuf, Analysis) {
    let fleet = fleet(dir);
    let ds = export_fleet(dir, &fleet);
    let want = analysis(&fleet);
    assert_eq!(want.locs.len(), 18, "6 locations on each of 3 hosts");
    assert!(
        !want.imbalanced.is_empty() && want.imbalanced.len() < 3,
        "{:?}",
        want.imbalanced
    );
    (ds, want)
}

#[test]
fn duckdb_matches_analyze_across_hosts() {
    if !have_duckdb() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ds, want) = fleet_dataset(dir.path());
    check_against_analysis("duckdb", &query("duckdb", &ds), &want);
}

#[test]
fn spark_agrees_with_duckdb_and_analyze() {
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !require(java, "a Java runtime (Debian default-jre-headless)")
        || !require(
            python_has("pyspark"),
            "python3 module pyspark (pip install pyspark)",
        )
        || !have_duckdb()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ds, want) = fleet_dataset(dir.path());
    let spark = query("spark", &ds);
    check_against_analysis("spark", &spark, &want);
    // The same SQL, the same answers (the docs' engine-specific queries
    // differ: Spark's percentile interpolates).
    let duck = query("duckdb", &ds);
    for k in ["poll_stats", "wake_p99", "wake_band", "rows", "hosts"] {
        assert_eq!(spark[k], duck[k], "{k}: the same SQL, the same answers");
    }
}

/// DataFusion (the Python package `datafusion`) runs docs/parquet.md's
/// Athena/Trino queries: as written where its dialect accepts them, else
/// the doc's DataFusion variant; the answers agree with DuckDB's (exactly,
/// but the approximate p99: between the exact p98 and maximum) and with
/// the analysis.
#[test]
fn datafusion_runs_the_trino_queries() {
    if !require(
        python_has("datafusion"),
        "python3 module datafusion (pip install datafusion)",
    ) || !have_duckdb()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ds, want) = fleet_dataset(dir.path());
    let df = query("datafusion", &ds);
    check_against_analysis("datafusion", &df, &want);
    let duck = query("duckdb", &ds);
    for k in ["poll_stats", "wake_p99", "wake_band", "rows", "hosts"] {
        assert_eq!(df[k], duck[k], "{k}: the same SQL, the same answers");
    }
    // What docs/parquet.md says differs: the DDL and approx_percentile.
    assert_eq!(df["differ"], serde_json::json!([0, 1]), "{df}");
    // Busiest locations and imbalanced hosts: as DuckDB says.
    assert_eq!(df["docs"][2], duck["docs"][2], "busiest locations");
    assert_eq!(df["docs"][3], duck["docs"][3], "imbalanced hosts");
    // The approximate p99 (a t-digest estimate, interpolated between the
    // sparse values of the top 1 %): per location and host, within the
    // exact band from the nearest-rank p98 to the maximum.
    let approx: BTreeMap<(String, String), f64> = df["docs"][1]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |i: usize| r[i].as_str().unwrap().to_string();
            ((s(1), s(0)), s(2).parse().unwrap())
        })
        .collect();
    let band = duck["wake_band"].as_array().unwrap();
    assert_eq!(approx.len(), band.len(), "{df}");
    for b in band {
        let key = (
            b[0].as_str().unwrap().to_string(),
            b[1].as_str().unwrap().to_string(),
        );
        let (lo, hi) = (b[2].as_f64().unwrap(), b[3].as_f64().unwrap());
        let a = approx[&key];
        assert!(
            lo <= a && a <= hi,
            "p99 of {key:?}: DataFusion {a}, exact p98..max {lo}..{hi}"
        );
    }
}

#[test]
fn export_exit_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let (bytes, _) = workload(&Workload {
        events: 50_000,
        ..Workload::default()
    });
    std::fs::write(rec.join("trace.0.bin"), &bytes).unwrap();
    let ds = dir.path().join("ds");
    let (r, ds_s) = (rec.to_str().unwrap(), ds.to_str().unwrap());

    // A bad --host: exit 1, the flag named, nothing written.
    let (code, _, err) = run(&["export", "parquet", r, "-o", ds_s, "--host", "a/b"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--host \"a/b\"") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!ds.exists());

    // A directory of trace files: exported, exit 0.
    let (code, out, err) = run(&["export", "parquet", r, "-o", ds_s, "--host", "h1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("exported 1 recording(s), 50"), "{out}");

    // The same recording again: refused, exit 1; --replace: exit 0.
    let (code, _, err) = run(&["export", "parquet", r, "-o", ds_s, "--host", "h1"]);
    assert_eq!(code, 1);
    assert!(err.contains("already in the dataset"), "{err}");
    let (code, _, err) = run(&[
        "export",
        "parquet",
        r,
        "-o",
        ds_s,
        "--host",
        "h1",
        "--replace",
    ]);
    assert_eq!(code, 0, "{err}");

    // A cut trace: what was readable is exported, the damage named, exit 1.
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    std::fs::write(cut.join("trace.0.bin"), &bytes[..bytes.len() / 2]).unwrap();
    let ds2 = dir.path().join("ds2");
    let (code, out, err) = run(&[
        "export",
        "parquet",
        cut.to_str().unwrap(),
        "-o",
        ds2.to_str().unwrap(),
        "--host",
        "h1",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("trace.0.bin") && err.contains("damaged input"),
        "{err}"
    );
    assert!(out.contains("exported 1 recording(s)"), "{out}");

    // -o is required.
    let (code, _, err) = run(&["export", "parquet", r]);
    assert_eq!(code, 2, "{err}");
}
