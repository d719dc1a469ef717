//! The `lttng` backend end to end, the way LTTng users work (seed 001):
//! the quickstart built with `--features lttng` registers the `runtrace:*`
//! tracepoints, a session records them with the catalog's field names and
//! the `vtid`/`procname` contexts, every event count equals what the
//! quickstart's own recording counted, and a `--filter 'local_q > 10'` on
//! `runtrace:task_poll_start` keeps exactly the matching events.
//!
//! Needs `lttng`, `lttng-sessiond`, `babeltrace2` and liblttng-ust-dev:
//! skipped (with a message) when one is missing, except under CI
//! (`CI=true`), where that is a failure.
//!
//! The test runs its own session daemon with a private `LTTNG_HOME` in a
//! temporary directory (never a system daemon), and stops it by pid at the
//! end, on failure too. As root, the daemon, the `lttng` commands and the
//! traced program run as user `nobody`: root's `lttng` always talks to the
//! system-wide daemon, whatever `LTTNG_HOME` says. (Those helpers are in
//! `tests/common/lttng.rs`, shared with `tests/lttng_doc.rs`.)
//!
//! The quickstart is built with the same cargo profile as this test (so a
//! plain `cargo test` reuses its dependencies; `cargo test --release`
//! checks the release build).

mod common;

use std::collections::HashMap;

use common::lttng::{babeltrace, build_lttng_example, event_name, field_u64, Lttng, TOOLS};
use common::tools_present;
use runtrace::format::schema::BUILTIN_EVENTS;
use std::time::Instant;

/// `event counts:` of the quickstart's report: JSON name -> count.
fn report_counts(stdout: &str) -> HashMap<String, u64> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("event counts:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn lttng_sessions_see_every_event_with_fields_and_filters() {
    let t0 = Instant::now();
    if !tools_present(&TOOLS) {
        return;
    }
    let lt = Lttng::start("lttng");
    // `nobody` may not reach the target dir: run a copy from the private
    // directory.
    let Some(exe) = build_lttng_example("quickstart", &lt.home.join("quickstart")) else {
        return;
    };
    let built = t0.elapsed();
    let out_dir = lt.home.join("recording");
    std::fs::create_dir(&out_dir).unwrap();
    for p in [&exe, &out_dir] {
        lt.give(p);
    }

    // Session 1: every runtrace event, as in seed 001. Session 2, at the
    // same time: only polls that found a long local queue.
    let pid = std::process::id();
    let all = lt.home.join("trace-all");
    let filtered = lt.home.join("trace-filtered");
    let (s_all, s_filt) = (format!("rt-all-{pid}"), format!("rt-filter-{pid}"));
    lt.lttng(&["create", &s_all, &format!("--output={}", all.display())]);
    // Counts are compared exactly: buffers big enough (8 x 4 MiB per CPU)
    // that a consumer daemon starved by a loaded machine discards nothing.
    lt.lttng(&[
        "enable-channel",
        "-u",
        "big",
        "--subbuf-size=4M",
        "--num-subbuf=8",
        "-s",
        &s_all,
    ]);
    lt.lttng(&[
        "enable-event",
        "-u",
        "runtrace:*",
        "-c",
        "big",
        "-s",
        &s_all,
    ]);
    lt.lttng(&[
        "add-context",
        "-u",
        "-t",
        "vtid",
        "-t",
        "procname",
        "-s",
        &s_all,
    ]);
    lt.lttng(&[
        "create",
        &s_filt,
        &format!("--output={}", filtered.display()),
    ]);
    lt.lttng(&[
        "enable-event",
        "-u",
        "runtrace:task_poll_start",
        "--filter",
        "local_q > 10",
        "-s",
        &s_filt,
    ]);
    lt.lttng(&["start", &s_all]);
    lt.lttng(&["start", &s_filt]);

    let run = lt
        .command(&exe)
        .args(["--out", out_dir.to_str().unwrap(), "--seconds", "0.5"])
        // Without the quickstart's CPU profiler, which this test is not
        // about: a sample it lost under CI's load would fail the
        // quickstart's check, so its exit status.
        .env("RUNTRACE_CPU_HZ", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "quickstart failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for s in [&s_all, &s_filt] {
        lt.lttng(&["stop", s]);
        lt.lttng(&["destroy", s]);
    }

    // Every event type: the LTTng trace has exactly what the quickstart's
    // own recording counted.
    let counts = report_counts(&stdout);
    let lines = babeltrace(&all);
    let mut by_event: HashMap<&str, Vec<&str>> = HashMap::new();
    for l in &lines {
        if let Some(e) = event_name(l) {
            by_event.entry(e).or_default().push(l);
        }
    }
    let spawns = by_event.get("task_spawn").map_or(0, Vec::len) as u64;
    assert!(
        spawns > 100,
        "runtrace:task_spawn: {spawns} events\n{stdout}"
    );
    assert_eq!(
        Some(&spawns),
        counts.get("TaskSpawn"),
        "runtrace:task_spawn in LTTng vs TaskSpawn of the quickstart\n{stdout}"
    );
    // Profile events (CPU samples) have no tracepoint: the recorder writes them.
    for ev in BUILTIN_EVENTS.iter().filter(|e| e.has_probe_site()) {
        let lttng = by_event.get(ev.name).map_or(0, Vec::len) as u64;
        let recorded = counts.get(ev.json_name).copied().unwrap_or(0);
        assert_eq!(
            lttng, recorded,
            "runtrace:{} in LTTng vs {} recorded",
            ev.name, ev.json_name
        );
        // Field names are the catalog's; the contexts are there.
        if let Some(l) = by_event.get(ev.name).and_then(|v| v.first()) {
            for f in ev.fields {
                assert!(
                    l.contains(&format!(" {} = ", f.name)),
                    "no field {}: {l}",
                    f.name
                );
            }
            assert!(
                l.contains("{ vtid = ") && l.contains(", procname = \""),
                "{l}"
            );
        }
    }
    // Text fields carry their text (`loc`: file:line:col).
    let spawned_here = by_event["task_spawn"]
        .iter()
        .filter(|l| l.contains("spawn_loc = \"examples/quickstart.rs:"))
        .count();
    assert!(spawned_here > 0, "no spawn_loc in examples/quickstart.rs");
    let spawn = by_event["task_spawn"][0];
    assert!(
        field_u64(spawn, "task_id").is_some_and(|t| t > 0),
        "{spawn}"
    );

    // The filter kept exactly the polls with local_q > 10.
    let filt = babeltrace(&filtered);
    let expected = by_event["task_poll_start"]
        .iter()
        .filter(|l| field_u64(l, "local_q").unwrap() > 10)
        .count();
    assert!(expected > 0, "no poll with local_q > 10 in this run");
    for l in &filt {
        assert_eq!(event_name(l), Some("task_poll_start"), "{l}");
        assert!(field_u64(l, "local_q").unwrap() > 10, "{l}");
    }
    assert_eq!(
        filt.len(),
        expected,
        "filtered session vs local_q > 10 in the full one"
    );

    eprintln!(
        "lttng: {} events, {spawns} task_spawn, {} with local_q > 10; build {:.1} s, total {:.1} s",
        lines.len(),
        filt.len(),
        built.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}
