//! `runtrace top` with a memory profile (issue 39 item 3): the window's
//! sampled heap bytes live at its end, their change over it, and the
//! allocation rate, in text and JSON; nothing without allocation samples.

use runtrace_model::synth::TraceBuilder;
use runtrace_top::source::{Options, Replay};

const MS: u64 = 1_000_000;
const MIB: u64 = 1 << 20;

/// 10 s; every 100 ms a poll allocates 1 MiB (one sample) that is never
/// freed and 1 MiB freed at once: live bytes grow by 10 MiB/s.
fn trace(allocs: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new();
    b.location(1, "src/cache.rs", 3, 1);
    b.spawn(7, 0, 1, 0, 1, 0);
    for i in 0..100u64 {
        let t = i * 100 * MS;
        b.poll_start(7, 0, t + MS, 1, 0, 0);
        if allocs {
            b.alloc_sample(1, t + 2 * MS, 7, 0, 64, MIB, 0x1000 + i, 1);
            b.alloc_sample(1, t + 2 * MS, 7, 0, 64, MIB, 0x9000_0000 + i, 1);
            b.alloc_free(1, t + 3 * MS, 7, 0x9000_0000 + i, 0);
        }
        b.poll_end(7, 0, t + 4 * MS, 1, true);
    }
    std::fs::write(dir.path().join("trace.0.bin"), b.finish()).unwrap();
    dir
}

#[test]
fn the_window_shows_live_bytes_and_the_allocation_rate() {
    let dir = trace(true);
    let mut r = Replay::open(dir.path(), Options::default()).unwrap();
    r.seek(8.0);
    let s = r.snapshot();
    let h = s.heap.expect("allocation samples");
    // At 8 s: 80 never-freed samples made by then (at 0.002 s .. 7.902 s).
    assert_eq!(h.live_end, 80 * MIB);
    // The window (3 s, 8 s]: 50 more of them.
    assert_eq!(h.live_start, 30 * MIB);
    assert_eq!(h.allocated, 100 * MIB);
    let text = s.to_text();
    assert!(
        text.contains(
            "heap (sampled): 80.0 MB live (+50.0 MB over the window) | allocating 20.0 MB/s"
        ),
        "{text}"
    );
    let j = s.to_json();
    assert_eq!(j["heap"]["live_bytes"], 80 * MIB, "{j}");
    assert_eq!(j["heap"]["live_bytes_at_window_start"], 30 * MIB);
    assert_eq!(j["heap"]["allocated_bytes"], 100 * MIB);
    assert_eq!(j["heap"]["allocated_bytes_per_s"], 20.0 * MIB as f64);
}

#[test]
fn nothing_about_memory_without_allocation_samples() {
    let dir = trace(false);
    let mut r = Replay::open(dir.path(), Options::default()).unwrap();
    r.seek(8.0);
    let s = r.snapshot();
    assert!(s.heap.is_none());
    assert!(!s.to_text().contains("heap"));
    assert!(s.to_json().get("heap").is_none());
}
