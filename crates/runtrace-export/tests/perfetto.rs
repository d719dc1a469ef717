//! The Perfetto exporter's output read back with its own messages: slices
//! balance per track even when the input lost events, flows pair up, and
//! names are interned once. (tests/visual.rs in runtrace-cli checks the
//! same output with Perfetto's own Python protos.)

use prost::Message;
use runtrace_export::perfetto::proto::{
    TracePacket, TYPE_COUNTER, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use runtrace_model::synth::TraceBuilder;
use std::collections::HashMap;

/// `Trace`: the file is `repeated TracePacket packet = 1`.
#[derive(Clone, PartialEq, prost::Message)]
struct Trace {
    #[prost(message, repeated, tag = "1")]
    packet: Vec<TracePacket>,
}

fn export(b: TraceBuilder) -> (Vec<TracePacket>, runtrace_export::perfetto::Converted) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.0.bin");
    std::fs::write(&input, b.finish()).unwrap();
    let out = dir.path().join("t.pftrace");
    let c = runtrace_export::perfetto::convert(&[input], &out).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    (Trace::decode(&bytes[..]).unwrap().packet, c)
}

/// Per track, the depth after every event in time order; panics when it
/// goes below zero, and returns the final depths.
fn depths(packets: &[TracePacket]) -> HashMap<u64, i64> {
    let mut evs: Vec<(u64, usize, u64, i32)> = packets
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let e = p.track_event.as_ref()?;
            Some((p.timestamp?, i, e.track_uuid?, e.r#type?))
        })
        .collect();
    evs.sort();
    let mut d: HashMap<u64, i64> = HashMap::new();
    for (ts, _, track, ty) in evs {
        let v = d.entry(track).or_default();
        match ty {
            TYPE_SLICE_BEGIN => *v += 1,
            TYPE_SLICE_END => *v -= 1,
            _ => {}
        }
        assert!(*v >= 0, "track {track}: end without begin at {ts}");
    }
    d
}

#[test]
fn lost_poll_ends_and_open_slices_still_balance() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    // Its end is lost: the next poll of task 1 ends it.
    b.poll_start(7, 0, 3_000, 1, 0, 0);
    b.poll_end(7, 0, 4_000, 1, false);
    b.poll_end(7, 0, 4_500, 99, false); // never started: skipped
    b.unpark(7, 0, 4_600, 0, 0); // never parked: skipped
    b.park(7, 0, 5_000, 2, 0); // still parked at the end: closed there
    b.wake(8, 0, 5_500, 1, 0);
    b.queue_sample(9, 6_000, 3, 0, 0);
    let (packets, c) = export(b);
    assert!(depths(&packets).values().all(|&d| d == 0));
    let s = &c.stats;
    assert_eq!((s.polls, s.parks), (2, 1));
    assert_eq!(
        (s.closed_early, s.unmatched_ends, s.closed_at_end),
        (1, 2, 1)
    );
    // The spawn's flow reached the first poll; the wake's never did.
    assert_eq!((s.flows, s.flows_joined), (2, 1));
    let ty = |t| {
        packets
            .iter()
            .filter(|p| p.track_event.as_ref().is_some_and(|e| e.r#type == Some(t)))
            .count()
    };
    // Instants: the spawn and the wake. Counters: the local queue at 0,
    // then 2; the global queue at 3.
    assert_eq!(ty(TYPE_INSTANT), 2);
    assert_eq!(ty(TYPE_COUNTER), 3);
    // "src/a.rs:1:1", "spawn", "parked", "wake": each interned once.
    let names: Vec<String> = packets
        .iter()
        .filter_map(|p| p.interned_data.as_ref())
        .flat_map(|d| d.event_names.iter().filter_map(|n| n.name.clone()))
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
}

#[test]
fn overlapping_app_slices_go_to_separate_lanes() {
    let mut b = TraceBuilder::new();
    b.string(1, "read");
    // Two reads on one thread overlapping in time (two tasks on one worker).
    b.io(7, 10_000, 1, 100, 8_000); // [2_000, 10_000] in ticks of 1 ns
    b.io(7, 12_000, 1, 200, 6_000); // [6_000, 12_000]: overlaps
    b.io(7, 20_000, 1, 300, 1_000); // [19_000, 20_000]: fits lane 1
    let (packets, c) = export(b);
    assert_eq!(c.stats.app_slices, 3);
    let d = depths(&packets);
    assert!(d.values().all(|&v| v == 0));
    let lanes: std::collections::HashSet<u64> = packets
        .iter()
        .filter_map(|p| p.track_event.as_ref())
        .filter(|e| e.r#type == Some(TYPE_SLICE_BEGIN))
        .filter_map(|e| e.track_uuid)
        .collect();
    assert_eq!(lanes.len(), 2);
}

#[test]
fn samples_are_callstack_samples_on_the_sampled_thread() {
    use runtrace_export::perfetto::{ALLOC_ROOT, NO_STACK, OFF_CPU_ROOT};
    let mut b = TraceBuilder::new();
    b.stacks(&[(1, &[0x10, 0x20][..])]);
    // Written by thread 999, of thread 100: twice the same stack, one
    // off-CPU stack 3 µs long, one sample of an undefined stack.
    b.cpu_sample(999, 10_000, 100, 1);
    b.cpu_sample(999, 11_000, 100, 1);
    b.off_cpu(999, 20_000, 100, 1, 3_000);
    b.cpu_sample(999, 30_000, 100, 7);
    // A sampled allocation of thread 100, the same stack.
    b.alloc_sample(999, 40_000, 100, 1, 64, 4096, 0x5000, 0);
    let (packets, c) = export(b);
    assert_eq!(
        (
            c.stats.cpu_samples,
            c.stats.off_cpu_samples,
            c.stats.alloc_samples
        ),
        (3, 1, 1)
    );
    let mut functions = HashMap::new();
    let mut frames = HashMap::new();
    let mut callstacks = HashMap::new();
    let mut got = Vec::new();
    for p in &packets {
        if let Some(d) = &p.interned_data {
            for f in &d.function_names {
                functions.insert(
                    f.iid.unwrap(),
                    String::from_utf8(f.str.clone().unwrap()).unwrap(),
                );
            }
            for f in &d.frames {
                frames.insert(
                    f.iid.unwrap(),
                    functions[&f.function_name_id.unwrap()].clone(),
                );
            }
            for cs in &d.callstacks {
                let names: Vec<String> = cs.frame_ids.iter().map(|i| frames[i].clone()).collect();
                assert!(
                    callstacks.insert(cs.iid.unwrap(), names).is_none(),
                    "interned twice"
                );
            }
        }
        if let Some(s) = &p.perf_sample {
            assert_eq!(s.tid, Some(100));
            got.push((
                p.timestamp.unwrap(),
                callstacks[&s.callstack_iid.unwrap()].clone(),
            ));
        }
    }
    // Nothing is symbolizable (no mappings): frames are named by address,
    // root first; one callstack per distinct (stack, kind).
    assert_eq!(callstacks.len(), 4, "{callstacks:?}");
    assert_eq!(got.len(), 5);
    let on = &got[0].1;
    assert_eq!(on.len(), 2);
    assert!(on[0].contains("0x20") && on[1].contains("0x10"), "{on:?}");
    assert_eq!(got[1].1, *on);
    // The off-CPU sample: at the switch-out (20 µs - 3 µs), under its root.
    let (ts, off) = &got[2];
    assert_eq!(ts - got[0].0, 7_000);
    assert_eq!(off[0], OFF_CPU_ROOT);
    assert_eq!(off[1..], on[..]);
    assert_eq!(got[3].1, vec![NO_STACK.to_string()]);
    // The allocation: at its time, under its root.
    let (ts, alloc) = &got[4];
    assert_eq!(ts - got[0].0, 30_000);
    assert_eq!(alloc[0], ALLOC_ROOT);
    assert_eq!(alloc[1..], on[..]);
}

#[test]
fn snapshot_triggers_are_instants_on_the_process_track_named_by_reason() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    b.poll_end(7, 0, 3_000, 1, true);
    b.snapshot_trigger(9, 2_500, "slow-poll");
    b.snapshot_trigger(9, 4_000, "deploy check");
    b.snapshot_request(7, 3_500, "deploy check");
    let (packets, c) = export(b);
    assert_eq!(c.stats.snapshot_triggers, 2);
    assert_eq!(c.stats.snapshot_requests, 1);
    // The process track's uuid (the descriptor with a process).
    let proc_track = packets
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .find(|t| t.process.is_some())
        .and_then(|t| t.uuid)
        .expect("a process track");
    let names: HashMap<u64, String> = packets
        .iter()
        .filter_map(|p| p.interned_data.as_ref())
        .flat_map(|d| d.event_names.iter())
        .filter_map(|n| Some((n.iid?, n.name.clone()?)))
        .collect();
    let mut marks: Vec<(u64, String)> = packets
        .iter()
        .filter_map(|p| {
            let e = p.track_event.as_ref()?;
            (e.r#type == Some(TYPE_INSTANT) && e.track_uuid == Some(proc_track))
                .then(|| (p.timestamp.unwrap(), names[&e.name_iid.unwrap()].clone()))
        })
        .collect();
    marks.sort();
    // TraceBuilder's ticks are ns; timestamps count from the anchor (0).
    assert_eq!(
        marks,
        [
            (2_500, "snapshot: slow-poll".to_string()),
            (3_500, "snapshot requested: deploy check".to_string()),
            (4_000, "snapshot: deploy check".to_string())
        ]
    );
}
