//! Input handling: the JSON shape, damaged and hostile files (clear errors
//! with file and byte offset, never a panic, what was readable is still
//! reported), and a trace recorded through `runtrace_recorder` checked
//! against the brute-force reference.

mod common;

use common::*;
use proptest::prelude::*;
use runtrace_analyze::{analyze_bytes, analyze_files, Options};
use runtrace_model::synth::{workload, TraceBuilder, Workload};
use std::sync::{Mutex, MutexGuard};

/// One recording per process at a time.
fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// A small trace with a long poll (so `findings` is not empty).
fn small() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 3, 9);
    b.thread_name(10, "worker-0");
    b.spawn(10, 1_000, 1, 0, 1, 0);
    b.poll_start(10, 0, 2_000, 1, 0, 2);
    b.poll_end(10, 0, 30_000_000, 1, false);
    b.wake(10, 0, 30_000_100, 1, 1);
    b.park(10, 0, 30_000_200, 0, 5);
    b.unpark(10, 0, 31_000_000, 6, 100);
    b.poll_start(10, 0, 31_000_050, 1, 0, 0);
    b.poll_end(10, 0, 31_000_100, 1, true);
    b.terminate(10, 31_000_100, 1);
    b.queue_sample(11, 31_000_200, 2, 0, 0);
    b.dropped(10, 3, 5, 6);
    b.finish()
}

#[test]
fn json_has_every_documented_key() {
    let r = analyze_bytes(&small(), Options::default());
    let j = r.to_json();
    for k in [
        "events",
        "duration_ns",
        "dropped_events",
        "workers",
        "wake_to_poll_ns",
        "poll_ns",
        "spawn_locations",
        "findings",
    ] {
        assert!(j.get(k).is_some(), "missing {k}: {j}");
    }
    assert_eq!(j["events"], 10);
    assert_eq!(j["dropped_events"], 3);
    assert_eq!(j["duration_ns"], 31_000_200 - 1_000);
    let w = &j["workers"][0];
    for k in [
        "worker",
        "polls",
        "busy_ratio",
        "mean_poll_ns",
        "max_local_q",
    ] {
        assert!(w.get(k).is_some(), "worker key {k}: {w}");
    }
    assert_eq!(w["worker"], 0);
    assert_eq!(w["polls"], 2);
    assert_eq!(w["max_local_q"], 2);
    assert_eq!(w["mean_poll_ns"], (29_998_000 + 50) / 2);
    // busy / (busy + parked): parked 30_000_200 -> 31_000_000.
    let busy = 29_998_050.0;
    let want = busy / (busy + 999_800.0);
    assert!(
        (w["busy_ratio"].as_f64().unwrap() - want).abs() < 1e-9,
        "{w}"
    );
    for s in ["wake_to_poll_ns", "poll_ns"] {
        for k in ["count", "p50", "p90", "p99", "p999", "max"] {
            assert!(j[s].get(k).is_some(), "{s}.{k}");
        }
    }
    assert_eq!(j["poll_ns"]["max"], 29_998_000);
    // Spawn -> first poll and wake -> second poll.
    assert_eq!(j["wake_to_poll_ns"]["count"], 2);
    assert_eq!(j["wake_to_poll_ns"]["max"], 31_000_050 - 30_000_100);
    let l = &j["spawn_locations"][0];
    for k in [
        "spawn_loc_id",
        "location",
        "tasks",
        "polls",
        "poll_ns_total",
        "poll_ns_mean",
        "wake_to_poll_p99_ns",
    ] {
        assert!(l.get(k).is_some(), "location key {k}: {l}");
    }
    assert_eq!(l["location"], "src/main.rs:3:9");
    assert_eq!(l["spawn_loc_id"], 1);
    assert_eq!(l["tasks"], 1);
    let f = &j["findings"][0];
    for k in ["kind", "severity", "spawn_loc", "detail"] {
        assert!(f.get(k).is_some(), "finding key {k}: {f}");
    }
    assert_eq!(f["kind"], "long_poll");
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["spawn_loc"], "src/main.rs:3:9");
    assert_eq!(j["global_queue"]["max"], 2);
    // The text report has the sections.
    let text = r.to_string();
    for s in [
        "=== Summary",
        "=== Wake→Poll delays",
        "=== Poll durations",
        "=== Workers",
        "=== Spawn Locations",
        "=== Queues",
        "=== Findings (1)",
    ] {
        assert!(text.contains(s), "{s} in\n{text}");
    }
}

#[test]
fn truncated_file_reports_what_was_readable() {
    let (bytes, n) = workload(&Workload {
        events: 20_000,
        ..Workload::default()
    });
    let cut = bytes.len() * 2 / 3 + 3;
    let p = write_trace("truncated", &bytes[..cut]);
    let r = analyze_files(&[&p], Options::default());
    assert!(r.is_damaged());
    assert!(r.events > n / 2 && r.events < n, "{}", r.events);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    let e = &r.errors[0];
    assert!(e.starts_with(&p.display().to_string()), "{e}");
    assert!(e.contains("truncated at byte"), "{e}");
    assert!(r.poll_ns.count > 0);
    assert!(r.to_string().contains("=== Errors (1)"));
}

#[test]
fn corrupt_chunk_names_file_and_offset_and_reading_goes_on() {
    let (mut bytes, n) = workload(&Workload {
        events: 20_000,
        ..Workload::default()
    });
    // Flip a byte in the middle: one chunk's checksum fails.
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    let p = write_trace("corrupt", &bytes);
    let r = analyze_files(&[&p], Options::default());
    assert!(r.is_damaged());
    assert!(r.events < n && r.events > n * 9 / 10, "{}", r.events);
    assert!(
        r.errors
            .iter()
            .any(|e| e.contains("corrupt at byte") && e.contains("trace.0.bin")),
        "{:?}",
        r.errors
    );
}

#[test]
fn not_a_trace_missing_and_directories() {
    let tmp = tempdir("bad-inputs");
    let d = tmp.path();
    let junk = d.join("junk.bin");
    std::fs::write(&junk, b"hello, not a trace").unwrap();
    let missing = d.join("missing.0.bin");
    let r = analyze_files(
        &[junk.clone(), missing.clone(), d.to_path_buf()],
        Options::default(),
    );
    assert!(r.is_damaged());
    assert_eq!(r.events, 0);
    let all = r.errors.join("\n");
    assert!(
        all.contains("junk.bin: corrupt at byte 0: bad magic"),
        "{all}"
    );
    assert!(all.contains("missing.0.bin: cannot open"), "{all}");
    assert!(all.contains("is a directory"), "{all}");
    // An empty report still renders.
    assert!(r.to_string().contains("(no worker events)"));
}

#[test]
fn events_before_a_bad_event_in_a_chunk_still_count() {
    // A chunk (valid crc) whose third event has a type without schema.
    use runtrace_format::chunk::{ChunkHeader, ChunkState};
    use runtrace_format::frame::{self, FrameType};
    let mut b = TraceBuilder::new();
    b.location(1, "a.rs", 1, 1);
    let mut bytes = b.finish_unsealed();
    let mut p = Vec::new();
    ChunkHeader {
        tid: 5,
        state: ChunkState {
            ticks: 100,
            task_reg: 0,
            worker_reg: 0,
        },
        count: 3,
    }
    .encode(&mut p);
    let at_body = p.len();
    // task_spawn(task 1, parent 0, loc 1, queue 0), terminate(1), then type 99.
    p.extend_from_slice(&[1, 1, 2, 0, 1, 0]);
    p.extend_from_slice(&[5, 1, 0]);
    let bad_at = p.len();
    p.extend_from_slice(&[99, 1]);
    let chunk_at = bytes.len();
    frame::write(&mut bytes, FrameType::Chunk, &p);
    let r = analyze_bytes(&bytes, Options::default());
    assert_eq!(r.events, 2);
    assert_eq!(r.tasks_spawned, 1);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    let want = format!("corrupt at byte {}", chunk_at + 9 + bad_at);
    assert!(r.errors[0].contains(&want), "{} / {want}", r.errors[0]);
    assert!(
        r.errors[0].contains("event type 99 has no schema"),
        "{}",
        r.errors[0]
    );
    let _ = at_body;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any damage: no panic, and an intact prefix is analysed.
    #[test]
    fn random_damage_never_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = small();
        for (i, x) in &flips {
            let p = i.index(bytes.len());
            bytes[p] ^= x;
        }
        let cut = cut.index(bytes.len() + 1);
        let r = analyze_bytes(&bytes[..cut], Options::default());
        let _ = r.to_json();
        let _ = r.to_string();
        if flips.iter().all(|f| f.1 == 0) && cut == bytes.len() {
            prop_assert!(!r.is_damaged());
        }
    }
}

/// A trace written by the real recorder (two worker threads, a waker on
/// the main thread) agrees with the brute-force reference.
#[test]
fn recorder_trace_matches_the_reference() {
    use runtrace_recorder::{Istr, Loc, Recorder};
    let _g = serial();
    let tmp = tempdir("recorder");
    let dir = tmp.path();
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(8 << 20)
        .start()
        .expect("start recording");
    let locs = [Loc::caller(), Loc::caller()];
    let q = Istr::EMPTY;
    std::thread::scope(|s| {
        for w in 0..2u32 {
            s.spawn(move || {
                for i in 0..2_000u64 {
                    let t = (w as u64) << 32 | (i + 1);
                    runtrace_recorder::task_spawn(t, 0, locs[(i % 2) as usize], q);
                    for k in 0..3 {
                        runtrace_recorder::task_poll_start(t, w, q, (i % 7) as u32);
                        std::hint::black_box(k);
                        runtrace_recorder::task_poll_end(t, w, k == 2);
                        if k < 2 {
                            runtrace_recorder::task_wake(t, t, w);
                        }
                    }
                    runtrace_recorder::task_terminate(t);
                    if i % 500 == 0 {
                        runtrace_recorder::worker_park(w, 0, 0);
                        runtrace_recorder::worker_unpark(w, 0, i);
                    }
                }
            });
        }
    });
    let st = guard.finish().expect("finish");
    assert_eq!(st.dropped, 0, "a big buffer keeps up");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    let rep = analyze_files(&files, Options::default());
    assert!(!rep.damaged, "{:?}", rep.errors);
    assert_eq!(rep.events, st.events);
    assert_eq!(rep.tasks_spawned, 4_000);
    assert_eq!(rep.poll_ns.count, 12_000);
    assert_eq!(rep.wake_to_poll_ns.count, 12_000);
    assert_eq!(rep.spawn_locations.len(), 2);
    let refs: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    check_against_reference(&rep, &reference(&refs));
}

/// Terminated tasks that were never spawned or polled in the trace (tokio's
/// blocking tasks: its worker launches, `spawn_blocking`) are counted and
/// named, so "2 spawned, 4 terminated" is not left unexplained; a task
/// spawned before the trace but polled in it is not among them.
#[test]
fn terminated_tasks_never_seen_are_counted_and_named() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    for task in [10, 11] {
        b.spawn(1, task * 100, task, 0, 1, 0);
        b.poll_start(1, 0, task * 100 + 10, task, 0, 0);
        b.poll_end(1, 0, task * 100 + 20, task, true);
        b.terminate(1, task * 100 + 30, task);
    }
    // Polled, never spawned here: seen.
    b.poll_start(1, 0, 2_000, 7, 0, 0);
    b.poll_end(1, 0, 2_010, 7, true);
    b.terminate(1, 2_020, 7);
    // Blocking tasks: a terminate alone.
    b.terminate(2, 3_000, 1);
    b.terminate(3, 3_010, 2);
    let r = analyze_bytes(&b.finish(), Options::default());
    assert_eq!(
        (
            r.tasks_spawned,
            r.tasks_terminated,
            r.tasks_terminated_unseen
        ),
        (2, 5, 2)
    );
    assert_eq!(r.to_json()["tasks"]["terminated_unseen"], 2);
    let text = r.to_string();
    assert!(
        text.contains("tasks:          2 spawned, 5 terminated (2 with no spawn or poll in the trace: tokio's blocking tasks"),
        "{text}"
    );
}

/// Every event older than one read before it is counted once as late,
/// whether the lifecycle pairs it (a spawn, wake, poll start and end, a
/// terminate: counted at its record) or the engine reads it raw (a park).
#[test]
fn late_events_are_each_counted_once() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(10, 1_000, 1, 0, 1, 0);
    b.poll_start(10, 0, 2_000, 1, 0, 0);
    b.poll_end(10, 0, 3_000, 1, false);
    b.park(10, 0, 4_000, 0, 5);
    // The watermark promises nothing older comes later; the next round
    // releases thread 10's events, then thread 11's older ones arrive.
    b.round(5_000);
    b.round(6_000);
    b.spawn(11, 1_500, 2, 0, 1, 0);
    b.wake(11, 1, 1_600, 1, 2);
    b.poll_start(11, 1, 1_700, 2, 0, 0);
    b.poll_end(11, 1, 1_800, 2, true);
    b.terminate(11, 1_900, 2);
    b.park(11, 1, 1_950, 0, 5);
    b.round(10_000);
    let r = analyze_bytes(&b.finish(), Options::default());
    let late: Vec<&String> = r.notes.iter().filter(|n| n.contains("late")).collect();
    assert_eq!(
        late,
        ["6 events arrived more than one writer round late and were analysed out of order"],
        "{:?}",
        r.notes
    );
}
