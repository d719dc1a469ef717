//! Flight-recorder snapshot triggers (`snapshot_trigger`, docs/format.md
//! section 13) in `runtrace analyze`'s report: when and why each fired,
//! in the text and the JSON (`snapshots`, docs/analysis.md).

use runtrace_analyze::runtime::{analyze_bytes, Options};
use runtrace_model::synth::TraceBuilder;

fn trace(triggers: &[(u64, &str)]) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000_000, 1, 0, 0);
    b.poll_end(7, 0, 3_000_000, 1, true);
    // The writer thread records them, in its own chunks, out of order
    // with the workers' events.
    for &(ticks, reason) in triggers {
        b.snapshot_trigger(9, ticks, reason);
    }
    b.finish()
}

#[test]
fn each_trigger_is_reported_with_its_time_and_reason_in_time_order() {
    let r = analyze_bytes(
        &trace(&[(2_500_000_000, "signal"), (1_250_000, "slow-poll")]),
        Options::default(),
    );
    let got: Vec<(i64, &str, u64)> = r
        .snapshots
        .iter()
        .map(|s| (s.at_ns, s.reason.as_str(), s.pid))
        .collect();
    assert_eq!(
        got,
        [
            (1_250_000, "slow-poll", 4242),
            (2_500_000_000, "signal", 4242)
        ]
    );
    // The triggers are events of the trace (counted), not polls.
    assert_eq!(r.events, 5);
    assert_eq!(r.poll_ns.count, 1);

    let j = r.to_json();
    let snaps = j["snapshots"].as_array().expect("a snapshots list");
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["reason"], "slow-poll");
    assert_eq!(snaps[0]["at_ns"], 1_250_000);
    assert_eq!(snaps[0]["pid"], 4242);
    assert_eq!(
        snaps[1]["wall_ns"].as_i64().unwrap(),
        1_700_000_000_000_000_000 + 2_500_000_000
    );

    let text = r.to_string();
    let at = text.find("=== Snapshot triggers (2)").expect(&text);
    let section: Vec<&str> = text[at..].lines().skip(1).take(2).collect();
    assert_eq!(
        section,
        [
            "at 0.001250 s (pid 4242): slow-poll",
            "at 2.500000 s (pid 4242): signal"
        ]
    );
}

#[test]
fn a_trace_without_triggers_has_no_snapshots_key_nor_section() {
    let r = analyze_bytes(&trace(&[]), Options::default());
    assert!(r.snapshots.is_empty());
    assert!(r.to_json().get("snapshots").is_none());
    assert!(!r.to_string().contains("Snapshot triggers"));
}

#[test]
fn a_reason_with_control_characters_stays_on_its_line() {
    let r = analyze_bytes(&trace(&[(5_000, "a\nb")]), Options::default());
    assert!(r.to_string().contains("(pid 4242): a\\nb\n"));
    assert_eq!(r.to_json()["snapshots"][0]["reason"], "a\nb");
}

/// The application's requests (`runtrace::snapshot!`, `snapshot_request`)
/// are listed beside the triggers; one that no rule answered says so.
#[test]
fn requests_are_listed_and_unanswered_ones_say_why() {
    let mut b = TraceBuilder::new();
    b.poll_start(7, 0, 2_000_000, 1, 0, 0);
    b.poll_end(7, 0, 3_000_000, 1, true);
    // "deploy" is answered by its trigger a round later; "odd" is not.
    b.snapshot_request(7, 1_000_000, "deploy");
    b.snapshot_trigger(9, 1_050_000, "deploy");
    b.snapshot_request(7, 2_500_000, "odd");
    let r = analyze_bytes(&b.finish(), Options::default());
    let got: Vec<(&str, bool, bool)> = r
        .snapshots
        .iter()
        .map(|s| (s.reason.as_str(), s.request, s.answered))
        .collect();
    assert_eq!(
        got,
        [
            ("deploy", true, true),
            ("deploy", false, false),
            ("odd", true, false)
        ]
    );
    let j = r.to_json();
    assert_eq!(j["snapshots"][0]["kind"], "request");
    assert_eq!(j["snapshots"][0]["answered"], true);
    assert_eq!(j["snapshots"][1]["kind"], "trigger");
    assert!(j["snapshots"][1]["answered"].is_null());
    let text = r.to_string();
    let at = text
        .find("=== Snapshot triggers (1) and requests (2)")
        .expect(&text);
    let section: Vec<&str> = text[at..].lines().skip(1).take(3).collect();
    assert_eq!(section[0], "at 0.001000 s (pid 4242): requested: deploy");
    assert_eq!(section[1], "at 0.001050 s (pid 4242): deploy");
    assert!(
        section[2].starts_with(
            "at 0.002500 s (pid 4242): requested: odd (no snapshot: no rule lists this reason"
        ),
        "{}",
        section[2]
    );
}
