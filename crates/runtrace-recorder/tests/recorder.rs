//! Behaviour of the recorder, checked through the files it writes.
//!
//! One recording runs per process at a time, so the tests take a lock.

use runtrace_format::merge::{sort_trace_paths, EventStream};
use runtrace_format::{FileReader, Record, Value};
use runtrace_recorder::{Istr, Loc, RecordError, Recorder};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh directory for one test, removed when dropped (even when the
/// test fails).
fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-rec-{name}-"))
        .tempdir()
        .unwrap()
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".bin"))
        .collect();
    sort_trace_paths(&mut v);
    v
}

/// Reads every file on its own (each must stand alone) and returns events
/// per thread, and the sum of DROPPED counts.
fn read_all(files: &[PathBuf]) -> (HashMap<u64, Vec<runtrace_format::Event>>, u64) {
    let mut by_tid: HashMap<u64, Vec<_>> = HashMap::new();
    let mut dropped = 0;
    for f in files {
        let mut sealed = false;
        let (mut file_events, mut file_dropped) = (0, 0);
        for r in FileReader::open(f).unwrap() {
            match r.unwrap_or_else(|e| panic!("{e}")) {
                Record::Events { tid, events, .. } => {
                    file_events += events.len() as u64;
                    by_tid.entry(tid).or_default().extend(events)
                }
                Record::Dropped { count, .. } => {
                    dropped += count;
                    file_dropped += count
                }
                Record::End { events, dropped } => {
                    // The END totals describe exactly this file.
                    assert_eq!(
                        (events, dropped),
                        (file_events, file_dropped),
                        "{}",
                        f.display()
                    );
                    sealed = true
                }
                _ => {}
            }
        }
        assert!(sealed, "{} is not sealed", f.display());
    }
    (by_tid, dropped)
}

/// Several threads hammer a small buffer with a slow writer, so events are
/// dropped; every emitted event is either in the files or counted in a
/// DROPPED frame, and each thread's surviving events keep their order.
#[test]
fn exact_accounting_under_stress() {
    let _g = serial();
    let tmp = tempdir("stress");
    let dir = tmp.path();
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(64 << 10)
        .flush_interval(Duration::from_millis(20))
        .start()
        .unwrap();
    const THREADS: u64 = 4;
    const PER: u64 = 200_000;
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..PER {
                    runtrace_recorder::task_terminate(t << 32 | i);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let st = guard.finish().unwrap();
    assert_eq!(st.events + st.dropped, THREADS * PER, "{st:?}");
    assert!(st.dropped > 0, "the test should force drops: {st:?}");
    assert!(st.events > 0);

    let (by_tid, dropped) = read_all(&trace_files(dir));
    assert_eq!(dropped, st.dropped);
    let recorded: u64 = by_tid.values().map(|v| v.len() as u64).sum();
    assert_eq!(recorded, st.events);
    assert_eq!(by_tid.len() as u64, THREADS);
    for evs in by_tid.values() {
        let ids: Vec<u64> = evs.iter().map(|e| e.u64("task_id").unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "per-thread order kept");
        assert!(
            evs.windows(2).all(|w| w[0].ticks <= w[1].ticks),
            "per-thread time order"
        );
    }
}

/// Nothing is dropped when the buffer keeps up; all three ways of reading
/// agree on every value.
#[test]
fn values_round_trip_through_the_recorder() {
    let _g = serial();
    let tmp = tempdir("values");
    let dir = tmp.path();
    let guard = Recorder::builder().path(dir.join("trace")).start().unwrap();
    let q = Istr::new("latency");
    let loc = Loc::caller();
    for t in 1..=1000u64 {
        runtrace_recorder::task_spawn(t, t - 1, loc, q);
        runtrace_recorder::task_poll_start(t, (t % 3) as u32, q, t as u32 % 50);
        runtrace_recorder::task_wake(t + 5, t, (t % 3) as u32);
        runtrace_recorder::task_poll_end(t, (t % 3) as u32, t.is_multiple_of(2));
        runtrace_recorder::task_terminate(t);
    }
    // A wake from outside any worker: worker none.
    runtrace_recorder::task_wake(7, 0, runtrace_format::NO_WORKER);
    let st = guard.finish().unwrap();
    assert_eq!((st.events, st.dropped), (5001, 0));

    let (by_tid, _) = read_all(&trace_files(dir));
    let evs = &by_tid.values().next().unwrap();
    assert_eq!(evs.len(), 5001);
    for (k, chunk) in evs[..5000].chunks(5).enumerate() {
        let t = k as u64 + 1;
        let w = Value::Worker(Some((t % 3) as u32));
        assert_eq!(chunk[0].schema.name, "task_spawn");
        assert_eq!(chunk[0].u64("task_id"), Some(t));
        assert_eq!(chunk[0].u64("parent_task_id"), Some(t - 1));
        assert_eq!(chunk[0].get("queue").unwrap().as_str(), Some("latency"));
        let l = chunk[0].get("spawn_loc").unwrap().as_str().unwrap();
        assert!(
            l.ends_with(&format!("recorder.rs:{}:{}", loc_line(), 15)),
            "{l}"
        );
        assert_eq!(chunk[1].get("worker"), Some(&w));
        assert_eq!(chunk[1].u64("local_q"), Some(t % 50));
        assert_eq!(chunk[2].u64("woken_task_id"), Some(t + 5));
        assert_eq!(chunk[2].u64("waker_task_id"), Some(t));
        assert_eq!(
            chunk[3].get("ready"),
            Some(&Value::Bool(t.is_multiple_of(2)))
        );
        assert_eq!(chunk[3].get("worker"), Some(&w));
        assert_eq!(chunk[4].u64("task_id"), Some(t));
    }
    assert_eq!(evs[5000].get("worker"), Some(&Value::Worker(None)));
    assert!(evs.windows(2).all(|w| w[0].ticks <= w[1].ticks));
}

fn loc_line() -> u32 {
    // The line of `Loc::caller()` in `values_round_trip_through_the_recorder`.
    let src = include_str!("recorder.rs");
    src.lines()
        .position(|l| l.trim() == "let loc = Loc::caller();")
        .unwrap() as u32
        + 1
}

/// Issue 17 item 8: environment values that are not UTF-8 fail `start()`;
/// out-of-range values name the variable that set them; a path naming a
/// directory is refused instead of writing a hidden `DIR/.0.bin`.
#[test]
fn environment_errors_name_the_variable() {
    use std::os::unix::ffi::OsStrExt;
    let _g = serial();
    let tmp = tempdir("cfg-env");
    let dir = tmp.path();
    let err = |b: runtrace_recorder::RecorderBuilder| b.start().unwrap_err().to_string();
    let b = || Recorder::builder().path(dir.join("trace"));
    for var in ["RUNTRACE_BUFFER_SIZE", "RUNTRACE_FLUSH_INTERVAL_MS"] {
        std::env::set_var(var, std::ffi::OsStr::from_bytes(b"64\xff"));
        let e = err(b());
        std::env::remove_var(var);
        assert!(e.contains(var) && e.contains("UTF-8"), "{e}");
    }
    std::env::set_var("RUNTRACE_BUFFER_SIZE", "1K");
    let e = err(b());
    std::env::remove_var("RUNTRACE_BUFFER_SIZE");
    assert!(
        e.contains("RUNTRACE_BUFFER_SIZE=\"1K\"") && e.contains("buffer_size"),
        "{e}"
    );
    std::env::set_var("RUNTRACE_FLUSH_INTERVAL_MS", "0");
    let e = err(b());
    std::env::remove_var("RUNTRACE_FLUSH_INTERVAL_MS");
    assert!(e.contains("RUNTRACE_FLUSH_INTERVAL_MS"), "{e}");
    // Without the environment, the builder setting is named.
    assert!(!err(b().buffer_size(100)).contains("RUNTRACE_"));

    let slash = format!("{}/", dir.display());
    std::env::set_var("RUNTRACE_PATH", &slash);
    let e = err(b());
    std::env::remove_var("RUNTRACE_PATH");
    assert!(
        e.contains("RUNTRACE_PATH") && e.contains("directory"),
        "{e}"
    );
    let e = err(Recorder::builder().path(dir));
    assert!(e.contains("directory"), "{e}");
    assert!(!dir.join(".0.bin").exists() && !dir.join(".0.bin.active").exists());
}

runtrace_recorder::user_events! {
    provider = "testapp";
    /// A request finished.
    fn request_done(status: u16, latency_us: u64, ok: bool, ratio: f64, delta: i64, route: str);
}

/// Application-defined events are recorded with their schema in the file.
#[test]
fn user_events_are_self_described() {
    let _g = serial();
    let tmp = tempdir("user");
    let dir = tmp.path();
    let guard = Recorder::builder().path(dir.join("trace")).start().unwrap();
    let long = "é".repeat(200); // 400 bytes: truncated to 254 (a char boundary)
    request_done(200, 1500, true, 0.25, -7, "/api/users");
    request_done(503, u64::MAX, false, f64::INFINITY, i64::MIN, &long);
    let st = guard.finish().unwrap();
    assert_eq!(st.events, 2);
    let (by_tid, _) = read_all(&trace_files(dir));
    let evs = by_tid.values().next().unwrap();
    assert_eq!(evs[0].schema.provider, "testapp");
    assert_eq!(evs[0].schema.name, "request_done");
    assert!(evs[0].schema.id >= 128);
    assert_eq!(evs[0].schema.display_name(), "testapp:request_done");
    assert_eq!(
        evs[0].values,
        vec![
            Value::U(200),
            Value::U(1500),
            Value::Bool(true),
            Value::F(0.25),
            Value::I(-7),
            Value::Str("/api/users".into())
        ]
    );
    assert_eq!(evs[1].u64("latency_us"), Some(u64::MAX));
    assert_eq!(evs[1].get("delta"), Some(&Value::I(i64::MIN)));
    assert_eq!(evs[1].get("route").unwrap().as_str().unwrap().len(), 254);
}

runtrace_recorder::user_events! {
    provider = "testapp";
    /// A job ran on a named queue, spawned at a location.
    fn job_done(queue: istr, at: loc, n: u32);
}

/// Application events take every field type of the catalog but the
/// built-ins' `task` and `worker` (the one field-type table): interned
/// names and locations read back as their text.
#[test]
fn user_events_take_interned_names_and_locations() {
    let _g = serial();
    let tmp = tempdir("user-istr");
    let dir = tmp.path();
    let guard = Recorder::builder().path(dir.join("trace")).start().unwrap();
    let at = Loc::caller();
    job_done(Istr::new("billing"), at, 3);
    assert_eq!(guard.finish().unwrap().events, 1);
    let (by_tid, _) = read_all(&trace_files(dir));
    let ev = &by_tid.values().next().unwrap()[0];
    assert_eq!(ev.schema.name, "job_done");
    assert_eq!(ev.get("queue").and_then(Value::as_str), Some("billing"));
    let text = ev.get("at").and_then(Value::as_str).unwrap();
    assert!(text.contains("recorder.rs"), "{text}");
    assert_eq!(ev.u64("n"), Some(3));
}

/// Small files rotate; old ones are evicted past the total budget; every
/// remaining file reads on its own (definitions repeated), and all are
/// sealed and renamed.
#[test]
fn rotation_and_eviction() {
    let _g = serial();
    let tmp = tempdir("rotate");
    let dir = tmp.path();
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .max_file_size(16 << 10)
        .max_total_size(64 << 10)
        .flush_interval(Duration::from_millis(2))
        .start()
        .unwrap();
    let q = Istr::new("rotating-queue");
    for i in 0..200_000u64 {
        runtrace_recorder::task_spawn(i, 0, Loc::caller(), q);
        if i % 2000 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    let st = guard.finish().unwrap();
    assert!(st.files >= 6, "{st:?}");
    let files = trace_files(dir);
    assert!(
        files.iter().all(|f| f.extension().unwrap() == "bin"),
        "no .active left: {files:?}"
    );
    let total: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    // The budget may be exceeded by at most the newest file.
    assert!(total <= (64 << 10) + (16 << 10) * 2, "total {total}");
    assert!((files.len() as u64) < st.files, "old files evicted");
    // Surviving files are the newest, numbered consecutively.
    let last = format!("trace.{}.bin", st.files - 1);
    assert!(files.last().unwrap().ends_with(&last), "{files:?}");
    read_all(&files); // every file sealed, END totals exact
    for f in &files {
        let mut n = 0;
        for r in FileReader::open(f).unwrap() {
            if let Record::Events { events, .. } = r.unwrap_or_else(|e| panic!("{e}")) {
                for e in events {
                    // Resolves only if the file re-emitted the definitions.
                    assert_eq!(e.get("queue").unwrap().as_str(), Some("rotating-queue"));
                    assert!(e
                        .get("spawn_loc")
                        .unwrap()
                        .as_str()
                        .unwrap()
                        .contains("recorder.rs"));
                    n += 1;
                }
            }
        }
        // The newest file may hold none: a rotation can land just before
        // `finish`, which then seals a file with only its definitions and
        // the FINISH frame.
        assert!(
            n > 0 || f == files.last().unwrap(),
            "{} has events",
            f.display()
        );
    }
}

/// A thread that exits has its events written without waiting for the
/// recording to finish.
#[test]
fn thread_exit_flushes() {
    let _g = serial();
    let tmp = tempdir("exit");
    let dir = tmp.path();
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    std::thread::Builder::new()
        .name("short-lived".into())
        .spawn(|| {
            for i in 0..100 {
                runtrace_recorder::task_terminate(i);
            }
        })
        .unwrap()
        .join()
        .unwrap();
    let active = dir.join("trace.0.bin.active");
    let mut seen = 0;
    let mut named = false;
    for _ in 0..500 {
        std::thread::sleep(Duration::from_millis(10));
        seen = 0;
        // The active file is readable up to its last complete frame.
        for r in FileReader::open(&active).unwrap().flatten() {
            match r {
                Record::Events { events, .. } => seen += events.len(),
                Record::Thread { name, .. } if name == "short-lived" => named = true,
                _ => {}
            }
        }
        if seen == 100 {
            break;
        }
    }
    assert_eq!(seen, 100, "events of the exited thread reach the file");
    assert!(named, "the thread's name is recorded");
    guard.finish().unwrap();
}

/// Successive recordings in one process each get their own files, and a
/// second concurrent start is refused.
#[test]
fn recordings_in_sequence() {
    let _g = serial();
    for round in 0..3u64 {
        let tmp = tempdir(&format!("seq{round}"));
        let dir = tmp.path();
        let guard = Recorder::builder().path(dir.join("trace")).start().unwrap();
        assert!(matches!(
            Recorder::builder().path(dir.join("other")).start(),
            Err(RecordError::AlreadyRecording)
        ));
        runtrace_recorder::task_terminate(round);
        let st = guard.finish().unwrap();
        assert_eq!(st.events, 1);
        let mut s = EventStream::open(&trace_files(dir)).unwrap();
        assert_eq!(s.next_event().unwrap().u64("task_id"), Some(round));
        assert!(s.next_event().is_none());
    }
    // With no recording, events go nowhere (and cost a load and a branch).
    assert!(!runtrace_recorder::is_recording());
    runtrace_recorder::task_terminate(99);
}

/// Bad settings and bad environment variables are clear errors.
#[test]
fn configuration_errors() {
    let _g = serial();
    let tmp = tempdir("cfg");
    let dir = tmp.path();
    let err = |b: runtrace_recorder::RecorderBuilder| b.start().unwrap_err().to_string();
    let b = || Recorder::builder().path(dir.join("trace"));
    assert!(err(b().buffer_size(100)).contains("buffer_size"));
    assert!(err(b().max_file_size(10)).contains("max_file_size"));
    assert!(err(b().max_total_size(1 << 20).max_file_size(2 << 20)).contains("max_total_size"));
    assert!(err(b().flush_interval(Duration::ZERO)).contains("flush_interval"));
    let blocker = dir.join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let e = err(Recorder::builder().path(blocker.join("sub/trace")));
    assert!(e.contains("sub"), "{e}");

    // Environment variables override the program's settings.
    std::env::set_var("RUNTRACE_MAX_FILE_SIZE", "lots");
    let e = err(b());
    assert!(
        e.contains("RUNTRACE_MAX_FILE_SIZE") && e.contains("lots"),
        "{e}"
    );
    std::env::remove_var("RUNTRACE_MAX_FILE_SIZE");
    assert!(
        Recorder::start_from_env().unwrap().is_none(),
        "off without RUNTRACE_PATH"
    );
    std::env::set_var("RUNTRACE_PATH", dir.join("env/trace"));
    std::env::set_var("RUNTRACE_BUFFER_SIZE", "64K");
    let g = Recorder::start_from_env()
        .unwrap()
        .expect("RUNTRACE_PATH starts a recording");
    runtrace_recorder::task_terminate(1);
    g.finish().unwrap();
    std::env::remove_var("RUNTRACE_PATH");
    std::env::remove_var("RUNTRACE_BUFFER_SIZE");
    assert!(dir.join("env/trace.0.bin").exists());
}

runtrace_recorder::user_events! {
    provider = "testapp";
    fn wide(a: str, b: str, c: str, d: str, e: str, f: str, g: str, h: str, i: str);
}

/// The largest events fit in the smallest buffer's slots: recorded, never
/// a panic (found by review: 2 KiB slots once overflowed here).
#[test]
fn largest_events_fit_the_smallest_buffer() {
    let _g = serial();
    let tmp = tempdir("wide");
    let dir = tmp.path();
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(64 << 10)
        .start()
        .unwrap();
    let s = "x".repeat(300);
    for _ in 0..50 {
        wide(&s, &s, &s, &s, &s, &s, &s, &s, &s);
    }
    let st = guard.finish().unwrap();
    assert_eq!(st.events + st.dropped, 50);
    assert!(st.events > 0);
    let (by_tid, _) = read_all(&trace_files(dir));
    let e = &by_tid.values().next().unwrap()[0];
    assert_eq!(e.get("i").unwrap().as_str().unwrap().len(), 255);
}

/// A thread's current slot waits for the next round with its seal asked
/// for (the writer takes sealed slots whole instead of decoding partial
/// ones), and the ROUND watermarks still hold (format section 8): an event
/// written after a ROUND frame is not older than the watermark before it,
/// so the merged stream is in time order; a slow thread's events still
/// come out within two rounds; nothing is lost.
#[test]
fn current_slots_are_sealed_on_request_and_rounds_stay_ordered() {
    let _g = serial();
    let tmp = tempdir("defer");
    let dir = tmp.path();
    let guard = Recorder::builder().path(dir.join("trace")).start().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..2u64)
        .map(|k| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // ~6 MB/s: a dozen 16 KiB slots per 50 ms round, without
                // filling the 1 MiB buffer.
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for _ in 0..1000 {
                        n += 1;
                        runtrace_recorder::task_poll_start(k << 40 | n, 1, Istr::EMPTY, 3);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                (runtrace_core::clock::gettid(), n)
            })
        })
        .collect();
    let slow = std::thread::spawn(|| {
        for i in 0..40 {
            runtrace_recorder::task_terminate(i);
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    slow.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let busy: Vec<(u64, u64)> = busy.into_iter().map(|h| h.join().unwrap()).collect();
    let st = guard.finish().unwrap();
    assert_eq!(st.dropped, 0, "the busy threads were meant to fit");
    assert_eq!(st.events, busy.iter().map(|b| b.1).sum::<u64>() + 40);

    let files = trace_files(dir);
    let mut rounds = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let mut r = FileReader::new(&bytes[..], f.clone());
        // The watermark of the previous ROUND and of the one before.
        let (mut last, mut before) = (0u64, 0u64);
        while let Some(item) = r.next_raw() {
            match item.unwrap() {
                runtrace_format::reader::RawRecord::Chunk(c) => {
                    let mut st = c.header.state;
                    runtrace_format::chunk::walk(
                        c.body,
                        &mut st,
                        |id| c.tables.schema(id).map(|s| &**s),
                        |ev| {
                            assert!(
                                ev.ticks >= before,
                                "an event of tick {} after the ROUND of watermark {before}",
                                ev.ticks
                            );
                            Ok(())
                        },
                    )
                    .unwrap();
                }
                runtrace_format::reader::RawRecord::Record(Record::Round { watermark_ticks }) => {
                    assert!(watermark_ticks >= last, "watermarks never go back");
                    before = last;
                    last = watermark_ticks;
                    rounds += 1;
                }
                runtrace_format::reader::RawRecord::Record(_) => {}
            }
        }
    }
    // ~8 rounds, three threads recording: without the seal requests the
    // writer decoded a chunk of each at every round (27 in 9 rounds); with
    // them, only a thread that recorded nothing for a whole round after
    // the request (a starved one) and the last round leave one.
    eprintln!("{rounds} rounds, {} decoded chunks", st.decoded_chunks);
    assert!(rounds >= 5, "{rounds} rounds");
    assert!(
        st.decoded_chunks <= 3 + rounds / 3,
        "{} decoded chunks in {rounds} rounds",
        st.decoded_chunks
    );
    // And the merged stream is in time order with every event.
    let mut s = EventStream::open(&files).unwrap();
    let (mut n, mut prev) = (0u64, 0u64);
    while let Some(e) = s.next_event() {
        assert!(e.ticks >= prev, "merged stream out of order");
        prev = e.ticks;
        n += 1;
    }
    assert_eq!(n, st.events);
}
