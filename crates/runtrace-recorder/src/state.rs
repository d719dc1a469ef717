//! What the producers and the writer of a recording share, and which
//! recording is current.
//!
//! # Rules
//! 1. At most one recording runs per process. `CURRENT` holds it and is
//!    changed only under its lock, by `session.rs` (`begin` / `end`).
//! 2. `ACTIVE_GEN` is the generation of `CURRENT` (0 when none): the
//!    probe sites' one `Relaxed` load. It is set after `CURRENT` is and
//!    cleared before `CURRENT` is, so a producer that sees a generation
//!    and then finds no matching `CURRENT` (`current`) just skips the
//!    event; no ordering between the two is needed for anything else.
//! 3. A producer joins a recording by pushing its ring onto `new_rings`
//!    (`register`); only the writer takes them off. Rings are handed over
//!    by the lock; the ring's own protocol (`ring.rs`) carries the events.
//! 4. `stop` is set (`Release`) once, by the session, after `ACTIVE_GEN`
//!    is cleared; the writer's `Acquire` load then drains one last round.
//!
//! Producers (`producer.rs`) and the writer (`writer.rs`) depend on this
//! module; the session (`session.rs`) ties them together. Nothing here
//! depends on them.

use crate::config::Config;
use crate::error::RecordError;
use crate::ring::Ring;
use crate::sync::{AtomicBool, Mutex, OnceLock, Ordering, StaticAtomicU64};
use std::sync::Arc;
use std::thread::Thread;

/// Generation of the recording in progress; 0 when none is (rule 2).
pub(crate) static ACTIVE_GEN: StaticAtomicU64 = StaticAtomicU64::new(0);

/// The recording in progress (rule 1).
static CURRENT: Mutex<Option<Arc<Shared>>> = Mutex::new(None);
static NEXT_GEN: StaticAtomicU64 = StaticAtomicU64::new(1);

/// State shared by the writer and the producers of one recording.
pub(crate) struct Shared {
    pub(crate) gen: u64,
    pub(crate) cfg: Config,
    pub(crate) n_slots: u64,
    pub(crate) slot_size: usize,
    /// Rule 3.
    pub(crate) new_rings: Mutex<Vec<RingEntry>>,
    pub(crate) writer: OnceLock<Thread>,
    /// Rule 4.
    pub(crate) stop: AtomicBool,
    /// Snapshots asked for by `RecordingGuard::snapshot` (trigger time in
    /// trace ticks, reason), taken by the writer at its next round.
    pub(crate) snapshot_requests: Mutex<Vec<(u64, String)>>,
}

/// A ring and the thread it belongs to.
pub(crate) struct RingEntry {
    pub(crate) ring: Arc<Ring>,
    pub(crate) tid: u64,
    pub(crate) name: String,
}

impl Shared {
    /// Rule 3: hands a producer's new ring to the writer.
    pub(crate) fn register(&self, ring: Arc<Ring>, tid: u64, name: String) {
        self.new_rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(RingEntry { ring, tid, name });
    }

    /// Wakes the writer (a futex wake only if it is parked).
    pub(crate) fn wake_writer(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }
}

/// The recording with generation `gen`, if it is still the current one.
pub(crate) fn current(gen: u64) -> Option<Arc<Shared>> {
    CURRENT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .filter(|s| s.gen == gen)
        .cloned()
}

/// Starts a recording with `cfg` (rules 1 and 2): `launch` gets its shared
/// state (to start the writer) while `CURRENT` is locked, so two starts
/// cannot both succeed; the recording becomes current, and probe sites
/// start recording, only if `launch` succeeds.
pub(crate) fn begin<T>(
    cfg: Config,
    launch: impl FnOnce(&Arc<Shared>) -> Result<T, RecordError>,
) -> Result<(Arc<Shared>, T), RecordError> {
    let mut cur = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if cur.is_some() {
        return Err(RecordError::AlreadyRecording);
    }
    let (n_slots, slot_size) = cfg.ring_geometry();
    let gen = NEXT_GEN.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::new(Shared {
        gen,
        cfg,
        n_slots,
        slot_size,
        new_rings: Mutex::new(Vec::new()),
        writer: OnceLock::new(),
        stop: AtomicBool::new(false),
        snapshot_requests: Mutex::new(Vec::new()),
    });
    let launched = launch(&shared)?;
    *cur = Some(shared.clone());
    ACTIVE_GEN.store(gen, Ordering::Relaxed);
    Ok((shared, launched))
}

/// Ends the current recording (rules 2 and 4): probe sites stop at once,
/// then the writer is told to finish.
pub(crate) fn end(shared: &Shared) {
    ACTIVE_GEN.store(0, Ordering::Relaxed);
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    // Release: pairs with the writer's Acquire load in `Writer::run`, so
    // its last round starts after the session stopped the recording.
    shared.stop.store(true, Ordering::Release);
}
