//! `check::check_files` and `files` (docs/format.md sections 2 and 11):
//! statuses, the END-totals check through `FileReader::end_mismatches`, and
//! a recording's directory standing for its `PATH.N.bin` files.

mod common;

use common::*;
use runtrace_format::check::{check_files, FileStatus};
use runtrace_format::files::{expand, expand_lenient, sort_trace_paths};
use runtrace_format::frame::{self, FrameType};

/// The sample file with its END frame replaced by one claiming `events`
/// and `dropped`.
fn with_end(events: u64, dropped: u64) -> Vec<u8> {
    let s = sample_file();
    let mut b = FileBuilder::new();
    let last = s.file.frames.len() - 1;
    for f in &s.file.frames[..last] {
        b.raw(f.ty, &s.file.bytes[f.offset as usize + 9..f.end() as usize]);
    }
    b.frame(FrameType::End, &frame::end(events, dropped));
    b.bytes
}

#[test]
fn s2_sealed_file_is_clean() {
    let dir = TempDir::new();
    let s = sample_file();
    let p = dir.write("t.0.bin", &s.file.bytes);
    let r = check_files(&[&p]);
    // Intact, but its recording lost 17 events: INCOMPLETE, saying so
    // (format.md section 11), with no error.
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.verdict(), "INCOMPLETE");
    assert!(
        r.incomplete[0].contains("17 events dropped"),
        "{:?}",
        r.incomplete
    );
    assert_eq!(r.files[0].status, FileStatus::Sealed);
    let total: u64 = s.chunks.iter().map(Chunk::event_count).sum();
    assert_eq!((r.events, r.dropped_events), (total, 17));
    assert_eq!(r.bytes, s.file.bytes.len() as u64);
}

/// Drops the writer thread reports are the profiler's lost samples, told
/// apart from full thread buffers: raising the buffers would not help them.
#[test]
fn s11_profiler_losses_are_told_apart_from_full_buffers() {
    let s = sample_file();
    let total: u64 = s.chunks.iter().map(Chunk::event_count).sum();
    let mut b = FileBuilder::new();
    let last = s.file.frames.len() - 1;
    for f in &s.file.frames[..last] {
        b.raw(f.ty, &s.file.bytes[f.offset as usize + 9..f.end() as usize]);
    }
    b.frame(FrameType::Thread, &frame::thread(99, frame::WRITER_THREAD));
    b.frame(FrameType::Dropped, &frame::dropped(99, 5, 2_020, 2_030));
    b.frame(FrameType::End, &frame::end(total, 22));
    let dir = TempDir::new();
    let r = check_files(&[dir.write("t.0.bin", &b.bytes)]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.dropped_events, 22);
    let line = &r.incomplete[0];
    assert!(line.contains("22 events dropped"), "{line}");
    assert!(line.contains("17 to full thread buffers"), "{line}");
    assert!(line.contains("5 profiler samples"), "{line}");
    assert!(!line.contains("failed writes"), "{line}");

    // Only the writer's: no advice to raise the buffers.
    let mut b = FileBuilder::new();
    for f in s.file.frames[..last]
        .iter()
        .filter(|f| f.ty != FrameType::Dropped as u8)
    {
        b.raw(f.ty, &s.file.bytes[f.offset as usize + 9..f.end() as usize]);
    }
    b.frame(FrameType::Thread, &frame::thread(99, frame::WRITER_THREAD));
    b.frame(FrameType::Dropped, &frame::dropped(99, 1, 2_020, 2_030));
    b.frame(FrameType::End, &frame::end(total, 1));
    let r = check_files(&[dir.write("t.1.bin", &b.bytes)]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let line = &r.incomplete[0];
    assert!(line.contains("1 events dropped"), "{line}");
    assert!(line.contains("1 profiler samples"), "{line}");
    assert!(!line.contains("buffer"), "{line}");
}

#[test]
fn s2_end_totals_mismatch_is_damage() {
    let dir = TempDir::new();
    let s = sample_file();
    let total: u64 = s.chunks.iter().map(Chunk::event_count).sum();
    let p = dir.write("t.0.bin", &with_end(total + 2, 17));
    let r = check_files(&[&p]);
    assert_eq!(r.files[0].status, FileStatus::Damaged);
    assert!(!r.is_clean());
    assert_eq!(
        r.errors,
        [format!(
            "{}: corrupt END frame: it says the file holds {} events, but its chunks hold {total}",
            p.display(),
            total + 2
        )]
    );
    let p = dir.write("t.1.bin", &with_end(total, 3));
    let r = check_files(&[&p]);
    assert_eq!(
        r.errors,
        [format!(
            "{}: corrupt END frame: it says 3 events were dropped, but the DROPPED frames report 17",
            p.display()
        )]
    );
}

#[test]
fn s2_cut_file_is_truncated_and_unreadable_paths_are_errors() {
    let dir = TempDir::new();
    let s = sample_file();
    let cut = dir.write("t.0.bin", &s.file.bytes[..s.file.bytes.len() - 2]);
    let missing = dir.0.join("t.1.bin");
    let r = check_files(&[&missing, &cut, &dir.0]);
    let statuses: Vec<FileStatus> = r.files.iter().map(|f| f.status).collect();
    // Sorted by N; the directory (no N) sorts by name.
    assert_eq!(r.files[0].path, dir.0);
    assert_eq!(
        statuses,
        [
            FileStatus::Unreadable,
            FileStatus::Truncated,
            FileStatus::Unreadable
        ]
    );
    assert!(r.truncated());
    assert!(r
        .errors
        .iter()
        .any(|e| e
            .ends_with("is a directory without trace files (trace.N.bin or trace.N.bin.active)")));
    assert!(r
        .errors
        .iter()
        .any(|e| e.contains("t.1.bin: cannot open: ")));
    // The damage is explained once: no END-totals error on top.
    assert!(!r.errors.iter().any(|e| e.contains("corrupt END frame")));
}

#[test]
fn s11_directory_expansion() {
    let dir = TempDir::new();
    let s = sample_file();
    for n in [
        "trace.10.bin",
        "trace.2.bin",
        "trace.3.bin.active",
        "notes.txt",
    ] {
        dir.write(n, &s.file.bytes);
    }
    let mut got = expand(std::slice::from_ref(&dir.0)).unwrap();
    sort_trace_paths(&mut got);
    // A recording's directory means all its files: the `.active` one
    // (live, or left by a crash) too, in its place (issue 17 item 1).
    assert_eq!(
        got,
        [
            dir.0.join("trace.2.bin"),
            dir.0.join("trace.3.bin.active"),
            dir.0.join("trace.10.bin")
        ]
    );

    let empty = TempDir::new();
    let e = expand(std::slice::from_ref(&empty.0)).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{}: is a directory without trace files (trace.N.bin or trace.N.bin.active)",
            empty.0.display()
        )
    );
    let lenient = expand_lenient(vec![empty.0.clone(), dir.0.clone()]);
    assert_eq!(lenient.len(), 4);
    assert_eq!(lenient[0], empty.0);
    assert!(lenient[1..]
        .iter()
        .all(|p| p.parent() == Some(dir.0.as_path())));
}

#[test]
fn event_counts_by_display_name() {
    let dir = TempDir::new();
    let s = sample_file();
    let a = dir.write("t.0.bin", &s.file.bytes);
    let b = dir.write("t.1.bin", &s.file.bytes);
    let one = check_files(&[&a]);
    let two = check_files(&[&b, &a]);
    // Two files with their own schema copies: counts merge by name.
    assert!(!one.event_counts.is_empty());
    for (name, n) in &one.event_counts {
        assert_eq!(two.event_counts[name], 2 * n, "{name}");
    }
}

/// Issue 17 item 8: a FIFO is refused up front, never opened (opening it
/// would block until a writer came).
#[test]
fn a_fifo_is_refused_not_read() {
    let dir = TempDir::new();
    let fifo = dir.0.join("trace.0.bin");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    let r = check_files(&[&fifo]);
    assert!(!r.is_clean());
    assert!(
        r.errors.iter().any(|e| e.contains("not a regular file")),
        "{:?}",
        r.errors
    );
    let e = runtrace_format::FileReader::open(&fifo).err().unwrap();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    // A directory holding only a FIFO named like a trace holds no trace.
    assert!(expand(std::slice::from_ref(&dir.0)).is_err());
}
