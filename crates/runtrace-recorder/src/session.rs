//! Starting and stopping a recording: configuration (builder and
//! environment), the state shared with producers, and the guard.

use crate::producer::ACTIVE_GEN;
use crate::ring::Ring;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// Why a recording could not start or finish.
#[derive(Debug)]
pub enum RecordError {
    /// A setting is out of range; names the setting (builder method or
    /// environment variable).
    Config(String),
    /// Another recording is already running in this process.
    AlreadyRecording,
    /// A file operation failed; names the path.
    Io(String),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Config(m) => write!(f, "invalid recorder configuration: {m}"),
            RecordError::AlreadyRecording => {
                write!(f, "a recording is already running in this process")
            }
            RecordError::Io(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for RecordError {}

/// What a finished recording wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Events written to files.
    pub events: u64,
    /// Events lost to full buffers (each reported in a `DROPPED` frame).
    pub dropped: u64,
    /// Bytes written, over all files (including evicted ones).
    pub bytes: u64,
    /// Files created.
    pub files: u64,
}

/// Recorder settings. Build with [`Recorder::builder`].
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) path: PathBuf,
    pub(crate) max_file_size: u64,
    pub(crate) max_total_size: u64,
    pub(crate) flush_interval: Duration,
    pub(crate) buffer_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: PathBuf::from("trace"),
            max_file_size: 64 << 20,
            max_total_size: 1 << 30,
            flush_interval: Duration::from_millis(50),
            buffer_size: 1 << 20,
        }
    }
}

/// Entry point of in-process recording.
///
/// ```no_run
/// use runtrace_recorder::Recorder;
/// use std::time::Duration;
/// let guard = Recorder::builder()
///     .path("/tmp/rt/trace")          // writes /tmp/rt/trace.0.bin, ...
///     .max_file_size(64 << 20)
///     .max_total_size(1 << 30)
///     .flush_interval(Duration::from_millis(50))
///     .buffer_size(1 << 20)           // per thread
///     .start()?;
/// runtrace_recorder::task_terminate(1);
/// let stats = guard.finish()?;
/// println!("{} events, {} dropped", stats.events, stats.dropped);
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
pub struct Recorder;

impl Recorder {
    /// A builder with the defaults (path `trace`, 64 MiB files, 1 GiB
    /// total, 50 ms flush interval, 1 MiB buffer per thread).
    pub fn builder() -> RecorderBuilder {
        RecorderBuilder {
            cfg: Config::default(),
        }
    }

    /// Starts recording if `RUNTRACE_PATH` is set (all settings from the
    /// environment), so a deployed binary can be traced without a rebuild.
    /// Returns None when it is not set.
    pub fn start_from_env() -> Result<Option<RecordingGuard>, RecordError> {
        match std::env::var_os("RUNTRACE_PATH") {
            Some(p) if !p.is_empty() => Recorder::builder().start().map(Some),
            _ => Ok(None),
        }
    }
}

/// Settings for a recording. Environment variables, when set, override
/// what the program chose (see `docs/recorder.md`):
/// `RUNTRACE_PATH`, `RUNTRACE_MAX_FILE_SIZE`, `RUNTRACE_MAX_TOTAL_SIZE`,
/// `RUNTRACE_FLUSH_INTERVAL_MS`, `RUNTRACE_BUFFER_SIZE`.
#[derive(Debug, Clone)]
pub struct RecorderBuilder {
    cfg: Config,
}

impl RecorderBuilder {
    /// Path prefix: files are `PATH.N.bin` (parent directories are created).
    pub fn path(mut self, p: impl Into<PathBuf>) -> Self {
        self.cfg.path = p.into();
        self
    }
    /// Rotate to a new file once one reaches this many bytes.
    pub fn max_file_size(mut self, bytes: u64) -> Self {
        self.cfg.max_file_size = bytes;
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

    fn apply_env(&mut self) -> Result<(), RecordError> {
        if let Some(p) = std::env::var_os("RUNTRACE_PATH").filter(|p| !p.is_empty()) {
            self.cfg.path = p.into();
        }
        if let Some(v) = env_size("RUNTRACE_MAX_FILE_SIZE")? {
            self.cfg.max_file_size = v;
        }
        if let Some(v) = env_size("RUNTRACE_MAX_TOTAL_SIZE")? {
            self.cfg.max_total_size = v;
        }
        if let Some(v) = env_size("RUNTRACE_BUFFER_SIZE")? {
            self.cfg.buffer_size = usize::try_from(v)
                .map_err(|_| RecordError::Config("RUNTRACE_BUFFER_SIZE too large".into()))?;
        }
        if let Ok(v) = std::env::var("RUNTRACE_FLUSH_INTERVAL_MS") {
            let ms: u64 = v.trim().parse().map_err(|_| {
                RecordError::Config(format!(
                    "RUNTRACE_FLUSH_INTERVAL_MS={v:?}: expected whole milliseconds"
                ))
            })?;
            self.cfg.flush_interval = Duration::from_millis(ms);
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), RecordError> {
        let c = &self.cfg;
        let bad = |m: &str| Err(RecordError::Config(m.to_string()));
        if c.buffer_size < MIN_BUFFER {
            return bad("buffer_size must be at least 64 KiB");
        }
        if c.buffer_size > 1 << 30 {
            return bad("buffer_size must be at most 1 GiB");
        }
        if c.max_file_size < 4096 {
            return bad("max_file_size must be at least 4096 bytes");
        }
        if c.max_total_size < c.max_file_size {
            return bad("max_total_size must be at least max_file_size");
        }
        if c.flush_interval.is_zero() || c.flush_interval > Duration::from_secs(60) {
            return bad("flush_interval must be between 1 ms and 60 s");
        }
        if c.path.as_os_str().is_empty() || c.path.file_name().is_none() {
            return bad("path must name a file prefix, e.g. dir/trace");
        }
        Ok(())
    }

    /// Starts recording. Fails if a recording is already running, a setting
    /// is out of range, or the first file cannot be created.
    pub fn start(mut self) -> Result<RecordingGuard, RecordError> {
        self.apply_env()?;
        self.validate()?;
        start(self.cfg)
    }
}

/// Parses `123`, `64K`, `64M`, `1G` (binary multiples).
fn env_size(var: &str) -> Result<Option<u64>, RecordError> {
    let Ok(v) = std::env::var(var) else {
        return Ok(None);
    };
    parse_size(&v).map(Some).ok_or_else(|| {
        RecordError::Config(format!(
            "{var}={v:?}: expected a size like 4096, 64K, 64M or 1G"
        ))
    })
}

pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

/// State shared by the writer and the producers of one recording.
pub(crate) struct Shared {
    pub(crate) gen: u64,
    pub(crate) cfg: Config,
    pub(crate) n_slots: u64,
    pub(crate) slot_size: usize,
    pub(crate) new_rings: Mutex<Vec<RingEntry>>,
    pub(crate) writer: OnceLock<Thread>,
    pub(crate) stop: AtomicBool,
}

/// A ring and the thread it belongs to.
pub(crate) struct RingEntry {
    pub(crate) ring: Arc<Ring>,
    pub(crate) tid: u64,
    pub(crate) name: String,
}

impl Shared {
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

/// Smallest per-thread buffer: 4 slots of 16 KiB.
const MIN_BUFFER: usize = 64 << 10;

// The largest event (tag, type id, delta, 32 fields of 257 bytes) and the
// `set_worker` record before it must fit in the smallest slot, or an event
// could never be recorded.
const _: () = assert!(crate::producer::MAX_RECORD_BYTES <= MIN_BUFFER / 4);

static CURRENT: Mutex<Option<Arc<Shared>>> = Mutex::new(None);
static NEXT_GEN: AtomicU64 = AtomicU64::new(1);

/// The recording with generation `gen`, if it is still the current one.
pub(crate) fn current(gen: u64) -> Option<Arc<Shared>> {
    CURRENT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .filter(|s| s.gen == gen)
        .cloned()
}

fn start(cfg: Config) -> Result<RecordingGuard, RecordError> {
    let mut cur = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if cur.is_some() {
        return Err(RecordError::AlreadyRecording);
    }
    // At least 4 slots of 16 KiB or more (so the largest possible event fits
    // in one), about 64 KiB each in large buffers: the writer takes whole
    // slots without decoding, and a 64 KiB chunk keeps per-chunk overhead
    // (~20 bytes) under 0.05%.
    let n_slots = (cfg.buffer_size / (64 << 10)).max(4) as u64;
    let slot_size = cfg.buffer_size / n_slots as usize;
    let gen = NEXT_GEN.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::new(Shared {
        gen,
        cfg,
        n_slots,
        slot_size,
        new_rings: Mutex::new(Vec::new()),
        writer: OnceLock::new(),
        stop: AtomicBool::new(false),
    });
    let writer = crate::writer::Writer::new(shared.clone())?;
    let w = shared.clone();
    let handle = std::thread::Builder::new()
        .name("runtrace-writer".into())
        .spawn(move || {
            let _ = w.writer.set(std::thread::current());
            writer.run()
        })
        .map_err(|e| RecordError::Io(format!("cannot start the writer thread: {e}")))?;
    *cur = Some(shared.clone());
    ACTIVE_GEN.store(gen, Ordering::Relaxed);
    Ok(RecordingGuard {
        shared,
        handle: Some(handle),
    })
}

/// A running recording. [`finish`](RecordingGuard::finish) stops it and
/// reports what was written; dropping the guard does the same, ignoring
/// errors.
pub struct RecordingGuard {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<Result<RecordStats, RecordError>>>,
}

impl RecordingGuard {
    /// Stops recording, drains every buffer, seals the last file.
    ///
    /// Events recorded by other threads while `finish` runs may or may not
    /// make it into the trace; stop or join them first for exact accounting.
    pub fn finish(mut self) -> Result<RecordStats, RecordError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<RecordStats, RecordError> {
        let Some(h) = self.handle.take() else {
            return Ok(RecordStats::default());
        };
        ACTIVE_GEN.store(0, Ordering::Relaxed);
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.shared.stop.store(true, Ordering::Release);
        h.thread().unpark();
        h.join()
            .map_err(|_| RecordError::Io("the writer thread panicked".into()))?
    }
}

impl Drop for RecordingGuard {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

impl std::fmt::Debug for RecordingGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingGuard")
            .field("path", &self.shared.cfg.path)
            .finish()
    }
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
