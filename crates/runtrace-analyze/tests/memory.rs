//! The memory profile's readers on a synthetic trace: allocation samples
//! attributed to the polls they were made in, frees (and realloc moves)
//! paired with their samples, the `--alloc` / `--live` folded stacks, and
//! the `memory_growth` finding.
//!
//! Timeline (1 tick = 1 ns), 20 rounds of 10 ms:
//! - task 1 (`src/leak.rs:10:5`) polls on worker 0 (tid 100) at
//!   `10 ms * i + 1 ms` for 4 ms and allocates 1 MiB (one sample, stack 1)
//!   that is never freed: live bytes grow by 1 MiB per round;
//! - task 2 (`src/steady.rs:20:5`) polls on worker 1 (tid 101) at
//!   `10 ms * i + 2 ms` for 4 ms, allocates 1 MiB (stack 2), moves it by
//!   realloc and frees it in the same poll; it also keeps one 2 MiB sample
//!   from its first poll to the end: live bytes flat at 2 MiB;
//! - one untracked 8 MiB sample of task 1 (the live set had no room):
//!   counted as allocated, never as live.

use runtrace_analyze::folded::{fold, stacks, MemoryView, Selection};
use runtrace_analyze::functions::StackNames;
use runtrace_model::profile::{self, Live, Profile};
use runtrace_model::synth::TraceBuilder;

const MS: u64 = 1_000_000;
const MIB: u64 = 1 << 20;
const WRITER: u64 = 1;
const W0: u64 = 100;
const W1: u64 = 101;
const ROUNDS: u64 = 20;

fn trace() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.thread_name(W0, "tokio-runtime-worker");
    b.thread_name(W1, "tokio-runtime-worker");
    b.thread_name(WRITER, "runtrace-writer");
    b.location(1, "src/leak.rs", 10, 5);
    b.location(2, "src/steady.rs", 20, 5);
    b.stacks(&[(1, &[0x40_1000, 0x40_0100]), (2, &[0x40_2000, 0x40_0100])]);
    b.spawn(W0, 0, 1, 0, 1, 0);
    b.spawn(W1, 0, 2, 1, 2, 0);
    for i in 0..ROUNDS {
        let t = i * 10 * MS;
        b.poll_start(W0, 0, t + MS, 1, 0, 0);
        b.alloc_sample(
            WRITER,
            t + 2 * MS,
            W0,
            1,
            4096,
            MIB,
            0x1000_0000 + i * 0x1000,
            1,
        );
        if i == 3 {
            b.alloc_sample(
                WRITER,
                t + 2 * MS + 1,
                W0,
                1,
                8 * MIB,
                8 * MIB,
                0x2000_0000,
                2,
            );
        }
        b.poll_end(W0, 0, t + 5 * MS, 1, false);
        b.poll_start(W1, 1, t + 2 * MS, 2, 0, 0);
        let a = 0x3000_0000 + i * 0x1000;
        b.alloc_sample(WRITER, t + 3 * MS, W1, 2, 4096, MIB, a, 1);
        if i == 0 {
            b.alloc_sample(
                WRITER,
                t + 3 * MS + 1,
                W1,
                2,
                2 * MIB,
                2 * MIB,
                0x5000_0000,
                1,
            );
        }
        b.alloc_free(WRITER, t + 4 * MS, W1, a, a + 0x100_0000); // moved
        b.alloc_free(WRITER, t + 5 * MS, W1, a + 0x100_0000, 0); // freed
        b.poll_end(W1, 1, t + 6 * MS, 2, false);
    }
    b.finish()
}

fn load() -> (tempfile::TempDir, Profile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, trace()).unwrap();
    let p = profile::load(&[path]).unwrap();
    (dir, p)
}

/// The counts of folded output, summed.
fn folded_total(p: &Profile, sel: &Selection) -> u64 {
    let mut names = StackNames::recorded(p);
    fold(stacks(p, sel, &mut names))
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

fn memory(view: MemoryView) -> Selection {
    Selection {
        memory: Some(view),
        ..Selection::default()
    }
}

#[test]
fn samples_are_attributed_and_frees_paired() {
    let (_d, p) = load();
    assert_eq!(p.allocs.len() as u64, 2 * ROUNDS + 2);
    assert!(p.memory.live_set);
    assert_eq!(p.memory.unmatched_frees, 0);
    let leak: Vec<_> = p
        .allocs
        .iter()
        .filter(|s| s.stack[0] == 0x40_1000)
        .collect();
    assert!(leak
        .iter()
        .all(|s| s.location.as_deref() == Some("src/leak.rs:10:5") && s.task == Some(1)));
    assert!(leak
        .iter()
        .all(|s| s.freed_ns.is_none() || s.live == Live::Untracked));
    let steady: Vec<_> = p
        .allocs
        .iter()
        .filter(|s| s.stack[0] == 0x40_2000)
        .collect();
    assert!(steady.iter().all(|s| s.worker == Some(1)));
    // Every 1 MiB steady sample was freed 2 ms after it was made (the move
    // in between is not a free).
    for s in steady.iter().filter(|s| s.weight == MIB) {
        assert_eq!(s.freed_ns, Some(s.ts_ns + 2 * MS as i64));
    }
}

#[test]
fn alloc_and_live_folded_stacks_sum_to_the_weights() {
    let (_d, p) = load();
    let allocated = ROUNDS * MIB + 8 * MIB + ROUNDS * MIB + 2 * MIB;
    assert_eq!(folded_total(&p, &memory(MemoryView::Alloc)), allocated);
    // At the end: the leak's tracked samples and the steady 2 MiB; never
    // the untracked 8 MiB.
    let live_end = ROUNDS * MIB + 2 * MIB;
    assert_eq!(
        folded_total(&p, &memory(MemoryView::Live { at_ns: None })),
        live_end
    );
    // At 55.5 ms: leak rounds 0..=5 made (6 MiB); steady round 5's 1 MiB
    // (made at 53 ms) was freed at 55 ms.
    let at = (55 * MS + MS / 2) as i64;
    assert_eq!(
        folded_total(&p, &memory(MemoryView::Live { at_ns: Some(at) })),
        6 * MIB + 2 * MIB
    );
    // At 54 ms steady round 5's 1 MiB is live (made 53 ms, freed 55 ms).
    let at = (54 * MS) as i64;
    assert_eq!(
        folded_total(&p, &memory(MemoryView::Live { at_ns: Some(at) })),
        6 * MIB + 2 * MIB + MIB
    );
    // The location filter applies.
    let steady_only = Selection {
        location: Some("steady.rs".into()),
        ..memory(MemoryView::Alloc)
    };
    assert_eq!(folded_total(&p, &steady_only), ROUNDS * MIB + 2 * MIB);
}

#[test]
fn live_without_a_live_set_says_why() {
    let mut b = TraceBuilder::new();
    b.alloc_sample(WRITER, 5 * MS, W0, 0, 64, 4096, 0x1000, 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();
    let p = profile::load(&[path]).unwrap();
    assert!(!p.memory.live_set);
    assert_eq!(folded_total(&p, &memory(MemoryView::Alloc)), 4096);
    let sel = memory(MemoryView::Live { at_ns: None });
    assert_eq!(folded_total(&p, &sel), 0);
    let why = runtrace_analyze::folded::why_empty(&p, &sel);
    assert!(why.contains("RUNTRACE_ALLOC_LIVE=on"), "{why}");
}

#[test]
fn memory_growth_names_the_growing_location_only() {
    let (dir, p) = load();
    let path = dir.path().join("trace.0.bin");
    let mut r = runtrace_analyze::analyze_files(&[path], runtrace_analyze::Options::default());
    r.add_functions(&p, &mut StackNames::recorded(&p));
    let growth: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind.as_str() == "memory_growth")
        .collect();
    assert_eq!(growth.len(), 1, "{:#?}", r.findings);
    let g = growth[0];
    assert_eq!(g.spawn_loc.as_deref(), Some("src/leak.rs:10:5"));
    assert!(
        g.detail
            .starts_with("src/leak.rs:10:5 keeps memory allocated in "),
        "{}",
        g.detail
    );
    // 1 MiB every 10 ms: a slope of ~100 MiB/s, a perfect line.
    let slope = g.evidence["slope_bytes_per_sec"].as_f64().unwrap();
    assert!((slope / (100.0 * MIB as f64) - 1.0).abs() < 0.1, "{slope}");
    assert!(g.evidence["r2"].as_f64().unwrap() > 0.95);
    assert_eq!(g.evidence["end_bytes"], ROUNDS * MIB);
    // The per-location table: both locations, allocation and live bytes.
    let leak = r
        .memory
        .iter()
        .find(|m| m.location == "src/leak.rs:10:5")
        .unwrap();
    assert_eq!(leak.alloc_bytes, ROUNDS * MIB + 8 * MIB);
    assert_eq!(leak.live_end_bytes, Some(ROUNDS * MIB));
    let steady = r
        .memory
        .iter()
        .find(|m| m.location == "src/steady.rs:20:5")
        .unwrap();
    assert_eq!(steady.live_end_bytes, Some(2 * MIB));
    assert!(steady.alloc_bytes_per_sec > 0.0);
    let text = r.to_string();
    assert!(text.contains("=== Memory"), "{text}");
    assert!(
        text.contains("[WARNING] memory_growth at src/leak.rs:10:5: "),
        "{text}"
    );
}

/// Issue 39 item 3: allocation rate and live bytes per span label. On
/// worker 0 each of 10 polls enters a `GET /leak` request span (its fields
/// vary by query string, the label does not) and, inside it, a `db.query`
/// span: a 1 MiB sample in the request span never freed, a 256 KiB one in
/// `db.query` (the innermost span: it counts there, not in the request)
/// freed before the poll ends, and a 64 KiB one after the request span's
/// exit (outside spans). The samples are delivered late (after the exits:
/// the writer thread writes them), as the recorder does.
fn span_trace() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.thread_name(WRITER, "runtrace-writer");
    b.location(1, "src/http.rs", 4, 9);
    // What a recording with a memory profile and no CPU profile writes.
    b.profile(&runtrace_format::frame::ProfileInfo {
        mode: 0,
        hz: 0,
        flags: 0,
        message: "CPU profiling not asked for".into(),
    });
    b.stacks(&[(1, &[0x40_1000])]);
    b.spawn(W0, 0, 1, 0, 1, 0);
    for i in 0..10u64 {
        let t = i * 10 * MS;
        let (req, db) = (100 + 2 * i, 101 + 2 * i);
        b.poll_start(W0, 0, t + MS, 1, 0, 0);
        b.span_new(
            W0,
            t + MS + 10,
            req,
            0,
            "request",
            &format!("method=GET uri=/leak?n={i}"),
        );
        b.span_enter(W0, t + MS + 20, req);
        b.span_new(W0, t + MS + 30, db, req, "db.query", "");
        b.span_enter(W0, t + 2 * MS, db);
        b.span_exit(W0, t + 3 * MS, db);
        b.span_exit(W0, t + 4 * MS, req);
        b.span_close(W0, t + 4 * MS + 1, db);
        b.span_close(W0, t + 4 * MS + 2, req);
        b.poll_end(W0, 0, t + 5 * MS, 1, false);
        b.alloc_sample(
            WRITER,
            t + MS + 500,
            W0,
            1,
            64,
            MIB,
            0x1000_0000 + i * 0x1000,
            1,
        );
        let q = 0x2000_0000 + i * 0x1000;
        b.alloc_sample(WRITER, t + 2 * MS + 500, W0, 1, 64, 256 << 10, q, 1);
        b.alloc_free(WRITER, t + 4 * MS + 500, W0, q, 0);
        b.alloc_sample(
            WRITER,
            t + 4 * MS + 100,
            W0,
            1,
            64,
            64 << 10,
            0x3000_0000 + i * 0x1000,
            1,
        );
    }
    b.finish()
}

#[test]
fn memory_per_span_label_counts_the_innermost_span() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, span_trace()).unwrap();
    let p = profile::load(std::slice::from_ref(&path)).unwrap();
    let spans: Vec<Option<&str>> = p.allocs.iter().take(3).map(|s| s.span.as_deref()).collect();
    assert_eq!(spans, [Some("GET /leak"), Some("db.query"), None]);
    let m = runtrace_analyze::memory::per_span(&p, 100 * MS);
    let row = |span: &str| {
        m.iter()
            .find(|r| r.span == span)
            .unwrap_or_else(|| panic!("{m:?}"))
    };
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m[0].span, "GET /leak", "most allocated first: {m:?}");
    assert_eq!(
        (row("GET /leak").alloc_bytes, row("GET /leak").samples),
        (10 * MIB, 10)
    );
    assert_eq!(row("GET /leak").live_end_bytes, Some(10 * MIB));
    assert_eq!(row("db.query").alloc_bytes, 10 * (256 << 10));
    assert_eq!(row("db.query").live_end_bytes, Some(0));
    assert_eq!(row("(outside spans)").live_end_bytes, Some(10 * (64 << 10)));
    // 10 MiB in 100 ms.
    assert!((row("GET /leak").alloc_bytes_per_sec / (100.0 * MIB as f64) - 1.0).abs() < 1e-9);
    // `runtrace analyze`: the text table and JSON `memory_spans`.
    let (mut r, p) = runtrace_analyze::runtime::analyze_files_profiled(
        &[path],
        runtrace_analyze::Options::default(),
    );
    r.add_functions(&p, &mut StackNames::recorded(&p));
    let text = r.to_string();
    assert!(text.contains("=== Memory per span"), "{text}");
    assert!(text.contains("10.0 MiB  GET /leak"), "{text}");
    let j = r.to_json();
    assert_eq!(j["memory_spans"][0]["span"], "GET /leak", "{j}");
    assert_eq!(j["memory_spans"][0]["alloc_bytes"], 10 * MIB);
    assert_eq!(j["memory_spans"][0]["live_end_bytes"], 10 * MIB);
    assert_eq!(j["memory_spans"][0]["samples"], 10);
    assert!(
        j["memory_spans"][0]["alloc_bytes_per_sec"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn no_span_table_without_spans() {
    let (_d, p) = load();
    assert!(p.allocs.iter().all(|s| s.span.is_none()));
    assert!(runtrace_analyze::memory::per_span(&p, 0).is_empty());
}
