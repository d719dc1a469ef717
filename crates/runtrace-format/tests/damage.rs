//! Reader rules for damaged and unusual files (docs/format.md sections 2, 3,
//! 7 and 10): truncation at every byte, random corruption, chunks with a
//! valid crc but bad content, unknown frame types and versions, id 0 in
//! definitions, END totals.

mod common;

use common::*;
use proptest::prelude::*;
use runtrace_format::frame::{self, FrameType};
use runtrace_format::schema::FieldType;
use runtrace_format::varint;
use runtrace_format::{ErrorKind, ReadError, Record, Value};

fn err_at(offset: u64, kind: ErrorKind) -> String {
    format!(
        "{:?}",
        Err::<Record, _>(ReadError {
            file: "mem.bin".into(),
            offset,
            kind
        })
    )
}

fn corrupt_msg(e: &ReadError) -> &str {
    match &e.kind {
        ErrorKind::Corrupt(m) => m,
        k => panic!("expected corruption, got {k:?} ({e})"),
    }
}

// ---------------------------------------------------------------------------
// Section 7 rule 2: truncation.

/// Cut the sample file at every byte offset: complete frames before the cut
/// are reported exactly as in the whole file, then a Truncated error at the
/// start of the incomplete frame (0 inside the magic); a cut at a frame
/// boundary is no error but leaves the file unsealed.
#[test]
fn s7_truncation_every_byte() {
    let s = sample_file();
    let bytes = &s.file.bytes;
    let frames = &s.file.frames;
    let (full, r) = read_all(bytes);
    assert!(errors(&full).is_empty(), "{:?}", errors(&full));
    assert!(r.sealed());
    let full_dbg = debug_items(&full);
    assert_eq!(
        full.len(),
        frames.iter().filter(|f| yields_record(f.ty)).count()
    );
    // The sample's chunks decode to what the spec says.
    let recs = event_records(&full);
    assert_eq!(recs.len(), s.chunks.len());
    for (c, (_, _, evs)) in s.chunks.iter().zip(&recs) {
        assert_events(evs, &c.expected(&s.header, &s.defs, &s.schemas));
    }

    for cut in 0..=bytes.len() {
        let (items, r) = read_all(&bytes[..cut]);
        let got = debug_items(&items);
        let cut = cut as u64;
        if cut < 8 {
            assert_eq!(got, [err_at(0, ErrorKind::Truncated)], "cut {cut}");
            continue;
        }
        let complete = frames.iter().take_while(|f| f.end() <= cut).count();
        let n_rec = frames[..complete]
            .iter()
            .filter(|f| yields_record(f.ty))
            .count();
        let events: usize = event_records(&items).iter().map(|e| e.2.len()).sum();
        let want_events: u64 = frames[..complete]
            .iter()
            .filter(|f| f.ty == FrameType::Chunk as u8)
            .map(|f| {
                s.chunks[frames
                    .iter()
                    .filter(|g| g.ty == 7 && g.offset < f.offset)
                    .count()]
                .event_count()
            })
            .sum();
        assert_eq!(events as u64, want_events, "cut {cut}");
        assert_eq!(r.events_read(), want_events, "cut {cut}");
        let boundary = complete > 0 && frames[complete - 1].end() == cut;
        if boundary {
            assert_eq!(got, full_dbg[..n_rec], "cut {cut} (frame boundary)");
            assert_eq!(r.sealed(), cut == bytes.len() as u64, "cut {cut}");
        } else {
            // Inside a frame, or right after the magic (the HEADER is missing).
            let start = if complete == 0 {
                8
            } else {
                frames[complete].offset
            };
            assert_eq!(got.len(), n_rec + 1, "cut {cut}: {got:#?}");
            assert_eq!(got[..n_rec], full_dbg[..n_rec], "cut {cut}");
            assert_eq!(got[n_rec], err_at(start, ErrorKind::Truncated), "cut {cut}");
            assert!(!r.sealed());
        }
    }
}

// ---------------------------------------------------------------------------
// Section 7 rules 1 and 3: random corruption.

/// Distinct positions in `lo..hi` with a non-zero xor mask each.
fn flips(lo: u64, hi: u64) -> impl Strategy<Value = Vec<(u64, u8)>> {
    proptest::collection::vec((lo..hi, 1u8..=255), 1..=8).prop_map(|mut v| {
        v.sort_by_key(|x| x.0);
        v.dedup_by_key(|x| x.0);
        v
    })
}

/// Index of the first record of frame `i` in a full read (if it yields one).
fn record_index(frames: &[FrameAt], i: usize) -> usize {
    frames[..i].iter().filter(|f| yields_record(f.ty)).count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Damage inside one frame's crc or payload: a checksum mismatch at that
    /// frame's offset, and every other frame reads as before.
    #[test]
    fn s7_crc_mismatch_names_frame_and_reading_goes_on(
        (i, fl) in (1usize..sample_file().file.frames.len()).prop_flat_map(|i| {
            let f = sample_file().file.frames[i];
            (Just(i), flips(f.offset + 5, f.end()))
        })
    ) {
        let s = sample_file();
        let frames = &s.file.frames;
        let mut bytes = s.file.bytes.clone();
        for (p, x) in &fl {
            bytes[*p as usize] ^= x;
        }
        let (full, _) = read_all(&s.file.bytes);
        let full_dbg = debug_items(&full);
        let (items, r) = read_all(&bytes);
        let got = debug_items(&items);
        let f = frames[i];
        let bad = err_at(f.offset, ErrorKind::Corrupt("frame checksum mismatch".into()));
        let k = record_index(frames, i);
        prop_assert_eq!(&got[..k], &full_dbg[..k]);
        prop_assert_eq!(&got[k], &bad);
        let ty = FrameType::from_u8(f.ty).unwrap();
        match ty {
            FrameType::Schema | FrameType::Strings | FrameType::Locations => {
                // Later chunks may miss definitions, but reading goes on to
                // the END frame.
                let ends = matches!(items.last(), Some(Ok(Record::End { .. })));
                prop_assert!(ends);
                prop_assert!(r.sealed());
            }
            _ => {
                prop_assert_eq!(&got[k + 1..], &full_dbg[k + 1..]);
                prop_assert_eq!(r.sealed(), ty != FrameType::End);
            }
        }
    }

    /// Any damage anywhere: no panic, no hang, offsets never go backwards,
    /// and everything before the first damaged frame reads as before. Any
    /// prefix of the damaged file behaves too.
    #[test]
    fn s7_random_corruption_never_panics(
        fl in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<bool>()), 1..=8),
        cut in any::<prop::sample::Index>(),
    ) {
        let s = sample_file();
        let mut bytes = s.file.bytes.clone();
        let mut first = bytes.len();
        for (ix, b, xor) in &fl {
            let p = ix.index(bytes.len());
            let old = bytes[p];
            bytes[p] = if *xor { old ^ b.max(&1) } else { *b };
            if bytes[p] != old {
                first = first.min(p);
            }
        }
        let (full, _) = read_all(&s.file.bytes);
        let (items, _) = read_all(&bytes);
        let mut last = 0;
        for it in &items {
            let at = match it {
                Ok(Record::Events { offset, .. }) => *offset,
                Err(e) => e.offset,
                _ => continue,
            };
            prop_assert!(at >= last && at <= bytes.len() as u64, "offset {} after {}", at, last);
            last = at;
        }
        let intact = s.file.frames.iter().take_while(|f| f.end() <= first as u64).count();
        let k = record_index(&s.file.frames, intact);
        prop_assert_eq!(&debug_items(&items)[..k], &debug_items(&full)[..k]);
        let cut = cut.index(bytes.len() + 1);
        read_all(&bytes[..cut]);
    }

    /// Random bytes, with and without the magic and a valid header in front.
    #[test]
    fn s7_garbage_never_panics(
        tail in proptest::collection::vec(any::<u8>(), 0..300),
        prefix in 0usize..3,
    ) {
        let mut bytes = match prefix {
            0 => Vec::new(),
            1 => runtrace_format::MAGIC.to_vec(),
            _ => FileBuilder::with_header(&sample_file().header).bytes,
        };
        bytes.extend_from_slice(&tail);
        let (items, _) = read_all(&bytes);
        if prefix == 0 && !tail.starts_with(runtrace_format::MAGIC) {
            prop_assert_eq!(items.len(), 1);
            prop_assert!(items[0].is_err());
        }
        if prefix == 2 {
            let header_first = matches!(items.first(), Some(Ok(Record::Header(_))));
            prop_assert!(header_first);
        }
    }

    /// Garbage frames with valid crcs after a valid header: every frame type,
    /// random payloads. Decoding must fail cleanly, never panic.
    #[test]
    fn s7_garbage_payloads_with_valid_crc(
        frames in proptest::collection::vec((1u8..=14, proptest::collection::vec(any::<u8>(), 0..40)), 1..12),
    ) {
        let s = sample_file();
        let mut b = FileBuilder::with_header(&s.header);
        b.frame(FrameType::Schema, &frame::schemas(&s.schemas[2..]));
        b.defs(&s.defs);
        for (ty, p) in &frames {
            b.raw(*ty, p);
        }
        let (items, _) = read_all(&b.bytes);
        // Nothing here may stop the reader (no type 0, no len over 64 MiB,
        // the first HEADER is intact): every frame of a known type other
        // than a definition yields a record or an error.
        let min = 1 + frames.iter().filter(|f| yields_record(f.0)).count();
        prop_assert!(items.len() >= min, "{} items < {}: {:?}", items.len(), min, items);
    }
}

// ---------------------------------------------------------------------------
// Section 7 rule 3: chunks with a valid crc and bad content.

struct BadCase {
    items: Vec<Result<Record, runtrace_format::ReadError>>,
    chunk_at: u64,
    rec_at: Vec<u64>,
    body_at: u64,
}

/// A file whose chunk holds `recs` (count as given or the number of
/// `Rec::Event`s), followed by a ROUND and an END.
fn bad_chunk(recs: Vec<Rec>, count: Option<u64>) -> BadCase {
    use FieldType as T;
    let h = header(vec![
        schema(130, "good", &[("x", T::U64)]),
        schema(131, "istr", &[("q", T::Istr)]),
        schema(132, "loc", &[("l", T::Loc)]),
        schema(133, "bool", &[("b", T::Bool)]),
        schema(134, "str", &[("s", T::Str)]),
        schema(135, "i", &[("i", T::I64)]),
    ]);
    let mut defs = Defs::default();
    defs.strings.insert(1, "one".into());
    defs.locations.insert(1, ("a.rs".into(), 1, 2));
    let mut b = FileBuilder::with_header(&h);
    b.defs(&defs);
    let c = Chunk {
        count,
        ..Chunk::new(9, 100, recs)
    };
    let mut hdr = Vec::new();
    runtrace_format::chunk::ChunkHeader {
        tid: 9,
        state: runtrace_format::chunk::ChunkState {
            ticks: 100,
            task_reg: 0,
            worker_reg: u32::MAX,
        },
        count: count.unwrap_or_else(|| c.event_count()),
    }
    .encode(&mut hdr);
    let (chunk_at, rec_at) = b.chunk(&c);
    b.frame(FrameType::Round, &frame::round(5));
    b.frame(FrameType::End, &frame::end(0, 0));
    let (items, r) = read_all(&b.bytes);
    assert!(r.sealed(), "reading must go on to END");
    BadCase {
        items,
        chunk_at,
        rec_at,
        body_at: chunk_at + 9 + hdr.len() as u64,
    }
}

fn good(x: u64) -> Rec {
    Rec::ev(130, 1, vec![F::U(x)])
}

/// Checks: Header, Events with the `n_good` good events, the corruption at
/// `off` mentioning `what` and the chunk's offset, then ROUND and END.
fn expect_bad(case: &BadCase, n_good: usize, off: u64, what: &str) {
    let it = &case.items;
    assert!(matches!(it[0], Ok(Record::Header(_))));
    let mut i = 1;
    if n_good > 0 {
        let Ok(Record::Events { offset, events, .. }) = &it[i] else {
            panic!("{:?}", it[i])
        };
        assert_eq!(*offset, case.chunk_at);
        let xs: Vec<_> = events.iter().map(|e| e.values[0].clone()).collect();
        assert_eq!(xs, (1..=n_good as u64).map(Value::U).collect::<Vec<_>>());
        i += 1;
    }
    let Err(e) = &it[i] else {
        panic!("expected an error, got {:?}", it[i])
    };
    assert_eq!(e.offset, off, "{e}");
    let m = corrupt_msg(e);
    assert!(m.contains(what), "{m:?} should mention {what:?}");
    assert!(
        m.contains(&format!("chunk at byte {}", case.chunk_at)),
        "{m}"
    );
    assert!(
        e.to_string().contains(&format!("corrupt at byte {off}")),
        "{e}"
    );
    assert!(matches!(
        it[i + 1],
        Ok(Record::Round { watermark_ticks: 5 })
    ));
    assert!(matches!(it[i + 2], Ok(Record::End { .. })));
    assert_eq!(it.len(), i + 3);
}

fn case_with_bad(bad: Rec) -> BadCase {
    bad_chunk(vec![good(1), good(2), bad, good(3)], Some(4))
}

#[test]
fn s7_chunk_undefined_string_id() {
    let c = case_with_bad(Rec::ev(131, 1, vec![F::Istr(99)]));
    expect_bad(&c, 2, c.rec_at[2], "string id 99 was never defined");
}

#[test]
fn s7_chunk_undefined_location_id() {
    let c = case_with_bad(Rec::ev(132, 1, vec![F::Loc(42)]));
    expect_bad(&c, 2, c.rec_at[2], "location id 42 was never defined");
}

#[test]
fn s7_chunk_event_type_without_schema() {
    let c = case_with_bad(Rec::ev(250, 1, vec![]));
    expect_bad(&c, 2, c.rec_at[2], "event type 250 has no schema");
    let c = case_with_bad(Rec::ev(1_000, 1, vec![]));
    expect_bad(&c, 2, c.rec_at[2], "event type 1000 has no schema");
    let c = case_with_bad(Rec::Raw(vec![255, 0x80, 0x80, 0x80, 0x80, 0x10, 0]));
    expect_bad(&c, 2, c.rec_at[2], "out of range");
}

#[test]
fn s7_chunk_bool_byte_2() {
    let c = case_with_bad(Rec::Raw(vec![133, 1, 2]));
    expect_bad(&c, 2, c.rec_at[2], "bool byte 2");
}

#[test]
fn s7_chunk_overlong_varint() {
    // 11-byte varint in a field.
    let mut raw = vec![130, 1];
    raw.extend([0x80; 10]);
    raw.push(0);
    expect_bad(
        &case_with_bad(Rec::Raw(raw)),
        2,
        case_with_bad(good(0)).rec_at[2],
        "varint",
    );
    // 10 bytes whose last is > 1, in dt.
    let mut raw = vec![130];
    raw.extend([0xff; 9]);
    raw.extend([2, 0]);
    let c = case_with_bad(Rec::Raw(raw));
    expect_bad(&c, 2, c.rec_at[2], "varint overflows 64 bits");
    // In the zigzag of a signed field.
    let mut raw = vec![135, 0];
    raw.extend([0xff; 10]);
    let c = case_with_bad(Rec::Raw(raw));
    expect_bad(&c, 2, c.rec_at[2], "varint");
}

#[test]
fn s7_chunk_bad_strings() {
    let c = case_with_bad(Rec::Raw(vec![134, 1, 2, 0xff, 0xfe]));
    expect_bad(&c, 2, c.rec_at[2], "not UTF-8");
    let c = case_with_bad(Rec::Raw(vec![134, 1, 100, b'a']));
    expect_bad(&c, 2, c.rec_at[2], "runs past the end");
}

#[test]
fn s7_chunk_field_runs_past_payload() {
    let c = bad_chunk(vec![good(1), Rec::Raw(vec![130, 1])], Some(2));
    expect_bad(&c, 1, c.rec_at[1], "runs past the end");
    let c = bad_chunk(vec![good(1), good(2), Rec::Raw(vec![130])], Some(3));
    expect_bad(&c, 2, c.rec_at[2], "runs past the end");
}

#[test]
fn s7_chunk_set_worker_out_of_range() {
    let mut raw = vec![0, 1];
    varint::put(&mut raw, u32::MAX as u64 + 1);
    let c = case_with_bad(Rec::Raw(raw));
    expect_bad(&c, 2, c.rec_at[2], "set_worker");
}

#[test]
fn s7_chunk_bad_first_event_reports_no_events() {
    let c = bad_chunk(vec![Rec::Raw(vec![133, 0, 7]), good(1)], Some(2));
    expect_bad(&c, 0, c.rec_at[0], "bool byte 7");
}

#[test]
fn s7_chunk_count_mismatch() {
    // Fewer events than event_count: all are reported, then the mismatch.
    let c = bad_chunk(vec![good(1), good(2), good(3)], Some(5));
    expect_bad(&c, 3, c.body_at, "chunk says 5 events but holds 3");
    // More events than event_count.
    let c = bad_chunk(vec![good(1), good(2), good(3)], Some(1));
    expect_bad(&c, 3, c.body_at, "chunk says 1 events but holds 3");
    // set_worker records are not events.
    let sw = Rec::SetWorker {
        escape: false,
        dt: 0,
        worker: Some(1),
    };
    let c = bad_chunk(vec![good(1), sw.clone(), good(2)], Some(3));
    expect_bad(&c, 2, c.body_at, "chunk says 3 events but holds 2");
    let c = bad_chunk(vec![sw, good(1)], Some(1));
    assert!(errors(&c.items).is_empty());
}

/// A damaged chunk header: the error names the frame.
#[test]
fn s7_chunk_header_damaged() {
    let h = header(vec![schema(130, "good", &[("x", FieldType::U64)])]);
    let mut b = FileBuilder::with_header(&h);
    let mut p = vec![9, 0, 0, 0];
    p.extend([0xff; 10]); // event_count overflows
    let at = b.frame(FrameType::Chunk, &p);
    b.frame(FrameType::Round, &frame::round(5));
    let (items, _) = read_all(&b.bytes);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].offset, at);
    assert!(corrupt_msg(errs[0]).contains("varint"));
    assert!(matches!(items.last(), Some(Ok(Record::Round { .. }))));
}

/// Section 5: a schema with an unknown field type code makes chunks with
/// that event undecodable from that event on; the SCHEMA frame is reported.
#[test]
fn s5_unknown_field_type_code() {
    let h = header(vec![schema(130, "good", &[("x", FieldType::U64)])]);
    let mut b = FileBuilder::with_header(&h);
    let mut p = Vec::new();
    varint::put(&mut p, 1);
    varint::put(&mut p, 140);
    varint::put_str(&mut p, "app");
    varint::put_str(&mut p, "future");
    varint::put(&mut p, 1);
    varint::put_str(&mut p, "x");
    p.push(42);
    let schema_at = b.frame(FrameType::Schema, &p);
    let (chunk_at, rec_at) = b.chunk(&Chunk::new(
        1,
        0,
        vec![good(1), Rec::Raw(vec![140, 0, 0]), good(2)],
    ));
    let (items, _) = read_all(&b.bytes);
    let errs = errors(&items);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].offset, schema_at);
    assert!(corrupt_msg(errs[0]).contains("unknown field type code 42"));
    assert_eq!(errs[1].offset, rec_at[1]);
    let ev = event_records(&items);
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].0, ev[0].2.len()), (chunk_at, 1));
}

// ---------------------------------------------------------------------------
// Sections 2, 3, 7 rule 4, 10: frame types and versions.

/// Unknown frame types anywhere after the HEADER are skipped silently.
#[test]
fn s7_unknown_frame_types_skipped() {
    let s = sample_file();
    let (want, _) = read_all(&s.file.bytes);
    // Rebuild the sample with unknown frames between every pair of frames.
    let mut b = FileBuilder::new();
    // (11..=13 are known since format 1.1: STACKS, MAPPINGS, PROFILE;
    // 14 since 1.2: FINISH; 15 since 1.3: DCHUNK.)
    let mut unknown = [16u8, 17, 100, 200, 254, 255].into_iter().cycle();
    for f in &s.file.frames {
        let p = &s.file.bytes[f.offset as usize + 9..f.end() as usize];
        b.raw(f.ty, p);
        let ty = unknown.next().unwrap();
        b.raw(ty, &vec![ty; ty as usize % 7]);
    }
    let (got, r) = read_all(&b.bytes);
    assert!(r.sealed());
    // Same records except the offsets of chunk frames moved.
    let strip = |items: &[Result<Record, ReadError>]| -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Ok(Record::Events { tid, events, .. }) => format!("events {tid} {events:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(strip(&got), strip(&want));
}

/// Rule 4: the first frame must be a HEADER, even if its type is unknown.
#[test]
fn s7_unknown_frame_before_header_is_refused() {
    let s = sample_file();
    let mut b = FileBuilder::new();
    b.raw(77, b"future");
    b.bytes.extend_from_slice(&s.file.bytes[8..]);
    let (items, _) = read_all(&b.bytes);
    assert_eq!(items.len(), 1, "{items:?}");
    let Err(e) = &items[0] else { panic!() };
    assert_eq!(e.offset, 8);
    assert!(corrupt_msg(e).contains("first frame is not a HEADER"));
}

#[test]
fn s3_unknown_major_version_refused() {
    for major in [0u64, 2, 1 << 40] {
        let mut h = sample_file().header;
        h.version_major = major;
        let mut b = FileBuilder::with_header(&h);
        b.frame(FrameType::Round, &frame::round(1));
        let (items, r) = read_all(&b.bytes);
        assert_eq!(items.len(), 1, "major {major}: {items:?}");
        let Err(e) = &items[0] else { panic!() };
        assert_eq!(e.offset, 8);
        let text = e.to_string();
        assert!(
            text.contains(&format!("unsupported format major version {major}")),
            "unclear message: {text}"
        );
        assert!(r.header().is_none());
    }
}

/// Section 10: any minor version is read, and trailing bytes in payloads
/// other than CHUNK are ignored.
#[test]
fn s3_unknown_minor_version_and_trailing_fields_accepted() {
    let s = sample_file();
    let mut h = s.header.clone();
    h.version_minor = 9;
    let mut hp = h.encode();
    hp.extend_from_slice(b"new header field");
    let mut b = FileBuilder::new();
    b.frame(FrameType::Header, &hp);
    let extra = |mut p: Vec<u8>| {
        p.extend([1, 2, 3]);
        p
    };
    b.frame(FrameType::Thread, &extra(frame::thread(1, "t")));
    b.frame(FrameType::Clock, &extra(frame::clock(5, 6)));
    b.frame(FrameType::Dropped, &extra(frame::dropped(1, 2, 3, 4)));
    b.frame(FrameType::Round, &extra(frame::round(7)));
    b.frame(FrameType::End, &extra(frame::end(0, 2)));
    let (items, r) = read_all(&b.bytes);
    assert!(errors(&items).is_empty(), "{:?}", errors(&items));
    assert_eq!(r.header().unwrap().version_minor, 9);
    assert_eq!(r.header().unwrap().schemas.len(), 2);
    assert!(r.sealed());
    assert_eq!(items.len(), 6);
    assert!(matches!(items[4], Ok(Record::Round { watermark_ticks: 7 })));
}

#[test]
fn s2_bad_magic_refused() {
    let mut bytes = sample_file().file.bytes;
    bytes[0] = b'X';
    let (items, _) = read_all(&bytes);
    assert_eq!(items.len(), 1);
    let Err(e) = &items[0] else { panic!() };
    assert_eq!(e.offset, 0);
    assert!(corrupt_msg(e).contains("bad magic"));
}

/// Rule 3: a frame len above 64 MiB and a zero type byte stop the reader.
#[test]
fn s7_oversized_len_and_zero_type_stop_reading() {
    let s = sample_file();
    let f = s.file.frames[5];
    for patch in [
        |b: &mut Vec<u8>, at: usize| {
            b[at + 1..at + 5].copy_from_slice(&(64u32 << 20 | 1).to_le_bytes())
        },
        |b: &mut Vec<u8>, at: usize| b[at..].fill(0),
    ] {
        let mut bytes = s.file.bytes.clone();
        patch(&mut bytes, f.offset as usize);
        let (items, r) = read_all(&bytes);
        let k = record_index(&s.file.frames, 5);
        assert_eq!(items.len(), k + 1, "{items:#?}");
        let Some(Err(e)) = items.last() else { panic!() };
        assert_eq!(e.offset, f.offset);
        corrupt_msg(e);
        assert!(!r.sealed());
    }
}

/// A corrupt HEADER makes the file unreadable; a second HEADER frame later
/// is a corrupt frame like any other and reading goes on.
#[test]
fn s3_header_damage() {
    let s = sample_file();
    let mut bytes = s.file.bytes.clone();
    bytes[8 + 9] ^= 1; // header payload: crc mismatch
    let (items, _) = read_all(&bytes);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().unwrap_err().offset, 8);

    let mut b = FileBuilder::with_header(&s.header);
    let second = b.frame(FrameType::Header, &s.header.encode());
    b.frame(FrameType::Round, &frame::round(3));
    b.frame(FrameType::End, &frame::end(0, 0));
    let (items, r) = read_all(&b.bytes);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1, "{items:?}");
    assert_eq!(errs[0].offset, second);
    assert!(corrupt_msg(errs[0]).contains("second HEADER"));
    assert!(
        r.sealed(),
        "reading stopped at the second HEADER: {items:?}"
    );
}

/// An END frame whose payload does not decode does not seal the file.
#[test]
fn s2_undecodable_end_does_not_seal() {
    let s = sample_file();
    let mut b = FileBuilder::with_header(&s.header);
    let at = b.frame(FrameType::End, &[0x80]);
    let (items, r) = read_all(&b.bytes);
    assert_eq!(errors(&items).len(), 1);
    assert_eq!(errors(&items)[0].offset, at);
    assert!(!r.sealed());
}

// ---------------------------------------------------------------------------
// Section 7 rule 5 and section 2: definitions and END totals.

#[test]
fn s7_string_id_0_in_definition_is_corrupt() {
    let h = header(vec![schema(131, "istr", &[("q", FieldType::Istr)])]);
    let mut b = FileBuilder::with_header(&h);
    let at = b.frame(
        FrameType::Strings,
        &frame::strings([(1, "one"), (0, "zero")].into_iter()),
    );
    b.chunk(&Chunk::new(
        1,
        0,
        vec![
            Rec::ev(131, 0, vec![F::Istr(0)]),
            Rec::ev(131, 0, vec![F::Istr(1)]),
        ],
    ));
    b.frame(FrameType::End, &frame::end(2, 0));
    let (items, r) = read_all(&b.bytes);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1, "{items:?}");
    assert_eq!(errs[0].offset, at);
    assert!(corrupt_msg(errs[0]).contains("string id 0"), "{}", errs[0]);
    // Id 0 stays the empty string; the definition before it was kept.
    let ev = event_records(&items);
    assert_eq!(ev[0].2[0].values, [Value::Str("".into())]);
    assert_eq!(ev[0].2[1].values, [Value::Str("one".into())]);
    assert!(r.sealed());
}

#[test]
fn s7_location_id_0_in_definition_is_corrupt() {
    let h = header(vec![schema(132, "loc", &[("l", FieldType::Loc)])]);
    let mut b = FileBuilder::with_header(&h);
    let defs = [
        frame::LocationDef {
            id: 0,
            file: "x.rs".into(),
            line: 1,
            col: 1,
        },
        frame::LocationDef {
            id: 4,
            file: "y.rs".into(),
            line: 2,
            col: 3,
        },
    ];
    let at = b.frame(FrameType::Locations, &frame::locations(defs.iter()));
    b.chunk(&Chunk::new(1, 0, vec![Rec::ev(132, 0, vec![F::Loc(0)])]));
    b.frame(FrameType::End, &frame::end(1, 0));
    let (items, r) = read_all(&b.bytes);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1, "{items:?}");
    assert_eq!(errs[0].offset, at);
    assert!(
        corrupt_msg(errs[0]).contains("location id 0"),
        "{}",
        errs[0]
    );
    let ev = event_records(&items);
    assert_eq!(ev[0].2[0].values, [Value::Loc { id: 0, text: None }]);
    assert!(r.sealed());
}

/// Section 7 rule 5: a repeated definition replaces the earlier one.
#[test]
fn s7_repeated_definition_replaces() {
    let h = header(vec![schema(131, "istr", &[("q", FieldType::Istr)])]);
    let mut b = FileBuilder::with_header(&h);
    b.frame(
        FrameType::Strings,
        &frame::strings([(5, "old")].into_iter()),
    );
    b.chunk(&Chunk::new(1, 0, vec![Rec::ev(131, 0, vec![F::Istr(5)])]));
    b.frame(
        FrameType::Strings,
        &frame::strings([(5, "new")].into_iter()),
    );
    b.chunk(&Chunk::new(1, 0, vec![Rec::ev(131, 0, vec![F::Istr(5)])]));
    let (items, _) = read_all(&b.bytes);
    assert!(errors(&items).is_empty());
    let ev = event_records(&items);
    assert_eq!(ev[0].2[0].values, [Value::Str("old".into())]);
    assert_eq!(ev[1].2[0].values, [Value::Str("new".into())]);
}

/// END totals: the reader exposes what it read so a checker can compare.
#[test]
fn s2_end_totals_checkable() {
    fn end_totals(items: &[Result<Record, ReadError>]) -> (u64, u64) {
        match items.last() {
            Some(Ok(Record::End { events, dropped })) => (*events, *dropped),
            other => panic!("no END: {other:?}"),
        }
    }
    let s = sample_file();
    let (items, r) = read_all(&s.file.bytes);
    let total: u64 = s.chunks.iter().map(Chunk::event_count).sum();
    assert_eq!(end_totals(&items), (total, 17));
    assert_eq!((r.events_read(), r.dropped_read()), (total, 17));
    assert!(r.end_mismatches().is_empty());

    // A writer that lied in END: the reader still reads, a checker sees it.
    let mut b = FileBuilder::new();
    let last = s.file.frames.len() - 1;
    for f in &s.file.frames[..last] {
        b.raw(f.ty, &s.file.bytes[f.offset as usize + 9..f.end() as usize]);
    }
    b.frame(FrameType::End, &frame::end(total + 1, 16));
    let (items, r) = read_all(&b.bytes);
    assert!(errors(&items).is_empty());
    assert_ne!(end_totals(&items), (r.events_read(), r.dropped_read()));
    // ... and the reader's own END check names both totals, in that order.
    let found: Vec<String> = r.end_mismatches().iter().map(|e| e.to_string()).collect();
    assert_eq!(
        found,
        [
            format!("mem.bin: corrupt END frame: it says the file holds {} events, but its chunks hold {total}", total + 1),
            "mem.bin: corrupt END frame: it says 16 events were dropped, but the DROPPED frames report 17".to_string(),
        ]
    );
    assert!(r
        .end_mismatches()
        .iter()
        .all(|e| matches!(e.kind, ErrorKind::EndTotals { .. })));
    // Raw reading counts each intact chunk's header count: same verdict.
    let mut raw = reader(&b.bytes);
    while let Some(item) = raw.next_raw() {
        assert!(item.is_ok());
    }
    let raw_found: Vec<String> = raw.end_mismatches().iter().map(|e| e.to_string()).collect();
    assert_eq!(raw_found, found);

    // A chunk lost to a crc mismatch: fewer events read than END says.
    let mut bytes = s.file.bytes.clone();
    let chunk = s
        .file
        .frames
        .iter()
        .find(|f| f.ty == FrameType::Chunk as u8)
        .unwrap();
    bytes[chunk.end() as usize - 1] ^= 0x40;
    let (items, r) = read_all(&bytes);
    assert_eq!(errors(&items).len(), 1);
    assert_eq!(r.events_read(), total - s.chunks[0].event_count());
    assert!(r.events_read() < end_totals(&items).0);
    // The damage explains the shortfall: no second error about END.
    assert!(r.end_mismatches().is_empty());
}
