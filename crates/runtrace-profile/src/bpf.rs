//! Off-CPU stacks from the scheduler's `sched:sched_switch` tracepoint: a
//! small BPF program, attached once for the whole system, looks up the
//! thread switching out and the one switching in in a table of this
//! recording's threads. For a thread in the table it writes, to a BPF ring
//! buffer, the switch-out with its user stack (`bpf_get_stack`, frame
//! pointers) or the switch-in; every other switch of the machine costs two
//! array lookups and nothing else. The writer thread reads the ring at each
//! round and pairs each switch-out with its thread's next switch-in into
//! an `off_cpu` sample. A switch-out whose frame-pointer walk stopped at
//! its leaf (a glibc function that keeps no frame pointer, such as
//! `recv`) also carries the thread's user registers and a copy of its
//! stack, which the writer unwinds (`unwind.rs`, issue 35).
//!
//! Why not the per-thread context-switch perf events of `perf.rs`: a
//! per-thread perf event is scheduled out and in with its thread, and the
//! switch sample plus the switch records cost a recorded thread ~4 µs per
//! context switch on the reference VM; this program costs it ~0.5 µs and
//! other threads nothing measurable (docs/cpu-profile.md, "Cost"). A server's workers switch out at every park, so the difference
//! is most of what off-CPU stacks cost it.
//!
//! Why the records go to a BPF ring buffer and not out as perf samples of
//! the tracepoint: on the reference VM the kernel does not deliver the
//! tracepoint's perf samples taken while a CPU's idle task is current, so
//! a switch from idle to one of our threads would be missed; the ring
//! buffer does not depend on which task is current. One ring for all CPUs
//! also keeps each thread's switch-out before its switch-in: the
//! switch-out is written before the switch completes, and only then can
//! another CPU switch the thread in.
//!
//! That kernel also sometimes runs a woken thread on an idle CPU without
//! firing the tracepoint at all. So a switch-out carries the thread's CPU
//! time, and a thread switching out while still pending (its switch-in
//! untraced) first gets a resumed record dated by the CPU time it used
//! since its last switch-out (`KIND_RESUMED`, `Pairs`).
//!
//! Why the program is written here as instructions: it is ~140 of them (~275
//! with the stack copy of `stack_copy`), and
//! a BPF compiler (clang with the bpf target, or a nightly Rust with
//! bpf-linker for aya) or libbpf's C build in every build of this crate
//! would cost more than the program. The kernel's verifier checks it at
//! load; a refusal carries the verifier's last lines.
//!
//! Needs root (or `CAP_BPF` + `CAP_PERFMON`), tracefs, the kernel's BTF for
//! the CPU-time offset (without it an untraced switch-in loses its
//! interval, counted), and the process in
//! the initial PID namespace (the tracepoint's thread ids are the
//! kernel's); anything missing is an `Err` with the reason, and the
//! profiler then uses the per-thread events.

use crate::sample::{take_up_to, ClockPair, RawKind, RawSample};
use crate::unwind::{Regs, Unwinder};
use runtrace_core::clock::TraceClock;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
// std's atomics under loom too: these words live in memory the kernel
// shares with us, outside every model (see `sync.rs`).
use crate::sync::{Ordering, StaticAtomicU32 as AtomicU32, StaticAtomicU64 as AtomicU64};

/// Bytes of the ring buffer (a power of two of pages): ~40,000 switch-outs
/// with stacks of 25 frames between two writer rounds (50 ms by default).
const RING_BYTES: u32 = 8 << 20;
/// Slots of the thread table (a power of two): a recorded thread owns slot
/// `tid % SLOTS`, whose u32 holds its id and the next u32 whether it is
/// switched out (pending). An array, not a hash, because the kernel inlines
/// an array lookup into a few instructions at every switch of the machine;
/// two recorded threads whose ids collide cannot both have off-CPU stacks
/// (the second is said once on stderr).
const SLOTS: u32 = 1 << 16;
/// Frames per stack: the kernel's default `perf_event_max_stack`.
const MAX_FRAMES: usize = 127;

/// A record: kind (u32), tid (u32), CLOCK_MONOTONIC ns (u64). A
/// switch-out adds the thread's CPU time in ns (u64, 0 when unknown), the
/// stack's length in bytes or a negative error (i64) and the frames, leaf
/// first. A resumed record adds the CPU time (see `KIND_RESUMED`).
const KIND_OUT: u32 = 0;
const KIND_IN: u32 = 1;
/// A switch-out of a thread whose previous switch-out was never followed
/// by a traced switch-in: on the reference VM the kernel sometimes runs a
/// woken thread on an idle CPU without firing `sched_switch` (ftrace sees
/// no switch either). The thread ran in between; how long, its CPU time
/// says: it resumed at `ns - (cpu_ns - cpu_ns at the switch-out)`.
const KIND_RESUMED: u32 = 2;
/// A switch-out whose frame-pointer walk ended within [`SHORT_FRAMES`]
/// frames (a leaf without a frame pointer, such as glibc's `recv`), with
/// the thread's user registers and a copy of the top of its stack for the
/// writer's unwinder (`unwind.rs`): the `KIND_OUT` record, then `rip`,
/// `rsp`, `rbp` at [`REGS_AT`], the copy's length at [`COPY_LEN_AT`] and
/// its bytes at [`COPY_AT`].
const KIND_OUT_COPY: u32 = 3;
/// A walk this short named no caller: a tokio worker's whole stack has
/// ten frames or more, a plain thread's at least its start and `main`.
const SHORT_FRAMES: i32 = 3;
const IN_BYTES: i32 = 16;
const RESUMED_BYTES: i32 = 24;
const CPU_AT: i16 = 16;
const LEN_AT: i16 = 24;
const STACK_AT: i16 = 32;
const OUT_BYTES: i32 = STACK_AT as i32 + 8 * MAX_FRAMES as i32;
const REGS_AT: i16 = OUT_BYTES as i16;
const COPY_LEN_AT: i16 = REGS_AT + 24;
const COPY_AT: i16 = COPY_LEN_AT + 8;
/// The largest copy the program takes: a per-CPU scratch value is at most
/// 32 KiB.
const MAX_COPY: u32 = 28 << 10;

/// The parked table (`runtrace_core::parked`): one BPF array entry of
/// `parked::SLOTS` u32 words, mapped into this process. Made once per
/// process and never unmapped, because a park hook may be writing to it
/// at any time (`parked::use_table`'s contract); each recording's program
/// refers to it.
struct ParkedTable {
    map: OwnedFd,
    words: *mut AtomicU32,
}

// SAFETY: the mapping is never unmapped and only ever accessed through
// atomics; the fd is only read.
unsafe impl Send for ParkedTable {}
// SAFETY: as above.
unsafe impl Sync for ParkedTable {}

const PARKED_BYTES: u32 = 4 * runtrace_core::parked::SLOTS as u32;

fn parked_table() -> Result<&'static ParkedTable, String> {
    static TABLE: std::sync::OnceLock<Result<ParkedTable, String>> = std::sync::OnceLock::new();
    TABLE
        .get_or_init(|| {
            let map = map_create_flags(MAP_ARRAY, 4, PARKED_BYTES, 1, MAP_F_MMAPABLE)
                .map_err(|e| format!("BPF parked table: {e}"))?;
            // SAFETY: a fresh shared mapping of the mmapable array's one
            // value (PARKED_BYTES, whole pages), never unmapped.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    PARKED_BYTES as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    map.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(format!(
                    "BPF parked table mmap: {}",
                    io::Error::last_os_error()
                ));
            }
            Ok(ParkedTable {
                map,
                words: p.cast(),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The off-CPU sampler (same drain interface as the perf one).
pub(crate) struct SwitchTracer {
    clock: &'static TraceClock,
    /// The tracepoint's perf event, which holds the program attached.
    _event: OwnedFd,
    _prog: OwnedFd,
    /// The thread table (see `SLOTS`).
    slots: OwnedFd,
    /// Which recorded thread owns each slot in use.
    owners: HashMap<u32, u32>,
    /// The program's count of records the full ring refused, mapped.
    lost: Counter,
    lost_seen: u64,
    ring: BpfRing,
    pairs: Pairs,
    /// Converted samples newer than the last cutoff.
    pending: Vec<RawSample>,
    /// Why the thread's CPU time is not read, if it is not: a switch-in
    /// the kernel does not trace then loses its interval.
    no_cpu_time: Option<String>,
    /// Bytes of stack copied with a short walk's switch-out (0: none),
    /// and why none when one was asked for.
    copy: u32,
    no_copy: Option<String>,
}

impl SwitchTracer {
    /// Loads and attaches the program; Err(reason) where the kernel or the
    /// process's privileges do not allow it. `stack_copy` is the bytes of
    /// stack to copy with a switch-out whose frame-pointer walk stopped at
    /// its leaf (`RUNTRACE_CPU_STACK_COPY`, at most 28 KiB here; 0: none).
    pub(crate) fn new(clock: &'static TraceClock, stack_copy: u32) -> Result<SwitchTracer, String> {
        in_initial_pid_namespace()?;
        let tp = Tracepoint::find()?;
        let err = |what: &'static str| move |e: io::Error| format!("BPF {what}: {e}");
        let slots = map_create(MAP_ARRAY, 4, 8, SLOTS).map_err(err("thread table"))?;
        // Parsed once for both lookups below.
        let btf_bytes = kernel_btf();
        let btf = btf_bytes
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|b| crate::btf::Btf::parse(b).map_err(|e| format!("{BTF_PATH}: {e}")));
        let cpu_time_at = btf.as_ref().map_err(Clone::clone).and_then(cpu_time_offset);
        // Err(None): no copy asked for; Err(Some(why)): asked, not possible.
        let mut copy = match (stack_copy.min(MAX_COPY) & !7, &btf) {
            (0, _) => Err(None),
            (bytes, Ok(b)) => pt_regs_offsets(b)
                .map(|regs| StackCopy { bytes, regs })
                .map_err(Some),
            (_, Err(e)) => Err(Some(e.clone())),
        };
        let scratch_bytes = match &copy {
            Ok(c) => COPY_AT as u32 + c.bytes,
            Err(_) => OUT_BYTES as u32,
        };
        let scratch = map_create(MAP_PERCPU_ARRAY, 4, scratch_bytes, 1).map_err(err("scratch"))?;
        // Mapped, so that reading it is a load: a map system call raises
        // the CPU's "BPF running" count (`bpf_prog_active`) for its
        // duration, and a switch on that CPU meanwhile would skip the
        // program; the writer reads it every round.
        let lost_map =
            map_create_flags(MAP_ARRAY, 4, 8, 1, MAP_F_MMAPABLE).map_err(err("lost counter"))?;
        let ring_map = map_create(MAP_RINGBUF, 0, 0, RING_BYTES).map_err(err("ring buffer"))?;
        let parked = parked_table()?;
        let maps = Maps {
            slots: fd(&slots),
            parked: fd(&parked.map),
            scratch: fd(&scratch),
            ring: fd(&ring_map),
            lost: fd(&lost_map),
        };
        let cpu_at = cpu_time_at.as_ref().ok().copied();
        let prog = match prog_load(&program(&tp, &maps, cpu_at, copy.as_ref().ok())) {
            // A kernel without the helpers the copy needs (5.15+) still
            // gets stacks by frame pointers.
            Err(e) if copy.is_ok() => {
                copy = Err(Some(e));
                prog_load(&program(&tp, &maps, cpu_at, None))?
            }
            loaded => loaded?,
        };
        let ring = BpfRing::map(ring_map).map_err(err("ring buffer mmap"))?;
        let event = attach(&tp, &prog)?;
        // SAFETY: the table holds parked::SLOTS words and is never
        // unmapped (`parked_table`).
        unsafe { runtrace_core::parked::use_table(parked.words) };
        Ok(SwitchTracer {
            clock,
            _event: event,
            _prog: prog,
            slots,
            owners: HashMap::new(),
            lost: Counter::map(lost_map).map_err(err("lost counter mmap"))?,
            lost_seen: 0,
            ring,
            pairs: Pairs::default(),
            pending: Vec::new(),
            no_cpu_time: cpu_time_at.err(),
            copy: copy.as_ref().map_or(0, |c| c.bytes),
            no_copy: copy.err().flatten(),
        })
    }

    /// For the `PROFILE` message.
    pub(crate) fn describe(&self) -> String {
        let mut text = "off-CPU: the sched_switch tracepoint with a BPF program (recorded threads' switches only; switch-outs of parked workers skipped)".to_string();
        if self.copy > 0 {
            text += &format!(
                ", stacks whose frame-pointer walk stops at the leaf unwound from a {} KiB stack copy",
                self.copy >> 10
            );
        }
        if let Some(why) = &self.no_copy {
            text += &format!("; no stack copy for frames without frame pointers ({why})");
        }
        if let Some(why) = &self.no_cpu_time {
            text += &format!("; a switch-in the kernel does not trace loses its interval ({why})");
        }
        text
    }

    /// Starts recording thread `tid`'s switches.
    pub(crate) fn add_thread(&mut self, tid: u64) -> Result<(), String> {
        let id = u32::try_from(tid).map_err(|_| format!("thread id {tid} out of range"))?;
        let slot = id % SLOTS;
        match self.owners.get(&slot) {
            Some(&other) if other != id => {
                return Err(format!(
                    "thread {tid}: no off-CPU stacks: its slot in the BPF thread table is thread {other}'s"
                ))
            }
            _ => {}
        }
        map_update(&self.slots, slot, id as u64)
            .map_err(|e| format!("thread {tid}: off-CPU stacks: BPF thread table: {e}"))?;
        self.owners.insert(slot, id);
        Ok(())
    }

    /// Stops recording a thread's switches (after taking what the ring
    /// holds; its unpaired switch-out, if any, is dropped).
    pub(crate) fn remove_thread(&mut self, tid: u64, unwinder: &mut Unwinder) {
        let Ok(key) = u32::try_from(tid) else { return };
        let slot = key % SLOTS;
        if self.owners.get(&slot) == Some(&key) {
            self.owners.remove(&slot);
            let _ = map_update(&self.slots, slot, 0);
        }
        let pair = ClockPair::read(self.clock);
        self.read(&pair, unwinder);
        self.pairs.outs.remove(&key);
    }

    /// Moves every off-CPU sample with ticks <= `cutoff_ticks` into `out`;
    /// returns the records lost since the last call (ring full, or a
    /// switch-in missing). `unwinder` unwinds the stack copies (the
    /// profiler's, shared with the on-CPU samples).
    pub(crate) fn drain(
        &mut self,
        cutoff_ticks: u64,
        out: &mut Vec<RawSample>,
        unwinder: &mut Unwinder,
    ) -> u64 {
        let pair = ClockPair::read(self.clock);
        self.read(&pair, unwinder);
        take_up_to(&mut self.pending, cutoff_ticks, out);
        let lost = self.lost.get();
        let new = lost.saturating_sub(self.lost_seen) + std::mem::take(&mut self.pairs.unpaired);
        self.lost_seen = lost;
        new
    }

    fn read(&mut self, pair: &ClockPair, unwinder: &mut Unwinder) {
        let (pairs, pending) = (&mut self.pairs, &mut self.pending);
        let mut repair =
            |kernel: &[u64], regs: Regs, copy: &[u8]| unwinder.repair(kernel, regs, copy);
        self.ring.read(|rec| {
            if let Some(iv) = pairs.take(rec, &mut repair) {
                pending.push(RawSample {
                    tid: iv.tid as u64,
                    ticks: pair.ticks(iv.end_ns),
                    kind: RawKind::OffCpu { off_ns: iv.off_ns },
                    stack: iv.stack,
                });
            }
        });
    }
}

/// The ring's records made into off-CPU intervals: each switch-out with
/// its thread's next switch-in, or with the moment its CPU time dates its
/// resumption when the kernel did not trace the switch-in.
#[derive(Default)]
struct Pairs {
    /// Switch-outs waiting: tid -> the switch-out.
    outs: HashMap<u32, Out>,
    /// Records that could not become an interval (a resumption without
    /// CPU times, or a record the program could not have written).
    unpaired: u64,
}

/// A switch-out waiting for its end.
struct Out {
    ns: u64,
    cpu_ns: u64,
    stack: Vec<u64>,
}

/// An off-CPU interval in CLOCK_MONOTONIC ns.
#[derive(Debug, PartialEq)]
struct Interval {
    tid: u32,
    end_ns: u64,
    off_ns: u64,
    stack: Vec<u64>,
}

/// Completes a short stack from its registers and stack copy
/// (`Unwinder::repair`): None keeps the stack as it is.
type Repair<'a> = dyn FnMut(&[u64], Regs, &[u8]) -> Option<Vec<u64>> + 'a;

impl Pairs {
    /// Takes one record; an interval when it ends one.
    fn take(&mut self, rec: &[u8], repair: &mut Repair) -> Option<Interval> {
        let (tid, out, end_ns) = match parse(rec) {
            Some(Switch::Out {
                tid,
                ns,
                cpu_ns,
                stack,
                copy,
            }) => {
                let stack = match copy.and_then(|(regs, at)| Some((regs, rec.get(at)?))) {
                    Some((regs, bytes)) => repair(&stack, regs, bytes).unwrap_or(stack),
                    None => stack,
                };
                // One still waiting here lost its end in the ring (the
                // program counted that record as lost).
                self.outs.insert(tid, Out { ns, cpu_ns, stack });
                return None;
            }
            Some(Switch::In { tid, ns }) => (tid, self.outs.remove(&tid)?, ns),
            Some(Switch::Resumed { tid, ns, cpu_ns }) => {
                let out = self.outs.remove(&tid)?;
                if out.cpu_ns == 0 || cpu_ns < out.cpu_ns {
                    self.unpaired += 1;
                    return None;
                }
                // It ran without a break from its resumption to now (a
                // break would be a switch-out), so its CPU time since the
                // switch-out is that run; steal and IRQ time the kernel
                // does not count as the thread's make the run look
                // shorter, never longer, and the interval longer by as
                // much (≤ µs on the reference VM in ~7,000 traced pairs,
                // median 0.4 µs, p99 14 µs).
                let end = ns.saturating_sub(cpu_ns - out.cpu_ns).clamp(out.ns, ns);
                (tid, out, end)
            }
            None => {
                self.unpaired += 1;
                return None;
            }
        };
        Some(Interval {
            tid,
            end_ns,
            off_ns: end_ns.saturating_sub(out.ns),
            stack: out.stack,
        })
    }
}

const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's BTF, read once per recording; Err(reason) where the kernel
/// has none.
fn kernel_btf() -> Result<Vec<u8>, String> {
    std::fs::read(BTF_PATH).map_err(|e| format!("{BTF_PATH}: {e}"))
}

/// The offset of `task_struct.se.sum_exec_runtime` (a thread's CPU time in
/// ns) in the kernel's BTF.
fn cpu_time_offset(btf: &crate::btf::Btf<'_>) -> Result<i32, String> {
    const PATH: &str = BTF_PATH;
    match btf.offset_of("task_struct", &["se", "sum_exec_runtime"])? {
        (at, 8) => i32::try_from(at).map_err(|_| format!("{PATH}: offset {at} out of range")),
        (_, size) => Err(format!(
            "{PATH}: task_struct.se.sum_exec_runtime has {size} bytes, not 8"
        )),
    }
}

/// What the program needs to copy a switch-out's user registers and stack.
struct StackCopy {
    bytes: u32,
    /// Offsets of `ip`, `sp` and `bp` in the kernel's `struct pt_regs`.
    regs: [i32; 3],
}

/// `pt_regs.ip`, `.sp` and `.bp` in the kernel's BTF (x86-64 only: the
/// unwinder reads x86-64 frames).
fn pt_regs_offsets(btf: &crate::btf::Btf<'_>) -> Result<[i32; 3], String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("stack copies are unwound on x86-64 only".into());
    }
    let mut at = [0; 3];
    for (slot, name) in at.iter_mut().zip(["ip", "sp", "bp"]) {
        *slot = match btf.offset_of("pt_regs", &[name])? {
            (o, 8) => {
                i32::try_from(o).map_err(|_| format!("{BTF_PATH}: pt_regs.{name} out of range"))?
            }
            (_, size) => {
                return Err(format!(
                    "{BTF_PATH}: pt_regs.{name} has {size} bytes, not 8"
                ))
            }
        };
    }
    Ok(at)
}

impl Drop for SwitchTracer {
    fn drop(&mut self) {
        // SAFETY: null stops marking.
        unsafe { runtrace_core::parked::use_table(std::ptr::null_mut()) };
    }
}

/// One record of the ring.
#[derive(Debug, PartialEq)]
enum Switch {
    Out {
        tid: u32,
        ns: u64,
        cpu_ns: u64,
        stack: Vec<u64>,
        /// The registers and where the stack copy's bytes are in the
        /// record (`KIND_OUT_COPY`).
        copy: Option<(Regs, std::ops::Range<usize>)>,
    },
    In {
        tid: u32,
        ns: u64,
    },
    Resumed {
        tid: u32,
        ns: u64,
        cpu_ns: u64,
    },
}

/// Decodes a record (see `OUT_BYTES`); None for one the program could not
/// have written.
fn parse(rec: &[u8]) -> Option<Switch> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(rec.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_ne_bytes(rec.get(o..o + 8)?.try_into().ok()?));
    let (kind, tid, ns) = (u32_at(0)?, u32_at(4)?, u64_at(8)?);
    match kind {
        KIND_IN => Some(Switch::In { tid, ns }),
        KIND_RESUMED => Some(Switch::Resumed {
            tid,
            ns,
            cpu_ns: u64_at(CPU_AT as usize)?,
        }),
        KIND_OUT | KIND_OUT_COPY => {
            // A negative length is bpf_get_stack's error: no stack.
            let bytes = (u64_at(LEN_AT as usize)? as i64).clamp(0, 8 * MAX_FRAMES as i64) as usize;
            let stack = (0..bytes / 8)
                .map(|k| u64_at(STACK_AT as usize + 8 * k))
                .collect::<Option<Vec<u64>>>()?;
            let copy = if kind == KIND_OUT_COPY {
                let r = |k: usize| u64_at(REGS_AT as usize + 8 * k);
                let regs = Regs {
                    ip: r(0)?,
                    sp: r(1)?,
                    bp: r(2)?,
                };
                let len = usize::try_from(u64_at(COPY_LEN_AT as usize)?).ok()?;
                let at = COPY_AT as usize..(COPY_AT as usize).checked_add(len)?;
                rec.get(at.clone())?;
                Some((regs, at))
            } else {
                None
            };
            Some(Switch::Out {
                tid,
                ns,
                cpu_ns: u64_at(CPU_AT as usize)?,
                stack,
                copy,
            })
        }
        _ => None,
    }
}

/// A process in a child PID namespace knows its threads by other ids than
/// the tracepoint reports.
fn in_initial_pid_namespace() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    match status.lines().find_map(|l| l.strip_prefix("NSpid:")) {
        Some(ids) if ids.split_whitespace().count() > 1 => Err(
            "the process is in a child PID namespace (the scheduler's thread ids differ)".into(),
        ),
        _ => Ok(()),
    }
}

/// `sched:sched_switch` in tracefs: its id and its thread-id fields.
struct Tracepoint {
    id: u64,
    prev_pid: i16,
    next_pid: i16,
}

impl Tracepoint {
    fn find() -> Result<Tracepoint, String> {
        let dir = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(|d| std::path::Path::new(d).join("events/sched/sched_switch"))
            .find(|d| d.join("id").exists())
            .ok_or("tracefs has no events/sched/sched_switch (not mounted, or not readable)")?;
        let id = std::fs::read_to_string(dir.join("id"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or("cannot read sched_switch's id")?;
        let format = std::fs::read_to_string(dir.join("format"))
            .map_err(|e| format!("cannot read sched_switch's format: {e}"))?;
        Tracepoint::from_format(id, &format)
    }

    fn from_format(id: u64, format: &str) -> Result<Tracepoint, String> {
        let field = |name: &str| {
            field_offset(format, name)
                // The program reads context bytes 8 and up (the verifier
                // refuses the common header).
                .filter(|&o| (8..4096).contains(&o) && o % 4 == 0)
                .map(|o| o as i16)
                .ok_or(format!("sched_switch has no 4-byte field {name}"))
        };
        Ok(Tracepoint {
            id,
            prev_pid: field("prev_pid")?,
            next_pid: field("next_pid")?,
        })
    }
}

/// The offset of a 4-byte field `name` in a tracefs `format` file
/// (`field:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;`).
fn field_offset(format: &str, name: &str) -> Option<usize> {
    format.lines().find_map(|l| {
        let decl = l.trim().strip_prefix("field:")?.split(';').next()?;
        if decl.split_whitespace().last()? != name {
            return None;
        }
        let num = |key: &str| -> Option<usize> {
            l.split(';')
                .find_map(|p| p.trim().strip_prefix(key))
                .and_then(|v| v.parse().ok())
        };
        (num("size:")? == 4).then_some(num("offset:")?)
    })
}

// ------------------------------------------------------------- the program

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const R9: u8 = 9;
const FP: u8 = 10;

// Opcode parts (linux/bpf_common.h, linux/bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const W: u8 = 0x00;
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
const ATOMIC: u8 = 0xc0;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const SUB: u8 = 0x10;
const AND: u8 = 0x50;
const LSH: u8 = 0x60;
const MOV: u8 = 0xb0;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const JSGT: u8 = 0x60;
const JLE: u8 = 0xb0;
const JSLT: u8 = 0xc0;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
const PSEUDO_MAP_FD: u8 = 1;

const FN_MAP_LOOKUP_ELEM: i32 = 1;
const FN_KTIME_GET_NS: i32 = 5;
const FN_GET_CURRENT_TASK: i32 = 35;
const FN_GET_STACK: i32 = 67;
const FN_PROBE_READ_USER: i32 = 112;
const FN_PROBE_READ_KERNEL: i32 = 113;
const FN_GET_CURRENT_TASK_BTF: i32 = 158;
const FN_TASK_PT_REGS: i32 = 175;
const FN_RINGBUF_OUTPUT: i32 = 130;
const FN_RINGBUF_QUERY: i32 = 134;
const F_USER_STACK: i32 = 1 << 8;
const RB_NO_WAKEUP: i32 = 1;
const RB_AVAIL_DATA: i32 = 0;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// A tiny assembler: instructions, and jumps to labels fixed up at the end.
#[derive(Default)]
struct Asm {
    code: Vec<Insn>,
    /// (instruction index, label)
    jumps: Vec<(usize, usize)>,
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }
    fn here(&mut self, l: usize) -> &mut Self {
        self.labels[l] = Some(self.code.len());
        self
    }
    fn op(&mut self, i: Insn) -> &mut Self {
        self.code.push(i);
        self
    }
    fn mov(&mut self, dst: u8, src: u8) -> &mut Self {
        self.op(insn(ALU64 | MOV | X, dst, src, 0, 0))
    }
    fn mov_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(insn(ALU64 | MOV | K, dst, 0, 0, imm))
    }
    fn add_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(insn(ALU64 | ADD | K, dst, 0, 0, imm))
    }
    fn add(&mut self, dst: u8, src: u8) -> &mut Self {
        self.op(insn(ALU64 | ADD | X, dst, src, 0, 0))
    }
    fn sub(&mut self, dst: u8, src: u8) -> &mut Self {
        self.op(insn(ALU64 | SUB | X, dst, src, 0, 0))
    }
    fn and_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(insn(ALU64 | AND | K, dst, 0, 0, imm))
    }
    fn lsh_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(insn(ALU64 | LSH | K, dst, 0, 0, imm))
    }
    fn ld_map(&mut self, dst: u8, map_fd: i32) -> &mut Self {
        self.op(insn(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, map_fd));
        self.op(insn(0, 0, 0, 0, 0))
    }
    fn ldx(&mut self, size: u8, dst: u8, src: u8, off: i16) -> &mut Self {
        self.op(insn(LDX | size | MEM, dst, src, off, 0))
    }
    fn stx(&mut self, size: u8, dst: u8, off: i16, src: u8) -> &mut Self {
        self.op(insn(STX | size | MEM, dst, src, off, 0))
    }
    fn st_imm(&mut self, size: u8, dst: u8, off: i16, imm: i32) -> &mut Self {
        self.op(insn(ST | size | MEM, dst, 0, off, imm))
    }
    /// `*(u64 *)(dst + off) += src`, atomically.
    fn atomic_add64(&mut self, dst: u8, off: i16, src: u8) -> &mut Self {
        self.op(insn(STX | DW | ATOMIC, dst, src, off, ADD as i32))
    }
    fn call(&mut self, f: i32) -> &mut Self {
        self.op(insn(JMP | CALL, 0, 0, 0, f))
    }
    /// `goto to`.
    fn ja(&mut self, to: usize) -> &mut Self {
        self.jumps.push((self.code.len(), to));
        self.op(insn(JMP, 0, 0, 0, 0))
    }
    fn exit(&mut self) -> &mut Self {
        self.op(insn(JMP | EXIT, 0, 0, 0, 0))
    }
    /// `if dst <op> src goto to` (64-bit compare).
    fn jmp_reg(&mut self, op: u8, dst: u8, src: u8, to: usize) -> &mut Self {
        self.jumps.push((self.code.len(), to));
        self.op(insn(JMP | op | X, dst, src, 0, 0))
    }
    /// `if dst <op> imm goto to` (64-bit compare).
    fn jmp_imm(&mut self, op: u8, dst: u8, imm: i32, to: usize) -> &mut Self {
        self.jumps.push((self.code.len(), to));
        self.op(insn(JMP | op | K, dst, 0, 0, imm))
    }
    fn finish(mut self) -> Vec<Insn> {
        for &(at, l) in &self.jumps {
            let target = self.labels[l].expect("every label placed");
            self.code[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.code
    }
}

/// The program (see the module docs). `r1` is the tracepoint's record;
/// `r6` keeps it, `r7` holds the thread id looked at, `r9` its slot of the
/// thread table, `r8` the CPU's scratch record; `fp-4` holds a slot
/// number, `fp-8` a zero (the key of one-entry maps), `fp-32` a
/// switch-in record.
///
/// A switch-out of one of ours that is parked (`runtrace_core::parked`,
/// whose table is a BPF array mapped into the process) is skipped: it is
/// the runtime idling, which the trace has already as park/unpark events. Else the switch-out is written and its slot marked
/// pending, and only a switch-in of a pending thread is written: a parked
/// worker's switches then cost three inlined array lookups.
///
/// A switch-out's stack is taken into the per-CPU scratch and only its
/// used bytes are copied to the ring (`bpf_ringbuf_output`): a typical
/// stack of 10-30 frames then takes ~100-260 bytes of the ring instead of
/// the 1 KiB a fixed-size reservation would.
///
/// With `copy`, a switch-out whose walk found at most [`SHORT_FRAMES`]
/// frames also takes the thread's user registers and up to `copy.bytes`
/// of its stack (less where the stack's mapping ends sooner) as a
/// `KIND_OUT_COPY` record; every other switch-out pays one comparison for
/// it.
fn program(
    tp: &Tracepoint,
    maps: &Maps,
    cpu_time_at: Option<i32>,
    copy: Option<&StackCopy>,
) -> Vec<Insn> {
    let mut a = Asm::default();
    let (switch_in, end) = (a.label(), a.label());
    let (running, has_stack, in_bounds) = (a.label(), a.label(), a.label());
    let resumed_done = a.label();
    a.mov(R6, R1).st_imm(W, FP, -8, 0);
    // Is the thread switching out (`prev`) one of ours?
    slot(&mut a, tp.prev_pid, maps.slots, switch_in);
    // Still pending: its switch-in was not traced (`KIND_RESUMED`).
    a.ldx(W, R1, R9, 4)
        .jmp_imm(JEQ, R1, 0, resumed_done)
        .st_imm(W, R9, 4, 0)
        .st_imm(W, FP, -56, KIND_RESUMED as i32)
        .stx(W, FP, -52, R7)
        .call(FN_KTIME_GET_NS)
        .stx(DW, FP, -48, R0);
    cpu_time(&mut a, FP, -40, cpu_time_at);
    a.mov(R2, FP).add_imm(R2, -56).mov_imm(R3, RESUMED_BYTES);
    output(&mut a, maps);
    a.here(resumed_done);
    // Parked? Its slot of the parked table holds its id.
    let mask = (runtrace_core::parked::SLOTS - 1) as i32;
    a.ld_map(R1, maps.parked)
        .mov(R2, FP)
        .add_imm(R2, -8)
        .call(FN_MAP_LOOKUP_ELEM)
        .jmp_imm(JEQ, R0, 0, running)
        .mov(R3, R7)
        .and_imm(R3, mask)
        .lsh_imm(R3, 2)
        .add(R0, R3)
        .ldx(W, R1, R0, 0)
        .jmp_reg(JEQ, R1, R7, switch_in)
        .here(running)
        // Pending: its switch-in will be written.
        .st_imm(W, R9, 4, 1)
        .ld_map(R1, maps.scratch)
        .mov(R2, FP)
        .add_imm(R2, -8)
        .call(FN_MAP_LOOKUP_ELEM)
        .jmp_imm(JEQ, R0, 0, switch_in)
        .mov(R8, R0)
        .st_imm(W, R8, 0, KIND_OUT as i32)
        .stx(W, R8, 4, R7)
        .call(FN_KTIME_GET_NS)
        .stx(DW, R8, 8, R0);
    cpu_time(&mut a, R8, CPU_AT, cpu_time_at);
    // Its user stack (it is still the current task).
    a.mov(R1, R6)
        .mov(R2, R8)
        .add_imm(R2, STACK_AT as i32)
        .mov_imm(R3, OUT_BYTES - STACK_AT as i32)
        .mov_imm(R4, F_USER_STACK)
        .call(FN_GET_STACK)
        .stx(DW, R8, LEN_AT, R0);
    if let Some(c) = copy {
        stack_copy(&mut a, maps, c, switch_in);
    }
    // Bytes to copy: the header and the frames taken (none on error),
    // bounded for the verifier.
    a.jmp_imm(JSGT, R0, 0, has_stack)
        .mov_imm(R0, 0)
        .here(has_stack)
        .jmp_imm(JLE, R0, OUT_BYTES - STACK_AT as i32, in_bounds)
        .mov_imm(R0, OUT_BYTES - STACK_AT as i32)
        .here(in_bounds)
        .mov(R3, R0)
        .add_imm(R3, STACK_AT as i32)
        .mov(R2, R8);
    output(&mut a, maps);
    a.here(switch_in);
    // Is the thread switching in (`next`) one of ours, and pending?
    slot(&mut a, tp.next_pid, maps.slots, end);
    a.ldx(W, R1, R9, 4)
        .jmp_imm(JEQ, R1, 0, end)
        .st_imm(W, R9, 4, 0)
        .st_imm(W, FP, -32, KIND_IN as i32)
        .stx(W, FP, -28, R7)
        .call(FN_KTIME_GET_NS)
        .stx(DW, FP, -24, R0)
        .mov(R2, FP)
        .add_imm(R2, -32)
        .mov_imm(R3, IN_BYTES);
    output(&mut a, maps);
    // 1: the kernel then still hands the switch to the tracepoint's perf
    // events (`perf sched`, `perf record -e sched:sched_switch`); 0 would
    // hide every switch of the machine from them while we record. Our own
    // event is disabled, so nothing is handed to it.
    a.here(end).mov_imm(R0, 1).exit();
    a.finish()
}

/// The `KIND_OUT_COPY` record (see `program`), written from the scratch
/// `r8` whose `LEN_AT` holds `r0`, bpf_get_stack's result; then on to
/// `done`. A long walk, or a stack none of whose copies could be read,
/// goes on with `r0` as it was.
fn stack_copy(a: &mut Asm, maps: &Maps, c: &StackCopy, done: usize) {
    let (whole, write) = (a.label(), a.label());
    a.jmp_imm(JSGT, R0, SHORT_FRAMES * 8, whole)
        // Copies only while the ring is less than half full: a flood of
        // such switch-outs (200,000 a second in a send/recv ping-pong)
        // then keeps its intervals, with the kernel's short walks, rather
        // than losing them to a ring full of copies.
        .ld_map(R1, maps.ring)
        .mov_imm(R2, RB_AVAIL_DATA)
        .call(FN_RINGBUF_QUERY)
        .jmp_imm(JGT, R0, RING_BYTES as i32 / 2, whole)
        // The thread's user registers: it is still the current task.
        .call(FN_GET_CURRENT_TASK_BTF)
        .mov(R1, R0)
        .call(FN_TASK_PT_REGS)
        .mov(R9, R0);
    for (k, at) in c.regs.iter().enumerate() {
        // A failed read leaves 0, and a zero `rip` is no copy to the
        // unwinder.
        a.mov(R1, R8)
            .add_imm(R1, REGS_AT as i32 + 8 * k as i32)
            .mov_imm(R2, 8)
            .mov(R3, R9)
            .add_imm(R3, *at)
            .call(FN_PROBE_READ_KERNEL);
    }
    // bpf_probe_read_user copies all or nothing, and a thread's stack
    // mapping ends a few KiB above its first frame (its TLS and thread
    // descriptor): where `c.bytes` from `rsp` cross that end, copy up to
    // each page boundary below it in turn, the first that reads being the
    // whole stack.
    let bytes = c.bytes as i32;
    a.ldx(DW, R9, R8, REGS_AT + 8);
    for page in 0..=bytes / 4096 {
        let next = a.label();
        a.mov(R2, R9)
            .add_imm(R2, bytes)
            .and_imm(R2, -4096)
            .sub(R2, R9)
            .add_imm(R2, -4096 * page)
            .jmp_imm(JSGT, R2, bytes, next)
            .jmp_imm(JSLT, R2, 8, whole)
            .stx(DW, R8, COPY_LEN_AT, R2)
            .mov(R1, R8)
            .add_imm(R1, COPY_AT as i32)
            .mov(R3, R9)
            .call(FN_PROBE_READ_USER)
            .jmp_imm(JNE, R0, 0, next)
            .ldx(DW, R3, R8, COPY_LEN_AT)
            .jmp_imm(JGT, R3, bytes, whole)
            .add_imm(R3, COPY_AT as i32)
            .ja(write)
            .here(next);
    }
    a.ja(whole).here(write);
    a.st_imm(W, R8, 0, KIND_OUT_COPY as i32).mov(R2, R8);
    output(a, maps);
    a.ja(done).here(whole).ldx(DW, R0, R8, LEN_AT);
}

/// Stores the current thread's CPU time in ns (`task_struct.se.
/// sum_exec_runtime`, at `at` bytes into the task; 0 when the offset is
/// unknown or the read fails) as a u64 at `dst + off`; `dst` is a
/// register calls keep (`r6`-`r10`).
fn cpu_time(a: &mut Asm, dst: u8, off: i16, at: Option<i32>) {
    match at {
        Some(at) => a
            .call(FN_GET_CURRENT_TASK)
            .mov(R3, R0)
            .add_imm(R3, at)
            .mov(R1, dst)
            .add_imm(R1, off as i32)
            .mov_imm(R2, 8)
            .call(FN_PROBE_READ_KERNEL),
        None => a.st_imm(DW, dst, off, 0),
    };
}

/// `r7` = the context's thread id at `field`, `r9` = its slot of the
/// thread table; on to `not_ours` unless the slot holds that id.
fn slot(a: &mut Asm, field: i16, slots: i32, not_ours: usize) {
    a.ldx(W, R7, R6, field)
        // The idle task (0) would match an empty slot.
        .jmp_imm(JEQ, R7, 0, not_ours)
        .mov(R1, R7)
        .and_imm(R1, SLOTS as i32 - 1)
        .stx(W, FP, -4, R1)
        .ld_map(R1, slots)
        .mov(R2, FP)
        .add_imm(R2, -4)
        .call(FN_MAP_LOOKUP_ELEM)
        .jmp_imm(JEQ, R0, 0, not_ours)
        .mov(R9, R0)
        .ldx(W, R1, R9, 0)
        .jmp_reg(JNE, R1, R7, not_ours);
}

/// Copies `r3` bytes at `r2` to the ring; when it is full, counts one lost
/// record (`fp-8` holds the counter's key 0).
fn output(a: &mut Asm, maps: &Maps) {
    let done = a.label();
    // No wake-up: nothing waits on the ring (the writer reads it at each
    // round), and a wake-up is an irq_work, a self-interrupt, which in a VM
    // is an exit to the hypervisor.
    a.ld_map(R1, maps.ring)
        .mov_imm(R4, RB_NO_WAKEUP)
        .call(FN_RINGBUF_OUTPUT)
        .jmp_imm(JEQ, R0, 0, done)
        .ld_map(R1, maps.lost)
        .mov(R2, FP)
        .add_imm(R2, -8)
        .call(FN_MAP_LOOKUP_ELEM)
        .jmp_imm(JEQ, R0, 0, done)
        .mov_imm(R1, 1)
        .atomic_add64(R0, 0, R1)
        .here(done);
}

/// The program's maps (their fds).
struct Maps {
    slots: i32,
    parked: i32,
    scratch: i32,
    ring: i32,
    lost: i32,
}

// -------------------------------------------------------- system calls

const MAP_ARRAY: u32 = 2;
const MAP_PERCPU_ARRAY: u32 = 6;
const MAP_RINGBUF: u32 = 27;
const MAP_F_MMAPABLE: u32 = 1 << 10;
const PROG_TRACEPOINT: u64 = 5;
const CMD_MAP_CREATE: i64 = 0;
const CMD_MAP_UPDATE_ELEM: i64 = 2;
const CMD_PROG_LOAD: i64 = 5;

fn fd(f: &OwnedFd) -> i32 {
    f.as_raw_fd()
}

/// The `bpf` system call with a zero-padded `union bpf_attr`.
fn bpf(cmd: i64, attr: &mut [u64; 16]) -> io::Result<i64> {
    // SAFETY: `attr` is a zero-padded `union bpf_attr` of the size passed,
    // holding what `cmd` reads; the pointers in it outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

fn bpf_fd(cmd: i64, attr: &mut [u64; 16]) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn map_create(map_type: u32, key: u32, value: u32, entries: u32) -> io::Result<OwnedFd> {
    map_create_flags(map_type, key, value, entries, 0)
}

fn map_create_flags(
    map_type: u32,
    key: u32,
    value: u32,
    entries: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut a = [0u64; 16];
    a[0] = map_type as u64 | (key as u64) << 32;
    a[1] = value as u64 | (entries as u64) << 32;
    a[2] = flags as u64;
    bpf_fd(CMD_MAP_CREATE, &mut a)
}

fn map_update(map: &OwnedFd, key: u32, value: u64) -> io::Result<()> {
    let mut a = [0u64; 16];
    a[0] = fd(map) as u64;
    a[1] = &key as *const u32 as u64;
    a[2] = &value as *const u64 as u64;
    bpf(CMD_MAP_UPDATE_ELEM, &mut a).map(drop)
}

/// `BPF_PROG_LOAD` of a tracepoint program; the verifier's last lines in
/// the error when it refuses.
fn prog_load(code: &[Insn]) -> Result<OwnedFd, String> {
    // `bpf_get_stack` is for GPL-compatible programs.
    const LICENSE: &[u8] = b"Dual MIT/GPL\0";
    let mut log = vec![0u8; 1 << 16];
    let mut a = [0u64; 16];
    a[0] = PROG_TRACEPOINT | (code.len() as u64) << 32;
    a[1] = code.as_ptr() as u64;
    a[2] = LICENSE.as_ptr() as u64;
    a[3] = 1 | (log.len() as u64) << 32; // log_level, log_size
    a[4] = log.as_mut_ptr() as u64;
    bpf_fd(CMD_PROG_LOAD, &mut a).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&log[..end]);
        let last: Vec<&str> = text.lines().rev().take(3).collect();
        format!("BPF program refused: {e} ({})", last.join(" / "))
    })
}

/// Attaches the program to the tracepoint through a perf event (one, on
/// any CPU: a tracepoint's programs run on every CPU).
fn attach(tp: &Tracepoint, prog: &OwnedFd) -> Result<OwnedFd, String> {
    use perf_event_open_sys::bindings as sys;
    // SAFETY: perf_event_attr is a plain C struct for which all-zero is the
    // documented "nothing requested" value.
    let mut a: sys::perf_event_attr = unsafe { std::mem::zeroed() };
    a.type_ = sys::PERF_TYPE_TRACEPOINT;
    a.size = std::mem::size_of::<sys::perf_event_attr>() as u32;
    a.config = tp.id;
    a.__bindgen_anon_1.sample_period = 1;
    // Disabled: it is only the program's anchor (a tracepoint's programs
    // run whether or not its events are enabled); enabled, it would take
    // a sample of every switch on its CPU, since the program returns 1.
    a.set_disabled(1);
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() }.max(0);
    // SAFETY: `a` is a fully initialised attr of the size it states.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut a, -1, cpu, -1, sys::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        return Err(format!(
            "sched_switch perf event: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: a new fd that nothing else owns.
    let event = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: both fds are open; SET_BPF reads the program fd by value.
    if unsafe { perf_event_open_sys::ioctls::SET_BPF(fd, prog.as_raw_fd() as u32) } < 0 {
        return Err(format!(
            "attaching the BPF program: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(event)
}

/// A one-entry u64 array map, mapped into this process: the program adds
/// to it, the writer reads it.
struct Counter {
    _map: OwnedFd,
    page: *mut u8,
    len: usize,
}

// SAFETY: the mapping belongs to this `Counter` alone (unmapped in Drop);
// only the writer thread that owns the sampler reads it.
unsafe impl Send for Counter {}

impl Counter {
    fn map(map: OwnedFd) -> io::Result<Counter> {
        // SAFETY: sysconf has no preconditions.
        let len = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        // SAFETY: a fresh shared read-only mapping of an mmapable array
        // map's values (one page holds its one u64).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Counter {
            _map: map,
            page: p.cast(),
            len,
        })
    }

    fn get(&self) -> u64 {
        // SAFETY: the value is a naturally aligned u64 at the start of the
        // mapping, which the program updates atomically.
        unsafe { &*self.page.cast::<AtomicU64>() }.load(Ordering::Relaxed)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, not yet unmapped.
        unsafe { libc::munmap(self.page.cast(), self.len) };
    }
}

// ------------------------------------------------------ the ring buffer

/// The BPF ring buffer's mappings: the consumer position (ours to write),
/// and the producer position followed by the data area mapped twice (so a
/// record that wraps is contiguous).
struct BpfRing {
    _map: OwnedFd,
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    size: usize,
}

// SAFETY: the mappings belong to this `BpfRing` alone (unmapped in Drop);
// only the writer thread that owns the sampler reads or writes them.
unsafe impl Send for BpfRing {}

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_BYTES: usize = 8;

impl BpfRing {
    fn map(map: OwnedFd) -> io::Result<BpfRing> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let size = RING_BYTES as usize;
        let mmap = |len: usize, prot: i32, off: usize| -> io::Result<*mut u8> {
            // SAFETY: a fresh shared mapping of the ring map's fd at the
            // offsets the kernel documents; it checks the lengths.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    prot,
                    libc::MAP_SHARED,
                    map.as_raw_fd(),
                    off as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                Err(io::Error::last_os_error())
            } else {
                Ok(p.cast())
            }
        };
        let consumer = mmap(page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = match mmap(page + 2 * size, libc::PROT_READ, page) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: the consumer page mapped just above.
                unsafe { libc::munmap(consumer.cast(), page) };
                return Err(e);
            }
        };
        Ok(BpfRing {
            _map: map,
            consumer,
            producer,
            page,
            size,
        })
    }

    /// Hands every committed record to `f` (in the order the program
    /// reserved them), then frees their space.
    fn read(&mut self, f: impl FnMut(&[u8])) {
        // SAFETY: the first word of each position page is a naturally
        // aligned u64; the kernel writes the producer's, we the consumer's.
        let (cons_pos, prod_pos) = unsafe {
            (
                &*self.consumer.cast::<AtomicU64>(),
                &*self.producer.cast::<AtomicU64>(),
            )
        };
        // SAFETY: the data area follows the producer page in its mapping,
        // `size` bytes mapped twice.
        unsafe {
            read_records(
                cons_pos,
                prod_pos,
                self.producer.add(self.page),
                self.size,
                f,
            )
        }
    }
}

/// The BPF ring buffer's consumer protocol: hands every committed record
/// between the consumer and the producer positions to `f`, stops at one
/// still being written, skips discarded ones, and advances the consumer
/// position past what it read.
///
/// # Safety
/// `data` points to `2 * size` readable bytes (the data area mapped twice,
/// `size` a power of two >= 8), 8-byte aligned, holding the records the
/// positions describe.
unsafe fn read_records(
    cons_pos: &AtomicU64,
    prod_pos: &AtomicU64,
    data: *const u8,
    size: usize,
    mut f: impl FnMut(&[u8]),
) {
    let mut cons = cons_pos.load(Ordering::Relaxed);
    // Acquire: pairs with the kernel's release of `producer_pos` after it
    // wrote a record's header.
    let prod = prod_pos.load(Ordering::Acquire);
    let mask = size as u64 - 1;
    while cons < prod {
        let at = (cons & mask) as usize;
        // SAFETY: records are 8-byte aligned inside the data area.
        let hdr = unsafe { &*data.add(at).cast::<AtomicU32>() };
        // Acquire: pairs with the kernel's release when it commits the
        // record (clearing the busy bit): its bytes are written.
        let len = hdr.load(Ordering::Acquire);
        if len & BUSY_BIT != 0 {
            break; // reserved, not yet committed: read it next time
        }
        let body = (len & !(BUSY_BIT | DISCARD_BIT)) as usize;
        let step = (HDR_BYTES + body).next_multiple_of(8) as u64;
        if body > size - HDR_BYTES || step > prod - cons {
            // Not a record the kernel could have written: skip the rest
            // rather than loop or misread.
            cons = prod;
            break;
        }
        if len & DISCARD_BIT == 0 {
            // SAFETY: the record lies inside the doubly mapped data area
            // (at < size, 8 + body <= size), below `prod`.
            f(unsafe { std::slice::from_raw_parts(data.add(at + HDR_BYTES), body) });
        }
        cons += step;
    }
    // Release: our reads of the records happen before the kernel may
    // reuse their space.
    cons_pos.store(cons, Ordering::Release);
}

impl Drop for BpfRing {
    fn drop(&mut self) {
        // SAFETY: the two mappings made in `map`, not yet unmapped; no
        // reference into them outlives `self`.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + 2 * self.size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMAT: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";

    #[test]
    fn format_offsets_are_read() {
        let tp = Tracepoint::from_format(372, FORMAT).unwrap();
        assert_eq!((tp.id, tp.prev_pid, tp.next_pid), (372, 24, 56));
        assert_eq!(field_offset(FORMAT, "prev_comm"), None); // not 4 bytes
        assert_eq!(field_offset(FORMAT, "prev_state"), None);
        let err = Tracepoint::from_format(1, &FORMAT.replace("next_pid", "nxt"))
            .err()
            .unwrap();
        assert!(err.contains("next_pid"), "{err}");
    }

    #[test]
    fn jumps_land_inside_the_program() {
        let tp = Tracepoint::from_format(372, FORMAT).unwrap();
        let maps = Maps {
            slots: 3,
            parked: 4,
            scratch: 5,
            ring: 6,
            lost: 7,
        };
        let copy = StackCopy {
            bytes: 16384,
            regs: [128, 152, 32],
        };
        for at in [Some(1400), None] {
            for c in [Some(&copy), None] {
                check_jumps(&program(&tp, &maps, at, c));
            }
        }
    }

    fn check_jumps(code: &[Insn]) {
        for (i, c) in code.iter().enumerate() {
            let class = c.code & 0x07;
            let op = c.code & 0xf0;
            if class == JMP && op != CALL && op != EXIT {
                let t = i as isize + 1 + c.off as isize;
                assert!(t > i as isize && (t as usize) < code.len(), "jump at {i}");
            }
        }
        assert_eq!(code.last().unwrap().code, JMP | EXIT);
    }

    /// A ring of `SIZE` bytes mapped twice, as the kernel maps it; records
    /// are written at their positions (a wrapping one in both copies).
    struct FakeRing {
        words: Vec<u64>,
        cons: AtomicU64,
        prod: AtomicU64,
    }

    const SIZE: usize = 64;

    impl FakeRing {
        fn new(start: u64) -> FakeRing {
            FakeRing {
                words: vec![0; 2 * SIZE / 8],
                cons: AtomicU64::new(start),
                prod: AtomicU64::new(start),
            }
        }
        fn put(&mut self, header: u32, body: &[u8]) {
            let pos = self.prod.load(Ordering::Relaxed) as usize;
            let mut rec = header.to_ne_bytes().to_vec();
            rec.extend_from_slice(&[0; 4]);
            rec.extend_from_slice(body);
            rec.resize(rec.len().next_multiple_of(8), 0);
            let bytes: &mut [u8] = bytes_of(&mut self.words);
            for (k, b) in rec.iter().enumerate() {
                let at = (pos + k) % SIZE;
                bytes[at] = *b;
                bytes[at + SIZE] = *b;
            }
            self.prod.store((pos + rec.len()) as u64, Ordering::Relaxed);
        }
        fn read(&mut self) -> Vec<Vec<u8>> {
            let mut got = Vec::new();
            // SAFETY: `words` holds 2 * SIZE bytes, 8-byte aligned, laid
            // out as the kernel's double mapping.
            unsafe {
                read_records(
                    &self.cons,
                    &self.prod,
                    self.words.as_ptr().cast(),
                    SIZE,
                    |r| got.push(r.to_vec()),
                )
            };
            got
        }
    }

    fn bytes_of(words: &mut [u64]) -> &mut [u8] {
        // SAFETY: u64s are plain bytes; the slice covers exactly them.
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
    }

    #[test]
    fn ring_reader_follows_the_kernel_protocol() {
        // Start 16 bytes before the end, so the second record wraps.
        let mut r = FakeRing::new(SIZE as u64 - 16);
        r.put(3, b"abc");
        r.put(12, b"0123456789ab");
        assert_eq!(r.read(), vec![b"abc".to_vec(), b"0123456789ab".to_vec()]);
        assert_eq!(
            r.cons.load(Ordering::Relaxed),
            r.prod.load(Ordering::Relaxed)
        );
        // A discarded record is skipped; one still busy stops the reader
        // until it is committed.
        r.put(DISCARD_BIT | 2, b"xx");
        let busy_at = r.prod.load(Ordering::Relaxed);
        r.put(BUSY_BIT | 1, b"y");
        r.put(1, b"z");
        assert_eq!(r.read(), Vec::<Vec<u8>>::new());
        assert_eq!(r.cons.load(Ordering::Relaxed), busy_at);
        let bytes = bytes_of(&mut r.words);
        let at = busy_at as usize % SIZE;
        bytes[at..at + 4].copy_from_slice(&1u32.to_ne_bytes());
        bytes[at + SIZE..at + SIZE + 4].copy_from_slice(&1u32.to_ne_bytes());
        assert_eq!(r.read(), vec![b"y".to_vec(), b"z".to_vec()]);
        // A length the kernel could not have written ends the read at the
        // producer instead of looping or reading out of bounds.
        r.put(1000, b"");
        assert_eq!(r.read(), Vec::<Vec<u8>>::new());
        assert_eq!(
            r.cons.load(Ordering::Relaxed),
            r.prod.load(Ordering::Relaxed)
        );
    }

    fn record(kind: u32, tid: u32, ns: u64, stack: Option<(i64, &[u64])>) -> Vec<u8> {
        with_cpu(kind, tid, ns, (kind != KIND_IN).then_some(5000), stack)
    }

    fn with_cpu(
        kind: u32,
        tid: u32,
        ns: u64,
        cpu_ns: Option<u64>,
        stack: Option<(i64, &[u64])>,
    ) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&kind.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&ns.to_ne_bytes());
        if let Some(c) = cpu_ns {
            r.extend_from_slice(&c.to_ne_bytes());
        }
        if let Some((len, frames)) = stack {
            r.extend_from_slice(&len.to_ne_bytes());
            for f in frames {
                r.extend_from_slice(&f.to_ne_bytes());
            }
        }
        r
    }

    #[test]
    fn records_parse_and_bad_ones_are_refused() {
        let out = record(KIND_OUT, 7, 100, Some((16, &[0x1000, 0x2000])));
        assert_eq!(
            parse(&out),
            Some(Switch::Out {
                tid: 7,
                ns: 100,
                cpu_ns: 5000,
                stack: vec![0x1000, 0x2000],
                copy: None,
            })
        );
        // bpf_get_stack's error: no stack, the switch still counts.
        let err = record(KIND_OUT, 7, 100, Some((-14, &[])));
        assert_eq!(
            parse(&err),
            Some(Switch::Out {
                tid: 7,
                ns: 100,
                cpu_ns: 5000,
                stack: vec![],
                copy: None,
            })
        );
        let inr = record(KIND_IN, 7, 300, None);
        assert_eq!(parse(&inr), Some(Switch::In { tid: 7, ns: 300 }));
        let res = record(KIND_RESUMED, 7, 400, None);
        assert_eq!(
            parse(&res),
            Some(Switch::Resumed {
                tid: 7,
                ns: 400,
                cpu_ns: 5000
            })
        );
        for cut in 0..res.len() {
            assert_eq!(parse(&res[..cut]), None, "cut at {cut}");
        }
        assert_eq!(parse(&record(9, 7, 1, None)), None);
        for cut in 0..out.len() {
            assert_eq!(parse(&out[..cut]), None, "cut at {cut}");
        }
    }

    impl Pairs {
        /// `take` without an unwinder.
        fn put(&mut self, rec: &[u8]) -> Option<Interval> {
            self.take(rec, &mut |_, _, _| None)
        }
    }

    /// A `KIND_OUT_COPY` record: a one-frame walk, the registers, `copy`.
    fn with_copy(tid: u32, ns: u64, regs: [u64; 3], copy: &[u8]) -> Vec<u8> {
        let mut r = record(KIND_OUT_COPY, tid, ns, Some((8, &[regs[0]])));
        r.resize(REGS_AT as usize, 0);
        for v in regs.into_iter().chain([copy.len() as u64]) {
            r.extend_from_slice(&v.to_ne_bytes());
        }
        r.extend_from_slice(copy);
        r
    }

    #[test]
    fn a_short_walk_carries_its_registers_and_stack_copy_to_the_unwinder() {
        let rec = with_copy(7, 100, [0x1000, 0x7f00, 0x42], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let regs = Regs {
            ip: 0x1000,
            sp: 0x7f00,
            bp: 0x42,
        };
        let want = Some(Switch::Out {
            tid: 7,
            ns: 100,
            cpu_ns: 5000,
            stack: vec![0x1000],
            copy: Some((regs, COPY_AT as usize..COPY_AT as usize + 8)),
        });
        assert_eq!(parse(&rec), want);
        // A copy longer than the record is refused, not read past its end.
        for cut in [REGS_AT as usize + 4, COPY_AT as usize, rec.len() - 1] {
            assert_eq!(parse(&rec[..cut]), None, "cut at {cut}");
        }
        // The unwinder gets the walk, the registers and the copy's bytes;
        // the interval keeps what it returns.
        let mut p = Pairs::default();
        let mut seen = Vec::new();
        let mut repair = |k: &[u64], r: Regs, b: &[u8]| {
            seen.push((k.to_vec(), r, b.to_vec()));
            Some(vec![0x1000, 0x2000, 0x3000])
        };
        assert_eq!(p.take(&rec, &mut repair), None);
        let end = p.take(&record(KIND_IN, 7, 400, None), &mut repair);
        assert_eq!(end.map(|iv| iv.stack), Some(vec![0x1000, 0x2000, 0x3000]));
        assert_eq!(
            seen,
            vec![(vec![0x1000], regs, vec![1, 2, 3, 4, 5, 6, 7, 8])]
        );
    }

    #[test]
    fn switch_outs_pair_with_switch_ins_or_their_dated_resumption() {
        let mut p = Pairs::default();
        let out = |tid, ns, cpu| with_cpu(KIND_OUT, tid, ns, Some(cpu), Some((8, &[0xa0][..])));
        let iv = |tid, end_ns, off_ns| Interval {
            tid,
            end_ns,
            off_ns,
            stack: vec![0xa0],
        };
        // A traced switch-in ends the interval.
        assert_eq!(p.put(&out(1, 1_000, 50_000)), None);
        assert_eq!(
            p.put(&record(KIND_IN, 1, 4_000, None)),
            Some(iv(1, 4_000, 3_000))
        );
        // A switch-in with nothing waiting (its switch-out came before the
        // thread was added) is nothing.
        assert_eq!(p.put(&record(KIND_IN, 1, 5_000, None)), None);
        // Untraced switch-in: at 20,000 the thread has run 6,000 ns since
        // its switch-out at 10,000, so it resumed at 14,000.
        assert_eq!(p.put(&out(2, 10_000, 70_000)), None);
        let res = |tid, ns, cpu| with_cpu(KIND_RESUMED, tid, ns, Some(cpu), None);
        assert_eq!(p.put(&res(2, 20_000, 76_000)), Some(iv(2, 14_000, 4_000)));
        // More CPU time than wall time (a clock skew): the interval is
        // empty, never negative.
        assert_eq!(p.put(&out(2, 30_000, 76_000)), None);
        assert_eq!(p.put(&res(2, 31_000, 90_000)), Some(iv(2, 30_000, 0)));
        // No CPU time (no BTF): the interval is lost, and counted.
        assert_eq!(p.put(&out(3, 1_000, 0)), None);
        assert_eq!(p.put(&res(3, 2_000, 0)), None);
        assert_eq!(p.unpaired, 1);
        // A record the program could not have written is counted too.
        assert_eq!(p.put(&record(9, 3, 0, None)), None);
        assert_eq!(p.unpaired, 2);
        assert!(p.outs.is_empty());
    }
}
