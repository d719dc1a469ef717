//! The HTML report's Memory section (issue 39 item 3): the sampled heap
//! bytes live over time, when the trace has a memory profile with the
//! live set; nothing otherwise.

use runtrace_model::synth::TraceBuilder;

const MS: u64 = 1_000_000;
const MIB: u64 = 1 << 20;

fn page(bytes: Vec<u8>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, bytes).unwrap();
    let out = dir.path().join("report.html");
    let r = runtrace_export::report::write(&[input], &out).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    std::fs::read_to_string(&out).unwrap()
}

/// A poll every 10 ms for 200 ms; each allocates 1 MiB (one sample) that
/// stays live until the 100 ms mark, when all are freed, and a 3 MiB one
/// at 150 ms that stays: live bytes climb to 10 MiB, drop to 0, end at 3.
fn trace(live: u64) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 3, 1);
    // What a recording with a memory profile and no CPU profile writes.
    b.profile(&runtrace_format::frame::ProfileInfo {
        mode: 0,
        hz: 0,
        flags: 0,
        message: "CPU profiling not asked for".into(),
    });
    b.spawn(7, 0, 1, 0, 1, 0);
    for i in 0..20u64 {
        let t = i * 10 * MS;
        b.poll_start(7, 0, t + MS, 1, 0, 0);
        if i < 10 {
            b.alloc_sample(1, t + 2 * MS, 7, 0, 64, MIB, 0x1000 + i, live);
        }
        if i == 15 {
            b.alloc_sample(1, t + 2 * MS, 7, 0, 64, 3 * MIB, 0x9000, live);
        }
        b.poll_end(7, 0, t + 3 * MS, 1, true);
    }
    if live == 1 {
        for i in 0..10u64 {
            b.alloc_free(1, 100 * MS + i, 7, 0x1000 + i, 0);
        }
    }
    b.finish()
}

#[test]
fn live_bytes_over_time_are_drawn() {
    let p = page(trace(1));
    let start = p.find("<section id=\"memory\">").expect("a memory section");
    let section = &p[start..start + p[start..].find("</section>").unwrap()];
    assert!(
        section.contains("3.0 MiB at the end, at most 10.0 MiB"),
        "{section}"
    );
    assert!(section.contains("<svg id=\"live-bytes\""), "{section}");
    // One point per bucket, each with its value; the peak is there.
    let points = section.matches("<circle").count();
    assert_eq!(points, runtrace_export::report::charts::BUCKETS);
    assert!(section.contains("<title>10.0 MiB live at"), "{section}");
    assert!(section.contains("<title>0 B live at"), "{section}");
}

#[test]
fn no_memory_section_without_a_live_set_or_samples() {
    assert!(!page(trace(0)).contains("id=\"memory\""));
    let mut b = TraceBuilder::new();
    b.poll_start(7, 0, MS, 1, 0, 0);
    b.poll_end(7, 0, 2 * MS, 1, true);
    assert!(!page(b.finish()).contains("id=\"memory\""));
}
