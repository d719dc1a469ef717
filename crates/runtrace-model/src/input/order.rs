//! Time ordering: each thread's events are already in time order, so
//! releasing them in timestamp order is a k-way merge of per-thread queues,
//! one writer round behind (docs/format.md section 8), as
//! `runtrace_format::merge::EventStream` does.

use crate::event::{kind, Ev};
use crate::model::Model;
use crate::pass::Pass;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Events held for ordering beyond which the oldest half is released even
/// without a ROUND frame (a file written without rounds, or a huge round):
/// bounds memory at ~64 MiB of pending events.
const MAX_PENDING: usize = 1 << 21;

/// One thread's pending events, in its recording order (= time order): a
/// ring with a power-of-two capacity, so releasing the old part of a round
/// moves nothing.
#[derive(Default)]
pub(crate) struct ThreadQueue {
    buf: Vec<Ev>,
    head: usize,
    pub len: usize,
}

const EMPTY_EV: Ev = Ev {
    ticks: 0,
    x: 0,
    a: 0,
    thread: 0,
    worker: 0,
    kind: 0,
    flag: 0,
};

impl ThreadQueue {
    #[inline(always)]
    pub fn push(&mut self, ev: Ev) {
        if self.len == self.buf.len() {
            self.grow();
        }
        let mask = self.buf.len() - 1;
        self.buf[(self.head + self.len) & mask] = ev;
        self.len += 1;
    }

    /// Doubles the ring (from a few entries: a thread with one event
    /// costs a few entries, whatever the number of threads).
    #[cold]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(4);
        let mut buf = Vec::with_capacity(cap);
        let mask = self.buf.len().wrapping_sub(1);
        for i in 0..self.len {
            buf.push(self.buf[(self.head + i) & mask]);
        }
        buf.resize(cap, EMPTY_EV);
        self.buf = buf;
        self.head = 0;
    }

    #[inline(always)]
    pub fn front(&self) -> Option<&Ev> {
        if self.len == 0 {
            None
        } else {
            self.buf.get(self.head)
        }
    }

    /// Drops the front event (the reader releases runs instead:
    /// [`Orderer`]'s release).
    #[cfg(test)]
    pub fn pop(&mut self) {
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
    }

    /// Gives the ring's memory back once it is empty: what the orderer
    /// holds is bounded by the events pending, not by the threads ever
    /// seen (a file with 600k threads of one chunk each kept 8 KB each).
    /// Returns it, for [`Orderer::spare`].
    fn release_memory(&mut self) -> Vec<Ev> {
        debug_assert_eq!(self.len, 0);
        self.head = 0;
        std::mem::take(&mut self.buf)
    }
}

/// Orders events across threads: each thread's events are already in time
/// order, so releasing is a k-way merge of per-thread queues.
///
/// The heads of the non-empty queues live in one persistent min-heap (one
/// entry per such thread), so a ROUND costs O(log n) per run of one
/// thread's events released (a thread's events are taken while they come
/// before every other head, then its new head goes back in the heap),
/// whatever the number of threads with pending events: nothing
/// scans all threads (issue 17 item 3: N threads each with a chunk then a
/// ROUND was quadratic).
#[derive(Default)]
pub(crate) struct Orderer {
    queues: Vec<ThreadQueue>,
    /// Threads whose queue was empty when handed out by [`Orderer::queue`]
    /// and so have no heap entry yet (their first event was not known).
    fresh: Vec<u32>,
    in_heap: Vec<bool>,
    pub pending: usize,
    last_watermark: u64,
    /// Head key of every non-empty queue not in `fresh`.
    heap: BinaryHeap<Reverse<u128>>,
    /// Heap operations done (pushes and pops), for the linear-time test.
    pub(crate) heap_ops: u64,
    /// Rings given back by queues that emptied, for the next queue that
    /// starts filling (at most [`SPARE`]): a busy thread's queue empties
    /// at every round, and growing it again from a few entries was 3% of
    /// decoding's instructions (callgrind of `runtrace top --once`).
    spare: Vec<Vec<Ev>>,
}

/// Rings kept for reuse at most (a ring is as large as a thread's events
/// of a round: with a few busy threads, theirs)...
const SPARE: usize = 16;
/// ... of at most this many events (2 MiB each): a ring grown for a huge
/// round is given back.
const SPARE_MAX_LEN: usize = 1 << 16;

/// Merge key: time, then wakes and spawns before other events of the same
/// tick on other threads (a wake stamped in the same tick as the poll it
/// causes happened before it), then thread.
#[inline(always)]
fn key(ev: &Ev, thread: u32) -> u128 {
    let pri = !matches!(ev.kind, kind::WAKE | kind::SPAWN) as u128;
    (ev.ticks as u128) << 64 | pri << 32 | thread as u128
}

#[inline(always)]
fn key_thread(k: u128) -> u32 {
    k as u32
}

/// The smallest key of an event at tick `ticks`: keys below it are events
/// older than `ticks`.
#[inline(always)]
fn tick_floor(ticks: u64) -> u128 {
    (ticks as u128) << 64
}

impl Orderer {
    /// The queue of engine thread `t`, to push its events to.
    pub fn queue(&mut self, t: u32) -> &mut ThreadQueue {
        let i = t as usize;
        if i >= self.queues.len() {
            self.queues.resize_with(i + 1, ThreadQueue::default);
            self.in_heap.resize(i + 1, false);
        }
        if !self.in_heap[i] {
            // Its head is known once the events are pushed: enter it into
            // the heap at the next release.
            self.in_heap[i] = true;
            self.fresh.push(t);
            let q = &mut self.queues[i];
            if q.buf.is_empty() {
                if let Some(buf) = self.spare.pop() {
                    q.buf = buf;
                    q.head = 0;
                }
            }
        }
        &mut self.queues[i]
    }

    pub fn round<P: Pass>(&mut self, watermark: u64, e: &mut P, m: &Model) {
        let below = self.last_watermark;
        self.last_watermark = watermark;
        self.release(e, m, tick_floor(below));
    }

    /// Processes every pending event whose key is below `limit`, in order.
    fn release<P: Pass>(&mut self, e: &mut P, m: &Model, limit: u128) {
        for i in 0..self.fresh.len() {
            let t = self.fresh[i];
            match self.queues[t as usize].front() {
                Some(ev) => {
                    self.heap.push(Reverse(key(ev, t)));
                    self.heap_ops += 1;
                }
                None => self.emptied(t),
            }
        }
        self.fresh.clear();
        while let Some(&Reverse(k)) = self.heap.peek() {
            if k >= limit {
                break;
            }
            self.heap.pop();
            self.heap_ops += 1;
            let t = key_thread(k);
            // Take this thread's events while they come before every other
            // thread's head (and the limit): one pop and at most one push
            // per run of a thread's events, not a sift per event.
            let bound = self.heap.peek().map_or(limit, |r| r.0.min(limit));
            // An event stamped before the bound's tick comes before it
            // whatever its kind and thread: one comparison of ticks for
            // most events, the whole key only on the bound's tick.
            let bound_ticks = (bound >> 64) as u64;
            let q = &mut self.queues[t as usize];
            // The run: the head (the heap's least), then the events after
            // it that still come first, handed to the pass together
            // ([`Pass::events`]: a slice, or two where the ring wraps).
            let mask = q.buf.len() - 1;
            let mut n = 1;
            while n < q.len {
                let ev = &q.buf[(q.head + n) & mask];
                if ev.ticks >= bound_ticks && key(ev, t) >= bound {
                    break;
                }
                n += 1;
            }
            let first = n.min(q.buf.len() - q.head);
            e.events(&q.buf[q.head..q.head + first], m);
            if first < n {
                e.events(&q.buf[..n - first], m);
            }
            q.head = (q.head + n) & mask;
            q.len -= n;
            self.pending -= n;
            match q.front() {
                Some(ev) => {
                    self.heap.push(Reverse(key(ev, t)));
                    self.heap_ops += 1;
                }
                None => self.emptied(t),
            }
        }
    }

    /// Thread `t`'s queue is empty: out of the heap, its ring kept for the
    /// next queue to fill if there is room and it is not too large.
    fn emptied(&mut self, t: u32) {
        self.in_heap[t as usize] = false;
        let buf = self.queues[t as usize].release_memory();
        if self.spare.len() < SPARE && !buf.is_empty() && buf.len() <= SPARE_MAX_LEN {
            self.spare.push(buf);
        }
    }

    pub fn flush<P: Pass>(&mut self, e: &mut P, m: &Model) {
        // Every key is below u128::MAX (u64::MAX itself is a valid tick).
        self.release(e, m, u128::MAX);
        self.last_watermark = 0;
    }

    /// Releases everything when too much is pending (a file written
    /// without ROUND frames, or a huge round).
    pub fn bound<P: Pass>(&mut self, e: &mut P, m: &Model) -> bool {
        if self.pending < MAX_PENDING {
            return false;
        }
        self.flush(e, m);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pass::Wants;

    /// Records what it is given.
    #[derive(Default)]
    struct Seen(Vec<(u64, u32)>);
    impl Pass for Seen {
        fn wants(&self) -> Wants {
            Wants::RUNTIME
        }
        fn event(&mut self, ev: &Ev, _m: &Model) {
            self.0.push((ev.ticks, ev.thread));
        }
    }

    fn ev(ticks: u64, thread: u32) -> Ev {
        Ev {
            ticks,
            thread,
            kind: kind::POLL_START,
            ..EMPTY_EV
        }
    }

    /// `n` threads, each one chunk of `per` events stamped after every
    /// watermark so far, each followed by a ROUND (issue 17 item 3: every
    /// thread stays pending across all rounds). Returns the heap work and
    /// checks the order.
    fn threads_then_rounds(n: u32, per: u64) -> u64 {
        let m = Model::new();
        let mut o = Orderer::default();
        let mut seen = Seen::default();
        for t in 0..n {
            let q = o.queue(t);
            for i in 0..per {
                q.push(ev(1_000_000 + u64::from(t) * per + i, t));
            }
            o.pending += per as usize;
            o.round(u64::from(t), &mut seen, &m);
        }
        assert!(seen.0.is_empty(), "nothing is below the watermarks yet");
        o.flush(&mut seen, &m);
        assert_eq!(seen.0.len() as u64, u64::from(n) * per);
        assert!(seen.0.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(o.pending, 0);
        o.heap_ops
    }

    #[test]
    fn thousands_of_pending_threads_cost_linear_work() {
        let one = threads_then_rounds(2_000, 3);
        let four = threads_then_rounds(8_000, 3);
        // One push per thread and one pop per run of a thread's events
        // (here each thread's events are one run): exactly linear. The old
        // code scanned every pending thread at every ROUND (16x here).
        assert_eq!(one, 2_000 + 2_000);
        assert_eq!(four, 4 * one);
    }

    #[test]
    fn interleaved_threads_merge_in_time_order() {
        let m = Model::new();
        let mut o = Orderer::default();
        let mut seen = Seen::default();
        for t in 0..3u32 {
            let q = o.queue(t);
            for i in 0..5u64 {
                q.push(ev(i * 3 + u64::from(t), t));
            }
            o.pending += 5;
        }
        o.round(7, &mut seen, &m);
        assert!(seen.0.is_empty(), "one round behind");
        o.round(100, &mut seen, &m);
        let ticks: Vec<u64> = seen.0.iter().map(|s| s.0).collect();
        assert_eq!(ticks, (0..7).collect::<Vec<_>>());
        // u64::MAX is a valid tick: flush releases it too.
        o.queue(1).push(ev(u64::MAX, 1));
        o.pending += 1;
        o.flush(&mut seen, &m);
        assert_eq!(seen.0.len(), 16);
        assert_eq!(seen.0.last(), Some(&(u64::MAX, 1)));
    }
}
