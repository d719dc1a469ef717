//! Why a recording could not start or finish.

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
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Config(m) => write!(f, "invalid recorder configuration: {m}"),
            RecordError::AlreadyRecording => {
                write!(f, "a recording is already running in this process")
            }
            RecordError::Io(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for RecordError {}
