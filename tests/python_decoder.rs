//! docs/format.md is complete enough to decode from: `tools/rtdecode.py`, an
//! independent decoder written from the spec alone, must agree with the
//! Rust reader on files the Rust recorder wrote: every event, field value,
//! timestamp and count, and on what a cut-short file still holds.

mod common;
use common::{scratch_dir, trace_files};
use runtrace_format::{FileReader, Record, Value};
use runtrace_recorder::{Istr, Loc, Recorder};
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

runtrace_recorder::user_events! {
    provider = "crosscheck";
    fn sample(level: u8, delta: i32, ratio: f64, ok: bool, label: str);
}

fn python(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("tools/rtdecode.py"))
        .args(args)
        .output()
        .expect("python3 must be installed (it runs the independent decoder)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// The Rust reader's view, rendered as rtdecode.py renders events.
fn rust_events(file: &Path) -> Vec<Json> {
    let mut v = Vec::new();
    for rec in FileReader::open(file).unwrap().flatten() {
        if let Record::Events { tid, events, .. } = rec {
            for e in events {
                let mut fields = serde_json::Map::new();
                for (f, val) in e.schema.fields.iter().zip(&e.values) {
                    let j = match val {
                        Value::U(x) => json!(x),
                        Value::I(x) => json!(x),
                        Value::Bool(b) => json!(b),
                        Value::F(x) => json!(x),
                        Value::Str(s) => json!(s.as_ref()),
                        Value::Loc { text, .. } => json!(text.as_deref()),
                        Value::Worker(w) => json!(w),
                    };
                    fields.insert(f.name.clone(), j);
                }
                v.push(json!({
                    "file": file.to_string_lossy(),
                    "tid": tid,
                    "type_id": e.schema.id,
                    "provider": e.schema.provider,
                    "name": e.schema.name,
                    "ticks": e.ticks,
                    "ns": e.ns,
                    "fields": fields,
                }));
            }
        }
    }
    v
}

fn record_sample_trace(dir: &Path) -> Vec<PathBuf> {
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .max_file_size(64 << 10)
        .buffer_size(64 << 10)
        .flush_interval(Duration::from_millis(5))
        .start()
        .unwrap();
    let hs: Vec<_> = (0..3u32)
        .map(|w| {
            std::thread::spawn(move || {
                let q = Istr::new(&format!("queue-{w}"));
                for i in 0..20_000u64 {
                    let id = (w as u64) << 32 | i;
                    runtrace_recorder::task_spawn(id, i, Loc::caller(), q);
                    // Alternate workers on one thread: set_worker records.
                    runtrace_recorder::task_poll_start(id, w + (i % 2) as u32, q, i as u32 % 30);
                    runtrace_recorder::task_poll_end(id, w, i % 3 == 0);
                    if i % 100 == 0 {
                        sample(
                            w as u8,
                            -(i as i32),
                            i as f64 / 7.0,
                            i % 200 == 0,
                            "ünïcode label",
                        );
                        runtrace_recorder::task_wake(id, 0, runtrace_format::NO_WORKER);
                    }
                    // Pauses longer than the flush interval: the writer
                    // then drains in several rounds, so the files rotate
                    // (a starved writer on a loaded machine wrote it all
                    // in two big rounds, two files, and lost events).
                    if i % 2000 == 1999 {
                        std::thread::sleep(Duration::from_millis(8));
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let st = guard.finish().unwrap();
    assert!(st.files >= 3, "rotation exercised: {st:?}");
    trace_files(dir)
}

#[test]
fn python_decoder_agrees_with_rust_reader() {
    let dir = scratch_dir("pycheck");
    let files = record_sample_trace(dir.path());
    let mut total = 0;
    for f in &files {
        let (code, out) = python(&["--events", f.to_str().unwrap()]);
        assert_eq!(code, 0, "rtdecode.py failed on {}", f.display());
        let py: Vec<Json> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let rs = rust_events(f);
        assert_eq!(py.len(), rs.len(), "{}", f.display());
        for (a, b) in py.iter().zip(&rs) {
            assert_eq!(a, b);
        }
        total += rs.len();
    }
    assert!(total > 60_000);

    // Summaries agree too, including DROPPED totals across all files.
    let args: Vec<&str> = std::iter::once("--summary")
        .chain(files.iter().map(|f| f.to_str().unwrap()))
        .collect();
    let (code, out) = python(&args);
    assert_eq!(code, 0);
    let sum: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(sum["events"], json!(total));
    assert_eq!(sum["files"], json!(files.len()));
    assert_eq!(sum["sealed"], json!(files.len()));
    assert_eq!(sum["truncated"], json!(false));
    let mut rust_dropped = 0;
    for f in &files {
        for r in FileReader::open(f).unwrap().flatten() {
            if let Record::Dropped { count, .. } = r {
                rust_dropped += count;
            }
        }
    }
    assert_eq!(sum["dropped_events"], json!(rust_dropped));

    // A copy cut in the middle: both keep exactly the complete chunks.
    let whole = std::fs::read(&files[0]).unwrap();
    let cut = dir.path().join("cut.bin");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let (code, out) = python(&["--events", cut.to_str().unwrap()]);
    assert_eq!(code, 1, "a cut file is reported");
    let py: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(py, rust_events(&cut));
    assert!(!py.is_empty());
}

/// Format 1.1's CPU profile frames: rtdecode.py reads the stacks, mappings
/// and PROFILE frame the Rust writer side encodes (`frame::stacks` etc.,
/// through the analysis's synthetic trace builder) as the Rust reader does.
#[test]
fn python_decoder_agrees_on_profile_frames() {
    use runtrace_format::frame::{Mapping, ProfileInfo};
    use runtrace_model::synth::TraceBuilder;
    let dir = scratch_dir("pyprofile");
    let mut b = TraceBuilder::new();
    b.profile(&ProfileInfo {
        mode: ProfileInfo::MODE_SIGNAL,
        hz: 997,
        flags: 0,
        message: "perf_event_open refused: ünïcode".into(),
    });
    let mapping = |start: u64, path: &str| Mapping {
        start,
        end: start + 0x2_0000,
        file_offset: 0x3000,
        build_id: (0..20).map(|i| i * 13).collect(),
        path: path.into(),
    };
    b.mappings(&[
        mapping(0x5555_5555_0000, "/old"),
        mapping(0x7f00_0000_0000, "/lib.so"),
    ]);
    b.mappings(&[mapping(0x5555_5555_0000, "/new")]);
    let deep: Vec<u64> = (0..128u64).map(|i| 0x5555_5555_0000 + i * 0x101).collect();
    b.stacks(&[
        (1, &[0x5555_5555_1234, 0xffff_ffff_8100_0000, 0x10][..]),
        (2, &deep),
    ]);
    b.cpu_sample(1, 1_000, 100, 1);
    b.off_cpu(1, 2_000, 100, 2, 500);
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();

    let (code, out) = python(&["--profile", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let py: Json = serde_json::from_str(&out).unwrap();
    let mut r = FileReader::open(&path).unwrap();
    for rec in r.by_ref() {
        rec.unwrap();
    }
    let t = r.tables();
    let p = t.profile().unwrap();
    assert_eq!(
        py["profile"],
        json!({"mode": p.mode, "hz": p.hz, "flags": p.flags, "message": p.message})
    );
    let maps: Vec<Json> = t
        .mappings()
        .iter()
        .map(|m| {
            json!({
                "start": format!("{:#x}", m.start),
                "end": format!("{:#x}", m.end),
                "file_offset": format!("{:#x}", m.file_offset),
                "build_id": m.build_id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "path": m.path,
            })
        })
        .collect();
    assert_eq!(py["mappings"], json!(maps));
    assert_eq!(t.mappings()[0].path, "/new");
    for id in [1u64, 2] {
        let want: Vec<String> = t
            .stack(id)
            .unwrap()
            .iter()
            .map(|a| format!("{a:#x}"))
            .collect();
        assert_eq!(py["stacks"][id.to_string()], json!(want), "stack {id}");
    }
    assert_eq!(py["errors"], json!([]));
    // The events agree as all events do.
    let (code, out) = python(&["--events", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    let events: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events, rust_events(&path));
    assert_eq!(
        events[1]["fields"],
        json!({"tid": 100, "stack": 2, "off_ns": 500})
    );
}
