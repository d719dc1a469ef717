//! What a recording wrote: the totals the writer keeps and
//! `RecordingGuard::finish` hands back (also inside its error).

/// What a finished recording wrote.
///
/// ```no_run
/// let guard = runtrace_recorder::Recorder::builder().path("t/trace").start()?;
/// runtrace_recorder::task_terminate(1);
/// let stats = guard.finish()?;
/// assert_eq!(stats.events + stats.dropped, 1);
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Events written to files (CPU samples included: `cpu_sample` and
    /// `off_cpu` events, when `cpu_profile` is on).
    pub events: u64,
    /// Events lost: to full buffers, or drained but not written because a
    /// write failed (a full disk). Each is reported in a `DROPPED` frame
    /// once writing works again; those still unwritten when the recording
    /// ended are counted here only. CPU samples the kernel (or the signal
    /// sampler) could not keep count here too, in `DROPPED` frames of the
    /// writer thread.
    pub dropped: u64,
    /// Bytes written, over all files (including evicted ones); in memory
    /// mode, over all segments (including dropped ones).
    pub bytes: u64,
    /// Files created (in memory mode, segments).
    pub files: u64,
    /// Chunks the writer took from a buffer its thread was still writing,
    /// so decoded to count their events (~100 instructions per event).
    /// Every other chunk is a buffer its thread sealed when the writer
    /// asked, taken as it is. A thread that records nothing for a flush
    /// interval after it was asked leaves one; so does the last round.
    pub decoded_chunks: u64,
    /// In memory mode (`in_memory`): sealed segments dropped, oldest
    /// first, to stay within the budget. 0 in file mode.
    pub segments_dropped: u64,
    /// In memory mode: the most bytes of segments held at once (sealed
    /// ones, plus the one being written at its allocated size). 0 in file
    /// mode.
    pub memory_peak: u64,
    /// Snapshot directories written (in memory mode).
    pub snapshots: u64,
    /// Snapshot triggers ignored: within the cooldown of the last one,
    /// while one was pending, or in file mode.
    pub snapshots_skipped: u64,
    /// Sealed segments sinks sent (one per segment and sink;
    /// docs/flight-recorder.md, "Sinks").
    pub sink_sent: u64,
    /// Segments a sink failed to send after its retries.
    pub sink_failed: u64,
    /// Segments dropped unsent from a full sink queue (the oldest
    /// first).
    pub sink_dropped: u64,
    /// Segments still queued (or being sent) when `finish()` stopped
    /// waiting for the sinks (`sink_finish_timeout`): not sent.
    pub sink_unsent: u64,
}
