//! `runtrace flamegraph`, `runtrace blocked` and the findings' functions of
//! `runtrace analyze`, end to end on a synthetic trace whose stacks are
//! addresses of this test binary's own functions (its mapping read from
//! /proc/self/maps), so the `runtrace` process symbolizes them for real.
//!
//! Timeline (1 tick = 1 ns):
//! - task 1 (`src/api.rs:5:9`) polls 1..21 ms on worker 0 (tid 100);
//!   on-CPU samples every ms from 2 to 20 ms in `hot_api` < `dispatch`;
//! - task 2 (`src/batch.rs:7:9`) polls 1..11 ms on worker 1 (tid 101);
//!   samples every ms from 2 to 10 ms in `crunch_batch` < `dispatch`, and
//!   it was off-CPU 5 ms in `nap` < `dispatch` (switch-in at 9 ms);
//! - task 3 (`src/victim.rs:9:1`) is spawned at 2 ms and first polled at
//!   25 ms on worker 0: a 23 ms wait behind `src/api.rs`.

use runtrace_format::frame::ProfileInfo;
use runtrace_model::synth::TraceBuilder;
use self_maps::{inside, mapping_of};
use serde_json::Value;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../runtrace-analyze/tests/self_maps/mod.rs"]
mod self_maps;

const MS: u64 = 1_000_000;
const WRITER: u64 = 999;

#[inline(never)]
fn hot_api(x: u64) -> u64 {
    black_box(x).wrapping_mul(17).rotate_left(3)
}

#[inline(never)]
fn crunch_batch(x: u64) -> u64 {
    black_box(x) ^ 0xabc
}

#[inline(never)]
fn nap(x: u64) -> u64 {
    std::thread::sleep(std::time::Duration::from_nanos(black_box(x) % 2));
    x
}

#[inline(never)]
fn dispatch(x: u64) -> u64 {
    hot_api(x) + crunch_batch(x) + nap(x)
}

/// How the trace says CPU profiling went.
enum Profiling {
    Sampled,
    /// Asked for, impossible (mode 0, with this message).
    Impossible(&'static str),
    /// No PROFILE frame.
    Off,
}

fn scenario(p: Profiling) -> Vec<u8> {
    scenario_with(p, |_| {})
}

/// The scenario, with `more` events added at the end.
fn scenario_with(p: Profiling, more: impl FnOnce(&mut TraceBuilder)) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/api.rs", 5, 9);
    b.location(2, "src/batch.rs", 7, 9);
    b.location(3, "src/victim.rs", 9, 1);
    b.thread_name(WRITER, "runtrace-writer");
    let sampled = matches!(p, Profiling::Sampled);
    match p {
        Profiling::Sampled => {
            let d = inside(dispatch);
            b.profile(&ProfileInfo {
                mode: 1,
                hz: 1000,
                flags: 1,
                message: String::new(),
            });
            b.mappings(&[mapping_of(d)]);
            b.stacks(&[
                (1, &[inside(hot_api), d][..]),
                (2, &[inside(crunch_batch), d][..]),
                (3, &[inside(nap), d][..]),
            ]);
        }
        Profiling::Impossible(why) => b.profile(&ProfileInfo {
            mode: 0,
            hz: 99,
            flags: 0,
            message: why.to_string(),
        }),
        Profiling::Off => {}
    }
    b.spawn(100, 500_000, 1, 0, 1, 0);
    b.spawn(101, 600_000, 2, 0, 2, 0);
    b.poll_start(100, 0, MS, 1, 0, 0);
    b.spawn(100, 2 * MS, 3, 0, 3, 0);
    b.poll_end(100, 0, 21 * MS, 1, true);
    b.poll_start(100, 0, 25 * MS, 3, 0, 0);
    b.poll_end(100, 0, 26 * MS, 3, true);
    b.poll_start(101, 1, MS, 2, 0, 0);
    b.poll_end(101, 1, 11 * MS, 2, true);
    if sampled {
        for ms in 2..=20u64 {
            b.cpu_sample(WRITER, ms * MS, 100, 1);
            if ms <= 10 {
                b.cpu_sample(WRITER, ms * MS, 101, 2);
            }
            if ms == 9 {
                b.off_cpu(WRITER, 9 * MS, 101, 3, 5 * MS);
            }
        }
    }
    more(&mut b);
    b.finish()
}

/// The scenario written to `trace.0.bin` in a fresh directory.
fn trace(p: Profiling) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.0.bin"), scenario(p)).unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}

fn runtrace(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .arg(dir)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Folded lines as (frames root first, count).
fn folded(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (
                stack.split(';').map(str::to_string).collect(),
                n.parse().unwrap(),
            )
        })
        .collect()
}

fn total(lines: &[(Vec<String>, u64)]) -> u64 {
    lines.iter().map(|l| l.1).sum()
}

fn leaf_is(l: &(Vec<String>, u64), f: &str) -> bool {
    l.0.last().is_some_and(|x| x.contains(f))
}

#[test]
fn folded_stacks_are_root_first_with_the_hot_function_on_top() {
    let (_d, dir) = trace(Profiling::Sampled);
    let o = runtrace(&["flamegraph", "--folded"], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = folded(&stdout(&o));
    assert_eq!(total(&lines), 19 + 9, "{}", stdout(&o));
    // The binary and its build id were found: nothing to say.
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
    let top = lines.iter().max_by_key(|l| l.1).unwrap();
    assert!(leaf_is(top, "hot_api"), "{lines:?}");
    assert!(top.0[0].contains("dispatch"), "root first: {lines:?}");
    assert_eq!(top.1, 19);
    // Deterministic: the same bytes twice.
    assert_eq!(
        stdout(&runtrace(&["flamegraph", "--folded"], &dir)),
        stdout(&o)
    );
}

#[test]
fn location_worker_and_time_filter_the_samples() {
    let (_d, dir) = trace(Profiling::Sampled);
    let by_loc = folded(&stdout(&runtrace(
        &["flamegraph", "--folded", "--location", "batch.rs"],
        &dir,
    )));
    assert_eq!(total(&by_loc), 9);
    assert!(
        by_loc.iter().all(|l| leaf_is(l, "crunch_batch")),
        "{by_loc:?}"
    );
    let by_worker = folded(&stdout(&runtrace(
        &["flamegraph", "--folded", "--worker", "1"],
        &dir,
    )));
    assert_eq!(by_worker, by_loc);
    // 10..=15 ms: 6 samples of api, 1 of batch (10 ms).
    let by_time = folded(&stdout(&runtrace(
        &["flamegraph", "--folded", "--from", "0.010", "--to", "0.015"],
        &dir,
    )));
    assert_eq!(total(&by_time), 7, "{by_time:?}");
    let none = runtrace(
        &["flamegraph", "--folded", "--location", "nowhere.rs"],
        &dir,
    );
    assert_eq!(none.status.code(), Some(1));
    assert!(
        stderr(&none).contains("match the selection"),
        "{}",
        stderr(&none)
    );
}

#[test]
fn off_cpu_stacks_are_weighted_by_microseconds_off_cpu() {
    let (_d, dir) = trace(Profiling::Sampled);
    let o = runtrace(&["flamegraph", "--folded", "--off-cpu"], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = folded(&stdout(&o));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(leaf_is(&lines[0], "nap"), "{lines:?}");
    assert_eq!(lines[0].1, 5_000);
}

#[test]
fn the_svg_parses_as_xml_and_names_the_functions() {
    let (_d, dir) = trace(Profiling::Sampled);
    let svg = dir.join("flame.svg");
    let o = runtrace(&["flamegraph", "-o", svg.to_str().unwrap()], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "no --folded: nothing on stdout");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(xml_elements(&text) > 5);
    assert!(text.contains("hot_api") && text.contains("crunch_batch"));
}

/// The start tags of an XML document; panics where it is not XML.
fn xml_elements(text: &str) -> usize {
    let mut r = quick_xml::Reader::from_str(text);
    let mut elements = 0;
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Eof) => return elements,
            Ok(quick_xml::events::Event::Start(_)) => elements += 1,
            Ok(_) => {}
            Err(e) => panic!("not XML at {}: {e}", r.buffer_position()),
        }
    }
}

/// `runtrace report`'s CPU section: the on-CPU and off-CPU flame graphs
/// as `data:` images of SVG documents naming the functions, or how to
/// record samples.
#[test]
fn the_report_draws_the_flame_graphs() {
    use base64::Engine as _;
    let (_d, dir) = trace(Profiling::Sampled);
    let page = dir.join("report.html");
    let o = runtrace(&["report", "-o", page.to_str().unwrap()], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let prefix = "<img class=\"flame\" alt=\"flame graph: ";
    let images: Vec<String> = html
        .match_indices(prefix)
        .map(|(i, _)| {
            let rest = &html[i..];
            let start = rest.find("base64,").unwrap() + "base64,".len();
            let len = rest[start..].find('"').unwrap();
            let svg = base64::engine::general_purpose::STANDARD
                .decode(&rest[start..start + len])
                .expect("base64");
            String::from_utf8(svg).unwrap()
        })
        .collect();
    assert_eq!(images.len(), 2, "on-CPU and off-CPU:\n{html}");
    for svg in &images {
        assert!(xml_elements(svg) > 5);
    }
    assert!(images[0].contains("hot_api") && images[0].contains("crunch_batch"));
    assert!(images[1].contains("nap") && !images[1].contains("hot_api"));
    let csp = "img-src data:";
    assert!(
        html.contains(csp),
        "the page's policy must allow its images"
    );

    let (_d, dir) = trace(Profiling::Off);
    let page = dir.join("report.html");
    let o = runtrace(&["report", "-o", page.to_str().unwrap()], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(prefix));
    assert!(html.contains("No CPU samples in this trace: record with"));
}

#[test]
fn no_samples_says_why() {
    let (_d, dir) = trace(Profiling::Off);
    let o = runtrace(&["flamegraph", "--folded"], &dir);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("without CPU profiling"),
        "{}",
        stderr(&o)
    );
    let (_d, dir) = trace(Profiling::Impossible(
        "perf_event_open: EACCES (perf_event_paranoid 4)",
    ));
    let o = runtrace(&["flamegraph", "--folded"], &dir);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("perf_event_paranoid 4"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_arguments_name_the_flag() {
    let (_d, dir) = trace(Profiling::Sampled);
    for (args, flag) in [
        (&["flamegraph", "--folded", "--worker", "x"][..], "--worker"),
        (&["flamegraph", "--folded", "--from", "-1"][..], "--from"),
        (&["flamegraph", "--folded", "--to", "soon"][..], "--to"),
        (&["flamegraph"][..], "--folded"),
        (&["blocked", "--threshold-ms", "0"][..], "--threshold-ms"),
        (&["blocked", "--threshold-ms", "-1"][..], "--threshold-ms"),
    ] {
        let o = runtrace(args, &dir);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
    }
    let o = runtrace(
        &["flamegraph", "--folded", "--from", "2", "--to", "1"],
        &dir,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--from"), "{}", stderr(&o));
    let o = runtrace(&["flamegraph", "--folded"], &dir.join("missing"));
    assert_eq!(o.status.code(), Some(1));
}

/// A damaged file: what was readable is drawn, the damage is named (file
/// and byte offset) and the exit code is 1.
#[test]
fn damaged_input_draws_what_was_readable_and_says_where() {
    let bytes = scenario(Profiling::Sampled);
    let dir = tempfile::tempdir().unwrap();
    // Cut inside the last frame (the END frame: every sample is before it).
    std::fs::write(dir.path().join("trace.0.bin"), &bytes[..bytes.len() - 3]).unwrap();
    let o = runtrace(&["flamegraph", "--folded"], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("trace.0.bin: truncated at byte"),
        "{}",
        stderr(&o)
    );
    let lines = folded(&stdout(&o));
    assert!(
        lines.iter().any(|l| leaf_is(l, "hot_api")),
        "{}",
        stdout(&o)
    );
}

/// `runtrace summary` (and the MCP server's summary, one `TraceIndex`)
/// counts the samples and says `blocked` and `flamegraph` apply to a
/// profiled trace, and how to get samples when they do not.
#[test]
fn summary_says_the_profile_analyses_apply() {
    let find = |s: &Value, name: &str| -> Value {
        s["capabilities"]["analyzers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no analyzer {name}: {s:#}"))
            .clone()
    };
    let (_d, dir) = trace(Profiling::Sampled);
    let o = runtrace(&["summary", "--json"], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let cli: Value = serde_json::from_slice(&o.stdout).unwrap();
    let files = runtrace_format::files::expand_lenient(vec![dir.clone()]);
    let mcp = runtrace_analyze::index::TraceIndex::load(&files).summary();
    for s in [&cli, &mcp] {
        assert!(s["event_counts"]["cpu_sample"].as_u64() > Some(20), "{s:#}");
        assert_eq!(s["event_counts"]["off_cpu"], 1, "{s:#}");
        assert_eq!(s["other_events"], 0, "samples are not 'other': {s:#}");
        for name in ["blocked", "flamegraph"] {
            assert_eq!(find(s, name)["applicable"], true, "{name}: {s:#}");
        }
        // Counted, not queryable.
        let avail = s["capabilities"]["available_events"].as_array().unwrap();
        assert!(!avail.iter().any(|e| e == "cpu_sample"), "{avail:?}");
    }

    let (_d, dir) = trace(Profiling::Off);
    let s: Value = serde_json::from_slice(&runtrace(&["summary", "--json"], &dir).stdout).unwrap();
    for name in ["blocked", "flamegraph"] {
        let a = find(&s, name);
        assert_eq!(a["applicable"], false, "{name}: {s:#}");
        assert!(
            a["reason"].as_str().unwrap().contains("RUNTRACE_CPU_HZ"),
            "{a}"
        );
    }
}

#[test]
fn blocked_names_the_culprit_and_its_function() {
    let (_d, dir) = trace(Profiling::Sampled);
    let out = dir.join("blocked.folded");
    let o = runtrace(
        &["blocked", "--json", "--folded-out", out.to_str().unwrap()],
        &dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["waits"], 1);
    // The wait is 2..25 ms on tid 100: api's 19 samples.
    assert_eq!(r["samples"], 19, "{r}");
    let c = &r["culprits"][0];
    assert_eq!(c["location"], "src/api.rs:5:9");
    assert!(
        c["functions_self"][0]["function"]
            .as_str()
            .unwrap()
            .contains("hot_api"),
        "{c}"
    );
    // Every sample is dispatch < hot_api: one trunk, named by its deepest.
    let incl = c["functions_inclusive"].as_array().unwrap();
    assert_eq!(incl.len(), 1, "{c}");
    assert!(
        incl[0]["function"].as_str().unwrap().contains("hot_api"),
        "{c}"
    );
    assert_eq!(incl[0]["inclusive"], 19);
    assert_eq!(c["victims"][0]["location"], "src/victim.rs:9:1");
    let lines = folded(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(total(&lines), 19);
    assert!(
        lines.iter().all(|l| l.0[0] == "src/api.rs:5:9"),
        "{lines:?}"
    );
    let text = stdout(&runtrace(&["blocked"], &dir));
    assert!(
        text.contains("src/api.rs:5:9") && text.contains("hot_api"),
        "{text}"
    );
    let none: Value = serde_json::from_str(&stdout(&runtrace(
        &["blocked", "--json", "--threshold-ms", "30"],
        &dir,
    )))
    .unwrap();
    assert_eq!(none["waits"], 0);
}

#[test]
fn analyze_says_which_function_burns_cpu() {
    let (_d, dir) = trace(Profiling::Sampled);
    let o = runtrace(&["analyze"], &dir);
    let text = stdout(&o);
    assert!(
        text.contains("burning CPU in") && text.contains("hot_api"),
        "{text}"
    );
    let j: Value = serde_json::from_str(&stdout(&runtrace(&["analyze", "--json"], &dir))).unwrap();
    let f = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["spawn_loc"] == "src/api.rs:5:9")
        .expect("a finding blaming src/api.rs");
    assert!(
        f["functions"][0]["function"]
            .as_str()
            .unwrap()
            .contains("hot_api"),
        "{f}"
    );
    // Without samples: no `functions` key anywhere.
    let (_d, dir) = trace(Profiling::Off);
    let j: Value = serde_json::from_str(&stdout(&runtrace(&["analyze", "--json"], &dir))).unwrap();
    assert!(j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f.get("functions").is_none()));
}

/// Whether python3 has the perfetto package: when not, fail under CI,
/// else skip.
fn have_perfetto() -> bool {
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
            "python3 with the perfetto package is required in CI (bash .ci/run installs it)"
        );
        eprintln!("skipped: python3 with the perfetto package is not available");
    }
    ok
}

/// Perfetto's trace processor read the same samples, on the same threads
/// with the same stacks, into its `perf_sample` table as the protos say
/// (tools/check_perfetto_samples.py; it fails on any `stackprofile_*`
/// stat). Under CI the trace processor must have run (`.ci/run` sets
/// `RUNTRACE_TRACE_PROCESSOR_WASM`); elsewhere a missing one skips this.
fn trace_processor_agrees(v: &Value) {
    match v["trace_processor_skipped"].as_str() {
        None => assert_eq!(v["trace_processor"], v["protos"], "{v}"),
        Some(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and no trace processor: {why} (bash .ci/run sets RUNTRACE_TRACE_PROCESSOR_WASM)"
            );
            eprintln!("skipped: the trace processor check ({why})");
        }
    }
}

/// `{"root;...;leaf": count}` of one thread, as tools/check_perfetto_samples.py prints it.
fn stacks_of(v: &Value, tid: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = v[tid]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn perfetto_has_the_samples_on_their_threads_with_their_functions() {
    let (_d, dir) = trace(Profiling::Sampled);
    let out = dir.join("t.pftrace");
    let o = Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(["perfetto", "-o"])
        .arg(&out)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    if !have_perfetto() {
        return;
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/check_perfetto_samples.py");
    let py = Command::new("python3")
        .arg(&script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", stderr(&py));
    let v: Value = serde_json::from_slice(&py.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&py), stderr(&py)));
    // The same stacks, named the same, as `runtrace flamegraph` draws.
    let fg = |args: &[&str]| -> Vec<(String, u64)> {
        let mut a = vec!["flamegraph", "--folded"];
        a.extend_from_slice(args);
        let mut l: Vec<(String, u64)> = folded(&stdout(&runtrace(&a, &dir)))
            .into_iter()
            .map(|(f, n)| (f.join(";"), n))
            .collect();
        l.sort();
        l
    };
    let protos = &v["protos"];
    let api = stacks_of(protos, "100");
    assert_eq!(api, fg(&["--worker", "0"]), "{v}");
    assert_eq!(api.len(), 1, "{api:?}");
    assert_eq!(api[0].1, 19);
    assert!(api[0].0.ends_with("hot_api"), "{api:?}");
    assert!(api[0].0.contains("dispatch;"), "{api:?}");
    // Thread 101: 9 on-CPU samples in crunch_batch, and the off-CPU stack
    // in nap under its own root.
    let batch = stacks_of(protos, "101");
    let on: Vec<(String, u64)> = batch
        .iter()
        .filter(|s| !s.0.starts_with("[off-CPU];"))
        .cloned()
        .collect();
    assert_eq!(on, fg(&["--worker", "1"]), "{v}");
    let off: Vec<&(String, u64)> = batch
        .iter()
        .filter(|s| s.0.starts_with("[off-CPU];"))
        .collect();
    assert_eq!(off.len(), 1, "{batch:?}");
    assert_eq!(off[0].1, 1);
    let off_fg = fg(&["--off-cpu"]);
    assert_eq!(off[0].0, format!("[off-CPU];{}", off_fg[0].0), "{v}");
    assert!(off[0].0.ends_with("nap"), "{off:?}");
    // The test binary is the frames' mapping.
    let me = std::env::current_exe().unwrap();
    assert!(
        v["mappings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str() == Some(&*me.to_string_lossy())),
        "{v}"
    );
    trace_processor_agrees(&v);
}

/// Issue 39 item 4: allocation samples are callstack samples on the
/// allocating thread (the event's `tid`, not the writer that wrote it),
/// under an `[alloc]` root, named as `runtrace flamegraph --alloc` names
/// them: three in `hot_api` on tid 100 and one there outside any poll, two
/// in `crunch_batch` on tid 101 (each standing for 4 KiB).
#[test]
fn perfetto_has_the_allocation_samples_on_their_threads() {
    const W: u64 = 4096;
    let bytes = scenario_with(Profiling::Sampled, |b| {
        for (i, ms) in [3u64, 4, 5].into_iter().enumerate() {
            b.alloc_sample(WRITER, ms * MS + 1, 100, 1, 64, W, 0x1000 + i as u64, 0);
        }
        b.alloc_sample(WRITER, 22 * MS, 100, 3, 64, W, 0x2000, 0);
        for ms in [4u64, 6] {
            b.alloc_sample(WRITER, ms * MS + 1, 101, 2, 64, W, 0x3000 + ms, 0);
        }
    });
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    std::fs::write(dir.join("trace.0.bin"), bytes).unwrap();
    let out = dir.join("t.pftrace");
    let o = Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(["perfetto", "-o"])
        .arg(&out)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    if !have_perfetto() {
        return;
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/check_perfetto_samples.py");
    let py = Command::new("python3")
        .arg(&script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", stderr(&py));
    let v: Value = serde_json::from_slice(&py.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&py), stderr(&py)));
    // Sample counts by kind: the CPU ones unchanged, the 6 allocations.
    assert_eq!(
        v["kinds"],
        serde_json::json!({"on_cpu": 28, "off_cpu": 1, "alloc": 6}),
        "{v}"
    );
    // Per thread, the allocation stacks are `flamegraph --alloc`'s (its
    // counts are bytes: 4 KiB per sample here) under `[alloc]`.
    let fg_alloc: Vec<(String, u64)> = folded(&stdout(&runtrace(
        &["flamegraph", "--folded", "--alloc"],
        &dir,
    )))
    .into_iter()
    .map(|(f, n)| (format!("[alloc];{}", f.join(";")), n / W))
    .collect();
    let allocs_of = |tid: &str| -> Vec<(String, u64)> {
        stacks_of(&v["protos"], tid)
            .into_iter()
            .filter(|s| s.0.starts_with("[alloc];"))
            .collect()
    };
    let (a100, a101) = (allocs_of("100"), allocs_of("101"));
    assert_eq!(a100.len(), 2, "{a100:?}");
    assert!(
        a100.iter().any(|s| s.0.ends_with("hot_api") && s.1 == 3),
        "{a100:?}"
    );
    assert!(
        a100.iter().any(|s| s.0.ends_with("nap") && s.1 == 1),
        "{a100:?}"
    );
    assert_eq!(a101.len(), 1, "{a101:?}");
    assert!(
        a101[0].0.ends_with("crunch_batch") && a101[0].1 == 2,
        "{a101:?}"
    );
    let mut all: Vec<(String, u64)> = a100.into_iter().chain(a101).collect();
    all.sort();
    let mut fg_alloc = fg_alloc;
    fg_alloc.sort();
    assert_eq!(all, fg_alloc, "{v}");
    // None on the writer's thread, which wrote the events.
    assert!(v["protos"][WRITER.to_string()].is_null(), "{v}");
    trace_processor_agrees(&v);
}

extern "C" {
    /// glibc's, only for its address: a leaf in a shared library is where
    /// a thread blocked in a system call.
    fn usleep(us: u32) -> i32;
}

/// Issue 35 item 6: a poll that blocks its worker in place (off-CPU in a
/// system call inside the poll) is in `blocked` even when no task's wake
/// waited for it: task 4 (`src/disk.rs:3:1`) polls 30..60 ms on tid 102
/// and is off-CPU in `usleep` < `nap` < `dispatch` for 12 + 8 ms; a
/// preemption (leaf in this binary) in the same poll is not blocking.
#[test]
fn blocked_lists_workers_blocked_in_place() {
    let d = inside(dispatch);
    let libc_leaf = usleep as *const () as usize as u64 + 4;
    let mut b = TraceBuilder::new();
    b.location(4, "src/disk.rs", 3, 1);
    b.thread_name(WRITER, "runtrace-writer");
    b.profile(&ProfileInfo {
        mode: 1,
        hz: 1000,
        flags: 3,
        message: String::new(),
    });
    b.mappings(&[mapping_of(d), mapping_of(libc_leaf)]);
    b.stacks(&[
        (1, &[libc_leaf, inside(nap), d][..]),
        (2, &[inside(hot_api), d][..]),
    ]);
    b.spawn(102, 20 * MS, 4, 0, 4, 0);
    b.poll_start(102, 2, 30 * MS, 4, 0, 0);
    b.off_cpu(WRITER, 42 * MS, 102, 1, 12 * MS);
    b.off_cpu(WRITER, 50 * MS, 102, 2, 7 * MS);
    b.off_cpu(WRITER, 58 * MS, 102, 1, 8 * MS);
    b.poll_end(102, 2, 60 * MS, 4, true);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.0.bin"), b.finish()).unwrap();
    let o = runtrace(&["blocked", "--json"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["waits"], 0, "no wake waited: {r}");
    let p = &r["in_place"][0];
    assert_eq!(p["location"], "src/disk.rs:3:1", "{r}");
    assert_eq!(p["polls"], 1);
    assert_eq!(
        p["blocked_ns"],
        20 * MS,
        "the preemption is not blocking: {r}"
    );
    assert_eq!(p["longest_ns"], 20 * MS);
    assert!(
        p["functions"][0]["function"]
            .as_str()
            .unwrap()
            .contains("nap"),
        "the app's own frame under libc: {p}"
    );
    let text = stdout(&runtrace(&["blocked"], dir.path()));
    assert!(
        text.contains("Workers blocked in place")
            && text.contains("src/disk.rs:3:1: 1 polls blocked 20.00 ms"),
        "{text}"
    );
    // Over the threshold only.
    let r: Value = serde_json::from_str(&stdout(&runtrace(
        &["blocked", "--json", "--threshold-ms", "25"],
        dir.path(),
    )))
    .unwrap();
    assert_eq!(r["in_place"].as_array().unwrap().len(), 0, "{r}");
}
