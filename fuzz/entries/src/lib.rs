//! Entry points for fuzzing runtrace's readers and analyses: each takes
//! arbitrary bytes, runs one public entry function on them as a trace file
//! (or, for `doctor`, as a binary), and must return without panicking and
//! within bounded memory. The cargo-fuzz targets in `fuzz/fuzz_targets/`
//! call these, and so does the corpus replay test
//! (`fuzz/entries/tests/replay.rs`), which runs every file of
//! `fuzz/corpus/TARGET/` and `fuzz/regressions/TARGET/` through them on
//! stable Rust in a debug build (overflow checks on) as part of
//! `cargo test --workspace`.
//!
//! ```
//! // A damaged file is reported, never a panic.
//! runtrace_fuzz::run("check", b"RUNTRACE\x01garbage");
//! ```

use runtrace_format::reader::FileReader;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The targets, by name (the directory names under `fuzz/corpus/`).
pub const TARGETS: &[&str] = &[
    "reader_raw",
    "reader_decoded",
    "event_stream",
    "check",
    "jsonl",
    "analyze",
    "backlog",
    "doctor_elf",
];

/// Runs target `name` on `data`.
///
/// ```
/// for t in runtrace_fuzz::TARGETS {
///     runtrace_fuzz::run(t, b"");
/// }
/// ```
///
/// # Panics
/// On an unknown target name (a bug in the caller, not in the input).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "reader_raw" => reader_raw(data),
        "reader_decoded" => reader_decoded(data),
        "event_stream" => event_stream(data),
        "check" => check(data),
        "jsonl" => jsonl(data),
        "analyze" => analyze(data),
        "backlog" => backlog(data),
        "doctor_elf" => doctor_elf(data),
        other => panic!("unknown fuzz target {other:?}; known: {TARGETS:?}"),
    }
}

/// The reader's raw path (what `analyze` and `backlog` use): frames and
/// undecoded chunks, then the `END` totals check.
pub fn reader_raw(data: &[u8]) {
    let mut r = FileReader::new(Cursor::new(data), "fuzz.0.bin");
    while let Some(item) = r.next_raw() {
        if let Ok(runtrace_format::reader::RawRecord::Chunk(c)) = item {
            // Walk the chunk's records as a raw-path consumer would.
            let mut state = c.header.state;
            let _ = runtrace_format::chunk::walk(
                c.body,
                &mut state,
                |id| c.tables.schema(id).map(|s| &**s),
                |_| Ok(()),
            );
        }
    }
    let _ = r.end_mismatches();
    let _ = (r.sealed(), r.events_read(), r.dropped_read());
}

/// The reader's decoded path: every record and event materialised.
pub fn reader_decoded(data: &[u8]) {
    let mut r = FileReader::new(Cursor::new(data), "fuzz.0.bin");
    for rec in r.by_ref() {
        let _ = rec.map(|rec| format!("{rec:?}").len());
    }
    let _ = r.end_mismatches();
}

/// `merge::EventStream` over the bytes as one file.
pub fn event_stream(data: &[u8]) {
    with_file(data, "trace", |p| {
        let Ok(mut s) = runtrace_format::merge::EventStream::open(&[p]) else {
            return;
        };
        while s.next_event().is_some() {}
        let _ = (s.errors().len(), s.stats().dropped);
    });
}

/// `runtrace check` (its report and both renderings).
pub fn check(data: &[u8]) {
    with_file(data, "trace", |p| {
        let r = runtrace_format::check::check_files(&[p]);
        let _ = (r.to_string(), r.verdict());
    });
}

/// `runtrace jsonl` into a sink.
pub fn jsonl(data: &[u8]) {
    with_file(data, "trace", |p| {
        let _ = runtrace_export::jsonl::write_jsonl(&[p], std::io::sink(), |_| {});
    });
}

/// `runtrace analyze` (report, text and JSON).
pub fn analyze(data: &[u8]) {
    let r = runtrace_analyze::analyze_bytes(data, runtrace_analyze::Options::default());
    let _ = (r.to_string(), r.to_json());
}

/// `runtrace backlog` (report, text and JSON).
pub fn backlog(data: &[u8]) {
    let r = runtrace_analyze::backlog::analyze_bytes(data, &Default::default());
    let _ = (r.to_string(), r.to_json());
}

/// `runtrace doctor` on the bytes as an ELF binary.
pub fn doctor_elf(data: &[u8]) {
    if let Ok(r) = runtrace_doctor::inspect_bytes(Path::new("fuzz-input"), data) {
        let _ = format!("{r:?}");
    }
}

/// Writes `data` to a fresh `NAME.0.bin` in the temporary directory, runs
/// `f` on its path and removes it (the file-based entry points read paths).
fn with_file(data: &[u8], name: &str, f: impl FnOnce(&Path)) {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir: PathBuf =
        std::env::temp_dir().join(format!("runtrace-fuzz-{}-{n}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let p = dir.join(format!("{name}.0.bin"));
    if std::fs::write(&p, data).is_ok() {
        f(&p);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
