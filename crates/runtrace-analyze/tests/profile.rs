//! CPU profile input (format 1.1): `cpu_sample` / `off_cpu` events
//! attributed to the poll running on the sampled thread
//! (`runtrace_model::profile`), the notes about what was recorded, files
//! cut anywhere, and the runtime analysis unchanged by samples.

use runtrace_analyze::runtime::Engine;
use runtrace_analyze::{analyze_files, Options};
use runtrace_format::frame::{Mapping, ProfileInfo};
use runtrace_model::input;
use runtrace_model::profile::{self, Profile, ProfilePass, SampleKind};
use runtrace_model::synth::TraceBuilder;
use std::path::PathBuf;

/// The recorder's writer thread: samples are in its chunks.
const WRITER: u64 = 1;
/// A worker thread.
const W0: u64 = 100;
const MS: u64 = 1_000_000;

fn perf_info() -> ProfileInfo {
    ProfileInfo {
        mode: ProfileInfo::MODE_PERF,
        hz: 99,
        flags: ProfileInfo::FLAG_OFF_CPU,
        message: String::new(),
    }
}

fn app_mapping() -> Mapping {
    Mapping {
        start: 0x40_0000,
        end: 0x50_0000,
        file_offset: 0,
        build_id: vec![7; 20],
        path: "/app/server".into(),
    }
}

/// Task 7 spawned at src/hot.rs:12:5, polled on worker 0 (tid 100) from 10
/// to 20 ms and from 40 to 50 ms; task 8 (spawned before the recording: no
/// location) polled from 60 to 70 ms. Profile frames and stacks 1..=3.
fn base() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    b.thread_name(W0, "tokio-runtime-worker");
    b.thread_name(WRITER, "runtrace-writer");
    b.location(1, "src/hot.rs", 12, 5);
    b.profile(&perf_info());
    b.mappings(&[app_mapping()]);
    b.stacks(&[
        (1, &[0x40_1234, 0x40_1000]),
        (2, &[0x40_2222]),
        (3, &[0x40_3333, 0x40_1000]),
    ]);
    b.spawn(W0, MS, 7, 0, 1, 0);
    b.poll_start(W0, 0, 10 * MS, 7, 0, 0);
    b.poll_end(W0, 0, 20 * MS, 7, false);
    b.poll_start(W0, 0, 40 * MS, 7, 0, 0);
    b.poll_end(W0, 0, 50 * MS, 7, true);
    b.terminate(W0, 50 * MS, 7);
    b.poll_start(W0, 0, 60 * MS, 8, 0, 0);
    b.poll_end(W0, 0, 70 * MS, 8, true);
    b
}

fn load(bytes: Vec<u8>) -> Profile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, bytes).unwrap();
    profile::load(&[path]).unwrap()
}

#[test]
fn sample_inside_a_poll_belongs_to_its_task_location_and_worker() {
    let mut b = base();
    b.cpu_sample(WRITER, 15 * MS, W0, 1);
    b.cpu_sample(WRITER, 65 * MS, W0, 2); // task 8: no known location
    let p = load(b.finish());
    assert_eq!(p.samples.len(), 2);
    let s = &p.samples[0];
    assert_eq!(s.ts_ns, 15 * MS as i64);
    assert_eq!((s.tid, s.thread.as_str()), (W0, "tokio-runtime-worker"));
    assert_eq!(&*s.stack, &[0x40_1234, 0x40_1000]);
    assert_eq!(s.kind, SampleKind::OnCpu);
    assert_eq!(s.task, Some(7));
    assert_eq!(s.location.as_deref(), Some("src/hot.rs:12:5"));
    assert_eq!(s.worker, Some(0));
    assert_eq!(s.poll_start_ns, Some(10 * MS as i64));
    let s = &p.samples[1];
    assert_eq!((s.task, s.location.as_deref()), (Some(8), None));
    assert_eq!(s.poll_start_ns, Some(60 * MS as i64));
    assert_eq!(p.mappings, [app_mapping()]);
    assert_eq!(p.info.len(), 1);
    assert_eq!(p.info[0].1, perf_info());
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    assert!(p.stats.errors.is_empty(), "{:?}", p.stats.errors);
}

#[test]
fn sample_between_polls_belongs_to_the_thread_only() {
    let mut b = base();
    b.cpu_sample(WRITER, 5 * MS, W0, 1); // before any poll
    b.cpu_sample(WRITER, 15 * MS + 1, 555, 1); // another thread, during W0's poll
    b.cpu_sample(WRITER, 30 * MS, W0, 1); // between two polls of task 7
    b.cpu_sample(WRITER, 80 * MS, W0, 1); // after the last
    let p = load(b.finish());
    let ts: Vec<i64> = p.samples.iter().map(|s| s.ts_ns).collect();
    assert_eq!(
        ts,
        [5, 15, 30, 80].map(|m| m * MS as i64 + (m == 15) as i64)
    );
    for s in &p.samples {
        assert_eq!(
            (s.task, &s.location, s.worker, s.poll_start_ns),
            (None, &None, None, None),
            "{s:?}"
        );
    }
    // Unnamed thread: empty name.
    assert_eq!(p.samples[1].tid, 555);
    assert_eq!(p.samples[1].thread, "");
}

#[test]
fn off_cpu_belongs_to_the_poll_it_switched_out_in() {
    let mut b = base();
    // Switched out at 18 ms in task 7's first poll; the switch-in (22 ms)
    // is stamped after that poll's end (clock skew): still that poll.
    b.off_cpu(WRITER, 22 * MS, W0, 3, 4 * MS);
    // Switched out at 30 ms (between polls), back at 41 ms (in a poll):
    // the thread's, not the poll's.
    b.off_cpu(WRITER, 41 * MS, W0, 2, 11 * MS);
    // Switched out at 45 ms, back at 48 ms: inside the second poll.
    b.off_cpu(WRITER, 48 * MS, W0, 3, 3 * MS);
    let p = load(b.finish());
    let got: Vec<(i64, Option<u64>, Option<i64>, SampleKind)> = p
        .samples
        .iter()
        .map(|s| (s.ts_ns, s.task, s.poll_start_ns, s.kind))
        .collect();
    let ms = |m: u64| (m * MS) as i64;
    assert_eq!(
        got,
        [
            (
                ms(22),
                Some(7),
                Some(ms(10)),
                SampleKind::OffCpu { off_ns: 4 * MS }
            ),
            (ms(41), None, None, SampleKind::OffCpu { off_ns: 11 * MS }),
            (
                ms(48),
                Some(7),
                Some(ms(40)),
                SampleKind::OffCpu { off_ns: 3 * MS }
            ),
        ]
    );
    assert_eq!(p.samples[0].location.as_deref(), Some("src/hot.rs:12:5"));
}

fn assert_note(p: &Profile, text: &str) {
    assert!(
        p.notes.iter().any(|n| n.contains(text)),
        "{text:?} in {:?}",
        p.notes
    );
}

#[test]
fn notes_say_what_was_not_recorded() {
    // No PROFILE frame at all.
    let p = load(TraceBuilder::new().finish());
    assert!(p.samples.is_empty());
    assert_note(&p, "no PROFILE frame");
    // Profiling refused: the message is passed on.
    let mut b = TraceBuilder::new();
    b.profile(&ProfileInfo {
        mode: ProfileInfo::MODE_NONE,
        hz: 99,
        flags: 0,
        message: "perf_event_open: EACCES; SIGPROF timer: EPERM".into(),
    });
    let p = load(b.finish());
    assert_note(&p, "not possible: perf_event_open: EACCES");
    // A stack id no STACKS frame defined, and no MAPPINGS: empty stack,
    // both noted.
    let mut b = TraceBuilder::new();
    b.profile(&perf_info());
    b.cpu_sample(WRITER, MS, W0, 42);
    b.cpu_sample(WRITER, 2 * MS, W0, 0);
    let p = load(b.finish());
    assert_eq!(p.samples.len(), 2);
    assert!(p.samples.iter().all(|s| s.stack.is_empty()));
    assert_note(&p, "1 samples name a stack");
    assert_note(&p, "no MAPPINGS");
    // Nothing readable at all is an error naming the file.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("trace.0.bin");
    let e = profile::load(&[&missing]).unwrap_err();
    assert!(e.to_string().contains("trace.0.bin"), "{e}");
    assert!(profile::load::<PathBuf>(&[]).is_err());
}

/// Stacks are per file: a sample in the second file of a recording uses
/// the second file's definitions; the same stack in both files is one
/// stack in the model.
#[test]
fn stacks_resolve_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (i, stack) in [[0x40_1111u64, 0x40_1000], [0x40_2222, 0x40_1000]]
        .iter()
        .enumerate()
    {
        let mut b = TraceBuilder::new();
        b.profile(&perf_info());
        b.mappings(&[app_mapping()]);
        b.stacks(&[(1, &stack[..]), (2, &[0x40_9999])]);
        b.cpu_sample(WRITER, (i as u64 + 1) * MS, W0, 1);
        b.cpu_sample(WRITER, (i as u64 + 1) * MS + 1, W0, 2);
        let path = dir.path().join(format!("trace.{i}.bin"));
        std::fs::write(&path, b.finish()).unwrap();
        paths.push(path);
    }
    let mut pass = ProfilePass::default();
    let (model, stats) = input::read(&paths, &mut pass, None);
    assert_eq!(model.stacks.len(), 4, "empty, two stacks 1, one stack 2");
    let p = pass.profile(&model, stats);
    let stacks: Vec<&[u64]> = p.samples.iter().map(|s| &*s.stack).collect();
    assert_eq!(
        stacks,
        [
            &[0x40_1111, 0x40_1000][..],
            &[0x40_9999],
            &[0x40_2222, 0x40_1000],
            &[0x40_9999]
        ]
    );
    assert_eq!(p.info.len(), 2);
    assert_eq!(p.mappings, [app_mapping()], "one mapping, not two");
}

/// Samples change nothing the runtime analysis reports, and the profile
/// comes from the same read.
#[test]
fn runtime_analysis_ignores_samples() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.0.bin");
    std::fs::write(&plain, base().finish()).unwrap();
    let mut b = base();
    // Within the span of the other events, so the duration is the same.
    for i in 0..100 {
        let t = 2 * MS + i * 600_000;
        b.cpu_sample(WRITER, t, W0, 1 + i % 3);
        b.off_cpu(WRITER, t + 1, W0, 2, 500);
    }
    let sampled = dir.path().join("sampled.0.bin");
    std::fs::write(&sampled, b.finish()).unwrap();
    let a = analyze_files(&[&plain], Options::default()).to_json();
    let with = analyze_files(&[&sampled], Options::default()).to_json();
    assert_eq!(with["events"], a["events"].as_u64().unwrap() + 200);
    for key in [
        "duration_ns",
        "tasks",
        "global_queue",
        "workers",
        "poll_ns",
        "wake_to_poll_ns",
        "spawn_locations",
        "queues",
        "findings",
        "notes",
    ] {
        assert!(!a[key].is_null(), "{key} in the report");
        assert_eq!(with[key], a[key], "{key}");
    }
    // One read, two passes.
    let mut passes = (Engine::new(Default::default()), ProfilePass::default());
    let (model, stats) = input::read(&[sampled], &mut passes, None);
    let p = passes.1.profile(&model, stats);
    assert_eq!(p.samples.len(), 200);
    // Task 7 runs 10-20 ms and 40-50 ms: samples at 2 + 0.6 i ms.
    let in_polls = (0..100u64)
        .map(|i| 2 * MS + i * 600_000)
        .filter(|t| (10 * MS..=20 * MS).contains(t) || (40 * MS..=50 * MS).contains(t))
        .count();
    assert_eq!(
        p.samples.iter().filter(|s| s.task == Some(7)).count(),
        2 * in_polls
    );
}

/// A file with samples cut at every byte: never a panic, every sample of
/// the complete chunks before the cut is there, and the cut is reported.
#[test]
fn file_with_samples_cut_at_every_byte() {
    let mut b = base();
    b.round(9 * MS);
    for i in 0..6 {
        b.cpu_sample(WRITER, (10 + 2 * i) * MS, W0, 1 + i % 3);
        b.round((11 + 2 * i) * MS); // one chunk per sample
    }
    let full = b.finish();
    let whole = load(full.clone()).samples;
    assert_eq!(whole.len(), 6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    let mut last = 0;
    for cut in 0..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let p = match profile::load(&[&path]) {
            Ok(p) => p,
            Err(e) => {
                assert!(e.to_string().contains("trace.0.bin"), "cut {cut}: {e}");
                continue;
            }
        };
        // Samples only grow with the cut, and are a prefix of the whole.
        assert!(p.samples.len() >= last, "cut {cut}");
        last = p.samples.len();
        assert_eq!(p.samples[..], whole[..p.samples.len()], "cut {cut}");
        let at_boundary = p.stats.errors.is_empty();
        assert!(
            at_boundary || p.stats.errors.iter().any(|e| e.contains("truncated")),
            "cut {cut}: {:?}",
            p.stats.errors
        );
    }
    assert_eq!(last, 6, "the last sample's chunk is complete before END");
}
