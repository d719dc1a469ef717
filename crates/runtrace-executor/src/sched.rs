//! Run queues and the choice between them.
//!
//! Within a queue:
//! - `RunnableFifo`: tasks in the order they became runnable (a `VecDeque`).
//! - `Las` (least attained service): 64 buckets by `log2` of a task's
//!   accumulated poll time in units of [`LAS_QUANTUM`], a bitmap of the
//!   non-empty ones, FIFO inside a bucket. Tasks that have used less than
//!   one quantum share bucket 0, so they run in FIFO order. A pick is O(1) (`trailing_zeros` of the bitmap), unlike the
//!   heap plus hash map that made the peer's LAS 15x slower than its FIFO.
//!   Anti-starvation rule: every [`LAS_AGING`]th pick from a queue takes
//!   the bucket with the *most* attained service, so a long task gets at
//!   least 1/8 of its queue's picks however many fresh tasks arrive.
//!
//! Across queues, EEVDF: each queue has a share `w`, a virtual runtime `v`
//! (poll time / `w`) and a virtual deadline `d = v + slice / w`. The
//! virtual time `V` is the share-weighted mean of `v` over runnable
//! queues; a queue is eligible when its lag is not negative (`v <= V`), and
//! the eligible queue with the earliest deadline runs. A queue that becomes
//! runnable after idling keeps its lag, bounded to one slice of credit
//! (`v := max(v, V - slice / w)`), so sleeping does not bank unbounded
//! priority. Selection happens at every poll boundary: tasks are
//! cooperative, so a poll boundary is the preemption point, and a queue
//! that becomes runnable with an earlier deadline wins the very next pick.

use async_task::Runnable;
use std::collections::VecDeque;

use crate::task::Meta;

/// Every this many picks, a LAS queue serves its most-served bucket.
pub const LAS_AGING: u64 = 8;

/// The service a LAS queue tells apart from none: tasks that have used
/// less than this share its first bucket (FIFO among them); from there on,
/// each bucket holds twice the service of the one before.
///
/// Below a few microseconds, a poll's measured time is mostly the
/// executor's own bookkeeping between clock reads and the noise of
/// interrupts, not the task's work; ordering by it would scatter tasks
/// that did the same work, and the run queue's order in memory with them
/// (measured on the 50,000-task overhead workload: LAS took 1.7-2.0x
/// FIFO's CPU time with single-tick buckets, ~1.3x with this quantum; see
/// docs/executor.md).
///
/// ```
/// assert_eq!(runtrace_executor::LAS_QUANTUM.as_micros(), 8);
/// ```
pub const LAS_QUANTUM: std::time::Duration = std::time::Duration::from_micros(8);

/// Fixed-point scale of virtual time (so small shares keep precision).
const SCALE: u64 = 1 << 10;

/// A queue's scheduling policy (chosen with `QueueConfig::fifo` or
/// `QueueConfig::las`).
///
/// ```
/// use runtrace_executor::Policy;
/// assert_ne!(Policy::RunnableFifo, Policy::Las);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Tasks in the order they became runnable.
    RunnableFifo,
    /// Least attained service first (see the module docs).
    Las,
}

pub(crate) struct Las {
    buckets: Box<[VecDeque<Runnable<Meta>>; 64]>,
    mask: u64,
    picks: u64,
    /// log2 of the quantum in ticks (`LAS_QUANTUM`, rounded up to a power
    /// of two).
    shift: u32,
}

/// Bucket of a task by the log2 of its attained service (ticks) in
/// quanta of `1 << shift` ticks: 0 below one quantum.
fn bucket(service: u64, shift: u32) -> usize {
    ((64 - (service >> shift).leading_zeros()) as usize).min(63)
}

impl Las {
    fn new(quantum_ticks: u64) -> Las {
        Las {
            buckets: Box::new(std::array::from_fn(|_| VecDeque::new())),
            mask: 0,
            picks: 0,
            shift: quantum_ticks.max(1).next_power_of_two().trailing_zeros(),
        }
    }

    fn push(&mut self, r: Runnable<Meta>) {
        let b = bucket(r.metadata().service(), self.shift);
        self.buckets[b].push_back(r);
        self.mask |= 1 << b;
    }

    fn pop(&mut self) -> Option<Runnable<Meta>> {
        if self.mask == 0 {
            return None;
        }
        self.picks += 1;
        let b = if self.picks.is_multiple_of(LAS_AGING) {
            63 - self.mask.leading_zeros() as usize
        } else {
            self.mask.trailing_zeros() as usize
        };
        let r = self.buckets[b].pop_front();
        if self.buckets[b].is_empty() {
            self.mask &= !(1 << b);
        }
        r
    }
}

pub(crate) enum RunQueue {
    Fifo(VecDeque<Runnable<Meta>>),
    Las(Las),
}

impl RunQueue {
    pub(crate) fn new(p: Policy, quantum_ticks: u64) -> RunQueue {
        match p {
            Policy::RunnableFifo => RunQueue::Fifo(VecDeque::with_capacity(256)),
            Policy::Las => RunQueue::Las(Las::new(quantum_ticks)),
        }
    }
}

/// One queue: its run queue and its EEVDF state.
pub(crate) struct Queue {
    pub(crate) name: runtrace_core::Istr,
    pub(crate) rq: RunQueue,
    pub(crate) len: usize,
    share: u64,
    vruntime: u64,
    deadline: u64,
    slice: u64,
}

/// All queues of an executor.
pub(crate) struct Sched {
    pub(crate) queues: Vec<Queue>,
    runnable: u32,
}

impl Sched {
    /// Queues as configured (name, policy, share); `slice_ticks` is the
    /// EEVDF slice and `quantum_ticks` the LAS quantum, in trace ticks.
    pub(crate) fn new(
        cfg: &[(String, Policy, u32)],
        slice_ticks: u64,
        quantum_ticks: u64,
    ) -> Sched {
        let queues = cfg
            .iter()
            .map(|(name, p, share)| {
                let share = *share as u64;
                Queue {
                    name: runtrace_core::Istr::new(name),
                    rq: RunQueue::new(*p, quantum_ticks),
                    len: 0,
                    share,
                    vruntime: 0,
                    slice: slice_ticks * SCALE / share,
                    deadline: slice_ticks * SCALE / share,
                }
            })
            .collect();
        Sched {
            queues,
            runnable: 0,
        }
    }

    /// Share-weighted mean virtual runtime of the runnable queues.
    fn vtime(&self) -> Option<u64> {
        let (mut num, mut den) = (0u128, 0u128);
        for q in self.queues.iter().filter(|q| q.len > 0) {
            num += q.vruntime as u128 * q.share as u128;
            den += q.share as u128;
        }
        (den > 0).then(|| (num / den) as u64)
    }

    /// Makes `r` runnable on queue `qi`.
    #[inline]
    pub(crate) fn push(&mut self, qi: usize, r: Runnable<Meta>) {
        if self.queues[qi].len == 0 {
            // Waking up: keep the lag, but at most one slice of credit.
            let v = self.vtime();
            let q = &mut self.queues[qi];
            if let Some(v) = v {
                q.vruntime = q.vruntime.max(v.saturating_sub(q.slice));
            }
            q.deadline = q.vruntime + q.slice;
            self.runnable += 1;
        }
        let q = &mut self.queues[qi];
        q.len += 1;
        match &mut q.rq {
            RunQueue::Fifo(d) => d.push_back(r),
            RunQueue::Las(l) => l.push(r),
        }
    }

    /// Queues with runnable tasks.
    #[inline]
    pub(crate) fn runnable_queues(&self) -> u32 {
        self.runnable
    }

    /// The queue to poll next (EEVDF), or None when nothing is runnable.
    #[inline]
    pub(crate) fn pick_queue(&self) -> Option<usize> {
        if self.queues.len() == 1 {
            return (self.queues[0].len > 0).then_some(0);
        }
        let v = self.vtime()?;
        let mut best: Option<usize> = None;
        for (i, q) in self.queues.iter().enumerate() {
            if q.len == 0 || q.vruntime > v {
                continue;
            }
            if best.is_none_or(|b| q.deadline < self.queues[b].deadline) {
                best = Some(i);
            }
        }
        // The queue holding the minimum vruntime is always eligible, so
        // `best` is set whenever something is runnable.
        best
    }

    /// Takes the next task of queue `qi`.
    #[inline]
    pub(crate) fn pop(&mut self, qi: usize) -> Option<Runnable<Meta>> {
        let q = &mut self.queues[qi];
        let r = match &mut q.rq {
            RunQueue::Fifo(d) => d.pop_front(),
            RunQueue::Las(l) => l.pop(),
        }?;
        q.len -= 1;
        if q.len == 0 {
            self.runnable -= 1;
        }
        Some(r)
    }

    /// Charges `ticks` of poll time to queue `qi`.
    #[inline]
    pub(crate) fn charge(&mut self, qi: usize, ticks: u64) {
        let q = &mut self.queues[qi];
        q.vruntime += ticks * SCALE / q.share;
        q.deadline = q.vruntime + q.slice;
    }

    pub(crate) fn vruntime(&self, qi: usize) -> u64 {
        self.queues[qi].vruntime / SCALE
    }

    /// Drops every queued task (their futures are dropped).
    pub(crate) fn clear(&mut self) -> Vec<Runnable<Meta>> {
        let mut out = Vec::new();
        for qi in 0..self.queues.len() {
            while let Some(r) = self.pop(qi) {
                out.push(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::bucket;

    #[test]
    fn buckets_are_log2() {
        assert_eq!(bucket(0, 0), 0);
        assert_eq!(bucket(1, 0), 1);
        assert_eq!(bucket(2, 0), 2);
        assert_eq!(bucket(3, 0), 2);
        assert_eq!(bucket(1 << 40, 0), 41);
        assert_eq!(bucket(u64::MAX, 0), 63);
    }

    #[test]
    fn service_under_one_quantum_is_bucket_zero() {
        // A quantum of 2^10 ticks.
        assert_eq!(bucket(0, 10), 0);
        assert_eq!(bucket(1023, 10), 0);
        assert_eq!(bucket(1024, 10), 1);
        assert_eq!(bucket(2047, 10), 1);
        assert_eq!(bucket(2048, 10), 2);
        assert_eq!(bucket(u64::MAX, 10), 54);
    }

    #[test]
    fn quantum_rounds_up_to_a_power_of_two() {
        assert_eq!(super::Las::new(1000).shift, 10);
        assert_eq!(super::Las::new(1024).shift, 10);
        assert_eq!(super::Las::new(0).shift, 0);
    }
}
