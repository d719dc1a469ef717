//! CPU profiles (issue 13) through the files the recorder writes: samples
//! land in the known function, off-CPU stacks go through the caller of
//! `sleep`, the fallbacks say what they did, every file stands alone.
//!
//! Tests that need `perf_event_open` fail under `CI=true` when it is
//! refused, and skip with a message elsewhere. One recording runs per
//! process at a time (and `RUNTRACE_CPU_FALLBACK` is process-wide), so the
//! tests take a lock.

use object::{Object, ObjectSymbol};
use runtrace_format::frame::ProfileInfo;
use runtrace_format::{FileReader, Record, Value};
use runtrace_recorder::Recorder;
use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-cpu-{name}-"))
        .tempdir()
        .unwrap()
}

/// A sample as read back: thread, stack (leaf first), off-CPU ns.
#[derive(Debug, Clone)]
struct Sample {
    tid: u64,
    id: u64,
    stack: Arc<[u64]>,
    off_ns: Option<u64>,
    chunk_tid: u64,
}

/// What one trace file says about profiling.
#[derive(Debug, Default)]
struct FileProfile {
    info: Option<ProfileInfo>,
    samples: Vec<Sample>,
    mappings: usize,
    threads: HashMap<u64, String>,
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut v);
    v
}

fn u(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::U(n)) => *n,
        other => panic!("expected u64, got {other:?}"),
    }
}

/// Reads one file on its own: every stack id its samples use must be
/// defined in it (files stand alone).
fn read_file(path: &Path) -> FileProfile {
    let mut r = FileReader::open(path).unwrap();
    let mut raw = Vec::new();
    let mut threads = HashMap::new();
    for rec in &mut r {
        match rec.unwrap_or_else(|e| panic!("{e}")) {
            Record::Events { tid, events, .. } => {
                for e in events {
                    let off_ns = match e.schema.name.as_str() {
                        "cpu_sample" => None,
                        "off_cpu" => Some(u(e.get("off_ns"))),
                        _ => continue,
                    };
                    raw.push((tid, u(e.get("tid")), u(e.get("stack")), off_ns));
                }
            }
            Record::Thread { tid, name } => {
                threads.insert(tid, name);
            }
            _ => {}
        }
    }
    // Lost samples are told like lost events: the END totals hold.
    assert!(r.sealed(), "{} not sealed", path.display());
    assert_eq!(r.end_mismatches(), vec![], "{}", path.display());
    let t = r.tables();
    let samples = raw
        .into_iter()
        .map(|(chunk_tid, tid, id, off_ns)| Sample {
            tid,
            id,
            stack: if id == 0 {
                Arc::from(Vec::new())
            } else {
                t.stack(id)
                    .unwrap_or_else(|| panic!("{}: stack {id} used, not defined", path.display()))
                    .clone()
            },
            off_ns,
            chunk_tid,
        })
        .collect();
    FileProfile {
        info: t.profile().cloned(),
        samples,
        mappings: t.mappings().len(),
        threads,
    }
}

/// Records `work` (run on its own, registered thread, after sampling of
/// it began) with CPU profiling at `hz`; returns the work thread's tid and
/// each file's profile.
fn record(name: &str, hz: u32, work: impl FnOnce() + Send + 'static) -> (u64, Vec<FileProfile>) {
    record_with(name, hz, |b| b, work)
}

fn record_with(
    name: &str,
    hz: u32,
    cfg: impl FnOnce(runtrace_recorder::RecorderBuilder) -> runtrace_recorder::RecorderBuilder,
    work: impl FnOnce() + Send + 'static,
) -> (u64, Vec<FileProfile>) {
    let dir = tempdir(name);
    let b = Recorder::builder()
        .path(dir.path().join("trace"))
        .flush_interval(Duration::from_millis(5))
        .cpu_profile(hz);
    let guard = cfg(b).start().unwrap();
    let tid = std::thread::spawn(move || {
        // An event makes this a recording thread; the writer starts
        // sampling it at its next round.
        runtrace_recorder::task_terminate(1);
        std::thread::sleep(Duration::from_millis(60));
        work();
        runtrace_core::clock::gettid()
    })
    .join()
    .unwrap();
    guard.finish().unwrap();
    let profiles = files(dir.path()).iter().map(|p| read_file(p)).collect();
    (tid, profiles)
}

/// Whether the trace was profiled with perf_event_open; under CI a refusal
/// fails the test, elsewhere it skips it.
fn perf_used(files: &[FileProfile], test: &str) -> bool {
    let info = files[0].info.as_ref().expect("a PROFILE frame in file 0");
    if info.mode == 1 {
        return true;
    }
    let msg = format!(
        "{test}: perf_event_open was not used (mode {}: {})",
        info.mode, info.message
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("skipped: {msg}");
    false
}

/// The runtime address range of a `#[no_mangle]` function of this test
/// binary: its address and its size from the symbol table.
fn function_range(name: &str, addr: usize) -> std::ops::Range<u64> {
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let obj = object::File::parse(&*exe).unwrap();
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"));
    assert!(sym.size() > 0, "{name} has no size");
    addr as u64..addr as u64 + sym.size()
}

/// A CPU-bound function the samples must find.
///
/// Its inner loop calls no function. In a debug build (as the tests run),
/// `Range::next` and `black_box` are calls, and a sample landing on one's
/// first instruction (before its `push rbp`) or its `ret` (after `pop
/// rbp`) walks from the caller's frame pointer and so skips the caller:
/// with a call per operation that was 8-18% of this function's samples
/// (up to 21% on a loaded CI machine), against the 80% asserted below.
/// Frame-pointer stacks have that gap wherever they are walked (the
/// kernel's too); docs/cpu-profile.md ("Frame pointers") says so.
#[no_mangle]
#[inline(never)]
pub extern "C" fn rt_cpu_test_hot(ms: u64) -> u64 {
    let end = Instant::now() + Duration::from_millis(ms);
    let mut x = 1u64;
    while Instant::now() < end {
        // `wrapping_*` are `#[inline(always)]`: no call even unoptimized;
        // `x` is returned, so an optimized build keeps the loop too.
        let mut i = 0u32;
        while i < 200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            i += 1;
        }
    }
    x
}

/// A function that blocks in `std::thread::sleep`.
#[no_mangle]
#[inline(never)]
pub extern "C" fn rt_cpu_test_sleeper(ms: u64) {
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(ms));
        black_box(());
    }
}

/// The same, while marked parked (as tokio's park hook marks a worker).
#[no_mangle]
#[inline(never)]
pub extern "C" fn rt_cpu_test_parked_sleeper(ms: u64) {
    runtrace_core::parked::set(true);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(ms));
        black_box(());
    }
    runtrace_core::parked::set(false);
}

/// Whether the sample's stack goes through the function at `range`:
/// frame 0 is the sampled instruction, the others return addresses, which
/// lie in (start, end].
fn through(s: &Sample, range: &std::ops::Range<u64>) -> bool {
    s.stack.iter().enumerate().any(|(k, &a)| {
        if k == 0 {
            range.contains(&a)
        } else {
            a > range.start && a <= range.end
        }
    })
}

fn all_samples(files: &[FileProfile]) -> Vec<Sample> {
    files.iter().flat_map(|f| f.samples.clone()).collect()
}

#[test]
fn hot_function_holds_most_samples_of_its_thread() {
    let _s = serial();
    hot_function_test("hot", None);
}

/// The same with a cpu-clock event per thread, the sampler used where
/// per-CPU events are refused.
#[test]
fn hot_function_with_per_thread_events() {
    let _s = serial();
    hot_function_test("hot-per-thread", Some("perf-thread"));
}

fn hot_function_test(name: &str, fallback: Option<&str>) {
    if let Some(v) = fallback {
        std::env::set_var("RUNTRACE_CPU_FALLBACK", v);
    }
    let (tid, files) = record(name, 499, || {
        black_box(rt_cpu_test_hot(400));
    });
    std::env::remove_var("RUNTRACE_CPU_FALLBACK");
    if !perf_used(&files, name) {
        return;
    }
    // Root may open per-CPU events: the default then uses them.
    let message = &files[0].info.as_ref().unwrap().message;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if fallback.is_some() || !root {
        assert!(message.contains("event per thread"), "{message}");
    } else {
        assert!(message.contains("per-CPU cpu-clock events"), "{message}");
    }
    let range = function_range("rt_cpu_test_hot", rt_cpu_test_hot as *const () as usize);
    let mine: Vec<Sample> = all_samples(&files)
        .into_iter()
        .filter(|s| s.tid == tid && s.off_ns.is_none())
        .collect();
    // 400 ms of CPU at 499 Hz is ~200 samples; a loaded 2-core machine
    // may give the thread much less CPU time.
    assert!(mine.len() >= 20, "only {} on-CPU samples", mine.len());
    // The function is the leaf of nearly every sample (its inner loop
    // calls nothing; the clock read, once per 200,000 steps, has it as a
    // caller).
    let n_in = mine.iter().filter(|s| through(s, &range)).count();
    assert!(
        n_in * 10 >= mine.len() * 8,
        "{n_in} of {} samples through rt_cpu_test_hot {range:x?}; outside: {:x?}",
        mine.len(),
        mine.iter()
            .filter(|s| !through(s, &range))
            .take(5)
            .map(|s| s.stack.iter().take(6).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    // Samples are events of the writer thread, announced by name.
    let writer = mine[0].chunk_tid;
    assert_ne!(writer, tid);
    assert!(files
        .iter()
        .any(|f| f.threads.get(&writer).map(String::as_str) == Some("runtrace-writer")));
    assert!(files.iter().all(|f| f.samples.is_empty() || f.mappings > 0));
}

/// Off-CPU stacks from the scheduler's switch tracepoint through BPF (the
/// default where allowed: under CI it must be used).
#[test]
fn sleep_gives_an_off_cpu_stack_through_its_caller() {
    sleep_test("sleep", None);
}

/// Off-CPU stacks from per-thread context-switch perf events.
#[test]
fn sleep_gives_an_off_cpu_stack_with_per_thread_events() {
    sleep_test("sleep-per-thread", Some("perf-thread"));
}

fn sleep_test(name: &str, fallback: Option<&str>) {
    let _s = serial();
    if let Some(v) = fallback {
        std::env::set_var("RUNTRACE_CPU_FALLBACK", v);
    }
    let (tid, files) = record(name, 99, || rt_cpu_test_sleeper(30));
    std::env::remove_var("RUNTRACE_CPU_FALLBACK");
    if !perf_used(&files, name) {
        return;
    }
    let info = files[0].info.as_ref().unwrap();
    assert_eq!(info.flags & 1, 1, "off-CPU not recorded: {}", info.message);
    let bpf = info
        .message
        .contains("sched_switch tracepoint with a BPF program");
    if fallback.is_some() {
        assert!(!bpf, "{name}: {}", info.message);
        assert!(
            info.message.contains("per-thread context-switch events"),
            "{name}: {}",
            info.message
        );
    } else if !bpf {
        let msg = format!("{name}: BPF off-CPU stacks not used: {}", info.message);
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}");
        }
        eprintln!("note: {msg}");
    }
    let range = function_range(
        "rt_cpu_test_sleeper",
        rt_cpu_test_sleeper as *const () as usize,
    );
    let off: Vec<Sample> = all_samples(&files)
        .into_iter()
        .filter(|s| s.tid == tid && s.off_ns.is_some())
        .collect();
    let long: Vec<&Sample> = off
        .iter()
        .filter(|s| s.off_ns.unwrap() >= 25_000_000 && through(s, &range))
        .collect();
    assert!(
        long.len() >= 3,
        "{} off-CPU samples of >= 25 ms through rt_cpu_test_sleeper {range:x?}; all: {:x?}",
        long.len(),
        off.iter()
            .map(|s| (s.off_ns, s.stack.iter().take(6).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
    );
    assert!(long.iter().all(|s| s.off_ns.unwrap() < 1_000_000_000));
}

/// Whether the recording took its off-CPU stacks through the BPF program;
/// under `CI=true` it must have (root and tracefs are there), elsewhere
/// the test skips with the reason.
fn bpf_used(files: &[FileProfile], name: &str) -> bool {
    if !perf_used(files, name) {
        return false;
    }
    let message = &files[0].info.as_ref().unwrap().message;
    if message.contains("sched_switch tracepoint with a BPF program") {
        return true;
    }
    let msg = format!("{name}: BPF off-CPU stacks not used: {message}");
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{msg}");
    eprintln!("skipped: {msg}");
    false
}

/// A parked thread's switch-outs are the runtime idling: the BPF program
/// skips them, and the same sleeps unparked are sampled.
#[test]
fn parked_switches_are_not_sampled() {
    let _s = serial();
    let (tid, files) = record("parked", 99, || {
        rt_cpu_test_parked_sleeper(30);
        rt_cpu_test_sleeper(30);
    });
    if !bpf_used(&files, "parked") {
        return;
    }
    let off: Vec<Sample> = all_samples(&files)
        .into_iter()
        .filter(|s| s.tid == tid && s.off_ns.is_some())
        .collect();
    let via = |name: &str, addr: usize| {
        let range = function_range(name, addr);
        off.iter().filter(|s| through(s, &range)).count()
    };
    let parked = via(
        "rt_cpu_test_parked_sleeper",
        rt_cpu_test_parked_sleeper as *const () as usize,
    );
    let running = via(
        "rt_cpu_test_sleeper",
        rt_cpu_test_sleeper as *const () as usize,
    );
    assert_eq!(parked, 0, "off-CPU samples while parked");
    assert!(
        running >= 3,
        "{running} off-CPU samples of the unparked sleeps"
    );
}

/// The BPF program leaves the tracepoint to everyone else: `perf stat` on
/// `sched:sched_switch` still counts the machine's switches while it is
/// attached (a program returning 0 would hide them all from perf).
#[test]
fn perf_still_counts_sched_switch_while_recording() {
    let _s = serial();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let counted = Arc::new(Mutex::new(None));
    let c = counted.clone();
    let (_, files) = record("perf-stat", 99, move || {
        let out = std::process::Command::new("perf")
            .args([
                "stat",
                "-a",
                "-x,",
                "-e",
                "sched:sched_switch",
                "--",
                "sleep",
                "0.3",
            ])
            .output();
        *c.lock().unwrap() = Some(out);
    });
    if !bpf_used(&files, "perf-stat") {
        return;
    }
    let out = match counted.lock().unwrap().take().unwrap() {
        Ok(o) if o.status.success() => o,
        other => {
            let msg = format!("perf stat did not run: {other:?} (apt-get install linux-perf)");
            assert!(!ci, "{msg}");
            eprintln!("skipped: {msg}");
            return;
        }
    };
    // `-x,`: "count,unit,event,..." on stderr.
    let text = String::from_utf8_lossy(&out.stderr);
    let n: u64 = text
        .lines()
        .find(|l| l.contains("sched:sched_switch"))
        .and_then(|l| l.split(',').next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in perf stat's output: {text}"));
    // 0.3 s of a machine with a recording running (its writer wakes every
    // 5 ms, `sleep` itself switches) has dozens of switches at least.
    assert!(n >= 20, "perf stat counted {n} switches: {text}");
}

#[test]
fn signal_fallback_samples_the_hot_function() {
    let _s = serial();
    std::env::set_var("RUNTRACE_CPU_FALLBACK", "signal");
    let (tid, files) = record("signal", 499, || {
        black_box(rt_cpu_test_hot(400));
    });
    std::env::remove_var("RUNTRACE_CPU_FALLBACK");
    let info = files[0].info.as_ref().expect("PROFILE frame");
    assert_eq!(info.mode, 2, "{}", info.message);
    assert!(!info.off_cpu());
    assert!(
        info.message.contains("RUNTRACE_CPU_FALLBACK=signal"),
        "{}",
        info.message
    );
    let mine: Vec<Sample> = all_samples(&files)
        .into_iter()
        .filter(|s| s.tid == tid)
        .collect();
    assert!(mine.iter().all(|s| s.off_ns.is_none()));
    assert!(mine.len() >= 20, "only {} samples", mine.len());
    let range = function_range("rt_cpu_test_hot", rt_cpu_test_hot as *const () as usize);
    let n_in = mine.iter().filter(|s| through(s, &range)).count();
    assert!(
        n_in * 10 >= mine.len() * 8,
        "{n_in} of {} samples through rt_cpu_test_hot",
        mine.len()
    );
    assert!(files.iter().all(|f| f.samples.is_empty() || f.mappings > 0));
}

#[test]
fn fallback_off_says_so_in_every_file() {
    let _s = serial();
    std::env::set_var("RUNTRACE_CPU_FALLBACK", "off");
    let (_, files) = record_with(
        "off",
        99,
        |b| b.max_file_size(4096).max_total_size(1 << 20),
        || {
            // Several rounds of ~1 KiB: several files.
            for i in 0..2000 {
                runtrace_recorder::task_terminate(i);
                if i % 200 == 0 {
                    std::thread::sleep(Duration::from_millis(15));
                }
            }
        },
    );
    std::env::remove_var("RUNTRACE_CPU_FALLBACK");
    assert!(files.len() > 1, "rotation expected");
    for f in &files {
        let info = f.info.as_ref().expect("PROFILE frame in every file");
        assert_eq!((info.mode, info.hz), (0, 99));
        assert!(
            info.message.contains("RUNTRACE_CPU_FALLBACK=off"),
            "{}",
            info.message
        );
        assert!(f.samples.is_empty());
    }
}

#[test]
fn without_cpu_profile_no_profile_frame() {
    let _s = serial();
    let (_, files) = record("none", 0, || {});
    assert!(files
        .iter()
        .all(|f| f.info.is_none() && f.samples.is_empty()));
}

#[test]
fn every_file_defines_what_its_samples_use() {
    let _s = serial();
    // Small files: samples spread over several, each read on its own
    // (`read_file` fails on a stack id the file does not define).
    let (tid, files) = record_with(
        "rotate",
        997,
        |b| b.max_file_size(4096).max_total_size(64 << 20),
        || {
            for i in 0..30 {
                black_box(rt_cpu_test_hot(10));
                runtrace_recorder::task_terminate(i);
            }
        },
    );
    if !perf_used(&files, "rotate") {
        return;
    }
    let with_samples: Vec<&FileProfile> = files
        .iter()
        .filter(|f| f.samples.iter().any(|s| s.tid == tid))
        .collect();
    assert!(
        with_samples.len() >= 2,
        "samples in {} files",
        with_samples.len()
    );
    for f in &files {
        assert_eq!(f.info.as_ref().map(|i| i.mode), Some(1));
        if !f.samples.is_empty() {
            assert!(f.mappings > 0);
            assert!(f.threads.values().any(|n| n == "runtrace-writer"));
        }
    }
    // Ids are recording-wide: an id means the same stack in every file
    // (and a stack has one id).
    let mut by_id: HashMap<u64, Arc<[u64]>> = HashMap::new();
    let mut ids: HashMap<Vec<u64>, HashSet<u64>> = HashMap::new();
    for s in all_samples(&files).into_iter().filter(|s| s.id != 0) {
        assert_eq!(&**by_id.entry(s.id).or_insert(s.stack.clone()), &*s.stack);
        ids.entry(s.stack.to_vec()).or_default().insert(s.id);
    }
    assert!(ids.values().all(|v| v.len() == 1));
    // Some stack recurs across files (the hot loop), so files really did
    // define the same id again.
    let files_of = |id: u64| {
        files
            .iter()
            .filter(|f| f.samples.iter().any(|s| s.id == id))
            .count()
    };
    assert!(by_id.keys().any(|&id| files_of(id) >= 2));
}

#[test]
fn cpu_hz_errors_name_the_setting() {
    let _s = serial();
    let dir = tempdir("hz");
    let err = Recorder::builder()
        .path(dir.path().join("t"))
        .cpu_profile(5000)
        .start()
        .unwrap_err()
        .to_string();
    assert!(err.contains("cpu_profile") && err.contains("1000"), "{err}");
    for (val, what) in [
        ("5000", "at most 1000"),
        ("fast", "expected samples per second"),
    ] {
        std::env::set_var("RUNTRACE_CPU_HZ", val);
        let err = Recorder::builder().path(dir.path().join("t")).start();
        std::env::remove_var("RUNTRACE_CPU_HZ");
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("RUNTRACE_CPU_HZ") && err.contains(what),
            "{err}"
        );
    }
    std::env::set_var("RUNTRACE_CPU_FALLBACK", "sometimes");
    let err = Recorder::builder().path(dir.path().join("t")).start();
    std::env::remove_var("RUNTRACE_CPU_FALLBACK");
    assert!(err
        .unwrap_err()
        .to_string()
        .contains("RUNTRACE_CPU_FALLBACK"));
    std::env::set_var("RUNTRACE_CPU_OFF_CPU", "maybe");
    let err = Recorder::builder().path(dir.path().join("t")).start();
    std::env::remove_var("RUNTRACE_CPU_OFF_CPU");
    let err = err.unwrap_err().to_string();
    assert!(err.contains("RUNTRACE_CPU_OFF_CPU=\"maybe\""), "{err}");
}

#[test]
fn off_cpu_stacks_can_be_turned_off() {
    let _s = serial();
    for (name, via_env) in [("no-off-cpu", false), ("no-off-cpu-env", true)] {
        if via_env {
            std::env::set_var("RUNTRACE_CPU_OFF_CPU", "off");
        }
        let (tid, files) = record_with(
            name,
            99,
            |b| if via_env { b } else { b.off_cpu_stacks(false) },
            || {
                rt_cpu_test_sleeper(30);
                black_box(rt_cpu_test_hot(100));
            },
        );
        std::env::remove_var("RUNTRACE_CPU_OFF_CPU");
        if !perf_used(&files, name) {
            return;
        }
        let info = files[0].info.as_ref().unwrap();
        assert_eq!(info.flags & 1, 0, "{}", info.message);
        assert!(info.message.contains("turned off"), "{}", info.message);
        let mine: Vec<Sample> = all_samples(&files)
            .into_iter()
            .filter(|s| s.tid == tid)
            .collect();
        assert!(mine.iter().all(|s| s.off_ns.is_none()));
        // On-CPU sampling goes on.
        assert!(!mine.is_empty(), "no on-CPU samples");
    }
}
