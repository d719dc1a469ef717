//! Passes over one read: `analyze_with_backlog` reads the files once and
//! feeds both analyses; each report must be exactly what its own read
//! gives, across two recordings (each pass closes a recording on its own).

mod common;

use runtrace_analyze::backlog::{self, BacklogOptions, Cause};
use runtrace_analyze::{analyze_files, analyze_with_backlog, Options};
use runtrace_model::synth::{workload, TraceBuilder, Workload};

/// A runtime workload with one 60 ms poll, and a consumer that stalls
/// while its producer goes on (the backlog module's example), on other
/// threads of the same recording.
fn mixed(recording_id: u64, pid: u64) -> Vec<u8> {
    let mut b = TraceBuilder::with_header(1_000_000_000, recording_id, pid);
    b.location(1, "src/main.rs", 10, 5);
    b.string(1, "jobs");
    b.string(2, "size_threshold");
    b.thread_name(2, "consumer");
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    b.poll_end(7, 0, 60_000_000, 1, true);
    b.terminate(7, 60_000_000, 1);
    let mut seq = 0;
    for i in 0..2_000u64 {
        let t = 1_000_000 + i * 1_000_000;
        seq += 1;
        b.enqueue(1, t, 1, seq, 1);
        if i < 1_000 {
            b.dequeue(2, t + 10_000, 1, seq, 10_000, 0);
            b.processing_end(2, t + 500_000, 1, seq, 490_000, true);
        }
        // Polls on a worker thread in the same stretch.
        b.poll_start(8, 1, t + 1_000, 100 + i, 0, 3);
        b.poll_end(8, 1, t + 21_000, 100 + i, true);
        if i % 100 == 99 {
            b.round(t);
        }
    }
    b.backlog_trigger(1, 2_000_500_000, 1, 1_000, 1_000, 2);
    b.finish()
}

#[test]
fn one_read_gives_each_pass_its_own_report() {
    let dir = common::tempdir("passes");
    let paths = vec![
        dir.path().join("trace.0.bin"),
        dir.path().join("trace.1.bin"),
    ];
    std::fs::write(&paths[0], mixed(1, 10)).unwrap();
    std::fs::write(&paths[1], mixed(2, 20)).unwrap();
    let bo = BacklogOptions::default();
    let (r, b) = analyze_with_backlog(&paths, Options::default(), &bo);
    let r_alone = analyze_files(&paths, Options::default());
    let b_alone = backlog::analyze_files(&paths, &bo);
    // Not vacuous: both analyses found something in both recordings.
    assert_eq!(r.processes.len(), 2);
    assert!(r.findings.iter().any(|f| f.kind.as_str() == "long_poll"));
    assert_eq!(b.triggers.len(), 2);
    assert_eq!(b.triggers[0].verdicts[0].cause, Cause::ConsumerStall);
    assert_eq!(r.to_json(), r_alone.to_json());
    assert_eq!(r.to_string(), r_alone.to_string());
    assert_eq!(b.to_json(), b_alone.to_json());
    assert_eq!(b.to_string(), b_alone.to_string());
}

#[test]
fn a_pure_runtime_trace_gives_an_empty_backlog() {
    let (bytes, n) = workload(&Workload {
        events: 20_000,
        ..Workload::default()
    });
    let f = common::write_trace("passes-runtime", &bytes);
    let (r, b) = analyze_with_backlog(&[&*f], Options::default(), &BacklogOptions::default());
    assert_eq!(r.events, n);
    assert_eq!(b.app_events, 0);
    assert_eq!(
        r.to_json(),
        analyze_files(&[&*f], Options::default()).to_json()
    );
}

/// The summary line counts live tasks in words that agree with the number
/// (issue 17 item 7: "1 tasks alive").
#[test]
fn live_task_count_reads_in_the_singular_and_plural() {
    use runtrace_analyze::{analyze_bytes, Options};
    use runtrace_model::synth::TraceBuilder;
    let line = |live: u64| {
        let mut b = TraceBuilder::new();
        b.location(1, "src/main.rs", 10, 5);
        for task in 1..=live {
            b.spawn(1, 1_000 + task, task, 0, 1, 0);
        }
        let text = analyze_bytes(&b.finish(), Options::default()).to_string();
        text.lines()
            .find(|l| l.starts_with("process:"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    assert!(line(1).ends_with(" 1 task alive at the end"), "{}", line(1));
    assert!(
        line(2).ends_with(" 2 tasks alive at the end"),
        "{}",
        line(2)
    );
}
