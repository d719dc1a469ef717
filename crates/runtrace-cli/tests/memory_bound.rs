//! Issue 17 item 2: readers' memory follows threads and open state, not
//! events. A crafted file whose schema has 32 zero-width fields (`worker`
//! fields take no bytes) packs ~500,000 events into a 1 MiB chunk (the
//! largest the recorder writes); two such chunks and no ROUND frame cost
//! the old `check` and `jsonl` ~1 GB. Each command runs here under a
//! virtual-memory limit it must stay within.

use runtrace_format::chunk::{ChunkHeader, ChunkState};
use runtrace_format::frame::{self, FrameType, Header};
use runtrace_format::schema::{FieldType, Schema, SchemaField};
use std::path::{Path, PathBuf};
use std::process::Command;

const WIDE: u32 = 100;
const CHUNK_EVENTS: u64 = 500_000;

fn crafted(path: &Path) {
    let schema = Schema {
        id: WIDE,
        provider: "fuzz".into(),
        name: "wide".into(),
        fields: (0..32)
            .map(|i| SchemaField {
                name: format!("w{i}"),
                ty: FieldType::Worker,
            })
            .collect(),
    };
    let header = Header {
        version_major: runtrace_format::VERSION_MAJOR,
        version_minor: runtrace_format::VERSION_MINOR,
        ticks_per_sec: 1_000_000_000,
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: 1,
        process_name: "crafted".into(),
        recording_id: 7,
        file_index: 0,
        schemas: vec![schema],
    };
    let mut out = runtrace_format::MAGIC.to_vec();
    frame::write(&mut out, FrameType::Header, &header.encode());
    for c in 0..2u64 {
        let mut p = Vec::new();
        ChunkHeader {
            tid: 10 + c,
            state: ChunkState::default(),
            count: CHUNK_EVENTS,
        }
        .encode(&mut p);
        for _ in 0..CHUNK_EVENTS {
            p.extend_from_slice(&[WIDE as u8, 1]); // type id, tick delta 1
        }
        frame::write(&mut out, FrameType::Chunk, &p);
    }
    let finish = frame::Finish {
        files: 1,
        events: 2 * CHUNK_EVENTS,
        ..frame::Finish::default()
    };
    frame::write(&mut out, FrameType::Finish, &finish.encode());
    frame::write(&mut out, FrameType::End, &frame::end(2 * CHUNK_EVENTS, 0));
    std::fs::write(path, out).unwrap();
}

/// Runs `runtrace ARGS` with at most `limit_mib` MiB of address space.
fn limited(limit_mib: u64, args: &[&str]) -> std::process::Output {
    let cmd = format!("ulimit -v {} && exec \"$0\" \"$@\"", limit_mib * 1024);
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .arg(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn check_and_jsonl_stay_bounded_on_zero_width_events() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("runtrace-membound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("trace.0.bin");
    crafted(&f);
    let fs = f.to_str().unwrap();

    let out = limited(400, &["check", "--json", fs]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["events"], 2 * CHUNK_EVENTS, "{v}");

    let out = limited(400, &["jsonl", fs, "-o", "/dev/null"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // No ROUND frame: the ordering bound is hit, and said.
    assert!(
        stderr.contains("note: events held for time ordering"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The peak resident memory (KiB) of `runtrace ARGS`, by GNU time.
fn peak_kib(args: &[&str]) -> (std::process::Output, u64) {
    let report = std::env::temp_dir().join(format!(
        "runtrace-peak-{}-{}",
        std::process::id(),
        args.len()
    ));
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .expect("/usr/bin/time (Debian package time) runs");
    let kib = std::fs::read_to_string(&report)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(u64::MAX);
    let _ = std::fs::remove_file(&report);
    (out, kib)
}

/// One chunk per thread of `per_thread` events of schema `WIDE`, each
/// encoded as `body` after its type id and tick delta; no ROUND frame, so
/// everything waits for ordering.
fn crafted_events(
    path: &Path,
    fields: Vec<SchemaField>,
    body: &[u8],
    threads: u64,
    per_thread: u64,
) {
    let header = Header {
        version_major: runtrace_format::VERSION_MAJOR,
        version_minor: runtrace_format::VERSION_MINOR,
        ticks_per_sec: 1_000_000_000,
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: 1,
        process_name: "crafted".into(),
        recording_id: 8,
        file_index: 0,
        schemas: vec![Schema {
            id: WIDE,
            provider: "fuzz".into(),
            name: "e".into(),
            fields,
        }],
    };
    let mut out = runtrace_format::MAGIC.to_vec();
    frame::write(&mut out, FrameType::Header, &header.encode());
    // String 1: 255 bytes, for `istr` fields.
    let long = "x".repeat(255);
    frame::write(
        &mut out,
        FrameType::Strings,
        &frame::strings([(1u64, long.as_str())].into_iter()),
    );
    for t in 0..threads {
        let mut p = Vec::new();
        ChunkHeader {
            tid: 10 + t,
            state: ChunkState::default(),
            count: per_thread,
        }
        .encode(&mut p);
        for _ in 0..per_thread {
            p.extend_from_slice(&[WIDE as u8, 1]);
            p.extend_from_slice(body);
        }
        frame::write(&mut out, FrameType::Chunk, &p);
    }
    std::fs::write(path, out).unwrap();
}

/// Issue 37: `jsonl`'s ordering bound counts bytes (docs/format.md: 100
/// MiB), so an 8 MB file of zero-width events and one of events with 32
/// fields naming a 255-byte interned string stay within it (they took 263
/// MB and 1.26 GB).
#[test]
fn jsonl_holds_at_most_its_byte_bound() {
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero.0.bin");
    crafted_events(&zero, Vec::new(), &[], 4, 500_000);
    let text = dir.path().join("text.0.bin");
    let fields = (0..32)
        .map(|i| SchemaField {
            name: format!("s{i}"),
            ty: FieldType::Istr,
        })
        .collect();
    crafted_events(&text, fields, &[1u8; 32], 8, 5_000);
    for f in [&zero, &text] {
        let (out, kib) = peak_kib(&["jsonl", f.to_str().unwrap(), "-o", "/dev/null"]);
        assert!(out.status.code().is_some(), "{out:?}");
        let mib = kib / 1024;
        // The bound, the ordered events' own, and the process's baseline.
        assert!(mib < 100 + 60, "{}: {mib} MiB", f.display());
    }
}

/// Issue 37: the readers' memory per thread is bounded (a few hundred
/// bytes, docs/analysis.md), not 8 KB of ordering queue each: a file of
/// 600,000 threads, one wake each, and one of 600,000 threads that each
/// poll once (600,000 workers, of which a report lists the busiest
/// 10,000), are analysed within 1 GiB of address space (the first aborted
/// with "memory allocation failed").
#[test]
fn many_threads_fit() {
    for polls in [false, true] {
        many_threads(polls);
    }
}

fn many_threads(polls: bool) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("trace.0.bin");
    let mut b = runtrace_model::synth::TraceBuilder::new();
    for t in 0..600_000u64 {
        if polls {
            b.poll_start(1_000 + t, 0, 1_000 + t, t + 1, 0, 0);
        } else {
            b.wake(1_000 + t, u32::MAX, 1_000 + t, t + 1, 0);
        }
    }
    std::fs::write(&f, b.finish()).unwrap();
    for cmd in ["analyze", "summary"] {
        let out = limited(1024, &[cmd, "--json", f.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{cmd} (polls: {polls}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Issue 37 item 5: a queue name as long as the file is shared, not
/// copied per trigger, and shown shortened where a report repeats it.
/// 2,000 triggers of a 1 MB name aborted `backlog` at 4 GB, and 200 made
/// `report` write a 420 MB page.
#[test]
fn long_names_are_not_multiplied_by_triggers() {
    use runtrace_model::synth::TraceBuilder;
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new();
    b.string(1, &"q".repeat(1 << 20));
    b.string(2, "size_threshold");
    b.thread_name(1, &"consumer".repeat(100_000));
    let mut t = 1_000u64;
    for i in 0..2_000u64 {
        b.enqueue(2, t, 1, i, 10);
        b.dequeue(1, t + 10, 1, i, 9, 10);
        b.backlog_trigger(2, t + 20, 1, 10, 5, 2);
        t += 100_000;
        if i % 100 == 0 {
            b.round(t);
        }
    }
    let trace = dir.path().join("trace.0.bin");
    std::fs::write(&trace, b.finish()).unwrap();
    let input_bytes = std::fs::metadata(&trace).unwrap().len();
    let ts = trace.to_str().unwrap();

    let out = limited(1024, &["backlog", "--json", ts]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let triggers = v["triggers"].as_array().unwrap();
    assert_eq!(triggers.len(), 2_000, "every trigger judged");
    let q = triggers[0]["queue"].as_str().unwrap();
    assert!(
        q.len() <= runtrace_model::MAX_SHOWN_NAME && q.ends_with("(1048576 bytes)"),
        "shortened, saying how long: {}",
        &q[q.len().saturating_sub(40)..]
    );
    assert!(
        (stdout.len() as u64) < 4 * input_bytes + (8 << 20),
        "JSON of {} bytes from {input_bytes} bytes of trace",
        stdout.len()
    );

    let html = dir.path().join("out.html");
    let out = limited(1024, &["report", ts, "-o", html.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = std::fs::metadata(&html).unwrap().len();
    assert!(
        size < 4 * input_bytes + (8 << 20),
        "HTML of {size} bytes from {input_bytes} bytes of trace"
    );
}
