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

    /// Judges trigger `p`: for each consumer of its queue, the time it lost
    /// in the window to each cause (lock waits, its own I/O, slower
    /// processing, idling), then what the queue's rates add, ranked.
    pub(super) fn evaluate(&mut self, p: &Pending) -> TriggerRec {
        let win = self.judged_window(p);
        let consumers = self.queues[p.q as usize].consumers.clone();
        let mut accs: Vec<Acc> = Vec::new();
        let mut scratch = std::mem::take(&mut self.scratch);
        for &c in &consumers {
            self.lock_contention(c, &win, &mut scratch, &mut accs);
            self.io_blocking(c, &win, &mut accs);
            let Some(ts) = self.threads.get(c as usize).and_then(|x| x.as_ref()) else {
                continue;
            };
            self.processing_slowdown(ts, c, &win, &mut accs);
            self.consumer_stall(ts, c, p, &win, &mut accs);
        }
        self.scratch = scratch;
        let rates = self.queue_rates(p.q, &win);
        let capacity = consumers.len().max(1) as f64 * win.span as f64;
        self.stall_from_rates(p.q, &consumers, &win, &rates, capacity, &mut accs);
        let (lost, verdicts) = rank(accs, capacity, &self.o);
        TriggerRec {
            t: win.t,
            exact: p.exact,
            q: p.q,
            size: p.size,
            growth: p.growth,
            reason: p.reason,
            ws: win.ws,
            consumers,
            enq_before: rates.enq_before,
            enq_during: rates.enq_during,
            deq_before: rates.deq_before,
            deq_during: rates.deq_during,
            drops: rates.window.drops,
            lost,
            verdicts,
        }
    }

    /// The window trigger `p` is judged over.
    fn judged_window(&self, p: &Pending) -> Judged {
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
        Judged {
            t,
            ws,
            span: (t - ws).max(1),
            b0: ws / o.bucket_ns,
            b1: t / o.bucket_ns,
        }
    }

    /// Lock contention: consumer `c`'s lock waits in the window, each split
    /// among the holds of other threads that overlapped it (the part a
    /// holder spent in I/O is I/O blocking under the lock) and the part no
    /// recorded hold covers.
    fn lock_contention(
        &self,
        c: u32,
        win: &Judged,
        scratch: &mut Vec<(u64, u64, u32)>,
        accs: &mut Vec<Acc>,
    ) {
        let first = self.waits.partition_point(|w| w.end < win.ws);
        for w in self.waits.range(first..) {
            if w.thread != c || w.start >= win.t {
                continue;
            }
            let (a, b) = (w.start.max(win.ws), w.end.min(win.t));
            if b <= a {
                continue;
            }
            self.holds_during(w, a, b, scratch);
            self.split_wait(w, a, b, scratch, accs);
        }
    }

    /// The holds of `w`'s lock by other threads overlapping `[a, b]` (the
    /// part of wait `w` inside the window), as (start, end, thread) in time
    /// order, into `out`.
    fn holds_during(&self, w: &Span, a: u64, b: u64, out: &mut Vec<(u64, u64, u32)>) {
        let lk = &self.locks[w.obj as usize];
        out.clear();
        for (r, slack) in [(&lk.ring, LATE_HOLD_NS), (&lk.short, SLACK_NS)] {
            let h0 = r.partition_point(|h| h.end < a);
            for h in r.range(h0..) {
                if h.end > w.end.saturating_add(slack) {
                    break;
                }
                if h.thread != w.thread && h.start < b && h.end > a {
                    out.push((h.start, h.end, h.thread));
                }
            }
        }
        out.sort_unstable();
    }

    /// Attributes `[a, b]` of wait `w` to the `holds` covering it: each
    /// holder's I/O in its share as I/O blocking under the lock, the rest
    /// of its share as contention on it, and what no hold covers as
    /// contention with an unknown holder. The wait counts once per cause
    /// and holder kind it feeds.
    fn split_wait(&self, w: &Span, a: u64, b: u64, holds: &[(u64, u64, u32)], accs: &mut Vec<Acc>) {
        let c = w.thread;
        let (mut cur, mut covered) = (a, 0u64);
        let mut counted = false;
        for &(hs, he, ht) in holds {
            let (s0, e0) = (hs.max(cur), he.min(b));
            if e0 <= s0 {
                continue;
            }
            let (io, worst, last) = self.io_overlap(ht, s0, e0, he);
            if io > 0 {
                let acc = add(accs, Cause::IoBlocking, w.obj, ht, true, io, c);
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
                    accs,
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
                accs,
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

    /// I/O blocking: consumer `c`'s own I/O in the window (with the lock
    /// it held meanwhile, if a recorded hold shows one).
    fn io_blocking(&self, c: u32, win: &Judged, accs: &mut Vec<Acc>) {
        let first = self.ios.partition_point(|x| x.end < win.ws);
        for x in self.ios.range(first..) {
            if x.thread != c || x.start >= win.t {
                continue;
            }
            let (a, b) = (x.start.max(win.ws), x.end.min(win.t));
            if b <= a {
                continue;
            }
            let lock = self.held_by(c, x.start, x.end);
            let acc = add(accs, Cause::IoBlocking, lock, c, false, b - a, c);
            acc.n += 1;
            acc.note_io(x);
        }
    }

    /// Processing slowdown: consumer `c`'s net processing time per item in
    /// the window above its baseline by at least the slowdown ratio (the
    /// excess over the baseline is lost).
    fn processing_slowdown(&self, ts: &ThreadSt, c: u32, win: &Judged, accs: &mut Vec<Acc>) {
        let (base_mean, w_net, w_items) = baseline(ts, win.b0, win.b1, |x| (x.net, x.items));
        if base_mean > 0 && w_items > 0 {
            let w_mean = w_net / w_items;
            if w_mean as f64 >= base_mean as f64 * self.o.slowdown_ratio {
                let excess = w_net.saturating_sub(base_mean.saturating_mul(w_items));
                let acc = add(accs, Cause::ProcessingSlowdown, NONE, c, false, excess, c);
                acc.n += w_items;
                acc.base_mean = base_mean;
                acc.win_mean = w_mean;
            }
        }
    }

    /// Consumer stall: consumer `c` idle while items waited, beyond the
    /// baseline's idle time per dequeue (a healthy consumer also spends a
    /// little time between items), and a gap still open at the trigger
    /// (nothing since); its longest heartbeat gap in the window is the
    /// evidence.
    fn consumer_stall(
        &self,
        ts: &ThreadSt,
        c: u32,
        p: &Pending,
        win: &Judged,
        accs: &mut Vec<Acc>,
    ) {
        let (ws, t) = (win.ws, win.t);
        let (base_stall, w_stall, w_deqs) = baseline(ts, win.b0, win.b1, |x| (x.stall, x.deqs));
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
                        blocked =
                            blocked.saturating_add(x.end.min(t).saturating_sub(x.start.max(o0)));
                    }
                }
            }
            stall = stall.saturating_add((t - o0).saturating_sub(blocked));
        }
        if stall > 0 {
            let acc = add(accs, Cause::ConsumerStall, NONE, c, false, stall, c);
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

    /// Queue `q`'s enqueue, dequeue and drop counts in the window, and its
    /// rates in and before it.
    fn queue_rates(&self, q: u32, win: &Judged) -> Rates {
        let q = &self.queues[q as usize];
        let sum = |a: QBucket, x: &QBucket| QBucket {
            enq: a.enq + x.enq,
            deq: a.deq + x.deq,
            drops: a.drops + x.drops,
        };
        let window = q.ring.fold(win.b0, win.b1, QBucket::default(), sum);
        let after = q.ring.fold(win.b0, u64::MAX, QBucket::default(), sum);
        let secs = win.span as f64 / 1e9;
        let before_secs = win.ws.saturating_sub(q.first_ns) as f64 / 1e9;
        let before = |n: u64| (before_secs > 0.0).then(|| per_sec(n, before_secs));
        Rates {
            window,
            enq_before: before(q.cum.enq.saturating_sub(after.enq)),
            enq_during: per_sec(window.enq, secs),
            deq_before: before(q.cum.deq.saturating_sub(after.deq)),
            deq_during: per_sec(window.deq, secs),
        }
    }

    /// Consumer stall from queue `q`'s rates: items enqueued with no
    /// consumer at all, or, without processing guards (no `processing_end`
    /// for this queue, so idle time cannot be told from processing), a
    /// dequeue rate that fell while items were enqueued, as far as the
    /// time already explained in `accs` does not cover it (`under_lock`
    /// marks this rate-based kind in the accumulator).
    fn stall_from_rates(
        &self,
        q: u32,
        consumers: &[u32],
        win: &Judged,
        rates: &Rates,
        capacity: f64,
        accs: &mut Vec<Acc>,
    ) {
        let q = &self.queues[q as usize];
        let w = rates.window;
        if consumers.is_empty() && w.enq > 0 {
            add(
                accs,
                Cause::ConsumerStall,
                NONE,
                NONE,
                false,
                win.span,
                NONE,
            );
        }
        let deq_during = rates.deq_during;
        if q.ok + q.fail == 0 && !consumers.is_empty() && w.enq > 0 {
            if let Some(db) = rates.deq_before.filter(|&db| db > 0.0 && deq_during < db) {
                let explained = accs.iter().fold(0u64, |s, a| s.saturating_add(a.ns));
                let fell = (1.0 - deq_during / db) * capacity;
                if fell > explained as f64 {
                    let who = if consumers.len() == 1 {
                        consumers[0]
                    } else {
                        NONE
                    };
                    add(
                        accs,
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
    }
}

/// The window a trigger is judged over: `[ws, t]` (`span` ns, at least 1),
/// buckets `b0..=b1`.
struct Judged {
    t: u64,
    ws: u64,
    span: u64,
    b0: u64,
    b1: u64,
}

/// A queue's counts in a trigger's window, and its rates in and before it
/// (`None`: no time before it).
struct Rates {
    window: QBucket,
    enq_before: Option<f64>,
    enq_during: f64,
    deq_before: Option<f64>,
    deq_during: f64,
}

/// `n` per `secs` seconds (0 over no time).
fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// The total lost time, and the verdicts: each cause's share of it, those
/// below the floor or below `min_lost_share` of the consumers' `capacity`
/// left out, best first (at equal scores, the deeper cause, I/O then
/// locks, first).
fn rank(accs: Vec<Acc>, capacity: f64, o: &BacklogOptions) -> (u64, Vec<(f64, Acc)>) {
    let lost: u64 = accs.iter().fold(0u64, |s, a| s.saturating_add(a.ns));
    let mut verdicts: Vec<(f64, Acc)> = accs
        .into_iter()
        .filter(|a| a.ns > 0)
        .map(|a| (a.ns as f64 / lost.max(1) as f64, a))
        .filter(|(s, a)| *s >= o.floor && a.ns as f64 >= o.min_lost_share * capacity)
        .collect();
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
    (lost, verdicts)
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
