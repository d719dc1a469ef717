//! The flight recorder (`in_memory`): segments kept in memory within a
//! budget, and snapshots of them (docs/flight-recorder.md).
//!
//! One recording runs per process at a time, so the tests take a lock.

use runtrace_recorder::{Istr, Loc, RecordError, Recorder};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-flight-{name}-"))
        .tempdir()
        .unwrap()
}

/// Every path under `dir`, recursively.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(all_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A steady load of poll events from one thread, `n` of them, paced so
/// the writer keeps up.
fn steady_load(n: u64) {
    let q = Istr::new("steady");
    let loc = Loc::caller();
    runtrace_recorder::task_spawn(1, 0, loc, q);
    for i in 0..n {
        runtrace_recorder::task_poll_start(1, 0, q, i as u32);
        runtrace_recorder::task_poll_end(1, 0, false);
        if i % 2_000 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Under a load that makes several times the budget of segments, the
/// bytes held stay within the budget (plus the one round a segment can
/// pass its size by), the oldest segments are dropped and counted, and
/// nothing is written to disk.
#[test]
fn memory_mode_keeps_within_its_budget() {
    let _g = serial();
    let tmp = tempdir("budget");
    let budget = 256 << 10;
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(budget)
        .max_file_size(32 << 10)
        .buffer_size(64 << 10)
        .flush_interval(Duration::from_millis(5))
        .start()
        .unwrap();
    steady_load(400_000);
    let stats = guard.finish().unwrap();
    eprintln!("{stats:?}");
    assert!(
        stats.bytes > 4 * budget,
        "the load made {} bytes, not several budgets' worth",
        stats.bytes
    );
    assert!(stats.segments_dropped > 0, "{stats:?}");
    // Dropped segments plus those the ring can hold account for them all.
    assert!(
        stats.files - stats.segments_dropped <= budget / (32 << 10),
        "{stats:?}"
    );
    // One round's output is at most a thread's buffer plus its framing.
    let slack = (64 << 10) + (16 << 10);
    assert!(
        stats.memory_peak <= budget + slack,
        "held {} bytes at most, budget {budget}",
        stats.memory_peak
    );
    assert!(stats.memory_peak > budget / 2, "{stats:?}");
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}

/// Set in the child process of [`memory_mode_resident_memory_stays_within_its_budget`].
const RSS_CHILD: &str = "RUNTRACE_FLIGHT_RSS_CHILD";
/// That test's budget and segment size.
const RSS_BUDGET: u64 = 6 << 20;
const RSS_SEGMENT: u64 = 1 << 20;

/// A `kB` line of /proc/self/status, in bytes.
fn status_bytes(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let v = s
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {key} in /proc/self/status"));
    v.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        << 10
}

/// Issue 41 item 7: the budget holds in resident memory (what the kernel
/// charges the process), not only in the recorder's own count. The load
/// runs in a child process of its own (this test re-run alone), so the
/// peak RSS (`VmHWM`) is the recording's and not other tests': one thread
/// records at least 1M events/s for 8 s into a 6 MiB budget of 1 MiB
/// segments (some 32-36 MB made, over four budgets' worth: the bytes per
/// event depend on the host's speed, through the time deltas' varints;
/// 6 s made 24 MB in one CI run, 3.34 bytes an event, and 27 MB in
/// others). The peak RSS may
/// exceed the RSS before recording by at most the budget plus a stated
/// bound, 10 MiB here: the producer's buffer (`buffer_size`, 1 MiB), the
/// writer's two drain buffers (1 MiB each), the copy made when a
/// segment's last round grows it past its size (up to a segment, 1 MiB,
/// for a moment), and the allocator's own slack (glibc keeps freed
/// segments in its heap for reuse). Measured: 3.2 to 5.2 MiB over the
/// budget in a default-features build, 7.3 MiB in CI's all-features
/// build (docs/flight-recorder.md, "Measured"); a budget not enforced
/// would hold all of it.
#[test]
fn memory_mode_resident_memory_stays_within_its_budget() {
    if let Some(dir) = std::env::var_os(RSS_CHILD) {
        return rss_child(Path::new(&dir));
    }
    let _g = serial();
    let tmp = tempdir("rss");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "memory_mode_resident_memory_stays_within_its_budget",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(RSS_CHILD, tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    // The harness prints `test NAME ... ` before the child's own line.
    let line = stdout
        .split_once("rss ")
        .and_then(|(_, rest)| rest.lines().next())
        .unwrap_or_else(|| panic!("no rss line from the child:\n{stdout}\n{stderr}"));
    let f: Vec<u64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
    let [before, peak, memory_peak, events, micros, dropped, made] = f[..] else {
        panic!("bad rss line {line:?}");
    };
    eprintln!(
        "RSS before {before} B, peak {peak} B (+{} B; budget {RSS_BUDGET}); \
         memory_peak {memory_peak}; {events} events in {micros} us; {made} bytes made; {dropped} segments dropped",
        peak - before
    );
    let rate = events * 1_000_000 / micros.max(1);
    assert!(rate >= 1_000_000, "only {rate} events/s");
    assert!(
        made > 4 * RSS_BUDGET,
        "made {made} bytes, not several budgets"
    );
    assert!(dropped > 0, "no segment dropped");
    let bound = 10 << 20;
    assert!(
        peak <= before + RSS_BUDGET + bound,
        "peak RSS {peak} B: {} B over the RSS before recording, more than the budget {RSS_BUDGET} + {bound}",
        peak - before
    );
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}

/// The child of the test above: records, then prints `rss BEFORE PEAK
/// MEMORY_PEAK EVENTS MICROS SEGMENTS_DROPPED BYTES`.
fn rss_child(dir: &Path) {
    let before = status_bytes("VmRSS");
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .in_memory(RSS_BUDGET)
        .max_file_size(RSS_SEGMENT)
        .start()
        .unwrap();
    let q = Istr::new("rss");
    let loc = Loc::caller();
    let start = std::time::Instant::now();
    // 1.2M events/s, paced per millisecond: 300 tasks of 4 events each
    // a millisecond, sleeping when ahead.
    let mut t = 0u64;
    while start.elapsed() < Duration::from_secs(8) {
        for _ in 0..300 {
            t += 1;
            runtrace_recorder::task_spawn(t, 0, loc, q);
            runtrace_recorder::task_poll_start(t, 0, q, 0);
            runtrace_recorder::task_poll_end(t, 0, true);
            runtrace_recorder::task_terminate(t);
        }
        let due = Duration::from_micros(t / 300 * 1000);
        if let Some(ahead) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
    let micros = start.elapsed().as_micros() as u64;
    let st = guard.finish().unwrap();
    assert_eq!(st.dropped, 0, "{st:?}");
    println!(
        "rss {before} {} {} {} {micros} {} {}",
        status_bytes("VmHWM"),
        st.memory_peak,
        st.events,
        st.segments_dropped,
        st.bytes
    );
}

/// Bad settings of the flight recorder are refused before anything
/// starts, naming the setting.
#[test]
fn flight_configuration_errors() {
    let _g = serial();
    let tmp = tempdir("config");
    let path = tmp.path().join("trace");
    let config_err = |r: Result<runtrace_recorder::RecordingGuard, RecordError>| match r {
        Err(RecordError::Config(m)) => m,
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("started"),
    };
    let m = config_err(
        Recorder::builder()
            .path(&path)
            .in_memory(100 << 10)
            .max_file_size(64 << 10)
            .start(),
    );
    assert!(m.contains("in_memory") && m.contains("two segments"), "{m}");
    let m = config_err(
        Recorder::builder()
            .path(&path)
            .in_memory(1 << 20)
            .snapshot_signal("USR3")
            .start(),
    );
    assert!(m.contains("snapshot_signal") && m.contains("USR3"), "{m}");
    assert!(!runtrace_recorder::is_recording());
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}

/// The `snapshot-*` directories under `dir`.
fn snapshot_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("snapshot-")
        })
        .collect();
    v.sort();
    v
}

/// Waits (at most 20 s) until `dir` has `n` snapshot directories.
fn wait_for_snapshots(dir: &Path, n: usize) -> Vec<PathBuf> {
    wait_for_snapshots_within(dir, n, Duration::from_secs(20))
}

/// Waits (at most `limit`) until `dir` has `n` snapshot directories.
fn wait_for_snapshots_within(dir: &Path, n: usize, limit: Duration) -> Vec<PathBuf> {
    let t0 = std::time::Instant::now();
    loop {
        let v = snapshot_dirs(dir);
        if v.len() >= n || t0.elapsed() > limit {
            return v;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What a snapshot holds: its `task_spawn` events (ticks, task id) and its
/// `snapshot_trigger` events (ticks, reason).
type Snapshot = (Vec<(u64, u64)>, Vec<(u64, String)>);

/// Reads a snapshot directory, checking that it reads as a complete
/// recording.
fn read_snapshot(dir: &Path) -> Snapshot {
    // The files `runtrace check DIR` reads.
    let files = runtrace_format::files::expand(&[dir.to_path_buf()]).unwrap();
    assert!(
        files.iter().all(|f| f.to_string_lossy().ends_with(".bin")),
        "{files:?}"
    );
    let report = runtrace_format::check::check_files(&files);
    assert!(
        report.is_clean(),
        "{}: {} {:?} {:?}",
        dir.display(),
        report.verdict(),
        report.errors,
        report.incomplete
    );
    let (mut spawns, mut triggers) = (Vec::new(), Vec::new());
    for f in &files {
        for r in runtrace_format::FileReader::open(f).unwrap() {
            if let runtrace_format::Record::Events { events, .. } = r.unwrap() {
                for e in events {
                    match e.schema.name.as_str() {
                        "task_spawn" => spawns.push((e.ticks, e.u64("task_id").unwrap())),
                        "snapshot_trigger" => triggers.push((
                            e.ticks,
                            e.get("reason").unwrap().as_str().unwrap().to_string(),
                        )),
                        _ => {}
                    }
                }
            }
        }
    }
    (spawns, triggers)
}

fn spawn_range(ids: std::ops::Range<u64>) {
    let q = Istr::new("phase");
    let loc = Loc::caller();
    for t in ids {
        runtrace_recorder::task_spawn(t, 0, loc, q);
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// `guard.snapshot(reason)`: a directory named after the reason that
/// `check` reads as a complete recording, holding the trigger and the
/// events around it (before and after), and not those well before the
/// window or after the snapshot was written.
#[test]
fn api_snapshot_keeps_the_window_around_the_trigger() {
    let _g = serial();
    let tmp = tempdir("api");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .max_segment_age(Duration::from_millis(50))
        .snapshot_window(Duration::from_millis(300), Duration::from_millis(200))
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    spawn_range(1000..1100); // old: ~1.5 s before the trigger
    std::thread::sleep(Duration::from_millis(1500));
    spawn_range(2000..2100); // just before
    guard.snapshot("api test");
    // Returns at once: nothing is written before the period is over.
    assert!(snapshot_dirs(tmp.path()).is_empty());
    spawn_range(3000..3100); // just after
    let dirs = wait_for_snapshots(tmp.path(), 1);
    spawn_range(4000..4100); // after the snapshot was written
    let stats = guard.finish().unwrap();
    eprintln!("{stats:?}");
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let name = dirs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("-api-test"), "{name}");
    assert_eq!(stats.snapshots, 1);
    // Only the snapshot is on disk: no segment file, no temporary directory.
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, std::slice::from_ref(&name));

    let (spawns, triggers) = read_snapshot(&dirs[0]);
    assert_eq!(triggers.len(), 1, "{triggers:?}");
    assert_eq!(triggers[0].1, "api test");
    let ids: Vec<u64> = spawns.iter().map(|s| s.1).collect();
    for t in (2000..2100).chain(3000..3100) {
        assert!(ids.contains(&t), "task {t} missing from the snapshot");
    }
    assert!(!ids.iter().any(|t| (1000..1100).contains(t)), "{ids:?}");
    assert!(!ids.iter().any(|t| (4000..4100).contains(t)), "{ids:?}");
    // The trigger's time lies between the last event before it and the
    // first after it.
    let last_before = spawns.iter().filter(|s| s.1 == 2099).map(|s| s.0).max();
    let first_after = spawns.iter().filter(|s| s.1 == 3000).map(|s| s.0).min();
    assert!(last_before.unwrap() <= triggers[0].0);
    assert!(triggers[0].0 <= first_after.unwrap());
}

/// A second trigger within the cooldown writes no second snapshot (it is
/// counted); `finish()` writes a pending snapshot without waiting out its
/// period.
#[test]
fn cooldown_and_finish_with_a_pending_snapshot() {
    let _g = serial();
    let tmp = tempdir("cooldown");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .snapshot_window(Duration::from_secs(10), Duration::from_secs(60))
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    spawn_range(1..50);
    guard.snapshot("first");
    std::thread::sleep(Duration::from_millis(50));
    guard.snapshot("second");
    spawn_range(50..100);
    let t0 = std::time::Instant::now();
    let stats = guard.finish().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "finish waited out the period"
    );
    assert_eq!(
        (stats.snapshots, stats.snapshots_skipped),
        (1, 1),
        "{stats:?}"
    );
    let dirs = snapshot_dirs(tmp.path());
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let (spawns, triggers) = read_snapshot(&dirs[0]);
    // Both triggers are recorded; the snapshot holds all 99 spawns.
    let reasons: Vec<&str> = triggers.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(reasons, ["first", "second"]);
    assert_eq!(spawns.len(), 99);
}

/// The snapshot signal: SIGUSR2 sent to this process triggers a snapshot
/// (reason `signal`); the previous disposition is back afterwards.
#[test]
fn signal_snapshot() {
    let _g = serial();
    let tmp = tempdir("signal");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .snapshot_window(Duration::from_secs(10), Duration::from_millis(100))
        .snapshot_signal("SIGUSR2")
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    spawn_range(1..50);
    // SAFETY: sends a signal to this process, whose handler is installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) }, 0);
    spawn_range(50..100);
    let dirs = wait_for_snapshots(tmp.path(), 1);
    let stats = guard.finish().unwrap();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(dirs[0].to_string_lossy().ends_with("-signal"), "{dirs:?}");
    assert_eq!(stats.snapshots, 1);
    let (spawns, triggers) = read_snapshot(&dirs[0]);
    assert_eq!(triggers.len(), 1);
    assert_eq!(triggers[0].1, "signal");
    assert!(spawns.len() >= 49, "{}", spawns.len());
    // The handler is gone: the disposition is the default again.
    // SAFETY: reads the current disposition into a zeroed struct.
    let old = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGUSR2, std::ptr::null(), &mut old);
        old
    };
    assert_eq!(old.sa_sigaction, libc::SIG_DFL);
}

/// The slow-poll rule: short polls trigger nothing; one poll past the
/// limit triggers exactly one snapshot (reason `slow-poll`) holding it.
#[test]
fn slow_poll_rule_snapshots_the_slow_poll() {
    let _g = serial();
    let tmp = tempdir("slowpoll");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .snapshot_window(Duration::from_secs(10), Duration::from_millis(100))
        .snapshot_on_slow_poll(Duration::from_millis(150))
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    let q = Istr::new("rule");
    let poll = |task: u64, d: Duration| {
        runtrace_recorder::task_poll_start(task, 0, q, 0);
        std::thread::sleep(d);
        runtrace_recorder::task_poll_end(task, 0, true);
    };
    for t in 1..200 {
        poll(t, Duration::from_millis(1));
    }
    assert!(snapshot_dirs(tmp.path()).is_empty());
    runtrace_recorder::task_spawn(777, 0, Loc::caller(), q);
    poll(777, Duration::from_millis(500));
    for t in 1000..1100 {
        poll(t, Duration::from_millis(1));
    }
    let dirs = wait_for_snapshots(tmp.path(), 1);
    let stats = guard.finish().unwrap();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(
        dirs[0].to_string_lossy().ends_with("-slow-poll"),
        "{dirs:?}"
    );
    assert_eq!(
        (stats.snapshots, stats.snapshots_skipped),
        (1, 0),
        "{stats:?}"
    );
    let (spawns, triggers) = read_snapshot(&dirs[0]);
    let reasons: Vec<&str> = triggers.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(reasons, ["slow-poll"]);
    let spawned = spawns.iter().find(|s| s.1 == 777).expect("the slow task");
    assert!(triggers[0].0 > spawned.0);
}

/// The flight recorder's environment variables: a bad value is refused
/// before anything starts, naming the variable and its value; good ones
/// start a memory-mode recording that writes no file.
#[test]
fn flight_environment() {
    let _g = serial();
    let tmp = tempdir("env");
    let b = || Recorder::builder().path(tmp.path().join("trace"));
    let err = |var: &str, val: &str| {
        std::env::set_var(var, val);
        let r = b().start().map(|_| ());
        std::env::remove_var(var);
        let e = r.unwrap_err();
        assert!(matches!(e, RecordError::Config(_)), "{e}");
        e.to_string()
    };
    let e = err("RUNTRACE_MEMORY", "256MB");
    assert!(e.contains("RUNTRACE_MEMORY=\"256MB\""), "{e}");
    // 4 KiB segments at the least: two do not fit.
    let e = err("RUNTRACE_MEMORY", "4K");
    assert!(
        e.contains("RUNTRACE_MEMORY") && e.contains("two segments"),
        "{e}"
    );
    let e = err("RUNTRACE_SNAPSHOT_SIGNAL", "USR9");
    assert!(
        e.contains("RUNTRACE_SNAPSHOT_SIGNAL") && e.contains("USR9"),
        "{e}"
    );
    let e = err("RUNTRACE_SNAPSHOT_POLL_MS", "soon");
    assert!(e.contains("RUNTRACE_SNAPSHOT_POLL_MS"), "{e}");
    let e = err("RUNTRACE_SEGMENT_AGE_MS", "1.5");
    assert!(e.contains("RUNTRACE_SEGMENT_AGE_MS"), "{e}");
    assert!(!runtrace_recorder::is_recording());
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());

    std::env::set_var("RUNTRACE_MEMORY", "1M");
    std::env::set_var("RUNTRACE_SNAPSHOT_SIGNAL", "usr1");
    let started = b().start();
    std::env::remove_var("RUNTRACE_MEMORY");
    std::env::remove_var("RUNTRACE_SNAPSHOT_SIGNAL");
    spawn_range(1..20);
    let stats = started.unwrap().finish().unwrap();
    assert_eq!(stats.events, 19);
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}

/// In file mode a snapshot request only records its trigger event (the
/// files are the recording), and is counted as skipped.
#[test]
fn snapshot_in_file_mode_records_the_trigger() {
    let _g = serial();
    let tmp = tempdir("filemode");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .start()
        .unwrap();
    spawn_range(1..10);
    guard.snapshot("marked");
    let stats = guard.finish().unwrap();
    assert_eq!((stats.snapshots, stats.snapshots_skipped), (0, 1));
    assert!(snapshot_dirs(tmp.path()).is_empty());
    let (spawns, triggers) = read_snapshot(tmp.path());
    assert_eq!(spawns.len(), 9);
    assert_eq!(triggers.len(), 1);
    assert_eq!(triggers[0].1, "marked");
}

/// The reasons of a snapshot's `snapshot_trigger` events.
fn trigger_reasons(dir: &Path) -> Vec<String> {
    read_snapshot(dir).1.into_iter().map(|t| t.1).collect()
}

/// `n` tasks (ids from `first`) woken, then, `delay` later, polled; with
/// `late` of them polled a further 40 ms later.
fn wake_then_poll(first: u64, n: u64, delay: Duration, late: u64) {
    let q = Istr::new("wake");
    for t in first..first + n {
        runtrace_recorder::task_wake(t, 0, runtrace_format::NO_WORKER);
    }
    std::thread::sleep(delay);
    for t in first..first + n - late {
        runtrace_recorder::task_poll_start(t, 0, q, 0);
        runtrace_recorder::task_poll_end(t, 0, false);
    }
    std::thread::sleep(Duration::from_millis(40));
    for t in first + n - late..first + n {
        runtrace_recorder::task_poll_start(t, 0, q, 0);
        runtrace_recorder::task_poll_end(t, 0, false);
    }
}

/// The wake-to-poll p99 rule: windows whose p99 is below the limit (one
/// late poll in 150 is not a p99) fire nothing; a window where every
/// task waited past the limit fires once, reason `wake-p99`, at the
/// window's end (after the late polls).
#[test]
fn wake_p99_rule_fires_above_the_limit_only() {
    let _g = serial();
    let tmp = tempdir("wakep99");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .snapshot_window(Duration::from_secs(10), Duration::from_millis(100))
        .snapshot_on_wake_p99(Duration::from_millis(20), Duration::from_millis(200))
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    // Below: 150 samples per window, one of them 40 ms late (p99 by
    // nearest rank is the 149th smallest: fast).
    for k in 0..3 {
        wake_then_poll(10_000 * (k + 1), 150, Duration::ZERO, 1);
        std::thread::sleep(Duration::from_millis(250));
    }
    // Fewer than 100 samples in a window count for nothing, however late.
    wake_then_poll(50_000, 50, Duration::from_millis(30), 0);
    std::thread::sleep(Duration::from_millis(400));
    assert!(snapshot_dirs(tmp.path()).is_empty());
    // Above: 150 tasks all polled 30 ms after their wake.
    wake_then_poll(90_000, 150, Duration::from_millis(30), 0);
    std::thread::sleep(Duration::from_millis(250));
    runtrace_recorder::task_spawn(1, 0, Loc::caller(), Istr::new("tick"));
    let dirs = wait_for_snapshots(tmp.path(), 1);
    let stats = guard.finish().unwrap();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(dirs[0].to_string_lossy().ends_with("-wake-p99"), "{dirs:?}");
    assert_eq!(
        (stats.snapshots, stats.snapshots_skipped),
        (1, 0),
        "{stats:?}"
    );
    assert_eq!(trigger_reasons(&dirs[0]), ["wake-p99"]);
}

/// A thread that records far more than its buffer holds between two
/// drains loses events.
fn overflow_buffer() {
    let q = Istr::new("burst");
    for i in 0..1_000_000u64 {
        runtrace_recorder::task_poll_start(i, 0, q, 0);
    }
}

/// The dropped-events rule: a round losing fewer events than the
/// threshold fires nothing; one losing at least as many fires once,
/// reason `dropped`.
#[test]
fn drops_rule_fires_at_its_threshold() {
    let _g = serial();
    let tmp = tempdir("drops");
    let start = |min: u64| {
        Recorder::builder()
            .path(tmp.path().join("trace"))
            .in_memory(8 << 20)
            .max_file_size(64 << 10)
            .buffer_size(64 << 10)
            .snapshot_window(Duration::from_secs(10), Duration::from_millis(50))
            .snapshot_on_drops(min)
            .flush_interval(Duration::from_millis(200))
            .start()
            .unwrap()
    };
    // Below: a burst into a 64 KiB buffer loses well under 10 M events
    // (how many depends on the writer's luck: tried until some are lost).
    for attempt in 0.. {
        let guard = start(10_000_000);
        overflow_buffer();
        let stats = guard.finish().unwrap();
        assert_eq!((stats.snapshots, stats.snapshots_skipped), (0, 0));
        assert!(snapshot_dirs(tmp.path()).is_empty());
        if stats.dropped > 0 {
            break;
        }
        assert!(attempt < 10, "no burst lost events: {stats:?}");
    }
    let guard = start(1);
    let mut dirs = Vec::new();
    for _ in 0..10 {
        overflow_buffer();
        dirs = wait_for_snapshots_within(tmp.path(), 1, Duration::from_secs(2));
        if !dirs.is_empty() {
            break;
        }
    }
    let stats = guard.finish().unwrap();
    assert!(stats.dropped > 0, "{stats:?}");
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(dirs[0].to_string_lossy().ends_with("-dropped"), "{dirs:?}");
    assert_eq!(stats.snapshots, 1, "{stats:?}");
    // A snapshot with drops in it says so: read the trigger without
    // `read_snapshot`'s cleanliness check.
    let files = runtrace_format::files::expand(std::slice::from_ref(&dirs[0])).unwrap();
    let mut reasons = Vec::new();
    for f in &files {
        for r in runtrace_format::FileReader::open(f).unwrap() {
            if let runtrace_format::Record::Events { events, .. } = r.unwrap() {
                for e in events {
                    if e.schema.name == "snapshot_trigger" {
                        reasons.push(e.get("reason").unwrap().as_str().unwrap().to_string());
                    }
                }
            }
        }
    }
    // Every round that lost events fired (and is recorded); all but the
    // first were skipped (pending, then cooling down), and those after the
    // snapshot was written are not in it.
    assert!(!reasons.is_empty() && reasons.iter().all(|r| r == "dropped"));
    assert!(
        reasons.len() as u64 <= stats.snapshots_skipped + 1,
        "{stats:?}"
    );
}

runtrace_recorder::user_events! {
    provider = "flighttest";
    /// A request failed.
    pub fn request_failed(code: u16);
    /// A request succeeded.
    pub fn request_ok(code: u16);
}

/// The application-event rule: `snapshot!` with an unlisted reason and
/// an unlisted application event are only recorded; a listed reason
/// fires (the directory named after it), and so does a listed event
/// `provider:name` (reason `provider:name`).
#[test]
fn event_rule_fires_on_listed_names_only() {
    let _g = serial();
    let tmp = tempdir("events");
    let guard = Recorder::builder()
        .path(tmp.path().join("trace"))
        .in_memory(8 << 20)
        .max_file_size(64 << 10)
        .snapshot_window(Duration::from_secs(10), Duration::from_millis(50))
        .snapshot_cooldown(Duration::from_millis(1))
        .snapshot_on_event("deploy")
        .snapshot_on_event("flighttest:request_failed")
        .flush_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    spawn_range(1..20);
    runtrace_recorder::snapshot!("not-listed");
    request_ok(200);
    std::thread::sleep(Duration::from_millis(300));
    assert!(snapshot_dirs(tmp.path()).is_empty());
    runtrace_recorder::snapshot!("deploy");
    let first = wait_for_snapshots(tmp.path(), 1);
    assert_eq!(first.len(), 1, "{first:?}");
    request_failed(503);
    let dirs = wait_for_snapshots(tmp.path(), 2);
    let stats = guard.finish().unwrap();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert_eq!(stats.snapshots, 2, "{stats:?}");
    let deploy = dirs
        .iter()
        .find(|d| d.to_string_lossy().ends_with("-deploy"));
    let failed = dirs
        .iter()
        .find(|d| d.to_string_lossy().ends_with("-flighttest-request_failed"));
    let (deploy, failed) = (deploy.expect("deploy"), failed.expect("request_failed"));
    assert_eq!(trigger_reasons(deploy), ["deploy"]);
    // The second snapshot's window holds both triggers.
    assert_eq!(
        trigger_reasons(failed),
        ["deploy", "flighttest:request_failed"]
    );
}

/// The new rules' settings: bad values refused before anything starts,
/// naming the setting or variable.
#[test]
fn rule_configuration_errors() {
    let _g = serial();
    let tmp = tempdir("ruleconfig");
    let b = || Recorder::builder().path(tmp.path().join("trace"));
    let msg = |r: Result<runtrace_recorder::RecordingGuard, RecordError>| match r {
        Err(RecordError::Config(m)) => m,
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("started"),
    };
    let m = msg(b().snapshot_on_drops(0).start());
    assert!(m.contains("snapshot_on_drops"), "{m}");
    let m = msg(b().snapshot_on_event("a:").start());
    assert!(
        m.contains("snapshot_on_event") && m.contains("\"a:\""),
        "{m}"
    );
    let m = msg(b()
        .snapshot_on_wake_p99(Duration::ZERO, Duration::from_secs(1))
        .start());
    assert!(m.contains("snapshot_on_wake_p99"), "{m}");
    let env = |var: &str, val: &str| {
        std::env::set_var(var, val);
        let r = b().start().map(|_| ());
        std::env::remove_var(var);
        match r {
            Err(RecordError::Config(m)) => m,
            other => panic!("{var}={val}: {other:?}"),
        }
    };
    let m = env("RUNTRACE_SNAPSHOT_DROPS", "many");
    assert!(m.contains("RUNTRACE_SNAPSHOT_DROPS=\"many\""), "{m}");
    let m = env("RUNTRACE_SNAPSHOT_EVENTS", "deploy,,x");
    assert!(m.contains("RUNTRACE_SNAPSHOT_EVENTS"), "{m}");
    let m = env("RUNTRACE_SNAPSHOT_WAKE_P99_MS", "2.5");
    assert!(m.contains("RUNTRACE_SNAPSHOT_WAKE_P99_MS"), "{m}");
    let m = env("RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS", "100");
    assert!(m.contains("RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS"), "{m}");
    assert!(!runtrace_recorder::is_recording());
    assert_eq!(all_files(tmp.path()), Vec::<PathBuf>::new());
}
