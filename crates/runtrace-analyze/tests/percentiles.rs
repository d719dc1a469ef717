//! Percentiles against brute force: generated traces whose every poll
//! duration and wake->poll delay is known by construction; the report's
//! counts, totals and maxima must be exact and its percentiles within 1%
//! of the nearest-rank values of the sorted samples, overall and per spawn
//! location. Also: the healthy workload against the independent
//! `EventStream`-based reference (with ROUND frames and many chunks).

mod common;

use common::*;
use proptest::prelude::*;
use runtrace_analyze::{analyze_files, Options};
use runtrace_format::NO_WORKER;
use runtrace_model::synth::{workload, TraceBuilder, Workload};
use std::collections::HashMap;

/// One poll of a task: idle gap before it (after the task's previous poll
/// or its spawn), how long before its start it was woken (1..gap), and its
/// duration.
#[derive(Debug, Clone)]
struct P {
    gap: u64,
    wake_before: u64,
    dur: u64,
}

/// A value spread over many orders of magnitude (to hit many buckets).
fn spread() -> impl Strategy<Value = u64> {
    (0u32..34, any::<u64>()).prop_map(|(bits, r)| if bits == 0 { 0 } else { r >> (64 - bits) })
}

fn poll() -> impl Strategy<Value = P> {
    (spread(), any::<u64>(), spread()).prop_map(|(g, w, dur)| {
        let gap = g.max(2);
        P {
            gap,
            wake_before: 1 + w % (gap - 1),
            dur,
        }
    })
}

#[derive(Debug, Clone)]
struct Task {
    loc: u64,
    polls: Vec<P>,
}

fn task() -> impl Strategy<Value = Task> {
    (1u64..=4, proptest::collection::vec(poll(), 1..6)).prop_map(|(loc, polls)| Task { loc, polls })
}

/// Events of one thread, added to the builder in time order at the end.
#[derive(Clone, Copy)]
enum E {
    Spawn(u64, u64),
    Wake(u64),
    Start(u32, u64),
    End(u32, u64),
    Term(u64),
}

/// Samples (ns) by location id.
type Samples = HashMap<u64, Vec<u64>>;

/// Builds the trace; returns it with the expected poll durations and
/// wake->poll delays by location.
fn build(tasks: &[Task], workers: u32, tick_ns: u64) -> (Vec<u8>, Samples, Samples) {
    let mut b = TraceBuilder::with_header(1_000_000_000 / tick_ns, 7, 99);
    for l in 1..=4 {
        b.location(l, &format!("src/loc{l}.rs"), l as u32, 1);
    }
    let mut per_thread: HashMap<u64, Vec<(u64, E)>> = HashMap::new();
    let (mut polls, mut wakes): (Samples, Samples) = Default::default();
    let mut clock: Vec<u64> = (0..workers as u64).map(|w| 1_000 + w).collect();
    for (i, t) in tasks.iter().enumerate() {
        let task = i as u64 + 1;
        let w = (i as u32) % workers;
        let tid = 100 + w as u64;
        let mut now = clock[w as usize];
        for (k, p) in t.polls.iter().enumerate() {
            let start = now + p.gap;
            let woke = start - p.wake_before;
            if k == 0 {
                // Spawned on a non-worker thread: spawn -> first poll.
                per_thread
                    .entry(1)
                    .or_default()
                    .push((woke, E::Spawn(task, t.loc)));
            } else {
                per_thread.entry(2).or_default().push((woke, E::Wake(task)));
            }
            let end = start + p.dur;
            per_thread
                .entry(tid)
                .or_default()
                .push((start, E::Start(w, task)));
            per_thread
                .entry(tid)
                .or_default()
                .push((end, E::End(w, task)));
            polls.entry(t.loc).or_default().push(p.dur * tick_ns);
            wakes
                .entry(t.loc)
                .or_default()
                .push(p.wake_before * tick_ns);
            now = end;
        }
        per_thread
            .entry(tid)
            .or_default()
            .push((now, E::Term(task)));
        clock[w as usize] = now;
    }
    let mut tids: Vec<u64> = per_thread.keys().copied().collect();
    tids.sort_unstable();
    for tid in tids {
        let mut evs = per_thread.remove(&tid).unwrap_or_default();
        evs.sort_by_key(|e| e.0); // stable: start before end at equal ticks
        for (ticks, e) in evs {
            match e {
                E::Spawn(task, loc) => b.spawn(tid, ticks, task, 0, loc, 0),
                E::Wake(task) => b.wake(tid, NO_WORKER, ticks, task, 0),
                E::Start(w, task) => b.poll_start(tid, w, ticks, task, 0, 3),
                E::End(w, task) => b.poll_end(tid, w, ticks, task, false),
                E::Term(task) => b.terminate(tid, ticks, task),
            }
        }
    }
    (b.finish(), polls, wakes)
}

fn check_summary(what: &str, got: &runtrace_model::hist::Summary, mut want: Vec<u64>) {
    want.sort_unstable();
    assert_eq!(got.count, want.len() as u64, "{what} count");
    assert_close(&format!("{what} p50"), got.p50, exact_quantile(&want, 500));
    assert_close(&format!("{what} p90"), got.p90, exact_quantile(&want, 900));
    assert_close(&format!("{what} p99"), got.p99, exact_quantile(&want, 990));
    assert_close(
        &format!("{what} p999"),
        got.p999,
        exact_quantile(&want, 999),
    );
    assert_eq!(got.max, want.last().copied().unwrap_or(0), "{what} max");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn percentiles_match_brute_force(
        tasks in proptest::collection::vec(task(), 1..40),
        workers in 1u32..4,
        tick_ns in prop_oneof![Just(1u64), Just(8u64)],
    ) {
        let (bytes, polls, wakes) = build(&tasks, workers, tick_ns);
        let path = write_trace("prop", &bytes);
        let rep = analyze_files(&[&path], Options::default());
        prop_assert!(!rep.damaged, "{:?}", rep.errors);
        check_summary("poll", &rep.poll_ns, polls.values().flatten().copied().collect());
        check_summary("wake", &rep.wake_to_poll_ns, wakes.values().flatten().copied().collect());
        for l in &rep.spawn_locations {
            let id = l.spawn_loc_id;
            let p = polls.get(&id).cloned().unwrap_or_default();
            prop_assert_eq!(l.poll_ns_total, p.iter().sum::<u64>());
            prop_assert_eq!(l.polls, p.len() as u64);
            prop_assert_eq!(l.poll_ns_mean, p.iter().sum::<u64>() / p.len().max(1) as u64);
            check_summary(&format!("{} poll", l.location), &l.poll_ns, p);
            let w = wakes.get(&id).cloned().unwrap_or_default();
            check_summary(&format!("{} wake", l.location), &l.wake_to_poll_ns, w.clone());
            // The JSON key `wake_to_poll_p99_ns` is this p99.
            let mut w = w;
            w.sort_unstable();
            let j = rep.to_json();
            let jl = j["spawn_locations"].as_array().unwrap().iter().find(|x| x["spawn_loc_id"] == id).unwrap();
            prop_assert_eq!(jl["wake_to_poll_p99_ns"].as_u64(), Some(l.wake_to_poll_ns.p99));
            assert_close("p99 key", l.wake_to_poll_ns.p99, exact_quantile(&w, 990));
        }
        // Ranked by total poll time.
        prop_assert!(rep.spawn_locations.windows(2).all(|w| w[0].poll_ns_total >= w[1].poll_ns_total));
    }
}

/// The healthy workload (several workers, ROUND frames every ms, many
/// chunks) against the reference built on the slow `EventStream` reader.
#[test]
fn workload_matches_the_event_stream_reference() {
    let (bytes, n) = workload(&Workload {
        events: 300_000,
        ..Workload::default()
    });
    let path = write_trace("workload", &bytes);
    let rep = analyze_files(&[&path], Options::default());
    assert_eq!(rep.events, n);
    assert!(!rep.damaged);
    let r = reference(&[&path]);
    check_against_reference(&rep, &r);
}

/// A rotated recording: files are sorted by index, and a task polled
/// across the file boundary is analysed as in one file.
#[test]
fn rotated_files_read_as_one_recording() {
    // Split the workload's frames into two files by hand: file 1 repeats
    // the definitions (a new header), as rotation does.
    let (bytes, n) = workload(&Workload {
        events: 50_000,
        ..Workload::default()
    });
    let tmp = tempdir("rotated");
    let dir = tmp.path();
    // Frames: a ROUND boundary around the middle, and the END frame.
    let mut off = 8usize;
    let (mut cut, mut end_at) = (None, 0);
    while off + 9 <= bytes.len() {
        let ty = bytes[off];
        let len = u32::from_le_bytes(bytes[off + 1..off + 5].try_into().unwrap()) as usize;
        let next = off + 9 + len;
        if ty == 9 && next > bytes.len() / 2 && cut.is_none() {
            cut = Some(next);
        }
        if ty == 10 {
            end_at = off;
        }
        off = next;
    }
    let cut = cut.unwrap();
    // The definitions: every frame before the first CHUNK.
    let mut defs_end = 8usize;
    while bytes[defs_end] != 7 {
        let len = u32::from_le_bytes(bytes[defs_end + 1..defs_end + 5].try_into().unwrap());
        defs_end += 9 + len as usize;
    }
    // File 0 is cut at the round (unsealed: not damage); file 1 repeats
    // the definitions, holds the rest and is sealed with its own totals.
    let first = bytes[..cut].to_vec();
    let first_events =
        analyze_files(&[write_trace("rotated-first", &first)], Options::default()).events;
    let mut second = bytes[..defs_end].to_vec();
    second.extend_from_slice(&bytes[cut..end_at]);
    runtrace_format::frame::write(
        &mut second,
        runtrace_format::frame::FrameType::End,
        &runtrace_format::frame::end(n - first_events, 0),
    );
    std::fs::write(dir.join("trace.1.bin"), &second).unwrap();
    std::fs::write(dir.join("trace.0.bin"), &first).unwrap();
    let paths = [dir.join("trace.1.bin"), dir.join("trace.0.bin")];
    let rep = analyze_files(&paths, Options::default());
    assert!(!rep.damaged, "{:?}", rep.errors);
    assert_eq!(rep.events, n);
    assert_eq!(rep.files[0], dir.join("trace.0.bin"), "sorted by index");
    assert_eq!(rep.unsealed_files, vec![dir.join("trace.0.bin")]);
    let whole = analyze_files(&[write_trace("rotated-whole", &bytes)], Options::default());
    assert_eq!(rep.poll_ns, whole.poll_ns);
    assert_eq!(rep.wake_to_poll_ns, whole.wake_to_poll_ns);
    assert_eq!(rep.processes.len(), 1);
}
