//! The application's own `tracing` spans in the trace (opt-in): each span's
//! creation (`span_new`: its id, parent, interned name and first fields),
//! every enter and exit (`span_enter`, `span_exit`: the reader ties them to
//! the poll running on the same thread, so to its task and worker) and its
//! close (`span_close`). `runtrace analyze` then has a table by span
//! (count, wall time from first enter to close, busy time, wake-to-poll
//! delay suffered inside), Perfetto shows the spans inside the polls they
//! ran in, and findings name the span a slow location was serving.
//!
//! [`crate::layer()`] records them once the application says which spans,
//! filtered by target and level like any layer: [`record`] with a
//! [`Spans`] ([`app_spans!`](crate::app_spans) is the application's own
//! crate at INFO), or the environment variable `RUNTRACE_SPANS` (a
//! `tracing_subscriber` targets list, `my_app=info,tower_http=debug`)
//! read when the layer is made, if [`record`] was not called first.
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! // The application's own crate at INFO, and tower-http's request spans.
//! let spans = runtrace_tokio::app_spans!().with("tower_http", tracing::Level::DEBUG);
//! runtrace_tokio::spans::record(spans).unwrap();
//! let subscriber = tracing_subscriber::registry().with(runtrace_tokio::layer());
//! tracing::subscriber::with_default(subscriber, || {
//!     let _g = tracing::info_span!("checkout", cart = 7).entered();
//! });
//! ```
//!
//! What is recorded of a span's fields: the first [`MAX_FIELDS`] fields
//! set at its creation, as `key=value` separated by spaces, each value
//! cut at [`MAX_VALUE`] bytes and the whole at 255 (values recorded later,
//! with `Span::record`, are not). tokio's own instrumentation spans
//! (names starting with `runtime.`) are never recorded as spans: runtrace
//! records them as tasks already.
//!
//! Cost: on the hot path (enter, exit) one check whether a recording runs
//! and the event (one clock read, no lock, no allocation); creating a span
//! formats its fields into a buffer on the stack; a span name is interned
//! once per callsite and thread. Measured by `cargo bench --bench record`
//! (`spans/*`; 2-vCPU VM shared with other builds, 2026-11-27): an
//! enter+exit costs ~26 ns through a bare registry, ~180 ns with this
//! layer added and nothing recording, ~230-320 ns recording (paired
//! rounds: +296 ns median over the bare registry). Most of it is
//! tracing-subscriber's per-layer filtering (each filtered layer looks the
//! span up on enter and exit), not the events: not yet the "well under
//! 100 ns" aimed at.

use runtrace_core::Istr;
use runtrace_probes::builtin as probes;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::OnceLock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Fields of a span recorded at most.
pub const MAX_FIELDS: usize = 4;
/// Bytes of one field's value recorded at most (cut at a character
/// boundary).
pub const MAX_VALUE: usize = 64;
/// Bytes of a span's fields text (the catalog's inline string limit).
const MAX_TEXT: usize = 255;

/// Which spans are recorded: targets and levels, as a
/// `tracing_subscriber::filter::Targets` says them.
///
/// ```
/// use runtrace_tokio::spans::Spans;
/// let s = Spans::app("my_service");
/// assert!(s.would_record("my_service::http", &tracing::Level::INFO));
/// assert!(!s.would_record("my_service::http", &tracing::Level::DEBUG));
/// assert!(!s.would_record("hyper", &tracing::Level::INFO));
/// let s: Spans = "my_service=debug,tower_http=debug".parse().unwrap();
/// assert!(s.would_record("tower_http::trace", &tracing::Level::DEBUG));
/// assert!("my_service=loud".parse::<Spans>().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Spans {
    targets: Targets,
}

impl Spans {
    /// The spans of crate `name` (its module paths: the crate's name with
    /// `_` for `-`) at INFO and above. [`app_spans!`](crate::app_spans)
    /// names the calling crate.
    pub fn app(name: &str) -> Spans {
        Spans {
            targets: Targets::new().with_target(name.replace('-', "_"), tracing::Level::INFO),
        }
    }

    /// The spans `targets` enables.
    pub fn targets(targets: Targets) -> Spans {
        Spans { targets }
    }

    /// These spans and those of target `target` at `level` and above.
    pub fn with(self, target: &str, level: tracing::Level) -> Spans {
        Spans {
            targets: self.targets.with_target(target.to_string(), level),
        }
    }

    /// Whether a span of `target` at `level` is recorded.
    pub fn would_record(&self, target: &str, level: &tracing::Level) -> bool {
        self.targets.would_enable(target, level)
    }

    fn wants(&self, m: &Metadata<'_>) -> bool {
        m.is_span()
            && !m.name().starts_with("runtime.")
            && self.targets.would_enable(m.target(), m.level())
    }
}

impl std::str::FromStr for Spans {
    type Err = String;

    /// A targets list (`my_app=info,tower_http=debug`); the error names
    /// the text that did not parse.
    fn from_str(s: &str) -> Result<Spans, String> {
        s.parse::<Targets>()
            .map(Spans::targets)
            .map_err(|e| format!("span targets {s:?}: {e}"))
    }
}

/// The spans recorded, set once per process.
static SPANS: OnceLock<Spans> = OnceLock::new();

/// Records the spans `spans` selects (from now on, in every subscriber
/// with [`crate::layer()`]). Set once per process: a second call returns
/// its argument as the error, and the first choice stays.
///
/// ```
/// let _ = runtrace_tokio::spans::record(runtrace_tokio::app_spans!());
/// assert!(runtrace_tokio::spans::selected().is_some());
/// ```
pub fn record(spans: Spans) -> Result<(), Spans> {
    SPANS.set(spans)?;
    // Callsites registered before now asked a filter that recorded none.
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// The spans recorded, if [`record`] (or `RUNTRACE_SPANS`) chose some.
pub fn selected() -> Option<&'static Spans> {
    SPANS.get()
}

/// `RUNTRACE_SPANS`, when set and [`record`] was not called. A value that
/// does not parse is said on stderr (the application runs on, without
/// spans) rather than panicking inside the application's subscriber setup.
fn from_env() {
    if SPANS.get().is_some() {
        return;
    }
    let Some(v) = std::env::var_os("RUNTRACE_SPANS") else {
        return;
    };
    match v.to_str().map(str::parse::<Spans>) {
        Some(Ok(s)) => {
            let _ = record(s);
        }
        Some(Err(e)) => eprintln!("runtrace: RUNTRACE_SPANS: {e}; no spans are recorded"),
        None => eprintln!("runtrace: RUNTRACE_SPANS is not UTF-8; no spans are recorded"),
    }
}

/// [`Spans::app`] of the crate calling it: the application's own spans at
/// INFO.
///
/// ```
/// // In an application's crate: its own module paths (here, a doc test of
/// // this package, the package's crate name).
/// let s = runtrace_tokio::app_spans!();
/// assert!(s.would_record(env!("CARGO_CRATE_NAME"), &tracing::Level::INFO));
/// assert!(!s.would_record("hyper::proto", &tracing::Level::INFO));
/// ```
#[macro_export]
macro_rules! app_spans {
    () => {
        $crate::spans::Spans::app(env!("CARGO_CRATE_NAME"))
    };
}

/// The span layer [`crate::layer()`] includes: records what [`selected`]
/// says (nothing until it says something).
pub(crate) fn layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    from_env();
    SpanLayer.with_filter(SpanFilter)
}

struct SpanFilter;

impl<S> Filter<S> for SpanFilter {
    fn enabled(&self, m: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        SPANS.get().is_some_and(|s| s.wants(m))
    }

    fn callsite_enabled(&self, m: &'static Metadata<'static>) -> Interest {
        if SPANS.get().is_some_and(|s| s.wants(m)) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
}

struct SpanLayer;

thread_local! {
    /// Span names interned, by callsite metadata address: the lock of
    /// `Istr::new` is taken once per callsite and thread.
    static NAMES: RefCell<HashMap<usize, Istr>> = RefCell::new(HashMap::new());
}

fn name_of(m: &'static Metadata<'static>) -> Istr {
    let key = m as *const Metadata<'static> as usize;
    let hit = NAMES
        .try_with(|n| n.borrow().get(&key).copied())
        .ok()
        .flatten();
    if let Some(i) = hit {
        return i;
    }
    let i = Istr::new(m.name());
    let _ = NAMES.try_with(|n| n.borrow_mut().insert(key, i));
    i
}

/// A span's fields text, built on the stack (no allocation).
struct FieldsText {
    buf: [u8; MAX_TEXT],
    len: usize,
    fields: usize,
}

impl FieldsText {
    fn new() -> FieldsText {
        FieldsText {
            buf: [0; MAX_TEXT],
            len: 0,
            fields: 0,
        }
    }

    fn as_str(&self) -> &str {
        // Only whole characters are ever copied in (`push`).
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    /// Appends `s`, at most `max` bytes of it, cut at a character boundary;
    /// returns the bytes taken.
    fn push(&mut self, s: &str, max: usize) -> usize {
        let mut n = s.len().min(max).min(MAX_TEXT - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        n
    }

    /// Starts field `name`: false when no more fit.
    fn key(&mut self, name: &str) -> bool {
        if self.fields >= MAX_FIELDS || self.len + name.len() + 2 > MAX_TEXT {
            return false;
        }
        if self.fields > 0 {
            self.push(" ", 1);
        }
        self.push(name, usize::MAX);
        self.push("=", 1);
        self.fields += 1;
        true
    }
}

/// One value, cut at [`MAX_VALUE`] bytes while it is formatted.
struct Value<'a> {
    t: &'a mut FieldsText,
    left: usize,
}

impl std::fmt::Write for Value<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.left == 0 {
            // Stop formatting: the value is cut here.
            return Err(std::fmt::Error);
        }
        let n = self.t.push(s, self.left);
        self.left -= n;
        if n < s.len() {
            self.left = 0;
        }
        Ok(())
    }
}

impl Visit for FieldsText {
    fn record_str(&mut self, f: &Field, v: &str) {
        if self.key(f.name()) {
            self.push(v, MAX_VALUE);
        }
    }

    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if self.key(f.name()) {
            let mut w = Value {
                t: self,
                left: MAX_VALUE,
            };
            let _ = write!(w, "{v:?}");
        }
    }
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !probes::span_new::enabled() {
            return;
        }
        let parent = if let Some(p) = attrs.parent() {
            p.into_u64()
        } else if attrs.is_contextual() {
            ctx.current_span().id().map_or(0, Id::into_u64)
        } else {
            0
        };
        let mut text = FieldsText::new();
        attrs.record(&mut text);
        probes::span_new::fire(probes::span_new::Args {
            span: id.into_u64(),
            parent,
            name: name_of(attrs.metadata()),
            fields: text.as_str(),
        });
    }

    fn on_enter(&self, id: &Id, _: Context<'_, S>) {
        if probes::span_enter::enabled() {
            probes::span_enter::fire(probes::span_enter::Args {
                span: id.into_u64(),
            });
        }
    }

    fn on_exit(&self, id: &Id, _: Context<'_, S>) {
        if probes::span_exit::enabled() {
            probes::span_exit::fire(probes::span_exit::Args {
                span: id.into_u64(),
            });
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if probes::span_close::enabled() {
            probes::span_close::fire(probes::span_close::Args {
                span: id.into_u64(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_bounded_in_count_and_length() {
        let mut t = FieldsText::new();
        let long = "é".repeat(100); // 200 bytes
        for name in ["a", "b", "c", "d", "e"] {
            if t.key(name) {
                t.push(&long, MAX_VALUE);
            }
        }
        let s = t.as_str();
        assert_eq!(s.matches('=').count(), MAX_FIELDS, "{s}");
        assert!(s.len() <= MAX_TEXT);
        assert!(s.starts_with("a=éé"));
        assert_eq!(s.split(' ').next().unwrap().len(), 2 + MAX_VALUE);
    }

    #[test]
    fn debug_values_are_cut_while_formatted() {
        let mut t = FieldsText::new();
        assert!(t.key("big"));
        let big = vec![7u8; 1000];
        let mut w = Value {
            t: &mut t,
            left: MAX_VALUE,
        };
        let _ = write!(w, "{big:?}");
        assert_eq!(t.as_str().len(), 4 + MAX_VALUE);
        assert!(t.as_str().starts_with("big=[7, 7"));
    }
}
