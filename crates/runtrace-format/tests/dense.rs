//! Dense chunks (docs/format.md section 6.1, format 1.3): the records a
//! `DCHUNK` holds expand to exactly the plain records they were made from,
//! whatever the events; a file read with its chunks dense or plain gives
//! the same events; a record that does not fit its slot is corruption at
//! the frame; files of earlier versions (plain chunks only) still read.

mod common;

use proptest::prelude::*;
use runtrace_format::chunk::{ChunkHeader, ChunkState};
use runtrace_format::dense::{self, MAX_DT, SLOTS};
use runtrace_format::frame::{self, FrameType, Header};
use runtrace_format::schema::{builtin_schemas, FieldType, Schema, SchemaField};
use runtrace_format::varint;
use runtrace_format::{ErrorKind, FileReader, Record};

/// The schemas of the tests: the built-in ones and an application event
/// with every field type (id 300: an escaped tag).
fn schemas() -> Vec<Schema> {
    let mut s = builtin_schemas();
    let f = |name: &str, ty| SchemaField {
        name: name.into(),
        ty,
    };
    s.push(Schema {
        id: 300,
        provider: "app".into(),
        name: "every_type".into(),
        fields: vec![
            f("a", FieldType::U64),
            f("b", FieldType::I64),
            f("c", FieldType::Bool),
            f("d", FieldType::F64),
            f("e", FieldType::Str),
            f("t", FieldType::Task),
            f("w", FieldType::Worker),
        ],
    });
    s
}

/// One record's parts: type id, dt, and a number per field (for `Str`,
/// its length; `F64`, its bits).
#[derive(Debug, Clone)]
struct Rec {
    id: u32,
    dt: u64,
    vals: Vec<u64>,
}

/// Values that hit the slots' fixed bytes often, and the rest.
fn val() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..3, 1 => 3u64..200, 1 => any::<u64>()]
}

fn rec(ids: Vec<u32>) -> impl Strategy<Value = Rec> {
    (
        proptest::sample::select(ids),
        prop_oneof![4 => 0u64..3000, 1 => 0..=MAX_DT],
        proptest::collection::vec(val(), 8),
    )
        .prop_map(|(id, dt, vals)| Rec { id, dt, vals })
}

/// The plain (section 6) body of `recs`.
fn plain(recs: &[Rec], schemas: &[Schema]) -> Vec<u8> {
    let mut b = Vec::new();
    for r in recs {
        if r.id < 255 {
            b.push(r.id as u8);
        } else {
            b.push(255);
            varint::put(&mut b, r.id as u64);
        }
        varint::put(&mut b, r.dt);
        if r.id == 0 {
            varint::put(&mut b, r.vals[0] & 0xffff_ffff);
            continue;
        }
        let s = schemas.iter().find(|s| s.id == r.id).unwrap();
        for (f, &v) in s.fields.iter().zip(&r.vals) {
            match f.ty {
                FieldType::Bool => b.push((v & 1) as u8),
                FieldType::F64 => b.extend_from_slice(&v.to_le_bytes()),
                FieldType::Str => {
                    let n = (v % 5) as usize;
                    varint::put(&mut b, n as u64);
                    b.extend(std::iter::repeat_n(b'x', n));
                }
                FieldType::Worker => {}
                _ => varint::put(&mut b, v),
            }
        }
    }
    b
}

fn ids() -> Vec<u32> {
    let mut v: Vec<u32> = SLOTS.iter().map(|s| s.id).collect();
    v.extend([0, 8, 23, 300]); // set_worker, queue_sample, off_cpu, app
    v
}

proptest! {
    #[test]
    fn dense_records_expand_to_the_plain_ones(recs in proptest::collection::vec(rec(ids()), 0..60)) {
        let s = schemas();
        let look = |id: u32| s.iter().find(|x| x.id == id);
        let body = plain(&recs, &s);
        let mut d = Vec::new();
        dense::encode(&body, &look, &mut d).unwrap();
        let mut back = Vec::new();
        dense::decode(&d, &look, &mut back).unwrap();
        prop_assert_eq!(back, body);
    }
}

#[test]
fn the_common_records_shrink() {
    let s = schemas();
    let look = |id: u32| s.iter().find(|x| x.id == id);
    // A poll (start, end not ready) 500 ticks apart, task delta +1.
    let recs = [
        Rec {
            id: 2,
            dt: 500,
            vals: vec![2, 0, 0, 0],
        },
        Rec {
            id: 3,
            dt: 500,
            vals: vec![0, 0, 0],
        },
    ];
    let body = plain(&recs, &s);
    assert_eq!(body.len(), 3 + 3 + 3 + 1 + 1); // tag, dt x2, task, queue, local_q; tag, dt x2, task, ready
    let mut d = Vec::new();
    dense::encode(&body, &look, &mut d).unwrap();
    // Heads of 2 bytes (500 << 4 < 2^14); the start keeps its task.
    assert_eq!(d.len(), 2 + 1 + 2);
}

#[test]
fn a_delta_too_large_for_a_head_is_refused_by_the_encoder() {
    let s = schemas();
    let look = |id: u32| s.iter().find(|x| x.id == id);
    let body = plain(
        &[Rec {
            id: 5,
            dt: MAX_DT + 1,
            vals: vec![0],
        }],
        &s,
    );
    assert!(dense::encode(&body, &look, &mut Vec::new()).is_err());
}

/// A file of one chunk of `body`, plain or dense.
fn file(body: &[u8], count: u64, dense_frame: bool) -> Vec<u8> {
    let h = Header {
        version_major: 1,
        version_minor: runtrace_format::VERSION_MINOR,
        ticks_per_sec: 1_000_000_000,
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: 1,
        process_name: "t".into(),
        recording_id: 1,
        file_index: 0,
        schemas: schemas(),
    };
    let mut out = runtrace_format::MAGIC.to_vec();
    frame::write(&mut out, FrameType::Header, &h.encode());
    // Strings and locations 1 to 4 (the records name ids up to 4).
    let (mut strs, mut locs) = (vec![4u8], vec![4u8]);
    for id in 1..=4u8 {
        strs.extend([id, 1, b'q']);
        locs.extend([id, 1, b'f', 1, 1]);
    }
    frame::write(&mut out, FrameType::Strings, &strs);
    frame::write(&mut out, FrameType::Locations, &locs);
    let mut p = Vec::new();
    ChunkHeader {
        tid: 9,
        state: ChunkState {
            ticks: 1000,
            task_reg: 0,
            worker_reg: runtrace_format::NO_WORKER,
        },
        count,
    }
    .encode(&mut p);
    let s = schemas();
    if dense_frame {
        dense::encode(body, &|id| s.iter().find(|x| x.id == id), &mut p).unwrap();
        frame::write(&mut out, FrameType::DChunk, &p);
    } else {
        p.extend_from_slice(body);
        frame::write(&mut out, FrameType::Chunk, &p);
    }
    let mut end = Vec::new();
    varint::put(&mut end, count);
    varint::put(&mut end, 0);
    frame::write(&mut out, FrameType::End, &end);
    out
}

/// Every record as text, and the errors (offsets and frame lengths
/// included: a dense frame must report its own length).
fn read(bytes: &[u8]) -> (Vec<String>, Vec<String>, Vec<u64>) {
    let mut r = FileReader::new(bytes, "mem.bin");
    let (mut evs, mut errs, mut lens) = (Vec::new(), Vec::new(), Vec::new());
    for item in r.by_ref() {
        match item {
            Ok(Record::Events {
                events,
                frame_len,
                offset,
                ..
            }) => {
                evs.extend(events.iter().map(|e| format!("{e:?}")));
                lens.push(offset + frame_len);
            }
            Ok(_) => {}
            Err(e) => errs.push(e.to_string()),
        }
    }
    (evs, errs, lens)
}

#[test]
fn a_file_reads_the_same_with_dense_or_plain_chunks() {
    let s = schemas();
    let recs: Vec<Rec> = (0..200u64)
        .map(|i| {
            let id = ids()[(i * 7 % ids().len() as u64) as usize];
            // Every value names a defined string or location (1 to 4)
            // or none (0).
            Rec {
                id,
                dt: i * 37 % 3000,
                vals: vec![i % 3, i % 2, i % 5, 0, 1, 2, 0, 0],
            }
        })
        .collect();
    let body = plain(&recs, &s);
    let count = recs.iter().filter(|r| r.id != 0).count() as u64;
    let (p, d) = (file(&body, count, false), file(&body, count, true));
    assert!(d.len() < p.len(), "{} !< {}", d.len(), p.len());
    let (pe, perr, plen) = read(&p);
    let (de, derr, dlen) = read(&d);
    assert!(perr.is_empty() && derr.is_empty(), "{perr:?} {derr:?}");
    assert_eq!(pe.len() as u64, count);
    assert_eq!(pe, de);
    // Each chunk record ends where its frame ends in the file read.
    let end_frame = 9 + 2 + (count >= 128) as u64;
    assert_eq!(plen, [p.len() as u64 - end_frame]);
    assert_eq!(dlen, [d.len() as u64 - end_frame]);
}

#[test]
fn a_record_whose_slot_has_no_schema_is_corruption_at_its_frame() {
    // Slot 1 (task_poll_start) in a file whose header defines no schemas.
    let h = Header {
        version_major: 1,
        version_minor: 3,
        ticks_per_sec: 1_000_000_000,
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: 1,
        process_name: "t".into(),
        recording_id: 1,
        file_index: 0,
        schemas: Vec::new(),
    };
    let mut out = runtrace_format::MAGIC.to_vec();
    frame::write(&mut out, FrameType::Header, &h.encode());
    let at = out.len();
    let mut p = Vec::new();
    ChunkHeader {
        tid: 9,
        state: ChunkState {
            ticks: 0,
            task_reg: 0,
            worker_reg: runtrace_format::NO_WORKER,
        },
        count: 1,
    }
    .encode(&mut p);
    p.extend_from_slice(&[(5 << 4) | 1, 2]);
    frame::write(&mut out, FrameType::DChunk, &p);
    let mut r = FileReader::new(&out[..], "mem.bin");
    let errs: Vec<_> = r.by_ref().filter_map(Result::err).collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].offset, at as u64);
    assert!(
        matches!(&errs[0].kind, ErrorKind::Corrupt(m) if m.contains("slot 1") && m.contains("no schema")),
        "{errs:?}"
    );
}

#[test]
fn a_slot_whose_type_has_other_fields_is_refused() {
    // task_poll_start (slot 1 fixes its queue and local_q) defined by the
    // file with one field of another type: the slot cannot stand for it.
    let odd = Schema {
        id: SLOTS[0].id,
        provider: "runtrace".into(),
        name: "task_poll_start".into(),
        fields: vec![SchemaField {
            name: "task_id".into(),
            ty: FieldType::Str,
        }],
    };
    let look = |id: u32| (id == odd.id).then_some(&odd);
    // A plain record first (slot 0, so no check), then slot 1 twice: the
    // first use of the slot is refused, at its own offset.
    let mut d = Vec::new();
    varint::put(&mut d, 7 << 4);
    varint::put(&mut d, odd.id as u64);
    d.extend_from_slice(&[1, b'x']);
    let bad_at = d.len();
    d.extend_from_slice(&[(5 << 4) | 1, 2, (5 << 4) | 1, 2]);
    let e = dense::decode(&d, &look, &mut Vec::new()).unwrap_err();
    assert_eq!(e.pos, bad_at, "{e:?}");
    assert!(e.what.contains("does not have slot 1's fields"), "{e:?}");
    // With the built-in schema the same records expand.
    let s = schemas();
    let look = |id: u32| s.iter().find(|x| x.id == id);
    let ok = [(5u8 << 4) | 1, 2, (5 << 4) | 1, 2];
    let mut out = Vec::new();
    dense::decode(&ok, &look, &mut out).unwrap();
    // Each: tag, dt, task delta, then the fixed queue and local_q (0, 0).
    assert_eq!(
        out,
        [SLOTS[0].id as u8, 5, 2, 0, 0, SLOTS[0].id as u8, 5, 2, 0, 0]
    );
}

#[test]
fn files_of_earlier_versions_still_read() {
    // The golden quickstart recording: version 1.2 (or older), plain
    // chunks only, every event read, as its END frames say.
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../runtrace-cli/tests/golden/quickstart"
    );
    for f in ["trace.0.bin", "trace.1.bin"] {
        let bytes = std::fs::read(format!("{dir}/{f}")).unwrap();
        let mut r = FileReader::new(&bytes[..], f);
        let mut n = 0u64;
        let mut minor = None;
        let mut end = None;
        for item in r.by_ref() {
            match item.unwrap() {
                Record::Header(h) => minor = Some(h.version_minor),
                Record::Events { events, .. } => n += events.len() as u64,
                Record::End { events, .. } => end = Some(events),
                _ => {}
            }
        }
        assert!(
            minor.unwrap() < 3,
            "{f}: regenerate? it must stay an old file"
        );
        assert_eq!(Some(n), end, "{f}");
        assert!(n > 1000);
    }
}

/// The independent decoder (`tools/rtdecode.py`, written from
/// docs/format.md) reads a dense file as the plain one, event for event.
#[test]
fn the_python_decoder_reads_dense_chunks_as_plain_ones() {
    let s = schemas();
    let recs: Vec<Rec> = (0..300u64)
        .map(|i| {
            let id = ids()[(i * 5 % ids().len() as u64) as usize];
            Rec {
                id,
                dt: i * 53 % 5000,
                vals: vec![i % 3, (i / 3) % 2, i % 5, 3, 1, 2, 0, 0],
            }
        })
        .collect();
    let body = plain(&recs, &s);
    let count = recs.iter().filter(|r| r.id != 0).count() as u64;
    let dir = std::env::temp_dir().join(format!("rt-dense-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let decode = |name: &str, bytes: Vec<u8>| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let tool = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/rtdecode.py");
        let out = std::process::Command::new("python3")
            .args([tool, "--events"])
            .arg(&path)
            .output()
            .expect("python3 runs the independent decoder");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The file name differs; the events must not.
        String::from_utf8(out.stdout).unwrap().replace(name, "F")
    };
    let p = decode("plain.bin", file(&body, count, false));
    let d = decode("dense.bin", file(&body, count, true));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(p.lines().count() as u64, count);
    assert_eq!(p, d);
}
