//! A small test-side encoder for trace files, written from docs/format.md,
//! plus helpers to read files back and compare decoded values exactly.
//!
//! It builds frames with `frame::write`, chunk headers with `ChunkHeader`
//! and event records by hand (tags, the 255 escape, dt, fields), so the
//! tests exercise the reader against an independent writer.

#![allow(dead_code)]

use runtrace_format::chunk::{ChunkHeader, ChunkState};
use runtrace_format::frame::{self, FrameType, Header, LocationDef};
use runtrace_format::schema::{FieldType, Schema, SchemaField};
use runtrace_format::varint;
use runtrace_format::{Event, FileReader, ReadError, Record, Value, MAGIC, NO_WORKER};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A header with the given schemas and fixed, recognisable values.
pub fn header(schemas: Vec<Schema>) -> Header {
    Header {
        version_major: 1,
        version_minor: 0,
        ticks_per_sec: 125_000_000,
        anchor_ticks: 1_000,
        anchor_wall_ns: 1_700_000_000_000_000_000,
        pid: 4242,
        process_name: "fmt-tests".into(),
        recording_id: 0xfeed_beef,
        file_index: 0,
        schemas,
    }
}

/// An application schema.
pub fn schema(id: u32, name: &str, fields: &[(&str, FieldType)]) -> Schema {
    Schema {
        id,
        provider: "app".into(),
        name: name.into(),
        fields: fields
            .iter()
            .map(|(n, ty)| SchemaField {
                name: (*n).into(),
                ty: *ty,
            })
            .collect(),
    }
}

/// A field value as the test writes it.
#[derive(Clone, Debug)]
pub enum F {
    /// Any unsigned width.
    U(u64),
    /// Any signed width.
    I(i64),
    Bool(bool),
    Float(f64),
    Str(String),
    Istr(u64),
    Loc(u64),
    /// The absolute task id; the encoder writes the zigzag delta.
    Task(u64),
    Worker,
}

/// One record of a chunk.
#[derive(Clone, Debug)]
pub enum Rec {
    Event {
        id: u32,
        escape: bool,
        dt: u64,
        fields: Vec<F>,
    },
    SetWorker {
        escape: bool,
        dt: u64,
        worker: Option<u32>,
    },
    /// Bytes written as they are (for damaged records).
    Raw(Vec<u8>),
}

impl Rec {
    pub fn ev(id: u32, dt: u64, fields: Vec<F>) -> Rec {
        Rec::Event {
            id,
            escape: false,
            dt,
            fields,
        }
    }
}

/// A chunk to encode.
#[derive(Clone, Debug)]
pub struct Chunk {
    pub tid: u64,
    pub worker: Option<u32>,
    pub task_reg: u64,
    pub base_ticks: u64,
    pub recs: Vec<Rec>,
    /// `event_count` to write; None: the number of `Rec::Event`s.
    pub count: Option<u64>,
}

impl Chunk {
    pub fn new(tid: u64, base_ticks: u64, recs: Vec<Rec>) -> Chunk {
        Chunk {
            tid,
            worker: None,
            task_reg: 0,
            base_ticks,
            recs,
            count: None,
        }
    }

    pub fn event_count(&self) -> u64 {
        self.recs
            .iter()
            .filter(|r| matches!(r, Rec::Event { .. }))
            .count() as u64
    }

    /// The CHUNK payload and the payload offset of every record.
    pub fn encode(&self) -> (Vec<u8>, Vec<usize>) {
        let mut p = Vec::new();
        ChunkHeader {
            tid: self.tid,
            state: ChunkState {
                ticks: self.base_ticks,
                task_reg: self.task_reg,
                worker_reg: self.worker.unwrap_or(NO_WORKER),
            },
            count: self.count.unwrap_or_else(|| self.event_count()),
        }
        .encode(&mut p);
        let mut task_reg = self.task_reg;
        let mut offsets = Vec::new();
        for r in &self.recs {
            offsets.push(p.len());
            match r {
                Rec::Event {
                    id,
                    escape,
                    dt,
                    fields,
                } => {
                    put_tag(&mut p, *id, *escape);
                    varint::put(&mut p, *dt);
                    for f in fields {
                        match f {
                            F::U(v) => varint::put(&mut p, *v),
                            F::I(v) => varint::put(&mut p, varint::zigzag(*v)),
                            F::Bool(b) => p.push(*b as u8),
                            F::Float(v) => p.extend_from_slice(&v.to_bits().to_le_bytes()),
                            F::Str(s) => varint::put_str(&mut p, s),
                            F::Istr(id) | F::Loc(id) => varint::put(&mut p, *id),
                            F::Task(t) => {
                                let d = t.wrapping_sub(task_reg) as i64;
                                varint::put(&mut p, varint::zigzag(d));
                                task_reg = *t;
                            }
                            F::Worker => {}
                        }
                    }
                }
                Rec::SetWorker { escape, dt, worker } => {
                    put_tag(&mut p, 0, *escape);
                    varint::put(&mut p, *dt);
                    varint::put(&mut p, worker.map_or(0, |w| w as u64 + 1));
                }
                Rec::Raw(b) => p.extend_from_slice(b),
            }
        }
        (p, offsets)
    }

    /// The events a reader must report for this chunk, computed from the
    /// spec (registers, wrapping, id resolution), not from the crate.
    pub fn expected(&self, h: &Header, defs: &Defs, schemas: &[Schema]) -> Vec<Exp> {
        let mut ticks = self.base_ticks;
        let mut worker = self.worker;
        let mut out = Vec::new();
        for r in &self.recs {
            match r {
                Rec::Event { id, dt, fields, .. } => {
                    ticks = ticks.wrapping_add(*dt);
                    let sch = schemas.iter().find(|s| s.id == *id).expect("schema");
                    let values = fields
                        .iter()
                        .map(|f| match f {
                            F::U(v) | F::Task(v) => Value::U(*v),
                            F::I(v) => Value::I(*v),
                            F::Bool(b) => Value::Bool(*b),
                            F::Float(v) => Value::F(*v),
                            F::Str(s) => Value::Str(s.as_str().into()),
                            F::Istr(0) => Value::Str("".into()),
                            F::Istr(id) => Value::Str(defs.strings[id].as_str().into()),
                            F::Loc(0) => Value::Loc { id: 0, text: None },
                            F::Loc(id) => {
                                let (file, line, col) = &defs.locations[id];
                                Value::Loc {
                                    id: *id,
                                    text: Some(format!("{file}:{line}:{col}").into()),
                                }
                            }
                            F::Worker => Value::Worker(worker),
                        })
                        .collect();
                    out.push(Exp {
                        ticks,
                        ns: ns_since_start(h, ticks),
                        tid: self.tid,
                        schema_id: *id,
                        schema_name: sch.name.clone(),
                        values,
                    });
                }
                Rec::SetWorker { dt, worker: w, .. } => {
                    ticks = ticks.wrapping_add(*dt);
                    worker = *w;
                }
                Rec::Raw(_) => panic!("no expectation for raw bytes"),
            }
        }
        out
    }
}

fn put_tag(p: &mut Vec<u8>, id: u32, escape: bool) {
    if escape || id >= 255 {
        p.push(255);
        varint::put(p, id as u64);
    } else {
        p.push(id as u8);
    }
}

/// Section 4, computed independently: floor((t - anchor) * 1e9 / tps).
pub fn ns_since_start(h: &Header, ticks: u64) -> i64 {
    let d = ticks as i128 - h.anchor_ticks as i128;
    (d * 1_000_000_000).div_euclid(h.ticks_per_sec as i128) as i64
}

/// String and location definitions.
#[derive(Clone, Debug, Default)]
pub struct Defs {
    pub strings: HashMap<u64, String>,
    pub locations: HashMap<u64, (String, u32, u32)>,
}

impl Defs {
    pub fn strings_payload(&self) -> Vec<u8> {
        let mut v: Vec<_> = self.strings.iter().map(|(k, s)| (*k, s.as_str())).collect();
        v.sort();
        frame::strings(v.into_iter())
    }

    pub fn locations_payload(&self) -> Vec<u8> {
        let mut v: Vec<LocationDef> = self
            .locations
            .iter()
            .map(|(id, (file, line, col))| LocationDef {
                id: *id,
                file: file.clone(),
                line: *line,
                col: *col,
            })
            .collect();
        v.sort_by_key(|l| l.id);
        frame::locations(v.iter())
    }
}

/// An expected event.
#[derive(Clone, Debug)]
pub struct Exp {
    pub ticks: u64,
    pub ns: i64,
    pub tid: u64,
    pub schema_id: u32,
    pub schema_name: String,
    pub values: Vec<Value>,
}

/// Exact value equality (floats by bit pattern, so NaN payloads and -0.0
/// count).
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F(x), Value::F(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Panics with a readable message when `got` differs from `want`.
pub fn assert_events(got: &[Event], want: &[Exp]) {
    assert_eq!(
        got.len(),
        want.len(),
        "event count\n got: {got:?}\nwant: {want:?}"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g.ticks == w.ticks
            && g.ns == w.ns
            && g.tid == w.tid
            && g.schema.id == w.schema_id
            && g.schema.name == w.schema_name
            && g.values.len() == w.values.len()
            && g.values
                .iter()
                .zip(&w.values)
                .all(|(a, b)| same_value(a, b));
        assert!(ok, "event {i} differs\n got: {g:?}\nwant: {w:?}");
    }
}

/// Where a frame sits in a built file.
#[derive(Clone, Copy, Debug)]
pub struct FrameAt {
    pub offset: u64,
    pub ty: u8,
    pub len: u32,
}

impl FrameAt {
    pub fn end(&self) -> u64 {
        self.offset + 9 + self.len as u64
    }
}

/// Builds a file frame by frame and remembers where each frame is.
#[derive(Clone, Debug)]
pub struct FileBuilder {
    pub bytes: Vec<u8>,
    pub frames: Vec<FrameAt>,
}

impl Default for FileBuilder {
    fn default() -> Self {
        FileBuilder::new()
    }
}

impl FileBuilder {
    /// Just the magic.
    pub fn new() -> FileBuilder {
        FileBuilder {
            bytes: MAGIC.to_vec(),
            frames: Vec::new(),
        }
    }

    /// Magic and a HEADER frame.
    pub fn with_header(h: &Header) -> FileBuilder {
        let mut b = FileBuilder::new();
        b.frame(FrameType::Header, &h.encode());
        b
    }

    /// Appends a frame; returns its offset.
    pub fn frame(&mut self, ty: FrameType, payload: &[u8]) -> u64 {
        self.raw(ty as u8, payload)
    }

    /// Appends a frame of any type byte; returns its offset.
    pub fn raw(&mut self, ty: u8, payload: &[u8]) -> u64 {
        let offset = self.bytes.len() as u64;
        frame::write_raw(&mut self.bytes, ty, payload);
        self.frames.push(FrameAt {
            offset,
            ty,
            len: payload.len() as u32,
        });
        offset
    }

    /// Appends a CHUNK frame; returns its offset and the file offset of
    /// each record.
    pub fn chunk(&mut self, c: &Chunk) -> (u64, Vec<u64>) {
        let (p, offs) = c.encode();
        let at = self.frame(FrameType::Chunk, &p);
        (at, offs.into_iter().map(|o| at + 9 + o as u64).collect())
    }

    /// Appends STRINGS and LOCATIONS frames for `defs`.
    pub fn defs(&mut self, defs: &Defs) {
        self.frame(FrameType::Strings, &defs.strings_payload());
        self.frame(FrameType::Locations, &defs.locations_payload());
    }
}

/// A reader over an in-memory file.
pub fn reader(bytes: &[u8]) -> FileReader<&[u8]> {
    FileReader::new(bytes, "mem.bin")
}

/// Reads every record. Panics if the reader hands out more items than the
/// file could hold (it would be looping), so a hang shows up as a failure.
pub fn read_all(bytes: &[u8]) -> (Vec<Result<Record, ReadError>>, FileReader<&[u8]>) {
    let mut r = reader(bytes);
    let cap = 2 * (bytes.len() / 9) + 8;
    let mut out = Vec::new();
    for item in r.by_ref() {
        out.push(item);
        assert!(
            out.len() <= cap,
            "reader yields more items than the file can hold"
        );
    }
    // Once finished, it stays finished.
    assert!(r.next().is_none(), "reader resumed after returning None");
    (out, r)
}

/// The errors among `items`.
pub fn errors(items: &[Result<Record, ReadError>]) -> Vec<&ReadError> {
    items.iter().filter_map(|i| i.as_ref().err()).collect()
}

/// The event records among `items`: (frame offset, tid, events).
pub fn event_records(items: &[Result<Record, ReadError>]) -> Vec<(u64, u64, &[Event])> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(Record::Events {
                offset,
                tid,
                events,
                ..
            }) => Some((*offset, *tid, &events[..])),
            _ => None,
        })
        .collect()
}

/// Every item as text, for exact comparisons of whole streams.
pub fn debug_items(items: &[Result<Record, ReadError>]) -> Vec<String> {
    items.iter().map(|i| format!("{i:?}")).collect()
}

/// Field types and a typical wire-width collapse check.
pub const ALL_FIELD_TYPES: [FieldType; 13] = [
    FieldType::U64,
    FieldType::U32,
    FieldType::U16,
    FieldType::U8,
    FieldType::I64,
    FieldType::I32,
    FieldType::Bool,
    FieldType::F64,
    FieldType::Str,
    FieldType::Istr,
    FieldType::Loc,
    FieldType::Task,
    FieldType::Worker,
];

/// `s` cut to at most `max` bytes at a char boundary.
pub fn truncate_utf8(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut n = max;
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s.truncate(n);
    }
    s
}

/// A small multi-chunk file that uses every frame type: header (custom
/// schemas incl. ids 200 and 300), SCHEMA, STRINGS, LOCATIONS, two THREADs,
/// CLOCK, chunks from two threads, DROPPED, ROUNDs, END.
pub struct Sample {
    pub header: Header,
    pub defs: Defs,
    pub schemas: Vec<Schema>,
    pub chunks: Vec<Chunk>,
    pub file: FileBuilder,
}

pub fn sample_file() -> Sample {
    use FieldType as T;
    let s1 = schema(
        200,
        "req",
        &[("task", T::Task), ("worker", T::Worker), ("q", T::Istr)],
    );
    let s2 = schema(
        300,
        "io",
        &[("bytes", T::U64), ("ok", T::Bool), ("at", T::Loc)],
    );
    let s3 = schema(
        128,
        "lat",
        &[("v", T::F64), ("d", T::I64), ("name", T::Str)],
    );
    let h = header(vec![s1.clone(), s2.clone()]);
    let mut defs = Defs::default();
    defs.strings.insert(1, "queue-a".into());
    defs.strings.insert(7, "queue-b".into());
    defs.locations.insert(3, ("src/main.rs".into(), 10, 5));
    let mut b = FileBuilder::with_header(&h);
    b.frame(
        FrameType::Schema,
        &frame::schemas(std::slice::from_ref(&s3)),
    );
    b.defs(&defs);
    b.frame(FrameType::Thread, &frame::thread(11, "worker-0"));
    b.frame(FrameType::Thread, &frame::thread(12, "worker-1"));
    b.frame(
        FrameType::Clock,
        &frame::clock(1_000, 1_700_000_000_000_000_000),
    );
    let chunks = vec![
        Chunk {
            worker: Some(0),
            task_reg: 5,
            ..Chunk::new(
                11,
                2_000,
                vec![
                    Rec::ev(200, 3, vec![F::Task(6), F::Worker, F::Istr(1)]),
                    Rec::ev(300, 1, vec![F::U(4096), F::Bool(true), F::Loc(3)]),
                    Rec::SetWorker {
                        escape: false,
                        dt: 2,
                        worker: None,
                    },
                    Rec::ev(200, 4, vec![F::Task(2), F::Worker, F::Istr(0)]),
                ],
            )
        },
        Chunk::new(
            12,
            2_001,
            vec![
                Rec::ev(
                    128,
                    0,
                    vec![F::Float(1.5), F::I(-3), F::Str("héllo".into())],
                ),
                Rec::ev(300, 9, vec![F::U(0), F::Bool(false), F::Loc(0)]),
            ],
        ),
        Chunk {
            worker: Some(0),
            task_reg: 2,
            ..Chunk::new(
                11,
                2_010,
                vec![
                    Rec::ev(200, 5, vec![F::Task(u64::MAX), F::Worker, F::Istr(7)]),
                    Rec::ev(
                        128,
                        1,
                        vec![F::Float(-0.0), F::I(i64::MIN), F::Str(String::new())],
                    ),
                ],
            )
        },
        Chunk::new(
            12,
            2_020,
            vec![Rec::ev(
                300,
                2,
                vec![F::U(u64::MAX), F::Bool(true), F::Loc(3)],
            )],
        ),
    ];
    b.chunk(&chunks[0]);
    b.chunk(&chunks[1]);
    b.frame(FrameType::Round, &frame::round(2_005));
    b.chunk(&chunks[2]);
    b.frame(FrameType::Dropped, &frame::dropped(12, 17, 2_011, 2_019));
    b.chunk(&chunks[3]);
    b.frame(FrameType::Round, &frame::round(2_015));
    let total: u64 = chunks.iter().map(Chunk::event_count).sum();
    b.frame(FrameType::End, &frame::end(total, 17));
    Sample {
        header: h,
        defs,
        schemas: vec![s1, s2, s3],
        chunks,
        file: b,
    }
}

/// True for frame types that the reader reports as a record (definitions
/// are absorbed silently).
pub fn yields_record(ty: u8) -> bool {
    matches!(FrameType::from_u8(ty), Some(t) if !matches!(t, FrameType::Schema | FrameType::Strings | FrameType::Locations | FrameType::Stacks | FrameType::Mappings | FrameType::Profile | FrameType::Finish))
}

/// A fresh directory for one test case.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "runtrace-format-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
