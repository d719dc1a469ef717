//! Sinks of sealed segments (docs/flight-recorder.md, "Sinks"): the
//! command hook, object stores (feature `object-store`), and sinks that
//! fail or hang, which must never hold the recording up.
//!
//! One recording runs per process at a time, so the tests take a lock.

use bytes::Bytes;
use runtrace_recorder::sink::{CommandSink, SegmentInfo, Sink};
use runtrace_recorder::{Istr, Loc, RecordError, Recorder};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-sinks-{name}-"))
        .tempdir()
        .unwrap()
}

/// `n` spawn events, paced so the writer keeps up and rotates files.
fn load(n: u64) {
    let q = Istr::new("sinks");
    let loc = Loc::caller();
    for t in 0..n {
        runtrace_recorder::task_spawn(t + 1, 0, loc, q);
        if t % 500 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A shell script that appends its last argument to `log`.
fn logging_script(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("hook.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor last; do :; done\nprintf '%s\\n' \"$last\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// File mode: the command hook runs once per sealed file, with that
/// file's path (after its extra arguments), and the files are as before.
#[test]
fn command_hook_receives_every_sealed_file() {
    let _g = serial();
    let tmp = tempdir("command");
    let log = tmp.path().join("hook.log");
    let script = logging_script(tmp.path(), &log);
    let rec = tmp.path().join("rec");
    let guard = Recorder::builder()
        .path(rec.join("trace"))
        .max_file_size(16 << 10)
        .flush_interval(Duration::from_millis(5))
        .sink(CommandSink::new(&script, ["--extra"]))
        .start()
        .unwrap();
    load(20_000);
    let stats = guard.finish().unwrap();
    assert!(stats.files >= 3, "{stats:?}");
    assert_eq!(
        (
            stats.sink_sent,
            stats.sink_failed,
            stats.sink_dropped,
            stats.sink_unsent
        ),
        (stats.files, 0, 0, 0),
        "{stats:?}"
    );
    let mut got = lines(&log);
    got.sort();
    let mut want: Vec<String> = (0..stats.files)
        .map(|i| rec.join(format!("trace.{i}.bin")).display().to_string())
        .collect();
    want.sort();
    assert_eq!(got, want);
    let files = runtrace_format::files::expand(&[rec]).unwrap();
    assert!(runtrace_format::check::check_files(&files).is_clean());
}

/// Memory mode: a snapshot's files go to the sinks once its directory is
/// complete, with their paths in it.
#[test]
fn command_hook_receives_snapshot_files() {
    let _g = serial();
    let tmp = tempdir("snapcommand");
    let log = tmp.path().join("hook.log");
    let script = logging_script(tmp.path(), &log);
    let rec = tmp.path().join("rec");
    let guard = Recorder::builder()
        .path(rec.join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .max_segment_age(Duration::from_millis(50))
        .snapshot_window(Duration::from_secs(10), Duration::from_millis(100))
        .flush_interval(Duration::from_millis(10))
        .sink(CommandSink::new(&script, Vec::<String>::new()))
        .start()
        .unwrap();
    load(2_000);
    std::thread::sleep(Duration::from_millis(200));
    guard.snapshot("shipped");
    load(2_000);
    let stats = guard.finish().unwrap();
    assert_eq!(stats.snapshots, 1, "{stats:?}");
    let dir = std::fs::read_dir(&rec)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-shipped"))
        .expect("the snapshot directory");
    let mut want: Vec<String> = runtrace_format::files::expand(std::slice::from_ref(&dir))
        .unwrap()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    want.sort();
    let mut got = lines(&log);
    got.sort();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    assert_eq!(stats.sink_sent, want.len() as u64, "{stats:?}");
}

/// A sink that always fails: every segment is tried `1 + retries` times,
/// then counted as failed (or dropped from the full queue meanwhile);
/// the recording is complete all the same.
struct Failing(Arc<Mutex<u64>>);
impl Sink for Failing {
    fn name(&self) -> String {
        "failing".into()
    }
    fn segment(&mut self, _meta: &SegmentInfo, _data: Bytes) -> Result<(), String> {
        *self.0.lock().unwrap() += 1;
        Err("the store said no".into())
    }
}

#[test]
fn failing_sink_counts_its_losses() {
    let _g = serial();
    let tmp = tempdir("failing");
    let tries = Arc::new(Mutex::new(0));
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .max_file_size(16 << 10)
        .flush_interval(Duration::from_millis(5))
        .sink(Failing(tries.clone()))
        .sink_retries(1)
        .sink_queue(2)
        .sink_finish_timeout(Duration::from_secs(5))
        .start()
        .unwrap();
    load(20_000);
    let stats = guard.finish().unwrap();
    assert_eq!(stats.events, 20_000);
    assert_eq!(stats.sink_sent, 0);
    assert!(stats.sink_failed >= 1, "{stats:?}");
    assert_eq!(
        stats.sink_failed + stats.sink_dropped + stats.sink_unsent,
        stats.files,
        "{stats:?}"
    );
    // Two tries per failed segment (one retry); an unsent one may have
    // had its first try.
    let t = *tries.lock().unwrap();
    assert!(t >= 2 * stats.sink_failed && t <= 2 * (stats.sink_failed + stats.sink_unsent));
}

/// A sink that never returns (until the test lets it): recording goes
/// on at full speed, `finish()` returns after `sink_finish_timeout`, and
/// everything the sink did not send is counted.
struct Hanging(Arc<Mutex<mpsc::Receiver<()>>>);
impl Sink for Hanging {
    fn name(&self) -> String {
        "hanging".into()
    }
    fn segment(&mut self, _meta: &SegmentInfo, _data: Bytes) -> Result<(), String> {
        let _ = self.0.lock().unwrap().recv();
        Err("released".into())
    }
}

#[test]
fn hanging_sink_never_blocks_the_recording() {
    let _g = serial();
    let tmp = tempdir("hanging");
    let (release, rx) = mpsc::channel::<()>();
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .max_file_size(16 << 10)
        .flush_interval(Duration::from_millis(5))
        .sink(Hanging(Arc::new(Mutex::new(rx))))
        .sink_retries(0)
        .sink_queue(3)
        .sink_finish_timeout(Duration::from_millis(300))
        .start()
        .unwrap();
    load(40_000);
    let t0 = Instant::now();
    let stats = guard.finish().unwrap();
    let waited = t0.elapsed();
    // The sink's thread is still inside `segment`: let it go.
    drop(release);
    assert_eq!(stats.events, 40_000);
    assert_eq!(stats.dropped, 0, "{stats:?}");
    assert!(stats.files >= 6, "{stats:?}");
    assert!(waited < Duration::from_secs(5), "finish waited {waited:?}");
    assert_eq!((stats.sink_sent, stats.sink_failed), (0, 0), "{stats:?}");
    // One taken by the sink and 3 queued are unsent; the rest dropped.
    assert_eq!(stats.sink_unsent, 4, "{stats:?}");
    assert_eq!(stats.sink_dropped, stats.files - 4, "{stats:?}");
    let files = runtrace_format::files::expand(&[tmp.path().to_path_buf()]).unwrap();
    assert!(runtrace_format::check::check_files(&files).is_clean());
}

/// Bad sink settings are refused before anything starts, naming them.
#[test]
fn sink_configuration_errors() {
    let _g = serial();
    let tmp = tempdir("config");
    let b = || Recorder::builder().path(tmp.path().join("trace"));
    let msg = |r: Result<runtrace_recorder::RecordingGuard, RecordError>| match r {
        Err(RecordError::Config(m)) => m,
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("started"),
    };
    let m = msg(b().service("../etc").start());
    assert!(m.contains("service") && m.contains("../etc"), "{m}");
    let m = msg(b().sink_queue(0).start());
    assert!(m.contains("sink_queue"), "{m}");
    let env = |var: &str, val: &str| {
        std::env::set_var(var, val);
        let r = b().start().map(|_| ());
        std::env::remove_var(var);
        match r {
            Err(RecordError::Config(m)) => m,
            other => panic!("{var}={val}: {other:?}"),
        }
    };
    let m = env("RUNTRACE_HOST", "a b");
    assert!(m.contains("RUNTRACE_HOST"), "{m}");
    let m = env("RUNTRACE_SINK_QUEUE", "lots");
    assert!(m.contains("RUNTRACE_SINK_QUEUE=\"lots\""), "{m}");
    let m = env("RUNTRACE_SINK_URL", "not a url");
    assert!(m.contains("RUNTRACE_SINK_URL"), "{m}");
    assert!(!runtrace_recorder::is_recording());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[cfg(feature = "object-store")]
mod object_store_sink {
    use super::*;
    use object_store::path::Path as Key;
    use object_store::ObjectStore;
    use runtrace_recorder::sink::ObjectStoreSink;

    /// Every object key under `prefix`, walking the partitions.
    fn keys(store: &dyn ObjectStore, prefix: Option<&Key>) -> Vec<Key> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut out = Vec::new();
        let mut todo = vec![prefix.cloned()];
        while let Some(p) = todo.pop() {
            let r = rt.block_on(store.list_with_delimiter(p.as_ref())).unwrap();
            out.extend(r.objects.into_iter().map(|o| o.location));
            todo.extend(r.common_prefixes.into_iter().map(Some));
        }
        out.sort();
        out
    }

    fn get(store: &dyn ObjectStore, key: &Key) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { store.get(key).await.unwrap().bytes().await.unwrap() })
            .to_vec()
    }

    /// Records to files with a sink; every sealed file is in the store,
    /// byte for byte, under `service=/host=/date=/trace-<ts>-<n>.bin`.
    fn ship_and_compare(store: Arc<dyn ObjectStore>, sink: ObjectStoreSink, prefix: Option<Key>) {
        let tmp = tempdir("objstore");
        let rec = tmp.path().join("rec");
        let guard = Recorder::builder()
            .path(rec.join("trace"))
            .max_file_size(16 << 10)
            .flush_interval(Duration::from_millis(5))
            .service("checkout")
            .host("web-07")
            .sink(sink)
            .start()
            .unwrap();
        load(20_000);
        let stats = guard.finish().unwrap();
        assert_eq!(stats.sink_sent, stats.files, "{stats:?}");
        let keys = keys(&*store, prefix.as_ref());
        assert_eq!(keys.len() as u64, stats.files, "{keys:?}");
        let today = runtrace_format::partition::date_of(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64,
        );
        let mut indexes = Vec::new();
        for k in &keys {
            let parsed = runtrace_format::partition::parse_segment_key(k.as_ref())
                .unwrap_or_else(|| panic!("{k}: not a segment key"));
            assert_eq!(
                (parsed.service.as_str(), parsed.host.as_str()),
                ("checkout", "web-07")
            );
            assert!(k.as_ref().contains(&format!("/date={today}/")), "{k}");
            let local = std::fs::read(rec.join(format!("trace.{}.bin", parsed.index))).unwrap();
            assert_eq!(get(&*store, k), local, "{k}");
            indexes.push(parsed.index);
        }
        indexes.sort();
        assert_eq!(indexes, (0..stats.files).collect::<Vec<_>>());
    }

    #[test]
    fn local_filesystem_store() {
        let _g = serial();
        let root = tempdir("fsstore");
        let url = format!("file://{}/bucket/traces", root.path().display());
        let sink = ObjectStoreSink::from_url(&url).unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(root.path()).unwrap());
        ship_and_compare(store, sink, Some(Key::from("bucket/traces")));
        // The files are ordinary files under the directory.
        assert!(root
            .path()
            .join("bucket/traces/service=checkout/host=web-07")
            .is_dir());
    }

    #[test]
    fn in_memory_store() {
        let _g = serial();
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let sink = ObjectStoreSink::new(store.clone(), "fleet");
        ship_and_compare(store, sink, Some(Key::from("fleet")));
    }

    /// A URL the crate cannot open is refused at start, naming it.
    #[test]
    fn bad_store_url() {
        let _g = serial();
        let e = ObjectStoreSink::from_url("relative/dir").err().unwrap();
        assert!(e.to_string().contains("\"relative/dir\": not a URL"), "{e}");
        let e = ObjectStoreSink::from_url("ftp://host/x").err().unwrap();
        assert!(e.to_string().contains("ftp://host/x"), "{e}");
    }
}
