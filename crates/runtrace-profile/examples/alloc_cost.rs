//! Cost of `runtrace_profile::alloc::on_alloc` (what `runtrace::alloc::Sampled`
//! adds to each allocation), median ns per call of 21 rounds:
//! `cargo run -p runtrace-profile --release --example alloc_cost`.
use runtrace_profile::alloc::{on_alloc, AllocSampling};
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
        on_alloc(black_box(size));
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
    let s = AllocSampling::start(512 * 1024).unwrap();
    let unsampled = median_ns(n, || calls(n, 64));
    drop(s);
    // Every call sampled (mean 1 byte, 64-byte allocations), drained by
    // this thread every 512 calls (the queue holds 1024).
    let mut s = AllocSampling::start(1).unwrap();
    let mut out = Vec::new();
    // The countdown drawn at 512 KiB runs out first (docs/memory.md, Limits).
    calls(1_000_000, 64);
    s.drain(&mut out);
    let m = 512;
    let sampled = median_ns(m * 20, || {
        for _ in 0..20 {
            calls(m, 64);
            out.clear();
            assert_eq!(s.drain(&mut out), 0);
            assert_eq!(out.len() as u64, m);
        }
    });
    drop(s);
    println!("empty loop {empty:.2} ns/iter; on_alloc inert {inert:.2} ns; sampling on, not sampled (64 B at 512 KiB) {unsampled:.2} ns; sampled (incl. drain) {sampled:.0} ns");
}
