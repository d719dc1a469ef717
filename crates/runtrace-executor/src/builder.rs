//! Configuring an executor: queues ([`QueueConfig`]) and turn settings
//! ([`Builder`]), checked and turned into a running [`Executor`] on the
//! calling thread (which becomes its owner, ownership rule 1).

use crate::error::BuildError;
use crate::executor::Executor;
use crate::run::Local;
use crate::sched::{Policy, Sched};
use crate::sync::{Cell, Ordering, StaticAtomicU32};
use crate::wake::Shared;
use runtrace_core::clock::TraceClock;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Worker index of the next executor (as in traces).
static NEXT_EXECUTOR: StaticAtomicU32 = StaticAtomicU32::new(0);

/// A queue's policy and share (weight).
///
/// ```
/// use runtrace_executor::QueueConfig;
/// let q = QueueConfig::las().share(4);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    policy: Policy,
    share: u32,
}

impl QueueConfig {
    /// `RunnableFifo`, share 1.
    pub fn fifo() -> QueueConfig {
        QueueConfig {
            policy: Policy::RunnableFifo,
            share: 1,
        }
    }
    /// `Las`, share 1.
    pub fn las() -> QueueConfig {
        QueueConfig {
            policy: Policy::Las,
            share: 1,
        }
    }
    /// The queue's share of the executor's time relative to the others.
    pub fn share(mut self, share: u32) -> QueueConfig {
        self.share = share;
        self
    }
}

/// Builds an [`Executor`].
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig};
/// use std::time::Duration;
/// let ex = Executor::builder()
///     .queue("latency", QueueConfig::fifo().share(8))
///     .queue("batch", QueueConfig::las())
///     .max_polls_per_turn(64)
///     .max_turn_time(Duration::from_millis(2))
///     .build()?;
/// assert_eq!(ex.live_tasks(), 0);
/// # Ok::<(), runtrace_executor::BuildError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    queues: Vec<(String, QueueConfig)>,
    max_polls_per_turn: u32,
    max_turn_time: Duration,
    low_share_turn_time: Duration,
    time_slice: Duration,
}

impl Builder {
    /// Adds a queue (the first one is where [`Executor::spawn`] puts tasks).
    pub fn queue(mut self, name: impl Into<String>, cfg: QueueConfig) -> Builder {
        self.queues.push((name.into(), cfg));
        self
    }

    /// Polls per turn before yielding to the tokio driver, so I/O and timers
    /// stay timely (default 128).
    pub fn max_polls_per_turn(mut self, n: u32) -> Builder {
        self.max_polls_per_turn = n;
        self
    }

    /// Time per turn before yielding to the tokio driver (default 1 ms):
    /// long polls would otherwise delay timers and I/O by up to
    /// `max_polls_per_turn` of them. Checked when the executor reads the
    /// clock anyway (several queues, a LAS queue, or a listening backend);
    /// a single FIFO queue with nothing listening relies on the poll count.
    pub fn max_turn_time(mut self, d: Duration) -> Builder {
        self.max_turn_time = d;
        self
    }

    /// How long into a turn a task from a *lower-share* queue (a share
    /// below the executor's highest) may still start (default 100 us);
    /// later, the executor yields to the tokio driver first. A poll cannot
    /// be preempted, so a low-share poll started late in a turn would hold
    /// a higher-share queue's due timer or I/O wake for the rest of the
    /// turn plus that poll; this way such a wake waits at most this long
    /// plus one poll. Queues with the highest share keep the full
    /// `max_turn_time`; with one queue (or equal shares) it never applies.
    pub fn low_share_turn_time(mut self, d: Duration) -> Builder {
        self.low_share_turn_time = d;
        self
    }

    /// The EEVDF request size: a queue's virtual deadline is its virtual
    /// runtime plus `slice / share`, and a queue that becomes runnable
    /// after idling keeps at most one slice of credit (measured in its own
    /// poll time). Default 4 ms: while a high-share queue idles, a
    /// low-share queue running alone moves the virtual time on, so the
    /// high-share queue always comes back with the full credit; with polls
    /// of hundreds of microseconds, a 500 us slice used it up after a poll
    /// or two, and a low-share poll (not preemptible) then cut into nearly
    /// every busy period of the high-share queue. The cost: a queue that
    /// wakes with credit can run up to a slice before a queue that was
    /// running gets a pick.
    pub fn time_slice(mut self, d: Duration) -> Builder {
        self.time_slice = d;
        self
    }

    /// Checks the configuration and builds the executor on this thread.
    pub fn build(self) -> Result<Executor, BuildError> {
        if self.queues.is_empty() {
            return Err(BuildError::NoQueue);
        }
        for (i, (n, c)) in self.queues.iter().enumerate() {
            if n.is_empty() {
                return Err(BuildError::EmptyName);
            }
            if c.share == 0 {
                return Err(BuildError::ZeroShare(n.clone()));
            }
            if self.queues[..i].iter().any(|(m, _)| m == n) {
                return Err(BuildError::DuplicateQueue(n.clone()));
            }
        }
        if self.max_turn_time.is_zero() {
            return Err(BuildError::Invalid("max_turn_time must be positive".into()));
        }
        if self.max_polls_per_turn == 0 {
            return Err(BuildError::Invalid(
                "max_polls_per_turn must be at least 1".into(),
            ));
        }
        if self.low_share_turn_time.is_zero() {
            return Err(BuildError::Invalid(
                "low_share_turn_time must be positive".into(),
            ));
        }
        if self.time_slice.is_zero() {
            return Err(BuildError::Invalid("time_slice must be positive".into()));
        }
        let clock = TraceClock::get();
        let slice = (self.time_slice.as_nanos() * clock.ticks_per_sec() as u128 / 1_000_000_000)
            .max(1) as u64;
        let cfg: Vec<(String, Policy, u32)> = self
            .queues
            .iter()
            .map(|(n, c)| (n.clone(), c.policy, c.share))
            .collect();
        let timed = cfg.len() > 1 || cfg.iter().any(|(_, p, _)| *p == Policy::Las);
        let ticks = |d: Duration| {
            (d.as_nanos() * clock.ticks_per_sec() as u128 / 1_000_000_000)
                .clamp(1, u64::MAX as u128) as u64
        };
        let turn_ticks = ticks(self.max_turn_time);
        let top_share = cfg.iter().map(|(_, _, w)| *w).max().unwrap_or(1);
        let shared = Arc::new(Shared::new(
            NEXT_EXECUTOR.fetch_add(1, Ordering::Relaxed),
            cfg.iter().map(|(n, _, _)| n.clone()).collect(),
            Sched::new(&cfg, slice, ticks(crate::sched::LAS_QUANTUM)),
        ));
        Ok(Executor {
            local: Rc::new(Local {
                shared,
                clock,
                timed,
                las: cfg.iter().map(|(_, p, _)| *p == Policy::Las).collect(),
                low: cfg.iter().map(|(_, _, w)| *w < top_share).collect(),
                max_polls: self.max_polls_per_turn,
                turn_ticks,
                low_turn_ticks: ticks(self.low_share_turn_time).min(turn_ticks),
                parked: Cell::new(false),
            }),
        })
    }
}

impl Executor {
    /// A builder (add at least one queue).
    pub fn builder() -> Builder {
        Builder {
            queues: Vec::new(),
            max_polls_per_turn: 128,
            max_turn_time: Duration::from_millis(1),
            low_share_turn_time: Duration::from_micros(100),
            time_slice: Duration::from_millis(4),
        }
    }
}
