//! The specialised decoder against `runtrace_format::chunk::walk` (plus
//! the reader's id checks): same events, same damage at the same place
//! with the same message, on random records and garbage. And its dense
//! mode against its plain one on the expansion of the same records.

use super::*;
use crate::event::kind;
use crate::model::Process;
use crate::pass::Wants;
use proptest::prelude::*;
use runtrace_format::chunk::{walk, ChunkHeader, RawValue};
use runtrace_format::frame::{self, FrameType, Header, LocationDef};
use runtrace_format::reader::RawRecord;
use runtrace_format::schema::Schema;
use runtrace_format::schema::{builtin_schemas, id_facts, ids, Group, SchemaField};
use runtrace_format::FileReader;

#[derive(Debug, Clone)]
enum Rec {
    PollStart(i64, u64, u64),
    PollEnd(i64, u8),
    Wake(i64, u64),
    Spawn(i64, u64, u64),
    Terminate(i64),
    Park(u64),
    Unpark(u64),
    Sample(u64, u64),
    Select(u64),
    SetWorker(u64),
    /// The application event: u64, str, f64, bool, loc, i64, task.
    App(u64, String, u8, u64, i64),
    Escaped(i64),
    Garbage(Vec<u8>),
    /// `enqueue` (queue string id, seqno, size) and `backlog_trigger`
    /// (queue, size, growth, reason): `runtrace backlog`'s events.
    Enqueue(u64, u64, u64),
    Trigger(u64, u64, i64, u64),
    /// `cpu_sample` (tid, stack id) and `off_cpu` (tid, stack id, off_ns):
    /// CPU profile samples; stack 3 is never defined.
    CpuSample(u64, u64),
    OffCpu(u64, u64, u64),
}

fn rec() -> impl Strategy<Value = Rec> {
    let d = -3i64..4;
    let id = 0u64..4; // 3 is never defined
    prop_oneof![
        4 => (d.clone(), id.clone(), 0u64..300).prop_map(|(a, b, c)| Rec::PollStart(a, b, c)),
        4 => (d.clone(), 0u8..3).prop_map(|(a, b)| Rec::PollEnd(a, b)),
        2 => (d.clone(), 0u64..9).prop_map(|(a, b)| Rec::Wake(a, b)),
        2 => (d.clone(), id.clone(), id.clone()).prop_map(|(a, b, c)| Rec::Spawn(a, b, c)),
        1 => d.clone().prop_map(Rec::Terminate),
        1 => (0u64..50).prop_map(Rec::Park),
        1 => any::<u64>().prop_map(Rec::Unpark),
        1 => (0u64..9, id.clone()).prop_map(|(a, b)| Rec::Sample(a, b)),
        1 => id.clone().prop_map(Rec::Select),
        1 => (0u64..5).prop_map(Rec::SetWorker),
        1 => (any::<u64>(), "[a-z]{0,5}", 0u8..3, id.clone(), d.clone())
            .prop_map(|(a, b, c, l, t)| Rec::App(a, b, c, l, t)),
        1 => d.clone().prop_map(Rec::Escaped),
        1 => (id.clone(), any::<u64>(), 0u64..1000).prop_map(|(a, b, c)| Rec::Enqueue(a, b, c)),
        1 => (id.clone(), 0u64..1000, any::<i64>(), id.clone())
            .prop_map(|(a, b, c, r)| Rec::Trigger(a, b, c, r)),
        1 => (0u64..3, id.clone()).prop_map(|(t, s)| Rec::CpuSample(t, s)),
        1 => (0u64..3, id.clone(), any::<u64>()).prop_map(|(t, s, o)| Rec::OffCpu(t, s, o)),
        1 => proptest::collection::vec(any::<u8>(), 1..6).prop_map(Rec::Garbage),
    ]
}

fn encode(recs: &[Rec], dts: &[u64]) -> Vec<u8> {
    use runtrace_format::varint::{put, put_str, zigzag};
    let mut b = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let dt = dts[i % dts.len()];
        let ev = |id: u32, b: &mut Vec<u8>| {
            b.push(id as u8);
            put(b, dt);
        };
        match r {
            Rec::PollStart(t, q, lq) => {
                ev(ids::TASK_POLL_START, &mut b);
                put(&mut b, zigzag(*t));
                put(&mut b, *q);
                put(&mut b, *lq);
            }
            Rec::PollEnd(t, r) => {
                ev(ids::TASK_POLL_END, &mut b);
                put(&mut b, zigzag(*t));
                b.push(*r);
            }
            Rec::Wake(t, w) => {
                ev(ids::TASK_WAKE, &mut b);
                put(&mut b, zigzag(*t));
                put(&mut b, *w);
            }
            Rec::Spawn(t, l, q) => {
                ev(ids::TASK_SPAWN, &mut b);
                put(&mut b, zigzag(*t));
                put(&mut b, 0);
                put(&mut b, *l);
                put(&mut b, *q);
            }
            Rec::Terminate(t) => {
                ev(ids::TASK_TERMINATE, &mut b);
                put(&mut b, zigzag(*t));
            }
            Rec::Park(q) => {
                ev(ids::WORKER_PARK, &mut b);
                put(&mut b, *q);
                put(&mut b, 7);
            }
            Rec::Unpark(s) => {
                ev(ids::WORKER_UNPARK, &mut b);
                put(&mut b, 7);
                put(&mut b, *s);
            }
            Rec::Sample(g, q) => {
                ev(ids::QUEUE_SAMPLE, &mut b);
                put(&mut b, *g);
                put(&mut b, *q);
                put(&mut b, 4);
            }
            Rec::Select(q) => {
                ev(ids::QUEUE_SELECT, &mut b);
                put(&mut b, *q);
                put(&mut b, 1);
                put(&mut b, 2);
            }
            Rec::SetWorker(w) => {
                b.push(0);
                put(&mut b, dt);
                put(&mut b, *w);
            }
            Rec::App(u, s, bo, l, t) => {
                b.push(255);
                put(&mut b, 300);
                put(&mut b, dt);
                put(&mut b, *u);
                put_str(&mut b, s);
                b.extend_from_slice(&1.5f64.to_le_bytes());
                b.push(*bo);
                put(&mut b, *l);
                put(&mut b, zigzag(-5));
                put(&mut b, zigzag(*t));
            }
            Rec::Escaped(t) => {
                b.push(255);
                put(&mut b, ids::TASK_TERMINATE as u64);
                put(&mut b, dt);
                put(&mut b, zigzag(*t));
            }
            Rec::Garbage(g) => b.extend_from_slice(g),
            Rec::Enqueue(q, seq, size) => {
                ev(ids::ENQUEUE, &mut b);
                put(&mut b, *q);
                put(&mut b, *seq);
                put(&mut b, *size);
            }
            Rec::Trigger(q, size, growth, reason) => {
                ev(ids::BACKLOG_TRIGGER, &mut b);
                put(&mut b, *q);
                put(&mut b, *size);
                put(&mut b, zigzag(*growth));
                put(&mut b, *reason);
            }
            Rec::CpuSample(tid, stack) => {
                ev(ids::CPU_SAMPLE, &mut b);
                put(&mut b, *tid);
                put(&mut b, *stack);
            }
            Rec::OffCpu(tid, stack, off) => {
                ev(ids::OFF_CPU, &mut b);
                put(&mut b, *tid);
                put(&mut b, *stack);
                put(&mut b, *off);
            }
        }
    }
    b
}

/// The header of the tests' files: format 1.`minor`, pid 1, 1 GHz ticks.
fn header(minor: u64, schemas: Vec<Schema>) -> Header {
    Header {
        version_major: 1,
        version_minor: minor,
        ticks_per_sec: 1_000_000_000,
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: 1,
        process_name: "t".into(),
        recording_id: 1,
        file_index: 0,
        schemas,
    }
}

/// The stacks [`file`] defines (3 is not).
const STACKS: [(u64, [u64; 2]); 2] = [(1, [0x40_1000, 0x40_0100]), (2, [0x7f00_0000_0010, 0x10])];

/// A file with the definitions and one chunk holding `body`.
fn file(body: &[u8], worker: u32) -> Vec<u8> {
    let mut schemas = builtin_schemas();
    use FieldType as T;
    schemas.push(Schema {
        id: 300,
        provider: "app".into(),
        name: "everything".into(),
        fields: [
            ("u", T::U64),
            ("s", T::Str),
            ("f", T::F64),
            ("b", T::Bool),
            ("l", T::Loc),
            ("i", T::I64),
            ("t", T::Task),
        ]
        .iter()
        .map(|(n, ty)| SchemaField {
            name: (*n).into(),
            ty: *ty,
        })
        .collect(),
    });
    let mut out = runtrace_format::MAGIC.to_vec();
    frame::write(&mut out, FrameType::Header, &header(0, schemas).encode());
    frame::write(
        &mut out,
        FrameType::Strings,
        &frame::strings([(1, "a"), (2, "b")].into_iter()),
    );
    let locs: Vec<LocationDef> = (1..=2)
        .map(|id| LocationDef {
            id,
            file: "x.rs".into(),
            line: id as u32,
            col: 1,
        })
        .collect();
    frame::write(
        &mut out,
        FrameType::Locations,
        &frame::locations(locs.iter()),
    );
    frame::write(
        &mut out,
        FrameType::Stacks,
        &frame::stacks(STACKS.iter().map(|(id, a)| (*id, &a[..]))),
    );
    let mut p = Vec::new();
    ChunkHeader {
        tid: 9,
        state: ChunkState {
            ticks: 1_000,
            task_reg: 10,
            worker_reg: worker,
        },
        count: 0,
    }
    .encode(&mut p);
    p.extend_from_slice(body);
    frame::write(&mut out, FrameType::Chunk, &p);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoder_agrees_with_walk(
        recs in proptest::collection::vec(rec(), 0..40),
        dts in proptest::collection::vec(prop_oneof![0u64..130, 0u64..20_000, any::<u64>()], 1..4),
        worker in prop_oneof![Just(u32::MAX), 0u32..3],
    ) {
        let body = encode(&recs, &dts);
        let bytes = file(&body, worker);
        let mut r = FileReader::new(&bytes[..], "mem.bin");
        let mut seen = false;
        while let Some(item) = r.next_raw() {
            let Ok(RawRecord::Chunk(c)) = item else { continue };
            seen = true;
            // walk, with the reader's id checks, collecting the
            // (ticks, task) of the events the analysis keeps.
            let tables = c.tables;
            let mut st = c.header.state;
            let mut want = Vec::new();
            let mut want_app = Vec::new();
            let mut want_profile = Vec::new();
            let mut walked = 0u64;
            let res = walk(c.body, &mut st, |id| tables.schema(id).map(|s| &**s), |ev| {
                for v in ev.values {
                    let bad = match *v {
                        RawValue::Istr(id) if id != 0 && tables.string(id).is_none() => Some(("string", id)),
                        RawValue::Loc(id) if id != 0 && tables.location(id).is_none() => Some(("location", id)),
                        _ => None,
                    };
                    if let Some((what, id)) = bad {
                        return Err(undefined(what, id, ev.offset));
                    }
                }
                let task = ev.values.iter().find_map(|v| match v {
                    RawValue::Task(t) => Some(*t),
                    _ => None,
                });
                // `runtrace analyze` keeps the runtime events (group
                // `runtime`), `runtrace backlog` the application events
                // (group `app`).
                let group = id_facts(ev.schema.id).group.filter(|_| ev.schema.provider == "runtrace");
                if group == Some(Group::Runtime) {
                    want.push((ev.ticks, task.unwrap_or(0)));
                }
                if group == Some(Group::App) {
                    want_app.push((ev.ticks, ev.schema.id as u8));
                }
                // The profile pass's samples: tid, stack (empty when not
                // defined), off_ns.
                if ev.schema.provider == "runtrace"
                    && (ev.schema.id == ids::CPU_SAMPLE || ev.schema.id == ids::OFF_CPU)
                {
                    let u = |i: usize| match ev.values[i] {
                        RawValue::U(x) => x,
                        ref v => panic!("{v:?}"),
                    };
                    let stack = tables.stack(u(1)).map_or(Vec::new(), |s| s.to_vec());
                    let off = if ev.schema.id == ids::OFF_CPU { u(2) } else { 0 };
                    want_profile.push((ev.ticks, ev.schema.id as u8, u(0), stack, off));
                }
                walked += 1;
                Ok(())
            });
            for wants in [Wants::RUNTIME, Wants::APP, Wants::PROFILE] {
                let mut model = Model::new();
                let p = model.add_proc(Process::new(&Header::decode(&bytes[17..]).unwrap_or_else(|_| unreachable!())));
                let t = model.add_thread(p, 9);
                let mut cache = FileCache::default();
                cache.plans.wants = wants;
                let mut names = Names::default();
                let mut q = ThreadQueue::default();
                let mut state = c.header.state;
                let got = decode_events::<false>(c.body, tables, &mut state, &mut cache, &mut names, &mut model, t, &mut q);
                let mut evs = Vec::new();
                let mut app = Vec::new();
                let mut profile = Vec::new();
                while let Some(ev) = q.front() {
                    // CPU samples carry the sampled thread's index in
                    // `worker` (other profile events, as alloc_sample, are
                    // packed by field type).
                    if matches!(ev.kind, kind::CPU_SAMPLE | kind::OFF_CPU) {
                        let tid = model.threads[ev.worker as usize].tid;
                        let stack = model.stacks[ev.a as usize].to_vec();
                        profile.push((ev.ticks, ev.kind, tid, stack, ev.x));
                    }
                    // Events with a task field carry it in `x`.
                    let task = if crate::kinds::has_task(ev.kind) { ev.x } else { 0 };
                    evs.push((ev.ticks, task));
                    app.push((ev.ticks, ev.kind));
                    q.pop();
                }
                if wants == Wants::APP {
                    prop_assert_eq!(&app, &want_app);
                } else if wants == Wants::PROFILE {
                    prop_assert_eq!(&profile, &want_profile);
                } else {
                    prop_assert_eq!(&evs, &want);
                }
                match (&res, got) {
                    (Ok(n), Ok((m, _, _))) => {
                        prop_assert_eq!(*n, m);
                        prop_assert_eq!(st, state);
                    }
                    (Err(a), Err(((m, _, _), b))) => {
                        prop_assert_eq!(walked, m);
                        prop_assert_eq!((a.pos, &a.what), (b.pos, &b.what));
                    }
                    (a, b) => prop_assert!(false, "walk {:?} vs decoder {:?}", a, b),
                }
            }
        }
        prop_assert!(seen);
    }
}

/// Decodes `body` (dense or plain) with `tables` into events, with the
/// result of the loop.
fn decode_all<const DENSE: bool>(
    body: &[u8],
    tables: &runtrace_format::reader::Tables,
    header: &[u8],
    state: runtrace_format::chunk::ChunkState,
    wants: Wants,
) -> (
    Vec<Ev>,
    Result<u64, String>,
    runtrace_format::chunk::ChunkState,
) {
    let mut model = Model::new();
    let p = model.add_proc(Process::new(
        &Header::decode(header).unwrap_or_else(|_| unreachable!()),
    ));
    let t = model.add_thread(p, 9);
    let mut cache = FileCache::default();
    cache.plans.wants = wants;
    let mut names = Names::default();
    let mut q = ThreadQueue::default();
    let mut st = state;
    let got = decode_events::<DENSE>(
        body, tables, &mut st, &mut cache, &mut names, &mut model, t, &mut q,
    );
    let mut evs = Vec::new();
    while let Some(ev) = q.front() {
        evs.push(*ev);
        q.pop();
    }
    // Damage is compared by what it says, not where: a dense record's
    // offset is not its expansion's.
    let res = got.map(|(n, _, _)| n).map_err(|((n, _, _), e)| {
        let what = e.what.split_once(": ").map_or(e.what.as_str(), |(_, w)| w);
        format!("after {n} events: {what}")
    });
    (evs, res, st)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn dense_records_decode_as_their_expansion(
        recs in proptest::collection::vec(rec(), 0..40),
        dts in proptest::collection::vec(prop_oneof![0u64..130, 0u64..20_000, 0u64..1 << 40], 1..4),
        worker in prop_oneof![Just(u32::MAX), 0u32..3],
    ) {
        let recs: Vec<Rec> = recs.into_iter().filter(|r| !matches!(r, Rec::Garbage(_))).collect();
        let body = encode(&recs, &dts);
        let bytes = file(&body, worker);
        let mut r = FileReader::new(&bytes[..], "mem.bin");
        let mut seen = false;
        while let Some(item) = r.next_raw() {
            let Ok(RawRecord::Chunk(c)) = item else { continue };
            seen = true;
            let tables = c.tables;
            let look = |id: u32| tables.schema(id).map(|s| &**s);
            let mut d = Vec::new();
            prop_assert!(runtrace_format::dense::encode(c.body, &look, &mut d).is_ok());
            for wants in [Wants::RUNTIME.or(Wants::LIFECYCLE), Wants::APP, Wants::PROFILE] {
                let plain = decode_all::<false>(c.body, tables, &bytes[17..], c.header.state, wants);
                let dense = decode_all::<true>(&d, tables, &bytes[17..], c.header.state, wants);
                prop_assert_eq!(&dense.0, &plain.0);
                prop_assert_eq!(&dense.1, &plain.1);
                if plain.1.is_ok() {
                    prop_assert_eq!(dense.2, plain.2);
                }
            }
        }
        prop_assert!(seen);
    }
}

#[test]
fn a_dense_slot_whose_type_has_other_fields_is_damage() {
    // task_poll_start defined with one string field: slot 1 cannot stand
    // for it. A file of one dense chunk: two task_terminates by their slot
    // (11: task delta 0), then a slot-1 record.
    let mut schemas = builtin_schemas();
    let ps = schemas
        .iter_mut()
        .find(|s| s.id == ids::TASK_POLL_START)
        .unwrap();
    ps.fields = vec![SchemaField {
        name: "task_id".into(),
        ty: FieldType::Str,
    }];
    let mut out = runtrace_format::MAGIC.to_vec();
    let h = header(runtrace_format::VERSION_MINOR, schemas);
    frame::write(&mut out, FrameType::Header, &h.encode());
    let mut p = Vec::new();
    ChunkHeader {
        tid: 9,
        state: runtrace_format::chunk::ChunkState {
            ticks: 0,
            task_reg: 7,
            worker_reg: 0,
        },
        count: 3,
    }
    .encode(&mut p);
    p.extend_from_slice(&[(5u8 << 4) | 11, (5 << 4) | 11, (5 << 4) | 1, 2]);
    frame::write(&mut out, FrameType::DChunk, &p);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, &out).unwrap();
    #[derive(Default)]
    struct Kinds(Vec<(u8, u64)>);
    impl crate::pass::Pass for Kinds {
        fn wants(&self) -> Wants {
            Wants::RUNTIME
        }
        fn event(&mut self, ev: &Ev, _: &Model) {
            self.0.push((ev.kind, ev.x));
        }
    }
    let mut k = Kinds::default();
    let (model, stats) = crate::input::read(&[path], &mut k, None);
    // The events before it are kept and counted, as before any damage.
    assert_eq!(k.0, [(kind::TERMINATE, 7), (kind::TERMINATE, 7)]);
    assert_eq!(model.procs[0].events, 2);
    assert!(
        stats
            .errors
            .iter()
            .any(|e| e.contains("does not have slot 1's fields")),
        "{:?}",
        stats.errors
    );
}
