//! What recording costs a real server (issue 11): an axum (hyper) server on
//! a 2-worker tokio runtime, driven by `wrk -t1 -c32` on loopback, in modes
//!
//! - `plain`: stock runtime, no hooks;
//! - `idle_hooks`: `runtrace_tokio::instrument`ed, nothing recording;
//! - `record`: instrumented and recording to files;
//!   these two (and every `record_*` mode but `record_no_wakes`) learn of
//!   tokio's wakes through runtrace's minimal global tracing subscriber
//!   (`runtrace_tokio::wakes::install_global()`, which `instrument` set by
//!   itself before issue 34), so their figures compare with earlier runs;
//! - `idle_layer`, `record_layer`: `idle_hooks` and `record` learning of
//!   the wakes through `runtrace_tokio::layer()` in a `tracing_subscriber`
//!   registry instead, as an application with its own logging does;
//! - `record_cpu`: `record` plus CPU profiling at 99 Hz
//!   (`Recorder::builder().cpu_profile(99)`, issue 13; target: at most 1%
//!   more CPU per request than `record`);
//! - `record_cpu_on`: `record_cpu` without off-CPU stacks
//!   (`RUNTRACE_CPU_OFF_CPU=off`: on-CPU samples only);
//! - `record_cpu_no_copy`: `record_cpu` without stack copies
//!   (`RUNTRACE_CPU_STACK_COPY=off`: on-CPU samples and off-CPU stacks
//!   cut short at a glibc leaf are the kernel's frame-pointer walk alone);
//! - `record_no_wakes`: `record` without tokio's waker events (no
//!   tracing subscriber: no WakeEvents for plain `tokio::spawn` tasks, and
//!   no task spans): what recording who
//!   woke whom costs, against the same round's `record`;
//! - `floor_hooks`: not runtrace's hooks but the least any tracer built on
//!   tokio's hooks can do: each poll start and end, park and unpark reads
//!   the recorder's clock once and stores it with the task id in a
//!   thread-local array (no encoding, no buffer protocol, no worker or
//!   queue lookups, no wakes, no writer thread); see [`floor`]. What it
//!   costs against `plain` is the floor under issue 11's 3% on this host;
//! - `floor_no_clock`: `floor_hooks` storing a counter where it stored the
//!   clock: against `floor_hooks`, what the clock reads alone cost;
//! - `floor_wakes`: `floor_hooks` plus the least a tracer can do to learn
//!   of each wake of a plain `tokio::spawn` task from stock tokio (a
//!   tracing subscriber enabling tokio's task spans and waker events, each
//!   wake stored like the hooks' events); see [`floor::install_wakes`].
//!   Against `plain`, the floor under a tracer that records what
//!   runtrace's analysis needs (polls, parks and wakes);
//! - `floor_fire`: `floor_wakes` writing runtrace's events (its probes'
//!   `fire`, into a running recording) where it stored 16 bytes, with
//!   worker 0 and no queue depths, waking task or thread times: against
//!   `floor_wakes`, what runtrace's write path (producer, encoding, ring,
//!   writer thread) costs; `record` against it, what runtrace's hooks do
//!   beyond writing (lookups, bookkeeping, thread times);
//! - `record_cpu_signal`: `record_cpu` with the timer + SIGPROF backend
//!   (`RUNTRACE_CPU_FALLBACK=signal`: on-CPU stacks only, no per-switch
//!   cost);
//! - `record_all`: recording with every backend compiled into this bench
//!   listening. Without the `usdt` feature the recorder is the only backend,
//!   so this mode is skipped (and the bench says so); with
//!   `--features usdt` a `bpftrace` script counting every `runtrace:*` USDT
//!   probe is attached to the server as well.
//!
//! Each round runs every mode once, in a rotating order, each in a fresh
//! child process (this binary re-executed with `RUNTRACE_HTTP_SERVER=MODE`).
//! Per mode the bench takes the server's CPU time (user+sys from
//! `getrusage(RUSAGE_SELF)` in the child, all its threads, including the
//! recorder's writer) per request served, wrk's throughput and its p99
//! latency, over a measured window after a warm-up, and prints the median
//! over rounds of the ratio to the same round's `plain` run. The medians
//! go to `target/bench-results/http_server.json`.
//!
//! Run: `cargo bench --bench http_server` (needs `wrk`: `apt-get install
//! wrk`). `HTTP_BENCH_ROUNDS` (default 6) and `HTTP_BENCH_SECS` (measured
//! seconds per run, default 5). `HTTP_BENCH_MODES=idle_hooks,record`
//! measures only those modes (and `plain`, the reference); the mode
//! `plain_again` is a second `plain` server, an A/A control whose ratios
//! show the bench's own noise. `HTTP_BENCH_PIN=1` pins the server to CPU 1
//! and wrk to CPU 0 (`taskset`). `HTTP_BENCH_CALLGRIND=1` counts the
//! server's instructions per request under callgrind instead of timing it
//! (needs valgrind; see `callgrind_rounds`); `HTTP_BENCH_CALLGRIND_SIM=1`
//! adds callgrind's cache and branch simulation and prints the simulated
//! first-level cache misses and branch mispredictions per request
//! (instruction-fetch misses show what a mode's extra code costs beyond
//! its instruction count). `HTTP_BENCH_CONCURRENT=1` runs every
//! round's modes at the same time instead (each server with its own wrk,
//! all sharing whatever else the machine does; a cross-check on a busy
//! machine), writing `target/bench-results/http_server_concurrent.json`.
//! `HTTP_BENCH_RATE=R` replaces wrk with a client in this process that
//! sends R requests a second at a steady pace (R / 1000 keep-alive
//! connections, one request each per millisecond; see `paced`): the server
//! below saturation, as servers mostly run, where its p99 is its own and
//! not wrk's queueing (the throughput ratio is then 1 by construction;
//! the rate actually served is printed). It works with
//! `HTTP_BENCH_CALLGRIND=1` too. `HTTP_BENCH_BASE=PATH` (another build of
//! this bench, e.g. of the commit before a change) adds modes `MODE@base`
//! to `HTTP_BENCH_MODES`, served by that build in the same rounds: a
//! before/after comparison paired round by round (see `base_exe`).
//! `HTTP_BENCH_TOGGLE=STATE` measures one cost more finely: a single
//! instrumented server under one wrk that runs throughout, its recording
//! switched on and off every window (`HTTP_BENCH_WINDOW_MS`, default 1000;
//! `HTTP_BENCH_SETTLE_MS` after each switch, default 300, unmeasured;
//! `HTTP_BENCH_ROUNDS` pairs of adjacent windows, default 40): `record`
//! against `idle`, `record_cpu` against `record`, `record_flight` (the
//! flight recorder in memory, 256 MiB budget) against `record` (file
//! mode), or the A/A controls
//! `idle` and `record_again` (see `toggle_rounds`), or `record_mem`
//! against `record`: memory profiling at the default rate (one sample per
//! 512 KiB allocated) over recording without it; this needs `--features
//! alloc`, which makes `runtrace::alloc::Sampled<System>` this binary's
//! global allocator in every mode (so every mode pays the wrapper's idle
//! branch; `record_mem` is refused without the feature). With 300 ms windows a
//! pair takes 0.8 s instead of a round's ~10 s per mode, so the same
//! minutes give ten times the pairs; it writes
//! `target/bench-results/http_server_toggle.json`.
//! `HTTP_BENCH_SNAPSHOT=SECS` measures a flight-recorder snapshot of
//! `SECS` seconds of this load instead (latency, size, CPU while it is
//! written; `HTTP_BENCH_ROUNDS` runs, default 3; see `snapshot_runs`).
//! `HTTP_BENCH_SWITCH=A,B` compares any two modes the same way: two
//! servers, each with its own wrk, only one running at a time (the other
//! wrk stopped), adjacent windows of each in alternating order, both
//! servers started anew every `HTTP_BENCH_RESTART` rounds (default 5;
//! two processes of one build differ by a few percent, see
//! `switch_rounds`); it writes `target/bench-results/http_server_switch.json`.
//! Not run by CI: it measures time.
//!
//! To profile one server by hand: `RUNTRACE_HTTP_SERVER=record
//! target/release/deps/http_server-HASH` prints `port N`, serves until its
//! standard input closes, and answers a `mark` line with its CPU time and
//! request count (then `perf record -g -p PID` while `wrk` runs). With
//! `HTTP_BENCH_KEEP_TRACE=1` a recording server keeps its trace and says
//! where on stderr. With `sysctl -w kernel.bpf_stats_enabled=1` (root) the
//! bench also prints the time the kernel spent in each mode's BPF program
//! per request (the CPU profile's off-CPU program in `record_cpu`).

mod common;

use axum::{routing::get, Router};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SERVER_ENV: &str = "RUNTRACE_HTTP_SERVER";

/// With `--features alloc`, allocations go through runtrace's sampling
/// wrapper (mode `toggle`'s `record_mem` samples them).
#[cfg(feature = "alloc")]
#[global_allocator]
static ALLOC: runtrace::alloc::Sampled<std::alloc::System> =
    runtrace::alloc::Sampled::new(std::alloc::System);

fn main() {
    match std::env::var(SERVER_ENV) {
        Ok(mode) => serve(&mode),
        Err(_) => drive(),
    }
}

// ---------------------------------------------------------------- server

/// How an instrumented server learns of tokio's wakes (the server sets no
/// tracing subscriber of its own): `*_layer` modes through
/// `runtrace_tokio::layer()` in a `tracing_subscriber` registry (what an
/// application with its own logging does), `record_no_wakes` not at all,
/// the others through runtrace's minimal global subscriber
/// (`runtrace_tokio::wakes::install_global`), the path `instrument` took
/// by default before issue 34, so their figures stay comparable.
fn wakes_for(mode: &str) {
    use tracing_subscriber::prelude::*;
    if mode.ends_with("_layer") {
        tracing_subscriber::registry()
            .with(runtrace_tokio::layer())
            .init();
    } else if mode != "record_no_wakes" {
        assert!(
            runtrace_tokio::wakes::install_global(),
            "no other global tracing subscriber in this process"
        );
    }
}

/// The child: serves `GET /` until stdin closes; `mark` lines are answered
/// with `mark CPU_NS REQUESTS`.
fn serve(mode: &str) {
    if let Some(cpu) = pinned_cpus().map(|(server, _)| server) {
        pin_self(cpu);
    }
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2).enable_all();
    if mode == "floor_fire" {
        floor::install_fire(&mut b);
    } else if mode.starts_with("floor") {
        floor::install(&mut b, mode != "floor_no_clock");
        if mode == "floor_wakes" {
            floor::install_wakes::<false>();
        }
    } else if !mode.starts_with("plain") {
        runtrace_tokio::instrument(&mut b);
        wakes_for(mode);
    }
    let rt = b.build().expect("build the server's runtime");
    let dir = std::env::temp_dir().join(format!("runtrace-http-bench-{}", std::process::id()));
    // `mem`: memory profiling at the default rate (docs/memory.md);
    // `flight`: the flight recorder, in memory within a 256 MiB budget
    // (docs/flight-recorder.md), where file mode writes the same 256 MiB.
    let start_with = |cpu: bool, mem: bool, flight: bool| {
        let b = runtrace_recorder::Recorder::builder()
            .path(dir.join("trace"))
            .max_file_size(64 << 20)
            .max_total_size(256 << 20)
            .cpu_profile(if cpu { 99 } else { 0 })
            .memory_profile(if mem { 512 * 1024 } else { 0 });
        // `HTTP_BENCH_SNAPSHOT`'s snapshots keep 30 s before the trigger
        // (the default) and 1 s after it.
        let b = if flight {
            b.in_memory(256 << 20)
                .snapshot_window(Duration::from_secs(30), Duration::from_secs(1))
        } else {
            b
        };
        b.start().expect("start recording")
    };
    let start = |cpu: bool| start_with(cpu, false, false);
    let mut guard = (mode.starts_with("record") || mode == "floor_fire")
        .then(|| start(mode.starts_with("record_cpu")));
    let served = Arc::new(AtomicU64::new(0));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind a loopback port");
    let port = listener.local_addr().expect("local address").port();
    let counter = served.clone();
    let app = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { "Hello, World!" }
        }),
    );
    // The server runs as a spawned task: `block_on`'s own future is not
    // polled through the runtime's task hooks.
    rt.spawn(async move { axum::serve(listener, app).await });
    println!("port {port}");
    let _ = std::io::stdout().flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        // Mode `toggle` (see `toggle_rounds`): recording starts and stops
        // on request, in this one process; `ok` says when it is done.
        let cmd = line.trim();
        if mode == "toggle"
            && matches!(
                cmd,
                "idle" | "record" | "record_cpu" | "record_mem" | "record_flight"
            )
        {
            if let Some(g) = guard.take() {
                let st = g.finish().expect("finish recording");
                if st.dropped != 0 {
                    eprintln!("  warning: the recorder dropped {} events", st.dropped);
                }
                if std::env::var_os("HTTP_BENCH_KEEP_TRACE").is_none() {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            if cmd != "idle" {
                guard = Some(start_with(
                    cmd == "record_cpu",
                    cmd == "record_mem",
                    cmd == "record_flight",
                ));
            }
            println!("ok");
            let _ = std::io::stdout().flush();
        }
        // `HTTP_BENCH_SNAPSHOT` (see `snapshot_runs`): a flight-recorder
        // snapshot now, answered when its directory appears (it is created
        // under a temporary name and renamed when complete).
        if cmd == "snapshot" {
            let g = guard.as_ref().expect("snapshot: record_flight first");
            let t0 = std::time::Instant::now();
            g.snapshot("bench");
            let snap = loop {
                let found = std::fs::read_dir(&dir).ok().and_then(|d| {
                    d.flatten().map(|e| e.path()).find(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("snapshot-"))
                    })
                });
                if let Some(p) = found {
                    break p;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            let took = t0.elapsed();
            let (mut bytes, mut files) = (0, 0);
            for e in std::fs::read_dir(&snap)
                .expect("read the snapshot")
                .flatten()
            {
                bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                files += 1;
            }
            println!(
                "snapshot {} {bytes} {files} {}",
                took.as_micros(),
                snap.display()
            );
            let _ = std::io::stdout().flush();
        }
        if cmd == "mark" {
            println!(
                "mark {} {} {} {} {}",
                own_cpu_ns(),
                served.load(Ordering::Relaxed),
                own_switches(),
                own_user_ns(),
                own_bpf_ns()
            );
            let _ = std::io::stdout().flush();
        }
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Some(g) = guard {
        let st = g.finish().expect("finish recording");
        println!(
            "events {} dropped {} bytes {}",
            st.events, st.dropped, st.bytes
        );
    }
    if std::env::var_os("HTTP_BENCH_KEEP_TRACE").is_some() {
        eprintln!("trace kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Mode `floor_hooks`: tokio's poll and park hooks doing the least a
/// tracer can do with them, as a yardstick for runtrace's own (issue 11).
/// Each hook reads the recorder's clock ([`TraceClock::now`], one `rdtsc`
/// and a shift) and stores it with a tag and the task id, 16 bytes, in a
/// thread-local array that wraps. Nothing reads the array: a real tracer
/// must also get the bytes out, name the worker and say who woke whom, so
/// this is a lower bound, not a design.
mod floor {
    use runtrace_core::clock::TraceClock;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Event, Metadata, Subscriber};

    /// u64 slots per thread: 64 KiB, two per event.
    const SLOTS: usize = 8192;

    thread_local! {
        static AT: Cell<usize> = const { Cell::new(0) };
        static EVENTS: [Cell<u64>; SLOTS] = const { [const { Cell::new(0) }; SLOTS] };
    }

    #[inline]
    fn note(clock: Option<&TraceClock>, tag: u64, task: u64) {
        let at = AT.get();
        // Without the clock: a value that still changes per event.
        let now = clock.map_or(at as u64, |c| c.now());
        EVENTS.with(|e| {
            e[at].set(now);
            e[at + 1].set(tag << 56 | task);
        });
        AT.set((at + 2) % SLOTS);
    }

    /// Installs the four hooks on `b`, reading the clock if `clock`.
    pub fn install(b: &mut tokio::runtime::Builder, clock: bool) {
        let clock = clock.then(TraceClock::get);
        b.on_before_task_poll(move |m| note(clock, 1, runtrace_tokio::task_id(m.id())))
            .on_after_task_poll(move |m| note(clock, 2, runtrace_tokio::task_id(m.id())))
            .on_thread_park(move || note(clock, 3, 0))
            .on_thread_unpark(move || note(clock, 4, 0));
    }

    /// Mode `floor_wakes` (and `floor_fire`, with `FIRE`): installs
    /// [`Wakes`] as the global tracing subscriber, so tokio (`--cfg
    /// tokio_unstable`, its `tracing` feature) reports every waker
    /// operation of every task.
    pub fn install_wakes<const FIRE: bool>() {
        tracing::dispatcher::set_global_default(tracing::Dispatch::new(Wakes::<FIRE>))
            .expect("floor modes: no other global tracing subscriber in this process");
    }

    /// Mode `floor_fire`: the hooks of [`install`] and the subscriber of
    /// [`install_wakes`], each firing runtrace's event through its probe
    /// (as runtrace's hooks do once they have their fields) instead of
    /// storing 16 bytes: worker 0, no queue depth, no waking task, no
    /// thread times.
    pub fn install_fire(b: &mut tokio::runtime::Builder) {
        use runtrace_probes::builtin as p;
        b.on_before_task_poll(|m| {
            if p::task_poll_start::enabled() {
                p::task_poll_start::fire(p::task_poll_start::Args {
                    task_id: runtrace_tokio::task_id(m.id()),
                    worker: 0,
                    queue: runtrace_core::Istr::EMPTY,
                    local_q: 0,
                });
            }
        })
        .on_after_task_poll(|m| {
            if p::task_poll_end::enabled() {
                p::task_poll_end::fire(p::task_poll_end::Args {
                    task_id: runtrace_tokio::task_id(m.id()),
                    worker: 0,
                    ready: false,
                });
            }
        })
        .on_thread_park(|| {
            if p::worker_park::enabled() {
                p::worker_park::fire(p::worker_park::Args {
                    worker: 0,
                    local_q: 0,
                    cpu_ns: 0,
                });
            }
        })
        .on_thread_unpark(|| {
            if p::worker_unpark::enabled() {
                p::worker_unpark::fire(p::worker_unpark::Args {
                    worker: 0,
                    cpu_ns: 0,
                    sched_wait_ns: 0,
                });
            }
        });
        install_wakes::<true>();
    }

    /// Callsites of tokio's waker events, by their metadata's address,
    /// learnt from their first event (tokio has one callsite per
    /// operation): slots 0-3 report no wake (clones and drops: disabled),
    /// 4-7 report wakes (read for their one u64 field, `task.id`, alone).
    static CALLSITES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

    fn slots(wakes: bool) -> &'static [AtomicUsize] {
        if wakes {
            &CALLSITES[4..]
        } else {
            &CALLSITES[..4]
        }
    }

    fn known(m: &Metadata<'_>, wakes: bool) -> bool {
        let a = m as *const Metadata<'_> as usize;
        slots(wakes).iter().any(|s| s.load(Ordering::Relaxed) == a)
    }

    #[cold]
    fn learn(m: &Metadata<'_>, wakes: bool) {
        let a = m as *const Metadata<'_> as usize;
        let _ = slots(wakes).iter().any(|s| {
            s.compare_exchange(0, a, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        });
        if !wakes {
            tracing::callsite::rebuild_interest_cache();
        }
    }

    /// The least a tracing subscriber can do to learn of each wake from
    /// stock tokio: it enables tokio's `runtime.spawn` task spans (tokio
    /// then names a waker event's task by its span's id, which this sets
    /// to the tokio task id) and waker events, disables the callsites of
    /// waker clones and drops after their first event, and stores each
    /// wake's time and task id like the hooks' events (or, if `FIRE`,
    /// fires runtrace's WakeEvent). It does not name the waking task or
    /// the worker, as a real tracer must.
    pub struct Wakes<const FIRE: bool>;

    /// Reads a waker event's or task span's `task.id`, and whether the
    /// operation is a wake.
    #[derive(Default)]
    struct Fields {
        task: u64,
        wake: bool,
    }

    impl Visit for Fields {
        fn record_u64(&mut self, f: &Field, v: u64) {
            if f.name() == "task.id" {
                self.task = v;
            }
        }
        fn record_str(&mut self, _: &Field, v: &str) {
            self.wake = v == "waker.wake" || v == "waker.wake_by_ref";
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    /// Reads a learnt wake callsite's event: its one u64 field.
    struct TaskOnly(u64);

    impl Visit for TaskOnly {
        fn record_u64(&mut self, _: &Field, v: u64) {
            self.0 = v;
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    fn is_task_span(m: &Metadata<'_>) -> bool {
        m.is_span() && m.name() == "runtime.spawn"
    }

    fn is_waker_event(m: &Metadata<'_>) -> bool {
        m.is_event() && m.target() == "tokio::task::waker"
    }

    impl<const FIRE: bool> Subscriber for Wakes<FIRE> {
        fn register_callsite(&self, m: &'static Metadata<'static>) -> Interest {
            if is_task_span(m) || (is_waker_event(m) && !known(m, false)) {
                Interest::always()
            } else {
                Interest::never()
            }
        }
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            is_task_span(m) || is_waker_event(m)
        }
        fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
            Some(tracing::level_filters::LevelFilter::TRACE)
        }
        fn new_span(&self, attrs: &Attributes<'_>) -> Id {
            let mut f = Fields::default();
            attrs.record(&mut f);
            Id::from_u64(f.task.max(1))
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, ev: &Event<'_>) {
            let m = ev.metadata();
            let task = if known(m, true) {
                let mut t = TaskOnly(0);
                ev.record(&mut t);
                t.0
            } else {
                let mut f = Fields::default();
                ev.record(&mut f);
                learn(m, f.wake);
                if !f.wake {
                    return;
                }
                f.task
            };
            if !FIRE {
                note(Some(TraceClock::get()), 5, task);
            } else if runtrace_probes::builtin::task_wake::enabled() {
                use runtrace_probes::builtin::task_wake as w;
                w::fire(w::Args {
                    woken_task_id: task,
                    waker_task_id: 0,
                    worker: 0,
                });
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

/// `HTTP_BENCH_PIN=1`: (the server's CPU, wrk's CPU): the server
/// process (workers and recorder alike) on CPU 1, wrk on CPU 0, so the two
/// do not trade places on the cores from one run to the next.
fn pinned_cpus() -> Option<(usize, usize)> {
    (env_u64("HTTP_BENCH_PIN", 0) != 0).then_some((1, 0))
}

/// Pins this process (and the threads it starts later) to `cpu`.
fn pin_self(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes
    // inside it for cpu < CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of the size passed; pid 0 is the calling thread,
    // which the runtime's threads inherit the mask from.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        eprintln!(
            "HTTP_BENCH_PIN: cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Context switches (voluntary and not) of this whole process so far.
fn own_switches() -> u64 {
    // SAFETY: as in `own_cpu_ns`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as in `own_cpu_ns`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_nvcsw + ru.ru_nivcsw) as u64
}

/// User CPU time of this whole process (all threads), ns: the part
/// callgrind's instruction counts describe.
fn own_user_ns() -> u64 {
    // SAFETY: as in `own_cpu_ns`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as in `own_cpu_ns`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_utime.tv_sec as u64 * 1_000_000 + ru.ru_utime.tv_usec as u64) * 1000
}

/// Time the kernel spent running this process's BPF programs (the CPU
/// profile's off-CPU program), ns: the `run_time_ns` the kernel keeps per
/// program while `kernel.bpf_stats_enabled` is 1 (0 otherwise). The
/// program runs at every context switch of the machine, in whichever task
/// switches out, so this counts other processes' switches too.
fn own_bpf_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .filter(|t| t.contains("prog_type:"))
        .filter_map(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("run_time_ns:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// User + system CPU time of this whole process (all threads), ns.
fn own_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage through a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

// ---------------------------------------------------------------- driver

/// One measured run of one mode.
#[derive(Clone, Copy, Debug)]
struct Run {
    cpu_per_request_ns: f64,
    throughput: f64,
    p99_us: f64,
    events_per_request: f64,
    switches_per_request: f64,
    user_cpu_per_request_ns: f64,
    /// ns of BPF program run time per request (see `own_bpf_ns`).
    bpf_per_request_ns: f64,
}

/// `HTTP_BENCH_BASE=PATH`: another build of this bench (of the commit
/// before a change, say), whose servers run the modes named `MODE@base` in
/// `HTTP_BENCH_MODES`, in the same rounds as this build's: a before/after
/// comparison paired round by round. `None` when unset; exits when it
/// names no file.
fn base_exe() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from(std::env::var_os("HTTP_BENCH_BASE")?);
    if !p.is_file() {
        eprintln!("HTTP_BENCH_BASE={}: no such file", p.display());
        std::process::exit(2);
    }
    Some(p)
}

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl Server {
    fn start(mode: &str) -> Server {
        Server::start_in(mode, None)
    }

    /// Starts the server, under callgrind when `callgrind_out` is given
    /// (instruction counts; counting starts zeroed by [`Server::zero`]).
    fn start_in(mode: &str, callgrind_out: Option<&std::path::Path>) -> Server {
        // `MODE@base`: the same mode served by the `HTTP_BENCH_BASE` build.
        let (mode, exe) = match mode.strip_suffix("@base") {
            Some(m) => (m, base_exe().expect("HTTP_BENCH_BASE checked at start")),
            None => (mode, std::env::current_exe().expect("this bench's path")),
        };
        let mut cmd = match callgrind_out {
            Some(out) => {
                let mut c = Command::new("valgrind");
                c.args(["--tool=callgrind", "--quiet"])
                    .arg(format!("--callgrind-out-file={}", out.display()));
                if std::env::var_os("HTTP_BENCH_CALLGRIND_SIM").is_some_and(|v| v == "1") {
                    c.args(["--cache-sim=yes", "--branch-sim=yes"]);
                }
                c.arg(exe);
                c
            }
            None => Command::new(exe),
        };
        if mode == "record_cpu_signal" {
            cmd.env("RUNTRACE_CPU_FALLBACK", "signal");
        }
        if mode == "record_cpu_on" {
            cmd.env("RUNTRACE_CPU_OFF_CPU", "off");
        }
        if mode == "record_cpu_no_copy" {
            cmd.env("RUNTRACE_CPU_STACK_COPY", "off");
        }
        let mut child = cmd
            .env(SERVER_ENV, mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server child");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("child stdout"));
        let port = read_line(&mut stdout)
            .strip_prefix("port ")
            .and_then(|p| p.trim().parse().ok())
            .expect("the server prints `port N` first");
        Server {
            child,
            stdin,
            stdout,
            port,
        }
    }

    /// The server's (CPU ns, requests served, context switches, user CPU
    /// ns, BPF program ns) now.
    fn mark(&mut self) -> (u64, u64, u64, u64, u64) {
        let w = self.stdin.as_mut().expect("server stdin");
        writeln!(w, "mark")
            .and_then(|_| w.flush())
            .expect("ask the server");
        let l = read_line(&mut self.stdout);
        let v: Vec<u64> = l
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        match v[..] {
            [cpu, n, sw, user, bpf] => (cpu, n, sw, user, bpf),
            _ => panic!("unexpected answer from the server: {l:?}"),
        }
    }

    /// Mode `toggle`: starts or stops recording (`idle`, `record`,
    /// `record_cpu`) and waits until the server has.
    fn set(&mut self, state: &str) {
        let w = self.stdin.as_mut().expect("server stdin");
        writeln!(w, "{state}")
            .and_then(|_| w.flush())
            .expect("ask the server");
        let l = read_line(&mut self.stdout);
        assert_eq!(l.trim(), "ok", "the server's answer to {state:?}");
    }

    /// Mode `toggle` recording `record_flight`: triggers a snapshot and
    /// waits for its directory; (trigger to directory, bytes, files, path).
    fn snapshot(&mut self) -> (Duration, u64, u64, String) {
        let w = self.stdin.as_mut().expect("server stdin");
        writeln!(w, "snapshot")
            .and_then(|_| w.flush())
            .expect("ask the server");
        let l = read_line(&mut self.stdout);
        let mut f = l.trim().splitn(5, ' ').skip(1);
        let mut num = || f.next().and_then(|v| v.parse::<u64>().ok());
        match (num(), num(), num()) {
            (Some(us), Some(bytes), Some(files)) => (
                Duration::from_micros(us),
                bytes,
                files,
                l.trim().splitn(5, ' ').nth(4).unwrap_or("").to_string(),
            ),
            _ => panic!("unexpected answer from the server: {l:?}"),
        }
    }

    /// callgrind: zeroes the counts (`callgrind_control -z`).
    fn zero(&self) {
        callgrind_control("-z", self.child.id());
    }

    /// callgrind: writes the counts since the last zeroing
    /// (`callgrind_control -d`).
    fn dump(&self) {
        callgrind_control("-d", self.child.id());
    }

    /// Closes stdin and waits; returns the events recorded (0 if none).
    fn stop(mut self) -> u64 {
        drop(self.stdin.take());
        let mut events = 0;
        loop {
            let l = read_line(&mut self.stdout);
            if l.is_empty() {
                break;
            }
            if let Some(rest) = l.strip_prefix("events ") {
                events = rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                // `events N dropped D bytes B`
                let fields: Vec<&str> = rest.split_whitespace().collect();
                if fields.get(2).is_some_and(|d| *d != "0") {
                    eprintln!("  warning: the recorder dropped events: {}", l.trim());
                }
            }
        }
        let _ = self.child.wait();
        events
    }
}

fn callgrind_control(op: &str, pid: u32) {
    let st = Command::new("callgrind_control")
        .args([op, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run callgrind_control");
    assert!(st.success(), "callgrind_control {op} {pid} failed");
}

/// The counts of a callgrind dump, by event name (`Ir`, and with
/// `HTTP_BENCH_CALLGRIND_SIM=1` the simulated cache misses `I1mr`,
/// `D1mr`, `D1mw`, ... and branch mispredictions `Bcm`, `Bim`): its
/// `events:` line and its `summary:` or `totals:` line.
fn callgrind_counts(path: &std::path::Path) -> Option<Vec<(String, u64)>> {
    let text = std::fs::read_to_string(path).ok()?;
    let names = text.lines().find_map(|l| l.strip_prefix("events:"))?;
    let values = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:").or(l.strip_prefix("totals:")))?;
    let values: Vec<u64> = values
        .split_whitespace()
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    Some(
        names
            .split_whitespace()
            .map(str::to_owned)
            .zip(values)
            .collect(),
    )
}

/// callgrind's simulated first-level cache misses (instruction fetch,
/// data read, data write) and branch mispredictions (conditional,
/// indirect), printed per request with `HTTP_BENCH_CALLGRIND_SIM=1`.
const SIM_EVENTS: [&str; 5] = ["I1mr", "D1mr", "D1mw", "Bcm", "Bim"];

/// `HTTP_BENCH_CALLGRIND=1`: instructions per request of each mode's
/// server under callgrind (user-space instructions only: no kernel time,
/// and a TSC read or a syscall counts as one instruction), between two
/// marks while wrk loads it. Deterministic where time is noisy: the
/// figure for code paths that make no syscalls, such as the hooks of a
/// runtime that is not recording.
fn callgrind_rounds(modes: &[&str], rounds: usize, secs: u64) {
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("HTTP_BENCH_CALLGRIND=1 needs valgrind: apt-get install valgrind");
        std::process::exit(2);
    }
    // `HTTP_BENCH_CALLGRIND_DIR=D` keeps the dumps in D, for
    // `callgrind_annotate D/cg.ROUND.MODE.*.1`.
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = std::env::var_os("HTTP_BENCH_CALLGRIND_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let _ = std::fs::create_dir_all(&dir);
    let dir = dir.as_path();
    let mut per_mode: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        for k in 0..modes.len() {
            let m = (round + k) % modes.len();
            let out = dir.join(format!("cg.{round}.{m}"));
            let mut server = Server::start_in(modes[m], Some(&out));
            // Warm-up: valgrind translates the hot code first.
            load(server.port, secs);
            server.zero();
            let (_, n0, _, _, _) = server.mark();
            load(server.port, secs);
            let (_, n1, _, _, _) = server.mark();
            server.dump();
            server.stop();
            // `-d` writes OUT.1 (the dump); exit writes OUT itself.
            let dump = std::fs::read_dir(dir)
                .expect("read the callgrind directory")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with(&format!("cg.{round}.{m}.")) && n.ends_with(".1")
                    })
                })
                .unwrap_or_else(|| out.with_extension(format!("{m}.1")));
            let counts = callgrind_counts(&dump)
                .unwrap_or_else(|| panic!("no instruction count in {}", dump.display()));
            let requests = (n1 - n0).max(1) as f64;
            let per = counts
                .iter()
                .find(|(n, _)| n == "Ir")
                .map(|(_, v)| *v as f64 / requests)
                .unwrap_or_else(|| panic!("no Ir count in {}", dump.display()));
            // The simulated misses and mispredictions, when asked for.
            let sim: Vec<String> = counts
                .iter()
                .filter(|(n, _)| SIM_EVENTS.contains(&n.as_str()))
                .map(|(n, v)| format!(" {n} {:.1}", *v as f64 / requests))
                .collect();
            println!(
                "round {round} {:<11} {per:>9.0} instructions per request ({} requests){}",
                modes[m],
                n1 - n0,
                sim.concat()
            );
            per_mode[m].push(per);
        }
    }
    for (m, mode) in modes.iter().enumerate().skip(1) {
        let ratios: Vec<f64> = per_mode[m]
            .iter()
            .zip(&per_mode[0])
            .map(|(a, p)| a / p)
            .collect();
        let list: Vec<String> = ratios.iter().map(|r| format!("{r:.4}")).collect();
        println!(
            "instructions per request {mode:<11} median ratio vs plain {:.4}  (pairs: {})",
            median(ratios),
            list.join(" ")
        );
    }
}

fn read_line(r: &mut impl BufRead) -> String {
    let mut s = String::new();
    let _ = r.read_line(&mut s);
    s
}

/// Loads the server for `secs` seconds: with wrk, or at a steady rate
/// with `HTTP_BENCH_RATE`; (requests/s, p99 µs).
fn load(port: u16, secs: u64) -> (f64, f64) {
    match env_u64("HTTP_BENCH_RATE", 0) {
        0 => wrk(port, secs),
        rate => paced(port, secs, rate),
    }
}

/// The request the paced client sends (what `wrk` sends, less its
/// headers).
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// `HTTP_BENCH_RATE=R`: R requests a second at a steady pace for `secs`
/// seconds, from R / 1000 keep-alive connections that each send one
/// request per millisecond (tokio's timer step) and wait for its answer;
/// (requests/s served, p99 µs from send to answer).
///
/// Why: under `wrk` the server runs flat out beside wrk on 2 cores, and
/// how many requests each wake-up serves changes from second to second,
/// so its CPU per request does too (~10% from one 1 s window to the next,
/// where the machine's speed varies ~4%). At a fixed pace below
/// saturation the server serves the same bursts every millisecond.
fn paced(port: u16, secs: u64, rate: u64) -> (f64, f64) {
    use tokio::net::TcpStream;
    use tokio::time::{Instant, MissedTickBehavior};
    let conns = (rate / 1000).max(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the paced client's runtime");
    rt.block_on(async move {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let clients: Vec<_> = (0..conns)
            .map(|_| {
                tokio::spawn(async move {
                    let s = TcpStream::connect(("127.0.0.1", port))
                        .await
                        .expect("connect to the server");
                    let _ = s.set_nodelay(true);
                    let mut tick = tokio::time::interval(Duration::from_millis(1));
                    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
                    let (mut lat, mut buf) = (Vec::new(), vec![0u8; 4096]);
                    while Instant::now() < deadline {
                        tick.tick().await;
                        let t0 = Instant::now();
                        exchange(&s, &mut buf).await;
                        lat.push(t0.elapsed().as_secs_f64() * 1e6);
                    }
                    lat
                })
            })
            .collect();
        let mut lat = Vec::new();
        for c in clients {
            lat.extend(c.await.expect("a paced client"));
        }
        lat.sort_by(f64::total_cmp);
        let p99 = common::pct(&lat, 99.0);
        (lat.len() as f64 / secs as f64, p99)
    })
}

/// Sends [`REQUEST`] on `s` and reads one whole answer (headers, then
/// `content-length` bytes of body).
async fn exchange(s: &tokio::net::TcpStream, buf: &mut [u8]) {
    let mut sent = 0;
    while sent < REQUEST.len() {
        s.writable().await.expect("socket writable");
        match s.try_write(&REQUEST[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("send to the server: {e}"),
        }
    }
    let mut got = 0;
    loop {
        s.readable().await.expect("socket readable");
        match s.try_read(&mut buf[got..]) {
            Ok(0) => panic!("the server closed the connection"),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => panic!("read from the server: {e}"),
        }
        if answer_len(&buf[..got]).is_some_and(|len| got >= len) {
            return;
        }
    }
}

/// The length of the HTTP answer at the start of `b` (headers and body),
/// once its headers are complete.
fn answer_len(b: &[u8]) -> Option<usize> {
    let end = b.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&b[..end]).ok()?;
    let body: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    Some(end + body)
}

/// Runs wrk for `secs` seconds; (requests/s, p99 µs).
fn wrk(port: u16, secs: u64) -> (f64, f64) {
    let out = wrk_command()
        .args(["-t1", "-c32", &format!("-d{secs}s"), "--latency"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("run wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output:\n{text}"));
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .and_then(|v| parse_wrk_duration_us(v.trim()))
        .unwrap_or_else(|| panic!("no 99% latency in wrk's output:\n{text}"));
    (rps, p99)
}

/// `wrk`, pinned to its CPU with `HTTP_BENCH_PIN=1`.
fn wrk_command() -> Command {
    match pinned_cpus() {
        Some((_, cpu)) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string(), "wrk"]);
            c
        }
        None => Command::new("wrk"),
    }
}

/// `812.00us`, `1.23ms`, `2.00s` -> µs.
fn parse_wrk_duration_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => v,
        "ms" => v * 1e3,
        "s" => v * 1e6,
        "m" => v * 60e6,
        _ => return None,
    })
}

/// With `--features usdt`: a bpftrace counting every runtrace USDT probe
/// in the server (so the USDT backend is listening too).
#[cfg(feature = "usdt")]
fn attach_all(pid: u32) -> Option<Child> {
    let exe = std::env::current_exe().ok()?;
    let script = format!(
        "usdt:{}:runtrace:* {{ @[probe] = count(); }}",
        exe.display()
    );
    let child = Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // bpftrace attaches asynchronously; give it time before measuring.
    std::thread::sleep(Duration::from_secs(3));
    Some(child)
}

/// Runs one server per mode at the same time (one for an alternating
/// round), each driven by its own wrk, and measures them over the same
/// window.
fn measure(modes: &[&str], secs: u64) -> Vec<Run> {
    let mut servers: Vec<Server> = modes.iter().map(|m| Server::start(m)).collect();
    #[cfg(feature = "usdt")]
    let mut tools: Vec<Child> = modes
        .iter()
        .zip(&servers)
        .filter(|(m, _)| **m == "record_all")
        .filter_map(|(_, s)| attach_all(s.child.id()))
        .collect();
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let wrk_all = |secs: u64| -> Vec<(f64, f64)> {
        std::thread::scope(|sc| {
            let hs: Vec<_> = ports
                .iter()
                .map(|&p| sc.spawn(move || load(p, secs)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("wrk thread"))
                .collect()
        })
    };
    // Warm-up: connections, allocator and caches settle.
    wrk_all(1);
    let m0: Vec<_> = servers.iter_mut().map(Server::mark).collect();
    let w = wrk_all(secs);
    let m1: Vec<_> = servers.iter_mut().map(Server::mark).collect();
    #[cfg(feature = "usdt")]
    for t in tools.iter_mut() {
        let _ = t.kill();
        let _ = t.wait();
    }
    let events: Vec<u64> = servers.into_iter().map(Server::stop).collect();
    (0..modes.len())
        .map(|i| {
            let ((c0, n0, s0, u0, b0), (c1, n1, s1, u1, b1), (rps, p99)) = (m0[i], m1[i], w[i]);
            Run {
                bpf_per_request_ns: b1.saturating_sub(b0) as f64 / (n1 - n0).max(1) as f64,
                user_cpu_per_request_ns: (u1 - u0) as f64 / (n1 - n0).max(1) as f64,
                cpu_per_request_ns: (c1 - c0) as f64 / (n1 - n0).max(1) as f64,
                switches_per_request: s1.saturating_sub(s0) as f64 / (n1 - n0).max(1) as f64,
                throughput: rps,
                p99_us: p99,
                // Over the whole run (warm-up included): a rough figure.
                events_per_request: events[i] as f64 / n1.max(1) as f64,
            }
        })
        .collect()
}

/// A figure of a run, by the name it has in the JSON.
type Metric = (&'static str, fn(&Run) -> f64);

fn median(v: Vec<f64>) -> f64 {
    common::median(&v)
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("{name}={v:?} is not a whole number; using {default}");
            default
        }),
        Err(_) => default,
    }
}

/// `HTTP_BENCH_SNAPSHOT=SECS` (issue 41): what a flight-recorder snapshot
/// of the HTTP bench's load costs. Per run, one server (mode `toggle`)
/// under `wrk -t1 -c32` records in memory (`record_flight`: 256 MiB budget,
/// 30 s kept before a trigger, 1 s after) for `secs` seconds and a 2 s
/// measured window, then a snapshot is triggered (`RecordingGuard::snapshot`) and the server
/// answers when the snapshot's directory appears: the time from the
/// trigger (the post-trigger second included), the snapshot's bytes and
/// files, and the CPU per request while it is written against the 2 s
/// just before the trigger (the writing is on the recorder's own thread;
/// producers never wait for it). `HTTP_BENCH_KEEP_TRACE=1` keeps the
/// snapshots (their paths are printed) for `runtrace check`'s bytes per
/// event.
fn snapshot_runs(secs: u64, runs: usize) {
    println!(
        "http_server snapshot: {runs} runs, {secs} s of load recorded in memory, then a snapshot \
         (30 s before, 1 s after), one server under wrk -t1 -c32"
    );
    for run in 0..runs {
        let mut srv = Server::start("toggle");
        let mut load = wrk_throughout(srv.port);
        std::thread::sleep(Duration::from_secs(2));
        srv.set("record_flight");
        std::thread::sleep(Duration::from_secs(secs));
        let before = measure_window(&mut srv, Duration::from_secs(2));
        let (c0, n0, ..) = srv.mark();
        let (took, bytes, files, path) = srv.snapshot();
        let (c1, n1, ..) = srv.mark();
        let during = (c1 - c0) as f64 / (n1 - n0).max(1) as f64;
        println!(
            "run {run}: trigger to snapshot directory {:.3} s (1 s of it the post-trigger period); \
             {bytes} bytes in {files} files; CPU/request {:.0} ns while writing vs {:.0} ns before \
             (ratio {:.3}); {:.0} req/s before; {path}",
            took.as_secs_f64(),
            during,
            before.cpu_per_request_ns,
            during / before.cpu_per_request_ns,
            before.throughput
        );
        srv.set("idle");
        let _ = load.kill();
        let _ = load.wait();
        srv.stop();
    }
}

/// `wrk -t1 -c32` on `port` for an hour: load until it is killed.
fn wrk_throughout(port: u16) -> Child {
    wrk_command()
        .args(["-t1", "-c32", "-d3600s"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .stdout(Stdio::null())
        .spawn()
        .expect("run wrk")
}

/// One measured window of the toggling server.
#[derive(Clone, Copy, Debug)]
struct Window {
    cpu_per_request_ns: f64,
    user_cpu_per_request_ns: f64,
    /// Requests served per second of the window (the server's count).
    throughput: f64,
}

/// A figure of a window, by the name it has in the JSON.
type WindowMetric = (&'static str, fn(&Window) -> f64);

/// `HTTP_BENCH_TOGGLE=STATE`: one instrumented server under one wrk that
/// runs throughout, switched between two states every window: `record`
/// against `idle` (hooks installed, nothing recording), `record_cpu`
/// against `record`, or the A/A controls `idle` against `idle` and
/// `record_again` (`record` against `record`, a new recording each
/// window, as in the other comparisons). Each
/// round measures one window of each, adjacent in time, in alternating
/// order (so a drift of the machine does not favour either); a state
/// change is followed by `settle` before its window starts (the recording's
/// start, its rings' first pages and the previous recording's finish are
/// not measured). Two windows a second apart share the machine's state far
/// more than two server processes run seconds apart, which is what the
/// alternating modes compare: this resolves a cost the default mode
/// cannot. What it cannot show: the cost of the hooks themselves (both
/// states have them: `idle_hooks` against `plain` in the default mode or
/// with `HTTP_BENCH_SWITCH` measures that) and p99 latency (wrk's figure
/// covers the whole run).
fn toggle_rounds(b: &str, rounds: usize, window: Duration, settle: Duration) {
    let (a, b) = match b {
        "record" | "idle" => ("idle", b),
        "record_cpu" => ("record", b),
        "record_mem" if cfg!(feature = "alloc") => ("record", b),
        "record_mem" => {
            eprintln!(
                "HTTP_BENCH_TOGGLE=record_mem needs --features alloc (the sampling allocator)"
            );
            std::process::exit(2);
        }
        "record_again" => ("record", "record"),
        // The flight recorder in memory against file mode (issue 41).
        "record_flight" => ("record", b),
        other => {
            eprintln!(
                "HTTP_BENCH_TOGGLE={other:?}: expected record, record_cpu, record_mem, record_flight, idle or record_again"
            );
            std::process::exit(2);
        }
    };
    let mut srv = Server::start("toggle");
    // Killed after the last window.
    let mut load = wrk_throughout(srv.port);
    println!(
        "http_server toggle: {rounds} rounds of two windows, {b} against {a} ({} ms each, {} ms \
         after each switch), one server under wrk -t1 -c32",
        window.as_millis(),
        settle.as_millis()
    );
    // Warm-up: connections, allocator and caches settle.
    std::thread::sleep(Duration::from_secs(2));
    let pairs = paired_windows(a, b, 0..rounds, |_, state: &str| -> Window {
        srv.set(state);
        std::thread::sleep(settle);
        measure_window(&mut srv, window)
    });
    srv.set("idle");
    let _ = load.kill();
    let _ = load.wait();
    srv.stop();
    report_pairs("toggle", a, b, &pairs, "http_server_toggle.json");
}

/// One window of `srv` under load: its CPU time and requests served over
/// `window`, by its own count.
fn measure_window(srv: &mut Server, window: Duration) -> Window {
    let (c0, n0, _, u0, _) = srv.mark();
    let t0 = std::time::Instant::now();
    std::thread::sleep(window);
    let (c1, n1, _, u1, _) = srv.mark();
    let secs = t0.elapsed().as_secs_f64();
    let n = (n1 - n0).max(1) as f64;
    Window {
        cpu_per_request_ns: (c1 - c0) as f64 / n,
        user_cpu_per_request_ns: (u1 - u0) as f64 / n,
        throughput: n / secs,
    }
}

/// Pairs of adjacent windows of `a` and `b`, one per round, measured by
/// `measure(0, a)` and `measure(1, b)`, in alternating order (so a drift
/// of the machine favours neither), each pair printed as it comes.
fn paired_windows(
    a: &str,
    b: &str,
    rounds: std::ops::Range<usize>,
    mut measure: impl FnMut(usize, &str) -> Window,
) -> Vec<(Window, Window)> {
    let mut pairs = Vec::with_capacity(rounds.len());
    for round in rounds {
        let (x, y) = if round % 2 == 0 {
            let x = measure(0, a);
            (x, measure(1, b))
        } else {
            let y = measure(1, b);
            (measure(0, a), y)
        };
        println!(
            "round {round} {a:<10} cpu/request {:>6.0} ns {:>8.0} req/s   {b:<10} cpu/request {:>6.0} ns {:>8.0} req/s   ratio {:.3}",
            x.cpu_per_request_ns,
            x.throughput,
            y.cpu_per_request_ns,
            y.throughput,
            y.cpu_per_request_ns / x.cpu_per_request_ns
        );
        pairs.push((x, y));
    }
    pairs
}

/// Prints the paired ratios `b` / `a` (median, geometric mean and its 95%
/// interval) of every window figure and the median paired difference of
/// CPU per request, and writes them to `target/bench-results/FILE` as
/// `{"KIND": b, "against": a, "pairs": n, "cpu_per_request": r,
/// "cpu_per_request_ci95": [lo, hi], ...}`.
fn report_pairs(kind: &str, a: &str, b: &str, pairs: &[(Window, Window)], file: &str) {
    let rounds = pairs.len();
    let metrics: [WindowMetric; 3] = [
        ("cpu_per_request", |w| w.cpu_per_request_ns),
        ("user_cpu_per_request", |w| w.user_cpu_per_request_ns),
        ("throughput", |w| w.throughput),
    ];
    let mut json = format!("{{\"{kind}\": \"{b}\", \"against\": \"{a}\", \"pairs\": {rounds}");
    for (name, f) in metrics {
        let ratios: Vec<f64> = pairs.iter().map(|(x, y)| f(y) / f(x)).collect();
        let med = median(ratios.clone());
        let (gm, lo, hi) = common::geomean_ci95(&ratios);
        println!(
            "{name:<20} {b} vs {a}: median ratio {med:.4}, geometric mean {gm:.4} (95% CI {lo:.4}-{hi:.4})"
        );
        json += &format!(", \"{name}\": {med:.4}, \"{name}_ci95\": [{lo:.4}, {hi:.4}]");
    }
    let base = median(pairs.iter().map(|(x, _)| x.cpu_per_request_ns).collect());
    let diff = median(
        pairs
            .iter()
            .map(|(x, y)| y.cpu_per_request_ns - x.cpu_per_request_ns)
            .collect(),
    );
    println!("{a}: median {base:.0} ns CPU per request; {b} - {a}: median of paired differences {diff:+.0} ns");
    json += "}\n";
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    let _ = std::fs::create_dir_all(&out);
    let file = out.join(file);
    match std::fs::write(&file, &json) {
        Ok(()) => println!("wrote {}", file.display()),
        Err(e) => eprintln!("could not write {}: {e}", file.display()),
    }
}

/// Sends `sig` (`libc::SIGSTOP` or `libc::SIGCONT`) to a load generator.
fn signal(load: &Child, sig: libc::c_int) {
    // SAFETY: `kill` has no memory effects; the pid is our own child's,
    // not yet waited for, so it cannot name another process.
    let r = unsafe { libc::kill(load.id() as libc::pid_t, sig) };
    assert_eq!(
        r,
        0,
        "signal {sig} to wrk: {}",
        std::io::Error::last_os_error()
    );
}

/// Two servers for [`switch_rounds`], each with its own wrk, which is
/// stopped (`SIGSTOP`) except during its server's windows.
struct TwoServers {
    servers: [Server; 2],
    loads: [Child; 2],
}

impl TwoServers {
    /// Starts both, and warms each up alone for a second (connections,
    /// allocators, caches).
    fn start(a: &str, b: &str) -> TwoServers {
        let servers = [Server::start(a), Server::start(b)];
        let loads = [0, 1].map(|i| {
            wrk_command()
                // A stopped wrk must not count its requests as timed out.
                .args(["-t1", "-c32", "-d3600s", "--timeout", "10s"])
                .arg(format!("http://127.0.0.1:{}/", servers[i].port))
                .stdout(Stdio::null())
                .spawn()
                .expect("run wrk")
        });
        signal(&loads[1], libc::SIGSTOP);
        std::thread::sleep(Duration::from_secs(1));
        signal(&loads[0], libc::SIGSTOP);
        signal(&loads[1], libc::SIGCONT);
        std::thread::sleep(Duration::from_secs(1));
        signal(&loads[1], libc::SIGSTOP);
        TwoServers { servers, loads }
    }

    /// One window of server `i`: its wrk resumes, `settle` passes, the
    /// window is measured, its wrk stops.
    fn window(&mut self, i: usize, settle: Duration, window: Duration) -> Window {
        signal(&self.loads[i], libc::SIGCONT);
        std::thread::sleep(settle);
        let w = measure_window(&mut self.servers[i], window);
        signal(&self.loads[i], libc::SIGSTOP);
        w
    }

    fn stop(self) {
        let TwoServers { servers, loads } = self;
        for mut load in loads {
            signal(&load, libc::SIGCONT);
            let _ = load.kill();
            let _ = load.wait();
        }
        for srv in servers {
            srv.stop();
        }
    }
}

/// `HTTP_BENCH_SWITCH=A,B`: two servers, in modes `A` and `B` (any of the
/// default mode's, `MODE@base` included), each with its own wrk that runs
/// throughout but is stopped (`SIGSTOP`) except during its server's
/// windows: adjacent windows of the two, in alternating order, as in
/// [`toggle_rounds`], so any two modes are compared window by window;
/// `plain` against `record` is issue 11's figure itself, `plain` against
/// `idle_hooks` the hooks' own cost, and `record` against `record@base` a
/// before/after of a change. Each window starts `settle` after its wrk
/// resumes (the server's caches warm again); a stopped wrk's connections
/// stay open and idle, and its server's workers park. Only the loaded
/// server's CPU is measured.
///
/// Two processes of one build are not equally fast (where their code and
/// data landed in memory, their threads' placement): with one pair of
/// `plain` servers for the whole run, an A/A run measured 0.970 (95% CI
/// 0.952-0.988) over 200 rounds. So both servers are started anew every
/// `HTTP_BENCH_RESTART` rounds (default 5), and a run's interval covers
/// that spread too: the same A/A run so, 300 rounds, 0.999 (0.987-1.016).
/// Writes `target/bench-results/http_server_switch.json`.
fn switch_rounds(spec: &str, rounds: usize, window: Duration, settle: Duration) {
    let known = TIMED_MODES;
    let modes: Vec<&str> = spec.split(',').map(str::trim).collect();
    let [a, b] = modes[..] else {
        eprintln!("HTTP_BENCH_SWITCH={spec:?}: expected two modes, A,B (e.g. plain,record)");
        std::process::exit(2);
    };
    for m in [a, b] {
        let (name, base) = match m.strip_suffix("@base") {
            Some(n) => (n, true),
            None => (m, false),
        };
        if !known.contains(&name) {
            eprintln!(
                "HTTP_BENCH_SWITCH: unknown mode {m:?} (known: {}, each optionally @base)",
                known.join(", ")
            );
            std::process::exit(2);
        }
        if base && base_exe().is_none() {
            eprintln!(
                "HTTP_BENCH_SWITCH: {m:?} needs HTTP_BENCH_BASE=PATH (another build of this bench)"
            );
            std::process::exit(2);
        }
    }
    let restart = env_u64("HTTP_BENCH_RESTART", 5).max(1) as usize;
    println!(
        "http_server switch: {rounds} rounds of two windows, {b} against {a} ({} ms each, {} ms \
         after each switch), two servers each with its own wrk -t1 -c32, one running at a time, \
         both started anew every {restart} rounds",
        window.as_millis(),
        settle.as_millis()
    );
    let mut pairs = Vec::with_capacity(rounds);
    let mut first = 0;
    while first < rounds {
        let last = (first + restart).min(rounds);
        let mut two = TwoServers::start(a, b);
        pairs.extend(paired_windows(a, b, first..last, |i, _| {
            two.window(i, settle, window)
        }));
        two.stop();
        first = last;
    }
    report_pairs("switch", a, b, &pairs, "http_server_switch.json");
}

/// The modes every timed comparison knows (`record_all` and `plain_again`
/// only the default mode).
const TIMED_MODES: [&str; 14] = [
    "plain",
    "idle_hooks",
    "idle_layer",
    "record_layer",
    "floor_hooks",
    "floor_no_clock",
    "floor_wakes",
    "floor_fire",
    "record",
    "record_no_wakes",
    "record_cpu",
    "record_cpu_on",
    "record_cpu_no_copy",
    "record_cpu_signal",
];

fn drive() {
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!(
            "http_server bench: `wrk` is not installed. Install it with `apt-get install wrk` \
             (Debian/Ubuntu), then run `cargo bench --bench http_server` again."
        );
        std::process::exit(2);
    }
    // The window modes: rounds of two adjacent windows.
    let windows = || {
        (
            env_u64("HTTP_BENCH_ROUNDS", 40).max(1) as usize,
            Duration::from_millis(env_u64("HTTP_BENCH_WINDOW_MS", 1000).max(10)),
            Duration::from_millis(env_u64("HTTP_BENCH_SETTLE_MS", 300)),
        )
    };
    if let Ok(spec) = std::env::var("HTTP_BENCH_SWITCH") {
        let (rounds, window, settle) = windows();
        switch_rounds(&spec, rounds, window, settle);
        return;
    }
    if let Ok(secs) = std::env::var("HTTP_BENCH_SNAPSHOT") {
        let Ok(secs) = secs.parse::<u64>() else {
            eprintln!(
                "HTTP_BENCH_SNAPSHOT={secs:?}: expected whole seconds of load before the trigger"
            );
            std::process::exit(2);
        };
        snapshot_runs(secs.max(1), env_u64("HTTP_BENCH_ROUNDS", 3).max(1) as usize);
        return;
    }
    if let Ok(state) = std::env::var("HTTP_BENCH_TOGGLE") {
        let (rounds, window, settle) = windows();
        toggle_rounds(&state, rounds, window, settle);
        return;
    }
    let rounds = env_u64("HTTP_BENCH_ROUNDS", 6).max(1) as usize;
    let secs = env_u64("HTTP_BENCH_SECS", 5).max(1);
    let mut modes = TIMED_MODES.to_vec();
    let all_modes = cfg!(feature = "usdt");
    if let Ok(list) = std::env::var("HTTP_BENCH_MODES") {
        // `plain` is the reference every ratio divides by: always first.
        let mut chosen = vec!["plain"];
        for m in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let (name, base) = match m.strip_suffix("@base") {
                Some(n) => (n, true),
                None => (m, false),
            };
            if base && base_exe().is_none() {
                eprintln!("HTTP_BENCH_MODES: {m:?} needs HTTP_BENCH_BASE=PATH (another build of this bench)");
                std::process::exit(2);
            }
            let Some(&known) = modes
                .iter()
                .chain(["plain_again", "record_all"].iter())
                .find(|k| **k == name)
            else {
                eprintln!(
                    "HTTP_BENCH_MODES: unknown mode {m:?} (known: {}, plain_again, record_all)",
                    modes.join(", ")
                );
                std::process::exit(2);
            };
            if known == "record_all" && !all_modes {
                eprintln!("HTTP_BENCH_MODES: record_all needs --features usdt");
                std::process::exit(2);
            }
            // A `@base` mode's name lives as long as the bench.
            let known: &'static str = if base {
                format!("{known}@base").leak()
            } else {
                known
            };
            if !chosen.contains(&known) {
                chosen.push(known);
            }
        }
        modes = chosen;
    } else if all_modes {
        modes.push("record_all");
    } else {
        println!(
            "record_all: skipped, the recorder is the only backend compiled in \
             (build with --features usdt to attach bpftrace to every USDT probe as well)"
        );
    }
    if env_u64("HTTP_BENCH_CALLGRIND", 0) != 0 {
        callgrind_rounds(&modes, rounds, secs);
        return;
    }
    // A cross-check for a noisy machine: all modes at once, so they share
    // whatever else the machine does (and compete with each other alike).
    let concurrent = env_u64("HTTP_BENCH_CONCURRENT", 0) != 0;
    println!(
        "http_server: {rounds} rounds x {} modes, wrk -t1 -c32 -d{secs}s, {}",
        modes.len(),
        if concurrent {
            "all modes at once (HTTP_BENCH_CONCURRENT=1)"
        } else {
            "one at a time"
        }
    );
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); modes.len()];
    let print = |round: usize, mode: &str, r: &Run| {
        println!(
            "round {round} {mode:<11} cpu/request {:>7.0} ns  {:>8.0} req/s  p99 {:>7.0} us  events/request {:.1}  switches/request {:.3}",
            r.cpu_per_request_ns, r.throughput, r.p99_us, r.events_per_request, r.switches_per_request
        )
    };
    for round in 0..rounds {
        if concurrent {
            for (m, r) in measure(&modes, secs).into_iter().enumerate() {
                print(round, modes[m], &r);
                runs[m].push(r);
            }
            continue;
        }
        // Rotate the order so no mode always runs first (or after another).
        for k in 0..modes.len() {
            let m = (round + k) % modes.len();
            let r = measure(&modes[m..m + 1], secs)[0];
            print(round, modes[m], &r);
            runs[m].push(r);
        }
    }
    let mut json = String::from("{");
    let mut ci_json = Vec::new();
    let metrics: [Metric; 4] = [
        ("cpu_per_request", |r| r.cpu_per_request_ns),
        ("user_cpu_per_request", |r| r.user_cpu_per_request_ns),
        ("throughput", |r| r.throughput),
        ("p99", |r| r.p99_us),
    ];
    for (mi, (name, f)) in metrics.iter().enumerate() {
        let (mut parts, mut cis) = (Vec::new(), Vec::new());
        for (m, mode) in modes.iter().enumerate().skip(1) {
            let ratios: Vec<f64> = runs[m]
                .iter()
                .zip(&runs[0])
                .map(|(r, p)| f(r) / f(p))
                .collect();
            let med = median(ratios.clone());
            // What the pairs can resolve: the geometric mean's 95% interval.
            let (gm, lo, hi) = common::geomean_ci95(&ratios);
            let list: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
            println!(
                "{name:<20} {mode:<11} median ratio vs plain {med:.4}, geometric mean {gm:.4} \
                 (95% CI {lo:.4}-{hi:.4})  (pairs: {})",
                list.join(" ")
            );
            parts.push(format!("\"{mode}\": {med:.4}"));
            cis.push(format!("\"{mode}\": [{lo:.4}, {hi:.4}]"));
        }
        json += &format!(
            "{}\"{name}\": {{{}}}",
            if mi > 0 { ", " } else { "" },
            parts.join(", ")
        );
        ci_json.push(format!("\"{name}\": {{{}}}", cis.join(", ")));
    }
    // The medians above are the figures; `ci95` says how far to trust
    // them (geometric mean of the same ratios, 95% interval).
    json += &format!(", \"ci95\": {{{}}}}}\n", ci_json.join(", "));
    // Per request and per event in ns: medians of the paired differences.
    let plain_cpu = median(runs[0].iter().map(|r| r.cpu_per_request_ns).collect());
    let plain_user = median(runs[0].iter().map(|r| r.user_cpu_per_request_ns).collect());
    println!(
        "plain: median {plain_cpu:.0} ns CPU per request, of which {plain_user:.0} ns user time"
    );
    for (m, mode) in modes.iter().enumerate().skip(1) {
        let diff = median(
            runs[m]
                .iter()
                .zip(&runs[0])
                .map(|(r, p)| r.cpu_per_request_ns - p.cpu_per_request_ns)
                .collect(),
        );
        let epr = median(runs[m].iter().map(|r| r.events_per_request).collect());
        let spr = median(runs[m].iter().map(|r| r.switches_per_request).collect());
        let bpf = median(runs[m].iter().map(|r| r.bpf_per_request_ns).collect());
        let own_cpu = median(runs[m].iter().map(|r| r.cpu_per_request_ns).collect());
        if bpf > 0.0 {
            println!(
                "{mode:<11} BPF program run time: {bpf:.1} ns per request ({:.2}% of its {own_cpu:.0} ns CPU per request; \
                 every switch of the machine, kernel.bpf_stats_enabled=1)",
                100.0 * bpf / own_cpu
            );
        }
        println!(
            "{mode:<11} CPU per request vs plain (median of paired differences): {diff:+.0} ns \
             (plain's median {plain_cpu:.0} ns), {spr:.3} context switches per request{}",
            if epr > 0.0 {
                format!(
                    ", {epr:.1} events per request, {:+.1} ns per event",
                    diff / epr
                )
            } else {
                String::new()
            }
        );
    }
    // Mode `a`'s CPU per request against mode `b`'s, paired by round.
    let at = |name: &str| modes.iter().position(|m| *m == name);
    let against = |a: usize, b: usize| {
        let ratios: Vec<f64> = runs[a]
            .iter()
            .zip(&runs[b])
            .map(|(x, y)| x.cpu_per_request_ns / y.cpu_per_request_ns)
            .collect();
        let (gm, lo, hi) = common::geomean_ci95(&ratios);
        let list: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        println!(
            "{:<17} CPU per request vs {}: median ratio {:.4}, geometric mean {gm:.4} (95% CI {lo:.4}-{hi:.4})  (pairs: {})",
            modes[a],
            modes[b],
            median(ratios),
            list.join(" ")
        );
    };
    // CPU profiling's own cost, and the waker events': each against the
    // same round's record.
    for name in [
        "record_cpu",
        "record_cpu_on",
        "record_cpu_no_copy",
        "record_cpu_signal",
        "record_no_wakes",
    ] {
        if let (Some(rec), Some(cpu)) = (at("record"), at(name)) {
            against(cpu, rec);
        }
    }
    // The yardsticks: what the clock reads alone cost, what learning of
    // the wakes adds, and what recording costs above the least a tracer
    // on tokio's hooks can do, with and without wakes.
    for (a, b) in [
        ("floor_hooks", "floor_no_clock"),
        ("floor_wakes", "floor_hooks"),
        ("record", "floor_wakes"),
        ("floor_fire", "floor_wakes"),
        ("record", "floor_fire"),
        ("record_no_wakes", "floor_hooks"),
        // runtrace's layer in the application's registry against its
        // minimal global subscriber (the path before issue 34).
        ("idle_layer", "idle_hooks"),
        ("record_layer", "record"),
    ] {
        if let (Some(a), Some(b)) = (at(a), at(b)) {
            against(a, b);
        }
    }
    // Before/after: each mode against the same round's `MODE@base`.
    for (after, name) in modes.iter().enumerate() {
        if let Some(before) = at(&format!("{name}@base")) {
            against(after, before);
        }
    }
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    let _ = std::fs::create_dir_all(&out);
    let file = out.join(if concurrent {
        "http_server_concurrent.json"
    } else {
        "http_server.json"
    });
    match std::fs::write(&file, &json) {
        Ok(()) => println!("wrote {}", file.display()),
        Err(e) => eprintln!("could not write {}: {e}", file.display()),
    }
}
