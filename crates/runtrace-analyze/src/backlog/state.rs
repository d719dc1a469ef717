//! The backlog pass's state: per queue, lock, I/O op, heartbeat and
//! consumer thread, the remembered intervals, and pending triggers.

use super::options::*;
use super::report::Cause;
use super::window::*;
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::hist::Histogram;
use std::collections::VecDeque;

/// Per thread.
pub(super) struct ThreadSt {
    /// Lock waits and I/O recorded on this thread since its last dequeue
    /// or processing end: inside that item's processing, or inside the
    /// gap before the next dequeue.
    pub(super) blocked: u64,
    /// Its last dequeue or processing end (ns).
    pub(super) mark: u64,
    pub(super) has_mark: bool,
    /// Dequeued, processing not ended.
    pub(super) in_item: bool,
    pub(super) ring: Ring<CBucket>,
    pub(super) cum: CBucket,
}

pub(super) struct QueueSt {
    pub(super) name: u32,
    pub(super) enq: u64,
    pub(super) deq: u64,
    pub(super) ok: u64,
    pub(super) fail: u64,
    pub(super) drops: Vec<(u32, u64)>,
    pub(super) dropped: u64,
    pub(super) max_size: u32,
    pub(super) delay: Histogram,
    pub(super) proc: Histogram,
    pub(super) rows: Vec<Row>,
    pub(super) ring: Ring<QBucket>,
    pub(super) cum: QBucket,
    pub(super) consumers: Vec<u32>,
    pub(super) first_ns: u64,
    pub(super) snapshots: u64,
    /// When the queue's size last rose from 0 (`u64::MAX`: empty).
    pub(super) nonempty_since: u64,
    /// When the queue's last backlog episode ended: its consumers all
    /// resumed after its last trigger (or that trigger's time until they
    /// do; `u64::MAX`: no trigger yet).
    pub(super) last_trigger: u64,
    /// The current growth step, the size at its start, the last size seen.
    pub(super) step: u64,
    pub(super) step_base: u32,
    pub(super) last_size: u32,
    pub(super) peak: f64,
    pub(super) peak_at: u64,
}

pub(super) struct LockSt {
    pub(super) name: u32,
    pub(super) waits: u64,
    pub(super) wait_total: u64,
    pub(super) wait: Histogram,
    pub(super) holds: u64,
    pub(super) hold_max: u64,
    pub(super) hold_total: u64,
    /// (thread, hold_ns, at): each thread's longest, longest first.
    pub(super) top: Vec<(u32, u64, u64)>,
    /// Recent holds of at least `SHORT_HOLD_NS` (few: at most one per
    /// thread per `SHORT_HOLD_NS`), and the shorter ones apart, so that a
    /// flood of short holds cannot push out the long ones that explain
    /// waits.
    pub(super) ring: VecDeque<Span>,
    pub(super) short: VecDeque<Span>,
}

pub(super) struct OpSt {
    pub(super) name: u32,
    pub(super) count: u64,
    pub(super) bytes: u64,
    pub(super) total: u64,
    pub(super) hist: Histogram,
    /// (thread, io_ns, bytes, at), slowest first.
    pub(super) top: Vec<(u32, u64, u64, u64)>,
}

#[derive(Default)]
pub(super) struct Hb {
    pub(super) beats: u64,
    pub(super) max_gap: u64,
    pub(super) at: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) t: u64,
    /// `t` computed exactly as `runtrace analyze` and `runtrace jsonl` do
    /// (the analysis clock may differ by rounding on long traces whose
    /// tick is not a whole number of ns).
    pub(super) exact: u64,
    /// When the queue's size last rose from 0 before the trigger
    /// (`u64::MAX`: unknown).
    pub(super) since: u64,
    /// The end of the queue's previous backlog episode (`u64::MAX`: none).
    pub(super) prev: u64,
    pub(super) q: u32,
    pub(super) size: u32,
    pub(super) growth: i64,
    pub(super) reason: u32,
    pub(super) deadline: u64,
}

/// Lost time attributed to one (cause, lock, thread) in a trigger's window.
#[derive(Debug, Clone)]
pub(super) struct Acc {
    pub(super) cause: Cause,
    pub(super) lock: u32,
    pub(super) thread: u32,
    /// The holder's I/O (not the consumer's own).
    pub(super) under_lock: bool,
    pub(super) ns: u64,
    /// Waits, I/O operations or items counted.
    pub(super) n: u64,
    /// Consumer threads that lost the time.
    pub(super) victims: Vec<u32>,
    /// The worst single interval (slowest I/O, longest hold, longest
    /// heartbeat gap with its role in `worst_op`).
    pub(super) worst_ns: u64,
    pub(super) worst_at: u64,
    pub(super) worst_op: u32,
    pub(super) worst_bytes: u64,
    /// The I/O that ended last (the one at the trigger, often).
    pub(super) last: Option<Span>,
    /// The longest lock wait counted (whole, not clipped to the window).
    pub(super) max_wait: u64,
    pub(super) base_mean: u64,
    pub(super) win_mean: u64,
}

impl Acc {
    /// Notes an I/O operation of this cause: the slowest and the latest
    /// are quoted as evidence.
    pub(super) fn note_io(&mut self, x: &Span) {
        if x.end - x.start > self.worst_ns {
            self.worst_ns = x.end - x.start;
            self.worst_at = x.end;
            self.worst_op = x.obj;
            self.worst_bytes = x.bytes;
        }
        if self.last.is_none_or(|l| x.end > l.end) {
            self.last = Some(*x);
        }
    }
}

/// A judged trigger, with thread and name indexes (names are resolved when
/// the report is built: a THREAD frame may come late).
pub(super) struct TriggerRec {
    pub(super) t: u64,
    pub(super) exact: u64,
    pub(super) q: u32,
    pub(super) size: u32,
    pub(super) growth: i64,
    pub(super) reason: u32,
    pub(super) ws: u64,
    pub(super) consumers: Vec<u32>,
    pub(super) enq_before: Option<f64>,
    pub(super) enq_during: f64,
    pub(super) deq_before: Option<f64>,
    pub(super) deq_during: f64,
    pub(super) drops: u64,
    pub(super) lost: u64,
    pub(super) verdicts: Vec<(f64, Acc)>,
}

/// The backlog analysis (`runtrace backlog`) as a [`runtrace_model::pass::Pass`]: queues,
/// locks, I/O and heartbeats from the application events, and a verdict
/// for every `backlog_trigger`. Its report: [`Backlog::report`].
///
/// ```
/// use runtrace_analyze::backlog::{Backlog, BacklogOptions};
/// use runtrace_model::{input, synth::TraceBuilder};
/// let mut b = TraceBuilder::new();
/// b.string(1, "jobs");
/// b.enqueue(1, 1_000, 1, 1, 1);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let mut pass = Backlog::new(&BacklogOptions::default());
/// let (model, stats) = input::read(&[path], &mut pass, None);
/// assert_eq!(pass.report(&model, stats).queues[0].enqueued, 1);
/// ```
pub struct Backlog {
    pub(super) o: BacklogOptions,
    /// Out-of-order events (analysed late) and the last timestamp seen.
    pub(super) late_events: u64,
    pub(super) last_ticks_seen: u64,
    pub(super) qmap: Vec<u32>,
    pub(super) lmap: Vec<u32>,
    pub(super) omap: Vec<u32>,
    pub(super) queues: Vec<QueueSt>,
    pub(super) locks: Vec<LockSt>,
    pub(super) ops: Vec<OpSt>,
    pub(super) hbs: FxHashMap<(u32, u32), Hb>,
    pub(super) threads: Vec<Option<ThreadSt>>,
    pub(super) waits: VecDeque<Span>,
    pub(super) ios: VecDeque<Span>,
    pub(super) hb_gaps: VecDeque<Span>,
    pub(super) pending: Vec<Pending>,
    pub(super) next_deadline: u64,
    pub(super) done: Vec<TriggerRec>,
    pub(super) now: u64,
    pub(super) app_events: u64,
    pub(super) evicted: u64,
    pub(super) evicted_short: u64,
    pub(super) scratch: Vec<(u64, u64, u32)>,
}

impl Backlog {
    /// A pass with options `o` (zero widths replaced by the defaults).
    pub fn new(o: &BacklogOptions) -> Backlog {
        Backlog {
            o: sane(o),
            late_events: 0,
            last_ticks_seen: 0,
            qmap: Vec::new(),
            lmap: Vec::new(),
            omap: Vec::new(),
            queues: Vec::new(),
            locks: Vec::new(),
            ops: Vec::new(),
            hbs: FxHashMap::default(),
            threads: Vec::new(),
            waits: VecDeque::new(),
            ios: VecDeque::new(),
            hb_gaps: VecDeque::new(),
            pending: Vec::new(),
            next_deadline: u64::MAX,
            done: Vec::new(),
            now: 0,
            app_events: 0,
            evicted: 0,
            evicted_short: 0,
            scratch: Vec::new(),
        }
    }

    /// Buckets a consumer ring keeps: the lookback and lookahead spans.
    pub(super) fn ring_cap(&self) -> usize {
        ((self.o.lookback_ns.saturating_add(self.o.lookahead_ns) / self.o.bucket_ns) as usize)
            .saturating_add(4)
            .min(1 << 20)
    }

    /// The growth step: 100 ms, or the rate window if shorter.
    pub(super) fn step_ns(&self) -> u64 {
        self.o.window_ns.min(100_000_000)
    }

    pub(super) fn queue(&mut self, name: u32, now: u64) -> usize {
        let i = name as usize;
        if i >= self.qmap.len() {
            self.qmap.resize(i + 1, NONE);
        }
        if self.qmap[i] == NONE {
            self.qmap[i] = self.queues.len() as u32;
            let cap = self.ring_cap();
            self.queues.push(QueueSt {
                name,
                enq: 0,
                deq: 0,
                ok: 0,
                fail: 0,
                drops: Vec::new(),
                dropped: 0,
                max_size: 0,
                delay: Histogram::new(),
                proc: Histogram::new(),
                rows: Vec::new(),
                ring: Ring::new(cap),
                cum: QBucket::default(),
                consumers: Vec::new(),
                first_ns: now,
                snapshots: 0,
                nonempty_since: u64::MAX,
                last_trigger: u64::MAX,
                step: now / self.step_ns(),
                step_base: 0,
                last_size: 0,
                peak: 0.0,
                peak_at: 0,
            });
        }
        self.qmap[i] as usize
    }

    pub(super) fn lock(&mut self, name: u32) -> usize {
        let i = name as usize;
        if i >= self.lmap.len() {
            self.lmap.resize(i + 1, NONE);
        }
        if self.lmap[i] == NONE {
            self.lmap[i] = self.locks.len() as u32;
            self.locks.push(LockSt {
                name,
                waits: 0,
                wait_total: 0,
                wait: Histogram::new(),
                holds: 0,
                hold_max: 0,
                hold_total: 0,
                top: Vec::new(),
                ring: VecDeque::new(),
                short: VecDeque::new(),
            });
        }
        self.lmap[i] as usize
    }

    pub(super) fn op(&mut self, name: u32) -> usize {
        let i = name as usize;
        if i >= self.omap.len() {
            self.omap.resize(i + 1, NONE);
        }
        if self.omap[i] == NONE {
            self.omap[i] = self.ops.len() as u32;
            self.ops.push(OpSt {
                name,
                count: 0,
                bytes: 0,
                total: 0,
                hist: Histogram::new(),
                top: Vec::new(),
            });
        }
        self.omap[i] as usize
    }

    pub(super) fn thread(&mut self, t: u32) -> &mut ThreadSt {
        let i = t as usize;
        if i >= self.threads.len() {
            self.threads.resize_with(i + 1, || None);
        }
        let cap = self.ring_cap();
        self.threads[i].get_or_insert_with(|| ThreadSt {
            blocked: 0,
            mark: 0,
            has_mark: false,
            in_item: false,
            ring: Ring::new(cap),
            cum: CBucket::default(),
        })
    }

    /// Where interval rings may forget: nothing a pending or future trigger
    /// looks at ends before this.
    pub(super) fn horizon(&self) -> u64 {
        let oldest = self.pending.iter().map(|p| p.t).min().unwrap_or(self.now);
        oldest.min(self.now).saturating_sub(self.o.lookback_ns)
    }

    pub(super) fn push_span(
        ring: &mut VecDeque<Span>,
        s: Span,
        horizon: u64,
        cap: usize,
        evicted: &mut u64,
    ) {
        while let Some(f) = ring.front() {
            if f.end < horizon {
                ring.pop_front();
            } else if ring.len() >= cap {
                ring.pop_front();
                *evicted += 1;
            } else {
                break;
            }
        }
        ring.push_back(s);
    }
}

/// Ends the queue's current growth step: its growth per second counts
/// toward the peak of the queue and of the step's window.
pub(super) fn close_step(q: &mut QueueSt, window_ns: u64, step_ns: u64) {
    if q.step == u64::MAX {
        return;
    }
    let g = (q.last_size as f64 - q.step_base as f64) / (step_ns as f64 / 1e9);
    let end = q.step.saturating_add(1).saturating_mul(step_ns);
    if g > q.peak {
        q.peak = g;
        q.peak_at = end;
    }
    let r = row(&mut q.rows, q.step.saturating_mul(step_ns) / window_ns);
    if g > r.peak_growth {
        r.peak_growth = g;
    }
}

/// Keeps each thread's longest hold, the `TOP` longest first (a short list
/// scanned linearly; most holds are shorter than the shortest kept).
pub(super) fn top_hold(top: &mut Vec<(u32, u64, u64)>, th: u32, ns: u64, at: u64) {
    if top.len() >= TOP && top.last().is_some_and(|l| ns <= l.1) {
        return;
    }
    if let Some(i) = top.iter().position(|x| x.0 == th) {
        if top[i].1 >= ns {
            return;
        }
        top.remove(i);
    }
    let at_i = top.partition_point(|x| x.1 >= ns);
    top.insert(at_i, (th, ns, at));
    top.truncate(TOP);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_holds_per_thread() {
        let mut top = Vec::new();
        for (th, ns) in [
            (1, 10),
            (2, 50),
            (1, 30),
            (3, 5),
            (4, 7),
            (5, 8),
            (6, 9),
            (2, 20),
        ] {
            top_hold(&mut top, th, ns, ns * 100);
        }
        let got: Vec<(u32, u64)> = top.iter().map(|x| (x.0, x.1)).collect();
        assert_eq!(got, [(2, 50), (1, 30), (6, 9), (5, 8), (4, 7)]);
    }
}
