//! The HTML report's Waiting section (issue 36 item 5): the tokio
//! resources waited on most, when the trace has resource events; and the
//! Perfetto export's counts of resource waits and their flows.

use runtrace_model::synth::{mutex_held_across_await, TraceBuilder};

fn page(bytes: Vec<u8>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, bytes).unwrap();
    let out = dir.path().join("report.html");
    let r = runtrace_export::report::write(&[input], &out).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn the_waiting_section_names_the_mutex_its_holder_and_its_waiters() {
    let p = page(mutex_held_across_await());
    let start = p
        .find("<section id=\"waiting\">")
        .expect("a Waiting section");
    let section = &p[start..start + p[start..].find("</section>").unwrap()];
    let rows: Vec<&str> = section.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 1, "{section}");
    let row = rows[0];
    assert!(
        row.starts_with("<td><code>Mutex src/state.rs:4:17</code></td><td class=\"n\">160</td>"),
        "{row}"
    );
    // 160 waits of 35.09 ms.
    assert!(row.contains("<td class=\"n\">5.614 s</td>"), "{row}");
    assert!(
        row.contains("<code>src/sync.rs:12:5</code> (20 holds")
            && row.contains("20 across an await"),
        "the holder: {row}"
    );
    assert!(
        row.contains("<code>src/req.rs:40:9</code> (160 waits"),
        "{row}"
    );
}

#[test]
fn no_resource_events_no_waiting_section() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 10, 5);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    b.poll_end(7, 0, 3_000, 1, true);
    let p = page(b.finish());
    assert!(!p.contains("id=\"waiting\""));
}

#[test]
fn perfetto_counts_every_wait_and_its_flow() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, mutex_held_across_await()).unwrap();
    let out = dir.path().join("t.pftrace");
    let c = runtrace_export::perfetto::convert(&[&input], &out).unwrap();
    assert_eq!(c.stats.resource_waits, 160, "{:?}", c.stats);
    assert_eq!(c.stats.resource_flows, 160, "{:?}", c.stats);
}
