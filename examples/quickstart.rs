//! The main job for now: a multi-threaded synthetic workload that emits the
//! runtime events through the recorder, then prints what `runtrace check`
//! prints about the trace.
//!
//! ```text
//! cargo run --release --example quickstart -- --out DIR [--seconds S]
//! ```
//!
//! Two "workers" run a small work-stealing-free scheduler over a shared
//! injection queue and local queues, the way a tokio multi-thread runtime
//! does: request handlers (a few short polls each), a fan-out task that
//! spawns a burst of children onto its worker's local queue, and a
//! CPU-heavy task with long polls. A client thread injects requests and a
//! sampler records the global queue depth every 10 ms. Park/unpark events
//! carry the worker's real CPU time and scheduler wait (schedstat).
//! (Issue 5 replaces this with a real tokio + runtrace executor workload.)

// Probe sites use `runtrace::probe!`, so the same workload also feeds the
// usdt, lttng and perf-probe backends when built with those features.
// Recording: applications use `runtrace::Recorder` (feature `record`); the
// repository's examples use the recorder crate directly, so the documented
// command needs no `--features` flag.
use runtrace::{probe, Istr, Loc};
use runtrace_recorder::Recorder;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static NEXT_TASK: AtomicU64 = AtomicU64::new(1);

struct Task {
    id: u64,
    polls_left: u32,
    poll_work: Duration,
    fanout: bool,
}

struct Shared {
    injector: Mutex<VecDeque<Task>>,
    stop: AtomicBool,
}

fn usage() -> ExitCode {
    eprintln!("usage: quickstart --out DIR [--seconds S]   (S: 0.1 to 60, default 1.5)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut out: Option<PathBuf> = None;
    let mut seconds = 1.5f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => match args.next() {
                Some(v) => out = Some(v.into()),
                None => return usage(),
            },
            "--seconds" => match args.next().and_then(|v| v.parse().ok()) {
                Some(s) if (0.1..=60.0).contains(&s) => seconds = s,
                _ => {
                    eprintln!("--seconds: expected a number from 0.1 to 60");
                    return usage();
                }
            },
            "-h" | "--help" => return usage(),
            other => {
                eprintln!("unknown argument {other:?}");
                return usage();
            }
        }
    }
    let Some(out) = out else { return usage() };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("cannot create {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    // Leftovers from an earlier run would be mixed into the check below.
    for f in trace_files(&out) {
        let _ = std::fs::remove_file(f);
    }

    let guard = match Recorder::builder().path(out.join("trace")).start() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("cannot start recording: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let shared = Arc::new(Shared {
        injector: Mutex::new(VecDeque::new()),
        stop: AtomicBool::new(false),
    });
    let mut threads = Vec::new();
    for w in 0..2u32 {
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("quickstart-worker-{w}"))
                .spawn(move || worker(w, &s))
                .expect("spawn worker"),
        );
    }
    let s = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("quickstart-client".into())
            .spawn(move || client(&s))
            .unwrap(),
    );
    let s = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("quickstart-sampler".into())
            .spawn(move || sampler(&s))
            .unwrap(),
    );

    std::thread::sleep(Duration::from_secs_f64(seconds));
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("workload thread");
    }
    let stats = match guard.finish() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("recording failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "recorded {} events ({} dropped) in {:.2} s into {} file(s) under {}\n",
        stats.events,
        stats.dropped,
        started.elapsed().as_secs_f64(),
        stats.files,
        out.display()
    );
    let report = runtrace_cli::check::check_files(&trace_files(&out));
    println!("$ runtrace check {}/trace.*.bin\n{report}", out.display());
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn trace_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.file_name().unwrap_or_default().to_string_lossy();
        n.starts_with("trace.") && (n.ends_with(".bin") || n.ends_with(".bin.active"))
    });
    runtrace::format::merge::sort_trace_paths(&mut v);
    v
}

#[track_caller]
fn spawn(parent: u64, polls: u32, work_us: u64, fanout: bool) -> Task {
    let id = NEXT_TASK.fetch_add(1, Ordering::Relaxed);
    probe!(task_spawn {
        task_id: id,
        parent_task_id: parent,
        spawn_loc: Loc::caller(),
        queue: Istr::EMPTY
    });
    Task {
        id,
        polls_left: polls,
        poll_work: Duration::from_micros(work_us),
        fanout,
    }
}

fn client(s: &Shared) {
    let mut n = 0u64;
    while !s.stop.load(Ordering::Relaxed) {
        n += 1;
        let t = if n.is_multiple_of(200) {
            spawn(0, 1, 0, true) // a fan-out burst
        } else if n.is_multiple_of(50) {
            spawn(0, 4, 400, false) // CPU-heavy
        } else {
            spawn(0, 3, 5, false) // request handler
        };
        probe!(task_wake {
            woken_task_id: t.id,
            waker_task_id: 0,
            worker: runtrace::format::NO_WORKER
        });
        s.injector.lock().unwrap().push_back(t);
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn sampler(s: &Shared) {
    while !s.stop.load(Ordering::Relaxed) {
        let depth = s.injector.lock().unwrap().len() as u32;
        probe!(queue_sample {
            global_q: depth,
            queue: Istr::EMPTY,
            depth: 0
        });
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// CPU time of the calling thread and its scheduler wait, in ns.
fn cpu_and_wait() -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    let cpu = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let wait = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    (cpu, wait)
}

fn worker(w: u32, s: &Shared) {
    probe!(worker_start {
        worker: w,
        runtime: 0
    });
    let mut local: VecDeque<Task> = VecDeque::new();
    while !s.stop.load(Ordering::Relaxed) {
        let task = local
            .pop_front()
            .or_else(|| s.injector.lock().unwrap().pop_front());
        let Some(mut t) = task else {
            let (cpu, _) = cpu_and_wait();
            probe!(worker_park {
                worker: w,
                local_q: local.len() as u32,
                cpu_ns: cpu
            });
            std::thread::sleep(Duration::from_micros(200));
            let (cpu, wait) = cpu_and_wait();
            probe!(worker_unpark {
                worker: w,
                cpu_ns: cpu,
                sched_wait_ns: wait
            });
            continue;
        };
        probe!(task_poll_start {
            task_id: t.id,
            worker: w,
            queue: Istr::EMPTY,
            local_q: local.len() as u32
        });
        spin(t.poll_work);
        if t.fanout {
            for _ in 0..40 {
                let c = spawn(t.id, 2, 2, false);
                probe!(task_wake {
                    woken_task_id: c.id,
                    waker_task_id: t.id,
                    worker: w
                });
                local.push_back(c);
            }
        }
        t.polls_left -= 1;
        let done = t.polls_left == 0;
        probe!(task_poll_end {
            task_id: t.id,
            worker: w,
            ready: done
        });
        if done {
            probe!(task_terminate { task_id: t.id });
        } else {
            // The task yielded and woke itself, like `yield_now`.
            probe!(task_wake {
                woken_task_id: t.id,
                waker_task_id: t.id,
                worker: w
            });
            local.push_back(t);
        }
    }
    probe!(worker_stop {
        worker: w,
        runtime: 0
    });
}
