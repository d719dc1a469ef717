//! End-to-end tests of the `runtrace` binary on trace files built here, frame
//! by frame, with the format crate's encoders (events encoded by hand as
//! docs/format.md section 6 describes).

use runtrace_format::chunk::{ChunkHeader, ChunkState};
use runtrace_format::frame::{self, FrameType, Header, LocationDef};
use runtrace_format::schema::{builtin_schemas, ids};
use runtrace_format::{varint, FieldType, Schema, SchemaField};
use serde_json::Value as Json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

// ---------------------------------------------------------------------------
// Building trace files

/// Ticks per second: one tick is 8 ns, so `ns = (ticks - ANCHOR) * 8`.
const TICKS_PER_SEC: u64 = 125_000_000;
const ANCHOR: u64 = 1000;
const APP_EVENT: u32 = 128;

fn ns(ticks: u64) -> i64 {
    (ticks as i64 - ANCHOR as i64) * 8
}

/// A trace file under construction.
struct TraceFile {
    bytes: Vec<u8>,
    events: u64,
}

impl TraceFile {
    fn new(file_index: u64) -> Self {
        let header = Header {
            version_major: 1,
            version_minor: 0,
            ticks_per_sec: TICKS_PER_SEC,
            anchor_ticks: ANCHOR,
            anchor_wall_ns: 1_700_000_000_000_000_000,
            pid: 4242,
            process_name: "cli-test".into(),
            recording_id: 0xfeed,
            file_index,
            schemas: builtin_schemas(),
        };
        let mut f = TraceFile {
            bytes: runtrace_format::MAGIC.to_vec(),
            events: 0,
        };
        f.frame(FrameType::Header, &header.encode());
        f
    }

    /// Appends a frame; returns its byte offset.
    fn frame(&mut self, ty: FrameType, payload: &[u8]) -> u64 {
        let at = self.bytes.len() as u64;
        frame::write(&mut self.bytes, ty, payload);
        at
    }

    fn chunk(&mut self, c: Chunk) -> u64 {
        self.events += c.count;
        let mut p = Vec::new();
        ChunkHeader {
            tid: c.tid,
            state: c.start,
            count: c.count,
        }
        .encode(&mut p);
        p.extend_from_slice(&c.body);
        self.frame(FrameType::Chunk, &p)
    }

    fn end(&mut self, dropped: u64) -> u64 {
        let events = self.events;
        self.frame(FrameType::End, &frame::end(events, dropped))
    }
}

/// The events of one thread, encoded by hand.
struct Chunk {
    tid: u64,
    start: ChunkState,
    ticks: u64,
    task_reg: u64,
    count: u64,
    body: Vec<u8>,
}

impl Chunk {
    fn new(tid: u64, worker: Option<u32>, base_ticks: u64) -> Self {
        let worker_reg = worker.unwrap_or(runtrace_format::NO_WORKER);
        Chunk {
            tid,
            start: ChunkState {
                ticks: base_ticks,
                task_reg: 0,
                worker_reg,
            },
            ticks: base_ticks,
            task_reg: 0,
            count: 0,
            body: Vec::new(),
        }
    }

    /// Starts an event record: tag (or the 255 escape) and time delta.
    fn event(&mut self, id: u32, ticks: u64) -> &mut Self {
        if id < 255 {
            self.body.push(id as u8);
        } else {
            self.body.push(runtrace_format::TAG_ESCAPE);
            varint::put(&mut self.body, id as u64);
        }
        varint::put(&mut self.body, ticks - self.ticks);
        self.ticks = ticks;
        if id != runtrace_format::SET_WORKER {
            self.count += 1;
        }
        self
    }

    fn u(&mut self, v: u64) -> &mut Self {
        varint::put(&mut self.body, v);
        self
    }

    fn i(&mut self, v: i64) -> &mut Self {
        self.u(varint::zigzag(v))
    }

    fn task(&mut self, id: u64) -> &mut Self {
        let d = id.wrapping_sub(self.task_reg) as i64;
        self.task_reg = id;
        self.i(d)
    }

    fn bool(&mut self, b: bool) -> &mut Self {
        self.body.push(b as u8);
        self
    }

    fn f64(&mut self, v: f64) -> &mut Self {
        self.body.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn str(&mut self, s: &str) -> &mut Self {
        varint::put_str(&mut self.body, s);
        self
    }

    // Built-in events, fields in probes/events.toml order (`worker` fields
    // take no bytes).
    fn spawn(&mut self, t: u64, task: u64, parent: u64, loc: u64, queue: u64) -> &mut Self {
        self.event(ids::TASK_SPAWN, t)
            .task(task)
            .u(parent)
            .u(loc)
            .u(queue)
    }
    fn poll_start(&mut self, t: u64, task: u64, queue: u64, local_q: u64) -> &mut Self {
        self.event(ids::TASK_POLL_START, t)
            .task(task)
            .u(queue)
            .u(local_q)
    }
    fn poll_end(&mut self, t: u64, task: u64, ready: bool) -> &mut Self {
        self.event(ids::TASK_POLL_END, t).task(task).bool(ready)
    }
    fn wake(&mut self, t: u64, woken: u64, waker: u64) -> &mut Self {
        self.event(ids::TASK_WAKE, t).task(woken).u(waker)
    }
    fn terminate(&mut self, t: u64, task: u64) -> &mut Self {
        self.event(ids::TASK_TERMINATE, t).task(task)
    }
    fn park(&mut self, t: u64, local_q: u64, cpu_ns: u64) -> &mut Self {
        self.event(ids::WORKER_PARK, t).u(local_q).u(cpu_ns)
    }
    fn queue_sample(&mut self, t: u64, global_q: u64) -> &mut Self {
        self.event(ids::QUEUE_SAMPLE, t).u(global_q).u(0).u(0)
    }
    fn set_worker(&mut self, t: u64, worker: u32) -> &mut Self {
        self.event(runtrace_format::SET_WORKER, t)
            .u(worker as u64 + 1)
    }
    /// `myapp:request` (see [`app_schema`]).
    fn request(
        &mut self,
        t: u64,
        path: &str,
        latency: f64,
        ok: bool,
        delta: i64,
        site: u64,
    ) -> &mut Self {
        self.event(APP_EVENT, t)
            .str(path)
            .f64(latency)
            .bool(ok)
            .i(delta)
            .u(site)
            .u(99)
    }
}

/// An application event; its `event` field collides with the JSONL key.
fn app_schema() -> Schema {
    let f = |name: &str, ty| SchemaField {
        name: name.into(),
        ty,
    };
    Schema {
        id: APP_EVENT,
        provider: "myapp".into(),
        name: "request".into(),
        fields: vec![
            f("path", FieldType::Str),
            f("latency_ms", FieldType::F64),
            f("ok", FieldType::Bool),
            f("delta", FieldType::I64),
            f("site", FieldType::Loc),
            f("event", FieldType::U64),
        ],
    }
}

fn definitions(f: &mut TraceFile) {
    f.frame(FrameType::Strings, &frame::strings([(1, "io")].into_iter()));
    let locs = [
        LocationDef {
            id: 1,
            file: "src/main.rs".into(),
            line: 10,
            col: 5,
        },
        LocationDef {
            id: 2,
            file: "src/worker.rs".into(),
            line: 42,
            col: 13,
        },
    ];
    f.frame(FrameType::Locations, &frame::locations(locs.iter()));
    f.frame(FrameType::Schema, &frame::schemas(&[app_schema()]));
    f.frame(FrameType::Thread, &frame::thread(11, "worker-0"));
    f.frame(FrameType::Thread, &frame::thread(12, "worker-1"));
}

/// Byte offsets of interesting frames in file 0.
struct Offsets {
    /// Round 1, thread B (tid 12).
    chunk_b1: u64,
    /// Round 2, thread A (tid 11): written after thread B's round-2 chunk.
    chunk_a2: u64,
}

/// File 0: two worker threads whose chunks interleave in time, two drain
/// rounds, a DROPPED report; 13 events.
fn file0() -> (TraceFile, Offsets) {
    let mut f = TraceFile::new(0);
    definitions(&mut f);
    let mut a = Chunk::new(11, Some(0), 1090);
    a.spawn(1100, 1, 0, 1, 0)
        .poll_start(1120, 1, 0, 3)
        .poll_end(1140, 1, false);
    let mut b = Chunk::new(12, Some(1), 1100);
    b.spawn(1105, 2, 1, 2, 1)
        .poll_start(1125, 2, 1, 0)
        .poll_end(1135, 2, true)
        .terminate(1145, 2);
    f.chunk(a);
    let chunk_b1 = f.chunk(b);
    f.frame(FrameType::Round, &frame::round(1200));

    let mut b = Chunk::new(12, Some(1), 1200);
    b.wake(1210, 1, 0)
        .request(1230, "/a\"b", 1.5, true, -7, 2)
        .request(1235, "/nan", f64::NAN, false, 3, 0);
    let mut a = Chunk::new(11, Some(0), 1200);
    a.poll_start(1205, 1, 0, 1)
        .poll_end(1220, 1, true)
        .terminate(1240, 1);
    f.chunk(b);
    let chunk_a2 = f.chunk(a);
    f.frame(FrameType::Round, &frame::round(1300));
    f.frame(FrameType::Dropped, &frame::dropped(12, 3, 1150, 1250));
    f.end(3);
    (f, Offsets { chunk_b1, chunk_a2 })
}

/// File 1 of the same recording: a new task, a non-worker thread that
/// switches to worker 2 with a `set_worker` record; 6 events.
fn file1() -> TraceFile {
    let mut f = TraceFile::new(1);
    definitions(&mut f);
    let mut a = Chunk::new(11, Some(0), 1300);
    a.spawn(1310, 3, 0, 1, 0)
        .poll_start(1320, 3, 0, 5)
        .park(1330, 0, 777);
    let mut c = Chunk::new(13, None, 1300);
    // Task 1 terminated in file 0: its spawn location must be forgotten.
    c.wake(1315, 3, 0)
        .set_worker(1317, 2)
        .wake(1318, 1, 3)
        .queue_sample(1325, 4);
    f.chunk(c);
    f.chunk(a);
    f.frame(FrameType::Round, &frame::round(1400));
    f.end(0);
    f
}

/// A fresh, empty directory for one test.
fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes both files of the sample recording; returns their paths.
fn sample_recording(dir: &Path) -> (PathBuf, PathBuf, Offsets) {
    let (f0, off) = file0();
    let (p0, p1) = (dir.join("trace.0.bin"), dir.join("trace.1.bin"));
    std::fs::write(&p0, &f0.bytes).unwrap();
    std::fs::write(&p1, file1().bytes).unwrap();
    (p0, p1, off)
}

// ---------------------------------------------------------------------------
// Running the binary

fn runtrace(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check_json(files: &[&Path]) -> (i32, Json) {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"check", &"--json"];
    args.extend(files.iter().map(|p| p as &dyn AsRef<std::ffi::OsStr>));
    let out = runtrace(&args);
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.lines().count(),
        1,
        "exactly one JSON object: {stdout}"
    );
    let v: Json = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
    (out.status.code().unwrap(), v)
}

fn jsonl_lines(stdout: &[u8]) -> Vec<Json> {
    text(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn errors_of(v: &Json) -> Vec<String> {
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

// ---------------------------------------------------------------------------
// jsonl

#[test]
fn jsonl_is_in_timestamp_order_across_threads_and_files() {
    let dir = test_dir("order");
    let (p0, p1, _) = sample_recording(&dir);
    // Given out of order: the command sorts trace.N.bin by N.
    let out = runtrace(&[&"jsonl", &p1, &p0]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let lines = jsonl_lines(&out.stdout);
    let got: Vec<(String, i64, u64)> = lines
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_string(),
                e["timestamp_ns"].as_i64().unwrap(),
                e["tid"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, i64, u64)> = [
        ("TaskSpawn", 1100, 11),
        ("TaskSpawn", 1105, 12),
        ("PollStart", 1120, 11),
        ("PollStart", 1125, 12),
        ("PollEnd", 1135, 12),
        ("PollEnd", 1140, 11),
        ("TaskTerminate", 1145, 12),
        ("PollStart", 1205, 11),
        ("WakeEvent", 1210, 12),
        ("PollEnd", 1220, 11),
        ("myapp:request", 1230, 12),
        ("myapp:request", 1235, 12),
        ("TaskTerminate", 1240, 11),
        ("TaskSpawn", 1310, 11),
        ("WakeEvent", 1315, 13),
        ("WakeEvent", 1318, 13),
        ("PollStart", 1320, 11),
        ("QueueSample", 1325, 13),
        ("WorkerPark", 1330, 11),
    ]
    .into_iter()
    .map(|(e, t, tid)| (e.to_string(), ns(t), tid))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn jsonl_keys_and_values() {
    let dir = test_dir("keys");
    let (p0, p1, _) = sample_recording(&dir);
    let out = runtrace(&[&"jsonl", &p0, &p1]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // Key order and exact rendering of the first line.
    assert_eq!(
        stdout.lines().next().unwrap(),
        r#"{"event":"TaskSpawn","timestamp_ns":800,"tid":11,"task_id":1,"parent_task_id":0,"spawn_loc_id":1,"spawn_loc":"src/main.rs:10:5","queue":""}"#
    );
    let lines = jsonl_lines(&out.stdout);
    let at = |event: &str, t: u64| {
        lines
            .iter()
            .find(|e| e["event"] == event && e["timestamp_ns"] == ns(t))
            .unwrap_or_else(|| panic!("no {event} at {t}"))
            .as_object()
            .unwrap()
            .clone()
    };
    let keys = |o: &serde_json::Map<String, Json>| o.keys().cloned().collect::<Vec<_>>();

    // PollStart carries its task's spawn location, from the TaskSpawn.
    let ps = at("PollStart", 1125);
    assert_eq!(ps["task_id"], 2);
    assert_eq!(ps["worker"], 1);
    assert_eq!(ps["queue"], "io");
    assert_eq!(ps["local_q"], 0);
    assert_eq!(ps["spawn_loc_id"], 2);
    assert_eq!(ps["spawn_loc"], "src/worker.rs:42:13");
    let mut k = keys(&ps);
    k.sort();
    assert_eq!(
        k,
        [
            "event",
            "local_q",
            "queue",
            "spawn_loc",
            "spawn_loc_id",
            "task_id",
            "tid",
            "timestamp_ns",
            "worker"
        ]
    );
    assert_eq!(at("PollStart", 1120)["local_q"], 3);
    assert_eq!(at("PollStart", 1120)["spawn_loc"], "src/main.rs:10:5");
    // ... and so do PollEnd, WakeEvent (woken task) and TaskTerminate.
    let pe = at("PollEnd", 1135);
    assert_eq!(
        (pe["ready"].clone(), pe["spawn_loc_id"].clone()),
        (Json::Bool(true), 2.into())
    );
    assert_eq!(at("PollEnd", 1140)["ready"], false);
    let wake = at("WakeEvent", 1210);
    assert_eq!(wake["woken_task_id"], 1);
    assert_eq!(wake["waker_task_id"], 0);
    assert_eq!(wake["worker"], 1);
    assert_eq!(wake["spawn_loc"], "src/main.rs:10:5");
    assert_eq!(at("TaskTerminate", 1240)["spawn_loc_id"], 1);
    // Across files: task 3 was spawned in file 1.
    assert_eq!(at("PollStart", 1320)["spawn_loc_id"], 1);
    assert_eq!(at("WakeEvent", 1315)["spawn_loc_id"], 1);
    // A non-worker thread has worker null until a set_worker record.
    assert_eq!(at("WakeEvent", 1315)["worker"], Json::Null);
    // After TaskTerminate the task's location is forgotten.
    let late = at("WakeEvent", 1318);
    assert_eq!(late["worker"], 2);
    assert_eq!(
        (late["spawn_loc_id"].clone(), late["spawn_loc"].clone()),
        (Json::Null, Json::Null)
    );

    let park = at("WorkerPark", 1330);
    assert_eq!(
        (
            park["worker"].clone(),
            park["local_q"].clone(),
            park["cpu_ns"].clone()
        ),
        (0.into(), 0.into(), 777.into())
    );
    assert_eq!(at("QueueSample", 1325)["global_q"], 4);

    // Application events: every field type, and a field named like a key.
    let app = at("myapp:request", 1230);
    assert_eq!(app["path"], "/a\"b");
    assert_eq!(app["latency_ms"], 1.5);
    assert_eq!(app["ok"], true);
    assert_eq!(app["delta"], -7);
    assert_eq!(app["site_id"], 2);
    assert_eq!(app["site"], "src/worker.rs:42:13");
    assert_eq!(app["event_2"], 99);
    assert!(!app.contains_key("spawn_loc_id"));
    let nan = at("myapp:request", 1235);
    assert_eq!(nan["latency_ms"], Json::Null);
    assert_eq!(
        (nan["site_id"].clone(), nan["site"].clone()),
        (0.into(), Json::Null)
    );
}

#[test]
fn jsonl_to_output_file() {
    let dir = test_dir("output");
    let (p0, p1, _) = sample_recording(&dir);
    let out_path = dir.join("trace.jsonl");
    let out = runtrace(&[&"jsonl", &p0, &p1, &"-o", &out_path]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let written = std::fs::read(&out_path).unwrap();
    assert_eq!(jsonl_lines(&written).len(), 19);
    // Never clobber a trace with its own conversion.
    let out = runtrace(&[&"jsonl", &p0, &"-o", &p0]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("refusing to write over the input"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&p0).unwrap(), file0().0.bytes);
}

#[test]
fn jsonl_keeps_going_after_damage() {
    let dir = test_dir("jsonl-damage");
    let (f0, off) = file0();
    let cut = dir.join("trace.0.bin");
    std::fs::write(&cut, &f0.bytes[..off.chunk_a2 as usize + 5]).unwrap();
    let missing = dir.join("no-such.bin");
    let out = runtrace(&[&"jsonl", &cut, &missing]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("truncated at byte {}", off.chunk_a2)),
        "{stderr}"
    );
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    // Everything before the cut: round 1 (7) and thread B's round 2 (3).
    assert_eq!(jsonl_lines(&out.stdout).len(), 10);
}

#[test]
fn jsonl_stops_quietly_when_the_reader_goes_away() {
    let dir = test_dir("pipe");
    let mut f = TraceFile::new(0);
    for r in 0..20u64 {
        let mut c = Chunk::new(11, Some(0), r * 10_000);
        for i in 0..2_000 {
            c.poll_start(r * 10_000 + i + 1, i, 0, 1);
        }
        f.chunk(c);
        f.frame(FrameType::Round, &frame::round((r + 1) * 10_000));
    }
    f.end(0);
    let p = dir.join("trace.0.bin");
    std::fs::write(&p, &f.bytes).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(["jsonl".as_ref(), p.as_os_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with(r#"{"event":"PollStart""#), "{first}");
    // The reader is dropped here, like `| head -1` exiting.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
}

/// The "Check Worker Balance" snippet of the user guide (seed 000), verbatim.
const WORKER_BALANCE: &str = r#"
# Count polls per worker
import json
from collections import Counter

worker_polls = Counter()
with open('trace.jsonl') as f:
    for line in f:
        e = json.loads(line)
        if e['event'] == 'PollStart':
            worker_polls[e['worker']] += 1

# Should be roughly equal (within 10%)
"#;

/// The guide's "Identify the Problem Tasks" snippet, verbatim.
const PROBLEM_TASKS: &str = r#"
# Find tasks with >10ms delays
import json
from collections import defaultdict

task_wakes = defaultdict(list)
task_polls = defaultdict(list)

with open('trace.jsonl') as f:
    for line in f:
        e = json.loads(line)
        if e['event'] == 'WakeEvent':
            task_wakes[e['woken_task_id']].append(e['timestamp_ns'])
        elif e['event'] == 'PollStart':
            task_polls[e['task_id']].append({
                'ts': e['timestamp_ns'],
                'worker': e['worker'],
                'loc': e.get('spawn_loc_id'),
                'local_q': e['local_q']
            })

# Match wakes to polls and find delays
for task_id in task_polls:
    wakes = sorted(task_wakes.get(task_id, []))
    polls = sorted(task_polls[task_id], key=lambda x: x['ts'])
    # ... calculate delays
"#;

fn python(dir: &Path, script: &str) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("python3 is needed to run the user guide's snippets");
    assert!(out.status.success(), "python failed: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn user_guide_python_snippets_run_on_jsonl() {
    let dir = test_dir("python");
    let (p0, p1, _) = sample_recording(&dir);
    let out = runtrace(&[&"jsonl", &p0, &p1, &"-o", &dir.join("trace.jsonl")]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));

    let balance = python(
        &dir,
        &format!("{WORKER_BALANCE}\nprint(json.dumps(sorted(worker_polls.items())))\n"),
    );
    assert_eq!(balance.trim(), "[[0, 3], [1, 1]]");

    let tasks = python(
        &dir,
        &format!("{PROBLEM_TASKS}\nprint(json.dumps({{'wakes': task_wakes, 'polls': task_polls}}, sort_keys=True))\n"),
    );
    let v: Json = serde_json::from_str(tasks.trim()).unwrap();
    assert_eq!(v["wakes"]["1"], serde_json::json!([ns(1210), ns(1318)]));
    assert_eq!(
        v["polls"]["1"],
        serde_json::json!([
            {"ts": ns(1120), "worker": 0, "loc": 1, "local_q": 3},
            {"ts": ns(1205), "worker": 0, "loc": 1, "local_q": 1},
        ])
    );
    assert_eq!(v["polls"]["2"][0]["loc"], 2);
}

// ---------------------------------------------------------------------------
// check

#[test]
fn check_counts_a_clean_recording() {
    let dir = test_dir("check-clean");
    let (p0, p1, _) = sample_recording(&dir);
    let (code, v) = check_json(&[&p1, &p0]);
    // Intact, but it lost 3 events: INCOMPLETE, saying how many and why.
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["result"], "INCOMPLETE");
    let why = v["incomplete"].as_array().unwrap();
    assert_eq!(why.len(), 1, "{v}");
    assert!(why[0].as_str().unwrap().contains("3 events dropped"), "{v}");
    let bytes = std::fs::metadata(&p0).unwrap().len() + std::fs::metadata(&p1).unwrap().len();
    assert_eq!(v["files"], 2);
    assert_eq!(v["events"], 19);
    assert_eq!(v["bytes"], bytes);
    assert_eq!(v["bytes_per_event"].as_f64().unwrap(), bytes as f64 / 19.0);
    assert_eq!(v["dropped_events"], 3);
    assert_eq!(v["truncated"], false);
    assert_eq!(v["sealed"], 2);
    assert_eq!(v["errors"], serde_json::json!([]));
    assert_eq!(
        v["event_counts"],
        serde_json::json!({
            "TaskSpawn": 3, "PollStart": 4, "PollEnd": 3, "WakeEvent": 3, "TaskTerminate": 2,
            "myapp:request": 2, "QueueSample": 1, "WorkerPark": 1,
        })
    );

    // The text summary says the same.
    let out = runtrace(&[&"check", &p0, &p1]);
    assert_eq!(out.status.code(), Some(1));
    let s = text(&out.stdout);
    for want in [
        "events:          19",
        "dropped events:  3",
        "truncated:       no",
        "PollStart",
        "myapp:request",
        "incomplete: recording",
        "result:          INCOMPLETE",
    ] {
        assert!(s.contains(want), "{want:?} missing from:\n{s}");
    }
}

#[test]
fn check_reports_truncation_and_keeps_good_events() {
    let dir = test_dir("check-truncated");
    let (f0, off) = file0();
    let p = dir.join("trace.0.bin");
    // Cut inside the header of thread A's round-2 chunk frame.
    std::fs::write(&p, &f0.bytes[..off.chunk_a2 as usize + 5]).unwrap();
    let (code, v) = check_json(&[&p]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["truncated"], true);
    assert_eq!(v["events"], 10);
    assert_eq!(v["event_counts"]["PollStart"], 2);
    assert_eq!(v["sealed"], 0);
    let errors = errors_of(&v);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(&format!("truncated at byte {}", off.chunk_a2)),
        "{errors:?}"
    );
    assert!(errors[0].contains(&p.display().to_string()), "{errors:?}");

    // Cut at a frame boundary (before END): intact but unsealed.
    let end_at = f0.bytes.len() - 9 - frame::end(f0.events, 3).len();
    std::fs::write(&p, &f0.bytes[..end_at]).unwrap();
    let (code, v) = check_json(&[&p]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        (v["truncated"].clone(), v["events"].clone()),
        (Json::Bool(true), 13.into())
    );
    assert_eq!(v["errors"], serde_json::json!([]));
    assert_eq!(
        v["unsealed_files"],
        serde_json::json!([p.display().to_string()])
    );
    let s = text(&runtrace(&[&"check", &p]).stdout);
    assert!(s.contains("UNSEALED") && s.contains("no END frame"), "{s}");
}

#[test]
fn check_reports_a_corrupted_byte_with_its_offset() {
    let dir = test_dir("check-corrupt");
    let (mut f0, off) = file0();
    // A bit flip inside thread B's round-1 chunk payload.
    f0.bytes[off.chunk_b1 as usize + 12] ^= 0x40;
    let p = dir.join("trace.0.bin");
    std::fs::write(&p, &f0.bytes).unwrap();
    let (code, v) = check_json(&[&p]);
    assert_eq!(code, 1, "{v}");
    let errors = errors_of(&v);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(&format!("byte {}", off.chunk_b1)),
        "{errors:?}"
    );
    assert!(errors[0].contains("checksum"), "{errors:?}");
    // The other chunks still count; the file is not cut short.
    assert_eq!(v["events"], 13 - 4);
    assert_eq!(v["truncated"], false);
    assert_eq!(v["sealed"], 1);
}

#[test]
fn check_reports_an_undecodable_event_after_the_good_ones() {
    let dir = test_dir("check-bad-event");
    let mut f = TraceFile::new(0);
    let mut c = Chunk::new(11, Some(0), 100);
    // The second PollStart names string id 9, which is never defined.
    c.poll_start(110, 1, 0, 0)
        .poll_start(120, 1, 9, 0)
        .poll_start(130, 1, 0, 0);
    let at = f.chunk(c);
    f.end(3);
    let p = dir.join("trace.0.bin");
    std::fs::write(&p, &f.bytes).unwrap();
    let (code, v) = check_json(&[&p]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["events"], 1);
    let errors = errors_of(&v);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(&format!("chunk at byte {at}")) && errors[0].contains("string id 9"),
        "{errors:?}"
    );
}

#[test]
fn check_verifies_end_totals() {
    let dir = test_dir("check-end");
    let mut f = TraceFile::new(0);
    let mut c = Chunk::new(11, Some(0), 100);
    c.poll_start(110, 1, 0, 0).poll_end(120, 1, true);
    f.chunk(c);
    f.frame(FrameType::Dropped, &frame::dropped(11, 2, 100, 130));
    f.frame(FrameType::End, &frame::end(5, 1));
    let p = dir.join("trace.0.bin");
    std::fs::write(&p, &f.bytes).unwrap();
    let (code, v) = check_json(&[&p]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        (v["events"].clone(), v["dropped_events"].clone()),
        (2.into(), 2.into())
    );
    let errors = errors_of(&v);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("says the file holds 5 events, but its chunks hold 2"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("1 events were dropped, but the DROPPED frames report 2"),
        "{errors:?}"
    );
}

#[test]
fn bad_paths_are_named() {
    let dir = test_dir("bad-paths");
    let missing = dir.join("missing.0.bin");
    let (code, v) = check_json(&[&missing]);
    assert_eq!(code, 1);
    let errors = errors_of(&v);
    assert!(
        errors[0].contains(&missing.display().to_string()),
        "{errors:?}"
    );
    assert_eq!(v["files"], 1);

    let out = runtrace(&[&"check", &missing, &dir]);
    assert_eq!(out.status.code(), Some(1));
    let s = text(&out.stdout);
    assert!(
        s.contains(&format!("{}: cannot open", missing.display())),
        "{s}"
    );
    assert!(
        s.contains(&format!("{}: is a directory", dir.display())),
        "{s}"
    );

    let not_trace = dir.join("notes.txt");
    std::fs::write(&not_trace, "hello").unwrap();
    let (code, v) = check_json(&[&not_trace]);
    assert_eq!(code, 1);
    assert!(errors_of(&v)[0].contains("notes.txt"), "{v}");

    let out = runtrace(&[&"jsonl", &missing]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&missing.display().to_string()),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

/// Nothing readable among the paths (an empty directory, a typo): each
/// command that reads says why and stops, exit 1, with no report of
/// nothing on standard output and no output file written.
#[test]
fn no_readable_input_is_an_error_not_an_empty_report() {
    let dir = test_dir("nothing-readable");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let missing = dir.join("trace.0.bin");
    let out_file = dir.join("out");
    let o = out_file.display().to_string();
    let commands: [&[&str]; 10] = [
        &["analyze"],
        &["analyze", "--all"],
        &["summary"],
        &["outliers"],
        &["backlog"],
        &["blocked"],
        &["flamegraph", "--folded"],
        &["perfetto", "-o", &o],
        &["report", "-o", &o],
        &["export", "parquet", "-o", &o],
    ];
    for cmd in commands {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = cmd.iter().map(|a| a as _).collect();
        args.push(&empty);
        args.push(&missing);
        let out = runtrace(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(out.stdout.is_empty(), "{cmd:?}: {}", text(&out.stdout));
        assert!(
            err.contains(&format!(
                "{}: is a directory without trace files (trace.N.bin or trace.N.bin.active)",
                empty.display()
            )),
            "{cmd:?}: {err}"
        );
        assert!(
            err.contains(&format!("{}: cannot open", missing.display())),
            "{cmd:?}: {err}"
        );
        assert!(err.contains("no trace file to read"), "{cmd:?}: {err}");
        assert!(!out_file.exists(), "{cmd:?} wrote {o}");
    }
    // One readable path among them: the command runs and names the others.
    let (p0, _, _) = sample_recording(&dir);
    let out = runtrace(&[&"summary", &p0, &empty]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("tasks:"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).contains("without trace files"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(runtrace(&[&"check"]).status.code(), Some(2));
    assert_eq!(runtrace(&[&"jsonl"]).status.code(), Some(2));
    assert_eq!(runtrace(&[&"frobnicate"]).status.code(), Some(2));
    assert_eq!(
        runtrace(&[&"check", &"--bogus", &"x.bin"]).status.code(),
        Some(2)
    );
}

#[test]
fn no_input_makes_it_panic() {
    // Every prefix of a valid file, and every single-byte corruption of its
    // first frames: never a panic, always a clean exit code.
    let dir = test_dir("fuzz");
    let (f0, _) = file0();
    let p = dir.join("trace.0.bin");
    let mut inputs: Vec<Vec<u8>> = (0..f0.bytes.len())
        .step_by(7)
        .map(|n| f0.bytes[..n].to_vec())
        .collect();
    for i in (0..f0.bytes.len()).step_by(11) {
        let mut b = f0.bytes.clone();
        b[i] = b[i].wrapping_add(0x55);
        inputs.push(b);
    }
    for bytes in inputs {
        std::fs::write(&p, &bytes).unwrap();
        for cmd in ["check", "jsonl"] {
            let out = runtrace(&[&cmd, &p]);
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 1)),
                "{cmd} on {} bytes: {code:?} {}",
                bytes.len(),
                text(&out.stderr)
            );
            assert!(
                !text(&out.stderr).contains("panicked"),
                "{}",
                text(&out.stderr)
            );
        }
    }
}

#[test]
fn a_recording_directory_stands_for_its_files() {
    let dir = test_dir("dir-arg");
    let (p0, p1, _) = sample_recording(&dir);
    for cmd in ["check", "jsonl", "analyze"] {
        let by_files = runtrace(&[&cmd, &p0, &p1]);
        let by_dir = runtrace(&[&cmd, &dir]);
        assert_eq!(by_dir.status.code(), by_files.status.code(), "{cmd}");
        // Same files in the same order: the same output, paths aside.
        let strip = |o: &Output| text(&o.stdout).replace(&dir.display().to_string(), "DIR");
        assert_eq!(strip(&by_dir), strip(&by_files), "{cmd}");
    }
    // A directory without trace files is reported like any non-trace path.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = runtrace(&[&"check", &empty]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("is a directory"),
        "{}",
        text(&out.stdout)
    );
}
