//! [`layer()`]: runtrace as a `tracing_subscriber::Layer` the application
//! adds to its own subscriber, so it keeps its logs and runtrace learns
//! every task's wakes:
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer())
//!     .with(runtrace_tokio::layer())
//!     .init();
//! ```
//!
//! tokio (`--cfg tokio_unstable`, its `tracing` feature) opens a
//! `runtime.spawn` span per task (field `task.id`: the tokio task id) and
//! emits a `tokio::task::waker` event per waker operation (field
//! `task.id`: the *span's* id). The layer keeps the tokio task id in the
//! span's extensions and turns `waker.wake` / `waker.wake_by_ref` events
//! into WakeEvents.
//!
//! Its filter is its own (a per-layer filter: the application's layers
//! see what they saw before): tokio's task spans and waker events only
//! while some backend listens (cached per callsite, re-asked when a
//! recording starts or ends; tasks spawned before a recording started
//! have no span, so their wakes are not seen), the application's spans
//! [`crate::spans::record`] selected, nothing else. tokio's spans and events are
//! at TRACE level: filter the application's layers each on its own
//! (`fmt::layer().with_filter(LevelFilter::INFO)`); a filter layered over
//! the whole registry hides them from this layer as well.

use crate::wakes::{self, is_task_span, is_waker_event};
use runtrace_probes::builtin as probes;
use tracing::span::{Attributes, Id};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

/// runtrace's layer: add it to the application's subscriber (see the
/// module docs). Marks tokio's wakes as reported, so tasks spawned through
/// [`crate::spawn`] are not recorded twice.
///
/// ```
/// use tracing_subscriber::prelude::*;
/// let subscriber = tracing_subscriber::registry().with(runtrace_tokio::layer());
/// tracing::subscriber::with_default(subscriber, || tracing::info!("logged, not recorded"));
/// ```
pub fn layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    wakes::mark_installed();
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The waker events' interest follows whether a backend listens.
        runtrace_core::listeners::on_change(tracing::callsite::rebuild_interest_cache);
    });
    // One per-layer filter for all of runtrace's parts: tracing-subscriber
    // looks a span up in the registry at every enter and exit for each
    // filtered layer, so two filtered layers cost two lookups per poll of
    // every tokio task (measured: spans/* in benches/record.rs).
    WakesLayer
        .and_then(crate::spans::layer())
        .with_filter(RuntraceFilter)
}

/// The tokio task id of a task span.
struct TaskId(u64);

struct WakesLayer;

/// What runtrace reads: tokio's task spans, its waker events and resource
/// instrumentation while a backend listens, and the application's spans
/// [`crate::spans::record`] selected.
struct RuntraceFilter;

impl<S> Filter<S> for RuntraceFilter {
    fn enabled(&self, m: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        if let Some(on) = crate::resources::enabled(m) {
            return on;
        }
        if m.is_event() {
            probes::task_wake::enabled() && is_waker_event(m)
        } else if is_task_span(m) {
            probes::task_wake::enabled()
        } else {
            crate::spans::wanted(m)
        }
    }

    fn callsite_enabled(&self, m: &'static Metadata<'static>) -> Interest {
        if let Some(i) = crate::resources::interest(m) {
            return i;
        }
        if crate::spans::wanted(m) {
            Interest::always()
        } else if is_task_span(m) || is_waker_event(m) {
            // tokio's task spans too only while something records: with
            // them on, the application's registry creates, enters and
            // exits a span at every spawn and poll (~580 instructions per
            // request in the HTTP bench, `idle_layer` against
            // `idle_hooks`), for nothing while no wake is recorded. Tasks
            // spawned before a recording starts have no span, so no wakes
            // (tokio gives a task its span at spawn).
            wakes::waker_interest(m)
        } else {
            Interest::never()
        }
    }
}

impl<S> Layer<S> for WakesLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        crate::resources::on_new_span(attrs, id, &ctx);
        if !is_task_span(attrs.metadata()) {
            return;
        }
        let mut f = wakes::Fields::default();
        attrs.record(&mut f);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(TaskId(f.task));
        }
    }

    fn on_event(&self, ev: &Event<'_>, ctx: Context<'_, S>) {
        crate::resources::on_event(ev, &ctx);
        if !probes::task_wake::enabled() || !is_waker_event(ev.metadata()) {
            return;
        }
        let Some(span_id) = wakes::woken(ev) else {
            return;
        };
        // `task.id` of a waker event is the task span's id.
        let Some(span) = ctx.span(&Id::from_u64(span_id)) else {
            return;
        };
        let task = span.extensions().get::<TaskId>().map(|t| t.0);
        if let Some(task) = task {
            wakes::fire_wake(task);
        }
    }
}
