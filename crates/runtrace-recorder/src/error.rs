//! Why a recording could not start or finish.

use crate::stats::RecordStats;

/// Why a recording could not start or finish.
///
/// ```no_run
/// use runtrace_recorder::{RecordError, Recorder};
/// match Recorder::builder().buffer_size(1).start() {
///     Err(RecordError::Config(m)) => eprintln!("bad setting: {m}"),
///     Err(e) => eprintln!("{e}"),
///     Ok(guard) => drop(guard),
/// }
/// ```
#[derive(Debug)]
pub enum RecordError {
    /// A setting is out of range; names the setting (builder method or
    /// environment variable).
    Config(String),
    /// Another recording is already running in this process.
    AlreadyRecording,
    /// A file operation failed; names the path.
    Io(String),
    /// Writing failed during the recording (a full disk, a removed
    /// directory): events drained meanwhile were counted as dropped, not
    /// written. `message` names the file and the first error; `stats` are
    /// the recording's totals all the same (`events + dropped` is what was
    /// emitted).
    Incomplete {
        /// The first write error, naming the file, and what it cost.
        message: String,
        /// What the recording wrote and lost (boxed: the error stays small
        /// for the `Result`s of every setting).
        stats: Box<RecordStats>,
    },
    /// `finish()` (or the guard's drop) in a process forked from the one
    /// recording: the recording and its writer thread belong to the parent,
    /// which seals it; the child only stops recording its own events.
    Forked {
        /// The recording process.
        parent: u32,
        /// This one.
        child: u32,
    },
}

impl RecordError {
    /// The recording's totals, when the error comes from a recording that
    /// ran (and lost part of its events).
    ///
    /// ```
    /// let e = runtrace_recorder::RecordError::AlreadyRecording;
    /// assert!(e.stats().is_none());
    /// ```
    pub fn stats(&self) -> Option<&RecordStats> {
        match self {
            RecordError::Incomplete { stats, .. } => Some(&**stats),
            _ => None,
        }
    }
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Config(m) => write!(f, "invalid recorder configuration: {m}"),
            RecordError::AlreadyRecording => {
                write!(f, "a recording is already running in this process")
            }
            RecordError::Io(m) => write!(f, "{m}"),
            RecordError::Incomplete { message, stats } => write!(
                f,
                "{message} ({} events written, {} dropped)",
                stats.events, stats.dropped
            ),
            RecordError::Forked { parent, child } => write!(
                f,
                "finish() in process {child}, forked from the recording process {parent}: \
                 the recording is the parent's to finish; this process's events after the fork \
                 were not recorded"
            ),
        }
    }
}

impl std::error::Error for RecordError {}
