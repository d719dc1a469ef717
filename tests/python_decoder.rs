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
