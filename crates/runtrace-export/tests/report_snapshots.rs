//! The HTML report shows flight-recorder snapshot triggers: a table of
//! when and why each fired, and a line over the utilisation chart.

use runtrace_model::synth::TraceBuilder;

fn page(bytes: Vec<u8>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, bytes).unwrap();
    let out = dir.path().join("report.html");
    let r = runtrace_export::report::write(&[input], &out).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    std::fs::read_to_string(&out).unwrap()
}

fn trace(triggers: &[(u64, &str)]) -> Vec<u8> {
    with_requests(triggers, &[])
}

/// [`trace`] with the application's snapshot requests too.
fn with_requests(triggers: &[(u64, &str)], requests: &[(u64, &str)]) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    // 10 ms of polls, so the chart has cells (1 ms each).
    for i in 0..10u64 {
        b.poll_start(7, 0, i * 1_000_000, 1, 0, 0);
        b.poll_end(7, 0, i * 1_000_000 + 500_000, 1, false);
    }
    for &(ticks, reason) in triggers {
        b.snapshot_trigger(9, ticks, reason);
    }
    for &(ticks, reason) in requests {
        b.snapshot_request(7, ticks, reason);
    }
    b.finish()
}

#[test]
fn snapshot_triggers_get_a_table_and_a_line_on_the_timeline() {
    let p = page(trace(&[(7_200_000, "slow-poll"), (2_000_000, "<sig>")]));
    let start = p
        .find("<table id=\"snapshots\">")
        .expect("a snapshots table");
    let table = &p[start..start + p[start..].find("</table>").unwrap()];
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(
        rows,
        [
            "<td class=\"n\">0.002000</td><td class=\"n\">4242</td><td>trigger</td><td>&lt;sig&gt;</td></tr>",
            "<td class=\"n\">0.007200</td><td class=\"n\">4242</td><td>trigger</td><td>slow-poll</td></tr>",
        ]
    );
    // The lines sit in the utilisation chart, at the cell of their time
    // (label 220 px, cells of 7 px and 1 ms, the middle of the cell).
    let chart_at = p.find("<svg id=\"utilisation\"").unwrap();
    let chart = &p[chart_at..chart_at + p[chart_at..].find("</svg>").unwrap()];
    let xs: Vec<&str> = chart
        .split("<line class=\"snapshot\" x1=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(xs, ["237.5", "272.5"], "{chart}");
    assert!(
        chart.contains("<title>snapshot trigger at 0.007 s: slow-poll</title>"),
        "{chart}"
    );
}

#[test]
fn no_triggers_no_section() {
    let p = page(trace(&[]));
    assert!(!p.contains("Snapshot triggers"));
    assert!(!p.contains("class=\"snapshot\""));
}

#[test]
fn requests_are_rows_but_no_lines() {
    let p = page(with_requests(&[], &[(3_000_000, "nobody listens")]));
    assert!(
        p.contains("<td>request (no rule lists it: no snapshot)</td><td>nobody listens</td>"),
        "{p}"
    );
    assert!(!p.contains("class=\"snapshot\""), "a request is no trigger");
}
