//! CPU sampling with `perf_event_open`: on-CPU, a software `cpu-clock`
//! event sampling the user stack (frame-pointer callchain) at `hz`; off-CPU,
//! per recorded thread a context-switch event sampling the stack at every
//! switch-out, with `PERF_RECORD_SWITCH` records telling when it ran again.
//!
//! The on-CPU events are per CPU (pid -1) where the kernel allows it (root,
//! `CAP_PERFMON`, `perf_event_paranoid` <= 0), keeping the samples of this
//! process's recorded threads: a per-thread event is taken off and put back
//! on the CPU at every context switch of its thread, which measured
//! +2.4 µs per switch on the reference VM (its `hrtimer` is cancelled and
//! re-armed), while a per-CPU event's timer keeps running and costs a
//! switch nothing (docs/cpu-profile.md, "Cost"). Where
//! per-CPU events are refused, or with `RUNTRACE_CPU_FALLBACK=perf-thread`,
//! each recorded thread gets its own `cpu-clock` event.
//!
//! Each event has its own mmap ring, written by the kernel and read by the
//! writer thread only (the perf ring protocol: `data_head` loaded with
//! Acquire, pairing with the kernel's store after it wrote the records;
//! `data_tail` stored with Release, so the kernel reuses the space only
//! after we copied it). Times are `CLOCK_MONOTONIC` (`use_clockid`),
//! converted to trace ticks with one pair of clock reads per drain.
//!
//! Nothing here runs on the application's threads: the kernel samples
//! them, the writer thread reads.

use crate::sample::{take_up_to, ClockPair, RawKind, RawSample};
use crate::unwind::{Regs, Unwinder, STACK_COPY};
// std's atomics under loom too: these words live in memory the kernel
// shares with us, outside every model (see `sync.rs`).
use crate::sync::{Ordering, StaticAtomicU64 as AtomicU64};
use perf_event_open_sys::bindings as sys;
use runtrace_core::clock::TraceClock;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Most frames kept per stack (docs/format.md, STACKS: depth <= 128).
const MAX_DEPTH: usize = 128;
/// Data pages per context-switch ring, tried in order (a smaller ring if
/// the locked-memory limit refuses a larger one); on-CPU rings are sized
/// by [`cpu_ring_pages`].
const SWITCH_PAGES: [usize; 3] = [64, 16, 4];
/// The user registers taken with an on-CPU sample: `rbp`, `rsp`, `rip`
/// (`PERF_REG_X86_BP`, `_SP`, `_IP`: bits 6, 7, 8; the kernel writes
/// them in bit order).
const REGS_USER: u64 = 1 << 6 | 1 << 7 | 1 << 8;

/// How the events are opened, decided once by probing the calling thread.
#[derive(Clone, Copy)]
struct Setup {
    hz: u32,
    /// Kernel-mode samples are refused (`perf_event_paranoid` >= 2 without
    /// CAP_PERFMON): sample user time only.
    exclude_kernel: bool,
    /// Context-switch sampling works (it needs kernel samples).
    off_cpu: bool,
    /// `sample_max_stack` accepted.
    max_stack: bool,
    /// Bytes of user stack copied with each on-CPU sample, with the user
    /// registers, for [`Unwinder`]; 0: none (turned off, or refused by
    /// the kernel or the architecture).
    stack_copy: u32,
}

/// The perf backend of the profiler (same interface as the signal one).
pub(crate) struct PerfSampler {
    setup: Setup,
    clock: &'static TraceClock,
    /// Per-CPU on-CPU rings; empty when each thread has its own event.
    cpus: Vec<Ring>,
    /// This process's id, to keep its samples from the per-CPU rings.
    pid: u32,
    /// Threads whose per-CPU samples are kept: the sampled ones, and the
    /// ones removed since the last drain (their last samples may still be
    /// in the rings).
    keep: std::collections::HashSet<u64>,
    retiring: Vec<u64>,
    threads: Vec<Thread>,
    /// Converted samples newer than the last cutoff.
    pending: Vec<RawSample>,
    lost: u64,
    scratch: Vec<u8>,
    /// A `RUNTRACE_CPU_STACK_COPY` value not understood, said once.
    copy_problem: Option<String>,
    /// Why off-CPU stacks are missing, if they are.
    pub(crate) off_cpu_problem: Option<String>,
}

struct Thread {
    tid: u64,
    /// Its own on-CPU event (none when per-CPU events sample it).
    cpu: Option<Ring>,
    switches: Option<Ring>,
    /// The last switch-out not yet matched by a switch-in:
    /// (CLOCK_MONOTONIC ns, stack).
    out: Option<(u64, Vec<u64>)>,
}

/// One event's fd and its mmap ring.
struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    page: usize,
}

// SAFETY: the mapping belongs to this `Ring` alone (unmapped in Drop); only
// the writer thread that owns the sampler reads or writes it.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `Ring::map`, not yet
        // unmapped, and no reference into it outlives `self`.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

impl PerfSampler {
    /// Probes `perf_event_open` on the calling thread; Err(reason) when it
    /// is refused (the profiler then tries the signal fallback). Per-CPU
    /// on-CPU events unless `per_thread` or the kernel refuses them;
    /// off-CPU stacks if `off_cpu` and the kernel allows them.
    pub(crate) fn new(
        hz: u32,
        clock: &'static TraceClock,
        per_thread: bool,
        off_cpu: bool,
    ) -> Result<PerfSampler, String> {
        let tid = runtrace_core::clock::gettid();
        let mut setup = Setup {
            hz,
            exclude_kernel: false,
            off_cpu: false,
            max_stack: true,
            stack_copy: 0,
        };
        // Read once, here (docs/cpu-profile.md, "Through functions without
        // frame pointers"); a bad value is said in the PROFILE message.
        let mut copy_problem = None;
        if cfg!(target_arch = "x86_64") {
            match stack_copy_setting(std::env::var("RUNTRACE_CPU_STACK_COPY").ok().as_deref()) {
                Ok(n) => setup.stack_copy = n,
                Err(e) => {
                    copy_problem = Some(e);
                    setup.stack_copy = STACK_COPY;
                }
            }
        }
        // Kernel samples first (a thread busy in syscalls is sampled too,
        // with its user stack), user-only where that is refused.
        let probe = loop {
            match open(&setup, tid, Kind::Cpu) {
                Ok(fd) => break fd,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && setup.stack_copy > 0 => {
                    setup.stack_copy = 0
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && setup.max_stack => {
                    setup.max_stack = false
                }
                Err(e) if is_permission(&e) && !setup.exclude_kernel => setup.exclude_kernel = true,
                Err(e) => return Err(refused(&e)),
            }
        };
        Ring::map(probe, &cpu_ring_pages(setup.hz, setup.stack_copy))
            .map_err(|e| format!("perf_event_open works but its ring cannot be mapped: {e}"))?;
        let mut off_cpu_problem = None;
        if !off_cpu {
            off_cpu_problem = Some(
                "no off-CPU stacks: turned off (off_cpu_stacks(false) or RUNTRACE_CPU_OFF_CPU=off)"
                    .to_string(),
            );
        } else if setup.exclude_kernel {
            off_cpu_problem = Some(
                "no off-CPU stacks: context-switch samples need kernel events (perf_event_paranoid <= 1 or CAP_PERFMON)"
                    .to_string(),
            );
        } else {
            match open(&setup, tid, Kind::Switches) {
                Ok(_) => setup.off_cpu = true,
                Err(e) => {
                    off_cpu_problem = Some(format!(
                        "no off-CPU stacks: context-switch event refused: {e}"
                    ))
                }
            }
        }
        let cpus = if per_thread {
            Vec::new()
        } else {
            open_per_cpu(&setup).unwrap_or_default()
        };
        Ok(PerfSampler {
            setup,
            clock,
            cpus,
            pid: std::process::id(),
            keep: Default::default(),
            retiring: Vec::new(),
            threads: Vec::new(),
            pending: Vec::new(),
            lost: 0,
            scratch: Vec::new(),
            copy_problem,
            off_cpu_problem,
        })
    }

    /// Whether off-CPU (context-switch) stacks are recorded.
    pub(crate) fn off_cpu(&self) -> bool {
        self.setup.off_cpu
    }

    /// How the on-CPU samples are taken, for the `PROFILE` message.
    pub(crate) fn on_cpu_events(&self) -> String {
        let copy = if self.setup.stack_copy > 0 {
            format!(
                ", stacks past frames without frame pointers unwound from a {} KiB stack copy",
                self.setup.stack_copy >> 10
            )
        } else {
            String::new()
        };
        let copy = match &self.copy_problem {
            Some(p) => format!("{copy} ({p})"),
            None => copy,
        };
        if self.cpus.is_empty() {
            format!("on-CPU: a cpu-clock event per thread{copy}")
        } else {
            format!(
                "on-CPU: per-CPU cpu-clock events ({} CPUs), this process's recorded threads kept{copy}",
                self.cpus.len()
            )
        }
    }

    /// Starts sampling thread `tid` of this process.
    pub(crate) fn add_thread(&mut self, tid: u64) -> Result<(), String> {
        if self.threads.iter().any(|t| t.tid == tid) {
            return Ok(());
        }
        // Each of the thread's own events, if it has them; Ok(None): the
        // thread already exited, nothing left to sample.
        let ring = |wanted: bool, kind, pages: &[usize], what: &str| {
            if !wanted {
                return Ok(Some(None));
            }
            match open(&self.setup, tid, kind) {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
                r => r
                    .and_then(|fd| Ring::map(fd, pages))
                    .map(|r| Some(Some(r)))
                    .map_err(|e| format!("thread {tid}: {what} sampling: {e}")),
            }
        };
        let pages = cpu_ring_pages(self.setup.hz, self.setup.stack_copy);
        let Some(cpu) = ring(self.cpus.is_empty(), Kind::Cpu, &pages, "cpu-clock")? else {
            return Ok(());
        };
        let Some(switches) = ring(
            self.setup.off_cpu,
            Kind::Switches,
            &SWITCH_PAGES,
            "context-switch",
        )?
        else {
            return Ok(());
        };
        self.keep.insert(tid);
        self.threads.push(Thread {
            tid,
            cpu,
            switches,
            out: None,
        });
        Ok(())
    }

    /// Stops sampling a thread (after taking what its rings still hold;
    /// `unwinder` completes on-CPU stacks whose leaf keeps no frame
    /// pointer, as in [`Self::drain`]).
    pub(crate) fn remove_thread(&mut self, tid: u64, unwinder: &mut Unwinder) {
        let Some(i) = self.threads.iter().position(|t| t.tid == tid) else {
            return;
        };
        let pair = ClockPair::read(self.clock);
        let mut t = self.threads.swap_remove(i);
        self.read_thread(&mut t, &pair, unwinder);
        // Its last per-CPU samples are taken at the next drain.
        self.retiring.push(tid);
    }

    /// Moves every sample with ticks <= `cutoff_ticks` into `out` (any
    /// order); returns the samples lost since the last call. `unwinder`
    /// completes on-CPU stacks whose leaf keeps no frame pointer (the
    /// profiler's one unwinder, shared with the switch tracer's off-CPU
    /// stacks: each module's unwind tables are loaded once).
    pub(crate) fn drain(
        &mut self,
        cutoff_ticks: u64,
        out: &mut Vec<RawSample>,
        unwinder: &mut Unwinder,
    ) -> u64 {
        let pair = ClockPair::read(self.clock);
        let mut threads = std::mem::take(&mut self.threads);
        for t in &mut threads {
            self.read_thread(t, &pair, unwinder);
        }
        self.threads = threads;
        self.read_cpus(&pair, unwinder);
        for tid in self.retiring.drain(..) {
            self.keep.remove(&tid);
        }
        take_up_to(&mut self.pending, cutoff_ticks, out);
        std::mem::take(&mut self.lost)
    }

    /// Takes the per-CPU rings' samples of the threads in `keep`.
    fn read_cpus(&mut self, pair: &ClockPair, unwinder: &mut Unwinder) {
        let (pid, keep) = (self.pid, &self.keep);
        let pending = &mut self.pending;
        let lost = &mut self.lost;
        let copy = self.setup.stack_copy > 0;
        for ring in &mut self.cpus {
            ring.read(&mut self.scratch, |ty, _, rec| match ty {
                // Other processes' samples (and the idle task's) are
                // dropped before their stack is parsed.
                sys::PERF_RECORD_SAMPLE
                    if sample_ids(rec).is_some_and(|(p, t)| p == pid && keep.contains(&t)) =>
                {
                    if let Some(s) = parse_sample(rec, copy) {
                        pending.push(s.on_cpu(pair, unwinder, rec));
                    }
                }
                // Lost records are counted whoever's samples they were:
                // the kernel does not say.
                sys::PERF_RECORD_LOST => *lost += lost_count(rec),
                _ => {}
            });
        }
    }

    fn read_thread(&mut self, t: &mut Thread, pair: &ClockPair, unwinder: &mut Unwinder) {
        let tid = t.tid;
        let pending = &mut self.pending;
        let lost = &mut self.lost;
        let copy = self.setup.stack_copy > 0;
        if let Some(cpu) = t.cpu.as_mut() {
            cpu.read(&mut self.scratch, |ty, _, rec| match ty {
                sys::PERF_RECORD_SAMPLE => {
                    if let Some(s) = parse_sample(rec, copy) {
                        pending.push(RawSample {
                            tid,
                            ..s.on_cpu(pair, unwinder, rec)
                        });
                    }
                }
                sys::PERF_RECORD_LOST => *lost += lost_count(rec),
                _ => {}
            });
        }
        let Some(sw) = t.switches.as_mut() else {
            return;
        };
        let out = &mut t.out;
        sw.read(&mut self.scratch, |ty, misc, rec| match ty {
            // The switch-out: where the thread blocked (or was preempted).
            sys::PERF_RECORD_SAMPLE => *out = parse_sample(rec, false).map(|s| (s.time, s.stack)),
            sys::PERF_RECORD_SWITCH if misc & sys::PERF_RECORD_MISC_SWITCH_OUT as u16 == 0 => {
                // The switch-in ends the interval the last switch-out began.
                if let (Some((t_out, stack)), Some(t_in)) = (out.take(), switch_time(rec)) {
                    pending.push(RawSample {
                        tid,
                        ticks: pair.ticks(t_in),
                        kind: RawKind::OffCpu {
                            off_ns: t_in.saturating_sub(t_out),
                        },
                        stack,
                    });
                }
            }
            sys::PERF_RECORD_LOST => *lost += lost_count(rec),
            _ => {}
        });
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Cpu,
    Switches,
}

/// `RUNTRACE_CPU_STACK_COPY`: `off` (or 0), or the bytes of stack copied
/// with each on-CPU sample, `N` or `NK` (KiB), 1K to 60K (a sample record
/// is at most 64 KiB); unset: [`STACK_COPY`]. Err names the variable.
pub(crate) fn stack_copy_setting(v: Option<&str>) -> Result<u32, String> {
    let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(STACK_COPY);
    };
    if v.eq_ignore_ascii_case("off") {
        return Ok(0);
    }
    let (digits, unit) = match v.strip_suffix(['K', 'k']) {
        Some(d) => (d, 1024),
        None => (v, 1),
    };
    let bad = || {
        format!(
            "RUNTRACE_CPU_STACK_COPY={v:?} not understood (off, or bytes from 1K to 60K such as 16K); using {}K",
            STACK_COPY >> 10
        )
    };
    let n = digits
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(bad)?;
    match n {
        0 => Ok(0),
        1024..=61440 => Ok(n & !7),
        _ => Err(bad()),
    }
}

fn is_permission(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// Why perf_event_open cannot be used, for the PROFILE message.
fn refused(e: &io::Error) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    match e.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::ENOENT) => {
            format!("perf_event_open is not available ({e})")
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_open refused ({e}; kernel.perf_event_paranoid={paranoid}; containers often forbid it via seccomp)"
        ),
        _ => format!("perf_event_open failed: {e}"),
    }
}

/// The online CPUs' numbers (`/sys/devices/system/cpu/online`, e.g.
/// `0-3,6`), else 0..the configured count.
fn online_cpus() -> Vec<i32> {
    let parse = |text: &str| -> Option<Vec<i32>> {
        let mut cpus = Vec::new();
        for part in text.trim().split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (a, b): (i32, i32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            if b < a || b - a > 4096 {
                return None;
            }
            cpus.extend(a..=b);
        }
        Some(cpus)
    };
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| parse(&t))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| {
            // SAFETY: sysconf has no preconditions.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1);
            (0..n as i32).collect()
        })
}

/// Data pages of an on-CPU ring, tried in order: room for 100 ms of
/// samples at `hz` (twice the writer's default drain period), each with
/// its callchain and `stack_copy` bytes of stack, as a power of two from
/// 16 to 512 pages (64 KiB to 2 MiB), then smaller where the locked-memory
/// limit refuses it. A per-CPU ring samples every process on its CPU, so
/// it takes `hz` samples a second too.
fn cpu_ring_pages(hz: u32, stack_copy: u32) -> [usize; 4] {
    let bytes = (hz as usize / 10 + 1) * (stack_copy as usize + 1200);
    let first = bytes.div_ceil(4096).next_power_of_two().clamp(16, 512);
    [first, first / 4, first / 16, 1]
}

/// One cpu-clock event per online CPU, all or none (a CPU left out would
/// leave its threads unsampled): None where per-CPU events are refused.
fn open_per_cpu(s: &Setup) -> Option<Vec<Ring>> {
    online_cpus()
        .into_iter()
        .map(|cpu| {
            open_on(s, -1, cpu, Kind::Cpu)
                .and_then(|fd| Ring::map(fd, &cpu_ring_pages(s.hz, s.stack_copy)))
                .ok()
        })
        .collect()
}

fn open(s: &Setup, tid: u64, kind: Kind) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    open_on(s, pid, -1, kind)
}

/// `perf_event_open` for thread `pid` on any CPU, or (pid -1) for every
/// thread on `cpu`.
fn open_on(s: &Setup, pid: libc::pid_t, cpu: i32, kind: Kind) -> io::Result<OwnedFd> {
    // SAFETY: perf_event_attr is a plain C struct for which all-zero is the
    // documented "nothing requested" value.
    let mut a: sys::perf_event_attr = unsafe { std::mem::zeroed() };
    a.type_ = sys::PERF_TYPE_SOFTWARE;
    a.size = std::mem::size_of::<sys::perf_event_attr>() as u32;
    a.sample_type =
        (sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_TIME | sys::PERF_SAMPLE_CALLCHAIN) as u64;
    if kind == Kind::Cpu && s.stack_copy > 0 {
        a.sample_type |= (sys::PERF_SAMPLE_REGS_USER | sys::PERF_SAMPLE_STACK_USER) as u64;
        a.sample_regs_user = REGS_USER;
        a.sample_stack_user = s.stack_copy;
    }
    a.set_exclude_hv(1);
    a.set_exclude_callchain_kernel(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.set_sample_id_all(1);
    if s.max_stack {
        a.sample_max_stack = (MAX_DEPTH - 1) as u16;
    }
    match kind {
        Kind::Cpu => {
            a.config = sys::PERF_COUNT_SW_CPU_CLOCK as u64;
            a.set_freq(1);
            a.__bindgen_anon_1.sample_freq = s.hz as u64;
            a.set_exclude_kernel(s.exclude_kernel as u64);
        }
        Kind::Switches => {
            // Every switch-out is a sample (the callchain is where it
            // blocked); `context_switch` adds the switch-in records.
            a.config = sys::PERF_COUNT_SW_CONTEXT_SWITCHES as u64;
            a.__bindgen_anon_1.sample_period = 1;
            a.set_context_switch(1);
        }
    }
    // SAFETY: `a` is a fully initialised attr of the size it states; the
    // kernel may write back `size` only.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut a, pid, cpu, -1, sys::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Ring {
    /// Maps the fd's ring: one header page and a power of two of data
    /// pages, the first size in `pages` that the kernel accepts.
    fn map(fd: OwnedFd, pages: &[usize]) -> io::Result<Ring> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mut last = io::Error::from_raw_os_error(libc::ENOMEM);
        for &n in pages {
            let len = (n + 1) * page;
            // SAFETY: a fresh shared mapping of the perf fd; the kernel
            // checks the length.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if base != libc::MAP_FAILED {
                return Ok(Ring {
                    fd,
                    base: base.cast(),
                    len,
                    page,
                });
            }
            last = io::Error::last_os_error();
        }
        Err(last)
    }

    fn header(&self) -> *mut sys::perf_event_mmap_page {
        self.base.cast()
    }

    /// Hands every complete record to `f(type, misc, body)` (body without
    /// the 8-byte header), then frees their space.
    fn read(&mut self, scratch: &mut Vec<u8>, mut f: impl FnMut(u32, u16, &[u8])) {
        let _ = &self.fd;
        let hdr = self.header();
        // SAFETY: `hdr` points to the mapped header page; `data_head` is a
        // naturally aligned u64 the kernel updates concurrently, so it is
        // read atomically. Acquire pairs with the kernel's barrier before
        // it publishes `data_head`: the records below it are written.
        let head = unsafe {
            (*std::ptr::addr_of!((*hdr).data_head).cast::<AtomicU64>()).load(Ordering::Acquire)
        };
        // SAFETY: only we write `data_tail`; the kernel only reads it.
        let tail_ptr = unsafe { std::ptr::addr_of_mut!((*hdr).data_tail).cast::<AtomicU64>() };
        // SAFETY: as above, a valid aligned u64 in the mapping.
        let mut tail = unsafe { (*tail_ptr).load(Ordering::Relaxed) };
        let size = (self.len - self.page) as u64;
        // SAFETY: the data area follows the header page inside the mapping.
        let data = unsafe { self.base.add(self.page) };
        while head.wrapping_sub(tail) >= 8 {
            let off = (tail % size) as usize;
            let mut h = [0u8; 8];
            // SAFETY: records are 8-byte aligned and the data size is a
            // multiple of 8, so the header does not wrap; it lies below
            // `head`, so the kernel wrote it.
            unsafe { std::ptr::copy_nonoverlapping(data.add(off), h.as_mut_ptr(), 8) };
            let ty = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]);
            let misc = u16::from_ne_bytes([h[4], h[5]]);
            let rec_size = u16::from_ne_bytes([h[6], h[7]]) as u64;
            if rec_size < 8 || rec_size > head.wrapping_sub(tail) {
                // Not a record the kernel could have written: drop the rest
                // rather than loop or misread.
                tail = head;
                break;
            }
            let body = (rec_size - 8) as usize;
            let start = (off + 8) % size as usize;
            scratch.clear();
            scratch.resize(body, 0);
            let first = body.min(size as usize - start);
            // SAFETY: both pieces lie inside the data area (wrapping at its
            // end) and below `head`.
            unsafe {
                std::ptr::copy_nonoverlapping(data.add(start), scratch.as_mut_ptr(), first);
                std::ptr::copy_nonoverlapping(data, scratch.as_mut_ptr().add(first), body - first);
            }
            f(ty, misc, scratch);
            tail = tail.wrapping_add(rec_size);
        }
        // SAFETY: `tail_ptr` is valid (above). Release: our copies of the
        // records happen before the kernel may overwrite their space.
        unsafe { (*tail_ptr).store(tail, Ordering::Release) };
    }
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// A parsed PERF_RECORD_SAMPLE.
#[derive(Debug, PartialEq)]
struct Parsed {
    tid: u64,
    /// CLOCK_MONOTONIC ns.
    time: u64,
    /// User frames, leaf first, markers removed.
    stack: Vec<u64>,
    /// The user registers and the stack copy (its bytes' range in the
    /// record), when the sample has them.
    copy: Option<(Regs, std::ops::Range<usize>)>,
}

impl Parsed {
    /// The on-CPU sample, its stack completed by `unwinder` where the
    /// leaf keeps no frame pointer. `rec` is the record parsed.
    fn on_cpu(self, pair: &ClockPair, unwinder: &mut Unwinder, rec: &[u8]) -> RawSample {
        let stack = match &self.copy {
            Some((regs, range)) => rec
                .get(range.clone())
                .and_then(|bytes| unwinder.repair(&self.stack, *regs, bytes))
                .unwrap_or(self.stack),
            None => self.stack,
        };
        RawSample {
            tid: self.tid,
            ticks: pair.ticks(self.time),
            kind: RawKind::OnCpu,
            stack,
        }
    }
}

/// The (pid, tid) a PERF_RECORD_SAMPLE starts with.
fn sample_ids(rec: &[u8]) -> Option<(u32, u64)> {
    Some((u32_at(rec, 0)?, u32_at(rec, 4)? as u64))
}

/// A PERF_RECORD_SAMPLE body for TID|TIME|CALLCHAIN: pid, tid, time, nr,
/// ips[nr]; with `copy` (REGS_USER|STACK_USER) then abi, regs[3] (if abi
/// is not NONE), size, data[size], dyn_size (if size is not 0).
fn parse_sample(rec: &[u8], copy: bool) -> Option<Parsed> {
    let (_, tid) = sample_ids(rec)?;
    let time = u64_at(rec, 8)?;
    let nr = u64_at(rec, 16)? as usize;
    let mut stack = Vec::with_capacity(nr.min(MAX_DEPTH));
    for k in 0..nr {
        let ip = u64_at(rec, 24 + 8 * k)?;
        // PERF_CONTEXT_* markers (USER, KERNEL, ...) are the top 4095
        // values; the frames we asked for are user addresses.
        if ip >= sys::PERF_CONTEXT_MAX {
            continue;
        }
        if stack.len() == MAX_DEPTH {
            break;
        }
        stack.push(ip);
    }
    let copy = if copy {
        parse_copy(rec, 24 + 8 * nr)
    } else {
        None
    };
    Some(Parsed {
        tid,
        time,
        stack,
        copy,
    })
}

/// The registers and stack copy starting at byte `at` of a sample record;
/// None when the kernel had none to give (a kernel thread, no user
/// stack) or the record is short.
fn parse_copy(rec: &[u8], at: usize) -> Option<(Regs, std::ops::Range<usize>)> {
    if u64_at(rec, at)? == sys::PERF_SAMPLE_REGS_ABI_NONE as u64 {
        return None;
    }
    let regs = Regs {
        bp: u64_at(rec, at + 8)?,
        sp: u64_at(rec, at + 16)?,
        ip: u64_at(rec, at + 24)?,
    };
    let size = usize::try_from(u64_at(rec, at + 32)?).ok()?;
    let data = at + 40;
    let dyn_size = usize::try_from(u64_at(rec, data.checked_add(size)?)?).ok()?;
    Some((regs, data..data + dyn_size.min(size)))
}

/// The time in a PERF_RECORD_SWITCH's sample_id (pid, tid, time).
fn switch_time(rec: &[u8]) -> Option<u64> {
    u64_at(rec, 8)
}

/// PERF_RECORD_LOST: id, lost.
fn lost_count(rec: &[u8]) -> u64 {
    u64_at(rec, 8).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_cpu_rings_hold_100_ms_of_samples() {
        // 99 Hz, 16 KiB copies: 10 samples of ~17.6 KiB = 44 pages -> 64.
        assert_eq!(cpu_ring_pages(99, 16384), [64, 16, 4, 1]);
        // 999 Hz: 100 samples -> 512 pages (2 MiB), the most.
        assert_eq!(cpu_ring_pages(999, 16384), [512, 128, 32, 1]);
        // Without copies: the 16-page least.
        assert_eq!(cpu_ring_pages(99, 0), [16, 4, 1, 1]);
    }

    #[test]
    fn stack_copy_settings() {
        assert_eq!(stack_copy_setting(None), Ok(STACK_COPY));
        assert_eq!(stack_copy_setting(Some(" ")), Ok(STACK_COPY));
        assert_eq!(stack_copy_setting(Some("off")), Ok(0));
        assert_eq!(stack_copy_setting(Some("0")), Ok(0));
        assert_eq!(stack_copy_setting(Some("16K")), Ok(16384));
        assert_eq!(stack_copy_setting(Some("4100")), Ok(4096));
        for bad in ["64K", "100", "lots", "-1", "99999999999K"] {
            let e = stack_copy_setting(Some(bad)).unwrap_err();
            assert!(
                e.contains("RUNTRACE_CPU_STACK_COPY") && e.contains(bad),
                "{e}"
            );
        }
    }

    #[test]
    fn sample_records_parse_and_drop_markers() {
        let mut r = Vec::new();
        r.extend_from_slice(&7u32.to_ne_bytes());
        r.extend_from_slice(&8u32.to_ne_bytes());
        r.extend_from_slice(&123u64.to_ne_bytes());
        let ips = [sys::PERF_CONTEXT_USER, 0x1000, 0x2000];
        r.extend_from_slice(&(ips.len() as u64).to_ne_bytes());
        for ip in ips {
            r.extend_from_slice(&ip.to_ne_bytes());
        }
        assert_eq!(
            parse_sample(&r, false),
            Some(Parsed {
                tid: 8,
                time: 123,
                stack: vec![0x1000, 0x2000],
                copy: None,
            })
        );
        assert_eq!(sample_ids(&r), Some((7, 8)));
        // Truncated records are refused, never read past.
        for cut in 0..r.len() {
            assert_eq!(parse_sample(&r[..cut], false), None, "cut at {cut}");
        }
        // With the registers and a stack copy of 16 bytes, 12 of them
        // filled (dyn_size).
        let mut c = r.clone();
        for v in [
            sys::PERF_SAMPLE_REGS_ABI_64 as u64,
            0xb0,
            0x5000,
            0x1000,
            16,
        ] {
            c.extend_from_slice(&v.to_ne_bytes());
        }
        let data = c.len();
        c.extend_from_slice(&[9u8; 16]);
        c.extend_from_slice(&12u64.to_ne_bytes());
        let p = parse_sample(&c, true).unwrap();
        let regs = Regs {
            bp: 0xb0,
            sp: 0x5000,
            ip: 0x1000,
        };
        assert_eq!(p.copy, Some((regs, data..data + 12)));
        assert_eq!(p.stack, vec![0x1000, 0x2000]);
        // A sample without user registers (a kernel thread) has no copy.
        let mut k = r.clone();
        k.extend_from_slice(&0u64.to_ne_bytes());
        k.extend_from_slice(&0u64.to_ne_bytes());
        assert_eq!(parse_sample(&k, true).unwrap().copy, None);
        for cut in r.len()..c.len() {
            assert_eq!(
                parse_sample(&c[..cut], true).unwrap().copy,
                None,
                "cut at {cut}"
            );
        }
    }
}
