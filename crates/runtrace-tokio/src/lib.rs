//! Records a stock tokio runtime through runtrace's probes: task spawn and
//! terminate, poll start and end (task id, worker index, interned spawn
//! location, the worker's local queue depth), worker park and unpark (the
//! thread's CPU time and scheduler wait from
//! `/proc/thread-self/schedstat`), the global queue depth every 10 ms, and,
//! for tasks spawned through [`spawn`] / [`traced`], who woke whom.
//!
//! ```
//! // Through the facade: `runtrace::tokio::instrument` (feature `tokio`).
//! let rt = runtrace_tokio::instrument(
//!     tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all(),
//! )
//! .build()?;
//! assert_eq!(rt.block_on(async { tokio::spawn(async { 7 }).await }).unwrap(), 7);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Blocking tasks (`spawn_blocking`, and the multi-thread runtime's worker
//! launches) get a TaskTerminate but no TaskSpawn or polls: tokio calls no
//! spawn or poll hook for them.
//!
//! tokio's hooks need `--cfg tokio_unstable`; without it this crate does not
//! compile and says what to add. `instrument` installs all of tokio's hooks
//! (each is a single slot: setting one of them again after `instrument`
//! replaces runtrace's, so call `instrument` last).
//!
//! With no backend listening each hook costs the probes' enabled checks (a
//! few loads and branches, ~1.5 ns).

#[cfg(not(tokio_unstable))]
compile_error!(
    "runtrace's tokio instrumentation uses tokio's runtime hooks, which need `--cfg tokio_unstable`. \
     Add to your .cargo/config.toml:\n\n[build]\nrustflags = [\"--cfg\", \"tokio_unstable\"]\n\n\
     (if that file already has `[target.<triple>] rustflags`, add \"--cfg\", \"tokio_unstable\" there: \
     target rustflags replace build rustflags)"
);

use runtrace_core::{Istr, Loc};
use runtrace_probes::builtin as probes;
use std::cell::Cell;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

static NEXT_RUNTIME: AtomicU32 = AtomicU32::new(0);

/// Captures the one `u64` that `tokio::task::Id`'s `Hash` writes (it has no
/// public integer accessor; this is free and needs no `unsafe`).
struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A tokio task id as the integer tokio prints.
pub fn task_id(id: tokio::task::Id) -> u64 {
    let mut h = IdHasher(0);
    id.hash(&mut h);
    h.finish()
}

fn current_task() -> u64 {
    tokio::task::try_id().map(task_id).unwrap_or(0)
}

fn worker() -> u32 {
    tokio::runtime::worker_index()
        .map(|w| w as u32)
        .unwrap_or(runtrace_format::NO_WORKER)
}

thread_local! {
    /// This worker thread's runtime metrics (for local queue depths), and
    /// whether its WorkerStart was fired.
    static WORKER: std::cell::RefCell<Option<tokio::runtime::RuntimeMetrics>> = const { std::cell::RefCell::new(None) };
    static STARTED: Cell<bool> = const { Cell::new(false) };
}

fn local_q(w: u32) -> u32 {
    if w == runtrace_format::NO_WORKER {
        return 0;
    }
    WORKER
        .with(|m| {
            let mut m = m.borrow_mut();
            if m.is_none() {
                *m = tokio::runtime::Handle::try_current()
                    .ok()
                    .map(|h| h.metrics());
            }
            m.as_ref()
                .map(|m| m.worker_local_queue_depth(w as usize) as u32)
        })
        .unwrap_or(0)
}

/// Per-runtime state shared by its hooks.
struct RuntimeState {
    id: u32,
    threads: AtomicUsize,
    sampler: std::sync::Once,
}

/// Installs runtrace's hooks on a tokio runtime builder (multi-thread or
/// current-thread), and returns it for chaining. Several runtimes in one
/// process can be instrumented; each trace's WorkerStart events say which
/// runtime a worker belongs to.
///
/// ```
/// let rt = runtrace_tokio::instrument(tokio::runtime::Builder::new_current_thread().enable_all())
///     .build()?;
/// rt.block_on(async { tokio::task::yield_now().await });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn instrument(b: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
    let st = Arc::new(RuntimeState {
        id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
        threads: AtomicUsize::new(0),
        sampler: std::sync::Once::new(),
    });
    let (s1, s2, s3) = (st.clone(), st.clone(), st.clone());
    b.on_thread_start(move || {
        s1.threads.fetch_add(1, Ordering::Relaxed);
        // The global queue sampler starts with the runtime's first thread
        // (the handle does not exist before) and stops with its last.
        let st = s1.clone();
        s1.sampler.call_once(move || {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                let _ = std::thread::Builder::new()
                    .name(format!("runtrace-tokio-sampler-{}", st.id))
                    .spawn(move || sample_global_queue(h.metrics(), st));
            }
        });
    })
    .on_thread_stop(move || {
        s2.threads.fetch_sub(1, Ordering::Relaxed);
        if STARTED.get() && probes::worker_stop::enabled() {
            probes::worker_stop::fire(probes::worker_stop::Args {
                worker: worker(),
                runtime: s2.id,
            });
        }
    })
    .on_thread_park(|| {
        if probes::worker_park::enabled() {
            let w = worker();
            let (cpu_ns, _) = runtrace_core::clock::thread_cpu_and_wait_ns();
            probes::worker_park::fire(probes::worker_park::Args {
                worker: w,
                local_q: local_q(w),
                cpu_ns,
            });
        }
    })
    .on_thread_unpark(|| {
        if probes::worker_unpark::enabled() {
            let (cpu_ns, sched_wait_ns) = runtrace_core::clock::thread_cpu_and_wait_ns();
            probes::worker_unpark::fire(probes::worker_unpark::Args {
                worker: worker(),
                cpu_ns,
                sched_wait_ns,
            });
        }
    })
    .on_task_spawn(|meta| {
        if probes::task_spawn::enabled() {
            probes::task_spawn::fire(probes::task_spawn::Args {
                task_id: task_id(meta.id()),
                parent_task_id: current_task(),
                spawn_loc: Loc::from_location(meta.spawned_at()),
                queue: Istr::EMPTY,
            });
        }
    })
    .on_before_task_poll(move |meta| {
        if probes::task_poll_start::enabled() {
            let w = worker();
            if !STARTED.replace(true) && probes::worker_start::enabled() {
                probes::worker_start::fire(probes::worker_start::Args {
                    worker: w,
                    runtime: s3.id,
                });
            }
            probes::task_poll_start::fire(probes::task_poll_start::Args {
                task_id: task_id(meta.id()),
                worker: w,
                queue: Istr::EMPTY,
                local_q: local_q(w),
            });
        }
    })
    .on_after_task_poll(|meta| {
        if probes::task_poll_end::enabled() {
            // tokio's hook does not say whether the poll completed the
            // task: `ready` is false here; TaskTerminate marks the end.
            probes::task_poll_end::fire(probes::task_poll_end::Args {
                task_id: task_id(meta.id()),
                worker: worker(),
                ready: false,
            });
        }
    })
    .on_task_terminate(|meta| {
        if probes::task_terminate::enabled() {
            probes::task_terminate::fire(probes::task_terminate::Args {
                task_id: task_id(meta.id()),
            });
        }
    })
}

fn sample_global_queue(m: tokio::runtime::RuntimeMetrics, st: Arc<RuntimeState>) {
    loop {
        std::thread::sleep(std::time::Duration::from_millis(10));
        if st.threads.load(Ordering::Relaxed) == 0 {
            return;
        }
        if probes::queue_sample::enabled() {
            probes::queue_sample::fire(probes::queue_sample::Args {
                global_q: m.global_queue_depth() as u32,
                queue: Istr::EMPTY,
                depth: 0,
            });
        }
    }
}

/// Spawns `fut` on the current tokio runtime like `tokio::spawn`, and
/// records who wakes it (WakeEvent with the waking task, when a task wakes
/// it). Plain `tokio::spawn` tasks get poll events but no wake events.
#[track_caller]
pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(traced(fut))
}

/// Wraps a future so the task running it records its wakes; for spawning
/// APIs other than [`spawn`] (`JoinSet::spawn(traced(fut))`,
/// `tokio::task::spawn_local(traced(fut))`, ...).
pub fn traced<F: Future>(fut: F) -> Traced<F> {
    Traced { fut, waker: None }
}

/// A future whose wakes are recorded (see [`traced`]).
pub struct Traced<F> {
    fut: F,
    waker: Option<(Waker, Waker)>,
}

struct WakeRecorder {
    inner: Waker,
    task: u64,
}

impl WakeRecorder {
    fn record(&self) {
        if probes::task_wake::enabled() {
            probes::task_wake::fire(probes::task_wake::Args {
                woken_task_id: self.task,
                waker_task_id: current_task(),
                worker: worker(),
            });
        }
    }
}

impl Wake for WakeRecorder {
    fn wake(self: Arc<Self>) {
        self.record();
        self.inner.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.record();
        self.inner.wake_by_ref();
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning of `fut`; `waker` is never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `fut` is not moved while pinned (this type is !Unpin-safe
        // by only exposing it through Pin).
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        if !probes::task_wake::enabled() {
            return fut.poll(cx);
        }
        // Reuse the wrapping waker while tokio's waker is the same one.
        let reuse = matches!(&this.waker, Some((orig, _)) if orig.will_wake(cx.waker()));
        if !reuse {
            let w = Waker::from(Arc::new(WakeRecorder {
                inner: cx.waker().clone(),
                task: current_task(),
            }));
            this.waker = Some((cx.waker().clone(), w));
        }
        let w = &this.waker.as_ref().unwrap_or_else(|| unreachable!()).1;
        fut.poll(&mut Context::from_waker(w))
    }
}
