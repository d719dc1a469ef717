//! The span table of `runtrace analyze` (the application's `tracing`
//! spans, recorded by runtrace-tokio's layer): by span label
//! ([`runtrace_model::spans::label`]: `GET /item` for a tower-http request
//! span), how many closed, their wall time from first enter to close, the
//! time they were entered (busy, inside polls), and the wake-to-poll delay
//! they suffered while open; and which spans each spawn location's polls
//! were serving (the outermost span entered in a poll), so findings can
//! name them (`spans: GET /item (p99 120 ms)`).
//!
//! [`SpanPass`] is fed by the runtime [`crate::runtime::Engine`], which
//! passes it the lifecycle's span and poll records, so `runtrace analyze`
//! computes it in the same read.
//!
//! ```
//! use runtrace_analyze::runtime::analyze_bytes;
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! for (i, slow) in [(0u64, false), (1, true)] {
//!     let t0 = 1_000 + i * 1_000_000_000;
//!     let span = 10 + i;
//!     let uri = if slow { "method=GET uri=/slow" } else { "method=GET uri=/fast" };
//!     b.span_new(1, t0, span, 0, "request", uri);
//!     b.poll_start(1, 0, t0 + 100, 7, 0, 0);
//!     b.span_enter(1, t0 + 200, span);
//!     let busy = if slow { 50_000_000 } else { 1_000 };
//!     b.span_exit(1, t0 + 200 + busy, span);
//!     b.poll_end(1, 0, t0 + 300 + busy, 7, false);
//!     b.span_close(1, t0 + 400 + busy, span);
//! }
//! let r = analyze_bytes(&b.finish(), Default::default());
//! assert_eq!(r.spans.spans[0].label, "GET /slow");
//! assert_eq!(r.spans.spans[0].busy_ns.max, 50_000_000);
//! assert_eq!(r.spans.spans[1].label, "GET /fast");
//! ```

use runtrace_model::fmt_ns;
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::hist::{Histogram, Summary};
use runtrace_model::lifecycle::{Life, Poll};
use runtrace_model::model::Model;
use runtrace_model::spans::Labels;
use serde_json::{json, Value};
use std::fmt;

/// Spans listed at most in a report (the slowest by wall p99).
pub const MAX_LISTED: usize = 1_000;

#[derive(Clone, Default)]
struct LabelStats {
    closed: u64,
    open: u64,
    enters: u64,
    wall: Histogram,
    busy: Histogram,
    delay: Histogram,
}

/// The poll a thread runs now, once it entered a span, and the first span
/// it entered (the one it serves).
#[derive(Clone, Copy)]
struct Current {
    start: u64,
    loc: u32,
    label: u32,
}

/// The span pass (see the module docs).
#[derive(Clone, Default)]
pub struct SpanPass {
    labels: Labels,
    stats: Vec<LabelStats>,
    /// By thread (empty while no span was entered in a poll).
    current: Vec<Option<Current>>,
    /// (location index, label) -> (polls, poll ns).
    served: FxHashMap<(u32, u32), (u64, u64)>,
}

impl SpanPass {
    /// A span record (poll ends come through [`SpanPass::poll_end`]; other
    /// records are ignored). A span enter inside a poll is charged to that
    /// poll's spawn location ([`Entered::loc`](runtrace_model::spans::Entered::loc)).
    #[inline]
    pub fn life(&mut self, rec: &Life<'_>, m: &Model) {
        match *rec {
            Life::SpanEnter(e) => {
                let l = self.label(m, e.name, e.fields);
                self.stats[l as usize].enters += 1;
                // The first span entered in a poll is what the poll
                // serves: the poll is remembered from then on, so polls
                // that enter no span cost nothing here.
                let Some(start) = e.poll_start else {
                    return;
                };
                let th = e.thread as usize;
                if th >= self.current.len() {
                    self.current.resize(th + 1, None);
                }
                if matches!(self.current[th], Some(c) if c.start == start) {
                    return;
                }
                self.current[th] = Some(Current {
                    start,
                    loc: e.loc,
                    label: l,
                });
            }
            Life::SpanClose(s) | Life::SpanAlive(s) => {
                let l = self.label(m, s.name, s.fields);
                let scale = m.procs[s.proc as usize].scale;
                let st = &mut self.stats[l as usize];
                match s.wall_ticks() {
                    Some(w) if s.close.is_some() => {
                        st.closed += 1;
                        st.wall.record(scale.ns(w));
                        st.busy.record(scale.ns(s.busy_ticks));
                        st.delay.record(scale.ns(s.delay_ticks));
                    }
                    _ => st.open += 1,
                }
            }
            _ => {}
        }
    }

    /// A poll ended: if it entered a span, it served that span. Inlined:
    /// one test per poll for a trace without spans.
    #[inline(always)]
    pub fn poll_end(&mut self, p: &Poll, m: &Model) {
        if !self.current.is_empty() {
            self.poll_end_served(p, m);
        }
    }

    fn poll_end_served(&mut self, p: &Poll, m: &Model) {
        let Some(slot) = self.current.get_mut(p.thread as usize) else {
            return;
        };
        match *slot {
            Some(c) if c.start == p.start => {
                *slot = None;
                let ns = m.proc_of(p.thread).scale.ns(p.ticks());
                let e = self.served.entry((c.loc, c.label)).or_default();
                e.0 += 1;
                e.1 += ns;
            }
            _ => {}
        }
    }

    fn label(&mut self, m: &Model, name: u32, fields: u32) -> u32 {
        let l = self.labels.of(m, name, fields);
        if l as usize >= self.stats.len() {
            self.stats.resize_with(l as usize + 1, LabelStats::default);
        }
        l
    }

    /// The table (the slowest by wall p99 first, at most [`MAX_LISTED`]).
    pub fn report(&self, m: &Model) -> SpanReport {
        let mut spans: Vec<SpanStats> = self
            .stats
            .iter()
            .zip(&self.labels.labels)
            .map(|(s, label)| SpanStats {
                label: label.clone(),
                count: s.closed,
                open: s.open,
                enters: s.enters,
                wall_ns: s.wall.summary(),
                busy_ns: s.busy.summary(),
                busy_ns_total: s.busy.sum(),
                delay_ns: s.delay.summary(),
                delay_ns_total: s.delay.sum(),
            })
            .collect();
        spans.sort_by(|a, b| {
            (b.wall_ns.p99, b.count, &a.label).cmp(&(a.wall_ns.p99, a.count, &b.label))
        });
        let omitted = spans.len().saturating_sub(MAX_LISTED) as u64;
        spans.truncate(MAX_LISTED);
        let mut served: Vec<Served> = self
            .served
            .iter()
            .map(|(&(loc, l), &(polls, poll_ns))| Served {
                location: m
                    .locs
                    .get(loc as usize)
                    .map_or_else(String::new, |x| x.text.to_string()),
                label: self.labels.labels[l as usize].clone(),
                polls,
                poll_ns,
            })
            .collect();
        served.sort_by(|a, b| {
            (&a.location, b.poll_ns, &a.label).cmp(&(&b.location, a.poll_ns, &b.label))
        });
        SpanReport {
            spans,
            omitted,
            served,
        }
    }
}

/// One span label's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanStats {
    /// Its label ([`runtrace_model::spans::label`]).
    pub label: String,
    /// Spans of it closed in the trace.
    pub count: u64,
    /// Spans of it still open when the recording ended.
    pub open: u64,
    /// Enters of its spans.
    pub enters: u64,
    /// Wall time, first enter to close (closed spans).
    pub wall_ns: Summary,
    /// Time entered (inside polls, for spans entered by tasks).
    pub busy_ns: Summary,
    /// Sum of `busy_ns`.
    pub busy_ns_total: u64,
    /// Wake-to-poll delay suffered while open.
    pub delay_ns: Summary,
    /// Sum of `delay_ns`.
    pub delay_ns_total: u64,
}

/// The polls of a spawn location that served a span label (the outermost
/// span entered in them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The spawn location (`file:line:col`).
    pub location: String,
    /// The span label.
    pub label: String,
    /// Its polls that served it.
    pub polls: u64,
    /// Their time.
    pub poll_ns: u64,
}

/// `runtrace analyze`'s span table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanReport {
    /// By label, the slowest (wall p99) first.
    pub spans: Vec<SpanStats>,
    /// Labels left out of `spans` ([`MAX_LISTED`]).
    pub omitted: u64,
    /// What each location's polls served, by location, most poll time
    /// first.
    pub served: Vec<Served>,
}

impl SpanReport {
    /// The labels location `loc` served, most poll time first, as findings
    /// name them: `GET /item (p99 120 ms)` (at most 3).
    ///
    /// ```
    /// use runtrace_analyze::spans::{Served, SpanReport};
    /// let r = SpanReport {
    ///     served: vec![Served { location: "a.rs:1:1".into(), label: "GET /x".into(), polls: 3, poll_ns: 9 }],
    ///     ..Default::default()
    /// };
    /// assert_eq!(r.serving("a.rs:1:1"), ["GET /x"]);
    /// assert!(r.serving("b.rs:1:1").is_empty());
    /// ```
    pub fn serving(&self, loc: &str) -> Vec<String> {
        self.served
            .iter()
            .filter(|s| s.location == loc)
            .take(3)
            .map(|s| match self.spans.iter().find(|x| x.label == s.label) {
                Some(x) if x.count > 0 => format!("{} (p99 {})", s.label, fmt_ns(x.wall_ns.p99)),
                _ => s.label.clone(),
            })
            .collect()
    }

    /// The JSON form (`spans` in `runtrace analyze --json`; keys in
    /// docs/analysis.md).
    pub fn to_json(&self) -> Value {
        json!({
            "spans": self.spans.iter().map(|s| json!({
                "label": s.label,
                "count": s.count,
                "open": s.open,
                "enters": s.enters,
                "wall_ns": s.wall_ns.to_json(),
                "busy_ns": s.busy_ns.to_json(),
                "busy_ns_total": s.busy_ns_total,
                "delay_ns": s.delay_ns.to_json(),
                "delay_ns_total": s.delay_ns_total,
            })).collect::<Vec<_>>(),
            "omitted": self.omitted,
            "served": self.served.iter().map(|s| json!({
                "location": s.location,
                "span": s.label,
                "polls": s.polls,
                "poll_ns": s.poll_ns,
            })).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for SpanReport {
    /// The table `runtrace analyze` prints (nothing when the trace has no
    /// spans).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.spans.is_empty() {
            return Ok(());
        }
        writeln!(f, "=== Spans (by wall p99; wall: first enter to close)")?;
        writeln!(
            f,
            "{:>8} {:>6} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}  span",
            "count",
            "open",
            "wall p50",
            "wall p99",
            "busy p50",
            "busy p99",
            "busy total",
            "delay total"
        )?;
        for s in &self.spans {
            writeln!(
                f,
                "{:>8} {:>6} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}  {}",
                s.count,
                s.open,
                fmt_ns(s.wall_ns.p50),
                fmt_ns(s.wall_ns.p99),
                fmt_ns(s.busy_ns.p50),
                fmt_ns(s.busy_ns.p99),
                fmt_ns(s.busy_ns_total),
                fmt_ns(s.delay_ns_total),
                s.label
            )?;
        }
        if self.omitted > 0 {
            writeln!(f, "({} more span labels not listed)", self.omitted)?;
        }
        writeln!(f)
    }
}
