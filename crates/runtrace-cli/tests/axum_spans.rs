//! Code no one here wrote (issue 34 item 7): an axum service with
//! tower-http's `TraceLayer`, recorded with `runtrace_tokio::layer()` and
//! its spans (tests/fixtures/axum-spans, built in a target directory of
//! its own so axum and tower-http stay out of the workspace), with a
//! planted slow route (`/slow` blocks its worker for 60 ms, every tenth
//! request). Its request spans must be in the trace, in `runtrace
//! analyze`'s span table, in `runtrace top`'s window, and in Perfetto (decoded with Perfetto's own
//! protos, tools/check_perfetto.py); the long poll's finding must name the
//! slow route by its span.

use std::path::{Path, PathBuf};
use std::process::Command;

fn runtrace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .expect("run runtrace")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds and runs the fixture, recording into `out`.
fn record(out: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/axum-spans");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("axum-spans");
    let o = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--locked", "--manifest-path"])
        .arg(fixture.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .arg("--")
        .arg(out)
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "the fixture failed ({}):\n{stdout}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("responses 200: 40/40; events dropped: 0"),
        "{stdout}"
    );
}

#[test]
fn axum_request_spans_in_the_trace_analyze_and_perfetto() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec");
    record(&out);
    let trace = out.display().to_string();

    // analyze: the span table has both routes; the slow one first.
    let a = runtrace(&["analyze", "--json", &trace]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let r: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let spans = r["spans"]["spans"].as_array().expect("a span table");
    let by = |label: &str| {
        spans
            .iter()
            .find(|s| s["label"] == label)
            .unwrap_or_else(|| panic!("{label} in {spans:?}"))
    };
    let (slow, item) = (by("GET /slow"), by("GET /item"));
    assert_eq!(slow["count"], 4, "{slow}");
    assert_eq!(item["count"], 36, "{item}");
    assert_eq!(spans[0]["label"], "GET /slow", "slowest first: {spans:?}");
    assert!(
        slow["wall_ns"]["p99"].as_u64().unwrap() >= 60_000_000,
        "{slow}"
    );
    assert!(
        slow["busy_ns"]["max"].as_u64().unwrap() >= 60_000_000,
        "{slow}"
    );
    assert!(
        item["wall_ns"]["p50"].as_u64().unwrap() < 60_000_000,
        "{item}"
    );
    // The worker its blocking handler held: the long poll names the route.
    let long = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "long_poll")
        .unwrap_or_else(|| panic!("a long_poll finding: {}", r["findings"]));
    let named = long["spans"][0].as_str().unwrap_or("");
    assert!(named.starts_with("GET /slow (p99 "), "{long}");
    // Its runtime by name.
    assert!(
        r["workers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["runtime_name"] == "http"),
        "{}",
        r["workers"]
    );
    let text = runtrace(&["analyze", &trace]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("=== Spans"), "{text}");
    assert!(text.contains("spans: GET /slow (p99 "), "{text}");

    // top's window over the whole recording (a few seconds, inside the
    // 60 s window): the same span table, the routes by the locations
    // that served them, and the long poll's finding naming its route.
    let t = runtrace(&["top", "--once", "--json", "--window", "60", &trace]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let w: serde_json::Value = serde_json::from_slice(&t.stdout).unwrap();
    let rows = w["spans"].as_array().expect("top's span table");
    let row = |label: &str| {
        rows.iter()
            .find(|s| s["span"] == label)
            .unwrap_or_else(|| panic!("{label} in top's {rows:?}"))
    };
    assert_eq!(rows[0]["span"], "GET /slow", "slowest first: {rows:?}");
    assert!(row("GET /slow")["wall_p99_ns"].as_u64().unwrap() >= 60_000_000);
    let served_by = row("GET /item")["spawn_locations"].as_array().unwrap();
    assert!(!served_by.is_empty(), "{rows:?}");
    let loc = served_by[0].as_str().unwrap();
    let loc_row = w["spawn_locations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["location"] == loc)
        .unwrap_or_else(|| panic!("{loc} in {}", w["spawn_locations"]));
    assert!(
        loc_row["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s.as_str().unwrap().starts_with("GET /item")),
        "{loc_row}"
    );
    let long = w["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "long_poll")
        .unwrap_or_else(|| panic!("top's long_poll: {}", w["findings"]));
    assert!(
        long["spans"][0]
            .as_str()
            .unwrap_or("")
            .starts_with("GET /slow (p99 "),
        "{long}"
    );

    // Perfetto, decoded with Perfetto's protos.
    let ok = Command::new("python3")
        .args([
            "-c",
            "from perfetto.protos.perfetto.trace import perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with the perfetto package is required in CI"
        );
        eprintln!("skipped the Perfetto part: no python3 perfetto package");
        return;
    }
    let pf = dir.path().join("t.pftrace");
    let o = runtrace(&["perfetto", &trace, "-o", pf.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let check = runtrace(&["check", "--json", &trace]);
    let check_path = dir.path().join("check.json");
    std::fs::write(&check_path, &check.stdout).unwrap();
    let py = Command::new("python3")
        .arg(workspace().join("tools/check_perfetto.py"))
        .args([&pf, &check_path])
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "check_perfetto.py: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    assert_eq!(v["span_lives"]["GET /slow"], 4, "{v}");
    assert_eq!(v["span_lives"]["GET /item"], 36, "{v}");
    assert!(
        v["span_slice_names"]["GET /slow"].as_u64().unwrap() >= 4,
        "{v}"
    );
    assert_eq!(v["span_slices"], v["span_slices_in_polls"], "{v}");
    let tracks: Vec<String> = serde_json::from_value(v["thread_tracks"].clone()).unwrap();
    assert!(
        tracks.iter().any(|t| t.starts_with("http worker ")),
        "{tracks:?}"
    );
}
