//! Timed I/O: `io` events (op, bytes, io_ns), seed 001's `logging_io`.
//!
//! Operation names are free text; the well-known ones are constants here.
//! `runtrace backlog` reports latency percentiles per op and finds slow I/O
//! under a lock that a queue's consumer needed.

use crate::{clock, names};
use runtrace_probes::builtin::io;

/// A write to a file.
pub const FILE_WRITE: &str = "file_write";
/// A send on a socket.
pub const NET_SEND: &str = "net_send";
/// A flush or fsync.
pub const FLUSH: &str = "flush";
/// A log rotation (rename, reopen).
pub const ROTATE: &str = "rotate";

/// Runs `f`, a blocking I/O operation moving `bytes`, and records how long
/// it took as an `io` event named `op` when a backend listens.
///
/// ```
/// use runtrace_sync::io;
/// let mut out = Vec::new();
/// let line = b"hello\n";
/// io::timed(io::FILE_WRITE, line.len() as u64, || {
///     std::io::Write::write_all(&mut out, line)
/// })
/// .unwrap();
/// ```
#[inline]
pub fn timed<R>(op: &str, bytes: u64, f: impl FnOnce() -> R) -> R {
    let timer = start(op);
    let r = f();
    timer.finish(bytes);
    r
}

/// Starts timing an I/O operation whose size is known only at its end.
///
/// ```
/// use runtrace_sync::io;
/// let t = io::start("compact");
/// let moved = 4096; // ... do the work, learn its size ...
/// t.finish(moved);
/// ```
#[inline]
pub fn start(op: &str) -> IoTimer<'_> {
    IoTimer {
        op,
        since: if io::enabled() {
            clock::now().max(1)
        } else {
            0
        },
    }
}

/// An I/O operation being timed (see [`start`]); [`IoTimer::finish`]
/// records it. Dropping it without `finish` records nothing.
#[must_use = "call finish(bytes) to record the operation"]
#[derive(Debug)]
pub struct IoTimer<'a> {
    op: &'a str,
    /// Start in trace ticks, 0 when nobody listened at the start.
    since: u64,
}

impl IoTimer<'_> {
    /// Records the operation as having moved `bytes`.
    #[inline]
    pub fn finish(self, bytes: u64) {
        if self.since != 0 {
            record(self.op, self.since, bytes);
        }
    }
}

#[cold]
#[inline(never)]
fn record(op: &str, since: u64, bytes: u64) {
    let t = clock::now();
    io::fire_at(
        t,
        io::Args {
            op: names::intern(op),
            bytes,
            io_ns: clock::ns_between(since, t),
        },
    );
}
