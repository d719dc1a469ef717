//! The timer + signal fallback of CPU profiling (issue 13, mode 2 of the
//! `PROFILE` frame), used when `perf_event_open` is refused.
//!
//! Every recording thread gets a POSIX timer on its own CPU-time clock
//! (`timer_create` with `SIGEV_THREAD_ID`): after each `1/hz` s of CPU
//! time the thread itself receives `SIGPROF`. The handler reads the trace
//! clock, walks the interrupted code's frame pointers (leaf first) and
//! appends the stack to that thread's sample ring; the writer thread
//! drains the rings (`SignalSampler::drain`). On-CPU samples only: a
//! CPU-time clock does not advance while the thread is off CPU.
//!
//! The kernel checks a thread's CPU timers only at the scheduler ticks
//! that find it running and queues one signal per timer at a time, merging
//! further expiries into the signal's `si_overrun`. Measured here
//! (CONFIG_HZ 250, 500 Hz asked, 200 ms of CPU per thread): one thread
//! alone got 49 signals + 49 overruns; five competing threads got 6 to 19
//! signals each, with signals + overruns 80 to 99 for all. So a signal's
//! sample counts `1 + si_overrun` times (`drain` hands out that many
//! copies): each sample is `1/hz` s of CPU, as with perf, and threads that
//! compete for a CPU are not under-represented.
//!
//! Like every `SIGPROF` profiler, it can make a blocking system call that
//! `SA_RESTART` does not restart (`epoll_wait`, `nanosleep`, ...) return
//! `EINTR` when a sample falls just before it; std and tokio retry those.
//!
//! # The handler is async-signal-safe
//! It allocates nothing, takes no lock and calls only `gettid` and
//! `process_vm_readv`; it saves and restores `errno`. It never faults:
//! the memory of the interrupted stack is read only through
//! `process_vm_readv` on the own process, one 4 KiB block at a time, so a
//! frame pointer into unmapped memory (code built without frame pointers
//! uses `rbp` for data) gives `EFAULT`, never `SIGSEGV`. Measured on the
//! 2-vCPU KVM guest this was written on: a `process_vm_readv` of one block
//! ~1.2-1.5 us (C loop), a signal's delivery alone 2.8-4.5 us of CPU, a
//! sample's work on top 1.7-2.3 us for 10 frames (one block) and 9-13 us
//! for 50 frames (7 blocks) (`bench_signal_handler` below, thread CPU time,
//! medians of 21 rounds). Trusting the walk to stay inside the thread's
//! stack bounds would save the reads, but the handler cannot learn those
//! bounds safely; at 99 Hz a thread spends ~0.05-0.2% of its CPU on
//! samples, so safety wins.
//!
//! # Protocol
//! The handler finds its ring through a fixed table of slots (`SLOTS`),
//! by the key its timer carries in `si_value`: `(generation << 16) |
//! slot index`, 48 bits, never 0. A slot's `state` word holds the key
//! that may enter it (`state >> 16`, 0: none) and how many handlers are
//! inside (`state & 0xffff`): one word, so entering, leaving and retiring
//! are each one atomic operation on it and need no ordering between two
//! variables.
//! 1. A sampler claims a free slot (`owned` 0 -> 1, compare-exchange),
//!    stores its new ring's address in `ring`, then publishes `state =
//!    key << 16` (`Release`; no handler is inside a slot that has no key),
//!    and only then creates the thread's timer.
//! 2. The handler enters by a compare-exchange of `state` to `state + 1`
//!    (`Acquire`: it then sees `ring`) that succeeds only while the key in
//!    `state` is the one its signal carries. It writes to the ring only if
//!    the ring's thread is the one running the handler (so each ring has
//!    one producer), and leaves by decrementing `state` (`Release`).
//! 3. To stop sampling a thread, the sampler deletes its timer, then
//!    clears the key (`fetch_and`, keeping the count). A signal still
//!    queued, or a handler starting later, finds no key and leaves.
//! 4. The slot is *quiescent* once its key is cleared and `state` is
//!    loaded as 0 (`Acquire`, pairing with the last handler's `Release`
//!    decrement, so its writes to the ring are visible): the count can
//!    only fall once the key is gone. The writer drains a quiescent ring
//!    to its end, then frees it and the slot (`owned` 1 -> 0, `Release`).
//!    A slot's generation changes with every claim, so a stale signal
//!    never matches a later owner.
//! 5. Each ring is single-producer (the handler on its thread: `SIGPROF`
//!    is blocked while its own handler runs, so it cannot nest) and
//!    single-consumer (the writer): `tail` is published with `Release`
//!    after a record is written, `head` with `Release` after records are
//!    read; each side loads the other's index with `Acquire`. A full ring
//!    counts the signal's samples (its weight) as lost.
//!
//! When the sampler is dropped, its timers are deleted and its slots
//! retired; the handler stays installed (a handler cannot be removed safely
//! while signals may be queued) and does nothing for keys it does not find.

// The handler, and what only it uses, exist on x86_64 alone.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use crate::sample::{RawKind, RawSample};
use crate::sync::{AtomicU64, CachePadded, Mutex, Ordering, StaticAtomicU64, UnsafeCell};
use runtrace_core::clock::TraceClock;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::time::Duration;

/// Most frames kept per sample (the contract's `STACKS` limit is 128).
pub(crate) const MAX_DEPTH: usize = 64;
/// Samples a thread's ring holds between two drains (at the default 50 ms
/// flush interval and 99 Hz, ~5 are taken per round).
const RING_CAPACITY: usize = 256;
/// Threads sampled at once, over all samplers of the process.
const TABLE_SIZE: usize = 1024;
/// Low bits of a key: the slot index (`TABLE_SIZE` fits).
const INDEX_BITS: u32 = 16;
/// The unit of stack reads (a page on every Linux architecture is a
/// multiple of it, so one aligned block never straddles two mappings).
const BLOCK: u64 = 4096;
/// A frame record further than this above the interrupted stack pointer is
/// not believed (Linux's default stack limit is 8 MiB).
const MAX_STACK_SPAN: u64 = 64 << 20;
/// Most timer periods one signal's sample stands for: a thread that had
/// `SIGPROF` blocked for long does not flood the trace with copies.
const MAX_WEIGHT: u64 = 1000;
/// How long `Drop` waits for handlers still running on retired slots.
const DROP_GRACE: Duration = Duration::from_millis(100);

/// One sample as the handler writes it.
struct Record {
    ticks: u64,
    /// Timer periods this sample stands for (see `MAX_WEIGHT`).
    weight: u64,
    depth: usize,
    /// Leaf first: the interrupted instruction, then return addresses.
    frames: [u64; MAX_DEPTH],
}

/// The handler's copy of the last stack block it read (rule: only the
/// handler of the ring's thread touches it).
struct Window {
    /// Address of the block held in `words`, or `NO_BLOCK`.
    block: u64,
    words: [u64; (BLOCK / 8) as usize],
}

const NO_BLOCK: u64 = u64::MAX;

/// A thread's samples: single producer (its handler), single consumer (the
/// writer). See rule 5.
struct SampleRing {
    tid: u64,
    tail: CachePadded<AtomicU64>,
    head: CachePadded<AtomicU64>,
    /// Samples dropped because the ring was full (written by the producer
    /// only, hence a load and a store rather than a locked add).
    lost: AtomicU64,
    records: Box<[UnsafeCell<Record>]>,
    window: UnsafeCell<Window>,
}

// SAFETY: the records and the window are accessed under rule 5 (the
// producer writes a record only while it is outside [head, tail), the
// consumer reads only inside it) and the window by the producer alone.
unsafe impl Sync for SampleRing {}
// SAFETY: as above; the ring owns its memory.
unsafe impl Send for SampleRing {}

impl SampleRing {
    fn new(tid: u64, capacity: usize) -> SampleRing {
        assert!(capacity >= 1);
        SampleRing {
            tid,
            tail: CachePadded(AtomicU64::new(0)),
            head: CachePadded(AtomicU64::new(0)),
            lost: AtomicU64::new(0),
            records: (0..capacity)
                .map(|_| {
                    UnsafeCell::new(Record {
                        ticks: 0,
                        weight: 0,
                        depth: 0,
                        frames: [0; MAX_DEPTH],
                    })
                })
                .collect(),
            window: UnsafeCell::new(Window {
                block: NO_BLOCK,
                words: [0; (BLOCK / 8) as usize],
            }),
        }
    }

    fn capacity(&self) -> u64 {
        self.records.len() as u64
    }

    /// Appends one record of `weight` samples filled by `fill` (rule 5),
    /// or counts them lost.
    ///
    /// # Safety
    /// Only the ring's single producer may call this, never reentrantly.
    unsafe fn push(&self, weight: u64, fill: impl FnOnce(&mut Record, &mut Window)) -> bool {
        let t = self.tail.load(Ordering::Relaxed);
        // Acquire: the consumer's reads of a record happen before we reuse it.
        let h = self.head.load(Ordering::Acquire);
        if t - h >= self.capacity() {
            let n = self.lost.load(Ordering::Relaxed);
            self.lost.store(n + weight, Ordering::Relaxed);
            return false;
        }
        self.records[(t % self.capacity()) as usize].with_mut(|r| {
            self.window.with_mut(|w| {
                // SAFETY: record `t` is outside [head, tail): the consumer
                // does not read it (rule 5); the window is the producer's.
                let (r, w) = unsafe { (&mut *r, &mut *w) };
                r.weight = weight;
                fill(r, w)
            })
        });
        // Release: publishes the record.
        self.tail.store(t + 1, Ordering::Release);
        true
    }

    /// Hands `take` every published record with `ticks <= cutoff`, oldest
    /// first, stopping at the first newer one (a thread's records are in
    /// time order). Returns how many it took. Consumer only.
    fn pop_until(&self, cutoff: u64, mut take: impl FnMut(&Record)) -> u64 {
        // Acquire: pairs with `push`'s Release, making the records readable.
        let t = self.tail.load(Ordering::Acquire);
        let h0 = self.head.load(Ordering::Relaxed);
        let mut h = h0;
        while h < t {
            let newer = self.records[(h % self.capacity()) as usize].with(|r| {
                // SAFETY: record `h` is inside [head, tail): published and
                // not rewritten until `head` passes it (rule 5).
                let r = unsafe { &*r };
                if r.ticks > cutoff {
                    return true;
                }
                take(r);
                false
            });
            if newer {
                break;
            }
            h += 1;
        }
        // Release: our reads happen before the producer reuses the records.
        self.head.store(h, Ordering::Release);
        h - h0
    }

    fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed) == self.tail.load(Ordering::Acquire)
    }
}

/// One entry of the handler's table (see the protocol in the module docs).
#[derive(Debug)]
struct Slot {
    owned: AtomicU64,
    /// `key << 16 | handlers inside` (see the module docs).
    state: AtomicU64,
    /// Address of the slot's `SampleRing` while owned.
    ring: AtomicU64,
}

/// Bits of `Slot::state` counting the handlers inside.
const INSIDE_MASK: u64 = 0xffff;

/// A handler inside a slot (rule 2); dropping it leaves.
struct Visit<'a> {
    slot: &'a Slot,
    ring: &'a SampleRing,
}

impl Drop for Visit<'_> {
    fn drop(&mut self) {
        // Release: our writes to the ring happen before a quiescence check
        // that reads 0 (rule 4).
        self.slot.state.fetch_sub(1, Ordering::Release);
    }
}

impl Slot {
    #[cfg(not(loom))]
    const fn new() -> Slot {
        Slot {
            owned: AtomicU64::new(0),
            state: AtomicU64::new(0),
            ring: AtomicU64::new(0),
        }
    }

    /// Rule 1 (after the claim): makes `ring` the slot's, under `key`.
    fn publish(&self, key: u64, ring: NonNull<SampleRing>) {
        debug_assert!(key != 0 && key >> 48 == 0);
        self.ring
            .store(ring.as_ptr().expose_provenance() as u64, Ordering::Relaxed);
        // Release: publishes `ring` to handlers that enter (rule 2).
        self.state.store(key << 16, Ordering::Release);
    }

    /// The key handlers may enter with (0: none).
    #[cfg(all(test, not(loom)))]
    fn key(&self) -> u64 {
        self.state.load(Ordering::Relaxed) >> 16
    }

    /// Rule 2: the handler enters if `key` is the slot's current key.
    fn enter(&self, key: u64) -> Option<Visit<'_>> {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if key == 0 || cur >> 16 != key || cur & INSIDE_MASK == INSIDE_MASK {
                return None;
            }
            // Acquire: pairs with `publish`, making `ring` visible.
            match self.state.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        let p = self.ring.load(Ordering::Relaxed) as usize;
        let visit = NonNull::new(std::ptr::with_exposed_provenance_mut::<SampleRing>(p)).map(|p| {
            // SAFETY: we entered under the key the ring was published with
            // (rule 1), and it is not freed while we are inside (rule 4);
            // the address came from a live `Box`.
            let ring = unsafe { &*p.as_ptr() };
            Visit { slot: self, ring }
        });
        if visit.is_none() {
            // Unreachable (a key is published with its ring): just leave.
            self.state.fetch_sub(1, Ordering::Release);
        }
        visit
    }

    /// Rule 3: no handler enters from now on.
    fn retire(&self) {
        self.state.fetch_and(INSIDE_MASK, Ordering::Relaxed);
    }

    /// Rule 4: no handler is inside, and none can enter.
    fn quiescent(&self) -> bool {
        self.state.load(Ordering::Acquire) == 0
    }

    /// Rule 4: gives the slot back (its ring already freed by the caller).
    fn release(&self) {
        self.ring.store(0, Ordering::Relaxed);
        self.owned.store(0, Ordering::Release);
    }
}

/// The handler's table. Under loom (whose atomics cannot live in statics)
/// it is empty: only the ring and slot protocols are model-checked, the
/// sampler just compiles.
#[cfg(not(loom))]
fn table() -> &'static [Slot] {
    static SLOTS: [Slot; TABLE_SIZE] = [const { Slot::new() }; TABLE_SIZE];
    &SLOTS
}
#[cfg(loom)]
fn table() -> &'static [Slot] {
    &[]
}

/// Generations for keys (rule 4).
static NEXT_GENERATION: StaticAtomicU64 = StaticAtomicU64::new(1);
/// This process's id, for `process_vm_readv` (glibc no longer caches
/// `getpid`, and the handler should make as few syscalls as it can).
static OWN_PID: StaticAtomicU64 = StaticAtomicU64::new(0);
/// Serializes installing the handler.
static INSTALL: Mutex<()> = Mutex::new(());

/// A frame-pointer walk, leaf first: `pc`, then the return address of each
/// frame record reachable from `fp`. `read` loads one 8-byte word (None:
/// unreadable). A record is believed only if it lies at or above `sp`,
/// above the previous record, 8-byte aligned and within `MAX_STACK_SPAN` of
/// `sp`; a null return address ends the chain (thread entry points clear
/// the frame pointer). Returns the number of frames written.
pub(crate) fn walk(
    pc: u64,
    fp: u64,
    sp: u64,
    out: &mut [u64],
    mut read: impl FnMut(u64) -> Option<u64>,
) -> usize {
    let Some(first) = out.first_mut() else {
        return 0;
    };
    *first = pc;
    let mut n = 1;
    let (mut fp, mut lowest) = (fp, sp);
    while n < out.len() {
        if fp < lowest || !fp.is_multiple_of(8) || fp - sp > MAX_STACK_SPAN {
            break;
        }
        let (Some(next), Some(ret)) = (read(fp), read(fp + 8)) else {
            break;
        };
        if ret == 0 {
            break;
        }
        out[n] = ret;
        n += 1;
        lowest = fp + 16;
        fp = next;
    }
    n
}

impl Window {
    /// The word at `addr` (8-aligned) of this process, read with
    /// `process_vm_readv` a block at a time: never faults.
    fn read(&mut self, addr: u64, pid: libc::pid_t) -> Option<u64> {
        let block = addr & !(BLOCK - 1);
        if block != self.block {
            self.block = NO_BLOCK;
            let local = libc::iovec {
                iov_base: self.words.as_mut_ptr().cast(),
                iov_len: BLOCK as usize,
            };
            let remote = libc::iovec {
                iov_base: std::ptr::without_provenance_mut(block as usize),
                iov_len: BLOCK as usize,
            };
            // SAFETY: `local` is our own buffer of BLOCK bytes; the kernel
            // checks `remote` and fails with EFAULT if it is not mapped.
            let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
            if n != BLOCK as isize {
                return None;
            }
            self.block = block;
        }
        Some(self.words[((addr - block) / 8) as usize])
    }
}

/// The kernel's `siginfo_t` for a POSIX timer signal (x86_64 and aarch64
/// layout: three ints, padding, then the `_timer` union member).
#[repr(C)]
struct TimerSigInfo {
    _signo: c_int,
    _errno: c_int,
    code: c_int,
    _pad: c_int,
    _timer_id: c_int,
    overrun: c_int,
    value: u64,
}

/// The interrupted code's instruction, frame and stack pointers.
///
/// # Safety
/// `ctx` is the `ucontext_t` the kernel passed to an `SA_SIGINFO` handler.
#[cfg(target_arch = "x86_64")]
unsafe fn registers(ctx: *const c_void) -> (u64, u64, u64) {
    // SAFETY: see the function's contract.
    let g = unsafe { &(*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs };
    (
        g[libc::REG_RIP as usize] as u64,
        g[libc::REG_RBP as usize] as u64,
        g[libc::REG_RSP as usize] as u64,
    )
}

/// The `SIGPROF` handler (see the module docs).
#[cfg(target_arch = "x86_64")]
extern "C" fn on_sigprof(_sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    // SAFETY: the kernel passes a valid siginfo and ucontext to an
    // SA_SIGINFO handler.
    unsafe { sample(info, ctx) };
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// # Safety
/// As `on_sigprof`'s arguments.
#[cfg(target_arch = "x86_64")]
unsafe fn sample(info: *const libc::siginfo_t, ctx: *const c_void) {
    if info.is_null() || ctx.is_null() {
        return;
    }
    // SAFETY: the kernel's siginfo starts with this layout; `value` is
    // meaningful only for SI_TIMER, checked before use.
    let info = unsafe { &*info.cast::<TimerSigInfo>() };
    if info.code != libc::SI_TIMER {
        return;
    }
    let Some(slot) = table().get((info.value & ((1 << INDEX_BITS) - 1)) as usize) else {
        return;
    };
    // The sample's time: first, so it is the interrupt's. The clock was
    // initialized before the handler was installed; `get` is then one load.
    let ticks = TraceClock::get().now();
    let Some(visit) = slot.enter(info.value) else {
        return;
    };
    let ring = visit.ring;
    if ring.tid != runtrace_core::clock::gettid() {
        return;
    }
    // SAFETY: see the function's contract.
    let (pc, fp, sp) = unsafe { registers(ctx) };
    let pid = OWN_PID.load(Ordering::Relaxed) as libc::pid_t;
    // Expiries the kernel merged into this signal (it checks a thread's CPU
    // timers only at ticks that find it running, and queues one signal per
    // timer at a time): the sample stands for all of them, so threads that
    // compete for a CPU are not under-represented.
    let weight = 1 + (info.overrun.max(0) as u64).min(MAX_WEIGHT - 1);
    // SAFETY: rule 5: this thread's handler is the ring's only producer,
    // and SIGPROF is blocked while it runs, so it does not nest.
    unsafe {
        ring.push(weight, |rec, window| {
            rec.ticks = ticks;
            window.block = NO_BLOCK; // the stack changed since the last sample
            rec.depth = walk(pc, fp, sp, &mut rec.frames, |a| window.read(a, pid));
        })
    };
}

/// Whether the handler may be installed over `old`, SIGPROF's current
/// disposition: the default, ignored (nothing handles it: our handler
/// ignores signals that are not its timers') or already ours.
fn may_install(old: libc::sighandler_t, ours: libc::sighandler_t) -> Result<(), String> {
    if old == libc::SIG_DFL || old == libc::SIG_IGN || old == ours {
        Ok(())
    } else {
        Err(format!(
            "SIGPROF already has a handler (at {old:#x}, another profiler?); \
             the signal sampler does not take it over"
        ))
    }
}

/// Installs the handler once per process (`sigaction`, SA_SIGINFO |
/// SA_RESTART); refuses to replace someone else's.
#[cfg(target_arch = "x86_64")]
fn install() -> Result<(), String> {
    let _g = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let ours = on_sigprof as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
    // SAFETY: a zeroed sigaction is a valid value to receive the old one.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: querying (null new action) with a valid out pointer.
    if unsafe { libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) } != 0 {
        return Err(format!(
            "sigaction(SIGPROF) query: {}",
            std::io::Error::last_os_error()
        ));
    }
    may_install(old.sa_sigaction, ours)?;
    if old.sa_sigaction == ours {
        return Ok(());
    }
    // SAFETY: as above.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = ours;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `sa_mask` is a valid sigset_t to clear.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    // SAFETY: installing a valid action; the handler is async-signal-safe.
    if unsafe { libc::sigaction(libc::SIGPROF, &new, std::ptr::null_mut()) } != 0 {
        return Err(format!(
            "sigaction(SIGPROF): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
fn install() -> Result<(), String> {
    Err(format!(
        "the signal sampler reads x86_64 registers only (this is {})",
        std::env::consts::ARCH
    ))
}

/// Whether `process_vm_readv` works on the own process (a seccomp filter,
/// e.g. an old container runtime's default, may forbid it).
fn can_read_own_memory(pid: libc::pid_t) -> Result<(), String> {
    let mut w = Window {
        block: NO_BLOCK,
        words: [0; (BLOCK / 8) as usize],
    };
    let probe = [0x5a5a_5a5a_5a5a_5a5au64; (2 * BLOCK / 8) as usize];
    let at = probe.as_ptr().addr() as u64;
    let at = (at + BLOCK - 1) & !(BLOCK - 1);
    match w.read(at, pid) {
        Some(0x5a5a_5a5a_5a5a_5a5a) => Ok(()),
        _ => Err(format!(
            "process_vm_readv on the own process failed ({}); the signal sampler \
             needs it to walk stacks without faulting",
            std::io::Error::last_os_error()
        )),
    }
}

/// A sampled thread (or one being retired: `timer` None).
#[derive(Debug)]
struct Thread {
    tid: u64,
    slot: &'static Slot,
    ring: NonNull<SampleRing>,
    timer: Option<libc::timer_t>,
    reported_lost: u64,
}

/// The timer + signal sampler: per-thread CPU-time timers, a `SIGPROF`
/// handler walking frame pointers, one sample ring per thread.
#[derive(Debug)]
pub(crate) struct SignalSampler {
    period: libc::timespec,
    threads: Vec<Thread>,
}

// SAFETY: timer ids are process-wide handles usable from any thread, and
// the rings are owned by the sampler (shared only with handlers, under the
// protocol).
unsafe impl Send for SignalSampler {}

impl SignalSampler {
    /// Installs the `SIGPROF` handler (once per process); `Err(reason)` if
    /// that is impossible: another handler owns `SIGPROF`,
    /// `process_vm_readv` is forbidden, or the architecture is not x86_64.
    /// `hz` is samples per second of each thread's CPU time, 1..=10000 (the
    /// kernel checks a thread's CPU timers at the ticks that find it
    /// running, at most one signal each, so rates above `CONFIG_HZ` are not
    /// reached, and fewer when threads compete for CPUs).
    pub(crate) fn new(hz: u32) -> Result<SignalSampler, String> {
        if !(1..=10_000).contains(&hz) {
            return Err(format!(
                "CPU profile rate {hz} Hz: the signal sampler takes 1..=10000"
            ));
        }
        // Before the handler can run: it must find the clock initialized.
        TraceClock::get();
        let pid = std::process::id();
        OWN_PID.store(u64::from(pid), Ordering::Relaxed);
        can_read_own_memory(pid as libc::pid_t)?;
        install()?;
        let ns = 1_000_000_000 / u64::from(hz);
        Ok(SignalSampler {
            period: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
            threads: Vec::new(),
        })
    }

    /// Starts sampling thread `tid` (of this process) every `1/hz` s of its
    /// CPU time; allocates its sample ring. A `tid` already sampled is
    /// restarted (its old ring is still drained).
    pub(crate) fn add_thread(&mut self, tid: u64) -> Result<(), String> {
        let Ok(tid32) = libc::pid_t::try_from(tid) else {
            return Err(format!("thread id {tid} out of range"));
        };
        if tid32 <= 0 {
            return Err(format!("thread id {tid} out of range"));
        }
        self.remove_thread(tid);
        let Some((index, slot)) = table().iter().enumerate().find(|(_, s)| {
            s.owned
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }) else {
            return Err(format!(
                "thread {tid}: all {TABLE_SIZE} signal-sampler slots are in use"
            ));
        };
        // 32 bits of generation: a key fits `Slot::state` (48 bits) and is
        // never 0.
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed) % 0xffff_ffff + 1;
        let key = (generation << INDEX_BITS) | index as u64;
        let ring = NonNull::from(Box::leak(Box::new(SampleRing::new(tid, RING_CAPACITY))));
        slot.publish(key, ring);
        // From here on the thread is ours to retire, whatever fails below.
        let mut thread = Thread {
            tid,
            slot,
            ring,
            timer: None,
            reported_lost: 0,
        };
        let result = self.start_timer(tid32, key);
        match result {
            Ok(timer) => thread.timer = Some(timer),
            Err(_) => slot.retire(),
        }
        self.threads.push(thread);
        result.map(|_| ())
    }

    /// Creates and arms `tid`'s CPU-time timer, carrying `key`.
    fn start_timer(&self, tid: libc::pid_t, key: u64) -> Result<libc::timer_t, String> {
        // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) from the kernel's
        // posix-timers.h: the CPU-time clock of another thread of this
        // process (the test `thread_clock_id_is_the_threads_cpu_clock`
        // checks it against CLOCK_THREAD_CPUTIME_ID).
        let clock: libc::clockid_t = (!tid << 3) | 6;
        // SAFETY: all-zero is a valid sigevent (the fields we need are set
        // below).
        let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
        ev.sigev_notify = libc::SIGEV_THREAD_ID;
        ev.sigev_signo = libc::SIGPROF;
        ev.sigev_notify_thread_id = tid;
        ev.sigev_value = libc::sigval {
            sival_ptr: std::ptr::without_provenance_mut(key as usize),
        };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid pointers to a sigevent and an out timer id.
        if unsafe { libc::timer_create(clock, &mut ev, &mut timer) } != 0 {
            return Err(format!(
                "thread {tid}: timer_create on its CPU clock: {} (thread exited?)",
                std::io::Error::last_os_error()
            ));
        }
        let spec = libc::itimerspec {
            it_interval: self.period,
            it_value: self.period,
        };
        // SAFETY: `timer` was just created; valid spec, no old value wanted.
        if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: deleting the timer we created.
            unsafe { libc::timer_delete(timer) };
            return Err(format!("thread {tid}: timer_settime: {e}"));
        }
        Ok(timer)
    }

    /// Stops sampling thread `tid` (rule 3). Its ring is still drained by
    /// later `drain` calls and freed once empty and quiescent (rule 4).
    /// Unknown threads are ignored.
    pub(crate) fn remove_thread(&mut self, tid: u64) {
        for t in self.threads.iter_mut().filter(|t| t.tid == tid) {
            if let Some(timer) = t.timer.take() {
                // SAFETY: a timer we created and have not deleted.
                unsafe { libc::timer_delete(timer) };
                t.slot.retire();
            }
        }
    }

    /// Moves every sample with `ticks <= cutoff_ticks` into `out` (per
    /// thread in time order; threads one after another). Returns the
    /// samples lost since the last call because a ring was full.
    pub(crate) fn drain(&mut self, cutoff_ticks: u64, out: &mut Vec<RawSample>) -> u64 {
        let mut lost = 0;
        self.threads.retain_mut(|t| {
            // Before draining: a ring seen quiescent gets no more samples,
            // so draining it to empty is final (rule 4).
            let quiescent = t.timer.is_none() && t.slot.quiescent();
            // SAFETY: the ring lives until this entry frees it below.
            let ring = unsafe { t.ring.as_ref() };
            ring.pop_until(cutoff_ticks, |r| {
                // One sample per timer period the record stands for (the
                // format has no weights; each `cpu_sample` is 1/hz of CPU).
                out.extend((0..r.weight).map(|_| RawSample {
                    tid: t.tid,
                    ticks: r.ticks,
                    kind: RawKind::OnCpu,
                    stack: r.frames[..r.depth].to_vec(),
                }))
            });
            let n = ring.lost.load(Ordering::Relaxed);
            lost += n - t.reported_lost;
            t.reported_lost = n;
            if quiescent && ring.is_empty() {
                // SAFETY: no handler can reach the ring any more (rule 4)
                // and this entry, its owner, is dropped now.
                drop(unsafe { Box::from_raw(t.ring.as_ptr()) });
                t.slot.release();
                return false;
            }
            true
        });
        lost
    }

    /// Threads with a ring (sampled, or retired but not yet freed).
    #[cfg(all(test, not(loom)))]
    fn rings(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for SignalSampler {
    /// Deletes every timer; frees the rings once no handler is inside them
    /// (waiting up to `DROP_GRACE`; a ring whose handler is still running
    /// then, on a stopped thread, is leaked rather than freed under it).
    fn drop(&mut self) {
        let tids: Vec<u64> = self.threads.iter().map(|t| t.tid).collect();
        for tid in tids {
            self.remove_thread(tid);
        }
        let deadline = std::time::Instant::now() + DROP_GRACE;
        loop {
            self.threads.retain(|t| {
                if !t.slot.quiescent() {
                    return true;
                }
                // SAFETY: quiescent and retired: no handler reaches the ring.
                drop(unsafe { Box::from_raw(t.ring.as_ptr()) });
                t.slot.release();
                false
            });
            if self.threads.is_empty() || std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The tests' producer: one record at `ticks` whose one frame is
/// `ticks * 10`. The caller must be the ring's only producer.
#[cfg(test)]
fn test_push(ring: &SampleRing, ticks: u64) -> bool {
    // SAFETY: the caller is the ring's only producer (see above).
    unsafe {
        ring.push(1, |r, _| {
            r.ticks = ticks;
            r.depth = 1;
            r.frames[0] = ticks * 10;
        })
    }
}

#[cfg(all(test, not(loom), target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{mpsc, Arc};

    /// A fake address space for `walk`: (address, word) pairs.
    fn memory(words: &[(u64, u64)]) -> impl FnMut(u64) -> Option<u64> + '_ {
        move |a| words.iter().find(|w| w.0 == a).map(|w| w.1)
    }

    #[test]
    fn walk_follows_frame_records_leaf_first() {
        // sp 0x1000; records at 0x1010 -> 0x1040 -> 0x1100 (next 0: the end).
        let m = [
            (0x1010, 0x1040),
            (0x1018, 0xa1),
            (0x1040, 0x1100),
            (0x1048, 0xa2),
            (0x1100, 0),
            (0x1108, 0xa3),
        ];
        let mut out = [0; 8];
        let n = walk(0x5000, 0x1010, 0x1000, &mut out, memory(&m));
        assert_eq!(&out[..n], &[0x5000, 0xa1, 0xa2, 0xa3]);
        // The depth limit holds.
        let mut out = [0; 2];
        let n = walk(0x5000, 0x1010, 0x1000, &mut out, memory(&m));
        assert_eq!(&out[..n], &[0x5000, 0xa1]);
        assert_eq!(walk(0x5000, 0x1010, 0x1000, &mut [], memory(&m)), 0);
    }

    #[test]
    fn walk_stops_at_records_it_cannot_believe() {
        let mut out = [0; 8];
        // A record pointing to itself, or downwards: a cycle.
        let m = [(0x1010, 0x1010), (0x1018, 0xa1)];
        assert_eq!(walk(1, 0x1010, 0x1000, &mut out, memory(&m)), 2);
        let m = [(0x1010, 0x1008), (0x1018, 0xa1), (0x1008, 0x1010)];
        assert_eq!(walk(1, 0x1010, 0x1000, &mut out, memory(&m)), 2);
        // Below the stack pointer, misaligned, far above it.
        let m = [(0x0ff0, 0), (0x0ff8, 0xa1)];
        assert_eq!(walk(1, 0x0ff0, 0x1000, &mut out, memory(&m)), 1);
        let m = [(0x1011, 0), (0x1019, 0xa1)];
        assert_eq!(walk(1, 0x1011, 0x1000, &mut out, memory(&m)), 1);
        let far = 0x1000 + MAX_STACK_SPAN + 8;
        let m = [(far, 0), (far + 8, 0xa1)];
        assert_eq!(walk(1, far, 0x1000, &mut out, memory(&m)), 1);
        // Unreadable memory, and a null return address.
        assert_eq!(walk(1, 0x1010, 0x1000, &mut out, memory(&[])), 1);
        let m = [(0x1010, 0x1040), (0x1018, 0)];
        assert_eq!(walk(1, 0x1010, 0x1000, &mut out, memory(&m)), 1);
    }

    #[test]
    fn window_reads_own_memory_and_refuses_unmapped() {
        let pid = std::process::id() as libc::pid_t;
        let mut w = Window {
            block: NO_BLOCK,
            words: [0; (BLOCK / 8) as usize],
        };
        let v = [0x1122_3344_5566_7788u64, 42];
        let a = v.as_ptr().addr() as u64;
        assert_eq!(w.read(a, pid), Some(v[0]));
        assert_eq!(w.read(a + 8, pid), Some(42));
        // Page zero is never mapped: an error, not a fault.
        assert_eq!(w.read(8, pid), None);
        assert_eq!(w.block, NO_BLOCK);
    }

    #[test]
    fn ring_hands_out_samples_up_to_the_cutoff_and_counts_losses() {
        let ring = SampleRing::new(7, 3);
        assert!(test_push(&ring, 10) && test_push(&ring, 20) && test_push(&ring, 30));
        assert!(!test_push(&ring, 40), "full");
        assert_eq!(ring.lost.load(Ordering::Relaxed), 1);
        // SAFETY: the test thread is the ring's only producer.
        assert!(!unsafe { ring.push(5, |_, _| ()) });
        assert_eq!(
            ring.lost.load(Ordering::Relaxed),
            6,
            "a loss counts its weight"
        );
        let mut got = Vec::new();
        assert_eq!(ring.pop_until(25, |r| got.push(r.ticks)), 2);
        assert_eq!(got, [10, 20]);
        assert!(test_push(&ring, 50) && test_push(&ring, 60));
        assert_eq!(ring.pop_until(u64::MAX, |r| got.push(r.frames[0] / 10)), 3);
        assert_eq!(got, [10, 20, 30, 50, 60]);
        assert!(ring.is_empty());
    }

    #[test]
    fn install_refuses_someone_elses_handler() {
        let ours = 0x1234;
        assert!(may_install(libc::SIG_DFL, ours).is_ok());
        assert!(may_install(libc::SIG_IGN, ours).is_ok());
        assert!(may_install(ours, ours).is_ok());
        let e = may_install(0x5678, ours).unwrap_err();
        assert!(e.contains("SIGPROF already has a handler"), "{e}");
    }

    #[test]
    fn rejects_bad_rates_and_thread_ids() {
        assert!(SignalSampler::new(0).unwrap_err().contains("0 Hz"));
        assert!(SignalSampler::new(10_001).is_err());
        let mut s = SignalSampler::new(100).unwrap();
        assert!(s.add_thread(0).unwrap_err().contains("out of range"));
        assert!(s.add_thread(1 << 40).unwrap_err().contains("out of range"));
        assert_eq!(s.rings(), 0);
    }

    #[test]
    fn thread_clock_id_is_the_threads_cpu_clock() {
        let tid = runtrace_core::clock::gettid() as libc::pid_t;
        let read = |c: libc::clockid_t| {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid out pointer.
            assert_eq!(unsafe { libc::clock_gettime(c, &mut t) }, 0);
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        };
        spin_cpu(Duration::from_millis(20));
        let a = read((!tid << 3) | 6);
        let b = read(libc::CLOCK_THREAD_CPUTIME_ID);
        assert!(a >= 20_000_000 && b >= a && b - a < 5_000_000, "{a} {b}");
    }

    /// This thread's CPU time.
    fn cpu_now() -> Duration {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    /// The busy function the sampling test looks for: a loop without
    /// calls (the `asm!` keeps it from being folded away).
    #[inline(never)]
    fn sig_test_spin_target(n: u64) -> u64 {
        let (mut x, mut i) = (n | 1, 0);
        while i < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // SAFETY: an empty asm block; it only hides `x` from the optimizer.
            unsafe { std::arch::asm!("/* {0} */", inout(reg) x) };
            i += 1;
        }
        x
    }

    /// Calls the target until this thread has used `cpu` of CPU time.
    #[inline(never)]
    fn sig_test_spin_driver(cpu: Duration) -> u64 {
        let end = cpu_now() + cpu;
        let mut x = 0;
        while cpu_now() < end {
            x ^= sig_test_spin_target(200_000);
        }
        x
    }

    fn spin_cpu(cpu: Duration) {
        std::hint::black_box(sig_test_spin_driver(cpu));
    }

    /// `[f, f + size)` of the function whose symbol contains `name`.
    fn function_range(f: usize, name: &str) -> std::ops::Range<u64> {
        use object::{Object, ObjectSymbol};
        let data = std::fs::read("/proc/self/exe").expect("read the test binary");
        let file = object::File::parse(&*data).expect("parse the test binary");
        let sym = file
            .symbols()
            .find(|s| s.size() > 0 && s.name().is_ok_and(|n| n.contains(name)))
            .unwrap_or_else(|| panic!("no symbol {name} in the test binary"));
        f as u64..f as u64 + sym.size()
    }

    /// A thread that tells its tid, spins `cpu` once told to, then exits.
    fn spinner(cpu: Duration) -> (u64, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tid_tx.send(runtrace_core::clock::gettid()).unwrap();
            if go_rx.recv().is_ok() {
                spin_cpu(cpu);
            }
        });
        (tid_rx.recv().unwrap(), go_tx, h)
    }

    #[test]
    fn samples_a_busy_thread_inside_its_function() {
        let target = function_range(
            sig_test_spin_target as *const () as usize,
            "sig_test_spin_target",
        );
        let driver = function_range(
            sig_test_spin_driver as *const () as usize,
            "sig_test_spin_driver",
        );
        let mut s = SignalSampler::new(500).unwrap();
        let clock = TraceClock::get();
        let (tid, go, h) = spinner(Duration::from_millis(300));
        let t0 = clock.now();
        s.add_thread(tid).unwrap();
        go.send(()).unwrap();
        h.join().unwrap();
        let t1 = clock.now();
        let mut out = Vec::new();
        assert_eq!(s.drain(u64::MAX, &mut out), 0, "no losses");
        // The thread exited before it was removed: no crash, ring freed.
        s.remove_thread(tid);
        let mut none = Vec::new();
        s.drain(u64::MAX, &mut none);
        assert!(none.is_empty());
        assert_eq!(s.rings(), 0);
        // 300 ms of CPU time at 500 Hz is 150 periods, signals and merged
        // expiries (module docs) together. The thread can exit with one
        // signal still pending, its periods lost: >= 90.
        assert!((90..=170).contains(&out.len()), "{} samples", out.len());
        assert!(out.windows(2).all(|w| w[0].ticks <= w[1].ticks));
        assert!(out
            .iter()
            .all(|r| r.tid == tid && (t0..=t1).contains(&r.ticks)));
        assert!(out.iter().all(|r| matches!(r.kind, RawKind::OnCpu)));
        // The interrupted instruction is in the target and its caller's
        // return address is in the driver: the walk followed the frames.
        let walked = out
            .iter()
            .filter(|r| {
                r.stack.len() >= 3 && target.contains(&r.stack[0]) && driver.contains(&r.stack[1])
            })
            .count();
        assert!(
            walked * 10 >= out.len() * 8,
            "{walked} of {} samples in target <- driver",
            out.len()
        );
    }

    #[test]
    fn several_threads_each_fill_their_own_ring() {
        let mut s = SignalSampler::new(500).unwrap();
        let spinners: Vec<_> = (0..3)
            .map(|_| spinner(Duration::from_millis(200)))
            .collect();
        for (tid, _, _) in &spinners {
            s.add_thread(*tid).unwrap();
        }
        for (_, go, _) in &spinners {
            go.send(()).unwrap();
        }
        let tids: Vec<u64> = spinners.iter().map(|t| t.0).collect();
        for (_, _, h) in spinners {
            h.join().unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(s.drain(u64::MAX, &mut out), 0);
        for tid in &tids {
            let mine: Vec<_> = out.iter().filter(|r| r.tid == *tid).collect();
            // 200 ms of CPU: 100 periods (see the single-thread test).
            assert!(
                (60..=120).contains(&mine.len()),
                "thread {tid}: {} samples",
                mine.len()
            );
            assert!(mine.windows(2).all(|w| w[0].ticks <= w[1].ticks));
            s.remove_thread(*tid);
        }
        assert!(out.iter().all(|r| tids.contains(&r.tid)));
        s.drain(u64::MAX, &mut out);
        assert_eq!(s.rings(), 0);
    }

    /// Sends this thread the signal a timer carrying `key` would, with
    /// `overrun` expiries merged into it.
    fn fake_timer_signal_merging(key: u64, overrun: c_int) {
        // SAFETY: all-zero is a valid siginfo_t.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        {
            // SAFETY: siginfo_t (128 bytes) starts with TimerSigInfo's layout.
            let t = unsafe { &mut *(&mut info as *mut libc::siginfo_t).cast::<TimerSigInfo>() };
            t._signo = libc::SIGPROF;
            t.code = libc::SI_TIMER;
            t.overrun = overrun;
            t.value = key;
        }
        // SAFETY: queueing a signal to this thread of this process, whose
        // handler is installed; a process may send itself any si_code.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                std::process::id() as libc::pid_t,
                runtrace_core::clock::gettid() as libc::pid_t,
                libc::SIGPROF,
                &info,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    }

    fn fake_timer_signal(key: u64) {
        fake_timer_signal_merging(key, 0);
    }

    /// The slot and key of a sampled thread (test helper).
    fn key_of(s: &SignalSampler, tid: u64) -> u64 {
        let t = s.threads.iter().find(|t| t.tid == tid && t.timer.is_some());
        t.unwrap().slot.key()
    }

    #[inline(never)]
    fn sig_test_known_caller(key: u64) {
        fake_timer_signal(key);
        std::hint::black_box(());
    }

    #[test]
    fn handler_takes_the_stack_of_the_interrupted_code() {
        let caller = function_range(
            sig_test_known_caller as *const () as usize,
            "sig_test_known_caller",
        );
        let me = runtrace_core::clock::gettid();
        let mut s = SignalSampler::new(1).unwrap(); // 1 Hz: the timer stays quiet
        s.add_thread(me).unwrap();
        let key = key_of(&s, me);
        // The signal is handled before the syscall returns to the caller.
        sig_test_known_caller(key);
        // A signal with merged expiries counts once per period (capped).
        fake_timer_signal_merging(key, 2);
        fake_timer_signal_merging(key, c_int::MAX);
        fake_timer_signal_merging(key, -5);
        // Stale and foreign keys are ignored.
        fake_timer_signal(key ^ (1 << INDEX_BITS));
        fake_timer_signal(0);
        let mut out = Vec::new();
        s.drain(u64::MAX, &mut out);
        assert_eq!(out.len(), 1 + 3 + MAX_WEIGHT as usize + 1);
        assert!(out.windows(2).all(|w| w[0].ticks <= w[1].ticks));
        assert!(out[1..4]
            .iter()
            .all(|r| r.ticks == out[1].ticks && r.stack == out[1].stack));
        assert!(out[1].ticks < out[4].ticks);
        let st = &out[0].stack;
        assert!(st.len() >= 3 && st.len() <= MAX_DEPTH, "{st:x?}");
        assert!(
            st.iter().any(|a| caller.contains(a)),
            "no frame in {caller:x?}: {st:x?}"
        );
        // A handler on another thread than the ring's does not write to it.
        let other = std::thread::spawn(move || fake_timer_signal(key));
        other.join().unwrap();
        s.remove_thread(me);
        // A signal queued after the removal finds no key.
        fake_timer_signal(key);
        out.clear();
        s.drain(u64::MAX, &mut out);
        assert!(out.is_empty());
        assert_eq!(s.rings(), 0);
    }

    #[test]
    fn threads_removed_while_sampled_or_already_gone() {
        let mut s = SignalSampler::new(1000).unwrap();
        // Removed while it spins: the handler may be running right then.
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let (tid_tx, tid_rx) = mpsc::channel();
        let h = std::thread::spawn(move || {
            tid_tx.send(runtrace_core::clock::gettid()).unwrap();
            while !st.load(Ordering::Relaxed) {
                std::hint::black_box(sig_test_spin_target(10_000));
            }
        });
        let tid = tid_rx.recv().unwrap();
        s.add_thread(tid).unwrap();
        // Re-adding restarts it (the old ring is drained, then freed).
        s.add_thread(tid).unwrap();
        let mut out = Vec::new();
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while out.len() < 5 && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
            s.drain(u64::MAX, &mut out);
        }
        assert!(out.len() >= 5, "{} samples", out.len());
        s.remove_thread(tid);
        // Once retired and quiescent, a drain frees the ring.
        while s.rings() > 0 && std::time::Instant::now() < end {
            s.drain(u64::MAX, &mut out);
        }
        assert_eq!(s.rings(), 0);
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        // A thread that has exited cannot be sampled: a message, no slot kept.
        let e = s.add_thread(tid).unwrap_err();
        assert!(e.contains("timer_create"), "{e}");
        s.drain(u64::MAX, &mut out);
        assert_eq!(s.rings(), 0);
    }

    #[test]
    fn drop_deletes_timers_and_frees_rings() {
        let (tid, go, h) = spinner(Duration::from_millis(50));
        let (slot, key, timer) = {
            let mut s = SignalSampler::new(1000).unwrap();
            s.add_thread(tid).unwrap();
            go.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            let t = &s.threads[0];
            (t.slot, key_of(&s, tid), t.timer.unwrap())
        };
        // The thread keeps running without a timer (the kernel does not
        // reuse timer ids soon), and its slot no longer has its key.
        // SAFETY: all-zero is a valid itimerspec.
        let mut spec: libc::itimerspec = unsafe { std::mem::zeroed() };
        // SAFETY: querying a timer id; a deleted one gives EINVAL.
        assert_eq!(unsafe { libc::timer_gettime(timer, &mut spec) }, -1);
        assert_ne!(slot.key(), key);
        h.join().unwrap();
        let mut s = SignalSampler::new(1000).unwrap();
        let me = runtrace_core::clock::gettid();
        s.add_thread(me).unwrap();
        s.remove_thread(me);
        s.drain(u64::MAX, &mut Vec::new());
        assert_eq!(s.rings(), 0);
    }

    /// Signals this thread from `depth` nested frames of ~300 bytes each.
    #[inline(never)]
    fn sig_test_deep(depth: u32, key: u64) {
        let pad = std::hint::black_box([depth as u8; 256]);
        if depth == 0 {
            fake_timer_signal(key);
        } else {
            sig_test_deep(depth - 1, key);
        }
        std::hint::black_box(pad);
    }

    /// Not a test but the handler's benchmark (ignored by default): median
    /// CPU cost per signal, side by side in rounds, of a full sample (key
    /// found, stack walked) and of delivery alone (key not found), from a
    /// shallow stack and from 40 frames (~12 KiB) deeper.
    /// `cargo test -p runtrace-profile --release --lib -- --ignored
    /// --nocapture bench_signal_handler`
    #[test]
    #[ignore]
    fn bench_signal_handler() {
        const N: usize = 200; // fewer than a ring holds
        let me = runtrace_core::clock::gettid();
        let mut s = SignalSampler::new(1).unwrap();
        s.add_thread(me).unwrap();
        let key = key_of(&s, me);
        let stale = key ^ (1 << INDEX_BITS);
        // This thread's CPU time, not wall time: on a shared machine the
        // thread also waits for a CPU, which is not the handler's cost.
        let per_signal = |f: &dyn Fn()| {
            let t = cpu_now();
            (0..N).for_each(|_| f());
            (cpu_now() - t).as_nanos() as f64 / N as f64
        };
        let cases: [(&str, &dyn Fn(u64)); 2] = [
            ("shallow", &|k| sig_test_known_caller(k)),
            ("deep", &|k| sig_test_deep(40, k)),
        ];
        for (name, signal) in cases {
            let (mut sampled, mut bare, mut depth) = (Vec::new(), Vec::new(), 0);
            for _ in 0..21 {
                bare.push(per_signal(&|| signal(stale)));
                sampled.push(per_signal(&|| signal(key)));
                let mut out = Vec::with_capacity(N);
                assert_eq!(s.drain(u64::MAX, &mut out), 0);
                assert_eq!(out.len(), N);
                depth = out[0].stack.len();
            }
            let median = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let (f, b) = (median(&mut sampled), median(&mut bare));
            println!(
                "{name} ({depth} frames): per signal sampled {f:.0} ns, not sampled {b:.0} ns, \
                 sample work {:.0} ns, ratio {:.2}",
                f - b,
                f / b
            );
        }
    }
}

/// Model checks: `RUSTFLAGS="--cfg loom" cargo test -p runtrace-profile
/// --release --lib loom_`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Rule 5: a handler pushes three samples into a two-record ring while
    /// the writer drains with a cutoff: every sample is received once, in
    /// order and intact, or counted lost; no record is read while written.
    #[test]
    fn loom_sample_ring_spsc() {
        loom::model(|| {
            let ring = Arc::new(SampleRing::new(1, 2));
            let r = ring.clone();
            let producer =
                loom::thread::spawn(move || (1..=3).filter(|&t| test_push(&r, t)).count() as u64);
            let mut got = Vec::new();
            ring.pop_until(2, |r| got.push((r.ticks, r.frames[0])));
            assert!(got.iter().all(|&(t, _)| t <= 2));
            let pushed = producer.join().unwrap();
            ring.pop_until(u64::MAX, |r| got.push((r.ticks, r.frames[0])));
            assert_eq!(got.len() as u64, pushed);
            assert_eq!(ring.lost.load(Ordering::Relaxed), 3 - pushed);
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{got:?}");
            assert!(got.iter().all(|&(t, f)| f == t * 10));
        });
    }

    /// Rules 2-4: a handler races the sampler retiring its slot. Once the
    /// slot is seen quiescent, the sample (if the handler got in) is in the
    /// ring, and freeing the ring races no handler access.
    #[test]
    fn loom_slot_retire_then_free() {
        loom::model(|| {
            let slot = Arc::new(Slot {
                owned: AtomicU64::new(1),
                state: AtomicU64::new(0),
                ring: AtomicU64::new(0),
            });
            let ring = NonNull::from(Box::leak(Box::new(SampleRing::new(1, 2))));
            slot.publish(5, ring);
            let s = slot.clone();
            let handler =
                loom::thread::spawn(move || s.enter(5).is_some_and(|v| test_push(v.ring, 1)));
            slot.retire();
            while !slot.quiescent() {
                loom::thread::yield_now();
            }
            // SAFETY: retired and quiescent: the writer alone holds the ring.
            let r = unsafe { ring.as_ref() };
            let mut n = 0;
            r.pop_until(u64::MAX, |_| n += 1);
            // What freeing does to the memory, visible to loom's checker.
            for rec in r.records.iter() {
                rec.with_mut(|_| ());
            }
            r.window.with_mut(|_| ());
            let pushed = handler.join().unwrap();
            assert_eq!(n, u64::from(pushed));
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(ring.as_ptr()) });
            slot.release();
        });
    }
}
