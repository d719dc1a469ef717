//! What a sampler hands the writer: one raw sample, before interning.
//!
//! Its own module so that the samplers (`perf.rs`, `signal.rs`) and the
//! profiler (`mod.rs`) share the type without importing each other.

/// One sample as a sampler took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawSample {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawKind {
    /// Taken while the thread ran.
    OnCpu,
    /// The thread was switched out for `off_ns` before `ticks`; the stack
    /// is where it switched out.
    OffCpu {
        /// Nanoseconds off-CPU.
        off_ns: u64,
    },
}
