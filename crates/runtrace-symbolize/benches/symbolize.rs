//! Symbolization cost, on this bench binary's own code (release, with
//! debug info: `[profile.bench] debug = 1`):
//! - `cold_1000_addresses`: a new Symbolizer resolving 1000 distinct
//!   addresses spread over the binary's executable mapping (opening the
//!   file, checking its build id, reading symbols and DWARF included);
//! - `warm_1000_addresses`: the same addresses again on a symbolizer that
//!   has seen the binary but not these addresses (blazesym's per-address
//!   work plus ours);
//! - `cached_stack_32`: a 32-frame stack whose addresses are all cached
//!   (what a profile with many samples of the same stacks costs).
//!
//! `cargo bench -p runtrace-symbolize --bench symbolize`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use runtrace_symbolize::{Mapping, SymbolizeOptions, Symbolizer};
use std::hint::black_box;

#[path = "../tests/support/mod.rs"]
mod support;

/// 1000 addresses spread over this binary's executable mapping, and the
/// mappings of this process.
fn inputs() -> (Vec<Mapping>, Vec<u64>) {
    let mappings = support::self_mappings();
    let me = support::me();
    let text = mappings
        .iter()
        .filter(|m| std::path::Path::new(&m.path) == me)
        .max_by_key(|m| m.end - m.start)
        .expect("no executable mapping of the bench binary");
    let step = (text.end - text.start) / 1000;
    let addrs = (0..1000).map(|i| text.start + i * step).collect();
    (mappings, addrs)
}

fn bench(c: &mut Criterion) {
    let (mappings, addrs) = inputs();
    let mut g = c.benchmark_group("symbolize");
    g.sample_size(10);
    g.bench_function("cold_1000_addresses", |b| {
        b.iter(|| {
            let mut s = Symbolizer::new(&mappings, SymbolizeOptions::default());
            for &a in &addrs {
                black_box(s.stack(&[a]));
            }
        })
    });
    g.bench_function("warm_1000_addresses", |b| {
        b.iter_batched_ref(
            || {
                let mut s = Symbolizer::new(&mappings, SymbolizeOptions::default());
                // Load the binary through an address outside the set.
                s.stack(&[addrs[0] + 1]);
                s
            },
            |s| {
                for &a in &addrs {
                    black_box(s.stack(&[a]));
                }
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let mut s = Symbolizer::new(&mappings, SymbolizeOptions::default());
    let stack: Vec<u64> = addrs.iter().step_by(31).take(32).copied().collect();
    s.stack(&stack);
    c.bench_function("symbolize/cached_stack_32", |b| {
        b.iter(|| black_box(s.stack(black_box(&stack))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
