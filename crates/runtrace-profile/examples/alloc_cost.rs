//! Cost of `runtrace_profile::alloc::on_alloc` (what `runtrace::alloc::Sampled`
//! adds to each allocation) and of `on_free` (to each free), median ns per
//! call of 21 rounds, all cases side by side in one run:
//! `cargo run -p runtrace-profile --release --example alloc_cost`.
use runtrace_profile::alloc::{on_alloc, on_free, AllocSampling};
use std::hint::black_box;
use std::time::Instant;

fn median_ns(calls: u64, mut round: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            round();
            t.elapsed().as_nanos() as f64 / calls as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[10]
}

#[inline(never)]
fn calls(n: u64, size: usize) {
    for _ in 0..n {
        on_alloc(black_box(0x10_0000), black_box(size));
    }
}

/// `n` frees of addresses never sampled.
#[inline(never)]
fn frees(n: u64) {
    for i in 0..n {
        on_free(black_box(0x10_0000 + (i as usize & 0xffff) * 64));
    }
}

/// `n` sampled allocations at distinct addresses, then their frees.
#[inline(never)]
fn sampled_then_freed(n: u64, base: usize) {
    for i in 0..n as usize {
        on_alloc(black_box(base + i * 64), 64);
    }
    for i in 0..n as usize {
        on_free(black_box(base + i * 64));
    }
}

fn main() {
    let n = 1_000_000;
    let empty = median_ns(n, || {
        for i in 0..n {
            black_box(i);
        }
    });
    let inert = median_ns(n, || calls(n, 64));
    let free_inert = median_ns(n, || frees(n));
    let s = AllocSampling::start(512 * 1024, false).unwrap();
    let unsampled = median_ns(n, || calls(n, 64));
    drop(s);
    // Every call sampled (mean 1 byte, 64-byte allocations), drained by
    // this thread every 512 calls (the queue holds 1024).
    let mut s = AllocSampling::start(1, false).unwrap();
    let mut out = Vec::new();
    // The countdown drawn at 512 KiB runs out first (docs/memory.md, Limits).
    calls(1_000_000, 64);
    s.drain(&mut out, 0);
    let m = 512;
    let sampled = median_ns(m * 20, || {
        for _ in 0..20 {
            calls(m, 64);
            out.clear();
            assert_eq!(s.drain(&mut out, 0), 0);
            assert_eq!(out.len() as u64, m);
        }
    });
    drop(s);
    // The live set on: a free of an unsampled address (a lookup that
    // misses), and sampled allocations with their frees (incl. drain).
    let s = AllocSampling::start(512 * 1024, true).unwrap();
    let free_live_miss = median_ns(n, || frees(n));
    drop(s);
    let mut s = AllocSampling::start(1, true).unwrap();
    calls(1_000_000, 64);
    out.clear();
    s.drain(&mut out, 0);
    let m2 = 256; // a sample and a free each: 512 records per round
    let mut base = 0x4000_0000usize;
    let sampled_live = median_ns(m2 * 20, || {
        for _ in 0..20 {
            sampled_then_freed(m2, base);
            base += 1 << 20;
            out.clear();
            assert_eq!(s.drain(&mut out, 0), 0);
            assert_eq!(out.len() as u64, 2 * m2, "a sample and a free each");
        }
    });
    drop(s);
    println!("empty loop {empty:.2} ns/iter; on_alloc inert {inert:.2} ns; sampling on, not sampled (64 B at 512 KiB) {unsampled:.2} ns; sampled (incl. drain) {sampled:.0} ns");
    println!("on_free, live set off {free_inert:.2} ns; live set on, unsampled address {free_live_miss:.2} ns; sampled + its free, live set on (incl. drain) {sampled_live:.0} ns");
}
