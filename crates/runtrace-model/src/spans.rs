//! The application's spans (`tracing` spans recorded by runtrace-tokio's
//! layer), paired once for every consumer: each enter with its exit and
//! the poll it ran in, each span's whole life from creation to close.
//!
//! The [`crate::lifecycle::Tracker`] runs a [`SpanTracker`] beside its
//! task tracker, for passes that want [`Wants::SPANS`](crate::pass::Wants::SPANS):
//! they receive [`Life::SpanNew`], [`Life::SpanEnter`], [`Life::SpanExit`],
//! [`Life::SpanClose`] and, for a span still open when its recording's
//! events are over, [`Life::SpanAlive`].
//!
//! The rules (docs/analysis.md states them for users):
//! 1. A span's id is unique among the live spans of its recording; its
//!    `span_close` ends it (the id may then be reused by a new span).
//! 2. An enter runs in the poll open on the same thread at that moment
//!    (the innermost: [`Entered::task`], [`Entered::worker`]); none: the
//!    span was entered outside any task (task 0).
//! 3. A span's busy time is the sum of its enter-to-exit stretches;
//!    its wall time runs from its first enter to its close.
//! 4. The wake-to-poll delay a span suffered is the sum, over the polls
//!    it was entered in (each counted once), of each poll's delay from a
//!    wake seen after the span was created.
//! 5. An enter or exit of a span not seen created (created before the
//!    recording started) creates it, nameless, at that moment.
//! 6. Enters pair with exits per thread on a stack at most
//!    [`MAX_DEPTH`] deep (deeper enters are counted, not paired); an exit
//!    with no open enter of its span on its thread is counted in
//!    [`SpanTracker::unmatched`].
//!
//! ```
//! use runtrace_model::event::Ev;
//! use runtrace_model::lifecycle::Life;
//! use runtrace_model::model::Model;
//! use runtrace_model::pass::{Pass, Wants};
//! use runtrace_model::synth::TraceBuilder;
//!
//! /// (name, busy ticks, wall ticks) of each closed span.
//! #[derive(Default)]
//! struct Closed(Vec<(String, u64, u64)>);
//! impl Pass for Closed {
//!     fn wants(&self) -> Wants {
//!         Wants::SPANS
//!     }
//!     fn event(&mut self, _: &Ev, _: &Model) {}
//!     fn life(&mut self, rec: &Life<'_>, m: &Model) {
//!         if let Life::SpanClose(s) = rec {
//!             let label = runtrace_model::spans::label(m, s.name, s.fields);
//!             self.0.push((label, s.busy_ticks, s.wall_ticks().unwrap()));
//!         }
//!     }
//! }
//! let mut b = TraceBuilder::new();
//! b.span_new(1, 1_000, 5, 0, "request", "method=GET uri=/item");
//! b.poll_start(1, 0, 2_000, 9, 0, 0);
//! b.span_enter(1, 2_100, 5);
//! b.span_exit(1, 2_600, 5);
//! b.poll_end(1, 0, 2_700, 9, false);
//! b.span_close(1, 4_000, 5);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut c = Closed::default();
//! runtrace_model::input::read(&[path], &mut c, None);
//! assert_eq!(c.0, [("GET /item".to_string(), 500, 1_900)]);
//! ```

use crate::event::{kind, Ev};
use crate::fxhash::FxHashMap;
use crate::model::Model;
pub use crate::records::{Entered, Span};
use crate::records::{Life, LifeSink, Poll};

/// Spans one thread may have entered at once; deeper enters are counted
/// in [`SpanTracker::too_deep`] and not paired.
pub const MAX_DEPTH: usize = 64;
/// Live spans kept per recording; past it (closes lost, or a leak in the
/// application) the oldest state is dropped and counted in
/// [`SpanTracker::forgotten`].
pub const MAX_LIVE: usize = 1 << 20;

const NONE: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct State {
    span: Span,
    /// Start of the last poll it was entered in (rule 4: each poll once).
    last_poll: u64,
}

/// The span half of the lifecycle state (see the module docs).
#[derive(Default)]
pub struct SpanTracker {
    /// Live spans per recording.
    live: Vec<FxHashMap<u64, State>>,
    /// Open enters per thread.
    open: Vec<Vec<Entered>>,
    /// Exits with no open enter of their span on their thread (rule 6).
    pub unmatched: u64,
    /// Enters deeper than [`MAX_DEPTH`] (rule 6).
    pub too_deep: u64,
    /// Live span states dropped to bound memory ([`MAX_LIVE`]).
    pub forgotten: u64,
}

impl SpanTracker {
    /// Takes span event `ev` (any other kind is ignored); `polls` are the
    /// polls open on `ev`'s thread, innermost last.
    #[inline]
    pub fn step(&mut self, ev: &Ev, m: &Model, polls: &[Poll], out: &mut impl LifeSink) {
        match ev.kind {
            kind::SPAN_NEW => self.new_span(ev, m, out),
            kind::SPAN_ENTER => self.enter(ev, m, polls, out),
            kind::SPAN_EXIT => self.exit(ev, m, out),
            kind::SPAN_CLOSE => self.close_span(ev, m, out),
            _ => {}
        }
    }

    fn live(&mut self, m: &Model, thread: u32) -> (u32, &mut FxHashMap<u64, State>) {
        let p = m.threads[thread as usize].proc;
        if p as usize >= self.live.len() {
            self.live.resize_with(p as usize + 1, FxHashMap::default);
        }
        (p, &mut self.live[p as usize])
    }

    fn insert(&mut self, m: &Model, thread: u32, st: State) {
        let (_, live) = self.live(m, thread);
        if live.len() >= MAX_LIVE {
            let n = live.len() as u64;
            live.clear();
            self.forgotten += n;
        }
        let (_, live) = self.live(m, thread);
        live.insert(st.span.id, st);
    }

    /// Makes span `span` known as created before the tracker started, with
    /// its name, fields, creation and first enter, but no busy time, enters
    /// or delay yet: for a tracker that starts in the middle of a recording
    /// (`runtrace top`'s windows), so a span created before the window
    /// keeps its name (not rule 5's nameless one) and its wall time still
    /// runs from its first enter. Emits no record.
    ///
    /// ```
    /// use runtrace_model::{event::{kind, Ev}, lifecycle::{Life, Tracker}, model::Model};
    /// use runtrace_model::spans::Span;
    /// let mut m = Model::new();
    /// # let h = runtrace_format::frame::Header { version_major: 1, version_minor: 2,
    /// #     ticks_per_sec: 1_000_000_000, anchor_ticks: 0, anchor_wall_ns: 0, pid: 1,
    /// #     process_name: "p".into(), recording_id: 1, file_index: 0, schemas: vec![] };
    /// m.add_proc(runtrace_model::model::Process::new(&h));
    /// let th = m.thread(0, 1);
    /// // Created (name 5) and first entered before the tracker starts.
    /// let mut t = Tracker::default();
    /// t.spans.seed(Span { name: 5, first_enter: Some(2_000), ..Span::seen(42, 0, 1_000) });
    /// let close = Ev { ticks: 9_000, x: 42, a: 0, thread: th, worker: 0, kind: kind::SPAN_CLOSE, flag: 0 };
    /// let mut seen = Vec::new();
    /// t.step(&close, &m, &mut |r: &Life<'_>| {
    ///     if let Life::SpanClose(s) = r { seen.push((s.name, s.wall_ticks())) }
    /// });
    /// assert_eq!(seen, [(5, Some(7_000))]);
    /// ```
    pub fn seed(&mut self, span: Span) {
        let p = span.proc as usize;
        if p >= self.live.len() {
            self.live.resize_with(p + 1, FxHashMap::default);
        }
        let live = &mut self.live[p];
        if live.len() >= MAX_LIVE {
            return;
        }
        let span = Span {
            enters: 0,
            busy_ticks: 0,
            delay_ticks: 0,
            close: None,
            ..span
        };
        live.insert(
            span.id,
            State {
                span,
                last_poll: NONE,
            },
        );
    }

    fn new_span(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let (parent, fields) = parent_and_fields(ev, m);
        let proc = m.threads[ev.thread as usize].proc;
        let span = Span {
            name: ev.worker,
            fields,
            parent,
            ..Span::unnamed(ev, proc)
        };
        // An id still live: its close was lost; that life is over.
        let (_, live) = self.live(m, ev.thread);
        if let Some(old) = live.remove(&ev.x) {
            out.life(&Life::SpanAlive(&old.span));
        }
        self.insert(
            m,
            ev.thread,
            State {
                span,
                last_poll: NONE,
            },
        );
        out.life(&Life::SpanNew(&span));
    }

    /// The live state of span `id` (created, nameless, if unseen: rule 5).
    fn state(&mut self, ev: &Ev, m: &Model) -> &mut State {
        let (proc, live) = self.live(m, ev.thread);
        if !live.contains_key(&ev.x) && live.len() >= MAX_LIVE {
            let n = live.len() as u64;
            live.clear();
            self.forgotten += n;
        }
        let (_, live) = self.live(m, ev.thread);
        live.entry(ev.x).or_insert_with(|| State {
            span: Span::unnamed(ev, proc),
            last_poll: NONE,
        })
    }

    fn enter(&mut self, ev: &Ev, m: &Model, polls: &[Poll], out: &mut impl LifeSink) {
        let poll = polls.last().copied();
        let st = self.state(ev, m);
        let s = &mut st.span;
        let (task, worker) = poll.map_or((0, runtrace_format::NO_WORKER), |p| (p.task, p.worker));
        if s.first_enter.is_none() {
            s.first_enter = Some(ev.ticks);
            s.task = task;
            s.worker = worker;
            s.enter_thread = ev.thread;
        }
        s.enters = s.enters.saturating_add(1);
        if let Some(p) = poll {
            if st.last_poll != p.start {
                st.last_poll = p.start;
                if let Some(w) = p.wake.filter(|&w| w >= s.new) {
                    s.delay_ticks += p.start.saturating_sub(w);
                }
            }
        }
        let (name, fields) = (s.name, s.fields);
        let th = ev.thread as usize;
        if th >= self.open.len() {
            self.open.resize_with(th + 1, Vec::new);
        }
        let open = &mut self.open[th];
        if open.len() >= MAX_DEPTH {
            self.too_deep += 1;
            return;
        }
        let e = Entered {
            span: ev.x,
            name,
            fields,
            thread: ev.thread,
            worker,
            task,
            poll_start: poll.map(|p| p.start),
            start: ev.ticks,
            end: ev.ticks,
            depth: open.len() as u32,
            loc: poll.map_or(crate::model::UNKNOWN_LOC, |p| p.loc),
        };
        open.push(e);
        out.life(&Life::SpanEnter(&e));
    }

    fn exit(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let e = self
            .open
            .get_mut(ev.thread as usize)
            .and_then(|open| match open.last() {
                Some(top) if top.span == ev.x => open.pop(),
                _ => open
                    .iter()
                    .rposition(|o| o.span == ev.x)
                    .map(|i| open.remove(i)),
            });
        let Some(mut e) = e else {
            self.unmatched += 1;
            return;
        };
        e.end = ev.ticks;
        let st = self.state(ev, m);
        st.span.busy_ticks += e.end.saturating_sub(e.start);
        out.life(&Life::SpanExit(&e));
    }

    fn close_span(&mut self, ev: &Ev, m: &Model, out: &mut impl LifeSink) {
        let (_, live) = self.live(m, ev.thread);
        let Some(st) = live.remove(&ev.x) else {
            // Created and never entered before the recording began: nothing
            // to say of it.
            return;
        };
        let mut s = st.span;
        s.close = Some(ev.ticks);
        out.life(&Life::SpanClose(&s));
    }

    /// The spans live now, of every recording, in no order.
    pub fn live_spans(&self) -> impl Iterator<Item = &Span> {
        self.live.iter().flat_map(|l| l.values().map(|s| &s.span))
    }

    /// Hands `out` what [`SpanTracker::close`] would (every live span's
    /// [`Life::SpanAlive`], by recording and id), leaving the state as it
    /// is: for a pass that ends while the tracker goes on.
    pub fn report_alive(&self, out: &mut impl LifeSink) {
        for live in &self.live {
            let mut v: Vec<&State> = live.values().collect();
            v.sort_unstable_by_key(|s| s.span.id);
            for st in v {
                out.life(&Life::SpanAlive(&st.span));
            }
        }
    }

    /// The end of a recording's events (or of the read): every live span's
    /// [`Life::SpanAlive`], in (recording, id) order; the state is cleared.
    pub fn close(&mut self, out: &mut impl LifeSink) {
        for live in &mut self.live {
            let mut v: Vec<State> = live.drain().map(|(_, s)| s).collect();
            v.sort_unstable_by_key(|s| s.span.id);
            for st in v {
                out.life(&Life::SpanAlive(&st.span));
            }
        }
        self.open.iter_mut().for_each(Vec::clear);
    }
}

/// A `span_new` event's parent span id (0: none) and the name index of
/// its fields' text (0: none), kept in [`Model::side`] (the event's `a`:
/// their position plus one; 0: neither).
///
/// ```
/// use runtrace_model::{event::{kind, Ev}, model::Model};
/// let m = Model::new();
/// let ev = Ev { ticks: 1, x: 7, a: 0, thread: 0, worker: 3, kind: kind::SPAN_NEW, flag: 0 };
/// assert_eq!(runtrace_model::spans::parent_and_fields(&ev, &m), (0, 0));
/// ```
pub fn parent_and_fields(ev: &Ev, m: &Model) -> (u64, u32) {
    match ev.a {
        0 => (0, 0),
        i => {
            let i = i as usize - 1;
            let side = |j: usize| m.side.get(i + j).copied().unwrap_or(0);
            (side(0), side(1).min(u32::MAX as u64) as u32)
        }
    }
}

/// The value of field `key` in a span's fields text (`key=value ...`, as
/// runtrace-tokio records them; a value is cut at the next ` key=`).
///
/// ```
/// let f = "method=GET uri=/item?id=3 version=HTTP/1.1";
/// assert_eq!(runtrace_model::spans::field(f, "uri"), Some("/item?id=3"));
/// assert_eq!(runtrace_model::spans::field(f, "route"), None);
/// ```
pub fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = fields;
    let mut at_start = true;
    loop {
        let i = rest.find(key)?;
        let before_ok = (at_start && i == 0) || rest[..i].ends_with(' ');
        let after = &rest[i + key.len()..];
        if before_ok && after.starts_with('=') {
            let v = &after[1..];
            // The value runs to the next ` word=` (values may hold spaces).
            let mut end = v.len();
            let mut j = 0;
            while let Some(k) = v[j..].find(' ') {
                let s = j + k;
                let next = &v[s + 1..];
                let word = next.split(['=', ' ']).next().unwrap_or("");
                if !word.is_empty() && next[word.len()..].starts_with('=') {
                    end = s;
                    break;
                }
                j = s + 1;
            }
            return Some(&v[..end]);
        }
        rest = &rest[i + key.len()..];
        at_start = false;
    }
}

/// What the reports call a span (its "label"), from its name and fields:
/// the value of its `otel.name` field when it has one; else, when it has a
/// `method` (or `http.method`) field and a route (`http.route`, `route`,
/// `uri`, `path` or `http.target`, without its query string), `METHOD
/// route` (tower-http's `TraceLayer` names each request's span `request`
/// with `method` and `uri`); else its name.
///
/// ```
/// use runtrace_model::{model::Model, spans};
/// let mut m = Model::new();
/// m.names.push("request".into());
/// m.names.push("method=GET uri=/item?id=7 version=HTTP/1.1".into());
/// m.names.push("user_id=7".into());
/// assert_eq!(spans::label(&m, 1, 2), "GET /item");
/// assert_eq!(spans::label(&m, 1, 3), "request");
/// assert_eq!(spans::label(&m, 0, 0), "<unnamed>");
/// ```
pub fn label(m: &Model, name: u32, fields: u32) -> String {
    let f = m.name(fields);
    if let Some(v) = field(f, "otel.name") {
        return v.to_string();
    }
    let method = field(f, "method").or_else(|| field(f, "http.method"));
    let route = ["http.route", "route", "uri", "path", "http.target"]
        .iter()
        .find_map(|k| field(f, k));
    if let (Some(method), Some(route)) = (method, route) {
        let route = route.split('?').next().unwrap_or(route);
        return format!("{method} {route}");
    }
    match m.name(name) {
        "" => "<unnamed>".to_string(),
        n => n.to_string(),
    }
}

/// Labels by (name, fields) pair, computed once each: what a pass that
/// groups spans by [`label`] keeps.
#[derive(Default, Debug, Clone)]
pub struct Labels {
    by_pair: FxHashMap<(u32, u32), u32>,
    /// The distinct labels, by index.
    pub labels: Vec<String>,
    by_text: FxHashMap<String, u32>,
}

impl Labels {
    /// The index (into [`Labels::labels`]) of the label of `name` and
    /// `fields`.
    ///
    /// ```
    /// let mut m = runtrace_model::model::Model::new();
    /// m.names.push("db.query".into());
    /// let mut l = runtrace_model::spans::Labels::default();
    /// let i = l.of(&m, 1, 0);
    /// assert_eq!((i, l.of(&m, 1, 0), l.labels[i as usize].as_str()), (0, 0, "db.query"));
    /// ```
    pub fn of(&mut self, m: &Model, name: u32, fields: u32) -> u32 {
        if let Some(&i) = self.by_pair.get(&(name, fields)) {
            return i;
        }
        let text = label(m, name, fields);
        let next = self.labels.len() as u32;
        let i = *self.by_text.entry(text.clone()).or_insert(next);
        if i == next {
            self.labels.push(text);
        }
        self.by_pair.insert((name, fields), i);
        i
    }
}
