//! The per-thread event buffer: a single-producer, single-consumer ring of
//! fixed-size slots.
//!
//! The producer (the recording thread) appends encoded events to the slot it
//! owns and publishes each one with one `Release` store of `progress`; on x86
//! that is a plain `mov`, so the hot path takes no lock, makes no syscall and
//! performs no read-modify-write. The consumer (the writer thread) looks
//! only every flush interval or when woken at the high-water mark, so the
//! producer's cache lines are not pulled away per event (the field notes
//! measured a busy-polling consumer making producers 2.5-4.4x slower).
//!
//! # Protocol
//!
//! `progress = (seq << 32) | len`: the producer owns slot `seq % N` and has
//! published its first `len` bytes. `consumed` = how many slots the writer
//! has finished with (every slot `< consumed` is free for reuse).
//!
//! 1. Only the producer writes slot data, `starts[seq % N]` and
//!    `seals[seq % N]`, and only for slots `seq` with
//!    `consumed <= seq < consumed + N` (loaded with `Acquire`, pairing with
//!    the writer's `Release` in rule 5, so the writer's reads of a recycled
//!    slot happen before the producer overwrites it).
//! 2. Before publishing the first `progress` of slot `seq`, the producer
//!    writes `starts[seq % N]`: the registers a decoder needs to begin there.
//! 3. Each event is published by `progress.store((seq << 32) | len, Release)`
//!    after its bytes are written; the writer's `Acquire` load makes bytes
//!    `[0, len)` of slot `seq` readable.
//! 4. To leave slot `seq`, the producer writes `seals[seq % N]` (final length,
//!    record count, end registers), writes `starts[(seq + 1) % N]` and
//!    publishes `(seq + 1) << 32`. If slot `seq + 1` is not free (rule 1), it
//!    stays where it is and drops events (counting them) until it is.
//! 5. The writer reads sealed slots (`< progress >> 32`) whole, and the
//!    current slot up to `len`, never past it (or not at all, leaving it for
//!    a later drain). When it has copied a sealed slot it stores
//!    `consumed = seq + 1` with `Release`.
//! 6. `closed` is set (`Release`) by the producer after its last publish; a
//!    writer that sees it (`Acquire`) drains what is left and retires the
//!    ring.
//! 7. `seal_at` is a request, not part of the data protocol: the producer
//!    leaves its slot (rule 4) before an event that would end past
//!    `seal_at` bytes. It is the slot size, except when the writer lowers
//!    it to 0 to have the current slot sealed; the producer then seals at
//!    its next event (if it has a free slot to go to) and puts the slot
//!    size back. Both sides use `Relaxed`: a request that crosses a seal
//!    only seals one more slot early, and what the writer may read is
//!    still decided by `progress` alone.

use crate::sync::{AtomicBool, AtomicU64, CachePadded, Ordering, UnsafeCell};
use runtrace_format::chunk::ChunkState;
use std::ptr::NonNull;

/// A slot's final length, record count and end registers (rule 4).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seal {
    pub(crate) len: usize,
    pub(crate) count: u64,
    pub(crate) end: ChunkState,
}

/// Everything of the ring the producer touches at every event, on one
/// cache line: the `progress` it stores, the `seal_at` limit it reads and
/// the slot size. The writer reads `progress` and writes `seal_at` at most
/// once a round each, so sharing the line costs the producer at most one
/// line transfer a round; apart, they cost it three lines per event to
/// keep in its first-level cache (`HTTP_BENCH_CALLGRIND_SIM=1`,
/// docs/recorder.md).
struct Hot {
    progress: AtomicU64,
    /// Rule 7.
    seal_at: AtomicU64,
    slot_size: usize,
}

/// See the module docs.
pub(crate) struct Ring {
    hot: CachePadded<Hot>,
    /// The writer's, on its own line: stored once per slot it finishes.
    consumed: CachePadded<AtomicU64>,
    n_slots: u64,
    data: NonNull<u8>,
    starts: Box<[UnsafeCell<ChunkState>]>,
    seals: Box<[UnsafeCell<Seal>]>,
    /// Events lost because every slot was full (written by the producer only).
    pub(crate) dropped: AtomicU64,
    /// Tick of the first loss not yet reported (0: none).
    pub(crate) drop_since: AtomicU64,
    pub(crate) closed: AtomicBool,
    /// Under loom, one tracked cell per data byte, so the model checker sees
    /// every byte access and flags any that the protocol fails to order.
    #[cfg(loom)]
    byte_cells: Box<[UnsafeCell<()>]>,
}

// SAFETY: the raw data pointer is only accessed under the protocol above:
// the producer and the writer never touch the same bytes at the same time.
unsafe impl Send for Ring {}
// SAFETY: as above; shared access goes through atomics and the protocol.
unsafe impl Sync for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout; no other handle
        // to the ring exists once it drops.
        unsafe {
            std::alloc::dealloc(
                self.data.as_ptr(),
                Self::layout(self.n_slots, self.hot.slot_size),
            )
        }
    }
}

/// What the writer took from a ring in one go: bytes forming whole event
/// records, and the registers a decoder needs to begin there.
pub(crate) struct Piece<'a> {
    pub(crate) start: ChunkState,
    /// Records in `bytes`.
    pub(crate) count: u64,
    pub(crate) bytes: &'a [u8],
}

/// The writer's position in one ring.
#[derive(Debug, Default)]
pub(crate) struct DrainPos {
    /// Slot being consumed.
    seq: u64,
    /// Bytes of it already taken.
    taken: usize,
    /// Records of it already taken.
    taken_count: u64,
    /// Registers at `taken`.
    state: ChunkState,
    /// The slot whose seal was last asked for (rule 7).
    seal_asked: Option<u64>,
}

/// The producer's private position (it mirrors what it published).
#[derive(Debug)]
pub(crate) struct ProducerPos {
    pub(crate) seq: u64,
    pub(crate) len: usize,
    pub(crate) count: u64,
    /// Start of slot `seq`: computing it takes a division (`seq % N`),
    /// ~12 ns here, so it is done once per slot, not per event.
    base: *mut u8,
}

impl Ring {
    fn layout(n: u64, size: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(n as usize * size, 64).expect("ring layout")
    }

    /// A ring of `n_slots` slots of `slot_size` bytes, starting with
    /// registers `start`.
    pub(crate) fn new(n_slots: u64, slot_size: usize, start: ChunkState) -> (Ring, ProducerPos) {
        assert!(n_slots >= 2 && slot_size >= 1);
        let layout = Self::layout(n_slots, slot_size);
        // SAFETY: the layout has a non-zero size (asserted above).
        let data = unsafe { std::alloc::alloc(layout) };
        let data = NonNull::new(data).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let starts: Box<[_]> = (0..n_slots).map(|_| UnsafeCell::new(start)).collect();
        let seals: Box<[_]> = (0..n_slots)
            .map(|_| UnsafeCell::new(Seal::default()))
            .collect();
        let ring = Ring {
            n_slots,
            data,
            starts,
            seals,
            hot: CachePadded(Hot {
                progress: AtomicU64::new(0),
                seal_at: AtomicU64::new(slot_size as u64),
                slot_size,
            }),
            consumed: CachePadded(AtomicU64::new(0)),
            dropped: AtomicU64::new(0),
            drop_since: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            #[cfg(loom)]
            byte_cells: (0..n_slots as usize * slot_size)
                .map(|_| UnsafeCell::new(()))
                .collect(),
        };
        let base = ring.slot_ptr(0);
        let pos = ProducerPos {
            seq: 0,
            len: 0,
            count: 0,
            base,
        };
        (ring, pos)
    }

    fn slot_ptr(&self, seq: u64) -> *mut u8 {
        // SAFETY: `seq % n_slots < n_slots`, so the offset stays inside the
        // allocation of `n_slots * slot_size` bytes.
        unsafe {
            self.data
                .as_ptr()
                .add((seq % self.n_slots) as usize * self.hot.slot_size)
        }
    }

    // ---- producer side -------------------------------------------------

    /// Where the unwritten tail of the producer's current slot starts
    /// (`slot_size - len` bytes from there are the producer's).
    ///
    /// # Safety
    /// Only the ring's single producer may call this, and it may write only
    /// below the slot's end.
    #[inline(always)]
    pub(crate) unsafe fn tail_ptr(&self, pos: &ProducerPos) -> *mut u8 {
        // SAFETY: rule 1: the producer owns slot `pos.seq`, which starts at
        // `pos.base`; bytes from `len` on are not published, so the writer
        // never reads them (rule 5). `len <= slot_size`, so the offset stays
        // inside the slot (or one past its end).
        unsafe { pos.base.add(pos.len) }
    }

    /// Whether an event of at most `max` bytes must go to a new slot: it
    /// would not fit in the current one, or the writer asked for a seal
    /// (rule 7). One `Relaxed` load.
    #[inline(always)]
    pub(crate) fn must_leave(&self, pos: &ProducerPos, max: usize) -> bool {
        (pos.len + max) as u64 > self.hot.seal_at.load(Ordering::Relaxed)
    }

    /// Leaves the current slot when [`must_leave`](Self::must_leave) said
    /// so, for an event of at most `max` bytes: `Ok(Some(backlog))` when
    /// it moved to the next slot (backlog: slots awaiting the writer, for
    /// the high-water wake-up), `Ok(None)` when it stays and the event fits
    /// there (a seal request with no free slot to go to, or for an empty
    /// slot: nothing to seal), `Err(())` when the event does not fit and no
    /// slot is free: the caller drops it. Answers any seal request (rule
    /// 7) first, so one made during the move seals the next slot instead
    /// of being lost.
    #[cold]
    pub(crate) fn leave(
        &self,
        pos: &mut ProducerPos,
        end: ChunkState,
        max: usize,
    ) -> Result<Option<u64>, ()> {
        self.hot
            .seal_at
            .store(self.hot.slot_size as u64, Ordering::Relaxed);
        let fits = pos.len + max <= self.hot.slot_size;
        if fits && pos.len == 0 {
            return Ok(None);
        }
        match self.advance(pos, end) {
            Some(backlog) => Ok(Some(backlog)),
            None if fits => Ok(None),
            None => Err(()),
        }
    }

    /// Publishes `n` more bytes holding `events` more events (rule 3;
    /// `set_worker` records are not events).
    #[inline(always)]
    pub(crate) fn publish(&self, pos: &mut ProducerPos, n: usize, events: u64) {
        #[cfg(loom)]
        self.track(pos.seq, pos.len, pos.len + n, true);
        pos.len += n;
        pos.count += events;
        // Release: publishes the bytes just written; pairs with the Acquire
        // in `drain`.
        self.hot
            .progress
            .store((pos.seq << 32) | pos.len as u64, Ordering::Release);
    }

    /// Moves the producer to the next slot (rule 4). `None` when no slot is
    /// free (`leave` then keeps the producer where it is). Else how many
    /// slots await the writer, for the high-water wake-up.
    fn advance(&self, pos: &mut ProducerPos, end: ChunkState) -> Option<u64> {
        let next = pos.seq + 1;
        // Once per slot, so the backlog is current: a cached value is
        // refreshed only when the ring looks full, and a stale one past the
        // high-water mark would wake the writer at every slot.
        // Acquire: pairs with the writer's Release in `drain` (rule 1).
        let consumed = self.consumed.load(Ordering::Acquire);
        if next >= consumed + self.n_slots {
            return None;
        }
        let seal = Seal {
            len: pos.len,
            count: pos.count,
            end,
        };
        // SAFETY: rule 1: the producer owns slot `pos.seq`'s seal until it
        // publishes `next` below; the writer reads it only after that.
        self.seals[(pos.seq % self.n_slots) as usize].with_mut(|p| unsafe { *p = seal });
        // SAFETY: rule 1: slot `next` is free (checked above), so no one
        // reads its start until it is published.
        self.starts[(next % self.n_slots) as usize].with_mut(|p| unsafe { *p = end });
        // Release: publishes the seal, the start and all bytes (rule 4).
        self.hot.progress.store(next << 32, Ordering::Release);
        pos.seq = next;
        pos.base = self.slot_ptr(next);
        pos.len = 0;
        pos.count = 0;
        Some(next - consumed)
    }

    /// Counts one lost event (producer only).
    #[inline]
    pub(crate) fn count_drop(&self, now: u64) {
        // Single writer: a load and a store, no locked instruction.
        let d = self.dropped.load(Ordering::Relaxed);
        self.dropped.store(d + 1, Ordering::Relaxed);
        if self.drop_since.load(Ordering::Relaxed) == 0 {
            self.drop_since.store(now.max(1), Ordering::Relaxed);
        }
    }

    // ---- writer side ---------------------------------------------------

    /// Hands everything published since the last call to `take`, in order.
    /// `take` may return an error to stop (the pieces after are retried on
    /// the next call). `count_records` counts records in a partial piece and
    /// returns the end registers; `first_ticks` is the time of the first
    /// record of a partial piece.
    ///
    /// `defer_after: Some(t)` may leave the current slot's published bytes
    /// for the next call, when their first event is not older than `t`; it
    /// then returns that event's time (a lower bound of every event left in
    /// the ring). It asks the producer to seal the slot (rule 7), so that
    /// the next call takes it whole, sealed, with its record count and end
    /// registers, without `count_records` decoding it. Only a slot already
    /// asked for and still not sealed (its thread has recorded nothing
    /// since) is taken partly, decoded. So an event published before a call
    /// is taken by that call or the next.
    pub(crate) fn drain<E>(
        &self,
        pos: &mut DrainPos,
        defer_after: Option<u64>,
        mut count_records: impl FnMut(&[u8], ChunkState) -> Result<(u64, ChunkState), E>,
        first_ticks: impl FnOnce(&[u8], ChunkState) -> Option<u64>,
        mut take: impl FnMut(Piece<'_>),
    ) -> Result<Option<u64>, E> {
        // Acquire: pairs with the producer's Release in `publish`/`advance`.
        let p = self.hot.progress.load(Ordering::Acquire);
        let (cur_seq, cur_len) = (p >> 32, (p & 0xffff_ffff) as usize);
        while pos.seq < cur_seq {
            let i = (pos.seq % self.n_slots) as usize;
            // SAFETY: rule 4: the seal and start of a slot below `cur_seq`
            // were written before the Acquire-loaded publish and are not
            // rewritten until we release the slot.
            let seal = self.seals[i].with(|s| unsafe { *s });
            if pos.taken == 0 {
                // SAFETY: as above, rule 2 for the start.
                pos.state = self.starts[i].with(|s| unsafe { *s });
            }
            if seal.len > pos.taken {
                // SAFETY: rule 5: bytes [taken, seal.len) of a sealed slot are
                // published and stable.
                let bytes = unsafe {
                    std::slice::from_raw_parts(
                        self.slot_ptr(pos.seq).add(pos.taken),
                        seal.len - pos.taken,
                    )
                };
                #[cfg(loom)]
                self.track(pos.seq, pos.taken, seal.len, false);
                take(Piece {
                    start: pos.state,
                    count: seal.count - pos.taken_count,
                    bytes,
                });
            }
            pos.seq += 1;
            pos.taken = 0;
            pos.taken_count = 0;
            pos.state = seal.end;
            // Release: our reads of the slot happen before the producer
            // reuses it (rule 1).
            self.consumed.store(pos.seq, Ordering::Release);
        }
        if cur_len <= pos.taken {
            return Ok(None);
        }
        if pos.taken == 0 {
            // SAFETY: rule 2: published before the first byte of the slot.
            pos.state = self.starts[(pos.seq % self.n_slots) as usize].with(|s| unsafe { *s });
        }
        // SAFETY: rule 5: bytes [taken, cur_len) were published by the
        // Acquire-loaded progress; the producer writes only past it.
        let bytes = unsafe {
            std::slice::from_raw_parts(self.slot_ptr(pos.seq).add(pos.taken), cur_len - pos.taken)
        };
        #[cfg(loom)]
        self.track(pos.seq, pos.taken, cur_len, false);
        if let Some(t) = defer_after {
            if pos.seal_asked != Some(pos.seq) {
                if let Some(first) = first_ticks(bytes, pos.state).filter(|&f| f >= t) {
                    pos.seal_asked = Some(pos.seq);
                    self.hot.seal_at.store(0, Ordering::Relaxed);
                    return Ok(Some(first));
                }
            }
        }
        let (n, end) = count_records(bytes, pos.state)?;
        take(Piece {
            start: pos.state,
            count: n,
            bytes,
        });
        pos.taken = cur_len;
        pos.taken_count += n;
        pos.state = end;
        Ok(None)
    }

    /// Tells loom which bytes were just accessed (see `byte_cells`).
    #[cfg(loom)]
    fn track(&self, seq: u64, from: usize, to: usize, write: bool) {
        let base = (seq % self.n_slots) as usize * self.hot.slot_size;
        for c in &self.byte_cells[base + from..base + to] {
            if write {
                c.with_mut(|_| ());
            } else {
                c.with(|_| ());
            }
        }
    }
}

/// Model checks of the ring protocol: `RUSTFLAGS="--cfg loom" cargo test -p
/// runtrace-recorder --release --lib loom_`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Producer writes one-byte records numbered 0.. into a tiny ring while
    /// the writer drains concurrently: every record is either received, in
    /// order and intact, or counted as dropped; no byte is read while it is
    /// written or overwritten while it is read.
    ///
    /// With `defer`, the writer asks for the current slot's seal and leaves
    /// it for its next drain whenever the ring rules allow (the writer's
    /// steady state), takes it partly when asked before and still not
    /// sealed, and takes everything once the producer has closed.
    fn model(n_events: u8, slot_size: usize, defer: bool) {
        let mut b = loom::model::Builder::new();
        // Bounded like tokio's loom CI: exhaustive up to 3 preemptions.
        b.preemption_bound = Some(3);
        b.check(move || {
            let (ring, mut pos) = Ring::new(2, slot_size, ChunkState::default());
            let ring = Arc::new(ring);
            let r2 = ring.clone();
            let producer = loom::thread::spawn(move || {
                let mut dropped = 0u64;
                for k in 0..n_events {
                    if r2.must_leave(&pos, 1)
                        && r2.leave(&mut pos, ChunkState::default(), 1).is_err()
                    {
                        r2.count_drop(1);
                        dropped += 1;
                        continue;
                    }
                    // SAFETY: single producer; `must_leave(.., 1)` left a
                    // byte free in its slot.
                    unsafe { r2.tail_ptr(&pos).write(k) };
                    r2.publish(&mut pos, 1, 1);
                }
                r2.closed.store(true, Ordering::Release);
                dropped
            });
            let mut got: Vec<u8> = Vec::new();
            let mut dpos = DrainPos::default();
            let mut counted = 0;
            loop {
                let closed = ring.closed.load(Ordering::Acquire);
                ring.drain(
                    &mut dpos,
                    (defer && !closed).then_some(0),
                    |b, st| Ok::<_, ()>((b.len() as u64, st)),
                    |_, st| Some(st.ticks),
                    |p| {
                        counted += p.count;
                        got.extend_from_slice(p.bytes);
                    },
                )
                .unwrap();
                if closed {
                    break;
                }
                loom::thread::yield_now();
            }
            let dropped = producer.join().unwrap();
            assert_eq!(got.len() as u64, counted);
            assert_eq!(got.len() as u64 + dropped, n_events as u64);
            assert_eq!(ring.dropped.load(Ordering::Relaxed), dropped);
            assert!(got.windows(2).all(|w| w[0] < w[1]), "order: {got:?}");
        });
    }

    #[test]
    fn loom_ring_publish_drain() {
        // Partial reads of a slot being filled, then its seal.
        model(3, 4, false);
    }

    #[test]
    fn loom_ring_wraps_and_drops() {
        // Two slots of two bytes and six records: slots are reused, and a
        // slow writer forces drops.
        model(6, 2, false);
    }

    #[test]
    fn loom_ring_defers_the_current_slot() {
        // The writer asks for seals and leaves partial slots for later:
        // still every record, in order, none read while written.
        model(5, 2, true);
    }
}
