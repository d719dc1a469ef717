//! Golden outputs: the reading side must not change what it says about a
//! real recording by accident.
//!
//! `tests/golden/quickstart/` is a 0.5 s quickstart recording rotated into
//! two files (`RUNTRACE_MAX_FILE_SIZE=32K cargo run --example quickstart --
//! --out DIR --seconds 0.5`), `tests/golden/backlog/` a 1.5 s
//! backlog_pipeline recording (`cargo run --example backlog_pipeline --
//! --out DIR --secs 1.5`). `tests/golden/expected/` holds what `runtrace
//! check`, `jsonl`, `analyze` and `backlog` printed for them when they were
//! recorded; the JSON Lines output is large, so it is kept as its line count
//! and a CRC-32 per block of 1,000 lines.
//!
//! A change that is meant to alter an output regenerates the files with
//! `RUNTRACE_BLESS=1 cargo test -p runtrace-cli --test golden` and commits
//! them with the change that explains why.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Lines per CRC block of the JSON Lines digest.
const BLOCK: usize = 1000;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Runs `runtrace ARGS` in the golden directory (so paths in the output are
/// relative and the same on every machine); returns stdout and the exit code.
fn runtrace(args: &[&str]) -> (String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .current_dir(golden_dir())
        .output()
        .expect("run runtrace");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    (stdout, out.status.code().unwrap_or(-1))
}

fn bless() -> bool {
    std::env::var_os("RUNTRACE_BLESS").is_some_and(|v| v == "1")
}

/// Compares `actual` with `expected/NAME` (or writes it when blessing).
fn compare(name: &str, actual: &str) {
    let path = golden_dir().join("expected").join(name);
    if bless() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (RUNTRACE_BLESS=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let first = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    panic!(
        "{name}: output differs from {} at line {} \
         (expected {} lines, got {}):\n  expected: {:?}\n  actual:   {:?}\n\
         If the change is intended, regenerate with RUNTRACE_BLESS=1 and say why in the commit.",
        path.display(),
        first + 1,
        expected.lines().count(),
        actual.lines().count(),
        expected.lines().nth(first),
        actual.lines().nth(first),
    );
}

/// The line count and one CRC-32 per block of [`BLOCK`] lines.
fn jsonl_digest(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = format!("lines {}\n", lines.len());
    for (i, block) in lines.chunks(BLOCK).enumerate() {
        let mut h = crc32fast::Hasher::new();
        for l in block {
            h.update(l.as_bytes());
            h.update(b"\n");
        }
        out += &format!(
            "{}-{} {:08x}\n",
            i * BLOCK + 1,
            i * BLOCK + block.len(),
            h.finalize()
        );
    }
    out
}

fn check_recording(dir: &str) {
    for (name, args, code) in [
        ("check.txt", vec!["check", dir], 0),
        ("check.json", vec!["check", "--json", dir], 0),
        ("analyze.txt", vec!["analyze", dir], 0),
        ("analyze.json", vec!["analyze", "--json", dir], 0),
        ("backlog.txt", vec!["backlog", dir], 0),
        ("backlog.json", vec!["backlog", "--json", dir], 0),
    ] {
        let (out, got) = runtrace(&args);
        assert_eq!(got, code, "runtrace {args:?} exit code; output:\n{out}");
        compare(&format!("{dir}.{name}"), &out);
    }
    let (out, got) = runtrace(&["jsonl", dir]);
    assert_eq!(got, 0, "runtrace jsonl {dir}");
    compare(&format!("{dir}.jsonl.digest"), &jsonl_digest(&out));
}

#[test]
fn quickstart_recording_reads_as_it_did() {
    check_recording("quickstart");
}

#[test]
fn backlog_pipeline_recording_reads_as_it_did() {
    check_recording("backlog");
}

#[test]
fn the_digest_notices_a_changed_line() {
    let a = (0..2500)
        .map(|i| format!("{{\"n\":{i}}}\n"))
        .collect::<String>();
    let b = a.replacen("{\"n\":1500}", "{\"n\":1501}", 1);
    let (da, db) = (jsonl_digest(&a), jsonl_digest(&b));
    assert_ne!(da, db);
    // Only the block holding line 1501 differs.
    let diff: Vec<_> = da.lines().zip(db.lines()).filter(|(x, y)| x != y).collect();
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert!(diff[0].0.starts_with("1001-2000 "), "{diff:?}");
}
