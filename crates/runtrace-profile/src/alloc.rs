//! Sampled heap allocations (issue 39, item 1): the sampling an allocator
//! wrapper calls on every allocation ([`on_alloc`]), and the writer's side
//! ([`AllocSampling`]) that switches it on and drains its samples.
//!
//! # Sampling by bytes
//! Sample points fall on the stream of bytes a thread allocates as a
//! Poisson process of mean spacing `mean` bytes: each thread counts down
//! an exponentially distributed number of bytes; the allocation that takes
//! the count to zero or below is sampled, and the next count is drawn
//! afresh (the process is memoryless, so the distance from the end of a
//! sampled allocation to the next point is again exponential). An
//! allocation of `s` bytes is thus sampled with probability
//! `p = 1 - exp(-s / mean)` and its sample carries the weight `s / p`
//! bytes: the weights' sum is an unbiased estimate of the bytes allocated,
//! large allocations are (nearly) always sampled with weight ~ their size,
//! and small frequent ones are sampled in proportion to their bytes.
//!
//! # The allocating thread's path
//! Inert (no recording with memory profiling): one relaxed load of `MEAN`.
//! Sampling on, not sampled: that load, a thread-local countdown (a
//! `const`-initialised `thread_local!` without a destructor) decremented
//! and compared. Sampled (`#[cold]`): a thread-local flag guards against
//! reentry (the recorder and the inner allocator may allocate while a
//! sample is taken: those allocations are not sampled), the stack is
//! walked through frame pointers inside the thread's own stack bounds
//! (read once per thread with `pthread_getattr_np`, never faults), and the
//! sample goes into a fixed, static queue (`Queue`). Nothing on the
//! sampled path allocates; a full queue counts the sample as lost.
//!
//! # The queue
//! A bounded multi-producer queue of fixed records with a sequence number
//! per slot (D. Vyukov's bounded queue, one consumer: the writer thread).
//! A producer claims position `pos` by a compare-exchange of `tail` when
//! the slot's `seq == pos`, writes the record, then publishes `seq = pos +
//! 1` (`Release`). The consumer reads the slot at `head` once its `seq ==
//! head + 1` (`Acquire`), then frees it with `seq = head + capacity`
//! (`Release`), which the next producer of that slot waits for (`Acquire`).
//! A slot whose `seq < pos` is still full: the queue is full, the sample
//! is counted as lost. Loom model: `loom_queue_*` below.

#[cfg(not(loom))]
use crate::sample::{RawKind, RawSample};
use crate::sync::{AtomicU64, Ordering, UnsafeCell};

/// Frames kept per allocation sample (leaf first).
pub(crate) const ALLOC_DEPTH: usize = 48;

/// `AllocRecord::kind`: a sampled allocation.
pub(crate) const REC_SAMPLE: u8 = 0;
/// `AllocRecord::kind`: the free (or move by `realloc`) of a sampled one.
pub(crate) const REC_FREE: u8 = 1;

/// One sample (or the free of a sampled allocation) as the allocating or
/// freeing thread leaves it in the queue.
#[derive(Clone, Copy)]
pub(crate) struct AllocRecord {
    /// [`REC_SAMPLE`] or [`REC_FREE`].
    pub(crate) kind: u8,
    /// A sample's live-set state (`alloc_sample`'s `live` field).
    pub(crate) live: u8,
    /// The allocation's address (a free's: the address freed or moved).
    pub(crate) addr: u64,
    /// A free's new address when `realloc` moved it; 0: freed.
    pub(crate) moved_to: u64,
    pub(crate) tid: u64,
    pub(crate) ticks: u64,
    pub(crate) size: u64,
    pub(crate) weight: u64,
    pub(crate) depth: u32,
    pub(crate) frames: [u64; ALLOC_DEPTH],
}

impl AllocRecord {
    const EMPTY: AllocRecord = AllocRecord {
        kind: REC_SAMPLE,
        live: 0,
        addr: 0,
        moved_to: 0,
        tid: 0,
        ticks: 0,
        size: 0,
        weight: 0,
        depth: 0,
        frames: [0; ALLOC_DEPTH],
    };
}

struct QSlot {
    seq: AtomicU64,
    rec: UnsafeCell<AllocRecord>,
}

/// The bounded queue of allocation samples (see the module doc for its
/// protocol): many producers, one consumer.
pub(crate) struct Queue<const N: usize> {
    slots: [QSlot; N],
    tail: AtomicU64,
    head: AtomicU64,
    lost: AtomicU64,
}

// SAFETY: a slot's record is written only by the producer that claimed its
// position (the compare-exchange of `tail` hands each position to one
// producer) and read only by the one consumer after the `Release`/`Acquire`
// pair on `seq`; the queue is otherwise atomics.
unsafe impl<const N: usize> Sync for Queue<N> {}

impl<const N: usize> Queue<N> {
    /// With one slot, "published" (`pos + 1`) and "free for the next lap"
    /// (`pos + N`) would be the same sequence number.
    const AT_LEAST_TWO: () = assert!(N >= 2, "a Queue needs 2 slots or more");

    #[cfg(not(loom))]
    const fn new() -> Self {
        let () = Self::AT_LEAST_TWO;
        let mut slots = [const {
            QSlot {
                seq: AtomicU64::new(0),
                rec: UnsafeCell::new(AllocRecord::EMPTY),
            }
        }; N];
        let mut i = 0;
        while i < N {
            slots[i].seq = AtomicU64::new(i as u64);
            i += 1;
        }
        Queue {
            slots,
            tail: AtomicU64::new(0),
            head: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    #[cfg(loom)]
    fn new() -> Self {
        let () = Self::AT_LEAST_TWO;
        Queue {
            slots: std::array::from_fn(|i| QSlot {
                seq: AtomicU64::new(i as u64),
                rec: UnsafeCell::new(AllocRecord::EMPTY),
            }),
            tail: AtomicU64::new(0),
            head: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// Adds a record; false (and counted as lost) when the queue is full.
    pub(crate) fn push(&self, fill: impl FnOnce(&mut AllocRecord)) -> bool {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos as usize % N];
            let seq = slot.seq.load(Ordering::Acquire);
            if seq == pos {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the compare-exchange for `pos`
                        // while `seq == pos` makes this producer the slot's
                        // only writer until it publishes `pos + 1`; the
                        // consumer reads it only after that.
                        slot.rec.with_mut(|r| fill(unsafe { &mut *r }));
                        slot.seq.store(pos + 1, Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if seq < pos {
                self.lost.fetch_add(1, Ordering::Relaxed);
                return false;
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// The oldest published record, if any. One consumer only.
    pub(crate) fn pop(&self) -> Option<AllocRecord> {
        let head = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[head as usize % N];
        if slot.seq.load(Ordering::Acquire) != head + 1 {
            return None;
        }
        // SAFETY: `seq == head + 1` (Acquire) means the producer of `head`
        // finished writing; no producer touches the slot before the
        // `Release` store below.
        let rec = slot.rec.with(|r| unsafe { *r });
        slot.seq.store(head + N as u64, Ordering::Release);
        self.head.store(head + 1, Ordering::Relaxed);
        Some(rec)
    }

    /// Samples lost to a full queue since the last call.
    pub(crate) fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }
}

#[cfg(not(loom))]
pub use sampler::{on_alloc, on_free, realloc_end, realloc_start, AllocSampling};

/// `alloc_sample`'s `live` field: recorded without the live set.
pub const LIVE_OFF: u8 = 0;
/// `alloc_sample`'s `live` field: in the live set (its free is recorded).
pub const LIVE_TRACKED: u8 = 1;
/// `alloc_sample`'s `live` field: the live set's table was full, so its
/// free would not be seen: readers must not count it as live (or leaked).
pub const LIVE_UNTRACKED: u8 = 2;

#[cfg(not(loom))]
mod sampler {
    use super::*;
    use crate::live::LiveTable;
    use crate::sync::StaticAtomicU64;
    use std::cell::Cell;
    use std::sync::atomic::AtomicBool;

    /// Records the queue holds between two writer rounds (~19 MB/s of
    /// allocation at the default mean and a 10 ms round fills 1%).
    const QUEUE_LEN: usize = 1024;
    /// Live-set words: 64 Ki sampled allocations (at the default 512 KiB
    /// mean, ~32 GiB of live heap), 512 KiB of zeroed static memory the
    /// process touches only when a recording turns the live set on.
    const LIVE_LEN: usize = 1 << 16;
    /// Words per bucket: 128 bytes, two cache lines, scanned whole.
    const LIVE_BUCKET: usize = 16;

    /// Mean bytes between samples; 0: not sampling.
    static MEAN: AtomicU64 = AtomicU64::new(0);
    /// The live set is on: frees look their address up.
    static LIVE_ON: AtomicBool = AtomicBool::new(false);
    /// One sampling writer at a time.
    static OWNED: AtomicBool = AtomicBool::new(false);
    static QUEUE: Queue<QUEUE_LEN> = Queue::new();
    static LIVE: LiveTable<LIVE_LEN, LIVE_BUCKET> = LiveTable::new();
    /// Sampled allocations the live set could not hold (since the last note).
    static UNTRACKED: StaticAtomicU64 = StaticAtomicU64::new(0);
    /// Frees of sampled allocations lost to a full queue (since the last note).
    static LOST_FREES: StaticAtomicU64 = StaticAtomicU64::new(0);

    struct ThreadState {
        /// Bytes left before the next sample point.
        countdown: Cell<i64>,
        /// xorshift state; 0: this thread has not drawn yet.
        rng: Cell<u64>,
        /// Inside the sampled path (reentry guard).
        busy: Cell<bool>,
        tid: Cell<u64>,
        /// Highest address of this thread's stack (0: not read yet).
        stack_hi: Cell<u64>,
    }

    thread_local! {
        static STATE: ThreadState = const {
            ThreadState {
                countdown: Cell::new(0),
                rng: Cell::new(0),
                busy: Cell::new(false),
                tid: Cell::new(0),
                stack_hi: Cell::new(0),
            }
        };
    }

    /// To call after every successful allocation of `size` bytes at
    /// `addr`: samples it if a recording with memory profiling runs and a
    /// sample point falls in it. Allocates nothing; takes no lock.
    ///
    /// ```
    /// // No recording samples: this is one relaxed load.
    /// runtrace_profile::alloc::on_alloc(0x1000, 64);
    /// ```
    #[inline(always)]
    pub fn on_alloc(addr: usize, size: usize) {
        let mean = MEAN.load(Ordering::Relaxed);
        if mean == 0 {
            return;
        }
        STATE.with(|s| {
            let left = s.countdown.get() - size as i64;
            s.countdown.set(left);
            if left <= 0 {
                slow(s, addr as u64, size as u64, mean);
            }
        });
    }

    /// To call before the allocation at `addr` is handed back to the inner
    /// allocator: with the live set on, a sampled allocation's free is
    /// recorded. Live set off: one relaxed load and a branch.
    ///
    /// ```
    /// runtrace_profile::alloc::on_free(0x1000); // no live set: nothing
    /// ```
    #[inline(always)]
    pub fn on_free(addr: usize) {
        if LIVE_ON.load(Ordering::Relaxed) {
            free_slow(addr as u64);
        }
    }

    /// To call before a `realloc` of `addr`: with the live set on and
    /// `addr` sampled, takes it out of the live set and returns the time
    /// (non-zero) to stamp its move or free with; else 0. Pass the result
    /// to [`realloc_end`].
    ///
    /// ```
    /// use runtrace_profile::alloc::{realloc_end, realloc_start};
    /// let t = realloc_start(0x1000); // 0: not sampled / no live set
    /// realloc_end(t, 0x1000, 0x2000, 64, 128);
    /// ```
    #[inline(always)]
    pub fn realloc_start(addr: usize) -> u64 {
        if LIVE_ON.load(Ordering::Relaxed) {
            realloc_start_slow(addr as u64)
        } else {
            0
        }
    }

    /// To call after a `realloc` from `old` (`old_size` bytes) returned
    /// `new` (null: failed, `old` unchanged) for `new_size` bytes, with
    /// what [`realloc_start`] returned. A growth allocates the difference.
    #[inline(always)]
    pub fn realloc_end(moving: u64, old: usize, new: usize, old_size: usize, new_size: usize) {
        if moving != 0 {
            realloc_end_slow(moving, old as u64, new as u64);
        }
        if new != 0 && new_size > old_size {
            on_alloc(new, new_size - old_size);
        }
    }

    /// Pushes the free (or move to `moved_to`) of a sampled allocation; a
    /// lost one is counted for the next note (readers then distrust the
    /// live set).
    fn push_free(addr: u64, moved_to: u64, ticks: u64) {
        let tid = STATE.with(|s| {
            if s.tid.get() == 0 {
                s.tid.set(runtrace_core::clock::gettid());
            }
            s.tid.get()
        });
        let ok = QUEUE.push(|r| {
            r.kind = REC_FREE;
            r.live = 0;
            r.addr = addr;
            r.moved_to = moved_to;
            r.tid = tid;
            r.ticks = ticks;
            r.size = 0;
            r.weight = 0;
            r.depth = 0;
        });
        if !ok {
            LOST_FREES.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[cold]
    #[inline(never)]
    fn free_slow(addr: u64) {
        if LIVE.remove(addr) {
            push_free(addr, 0, runtrace_core::clock::TraceClock::get().now());
        }
    }

    #[cold]
    #[inline(never)]
    fn realloc_start_slow(addr: u64) -> u64 {
        if LIVE.remove(addr) {
            // Read before the inner realloc may free `addr`: an allocation
            // another thread then gets at `addr` is stamped later.
            runtrace_core::clock::TraceClock::get().now().max(1)
        } else {
            0
        }
    }

    #[cold]
    #[inline(never)]
    fn realloc_end_slow(ticks: u64, old: u64, new: u64) {
        // Failed (`new` null): `old` is still the allocation.
        let now_at = if new == 0 { old } else { new };
        if LIVE.insert(now_at) {
            if now_at != old {
                push_free(old, new, ticks);
            }
        } else {
            // No room: recorded as freed (live bytes understated, never a
            // false leak) and counted.
            UNTRACKED.fetch_add(1, Ordering::Relaxed);
            push_free(old, 0, ticks);
        }
    }

    /// A uniform draw in (0, 1] from the thread's xorshift64*.
    fn uniform(s: &ThreadState) -> f64 {
        let mut x = s.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.rng.set(x);
        let bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11; // 53 bits
        (bits + 1) as f64 / (1u64 << 53) as f64
    }

    fn draw(s: &ThreadState, mean: u64) -> i64 {
        (-uniform(s).ln() * mean as f64).min(i64::MAX as f64 / 2.0) as i64 + 1
    }

    #[cold]
    #[inline(never)]
    fn slow(s: &ThreadState, addr: u64, size: u64, mean: u64) {
        if s.busy.replace(true) {
            // The sampled path (or the recorder under it) allocating: not
            // sampled; the countdown stays due for the next allocation.
            return;
        }
        if s.rng.get() == 0 {
            // First allocation this thread makes while sampling: start
            // its process here, then see whether it samples this one.
            let seed =
                (s as *const ThreadState as u64) ^ runtrace_core::clock::TraceClock::get().now();
            s.rng.set(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let left = draw(s, mean) - size as i64;
            s.countdown.set(left);
            if left > 0 {
                s.busy.set(false);
                return;
            }
        }
        s.countdown.set(draw(s, mean));
        let p = -(-(size as f64) / mean as f64).exp_m1(); // 1 - exp(-size/mean)
        let weight = if p > 0.0 {
            (size as f64 / p).round() as u64
        } else {
            mean
        };
        record(s, addr, size, weight);
        s.busy.set(false);
    }

    #[inline(never)]
    fn record(s: &ThreadState, addr: u64, size: u64, weight: u64) {
        if s.tid.get() == 0 {
            s.tid.set(runtrace_core::clock::gettid());
        }
        if s.stack_hi.get() == 0 {
            s.stack_hi.set(stack_top().unwrap_or(1));
        }
        let (pc, fp, sp) = here();
        let hi = s.stack_hi.get();
        let ticks = runtrace_core::clock::TraceClock::get().now();
        // Into the live set before the sample is published (and before
        // the program sees the pointer, so before any free of it).
        let live = if !LIVE_ON.load(Ordering::Relaxed) {
            LIVE_OFF
        } else if LIVE.insert(addr) {
            LIVE_TRACKED
        } else {
            UNTRACKED.fetch_add(1, Ordering::Relaxed);
            LIVE_UNTRACKED
        };
        let pushed = QUEUE.push(|r| {
            r.kind = REC_SAMPLE;
            r.live = live;
            r.addr = addr;
            r.moved_to = 0;
            r.tid = s.tid.get();
            r.ticks = ticks;
            r.size = size;
            r.weight = weight;
            let n = crate::signal::walk(pc, fp, sp, &mut r.frames, |a| {
                if a >= sp && a.checked_add(8).is_some_and(|e| e <= hi) {
                    // SAFETY: [sp, hi) is this thread's live stack: mapped
                    // and readable; `a` is 8-aligned (walk checks it).
                    Some(unsafe { std::ptr::read_volatile(a as *const u64) })
                } else {
                    None
                }
            });
            r.depth = n as u32;
        });
        if !pushed && live == LIVE_TRACKED {
            // Lost sample: its free must not be recorded either.
            LIVE.remove(addr);
        }
    }

    /// This function's return address, frame pointer and stack pointer.
    #[inline(always)]
    fn here() -> (u64, u64, u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let (fp, sp): (u64, u64);
            // SAFETY: reads two registers; no memory access.
            unsafe {
                std::arch::asm!("mov {0}, rbp", "mov {1}, rsp", out(reg) fp, out(reg) sp,
                    options(nomem, nostack, preserves_flags));
            }
            // The leaf is `record`'s caller chain: start the walk at the
            // frame record `fp` points at (pc 0 is dropped below).
            (0, fp, sp)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            (0, 0, u64::MAX)
        }
    }

    /// The highest address of the calling thread's stack.
    fn stack_top() -> Option<u64> {
        // SAFETY: `attr` is initialised by pthread_getattr_np before use
        // and destroyed after; both calls get valid pointers.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return None;
            }
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            (r == 0).then(|| addr as u64 + size as u64)
        }
    }

    /// Allocation sampling for one recording: switched on by
    /// [`AllocSampling::start`], off when dropped. Owned by the writer,
    /// which drains it ([`AllocSampling::drain`]).
    ///
    /// ```
    /// use runtrace_profile::alloc::AllocSampling;
    /// let s = AllocSampling::start(512 * 1024, true).unwrap();
    /// assert!(s.live());
    /// assert!(AllocSampling::start(1024, false).is_err()); // one at a time
    /// drop(s);
    /// ```
    pub struct AllocSampling {
        mean: u64,
        live: bool,
    }

    impl AllocSampling {
        /// Samples one allocation per `mean` bytes allocated on average,
        /// from now until dropped; with `live`, also records the free of
        /// every sampled allocation (the live set). Fails if `mean` is 0
        /// or another recording samples already.
        pub fn start(mean: u64, live: bool) -> Result<AllocSampling, String> {
            if mean == 0 {
                return Err("allocation sampling: mean bytes between samples must be > 0".into());
            }
            if OWNED.swap(true, Ordering::Acquire) {
                return Err("allocation sampling: another recording samples already".into());
            }
            // Leftovers of an earlier recording are not this one's.
            while QUEUE.pop().is_some() {}
            QUEUE.take_lost();
            LIVE.clear();
            UNTRACKED.store(0, Ordering::Relaxed);
            LOST_FREES.store(0, Ordering::Relaxed);
            runtrace_core::clock::TraceClock::get();
            LIVE_ON.store(live, Ordering::Relaxed);
            MEAN.store(mean, Ordering::Relaxed);
            Ok(AllocSampling { mean, live })
        }

        /// The mean bytes between samples.
        pub fn mean(&self) -> u64 {
            self.mean
        }

        /// Whether the frees of sampled allocations are recorded.
        pub fn live(&self) -> bool {
            self.live
        }

        /// Moves the samples and frees taken so far into `pending` (as
        /// [`RawSample`]s of kind [`RawKind::Alloc`] / [`RawKind::AllocFree`],
        /// plus one [`RawKind::AllocNote`] stamped `now` when the live set
        /// lost track of something since the last call); returns how many
        /// records were lost to a full queue since the last call.
        pub fn drain(&mut self, pending: &mut Vec<RawSample>, now: u64) -> u64 {
            while let Some(r) = QUEUE.pop() {
                if r.kind == REC_FREE {
                    pending.push(RawSample {
                        tid: r.tid,
                        ticks: r.ticks,
                        kind: RawKind::AllocFree {
                            addr: r.addr,
                            moved_to: r.moved_to,
                        },
                        stack: Vec::new(),
                    });
                    continue;
                }
                let n = r.depth as usize;
                // A zero pc (the walk's start) is no frame.
                let frames = r.frames[..n].iter().copied().filter(|&a| a != 0);
                pending.push(RawSample {
                    tid: r.tid,
                    ticks: r.ticks,
                    kind: RawKind::Alloc {
                        size: r.size,
                        weight: r.weight,
                        addr: r.addr,
                        live: r.live,
                    },
                    stack: frames.collect(),
                });
            }
            let untracked = UNTRACKED.swap(0, Ordering::Relaxed);
            let lost_frees = LOST_FREES.swap(0, Ordering::Relaxed);
            if untracked + lost_frees > 0 {
                pending.push(RawSample {
                    tid: 0,
                    ticks: now,
                    kind: RawKind::AllocNote {
                        untracked,
                        lost_frees,
                    },
                    stack: Vec::new(),
                });
            }
            QUEUE.take_lost()
        }
    }

    impl Drop for AllocSampling {
        fn drop(&mut self) {
            MEAN.store(0, Ordering::Relaxed);
            LIVE_ON.store(false, Ordering::Relaxed);
            // Entries a sampling thread adds after this are stale; the
            // next recording clears the table when it starts.
            OWNED.store(false, Ordering::Release);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_queue_two_producers_one_consumer() {
        loom::model(|| {
            let q = Arc::new(Queue::<2>::new());
            let hs: Vec<_> = (1..=2u64)
                .map(|i| {
                    let q = q.clone();
                    loom::thread::spawn(move || {
                        q.push(|r| {
                            r.size = i;
                            r.weight = i * 10;
                        })
                    })
                })
                .collect();
            let mut got = Vec::new();
            if let Some(r) = q.pop() {
                got.push(r);
            }
            let pushed: usize = hs.into_iter().map(|h| h.join().unwrap() as usize).sum();
            while let Some(r) = q.pop() {
                got.push(r);
            }
            assert_eq!(pushed, 2, "capacity 2 holds both");
            assert_eq!(got.len(), 2);
            for r in &got {
                assert_eq!(r.weight, r.size * 10, "a record is read whole");
            }
            got.sort_by_key(|r| r.size);
            assert_eq!((got[0].size, got[1].size), (1, 2));
        });
    }

    #[test]
    fn loom_queue_full_counts_lost_and_slot_reuse() {
        loom::model(|| {
            let q = Arc::new(Queue::<2>::new());
            assert!(q.push(|r| r.size = 1));
            assert!(q.push(|r| r.size = 2));
            let q2 = q.clone();
            // Races the consumer freeing slot 0: fits after it, else lost.
            let h = loom::thread::spawn(move || q2.push(|r| r.size = 3));
            assert_eq!(q.pop().unwrap().size, 1);
            let third_ok = h.join().unwrap();
            assert_eq!(q.pop().unwrap().size, 2);
            let rest = q.pop();
            if third_ok {
                assert_eq!(rest.unwrap().size, 3);
                assert_eq!(q.take_lost(), 0);
            } else {
                assert!(rest.is_none());
                assert_eq!(q.take_lost(), 1);
            }
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn queue_wraps_and_reports_full() {
        let q = Queue::<4>::new();
        for round in 0..3u64 {
            for i in 0..4 {
                assert!(q.push(|r| r.size = round * 10 + i));
            }
            assert!(!q.push(|r| r.size = 99), "full");
            assert_eq!(q.take_lost(), 1);
            for i in 0..4 {
                assert_eq!(q.pop().unwrap().size, round * 10 + i);
            }
            assert!(q.pop().is_none());
        }
    }
}
