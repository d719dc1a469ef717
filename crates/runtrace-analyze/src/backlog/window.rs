//! Time-window building blocks: intervals, a sliding ring of time
//! buckets, per-window rows of a queue, and spreading an amount over
//! buckets by overlap.

use std::collections::VecDeque;

/// A time interval on a thread: a lock wait or hold (`obj`: lock), an I/O
/// (`obj`: op, `bytes`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) thread: u32,
    pub(super) obj: u32,
    pub(super) bytes: u64,
}

/// Counters in fixed-width time buckets over a sliding span: bucket `b`
/// covers `[b * width, (b + 1) * width)`.
pub(super) struct Ring<T> {
    pub(super) base: u64,
    pub(super) buf: VecDeque<T>,
    pub(super) cap: usize,
}

impl<T: Default + Copy> Ring<T> {
    pub(super) fn new(cap: usize) -> Ring<T> {
        Ring {
            base: 0,
            buf: VecDeque::new(),
            cap: cap.max(2),
        }
    }

    /// Bucket `b`, or None when it has already slid out.
    #[inline]
    pub(super) fn slot(&mut self, b: u64) -> Option<&mut T> {
        if self.buf.is_empty() {
            self.base = b;
            self.buf.push_back(T::default());
        }
        if b < self.base {
            return None;
        }
        let end = self.base + self.buf.len() as u64;
        if b >= end {
            if b - end >= self.cap as u64 {
                // A jump further than the whole span: start over.
                self.buf.clear();
                self.base = b;
                self.buf.push_back(T::default());
            } else {
                while self.base + (self.buf.len() as u64) <= b {
                    self.buf.push_back(T::default());
                    if self.buf.len() > self.cap {
                        self.buf.pop_front();
                        self.base += 1;
                    }
                }
            }
        }
        self.buf.get_mut((b - self.base) as usize)
    }

    /// Folds buckets `from..=to` that are still held.
    pub(super) fn fold<A>(&self, from: u64, to: u64, init: A, mut f: impl FnMut(A, &T) -> A) -> A {
        let mut acc = init;
        if self.buf.is_empty() || to < self.base {
            return acc;
        }
        let lo = from.saturating_sub(self.base) as usize;
        let hi = ((to - self.base) as usize).min(self.buf.len() - 1);
        if from > to || lo > hi {
            return acc;
        }
        for i in lo..=hi {
            if let Some(x) = self.buf.get(i) {
                acc = f(acc, x);
            }
        }
        acc
    }
}

/// Per consumer thread, per bucket.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct CBucket {
    /// Processing time minus the lock waits and I/O inside it (ns).
    pub(super) net: u64,
    /// Items whose processing ended in the bucket.
    pub(super) items: u64,
    /// Idle time while the queue had items (ns).
    pub(super) stall: u64,
    /// Dequeues.
    pub(super) deqs: u64,
}

/// Per queue, per bucket.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct QBucket {
    pub(super) enq: u64,
    pub(super) deq: u64,
    pub(super) drops: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Row {
    pub(super) idx: u64,
    pub(super) enq: u64,
    pub(super) deq: u64,
    pub(super) drops: u64,
    pub(super) size_end: u32,
    pub(super) max_size: u32,
    pub(super) peak_growth: f64,
}

/// The row of window `idx` (events come in time order, so it is the last
/// row or a new one; a late event finds its row by search).
pub(super) fn row(rows: &mut Vec<Row>, idx: u64) -> &mut Row {
    let pos = row_index(rows, idx);
    &mut rows[pos]
}

/// [`row`]'s position in `rows` (created if new).
#[inline]
pub(super) fn row_index(rows: &mut Vec<Row>, idx: u64) -> usize {
    match rows.last().map(|r| r.idx) {
        Some(last) if last == idx => rows.len() - 1,
        Some(last) if last > idx => match rows.binary_search_by_key(&idx, |r| r.idx) {
            Ok(i) => i,
            Err(i) => {
                let prev = if i > 0 { rows[i - 1].size_end } else { 0 };
                rows.insert(i, new_row(idx, prev));
                i
            }
        },
        _ => {
            let prev = rows.last().map_or(0, |r| r.size_end);
            rows.push(new_row(idx, prev));
            rows.len() - 1
        }
    }
}

pub(super) fn new_row(idx: u64, size: u32) -> Row {
    Row {
        idx,
        enq: 0,
        deq: 0,
        drops: 0,
        size_end: size,
        max_size: 0,
        peak_growth: 0.0,
    }
}

/// Adds `amount` to the buckets of `[start, end]`, in proportion to their
/// overlap (all of it to `end`'s bucket for an empty interval).
pub(super) fn spread<T: Default + Copy>(
    ring: &mut Ring<T>,
    start: u64,
    end: u64,
    amount: u64,
    bn: u64,
    mut f: impl FnMut(&mut T, u64),
) {
    if amount == 0 {
        return;
    }
    let (b0, b1) = (start / bn, end / bn);
    if b0 == b1 || end <= start {
        if let Some(b) = ring.slot(end / bn) {
            f(b, amount);
        }
        return;
    }
    let len = (end - start) as u128;
    // Only the buckets the ring can hold.
    let first = b0.max(b1.saturating_sub(ring.cap as u64 - 1));
    let mut given = 0u64;
    for b in first..=b1 {
        let (s, e) = (
            b.saturating_mul(bn).max(start),
            b.saturating_add(1).saturating_mul(bn).min(end),
        );
        let share = if b == b1 {
            amount - given.min(amount)
        } else {
            (amount as u128 * e.saturating_sub(s) as u128 / len) as u64
        };
        given = given.saturating_add(share);
        if let Some(x) = ring.slot(b) {
            f(x, share);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slides_and_folds() {
        let mut r: Ring<u64> = Ring::new(4);
        assert!(r.slot(10).is_some());
        *r.slot(10).unwrap() += 1;
        *r.slot(12).unwrap() += 2;
        assert_eq!(r.fold(0, u64::MAX, 0, |a, x| a + x), 3);
        // Bucket 14 pushes 10 out (4 buckets kept: 11..=14).
        *r.slot(14).unwrap() += 4;
        assert!(r.slot(10).is_none());
        assert_eq!(r.fold(11, 14, 0, |a, x| a + x), 6);
        assert_eq!(r.fold(13, 14, 0, |a, x| a + x), 4);
        assert_eq!(r.fold(15, 20, 0, |a, x| a + x), 0);
        assert_eq!(r.fold(14, 13, 0, |a, x| a + x), 0);
        // A jump past the whole span starts over.
        *r.slot(1_000_000).unwrap() += 8;
        assert_eq!(r.fold(0, u64::MAX, 0, |a, x| a + x), 8);
        assert!(r.slot(u64::MAX).is_some());
    }

    #[test]
    fn spread_divides_by_overlap() {
        let mut r: Ring<u64> = Ring::new(100);
        // 30 over [5, 35) with buckets of 10: 5, 10, 10, 5.
        spread(&mut r, 5, 35, 30, 10, |b, v| *b += v);
        let v: Vec<u64> = (0..4).map(|b| r.fold(b, b, 0, |a, x| a + x)).collect();
        assert_eq!(v, [5, 10, 10, 5]);
        // Longer than the ring: only the last buckets, the remainder in the
        // last one, never more than the amount.
        let mut r: Ring<u64> = Ring::new(4);
        spread(&mut r, 0, 1_000, 1_000, 10, |b, v| *b += v);
        assert!(r.fold(0, u64::MAX, 0, |a, x| a + x) <= 1_000);
        let mut r: Ring<u64> = Ring::new(4);
        spread(&mut r, u64::MAX - 5, u64::MAX, 7, 10, |b, v| *b += v);
        assert_eq!(r.fold(0, u64::MAX, 0, |a, x| a + x), 7);
    }
}
