//! The recording thread's side: a thread-local producer that encodes events
//! into its ring.
//!
//! Cost ladder of a probe site (style-notes habit 5): with no recording, one
//! `Relaxed` load of [`ACTIVE_GEN`] and a branch. While recording: one read
//! of a constant-initialised thread-local pointer, one TSC read, a space
//! check, the varint encoding into already reserved bytes, and one `Release`
//! store. The first event of a thread (per recording) allocates its ring and
//! takes a lock; nothing after it does.
//!
//! The producer lives in a `Box` owned by a thread-local with a destructor
//! (`OWNER`); the hot path reaches it through a second thread-local, a plain
//! pointer without a destructor (`HOT`), because Rust checks the
//! registration state of a thread-local with a destructor on every access.

use crate::out::Out;
use crate::ring::{ProducerPos, Ring};
use crate::state::{Shared, ACTIVE_GEN};
use crate::sync::{Cell, Ordering, RefCell};
use runtrace_core::clock::TraceClock;
use runtrace_format::chunk::ChunkState;
use runtrace_format::schema::wire::{put_varint, SliceSink};
use runtrace_format::varint;
use std::sync::Arc;

/// Bytes a `set_worker` record and a tag escape can add to an event.
const OVERHEAD: usize = 2 * (1 + varint::MAX_LEN) + 1 + 2 * varint::MAX_LEN;

/// The most bytes one `emit` can write: overhead plus the largest event
/// (every field an inline string of 255 bytes).
const MAX_RECORD_BYTES: usize =
    OVERHEAD + runtrace_format::MAX_FIELDS * (2 + runtrace_format::MAX_INLINE_STR);

// The largest event (tag, type id, delta, 32 fields of 257 bytes) and the
// `set_worker` record before it must fit in the smallest slot, or an event
// could never be recorded.
const _: () = assert!(MAX_RECORD_BYTES <= crate::config::MIN_BUFFER / 4);

struct Producer {
    gen: u64,
    /// Points into `_ring`'s allocation (kept alive by it).
    ring: *const Ring,
    clock: &'static TraceClock,
    pos: ProducerPos,
    state: ChunkState,
    high_water: u64,
    _ring: Arc<Ring>,
    shared: Arc<Shared>,
}

impl Producer {
    fn close(&self) {
        // Rule 6 of the ring protocol: the writer drains and retires it.
        self._ring.closed.store(true, Ordering::Release);
        self.shared.wake_writer();
    }
}

/// Owns the producer; its destructor runs at thread exit.
struct Owner(Option<Box<Producer>>);

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = HOT.try_with(|h| h.set(std::ptr::null_mut()));
        if let Some(p) = self.0.take() {
            p.close();
        }
    }
}

thread_local! {
    static HOT: Cell<*mut Producer> = const { Cell::new(std::ptr::null_mut()) };
    static OWNER: RefCell<Owner> = const { RefCell::new(Owner(None)) };
}

/// Whether a recording is in progress (one relaxed load).
#[inline(always)]
pub fn is_recording() -> bool {
    ACTIVE_GEN.load(Ordering::Relaxed) != 0
}

/// Records one event. `max` bounds the bytes `enc` writes; `enc` encodes
/// the fields through a checked slice of `max` bytes (with
/// `runtrace_format::schema::wire`'s functions), updating the task
/// register. Not for direct use: the [`user_events!`](crate::user_events)
/// macro and the application probes `runtrace-build` generates call it.
#[doc(hidden)]
#[inline(always)]
pub fn emit<F>(id: u32, max: usize, worker: Option<u32>, enc: F)
where
    F: FnOnce(&mut SliceSink<'_>, &mut u64),
{
    emit_slice(None, id, max, worker, enc)
}

/// [`emit`] with a timestamp the caller read (trace ticks, from
/// `runtrace_core::clock`), so one clock read can serve several events
/// (the executor reads it once per poll transition).
#[doc(hidden)]
#[inline(always)]
pub fn emit_at<F>(ticks: u64, id: u32, max: usize, worker: Option<u32>, enc: F)
where
    F: FnOnce(&mut SliceSink<'_>, &mut u64),
{
    emit_slice(Some(ticks), id, max, worker, enc)
}

/// The application events' way in: their encoders write through a
/// bounds-checked slice of `max` bytes.
#[inline(always)]
fn emit_slice<F>(ticks: Option<u64>, id: u32, max: usize, worker: Option<u32>, enc: F)
where
    F: FnOnce(&mut SliceSink<'_>, &mut u64),
{
    // SAFETY: `record` reserves `max` bytes beyond the header, and
    // `with_slice` hands the encoder exactly `max` of them.
    unsafe {
        emit_out(ticks, id, max, worker, |out: &mut Out, reg: &mut u64| {
            out.with_slice(max, |buf| {
                let mut sink = SliceSink::new(buf);
                enc(&mut sink, reg);
                (sink.written(), ())
            })
        })
    }
}

/// Records one event whose fields `enc` writes through an [`Out`]: the
/// built-in events' way in (generated in `lib.rs`), without a bounds check
/// per byte ([`crate::out`] says why).
///
/// # Safety
/// `enc` writes at most `max` bytes (each built-in event passes the sum of
/// its fields' longest encodings, `__field_type!(max ..)`).
#[inline(always)]
pub(crate) unsafe fn emit_out<F>(
    ticks: Option<u64>,
    id: u32,
    max: usize,
    worker: Option<u32>,
    enc: F,
) where
    F: FnOnce(&mut Out, &mut u64),
{
    let gen = ACTIVE_GEN.load(Ordering::Relaxed);
    if gen == 0 {
        return;
    }
    let mut p = HOT.with(Cell::get);
    if p.is_null() ||
        // SAFETY: a non-null HOT points to the live producer boxed in OWNER
        // on this thread (set in `attach`, cleared before it is freed).
        unsafe { (*p).gen } != gen
    {
        p = attach(gen);
        if p.is_null() {
            return;
        }
    }
    // SAFETY: as above; and nothing below can re-enter `emit` on this
    // thread (the encoders are our own code), so this is the only reference.
    let p = unsafe { &mut *p };
    // Timestamps within a thread never go back (a caller-provided one
    // may be a little older than the last event's).
    let now = ticks.unwrap_or_else(|| p.clock.now()).max(p.state.ticks);
    // SAFETY: `ring` points into `_ring`, alive as long as the producer.
    let ring = unsafe { &*p.ring };
    let room = max + OVERHEAD;
    if ring.must_leave(&p.pos, room) && !p.next_slot(now, room) {
        return;
    }
    // SAFETY: at least `room` bytes follow the producer's position in
    // the slot it owns (ring rule 1): `must_leave` said so, or
    // `next_slot` stayed because they fit or moved to an empty slot,
    // which every event fits (slots are at least MIN_BUFFER / 4 bytes,
    // asserted above MAX_RECORD_BYTES). The writer does not read them
    // until `publish` (rule 5). The header below writes at most
    // OVERHEAD bytes and `enc` at most `max` (the caller's promise).
    let mut out = unsafe { Out::new(ring.tail_ptr(&p.pos), room) };
    let start = out.at();
    if let Some(w) = worker {
        if w != p.state.worker_reg {
            out = p.set_worker(out, now, w);
        }
    }
    if id < runtrace_format::TAG_ESCAPE as u32 {
        out.byte(id as u8);
    } else {
        out.byte(runtrace_format::TAG_ESCAPE);
        put_varint(&mut out, id as u64);
    }
    put_varint(&mut out, now - p.state.ticks);
    p.state.ticks = now;
    enc(&mut out, &mut p.state.task_reg);
    let n = out.at() as usize - start as usize;
    ring.publish(&mut p.pos, n, 1);
}

impl Producer {
    /// Writes a `set_worker` record: a worker thread's first event of a
    /// chunk, and after a thread changes workers. Out of line, so the
    /// per-event path keeps only the comparison; `out` goes in and comes
    /// back by value, so the caller keeps it in a register.
    #[cold]
    #[inline(never)]
    fn set_worker(&mut self, mut out: Out, now: u64, w: u32) -> Out {
        out.byte(runtrace_format::SET_WORKER as u8);
        put_varint(&mut out, now - self.state.ticks);
        put_varint(&mut out, (w as u64 + 1) & 0xffff_ffff);
        self.state.ticks = now;
        self.state.worker_reg = w;
        out
    }

    /// Leaves the current slot (ring rule 4) because the next event (at
    /// most `need` bytes) does not fit or the writer asked (rule 7). False
    /// when the event must be dropped (counted): it does not fit and no
    /// slot is free.
    #[cold]
    #[inline(never)]
    fn next_slot(&mut self, now: u64, need: usize) -> bool {
        match self._ring.leave(&mut self.pos, self.state, need) {
            Ok(Some(backlog)) => {
                if backlog >= self.high_water {
                    self.shared.wake_writer();
                }
                true
            }
            Ok(None) => true,
            Err(()) => {
                self._ring.count_drop(now);
                false
            }
        }
    }
}

/// Joins the recording `gen`: allocates a ring, registers it, and points
/// HOT at the new producer. Null when that recording is over.
#[cold]
#[inline(never)]
fn attach(gen: u64) -> *mut Producer {
    let Ok(p) = OWNER.try_with(|o| {
        let mut o = o.borrow_mut();
        if let Some(old) = o.0.take() {
            old.close();
        }
        let Some(shared) = crate::state::current(gen) else {
            return std::ptr::null_mut();
        };
        let clock = TraceClock::get();
        let state = ChunkState {
            ticks: clock.now(),
            task_reg: 0,
            worker_reg: runtrace_format::NO_WORKER,
        };
        let (ring, pos) = Ring::new(shared.n_slots, shared.slot_size, state);
        let ring = Arc::new(ring);
        let name = std::thread::current().name().unwrap_or("").to_owned();
        shared.register(ring.clone(), runtrace_core::clock::gettid(), name);
        let mut b = Box::new(Producer {
            gen,
            ring: Arc::as_ptr(&ring),
            clock,
            pos,
            state,
            high_water: (shared.n_slots / 2).max(1),
            _ring: ring,
            shared,
        });
        let p: *mut Producer = &mut *b;
        o.0 = Some(b);
        p
    }) else {
        // Thread-locals are being destroyed: this thread records no more.
        return std::ptr::null_mut();
    };
    HOT.with(|h| h.set(p));
    p
}
