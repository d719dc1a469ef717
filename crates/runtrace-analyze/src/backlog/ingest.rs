//! The backlog pass's event handling: each application event into the
//! state, trigger deadlines, and the end of a recording.

use super::options::*;
use super::state::*;
use super::window::*;
use runtrace_model::event::{kind, Ev};
use runtrace_model::model::{Model, Process};
use runtrace_model::pass::{Pass, Wants};

impl Pass for Backlog {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::APP
    }

    fn event(&mut self, ev: &Ev, model: &Model) {
        if ev.ticks < self.last_ticks_seen {
            self.late_events += 1;
        } else {
            self.last_ticks_seen = ev.ticks;
        }
        self.app_event(ev, model);
    }

    fn end_recording(&mut self, _model: &Model) {
        self.last_ticks_seen = 0;
        self.close_recording();
    }

    fn finish(&mut self, _model: &Model) {
        self.close_recording();
    }
}

impl Backlog {
    /// One application event, in timestamp order: the analysis clock, then
    /// the event's own handler (a static dispatch on the kind: this runs
    /// for every application event of the trace).
    pub(super) fn app_event(&mut self, ev: &Ev, m: &Model) {
        let Some(p) = m
            .threads
            .get(ev.thread as usize)
            .and_then(|t| m.procs.get(t.proc as usize))
        else {
            return;
        };
        let now = p.scale.ns(ev.ticks.saturating_sub(p.anchor_ticks));
        if now > self.now {
            self.now = now;
        }
        self.app_events += 1;
        match ev.kind {
            kind::LOCK_WAIT => self.lock_wait(ev, now),
            kind::LOCK_HOLD => self.lock_hold(ev, now),
            kind::ENQUEUE => self.enqueue(ev, now),
            kind::DEQUEUE => self.dequeue(ev, now),
            kind::ITEM_DROPPED => self.item_dropped(ev, now),
            kind::QUEUE_SNAPSHOT => self.queue_snapshot(ev, now),
            kind::PROCESSING_END => self.processing_end(ev, now),
            kind::BACKLOG_TRIGGER => self.backlog_trigger(ev, now, p, &m.side),
            kind::IO => self.io(ev, now, &m.side),
            kind::HEARTBEAT => self.heartbeat(ev, now),
            _ => {}
        }
        if !self.pending.is_empty() && (ev.kind == kind::DEQUEUE || now >= self.next_deadline) {
            self.check_pending(false);
        }
    }

    /// `lock_wait`: the lock's wait statistics, the waiter's blocked time,
    /// and the wait as an interval for the verdicts.
    #[inline]
    fn lock_wait(&mut self, ev: &Ev, now: u64) {
        let th = ev.thread;
        let l = self.lock(ev.worker);
        let lk = &mut self.locks[l];
        lk.waits += 1;
        lk.wait_total = lk.wait_total.saturating_add(ev.x);
        lk.wait.record(ev.x);
        let t = self.thread(th);
        t.blocked = t.blocked.saturating_add(ev.x);
        let h = self.horizon();
        let s = Span {
            start: now.saturating_sub(ev.x),
            end: now,
            thread: th,
            obj: l as u32,
            bytes: 0,
        };
        Self::push_span(
            &mut self.waits,
            s,
            h,
            self.o.max_intervals,
            &mut self.evicted,
        );
    }

    /// `lock_hold`: the lock's hold statistics and longest holds, and the
    /// hold as an interval (long and short holds kept apart).
    #[inline]
    fn lock_hold(&mut self, ev: &Ev, now: u64) {
        let th = ev.thread;
        let l = self.lock(ev.worker);
        let h = self.horizon();
        let cap = self.o.max_intervals;
        let lk = &mut self.locks[l];
        lk.holds += 1;
        lk.hold_total = lk.hold_total.saturating_add(ev.x);
        lk.hold_max = lk.hold_max.max(ev.x);
        top_hold(&mut lk.top, th, ev.x, now);
        let s = Span {
            start: now.saturating_sub(ev.x),
            end: now,
            thread: th,
            obj: l as u32,
            bytes: 0,
        };
        if ev.x >= SHORT_HOLD_NS {
            Self::push_span(&mut lk.ring, s, h, cap, &mut self.evicted);
        } else {
            Self::push_span(&mut lk.short, s, h, cap / 4, &mut self.evicted_short);
        }
    }

    /// The size a queue event carries (`enqueue`, `dequeue`, `item_dropped`,
    /// `queue_snapshot`): the queue's growth step, maximum, since when it
    /// holds items (`tracks_empty`: the kind's size says whether it is
    /// empty; a drop's does not), and its rate window's size. Returns the
    /// queue's index, the index of its window's row, and since when it held
    /// items before this event (`u64::MAX`: empty).
    ///
    /// Always inlined: it runs for every queue event, and with a plain
    /// `#[inline]` the compiler kept it out of line behind the four
    /// handlers that call it (before the split it was inline in one loop).
    #[inline(always)]
    fn queue_size(&mut self, ev: &Ev, now: u64, tracks_empty: bool) -> (usize, usize, u64) {
        let qi = self.queue(ev.worker, now);
        let widx = now / self.o.window_ns;
        let step = now / self.step_ns();
        let q = &mut self.queues[qi];
        let size = ev.a;
        if step != q.step {
            close_step(q, self.o.window_ns, self.o.window_ns.min(100_000_000));
            q.step = step;
            q.step_base = q.last_size;
        }
        q.last_size = size;
        q.max_size = q.max_size.max(size);
        // Since when the queue holds items, from the sizes: other
        // consumers may have taken the oldest items, so this can
        // reach back further than a dequeued item's delay.
        let since = q.nonempty_since;
        if tracks_empty {
            if size == 0 {
                q.nonempty_since = u64::MAX;
            } else if since == u64::MAX {
                q.nonempty_since = now;
            }
        }
        let r = row_index(&mut q.rows, widx);
        let rw = &mut q.rows[r];
        rw.size_end = size;
        rw.max_size = rw.max_size.max(size);
        (qi, r, since)
    }

    /// `enqueue`: counted in total, in its rate window and in its bucket.
    #[inline]
    fn enqueue(&mut self, ev: &Ev, now: u64) {
        let (qi, r, _) = self.queue_size(ev, now, true);
        let bn = self.o.bucket_ns;
        let q = &mut self.queues[qi];
        q.enq += 1;
        q.rows[r].enq += 1;
        q.cum.enq += 1;
        if let Some(b) = q.ring.slot(now / bn) {
            b.enq += 1;
        }
    }

    /// `dequeue`: counted like an enqueue, its queue delay recorded, its
    /// thread known as a consumer of the queue, and the consumer's stall
    /// before it ([`Backlog::consumer_dequeued`]).
    #[inline]
    fn dequeue(&mut self, ev: &Ev, now: u64) {
        let th = ev.thread;
        let (qi, r, since) = self.queue_size(ev, now, true);
        let bn = self.o.bucket_ns;
        let q = &mut self.queues[qi];
        q.deq += 1;
        q.rows[r].deq += 1;
        q.cum.deq += 1;
        if let Some(b) = q.ring.slot(now / bn) {
            b.deq += 1;
        }
        if ev.x > 0 {
            q.delay.record(ev.x);
        }
        if !q.consumers.contains(&th) {
            q.consumers.push(th);
        }
        self.consumer_dequeued(th, now, ev.x, ev.a, since);
    }

    /// `item_dropped`: counted, and per cause.
    #[inline]
    fn item_dropped(&mut self, ev: &Ev, now: u64) {
        let (qi, r, _) = self.queue_size(ev, now, false);
        let bn = self.o.bucket_ns;
        let q = &mut self.queues[qi];
        q.dropped += 1;
        q.rows[r].drops += 1;
        if let Some(b) = q.ring.slot(now / bn) {
            b.drops += 1;
        }
        let cause = ev.x as u32;
        match q.drops.iter_mut().find(|d| d.0 == cause) {
            Some(d) => d.1 += 1,
            None => q.drops.push((cause, 1)),
        }
    }

    /// `queue_snapshot`: only its size, and counted.
    #[inline]
    fn queue_snapshot(&mut self, ev: &Ev, now: u64) {
        let (qi, _, _) = self.queue_size(ev, now, true);
        self.queues[qi].snapshots += 1;
    }

    /// `processing_end`: the outcome and processing time, and the
    /// consumer's net processing time (its lock waits and I/O inside the
    /// item taken out) in its buckets.
    #[inline]
    fn processing_end(&mut self, ev: &Ev, now: u64) {
        let th = ev.thread;
        let bn = self.o.bucket_ns;
        let qi = self.queue(ev.worker, now);
        let q = &mut self.queues[qi];
        if ev.flag != 0 {
            q.ok += 1;
        } else {
            q.fail += 1;
        }
        q.proc.record(ev.x);
        let t = self.thread(th);
        let net = ev.x - ev.x.min(t.blocked);
        spread(
            &mut t.ring,
            now.saturating_sub(ev.x),
            now,
            net,
            bn,
            |b, v| b.net = b.net.saturating_add(v),
        );
        if let Some(b) = t.ring.slot(now / bn) {
            b.items += 1;
        }
        t.cum.net = t.cum.net.saturating_add(net);
        t.cum.items += 1;
        t.blocked = 0;
        t.in_item = false;
        t.mark = now;
        t.has_mark = true;
    }

    /// `backlog_trigger`: pending until its evidence is complete (growth
    /// and reason in the side table at `x`).
    #[inline]
    fn backlog_trigger(&mut self, ev: &Ev, now: u64, p: &Process, side: &[u64]) {
        let qi = self.queue(ev.worker, now) as u32;
        let since = self.queues[qi as usize].nonempty_since;
        let prev = std::mem::replace(&mut self.queues[qi as usize].last_trigger, now);
        let i = ev.x as usize;
        let growth = side.get(i).copied().unwrap_or(0) as i64;
        let reason = side.get(i + 1).copied().unwrap_or(0) as u32;
        let deadline = now.saturating_add(self.o.lookahead_ns);
        self.pending.push(Pending {
            t: now,
            exact: p.ns(ev.ticks).max(0) as u64,
            since,
            prev,
            q: qi,
            size: ev.a,
            growth,
            reason,
            deadline,
        });
        self.next_deadline = self.next_deadline.min(deadline);
    }

    /// `io`: the op's statistics and slowest operations, the thread's
    /// blocked time, and the I/O as an interval (bytes in the side table
    /// when they did not fit the event).
    #[inline]
    fn io(&mut self, ev: &Ev, now: u64, side: &[u64]) {
        let th = ev.thread;
        let o = self.op(ev.worker);
        let bytes = if ev.flag == 1 {
            side.get(ev.a as usize).copied().unwrap_or(0)
        } else {
            ev.a as u64
        };
        let op = &mut self.ops[o];
        op.count += 1;
        op.bytes = op.bytes.saturating_add(bytes);
        op.total = op.total.saturating_add(ev.x);
        op.hist.record(ev.x);
        if op.top.len() < TOP || op.top.last().is_some_and(|l| ev.x > l.1) {
            let at = op.top.partition_point(|x| x.1 >= ev.x);
            op.top.insert(at, (th, ev.x, bytes, now));
            op.top.truncate(TOP);
        }
        let t = self.thread(th);
        t.blocked = t.blocked.saturating_add(ev.x);
        let h = self.horizon();
        let s = Span {
            start: now.saturating_sub(ev.x),
            end: now,
            thread: th,
            obj: ev.worker,
            bytes,
        };
        Self::push_span(&mut self.ios, s, h, self.o.max_intervals, &mut self.evicted);
    }

    /// `thread_heartbeat`: beats and the longest gap per (thread, role).
    #[inline]
    fn heartbeat(&mut self, ev: &Ev, now: u64) {
        let th = ev.thread;
        let hb = self.hbs.entry((th, ev.worker)).or_default();
        hb.beats += 1;
        if hb.beats == 1 || ev.x > hb.max_gap {
            hb.max_gap = ev.x;
            hb.at = now;
        }
        // Long gaps are evidence for a stall verdict (short ones,
        // the common case, are not kept).
        if ev.x >= HB_GAP_NS {
            let h = self.horizon();
            let s = Span {
                start: now.saturating_sub(ev.x),
                end: now,
                thread: th,
                obj: ev.worker,
                bytes: 0,
            };
            Self::push_span(
                &mut self.hb_gaps,
                s,
                h,
                self.o.max_intervals,
                &mut self.evicted,
            );
        }
    }

    /// A consumer took an item: the gap since its last item, while the
    /// queue had items and it was neither waiting on a lock nor in I/O, is
    /// stall time.
    pub(super) fn consumer_dequeued(
        &mut self,
        th: u32,
        now: u64,
        delay: u64,
        size_after: u32,
        since: u64,
    ) {
        let bn = self.o.bucket_ns;
        let t = self.thread(th);
        if t.has_mark && !t.in_item && now > t.mark {
            // The queue was not empty from the item's enqueue on, and
            // since its size last rose from 0 (the earlier of the two);
            // with neither known, through the whole gap if items remain.
            let item = if delay > 0 {
                now.saturating_sub(delay)
            } else {
                u64::MAX
            };
            let start = if item.min(since) != u64::MAX {
                t.mark.max(item.min(since)).min(now)
            } else if size_after > 0 {
                t.mark
            } else {
                now
            };
            let gap = now - start;
            let stall = gap.saturating_sub(t.blocked);
            if stall > 0 {
                spread(&mut t.ring, start, now, stall, bn, |b, v| {
                    b.stall = b.stall.saturating_add(v)
                });
                t.cum.stall = t.cum.stall.saturating_add(stall);
            }
        }
        if let Some(b) = t.ring.slot(now / bn) {
            b.deqs += 1;
        }
        t.cum.deqs += 1;
        t.blocked = 0;
        t.in_item = true;
        t.mark = now;
        t.has_mark = true;
    }

    /// Judges the triggers whose evidence is complete (`all`: every one,
    /// at the end of a recording).
    pub(super) fn check_pending(&mut self, all: bool) {
        let now = self.now;
        let mut i = 0;
        while i < self.pending.len() {
            let p = self.pending[i];
            // Every consumer has resumed since the trigger: what blocked
            // it has ended and been recorded; what it records right after
            // resuming (a heartbeat ending its silence) comes within
            // `GRACE_NS`.
            if now > p.t
                && p.deadline > now.saturating_add(GRACE_NS)
                && self.queues[p.q as usize].consumers.iter().all(|&c| {
                    self.threads
                        .get(c as usize)
                        .and_then(|t| t.as_ref())
                        .is_some_and(|t| t.mark > p.t)
                })
            {
                self.pending[i].deadline = now.saturating_add(GRACE_NS);
                // The episode is over: the queue's next trigger is judged
                // from here on.
                let q = &mut self.queues[p.q as usize];
                if q.last_trigger == p.t {
                    q.last_trigger = now;
                }
            }
            let ready = all || now >= self.pending[i].deadline;
            if ready {
                self.pending.remove(i);
                let rec = self.evaluate(&p);
                self.done.push(rec);
            } else {
                i += 1;
            }
        }
        self.next_deadline = self
            .pending
            .iter()
            .map(|p| p.deadline)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// End of a recording (or of the trace): judge what is pending, and
    /// forget the time-window state (another recording has its own clock).
    pub(super) fn close_recording(&mut self) {
        self.check_pending(true);
        self.waits.clear();
        self.ios.clear();
        self.hb_gaps.clear();
        for l in &mut self.locks {
            l.ring.clear();
            l.short.clear();
        }
        let (w, st) = (self.o.window_ns, self.step_ns());
        for q in &mut self.queues {
            close_step(q, w, st);
            q.step_base = q.last_size;
            q.step = u64::MAX;
            q.nonempty_since = u64::MAX;
        }
        let cap = self.ring_cap();
        for t in self.threads.iter_mut().flatten() {
            t.ring = Ring::new(cap);
            t.has_mark = false;
            t.in_item = false;
            t.blocked = 0;
        }
        for q in &mut self.queues {
            q.ring = Ring::new(cap);
        }
        self.now = 0;
    }
}
