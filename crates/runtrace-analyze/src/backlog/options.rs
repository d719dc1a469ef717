//! `runtrace backlog`'s options and the model's fixed constants.

/// The shortest window a trigger is judged over (see `evaluate`).
pub(super) const MIN_WINDOW_NS: u64 = 100_000_000;

/// "No lock" / "no thread".
pub(super) const NONE: u32 = u32::MAX;
/// Per-item baselines need this many items before the window; with fewer,
/// the first quarter of the window is the baseline.
pub(super) const MIN_BASE_ITEMS: u64 = 5;
/// Longest-hold and slowest-I/O lists keep this many entries.
pub(super) const TOP: usize = 5;
/// A hold that blocked a wait ends by the time the waiter gets the lock;
/// this much later still counts (timestamps of different CPUs).
pub(super) const SLACK_NS: u64 = 1_000_000;
/// A hold's end is stamped after the lock is released (runtrace-sync
/// releases first, then reads the clock), so a holder preempted in between
/// stamps it late, after the waiter already got the lock: holds ending this
/// much after a wait still count as blocking it (a later holder cannot
/// overlap the wait: it acquired after the waiter).
pub(super) const LATE_HOLD_NS: u64 = 250_000_000;
/// Holds shorter than this are remembered apart (see `LockSt::short`).
pub(super) const SHORT_HOLD_NS: u64 = 50_000;
/// Heartbeat gaps at least this long are kept as stall evidence.
pub(super) const HB_GAP_NS: u64 = 10_000_000;
/// A trigger is judged this long after all its consumers resumed (the
/// holder's late-stamped hold, a heartbeat ending a silence, come in).
pub(super) const GRACE_NS: u64 = LATE_HOLD_NS;
/// The text report shows at most this many rate windows per queue ...
pub(super) const TEXT_MAX_WINDOWS: usize = 60;
/// ... and this many triggers (JSON has all).
pub(super) const TEXT_MAX_TRIGGERS: usize = 50;

/// Settings of the backlog analysis (defaults in docs/analysis.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BacklogOptions {
    /// Width of the rate windows of each queue (`--window`, 1 s).
    pub window_ns: u64,
    /// How far before a trigger its causes are looked for (`--lookback`,
    /// 2 s).
    pub lookback_ns: u64,
    /// How long after a trigger the analysis waits for the events that end
    /// after it (a lock wait in progress at the trigger is recorded when it
    /// ends) before judging it: it judges as soon as every consumer of the
    /// queue has dequeued or finished an item after the trigger, or after
    /// this long (10 s), or at the end of the recording.
    pub lookahead_ns: u64,
    /// Resolution of the per-thread processing and stall counters (10 ms).
    pub bucket_ns: u64,
    /// Verdicts with a smaller share of the lost time are not reported
    /// (0.1).
    pub floor: f64,
    /// ... nor those smaller than this share of the consumers' time in the
    /// window (0.02): a healthy queue loses a little time everywhere.
    pub min_lost_share: f64,
    /// Processing counts as slower when its mean in the window is at least
    /// this many times the baseline mean (1.2).
    pub slowdown_ratio: f64,
    /// Lock-wait, lock-hold and I/O intervals remembered at most, each kind
    /// (262,144; the oldest go first, counted in `notes`).
    pub max_intervals: usize,
}

impl Default for BacklogOptions {
    fn default() -> Self {
        BacklogOptions {
            window_ns: 1_000_000_000,
            lookback_ns: 2_000_000_000,
            lookahead_ns: 10_000_000_000,
            bucket_ns: 10_000_000,
            floor: 0.1,
            min_lost_share: 0.02,
            slowdown_ratio: 1.2,
            max_intervals: 1 << 18,
        }
    }
}

/// Options with zero widths replaced by the defaults (a zero window would
/// divide by zero; the CLI rejects them, the library must not panic).
pub(super) fn sane(o: &BacklogOptions) -> BacklogOptions {
    let d = BacklogOptions::default();
    let pick = |v: u64, dv: u64| if v == 0 { dv } else { v };
    BacklogOptions {
        window_ns: pick(o.window_ns, d.window_ns),
        lookback_ns: pick(o.lookback_ns, d.lookback_ns),
        lookahead_ns: o.lookahead_ns,
        bucket_ns: pick(o.bucket_ns, d.bucket_ns),
        floor: if o.floor.is_finite() {
            o.floor
        } else {
            d.floor
        },
        min_lost_share: if o.min_lost_share.is_finite() {
            o.min_lost_share
        } else {
            d.min_lost_share
        },
        slowdown_ratio: if o.slowdown_ratio.is_finite() {
            o.slowdown_ratio
        } else {
            d.slowdown_ratio
        },
        max_intervals: o.max_intervals.max(16),
    }
}
