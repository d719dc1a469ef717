//! Task dumps (feature `taskdump`, Linux): where each pending task sits.
//!
//! [`crate::dump()`] (`runtrace::tokio::dump()`) asks tokio for a task dump (`Handle::dump`: tokio pauses the
//! runtime's workers and re-polls every idle task in a tracing mode, each
//! tokio leaf future it reaches records its backtrace), then records one
//! `task_dump` event per task: its *await point*, the innermost frame of
//! the application's code and the library call it awaits
//! (`src/db.rs:88 fetch_user -> Semaphore::acquire`). `runtrace analyze`
//! shows them for stuck and leaked tasks (docs/analysis.md, "Where a task
//! waits").
//!
//! A dump is expensive (tokio's docs: the runtime stops while every task
//! is traced; resolving the backtraces reads the binary's debug info, 100
//! ms or more the first time) and never on the hot path: it runs only
//! when asked for ([`crate::dump()`], or `#[runtrace::main]` as
//! `RUNTRACE_TASK_DUMP` says). tokio 1.54's dump of a multi-thread runtime
//! can hang that runtime (tokio-rs/tokio#7478; seen here: a worker
//! spinning in tokio's `steal_all`); docs/analysis.md ("Where a task
//! waits") says what runtrace guards and what it cannot. Resolution runs on a
//! thread of its own, not on a worker (nor on tokio's blocking pool,
//! whose task would be one more in the trace). A dump whose workers do not all
//! answer within the timeout (a worker blocked in a long poll) is given up,
//! as tokio's docs advise.
//!
//! ```no_run
//! # async fn f() {
//! // Inside the instrumented runtime, while recording:
//! match runtrace_tokio::dump().await {
//!     Ok(d) => eprintln!("task dump {}: {} tasks", d.dump, d.tasks),
//!     Err(e) => eprintln!("no task dump: {e}"),
//! }
//! # }
//! ```

use runtrace_core::Istr;
use runtrace_probes::builtin as probes;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How long a dump waits for the runtime's workers (tokio's dump never
/// completes while a worker is blocked).
pub const DUMP_TIMEOUT: Duration = Duration::from_secs(2);
/// Tasks queued on the workers' local queues above which a dump waits
/// (then gives up): tokio 1.54's multi-thread dump gathers every local
/// queue into one of its own, whose steal stops at 128 tasks, and then
/// spins forever on a queue that is not empty (`Shared::steal_all`; seen
/// here: a worker at 100% CPU, the runtime hung). Half that, for margin.
pub const MAX_QUEUED: usize = 64;
/// How long a dump waits for the local queues to drain below
/// [`MAX_QUEUED`].
pub const QUEUE_WAIT: Duration = Duration::from_millis(500);

/// Tasks recorded per dump at most (each is resolved against the debug
/// info); the rest are counted in [`Dumped::omitted`].
pub const MAX_TASKS: usize = 20_000;

static DUMPS: AtomicU32 = AtomicU32::new(0);

/// What one dump recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dumped {
    /// The dump's number (task_dump_start's `dump`, per process from 1).
    pub dump: u32,
    /// Tasks recorded (one `task_dump` event each).
    pub tasks: usize,
    /// Tasks in the dump beyond [`MAX_TASKS`], not recorded.
    pub omitted: usize,
}

/// Why no dump was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    /// Called outside a tokio runtime.
    NoRuntime,
    /// Nothing records `task_dump` events (no recording running).
    NotRecording,
    /// The runtime's workers did not all answer within the timeout.
    TimedOut(Duration),
    /// More than [`MAX_QUEUED`] tasks stayed queued on the workers' local
    /// queues for [`QUEUE_WAIT`] (tokio's dump could hang on them).
    Busy(usize),
    /// Resolving the backtraces failed (its thread panicked or could not
    /// start).
    Resolve(String),
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DumpError::NoRuntime => write!(f, "task dump asked for outside a tokio runtime"),
            DumpError::NotRecording => write!(f, "task dump skipped: nothing is recording"),
            DumpError::TimedOut(d) => write!(
                f,
                "task dump given up after {d:?}: a worker did not answer (blocked in a poll?)"
            ),
            DumpError::Resolve(e) => write!(f, "task dump: resolving its backtraces failed: {e}"),
            DumpError::Busy(n) => write!(
                f,
                "task dump skipped: {n} tasks stayed queued on the workers (over {MAX_QUEUED}, \
                 where tokio's dump can hang its runtime)"
            ),
        }
    }
}

impl std::error::Error for DumpError {}

/// [`crate::dump()`] with what asked for it: `trigger` (`end`, `signal
/// USR1`) is recorded in the dump's task_dump_start. Waits for the
/// workers at most [`DUMP_TIMEOUT`].
///
/// ```no_run
/// # async fn f() -> Result<(), runtrace_tokio::dump::DumpError> {
/// let d = runtrace_tokio::dump::triggered("end").await?;
/// assert!(d.dump >= 1);
/// # Ok(()) }
/// ```
pub async fn triggered(trigger: &str) -> Result<Dumped, DumpError> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| DumpError::NoRuntime)?;
    if !probes::task_dump::enabled() {
        return Err(DumpError::NotRecording);
    }
    quiet_queues(&handle).await?;
    let n = DUMPS.fetch_add(1, Ordering::Relaxed) + 1;
    // Before tokio's tracing polls: the wakes and polls they cause come
    // after this in the trace, where readers know them for the dump's.
    probes::task_dump_start::fire(probes::task_dump_start::Args { dump: n, trigger });
    let d = Timeout::new(handle.dump(), DUMP_TIMEOUT)
        .await
        .ok_or(DumpError::TimedOut(DUMP_TIMEOUT))?;
    let (tasks, omitted) = off_runtime(move || record(&d, n))
        .await
        .map_err(DumpError::Resolve)?;
    Ok(Dumped {
        dump: n,
        tasks,
        omitted,
    })
}

/// Waits, at most [`QUEUE_WAIT`], until the multi-thread runtime's local
/// queues hold at most [`MAX_QUEUED`] tasks (see there why).
async fn quiet_queues(handle: &tokio::runtime::Handle) -> Result<(), DumpError> {
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Ok(());
    }
    let m = handle.metrics();
    let queued = || {
        (0..m.num_workers())
            .map(|w| m.worker_local_queue_depth(w))
            .sum::<usize>()
    };
    let until = std::time::Instant::now() + QUEUE_WAIT;
    loop {
        let n = queued();
        if n <= MAX_QUEUED {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            return Err(DumpError::Busy(n));
        }
        // Let the workers run their queues down (no timer: the runtime
        // may have no time driver).
        tokio::task::yield_now().await;
    }
}

/// [`triggered`] from a thread outside the runtime (a signal watcher): spawns
/// it on `handle` and waits for it, at most [`DUMP_TIMEOUT`] plus
/// `resolve` for the backtraces' resolution.
///
/// ```no_run
/// let rt = tokio::runtime::Runtime::new()?;
/// let h = rt.handle().clone();
/// std::thread::spawn(move || {
///     let _ = runtrace_tokio::dump::dump_blocking(&h, "signal USR1", std::time::Duration::from_secs(10));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn dump_blocking(
    handle: &tokio::runtime::Handle,
    trigger: &str,
    resolve: Duration,
) -> Result<Dumped, DumpError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let trigger = trigger.to_string();
    handle.spawn(async move {
        let _ = tx.send(triggered(&trigger).await);
    });
    rx.recv_timeout(DUMP_TIMEOUT + resolve)
        .unwrap_or(Err(DumpError::TimedOut(DUMP_TIMEOUT + resolve)))
}

/// Records dump `n`'s tasks (off the runtime: resolving reads the debug
/// info). Returns (recorded, omitted).
fn record(d: &tokio::runtime::Dump, n: u32) -> (usize, usize) {
    let cwd = std::env::current_dir().ok();
    let mut recorded = 0;
    let mut omitted = 0;
    for task in d.tasks().iter() {
        if recorded == MAX_TASKS {
            omitted += 1;
            continue;
        }
        let frames: Vec<Frame> = task
            .trace()
            .resolve_backtraces()
            .iter()
            .flat_map(|bt| bt.frames())
            .flat_map(|f| f.symbols())
            .map(|s| Frame {
                name: s.name_demangled().unwrap_or("").to_string(),
                file: s.filename().map(|p| {
                    cwd.as_deref()
                        .and_then(|c| p.strip_prefix(c).ok())
                        .unwrap_or(p)
                        .display()
                        .to_string()
                }),
                line: s.lineno(),
            })
            .collect();
        let (point, trace) = await_point(&frames);
        probes::task_dump::fire(probes::task_dump::Args {
            task_id: crate::task_id(task.id()),
            dump: n,
            await_point: if point.is_empty() {
                Istr::EMPTY
            } else {
                Istr::new(&point)
            },
            trace: cut(&trace, 255),
        });
        recorded += 1;
    }
    (recorded, omitted)
}

/// One resolved symbol of a task's trace (inlined ones are symbols of
/// their own), leaf first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    name: String,
    file: Option<String>,
    line: Option<u32>,
}

/// A frame of the application's own code, not of tokio, the standard
/// library or the tracing machinery.
fn is_app(f: &Frame) -> bool {
    const LIB: &[&str] = &[
        "tokio::",
        "std::",
        "core::",
        "alloc::",
        "backtrace::",
        "runtrace_",
        "futures_",
        "tracing::",
        "tracing_",
        "__rust",
        "<tokio::",
        "<std::",
        "<core::",
        "<alloc::",
        "<runtrace_",
        "<futures_",
        "<tracing",
    ];
    let lib_file = f.file.as_deref().is_some_and(|p| {
        p.starts_with("/rustc/") || p.contains("/.cargo/registry/") || p.contains("/.cargo/git/")
    });
    !f.name.is_empty() && !lib_file && !LIB.iter().any(|l| f.name.starts_with(l))
}

/// A demangled name without its hash, closures and generics: the last
/// `keep` segments of its path. A trait method on a type is named by the
/// type and method, a future's `poll` by the type alone
/// (`<tokio::sync::oneshot::Receiver<T> as core::future::Future>::poll`
/// and `tokio::sync::oneshot::<impl Future for Receiver<T>>::poll` with 2:
/// `oneshot::Receiver`).
fn short(name: &str, keep: usize) -> String {
    let owned;
    let mut n = name;
    if let Some((ty, method)) = trait_impl(name) {
        owned = if method == "poll" || method.is_empty() {
            ty.to_string()
        } else {
            format!("{ty}::{method}")
        };
        n = &owned;
    }
    // Drop generic arguments.
    let mut s = String::with_capacity(n.len());
    let mut depth = 0;
    for c in n.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 => s.push(c),
            _ => {}
        }
    }
    let segs: Vec<&str> = s
        .split("::")
        .filter(|p| !(p.is_empty() || p.starts_with('{') || is_hash(p)))
        .collect();
    let from = segs.len().saturating_sub(keep);
    segs[from..].join("::")
}

/// A symbol's hash segment (`h0123456789abcdef`).
fn is_hash(seg: &str) -> bool {
    seg.len() == 17 && seg.starts_with('h') && seg[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// The type and method of a trait method's name: `<T as Trait>::m` or
/// `path::<impl Trait for T>::m` give (T, m); None for other names.
fn trait_impl(name: &str) -> Option<(&str, &str)> {
    let open = if name.starts_with('<') {
        0
    } else {
        name.find("<impl ")?
    };
    // The '>' closing it.
    let mut depth = 0;
    let mut close = None;
    for (i, c) in name[open..].char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let inner = &name[open + 1..close];
    let ty = match inner.strip_prefix("impl ") {
        Some(imp) => &imp[imp.find(" for ")? + 5..],
        None => &inner[..inner.find(" as ")?],
    };
    let method = name[close + 1..].trim_start_matches("::");
    let method = method.split("::").next().unwrap_or("");
    Some((ty, method))
}

/// The await point of a task's frames (leaf first) and the application's
/// functions from its root to it: (`src/db.rs:88 fetch_user ->
/// Semaphore::acquire`, `main > handle > fetch_user`); empty when no
/// application frame is in the trace.
fn await_point(frames: &[Frame]) -> (String, String) {
    let Some(app) = frames.iter().position(is_app) else {
        return (String::new(), String::new());
    };
    let f = &frames[app];
    let mut point = match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{file}:{line} {}", short(&f.name, 1)),
        _ => short(&f.name, 1),
    };
    // The library call nearest the application frame: its outermost one
    // (a public API such as Semaphore::acquire, not its internals).
    if let Some(lib) = frames[..app].iter().rev().find(|f| !f.name.is_empty()) {
        let callee = callee(lib);
        if !callee.is_empty() {
            point.push_str(" -> ");
            point.push_str(&callee);
        }
    }
    let mut chain: Vec<String> = Vec::new();
    for f in frames[app..].iter().filter(|f| is_app(f)) {
        let s = short(&f.name, 1);
        if chain.last() != Some(&s) {
            chain.push(s);
        }
    }
    chain.reverse();
    (point, chain.join(" > "))
}

/// A library frame's name for an await point: the last two segments of
/// its path (`Semaphore::acquire`). An inlined function's DWARF name has
/// no path when the library was built with line tables only (`poll<()>`,
/// as cargo profiles that trim dependencies' debug info give): its file's
/// module qualifies it (`oneshot::poll` for tokio's src/sync/oneshot.rs).
fn callee(f: &Frame) -> String {
    let name = short(&f.name, 2);
    if f.name.contains("::") || name.is_empty() {
        return name;
    }
    let module = f.file.as_deref().and_then(|p| {
        let p = std::path::Path::new(p);
        let stem = p.file_stem()?.to_str()?;
        if stem == "mod" || stem == "lib" {
            p.parent()?.file_name()?.to_str()
        } else {
            Some(stem)
        }
    });
    match module {
        Some(m) => format!("{m}::{name}"),
        None => name,
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// `f` run on a thread of its own, awaited (Err: it panicked, or no
/// thread could be started).
async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    type Slot<T> = Arc<Mutex<(Option<Result<T, String>>, Option<Waker>)>>;
    let slot: Slot<T> = Arc::new(Mutex::new((None, None)));
    let theirs = slot.clone();
    std::thread::Builder::new()
        .name("runtrace-dump".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .map_err(|_| "the resolving thread panicked".to_string());
            let mut g = theirs.lock().unwrap_or_else(|e| e.into_inner());
            g.0 = Some(r);
            if let Some(w) = g.1.take() {
                w.wake();
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    std::future::poll_fn(|cx| {
        let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
        match g.0.take() {
            Some(r) => Poll::Ready(r),
            None => {
                g.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    })
    .await
}

/// `fut`, or None after `after` (a thread sleeps and wakes it: the
/// runtime may have no time driver, and a dump is rare).
struct Timeout<F> {
    fut: Pin<Box<F>>,
    state: Arc<Mutex<(bool, Option<Waker>)>>,
}

impl<F: Future> Timeout<F> {
    fn new(fut: F, after: Duration) -> Self {
        let state = Arc::new(Mutex::new((false, None::<Waker>)));
        let s = Arc::downgrade(&state);
        let _ = std::thread::Builder::new()
            .name("runtrace-dump-timer".into())
            .spawn(move || {
                std::thread::sleep(after);
                if let Some(s) = s.upgrade() {
                    let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
                    g.0 = true;
                    if let Some(w) = g.1.take() {
                        w.wake();
                    }
                }
            });
        Timeout {
            fut: Box::pin(fut),
            state,
        }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if g.0 {
            return Poll::Ready(None);
        }
        g.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(name: &str, file: &str, line: u32) -> Frame {
        Frame {
            name: name.into(),
            file: Some(file.into()),
            line: Some(line),
        }
    }

    #[test]
    fn names_lose_hashes_closures_and_generics() {
        assert_eq!(
            short(
                "<tokio::sync::oneshot::Receiver<T> as core::future::future::Future>::poll",
                2
            ),
            "oneshot::Receiver"
        );
        assert_eq!(
            short("tokio::sync::semaphore::Semaphore::acquire::{{closure}}", 2),
            "Semaphore::acquire"
        );
        assert_eq!(
            short("app::db::fetch_user::{{closure}}::h0123456789abcdef", 1),
            "fetch_user"
        );
        assert_eq!(
            short("tokio::sync::oneshot::<impl core::future::future::Future for tokio::sync::oneshot::Receiver<T>>::poll", 2),
            "oneshot::Receiver"
        );
        assert_eq!(
            short(
                "<tokio::sync::mutex::Mutex<T> as app::Lock>::lock_it::{{closure}}",
                2
            ),
            "Mutex::lock_it"
        );
        assert_eq!(short("", 2), "");
    }

    #[test]
    fn the_await_point_is_the_innermost_app_frame_and_its_library_call() {
        let frames = [
            fr(
                "backtrace::capture::Backtrace::new",
                "/root/.cargo/registry/src/x/backtrace/src/capture.rs",
                1,
            ),
            fr(
                "tokio::runtime::task::trace::trace_leaf",
                "/root/.cargo/registry/src/x/tokio/src/trace.rs",
                2,
            ),
            fr(
                "tokio::sync::batch_semaphore::Acquire::poll",
                "/root/.cargo/registry/src/x/tokio/a.rs",
                3,
            ),
            fr(
                "tokio::sync::semaphore::Semaphore::acquire::{{closure}}",
                "/root/.cargo/registry/src/x/tokio/s.rs",
                4,
            ),
            fr("app::db::fetch_user::{{closure}}", "src/db.rs", 88),
            fr("app::handle::{{closure}}", "src/main.rs", 12),
            fr(
                "tokio::runtime::task::core::Core::poll",
                "/root/.cargo/registry/src/x/tokio/c.rs",
                5,
            ),
        ];
        let (p, t) = await_point(&frames);
        assert_eq!(p, "src/db.rs:88 fetch_user -> Semaphore::acquire");
        assert_eq!(t, "handle > fetch_user");
        // A path-less inlined name is qualified by its file's module.
        let inlined = [
            fr(
                "poll<()>",
                "/root/.cargo/registry/src/x/tokio-1.54.1/src/sync/oneshot.rs",
                1284,
            ),
            fr("app::watch::{{closure}}", "src/watch.rs", 9),
        ];
        assert_eq!(
            await_point(&inlined).0,
            "src/watch.rs:9 watch -> oneshot::poll"
        );
        // No application frame: nothing to name.
        assert_eq!(await_point(&frames[..4]), (String::new(), String::new()));
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 255), "abc");
    }
}
