//! The trace clock: the TSC through quanta, shifted to ticks of at most
//! 10 ns (docs/format.md section 4). Shared by the recorder and by code
//! that reads the clock once and hands the time to several events (the
//! executor reads it once per poll transition).
//!
//! ```
//! let c = runtrace_core::clock::TraceClock::get();
//! let (a, b) = (c.now(), c.now());
//! assert!(b >= a && c.ticks_per_sec() >= 100_000_000);
//! ```

use std::sync::OnceLock;

/// A calibrated clock producing trace ticks (see [`TraceClock::get`]).
#[derive(Debug)]
pub struct TraceClock {
    clock: quanta::Clock,
    shift: u32,
    ticks_per_sec: u64,
    /// quanta reads the TSC itself: read it directly and skip quanta's
    /// per-call dispatch on its clock source (measured: ~1-2 ns per event).
    direct_tsc: bool,
    /// Nanoseconds per tick in 32.32 fixed point (for `ticks_to_ns`).
    ns_per_tick_q32: u64,
}

impl TraceClock {
    /// The process-wide clock (quanta calibrates once, on first use).
    pub fn get() -> &'static TraceClock {
        static C: OnceLock<TraceClock> = OnceLock::new();
        C.get_or_init(|| {
            let clock = quanta::Clock::new();
            // Raw units per second: quanta knows the scale it calibrated.
            const PROBE: u64 = 1 << 40;
            let ns = clock.delta_as_nanos(0, PROBE).max(1);
            let raw_per_sec = (PROBE as u128 * 1_000_000_000 / ns as u128) as u64;
            let mut shift = 0;
            while (raw_per_sec >> (shift + 1)) >= 100_000_000 {
                shift += 1;
            }
            let direct_tsc = quanta_reads_tsc(&clock);
            let ticks_per_sec = (raw_per_sec >> shift).max(1);
            TraceClock {
                clock,
                shift,
                ticks_per_sec,
                direct_tsc,
                ns_per_tick_q32: ((1_000_000_000u128 << 32) / ticks_per_sec as u128) as u64,
            }
        })
    }

    /// Now, in trace ticks. One TSC read.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.direct_tsc {
            // SAFETY: rdtsc has no preconditions; `direct_tsc` was only set
            // after checking that quanta's own readings are TSC values.
            return unsafe { core::arch::x86_64::_rdtsc() } >> self.shift;
        }
        self.clock.raw() >> self.shift
    }

    /// Trace ticks per second (the unit of [`TraceClock::now`]).
    pub fn ticks_per_sec(&self) -> u64 {
        self.ticks_per_sec
    }

    /// A duration in trace ticks as nanoseconds (a multiply and a shift, no
    /// division, so durations can be converted where they are measured).
    ///
    /// ```
    /// let c = runtrace_core::clock::TraceClock::get();
    /// assert_eq!(c.ticks_to_ns(c.ticks_per_sec()), 1_000_000_000);
    /// ```
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        ((ticks as u128 * self.ns_per_tick_q32 as u128 + (1 << 31)) >> 32) as u64
    }
}

/// Wall clock, ns since the Unix epoch.
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The calling thread's OS id.
pub fn gettid() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

/// Whether quanta's raw readings are the TSC (then the two can be mixed).
fn quanta_reads_tsc(clock: &quanta::Clock) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (0..3).all(|_| {
            // SAFETY: rdtsc has no preconditions.
            let a = unsafe { core::arch::x86_64::_rdtsc() };
            let r = clock.raw();
            // SAFETY: as above.
            let b = unsafe { core::arch::x86_64::_rdtsc() };
            a <= r && r <= b
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = clock;
        false
    }
}

/// The calling thread's CPU time and the time it spent runnable but not
/// running (from `/proc/thread-self/schedstat`), in ns: one
/// `clock_gettime` and one `pread` of a per-thread file kept open (see
/// [`crate::thread_time`], whose `sampled` is cheaper on hot paths).
pub fn thread_cpu_and_wait_ns() -> (u64, u64) {
    let t = crate::thread_time::read();
    (t.cpu_ns, t.sched_wait_ns)
}
