//! `chunk::scan`, the writer's record counter, against `chunk::walk`, the
//! reader's decoder: on every stream `walk` accepts, `scan` must count the
//! same events and leave the same registers (section 6's task, worker and
//! time registers), and where a well-formed stream is cut short both must
//! stop at the same record with the same registers.

mod common;

use common::*;
use proptest::prelude::*;
use runtrace_format::chunk::{scan, walk, ChunkHeader, ChunkState};
use runtrace_format::schema::{FieldType, Schema};
use runtrace_format::varint::Cursor;

/// Schemas with every field type, one of them above the tag escape.
fn schemas() -> Vec<Schema> {
    use FieldType::*;
    vec![
        schema(
            40,
            "ints",
            &[
                ("a", U64),
                ("b", U32),
                ("c", U16),
                ("d", U8),
                ("e", I64),
                ("f", I32),
            ],
        ),
        schema(
            41,
            "task_worker",
            &[("t", Task), ("w", Worker), ("u", Task)],
        ),
        schema(
            42,
            "misc",
            &[("b", Bool), ("x", F64), ("s", Str), ("i", Istr)],
        ),
        schema(300, "escaped", &[("l", Loc), ("t", Task)]),
        schema(43, "empty", &[]),
    ]
}

fn field(ty: FieldType) -> BoxedStrategy<F> {
    use FieldType::*;
    match ty {
        U64 | U32 | U16 | U8 | Istr | Loc => prop_oneof![0u64..300, any::<u64>()]
            .prop_map(move |v| match ty {
                Istr => F::Istr(v),
                Loc => F::Loc(v),
                _ => F::U(v),
            })
            .boxed(),
        I64 | I32 => any::<i64>().prop_map(F::I).boxed(),
        Bool => any::<bool>().prop_map(F::Bool).boxed(),
        F64 => any::<f64>().prop_map(F::Float).boxed(),
        Str => "[a-zé]{0,40}".prop_map(F::Str).boxed(),
        Task => prop_oneof![0u64..50, any::<u64>()]
            .prop_map(F::Task)
            .boxed(),
        Worker => Just(F::Worker).boxed(),
    }
}

fn record() -> impl Strategy<Value = Rec> {
    let sch = schemas();
    let events = (
        0..sch.len(),
        any::<bool>(),
        prop_oneof![0u64..200, any::<u64>()],
    )
        .prop_flat_map(move |(i, escape, dt)| {
            let s = sch[i].clone();
            let fields: Vec<_> = s.fields.iter().map(|f| field(f.ty)).collect();
            (Just(s.id), Just(escape), Just(dt), fields)
        })
        .prop_map(|(id, escape, dt, fields)| Rec::Event {
            id,
            escape,
            dt,
            fields,
        });
    let set_worker = (any::<bool>(), 0u64..1000, prop::option::of(0u32..64))
        .prop_map(|(escape, dt, worker)| Rec::SetWorker { escape, dt, worker });
    prop_oneof![4 => events, 1 => set_worker]
}

/// The records of a chunk, and the registers they start from.
fn body(c: &Chunk) -> (Vec<u8>, ChunkState) {
    let (p, _) = c.encode();
    let mut cur = Cursor::new(&p);
    let h = ChunkHeader::decode(&mut cur).expect("the header we wrote");
    (p[cur.pos()..].to_vec(), h.state)
}

fn lookup<'s>(sch: &'s [Schema]) -> impl Fn(u32) -> Option<&'s Schema> {
    move |id| sch.iter().find(|s| s.id == id)
}

/// Both walkers over `bytes` from `st`: (result, registers after).
#[allow(clippy::type_complexity)]
fn both(
    bytes: &[u8],
    st: ChunkState,
) -> (
    (Result<u64, usize>, ChunkState),
    (Result<u64, usize>, ChunkState),
) {
    let sch = schemas();
    let (mut a, mut b) = (st, st);
    let w = walk(bytes, &mut a, lookup(&sch), |_| Ok(())).map_err(|e| e.pos);
    let s = scan(bytes, &mut b, lookup(&sch)).map_err(|e| e.pos);
    ((w, a), (s, b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Well-formed records: the same count and registers, and at every cut
    /// the same stop (offset of the first incomplete record) and registers.
    #[test]
    fn scan_counts_and_tracks_registers_like_walk(
        recs in prop::collection::vec(record(), 0..40),
        base in any::<u64>(),
        task_reg in any::<u64>(),
    ) {
        let mut c = Chunk::new(7, base, recs);
        c.task_reg = task_reg;
        let (bytes, st) = body(&c);
        let (w, s) = both(&bytes, st);
        prop_assert_eq!(w.0, Ok(c.event_count()));
        prop_assert_eq!(w, s);
        for cut in 0..bytes.len() {
            let (w, s) = both(&bytes[..cut], st);
            prop_assert_eq!(w, s, "cut at {}", cut);
        }
    }

    /// Any bytes: whatever `walk` accepts, `scan` counts the same way
    /// (`scan` checks less, so it may accept more, never less).
    #[test]
    fn scan_agrees_with_walk_on_any_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        ticks in any::<u64>(),
    ) {
        let st = ChunkState { ticks, task_reg: 0, worker_reg: u32::MAX };
        let (w, s) = both(&bytes, st);
        if w.0.is_ok() {
            prop_assert_eq!(w, s);
        }
    }
}

/// An unknown type id stops both at that record, with its offset.
#[test]
fn unknown_type_stops_both_at_its_record() {
    let mut bytes = vec![43, 5]; // empty event, dt 5
    bytes.extend([99, 1]); // no schema 99
    let st = ChunkState::default();
    let (w, s) = both(&bytes, st);
    assert_eq!(w.0, Err(2));
    assert_eq!(w, s);
    assert_eq!(s.1.ticks, 5);
}
