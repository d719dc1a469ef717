//! `FileReader::next_raw`, the allocation-free fast path: it must hand out
//! exactly the frames and errors `next` does, with CHUNK frames undecoded,
//! and walking a raw chunk must give the events `next` decodes from it.

mod common;

use common::*;
use proptest::prelude::*;
use runtrace_format::chunk::{walk, RawValue};
use runtrace_format::reader::RawRecord;
use runtrace_format::schema::FieldType;
use runtrace_format::varint::DecodeError;
use runtrace_format::{FileReader, Record};

/// One item of a stream, reduced to what both modes can report: non-chunk
/// records and errors verbatim, chunks as (offset, tid, event ticks).
fn via_next(bytes: &[u8]) -> Vec<String> {
    let (items, _) = read_all(bytes);
    items
        .iter()
        .map(|i| match i {
            Ok(Record::Events {
                offset,
                tid,
                events,
                ..
            }) => {
                let ticks: Vec<u64> = events.iter().map(|e| e.ticks).collect();
                format!("chunk {offset} {tid} {ticks:?}")
            }
            other => format!("{other:?}"),
        })
        .collect()
}

fn via_raw(bytes: &[u8]) -> (Vec<String>, u64) {
    let mut r = FileReader::new(bytes, "mem.bin");
    let mut out = Vec::new();
    let mut events = 0;
    let cap = 2 * (bytes.len() / 9) + 8;
    while let Some(item) = r.next_raw() {
        match item {
            Ok(RawRecord::Chunk(c)) => {
                let tables = c.tables;
                let mut st = c.header.state;
                let mut ticks = Vec::new();
                let res = walk(
                    c.body,
                    &mut st,
                    |id| tables.schema(id).map(|s| &**s),
                    |ev| {
                        // Ids must resolve, as the reader checks (section 7).
                        for v in ev.values {
                            let missing = match *v {
                                RawValue::Istr(id) if id != 0 && tables.string(id).is_none() => {
                                    Some(format!("string id {id}"))
                                }
                                RawValue::Loc(id) if id != 0 && tables.location(id).is_none() => {
                                    Some(format!("location id {id}"))
                                }
                                _ => None,
                            };
                            if let Some(m) = missing {
                                let at = ev.offset;
                                return Err(DecodeError::new(
                                    at,
                                    format!("event at +{at}: {m} was never defined"),
                                ));
                            }
                        }
                        ticks.push(ev.ticks);
                        Ok(())
                    },
                );
                let err = match res {
                    Ok(n) if n != c.header.count => Some(c.error(
                        0,
                        &format!("chunk says {} events but holds {n}", c.header.count),
                    )),
                    Ok(_) => None,
                    Err(e) => Some(c.error(e.pos, &e.what)),
                };
                if !ticks.is_empty() {
                    events += ticks.len() as u64;
                    out.push(format!("chunk {} {} {ticks:?}", c.offset, c.header.tid));
                }
                if let Some(e) = err {
                    out.push(format!("{:?}", Err::<Record, _>(e)));
                }
            }
            Ok(RawRecord::Record(rec)) => out.push(format!("{:?}", Ok::<_, ()>(rec))),
            Err(e) => out.push(format!("{:?}", Err::<Record, _>(e))),
        }
        assert!(out.len() <= cap, "next_raw loops");
    }
    assert!(r.next_raw().is_none(), "resumed after None");
    (out, events)
}

#[test]
fn raw_matches_next_on_the_sample_file() {
    let s = sample_file();
    let (raw, events) = via_raw(&s.file.bytes);
    assert_eq!(raw, via_next(&s.file.bytes));
    let total: u64 = s.chunks.iter().map(Chunk::event_count).sum();
    assert_eq!(events, total);
}

#[test]
fn raw_chunk_errors_match_the_reader() {
    use FieldType as T;
    let h = header(vec![schema(130, "good", &[("x", T::U64)])]);
    let mut b = FileBuilder::with_header(&h);
    let good = |x| Rec::ev(130, 1, vec![F::U(x)]);
    // A bad bool-free record: an event type without a schema mid-chunk.
    let bad = Rec::ev(131, 1, vec![F::U(1)]);
    b.chunk(&Chunk::new(9, 100, vec![good(1), good(2), bad, good(3)]));
    // A count mismatch.
    b.chunk(&Chunk {
        count: Some(5),
        ..Chunk::new(9, 200, vec![good(4)])
    });
    b.frame(
        runtrace_format::frame::FrameType::Round,
        &runtrace_format::frame::round(5),
    );
    let (raw, _) = via_raw(&b.bytes);
    assert_eq!(raw, via_next(&b.bytes));
    assert!(raw.iter().filter(|l| l.contains("Corrupt")).count() == 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any damage and any cut: both modes agree item for item.
    #[test]
    fn raw_matches_next_under_damage(
        fl in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..=6),
        cut in any::<prop::sample::Index>(),
    ) {
        let s = sample_file();
        let mut bytes = s.file.bytes.clone();
        for (ix, b) in &fl {
            let p = ix.index(bytes.len());
            bytes[p] ^= *b;
        }
        let cut = cut.index(bytes.len() + 1);
        for b in [&bytes[..], &bytes[..cut]] {
            prop_assert_eq!(via_raw(b).0, via_next(b));
        }
    }
}
