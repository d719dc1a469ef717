//! A real program with a planted leak (issue 39): a tokio service whose
//! `leaky` handler remembers 16 KiB per request in a map that is never
//! pruned (in a function of its own, `remember`), and whose `steady`
//! handler allocates as much per request but keeps at most 8 entries.
//! Recorded through the global allocator wrapper with the live set on;
//! `memory_growth` must name the leaky handler's spawn location and
//! `remember`, and say nothing of the steady one.

mod common;

use runtrace_analyze::functions::StackNames;
use runtrace_analyze::{analyze_files, Options};
use runtrace_recorder::Recorder;
use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

#[global_allocator]
static A: runtrace::alloc::Sampled<std::alloc::System> =
    runtrace::alloc::Sampled::new(std::alloc::System);

static LEAK: Mutex<Option<HashMap<u64, Vec<u8>>>> = Mutex::new(None);
static CACHE: Mutex<VecDeque<Vec<u8>>> = Mutex::new(VecDeque::new());

const BLOCK: usize = 16 << 10;
const REQUESTS: u64 = 400;

/// The leak: one block per request, never removed.
#[inline(never)]
fn remember(i: u64) -> usize {
    let v = vec![i as u8; BLOCK];
    let mut m = LEAK.lock().unwrap();
    let m = m.get_or_insert_with(HashMap::new);
    m.insert(i, v);
    black_box(m.len())
}

/// Steady: one block per request, at most 8 kept.
#[inline(never)]
fn keep_recent(i: u64) -> usize {
    let v = vec![i as u8; BLOCK];
    let mut c = CACHE.lock().unwrap();
    c.push_back(v);
    if c.len() > 8 {
        c.pop_front();
    }
    black_box(c.len())
}

/// `tests/memory_leak.rs:N:` of the line holding `needle`.
fn line_of(needle: &str) -> String {
    let src = include_str!("memory_leak.rs");
    let n = src
        .lines()
        .position(|l| l.contains(needle) && !l.contains("line_of("))
        .unwrap()
        + 1;
    format!("tests/memory_leak.rs:{n}:")
}

#[test]
fn memory_growth_names_the_planted_leak_and_not_the_steady_handler() {
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .flush_interval(Duration::from_millis(5))
        .memory_profile(32 << 10)
        .memory_live(true)
        .start()
        .unwrap();
    let rt = common::instrumented_runtime();
    rt.block_on(async {
        for i in 0..REQUESTS {
            let leaky = tokio::spawn(async move { remember(i) }); // leaky handler
            let steady = tokio::spawn(async move { keep_recent(i) }); // steady handler
            black_box(leaky.await.unwrap() + steady.await.unwrap());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    drop(rt);
    let stats = g.finish().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    let profile = runtrace_model::profile::load(&files).unwrap();
    let mut r = analyze_files(&files, Options::default());
    r.add_functions(&profile, &mut StackNames::recorded(&profile));
    eprintln!("{r}");
    let leaky = line_of("// leaky handler");
    let steady = line_of("// steady handler");
    let growth: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind.as_str() == "memory_growth")
        .collect();
    assert!(
        growth
            .iter()
            .all(|f| !f.spawn_loc.as_deref().unwrap_or("").starts_with(&steady)),
        "the steady handler is not a leak: {growth:#?}"
    );
    let first = growth
        .first()
        .unwrap_or_else(|| panic!("no memory_growth (dropped {})", stats.dropped));
    assert!(
        first.spawn_loc.as_deref().unwrap().starts_with(&leaky),
        "{first:#?}"
    );
    assert!(
        first.evidence["function"]
            .as_str()
            .unwrap()
            .contains("remember"),
        "{first:#?}"
    );
    // The leak kept REQUESTS blocks: the live estimate at the end is
    // within 6 standard deviations of it (sd <= sqrt(bytes * mean)).
    let kept = (REQUESTS as usize * BLOCK) as f64;
    let end = first.evidence["end_bytes"].as_f64().unwrap();
    let sd = (kept * (32 << 10) as f64).sqrt();
    assert!(
        (end - kept).abs() <= 6.0 * sd + kept * 0.1,
        "end {end}, kept {kept}, sd {sd}"
    );
    black_box(LEAK.lock().unwrap().take());
}
