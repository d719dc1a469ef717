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
