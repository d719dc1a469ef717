//! Sampled allocations end to end (issue 39, item 1): a test binary whose
//! global allocator is `runtrace::alloc::Sampled<System>`, recorded with
//! `Recorder::builder().memory_profile(..)`, read back as `alloc_sample`
//! events.
//!
//! The statistical bound: sampling is a Poisson process of mean spacing
//! `N` bytes, and an allocation of `s` bytes is sampled with probability
//! `p = 1 - exp(-s/N)` and weight `s/p`. The sum of the weights is an
//! unbiased estimate of the bytes allocated `B`, with variance
//! `sum s^2 (1-p)/p <= sum s N = B N`. With ~B/N = 4096 independent
//! samples the estimate is close to normal, and the test allows 6 standard
//! deviations: `|estimate - B| <= 6 sqrt(B N)` (9.4% of B here), which a
//! correct sampler fails about once in 10^9 runs.

use runtrace_format::merge::EventStream;
use runtrace_recorder::Recorder;
use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static A: runtrace::alloc::Sampled<std::alloc::System> =
    runtrace::alloc::Sampled::new(std::alloc::System);

/// One test at a time: a process samples for one recording at a time.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct AllocSample {
    tid: u64,
    stack: u64,
    size: u64,
    weight: u64,
}

fn samples(dir: &std::path::Path) -> Vec<AllocSample> {
    let files = runtrace_format::files::expand_lenient(vec![dir.to_path_buf()]);
    let mut s = EventStream::open(&files).unwrap();
    let mut out = Vec::new();
    while let Some(ev) = s.next_event() {
        if ev.schema.name == "alloc_sample" {
            out.push(AllocSample {
                tid: ev.u64("tid").unwrap(),
                stack: ev.u64("stack").unwrap(),
                size: ev.u64("size").unwrap(),
                weight: ev.u64("weight").unwrap(),
            });
        }
    }
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    out
}

/// Allocates `total` bytes in blocks of 16 B .. 64 KiB (a fixed cycle of
/// sizes), each freed at once; returns the bytes allocated. Pauses 1 ms
/// every 2 MiB so that the writer (a 5 ms round) drains the samples long
/// before the sample queue (1024 records) could fill: a lost sample would
/// bias the estimate.
#[inline(never)]
fn rt_alloc_churn(total: u64) -> u64 {
    let mut next_pause = 2 << 20;
    let sizes = [16usize, 100, 1000, 4096, 20_000, 65_536, 300, 48];
    let mut done = 0u64;
    let mut i = 0;
    while done < total {
        let n = sizes[i % sizes.len()];
        let v: Vec<u8> = Vec::with_capacity(n);
        black_box(&v);
        drop(v);
        done += n as u64;
        i += 1;
        if done >= next_pause {
            std::thread::sleep(Duration::from_millis(1));
            next_pause += 2 << 20;
        }
    }
    black_box(done)
}

#[test]
fn sampled_weights_estimate_the_bytes_allocated() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    const MEAN: u64 = 64 << 10;
    const BYTES: u64 = 256 << 20;
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .flush_interval(Duration::from_millis(5))
        .memory_profile(MEAN)
        .start()
        .unwrap();
    let (tid, allocated) = std::thread::spawn(|| {
        let tid = runtrace_core::clock::gettid();
        (tid, rt_alloc_churn(BYTES))
    })
    .join()
    .unwrap();
    let stats = g.finish().unwrap();
    assert_eq!(stats.dropped, 0, "lost samples would bias the estimate");
    let all = samples(dir.path());
    let mine: Vec<_> = all.iter().filter(|s| s.tid == tid).collect();
    let est: u64 = mine.iter().map(|s| s.weight).sum();
    let bound = 6.0 * ((allocated as f64) * MEAN as f64).sqrt();
    let err = est as f64 - allocated as f64;
    assert!(
        err.abs() <= bound,
        "estimated {est} B from {} samples, allocated {allocated} B: off by {err}, bound {bound}",
        mine.len()
    );
    // Every sample has a stack, and a weight of at least its size.
    assert!(mine.len() > 1000, "{} samples", mine.len());
    for s in &mine {
        assert!(s.stack != 0, "a sample without a stack");
        assert!(s.weight >= s.size && s.size > 0);
    }
    // The 64 KiB blocks: sampled with p = 1 - 1/e, weight 64 KiB / p.
    let big = mine.iter().filter(|s| s.size == 65_536).count() as f64;
    let big_allocs = (BYTES / (16 + 100 + 1000 + 4096 + 20_000 + 65_536 + 300 + 48)) as f64;
    let p = 1.0 - (-1.0f64).exp();
    let sd = (big_allocs * p * (1.0 - p)).sqrt();
    assert!(
        (big - big_allocs * p).abs() <= 6.0 * sd,
        "{big} samples of 64 KiB blocks, expected {} +- {}",
        big_allocs * p,
        6.0 * sd
    );
}

#[test]
fn many_threads_allocate_while_sampled_without_deadlock() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .flush_interval(Duration::from_millis(5))
        // ~120 samples per thread, all threads sampling at once; paced (a
        // 1 ms pause every 1000 allocations) so that a writer round late
        // on a loaded machine does not let the queue (1024 records) starve
        // a thread entirely (lost samples are counted, never block).
        .memory_profile(256 << 10)
        .start()
        .unwrap();
    let threads: Vec<_> = (0..16)
        .map(|t| {
            std::thread::spawn(move || {
                let mut keep = Vec::new();
                for i in 0..20_000usize {
                    let mut v = vec![t as u8; (i * 37) % 3000 + 1];
                    v.push(1); // a realloc
                    keep.push(v);
                    if keep.len() > 64 {
                        keep.clear();
                    }
                    if i % 1000 == 999 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                (runtrace_core::clock::gettid(), black_box(keep.len()))
            })
        })
        .collect();
    let tids: Vec<u64> = threads.into_iter().map(|h| h.join().unwrap().0).collect();
    g.finish().unwrap();
    let all = samples(dir.path());
    for tid in tids {
        let n = all.iter().filter(|s| s.tid == tid).count();
        assert!(n > 0, "thread {tid}: no samples");
    }
}

#[test]
fn without_a_memory_profile_nothing_is_sampled() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();
    black_box(rt_alloc_churn(16 << 20));
    g.finish().unwrap();
    assert_eq!(samples(dir.path()).len(), 0);
}

/// One `alloc_sample` or `alloc_free` of a live-set recording, in order.
enum LiveEv {
    Sample {
        tid: u64,
        addr: u64,
        size: u64,
        live: u64,
    },
    Free {
        addr: u64,
        moved_to: u64,
    },
    Note {
        untracked: u64,
        lost_frees: u64,
    },
}

fn live_events(dir: &std::path::Path) -> Vec<LiveEv> {
    let files = runtrace_format::files::expand_lenient(vec![dir.to_path_buf()]);
    let mut s = EventStream::open(&files).unwrap();
    let mut out = Vec::new();
    while let Some(ev) = s.next_event() {
        match ev.schema.name.as_ref() {
            "alloc_sample" => out.push(LiveEv::Sample {
                tid: ev.u64("tid").unwrap(),
                addr: ev.u64("addr").unwrap(),
                size: ev.u64("size").unwrap(),
                live: ev.u64("live").unwrap(),
            }),
            "alloc_free" => out.push(LiveEv::Free {
                addr: ev.u64("addr").unwrap(),
                moved_to: ev.u64("moved_to").unwrap(),
            }),
            "alloc_note" => out.push(LiveEv::Note {
                untracked: ev.u64("untracked").unwrap(),
                lost_frees: ev.u64("lost_frees").unwrap(),
            }),
            _ => {}
        }
    }
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    out
}

/// Bytes each worker keeps past the end of the recording, in blocks.
const KEPT_BLOCK: usize = 1 << 20;
const KEPT_BLOCKS: usize = 16;

#[test]
fn live_set_pairs_every_free_under_many_threads() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .flush_interval(Duration::from_millis(5))
        .memory_profile(256 << 10)
        .memory_live(true)
        .start()
        .unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut kept: Vec<Vec<u8>> = Vec::with_capacity(KEPT_BLOCKS);
                let mut churn = Vec::new();
                for i in 0..20_000usize {
                    let mut v = vec![t as u8; (i * 37) % 3000 + 1];
                    v.push(1); // a realloc: sampled ones move
                    churn.push(v);
                    if churn.len() > 64 {
                        churn.clear();
                    }
                    if i % 1000 == 0 && kept.len() < KEPT_BLOCKS {
                        kept.push(vec![0u8; KEPT_BLOCK]); // untouched pages
                    }
                    if i % 250 == 249 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                drop(churn);
                (runtrace_core::clock::gettid(), kept)
            })
        })
        .collect();
    let done: Vec<(u64, Vec<Vec<u8>>)> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    let stats = g.finish().unwrap();
    // Lost records (a full queue on a loaded machine) are allowed, but
    // every lost free must be reported by an alloc_note.
    let dropped = stats.dropped;
    // Replay: what is live at the end, by address.
    let mut live: std::collections::HashMap<u64, Vec<(u64, u64)>> = Default::default();
    let (mut frees, mut unmatched, mut moves, mut lost) = (0, 0, 0, 0);
    for ev in live_events(dir.path()) {
        match ev {
            LiveEv::Sample {
                tid,
                addr,
                size,
                live: l,
            } => {
                assert!(
                    l == 1 || l == 2,
                    "live set on: tracked or untracked, got {l}"
                );
                assert!(addr != 0);
                if l == 1 {
                    live.entry(addr).or_default().push((tid, size));
                }
            }
            LiveEv::Free { addr, moved_to } => {
                frees += 1;
                match live.remove(&addr) {
                    None => unmatched += 1,
                    Some(v) if moved_to != 0 => {
                        moves += 1;
                        live.entry(moved_to).or_default().extend(v);
                    }
                    Some(_) => {}
                }
            }
            LiveEv::Note {
                untracked,
                lost_frees,
            } => {
                lost += lost_frees;
                assert_eq!(untracked, 0, "the table is far from full here");
            }
        }
    }
    assert!(frees > 1000 && moves > 0, "{frees} frees, {moves} moves");
    assert_eq!(unmatched, 0, "every free names a live sample");
    assert!(
        lost <= dropped,
        "{lost} lost frees, {dropped} records dropped"
    );
    let mut freed_but_live = 0;
    for (tid, kept) in &done {
        assert_eq!(kept.len(), KEPT_BLOCKS);
        let mine: Vec<u64> = live
            .values()
            .flatten()
            .filter(|s| s.0 == *tid)
            .map(|s| s.1)
            .collect();
        let blocks = mine.iter().filter(|&&s| s == KEPT_BLOCK as u64).count();
        // p = 1 - exp(-4) per block: 16 blocks give ~15.7; < 11 is ~1e-7.
        assert!(blocks >= 11, "thread {tid}: {blocks} kept blocks live");
        // Everything else the worker allocated was freed, but the `kept`
        // vector itself (allocated once with its capacity).
        let others: Vec<u64> = mine
            .into_iter()
            .filter(|&s| s != KEPT_BLOCK as u64)
            .collect();
        let holder = (KEPT_BLOCKS * std::mem::size_of::<Vec<u8>>()) as u64;
        freed_but_live += others.iter().filter(|&&s| s != holder).count() as u64;
    }
    assert!(
        freed_but_live <= lost,
        "{freed_but_live} freed allocations still live, {lost} lost frees reported"
    );
    drop(done);
}
