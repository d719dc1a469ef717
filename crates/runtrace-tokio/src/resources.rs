//! tokio's async resources as runtrace events, through [`crate::layer()`]:
//! with `--cfg tokio_unstable` and tokio's `tracing` feature, tokio opens
//! a `runtime.resource` span per Mutex, RwLock, Semaphore, oneshot (and a
//! tokio-internal semaphore per bounded mpsc channel; its timers, Sleep
//! and Interval, are resources too, and left out here), emits a
//! `runtime::resource::poll_op` event at each poll of an operation on it
//! (`is_ready`), and `runtime::resource::state_update` events as its state
//! changes (`locked`, `write_locked`, `permits` with `permits.op`).
//!
//! While a recording runs, the layer turns them into `resource_new` (at
//! the span's creation: runtrace's id for the resource, its concrete type,
//! its creation site), `resource_poll` (the task polling, ready or not) and
//! `resource_release` (a Mutex or RwLock write unlocked, a Semaphore's
//! permits returned). Nothing is done while nothing records: the callsites
//! are disabled (their interest is re-asked when a recording starts or
//! ends), so resources created before a recording starts are not seen.
//!
//! tokio builds its Mutex, RwLock and Semaphore on an internal semaphore
//! with a resource span of its own, created inside the public one's: its
//! events are left out (the public resource reports them), except a
//! Semaphore's returned permits, which only the internal one reports. An
//! internal semaphore created outside any public resource (a bounded
//! channel's capacity) is a resource of its own, marked `internal`.
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! let subscriber = tracing_subscriber::registry().with(runtrace_tokio::layer());
//! tracing::subscriber::with_default(subscriber, || {
//!     // Not recording: a tokio Mutex costs the layer one check.
//!     let m = tokio::sync::Mutex::new(1);
//!     drop(m);
//! });
//! ```

use runtrace_core::{Istr, Loc};
use runtrace_probes::builtin as probes;
use std::sync::atomic::{AtomicU32, Ordering};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// runtrace's resource ids: unique within the process (never reused, as
/// tracing's span ids are).
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// What the layer keeps in a resource span's extensions.
#[derive(Clone, Copy)]
struct Resource {
    /// The id its events carry (the owner's, for an internal one).
    id: u32,
    /// Its poll_op events are recorded (not an owned internal semaphore).
    polls: bool,
    /// Its `permits` add events are releases (a Semaphore's internal one,
    /// or a channel's capacity).
    permit_releases: bool,
    /// Its `locked` / `write_locked` false events are releases.
    lock_releases: bool,
    semaphore: bool,
}

/// A resource span of tokio's `sync` module (its timers' spans, targets
/// `tokio::time::*`, are not read: no span is even built for them).
fn is_resource_span(m: &Metadata<'_>) -> bool {
    m.is_span() && m.name() == "runtime.resource" && m.target().starts_with("tokio::sync")
}

fn is_resource_event(m: &Metadata<'_>) -> bool {
    m.is_event()
        && matches!(
            m.target(),
            "runtime::resource::poll_op" | "runtime::resource::state_update"
        )
}

/// Whether a recording wants resource events now (one load).
#[inline]
fn recording() -> bool {
    probes::resource_poll::enabled()
}

/// Whether the layer reads callsite `m` (resource spans and events while
/// recording); `None`: not a resource callsite.
pub(crate) fn enabled(m: &Metadata<'_>) -> Option<bool> {
    if is_resource_span(m) || is_resource_event(m) {
        Some(recording())
    } else {
        None
    }
}

/// The interest of callsite `m`, `None` when not a resource callsite
/// (cached like the waker events': re-asked when a recording starts or
/// ends).
pub(crate) fn interest(m: &'static Metadata<'static>) -> Option<Interest> {
    if !(is_resource_span(m) || is_resource_event(m)) {
        return None;
    }
    Some(if runtrace_probes::EXTERNAL_BACKENDS {
        Interest::sometimes()
    } else if recording() {
        Interest::always()
    } else {
        Interest::never()
    })
}

/// The fields of a resource span, each interned as it is read (the
/// visitor sees each `&str` only during its call): the file as a string
/// whose text then lives at a stable address for [`Loc::from_parts`].
#[derive(Default)]
struct Site {
    /// tokio's `kind` is "timer" (Sleep, Interval: waiting on them is
    /// the point).
    timer: bool,
    concrete: Option<Istr>,
    file: Option<Istr>,
    line: u32,
    col: u32,
    internal: bool,
}

impl Visit for Site {
    fn record_str(&mut self, f: &Field, v: &str) {
        match f.name() {
            "concrete_type" => self.concrete = Some(intern(v)),
            "kind" => self.timer = v == "timer",
            "loc.file" => self.file = Some(intern(v)),
            _ => {}
        }
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        match f.name() {
            "loc.line" => self.line = v as u32,
            "loc.col" => self.col = v as u32,
            _ => {}
        }
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.record_u64(f, v.max(0) as u64);
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        if f.name() == "is_internal" {
            self.internal = v;
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl Site {
    fn concrete(&self) -> &'static str {
        self.concrete
            .and_then(|c| c.c_str().to_str().ok())
            .unwrap_or("")
    }

    fn loc(&self) -> Loc {
        match self.file.and_then(|f| f.c_str().to_str().ok()) {
            Some(file) => Loc::from_parts(file, self.line, self.col),
            None => Loc::UNKNOWN,
        }
    }
}

/// Interns `s` with a per-thread cache keyed by its address (tokio's type
/// names are `&'static str` literals), so steady state takes no lock.
fn intern(s: &str) -> Istr {
    thread_local! {
        static CACHE: std::cell::RefCell<Vec<(usize, usize, Istr)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let key = (s.as_ptr() as usize, s.len());
    let hit = CACHE
        .try_with(|c| {
            c.borrow()
                .iter()
                .find(|e| (e.0, e.1) == key && e.2.c_str().to_bytes() == s.as_bytes())
                .map(|e| e.2)
        })
        .ok()
        .flatten();
    if let Some(i) = hit {
        return i;
    }
    let i = Istr::new(s);
    let _ = CACHE.try_with(|c| {
        let mut c = c.borrow_mut();
        if c.len() < 256 {
            c.push((key.0, key.1, i));
        }
    });
    i
}

/// A resource span was created: give it an id and, unless it is an
/// internal semaphore of a public resource, record it.
pub(crate) fn on_new_span<S>(attrs: &Attributes<'_>, id: &Id, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    if !is_resource_span(attrs.metadata()) || !recording() {
        return;
    }
    let mut site = Site::default();
    attrs.record(&mut site);
    if site.timer {
        return;
    }
    let concrete = site.concrete();
    let semaphore = concrete == "Semaphore";
    let lockish = matches!(concrete, "Mutex" | "RwLock");
    // An internal semaphore created inside a public resource's span is
    // that resource's: its events go under the owner's id.
    let owner = if site.internal {
        ctx.lookup_current()
            .and_then(|s| s.extensions().get::<Resource>().copied())
    } else {
        None
    };
    let res = match owner {
        Some(o) => Resource {
            id: o.id,
            polls: false,
            permit_releases: o.semaphore,
            lock_releases: false,
            semaphore: false,
        },
        None => {
            let rid = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            probes::resource_new::fire(probes::resource_new::Args {
                resource_id: rid,
                concrete_type: site.concrete.unwrap_or(Istr::EMPTY),
                created_at: site.loc(),
                internal: site.internal,
            });
            Resource {
                id: rid,
                polls: true,
                // A channel's capacity is freed by its receiver: not a
                // hold's end (nobody holds it), and frequent: left out.
                permit_releases: false,
                lock_releases: lockish,
                semaphore,
            }
        }
    };
    if let Some(span) = ctx.span(id) {
        span.extensions_mut().insert(res);
    }
}

/// The fields of a resource event this module reads.
#[derive(Default)]
struct EventFields {
    ready: Option<bool>,
    /// `locked` or `write_locked` became false.
    unlocked: bool,
    /// `permits` with `permits.op = "add"`.
    permits_added: bool,
    permits: bool,
}

impl Visit for EventFields {
    fn record_bool(&mut self, f: &Field, v: bool) {
        match f.name() {
            "is_ready" => self.ready = Some(v),
            "locked" | "write_locked" if !v => self.unlocked = true,
            _ => {}
        }
    }
    fn record_u64(&mut self, f: &Field, _: u64) {
        if f.name() == "permits" {
            self.permits = true;
        }
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "permits.op" && v == "add" {
            self.permits_added = true;
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// A resource event: a poll of an operation, or a release.
pub(crate) fn on_event<S>(ev: &Event<'_>, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let m = ev.metadata();
    if !is_resource_event(m) || !recording() {
        return;
    }
    // The resource span the event was emitted in (spans this layer does
    // not read, tokio's async-op spans, are skipped).
    let Some(res) = ctx
        .event_span(ev)
        .and_then(|s| s.extensions().get::<Resource>().copied())
    else {
        return;
    };
    let mut f = EventFields::default();
    ev.record(&mut f);
    let task = crate::current_task();
    if let Some(ready) = f.ready {
        if res.polls {
            probes::resource_poll::fire(probes::resource_poll::Args {
                task_id: task,
                resource_id: res.id,
                ready,
            });
        }
    } else if (f.unlocked && res.lock_releases)
        || (f.permits && f.permits_added && res.permit_releases)
    {
        probes::resource_release::fire(probes::resource_release::Args {
            task_id: task,
            resource_id: res.id,
        });
    }
}
