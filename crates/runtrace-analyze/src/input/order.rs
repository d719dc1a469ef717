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

    #[cold]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(256);
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

    #[inline(always)]
    pub fn pop(&mut self) {
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
    }
}

/// Orders events across threads: each thread's events are already in time
/// order, so releasing is a k-way merge of per-thread queues.
#[derive(Default)]
pub(crate) struct Orderer {
    queues: Vec<ThreadQueue>,
    /// Threads with pending events.
    active: Vec<u32>,
    in_active: Vec<bool>,
    pub pending: usize,
    last_watermark: u64,
    heap: BinaryHeap<Reverse<u128>>,
    heads: Vec<u128>,
}

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

impl Orderer {
    /// The queue of engine thread `t`, marked active.
    pub fn queue(&mut self, t: u32) -> &mut ThreadQueue {
        let i = t as usize;
        if i >= self.queues.len() {
            self.queues.resize_with(i + 1, ThreadQueue::default);
            self.in_active.resize(i + 1, false);
        }
        if !self.in_active[i] {
            self.in_active[i] = true;
            self.active.push(t);
        }
        &mut self.queues[i]
    }

    pub fn round<P: Pass>(&mut self, watermark: u64, e: &mut P, m: &Model) {
        let below = self.last_watermark;
        self.last_watermark = watermark;
        self.release(e, m, below);
    }

    /// Processes every pending event older than `below`, in order.
    fn release<P: Pass>(&mut self, e: &mut P, m: &Model, below: u64) {
        self.heap.clear();
        for &t in &self.active {
            let q = &self.queues[t as usize];
            if let Some(ev) = q.front() {
                if ev.ticks < below {
                    self.heap.push(Reverse(key(ev, t)));
                }
            }
        }
        if self.heap.len() <= 8 {
            // Few threads (the usual case): scan for the smallest and the
            // second smallest head, and take the smallest thread's events
            // while they come before the second.
            let heads = &mut self.heads;
            heads.clear();
            heads.extend(self.heap.drain().map(|r| r.0));
            while !heads.is_empty() {
                let (mut mi, mut m1, mut m2) = (0, heads[0], u128::MAX);
                for (i, &k) in heads.iter().enumerate().skip(1) {
                    if k < m1 {
                        (m2, m1, mi) = (m1, k, i);
                    } else if k < m2 {
                        m2 = k;
                    }
                }
                let t = key_thread(m1);
                let q = &mut self.queues[t as usize];
                loop {
                    if let Some(ev) = q.front() {
                        e.event(ev, m);
                    }
                    q.pop();
                    self.pending -= 1;
                    match q.front() {
                        Some(ev) if ev.ticks < below => {
                            let k = key(ev, t);
                            if k > m2 {
                                heads[mi] = k;
                                break;
                            }
                        }
                        _ => {
                            heads.swap_remove(mi);
                            break;
                        }
                    }
                }
            }
        }
        // Many threads: a heap (empty here when the scan above ran).
        while let Some(mut top) = self.heap.peek_mut() {
            let t = key_thread(top.0);
            let q = &mut self.queues[t as usize];
            if let Some(ev) = q.front() {
                e.event(ev, m);
            }
            q.pop();
            self.pending -= 1;
            match q.front() {
                Some(ev) if ev.ticks < below => *top = Reverse(key(ev, t)),
                _ => {
                    std::collections::binary_heap::PeekMut::pop(top);
                }
            }
        }
        let (queues, in_active) = (&self.queues, &mut self.in_active);
        self.active.retain(|&t| {
            let keep = queues[t as usize].len > 0;
            in_active[t as usize] = keep;
            keep
        });
    }

    pub fn flush<P: Pass>(&mut self, e: &mut P, m: &Model) {
        self.release(e, m, u64::MAX);
        // u64::MAX itself is a valid timestamp.
        for t in std::mem::take(&mut self.active) {
            let q = &mut self.queues[t as usize];
            self.in_active[t as usize] = false;
            while let Some(ev) = q.front() {
                e.event(ev, m);
                q.pop();
                self.pending -= 1;
            }
        }
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
