//! What a sampler hands the writer: one raw sample, before interning, and
//! the clock pair that turns a kernel time (CLOCK_MONOTONIC) into ticks.
//!
//! Its own module so that the samplers (`perf.rs`, `bpf.rs`, `signal.rs`)
//! and the profiler (`profiler.rs`) share them without importing each
//! other.

use runtrace_core::clock::TraceClock;

/// One sample as a sampler took it: what [`Profiler::collect`] fills in
/// and [`Profiler::encode`] turns into events.
///
/// ```
/// use runtrace_profile::{RawKind, RawSample};
/// let s = RawSample { tid: 7, ticks: 1_000, kind: RawKind::OnCpu, stack: vec![0x401000, 0x400800] };
/// assert_eq!(s.stack[0], 0x401000); // the leaf
/// ```
///
/// [`Profiler::collect`]: crate::Profiler::collect
/// [`Profiler::encode`]: crate::Profiler::encode
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    /// OS thread id of the sampled thread.
    pub tid: u64,
    /// When (trace ticks): the sample time, or for `OffCpu` the switch-in.
    pub ticks: u64,
    /// On-CPU sample or off-CPU interval.
    pub kind: RawKind,
    /// Addresses, leaf first (kernel frames and context markers removed).
    pub stack: Vec<u64>,
}

/// On-CPU sample, or the end of an off-CPU interval.
///
/// ```
/// use runtrace_profile::RawKind;
/// let k = RawKind::OffCpu { off_ns: 2_000_000 }; // 2 ms switched out
/// assert_ne!(k, RawKind::OnCpu);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawKind {
    /// Taken while the thread ran.
    OnCpu,
    /// The thread was switched out for `off_ns` before `ticks`; the stack
    /// is where it switched out.
    OffCpu {
        /// Nanoseconds off-CPU.
        off_ns: u64,
    },
    /// A sampled heap allocation (the stack is where it was made).
    Alloc {
        /// Bytes the allocation asked for.
        size: u64,
        /// Bytes of allocation the sample stands for (see `alloc`).
        weight: u64,
        /// The allocation's address (pairs it with its free).
        addr: u64,
        /// Live-set state: `alloc::LIVE_OFF`, `LIVE_TRACKED`, `LIVE_UNTRACKED`.
        live: u8,
    },
    /// A sampled allocation was freed, or moved by `realloc` (the sample
    /// then lives on at `moved_to`). `tid` is the freeing thread.
    AllocFree {
        /// The address freed (a sample's `addr`).
        addr: u64,
        /// The new address after a move; 0: freed.
        moved_to: u64,
    },
    /// The live set lost track since the previous note: `untracked`
    /// sampled allocations found its table full, `lost_frees` frees of
    /// sampled allocations were lost to a full queue.
    AllocNote {
        /// Samples (and moves) the table could not hold.
        untracked: u64,
        /// Frees lost.
        lost_frees: u64,
    },
}

/// Moves the samples of `pending` with ticks <= `cutoff` into `out` (any
/// order): a sampler's drain hands over what the writer's round may
/// write, and keeps later ones for the next round.
pub(crate) fn take_up_to(pending: &mut Vec<RawSample>, cutoff: u64, out: &mut Vec<RawSample>) {
    let mut i = 0;
    while i < pending.len() {
        if pending[i].ticks <= cutoff {
            out.push(pending.swap_remove(i));
        } else {
            i += 1;
        }
    }
}

/// A clock pair read at one instant: trace ticks and CLOCK_MONOTONIC ns.
#[derive(Clone, Copy)]
pub(crate) struct ClockPair {
    ticks: u64,
    mono_ns: u64,
    ticks_per_sec: u64,
}

impl ClockPair {
    /// Reads both clocks (the ticks on either side of the monotonic read,
    /// averaged).
    pub(crate) fn read(clock: &TraceClock) -> ClockPair {
        let t1 = clock.now();
        let m = mono_ns();
        let t2 = clock.now();
        ClockPair {
            ticks: t1 + (t2 - t1) / 2,
            mono_ns: m,
            ticks_per_sec: clock.ticks_per_sec(),
        }
    }

    /// A CLOCK_MONOTONIC time as trace ticks.
    pub(crate) fn ticks(&self, ns: u64) -> u64 {
        let d = |n: u64| (n as u128 * self.ticks_per_sec as u128 / 1_000_000_000) as u64;
        if ns <= self.mono_ns {
            self.ticks.saturating_sub(d(self.mono_ns - ns))
        } else {
            self.ticks.saturating_add(d(ns - self.mono_ns))
        }
    }
}

fn mono_ns() -> u64 {
    runtrace_core::thread_time::clock_ns(libc::CLOCK_MONOTONIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_pair_converts_both_ways() {
        let p = ClockPair {
            ticks: 1_000_000,
            mono_ns: 5_000_000_000,
            ticks_per_sec: 100_000_000,
        };
        assert_eq!(p.ticks(5_000_000_000), 1_000_000);
        assert_eq!(p.ticks(4_999_000_000), 900_000); // 1 ms earlier = 100k ticks
        assert_eq!(p.ticks(5_000_010_000), 1_001_000);
        assert_eq!(p.ticks(0), 0); // saturates, never wraps
    }
}
