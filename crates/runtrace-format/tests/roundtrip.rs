//! Round trips of every field type (docs/format.md sections 1, 5, 6): files
//! built by the test-side encoder in `common`, decoded with `FileReader`,
//! compared exactly (floats by bit pattern).

mod common;

use common::*;
use proptest::prelude::*;
use proptest::sample::select;
use runtrace_format::frame::{self, FrameType, Header};
use runtrace_format::schema::{FieldType, Schema};
use runtrace_format::varint::{self, Cursor};
use runtrace_format::{ErrorKind, Record, Value};
use std::sync::Arc;

/// Ids of the generated application schemas: a one-byte tag (128, 254),
/// the first id that needs the 255 escape, and a large escaped id.
const IDS: [u32; 4] = [128, 254, 255, 40_000];

fn dt() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..200, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

fn worker() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        Just(Some(u32::MAX - 1)),
        (0..u32::MAX).prop_map(Some),
    ]
}

fn utf8(max_chars: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::collection::vec(any::<char>(), 0..=max_chars)
            .prop_map(|cs| truncate_utf8(cs.into_iter().collect(), 255)),
        1 => Just("x".repeat(255)),
        1 => Just(format!("{}a", "é".repeat(127))),
        1 => Just("\u{10FFFF}".repeat(63)),
    ]
}

fn value_for(ty: FieldType, nstr: u64, nloc: u64) -> BoxedStrategy<F> {
    match ty {
        FieldType::U64 => prop_oneof![
            Just(0u64),
            Just(u64::MAX),
            Just(127),
            Just(128),
            (0u32..64).prop_map(|s| 1u64 << s),
            (1u32..64).prop_map(|s| (1u64 << s) - 1),
            any::<u64>(),
        ]
        .prop_map(F::U)
        .boxed(),
        FieldType::U32 => prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()]
            .prop_map(|v| F::U(v as u64))
            .boxed(),
        FieldType::U16 => prop_oneof![Just(0u16), Just(u16::MAX), any::<u16>()]
            .prop_map(|v| F::U(v as u64))
            .boxed(),
        FieldType::U8 => any::<u8>().prop_map(|v| F::U(v as u64)).boxed(),
        FieldType::I64 => prop_oneof![
            Just(i64::MIN),
            Just(i64::MAX),
            Just(0i64),
            Just(-1),
            Just(i64::MIN + 1),
            (-300i64..300),
            any::<i64>(),
        ]
        .prop_map(F::I)
        .boxed(),
        FieldType::I32 => prop_oneof![Just(i32::MIN), Just(i32::MAX), any::<i32>()]
            .prop_map(|v| F::I(v as i64))
            .boxed(),
        FieldType::Bool => any::<bool>().prop_map(F::Bool).boxed(),
        FieldType::F64 => prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            any::<f64>(),
            Just(f64::NAN),
            Just(-f64::NAN),
            Just(f64::from_bits(0x7ff0_0000_0000_0001)), // signalling NaN
            Just(f64::from_bits(0xfff4_dead_beef_0001)), // negative NaN with payload
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(0.0),
            Just(f64::MIN_POSITIVE),
            Just(f64::from_bits(1)), // smallest subnormal
            Just(f64::MAX),
        ]
        .prop_map(F::Float)
        .boxed(),
        FieldType::Str => utf8(128).prop_map(F::Str).boxed(),
        FieldType::Istr => (0..=nstr).prop_map(F::Istr).boxed(),
        FieldType::Loc => (0..=nloc).prop_map(F::Loc).boxed(),
        FieldType::Task => prop_oneof![
            Just(0u64),
            Just(u64::MAX),
            Just(i64::MIN as u64),
            Just(i64::MAX as u64),
            0u64..16,
            any::<u64>(),
        ]
        .prop_map(F::Task)
        .boxed(),
        FieldType::Worker => Just(F::Worker).boxed(),
    }
}

fn rec(schemas: Arc<Vec<Schema>>, nstr: u64, nloc: u64) -> BoxedStrategy<Rec> {
    let n = schemas.len();
    let ev = (0..n, any::<bool>(), dt()).prop_flat_map(move |(i, escape, dt)| {
        let s = &schemas[i];
        let id = s.id;
        let fields: Vec<BoxedStrategy<F>> = s
            .fields
            .iter()
            .map(|f| value_for(f.ty, nstr, nloc))
            .collect();
        fields.prop_map(move |fields| Rec::Event {
            id,
            escape,
            dt,
            fields,
        })
    });
    let sw = (any::<bool>(), dt(), worker()).prop_map(|(escape, dt, worker)| Rec::SetWorker {
        escape,
        dt,
        worker,
    });
    prop_oneof![1 => sw, 5 => ev].boxed()
}

fn chunk(schemas: Arc<Vec<Schema>>, nstr: u64, nloc: u64) -> impl Strategy<Value = Chunk> {
    (
        prop_oneof![Just(1u64), Just(2u64), any::<u64>()],
        worker(),
        any::<u64>(),
        prop_oneof![0u64..10_000, any::<u64>()],
        proptest::collection::vec(rec(schemas, nstr, nloc), 0..16),
    )
        .prop_map(|(tid, worker, task_reg, base_ticks, recs)| Chunk {
            tid,
            worker,
            task_reg,
            base_ticks,
            recs,
            count: None,
        })
}

#[derive(Debug, Clone)]
struct Trace {
    header: Header,
    schemas: Vec<Schema>,
    defs: Defs,
    chunks: Vec<Chunk>,
}

fn trace() -> impl Strategy<Value = Trace> {
    let field_types = proptest::collection::vec(select(&ALL_FIELD_TYPES[..]), 0..=8);
    let strings = proptest::collection::vec(utf8(40), 0..5);
    let locs = proptest::collection::vec((utf8(20), any::<u32>(), any::<u32>()), 0..4);
    let header_fields = (
        1u64..=u64::MAX,
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        utf8(16),
        any::<u64>(),
        any::<u64>(),
    );
    (
        proptest::collection::vec(field_types, IDS.len()),
        strings,
        locs,
        header_fields,
    )
        .prop_flat_map(
            |(fts, strings, locs, (tps, anchor, wall, pid, name, rid, idx))| {
                let schemas: Vec<Schema> = fts
                    .iter()
                    .zip(IDS)
                    .map(|(fs, id)| {
                        let names: Vec<String> = (0..fs.len()).map(|i| format!("f{i}")).collect();
                        let fields: Vec<(&str, FieldType)> = names
                            .iter()
                            .map(|n| n.as_str())
                            .zip(fs.iter().copied())
                            .collect();
                        schema(id, &format!("ev{id}"), &fields)
                    })
                    .collect();
                let mut defs = Defs::default();
                for (i, s) in strings.into_iter().enumerate() {
                    defs.strings.insert(i as u64 + 1, s);
                }
                for (i, l) in locs.into_iter().enumerate() {
                    defs.locations.insert(i as u64 + 1, l);
                }
                let (nstr, nloc) = (defs.strings.len() as u64, defs.locations.len() as u64);
                let mut header = header(schemas[..2].to_vec());
                header.ticks_per_sec = tps;
                header.anchor_ticks = anchor;
                header.anchor_wall_ns = wall;
                header.pid = pid;
                header.process_name = name;
                header.recording_id = rid;
                header.file_index = idx;
                let shared = Arc::new(schemas.clone());
                let chunks = proptest::collection::vec(chunk(shared, nstr, nloc), 1..5);
                (Just(header), Just(schemas), Just(defs), chunks).prop_map(
                    |(header, schemas, defs, chunks)| Trace {
                        header,
                        schemas,
                        defs,
                        chunks,
                    },
                )
            },
        )
}

/// Header and SCHEMA schemas decode with the wire's collapsed widths.
fn assert_schema_eq(got: &Schema, want: &Schema) {
    assert_eq!(
        (got.id, &got.provider, &got.name),
        (want.id, &want.provider, &want.name)
    );
    assert_eq!(got.fields.len(), want.fields.len());
    for (g, w) in got.fields.iter().zip(&want.fields) {
        assert_eq!(g.name, w.name);
        assert_eq!(g.ty.code(), w.ty.code());
    }
}

/// The file for a generated trace: HEADER (first two schemas), SCHEMA (the
/// others), STRINGS, LOCATIONS, the chunks, END.
fn build(t: &Trace) -> FileBuilder {
    let mut b = FileBuilder::with_header(&t.header);
    b.frame(FrameType::Schema, &frame::schemas(&t.schemas[2..]));
    b.defs(&t.defs);
    for c in &t.chunks {
        b.chunk(c);
    }
    let total: u64 = t.chunks.iter().map(Chunk::event_count).sum();
    b.frame(FrameType::End, &frame::end(total, 0));
    b
}

fn check_trace(t: &Trace) {
    let b = build(t);
    let offsets: Vec<u64> = b
        .frames
        .iter()
        .filter(|f| f.ty == FrameType::Chunk as u8)
        .map(|f| f.offset)
        .collect();
    let total: u64 = t.chunks.iter().map(Chunk::event_count).sum();

    let (items, r) = read_all(&b.bytes);
    assert!(errors(&items).is_empty(), "errors: {:?}", errors(&items));
    assert!(r.sealed());
    let Some(Ok(Record::Header(h))) = items.first() else {
        panic!("first record is not the header")
    };
    assert_eq!(
        (
            h.version_major,
            h.version_minor,
            h.ticks_per_sec,
            h.anchor_ticks,
            h.anchor_wall_ns
        ),
        (
            1,
            0,
            t.header.ticks_per_sec,
            t.header.anchor_ticks,
            t.header.anchor_wall_ns
        )
    );
    assert_eq!(
        (h.pid, &h.process_name, h.recording_id, h.file_index),
        (
            t.header.pid,
            &t.header.process_name,
            t.header.recording_id,
            t.header.file_index
        )
    );
    assert_eq!(h.schemas.len(), 2);
    for (g, w) in h.schemas.iter().zip(&t.schemas) {
        assert_schema_eq(g, w);
    }
    for w in &t.schemas {
        assert_schema_eq(r.tables().schema(w.id).expect("schema known"), w);
    }
    let recs = event_records(&items);
    assert_eq!(recs.len(), t.chunks.len());
    for ((c, at), (off, tid, events)) in t.chunks.iter().zip(&offsets).zip(&recs) {
        assert_eq!((*off, *tid), (*at, c.tid));
        assert_events(events, &c.expected(&t.header, &t.defs, &t.schemas));
    }
    assert!(
        matches!(items.last(), Some(Ok(Record::End { events, dropped: 0 })) if *events == total)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Sections 5 and 6: every field type, the tag-255 escape, set_worker,
    /// wrapping task and timestamp registers, interned strings and
    /// locations, arbitrary header values.
    #[test]
    fn s5_s6_every_field_type_round_trips(t in trace()) {
        check_trace(&t);
    }

    /// Section 7 rule 2 on generated files: any prefix reads every complete
    /// frame exactly as the whole file does, then at most a Truncated error
    /// at the start of the incomplete frame.
    #[test]
    fn s7_random_prefix_of_random_file(t in trace(), cut in any::<prop::sample::Index>()) {
        let b = build(&t);
        let (full, _) = read_all(&b.bytes);
        let cut = cut.index(b.bytes.len() + 1);
        let (items, r) = read_all(&b.bytes[..cut]);
        let got = debug_items(&items);
        if cut < 8 {
            prop_assert_eq!(items.len(), 1);
            prop_assert!(matches!(&items[0], Err(e) if e.offset == 0 && e.kind == ErrorKind::Truncated));
            return Ok(());
        }
        let complete = b.frames.iter().take_while(|f| f.end() <= cut as u64).count();
        let n = b.frames[..complete].iter().filter(|f| yields_record(f.ty)).count();
        prop_assert_eq!(&got[..n], &debug_items(&full)[..n]);
        if complete > 0 && b.frames[complete - 1].end() == cut as u64 {
            prop_assert_eq!(got.len(), n);
            prop_assert_eq!(r.sealed(), cut == b.bytes.len());
        } else {
            let start = if complete == 0 { 8 } else { b.frames[complete].offset };
            prop_assert_eq!(got.len(), n + 1);
            prop_assert!(matches!(&items[n], Err(e) if e.offset == start && e.kind == ErrorKind::Truncated));
        }
    }

    /// Section 1: varints and zigzag of any value decode to themselves.
    #[test]
    fn s1_varint_and_zigzag_round_trip(u in any::<u64>(), i in any::<i64>()) {
        let mut b = Vec::new();
        varint::put(&mut b, u);
        varint::put(&mut b, varint::zigzag(i));
        prop_assert_eq!(b.len(), varint::len(u) + varint::len(varint::zigzag(i)));
        let mut c = Cursor::new(&b);
        prop_assert_eq!(c.varint().unwrap(), u);
        prop_assert_eq!(varint::unzigzag(c.varint().unwrap()), i);
        prop_assert!(c.is_empty());
    }
}

/// Section 1: every 7-bit boundary and the signed extremes.
#[test]
fn s1_varint_boundaries() {
    let mut vals = vec![0u64, u64::MAX];
    for k in 1..64 {
        vals.extend([(1u64 << k) - 1, 1u64 << k, (1u64 << k) + 1]);
    }
    for v in vals {
        let mut b = Vec::new();
        varint::put(&mut b, v);
        assert!(b.len() <= varint::MAX_LEN);
        assert_eq!(Cursor::new(&b).varint().unwrap(), v, "{v}");
    }
    for i in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
        assert_eq!(varint::unzigzag(varint::zigzag(i)), i);
    }
    // The spec's formula, literally.
    assert_eq!(varint::zigzag(-1), 1);
    assert_eq!(varint::zigzag(i64::MIN), u64::MAX);
    assert_eq!(varint::zigzag(i64::MAX), u64::MAX - 1);
    // 10 bytes whose last is 1 is u64::MAX; 2 is corrupt; 11 bytes corrupt.
    let mut ten = [0xffu8; 10];
    ten[9] = 1;
    assert_eq!(Cursor::new(&ten).varint().unwrap(), u64::MAX);
    ten[9] = 2;
    assert!(Cursor::new(&ten).varint().is_err());
    let mut eleven = [0x80u8; 11];
    eleven[10] = 0;
    assert!(Cursor::new(&eleven).varint().is_err());
}

/// Section 6: the tag-255 escape for ids >= 255, escaped small ids, an
/// escaped set_worker record (type id 0), and worker register effects.
#[test]
fn s6_tag_escape_and_set_worker() {
    use FieldType as T;
    let schemas = vec![
        schema(254, "a", &[("w", T::Worker)]),
        schema(255, "b", &[("w", T::Worker), ("x", T::U8)]),
        schema(65_536, "c", &[("t", T::Task)]),
        schema(129, "d", &[]),
    ];
    let h = header(schemas.clone());
    let c = Chunk {
        worker: Some(u32::MAX - 1),
        task_reg: u64::MAX,
        ..Chunk::new(
            5,
            u64::MAX - 1,
            vec![
                Rec::ev(254, 0, vec![F::Worker]),
                Rec::ev(255, 1, vec![F::Worker, F::U(255)]), // ticks wrap to 0
                Rec::SetWorker {
                    escape: true,
                    dt: 1,
                    worker: Some(3),
                },
                Rec::Event {
                    id: 129,
                    escape: true,
                    dt: 0,
                    fields: vec![],
                },
                Rec::ev(254, 0, vec![F::Worker]),
                Rec::ev(65_536, 2, vec![F::Task(0)]), // task wraps MAX -> 0
                Rec::SetWorker {
                    escape: false,
                    dt: 0,
                    worker: None,
                },
                Rec::ev(255, 0, vec![F::Worker, F::U(0)]),
            ],
        )
    };
    let mut b = FileBuilder::with_header(&h);
    b.chunk(&c);
    let (items, r) = read_all(&b.bytes);
    assert!(errors(&items).is_empty(), "{:?}", errors(&items));
    assert!(!r.sealed());
    let recs = event_records(&items);
    assert_eq!(recs.len(), 1);
    let want = c.expected(&h, &Defs::default(), &schemas);
    assert_events(recs[0].2, &want);
    // Spot-check the expectation itself against the spec.
    let got: Vec<_> = recs[0]
        .2
        .iter()
        .map(|e| (e.ticks, e.values.clone()))
        .collect();
    assert_eq!(
        got[0],
        (u64::MAX - 1, vec![Value::Worker(Some(u32::MAX - 1))])
    );
    assert_eq!(
        got[1],
        (
            u64::MAX,
            vec![Value::Worker(Some(u32::MAX - 1)), Value::U(255)]
        )
    );
    assert_eq!(got[2], (0, vec![]));
    assert_eq!(got[3], (0, vec![Value::Worker(Some(3))]));
    assert_eq!(got[4], (2, vec![Value::U(0)]));
    assert_eq!(got[5], (2, vec![Value::Worker(None), Value::U(0)]));
    assert_eq!(r.events_read(), 6);
}

/// Section 4: ns since start is floored, negative before the anchor.
#[test]
fn s4_ticks_to_ns_floors() {
    let mut h = header(vec![]);
    h.ticks_per_sec = 3;
    h.anchor_ticks = 10;
    assert_eq!(h.ticks_to_ns(10), 0);
    assert_eq!(h.ticks_to_ns(11), 333_333_333);
    assert_eq!(h.ticks_to_ns(9), -333_333_334);
    assert_eq!(h.ticks_to_ns(0), ns_since_start(&h, 0));
}

/// Sections 5 and 9: application ids are any u32 from 128 up, also in the
/// HEADER; large ids must not make the file unreadable.
#[test]
fn s5_large_event_type_ids() {
    use FieldType as T;
    let schemas = vec![
        schema(65_537, "a", &[("x", T::U64)]),
        schema(u32::MAX, "b", &[("x", T::U64)]),
        schema(1 << 20, "c", &[]),
    ];
    let h = header(schemas[..2].to_vec());
    let mut b = FileBuilder::with_header(&h);
    b.frame(FrameType::Schema, &frame::schemas(&schemas[2..]));
    let c = Chunk::new(
        1,
        0,
        vec![
            Rec::ev(u32::MAX, 1, vec![F::U(1)]),
            Rec::ev(65_537, 1, vec![F::U(2)]),
            Rec::ev(1 << 20, 1, vec![]),
        ],
    );
    b.chunk(&c);
    let (items, r) = read_all(&b.bytes);
    assert!(errors(&items).is_empty(), "{:?}", errors(&items));
    assert_events(
        event_records(&items)[0].2,
        &c.expected(&h, &Defs::default(), &schemas),
    );
    assert_eq!(r.tables().schemas().count(), 3);
    assert!(r.tables().schema(u32::MAX).is_some());
}
