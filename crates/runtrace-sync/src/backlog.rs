//! Backlog detection: `backlog_trigger` events, and subscriptions for
//! alerting.
//!
//! A queue built by [`crate::queue::builder`] watches itself on every
//! enqueue: it triggers when its size reaches a threshold (once per
//! crossing: it re-arms when the size falls back below three quarters of
//! the threshold) or when it grew faster than a rate over its window.
//! Triggers of one queue are at least `trigger_interval` apart (rate
//! limit). Every trigger fires the `backlog_trigger` probe, calls the
//! queue's `on_backlog` callback and is sent to every [`subscribe`]r;
//! [`trigger`] reports one by hand (reason `manual`), for queues runtrace
//! does not own.
//!
//! ```
//! use runtrace_sync::{backlog, queue};
//! let alerts = backlog::subscribe();
//! let (tx, _rx) = queue::builder("ingest", 8).size_threshold(4).build().unwrap();
//! for i in 0..4 {
//!     tx.send(i).unwrap();
//! }
//! let b = alerts.try_recv().unwrap();
//! assert_eq!((b.queue, b.queue_size, b.reason), ("ingest", 4, backlog::Reason::SizeThreshold));
//! ```

use crate::clock;
use runtrace_core::Istr;
use runtrace_probes::builtin::backlog_trigger;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Why a backlog was reported (the event's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The queue's size reached its threshold.
    SizeThreshold,
    /// The queue grew faster than its rate over its window.
    GrowthRate,
    /// The application reported it ([`trigger`]).
    Manual,
}

impl Reason {
    /// The name in events and reports: `size_threshold`, `growth_rate`,
    /// `manual`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::SizeThreshold => "size_threshold",
            Reason::GrowthRate => "growth_rate",
            Reason::Manual => "manual",
        }
    }

    fn istr(self) -> Istr {
        static NAMES: OnceLock<[Istr; 3]> = OnceLock::new();
        let n = NAMES.get_or_init(|| {
            [
                Istr::new("size_threshold"),
                Istr::new("growth_rate"),
                Istr::new("manual"),
            ]
        });
        n[self as usize]
    }
}

/// One backlog trigger, as subscribers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    /// The queue's name.
    pub queue: &'static str,
    /// Items in the queue at the trigger.
    pub queue_size: usize,
    /// Growth over the detector's current window, items per second (0 when
    /// the queue has no growth window, or for manual triggers without one).
    pub growth_rate_per_sec: i64,
    /// Why it triggered.
    pub reason: Reason,
    /// When.
    pub at: Instant,
}

/// What a subscriber gets: a channel of triggers (bounded; a subscriber
/// that does not keep up misses triggers, counted by [`missed`]).
pub type Subscription = crossbeam_channel::Receiver<Backlog>;

/// How many triggers one subscription can hold before it misses some.
const SUBSCRIPTION_CAPACITY: usize = 1024;

fn subscribers() -> &'static parking_lot::Mutex<Vec<crossbeam_channel::Sender<Backlog>>> {
    static S: OnceLock<parking_lot::Mutex<Vec<crossbeam_channel::Sender<Backlog>>>> =
        OnceLock::new();
    S.get_or_init(Default::default)
}

static MISSED: AtomicU64 = AtomicU64::new(0);

/// Subscribes to every backlog trigger of the process from now on (all
/// queues, manual triggers too). Dropping the receiver unsubscribes.
///
/// ```
/// let alerts = runtrace_sync::backlog::subscribe();
/// runtrace_sync::backlog::trigger("tokio-mpsc", 5_000);
/// assert_eq!(alerts.try_recv().unwrap().queue, "tokio-mpsc");
/// ```
pub fn subscribe() -> Subscription {
    let (tx, rx) = crossbeam_channel::bounded(SUBSCRIPTION_CAPACITY);
    subscribers().lock().push(tx);
    rx
}

/// Triggers that some subscriber missed because its channel was full.
pub fn missed() -> u64 {
    MISSED.load(Relaxed)
}

/// Reports a backlog by hand (reason `manual`) on a queue named `queue`
/// holding `queue_size` items: fires `backlog_trigger` and notifies
/// subscribers. Not rate-limited.
pub fn trigger(queue: &str, queue_size: usize) {
    let name = Istr::new(queue);
    emit(name, None, queue_size, 0, Reason::Manual, clock::now());
}

/// Fires the event and notifies the queue's callback and the subscribers.
fn emit(
    queue: Istr,
    callback: Option<&Callback>,
    queue_size: usize,
    growth_rate_per_sec: i64,
    reason: Reason,
    ticks: u64,
) {
    if backlog_trigger::enabled() {
        backlog_trigger::fire_at(
            ticks,
            backlog_trigger::Args {
                queue,
                queue_size: queue_size.min(u32::MAX as usize) as u32,
                growth_rate_per_sec,
                reason: reason.istr(),
            },
        );
    }
    let b = Backlog {
        queue: queue.c_str().to_str().unwrap_or(""),
        queue_size,
        growth_rate_per_sec,
        reason,
        at: Instant::now(),
    };
    if let Some(cb) = callback {
        cb(&b);
    }
    let mut subs = subscribers().lock();
    subs.retain(|s| match s.try_send(b.clone()) {
        Ok(()) => true,
        Err(crossbeam_channel::TrySendError::Full(_)) => {
            MISSED.fetch_add(1, Relaxed);
            true
        }
        Err(crossbeam_channel::TrySendError::Disconnected(_)) => false,
    });
}

/// A queue's backlog callback.
pub(crate) type Callback = Arc<dyn Fn(&Backlog) + Send + Sync>;

/// A queue's detector settings (see [`crate::queue::QueueBuilder`]).
#[derive(Clone)]
pub(crate) struct DetectorConfig {
    /// Trigger at this size (`usize::MAX`: never).
    pub size_threshold: usize,
    /// Trigger when growing faster than this many items per second...
    pub growth_per_sec: Option<u64>,
    /// ... over this window (ticks).
    pub window_ticks: u64,
    /// At least this long between two triggers of the queue (ticks).
    pub min_interval_ticks: u64,
    pub callback: Option<Callback>,
}

/// A queue's detector state. Enqueuers of several threads update it with
/// relaxed atomics: the window's start time and size are two words, and a
/// race between them only skews one rate estimate slightly.
pub(crate) struct Detector {
    cfg: DetectorConfig,
    rearm_below: usize,
    armed: AtomicBool,
    win_start_ticks: AtomicU64,
    win_start_size: AtomicU64,
    last_trigger_ticks: AtomicU64,
}

impl Detector {
    pub fn new(cfg: DetectorConfig) -> Detector {
        Detector {
            rearm_below: cfg.size_threshold - cfg.size_threshold / 4,
            cfg,
            armed: AtomicBool::new(true),
            win_start_ticks: AtomicU64::new(0),
            win_start_size: AtomicU64::new(0),
            last_trigger_ticks: AtomicU64::new(0),
        }
    }

    /// Whether enqueues must read the clock for the detector's sake.
    #[inline]
    pub fn needs_clock(&self) -> bool {
        self.cfg.growth_per_sec.is_some()
    }

    /// After an enqueue left `size` items; `ticks` is the enqueue's clock
    /// reading (0 if none was taken).
    #[inline]
    pub fn after_enqueue(&self, queue: Istr, ticks: u64, size: usize) {
        if size >= self.cfg.size_threshold
            && self.armed.load(Relaxed)
            && self.armed.swap(false, Relaxed)
        {
            self.fire(queue, ticks, size, Reason::SizeThreshold);
        }
        if let Some(limit) = self.cfg.growth_per_sec {
            self.growth(queue, ticks, size, limit);
        }
    }

    /// After a dequeue left `size()` items (asked only when disarmed): re-arms the size trigger once the
    /// queue has drained below three quarters of the threshold.
    #[inline]
    pub fn after_dequeue(&self, size: impl FnOnce() -> usize) {
        if !self.armed.load(Relaxed) && size() < self.rearm_below {
            self.armed.store(true, Relaxed);
        }
    }

    fn growth(&self, queue: Istr, t: u64, size: usize, limit: u64) {
        let start = self.win_start_ticks.load(Relaxed);
        if start == 0 || t < start {
            self.restart_window(start, t, size);
            return;
        }
        let dt = t - start;
        // A rate over a small part of the window is noise (one burst of
        // two items in a microsecond is not a backlog).
        if dt >= self.cfg.window_ticks / 4 {
            if let Some(rate) = self.rate(t, size) {
                if rate > 0 && rate as u64 >= limit {
                    self.fire(queue, t, size, Reason::GrowthRate);
                }
            }
        }
        if dt >= self.cfg.window_ticks {
            self.restart_window(start, t, size);
        }
    }

    fn restart_window(&self, seen: u64, t: u64, size: usize) {
        if self
            .win_start_ticks
            .compare_exchange(seen, t.max(1), Relaxed, Relaxed)
            .is_ok()
        {
            self.win_start_size.store(size as u64, Relaxed);
        }
    }

    /// Growth since the window's start, items per second.
    fn rate(&self, t: u64, size: usize) -> Option<i64> {
        let start = self.win_start_ticks.load(Relaxed);
        if start == 0 || t <= start {
            return None;
        }
        let grown = size as i128 - self.win_start_size.load(Relaxed) as i128;
        let tps = runtrace_core::clock::TraceClock::get().ticks_per_sec() as i128;
        Some((grown * tps / (t - start) as i128) as i64)
    }

    #[cold]
    #[inline(never)]
    fn fire(&self, queue: Istr, ticks: u64, size: usize, reason: Reason) {
        let t = if ticks == 0 { clock::now() } else { ticks };
        let last = self.last_trigger_ticks.load(Relaxed);
        if last != 0 && t.saturating_sub(last) < self.cfg.min_interval_ticks {
            return;
        }
        if self
            .last_trigger_ticks
            .compare_exchange(last, t, Relaxed, Relaxed)
            .is_err()
        {
            return; // another enqueuer reported it just now
        }
        let rate = self.rate(t, size).unwrap_or(0);
        emit(queue, self.cfg.callback.as_ref(), size, rate, reason, t);
    }

    /// A manual trigger on this queue (not rate-limited).
    pub fn manual(&self, queue: Istr, size: usize) {
        let t = clock::now();
        let rate = self.rate(t, size).unwrap_or(0);
        emit(
            queue,
            self.cfg.callback.as_ref(),
            size,
            rate,
            Reason::Manual,
            t,
        );
    }
}
