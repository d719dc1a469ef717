//! The recording thread's side: a thread-local producer that encodes events
//! into its ring.
//!
//! Cost ladder of a probe site (style-notes habit 5): with no recording, one
//! `Relaxed` load of [`ACTIVE_GEN`] and a branch. While recording: a TLS
//! access, one TSC read, a bounds check, the varint encoding, and one
//! `Release` store. The first event of a thread (per recording) allocates
//! its ring and takes a lock; nothing after it does.

use crate::clock::TraceClock;
use crate::ring::{ProducerPos, Ring};
use crate::session::Shared;
use runtrace_format::chunk::ChunkState;
use runtrace_format::varint;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Generation of the recording in progress; 0 when none is.
pub(crate) static ACTIVE_GEN: AtomicU64 = AtomicU64::new(0);

/// Bytes a `set_worker` record and a tag escape can add to an event.
const OVERHEAD: usize = 2 * (1 + varint::MAX_LEN) + 1 + 2 * varint::MAX_LEN;

struct Producer {
    gen: u64,
    ring: Option<Arc<Ring>>,
    shared: Option<Arc<Shared>>,
    clock: Option<&'static TraceClock>,
    pos: ProducerPos,
    state: ChunkState,
    high_water: u64,
}

impl Drop for Producer {
    fn drop(&mut self) {
        // Rule 6 of the ring protocol: the writer drains and retires it.
        if let Some(r) = &self.ring {
            r.closed.store(true, Ordering::Release);
            if let Some(s) = &self.shared {
                s.wake_writer();
            }
        }
    }
}

thread_local! {
    static PRODUCER: UnsafeCell<Producer> = const {
        UnsafeCell::new(Producer {
            gen: 0,
            ring: None,
            shared: None,
            clock: None,
            pos: ProducerPos::EMPTY,
            state: ChunkState { ticks: 0, task_reg: 0, worker_reg: runtrace_format::NO_WORKER },
            high_water: 0,
        })
    };
}

/// Whether a recording is in progress (one relaxed load).
#[inline(always)]
pub fn is_recording() -> bool {
    ACTIVE_GEN.load(Ordering::Relaxed) != 0
}

/// Records one event. `max` bounds the bytes `enc` writes; `enc` encodes
/// the fields at `buf[pos..]`, updating the task register, and returns the
/// new position. Not for direct use: the generated per-event functions and
/// [`user_events!`](crate::user_events) call it.
#[doc(hidden)]
#[inline(always)]
pub fn emit<F>(id: u32, max: usize, worker: Option<u32>, enc: F)
where
    F: FnOnce(&mut [u8], usize, &mut u64) -> usize,
{
    let gen = ACTIVE_GEN.load(Ordering::Relaxed);
    if gen == 0 {
        return;
    }
    let _ = PRODUCER.try_with(|cell| {
        // SAFETY: the producer is only touched here and in `Drop`, on its own
        // thread, and nothing in this block can re-enter `emit` (the
        // encoders are our own code), so this is the only live reference.
        let p = unsafe { &mut *cell.get() };
        p.record(gen, id, max, worker, enc);
    });
}

impl Producer {
    #[inline(always)]
    fn record<F>(&mut self, gen: u64, id: u32, max: usize, worker: Option<u32>, enc: F)
    where
        F: FnOnce(&mut [u8], usize, &mut u64) -> usize,
    {
        if self.gen != gen && !self.attach(gen) {
            return;
        }
        let (Some(ring), Some(clock)) = (self.ring.as_deref(), self.clock) else {
            return;
        };
        let now = clock.now().max(self.state.ticks);
        if self.pos.len + max + OVERHEAD > ring.slot_size() && !self.next_slot(now) {
            return;
        }
        let ring = self.ring.as_deref().unwrap_or_else(|| unreachable!());
        // SAFETY: we are the ring's only producer and hold no other slice.
        let buf = unsafe { ring.tail(&self.pos) };
        let mut pos = 0;
        if let Some(w) = worker {
            if w != self.state.worker_reg {
                buf[0] = runtrace_format::SET_WORKER as u8;
                pos = varint::write(buf, 1, now - self.state.ticks);
                pos = varint::write(buf, pos, (w as u64 + 1) & 0xffff_ffff);
                self.state.ticks = now;
                self.state.worker_reg = w;
            }
        }
        if id < runtrace_format::TAG_ESCAPE as u32 {
            buf[pos] = id as u8;
            pos += 1;
        } else {
            buf[pos] = runtrace_format::TAG_ESCAPE;
            pos = varint::write(buf, pos + 1, id as u64);
        }
        pos = varint::write(buf, pos, now - self.state.ticks);
        self.state.ticks = now;
        pos = enc(buf, pos, &mut self.state.task_reg);
        ring.publish(&mut self.pos, pos, 1);
    }

    /// Seals the current slot and moves on; counts a drop when the ring is
    /// full.
    #[cold]
    fn next_slot(&mut self, now: u64) -> bool {
        let Some(ring) = self.ring.as_deref() else {
            return false;
        };
        match ring.advance(&mut self.pos, self.state) {
            Some(backlog) => {
                if backlog >= self.high_water {
                    if let Some(s) = &self.shared {
                        s.wake_writer();
                    }
                }
                true
            }
            None => {
                ring.count_drop(now);
                false
            }
        }
    }

    /// Joins the recording `gen`: allocates a ring and registers it.
    #[cold]
    #[inline(never)]
    fn attach(&mut self, gen: u64) -> bool {
        if let Some(old) = self.ring.take() {
            old.closed.store(true, Ordering::Release);
        }
        self.shared = None;
        let Some(shared) = crate::session::current(gen) else {
            return false;
        };
        let clock = TraceClock::get();
        self.state = ChunkState {
            ticks: clock.now(),
            task_reg: 0,
            worker_reg: runtrace_format::NO_WORKER,
        };
        let (ring, pos) = Ring::new(shared.n_slots, shared.slot_size, self.state);
        let ring = Arc::new(ring);
        let name = std::thread::current().name().unwrap_or("").to_owned();
        shared.register(ring.clone(), crate::clock::gettid(), name);
        self.high_water = (shared.n_slots / 2).max(1);
        self.ring = Some(ring);
        self.shared = Some(shared);
        self.clock = Some(clock);
        self.pos = pos;
        self.gen = gen;
        true
    }
}

/// Encodes an inline `str` field, truncated to 255 bytes at a UTF-8
/// boundary.
#[doc(hidden)]
#[inline]
pub fn encode_str(buf: &mut [u8], pos: usize, s: &str) -> usize {
    let mut n = s.len().min(runtrace_format::MAX_INLINE_STR);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    let pos = varint::write(buf, pos, n as u64);
    buf[pos..pos + n].copy_from_slice(&s.as_bytes()[..n]);
    pos + n
}

/// Encodes a `task` field against the task register.
#[doc(hidden)]
#[inline(always)]
pub fn encode_task(buf: &mut [u8], pos: usize, reg: &mut u64, task: u64) -> usize {
    let d = task.wrapping_sub(*reg) as i64;
    *reg = task;
    varint::write(buf, pos, varint::zigzag(d))
}
