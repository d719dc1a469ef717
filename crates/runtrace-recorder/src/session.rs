//! Starting and stopping a recording: the [`Recorder`] entry point, the
//! writer thread's launch, and the [`RecordingGuard`] that ends it.
//!
//! This module ties the others together: it resolves the configuration
//! (`config.rs`), makes the recording current (`state.rs`), and runs the
//! writer (`writer.rs`); producers (`producer.rs`) find the recording
//! through `state.rs` alone.

use crate::config::RecorderBuilder;
use crate::error::RecordError;
use crate::state::{self, Shared};
use crate::stats::RecordStats;
use crate::writer::Writer;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Entry point of in-process recording.
///
/// ```no_run
/// use runtrace_recorder::Recorder;
/// use std::time::Duration;
/// let guard = Recorder::builder()
///     .path("/tmp/rt/trace")          // writes /tmp/rt/trace.0.bin, ...
///     .max_file_size(64 << 20)
///     .max_total_size(1 << 30)
///     .flush_interval(Duration::from_millis(50))
///     .buffer_size(1 << 20)           // per thread
///     .start()?;
/// runtrace_recorder::task_terminate(1);
/// let stats = guard.finish()?;
/// println!("{} events, {} dropped", stats.events, stats.dropped);
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
pub struct Recorder;

impl Recorder {
    /// A builder with the defaults (path `trace`, 64 MiB files, 1 GiB
    /// total, 50 ms flush interval, 1 MiB buffer per thread).
    pub fn builder() -> RecorderBuilder {
        RecorderBuilder::new()
    }

    /// Starts recording if `RUNTRACE_PATH` is set (all settings from the
    /// environment), so a deployed binary can be traced without a rebuild.
    /// Returns None when it is not set.
    pub fn start_from_env() -> Result<Option<RecordingGuard>, RecordError> {
        match std::env::var_os("RUNTRACE_PATH") {
            Some(p) if !p.is_empty() => Recorder::builder().start().map(Some),
            _ => Ok(None),
        }
    }
}

impl RecorderBuilder {
    /// Starts recording. Fails if a recording is already running, a setting
    /// is out of range, or the first file cannot be created.
    pub fn start(self) -> Result<RecordingGuard, RecordError> {
        let cfg = self.resolve()?;
        let (shared, handle) = state::begin(cfg, |shared| {
            let writer = Writer::new(shared.clone())?;
            let w = shared.clone();
            std::thread::Builder::new()
                .name(runtrace_format::frame::WRITER_THREAD.into())
                .spawn(move || {
                    let _ = w.writer.set(std::thread::current());
                    writer.run()
                })
                .map_err(|e| RecordError::Io(format!("cannot start the writer thread: {e}")))
        })?;
        // Subscribers that cache whether anyone listens re-read it.
        runtrace_core::listeners::changed();
        Ok(RecordingGuard {
            shared,
            handle: Some(handle),
            pid: std::process::id(),
        })
    }
}

/// A running recording. [`finish`](RecordingGuard::finish) stops it and
/// reports what was written; dropping the guard does the same, ignoring
/// errors.
///
/// ```no_run
/// let guard = runtrace_recorder::Recorder::builder().path("t/trace").start()?;
/// let stats = guard.finish()?;
/// assert_eq!(stats.dropped, 0);
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
pub struct RecordingGuard {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<Result<RecordStats, RecordError>>>,
    /// The process that started the recording (a forked child has a copy
    /// of this guard but not the writer thread).
    pid: u32,
}

impl RecordingGuard {
    /// Stops recording, drains every buffer, seals the last file.
    ///
    /// Events recorded by other threads while `finish` runs may or may not
    /// make it into the trace; stop or join them first for exact accounting.
    pub fn finish(mut self) -> Result<RecordStats, RecordError> {
        self.stop()
    }

    /// Triggers a flight-recorder snapshot (`in_memory` mode) with
    /// `reason` (it names the directory, and the `snapshot_trigger` event
    /// recorded at this instant). Returns at once: the writer thread keeps
    /// recording for the post-trigger period (`snapshot_window`'s `after`)
    /// and then writes the segments covering the window, as
    /// `PREFIX.N.bin` files, to `<dir of path>/snapshot-<UTC time>-<reason>/`.
    /// [`finish`](Self::finish) waits for a pending snapshot (written
    /// then with what was recorded). A trigger within `snapshot_cooldown`
    /// of the last one, or while one is pending, is ignored (counted in
    /// `RecordStats::snapshots_skipped`); in file mode the event is
    /// recorded but nothing else happens (the files are the recording).
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .path("/var/tmp/myapp/trace")
    ///     .in_memory(64 << 20)
    ///     .start()?;
    /// // ... a request took far too long:
    /// guard.snapshot("slow-request");
    /// let stats = guard.finish()?; // the snapshot is written by now
    /// assert_eq!(stats.snapshots, 1);
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot(&self, reason: &str) {
        if self.handle.is_none() {
            return;
        }
        let now = runtrace_core::clock::TraceClock::get().now();
        self.shared
            .snapshot_requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((now, reason.to_string()));
        self.shared.wake_writer();
    }

    fn stop(&mut self) -> Result<RecordStats, RecordError> {
        let Some(h) = self.handle.take() else {
            return Ok(RecordStats::default());
        };
        state::end(&self.shared);
        let child = std::process::id();
        if child != self.pid {
            // The writer thread is the parent's: joining (or detaching) it
            // here would touch a thread this process does not have.
            std::mem::forget(h);
            return Err(RecordError::Forked {
                parent: self.pid,
                child,
            });
        }
        runtrace_core::listeners::changed();
        h.thread().unpark();
        h.join()
            .map_err(|_| RecordError::Io("the writer thread panicked".into()))?
    }
}

impl Drop for RecordingGuard {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

impl std::fmt::Debug for RecordingGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingGuard")
            .field("path", &self.shared.cfg.path)
            .finish()
    }
}
