//! CPU samples in the analyses, on a synthetic trace whose stacks are
//! addresses of this test binary's own functions (its mapping read from
//! /proc/self/maps), so symbolization is real:
//! - `runtrace blocked`: a task waits 40 ms behind a poll of `src/hot.rs`
//!   that burns CPU in `hot_parse`: the culprit is `src/hot.rs` with
//!   `hot_parse` its top self function and `run_handler` inclusive;
//! - the findings' `functions`: the long poll of `src/hot.rs` is "burning
//!   CPU in hot_parse", the long poll of `src/sleepy.rs` is "blocked in
//!   sleepy_wait"; a trace without samples keeps its report unchanged.
//!
//! Timeline (1 tick = 1 ns), worker 0 on tid 100, worker 1 on tid 101:
//! - task 1 (`src/hot.rs:10:5`) polls 1..41 ms on worker 0; on-CPU samples
//!   every ms from 2 to 40 ms: 30 in `hot_parse`, 9 in `cold_helper`, both
//!   called from `run_handler`;
//! - task 2 (`src/victim.rs:20:5`) is spawned at 2 ms and first polled at
//!   42 ms on worker 0: a 40 ms wait;
//! - task 3 (`src/sleepy.rs:30:5`) polls 50..110 ms on worker 1, off-CPU
//!   55 ms in libc's `nanosleep` called by `sleepy_wait` (switch-in at
//!   108 ms), preempted 1 ms in `hot_parse` (switch-in at 53 ms), 2 on-CPU
//!   samples.

use runtrace_analyze::blocked::{analyze_files, BlockedOptions};
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::runtime::analyze_files_profiled;
use runtrace_analyze::{analyze_files as analyze, FindingKind, Options};
use runtrace_format::frame::ProfileInfo;
use runtrace_model::profile;
use runtrace_model::synth::TraceBuilder;
use self_maps::{inside, mapping_of};
use std::hint::black_box;
use std::path::PathBuf;

mod self_maps;

const MS: u64 = 1_000_000;
const WRITER: u64 = 999;

#[inline(never)]
fn hot_parse(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

#[inline(never)]
fn cold_helper(x: u64) -> u64 {
    black_box(x) ^ 0x55
}

#[inline(never)]
fn run_handler(x: u64) -> u64 {
    hot_parse(x) + cold_helper(x)
}

extern "C" {
    /// libc's, where the thread of a blocking sleep leaves user space.
    fn nanosleep(req: *const u8, rem: *mut u8) -> i32;
}

/// An address inside libc's `nanosleep` (a shared library: an off-CPU
/// stack whose leaf is there blocked in a system call).
fn in_libc() -> u64 {
    let f: unsafe extern "C" fn(*const u8, *mut u8) -> i32 = nanosleep;
    f as usize as u64 + 4
}

#[inline(never)]
fn sleepy_wait(x: u64) -> u64 {
    std::thread::sleep(std::time::Duration::from_nanos(black_box(x) % 2));
    x
}

/// The scenario above; `samples`: with the profile (else the same events
/// without it).
fn scenario(samples: bool) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/hot.rs", 10, 5);
    b.location(2, "src/victim.rs", 20, 5);
    b.location(3, "src/sleepy.rs", 30, 5);
    b.thread_name(WRITER, "runtrace-writer");
    if samples {
        let handler = inside(run_handler);
        b.profile(&ProfileInfo {
            mode: 1,
            hz: 1000,
            flags: 1,
            message: String::new(),
        });
        b.mappings(&[mapping_of(handler), mapping_of(in_libc())]);
        b.stacks(&[
            (1, &[inside(hot_parse), handler][..]),
            (2, &[inside(cold_helper), handler][..]),
            (3, &[in_libc(), inside(sleepy_wait), handler][..]),
            // Preempted while computing: the leaf is in its own code.
            (4, &[inside(hot_parse), inside(sleepy_wait), handler][..]),
        ]);
    }
    b.spawn(100, 500_000, 1, 0, 1, 0);
    b.poll_start(100, 0, MS, 1, 0, 0);
    b.spawn(100, 2 * MS, 2, 0, 2, 0);
    b.poll_end(100, 0, 41 * MS, 1, false);
    b.poll_start(100, 0, 42 * MS, 2, 0, 0);
    b.poll_end(100, 0, 43 * MS, 2, true);
    b.spawn(101, 49 * MS, 3, 0, 3, 0);
    b.poll_start(101, 1, 50 * MS, 3, 0, 0);
    b.poll_end(101, 1, 110 * MS, 3, true);
    if samples {
        for ms in 2..=40u64 {
            // 30 in hot_parse, 9 in cold_helper (every 4th from 4 ms on).
            let stack = if ms % 4 == 0 && ms <= 36 { 2 } else { 1 };
            b.cpu_sample(WRITER, ms * MS, 100, stack);
        }
        b.cpu_sample(WRITER, 51 * MS, 101, 1);
        b.cpu_sample(WRITER, 52 * MS, 101, 1);
        b.off_cpu(WRITER, 53 * MS, 101, 4, MS);
        b.off_cpu(WRITER, 108 * MS, 101, 3, 55 * MS);
    }
    b.finish()
}

fn write(dir: &tempfile::TempDir, bytes: &[u8]) -> Vec<PathBuf> {
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, bytes).unwrap();
    vec![path]
}

#[test]
fn the_sample_counts_of_the_scenario_are_as_described() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &scenario(true));
    let p = profile::load(&paths).unwrap();
    assert_eq!(p.samples.len(), 39 + 2 + 2);
    let in_hot = p
        .samples
        .iter()
        .filter(|s| s.location.as_deref() == Some("src/hot.rs:10:5"))
        .count();
    assert_eq!(in_hot, 39);
}

#[test]
fn blocked_blames_the_culprit_location_and_names_its_hot_function() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &scenario(true));
    let (r, _, _) = analyze_files(&paths, &BlockedOptions::default(), Default::default());
    assert!(!r.damaged, "{:?}", r.errors);
    assert_eq!(r.waits, 1, "{r}");
    assert_eq!(r.waits_with_samples, 1);
    // The wait is [2 ms, 42 ms] on tid 100: every sample of tid 100.
    assert_eq!(r.samples, 39, "{r}");
    let c = &r.culprits[0];
    assert_eq!(c.location, "src/hot.rs:10:5", "{r}");
    assert_eq!(c.samples, 39);
    assert_eq!(c.victims, vec![("src/victim.rs:20:5".to_string(), 1)]);
    assert!(c.functions_self[0].function.contains("hot_parse"), "{r}");
    assert_eq!(c.functions_self[0].samples, 30);
    assert!(c.functions_self[1].function.contains("cold_helper"), "{r}");
    assert_eq!(c.functions_self[1].samples, 9);
    let top_incl = &c.functions_inclusive[0];
    assert!(top_incl.function.contains("run_handler"), "{r}");
    assert_eq!(top_incl.inclusive, 39);
    assert!(
        top_incl
            .file
            .as_deref()
            .is_some_and(|f| f.ends_with("cpu.rs")),
        "{top_incl:?}"
    );
    // The JSON has the documented keys.
    let j = r.to_json();
    assert_eq!(j["culprits"][0]["location"], "src/hot.rs:10:5");
    assert_eq!(j["culprits"][0]["functions_self"][0]["samples"], 30);
    assert_eq!(j["worst"][0]["delay_ns"], 40 * MS);
    assert_eq!(j["worst"][0]["culprit"], "src/hot.rs:10:5");
    // The text names them too.
    let text = r.to_string();
    assert!(
        text.contains("src/hot.rs:10:5") && text.contains("hot_parse"),
        "{text}"
    );
}

#[test]
fn blocked_over_a_higher_threshold_finds_no_wait() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &scenario(true));
    let opts = BlockedOptions {
        threshold_ns: 50 * MS,
        ..BlockedOptions::default()
    };
    let (r, _, _) = analyze_files(&paths, &opts, Default::default());
    assert_eq!((r.waits, r.samples), (0, 0));
    assert!(r.culprits.is_empty());
    assert!(
        r.notes.iter().any(|n| n.contains("no task waited")),
        "{:?}",
        r.notes
    );
}

#[test]
fn findings_name_the_function_burning_cpu_and_the_one_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &scenario(true));
    let (mut r, p) = analyze_files_profiled(&paths, Options::default());
    assert_eq!(p.samples.len(), 43);
    r.add_functions(&p, &mut StackNames::recorded(&p));
    let hot = r
        .findings_of(FindingKind::LongPoll)
        .find(|f| f.spawn_loc.as_deref() == Some("src/hot.rs:10:5"))
        .expect("a long_poll finding for src/hot.rs");
    let c = hot.functions.as_ref().expect("functions");
    assert!(!c.mostly_off_cpu);
    assert!(c.functions[0].function.contains("hot_parse"), "{c:?}");
    assert!(!c.functions[0].off_cpu);
    assert_eq!(c.functions[0].samples, 30);
    assert!((c.functions[0].share - 30.0 / 39.0).abs() < 1e-9);
    assert!(hot.detail.contains("burning CPU in"), "{}", hot.detail);
    assert!(hot.detail.contains("hot_parse"), "{}", hot.detail);
    assert_eq!(hot.evidence["cpu_evidence"], "samples");

    let sleepy = r
        .findings_of(FindingKind::LongPoll)
        .find(|f| f.spawn_loc.as_deref() == Some("src/sleepy.rs:30:5"))
        .expect("a long_poll finding for src/sleepy.rs");
    let c = sleepy.functions.as_ref().expect("functions");
    assert!(c.mostly_off_cpu, "{c:?}");
    assert_eq!(c.off_cpu_ns, 55 * MS);
    assert!(c.functions[0].off_cpu);
    assert!(c.functions[0].function.contains("sleepy_wait"), "{c:?}");
    // Named by the application's frame, with the libc call it blocked in.
    assert!(
        c.functions[0]
            .via
            .as_deref()
            .is_some_and(|v| v.contains("sleep")),
        "{c:?}"
    );
    // The switch-out in its own code was a preemption, not blocking.
    assert_eq!((c.preempted_switches, c.preempted_ns), (1, MS));
    assert_eq!(c.off_cpu_switches, 1);
    assert!(sleepy.detail.contains("blocked in"), "{}", sleepy.detail);

    // JSON: `functions` entries with the documented keys.
    let j = r.to_json();
    let f = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["spawn_loc"] == "src/hot.rs:10:5")
        .unwrap();
    let top = &f["functions"][0];
    for k in ["function", "file", "line", "samples", "share", "off_cpu"] {
        assert!(top.get(k).is_some(), "{k} missing in {top}");
    }
    assert_eq!(f["cpu_profile"]["on_cpu_samples"], 39);
    // The text report says it.
    let text = r.to_string();
    assert!(text.contains("functions: burning CPU in"), "{text}");
    assert!(text.contains("functions: blocked in"), "{text}");
}

/// Issue 35 item 7: each finding opens with one line (severity, kind,
/// blamed location, top function and verdict, impact on other
/// locations), and the text leads with those lines, in blame order.
#[test]
fn headlines_lead_with_the_verdict_and_the_impact() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &scenario(true));
    let (mut r, p) = analyze_files_profiled(&paths, Options::default());
    r.add_functions(&p, &mut StackNames::recorded(&p));
    let hot = r
        .findings_of(FindingKind::LongPoll)
        .find(|f| f.spawn_loc.as_deref() == Some("src/hot.rs:10:5"))
        .unwrap();
    let h = hot.headline();
    assert!(
        h.starts_with("[CRITICAL] long_poll at src/hot.rs:10:5: burning CPU in ")
            || h.starts_with("[WARNING] long_poll at src/hot.rs:10:5: burning CPU in "),
        "{h}"
    );
    assert!(
        h.contains("hot_parse") && h.contains("(77% of 39 samples)"),
        "{h}"
    );
    let others: Vec<_> = hot
        .victims
        .iter()
        .filter(|v| v.location != "src/hot.rs:10:5")
        .collect();
    assert!(!others.is_empty(), "{:?}", hot.victims);
    let polls: u64 = others.iter().map(|v| v.delayed_polls).sum();
    assert!(
        h.contains(&format!("delayed {polls} poll")) && h.contains("other location"),
        "{h}"
    );
    assert!(!h.contains('\n'));
    let sleepy = r
        .findings_of(FindingKind::LongPoll)
        .find(|f| f.spawn_loc.as_deref() == Some("src/sleepy.rs:30:5"))
        .unwrap();
    let h = sleepy.headline();
    assert!(
        h.contains(": blocked in ") && h.contains("sleepy_wait"),
        "{h}"
    );
    assert!(h.contains("% of 55.00 ms blocked)"), "{h}");
    // The text leads with them, numbered in the findings' order; each
    // finding's evidence follows its headline.
    let text = r.to_string();
    assert!(text.starts_with("=== What to fix first"), "{text}");
    let first = r.fix_first();
    assert_eq!(
        first.len(),
        r.findings.len().min(runtrace_analyze::FIX_FIRST)
    );
    for (i, (line, f)) in first.iter().zip(&r.findings).enumerate() {
        assert_eq!(*line, format!("{}. {}", i + 1, f.headline()));
        assert!(text.contains(line.as_str()), "{text}");
        assert!(
            text.contains(&format!(
                "{}\n           evidence: {}",
                f.headline(),
                f.detail
            )),
            "{text}"
        );
    }
    assert!(text.find("=== What to fix first") < text.find("=== Summary"));
    // JSON carries each headline.
    let j = r.to_json();
    assert_eq!(j["findings"][0]["headline"], r.findings[0].headline());
}

#[test]
fn without_samples_the_report_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &scenario(false));
    let r = analyze(&paths, Options::default());
    let before = (r.to_json().to_string(), r.to_string());
    let mut r2 = r.clone();
    let p = profile::load(&paths).unwrap();
    assert!(p.samples.is_empty());
    r2.add_functions(&p, &mut StackNames::recorded(&p));
    assert_eq!((r2.to_json().to_string(), r2.to_string()), before);
    let j = r2.to_json();
    for f in j["findings"].as_array().unwrap() {
        assert!(f.get("functions").is_none(), "{f}");
        assert_eq!(f["evidence"]["cpu_evidence"], "none");
    }
}

/// One location (`src/conn.rs`, a connection handler) with 201 short
/// polls burning CPU in `hot_parse` (one on-CPU sample each: 201 ms of
/// CPU at 1 kHz) and 3 long polls of 30 ms that block 25 ms each in
/// `sleepy_wait` (75 ms off-CPU) with one on-CPU sample each in
/// `cold_helper`. Location-wide the polls mostly burn CPU in `hot_parse`;
/// the long polls, which the `long_poll` finding is about, mostly block.
fn mixed_location() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/conn.rs", 40, 9);
    let handler = inside(run_handler);
    b.profile(&ProfileInfo {
        mode: 1,
        hz: 1000,
        flags: 1,
        message: String::new(),
    });
    b.mappings(&[mapping_of(handler), mapping_of(in_libc())]);
    b.stacks(&[
        (1, &[inside(hot_parse), handler][..]),
        (2, &[inside(cold_helper), handler][..]),
        (3, &[in_libc(), inside(sleepy_wait), handler][..]),
    ]);
    b.spawn(100, 500_000, 1, 0, 1, 0);
    let mut t = MS;
    for i in 0..204u64 {
        b.poll_start(100, 0, t, 1, 0, 0);
        if i % 68 == 67 {
            // A long poll: 1 on-CPU sample, then blocked 25 ms.
            b.cpu_sample(WRITER, t + MS, 100, 2);
            b.off_cpu(WRITER, t + 28 * MS, 100, 3, 25 * MS);
            t += 30 * MS;
        } else {
            b.cpu_sample(WRITER, t + MS / 2, 100, 1);
            t += MS;
        }
        b.poll_end(100, 0, t, 1, false);
        t += MS / 10;
    }
    b.thread_name(WRITER, "runtrace-writer");
    b.finish()
}

#[test]
fn a_long_poll_is_judged_from_its_long_polls_not_from_the_location() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write(&dir, &mixed_location());
    let (mut r, p) = analyze_files_profiled(&paths, Options::default());
    r.add_functions(&p, &mut StackNames::recorded(&p));
    let f = r
        .findings_of(FindingKind::LongPoll)
        .find(|f| f.spawn_loc.as_deref() == Some("src/conn.rs:40:9"))
        .expect("a long_poll finding for src/conn.rs");
    let c = f.functions.as_ref().expect("functions");
    assert_eq!(c.polls_over_ns, 10 * MS);
    // Only the 3 long polls: 3 on-CPU samples, 75 ms blocked.
    assert_eq!(c.on_cpu_samples, 3, "{c:?}");
    assert_eq!((c.off_cpu_switches, c.off_cpu_ns), (3, 75 * MS));
    assert!(c.mostly_off_cpu, "{c:?}");
    assert!(c.functions[0].function.contains("sleepy_wait"), "{c:?}");
    assert!(c.functions[0].off_cpu);
    assert!(
        !c.functions.iter().any(|x| x.function.contains("hot_parse")),
        "hot_parse ran only in the short polls: {c:?}"
    );
    assert!(f.detail.contains("blocked in"), "{}", f.detail);
    assert!(f.detail.contains("sleepy_wait"), "{}", f.detail);
    assert!(f.detail.contains("polls over 10.00 ms"), "{}", f.detail);
    // The location-wide profile, kept apart: mostly CPU in hot_parse.
    let l = c.location.as_ref().expect("the location-wide line");
    assert_eq!(l.on_cpu_samples, 204);
    assert!(!l.mostly_off_cpu);
    let top = l.top.as_ref().expect("a top function");
    assert!(top.function.contains("hot_parse"), "{l:?}");
    let text = r.to_string();
    assert!(text.contains("all its polls: mostly on CPU"), "{text}");
    let j = r.to_json();
    let jf = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["kind"] == "long_poll")
        .unwrap();
    assert_eq!(jf["cpu_profile"]["polls_over_ns"], 10 * MS);
    assert_eq!(jf["cpu_profile"]["location"]["on_cpu_samples"], 204);
}
