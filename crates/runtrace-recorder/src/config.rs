//! Recording settings: the builder a program fills in, the environment
//! variables that override it (`docs/recorder.md`), and their validation.
//!
//! Starting a recording from a builder is the session's job
//! ([`RecorderBuilder::start`] is defined in `session.rs`), so this module
//! depends on nothing but the error type (and names the profiler's
//! [`CpuBackend`] setting).

use crate::error::RecordError;
use crate::sink::Sink;
use runtrace_profile::CpuBackend;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The sinks given to a builder, taken by the recording it starts (a
/// cloned builder shares them: the first recording takes them).
#[derive(Clone, Default)]
pub(crate) struct SinkList(pub(crate) Arc<Mutex<Vec<Box<dyn Sink>>>>);

impl SinkList {
    pub(crate) fn push(&self, s: Box<dyn Sink>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(s);
    }

    /// Takes the sinks out (for the recording that starts).
    pub(crate) fn take(&self) -> Vec<Box<dyn Sink>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl std::fmt::Debug for SinkList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_list().entries(l.iter().map(|s| s.name())).finish()
    }
}

/// Smallest per-thread buffer: 4 slots of 16 KiB.
pub(crate) const MIN_BUFFER: usize = 64 << 10;

/// Bytes per ring slot in buffers of at least 4 of them. The writer takes
/// sealed slots whole, without decoding, and leaves a busy thread's current
/// slot for its next round (`Ring::drain`); a thread that writes more than
/// one slot per flush interval then has all its events taken whole. At 16
/// KiB that is from ~330 KB/s at the default 50 ms, which a tokio worker of
/// the HTTP server benchmark exceeds (~1 MB/s); with 64 KiB slots the writer
/// decoded most of its events (~1% of the server's CPU). A chunk's own
/// overhead (~20 bytes) stays ~0.1% of its 16 KiB.
pub(crate) const SLOT_BYTES: usize = 16 << 10;

/// Recorder settings. Build with [`Recorder::builder`](crate::Recorder::builder).
///
/// ```
/// let builder = runtrace_recorder::Recorder::builder().path("out/trace");
/// # let _ = builder;
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) path: PathBuf,
    pub(crate) max_file_size: u64,
    pub(crate) max_total_size: u64,
    pub(crate) flush_interval: Duration,
    pub(crate) buffer_size: usize,
    /// CPU samples per second per thread; 0: no CPU profile.
    pub(crate) cpu_hz: u32,
    /// Which sampler the profiler may use (`RUNTRACE_CPU_FALLBACK`).
    pub(crate) cpu_backend: CpuBackend,
    /// Off-CPU stacks at every switch-out, with a CPU profile.
    pub(crate) off_cpu: bool,
    /// Mean bytes between allocation samples; 0: no memory profile.
    pub(crate) alloc_mean: u64,
    /// Flight recorder: keep segments in memory within this many bytes
    /// instead of writing files (`None`: file mode).
    pub(crate) memory: Option<u64>,
    /// Seal a segment once it is this old (memory mode; file mode rotates
    /// by size only).
    pub(crate) max_segment_age: Duration,
    /// What a snapshot keeps before its trigger, and how long recording
    /// goes on after it before the snapshot is written.
    pub(crate) snapshot_before: Duration,
    pub(crate) snapshot_after: Duration,
    /// At most one snapshot per this period.
    pub(crate) snapshot_cooldown: Duration,
    /// The signal that triggers a snapshot (`None`: none).
    pub(crate) snapshot_signal: Option<i32>,
    /// Trigger a snapshot when a poll lasts longer than this.
    pub(crate) snapshot_poll: Option<Duration>,
    /// Trigger a snapshot when a window's wake-to-poll p99 is above the
    /// limit: (limit, window).
    pub(crate) snapshot_wake_p99: Option<(Duration, Duration)>,
    /// Trigger a snapshot when a round reports at least this many events
    /// lost to full buffers.
    pub(crate) snapshot_drops: Option<u64>,
    /// `snapshot!` reasons (`*`: any) and events (`provider:name`) that
    /// trigger a snapshot.
    pub(crate) snapshot_events: Vec<String>,
    /// Record the frees of sampled allocations (the live set).
    pub(crate) alloc_live: bool,
    /// Where sealed segments are shipped (docs/flight-recorder.md).
    pub(crate) sinks: SinkList,
    /// Segments each sink's queue holds before dropping the oldest.
    pub(crate) sink_queue: usize,
    /// Tries of a segment after the first.
    pub(crate) sink_retries: u32,
    /// How long `finish()` waits for the sinks.
    pub(crate) sink_finish_timeout: Duration,
    /// The `service=` and `host=` of the segments' keys (`None`: the
    /// process name, the host name).
    pub(crate) service: Option<String>,
    pub(crate) host: Option<String>,
}

/// Most samples per second per thread `cpu_profile` accepts.
pub(crate) const MAX_CPU_HZ: u32 = 1000;

impl Default for Config {
    fn default() -> Self {
        Config {
            path: PathBuf::from("trace"),
            max_file_size: 64 << 20,
            max_total_size: 1 << 30,
            flush_interval: Duration::from_millis(50),
            buffer_size: 1 << 20,
            cpu_hz: 0,
            cpu_backend: CpuBackend::Auto,
            off_cpu: true,
            alloc_mean: 0,
            memory: None,
            max_segment_age: Duration::from_secs(1),
            snapshot_before: Duration::from_secs(30),
            snapshot_after: Duration::from_secs(5),
            snapshot_cooldown: Duration::from_secs(60),
            snapshot_signal: None,
            snapshot_poll: None,
            snapshot_wake_p99: None,
            snapshot_drops: None,
            snapshot_events: Vec::new(),
            alloc_live: false,
            sinks: SinkList::default(),
            sink_queue: 16,
            sink_retries: 3,
            sink_finish_timeout: Duration::from_secs(10),
            service: None,
            host: None,
        }
    }
}

/// Segment size in memory mode when the program set no `max_file_size`:
/// an eighth of the budget, at most the file mode's 64 MiB.
pub(crate) fn default_segment_size(budget: u64) -> u64 {
    (budget / 8).clamp(4096, 64 << 20)
}

/// The signals `snapshot_signal` accepts, by name.
pub(crate) const SIGNALS: &[(&str, i32)] = &[
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("HUP", libc::SIGHUP),
    ("WINCH", libc::SIGWINCH),
    ("PWR", libc::SIGPWR),
];

/// The signal called `name` (`USR2`, `SIGUSR2`, any case), if it is one
/// runtrace takes as a trigger (USR1, USR2, HUP, WINCH, PWR: signals whose
/// default action a service rarely relies on).
///
/// ```
/// assert_eq!(runtrace_recorder::signal_by_name("sigusr2"), Some(libc::SIGUSR2));
/// assert_eq!(runtrace_recorder::signal_by_name("KILL"), None);
/// ```
pub fn signal_by_name(name: &str) -> Option<i32> {
    let n = name.trim().to_ascii_uppercase();
    let n = n.strip_prefix("SIG").unwrap_or(&n);
    SIGNALS.iter().find(|(s, _)| *s == n).map(|&(_, v)| v)
}

impl Config {
    /// Slots per ring and bytes per slot for this buffer size: at least 4
    /// slots of 16 KiB or more (so the largest possible event fits in one),
    /// [`SLOT_BYTES`] each in large buffers.
    pub(crate) fn ring_geometry(&self) -> (u64, usize) {
        let n_slots = (self.buffer_size / SLOT_BYTES).max(4) as u64;
        (n_slots, self.buffer_size / n_slots as usize)
    }
}

/// Settings for a recording. Environment variables, when set, override
/// what the program chose (see `docs/recorder.md`):
/// `RUNTRACE_PATH`, `RUNTRACE_MAX_FILE_SIZE`, `RUNTRACE_MAX_TOTAL_SIZE`,
/// `RUNTRACE_FLUSH_INTERVAL_MS`, `RUNTRACE_BUFFER_SIZE`, `RUNTRACE_CPU_HZ`.
///
/// ```no_run
/// use std::time::Duration;
/// let guard = runtrace_recorder::Recorder::builder()
///     .path("/tmp/rt/trace")
///     .flush_interval(Duration::from_millis(20))
///     .start()?;
/// guard.finish()?;
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RecorderBuilder {
    cfg: Config,
    /// `max_file_size` was chosen (memory mode derives it otherwise).
    file_size_set: bool,
    /// `snapshot_signal`'s name, checked at `start()`.
    signal_name: Option<String>,
    /// The environment variables that overrode a setting, so that a bad
    /// value is blamed on the variable, not on the builder call.
    from_env: Vec<&'static str>,
}

impl RecorderBuilder {
    /// A builder with the defaults ([`Recorder::builder`](crate::Recorder::builder)).
    pub(crate) fn new() -> RecorderBuilder {
        RecorderBuilder {
            cfg: Config::default(),
            file_size_set: false,
            signal_name: None,
            from_env: Vec::new(),
        }
    }

    /// Path prefix: files are `PATH.N.bin` (parent directories are created).
    pub fn path(mut self, p: impl Into<PathBuf>) -> Self {
        self.cfg.path = p.into();
        self
    }
    /// Rotate to a new file once one reaches this many bytes.
    pub fn max_file_size(mut self, bytes: u64) -> Self {
        self.cfg.max_file_size = bytes;
        self.file_size_set = true;
        self
    }
    /// Delete the oldest sealed files while the sealed files exceed this many
    /// bytes (the newest sealed file is always kept, so disk use can reach
    /// about `max_total_size + max_file_size` with the file being written).
    pub fn max_total_size(mut self, bytes: u64) -> Self {
        self.cfg.max_total_size = bytes;
        self
    }
    /// How often the writer drains buffers (it also wakes when a buffer is
    /// half full).
    pub fn flush_interval(mut self, d: Duration) -> Self {
        self.cfg.flush_interval = d;
        self
    }
    /// Buffer bytes per recording thread (at least 64 KiB).
    pub fn buffer_size(mut self, bytes: usize) -> Self {
        self.cfg.buffer_size = bytes;
        self
    }

    /// Samples every recording thread's user stack `hz` times per second
    /// of its CPU time, and at every switch-out (off-CPU), into the trace
    /// (`cpu_sample` / `off_cpu` events; see `docs/cpu-profile.md`). 0 (the default) records no CPU profile; at most 1000.
    /// Stacks are walked through frame pointers: build with
    /// `-C force-frame-pointers=yes`. Where sampling is impossible the
    /// recording goes on without it, and says why (stderr and the trace).
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .path("/tmp/rt/trace")
    ///     .cpu_profile(99)
    ///     .start()?;
    /// guard.finish()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn cpu_profile(mut self, hz: u32) -> Self {
        self.cfg.cpu_hz = hz;
        self
    }

    /// Whether a CPU profile takes the stack at every switch-out of a
    /// recording thread (off-CPU stacks; on by default; a runtime worker's
    /// switch-outs while parked are skipped where the BPF program takes
    /// them). Off, the profile has on-CPU samples only and a context
    /// switch costs nothing more: each off-CPU stack costs ~1.5-2 µs of
    /// the switching thread's CPU on the reference VM through BPF, ~6 µs
    /// through per-thread perf events (docs/cpu-profile.md, "Cost"), which a server that blocks often may not want to pay.
    /// `RUNTRACE_CPU_OFF_CPU=off` does the same.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .cpu_profile(99)
    ///     .off_cpu_stacks(false)
    ///     .start()?;
    /// guard.finish()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn off_cpu_stacks(mut self, on: bool) -> Self {
        self.cfg.off_cpu = on;
        self
    }

    /// Samples heap allocations: on average one per `bytes` allocated
    /// (a Poisson process over each thread's allocated bytes; 512 KiB is
    /// a good default, 0 turns it off), with the allocating thread's
    /// stack. Only allocations made through the global allocator wrapper
    /// `runtrace::alloc::Sampled` (the facade's feature `alloc`) are seen;
    /// without it the recording simply has no `alloc_sample` events.
    /// `RUNTRACE_ALLOC_SAMPLE_BYTES` (a size such as `512K`) does the same.
    /// Stacks are walked through frame pointers (docs/memory.md).
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .memory_profile(512 * 1024)
    ///     .start()?;
    /// guard.finish()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn memory_profile(mut self, bytes: u64) -> Self {
        self.cfg.alloc_mean = bytes;
        self
    }

    /// Flight recorder mode: segments are kept in memory, within `budget`
    /// bytes, instead of written to files; the oldest are dropped over the
    /// budget (and counted). Nothing is written to disk unless a snapshot
    /// is triggered ([`RecordingGuard::snapshot`](crate::RecordingGuard::snapshot),
    /// [`snapshot_signal`](Self::snapshot_signal)): `path`'s directory is
    /// where snapshot directories go. Segments are sealed at
    /// `max_file_size` (default: an eighth of the budget, at most 64 MiB) or
    /// at [`max_segment_age`](Self::max_segment_age), whichever comes
    /// first; the budget must hold at least two. `RUNTRACE_MEMORY` (a size
    /// such as `256M`) does the same. See `docs/flight-recorder.md`.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .path("/var/tmp/myapp/trace")   // snapshots go to /var/tmp/myapp/
    ///     .in_memory(256 << 20)
    ///     .start()?;
    /// guard.snapshot("slow-request");
    /// guard.finish()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn in_memory(mut self, budget: u64) -> Self {
        self.cfg.memory = Some(budget);
        self
    }

    /// In memory mode, seal a segment once it is this old (default 1 s),
    /// so a snapshot's time window is kept to about this precision.
    /// `RUNTRACE_SEGMENT_AGE_MS` does the same.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .max_segment_age(std::time::Duration::from_millis(500))
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn max_segment_age(mut self, age: std::time::Duration) -> Self {
        self.cfg.max_segment_age = age;
        self
    }

    /// What a snapshot keeps: the segments covering `before` its trigger
    /// (default 30 s, as far as the budget still holds them) until `after`
    /// it (default 5 s: recording goes on that long before the snapshot is
    /// written). `RUNTRACE_SNAPSHOT_BEFORE_MS` / `RUNTRACE_SNAPSHOT_AFTER_MS`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_window(Duration::from_secs(10), Duration::from_secs(2))
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_window(mut self, before: Duration, after: Duration) -> Self {
        self.cfg.snapshot_before = before;
        self.cfg.snapshot_after = after;
        self
    }

    /// At most one snapshot per `period` (default 60 s): triggers within
    /// it of the last accepted one are counted and ignored.
    /// `RUNTRACE_SNAPSHOT_COOLDOWN_MS`.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_cooldown(std::time::Duration::from_secs(300))
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_cooldown(mut self, period: Duration) -> Self {
        self.cfg.snapshot_cooldown = period;
        self
    }

    /// A signal that triggers a snapshot (reason `signal`): `USR1`,
    /// `USR2`, `HUP`, `WINCH` or `PWR` (with or without `SIG`). Its
    /// handler only sets a flag the writer thread reads at its next round;
    /// the previous handler is put back when the recording ends.
    /// `RUNTRACE_SNAPSHOT_SIGNAL=USR2` does the same.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_signal("USR2")   // kill -USR2 <pid>
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_signal(mut self, name: &str) -> Self {
        self.signal_name = Some(name.to_string());
        self
    }

    /// A built-in trigger (reason `slow-poll`): a poll (`task_poll_start`
    /// to `task_poll_end` on one thread) that lasts longer than `limit`,
    /// as the writer thread sees it in what it drains.
    /// `RUNTRACE_SNAPSHOT_POLL_MS`.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_on_slow_poll(std::time::Duration::from_millis(100))
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_on_slow_poll(mut self, limit: Duration) -> Self {
        self.cfg.snapshot_poll = Some(limit);

        self
    }

    /// A built-in trigger (reason `wake-p99`): in each `window` of trace
    /// time, the p99 of the wake-to-poll delay (a task's first wake to
    /// its next `task_poll_start`) above `limit`, over at least 100 such
    /// delays. Fires at the window's end. `RUNTRACE_SNAPSHOT_WAKE_P99_MS`
    /// and `RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS` (default window 1 s).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_on_wake_p99(Duration::from_millis(20), Duration::from_secs(1))
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_on_wake_p99(mut self, limit: Duration, window: Duration) -> Self {
        self.cfg.snapshot_wake_p99 = Some((limit, window));
        self
    }

    /// A built-in trigger (reason `dropped`): the recorder losing at least
    /// `min_events` events to full buffers in one drain round (the
    /// flush interval). `RUNTRACE_SNAPSHOT_DROPS`.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_on_drops(1)
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_on_drops(mut self, min_events: u64) -> Self {
        self.cfg.snapshot_drops = Some(min_events);
        self
    }

    /// A built-in trigger on an application's events: `name` is a reason
    /// given to `runtrace::snapshot!` (`*`: any reason), or an event
    /// `provider:name` (one declared with `user_events!`, or a built-in
    /// one as `runtrace:name`). The trigger's reason is the `snapshot!`
    /// reason, or `provider:name`. Call once per name;
    /// `RUNTRACE_SNAPSHOT_EVENTS` (names separated by commas) replaces the
    /// list.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .in_memory(64 << 20)
    ///     .snapshot_on_event("*")                  // any snapshot!(...)
    ///     .snapshot_on_event("myapp:request_failed")
    ///     .start()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn snapshot_on_event(mut self, name: &str) -> Self {
        self.cfg.snapshot_events.push(name.to_string());
        self
    }

    /// Ships every sealed segment to `sink` as well (in file mode each
    /// `PATH.N.bin`, in memory mode each snapshot's files), on a thread of
    /// its own behind a bounded queue: see [`sink`](crate::sink). Call
    /// once per sink. `RUNTRACE_SINK_COMMAND` and `RUNTRACE_SINK_URL` add
    /// a command hook and an object store.
    ///
    /// ```no_run
    /// use runtrace_recorder::sink::CommandSink;
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .path("/var/tmp/myapp/trace")
    ///     .sink(CommandSink::new("/usr/local/bin/upload-trace", ["--quiet"]))
    ///     .start()?;
    /// let stats = guard.finish()?;
    /// println!("{} sent, {} not", stats.sink_sent, stats.sink_failed + stats.sink_dropped + stats.sink_unsent);
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn sink(self, sink: impl Sink) -> Self {
        self.cfg.sinks.push(Box::new(sink));
        self
    }

    /// Segments each sink's queue holds (default 16): past that, the
    /// oldest unsent one is dropped and counted (`sink_dropped`); the
    /// recording never waits for a sink. `RUNTRACE_SINK_QUEUE`.
    ///
    /// ```
    /// let b = runtrace_recorder::Recorder::builder().sink_queue(64);
    /// # let _ = b;
    /// ```
    pub fn sink_queue(mut self, segments: usize) -> Self {
        self.cfg.sink_queue = segments;
        self
    }

    /// Tries of a segment that failed, after the first (default 3), with
    /// pauses of 200 ms doubling up to 5 s. `RUNTRACE_SINK_RETRIES`.
    ///
    /// ```
    /// let b = runtrace_recorder::Recorder::builder().sink_retries(5);
    /// # let _ = b;
    /// ```
    pub fn sink_retries(mut self, retries: u32) -> Self {
        self.cfg.sink_retries = retries;
        self
    }

    /// How long `finish()` waits for the sinks to send what they hold
    /// (default 10 s); what is left counts in `sink_unsent`.
    /// `RUNTRACE_SINK_FINISH_MS`.
    ///
    /// ```
    /// let b = runtrace_recorder::Recorder::builder()
    ///     .sink_finish_timeout(std::time::Duration::from_secs(30));
    /// # let _ = b;
    /// ```
    pub fn sink_finish_timeout(mut self, limit: Duration) -> Self {
        self.cfg.sink_finish_timeout = limit;
        self
    }

    /// The `service=` of the object-store keys (default: the process
    /// name, made safe). `RUNTRACE_SERVICE`. A name must be 1 to 128 of
    /// `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`.
    ///
    /// ```
    /// let b = runtrace_recorder::Recorder::builder().service("checkout").host("web-07");
    /// # let _ = b;
    /// ```
    pub fn service(mut self, name: &str) -> Self {
        self.cfg.service = Some(name.to_string());
        self
    }

    /// The `host=` of the object-store keys (default: the host name,
    /// made safe). `RUNTRACE_HOST`.
    ///
    /// ```
    /// let b = runtrace_recorder::Recorder::builder().host("web-07");
    /// # let _ = b;
    /// ```
    pub fn host(mut self, name: &str) -> Self {
        self.cfg.host = Some(name.to_string());
        self
    }

    /// With a memory profile, also records the free of every sampled
    /// allocation (`alloc_free` events: the live set), so readers know
    /// which sampled bytes are still live at any time (`runtrace
    /// flamegraph --live`, the `memory_growth` finding). Frees of
    /// unsampled allocations cost one relaxed load either way; a free then
    /// looks its address up in a fixed table (docs/memory.md).
    /// `RUNTRACE_ALLOC_LIVE=on` does the same.
    ///
    /// ```no_run
    /// let guard = runtrace_recorder::Recorder::builder()
    ///     .memory_profile(512 * 1024)
    ///     .memory_live(true)
    ///     .start()?;
    /// guard.finish()?;
    /// # Ok::<(), runtrace_recorder::RecordError>(())
    /// ```
    pub fn memory_live(mut self, on: bool) -> Self {
        self.cfg.alloc_live = on;
        self
    }

    /// The settings to record with: the builder's, overridden by the
    /// environment, checked.
    pub(crate) fn resolve(mut self) -> Result<Config, RecordError> {
        self.apply_env()?;
        if let Some(name) = &self.signal_name {
            let sig = signal_by_name(name).ok_or_else(|| {
                let names: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
                RecordError::Config(format!(
                    "{}: unknown signal {name:?}; expected one of {}",
                    self.who("snapshot_signal", "RUNTRACE_SNAPSHOT_SIGNAL"),
                    names.join(", ")
                ))
            })?;
            self.cfg.snapshot_signal = Some(sig);
        }
        if let (Some(budget), false) = (self.cfg.memory, self.file_size_set) {
            self.cfg.max_file_size = default_segment_size(budget);
        }
        self.validate()?;
        Ok(self.cfg)
    }

    fn apply_env(&mut self) -> Result<(), RecordError> {
        if let Some(p) = std::env::var_os("RUNTRACE_PATH").filter(|p| !p.is_empty()) {
            self.cfg.path = p.into();
            self.from_env.push("RUNTRACE_PATH");
        }
        if let Some(v) = env_size("RUNTRACE_MAX_FILE_SIZE")? {
            self.cfg.max_file_size = v;
            self.from_env.push("RUNTRACE_MAX_FILE_SIZE");
        }
        if let Some(v) = env_size("RUNTRACE_MAX_TOTAL_SIZE")? {
            self.cfg.max_total_size = v;
            self.from_env.push("RUNTRACE_MAX_TOTAL_SIZE");
        }
        if let Some(v) = env_size("RUNTRACE_BUFFER_SIZE")? {
            self.cfg.buffer_size = usize::try_from(v)
                .map_err(|_| RecordError::Config("RUNTRACE_BUFFER_SIZE too large".into()))?;
            self.from_env.push("RUNTRACE_BUFFER_SIZE");
        }
        if let Some(v) = env_str("RUNTRACE_FLUSH_INTERVAL_MS")? {
            let ms: u64 = v.trim().parse().map_err(|_| {
                RecordError::Config(format!(
                    "RUNTRACE_FLUSH_INTERVAL_MS={v:?}: expected whole milliseconds"
                ))
            })?;
            self.cfg.flush_interval = Duration::from_millis(ms);
            self.from_env.push("RUNTRACE_FLUSH_INTERVAL_MS");
        }
        if let Some(v) = env_str("RUNTRACE_CPU_HZ")?.filter(|v| !v.trim().is_empty()) {
            self.cfg.cpu_hz = v.trim().parse().map_err(|_| {
                RecordError::Config(format!(
                    "RUNTRACE_CPU_HZ={v:?}: expected samples per second, 0 to {MAX_CPU_HZ} (0: off)"
                ))
            })?;
            self.from_env.push("RUNTRACE_CPU_HZ");
        }
        if let Some(v) = env_size("RUNTRACE_ALLOC_SAMPLE_BYTES")? {
            self.cfg.alloc_mean = v;
            self.from_env.push("RUNTRACE_ALLOC_SAMPLE_BYTES");
        }
        if let Some(v) = env_str("RUNTRACE_MEMORY")?.filter(|v| !v.trim().is_empty()) {
            let b = parse_size(&v).ok_or_else(|| {
                RecordError::Config(format!(
                    "RUNTRACE_MEMORY={v:?}: expected a size like 64M or 1G"
                ))
            })?;
            self.cfg.memory = Some(b);
            self.from_env.push("RUNTRACE_MEMORY");
        }
        if self.from_env.contains(&"RUNTRACE_MAX_FILE_SIZE") {
            self.file_size_set = true;
        }
        for (var, slot) in [
            ("RUNTRACE_SEGMENT_AGE_MS", &mut self.cfg.max_segment_age),
            ("RUNTRACE_SNAPSHOT_BEFORE_MS", &mut self.cfg.snapshot_before),
            ("RUNTRACE_SNAPSHOT_AFTER_MS", &mut self.cfg.snapshot_after),
            (
                "RUNTRACE_SNAPSHOT_COOLDOWN_MS",
                &mut self.cfg.snapshot_cooldown,
            ),
        ] {
            if let Some(ms) = env_ms(var)? {
                *slot = ms;
                self.from_env.push(var);
            }
        }
        if let Some(ms) = env_ms("RUNTRACE_SNAPSHOT_POLL_MS")? {
            self.cfg.snapshot_poll = Some(ms);
            self.from_env.push("RUNTRACE_SNAPSHOT_POLL_MS");
        }
        if let Some(ms) = env_ms("RUNTRACE_SNAPSHOT_WAKE_P99_MS")? {
            let window = self
                .cfg
                .snapshot_wake_p99
                .map_or(Duration::from_secs(1), |(_, w)| w);
            self.cfg.snapshot_wake_p99 = Some((ms, window));
            self.from_env.push("RUNTRACE_SNAPSHOT_WAKE_P99_MS");
        }
        if let Some(ms) = env_ms("RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS")? {
            match self.cfg.snapshot_wake_p99.as_mut() {
                Some((_, w)) => *w = ms,
                None => {
                    return Err(RecordError::Config(
                        "RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS is set but no wake-to-poll limit is \
                         (RUNTRACE_SNAPSHOT_WAKE_P99_MS or snapshot_on_wake_p99)"
                            .into(),
                    ))
                }
            }
            self.from_env.push("RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS");
        }
        if let Some(v) = env_str("RUNTRACE_SNAPSHOT_DROPS")?.filter(|v| !v.trim().is_empty()) {
            let n: u64 = v.trim().parse().map_err(|_| {
                RecordError::Config(format!(
                    "RUNTRACE_SNAPSHOT_DROPS={v:?}: expected a number of events (at least 1)"
                ))
            })?;
            self.cfg.snapshot_drops = Some(n);
            self.from_env.push("RUNTRACE_SNAPSHOT_DROPS");
        }
        if let Some(v) = env_str("RUNTRACE_SNAPSHOT_EVENTS")?.filter(|v| !v.trim().is_empty()) {
            self.cfg.snapshot_events = v.split(',').map(|n| n.trim().to_string()).collect();
            self.from_env.push("RUNTRACE_SNAPSHOT_EVENTS");
        }
        for (var, slot) in [
            ("RUNTRACE_SERVICE", &mut self.cfg.service),
            ("RUNTRACE_HOST", &mut self.cfg.host),
        ] {
            if let Some(v) = env_str(var)?.filter(|v| !v.trim().is_empty()) {
                *slot = Some(v.trim().to_string());
                self.from_env.push(var);
            }
        }
        if let Some(v) = env_str("RUNTRACE_SINK_QUEUE")?.filter(|v| !v.trim().is_empty()) {
            self.cfg.sink_queue = v.trim().parse().map_err(|_| {
                RecordError::Config(format!(
                    "RUNTRACE_SINK_QUEUE={v:?}: expected a number of segments (at least 1)"
                ))
            })?;
            self.from_env.push("RUNTRACE_SINK_QUEUE");
        }
        if let Some(v) = env_str("RUNTRACE_SINK_RETRIES")?.filter(|v| !v.trim().is_empty()) {
            self.cfg.sink_retries = v.trim().parse().map_err(|_| {
                RecordError::Config(format!(
                    "RUNTRACE_SINK_RETRIES={v:?}: expected a number of tries after the first"
                ))
            })?;
            self.from_env.push("RUNTRACE_SINK_RETRIES");
        }
        if let Some(ms) = env_ms("RUNTRACE_SINK_FINISH_MS")? {
            self.cfg.sink_finish_timeout = ms;
            self.from_env.push("RUNTRACE_SINK_FINISH_MS");
        }
        if let Some(v) = env_str("RUNTRACE_SINK_COMMAND")?.filter(|v| !v.trim().is_empty()) {
            let mut words = v.split_whitespace();
            let program = words.next().unwrap_or_default();
            self.cfg
                .sinks
                .push(Box::new(crate::sink::CommandSink::new(program, words)));
            self.from_env.push("RUNTRACE_SINK_COMMAND");
        }
        if let Some(v) = env_str("RUNTRACE_SINK_URL")?.filter(|v| !v.trim().is_empty()) {
            #[cfg(feature = "object-store")]
            {
                let s = crate::sink::ObjectStoreSink::from_url(v.trim()).map_err(|e| match e {
                    RecordError::Config(m) => {
                        RecordError::Config(format!("RUNTRACE_SINK_URL: {m}"))
                    }
                    e => e,
                })?;
                self.cfg.sinks.push(Box::new(s));
            }
            #[cfg(not(feature = "object-store"))]
            return Err(RecordError::Config(format!(
                "RUNTRACE_SINK_URL={v:?}: object-store sinks need runtrace-recorder's feature `object-store` (this build has none)"
            )));
            #[cfg(feature = "object-store")]
            self.from_env.push("RUNTRACE_SINK_URL");
        }
        if let Some(v) = env_str("RUNTRACE_SNAPSHOT_SIGNAL")?.filter(|v| !v.trim().is_empty()) {
            self.signal_name = Some(v);
            self.from_env.push("RUNTRACE_SNAPSHOT_SIGNAL");
        }
        if let Some(v) = env_str("RUNTRACE_ALLOC_LIVE")? {
            self.cfg.alloc_live = match v.trim() {
                "" => self.cfg.alloc_live,
                "on" | "1" => true,
                "off" | "0" => false,
                _ => {
                    return Err(RecordError::Config(format!(
                        "RUNTRACE_ALLOC_LIVE={v:?}: expected `on` or `off` (or 1 / 0)"
                    )))
                }
            };
            self.from_env.push("RUNTRACE_ALLOC_LIVE");
        }
        if let Some(v) = env_str("RUNTRACE_CPU_OFF_CPU")? {
            self.cfg.off_cpu = match v.trim() {
                "" => self.cfg.off_cpu,
                "on" | "1" => true,
                "off" | "0" => false,
                _ => {
                    return Err(RecordError::Config(format!(
                        "RUNTRACE_CPU_OFF_CPU={v:?}: expected `on` or `off` (or 1 / 0)"
                    )))
                }
            };
        }
        if let Some(v) = env_str("RUNTRACE_CPU_FALLBACK")? {
            self.cfg.cpu_backend = match v.trim() {
                "" => CpuBackend::Auto,
                "perf-thread" => CpuBackend::PerfThread,
                "signal" => CpuBackend::Signal,
                "off" => CpuBackend::Off,
                _ => {
                    return Err(RecordError::Config(format!(
                        "RUNTRACE_CPU_FALLBACK={v:?}: expected `perf-thread`, `signal` or `off` (or unset)"
                    )))
                }
            };
        }
        Ok(())
    }

    /// How a message names `setting`: the builder method, or the
    /// environment variable `var` with its value when that set it.
    fn who(&self, setting: &str, var: &'static str) -> String {
        if self.from_env.contains(&var) {
            let v = std::env::var_os(var).unwrap_or_default();
            format!("{var}={:?} (sets {setting})", v.to_string_lossy())
        } else {
            setting.to_string()
        }
    }

    fn validate(&self) -> Result<(), RecordError> {
        let c = &self.cfg;
        let bad = |setting: &str, var: &'static str, rule: &str| {
            Err(RecordError::Config(format!(
                "{}: {setting} {rule}",
                self.who(setting, var)
            )))
        };
        if c.buffer_size < MIN_BUFFER {
            return bad(
                "buffer_size",
                "RUNTRACE_BUFFER_SIZE",
                "must be at least 64 KiB",
            );
        }
        if c.buffer_size > 1 << 30 {
            return bad(
                "buffer_size",
                "RUNTRACE_BUFFER_SIZE",
                "must be at most 1 GiB",
            );
        }
        if c.max_file_size < 4096 {
            return bad(
                "max_file_size",
                "RUNTRACE_MAX_FILE_SIZE",
                "must be at least 4096 bytes",
            );
        }
        if c.max_total_size < c.max_file_size {
            return bad(
                "max_total_size",
                "RUNTRACE_MAX_TOTAL_SIZE",
                "must be at least max_file_size",
            );
        }
        if c.flush_interval.is_zero() || c.flush_interval > Duration::from_secs(60) {
            return bad(
                "flush_interval",
                "RUNTRACE_FLUSH_INTERVAL_MS",
                "must be between 1 ms and 60 s",
            );
        }
        if c.cpu_hz > MAX_CPU_HZ {
            return bad(
                "cpu_profile",
                "RUNTRACE_CPU_HZ",
                "must be at most 1000 samples per second (0: off)",
            );
        }
        if let Some(budget) = c.memory {
            if budget < c.max_file_size.saturating_mul(2) {
                return Err(RecordError::Config(format!(
                    "{}: in_memory budget of {budget} bytes is smaller than two segments of \
                     {} bytes (max_file_size{}): raise the budget or lower max_file_size",
                    self.who("in_memory", "RUNTRACE_MEMORY"),
                    c.max_file_size,
                    if self.from_env.contains(&"RUNTRACE_MAX_FILE_SIZE") {
                        ", from RUNTRACE_MAX_FILE_SIZE"
                    } else {
                        ""
                    }
                )));
            }
            if c.max_segment_age.is_zero() {
                return bad(
                    "max_segment_age",
                    "RUNTRACE_SEGMENT_AGE_MS",
                    "must be at least 1 ms",
                );
            }
        }
        if c.snapshot_poll.is_some_and(|d| d.is_zero()) {
            return bad(
                "snapshot_on_slow_poll",
                "RUNTRACE_SNAPSHOT_POLL_MS",
                "must be at least 1 ms",
            );
        }
        if let Some((limit, window)) = c.snapshot_wake_p99 {
            if limit.is_zero() {
                return bad(
                    "snapshot_on_wake_p99",
                    "RUNTRACE_SNAPSHOT_WAKE_P99_MS",
                    "limit must be at least 1 ms",
                );
            }
            if window.is_zero() {
                return bad(
                    "snapshot_on_wake_p99",
                    "RUNTRACE_SNAPSHOT_WAKE_WINDOW_MS",
                    "window must be at least 1 ms",
                );
            }
        }
        if c.snapshot_drops == Some(0) {
            return bad(
                "snapshot_on_drops",
                "RUNTRACE_SNAPSHOT_DROPS",
                "must be at least 1 event",
            );
        }
        for n in &c.snapshot_events {
            let ok = match n.split_once(':') {
                Some((p, e)) => !p.is_empty() && !e.is_empty() && !e.contains(':'),
                None => !n.is_empty(),
            };
            if !ok {
                return Err(RecordError::Config(format!(
                    "{}: {n:?} is not a snapshot! reason, `*` or an event `provider:name`",
                    self.who("snapshot_on_event", "RUNTRACE_SNAPSHOT_EVENTS")
                )));
            }
        }
        if c.sink_queue == 0 {
            return bad("sink_queue", "RUNTRACE_SINK_QUEUE", "must be at least 1");
        }
        if let Some(name) = &c.service {
            runtrace_format::partition::partition_name(name, "").map_err(|e| {
                RecordError::Config(format!("{}:{e}", self.who("service", "RUNTRACE_SERVICE")))
            })?;
        }
        if let Some(name) = &c.host {
            runtrace_format::partition::partition_name(name, "").map_err(|e| {
                RecordError::Config(format!("{}:{e}", self.who("host", "RUNTRACE_HOST")))
            })?;
        }
        // `dir/` or an existing directory would make files named
        // `dir/.0.bin`: hidden, and not what was meant.
        let ends_in_slash = c.path.as_os_str().as_encoded_bytes().last() == Some(&b'/');
        if c.path.as_os_str().is_empty()
            || c.path.file_name().is_none()
            || ends_in_slash
            || c.path.is_dir()
        {
            return bad(
                "path",
                "RUNTRACE_PATH",
                "must name a file prefix, not a directory, e.g. dir/trace",
            );
        }
        Ok(())
    }
}

/// The value of `var`, `None` when unset; a value that is not UTF-8 is an
/// error naming the variable (it cannot be a size or a number).
fn env_str(var: &str) -> Result<Option<String>, RecordError> {
    match std::env::var(var) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(RecordError::Config(format!("{var}={v:?}: not valid UTF-8")))
        }
    }
}

/// Whole milliseconds from `var`, `None` when unset or empty.
fn env_ms(var: &str) -> Result<Option<Duration>, RecordError> {
    let Some(v) = env_str(var)?.filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let ms: u64 = v
        .trim()
        .parse()
        .map_err(|_| RecordError::Config(format!("{var}={v:?}: expected whole milliseconds")))?;
    Ok(Some(Duration::from_millis(ms)))
}

/// Parses `123`, `64K`, `64M`, `1G` (binary multiples).
fn env_size(var: &str) -> Result<Option<u64>, RecordError> {
    let Some(v) = env_str(var)? else {
        return Ok(None);
    };
    parse_size(&v).map(Some).ok_or_else(|| {
        RecordError::Config(format!(
            "{var}={v:?}: expected a size like 4096, 64K, 64M or 1G"
        ))
    })
}

fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size(" 2m "), Some(2 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999G"), None);
    }
}
