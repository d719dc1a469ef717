//! Format 1.1, CPU profiles (docs/format.md, `STACKS`, `MAPPINGS`,
//! `PROFILE`, events `cpu_sample` and `off_cpu`): round trips through the
//! reader's tables, a file with samples cut at every byte, and definition
//! frames with a valid crc but bad content.

mod common;

use common::*;
use runtrace_format::frame::{self, FrameType, Mapping, ProfileInfo, MAX_STACK_DEPTH};
use runtrace_format::schema::{builtin_by_name, builtin_schemas, ids};
use runtrace_format::varint;
use runtrace_format::{ErrorKind, Record, Value};

const WRITER: u64 = 77;
/// Events in each chunk of [`profile_file`], in order.
const CHUNK_EVENTS: [u64; 2] = [3, 2];

fn mapping(start: u64, path: &str) -> Mapping {
    Mapping {
        start,
        end: start + 0x10_0000,
        file_offset: 0x1000,
        build_id: (0..20).collect(),
        path: path.into(),
    }
}

fn profile_info() -> ProfileInfo {
    ProfileInfo {
        mode: ProfileInfo::MODE_PERF,
        hz: 99,
        flags: ProfileInfo::FLAG_OFF_CPU,
        message: String::new(),
    }
}

/// Stack 1: a user stack; stack 2: the deepest allowed, with addresses
/// going down and up across the whole u64 range (zigzag deltas wrap).
fn stack_defs() -> Vec<(u64, Vec<u64>)> {
    let deep: Vec<u64> = (0..MAX_STACK_DEPTH as u64)
        .map(|i| {
            if i % 2 == 0 {
                0xffff_ffff_8100_0000 + i
            } else {
                0x5555_0000_0000 + i * 7
            }
        })
        .collect();
    vec![
        (
            1,
            vec![0x5555_0000_1234, 0x5555_0000_1000, 0x7f00_0000_2000],
        ),
        (2, deep),
    ]
}

fn stacks_payload(defs: &[(u64, Vec<u64>)]) -> Vec<u8> {
    frame::stacks(defs.iter().map(|(id, a)| (*id, &a[..])))
}

/// A 1.1 file: PROFILE, MAPPINGS (the second frame replaces one mapping),
/// STACKS, and the writer thread's chunks of samples ([`CHUNK_EVENTS`]).
fn profile_file() -> FileBuilder {
    let mut h = header(builtin_schemas());
    h.version_minor = runtrace_format::VERSION_MINOR;
    let mut b = FileBuilder::with_header(&h);
    b.frame(FrameType::Thread, &frame::thread(WRITER, "runtrace-writer"));
    b.frame(FrameType::Profile, &frame::profile(&profile_info()));
    b.frame(
        FrameType::Mappings,
        &frame::mappings(&[
            mapping(0x5555_0000_0000, "/app/old"),
            mapping(0x7f00_0000_0000, "/lib/libc.so.6"),
        ]),
    );
    b.frame(
        FrameType::Mappings,
        &frame::mappings(&[mapping(0x5555_0000_0000, "/app/new")]),
    );
    b.frame(FrameType::Stacks, &stacks_payload(&stack_defs()));
    let sample = |dt, tid, stack| Rec::ev(ids::CPU_SAMPLE, dt, vec![F::U(tid), F::U(stack)]);
    let off =
        |dt, tid, stack, ns| Rec::ev(ids::OFF_CPU, dt, vec![F::U(tid), F::U(stack), F::U(ns)]);
    b.chunk(&Chunk::new(
        WRITER,
        2_000,
        vec![
            sample(1, 100, 1),
            sample(3, 101, 2),
            off(2, 100, 1, 5_000_000),
        ],
    ));
    b.frame(FrameType::Round, &frame::round(2_010));
    // A later STACKS frame for a stack first used after it.
    b.frame(FrameType::Stacks, &stacks_payload(&[(3, vec![0x10, 0x8])]));
    b.chunk(&Chunk::new(
        WRITER,
        2_020,
        vec![sample(0, 100, 3), sample(1, 100, 0)],
    ));
    b.frame(FrameType::End, &frame::end(5, 0));
    b
}

#[test]
fn profile_frames_fill_the_tables() {
    let b = profile_file();
    let (items, r) = read_all(&b.bytes);
    assert!(errors(&items).is_empty(), "{:?}", debug_items(&items));
    assert!(r.sealed());
    assert!(r.header().unwrap().version_minor >= 1);
    let t = r.tables();
    for (id, addrs) in stack_defs() {
        assert_eq!(&**t.stack(id).unwrap(), &addrs[..], "stack {id}");
    }
    assert_eq!(&**t.stack(3).unwrap(), &[0x10, 0x8]);
    assert!(t.stack(0).is_none() && t.stack(4).is_none());
    assert_eq!(t.stack_count(), 3);
    assert_eq!(
        t.mappings(),
        &[
            mapping(0x5555_0000_0000, "/app/new"),
            mapping(0x7f00_0000_0000, "/lib/libc.so.6")
        ]
    );
    assert_eq!(t.profile(), Some(&profile_info()));
    // The events decode by their schemas like any other.
    let evs: Vec<(String, Vec<u64>)> = event_records(&items)
        .iter()
        .flat_map(|(_, _, evs)| evs.iter())
        .map(|e| {
            let vals = e
                .values
                .iter()
                .map(|v| match v {
                    Value::U(x) => *x,
                    v => panic!("{v:?}"),
                })
                .collect();
            (e.schema.name.clone(), vals)
        })
        .collect();
    assert_eq!(
        evs,
        [
            ("cpu_sample".to_string(), vec![100, 1]),
            ("cpu_sample".to_string(), vec![101, 2]),
            ("off_cpu".to_string(), vec![100, 1, 5_000_000]),
            ("cpu_sample".to_string(), vec![100, 3]),
            ("cpu_sample".to_string(), vec![100, 0]),
        ]
    );
    // Recorder-only events: no probe site, so probe backends skip them.
    assert!(!builtin_by_name("cpu_sample").unwrap().has_probe_site());
    assert!(!builtin_by_name("off_cpu").unwrap().has_probe_site());
    assert_eq!(builtin_by_name("off_cpu").unwrap().json_name, "OffCpu");
}

/// Section 7 rule 2 on a file with samples: cut anywhere, the reader never
/// panics, reads every complete frame before the cut (definitions
/// included) and reports the truncation at the incomplete frame's offset.
#[test]
fn file_with_samples_cut_at_every_byte() {
    let b = profile_file();
    let full = b.bytes.clone();
    for cut in 0..=full.len() {
        let bytes = &full[..cut];
        let (items, r) = read_all(bytes);
        let complete: Vec<&FrameAt> = b.frames.iter().filter(|f| f.end() <= cut as u64).collect();
        let errs = errors(&items);
        let at_boundary = cut == 8 || b.frames.iter().any(|f| f.end() == cut as u64);
        if cut < 8 || complete.is_empty() {
            assert!(!errs.is_empty(), "cut {cut}: no error without a header");
            continue;
        }
        if at_boundary {
            assert!(errs.is_empty(), "cut {cut}: {errs:?}");
        } else {
            let start = complete.last().unwrap().end();
            assert_eq!(errs.len(), 1, "cut {cut}: {errs:?}");
            assert_eq!(errs[0].kind, ErrorKind::Truncated, "cut {cut}");
            assert_eq!(errs[0].offset, start, "cut {cut}");
        }
        // Every complete frame was read: its definitions are there...
        let has = |ty: FrameType| complete.iter().any(|f| f.ty == ty as u8);
        let stacks_frames = complete
            .iter()
            .filter(|f| f.ty == FrameType::Stacks as u8)
            .count();
        let t = r.tables();
        assert_eq!(t.profile().is_some(), has(FrameType::Profile), "cut {cut}");
        assert_eq!(t.stack(1).is_some(), stacks_frames >= 1, "cut {cut}");
        assert_eq!(t.stack(3).is_some(), stacks_frames >= 2, "cut {cut}");
        let mappings_frames = complete
            .iter()
            .filter(|f| f.ty == FrameType::Mappings as u8)
            .count();
        let want_path = ["", "/app/old", "/app/new"][mappings_frames];
        assert_eq!(
            t.mappings().first().map_or("", |m| m.path.as_str()),
            want_path,
            "cut {cut}"
        );
        // ... and every complete chunk's events.
        let chunks = complete
            .iter()
            .filter(|f| f.ty == FrameType::Chunk as u8)
            .count();
        let want_events: u64 = CHUNK_EVENTS[..chunks].iter().sum();
        let got: u64 = event_records(&items)
            .iter()
            .map(|(_, _, e)| e.len() as u64)
            .sum();
        assert_eq!(got, want_events, "cut {cut}");
        assert_eq!(r.sealed(), cut == full.len(), "cut {cut}");
    }
}

/// A file whose definition frame has a valid crc but `payload`, followed by
/// a chunk; returns the items, the reader and the frame's offset.
fn with_bad_frame(
    ty: FrameType,
    payload: &[u8],
) -> (
    Vec<Result<Record, runtrace_format::ReadError>>,
    u64,
    Vec<u8>,
) {
    let mut b = FileBuilder::with_header(&header(builtin_schemas()));
    b.frame(FrameType::Stacks, &stacks_payload(&[(9, vec![0x99])]));
    b.frame(
        FrameType::Mappings,
        &frame::mappings(&[mapping(0x1000, "/good")]),
    );
    b.frame(FrameType::Profile, &frame::profile(&profile_info()));
    let at = b.frame(ty, payload);
    b.chunk(&Chunk::new(
        WRITER,
        2_000,
        vec![Rec::ev(ids::CPU_SAMPLE, 1, vec![F::U(100), F::U(9)])],
    ));
    let bytes = b.bytes.clone();
    let (items, _) = read_all(&bytes);
    (items, at, bytes)
}

/// Section 7 rule 3 for the 1.1 frames: the error names the frame's
/// offset and what is wrong, the frame defines nothing, reading goes on.
#[test]
fn corrupt_profile_frames_are_reported_and_skipped() {
    let mut id0 = Vec::new();
    varint::put(&mut id0, 1);
    varint::put(&mut id0, 0); // id 0
    varint::put(&mut id0, 0);
    let mut too_deep = Vec::new();
    varint::put(&mut too_deep, 1);
    varint::put(&mut too_deep, 5);
    varint::put(&mut too_deep, MAX_STACK_DEPTH as u64 + 1);
    // A good stack 9 replacement, then a cut varint: the frame is
    // rejected whole, so the old stack 9 stays.
    let mut cut = stacks_payload(&[(9, vec![0x1234]), (10, vec![0x1])]);
    cut.truncate(cut.len() - 1);
    let mut backwards = Vec::new();
    varint::put(&mut backwards, 1);
    varint::put(&mut backwards, 0x2000); // start
    varint::put(&mut backwards, 0x1000); // end before start
    varint::put(&mut backwards, 0);
    varint::put(&mut backwards, 0);
    varint::put_str(&mut backwards, "/x");
    let mut long_id = Vec::new();
    varint::put(&mut long_id, 1);
    for v in [0x1000u64, 0x2000, 0, 200] {
        varint::put(&mut long_id, v); // build id of 200 bytes in a short frame
    }
    let mut no_message = Vec::new();
    for v in [1u64, 99, 0] {
        varint::put(&mut no_message, v);
    }
    let cases: [(FrameType, Vec<u8>, &str); 6] = [
        (FrameType::Stacks, id0, "stack id 0"),
        (FrameType::Stacks, too_deep, "depth 129"),
        (FrameType::Stacks, cut, "past the end"),
        (FrameType::Mappings, backwards, "before it starts"),
        (FrameType::Mappings, long_id, "build id runs past the end"),
        (FrameType::Profile, no_message, "past the end"),
    ];
    for (ty, payload, what) in cases {
        let (items, at, bytes) = with_bad_frame(ty, &payload);
        let errs = errors(&items);
        assert_eq!(errs.len(), 1, "{ty:?} {what}: {:?}", debug_items(&items));
        assert_eq!(errs[0].offset, at, "{ty:?} {what}");
        match &errs[0].kind {
            ErrorKind::Corrupt(m) => assert!(m.contains(what), "{ty:?}: {m}"),
            k => panic!("{ty:?}: {k:?}"),
        }
        // The next chunk is still read, and the earlier definitions stand.
        let n: usize = event_records(&items).iter().map(|(_, _, e)| e.len()).sum();
        assert_eq!(n, 1, "{ty:?} {what}");
        let mut r = reader(&bytes);
        for _ in r.by_ref() {}
        let t = r.tables();
        assert_eq!(&**t.stack(9).unwrap(), &[0x99], "{ty:?} {what}");
        assert!(t.stack(10).is_none());
        assert_eq!(t.mappings(), &[mapping(0x1000, "/good")], "{ty:?} {what}");
        assert_eq!(t.profile(), Some(&profile_info()), "{ty:?} {what}");
    }
}

/// The writer side never panics inside the application: a stack deeper
/// than the limit keeps its leaf-most frames, id 0 is left out.
#[test]
fn stacks_encoder_cuts_deep_stacks_and_skips_id_0() {
    let deep: Vec<u64> = (0..300).collect();
    let p = frame::stacks([(0, &[1u64][..]), (4, &deep[..])].into_iter());
    let s = frame::decode_stacks(&p).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, 4);
    assert_eq!(&*s[0].1, &deep[..MAX_STACK_DEPTH]);
}
