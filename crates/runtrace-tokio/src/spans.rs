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
//! Cost: on the hot path (enter, exit) one check whether a recording runs,
//! one cache-line read of the recorded spans' ids (`LIVE`) and the event
//! (one clock read, no lock, no allocation); creating a span formats its
//! fields into a buffer on the stack; a span name is interned once per
//! callsite and thread. Measured by `cargo bench --bench record -- spans`
//! (2-vCPU VM, quiet, 2026-11-27, two runs alternating with the build
//! before this layout): an enter+exit costs 18-21 ns through a bare
//! registry, 76-80 ns with runtrace's layer added and nothing recording
//! (was 116-121 ns with a second per-layer filter), and +111-114 ns over
//! the bare registry recording (median of 31 paired rounds; was
//! +136-156 ns). The floor under it: tracing-subscriber's per-layer
//! filter looks the span up in the registry at each enter and exit
//! (~55-60 ns a pair here), and the two events each read the clock
//! (~20 ns on this VM) and append. "Well under 100 ns" is below that
//! floor for a filtered layer on this host; the nearest peer states
//! ~300 ns.
//!

use runtrace_core::idset::IdSet;
use runtrace_core::Istr;
use runtrace_probes::builtin as probes;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};
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

/// Whether `m` is a span [`record`] selected: [`crate::layer()`]'s filter
/// asks it beside the wakes' and resources' questions.
pub(crate) fn wanted(m: &Metadata<'_>) -> bool {
    SPANS.get().is_some_and(|s| s.wants(m))
}

/// The ids of the spans being recorded (keyed per layer, see
/// [`SpanLayer`]): `on_enter`/`on_exit` get only the span's id, and this
/// answers "is it one of ours?" with one cache-line read instead of a
/// registry lookup (runtrace_core::idset). 4,096 buckets of 8: 256 KiB,
/// made when the first span is recorded.
static LIVE: OnceLock<IdSet> = OnceLock::new();
/// Whether a span was ever put in [`LIVE`]: until then `on_close` (every
/// tokio task's span closes through it) does not look.
static ANY_LIVE: AtomicBool = AtomicBool::new(false);
/// Spans selected while recording that found their bucket of [`LIVE`]
/// full (more than ~30,000 live recorded spans): not recorded.
static UNRECORDED: AtomicU64 = AtomicU64::new(0);
/// Numbers the layers made, so two subscribers' span ids never meet.
static LAYERS: AtomicU64 = AtomicU64::new(0);

/// Spans selected while a recording ran that were not recorded because
/// too many recorded spans were alive at once (see [`crate::layer()`]'s
/// cost notes): their enters and exits are missing from the trace.
///
/// ```
/// assert_eq!(runtrace_tokio::spans::unrecorded(), 0);
/// ```
pub fn unrecorded() -> u64 {
    UNRECORDED.load(Ordering::Relaxed)
}

/// Reads `RUNTRACE_SPANS` (once per layer made) and returns the part of
/// [`crate::layer()`] that records the selected spans.
pub(crate) fn layer() -> SpanLayer {
    from_env();
    SpanLayer {
        salt: splitmix(LAYERS.fetch_add(1, Ordering::Relaxed)),
    }
}

/// The span part of [`crate::layer()`]: it sits behind the layer's one
/// per-layer filter (which lets the selected spans through beside tokio's
/// task spans and events), so it tells its own spans apart by id.
pub(crate) struct SpanLayer {
    /// Mixed into every span id: registries number their spans from 1,
    /// so two subscribers in one process (tests, `with_default`) would
    /// otherwise share keys.
    salt: u64,
}

impl SpanLayer {
    #[inline(always)]
    fn key(&self, id: &Id) -> u64 {
        // Nonzero (0 is an empty slot); a 2^-64 chance of two live spans
        // sharing a key.
        splitmix(id.into_u64() ^ self.salt).max(1)
    }
}

/// SplitMix64's finalizer: a bijection that spreads consecutive numbers.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

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
        if !probes::span_new::enabled() || !wanted(attrs.metadata()) {
            return;
        }
        let live = LIVE.get_or_init(|| IdSet::with_buckets(4096));
        if !live.insert(self.key(id)) {
            UNRECORDED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        ANY_LIVE.store(true, Ordering::Relaxed);
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

    #[inline]
    fn on_enter(&self, id: &Id, _: Context<'_, S>) {
        // Every tokio task's poll enters its span: asked first, the
        // recording check keeps the set out of it when nothing records.
        if probes::span_enter::enabled() && LIVE.get().is_some_and(|l| l.contains(self.key(id))) {
            probes::span_enter::fire(probes::span_enter::Args {
                span: id.into_u64(),
            });
        }
    }

    #[inline]
    fn on_exit(&self, id: &Id, _: Context<'_, S>) {
        if probes::span_exit::enabled() && LIVE.get().is_some_and(|l| l.contains(self.key(id))) {
            probes::span_exit::fire(probes::span_exit::Args {
                span: id.into_u64(),
            });
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        // Removed whether or not a recording still runs: the id is handed
        // out again after this.
        if !ANY_LIVE.load(Ordering::Relaxed) {
            return;
        }
        let ours = LIVE.get().is_some_and(|l| l.remove(self.key(&id)));
        if ours && probes::span_close::enabled() {
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
