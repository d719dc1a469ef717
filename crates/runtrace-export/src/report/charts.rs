//! The report's chart data, as a pass: per-thread busy time over time (a
//! fixed number of time buckets whose width doubles as the trace grows, so
//! memory stays fixed), and log2 histograms of poll durations and
//! wake->poll delays, and each runtrace-sync queue's largest size per time
//! bucket. Aggregates only: the page's size does not grow with
//! the trace.

use runtrace_model::event::{kind, Ev};
use runtrace_model::lifecycle::{Life, Poll};
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use std::collections::HashMap;

/// Time buckets per utilisation row.
pub const BUCKETS: usize = 120;
/// log2 histogram buckets (bucket i: values in [2^i, 2^(i+1)) ns).
pub const HIST: usize = 40;

/// One thread's busy time per bucket.
#[derive(Debug, Clone)]
pub struct Row {
    /// Thread index in the model.
    pub thread: u32,
    /// Busy ns per bucket.
    pub busy: Vec<u64>,
}

/// The chart data of a read.
///
/// ```
/// use runtrace_model::synth::TraceBuilder;
/// use runtrace_export::report::charts::Charts;
/// let mut b = TraceBuilder::new();
/// b.poll_start(7, 0, 1_000, 1, 0, 0);
/// b.poll_end(7, 0, 3_000, 1, true);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let mut c = Charts::default();
/// runtrace_model::input::read(&[path], &mut c, None);
/// assert_eq!(c.rows[0].busy.iter().sum::<u64>(), 2_000);
/// assert_eq!(c.poll_hist[10], 1); // 2 us: [1024, 2048) ns
/// ```
#[derive(Debug, Clone)]
pub struct Charts {
    /// Bucket width (ns); buckets start at each recording's start.
    pub width_ns: u64,
    /// Rows, by thread, for threads that polled.
    pub rows: Vec<Row>,
    /// runtrace-sync queues: (name index in the model, largest size per
    /// bucket).
    pub queues: Vec<(u32, Vec<u64>)>,
    /// Poll durations, log2 buckets.
    pub poll_hist: [u64; HIST],
    /// Wake (or spawn) -> poll delays, log2 buckets.
    pub wake_hist: [u64; HIST],
    /// End of the latest event seen, ns since its recording started.
    pub end_ns: u64,
    /// Sampled heap bytes live over time, `(ns since the start, bytes)` at
    /// [`BUCKETS`] instants (`runtrace_analyze::memory::live_over_time`):
    /// not read by the pass but set from the memory profile after the read
    /// ([`super::write`]); empty without a live set.
    pub live: Vec<(i64, u64)>,
    row_of: HashMap<u32, usize>,
}

impl Default for Charts {
    fn default() -> Self {
        Charts {
            width_ns: 1_000_000,
            rows: Vec::new(),
            queues: Vec::new(),
            poll_hist: [0; HIST],
            wake_hist: [0; HIST],
            end_ns: 0,
            live: Vec::new(),
            row_of: HashMap::new(),
        }
    }
}

/// The log2 bucket of `v`.
///
/// ```
/// use runtrace_export::report::charts::log2_bucket;
/// assert_eq!((log2_bucket(0), log2_bucket(1), log2_bucket(1_000)), (0, 0, 9));
/// ```
pub fn log2_bucket(v: u64) -> usize {
    (63 - v.max(1).leading_zeros() as usize).min(HIST - 1)
}

impl Charts {
    /// Adds busy time [from, to) (ns) to `row`, doubling the bucket width
    /// until it fits.
    /// Doubles the bucket width until `to` (ns) fits: busy time adds up,
    /// queue sizes keep the larger.
    fn fit(&mut self, to: u64) {
        fn halve(v: &mut [u64], f: fn(u64, u64) -> u64) {
            for i in 0..BUCKETS / 2 {
                v[i] = f(v[2 * i], v[2 * i + 1]);
            }
            v[BUCKETS / 2..].iter_mut().for_each(|b| *b = 0);
        }
        while to >= self.width_ns * BUCKETS as u64 {
            self.width_ns *= 2;
            self.rows
                .iter_mut()
                .for_each(|r| halve(&mut r.busy, u64::wrapping_add));
            self.queues
                .iter_mut()
                .for_each(|q| halve(&mut q.1, u64::max));
        }
    }

    fn busy(&mut self, row: usize, from: u64, to: u64) {
        self.fit(to);
        let w = self.width_ns;
        let mut t = from;
        while t < to {
            let b = (t / w) as usize;
            let edge = ((b as u64 + 1) * w).min(to);
            self.rows[row].busy[b.min(BUCKETS - 1)] += edge - t;
            t = edge;
        }
    }

    fn row(&mut self, thread: u32) -> usize {
        let n = self.rows.len();
        let i = *self.row_of.entry(thread).or_insert(n);
        if i == n {
            self.rows.push(Row {
                thread,
                busy: vec![0; BUCKETS],
            });
        }
        i
    }
}

impl Pass for Charts {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE.or(Wants::APP)
    }

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        let ns = |p: &Poll, ticks: u64| model.proc_of(p.thread).ns(ticks).max(0) as u64;
        match *rec {
            Life::PollStart(p) => {
                if let Some(w) = p.wake {
                    let d = ns(p, p.start).saturating_sub(ns(p, w));
                    self.wake_hist[log2_bucket(d)] += 1;
                }
            }
            Life::PollEnd(p) => {
                let (from, to) = (ns(p, p.start), ns(p, p.end));
                self.poll_hist[log2_bucket(to.saturating_sub(from))] += 1;
                // Only outermost polls count as busy time (an executor
                // polls its tasks inside a tokio poll on the same thread).
                if p.depth == 0 {
                    let r = self.row(p.thread);
                    self.busy(r, from, to.max(from));
                }
            }
            _ => {}
        }
    }

    fn event(&mut self, ev: &Ev, model: &Model) {
        let ns = model.proc_of(ev.thread).ns(ev.ticks).max(0) as u64;
        self.end_ns = self.end_ns.max(ns);
        match ev.kind {
            kind::ENQUEUE | kind::DEQUEUE | kind::QUEUE_SNAPSHOT => {
                self.fit(ns);
                let i = match self.queues.iter().position(|q| q.0 == ev.worker) {
                    Some(i) => i,
                    None => {
                        self.queues.push((ev.worker, vec![0; BUCKETS]));
                        self.queues.len() - 1
                    }
                };
                let b = &mut self.queues[i].1[(ns / self.width_ns) as usize];
                *b = (*b).max(ev.a as u64);
            }
            _ => {}
        }
    }
}
