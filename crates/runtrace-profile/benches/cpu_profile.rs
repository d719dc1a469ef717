//! What a CPU sample costs (issue 13), measured side by side:
//!
//! - application side: the CPU time a busy thread needs for a fixed amount
//!   of work while sampled at 99 Hz and 999 Hz, against not sampled (the
//!   kernel's timer interrupt, callchain walk and ring write are charged
//!   to the sampled thread);
//! - context switches: two recording threads pinned to one CPU pass a
//!   byte back and forth through pipes 20,000 times, so each hand-over is
//!   one context switch; their CPU time per switch (each switch-out is an
//!   off-CPU sample: the kernel walks the stack in the scheduler, with
//!   interrupts off, so a sampling profiler does not see this cost; and a
//!   per-thread event is taken off and put back on the CPU);
//! - writer side: the CPU time per sample of the thread that drives the
//!   profiler as the recorder's writer does (every 50 ms: perf ring
//!   drain, sort, interning, encoding, appending the frames to a file),
//!   against the same thread without profiling.
//!
//! It drives a [`Profiler`] directly, as the recorder's writer thread
//! does, without a recording (the sampled threads are handed to the
//! profiler by thread id).
//!
//! Modes: not profiled, 99 Hz and 999 Hz with the default sampler
//! (per-CPU on-CPU events where allowed), and 99 Hz without off-CPU stacks
//! (what the recorder's `RUNTRACE_CPU_OFF_CPU=off` asks for), with a
//! cpu-clock event per thread (`CpuBackend::PerfThread`,
//! `RUNTRACE_CPU_FALLBACK=perf-thread`) and with the timer + signal
//! fallback (`CpuBackend::Signal`), and 999 Hz without the registers and
//! stack copy that on-CPU samples carry for unwinding past frames without
//! frame pointers (`RUNTRACE_CPU_STACK_COPY=off`: against `999 Hz`, what
//! the copy costs the sampled threads and the unwinding costs the writer;
//! the ping-pong's samples land in glibc's `read`/`write`, which keep no
//! frame pointer, so the writer unwinds those), and 99 Hz without it
//! (against `99 Hz`: what a switch-out whose frame-pointer walk stops in
//! `read`/`write` pays for the BPF program's registers and stack copy).
//! `CPU_BENCH_PING_PONG=recv` hands the byte over with `send`/`recv` (see
//! `over_sockets`). With `sysctl -w kernel.bpf_stats_enabled=1` (root) it also prints the
//! time the kernel spent in the off-CPU BPF program per ping-pong switch.
//! Each round runs every mode once in a
//! rotating order; the figures are medians over rounds of the paired
//! differences. Run:
//! `cargo bench -p runtrace-profile --bench cpu_profile`
//! (`CPU_BENCH_ROUNDS`, default 7; `CPU_BENCH_MODES`, a comma-separated
//! list of mode labels, runs only those besides `off`). Needs perf_event_open (root or
//! `perf_event_paranoid` <= 1 for the off-CPU part); says so otherwise.

use runtrace_core::clock::{gettid, TraceClock};
use runtrace_profile::{CpuBackend, Profiler, RawKind};
use std::hint::black_box;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

fn thread_cpu_ns() -> u64 {
    runtrace_core::thread_time::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[inline(never)]
fn work(iters: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..iters {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

struct Run {
    work_cpu_ns: u64,
    switch_cpu_ns: u64,
    writer_cpu_ns: u64,
    /// `cpu_sample` + `off_cpu` events.
    samples: u64,
    /// `cpu_sample` events.
    on_cpu: u64,
    mode: u64,
    bpf: BpfStats,
}

/// Round trips of the ping-pong: two switches each.
const ROUND_TRIPS: u64 = 20_000;
const SWITCHES: u64 = 2 * ROUND_TRIPS;

/// Pins the calling thread to CPU 0.
fn pin() {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes bit 0.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(0, &mut set) };
    // SAFETY: a valid set of the size passed, for the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

/// `CPU_BENCH_PING_PONG=recv`: the threads hand the byte over a socket
/// pair with `send`/`recv` instead of a pipe with `read`/`write`. Debian
/// glibc's `read` leaves `rbp` alone, so the kernel's walk from a
/// switch-out in it is long (it only skips `read_byte`); `recv` keeps the
/// cancellation state in `rbp`, so its walk ends at the leaf, and the
/// off-CPU program then copies the stack: what that costs per switch.
fn over_sockets() -> bool {
    static RECV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *RECV.get_or_init(|| std::env::var("CPU_BENCH_PING_PONG").is_ok_and(|v| v == "recv"))
}

fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    if over_sockets() {
        // SAFETY: socketpair writes two fds into the array.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0, "socketpair");
    } else {
        // SAFETY: pipe writes two fds into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    }
    (fds[0], fds[1])
}

/// Blocks reading one byte from `r`.
fn read_byte(r: i32) {
    let mut b = [0u8; 1];
    // SAFETY: a one-byte read into a live local buffer, on a pipe or
    // socket fd this bench opened.
    let n = unsafe {
        if over_sockets() {
            libc::recv(r, b.as_mut_ptr().cast(), 1, 0)
        } else {
            libc::read(r, b.as_mut_ptr().cast(), 1)
        }
    };
    assert_eq!(n, 1);
}

fn write_byte(w: i32) {
    // SAFETY: a one-byte write from a live local, on a pipe or socket fd
    // this bench opened.
    let n = unsafe {
        if over_sockets() {
            libc::send(w, [0u8].as_ptr().cast(), 1, 0)
        } else {
            libc::write(w, [0u8].as_ptr().cast(), 1)
        }
    };
    assert_eq!(n, 1);
}

/// The CPU time (both threads) of ROUND_TRIPS hand-overs between two
/// sampled threads on one CPU (each handed to the profiler through `join`).
/// With `parked`, both threads are marked parked throughout (as tokio's
/// park hook marks a worker that waits for work): every switch-out, the
/// waits and the preemptions a wake-up causes, is then a parked one.
fn ping_pong(parked: bool, join: Sender<u64>) -> u64 {
    let (a_r, a_w) = pipe();
    let (b_r, b_w) = pipe();
    let other_join = join.clone();
    let other = std::thread::spawn(move || {
        pin();
        other_join.send(gettid()).unwrap();
        runtrace_core::parked::set(parked);
        // Wait for the start signal, then answer each byte.
        let t0 = thread_cpu_ns();
        for _ in 0..ROUND_TRIPS {
            read_byte(a_r);
            write_byte(b_w);
        }
        thread_cpu_ns() - t0
    });
    pin();
    join.send(gettid()).unwrap();
    // Both threads handed over, and sampled from the writer's next round.
    std::thread::sleep(Duration::from_millis(120));
    let t0 = thread_cpu_ns();
    runtrace_core::parked::set(parked);
    for _ in 0..ROUND_TRIPS {
        write_byte(a_w);
        read_byte(b_r);
    }
    runtrace_core::parked::set(false);
    let mine = thread_cpu_ns() - t0;
    let theirs = other.join().unwrap();
    for fd in [a_r, a_w, b_r, b_w] {
        // SAFETY: fds this function opened, closed once.
        unsafe { libc::close(fd) };
    }
    mine + theirs
}

/// One bench mode: its label, the sampling rate (0: no profiler), the
/// sampler choice, whether off-CPU stacks are taken, and whether the
/// ping-pong threads wait marked parked.
struct Mode {
    label: &'static str,
    hz: u32,
    backend: CpuBackend,
    off_cpu: bool,
    parked: bool,
    /// On-CPU samples carry the registers and a stack copy (unset:
    /// `RUNTRACE_CPU_STACK_COPY=off`).
    stack_copy: bool,
}

/// What the writer thread reports when it stops.
struct WriterRun {
    cpu_ns: u64,
    samples: u64,
    on_cpu: u64,
    mode: u64,
    bpf: BpfStats,
}

/// The time the kernel spent in this process's BPF programs (the off-CPU
/// program) and how often it ran them, while `kernel.bpf_stats_enabled`
/// is 1 (zeros otherwise). The program runs at every switch of the
/// machine, in whichever task switches out.
#[derive(Clone, Copy, Default)]
struct BpfStats {
    run_time_ns: u64,
    run_cnt: u64,
}

impl BpfStats {
    fn read() -> BpfStats {
        let mut s = BpfStats::default();
        let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
            return s;
        };
        for text in dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok()) {
            if !text.contains("prog_type:") {
                continue;
            }
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            s.run_time_ns += field("run_time_ns:");
            s.run_cnt += field("run_cnt:");
        }
        s
    }
}

/// The recorder's writer, reduced to what it does for the profile: every
/// `ROUND` it hands the threads that joined to the profiler, collects the
/// samples up to now, encodes them and appends the frames to `file`.
fn writer(
    mut profiler: Option<Profiler>,
    joined: Receiver<u64>,
    stop: Arc<AtomicBool>,
    mut file: std::fs::File,
) -> WriterRun {
    const ROUND: Duration = Duration::from_millis(50);
    let clock = TraceClock::get();
    let me = gettid();
    let t0 = thread_cpu_ns();
    let mut buf = Vec::new();
    if let Some(p) = profiler.as_mut() {
        p.file_start(&mut buf);
    }
    let mut samples = Vec::new();
    let (mut n, mut on) = (0, 0);
    loop {
        let last = stop.load(Ordering::Relaxed);
        for tid in joined.try_iter() {
            if let Some(p) = profiler.as_mut() {
                p.add_thread(tid);
            }
        }
        if let Some(p) = profiler.as_mut() {
            samples.clear();
            p.collect(clock.now(), &mut samples);
            n += samples.len() as u64;
            on += samples.iter().filter(|s| s.kind == RawKind::OnCpu).count() as u64;
            let round = p.encode(&samples, me);
            buf.extend_from_slice(&round.defs);
            buf.extend_from_slice(&round.chunk);
        }
        file.write_all(&buf).unwrap();
        buf.clear();
        if last {
            break;
        }
        std::thread::sleep(ROUND);
    }
    WriterRun {
        cpu_ns: thread_cpu_ns() - t0,
        samples: n,
        on_cpu: on,
        mode: profiler.as_ref().map_or(0, |p| p.info().mode),
        // Before the profiler (and its program) goes.
        bpf: BpfStats::read(),
    }
}

fn run(mode: &Mode, iters: u64) -> Run {
    let (hz, parked) = (mode.hz, mode.parked);
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(dir.path().join("profile.bin")).unwrap();
    // Started on this thread, as the recorder starts it on the thread that
    // starts the recording.
    // The profiler reads the setting once, at its start (no other thread
    // of this bench reads the environment).
    if mode.stack_copy {
        std::env::remove_var("RUNTRACE_CPU_STACK_COPY");
    } else {
        std::env::set_var("RUNTRACE_CPU_STACK_COPY", "off");
    }
    let profiler =
        (hz > 0).then(|| Profiler::start(hz, mode.backend, mode.off_cpu, TraceClock::get()));
    let (join, joined) = channel();
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let stop = stop.clone();
        std::thread::spawn(move || writer(profiler, joined, stop, file))
    };
    let (work_cpu_ns, switch_cpu_ns) = std::thread::spawn(move || {
        join.send(gettid()).unwrap();
        // Let the writer start sampling this thread.
        std::thread::sleep(Duration::from_millis(120));
        let t0 = thread_cpu_ns();
        black_box(work(iters));
        let t1 = thread_cpu_ns();
        (t1 - t0, ping_pong(parked, join))
    })
    .join()
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let w = w.join().unwrap();
    Run {
        work_cpu_ns,
        switch_cpu_ns,
        writer_cpu_ns: w.cpu_ns,
        samples: w.samples,
        on_cpu: w.on_cpu,
        mode: w.mode,
        bpf: w.bpf,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run
    // passes nothing and should not spend time measuring.
    if !std::env::args().any(|a| a == "--bench") {
        println!("cpu_profile bench: run with `cargo bench` to measure");
        return;
    }
    let rounds: usize = std::env::var("CPU_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    // Calibrate: about 1 s of CPU time of work per run (CPU time, not
    // wall time: other processes may share the machine).
    let t = thread_cpu_ns();
    work(50_000_000);
    let per_iter = (thread_cpu_ns() - t) as f64 / 1e9 / 50_000_000.0;
    let iters = (1.0 / per_iter) as u64;
    let mode = |label, hz, backend| Mode {
        label,
        hz,
        backend,
        off_cpu: true,
        parked: false,
        stack_copy: true,
    };
    let modes = [
        mode("off", 0, CpuBackend::Auto),
        mode("99 Hz", 99, CpuBackend::Auto),
        mode("999 Hz", 999, CpuBackend::Auto),
        Mode {
            off_cpu: false,
            ..mode("99 Hz on-CPU only", 99, CpuBackend::Auto)
        },
        mode("99 Hz per-thread", 99, CpuBackend::PerfThread),
        mode("99 Hz signal", 99, CpuBackend::Signal),
        Mode {
            parked: true,
            ..mode("99 Hz parked", 99, CpuBackend::Auto)
        },
        Mode {
            stack_copy: false,
            ..mode("999 Hz no stack copy", 999, CpuBackend::Auto)
        },
        Mode {
            stack_copy: false,
            ..mode("99 Hz no stack copy", 99, CpuBackend::Auto)
        },
    ];
    // `CPU_BENCH_MODES="99 Hz,99 Hz parked"`: only those (exact labels)
    // besides "off", the baseline.
    let modes: Vec<Mode> = match std::env::var("CPU_BENCH_MODES") {
        Ok(list) => {
            let wanted: Vec<&str> = list.split(',').map(str::trim).collect();
            for w in &wanted {
                if !modes.iter().any(|m| m.label == *w) {
                    eprintln!("CPU_BENCH_MODES: no mode {w:?}; the modes are:");
                    for m in &modes {
                        eprintln!("  {}", m.label);
                    }
                    std::process::exit(2);
                }
            }
            modes
                .into_iter()
                .filter(|m| m.label == "off" || wanted.contains(&m.label))
                .collect()
        }
        Err(_) => modes.into(),
    };
    let mut runs: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for k in 0..modes.len() {
            let m = (round + k) % modes.len();
            let r = run(&modes[m], iters);
            println!(
                "round {round} {:>16}: work {:>6.1} ms CPU, switches {:>6.1} ms CPU, writer {:>5.2} ms CPU, {} samples (mode {})",
                modes[m].label,
                r.work_cpu_ns as f64 / 1e6,
                r.switch_cpu_ns as f64 / 1e6,
                r.writer_cpu_ns as f64 / 1e6,
                r.samples,
                r.mode
            );
            runs[m].push(r);
        }
    }
    let perf_modes = modes
        .iter()
        .zip(&runs)
        .filter(|(m, _)| m.label != "off" && m.backend != CpuBackend::Signal);
    if perf_modes.flat_map(|(_, r)| r).any(|r| r.mode != 1) {
        println!(
            "note: perf_event_open was not used in every run (mode != 1): figures mix backends"
        );
    }
    for m in 1..modes.len() {
        let pairs = runs[m].iter().zip(&runs[0]);
        let work_ratio = median(
            pairs
                .clone()
                .map(|(r, o)| r.work_cpu_ns as f64 / o.work_cpu_ns as f64)
                .collect(),
        );
        let app_per_sample = median(
            pairs
                .clone()
                .map(|(r, o)| {
                    (r.work_cpu_ns as f64 - o.work_cpu_ns as f64) / r.on_cpu.max(1) as f64
                })
                .collect(),
        );
        let per_switch = median(
            pairs
                .clone()
                .map(|(r, o)| (r.switch_cpu_ns as f64 - o.switch_cpu_ns as f64) / SWITCHES as f64)
                .collect(),
        );
        let writer_per_sample = median(
            pairs
                .map(|(r, o)| {
                    (r.writer_cpu_ns as f64 - o.writer_cpu_ns as f64) / r.samples.max(1) as f64
                })
                .collect(),
        );
        let samples = median(runs[m].iter().map(|r| r.samples as f64).collect());
        let on_cpu = median(runs[m].iter().map(|r| r.on_cpu as f64).collect());
        let writer_ms = median(
            runs[m]
                .iter()
                .zip(&runs[0])
                .map(|(r, o)| (r.writer_cpu_ns as f64 - o.writer_cpu_ns as f64) / 1e6)
                .collect(),
        );
        println!(
            "{:>16}: busy thread CPU x{work_ratio:.4} vs not sampled ({app_per_sample:+.0} ns per on-CPU sample); \
             {per_switch:+.0} ns per context switch (off-CPU sample); \
             writer {writer_per_sample:+.0} ns CPU per sample ({writer_ms:+.2} ms per run); \
             {samples:.0} samples per run, {on_cpu:.0} on-CPU (medians of {rounds} rounds)",
            modes[m].label
        );
        if runs[m].iter().any(|r| r.bpf.run_cnt > 0) {
            // Every switch of the machine runs the program; the ping-pong's
            // are most of them during a run.
            let per_switch = median(
                runs[m]
                    .iter()
                    .map(|r| r.bpf.run_time_ns as f64 / SWITCHES as f64)
                    .collect(),
            );
            let per_run = median(
                runs[m]
                    .iter()
                    .map(|r| r.bpf.run_time_ns as f64 / r.bpf.run_cnt.max(1) as f64)
                    .collect(),
            );
            println!(
                "{:>16}: BPF program {per_switch:.0} ns per ping-pong switch ({per_run:.0} ns per run of it, every switch of the machine; kernel.bpf_stats_enabled=1)",
                modes[m].label
            );
        }
    }
}
