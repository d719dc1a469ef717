//! The trace clock, shared by every primitive: durations are measured in
//! trace ticks (one TSC read per edge) and the end reading doubles as the
//! event's timestamp (`fire_at`), so an event costs no extra clock read.

use runtrace_core::clock::TraceClock;

/// Now, in trace ticks.
#[inline(always)]
pub(crate) fn now() -> u64 {
    TraceClock::get().now()
}

/// Ticks between `from` and `to` as nanoseconds (0 if `to` is earlier, as
/// readings on different CPUs may be a few ticks apart).
#[inline]
pub(crate) fn ns_between(from: u64, to: u64) -> u64 {
    TraceClock::get().ticks_to_ns(to.saturating_sub(from))
}

/// A duration as trace ticks (for windows and rate limits kept in ticks).
pub(crate) fn ticks_of(d: std::time::Duration) -> u64 {
    let tps = TraceClock::get().ticks_per_sec() as u128;
    (d.as_nanos() * tps / 1_000_000_000).min(u64::MAX as u128) as u64
}
