//! CPU profiles end to end: a tokio workload recorded with
//! `Recorder::builder().cpu_profile(499)`, one spawn location burning CPU
//! in `rt_flame_hot`, another sleeping in `rt_flame_nap`; then what
//! `runtrace flamegraph --location` and `runtrace analyze` run (the same
//! library calls: `runtrace_export::flamegraph::{stacks, fold}`,
//! `analyze_files_profiled` + `Report::add_functions`) must name them.
//!
//! Under `CI=true` a recording whose profiling was impossible (mode 0)
//! fails the test; elsewhere it is skipped with a message. The off-CPU
//! part needs perf_event_open (mode 1; the signal fallback is on-CPU only).

mod common;

use runtrace_analyze::functions::StackNames;
use runtrace_analyze::runtime::analyze_files_profiled;
use runtrace_analyze::{Options, Report};
use runtrace_export::flamegraph::{fold, stacks, Selection};
use runtrace_model::profile::{self, Profile};
use runtrace_recorder::Recorder;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Burns CPU for `d`.
#[inline(never)]
fn rt_flame_hot(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut x = 1u64;
    while Instant::now() < end {
        for _ in 0..10_000 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    x
}

/// Blocks its thread for `d`.
#[inline(never)]
fn rt_flame_nap(d: Duration) {
    std::thread::sleep(d);
    black_box(());
}

async fn hot_task(until: Instant) {
    while Instant::now() < until {
        black_box(rt_flame_hot(Duration::from_millis(20)));
        tokio::task::yield_now().await;
    }
}

async fn nap_task(until: Instant) {
    while Instant::now() < until {
        rt_flame_nap(Duration::from_millis(30));
        tokio::task::yield_now().await;
    }
}

/// `tests/cpu_flamegraph.rs:N:` of the line holding `needle`.
fn line_of(needle: &str) -> String {
    let src = include_str!("cpu_flamegraph.rs");
    let n = src
        .lines()
        .position(|l| l.contains(needle) && !l.contains("line_of("))
        .unwrap_or_else(|| panic!("{needle} not in this file"))
        + 1;
    format!("tests/cpu_flamegraph.rs:{n}:")
}

/// Records the workload; returns the trace files' directory and profile.
fn record() -> (tempfile::TempDir, Vec<std::path::PathBuf>, Profile) {
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .flush_interval(Duration::from_millis(10))
        .cpu_profile(499)
        .start()
        .unwrap();
    let rt = common::instrumented_runtime();
    rt.block_on(async {
        // Let the writer start sampling the workers before the work.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let until = Instant::now() + Duration::from_millis(800);
        let hot = tokio::spawn(hot_task(until));
        let nap = tokio::spawn(nap_task(until));
        hot.await.unwrap();
        nap.await.unwrap();
    });
    drop(rt);
    g.finish().unwrap();
    let files = runtrace_format::files::expand_lenient(vec![dir.path().to_path_buf()]);
    let p = profile::load(&files).unwrap();
    (dir, files, p)
}

/// Whether the recording sampled at all (mode 1 or 2); fails under CI
/// when it did not, skips elsewhere.
fn sampled(p: &Profile) -> bool {
    let info = &p.info.first().expect("a PROFILE frame").1;
    if info.mode != 0 {
        return true;
    }
    let msg = format!("CPU profiling was impossible here: {}", info.message);
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("skipped: {msg}");
    false
}

fn finding_of<'a>(r: &'a Report, loc: &str) -> &'a runtrace_analyze::Finding {
    r.findings
        .iter()
        .find(|f| f.spawn_loc.as_deref().is_some_and(|l| l.starts_with(loc)))
        .unwrap_or_else(|| panic!("no finding blames {loc}:\n{r}"))
}

#[test]
fn flamegraph_and_analyze_name_the_hot_and_the_blocking_function() {
    let (_dir, files, p) = record();
    if !sampled(&p) {
        return;
    }
    let hot_loc = line_of("tokio::spawn(hot_task");
    let nap_loc = line_of("tokio::spawn(nap_task");
    let mut names = StackNames::recorded(&p);
    assert!(names.problems().is_empty(), "{:?}", names.problems());

    // `runtrace flamegraph --location <hot> --folded`.
    let sel = Selection {
        location: Some(hot_loc.clone()),
        ..Selection::default()
    };
    let folded = fold(stacks(&p, &sel, &mut names));
    let lines: Vec<(&str, u64)> = folded
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s, n.parse().unwrap())
        })
        .collect();
    let total: u64 = lines.iter().map(|l| l.1).sum();
    let through: u64 = lines
        .iter()
        .filter(|l| l.0.contains("rt_flame_hot"))
        .map(|l| l.1)
        .sum();
    assert!(
        total >= 20,
        "only {total} samples in polls of {hot_loc}:\n{folded}"
    );
    assert!(
        through * 10 >= total * 8,
        "{through} of {total} through rt_flame_hot:\n{folded}"
    );
    assert!(
        !folded.contains("rt_flame_nap"),
        "--location keeps only {hot_loc}:\n{folded}"
    );

    // `runtrace analyze`: the findings name the functions.
    let (mut r, p2) = analyze_files_profiled(&files, Options::default());
    r.add_functions(&p2, &mut names);
    let hot = finding_of(&r, &hot_loc);
    let c = hot
        .functions
        .as_ref()
        .expect("functions on the hot finding");
    assert!(!c.mostly_off_cpu, "{c:?}");
    assert!(
        c.functions[0].function.contains("rt_flame_hot"),
        "{c:?}\n{r}"
    );
    assert!(hot.detail.contains("burning CPU in"), "{}", hot.detail);

    // `runtrace analyze --all` and the MCP tools (one `TraceIndex`) and
    // `runtrace report` name it too.
    let ix = runtrace_analyze::index::TraceIndex::load(&files);
    let all = ix.run_all();
    let named = all["analyze"]["findings"]
        .as_array()
        .expect("analyze findings in run_all")
        .iter()
        .filter(|f| {
            f["spawn_loc"]
                .as_str()
                .is_some_and(|l| l.starts_with(&hot_loc))
        })
        .any(|f| {
            f["functions"][0]["function"]
                .as_str()
                .is_some_and(|n| n.contains("rt_flame_hot"))
        });
    assert!(
        named,
        "run_all does not name rt_flame_hot:\n{:#}",
        all["analyze"]
    );
    let page = _dir.path().join("report.html");
    runtrace_export::report::write(&files, &page).expect("write the report");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("burning CPU in") && html.contains("rt_flame_hot"),
        "the HTML report does not name rt_flame_hot"
    );

    let info = &p.info[0].1;
    if info.mode == 1 && info.off_cpu() {
        let nap = finding_of(&r, &nap_loc);
        let c = nap
            .functions
            .as_ref()
            .expect("functions on the nap finding");
        assert!(c.mostly_off_cpu, "{c:?}\n{r}");
        let top = &c.functions[0];
        assert!(
            top.off_cpu && top.function.contains("rt_flame_nap"),
            "{c:?}"
        );
        assert!(nap.detail.contains("blocked in"), "{}", nap.detail);
    } else {
        let msg = format!(
            "off-CPU part skipped: profiling mode {} ({})",
            info.mode, info.message
        );
        // CI runs as root with perf_event_open: off-CPU stacks must be
        // there, unless a run forced the signal fallback on purpose.
        if std::env::var("CI").is_ok_and(|v| v == "true")
            && std::env::var_os("RUNTRACE_CPU_FALLBACK").is_none()
        {
            panic!("{msg}");
        }
        eprintln!("{msg}");
    }
}
