//! Why building an executor, spawning a task or awaiting one failed.

use std::any::Any;

/// Why an executor could not be built.
///
/// ```
/// use runtrace_executor::{BuildError, Executor};
/// assert_eq!(Executor::builder().build().err(), Some(BuildError::NoQueue));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// No queue was configured.
    NoQueue,
    /// Two queues have this name.
    DuplicateQueue(String),
    /// This queue has share 0.
    ZeroShare(String),
    /// A queue name is empty.
    EmptyName,
    /// A setting is out of range (names it).
    Invalid(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::NoQueue => write!(
                f,
                "executor has no queue: add one with .queue(name, config)"
            ),
            BuildError::DuplicateQueue(n) => write!(f, "queue {n:?} is defined twice"),
            BuildError::ZeroShare(n) => {
                write!(f, "queue {n:?} has share 0 (shares must be at least 1)")
            }
            BuildError::EmptyName => write!(f, "a queue name is empty"),
            BuildError::Invalid(m) => write!(f, "invalid executor setting: {m}"),
        }
    }
}
impl std::error::Error for BuildError {}

/// Why a task could not be spawned.
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig, SpawnError};
/// let ex = Executor::builder().queue("main", QueueConfig::fifo()).build()?;
/// let e = ex.spawn_on("nope", async {}).err();
/// assert_eq!(e, Some(SpawnError::UnknownQueue("nope".into())));
/// # Ok::<(), runtrace_executor::BuildError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnError {
    /// No queue has this name.
    UnknownQueue(String),
    /// The executor was shut down.
    ShutDown,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::UnknownQueue(n) => write!(f, "no queue named {n:?} on this executor"),
            SpawnError::ShutDown => write!(f, "the executor was shut down"),
        }
    }
}
impl std::error::Error for SpawnError {}

/// Why a task did not produce its output.
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig};
/// let ex = Executor::builder().queue("main", QueueConfig::fifo()).build()?;
/// let err = ex.block_on(async {
///     let h = ex.spawn(async { panic!("boom") });
///     h.await.unwrap_err()
/// });
/// assert!(err.is_panic());
/// assert_eq!(err.panic_message(), Some("boom"));
/// # Ok::<(), runtrace_executor::BuildError>(())
/// ```
pub enum JoinError {
    /// It was aborted (or the executor was shut down) first.
    Cancelled,
    /// It panicked; the payload is kept.
    Panic(Box<dyn Any + Send>),
}

impl JoinError {
    /// True for [`JoinError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }
    /// True for [`JoinError::Panic`].
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panic(_))
    }
    /// The panic message, when the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panic(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())),
            JoinError::Cancelled => None,
        }
    }
}

impl std::fmt::Debug for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Cancelled => write!(f, "JoinError::Cancelled"),
            JoinError::Panic(_) => write!(
                f,
                "JoinError::Panic({:?})",
                self.panic_message().unwrap_or("..")
            ),
        }
    }
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Cancelled => write!(f, "task was cancelled"),
            JoinError::Panic(_) => write!(
                f,
                "task panicked: {}",
                self.panic_message().unwrap_or("(non-string payload)")
            ),
        }
    }
}
impl std::error::Error for JoinError {}
