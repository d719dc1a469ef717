//! The thresholds of the runtime findings (defaults in docs/analysis.md).
//!
//! ```
//! let th = runtrace_analyze::Thresholds::default();
//! assert_eq!(th.long_poll_ns, 10_000_000);
//! ```

/// The thresholds of the findings (defaults in docs/analysis.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// A poll longer than this is a `long_poll` warning (10 ms).
    pub long_poll_ns: u64,
    /// ... and critical above this (50 ms).
    pub long_poll_critical_ns: u64,
    /// A wake->poll p99 above this is a `wake_delay` finding; a poll that
    /// waited longer is a "delayed window" (10 ms).
    pub wake_delay_ns: u64,
    /// ... critical above this (50 ms).
    pub wake_delay_critical_ns: u64,
    /// Local queue depth that counts as buildup during a delayed window (20).
    pub local_q: u32,
    /// Poll counts of one runtime's workers differing by more than this
    /// factor are a `worker_imbalance` warning (1.10).
    pub imbalance_ratio: f64,
    /// ... critical from this factor (3.0).
    pub imbalance_critical_ratio: f64,
    /// Imbalance is only judged when the busiest worker polled this often
    /// (200).
    pub imbalance_min_polls: u64,
    /// ... and only when the busiest worker was busy at least this share
    /// of its time (0.05): imbalance among idle workers delays nobody.
    pub imbalance_min_busy: f64,
    /// A worker's local queue deeper than this counts as queued work for
    /// `idle_while_queued` (20).
    pub idle_local_q: u32,
    /// Idle-while-queued stretches shorter than this are ignored (1 ms).
    pub idle_min_window_ns: u64,
    /// ... critical when one lasts this long (50 ms).
    pub idle_critical_window_ns: u64,
    /// A location whose mean poll exceeds this is `slow_poll` (500 us).
    pub cpu_bound_mean_ns: u64,
    /// ... critical above this (5 ms).
    pub cpu_bound_critical_mean_ns: u64,
    /// ... judged from this many polls on (3).
    pub cpu_bound_min_polls: u64,
    /// A worker that waited this long for a CPU (and over 10% of the
    /// recording) is `host_starvation` (100 ms).
    pub host_starvation_ns: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            long_poll_ns: 10_000_000,
            long_poll_critical_ns: 50_000_000,
            wake_delay_ns: 10_000_000,
            wake_delay_critical_ns: 50_000_000,
            local_q: 20,
            imbalance_ratio: 1.10,
            imbalance_critical_ratio: 3.0,
            imbalance_min_polls: 200,
            imbalance_min_busy: 0.05,
            idle_local_q: 20,
            idle_min_window_ns: 1_000_000,
            idle_critical_window_ns: 50_000_000,
            cpu_bound_mean_ns: 500_000,
            cpu_bound_critical_mean_ns: 5_000_000,
            cpu_bound_min_polls: 3,
            host_starvation_ns: 100_000_000,
        }
    }
}
