//! Judging a backlog trigger: what the consumers lost in the lookback
//! window to lock waits, I/O, stalls and slower processing, ranked.

use super::options::*;
use super::report::Cause;
use super::state::*;
use super::window::*;

impl Backlog {
    /// I/O time of `thread` inside `[s, e]` (intervals ending by `limit`),
    /// and its slowest such operation.
    pub(super) fn io_overlap(
        &self,
        thread: u32,
        s: u64,
        e: u64,
        limit: u64,
    ) -> (u64, Option<Span>, Option<Span>) {
        let mut sum = 0u64;
        let (mut worst, mut last): (Option<Span>, Option<Span>) = (None, None);
        let first = self.ios.partition_point(|x| x.end < s);
        for x in self.ios.range(first..) {
            if x.end > limit.saturating_add(SLACK_NS) {
                break;
            }
            if x.thread != thread || x.start >= e {
                continue;
            }
            let ov = x.end.min(e).saturating_sub(x.start.max(s));
            if ov > 0 {
                sum = sum.saturating_add(ov);
                if worst.is_none_or(|w| x.end - x.start > w.end - w.start) {
                    worst = Some(*x);
                }
                if last.is_none_or(|w| x.end > w.end) {
                    last = Some(*x);
                }
            }
        }
        (sum.min(e - s), worst, last)
    }

    /// The lock `thread` held across `[s, e]`, if a recorded hold shows it
    /// among the next 256 holds of each lock ending after `e` (the hold
    /// around an I/O ends soon after it; the bound keeps a trigger's cost
    /// independent of the hold rate).
    pub(super) fn held_by(&self, thread: u32, s: u64, e: u64) -> u32 {
        for (li, l) in self.locks.iter().enumerate() {
            for r in [&l.ring, &l.short] {
                let first = r.partition_point(|h| h.end < e);
                for h in r.range(first..).take(256) {
                    if h.thread == thread && h.start <= s && h.end >= e {
                        return li as u32;
                    }
                }
            }
        }
        NONE
    }

    pub(super) fn evaluate(&mut self, p: &Pending) -> TriggerRec {
        let o = self.o;
        let t = p.t;
        // The window starts after the queue's previous episode (its
        // consumers resumed after its previous trigger), so one spike's
        // causes are not counted again in the next one's, and no earlier
        // than when the queue was last empty: the backlog built up from
        // there, and what the consumers lost before it had been caught up
        // (on a busy machine, scheduling delays spread over seconds would
        // otherwise outweigh the stall that built this backlog). It spans
        // at least MIN_WINDOW_NS (rates over less are noise), at most the
        // lookback.
        // (A trigger recorded out of order within its thread can see a
        // later `since`: then it is not known.)
        let known = |x: u64| if x == u64::MAX || x > t { 0 } else { x };
        let episode = known(p.prev)
            .max(known(p.since))
            .min(t.saturating_sub(MIN_WINDOW_NS));
        let ws = episode.max(t.saturating_sub(o.lookback_ns));
        let span = (t - ws).max(1);
        let (b0, b1) = (ws / o.bucket_ns, t / o.bucket_ns);
        let consumers = self.queues[p.q as usize].consumers.clone();
        let mut accs: Vec<Acc> = Vec::new();
        for &c in &consumers {
            // 1. The consumer's lock waits: under the holder's I/O, or not.
            let first = self.waits.partition_point(|w| w.end < ws);
            for w in self.waits.range(first..) {
                if w.thread != c || w.start >= t {
                    continue;
                }
                let (a, b) = (w.start.max(ws), w.end.min(t));
                if b <= a {
                    continue;
                }
                let lk = &self.locks[w.obj as usize];
                self.scratch.clear();
                for (r, slack) in [(&lk.ring, LATE_HOLD_NS), (&lk.short, SLACK_NS)] {
                    let h0 = r.partition_point(|h| h.end < a);
                    for h in r.range(h0..) {
                        if h.end > w.end.saturating_add(slack) {
                            break;
                        }
                        if h.thread != c && h.start < b && h.end > a {
                            self.scratch.push((h.start, h.end, h.thread));
                        }
                    }
                }
                self.scratch.sort_unstable();
                let (mut cur, mut covered) = (a, 0u64);
                let mut counted = false;
                for k in 0..self.scratch.len() {
                    let (hs, he, ht) = self.scratch[k];
                    let (s0, e0) = (hs.max(cur), he.min(b));
                    if e0 <= s0 {
                        continue;
                    }
                    let (io, worst, last) = self.io_overlap(ht, s0, e0, he);
                    if io > 0 {
                        let acc = add(&mut accs, Cause::IoBlocking, w.obj, ht, true, io, c);
                        if !counted {
                            acc.n += 1;
                        }
                        acc.max_wait = acc.max_wait.max(w.end - w.start);
                        for x in [worst, last].into_iter().flatten() {
                            acc.note_io(&x);
                        }
                    }
                    if e0 - s0 > io {
                        let acc = add(
                            &mut accs,
                            Cause::LockContention,
                            w.obj,
                            ht,
                            false,
                            e0 - s0 - io,
                            c,
                        );
                        if !counted {
                            acc.n += 1;
                        }
                        acc.max_wait = acc.max_wait.max(w.end - w.start);
                        if he - hs > acc.worst_ns {
                            acc.worst_ns = he - hs;
                            acc.worst_at = he;
                        }
                    }
                    counted = true;
                    covered += e0 - s0;
                    cur = e0;
                }
                if b - a > covered {
                    let acc = add(
                        &mut accs,
                        Cause::LockContention,
                        w.obj,
                        NONE,
                        false,
                        b - a - covered,
                        c,
                    );
                    acc.n += 1;
                    acc.max_wait = acc.max_wait.max(w.end - w.start);
                }
            }
            // 2. The consumer's own I/O.
            let first = self.ios.partition_point(|x| x.end < ws);
            for x in self.ios.range(first..) {
                if x.thread != c || x.start >= t {
                    continue;
                }
                let (a, b) = (x.start.max(ws), x.end.min(t));
                if b <= a {
                    continue;
                }
                let lock = self.held_by(c, x.start, x.end);
                let acc = add(&mut accs, Cause::IoBlocking, lock, c, false, b - a, c);
                acc.n += 1;
                acc.note_io(x);
            }
            let Some(ts) = self.threads.get(c as usize).and_then(|x| x.as_ref()) else {
                continue;
            };
            // 3. Processing above the baseline.
            let (base_mean, w_net, w_items) = baseline(ts, b0, b1, |x| (x.net, x.items));
            if base_mean > 0 && w_items > 0 {
                let w_mean = w_net / w_items;
                if w_mean as f64 >= base_mean as f64 * o.slowdown_ratio {
                    let excess = w_net.saturating_sub(base_mean.saturating_mul(w_items));
                    let acc = add(
                        &mut accs,
                        Cause::ProcessingSlowdown,
                        NONE,
                        c,
                        false,
                        excess,
                        c,
                    );
                    acc.n += w_items;
                    acc.base_mean = base_mean;
                    acc.win_mean = w_mean;
                }
            }
            // 4. Idle while items waited, beyond the baseline's idle time
            // per dequeue (a healthy consumer also spends a little time
            // between items), and a gap still open at the trigger
            // (nothing since).
            let (base_stall, w_stall, w_deqs) = baseline(ts, b0, b1, |x| (x.stall, x.deqs));
            let mut stall = w_stall.saturating_sub(base_stall.saturating_mul(w_deqs));
            if ts.has_mark && ts.mark < t && p.size > 0 {
                // Idle since its last item, while the queue held items.
                let o0 = ts
                    .mark
                    .max(ws)
                    .max(if p.since == u64::MAX { 0 } else { p.since });
                let mut blocked = 0u64;
                for r in [&self.waits, &self.ios] {
                    let f = r.partition_point(|x| x.end < o0);
                    for x in r.range(f..) {
                        if x.thread == c {
                            blocked = blocked
                                .saturating_add(x.end.min(t).saturating_sub(x.start.max(o0)));
                        }
                    }
                }
                stall = stall.saturating_add((t - o0).saturating_sub(blocked));
            }
            if stall > 0 {
                let acc = add(&mut accs, Cause::ConsumerStall, NONE, c, false, stall, c);
                // Its longest heartbeat gap overlapping the window.
                let f = self.hb_gaps.partition_point(|x| x.end < ws);
                for x in self.hb_gaps.range(f..) {
                    if x.thread == c && x.start < t && x.end - x.start > acc.worst_ns {
                        acc.worst_ns = x.end - x.start;
                        acc.worst_at = x.end;
                        acc.worst_op = x.obj;
                    }
                }
            }
        }
        let q = &self.queues[p.q as usize];
        let (w, after) = (
            q.ring.fold(b0, b1, QBucket::default(), |a, x| QBucket {
                enq: a.enq + x.enq,
                deq: a.deq + x.deq,
                drops: a.drops + x.drops,
            }),
            q.ring
                .fold(b0, u64::MAX, QBucket::default(), |a, x| QBucket {
                    enq: a.enq + x.enq,
                    deq: a.deq + x.deq,
                    drops: a.drops + x.drops,
                }),
        );
        let secs = span as f64 / 1e9;
        let before_secs = ws.saturating_sub(q.first_ns) as f64 / 1e9;
        let rate = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        let before = |n: u64| (before_secs > 0.0).then(|| rate(n, before_secs));
        let enq_before = before(q.cum.enq.saturating_sub(after.enq));
        let deq_before = before(q.cum.deq.saturating_sub(after.deq));
        if consumers.is_empty() && w.enq > 0 {
            add(
                &mut accs,
                Cause::ConsumerStall,
                NONE,
                NONE,
                false,
                span,
                NONE,
            );
        }
        let capacity = consumers.len().max(1) as f64 * span as f64;
        // Without processing guards (no `processing_end` for this queue)
        // idle time cannot be told from processing: a dequeue rate that
        // fell while items were enqueued is the stall, as far as the
        // explained time does not already cover it (`under_lock` marks
        // this rate-based kind in the accumulator).
        let deq_during = rate(w.deq, secs);
        if q.ok + q.fail == 0 && !consumers.is_empty() && w.enq > 0 {
            if let Some(db) = deq_before.filter(|&db| db > 0.0 && deq_during < db) {
                let explained = accs.iter().fold(0u64, |s, a| s.saturating_add(a.ns));
                let fell = (1.0 - deq_during / db) * capacity;
                if fell > explained as f64 {
                    let who = if consumers.len() == 1 {
                        consumers[0]
                    } else {
                        NONE
                    };
                    add(
                        &mut accs,
                        Cause::ConsumerStall,
                        NONE,
                        who,
                        true,
                        (fell - explained as f64) as u64,
                        who,
                    );
                }
            }
        }
        let lost: u64 = accs.iter().fold(0u64, |s, a| s.saturating_add(a.ns));
        let mut verdicts: Vec<(f64, Acc)> = accs
            .into_iter()
            .filter(|a| a.ns > 0)
            .map(|a| (a.ns as f64 / lost.max(1) as f64, a))
            .filter(|(s, a)| *s >= o.floor && a.ns as f64 >= o.min_lost_share * capacity)
            .collect();
        // Best first; at equal scores, the deeper cause (I/O, then locks)
        // first.
        let depth = |c: Cause| match c {
            Cause::IoBlocking => 0,
            Cause::LockContention => 1,
            Cause::ProcessingSlowdown => 2,
            Cause::ConsumerStall => 3,
        };
        verdicts.sort_by(|x, y| {
            y.0.total_cmp(&x.0)
                .then(depth(x.1.cause).cmp(&depth(y.1.cause)))
        });
        TriggerRec {
            t,
            exact: p.exact,
            q: p.q,
            size: p.size,
            growth: p.growth,
            reason: p.reason,
            ws,
            consumers,
            enq_before,
            enq_during: rate(w.enq, secs),
            deq_before,
            deq_during,
            drops: w.drops,
            lost,
            verdicts,
        }
    }
}

/// A per-item baseline and the window to judge against it, from a
/// consumer's buckets: (baseline mean of `f`'s value per count, window
/// value, window count). The baseline is everything before the window;
/// with fewer than `MIN_BASE_ITEMS` counts there, the window's first
/// quarter (and the rest of the window is judged); with fewer than 3 there
/// either, no baseline (mean 0).
pub(super) fn baseline(
    ts: &ThreadSt,
    b0: u64,
    b1: u64,
    f: impl Fn(&CBucket) -> (u64, u64),
) -> (u64, u64, u64) {
    let sum = |from: u64, to: u64| {
        ts.ring.fold(from, to, (0u64, 0u64), |(v, n), x| {
            let (a, b) = f(x);
            (v.saturating_add(a), n.saturating_add(b))
        })
    };
    let (w_v, w_n) = sum(b0, b1);
    let (after_v, after_n) = sum(b0, u64::MAX);
    let (cum_v, cum_n) = f(&ts.cum);
    let (base_v, base_n) = (cum_v.saturating_sub(after_v), cum_n.saturating_sub(after_n));
    if base_n >= MIN_BASE_ITEMS {
        return (base_v / base_n, w_v, w_n);
    }
    let bq = b0 + (b1 - b0 + 1) / 4;
    let (qv, qn) = sum(b0, bq.saturating_sub(1));
    let (rv, rn) = sum(bq, b1);
    if qn >= 3 {
        (qv / qn, rv, rn)
    } else {
        (0, w_v, w_n)
    }
}

/// The accumulator of (cause, lock, thread), created on first use, with
/// `ns` added and `victim` (a consumer, or `NONE`) noted.
pub(super) fn add(
    accs: &mut Vec<Acc>,
    cause: Cause,
    lock: u32,
    thread: u32,
    under: bool,
    ns: u64,
    victim: u32,
) -> &mut Acc {
    let i = match accs.iter().position(|a| {
        a.cause == cause && a.lock == lock && a.thread == thread && a.under_lock == under
    }) {
        Some(i) => i,
        None => {
            accs.push(Acc {
                cause,
                lock,
                thread,
                under_lock: under,
                ns: 0,
                n: 0,
                victims: Vec::new(),
                worst_ns: 0,
                worst_at: 0,
                worst_op: NONE,
                worst_bytes: 0,
                last: None,
                max_wait: 0,
                base_mean: 0,
                win_mean: 0,
            });
            accs.len() - 1
        }
    };
    let a = &mut accs[i];
    a.ns = a.ns.saturating_add(ns);
    if victim != NONE && !a.victims.contains(&victim) {
        a.victims.push(victim);
    }
    a
}
