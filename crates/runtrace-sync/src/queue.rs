//! Instrumented bounded queues (crossbeam-channel underneath): seed 001's
//! producer -> queue -> consumer events with sequence numbers, queueing
//! delay, processing time, drops, periodic snapshots and backlog detection.
//!
//! - [`Sender::send`] / [`Sender::try_send`]: `enqueue` (seqno, size after);
//!   a full queue under `try_send`, or a closed one, gives `item_dropped`
//!   (cause `full` / `disconnected`).
//! - [`Receiver::recv`] returns a [`Received`] guard: `dequeue` (seqno,
//!   time in the queue, size after) now, `processing_end` (seqno,
//!   processing time, success) when the guard is dropped.
//! - `queue_snapshot` (size, produced, consumed, dropped totals) at most
//!   once per `snapshot_interval` (default 100 ms), taken by whichever
//!   enqueue or dequeue comes first after the interval, so an idle queue
//!   costs nothing; [`Sender::snapshot`] takes one by hand, and
//!   [`QueueBuilder::periodic_snapshots`] keeps them coming while the queue
//!   has no traffic at all (a stalled pipeline).
//! - Backlog detection on every enqueue ([`crate::backlog`]).
//!
//! Each item carries its sequence number and enqueue time (16 bytes);
//! the clock is read at enqueue and dequeue only when a backend listens
//! (or the growth detector needs it).
//!
//! ```
//! use runtrace_sync::queue;
//! let (tx, rx) = queue::bounded("jobs", 2);
//! tx.send("a").unwrap();
//! tx.send("b").unwrap();
//! assert!(tx.try_send("c").is_err()); // full: recorded as item_dropped
//! let mut job = rx.recv().unwrap();
//! assert_eq!((*job, job.seqno()), ("a", 1));
//! job.fail(); // processing_end with success = false when dropped
//! assert_eq!((tx.produced(), tx.dropped()), (2, 1));
//! ```

use crate::backlog::{Backlog, Detector, DetectorConfig};
use crate::clock;
use crossbeam_channel as cc;
use runtrace_core::Istr;
use runtrace_probes::builtin::{dequeue, enqueue, item_dropped, processing_end, queue_snapshot};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use crossbeam_channel::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};

/// A bounded instrumented queue named `name` holding up to `capacity`
/// items, with the default detector (size threshold at three quarters of
/// the capacity, no growth-rate trigger, triggers at least 1 s apart).
///
/// ```
/// let (tx, rx) = runtrace_sync::queue::bounded::<u64>("events", 1024);
/// tx.send(1).unwrap();
/// assert_eq!(rx.recv().unwrap().into_parts().0, 1);
/// ```
///
/// # Panics
/// If `capacity` is 0 (a rendezvous channel has no backlog to watch); use
/// [`builder`] to get an error instead.
pub fn bounded<T>(name: &str, capacity: usize) -> (Sender<T>, Receiver<T>) {
    match builder(name, capacity).build() {
        Ok(pair) => pair,
        Err(e) => panic!("runtrace_sync::queue::bounded: {e}"),
    }
}

/// A queue with detector and snapshot settings.
///
/// ```
/// use std::time::Duration;
/// let (tx, rx) = runtrace_sync::queue::builder("ingress", 10_000)
///     .size_threshold(5_000)
///     .growth_rate(2_000, Duration::from_secs(1))
///     .trigger_interval(Duration::from_secs(5))
///     .on_backlog(|b| eprintln!("backlog on {}: {} items ({})", b.queue, b.queue_size, b.reason.as_str()))
///     .build::<Vec<u8>>()
///     .unwrap();
/// # drop((tx, rx));
/// ```
pub fn builder(name: &str, capacity: usize) -> QueueBuilder {
    QueueBuilder {
        name: name.to_owned(),
        capacity,
        size_threshold: Some(capacity - capacity / 4),
        growth: None,
        trigger_interval: Duration::from_secs(1),
        snapshot_interval: Duration::from_millis(100),
        periodic_snapshots: false,
        callback: None,
    }
}

/// Settings of a queue (see [`builder`]).
pub struct QueueBuilder {
    name: String,
    capacity: usize,
    size_threshold: Option<usize>,
    growth: Option<(u64, Duration)>,
    trigger_interval: Duration,
    snapshot_interval: Duration,
    periodic_snapshots: bool,
    callback: Option<crate::backlog::Callback>,
}

/// A queue configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueConfigError {
    /// The name is empty (events could not tell queues apart).
    EmptyName,
    /// Capacity 0.
    ZeroCapacity,
    /// A size threshold of 0 or above the capacity (it could never fire).
    SizeThreshold {
        /// The threshold given.
        threshold: usize,
        /// The queue's capacity.
        capacity: usize,
    },
    /// A growth window or rate of 0.
    GrowthRate,
}

impl fmt::Display for QueueConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueConfigError::EmptyName => write!(f, "queue name is empty"),
            QueueConfigError::ZeroCapacity => write!(f, "queue capacity is 0"),
            QueueConfigError::SizeThreshold {
                threshold,
                capacity,
            } => write!(
                f,
                "size threshold {threshold} must be between 1 and the capacity ({capacity})"
            ),
            QueueConfigError::GrowthRate => {
                write!(f, "growth rate and its window must both be non-zero")
            }
        }
    }
}

impl std::error::Error for QueueConfigError {}

impl QueueBuilder {
    /// Trigger when the queue holds `n` items (re-armed below 3n/4).
    pub fn size_threshold(mut self, n: usize) -> QueueBuilder {
        self.size_threshold = Some(n);
        self
    }

    /// No size trigger.
    pub fn no_size_threshold(mut self) -> QueueBuilder {
        self.size_threshold = None;
        self
    }

    /// Trigger when the queue grows faster than `per_sec` items per second,
    /// judged over `window` (from a quarter of it on). Enqueues then read
    /// the clock even when no backend listens.
    pub fn growth_rate(mut self, per_sec: u64, window: Duration) -> QueueBuilder {
        self.growth = Some((per_sec, window));
        self
    }

    /// At least `d` between two triggers of this queue (default 1 s).
    pub fn trigger_interval(mut self, d: Duration) -> QueueBuilder {
        self.trigger_interval = d;
        self
    }

    /// At most one `queue_snapshot` per `d` (default 100 ms).
    pub fn snapshot_interval(mut self, d: Duration) -> QueueBuilder {
        self.snapshot_interval = d;
        self
    }

    /// Also take snapshots when the queue has no traffic: when the consumers
    /// are stuck and the producers blocked on a full queue, or nothing
    /// arrives, enqueues and dequeues take none, and seed 001's periodic
    /// status would go silent exactly when it matters. One background
    /// thread, shared by every queue that asks and started by the first,
    /// checks them each `snapshot_interval` and takes the snapshot that
    /// traffic did not; it reads only counters (the size is then produced
    /// minus consumed and dropped, capped at the capacity) and does
    /// nothing unless a backend listens to `queue_snapshot`.
    ///
    /// ```
    /// let (tx, rx) = runtrace_sync::queue::builder("ingest", 64)
    ///     .periodic_snapshots()
    ///     .build::<u32>()
    ///     .unwrap();
    /// # drop((tx, rx));
    /// ```
    pub fn periodic_snapshots(mut self) -> QueueBuilder {
        self.periodic_snapshots = true;
        self
    }

    /// Called (on the enqueuing thread) at every trigger of this queue.
    pub fn on_backlog(mut self, f: impl Fn(&Backlog) + Send + Sync + 'static) -> QueueBuilder {
        self.callback = Some(Arc::new(f));
        self
    }

    /// The queue's two ends.
    pub fn build<T>(self) -> Result<(Sender<T>, Receiver<T>), QueueConfigError> {
        if self.name.is_empty() {
            return Err(QueueConfigError::EmptyName);
        }
        if self.capacity == 0 {
            return Err(QueueConfigError::ZeroCapacity);
        }
        if let Some(t) = self.size_threshold {
            if t == 0 || t > self.capacity {
                return Err(QueueConfigError::SizeThreshold {
                    threshold: t,
                    capacity: self.capacity,
                });
            }
        }
        if let Some((rate, window)) = self.growth {
            if rate == 0 || window.is_zero() {
                return Err(QueueConfigError::GrowthRate);
            }
        }
        let shared = Arc::new(Shared {
            name: Istr::new(&self.name),
            capacity: self.capacity,
            next_seqno: AtomicU64::new(1),
            consumed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            next_snapshot: AtomicU64::new(0),
            snapshot_every: clock::ticks_of(self.snapshot_interval),
            snapshot_interval: self.snapshot_interval,
            detector: Detector::new(DetectorConfig {
                size_threshold: self.size_threshold.unwrap_or(usize::MAX),
                growth_per_sec: self.growth.map(|g| g.0),
                window_ticks: self.growth.map_or(0, |g| clock::ticks_of(g.1)),
                min_interval_ticks: clock::ticks_of(self.trigger_interval),
                callback: self.callback,
            }),
        });
        if self.periodic_snapshots {
            sampler::watch(&shared);
        }
        let (tx, rx) = cc::bounded(self.capacity);
        Ok((
            Sender {
                tx,
                shared: shared.clone(),
            },
            Receiver { rx, shared },
        ))
    }
}

/// What both ends share.
struct Shared {
    name: Istr,
    capacity: usize,
    next_seqno: AtomicU64,
    /// Items dequeued so far. Enqueues are not counted separately: the
    /// produced total is `consumed + len` (exact at rest, and off by at
    /// most the dequeues in progress), which saves every send an atomic
    /// read-modify-write (measured: ~5 ns of a ~30 ns send+recv).
    consumed: AtomicU64,
    dropped: AtomicU64,
    /// Ticks after which the next snapshot is due.
    next_snapshot: AtomicU64,
    snapshot_every: u64,
    snapshot_interval: Duration,
    detector: Detector,
}

impl Shared {
    /// The clock reading an enqueue needs (0: none).
    #[inline(always)]
    fn enqueue_stamp(&self) -> u64 {
        if enqueue::enabled()
            || dequeue::enabled()
            || queue_snapshot::enabled()
            || self.detector.needs_clock()
        {
            clock::now().max(1)
        } else {
            0
        }
    }

    #[inline]
    fn after_enqueue(&self, seqno: u64, t: u64, size: usize) {
        if t != 0 && enqueue::enabled() {
            enqueue::fire_at(
                t,
                enqueue::Args {
                    queue: self.name,
                    seqno,
                    queue_size: size32(size),
                },
            );
        }
        self.maybe_snapshot(t, size);
        self.detector.after_enqueue(self.name, t, size);
    }

    #[cold]
    fn dropped(&self, seqno: u64, size: usize, cause: Cause) {
        self.dropped.fetch_add(1, Relaxed);
        if item_dropped::enabled() {
            item_dropped::fire(item_dropped::Args {
                queue: self.name,
                seqno,
                queue_size: size32(size),
                cause: cause.istr(),
            });
        }
    }

    #[inline]
    fn maybe_snapshot(&self, t: u64, size: usize) {
        if t != 0 && queue_snapshot::enabled() && self.claim_snapshot(t) {
            self.snapshot_at(t, size);
        }
    }

    /// Whether the snapshot due by `t` is this caller's to take (one per
    /// interval, whoever comes first).
    #[inline]
    fn claim_snapshot(&self, t: u64) -> bool {
        let due = self.next_snapshot.load(Relaxed);
        t >= due
            && self
                .next_snapshot
                .compare_exchange(due, t + self.snapshot_every, Relaxed, Relaxed)
                .is_ok()
    }

    /// Takes the snapshot due at `t`, if traffic has not (the sampler).
    fn snapshot_if_due(&self, t: u64) {
        if self.claim_snapshot(t) {
            // A sender holding a seqno may still be blocked on a full
            // queue: the cap keeps that from showing as more than full.
            let numbered = self.next_seqno.load(Relaxed) - 1;
            let gone = self.consumed.load(Relaxed) + self.dropped.load(Relaxed);
            let size = (numbered.saturating_sub(gone) as usize).min(self.capacity);
            self.snapshot_at(t, size);
        }
    }

    fn snapshot_at(&self, t: u64, size: usize) {
        queue_snapshot::fire_at(
            t,
            queue_snapshot::Args {
                queue: self.name,
                queue_size: size32(size),
                produced_total: self.consumed.load(Relaxed) + size as u64,
                consumed_total: self.consumed.load(Relaxed),
                dropped_total: self.dropped.load(Relaxed),
            },
        );
    }
}

fn size32(n: usize) -> u32 {
    n.min(u32::MAX as usize) as u32
}

/// The background thread of [`QueueBuilder::periodic_snapshots`].
mod sampler {
    use super::Shared;
    use crate::clock;
    use runtrace_probes::builtin::queue_snapshot;
    use std::sync::{Arc, Weak};
    use std::time::Duration;

    static WATCHED: parking_lot::Mutex<Vec<Weak<Shared>>> = parking_lot::Mutex::new(Vec::new());

    /// Adds a queue; the first call starts the thread.
    pub(super) fn watch(q: &Arc<Shared>) {
        WATCHED.lock().push(Arc::downgrade(q));
        static STARTED: std::sync::Once = std::sync::Once::new();
        STARTED.call_once(|| {
            // Without the thread, snapshots still come with traffic: a
            // failed spawn loses only the idle ones.
            let _ = std::thread::Builder::new()
                // 14 characters: the whole name fits in a thread's comm
                // (LTTng's procname, perf's comm).
                .name("runtrace-snaps".into())
                .spawn(run);
        });
    }

    fn run() {
        loop {
            let mut every = Duration::from_secs(1);
            let queues: Vec<Arc<Shared>> = {
                let mut w = WATCHED.lock();
                w.retain(|q| q.strong_count() > 0);
                w.iter().filter_map(Weak::upgrade).collect()
            };
            if queue_snapshot::enabled() {
                let t = clock::now().max(1);
                for q in &queues {
                    q.snapshot_if_due(t);
                }
            }
            for q in &queues {
                every = every.min(q.snapshot_interval);
            }
            drop(queues);
            // Half the interval: a snapshot is at most 1.5 intervals late.
            std::thread::sleep((every / 2).max(Duration::from_millis(1)));
        }
    }
}

/// Why an item was dropped.
#[derive(Clone, Copy)]
enum Cause {
    Full,
    Disconnected,
}

impl Cause {
    fn istr(self) -> Istr {
        static NAMES: OnceLock<[Istr; 2]> = OnceLock::new();
        NAMES.get_or_init(|| [Istr::new("full"), Istr::new("disconnected")])[self as usize]
    }
}

/// An item in the channel: its sequence number and enqueue time ride along.
struct Slot<T> {
    seqno: u64,
    enqueued: u64,
    value: T,
}

/// The sending end (cheap to clone; any thread).
pub struct Sender<T> {
    tx: cc::Sender<Slot<T>>,
    shared: Arc<Shared>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<T> Sender<T> {
    /// Enqueues, blocking while the queue is full. Fails (recording
    /// `item_dropped`, cause `disconnected`) when every receiver is gone.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.push(value, |s| self.tx.send(s), |_| Cause::Disconnected)
            .map_err(|SendError(s)| SendError(s.value))
    }

    /// Enqueues if there is room now; a full queue drops the item
    /// (recording `item_dropped`, cause `full`) and hands it back.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let cause = |e: &TrySendError<_>| match e {
            TrySendError::Full(_) => Cause::Full,
            TrySendError::Disconnected(_) => Cause::Disconnected,
        };
        self.push(value, |s| self.tx.try_send(s), cause)
            .map_err(|e| match e {
                TrySendError::Full(s) => TrySendError::Full(s.value),
                TrySendError::Disconnected(s) => TrySendError::Disconnected(s.value),
            })
    }

    /// Numbers, stamps and enqueues `value` through `send`, recording the
    /// enqueue or, when `send` fails, the drop (with `cause` of the error).
    #[inline]
    fn push<E>(
        &self,
        value: T,
        send: impl FnOnce(Slot<T>) -> Result<(), E>,
        cause: impl FnOnce(&E) -> Cause,
    ) -> Result<(), E> {
        let seqno = self.shared.next_seqno.fetch_add(1, Relaxed);
        let enqueued = self.shared.enqueue_stamp();
        match send(Slot {
            seqno,
            enqueued,
            value,
        }) {
            Ok(()) => {
                self.shared.after_enqueue(seqno, enqueued, self.tx.len());
                Ok(())
            }
            Err(e) => {
                self.shared.dropped(seqno, self.tx.len(), cause(&e));
                Err(e)
            }
        }
    }

    /// Records a `queue_snapshot` now (when a backend listens).
    pub fn snapshot(&self) {
        if queue_snapshot::enabled() {
            self.shared.snapshot_at(clock::now(), self.tx.len());
        }
    }

    /// Reports a backlog on this queue by hand (reason `manual`).
    pub fn trigger_backlog(&self) {
        self.shared.detector.manual(self.shared.name, self.tx.len());
    }

    /// Items in the queue now.
    pub fn len(&self) -> usize {
        self.tx.len()
    }

    /// Whether the queue is empty now.
    pub fn is_empty(&self) -> bool {
        self.tx.is_empty()
    }

    /// The queue's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// The queue's name.
    pub fn name(&self) -> &'static str {
        self.shared.name.c_str().to_str().unwrap_or("")
    }

    /// Items enqueued so far (dequeued + queued now).
    pub fn produced(&self) -> u64 {
        self.shared.consumed.load(Relaxed) + self.tx.len() as u64
    }

    /// Items dequeued so far.
    pub fn consumed(&self) -> u64 {
        self.shared.consumed.load(Relaxed)
    }

    /// Items dropped so far.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Relaxed)
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("name", &self.name())
            .field("len", &self.len())
            .finish()
    }
}

/// The receiving end (cheap to clone; several consumers may share it).
pub struct Receiver<T> {
    rx: cc::Receiver<Slot<T>>,
    shared: Arc<Shared>,
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver {
            rx: self.rx.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<T> Receiver<T> {
    /// Dequeues, blocking until an item arrives; fails when the queue is
    /// empty and every sender is gone.
    pub fn recv(&self) -> Result<Received<T>, RecvError> {
        let slot = self.rx.recv()?;
        Ok(self.dequeued(slot))
    }

    /// Dequeues if an item is there now.
    pub fn try_recv(&self) -> Result<Received<T>, TryRecvError> {
        let slot = self.rx.try_recv()?;
        Ok(self.dequeued(slot))
    }

    /// Dequeues, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Received<T>, RecvTimeoutError> {
        let slot = self.rx.recv_timeout(timeout)?;
        Ok(self.dequeued(slot))
    }

    /// Items until the queue is empty and every sender is gone.
    pub fn iter(&self) -> impl Iterator<Item = Received<T>> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }

    #[inline]
    fn dequeued(&self, slot: Slot<T>) -> Received<T> {
        let s = &*self.shared;
        s.consumed.fetch_add(1, Relaxed);
        let t = if dequeue::enabled() || processing_end::enabled() || queue_snapshot::enabled() {
            clock::now().max(1)
        } else {
            0
        };
        if t == 0 {
            // Nobody listens: the size matters only to a disarmed detector.
            s.detector.after_dequeue(|| self.rx.len());
            return Received::new(slot, s.name, 0);
        }
        let size = self.rx.len();
        if dequeue::enabled() {
            dequeue::fire_at(
                t,
                dequeue::Args {
                    queue: s.name,
                    seqno: slot.seqno,
                    queue_delay_ns: if slot.enqueued != 0 {
                        clock::ns_between(slot.enqueued, t)
                    } else {
                        0
                    },
                    queue_size: size32(size),
                },
            );
        }
        s.maybe_snapshot(t, size);
        s.detector.after_dequeue(|| size);
        Received::new(slot, s.name, t)
    }

    /// Items in the queue now.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Whether the queue is empty now.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// The queue's name.
    pub fn name(&self) -> &'static str {
        self.shared.name.c_str().to_str().unwrap_or("")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("name", &self.name())
            .field("len", &self.len())
            .finish()
    }
}

/// A dequeued item: derefs to the value; its processing ends (recording
/// `processing_end`) when it is dropped, or when the [`Processing`] guard
/// from [`Received::into_parts`] is.
pub struct Received<T> {
    // Field order matters: the value is dropped before `done` records the
    // end, so dropping the value counts as processing.
    value: T,
    done: Processing,
}

impl<T> Received<T> {
    #[inline]
    fn new(slot: Slot<T>, queue: Istr, since: u64) -> Received<T> {
        Received {
            value: slot.value,
            done: Processing {
                queue,
                seqno: slot.seqno,
                since,
                success: true,
            },
        }
    }

    /// The item's sequence number in its queue (from 1).
    pub fn seqno(&self) -> u64 {
        self.done.seqno
    }

    /// Marks the processing as failed (`success: false`).
    pub fn fail(&mut self) {
        self.done.success = false;
    }

    /// The value and the processing guard, for moving the value on while
    /// still timing its processing.
    pub fn into_parts(self) -> (T, Processing) {
        (self.value, self.done)
    }
}

impl<T> Deref for Received<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Received<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for Received<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Received")
            .field("seqno", &self.done.seqno)
            .field("value", &self.value)
            .finish()
    }
}

/// The processing of one dequeued item: records `processing_end` when
/// dropped (or [`Processing::finish`]ed).
///
/// ```
/// let (tx, rx) = runtrace_sync::queue::bounded("q", 4);
/// tx.send(String::from("job")).unwrap();
/// let (job, done) = rx.recv().unwrap().into_parts();
/// let ok = !job.is_empty();
/// done.finish(ok);
/// ```
#[must_use = "dropping it at once records a processing time of ~0"]
#[derive(Debug)]
pub struct Processing {
    queue: Istr,
    seqno: u64,
    /// Dequeue time in trace ticks, 0 when nobody listened then.
    since: u64,
    success: bool,
}

impl Processing {
    /// The item's sequence number.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// Marks the processing as failed.
    pub fn fail(&mut self) {
        self.success = false;
    }

    /// Ends the processing now, with its outcome.
    pub fn finish(mut self, success: bool) {
        self.success = success;
    }
}

impl Drop for Processing {
    #[inline]
    fn drop(&mut self) {
        if self.since != 0 && processing_end::enabled() {
            let t = clock::now();
            processing_end::fire_at(
                t,
                processing_end::Args {
                    queue: self.queue,
                    seqno: self.seqno,
                    processing_ns: clock::ns_between(self.since, t),
                    success: self.success,
                },
            );
        }
    }
}
