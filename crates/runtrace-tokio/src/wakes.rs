//! WakeEvents for every tokio task, plain `tokio::spawn` included, from
//! tokio's own waker instrumentation: with `--cfg tokio_unstable` and
//! tokio's `tracing` feature, tokio opens a `runtime.spawn` span per task
//! (field `task.id`: the tokio task id) and emits a `tokio::task::waker`
//! event (`op`, `task.id`: the task span's id) on every waker operation.
//!
//! [`TaskWakes`] is a minimal tracing subscriber: it gives each task span
//! the tokio task id as its span id, so a waker event names the tokio
//! task directly (no map, no lock, no allocation), and turns
//! `waker.wake` / `waker.wake_by_ref` into WakeEvents while a backend
//! listens. Every other callsite is disabled once, at registration, and
//! so are the waker callsites of `waker.clone` and `waker.drop` once their
//! first event has shown which operation they report (tokio has one
//! callsite per operation; the operation is a field value, not in the
//! callsite's metadata). A wake callsite's later events are read for
//! their task id alone, with no field name or operation compared.
//!
//! ```
//! // A program that never sets a tracing subscriber of its own: runtrace's
//! // minimal one, set explicitly (`instrument` sets none; programs with a
//! // subscriber add `runtrace_tokio::layer()` to it instead).
//! assert!(runtrace_tokio::wakes::install_global());
//! let _ = runtrace_tokio::instrument(&mut tokio::runtime::Builder::new_current_thread());
//! assert!(runtrace_tokio::wakes::installed());
//! ```

use runtrace_probes::builtin as probes;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// True once [`TaskWakes`] is the global subscriber: tokio then reports
/// every wake, and [`crate::traced`] records none of its own (no double
/// WakeEvents).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether tokio's waker events are recorded (see the module docs).
///
/// ```
/// let on: bool = runtrace_tokio::wakes::installed();
/// # let _ = on;
/// ```
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Installs [`TaskWakes`] as the process's global tracing subscriber,
/// unless one is already set; returns whether it is now installed. For an
/// application with no tracing subscriber of its own, ever (a global
/// subscriber is set once per process: an application's later `init()`
/// would panic, and `try_init()` fail). Applications with their own
/// subscriber add [`crate::layer()`] to it instead.
///
/// ```
/// // A program without logging: runtrace's minimal subscriber.
/// let on = runtrace_tokio::wakes::install_global();
/// assert_eq!(on, runtrace_tokio::wakes::installed());
/// ```
pub fn install_global() -> bool {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if tracing::dispatcher::set_global_default(tracing::Dispatch::new(TaskWakes)).is_ok() {
            INSTALLED.store(true, Ordering::Relaxed);
            // `register_callsite` caches the waker events' interest from
            // whether a recording runs: re-ask at each start and end.
            runtrace_core::listeners::on_change(tracing::callsite::rebuild_interest_cache);
        }
    });
    installed()
}

/// `RUNTRACE_TOKIO_WAKES=global`: [`install_global`] when a runtime is
/// instrumented (for an application that never sets a subscriber and
/// cannot be changed to add [`crate::layer()`]).
pub(crate) fn install_from_env() {
    if std::env::var_os("RUNTRACE_TOKIO_WAKES").is_some_and(|v| v == "global") {
        install_global();
    }
}

/// Marks tokio's wakes as reported (by [`crate::layer()`]): [`crate::traced`]
/// then records none of its own.
pub(crate) fn mark_installed() {
    INSTALLED.store(true, Ordering::Relaxed);
}

/// A few callsites, by their metadata's address: added once each, never
/// removed, read with one load a slot (no lock on the event path).
struct Callsites<const N: usize>([AtomicUsize; N]);

impl<const N: usize> Callsites<N> {
    const fn new() -> Self {
        Callsites([const { AtomicUsize::new(0) }; N])
    }

    fn addr(m: &'static Metadata<'static>) -> usize {
        m as *const Metadata<'static> as usize
    }

    #[inline]
    fn contains(&self, m: &'static Metadata<'static>) -> bool {
        let a = Self::addr(m);
        self.0.iter().any(|s| s.load(Ordering::Relaxed) == a)
    }

    /// Adds `m`: false if it was there already or no slot is free.
    fn insert(&self, m: &'static Metadata<'static>) -> bool {
        let a = Self::addr(m);
        !self.contains(m)
            && self.0.iter().any(|s| {
                s.compare_exchange(0, a, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            })
    }

    fn len(&self) -> usize {
        self.0
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != 0)
            .count()
    }
}

/// Waker callsites seen reporting an operation that is not a wake:
/// `register_callsite` disables them. tokio has two (clone and drop); a
/// few more slots in case a version adds some.
static NOT_WAKES: Callsites<8> = Callsites::new();

/// How many of tokio's waker callsites are known to report no wakes (waker
/// clones and drops) and are disabled for good: 0 until a recording has
/// seen their first events.
///
/// ```
/// assert!(runtrace_tokio::wakes::disabled_callsites() <= 8);
/// ```
pub fn disabled_callsites() -> usize {
    NOT_WAKES.len()
}

/// Remembers that callsite `m` reports no wakes and has tracing ask
/// `register_callsite` again, so its events stop being built (in the
/// HTTP server benchmark a waker clone or drop dispatched to this
/// subscriber cost ~150 instructions, only to be ignored). Runs once per
/// such callsite: later events of it are not dispatched.
#[cold]
fn learn_not_wake(m: &'static Metadata<'static>) {
    if NOT_WAKES.insert(m) {
        tracing::callsite::rebuild_interest_cache();
    }
}

/// Waker callsites seen reporting a wake (`waker.wake`,
/// `waker.wake_by_ref`) with tokio's two fields, `op` and `task.id`: their
/// events are read with [`TaskOnly`], without comparing field names or the
/// operation (tokio has one callsite per operation, so the operation a
/// callsite reports never changes). tokio has two; a few more slots in
/// case a version adds some.
static WAKES: Callsites<4> = Callsites::new();

/// How many of tokio's waker callsites are known to report wakes, read
/// for their task id alone: 0 until a recording has seen their first
/// events.
///
/// ```
/// assert!(runtrace_tokio::wakes::learned_wake_callsites() <= 4);
/// ```
pub fn learned_wake_callsites() -> usize {
    WAKES.len()
}

/// Remembers that callsite `m` reports wakes, if its fields are tokio's
/// two: then its only `u64` is `task.id` (a field's type is fixed at its
/// callsite). Runs once per such callsite.
#[cold]
fn learn_wake(m: &'static Metadata<'static>) {
    let names: Vec<&str> = m.fields().iter().map(|f| f.name()).collect();
    if names == ["op", "task.id"] {
        WAKES.insert(m);
    }
}

/// Span ids of spans that are not task spans (never expected: only task
/// spans are enabled), kept apart from task ids by the top bit.
static OTHER_SPANS: AtomicU64 = AtomicU64::new(1 << 63);

/// The tracing subscriber that turns tokio's waker events into WakeEvents
/// (see the module docs).
///
/// ```
/// use tracing::Subscriber;
/// let s = runtrace_tokio::wakes::TaskWakes;
/// assert!(s.max_level_hint().is_some());
/// ```
pub struct TaskWakes;

pub(crate) fn is_task_span(m: &Metadata<'_>) -> bool {
    m.is_span() && m.name() == "runtime.spawn"
}

pub(crate) fn is_waker_event(m: &Metadata<'_>) -> bool {
    m.is_event() && m.target() == "tokio::task::waker"
}

/// Reads `task.id` (and `op`) of a tokio span or waker event.
#[derive(Default)]
pub(crate) struct Fields {
    pub(crate) task: u64,
    wake: bool,
}

impl Visit for Fields {
    fn record_u64(&mut self, f: &Field, v: u64) {
        if f.name() == "task.id" {
            self.task = v;
        }
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "op" {
            self.wake = v == "waker.wake" || v == "waker.wake_by_ref";
        }
    }
    // `op` is a `&str` (record_str); nothing else is read.
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// Reads the task id of a learned wake callsite's event ([`WAKES`]): its
/// only `u64` field.
struct TaskOnly(u64);

impl Visit for TaskOnly {
    fn record_u64(&mut self, _: &Field, v: u64) {
        self.0 = v;
    }
    fn record_str(&mut self, _: &Field, _: &str) {}
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// The interest of one of tokio's waker callsites, for this subscriber
/// and for [`crate::layer()`]'s filter alike (which asks it for tokio's
/// task spans too). Clone and drop callsites,
/// once known, never. With the recorder the only possible listener, the
/// interest is cached: `always` while a recording runs (no `enabled` call
/// per wake; the event handler checks again) and `never` while nothing
/// records, so a waker operation costs tokio one cached load (rebuilt
/// when a recording starts or ends: `install`). With a backend that
/// outside tools switch on, `enabled` is asked at each waker operation,
/// and the event is not even built while nothing listens.
pub(crate) fn waker_interest(m: &'static Metadata<'static>) -> Interest {
    if NOT_WAKES.contains(m) {
        Interest::never()
    } else if runtrace_probes::EXTERNAL_BACKENDS {
        Interest::sometimes()
    } else if probes::task_wake::enabled() {
        Interest::always()
    } else {
        Interest::never()
    }
}

/// The `task.id` field of a waker event that reports a wake (for this
/// subscriber the tokio task id, for the layer the task span's id); None
/// for the other operations, whose callsites are then disabled
/// ([`learn_not_wake`]). A learned wake callsite's event is read for its
/// task id alone.
#[inline]
pub(crate) fn woken(ev: &Event<'_>) -> Option<u64> {
    let m = ev.metadata();
    let task = if WAKES.contains(m) {
        let mut t = TaskOnly(0);
        ev.record(&mut t);
        t.0
    } else {
        let mut f = Fields::default();
        ev.record(&mut f);
        if !f.wake {
            learn_not_wake(m);
            return None;
        }
        learn_wake(m);
        f.task
    };
    (task != 0).then_some(task)
}

/// Records that tokio task `task` was woken, by the task (and on the
/// worker) running on this thread.
#[inline]
pub(crate) fn fire_wake(task: u64) {
    let (waker_task_id, worker) = crate::waker_and_worker();
    probes::task_wake::fire(probes::task_wake::Args {
        woken_task_id: task,
        waker_task_id,
        worker,
    });
}

impl Subscriber for TaskWakes {
    fn register_callsite(&self, m: &'static Metadata<'static>) -> Interest {
        if is_task_span(m) {
            Interest::always()
        } else if is_waker_event(m) {
            waker_interest(m)
        } else {
            Interest::never()
        }
    }

    #[inline]
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        // The listening check first: one load, before any string compare.
        if m.is_event() {
            probes::task_wake::enabled() && is_waker_event(m)
        } else {
            is_task_span(m)
        }
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut f = Fields::default();
        attrs.record(&mut f);
        if f.task != 0 && f.task < 1 << 63 {
            // The task id as the span id: waker events then carry it.
            Id::from_u64(f.task)
        } else {
            Id::from_u64(OTHER_SPANS.fetch_add(1, Ordering::Relaxed))
        }
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    #[inline]
    fn event(&self, ev: &Event<'_>) {
        if !probes::task_wake::enabled() {
            return;
        }
        if let Some(task) = woken(ev) {
            fire_wake(task);
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
