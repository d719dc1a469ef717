//! A real server (issue 35): tokio's mini-redis from crates.io, its server
//! as a library, recorded with CPU profiling at 99 Hz under load from
//! mini-redis' own client, with two problems planted in its command
//! handling (tests/fixtures/redis-planted: `GET slowkey` sleeps 20 ms in
//! `planted_sleep`, `SET hotkey` burns ~30 ms in `planted_crc_loop`).
//!
//! - sleep: the first finding about the process blames the connection
//!   handler, says "blocked in" with `planted_sleep` its top function, and
//!   the off-CPU flame graph's top tower (runtrace's own threads left out,
//!   the main thread's `block_on` too, as it is no worker) is the sleep;
//! - cpu: the first finding blames the connection handler, says "burning
//!   CPU in" with `planted_crc_loop` its top function;
//! - healthy: no critical finding about the process (only the host may be
//!   critical, when the host is overloaded).
//!
//! Needs `perf_event_open` for the off-CPU part (kernel.perf_event_paranoid
//! <= 2 for a process's own threads): under `CI=true` a recording without
//! off-CPU stacks fails the test; elsewhere it is skipped with a message.
//! The fixture builds in release mode under target/fixtures/redis, beside
//! tests/mini_redis.rs's (minutes on a first build).

mod common;
use common::{missing, repo_root, run, scratch_dir, trace_files};
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::runtime::analyze_files_profiled;
use runtrace_analyze::{Finding, FindingKind, Options, Report, Severity};
use runtrace_export::flamegraph::{stacks, Selection};
use runtrace_model::profile::{Profile, SampleKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The connection handler's spawn location in mini-redis 0.4.
const HANDLER: &str = "mini-redis-0.4.1/src/server.rs:";

fn build_fixture() -> PathBuf {
    // Shared with tests/mini_redis.rs (same dependencies and profile).
    let target = repo_root().join("target/fixtures/redis");
    run(common::cargo()
        .current_dir(repo_root())
        .args([
            "build",
            "--quiet",
            "--release",
            "--manifest-path",
            "tests/fixtures/redis-planted/Cargo.toml",
            "--target-dir",
        ])
        .arg(&target));
    target.join("release/redis-planted")
}

/// Kills the server if the test fails before it exits.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Records the server for 6 s under 8 connections of load for 5 s.
fn record(bin: &Path, scenario: &str) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = scratch_dir(&format!("redis-{scenario}"));
    let port_file = dir.path().join("port");
    let server = Command::new(bin)
        .arg("server")
        .arg(dir.path())
        .arg(&port_file)
        .arg("6")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the server");
    let mut server = Child(server);
    let start = Instant::now();
    while !port_file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the server never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = std::fs::read_to_string(&port_file).unwrap();
    run(Command::new(bin).args(["load", port.trim(), "5", "8", scenario]));
    let status = server.0.wait().expect("wait for the server");
    assert!(status.success(), "server: {status}");
    let files = trace_files(dir.path());
    (dir, files)
}

fn analyze(files: &[PathBuf]) -> (Report, Profile, StackNames) {
    let (mut r, p) = analyze_files_profiled(files, Options::default());
    let mut names = StackNames::recorded(&p);
    r.add_functions(&p, &mut names);
    (r, p, names)
}

/// The first finding that blames a location (the in-process cause).
fn first_in_process(r: &Report) -> &Finding {
    r.findings
        .iter()
        .find(|f| f.spawn_loc.is_some())
        .unwrap_or_else(|| panic!("no finding blames a location:\n{r}"))
}

/// Whether a stack was walked whole: its outermost frame starts the
/// thread.
fn reaches_thread_start(names: &mut StackNames, stack: &std::sync::Arc<[u64]>) -> bool {
    names
        .frames(stack)
        .last()
        .is_some_and(|f| ["start_thread", "clone3", "__clone3", "clone"].contains(&&*f.function))
}

/// Whether the recording has off-CPU stacks; else fails under CI and
/// says so elsewhere.
fn has_off_cpu(p: &Profile) -> bool {
    let off = p.info.iter().any(|(_, i)| i.flags & 1 == 1);
    if !off {
        missing(&format!(
            "the recording has no off-CPU stacks (perf_event_open refused?): {:?}",
            p.info
        ));
    }
    off
}

/// The recording on Perfetto's timeline (issue 39 item 4, on a real
/// server): `tools/check_perfetto_samples.py` reads its on- and off-CPU
/// samples back with Perfetto's protos and with Perfetto's trace
/// processor (`RUNTRACE_TRACE_PROCESSOR_WASM`, set by .ci/run), and both
/// name the same stacks on the same threads.
fn perfetto_samples_agree(files: &[PathBuf]) {
    let have = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        missing("python3 with the perfetto package (pip install -r .ci/requirements.txt)");
        return;
    }
    let d = scratch_dir("redis-planted-perfetto");
    let out = d.path().join("t.pftrace");
    runtrace_export::perfetto::convert(files, &out).unwrap();
    let script = repo_root().join("tools/check_perfetto_samples.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "check_perfetto_samples.py: {err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["kinds"]["on_cpu"].as_u64() > Some(0), "{}", v["kinds"]);
    assert!(v["kinds"]["off_cpu"].as_u64() > Some(0), "{}", v["kinds"]);
    eprintln!(
        "perfetto: samples {} (protos); trace processor: {}",
        v["kinds"],
        match v["trace_processor_skipped"].as_str() {
            None if v["trace_processor"] == v["protos"] => "the same stacks".to_string(),
            None => "other stacks".to_string(),
            Some(why) => format!("skipped ({why})"),
        }
    );
    match v["trace_processor_skipped"].as_str() {
        None => assert!(
            v["trace_processor"] == v["protos"],
            "trace processor and the protos differ"
        ),
        Some(why) => missing(&format!("no trace processor: {why}")),
    }
}

#[test]
fn mini_redis_with_planted_problems() {
    let bin = build_fixture();

    // The planted sleep.
    let (_d, files) = record(&bin, "sleep");
    let (r, p, mut names) = analyze(&files);
    if has_off_cpu(&p) {
        let f = first_in_process(&r);
        assert!(
            f.spawn_loc.as_deref().unwrap().contains(HANDLER),
            "blames the connection handler:\n{r}"
        );
        let c = f.functions.as_ref().expect("functions");
        assert!(c.mostly_off_cpu, "blocked, not CPU:\n{r}");
        // Async frames carry their path (limited debug info), never a
        // bare `{async_fn#0}` (issue 35 item 4).
        assert!(
            c.functions.iter().all(|x| !x.function.starts_with('{')),
            "nameless async frames:\n{r}"
        );
        assert!(
            c.functions[0].function.contains("planted_sleep"),
            "top function:\n{r}"
        );
        if f.kind == FindingKind::LongPoll {
            assert!(
                f.detail.contains("blocked in redis_planted::planted_sleep"),
                "{}",
                f.detail
            );
        }
        // The off-CPU flame graph's top tower: the widest stack below
        // the workers' frames, runtrace's threads left out.
        let sel = Selection {
            off_cpu: true,
            ..Selection::default()
        };
        let st = stacks(&p, &sel, &mut names);
        assert!(
            !st.iter()
                .any(|(s, _)| s.iter().any(|f| f.contains("sample_global_queue"))),
            "runtrace's sampler is not in the off-CPU graph"
        );
        // Switch-outs inside Debian glibc's send/recv/clock_nanosleep (no
        // frame pointer there) end the kernel's walk at the leaf; the
        // BPF program then copies the stack, which the writer unwinds
        // (issue 35 item 2): the handler's switch-outs reach their
        // thread's start, and no orphan outweighs the sleep. At least
        // three in four, not all: the program copies only while its ring
        // is under half full, so a host that starves the writer sheds
        // copies by design (a CI run here with the test slowed from 24 s
        // to 66 s by the host had 1,556 of 1,823 whole, 85%; quiet runs
        // 100%; without the copies 120 of 4,194).
        let off: Vec<_> = p
            .samples
            .iter()
            .filter(|s| matches!(s.kind, SampleKind::OffCpu { .. }))
            .filter(|s| s.location.as_deref().is_some_and(|l| l.contains(HANDLER)))
            .collect();
        let whole_off = off
            .iter()
            .filter(|s| reaches_thread_start(&mut names, &s.stack))
            .count();
        eprintln!(
            "sleep: {} off-CPU samples in the connection handler's polls, {whole_off} reach their thread's start",
            off.len()
        );
        assert!(
            !off.is_empty() && whole_off * 4 >= off.len() * 3,
            "{whole_off} of {} off-CPU samples in the handler's polls are whole stacks",
            off.len()
        );
        // The main thread parks in block_on for the whole run: not a worker
        // (`tokio::runtime::park::CachedParkThread::block_on` with limited
        // debug info, a bare `block_on` with line tables only).
        let top = st
            .iter()
            .filter(|(s, _)| !s.iter().any(|f| f.contains("block_on")))
            .max_by_key(|(_, w)| *w)
            .expect("off-CPU stacks");
        assert!(
            top.0.iter().any(|f| f.contains("planted_sleep")),
            "the top off-CPU tower is the planted sleep: {:?}",
            top
        );
        perfetto_samples_agree(&files);
    }

    // The planted CPU loop.
    let (_d, files) = record(&bin, "cpu");
    let (r, p, mut names) = analyze(&files);
    // Whole stacks through glibc (issue 35 item 2): the handler's on-CPU
    // samples reach their thread's start, also those whose leaf is in
    // glibc's `send`/`recv` (no frame pointer: the kernel's walk alone
    // stopped there in about half of them, a two-frame orphan).
    let on_cpu: Vec<_> = p
        .samples
        .iter()
        .filter(|s| s.kind == SampleKind::OnCpu)
        .filter(|s| s.location.as_deref().is_some_and(|l| l.contains(HANDLER)))
        .collect();
    let whole = on_cpu
        .iter()
        .filter(|s| reaches_thread_start(&mut names, &s.stack))
        .count();
    eprintln!(
        "cpu: {} on-CPU samples in the connection handler's polls, {whole} reach their thread's start",
        on_cpu.len()
    );
    assert!(
        !on_cpu.is_empty() && whole * 10 >= on_cpu.len() * 9,
        "{whole} of {} on-CPU samples in the handler's polls are whole stacks",
        on_cpu.len()
    );
    let f = first_in_process(&r);
    assert!(
        f.spawn_loc.as_deref().unwrap().contains(HANDLER),
        "blames the connection handler:\n{r}"
    );
    let c = f.functions.as_ref().expect("functions");
    assert!(!c.mostly_off_cpu, "CPU, not blocked:\n{r}");
    assert!(
        c.functions[0].function.contains("planted_crc_loop"),
        "top function:\n{r}"
    );

    // Healthy: nothing critical about the process itself.
    let (_d, files) = record(&bin, "healthy");
    let (r, _p, _) = analyze(&files);
    for f in &r.findings {
        assert!(
            f.severity != Severity::Critical || f.kind == FindingKind::HostStarvation,
            "a critical finding about a healthy server:\n{r}"
        );
    }
}
