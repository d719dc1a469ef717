//! What `#[runtrace::main]` and `#[runtrace::test]` run
//! (`runtrace_macros`): the order a service needs, in one place.
//!
//! 1. Start the recording (feature `record`): when the attribute names a
//!    `path`, or when `RUNTRACE_PATH` is set; otherwise nothing records,
//!    so the same binary ships with recording off until an operator sets
//!    the variable. A setting that does not parse is reported on standard
//!    error (the recorder's `RecordError::Config`, naming the setting) and
//!    the application runs unrecorded.
//! 2. Build the tokio runtime through [`crate::tokio::Instrumentation`]
//!    (the attribute's flavor, worker threads, name).
//! 3. While recording, seal it on SIGTERM and SIGINT when nothing else
//!    handles them (its private `signals` module).
//! 4. Run the body; shut the runtime down (its workers' last events
//!    recorded); finish the recording, reporting an error on standard
//!    error without changing what the body returned.
//!
//! ```no_run
//! // What `#[runtrace::main(worker_threads = 2)] async fn main() { ... }` writes:
//! runtrace::__entry::Entry::new(runtrace::__entry::Flavor::MultiThread)
//!     .worker_threads(2)
//!     .block_on(async { /* the body */ });
//! ```

use crate::tokio::Instrumentation;
use std::future::Future;

/// The runtime's flavor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `tokio::runtime::Builder::new_multi_thread`.
    MultiThread,
    /// `tokio::runtime::Builder::new_current_thread`.
    CurrentThread,
}

/// The settings of one `#[runtrace::main]` / `#[runtrace::test]`.
#[must_use]
pub struct Entry {
    flavor: Flavor,
    worker_threads: Option<usize>,
    start_paused: bool,
    name: Option<String>,
    test: Option<&'static str>,
    #[cfg(feature = "record")]
    recording: recording::Settings,
}

impl Entry {
    /// A runtime of `flavor`, recorded from the environment.
    pub fn new(flavor: Flavor) -> Entry {
        Entry {
            flavor,
            worker_threads: None,
            start_paused: false,
            name: None,
            test: None,
            #[cfg(feature = "record")]
            recording: recording::Settings::default(),
        }
    }

    /// `worker_threads = N`.
    pub fn worker_threads(mut self, n: usize) -> Entry {
        self.worker_threads = Some(n);
        self
    }

    /// `start_paused = true`: tokio's paused clock (tokio's `test-util`
    /// feature, through runtrace's `tokio-test-util`).
    pub fn start_paused(mut self, paused: bool) -> Entry {
        self.start_paused = paused;
        self
    }

    /// `runtrace(name = "...")`: the runtime's name in the trace.
    pub fn name(mut self, name: impl Into<String>) -> Entry {
        self.name = Some(name.into());
        self
    }

    /// `runtrace(path = "...")`: record there, whatever the environment.
    pub fn path(self, path: impl Into<std::path::PathBuf>) -> Entry {
        #[cfg(feature = "record")]
        {
            let mut s = self;
            s.recording.path = Some(path.into());
            s
        }
        #[cfg(not(feature = "record"))]
        {
            let _ = path;
            self
        }
    }

    /// `runtrace(cpu_hz = N)`: a CPU profile at `hz` samples per second.
    pub fn cpu_hz(self, hz: u32) -> Entry {
        #[cfg(feature = "record")]
        {
            let mut s = self;
            s.recording.cpu_hz = Some(hz);
            s
        }
        #[cfg(not(feature = "record"))]
        {
            let _ = hz;
            self
        }
    }

    /// `runtrace(config = my_fn)`: `my_fn` adjusts the recorder's settings.
    #[cfg(feature = "record")]
    pub fn config(mut self, f: fn(crate::RecorderBuilder) -> crate::RecorderBuilder) -> Entry {
        self.recording.config = Some(f);
        self
    }

    /// A test (`#[runtrace::test]`). A process records one recording at a
    /// time: with `RUNTRACE_PATH` set, the first test to start records and
    /// the tests running beside it do not (run one test, `cargo test
    /// NAME`, to record it).
    pub fn test(mut self, name: &'static str) -> Entry {
        self.test = Some(name);
        self
    }

    /// Runs `body` to completion as described in the module docs.
    pub fn block_on<F: Future>(self, body: F) -> F::Output {
        #[cfg(feature = "record")]
        let guard = recording::start(&self.recording, self.test);
        let rt = self.runtime();
        #[cfg(feature = "record")]
        if guard.is_some() {
            signals::install();
        }
        #[cfg(all(feature = "record", feature = "taskdump"))]
        let dumps = guard.map(|()| task_dumps::start(&rt));
        let out = rt.block_on(body);
        #[cfg(all(feature = "record", feature = "taskdump"))]
        if let Some(d) = dumps {
            d.at_end(&rt);
        }
        // The workers stop (and record it) before the recording ends.
        drop(rt);
        #[cfg(feature = "record")]
        recording::finish(guard);
        out
    }

    fn runtime(&self) -> tokio::runtime::Runtime {
        let mut b = match self.flavor {
            Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread(),
            Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        };
        b.enable_all();
        if let Some(n) = self.worker_threads {
            b.worker_threads(n);
        }
        if self.start_paused {
            #[cfg(feature = "tokio-test-util")]
            b.start_paused(true);
            #[cfg(not(feature = "tokio-test-util"))]
            panic!(
                "start_paused needs tokio's test-util: enable runtrace's feature `tokio-test-util`"
            );
        }
        let mut i = Instrumentation::new();
        if let Some(n) = &self.name {
            i = i.name(n);
        }
        i.apply(&mut b);
        b.build().unwrap_or_else(|e| {
            // As #[tokio::main] does: a runtime that cannot start is fatal.
            panic!("failed to build the tokio runtime: {e}")
        })
    }
}

/// The recording's start and end (feature `record`).
#[cfg(feature = "record")]
mod recording {
    use crate::{RecordError, Recorder, RecordingGuard};
    use std::sync::Mutex;

    /// What the attribute said about recording.
    #[derive(Default)]
    pub(super) struct Settings {
        pub path: Option<std::path::PathBuf>,
        pub cpu_hz: Option<u32>,
        pub config: Option<fn(crate::RecorderBuilder) -> crate::RecorderBuilder>,
    }

    /// The running recording, where the signal watcher can finish it too.
    pub(super) static GUARD: Mutex<Option<RecordingGuard>> = Mutex::new(None);

    /// Starts recording when asked to; says why on standard error when it
    /// cannot. Returns whether a recording runs.
    pub(super) fn start(s: &Settings, test: Option<&str>) -> Option<()> {
        let from_env = std::env::var_os("RUNTRACE_PATH").is_some_and(|p| !p.is_empty());
        if s.path.is_none() && !from_env {
            return None;
        }
        let mut b = Recorder::builder();
        if let Some(p) = &s.path {
            b = b.path(p);
        }
        if let Some(hz) = s.cpu_hz {
            b = b.cpu_profile(hz);
        }
        if let Some(f) = s.config {
            b = f(b);
        }
        match b.start() {
            Ok(g) => {
                *GUARD.lock().unwrap_or_else(|e| e.into_inner()) = Some(g);
                Some(())
            }
            Err(RecordError::AlreadyRecording) if test.is_some() => None,
            Err(e) => {
                eprintln!("runtrace: not recording: {e}");
                None
            }
        }
    }

    /// Finishes the recording if it still runs (a signal may have
    /// finished it), reporting an error on standard error.
    pub(super) fn finish(started: Option<()>) {
        if started.is_none() {
            return;
        }
        seal();
    }

    /// Finishes the running recording, if any: from the body's return or
    /// from the signal watcher.
    pub(super) fn seal() {
        let g = GUARD.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(g) = g {
            if let Err(e) = g.finish() {
                eprintln!("runtrace: {e}");
            }
        }
    }
}

/// SIGTERM and SIGINT while recording (feature `record`). A handler that
/// only writes the signal's number to a pipe (async-signal-safe) and a
/// thread that reads it: when the signal would end the process (nothing
/// else handles it: runtrace's handler is still the one installed), the
/// thread seals the recording, restores the default action and raises the
/// signal again, so the process ends as it would have. When the
/// application installed its own handler (tokio's `signal::ctrl_c`, say),
/// the application decides: the recording is sealed when its main
/// returns. A handler the application set before the recording started
/// is left in place.
#[cfg(feature = "record")]
mod signals {
    use std::sync::atomic::{AtomicI32, Ordering};

    static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
    const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

    extern "C" fn on_signal(sig: libc::c_int) {
        let fd = PIPE_WRITE.load(Ordering::Relaxed);
        if fd >= 0 {
            let b = sig as u8;
            // SAFETY: write(2) is async-signal-safe; `b` is a valid byte.
            unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
        }
    }

    fn handler_is_ours(sig: libc::c_int) -> bool {
        // SAFETY: reading the current action into a zeroed struct.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction == on_signal as extern "C" fn(libc::c_int) as usize
        }
    }

    /// Installs the handler for the signals nothing handles yet (once).
    pub(super) fn install() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: `fds` has room for the two descriptors.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return;
            }
            PIPE_WRITE.store(fds[1], Ordering::Relaxed);
            let read = fds[0];
            let _ = std::thread::Builder::new()
                .name("runtrace-signals".into())
                .spawn(move || watch(read));
            #[cfg(feature = "taskdump")]
            let dump_sig = super::task_dumps::dump_signal();
            #[cfg(not(feature = "taskdump"))]
            let dump_sig: Option<libc::c_int> = None;
            for sig in SIGNALS.into_iter().chain(dump_sig) {
                // SAFETY: reading and setting a signal's action with
                // zeroed, then filled, structs; the handler is
                // async-signal-safe.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                        || old.sa_sigaction != libc::SIG_DFL
                    {
                        if Some(sig) == dump_sig {
                            eprintln!(
                                "runtrace: RUNTRACE_TASK_DUMP: SIG{} is already handled (RUNTRACE_SNAPSHOT_SIGNAL, or the application): no task dump on it",
                                super::signal_name(sig)
                            );
                        }
                        continue; // The application handles it.
                    }
                    let mut act: libc::sigaction = std::mem::zeroed();
                    act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                    act.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut act.sa_mask);
                    libc::sigaction(sig, &act, std::ptr::null_mut());
                }
            }
        });
    }

    fn watch(read: libc::c_int) {
        loop {
            let mut b = 0u8;
            // SAFETY: reading one byte into `b`.
            let n = unsafe { libc::read(read, (&mut b as *mut u8).cast(), 1) };
            if n != 1 {
                if n < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                return;
            }
            let sig = b as libc::c_int;
            if !handler_is_ours(sig) {
                continue; // The application took the signal over.
            }
            #[cfg(feature = "taskdump")]
            if super::task_dumps::is_dump_signal(sig) {
                super::task_dumps::from_thread(&format!("signal {}", super::signal_name(sig)));
                continue;
            }
            #[cfg(feature = "taskdump")]
            super::task_dumps::before_seal();
            super::recording::seal();
            // SAFETY: back to the default action, then the signal again:
            // the process ends as the signal would have ended it.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
        }
    }
}

/// A signal's name without `SIG` (for messages and dump triggers).
#[cfg(feature = "record")]
fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGUSR1 => "USR1",
        libc::SIGUSR2 => "USR2",
        libc::SIGHUP => "HUP",
        libc::SIGWINCH => "WINCH",
        libc::SIGPWR => "PWR",
        libc::SIGTERM => "TERM",
        libc::SIGINT => "INT",
        _ => "?",
    }
}

/// Task dumps while recording (features `record` and `taskdump`), as
/// `RUNTRACE_TASK_DUMP` asks: a comma-separated list of `end` (when the
/// body returns, and before SIGTERM / SIGINT seals the recording: where
/// the tasks still pending sit), a signal name (`USR1`: a dump each time
/// it arrives), or `off`. Unset: `off`, since tokio 1.54's dump of a
/// multi-thread runtime can hang it (docs/analysis.md). A value that does
/// not parse is reported on standard error and no dump is taken.
#[cfg(all(feature = "record", feature = "taskdump"))]
mod task_dumps {
    use std::sync::Mutex;
    use std::time::Duration;

    /// The runtime being dumped from the signal watcher.
    static HANDLE: Mutex<Option<tokio::runtime::Handle>> = Mutex::new(None);
    /// Resolving a large program's backtraces can take seconds.
    const RESOLVE: Duration = Duration::from_secs(20);

    /// What `RUNTRACE_TASK_DUMP` asks for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) struct Triggers {
        pub end: bool,
        pub signal: Option<libc::c_int>,
    }

    /// `RUNTRACE_TASK_DUMP`'s value parsed (Err: what was wrong).
    pub(super) fn parse(v: Option<&str>) -> Result<Triggers, String> {
        let mut t = Triggers {
            end: false,
            signal: None,
        };
        let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(t);
        };
        for w in v.split(',').map(str::trim) {
            match w.to_ascii_lowercase().as_str() {
                "end" => t.end = true,
                "off" | "none" | "0" => {}
                _ => match runtrace_recorder::signal_by_name(w) {
                    Some(sig) => t.signal = Some(sig),
                    None => {
                        return Err(format!(
                            "RUNTRACE_TASK_DUMP={v:?}: {w:?} is not `end`, `off` or a signal (USR1, USR2, HUP, WINCH, PWR)"
                        ))
                    }
                },
            }
        }
        Ok(t)
    }

    /// `RUNTRACE_TASK_DUMP`, read (and any error reported) once.
    fn triggers() -> Triggers {
        static T: std::sync::OnceLock<Triggers> = std::sync::OnceLock::new();
        *T.get_or_init(|| {
            let v = std::env::var("RUNTRACE_TASK_DUMP").ok();
            parse(v.as_deref()).unwrap_or_else(|e| {
                eprintln!("runtrace: {e}; no task dump");
                Triggers {
                    end: false,
                    signal: None,
                }
            })
        })
    }

    /// The recording started on `rt`: remember it for the signal watcher.
    pub(super) fn start(rt: &tokio::runtime::Runtime) -> Triggers {
        *HANDLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(rt.handle().clone());
        triggers()
    }

    impl Triggers {
        /// The body returned: dump the tasks still pending.
        pub(super) fn at_end(self, rt: &tokio::runtime::Runtime) {
            HANDLE.lock().unwrap_or_else(|e| e.into_inner()).take();
            if self.end {
                report(rt.block_on(crate::tokio::dump::triggered("end")));
            }
        }
    }

    /// The signal asking for dumps (`RUNTRACE_TASK_DUMP=USR1`).
    pub(super) fn dump_signal() -> Option<libc::c_int> {
        triggers().signal
    }

    pub(super) fn is_dump_signal(sig: libc::c_int) -> bool {
        dump_signal() == Some(sig)
    }

    /// A dump from the signal watcher's thread.
    pub(super) fn from_thread(trigger: &str) {
        let h = HANDLE.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = h {
            report(crate::tokio::dump::dump_blocking(&h, trigger, RESOLVE));
        }
    }

    /// SIGTERM / SIGINT is about to seal the recording.
    pub(super) fn before_seal() {
        if triggers().end {
            from_thread("end");
        }
    }

    fn report(r: Result<crate::tokio::dump::Dumped, crate::tokio::dump::DumpError>) {
        match r {
            Ok(d) if d.omitted > 0 => eprintln!(
                "runtrace: task dump {}: {} tasks recorded, {} more left out",
                d.dump, d.tasks, d.omitted
            ),
            Ok(_) | Err(crate::tokio::dump::DumpError::NotRecording) => {}
            Err(e) => eprintln!("runtrace: {e}"),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn runtrace_task_dump_values() {
            let off = Triggers {
                end: false,
                signal: None,
            };
            assert_eq!(parse(None), Ok(off));
            assert_eq!(parse(Some(" ")), Ok(off));
            assert_eq!(parse(Some("off")), Ok(off));
            assert_eq!(
                parse(Some("end")),
                Ok(Triggers {
                    end: true,
                    signal: None
                })
            );
            assert_eq!(
                parse(Some("end,USR1")),
                Ok(Triggers {
                    end: true,
                    signal: Some(libc::SIGUSR1)
                })
            );
            assert_eq!(
                parse(Some("sigusr2")),
                Ok(Triggers {
                    end: false,
                    signal: Some(libc::SIGUSR2)
                })
            );
            let e = parse(Some("end,KILL")).unwrap_err();
            assert!(
                e.contains("RUNTRACE_TASK_DUMP") && e.contains("\"KILL\""),
                "{e}"
            );
        }
    }
}
