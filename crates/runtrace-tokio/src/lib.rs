//! Records a stock tokio runtime through runtrace's probes: task spawn and
//! terminate, poll start and end (task id, worker index, interned spawn
//! location, the worker's local queue depth), worker park and unpark (the
//! thread's CPU time and scheduler wait from `/proc/thread-self/schedstat`,
//! sampled: re-read at most every 10 ms per worker, see
//! [`runtrace_core::thread_time::sampled`]), the global queue depth (at
//! most every 10 ms from the poll hooks while a backend listens, and every
//! 100 ms from a sampler thread while no task is polled), and who woke
//! whom, for every task: from tokio's own waker instrumentation (module
//! [`wakes`], installed by [`instrument`] unless the application set its
//! own global tracing subscriber), else for tasks spawned through
//! [`spawn`] / [`traced`].
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
//! few loads and branches, ~1.5 ns); a wake costs ~1 ns more than stock
//! with the waker subscriber installed and nothing recording (recorder-only
//! builds; with USDT or LTTng compiled in each waker operation still asks
//! the subscriber, ~4 ns more as measured before the change), ~35-45 ns more while
//! recording (`cargo bench --bench tokio_wake`, docs/analysis.md).

#[cfg(not(tokio_unstable))]
compile_error!(
    "runtrace's tokio instrumentation uses tokio's runtime hooks, which need `--cfg tokio_unstable`. \
     Add to your .cargo/config.toml:\n\n[build]\nrustflags = [\"--cfg\", \"tokio_unstable\"]\n\n\
     (if that file already has `[target.<triple>] rustflags`, add \"--cfg\", \"tokio_unstable\" there: \
     target rustflags replace build rustflags)"
);

#[cfg(feature = "taskdump")]
pub mod dump;
mod layer;
mod resources;
pub mod spans;
pub mod wakes;

pub use layer::layer;

/// Takes a task dump of the current runtime and records where each of its
/// pending tasks sits (feature `taskdump`; module [`mod@dump`]): one
/// `task_dump` event per task, with the await point `runtrace analyze`
/// shows for stuck and leaked tasks. Expensive (the runtime pauses while
/// every task is traced): for a stuck service, not for every request.
///
/// ```no_run
/// # async fn f() {
/// if let Err(e) = runtrace_tokio::dump().await {
///     eprintln!("{e}");
/// }
/// # }
/// ```
#[cfg(feature = "taskdump")]
pub async fn dump() -> Result<dump::Dumped, dump::DumpError> {
    dump::triggered("dump()").await
}

use runtrace_core::clock::TraceClock;
use runtrace_core::{Istr, Loc};
use runtrace_probes::builtin as probes;
use std::cell::Cell;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

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

/// The calling thread's worker index in its tokio runtime (one read of
/// tokio's thread-local context: no runtime-handle lookup).
fn worker() -> u32 {
    tokio::runtime::worker_index()
        .map(|w| w as u32)
        .unwrap_or(runtrace_format::NO_WORKER)
}

/// The task issuing a wake (0 outside any task) and the worker it runs on.
/// A wake from inside the task this thread's last PollStart was for reuses
/// that PollStart's worker lookup (tokio's `worker_index` is the same for
/// the whole poll, `block_in_place` included); a wake from a parked worker
/// (the I/O driver's, the timer's) reuses its park hook's. Outside any
/// poll a multi-thread worker runs inside its launch task (a blocking
/// task: `tokio::task::try_id` names it there), so the wakes the worker
/// itself issues there (driver, timer, deferred wakes) would name that
/// task: they say 0, no task, as WakeEvent's `waker_task_id` is defined.
///
/// Out of line: inlined into the wake subscriber (`wakes`, another codegen
/// unit), each of its thread-local reads became a call of its own.
#[inline(never)]
fn waker_and_worker() -> (u64, u32) {
    let task = current_task();
    if task != 0 {
        let (polling, w) = POLLING.get();
        if polling == task {
            return (task, w);
        }
        if task != LAUNCH.get() {
            // A blocking task's wake, or a nested runtime's.
            return (task, worker());
        }
    }
    (0, known_or_lookup(PARKED.get()))
}

/// `w` if a hook already looked it up (not `NO_WORKER`), else tokio's
/// answer now.
#[inline]
fn known_or_lookup(w: u32) -> u32 {
    if w != runtrace_format::NO_WORKER {
        w
    } else {
        worker()
    }
}

/// Minimum time between two schedstat reads of a worker (see
/// [`runtrace_core::thread_time::sampled`] and docs/analysis.md): 10 ms.
const SCHED_SAMPLE_HZ: u64 = 100;

thread_local! {
    /// Whether this worker thread's WorkerStart was fired.
    static STARTED: Cell<bool> = const { Cell::new(false) };
    /// The task and worker index of this thread's last PollStart, so its
    /// PollEnd needs no second lookup.
    static POLLING: Cell<(u64, u32)> = const { Cell::new((0, runtrace_format::NO_WORKER)) };
    /// The worker index this thread's park hook looked up, from the park
    /// until its unpark (`NO_WORKER` otherwise, or when nothing recorded
    /// the park): the wakes the I/O driver and the timer issue while the
    /// worker is parked, and its WorkerUnpark, reuse it. A parked thread
    /// stays the same worker until it unparks (a worker hands itself off
    /// only from inside a poll, in `block_in_place`).
    static PARKED: Cell<u32> = const { Cell::new(runtrace_format::NO_WORKER) };
    /// The task tokio says this thread runs outside polls (a
    /// multi-thread worker's launch task; 0 on other threads), learnt by
    /// the thread's first recorded PollStart and by the park and unpark
    /// hooks while they record.
    static LAUNCH: Cell<u64> = const { Cell::new(0) };
}

/// Sets [`LAUNCH`] from a hook that runs outside any poll's task id
/// (park, unpark, and PollStart's before-poll hook) if not yet known: one
/// thread-local load after the first time.
#[inline]
fn learn_launch_task() {
    if LAUNCH.get() == 0 {
        LAUNCH.set(current_task());
    }
}

/// Fires this thread's WorkerStart (once, at its first recorded poll).
/// Out of line, so the per-poll path keeps only the flag check.
#[cold]
#[inline(never)]
fn worker_started(w: u32, st: &RuntimeState) {
    let runtime = st.id;
    STARTED.set(true);
    // tokio calls the poll hook outside the polled task's id guard: the
    // current task here is the worker's launch task. Learning it here, and
    // not only at the first park, keeps the wakes the worker issues between
    // its first polls and its first park (deferred wakes) from naming it.
    learn_launch_task();
    // The runtime's name just before each worker's start, so every
    // recording that has the worker has its runtime's name (several
    // runtimes in one process are told apart by it), and a reader knows it
    // when the WorkerStart comes.
    if probes::runtime_name::enabled() {
        let name = st.name.as_deref().map_or(Istr::EMPTY, Istr::new);
        probes::runtime_name::fire(probes::runtime_name::Args { runtime, name });
    }
    if probes::worker_start::enabled() {
        probes::worker_start::fire(probes::worker_start::Args { worker: w, runtime });
    }
}

/// Per-runtime state shared by its hooks.
struct RuntimeState {
    id: u32,
    /// Its name, when the application gave one ([`Instrumentation::name`]).
    name: Option<Arc<str>>,
    threads: AtomicUsize,
    sampler: std::sync::Once,
    /// The runtime's metrics (for local queue depths), taken once from the
    /// first thread or poll that runs inside the runtime.
    metrics: OnceLock<tokio::runtime::RuntimeMetrics>,
    /// [`SCHED_SAMPLE_HZ`] as trace ticks.
    sched_gap: u64,
    /// Trace ticks of the last QueueSample (0: none yet), and
    /// [`QUEUE_SAMPLE_PERIOD`] in ticks.
    last_queue_sample: AtomicU64,
    queue_gap: u64,
}

impl RuntimeState {
    /// Worker `w`'s local run queue depth (atomic loads in tokio; 0 off a
    /// worker).
    #[inline]
    fn local_q(&self, w: u32) -> u32 {
        if w == runtrace_format::NO_WORKER {
            return 0;
        }
        match self.metrics.get() {
            Some(m) => m.worker_local_queue_depth(w as usize) as u32,
            None => self.local_q_first(w),
        }
    }

    /// [`local_q`](Self::local_q) before the metrics were taken: takes them
    /// (once per runtime). Out of line, so the per-poll path stays short.
    #[cold]
    #[inline(never)]
    fn local_q_first(&self, w: u32) -> u32 {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => self
                .metrics
                .get_or_init(|| h.metrics())
                .worker_local_queue_depth(w as usize) as u32,
            Err(_) => 0,
        }
    }

    /// Fires a QueueSample if none was fired for `min_gap` ticks (one
    /// shared load while not due; the thread whose compare-exchange wins
    /// fires it).
    #[inline]
    fn sample_queue(&self, now: u64, min_gap: u64) {
        let last = self.last_queue_sample.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= min_gap {
            self.sample_queue_due(now, last);
        }
    }

    /// The rest of [`sample_queue`](Self::sample_queue) once a sample is
    /// due (at most every 10 ms): out of line, so the per-poll path keeps
    /// only the load and compare above.
    #[cold]
    #[inline(never)]
    fn sample_queue_due(&self, now: u64, last: u64) {
        if self
            .last_queue_sample
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        if let Some(m) = self.metrics.get() {
            probes::queue_sample::fire_at(
                now,
                probes::queue_sample::Args {
                    global_q: m.global_queue_depth() as u32,
                    queue: Istr::EMPTY,
                    depth: 0,
                },
            );
        }
    }
}

/// Installs runtrace's hooks on a tokio runtime builder (multi-thread or
/// current-thread), and returns it for chaining:
/// `Instrumentation::new().apply(b)`. tokio's hooks are single slots:
/// setting one after this replaces runtrace's; to keep an application's
/// own hooks, give them to [`Instrumentation`], which runs runtrace's
/// first and the application's after. Several runtimes in one process can
/// be instrumented; each trace's WorkerStart events say which runtime a
/// worker belongs to.
///
/// Wakes of plain `tokio::spawn` tasks come from tokio's tracing
/// instrumentation: add [`layer()`] to the application's subscriber (one
/// line, see its docs). `instrument` sets no global tracing subscriber:
/// the application's own `init()` / `try_init()` keeps working.
/// `RUNTRACE_TOKIO_WAKES=global` makes it install runtrace's minimal one
/// ([`wakes::TaskWakes`]) when the application has none and never sets
/// one.
///
/// ```
/// let rt = runtrace_tokio::instrument(tokio::runtime::Builder::new_current_thread().enable_all())
///     .build()?;
/// rt.block_on(async { tokio::task::yield_now().await });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn instrument(b: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
    Instrumentation::new().apply(b)
}

type Hook = Arc<dyn Fn() + Send + Sync>;
type TaskHook = Arc<dyn Fn(&tokio::runtime::TaskMeta<'_>) + Send + Sync>;

/// How [`instrument`] instruments a runtime: its name in the trace, and
/// the application's own runtime hooks, which keep working (tokio has one
/// slot per hook: runtrace's runs first, then the application's, in the
/// order they were given).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// let started = Arc::new(AtomicUsize::new(0));
/// let s = started.clone();
/// let mut b = tokio::runtime::Builder::new_multi_thread();
/// runtrace_tokio::Instrumentation::new()
///     .name("api")
///     .on_thread_start(move || {
///         s.fetch_add(1, Ordering::Relaxed);
///     })
///     .apply(b.worker_threads(2).enable_all());
/// let rt = b.build()?;
/// rt.block_on(async { tokio::spawn(async {}).await })?;
/// drop(rt);
/// assert!(started.load(Ordering::Relaxed) >= 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default, Clone)]
#[must_use]
pub struct Instrumentation {
    name: Option<Arc<str>>,
    thread_start: Vec<Hook>,
    thread_stop: Vec<Hook>,
    thread_park: Vec<Hook>,
    thread_unpark: Vec<Hook>,
    task_spawn: Vec<TaskHook>,
    task_terminate: Vec<TaskHook>,
    before_poll: Vec<TaskHook>,
    after_poll: Vec<TaskHook>,
}

macro_rules! chain_hook {
    ($(#[$doc:meta])* $name:ident, $field:ident, Hook) => {
        $(#[$doc])*
        pub fn $name(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
            self.$field.push(Arc::new(f));
            self
        }
    };
    ($(#[$doc:meta])* $name:ident, $field:ident, TaskHook) => {
        $(#[$doc])*
        pub fn $name(mut self, f: impl Fn(&tokio::runtime::TaskMeta<'_>) + Send + Sync + 'static) -> Self {
            self.$field.push(Arc::new(f));
            self
        }
    };
}

impl Instrumentation {
    /// Runtrace's hooks, no name, no application hooks.
    pub fn new() -> Instrumentation {
        Instrumentation::default()
    }

    /// The runtime's name in the trace (a process often runs several:
    /// `"api"`, `"blocking-io"`); without one, its index in the process.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(Arc::from(name));
        self
    }

    chain_hook!(
        /// The application's `on_thread_start` (after runtrace's).
        on_thread_start, thread_start, Hook
    );
    chain_hook!(
        /// The application's `on_thread_stop` (after runtrace's).
        on_thread_stop, thread_stop, Hook
    );
    chain_hook!(
        /// The application's `on_thread_park` (after runtrace's).
        on_thread_park, thread_park, Hook
    );
    chain_hook!(
        /// The application's `on_thread_unpark` (after runtrace's).
        on_thread_unpark, thread_unpark, Hook
    );
    chain_hook!(
        /// The application's `on_task_spawn` (after runtrace's).
        on_task_spawn, task_spawn, TaskHook
    );
    chain_hook!(
        /// The application's `on_task_terminate` (after runtrace's).
        on_task_terminate, task_terminate, TaskHook
    );
    chain_hook!(
        /// The application's `on_before_task_poll` (after runtrace's).
        on_before_task_poll, before_poll, TaskHook
    );
    chain_hook!(
        /// The application's `on_after_task_poll` (after runtrace's).
        on_after_task_poll, after_poll, TaskHook
    );

    /// Installs the hooks on `b`, and returns it for chaining.
    pub fn apply(self, b: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
        wakes::install_from_env();
        let clock = TraceClock::get();
        let st = Arc::new(RuntimeState {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            name: self.name.clone(),
            threads: AtomicUsize::new(0),
            sampler: std::sync::Once::new(),
            metrics: OnceLock::new(),
            sched_gap: (clock.ticks_per_sec() / SCHED_SAMPLE_HZ).max(1),
            last_queue_sample: AtomicU64::new(0),
            queue_gap: ticks_in(clock, QUEUE_SAMPLE_PERIOD),
        });
        let (s1, s2, s3, s4, s5) = (st.clone(), st.clone(), st.clone(), st.clone(), st.clone());
        let Instrumentation {
            thread_start,
            thread_stop,
            thread_park,
            thread_unpark,
            task_spawn,
            task_terminate,
            before_poll,
            after_poll,
            ..
        } = self;
        // Each hook: runtrace's work, then the application's hooks; with
        // none, the closure is runtrace's alone (no loop over an empty
        // list on the hot hooks).
        b.on_thread_start(move || {
            s1.threads.fetch_add(1, Ordering::Relaxed);
            // The global queue sampler starts with the runtime's first thread
            // (the handle does not exist before) and stops with its last.
            let st = s1.clone();
            s1.sampler.call_once(move || {
                if let Ok(h) = tokio::runtime::Handle::try_current() {
                    let _ = st.metrics.set(h.metrics());
                    let _ = std::thread::Builder::new()
                        .name(format!("runtrace-tokio-sampler-{}", st.id))
                        .spawn(move || sample_global_queue(st, clock));
                }
            });
            thread_start.iter().for_each(|f| f());
        })
        .on_thread_stop(move || {
            s2.threads.fetch_sub(1, Ordering::Relaxed);
            if STARTED.get() && probes::worker_stop::enabled() {
                probes::worker_stop::fire(probes::worker_stop::Args {
                    worker: worker(),
                    runtime: s2.id,
                });
            }
            thread_stop.iter().for_each(|f| f());
        });
        let park_hook = move || {
            // For a CPU profile's off-CPU stacks: this thread's switch-outs
            // until unpark are the runtime idling (one load when no profile).
            runtrace_core::parked::set(true);
            if probes::worker_park::enabled() {
                park(&s4, clock);
            }
        };
        let unpark_hook = move || {
            runtrace_core::parked::set(false);
            let parked_as = PARKED.replace(runtrace_format::NO_WORKER);
            if probes::worker_unpark::enabled() {
                unpark(&s5, clock, parked_as);
            }
        };
        if thread_park.is_empty() {
            b.on_thread_park(park_hook);
        } else {
            b.on_thread_park(move || {
                park_hook();
                thread_park.iter().for_each(|f| f());
            });
        }
        if thread_unpark.is_empty() {
            b.on_thread_unpark(unpark_hook);
        } else {
            b.on_thread_unpark(move || {
                unpark_hook();
                thread_unpark.iter().for_each(|f| f());
            });
        }
        b.on_task_spawn(move |meta| {
            if probes::task_spawn::enabled() {
                spawned(meta);
            }
            task_spawn.iter().for_each(|f| f(meta));
        });
        let before = move |meta: &tokio::runtime::TaskMeta<'_>| {
            if probes::task_poll_start::enabled() {
                poll_start(&s3, clock, meta);
            }
        };
        if before_poll.is_empty() {
            b.on_before_task_poll(before);
        } else {
            b.on_before_task_poll(move |meta| {
                before(meta);
                before_poll.iter().for_each(|f| f(meta));
            });
        }
        let after = |meta: &tokio::runtime::TaskMeta<'_>| {
            if probes::task_poll_end::enabled() {
                poll_end(meta);
            }
        };
        if after_poll.is_empty() {
            b.on_after_task_poll(after);
        } else {
            b.on_after_task_poll(move |meta| {
                after(meta);
                after_poll.iter().for_each(|f| f(meta));
            });
        }
        b.on_task_terminate(move |meta| {
            if probes::task_terminate::enabled() {
                terminated(meta);
            }
            task_terminate.iter().for_each(|f| f(meta));
        })
    }
}

// The hooks' work while a backend listens, each out of line: a hook is
// then its "is anything listening" check and a jump. Inlined into the
// hooks, the work made each of them save and restore six registers before
// the check, and touch a second cache line for the return, on every call
// of a runtime that is not recording (`idle_hooks` in the HTTP server
// benchmark; docs/measurements/server-instructions.md, "Hooks that return early").

/// WorkerPark: one clock read serves the event and the schedstat sampling.
#[inline(never)]
fn park(st: &RuntimeState, clock: &TraceClock) {
    let now = clock.now();
    let w = worker();
    PARKED.set(w);
    learn_launch_task();
    let t = runtrace_core::thread_time::sampled(now, st.sched_gap);
    probes::worker_park::fire_at(
        now,
        probes::worker_park::Args {
            worker: w,
            local_q: st.local_q(w),
            cpu_ns: t.cpu_ns,
        },
    );
}

/// WorkerUnpark, by the worker the park hook looked up (`parked_as`).
#[inline(never)]
fn unpark(st: &RuntimeState, clock: &TraceClock, parked_as: u32) {
    learn_launch_task();
    let now = clock.now();
    let t = runtrace_core::thread_time::sampled(now, st.sched_gap);
    probes::worker_unpark::fire_at(
        now,
        probes::worker_unpark::Args {
            worker: known_or_lookup(parked_as),
            cpu_ns: t.cpu_ns,
            sched_wait_ns: t.sched_wait_ns,
        },
    );
}

/// TaskSpawn.
#[inline(never)]
fn spawned(meta: &tokio::runtime::TaskMeta<'_>) {
    probes::task_spawn::fire(probes::task_spawn::Args {
        task_id: task_id(meta.id()),
        parent_task_id: current_task(),
        spawn_loc: Loc::from_location(meta.spawned_at()),
        queue: Istr::EMPTY,
    });
}

/// TaskTerminate.
#[inline(never)]
fn terminated(meta: &tokio::runtime::TaskMeta<'_>) {
    probes::task_terminate::fire(probes::task_terminate::Args {
        task_id: task_id(meta.id()),
    });
}

/// PollStart (and the worker's WorkerStart before its first one, and a
/// due QueueSample).
#[inline(never)]
fn poll_start(st: &RuntimeState, clock: &TraceClock, meta: &tokio::runtime::TaskMeta<'_>) {
    let w = worker();
    let id = task_id(meta.id());
    POLLING.set((id, w));
    if !STARTED.get() {
        worker_started(w, st);
    }
    // One clock read for the event and the queue sampling.
    let now = clock.now();
    probes::task_poll_start::fire_at(
        now,
        probes::task_poll_start::Args {
            task_id: id,
            worker: w,
            queue: Istr::EMPTY,
            local_q: st.local_q(w),
        },
    );
    if probes::queue_sample::enabled() {
        st.sample_queue(now, st.queue_gap);
    }
}

/// PollEnd.
#[inline(never)]
fn poll_end(meta: &tokio::runtime::TaskMeta<'_>) {
    let id = task_id(meta.id());
    // The PollStart's lookup, unless another poll ran in between on this
    // thread (a nested runtime's `block_on`).
    let (polling, w) = POLLING.get();
    let worker = if polling == id { w } else { worker() };
    // tokio's hook does not say whether the poll completed the task:
    // `ready` is false here; TaskTerminate marks the end.
    probes::task_poll_end::fire(probes::task_poll_end::Args {
        task_id: id,
        worker,
        ready: false,
    });
}

/// Period of QueueSample events while a backend listens and the workers
/// poll: the poll hooks fire them (a thread waking up 100 times a second
/// to do it cost ~0.4% of a busy server's CPU in a VM).
const QUEUE_SAMPLE_PERIOD: Duration = Duration::from_millis(10);
/// Period of the sampler thread, which covers stretches with no polls (all
/// workers parked, or stuck in one long poll): it samples when the hooks
/// have not for this long. A recording's first sample thus comes within
/// 100 ms of its start if no task is polled.
const QUEUE_SAMPLE_IDLE_PERIOD: Duration = Duration::from_millis(100);

fn ticks_in(clock: &TraceClock, d: Duration) -> u64 {
    (clock.ticks_per_sec() as u128 * d.as_nanos() / 1_000_000_000).max(1) as u64
}

fn sample_global_queue(st: Arc<RuntimeState>, clock: &'static TraceClock) {
    let idle_gap = ticks_in(clock, QUEUE_SAMPLE_IDLE_PERIOD);
    while st.threads.load(Ordering::Relaxed) != 0 {
        if probes::queue_sample::enabled() {
            st.sample_queue(clock.now(), idle_gap);
        }
        std::thread::sleep(QUEUE_SAMPLE_IDLE_PERIOD);
    }
}

/// Spawns `fut` on the current tokio runtime like `tokio::spawn`, and
/// records who wakes it (WakeEvent with the waking task, when a task wakes
/// it). Plain `tokio::spawn` tasks get wake events too while
/// [`wakes::installed`]; then this is plain `tokio::spawn` (tokio reports
/// the wakes, no second WakeEvent is recorded).
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
    Traced {
        fut,
        rec: None,
        waker: None,
    }
}

/// A future whose wakes are recorded (see [`traced`]).
pub struct Traced<F> {
    fut: F,
    /// The recorder behind `waker`, kept to be reused when tokio's waker
    /// changes (see `poll`).
    rec: Option<Arc<WakeRecorder>>,
    /// `rec` as a waker, handed to `fut`.
    waker: Option<Waker>,
}

struct WakeRecorder {
    inner: Waker,
    task: u64,
}

impl WakeRecorder {
    fn record(&self) {
        if probes::task_wake::enabled() {
            let (waker_task_id, worker) = waker_and_worker();
            probes::task_wake::fire(probes::task_wake::Args {
                woken_task_id: self.task,
                waker_task_id,
                worker,
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
        if !probes::task_wake::enabled() || wakes::installed() {
            // Not recording, or tokio reports this task's wakes itself.
            return fut.poll(cx);
        }
        // Reuse the wrapping waker while tokio's waker is the same one
        // (for a tokio task it always is: one allocation per task).
        let same = matches!(&this.rec, Some(r) if r.inner.will_wake(cx.waker()));
        if !same || this.waker.is_none() {
            // Drop our wrapped waker first: if nobody else holds a clone of
            // it, the recorder's allocation is ours alone and is updated in
            // place instead of allocating a new one.
            this.waker = None;
            let task = current_task();
            match this.rec.as_mut().and_then(Arc::get_mut) {
                Some(r) => {
                    r.inner = cx.waker().clone();
                    r.task = task;
                }
                None => {
                    this.rec = Some(Arc::new(WakeRecorder {
                        inner: cx.waker().clone(),
                        task,
                    }))
                }
            }
            this.waker = this.rec.clone().map(Waker::from);
        }
        let w = this.waker.as_ref().unwrap_or_else(|| unreachable!());
        fut.poll(&mut Context::from_waker(w))
    }
}
