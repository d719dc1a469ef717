//! `runtrace perfetto` and `runtrace report` end to end: the Perfetto output
//! decoded by the Perfetto project's own Python protos and checked
//! semantically (tools/check_perfetto.py), and the HTML page rendered by
//! headless Chromium (screenshot in target/visual/, DOM and console
//! checked). With `CI=true` a missing tool fails the test; elsewhere the
//! test says it skipped.

use runtrace_model::synth::TraceBuilder;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn runtrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .expect("run runtrace")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden(name: &str) -> String {
    workspace()
        .join("crates/runtrace-cli/tests/golden")
        .join(name)
        .display()
        .to_string()
}

/// Whether `probe` (a command) works; when not: fail under CI, else skip.
fn have(what: &str, probe: &mut Command) -> bool {
    let ok = probe.output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is required in CI (bash .ci/run installs it)"
        );
        eprintln!("skipped: {what} is not available");
    }
    ok
}

fn have_perfetto() -> bool {
    have(
        "python3 with the perfetto package (pip install perfetto)",
        Command::new("python3").args([
            "-c",
            "from perfetto.protos.perfetto.trace import perfetto_trace_pb2",
        ]),
    )
}

/// A trace with every kind of event the exporter draws: two tokio workers
/// and an executor worker polling (nested in a tokio poll), wakes, parks,
/// queue samples of a named queue, and runtrace-sync's queue, lock, I/O,
/// drop, trigger and heartbeat events.
fn synthetic() -> Vec<u8> {
    synthetic_with(false)
}

/// [`synthetic`], with a CPU profile when `profiled`: on-CPU samples of
/// the two workers inside their polls, in a binary that is not on this
/// machine (its frames are drawn as `[unknown] app+0x...`).
fn synthetic_with(profiled: bool) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    if profiled {
        b.profile_elsewhere(99);
        b.stacks(&[
            (1, &[0x40_1000, 0x40_2000, 0x40_3000][..]),
            (2, &[0x40_1800, 0x40_2000, 0x40_3000][..]),
        ]);
    }
    b.location(1, "src/server.rs", 10, 5);
    b.location(2, "src/jobs.rs", 20, 9);
    b.string(1, "jobs");
    b.string(2, "state");
    b.string(3, "read");
    b.string(4, "full");
    b.string(5, "size_threshold");
    b.string(6, "consumer");
    b.thread_name(100, "tokio-rt-worker");
    b.thread_name(101, "tokio-rt-worker");
    b.thread_name(102, "my-executor");
    b.worker_start(100, 0, 500, 1);
    b.worker_start(101, 1, 500, 1);
    let mut t = 1_000u64;
    for task in 1..=40u64 {
        let tid = 100 + task % 2;
        let w = (task % 2) as u32;
        b.spawn(tid, t, task, 0, 1 + task % 2, 0);
        b.poll_start(tid, w, t + 100, task, 0, (task % 5) as u32);
        b.poll_end(tid, w, t + 2_000, task, false);
        b.wake(tid, w, t + 2_500, task, 0);
        b.wake(tid, w, t + 2_600, task, 0); // a second wake: no second flow
        b.poll_start(tid, w, t + 3_000, task, 0, 1);
        // The last task's second poll takes 60 ms: a finding.
        let end = t
            + 4_000
            + if task == 40 {
                60_000_000
            } else {
                task * 10_000
            };
        // Nested: an executor (worker 7) driven from inside the tokio poll.
        b.poll_start(tid, 7, end - 2_000, 500 + task, 1, 0);
        b.poll_end(tid, 7, end - 1_000, 500 + task, false);
        if profiled {
            b.cpu_sample(99, t + 3_500, tid, 1 + task % 2);
        }
        b.poll_end(tid, w, end, task, true);
        b.terminate(tid, end, task);
        // An executor worker polls the tasks of its named queue.
        b.poll_start(102, 0, t + 100, 1000 + task, 1, 3);
        b.poll_end(102, 0, t + 900, 1000 + task, true);
        if task < 40 {
            b.park(tid, w, t + 500_000, 0, 0);
            b.unpark(tid, w, t + 600_000, 0, 0);
        }
        b.queue_sample(99, t + 700_000, task as u32 % 3, 1, task as u32 % 7);
        b.enqueue(103, t + 10, 1, task, task as u32);
        b.dequeue(104, t + 800_000, 1, task, 700_000, task as u32 / 2);
        b.lock_wait(104, t + 810_000, 2, 5_000, false);
        b.lock_hold(104, t + 820_000, 2, 9_000, true);
        b.lock_hold(105, t + 815_000, 2, 30_000, false); // overlaps nothing on 105
        b.io(104, t + 900_000, 3, 4096, 50_000);
        b.processing_end(104, t + 950_000, 1, task, 100_000, true);
        b.heartbeat(104, t + 960_000, 6, 1_000_000);
        if task == 30 {
            b.item_dropped(103, t + 20, 1, task, 40, 4);
            b.backlog_trigger(103, t + 30, 1, 40, 1200, 5);
        }
        t += 1_000_000;
        b.round(t - 500_000);
    }
    b.finish()
}

/// A cut point near `at` that falls inside a frame (past its 9-byte
/// frame header), so the file reads as truncated, not as unsealed.
fn inside_a_frame(bytes: &[u8], at: usize) -> usize {
    let mut pos = 8; // after the magic
    while pos + 9 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 1..pos + 5].try_into().unwrap()) as usize;
        let end = pos + 9 + len;
        if end > at && len > 1 {
            return pos + 9 + len / 2;
        }
        pos = end;
    }
    panic!("no frame reaches {at}");
}

fn write_trace(dir: &Path, bytes: &[u8]) -> String {
    let p = dir.join("trace.0.bin");
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

/// `runtrace perfetto` then the Python check; returns the checker's JSON.
fn perfetto_checked(input: &str, dir: &Path) -> serde_json::Value {
    let out = dir.join("t.pftrace");
    let o = runtrace(&["perfetto", input, "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let check = runtrace(&["check", "--json", input]);
    let check_path = dir.join("check.json");
    std::fs::write(&check_path, &check.stdout).unwrap();
    let py = Command::new("python3")
        .arg(workspace().join("tools/check_perfetto.py"))
        .args([&out, &check_path])
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "check_perfetto.py: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    // The checker can fail: one PollStart more than the trace has.
    let mut counts: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let n = counts["event_counts"]["PollStart"].as_u64().unwrap_or(0);
    counts["event_counts"]["PollStart"] = (n + 1).into();
    let wrong = dir.join("wrong.json");
    std::fs::write(&wrong, counts.to_string()).unwrap();
    let bad = Command::new("python3")
        .arg(workspace().join("tools/check_perfetto.py"))
        .args([&out, &wrong])
        .output()
        .unwrap();
    assert!(!bad.status.success(), "the checker accepted a wrong count");
    serde_json::from_slice(&py.stdout).unwrap()
}

#[test]
fn perfetto_synthetic_trace_decodes_and_checks() {
    if !have_perfetto() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &synthetic());
    let r = perfetto_checked(&input, dir.path());
    // 40 tasks x 3 tokio polls (one nested) + 40 executor polls.
    assert_eq!(r["poll_slices"], 160);
    // Per tokio task: its spawn and its first wake reach a poll.
    assert_eq!(r["flows_joined"], 80);
    assert!(r["counter_values"].as_u64().unwrap() > 0);
    let names: Vec<String> = serde_json::from_value(r["thread_tracks"].clone()).unwrap();
    assert!(
        names
            .iter()
            .any(|n| n == "tokio worker 0 (tokio-rt-worker)"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "executor 0 (my-executor)"),
        "{names:?}"
    );
}

#[test]
fn perfetto_golden_recordings_decode_and_check() {
    if !have_perfetto() {
        return;
    }
    for name in ["quickstart", "backlog"] {
        let dir = tempfile::tempdir().unwrap();
        let r = perfetto_checked(&golden(name), dir.path());
        assert!(r["packets"].as_u64().unwrap() > 1000, "{name}: {r}");
    }
}

#[test]
fn perfetto_cut_trace_converts_what_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = synthetic();
    let input = write_trace(
        dir.path(),
        &bytes[..inside_a_frame(&bytes, bytes.len() * 2 / 3)],
    );
    let out = dir.path().join("cut.pftrace");
    let o = runtrace(&["perfetto", &input, "-o", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("trace.0.bin") && err.contains("error:"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let polls: u64 = err
        .split(" polls")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|s| s.trim().parse().ok())
        .expect("poll count on stderr");
    assert!(polls > 0 && polls < 160, "{err}");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
}

#[test]
fn unwritable_output_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &synthetic());
    let bad = dir.path().join("no/such/dir/out");
    for cmd in ["perfetto", "report"] {
        let o = runtrace(&[cmd, &input, "-o", bad.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {err}");
        assert!(
            err.contains("no/such/dir/out: cannot create"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn report_of_cut_trace_says_where_it_broke() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = synthetic();
    let input = write_trace(dir.path(), &bytes[..bytes.len() / 2]);
    let out = dir.path().join("r.html");
    let o = runtrace(&["report", &input, "-o", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error:") && err.contains("trace.0.bin"),
        "{err}"
    );
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("id=\"damage\""));
}

/// Chromium's flags: headless, no network (a proxy that does not exist and
/// no DNS), no GPU.
fn chromium(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("120")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(args)
        .output()
        .expect("run chromium")
}

/// Console messages chromium logged (`...:CONSOLE:N] "text", source: ...`;
/// chromium logs every level as INFO). The page has no script, so any
/// message is a problem: an error, or a blocked load (CSP violation).
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn report_renders_in_headless_chromium() {
    if !have("chromium", Command::new("chromium").arg("--version")) {
        return;
    }
    let shots = workspace().join("target/visual");
    std::fs::create_dir_all(&shots).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let synth = write_trace(dir.path(), &synthetic());
    let profiled_dir = dir.path().join("profiled");
    std::fs::create_dir_all(&profiled_dir).unwrap();
    let profiled = write_trace(&profiled_dir, &synthetic_with(true));
    for (name, input) in [
        ("quickstart", golden("quickstart")),
        ("synthetic", synth),
        ("profiled", profiled),
    ] {
        let page = dir.path().join(format!("{name}.html"));
        let o = runtrace(&["report", &input, "-o", page.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let html = std::fs::read_to_string(&page).unwrap();
        // Self-contained: nothing to fetch.
        for needle in [
            "<script src",
            "<link",
            "src=\"http",
            "href=\"http",
            "@import",
            "url(",
        ] {
            assert!(!html.contains(needle), "{name}: page references {needle}");
        }
        let url = format!("file://{}", page.display());
        let shot = shots.join(format!("report-{name}.png"));
        let s = chromium(&[
            "--window-size=1200,6000",
            &format!("--screenshot={}", shot.display()),
            &url,
        ]);
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000),
            "{name}: no screenshot: {}",
            String::from_utf8_lossy(&s.stderr)
        );
        let d = chromium(&["--dump-dom", &url]);
        let dom = String::from_utf8_lossy(&d.stdout);
        let err = String::from_utf8_lossy(&d.stderr);
        assert!(d.status.success(), "{name}: {err}");
        assert_eq!(console_errors(&err), Vec::<&str>::new(), "{name}");
        // The findings, as `runtrace analyze --json` has them.
        let a = runtrace(&["analyze", "--json", &input]);
        let report: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
        let findings = report["findings"].as_array().unwrap().len();
        assert_eq!(
            dom.matches("<div class=\"finding ").count(),
            findings,
            "{name}"
        );
        assert!(findings > 0, "{name}: no findings to show");
        for id in [
            "summary",
            "findings",
            "utilisation",
            "poll-hist",
            "wake-hist",
            "locations",
        ] {
            assert!(dom.contains(&format!("id=\"{id}\"")), "{name}: no #{id}");
        }
        assert!(
            dom.contains("<svg id=\"utilisation\""),
            "{name}: no utilisation chart"
        );
        assert!(
            dom.matches("<rect").count() > 20,
            "{name}: charts are empty"
        );
        if name != "quickstart" {
            assert!(dom.contains("id=\"triggers\""), "no backlog triggers table");
            assert!(dom.contains("class=\"chart backlog\""), "no queue timeline");
        }
        // The CPU section: the flame graph is an image the page's policy
        // lets load (a blocked one logs a console error, checked above).
        let flames = dom.matches("<img class=\"flame\"").count();
        if name == "profiled" {
            assert_eq!(flames, 1, "{name}: the on-CPU flame graph");
        } else {
            assert_eq!(flames, 0, "{name}");
            assert!(dom.contains("No CPU samples in this trace"), "{name}");
        }
    }
    // The console check can fail: a page that logs an error.
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error('boom')</script></body></html>",
    )
    .unwrap();
    let d = chromium(&["--dump-dom", &format!("file://{}", bad.display())]);
    assert!(
        !console_errors(&String::from_utf8_lossy(&d.stderr)).is_empty(),
        "console errors are not detected: {}",
        String::from_utf8_lossy(&d.stderr)
    );
}

/// Two named runtimes (each with a worker 0) and request spans entered in
/// polls: span slices nested in the polls they ran in, each request's
/// whole life on the process's span lanes, and each runtime's workers on
/// tracks of their own, named by the runtime (issue 34 items 3 and 5).
#[test]
fn perfetto_spans_nest_in_polls_and_runtimes_stay_apart() {
    if !have_perfetto() {
        return;
    }
    let mut b = TraceBuilder::new();
    b.location(1, "src/server.rs", 10, 5);
    for (tid, rt, name) in [(100, 0, "api"), (200, 1, "blocking")] {
        b.runtime_name(tid, 400, rt, name);
        b.worker_start(tid, 0, 500, rt);
    }
    let mut t = 1_000u64;
    for i in 0..10u64 {
        let (task, span) = (1 + i, 100 + i);
        let tid = if i % 2 == 0 { 100 } else { 200 };
        b.spawn(tid, t, task, 0, 1, 0);
        b.poll_start(tid, 0, t + 100, task, 0, 0);
        b.span_new(tid, t + 150, span, 0, "request", "method=GET uri=/item");
        b.span_enter(tid, t + 200, span);
        b.span_exit(tid, t + 300, span);
        b.poll_end(tid, 0, t + 400, task, false);
        b.wake(tid, 0, t + 500, task, 0);
        b.poll_start(tid, 0, t + 600, task, 0, 0);
        b.span_enter(tid, t + 700, span);
        b.span_exit(tid, t + 800, span);
        b.poll_end(tid, 0, t + 900, task, true);
        b.span_close(tid, t + 950, span);
        b.terminate(tid, t + 1_000, task);
        t += 2_000;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &b.finish());
    let r = perfetto_checked(&input, dir.path());
    assert_eq!(r["span_slices"], 20, "{r}");
    assert_eq!(r["span_slices_in_polls"], 20, "{r}");
    assert_eq!(r["span_slice_names"]["GET /item"], 20, "{r}");
    assert_eq!(r["span_lives"]["GET /item"], 10, "{r}");
    assert_eq!(r["poll_slices"], 20, "{r}");
    let names: Vec<String> = serde_json::from_value(r["thread_tracks"].clone()).unwrap();
    assert!(names.iter().any(|n| n == "api worker 0"), "{names:?}");
    assert!(names.iter().any(|n| n == "blocking worker 0"), "{names:?}");
}

/// A tokio Mutex held across an await (`synth::mutex_held_across_await`:
/// 160 waits, each let go by a wake of the holder or of the previous
/// waiter): every wait a slice named by the resource on the process's
/// resource wait lanes, each with a handover slice reached by a flow from
/// a release instant on the releaser's thread (issue 36 item 5).
#[test]
fn perfetto_resource_waits_with_flows_from_their_release() {
    if !have_perfetto() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(
        dir.path(),
        &runtrace_model::synth::mutex_held_across_await(),
    );
    let r = perfetto_checked(&input, dir.path());
    assert_eq!(
        r["resource_waits"]["wait Mutex src/state.rs:4:17"], 160,
        "{r}"
    );
    assert_eq!(r["resource_waits"].as_object().unwrap().len(), 1, "{r}");
    assert_eq!(r["resource_handovers"], 160, "{r}");
    // The waits overlap (8 waiters at once): several lanes, each balanced
    // (checked by the script).
    assert_eq!(r["poll_slices"], 20 * 2 + 160 * 2, "{r}");
}
