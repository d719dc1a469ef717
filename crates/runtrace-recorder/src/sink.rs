//! Where sealed segments are shipped: one small trait, [`Sink`], fed by
//! every mode, each sink on a thread of its own behind a bounded queue.
//!
//! - In file mode, every sealed `PATH.N.bin` (written as before: local
//!   files are unchanged) is offered to the sinks.
//! - In memory mode, the files of every snapshot directory are, once the
//!   directory is complete.
//!
//! Built in: [`CommandSink`] (runs a program with the sealed file's path,
//! so operators upload with their own tool) and, with feature
//! `object-store`, [`ObjectStoreSink`] (S3, GCS, Azure, a local
//! directory or memory through the `object_store` crate, keys laid out by
//! service, host and date like the Parquet dataset). An application can
//! add its own.
//!
//! # Rules
//! 1. The writer thread (and a snapshot's thread) only `SinkQueue::push`
//!    a small [`SegmentInfo`]: a lock held for a `VecDeque` push, never
//!    while a sink runs. No recording thread ever touches a queue.
//! 2. A queue holds at most `capacity` segments not yet taken by its
//!    sink. Pushing onto a full queue drops the oldest one not yet taken
//!    (counted in `RecordStats::sink_dropped`): the newest data is the
//!    most wanted, and the segment a sink is sending is never taken back.
//! 3. Each sink's thread takes the oldest segment, reads its file (off
//!    the writer's path), and calls [`Sink::segment`], retrying a failure
//!    with doubling pauses; one that fails every try counts in
//!    `sink_failed`.
//! 4. At the end of the recording the queues close; `finish()` waits up
//!    to `sink_finish_timeout` for them to empty. A sink that hangs is
//!    left behind (its thread detached) and what it did not send counts
//!    in `sink_unsent`.

use bytes::Bytes;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a sink is told about a sealed segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The sealed file on this machine (`PATH.N.bin`, or a file in a
    /// snapshot directory).
    pub path: PathBuf,
    /// Its file index (`N`).
    pub index: u64,
    /// When it was sealed (wall clock, ns since the Unix epoch): its
    /// events are older.
    pub wall_ns: u64,
    /// The recording's service name (`service`, `RUNTRACE_SERVICE`),
    /// a safe partition name.
    pub service: String,
    /// The host name (`host`, `RUNTRACE_HOST`), a safe partition name.
    pub host: String,
    /// The snapshot directory's name when the segment is part of a
    /// snapshot (memory mode), `None` in file mode.
    pub snapshot: Option<String>,
}

impl SegmentInfo {
    /// The segment's object-store key:
    /// `service=<s>/host=<h>/date=<yyyy-mm-dd>/trace-<ts>-<n>.bin`
    /// (`runtrace_format::partition::segment_key`).
    ///
    /// ```
    /// let s = runtrace_recorder::sink::SegmentInfo {
    ///     path: "/tmp/t/trace.3.bin".into(),
    ///     index: 3,
    ///     wall_ns: 1_795_828_580_000_000_000,
    ///     service: "api".into(),
    ///     host: "h1".into(),
    ///     snapshot: None,
    /// };
    /// assert_eq!(s.key(), "service=api/host=h1/date=2026-11-28/trace-20261128T011620.000Z-3.bin");
    /// ```
    pub fn key(&self) -> String {
        runtrace_format::partition::segment_key(&self.service, &self.host, self.wall_ns, self.index)
    }
}

/// Where sealed segments go. `segment` runs on the sink's own thread,
/// never on the writer's: it may block (a network upload, a child
/// process); the recording goes on meanwhile, and segments that arrive
/// faster than it sends them queue up to a bound (then the oldest unsent
/// are dropped and counted).
///
/// ```
/// use runtrace_recorder::sink::{SegmentInfo, Sink};
/// struct Count(u64);
/// impl Sink for Count {
///     fn name(&self) -> String { "count".into() }
///     fn segment(&mut self, _meta: &SegmentInfo, data: bytes::Bytes) -> Result<(), String> {
///         self.0 += data.len() as u64;
///         Ok(())
///     }
/// }
/// let builder = runtrace_recorder::Recorder::builder().sink(Count(0));
/// # let _ = builder;
/// ```
pub trait Sink: Send + 'static {
    /// A short name for messages (`command /usr/local/bin/upload`).
    fn name(&self) -> String;
    /// Ships one sealed segment: `data` is the whole file at
    /// `meta.path`. An `Err` is retried (with pauses) a few times, then
    /// the segment counts as failed.
    fn segment(&mut self, meta: &SegmentInfo, data: Bytes) -> Result<(), String>;
}

/// Runs a program with each sealed file's path as its last argument
/// (upload with the operator's own tool), and waits for it: a non-zero
/// exit is a failure (retried), one that runs longer than its timeout is
/// killed and fails. `RUNTRACE_SINK_COMMAND` (a program and arguments
/// separated by spaces, no quoting) adds one.
///
/// ```no_run
/// use runtrace_recorder::sink::CommandSink;
/// let up = CommandSink::new("/usr/local/bin/upload", ["--bucket", "traces"]);
/// let guard = runtrace_recorder::Recorder::builder().sink(up).start()?;
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
#[derive(Debug, Clone)]
pub struct CommandSink {
    program: PathBuf,
    args: Vec<String>,
    timeout: Duration,
}

impl CommandSink {
    /// `program args... <path>` for every sealed segment, with a timeout
    /// of 60 s.
    pub fn new<I, S>(program: impl Into<PathBuf>, args: I) -> CommandSink
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CommandSink {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            timeout: Duration::from_secs(60),
        }
    }

    /// Kills a run that takes longer than `limit` (and counts it failed).
    pub fn timeout(mut self, limit: Duration) -> CommandSink {
        self.timeout = limit;
        self
    }
}

impl Sink for CommandSink {
    fn name(&self) -> String {
        format!("command {}", self.program.display())
    }

    fn segment(&mut self, meta: &SegmentInfo, _data: Bytes) -> Result<(), String> {
        let mut child = std::process::Command::new(&self.program)
            .args(&self.args)
            .arg(&meta.path)
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        let t0 = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(()),
                Ok(Some(st)) => {
                    return Err(format!(
                        "{} {}: {st}",
                        self.program.display(),
                        meta.path.display()
                    ))
                }
                Ok(None) if t0.elapsed() > self.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "{} {}: killed after {:?}",
                        self.program.display(),
                        meta.path.display(),
                        self.timeout
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("{}: {e}", self.program.display())),
            }
        }
    }
}

/// Uploads each sealed segment to an object store (feature
/// `object-store`) under `<prefix>/` + [`SegmentInfo::key`]. The URL
/// picks the store: `file:///abs/dir`, `memory:///`, `s3://bucket/prefix`
/// (feature `object-store-aws`; credentials and region from the usual
/// `AWS_*` variables), `gs://`, `az://`. `RUNTRACE_SINK_URL` adds one.
///
/// ```no_run
/// # #[cfg(feature = "object-store")] {
/// use runtrace_recorder::sink::ObjectStoreSink;
/// let up = ObjectStoreSink::from_url("file:///var/tmp/trace-store")?;
/// let guard = runtrace_recorder::Recorder::builder().sink(up).start()?;
/// # }
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
#[cfg(feature = "object-store")]
pub struct ObjectStoreSink {
    store: Arc<dyn object_store::ObjectStore>,
    prefix: object_store::path::Path,
    label: String,
    rt: Option<tokio::runtime::Runtime>,
}

#[cfg(feature = "object-store")]
impl ObjectStoreSink {
    /// A sink for the store at `url` (see the type's doc). Options of the
    /// store come from the environment: `AWS_*`, `GOOGLE_*` and
    /// `AZURE_*` variables, by their names in lower case
    /// (`AWS_REGION` is the option `aws_region`).
    pub fn from_url(url: &str) -> Result<ObjectStoreSink, crate::RecordError> {
        let (store, prefix) = runtrace_store::open_url(url).map_err(crate::RecordError::Config)?;
        Ok(ObjectStoreSink {
            store: Arc::from(store),
            prefix,
            label: url.to_string(),
            rt: None,
        })
    }

    /// A sink for a store the application built (for tests:
    /// `object_store::memory::InMemory`), keys under `prefix` (may be
    /// empty).
    pub fn new(store: Arc<dyn object_store::ObjectStore>, prefix: &str) -> ObjectStoreSink {
        ObjectStoreSink {
            store,
            prefix: object_store::path::Path::from(prefix),
            label: format!("object store {prefix:?}"),
            rt: None,
        }
    }
}

#[cfg(feature = "object-store")]
impl Sink for ObjectStoreSink {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn segment(&mut self, meta: &SegmentInfo, data: Bytes) -> Result<(), String> {
        if self.rt.is_none() {
            // On the sink's own thread: a small runtime for the store's
            // async client (network I/O and timers for S3 and the like).
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start a runtime for the upload: {e}"))?;
            self.rt = Some(rt);
        }
        let key = meta.key();
        let loc = if self.prefix.as_ref().is_empty() {
            object_store::path::Path::from(key.as_str())
        } else {
            object_store::path::Path::from(format!("{}/{key}", self.prefix))
        };
        let store = self.store.clone();
        let rt = self.rt.as_ref().expect("set above");
        rt.block_on(async move { store.put(&loc, data.into()).await })
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", meta.key()))
    }
}

/// How a sink's deliveries went, added up at the end.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SinkCounts {
    pub(crate) sent: u64,
    pub(crate) failed: u64,
    pub(crate) dropped: u64,
    pub(crate) unsent: u64,
}

struct QState {
    items: VecDeque<SegmentInfo>,
    /// The sink is sending one (taken from `items`).
    busy: bool,
    closed: bool,
    counts: SinkCounts,
}

/// One sink's bounded queue and thread (see the module's rules).
pub(crate) struct SinkQueue {
    name: String,
    capacity: usize,
    state: Mutex<QState>,
    cv: Condvar,
}

/// Pauses between tries of one segment: 200 ms, doubling, at most 5 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << attempt.min(5))).min(Duration::from_secs(5))
}

impl SinkQueue {
    /// Starts `sink`'s thread behind a queue of `capacity` segments,
    /// trying each `1 + retries` times.
    pub(crate) fn start(
        mut sink: Box<dyn Sink>,
        capacity: usize,
        retries: u32,
    ) -> std::io::Result<(Arc<SinkQueue>, JoinHandle<()>)> {
        let q = Arc::new(SinkQueue {
            name: sink.name(),
            capacity: capacity.max(1),
            state: Mutex::new(QState {
                items: VecDeque::new(),
                busy: false,
                closed: false,
                counts: SinkCounts::default(),
            }),
            cv: Condvar::new(),
        });
        let q2 = q.clone();
        let h = std::thread::Builder::new()
            .name("runtrace-sink".into())
            .spawn(move || q2.run(&mut *sink, retries))?;
        Ok((q, h))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Offers a sealed segment (rule 2: never waits for the sink).
    pub(crate) fn push(&self, seg: SegmentInfo) {
        let mut st = self.lock();
        if st.closed {
            st.counts.unsent += 1;
            return;
        }
        if st.items.len() >= self.capacity {
            st.items.pop_front();
            st.counts.dropped += 1;
        }
        st.items.push_back(seg);
        drop(st);
        self.cv.notify_all();
    }

    fn run(&self, sink: &mut dyn Sink, retries: u32) {
        let mut said = false;
        loop {
            let seg = {
                let mut st = self.lock();
                loop {
                    if let Some(s) = st.items.pop_front() {
                        st.busy = true;
                        break s;
                    }
                    if st.closed {
                        return;
                    }
                    st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            };
            let mut result = Err(String::new());
            for attempt in 0..=retries {
                if attempt > 0 {
                    std::thread::sleep(backoff(attempt - 1));
                }
                result = std::fs::read(&seg.path)
                    .map_err(|e| format!("{}: cannot read: {e}", seg.path.display()))
                    .and_then(|data| sink.segment(&seg, Bytes::from(data)));
                if result.is_ok() {
                    break;
                }
            }
            if let Err(e) = &result {
                if !std::mem::replace(&mut said, true) {
                    eprintln!(
                        "runtrace: sink {}: segment not sent after {} tries: {e} (further failures are counted, not said)",
                        self.name,
                        retries + 1
                    );
                }
            }
            let mut st = self.lock();
            st.busy = false;
            match result {
                Ok(()) => st.counts.sent += 1,
                Err(_) => st.counts.failed += 1,
            }
            drop(st);
            self.cv.notify_all();
        }
    }

    /// Closes the queue and waits until `deadline` for the sink to send
    /// what it holds; returns its counts, what it still held then
    /// counted as unsent, and whether its thread is done.
    pub(crate) fn close(&self, deadline: Instant) -> (SinkCounts, bool) {
        let mut st = self.lock();
        st.closed = true;
        self.cv.notify_all();
        while !st.items.is_empty() || st.busy {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let done = st.items.is_empty() && !st.busy;
        let mut c = st.counts;
        c.unsent += st.items.len() as u64 + u64::from(st.busy);
        // What is left is counted: a sink that wakes up later sends
        // nothing more.
        st.items.clear();
        (c, done)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Slow(Arc<Mutex<Vec<u64>>>, Duration);
    impl Sink for Slow {
        fn name(&self) -> String {
            "slow".into()
        }
        fn segment(&mut self, meta: &SegmentInfo, _data: Bytes) -> Result<(), String> {
            std::thread::sleep(self.1);
            self.0.lock().unwrap().push(meta.index);
            Ok(())
        }
    }

    fn seg(dir: &std::path::Path, index: u64) -> SegmentInfo {
        let path = dir.join(format!("trace.{index}.bin"));
        std::fs::write(&path, b"x").unwrap();
        SegmentInfo {
            path,
            index,
            wall_ns: 0,
            service: "s".into(),
            host: "h".into(),
            snapshot: None,
        }
    }

    /// A full queue drops its oldest unsent segment, never the one being
    /// sent, and never waits.
    #[test]
    fn full_queue_drops_the_oldest_unsent() {
        let dir = tempfile::tempdir().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let (q, h) = SinkQueue::start(
            Box::new(Slow(got.clone(), Duration::from_millis(300))),
            2,
            0,
        )
        .unwrap();
        q.push(seg(dir.path(), 0));
        // Taken by the sink (busy for 300 ms).
        while !q.lock().busy {
            std::thread::sleep(Duration::from_millis(1));
        }
        let t0 = Instant::now();
        for i in 1..=5 {
            q.push(seg(dir.path(), i));
        }
        assert!(t0.elapsed() < Duration::from_millis(100));
        let (c, done) = q.close(Instant::now() + Duration::from_secs(10));
        h.join().unwrap();
        assert!(done);
        assert_eq!(*got.lock().unwrap(), [0, 4, 5]);
        assert_eq!((c.sent, c.dropped, c.failed, c.unsent), (3, 3, 0, 0));
    }
}
