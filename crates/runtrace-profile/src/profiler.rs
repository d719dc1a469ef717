//! The profiler of one recording: picks the samplers once at start, takes
//! their samples each round and turns them into `cpu_sample` / `off_cpu`
//! events, `STACKS`, `MAPPINGS` and `PROFILE` frames (docs/format.md,
//! format 1.1) for the writer to write.
//!
//! Backends, picked once at start: `perf_event_open` (`perf.rs`; per-CPU
//! on-CPU events where allowed, else per-thread), else the CPU-time timer +
//! SIGPROF fallback (`signal.rs`, on-CPU only), else nothing, said once on
//! stderr and in every file's `PROFILE` frame. Off-CPU stacks come from
//! the scheduler's switch tracepoint through a BPF program (`bpf.rs`)
//! where the kernel allows it, else from per-thread context-switch perf
//! events (`perf.rs`). [`CpuBackend`] narrows the choice (the recorder sets
//! it from `RUNTRACE_CPU_FALLBACK=perf-thread|signal|off`).
//!
//! Everything here runs on the writer thread: the application's threads
//! are sampled by the kernel (or by the signal handler), never slowed by
//! this module. It uses the samplers, `maps` and `intern`; none of them
//! imports it.

// The allocation sampler's statics cannot be loom's (see `alloc`).
#[cfg(not(loom))]
use crate::alloc::AllocSampling;
use crate::bpf::SwitchTracer;
use crate::intern::Stacks;
use crate::maps::Maps;
use crate::perf::PerfSampler;
use crate::sample::{RawKind, RawSample};
use crate::signal::SignalSampler;
use crate::unwind::Unwinder;
use runtrace_core::clock::TraceClock;
use runtrace_format::chunk::{ChunkHeader, ChunkState};
use runtrace_format::frame::{self, FrameType, ProfileInfo};
use runtrace_format::schema::ids;
use runtrace_format::varint;

const MODE_NONE: u64 = ProfileInfo::MODE_NONE;
const MODE_PERF: u64 = ProfileInfo::MODE_PERF;
const MODE_SIGNAL: u64 = ProfileInfo::MODE_SIGNAL;
const FLAG_OFF_CPU: u64 = ProfileInfo::FLAG_OFF_CPU;

/// Which CPU sampler a profiler may use (the recorder's
/// `RUNTRACE_CPU_FALLBACK`, a switch for tests and for hosts where
/// `perf_event_open` misbehaves).
///
/// ```
/// use runtrace_profile::CpuBackend;
/// // What `RUNTRACE_CPU_FALLBACK=signal` asks for.
/// let choice = CpuBackend::Signal;
/// assert_ne!(choice, CpuBackend::Auto);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuBackend {
    /// `perf_event_open`, else the timer + signal fallback (unset).
    Auto,
    /// `perf_event_open` with a per-thread on-CPU event even where
    /// per-CPU events are allowed (`perf-thread`), else as `Auto`.
    PerfThread,
    /// The timer + signal fallback only (`signal`).
    Signal,
    /// No sampling: the trace says profiling was asked for but off (`off`).
    Off,
}

enum Backend {
    Perf(Box<PerfSampler>),
    Signal(SignalSampler),
    None,
}

/// The profiler of one recording, owned by its writer thread, which calls
/// it in this order: [`start`](Profiler::start) once, then
/// [`file_start`](Profiler::file_start) whenever a file opens,
/// [`add_thread`](Profiler::add_thread) /
/// [`remove_thread`](Profiler::remove_thread) as threads join and leave,
/// and each round [`collect`](Profiler::collect) up to the round's
/// watermark, [`encode`](Profiler::encode) into the file being written,
/// and [`undo`](Profiler::undo) if writing that round failed.
///
/// ```no_run
/// use runtrace_core::clock::{gettid, TraceClock};
/// use runtrace_profile::{CpuBackend, Profiler};
/// let clock = TraceClock::get();
/// let mut p = Profiler::start(99, CpuBackend::Auto, true, clock);
/// let mut file = Vec::new(); // after the file's header and definitions
/// p.file_start(&mut file);
/// p.add_thread(gettid()); // a thread to sample (here the caller)
/// // ... the thread runs; each writer round then:
/// let mut samples = Vec::new();
/// let lost = p.collect(clock.now(), &mut samples);
/// let round = p.encode(&samples, gettid());
/// file.extend_from_slice(&round.defs);
/// file.extend_from_slice(&round.chunk);
/// # let _ = lost;
/// ```
pub struct Profiler {
    backend: Backend,
    /// Off-CPU stacks from the switch tracepoint (with the perf backend,
    /// where BPF is allowed; else the perf backend takes them itself).
    switches: Option<SwitchTracer>,
    info: ProfileInfo,
    maps: Maps,
    stacks: Stacks,
    /// A thread that could not be sampled was reported (once).
    said_thread_problem: bool,
    /// Heap allocation sampling, when the recording asked for it.
    #[cfg(not(loom))]
    alloc: Option<AllocSampling>,
    /// Allocation samples drained but later than the last cutoff.
    alloc_pending: Vec<RawSample>,
    /// Completes stacks whose leaf keeps no frame pointer, for the perf
    /// backend's on-CPU samples and the switch tracer's off-CPU stack
    /// copies alike (one set of unwind tables per process).
    unwinder: Unwinder,
}

/// What [`Profiler::encode`] made for one round: definition frames to
/// write before the chunks, the writer thread's CHUNK frame, and how to
/// undo the per-file bookkeeping if writing them fails.
///
/// ```
/// use runtrace_profile::Encoded;
/// let round = Encoded::default(); // what a round without samples gives
/// assert!(round.defs.is_empty() && round.chunk.is_empty());
/// ```
#[derive(Default)]
pub struct Encoded {
    /// `MAPPINGS` and `STACKS` frames the round's samples need and the
    /// file does not define yet: written before the chunks.
    pub defs: Vec<u8>,
    /// One `CHUNK` frame of the writer thread holding the round's
    /// `cpu_sample` / `off_cpu` events (empty without samples).
    pub chunk: Vec<u8>,
    /// What `defs` told the file, for [`Profiler::undo`].
    pub undo: Undo,
}

/// Which definitions an unwritten round would have told its file: hand it
/// to [`Profiler::undo`] when the round's frames were not written.
///
/// ```no_run
/// # use runtrace_profile::{CpuBackend, Profiler, RawSample};
/// # let mut p = Profiler::start(99, CpuBackend::Auto, true, runtrace_core::clock::TraceClock::get());
/// # let samples: Vec<RawSample> = Vec::new();
/// let round = p.encode(&samples, 1);
/// // ... writing round.defs and round.chunk failed:
/// p.undo(round.undo); // the file still lacks those definitions
/// ```
#[derive(Default)]
pub struct Undo {
    stacks: Vec<u64>,
    maps: Vec<usize>,
}

impl Profiler {
    /// Starts profiling at `hz` samples per second of CPU time per thread
    /// with the backend `choice` allows, with off-CPU stacks if `off_cpu`;
    /// times become ticks of `clock`. Never fails: what is not possible
    /// becomes the `PROFILE` message (and one stderr line when no sampling
    /// at all is possible).
    ///
    /// ```
    /// use runtrace_profile::{CpuBackend, Profiler};
    /// let clock = runtrace_core::clock::TraceClock::get();
    /// // `Off` samples nothing, but the files still say profiling was asked for.
    /// let mut p = Profiler::start(99, CpuBackend::Off, false, clock);
    /// let mut file = Vec::new();
    /// p.file_start(&mut file);
    /// assert!(!file.is_empty()); // the PROFILE frame
    /// ```
    pub fn start(
        hz: u32,
        choice: CpuBackend,
        off_cpu: bool,
        clock: &'static TraceClock,
    ) -> Profiler {
        let mut why_not: Vec<String> = Vec::new();
        let mut backend = Backend::None;
        // Off-CPU stacks through BPF unless per-thread events are forced;
        // the reason it failed goes into the message when the per-thread
        // events take over.
        let mut switches = None;
        let mut bpf_problem = None;
        if off_cpu && choice == CpuBackend::Auto {
            // A bad value is said by the perf sampler's message.
            let copy = crate::perf::stack_copy_setting(
                std::env::var("RUNTRACE_CPU_STACK_COPY").ok().as_deref(),
            )
            .unwrap_or(crate::unwind::STACK_COPY);
            match SwitchTracer::new(clock, copy) {
                Ok(t) => switches = Some(t),
                Err(e) => bpf_problem = Some(e),
            }
        }
        if matches!(choice, CpuBackend::Auto | CpuBackend::PerfThread) {
            let per_thread = choice == CpuBackend::PerfThread;
            match PerfSampler::new(hz, clock, per_thread, off_cpu && switches.is_none()) {
                Ok(p) => backend = Backend::Perf(Box::new(p)),
                Err(e) => why_not.push(e),
            }
        }
        if !matches!(backend, Backend::Perf(_)) {
            // On-CPU samples from the signal fallback come without
            // off-CPU stacks (see `signal.rs`): keep the two consistent.
            switches = None;
        }
        if matches!(backend, Backend::None) && choice != CpuBackend::Off {
            match SignalSampler::new(hz) {
                Ok(s) => backend = Backend::Signal(s),
                Err(e) => why_not.push(format!("signal fallback: {e}")),
            }
        }
        if choice == CpuBackend::Off {
            why_not.push("disabled by RUNTRACE_CPU_FALLBACK=off".into());
        } else if choice == CpuBackend::Signal {
            why_not.insert(
                0,
                "perf_event_open not tried (RUNTRACE_CPU_FALLBACK=signal)".into(),
            );
        }
        let (mode, flags, message) = match &backend {
            Backend::Perf(p) => (
                MODE_PERF,
                if p.off_cpu() || switches.is_some() {
                    FLAG_OFF_CPU
                } else {
                    0
                },
                match (&switches, &p.off_cpu_problem, &bpf_problem) {
                    (Some(t), _, _) => format!("{}; {}", p.on_cpu_events(), t.describe()),
                    (None, Some(why), _) => format!("{}; {why}", p.on_cpu_events()),
                    (None, None, Some(bpf)) => format!(
                        "{}; off-CPU: per-thread context-switch events (BPF not used: {bpf})",
                        p.on_cpu_events()
                    ),
                    (None, None, None) => format!(
                        "{}; off-CPU: per-thread context-switch events",
                        p.on_cpu_events()
                    ),
                },
            ),
            Backend::Signal(_) => (
                MODE_SIGNAL,
                0,
                format!(
                    "{}; timer + signal fallback: on-CPU samples only",
                    why_not.join("; ")
                ),
            ),
            Backend::None => {
                let m = format!("no CPU samples: {}", why_not.join("; "));
                eprintln!("runtrace: CPU profiling at {hz} Hz is not possible: {m}");
                (MODE_NONE, 0, m)
            }
        };
        let maps = if matches!(backend, Backend::None) {
            Maps::default()
        } else {
            Maps::read()
        };
        Profiler {
            backend,
            switches,
            info: ProfileInfo {
                mode,
                hz: hz as u64,
                flags,
                message,
            },
            maps,
            stacks: Stacks::default(),
            said_thread_problem: false,
            #[cfg(not(loom))]
            alloc: None,
            alloc_pending: Vec::new(),
            unwinder: Unwinder::new(),
        }
    }

    /// A profiler that takes no CPU samples (its `PROFILE` frame says CPU
    /// profiling was not asked for): for a recording that samples
    /// allocations only ([`Profiler::sample_allocations`]).
    ///
    /// ```
    /// use runtrace_format::frame::ProfileInfo;
    /// let p = runtrace_profile::Profiler::without_cpu();
    /// assert_eq!(p.info().mode, ProfileInfo::MODE_NONE);
    /// ```
    pub fn without_cpu() -> Profiler {
        Profiler {
            backend: Backend::None,
            switches: None,
            info: ProfileInfo {
                mode: MODE_NONE,
                hz: 0,
                flags: 0,
                message: "no CPU samples: CPU profiling not asked for".into(),
            },
            maps: Maps::read(),
            stacks: Stacks::default(),
            said_thread_problem: false,
            #[cfg(not(loom))]
            alloc: None,
            alloc_pending: Vec::new(),
            unwinder: Unwinder::new(),
        }
    }

    /// Samples heap allocations made through `runtrace::alloc::Sampled`
    /// (one per `mean` bytes allocated on average) until this profiler is
    /// dropped; [`Profiler::collect`] then also hands out `alloc_sample`s,
    /// and with `live` the `alloc_free`s of sampled allocations.
    /// Fails if `mean` is 0 or another recording samples allocations.
    ///
    /// ```
    /// let mut p = runtrace_profile::Profiler::without_cpu();
    /// p.sample_allocations(512 * 1024, false).unwrap();
    /// ```
    #[cfg(not(loom))]
    pub fn sample_allocations(&mut self, mean: u64, live: bool) -> Result<(), String> {
        if self.alloc.is_none() {
            self.alloc = Some(AllocSampling::start(mean, live)?);
        }
        Ok(())
    }

    /// The allocation sampler is not built for the loom models (its static
    /// queue has a model of its own): the recorder's models compile
    /// against this, and a recording asking for it is told why.
    #[cfg(loom)]
    pub fn sample_allocations(&mut self, _mean: u64, _live: bool) -> Result<(), String> {
        Err("allocation sampling is not built under cfg(loom)".to_string())
    }

    /// What every file's `PROFILE` frame says: the mode (perf, signal or
    /// none), the rate, whether off-CPU stacks are taken, and the message
    /// naming the samplers in use or why there are none.
    ///
    /// ```
    /// use runtrace_format::frame::ProfileInfo;
    /// use runtrace_profile::{CpuBackend, Profiler};
    /// let p = Profiler::start(99, CpuBackend::Off, false, runtrace_core::clock::TraceClock::get());
    /// assert_eq!(p.info().mode, ProfileInfo::MODE_NONE);
    /// assert!(p.info().message.contains("RUNTRACE_CPU_FALLBACK=off"));
    /// ```
    pub fn info(&self) -> &ProfileInfo {
        &self.info
    }

    /// Starts sampling a thread (its OS thread id) that joined the
    /// recording. A thread that cannot be sampled is said once on stderr;
    /// the recording goes on.
    ///
    /// ```no_run
    /// # use runtrace_profile::{CpuBackend, Profiler};
    /// # let mut p = Profiler::start(99, CpuBackend::Auto, true, runtrace_core::clock::TraceClock::get());
    /// let tid = std::thread::spawn(runtrace_core::clock::gettid).join().unwrap();
    /// p.add_thread(tid);
    /// ```
    pub fn add_thread(&mut self, tid: u64) {
        let r = match &mut self.backend {
            Backend::Perf(p) => p.add_thread(tid),
            Backend::Signal(s) => s.add_thread(tid),
            Backend::None => Ok(()),
        };
        let r = match (r, &mut self.switches) {
            (Ok(()), Some(t)) => t.add_thread(tid),
            (r, _) => r,
        };
        if let Err(e) = r {
            if !std::mem::replace(&mut self.said_thread_problem, true) {
                eprintln!("runtrace: CPU profiling: a thread is not sampled: {e}");
            }
        }
    }

    /// Stops sampling a thread that left the recording (its ring closed).
    ///
    /// ```no_run
    /// # use runtrace_profile::{CpuBackend, Profiler};
    /// # let mut p = Profiler::start(99, CpuBackend::Auto, true, runtrace_core::clock::TraceClock::get());
    /// let tid = runtrace_core::clock::gettid();
    /// p.add_thread(tid);
    /// p.remove_thread(tid);
    /// ```
    pub fn remove_thread(&mut self, tid: u64) {
        match &mut self.backend {
            Backend::Perf(p) => p.remove_thread(tid, &mut self.unwinder),
            Backend::Signal(s) => s.remove_thread(tid),
            Backend::None => {}
        }
        if let Some(t) = &mut self.switches {
            t.remove_thread(tid, &mut self.unwinder);
        }
    }

    /// Takes every sample up to `cutoff` (the round's watermark) into
    /// `out`, in time order; returns samples lost since the last call.
    /// Re-reads the mappings (at most once per call) when a sample's leaf
    /// is outside every known one.
    ///
    /// ```no_run
    /// # use runtrace_profile::{CpuBackend, Profiler};
    /// # let clock = runtrace_core::clock::TraceClock::get();
    /// # let mut p = Profiler::start(99, CpuBackend::Auto, true, clock);
    /// let mut samples = Vec::new();
    /// let lost = p.collect(clock.now(), &mut samples);
    /// assert!(samples.windows(2).all(|w| w[0].ticks <= w[1].ticks));
    /// # let _ = lost;
    /// ```
    pub fn collect(&mut self, cutoff: u64, out: &mut Vec<RawSample>) -> u64 {
        let mut lost = match &mut self.backend {
            Backend::Perf(p) => p.drain(cutoff, out, &mut self.unwinder),
            Backend::Signal(s) => s.drain(cutoff, out),
            Backend::None => 0,
        };
        if let Some(t) = &mut self.switches {
            lost += t.drain(cutoff, out, &mut self.unwinder);
        }
        #[cfg(not(loom))]
        if let Some(a) = &mut self.alloc {
            lost += a.drain(&mut self.alloc_pending, cutoff);
            crate::sample::take_up_to(&mut self.alloc_pending, cutoff, out);
        }
        out.sort_by_key(|s| s.ticks);
        for s in out.iter() {
            if let Some(&leaf) = s.stack.first() {
                self.maps.ensure(leaf, cutoff);
            }
        }
        lost
    }

    /// Appends to `out` the frames a new file starts with: `PROFILE` and
    /// every known mapping; the file defines no stack yet.
    ///
    /// ```
    /// # use runtrace_profile::{CpuBackend, Profiler};
    /// # let mut p = Profiler::start(99, CpuBackend::Off, false, runtrace_core::clock::TraceClock::get());
    /// let mut out = Vec::new();
    /// p.file_start(&mut out);
    /// assert_eq!(out[0], runtrace_format::frame::FrameType::Profile as u8);
    /// ```
    pub fn file_start(&mut self, out: &mut Vec<u8>) {
        frame::write(out, FrameType::Profile, &frame::profile(&self.info));
        self.stacks.reset_file();
        self.maps.reset_file();
        if let Some((payload, _)) = self.maps.take_unwritten() {
            frame::write(out, FrameType::Mappings, &payload);
        }
    }

    /// Encodes `samples` (time order) as events of the writer thread
    /// `writer_tid`, with the `MAPPINGS`/`STACKS` frames the current file
    /// still needs for them.
    ///
    /// ```
    /// use runtrace_profile::{CpuBackend, Profiler, RawKind, RawSample};
    /// let mut p = Profiler::start(99, CpuBackend::Off, false, runtrace_core::clock::TraceClock::get());
    /// p.file_start(&mut Vec::new());
    /// let s = RawSample { tid: 7, ticks: 100, kind: RawKind::OnCpu, stack: vec![0x1000, 0x2000] };
    /// let round = p.encode(&[s.clone()], 1);
    /// assert!(!round.defs.is_empty()); // STACKS: the file did not define the stack yet
    /// assert!(!round.chunk.is_empty()); // the writer thread's CHUNK
    /// assert!(p.encode(&[s], 1).defs.is_empty()); // now it does
    /// ```
    pub fn encode(&mut self, samples: &[RawSample], writer_tid: u64) -> Encoded {
        let mut undo = Undo::default();
        let mut defs = Vec::new();
        let mut chunk = Vec::new();
        if samples.is_empty() {
            return Encoded { defs, chunk, undo };
        }
        let mut events = Vec::with_capacity(samples.len() * 8);
        let mut prev = samples[0].ticks;
        for s in samples {
            let stack = if s.stack.is_empty() {
                0
            } else {
                self.stacks.intern(&s.stack)
            };
            // The fields after the tid, in catalog order.
            let (id, fields) = match s.kind {
                RawKind::OnCpu => (ids::CPU_SAMPLE, [Some(stack), None, None, None, None]),
                RawKind::OffCpu { off_ns } => {
                    (ids::OFF_CPU, [Some(stack), Some(off_ns), None, None, None])
                }
                RawKind::Alloc {
                    size,
                    weight,
                    addr,
                    live,
                } => (
                    ids::ALLOC_SAMPLE,
                    [
                        Some(stack),
                        Some(size),
                        Some(weight),
                        Some(addr),
                        Some(live as u64),
                    ],
                ),
                RawKind::AllocFree { addr, moved_to } => (
                    ids::ALLOC_FREE,
                    [Some(addr), Some(moved_to), None, None, None],
                ),
                RawKind::AllocNote {
                    untracked,
                    lost_frees,
                } => (
                    ids::ALLOC_NOTE,
                    [Some(untracked), Some(lost_frees), None, None, None],
                ),
            };
            // Built-in ids are below TAG_ESCAPE: one tag byte.
            events.push(id as u8);
            let ticks = s.ticks.max(prev);
            varint::put(&mut events, ticks - prev);
            prev = ticks;
            if !matches!(s.kind, RawKind::AllocNote { .. }) {
                varint::put(&mut events, s.tid); // every kind but the note has one
            }
            for n in fields.into_iter().flatten() {
                varint::put(&mut events, n);
            }
        }
        if let Some((payload, taken)) = self.maps.take_unwritten() {
            frame::write(&mut defs, FrameType::Mappings, &payload);
            undo.maps = taken;
        }
        if let Some((payload, taken)) = self.stacks.take_new() {
            frame::write(&mut defs, FrameType::Stacks, &payload);
            undo.stacks = taken;
        }
        let mut payload = Vec::with_capacity(events.len() + 32);
        ChunkHeader {
            tid: writer_tid,
            state: ChunkState {
                ticks: samples[0].ticks,
                task_reg: 0,
                worker_reg: runtrace_format::NO_WORKER,
            },
            count: samples.len() as u64,
        }
        .encode(&mut payload);
        payload.extend_from_slice(&events);
        frame::write(&mut chunk, FrameType::Chunk, &payload);
        Encoded { defs, chunk, undo }
    }

    /// The round `encode` was for was not written: its file does not have
    /// those definitions (the next round that uses them defines them).
    ///
    /// ```
    /// use runtrace_profile::{CpuBackend, Profiler, RawKind, RawSample};
    /// let mut p = Profiler::start(99, CpuBackend::Off, false, runtrace_core::clock::TraceClock::get());
    /// p.file_start(&mut Vec::new());
    /// let s = RawSample { tid: 7, ticks: 100, kind: RawKind::OnCpu, stack: vec![0x1000] };
    /// let failed = p.encode(&[s.clone()], 1);
    /// p.undo(failed.undo);
    /// assert!(!p.encode(&[s], 1).defs.is_empty()); // STACKS again
    /// ```
    pub fn undo(&mut self, undo: Undo) {
        self.stacks.undo(&undo.stacks);
        self.maps.undo(undo.maps);
    }
}
