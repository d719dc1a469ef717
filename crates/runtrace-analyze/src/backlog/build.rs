//! The [`BacklogReport`] from a finished pass and the model.

use super::options::*;
use super::report::*;
use super::state::*;
use super::text::*;
use runtrace_model::fmt_ns;
use runtrace_model::input::ReadStats;
use runtrace_model::model::{Model, Process, Thread};
use std::fmt::Write as _;

impl Backlog {
    /// The report of a finished pass (after [`runtrace_model::input::read`]) over the model
    /// and read statistics of the same read.
    pub fn report(&self, model: &Model, stats: ReadStats) -> BacklogReport {
        build(self, model, stats)
    }
}

pub(super) struct Names<'a> {
    threads: &'a [Thread],
    procs: &'a [Process],
    multi: bool,
}

impl Names<'_> {
    pub(super) fn thread(&self, t: u32) -> Option<String> {
        let th = self.threads.get(t as usize)?;
        let pid = self.procs.get(th.proc as usize).map_or(0, |p| p.pid);
        let id = if self.multi {
            format!("pid {pid}, tid {}", th.tid)
        } else {
            format!("tid {}", th.tid)
        };
        Some(match &th.name {
            Some(n) if !n.is_empty() => format!("{n} ({id})"),
            _ => id,
        })
    }

    pub(super) fn thread_or(&self, t: u32) -> String {
        self.thread(t).unwrap_or_else(|| "?".into())
    }
}

pub(super) fn build(s: &Backlog, m: &Model, rs: ReadStats) -> BacklogReport {
    let nm = Names {
        threads: &m.threads,
        procs: &m.procs,
        multi: m.procs.len() > 1,
    };
    let duration_ns = m
        .procs
        .iter()
        .filter(|p| p.last_ticks >= p.first_ticks)
        .map(|p| p.scale.ns(p.last_ticks - p.first_ticks))
        .max()
        .unwrap_or(0);
    BacklogReport {
        queues: queues(s, m, &nm),
        locks: locks(s, m, &nm),
        io: io(s, m, &nm),
        heartbeats: heartbeats(s, m, &nm),
        triggers: triggers(s, m, &nm),
        files: rs.files,
        bytes: rs.bytes,
        events: rs.events,
        app_events: s.app_events,
        duration_ns,
        errors: rs.errors,
        damaged: rs.damaged,
        unsealed_files: rs.unsealed,
        notes: notes(s),
        options: s.o,
    }
}

/// The queues, by name.
fn queues(s: &Backlog, m: &Model, nm: &Names<'_>) -> Vec<QueueReport> {
    let name = |i: u32| m.name(i).to_string();
    let mut queues: Vec<QueueReport> = s
        .queues
        .iter()
        .map(|q| QueueReport {
            name: name(q.name),
            enqueued: q.enq,
            dequeued: q.deq,
            dropped: q.dropped,
            dropped_by_cause: q.drops.iter().map(|&(c, n)| (name(c), n)).collect(),
            processed_ok: q.ok,
            processed_failed: q.fail,
            max_size: q.max_size,
            queue_delay_ns: q.delay.summary(),
            processing_ns: q.proc.summary(),
            consumers: q.consumers.iter().map(|&c| nm.thread_or(c)).collect(),
            windows: rate_windows(q, s.o.window_ns),
            peak_growth_per_sec: q.peak,
            peak_growth_at_ns: q.peak_at,
            snapshots: q.snapshots,
        })
        .collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    queues
}

/// A queue's rate windows (those with events), in time order.
fn rate_windows(q: &QueueSt, window_ns: u64) -> Vec<RateWindow> {
    let wsec = window_ns as f64 / 1e9;
    let mut prev: Option<(u64, u32)> = None;
    q.rows
        .iter()
        .map(|r| {
            // Growth against the previous window's end (per second
            // of the time since it, when windows were skipped).
            let (span, before) = match prev {
                Some((pi, ps)) => ((r.idx - pi) as f64 * wsec, ps),
                None => (wsec, 0),
            };
            prev = Some((r.idx, r.size_end));
            RateWindow {
                start_ns: r.idx.saturating_mul(window_ns),
                enqueued: r.enq,
                dequeued: r.deq,
                dropped: r.drops,
                enqueue_per_sec: r.enq as f64 / wsec,
                dequeue_per_sec: r.deq as f64 / wsec,
                size_end: r.size_end,
                max_size: r.max_size,
                growth_per_sec: (r.size_end as f64 - before as f64) / span,
                peak_growth_per_sec: r.peak_growth,
            }
        })
        .collect()
}

/// The locks, by total wait.
fn locks(s: &Backlog, m: &Model, nm: &Names<'_>) -> Vec<LockReport> {
    let mut locks: Vec<LockReport> = s
        .locks
        .iter()
        .map(|l| LockReport {
            name: m.name(l.name).to_string(),
            waits: l.waits,
            wait_ns_total: l.wait_total,
            wait_ns_mean: l.wait_total.checked_div(l.waits).unwrap_or(0),
            wait_ns: l.wait.summary(),
            holds: l.holds,
            hold_ns_max: l.hold_max,
            hold_ns_total: l.hold_total,
            longest_holds: l
                .top
                .iter()
                .map(|&(t, ns, at)| HoldRef {
                    thread: nm.thread_or(t),
                    hold_ns: ns,
                    at_ns: at,
                })
                .collect(),
        })
        .collect();
    locks.sort_by(|a, b| {
        b.wait_ns_total
            .cmp(&a.wait_ns_total)
            .then(b.hold_ns_max.cmp(&a.hold_ns_max))
            .then(a.name.cmp(&b.name))
    });
    locks
}

/// The I/O ops, by total time.
fn io(s: &Backlog, m: &Model, nm: &Names<'_>) -> Vec<IoReport> {
    let mut io: Vec<IoReport> = s
        .ops
        .iter()
        .map(|x| IoReport {
            op: m.name(x.name).to_string(),
            count: x.count,
            bytes: x.bytes,
            io_ns: x.hist.summary(),
            io_ns_total: x.total,
            slowest: x
                .top
                .iter()
                .map(|&(t, ns, bytes, at)| IoRef {
                    thread: nm.thread_or(t),
                    io_ns: ns,
                    bytes,
                    at_ns: at,
                })
                .collect(),
        })
        .collect();
    io.sort_by(|a, b| b.io_ns_total.cmp(&a.io_ns_total).then(a.op.cmp(&b.op)));
    io
}

/// The heartbeats, by longest gap.
fn heartbeats(s: &Backlog, m: &Model, nm: &Names<'_>) -> Vec<HeartbeatReport> {
    let mut heartbeats: Vec<HeartbeatReport> = s
        .hbs
        .iter()
        .map(|(&(t, r), h)| HeartbeatReport {
            thread: nm.thread_or(t),
            role: m.name(r).to_string(),
            beats: h.beats,
            max_gap_ns: h.max_gap,
            max_gap_at_ns: h.at,
        })
        .collect();
    heartbeats.sort_by(|a, b| {
        b.max_gap_ns
            .cmp(&a.max_gap_ns)
            .then(a.thread.cmp(&b.thread))
            .then(a.role.cmp(&b.role))
    });
    heartbeats
}

/// The judged triggers with their verdicts, in time order.
fn triggers(s: &Backlog, m: &Model, nm: &Names<'_>) -> Vec<TriggerReport> {
    let name = |i: u32| m.name(i).to_string();
    let mut triggers: Vec<TriggerReport> = s
        .done
        .iter()
        .map(|r| {
            let qname = name(s.queues[r.q as usize].name);
            let verdicts = r
                .verdicts
                .iter()
                .map(|(score, a)| Verdict {
                    cause: a.cause,
                    score: (score * 1000.0).round() / 1000.0,
                    lock: (a.lock != NONE).then(|| name(s.locks[a.lock as usize].name)),
                    thread: if a.thread == NONE {
                        None
                    } else {
                        nm.thread(a.thread)
                    },
                    lost_ns: a.ns,
                    evidence: evidence(s, m, nm, r, a, &qname),
                })
                .collect();
            TriggerReport {
                timestamp_ns: r.exact,
                queue: qname,
                queue_size: r.size,
                reason: name(r.reason),
                growth_rate_per_sec: r.growth,
                window_ns: [r.ws, r.t],
                consumers: r.consumers.iter().map(|&c| nm.thread_or(c)).collect(),
                enqueue_rate_before: r.enq_before,
                enqueue_rate_during: r.enq_during,
                dequeue_rate_before: r.deq_before,
                dequeue_rate_during: r.deq_during,
                lost_ns: r.lost,
                dropped_in_window: r.drops,
                verdicts,
            }
        })
        .collect();
    triggers.sort_by_key(|t| t.timestamp_ns);
    triggers
}

/// What the reader should know about the report's limits.
fn notes(s: &Backlog) -> Vec<String> {
    let o = s.o;
    let mut notes = Vec::new();
    if s.app_events == 0 {
        notes.push(
            "no application-instrumentation events (lock_wait, lock_hold, enqueue, dequeue, \
             processing_end, item_dropped, queue_snapshot, backlog_trigger, io, \
             thread_heartbeat) in the trace: nothing to report (record with runtrace::sync's \
             primitives)"
                .into(),
        );
    }
    if s.evicted > 0 {
        notes.push(format!(
            "{} lock or I/O intervals were forgotten early (more than {} of a kind within the \
             lookback window): verdicts near them may miss some",
            s.evicted, o.max_intervals
        ));
    }
    if s.evicted_short > 0 {
        notes.push(format!(
            "{} lock holds under 50 us were forgotten early (more than {} within the lookback \
             window): waits in a convoy of short holds may be reported with an unknown holder",
            s.evicted_short,
            o.max_intervals / 4
        ));
    }
    if s.late_events > 0 {
        notes.push(format!(
            "{} events arrived out of timestamp order and were analysed late",
            s.late_events
        ));
    }
    notes
}

/// "1 wait of 300 ms", "4 waits, the longest 300 ms".
pub(super) fn waits(a: &Acc) -> String {
    if a.n == 1 {
        format!("1 wait of {}", fmt_ns(a.max_wait))
    } else {
        format!("{} waits, the longest {}", a.n, fmt_ns(a.max_wait))
    }
}

/// The sentence of evidence for verdict `a` of trigger `r` on `queue`.
pub(super) fn evidence(
    s: &Backlog,
    m: &Model,
    nm: &Names<'_>,
    r: &TriggerRec,
    a: &Acc,
    queue: &str,
) -> String {
    let victims: Vec<String> = a.victims.iter().map(|&v| nm.thread_or(v)).collect();
    let e = Evidence {
        s,
        m,
        nm,
        r,
        a,
        queue,
        who: list(&victims),
        window: fmt_ns(r.t - r.ws),
    };
    match a.cause {
        Cause::ConsumerStall => e.consumer_stall(),
        Cause::LockContention => e.lock_contention(),
        Cause::IoBlocking => e.io_blocking(),
        Cause::ProcessingSlowdown => e.processing_slowdown(),
    }
}

/// What an evidence sentence is made from: the verdict `a` of trigger
/// `r` on `queue`, the consumers that lost the time (`who`), the window's
/// length.
struct Evidence<'a> {
    s: &'a Backlog,
    m: &'a Model,
    nm: &'a Names<'a>,
    r: &'a TriggerRec,
    a: &'a Acc,
    queue: &'a str,
    who: String,
    window: String,
}

impl Evidence<'_> {
    /// `lock "NAME"` (empty for no lock).
    fn lock(&self, l: u32) -> String {
        if l == NONE {
            String::new()
        } else {
            format!("lock \"{}\"", self.m.name(self.s.locks[l as usize].name))
        }
    }

    /// From the dequeue rate (no processing guards), for want of any
    /// consumer, or a consumer's idle time (with its longest heartbeat
    /// silence).
    fn consumer_stall(&self) -> String {
        let (r, a, queue, window, who) = (self.r, self.a, self.queue, &self.window, &self.who);
        if a.under_lock {
            return format!(
                "the dequeue rate of \"{queue}\" fell to {} (before: {}) while items were enqueued at \
                 {} (before: {}), more than the recorded lock waits and I/O explain (no \
                 processing_end events to tell idle time from processing)",
                fmt_rate(r.deq_during),
                fmt_before(r.deq_before),
                fmt_rate(r.enq_during),
                fmt_before(r.enq_before)
            );
        }
        if a.thread == NONE {
            return format!(
                "no thread dequeued from \"{queue}\" in the {window} before the trigger; enqueue rate {} (before: {})",
                fmt_rate(r.enq_during),
                fmt_before(r.enq_before)
            );
        }
        format!(
            "{who} was idle for {} of the {window} before the trigger (beyond its usual pause \
             between items) while \"{queue}\" had items waiting: not processing, not waiting on \
             a recorded lock, not in recorded I/O; dequeue rate {} (before: {}), enqueue rate {} \
             (before: {})",
            fmt_ns(a.ns),
            fmt_rate(r.deq_during),
            fmt_before(r.deq_before),
            fmt_rate(r.enq_during),
            fmt_before(r.enq_before)
        ) + &if a.worst_op != NONE {
            format!(
                "; its \"{}\" heartbeat was silent for {}, until {}",
                self.m.name(a.worst_op),
                fmt_ns(a.worst_ns),
                fmt_at(a.worst_at)
            )
        } else {
            String::new()
        }
    }

    /// Waits with no recorded hold covering them, or the holder and its
    /// longest hold.
    fn lock_contention(&self) -> String {
        let (a, who) = (self.a, &self.who);
        if a.thread == NONE {
            return format!(
                "{who} waited {} on {} ({}) with no recorded hold by another thread covering \
                 the waits (holds under the lock's hold threshold?)",
                fmt_ns(a.ns),
                self.lock(a.lock),
                waits(a)
            );
        }
        format!(
            "{who} waited {} on {} ({}) while {} held it without recorded I/O (its longest \
             such hold {}, ending at {})",
            fmt_ns(a.ns),
            self.lock(a.lock),
            waits(a),
            self.nm.thread_or(a.thread),
            fmt_ns(a.worst_ns),
            fmt_at(a.worst_at)
        )
    }

    /// The lock holder's I/O while the consumers waited, or a consumer's
    /// own; with the slowest and the latest operation.
    fn io_blocking(&self) -> String {
        let (a, who, window) = (self.a, &self.who, &self.window);
        let slowest = self.slowest_and_latest_io();
        if a.under_lock {
            format!(
                "{who} waited {} on {} ({}) while its holder {} was in I/O{slowest}",
                fmt_ns(a.ns),
                self.lock(a.lock),
                waits(a),
                self.nm.thread_or(a.thread)
            )
        } else {
            let held = if a.lock == NONE {
                String::new()
            } else {
                format!(" while holding {}", self.lock(a.lock))
            };
            format!(
                "{} spent {} of the {window} before the trigger in its own I/O{held} ({}){slowest}",
                self.nm.thread_or(a.thread),
                fmt_ns(a.ns),
                plural(a.n, "operation")
            )
        }
    }

    /// `; slowest: ...; latest: ...` (each when known; the latest only
    /// when it is not the slowest).
    fn slowest_and_latest_io(&self) -> String {
        let (a, m) = (self.a, self.m);
        let mut slowest = if a.worst_op != NONE {
            format!(
                "; slowest: {} of {} bytes taking {}, ending at {}",
                m.name(a.worst_op),
                a.worst_bytes,
                fmt_ns(a.worst_ns),
                fmt_at(a.worst_at)
            )
        } else {
            String::new()
        };
        if let Some(l) = a.last.filter(|l| l.end != a.worst_at) {
            let _ = write!(
                slowest,
                "; latest: {} of {} bytes taking {}, ending at {}",
                m.name(l.obj),
                l.bytes,
                fmt_ns(l.end - l.start),
                fmt_at(l.end)
            );
        }
        slowest
    }

    /// Net processing time per item in the window against the baseline.
    fn processing_slowdown(&self) -> String {
        let a = self.a;
        format!(
            "{}'s processing of \"{}\" items (lock waits and I/O excluded) took {} on average \
             over {} items in the window, against {} before: {} over the baseline",
            self.nm.thread_or(a.thread),
            self.queue,
            fmt_ns(a.win_mean),
            a.n,
            fmt_ns(a.base_mean),
            fmt_ns(a.ns)
        )
    }
}
