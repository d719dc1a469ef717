//! CPU profiling (issue 13). Placeholder from branch w3-sig: w3-rec owns
//! this file and replaces it at merge; it holds only what `signal.rs`
//! needs from the contract (`RawSample`, `RawKind`).

// Wired into the writer by w3-rec's version of this file.
#[allow(dead_code)]
pub(crate) mod signal;

/// One sample as a sampler hands it to the writer.
#[allow(dead_code)]
pub(crate) struct RawSample {
    /// The sampled thread's OS id.
    pub tid: u64,
    /// When the sample was taken, in trace ticks.
    pub ticks: u64,
    /// On-CPU sample or off-CPU interval.
    pub kind: RawKind,
    /// Leaf first, kernel/context markers removed.
    pub stack: Vec<u64>,
}

/// What a [`RawSample`] measures.
#[allow(dead_code)]
pub(crate) enum RawKind {
    /// The thread was running.
    OnCpu,
    /// The thread was switched out for `off_ns` before `ticks`.
    OffCpu {
        /// Time off CPU.
        off_ns: u64,
    },
}
