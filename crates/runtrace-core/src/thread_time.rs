//! The calling thread's CPU time and scheduler wait (time runnable but not
//! running), for worker park/unpark events.
//!
//! The kernel keeps the wait in `/proc/thread-self/schedstat`. Opening that
//! file costs an `openat` + `read` + `close` (several µs in a VM), so each
//! thread opens it once and re-reads it with one `pread` (the first call
//! on a thread also opens it). [`sampled`] goes
//! further for hot paths (tokio's park/unpark hooks run thousands of times
//! a second): it re-reads only when `min_gap` has passed since the thread's
//! last read and otherwise returns that read's values, so a park or unpark
//! costs no syscall at all most of the time.
//!
//! ```
//! use runtrace_core::thread_time;
//! // Trace ticks now, and a gap of 10 ms in ticks.
//! let clock = runtrace_core::clock::TraceClock::get();
//! let gap = clock.ticks_per_sec() / 100;
//! let s = thread_time::sampled(clock.now(), gap);
//! // Exact values now (two syscalls): never behind the sample.
//! let exact = thread_time::read();
//! assert!(exact.cpu_ns >= s.cpu_ns && exact.sched_wait_ns >= s.sched_wait_ns);
//! ```

use std::cell::Cell;

/// A thread's cumulative CPU time and scheduler wait, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTimes {
    /// CPU time the thread has used (`CLOCK_THREAD_CPUTIME_ID`).
    pub cpu_ns: u64,
    /// Time the thread spent runnable but not running (schedstat's
    /// `run_delay`; 0 where the kernel does not provide it).
    pub sched_wait_ns: u64,
}

/// `fd` values that are not open files.
const NOT_OPEN: i32 = -1;
/// schedstat cannot be opened here (or the thread is exiting): wait is 0.
const UNAVAILABLE: i32 = -2;

/// Per-thread state, without a destructor so the hot path pays no
/// registration check; [`CLOSER`] (registered on first open) closes the fd.
struct State {
    fd: Cell<i32>,
    /// Caller time of the last read (`u64::MAX`: never read).
    last_read: Cell<u64>,
    last: Cell<ThreadTimes>,
}

struct Closer;

impl Drop for Closer {
    fn drop(&mut self) {
        let fd = STATE.with(|s| s.fd.replace(UNAVAILABLE));
        if fd >= 0 {
            // SAFETY: `fd` was opened by `schedstat_fd` on this thread and is
            // closed only here, once (the state now says UNAVAILABLE).
            unsafe { libc::close(fd) };
        }
    }
}

thread_local! {
    static STATE: State = const {
        State {
            fd: Cell::new(NOT_OPEN),
            last_read: Cell::new(u64::MAX),
            last: Cell::new(ThreadTimes { cpu_ns: 0, sched_wait_ns: 0 }),
        }
    };
    static CLOSER: Closer = const { Closer };
}

/// This thread's schedstat fd, opened on first use (`UNAVAILABLE` if not).
fn schedstat_fd(s: &State) -> i32 {
    let fd = s.fd.get();
    if fd != NOT_OPEN {
        return fd;
    }
    // SAFETY: a NUL-terminated path; O_CLOEXEC so exec'd children do not
    // inherit it. `/proc/thread-self` names the calling thread.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/schedstat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        s.fd.set(UNAVAILABLE);
        return UNAVAILABLE;
    }
    // Registers the destructor that closes it; if thread-locals are already
    // being destroyed, close now and stop reading.
    if CLOSER.try_with(|_| ()).is_err() {
        // SAFETY: just opened above, not shared.
        unsafe { libc::close(fd) };
        s.fd.set(UNAVAILABLE);
        return UNAVAILABLE;
    }
    s.fd.set(fd);
    fd
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The time of a POSIX clock in ns (`clock_gettime`; 0 if the clock does
/// not exist), e.g. `CLOCK_MONOTONIC`, the clock perf_event sample times
/// use, or `CLOCK_THREAD_CPUTIME_ID`.
///
/// ```
/// let a = runtrace_core::thread_time::clock_ns(libc::CLOCK_MONOTONIC);
/// assert!(runtrace_core::thread_time::clock_ns(libc::CLOCK_MONOTONIC) >= a);
/// ```
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// schedstat's first two fields (`sum_exec_runtime`, `run_delay`, ns) with
/// one `pread`; None if unreadable.
fn read_schedstat(s: &State) -> Option<(u64, u64)> {
    let fd = schedstat_fd(s);
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 96];
    // SAFETY: reads at most `buf.len()` bytes into `buf`, from an fd this
    // thread owns.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return None;
    }
    parse_schedstat(&buf[..n as usize])
}

/// The first two whitespace-separated numbers of a schedstat line
/// (`sum_exec_runtime run_delay pcount`). Byte by byte, without
/// `str::from_utf8`: the UTF-8 check cost ~100 of the ~460 instructions
/// of a read (callgrind, HTTP server benchmark at 4,000 requests a
/// second).
fn parse_schedstat(b: &[u8]) -> Option<(u64, u64)> {
    let mut f = b
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty())
        .map(decimal);
    Some((f.next()??, f.next()??))
}

/// A field of ASCII digits as a number: None if empty, not all digits,
/// or over `u64::MAX`.
fn decimal(f: &[u8]) -> Option<u64> {
    if f.is_empty() {
        return None;
    }
    f.iter().try_fold(0u64, |n, &c| {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

fn read_wait(s: &State) -> u64 {
    read_schedstat(s).map_or(0, |(_, wait)| wait)
}

/// One sample for [`sampled`]: both values from one `pread` of schedstat
/// (its CPU time is the scheduler's `sum_exec_runtime`, which trails the
/// thread's CPU clock by at most the current slice); the CPU clock alone
/// where schedstat is unavailable.
fn sample(s: &State) -> ThreadTimes {
    match read_schedstat(s) {
        Some((cpu_ns, sched_wait_ns)) => ThreadTimes {
            cpu_ns,
            sched_wait_ns,
        },
        None => ThreadTimes {
            cpu_ns: thread_cpu_ns(),
            sched_wait_ns: 0,
        },
    }
}

/// The calling thread's CPU time and scheduler wait now: one
/// `clock_gettime` and one `pread` (the first call on a thread also opens
/// the file). For edges that need exact values.
pub fn read() -> ThreadTimes {
    STATE
        .try_with(|s| ThreadTimes {
            cpu_ns: thread_cpu_ns(),
            sched_wait_ns: read_wait(s),
        })
        .unwrap_or_else(|_| ThreadTimes {
            cpu_ns: thread_cpu_ns(),
            sched_wait_ns: 0,
        })
}

/// The calling thread's times as of its last read, re-read only when
/// `now - last read >= min_gap`, or on the thread's first call; a read is
/// one `pread` of schedstat, which holds both values (its CPU time trails
/// [`read`]'s by at most the thread's current time slice).
/// `now` and `min_gap` are in any one monotonic unit (trace ticks: the
/// caller usually has read the clock already). The values returned are
/// those of a read less than `min_gap` before `now`; with no read the call
/// costs a thread-local access and a compare.
#[inline]
pub fn sampled(now: u64, min_gap: u64) -> ThreadTimes {
    STATE
        .try_with(|s| {
            let last = s.last_read.get();
            if last == u64::MAX || now.wrapping_sub(last) >= min_gap {
                let t = sample(s);
                s.last.set(t);
                s.last_read.set(now);
            }
            s.last.get()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedstat_lines() {
        assert_eq!(
            parse_schedstat(b"1109092 25536785 3\n"),
            Some((1109092, 25536785))
        );
        assert_eq!(parse_schedstat(b"  7\t8 9"), Some((7, 8)));
        assert_eq!(
            parse_schedstat(b"18446744073709551615 0 1\n"),
            Some((u64::MAX, 0))
        );
        assert_eq!(parse_schedstat(b"18446744073709551616 0 1\n"), None);
        assert_eq!(parse_schedstat(b"1109092\n"), None);
        assert_eq!(parse_schedstat(b""), None);
        assert_eq!(parse_schedstat(b"x y z"), None);
        assert_eq!(parse_schedstat(b"12 3x 4"), None);
        assert_eq!(parse_schedstat(b"-1 2 3"), None);
    }

    #[test]
    fn sampled_rereads_only_after_the_gap() {
        // A thread of its own, so this test controls its first read.
        std::thread::spawn(|| {
            let a = sampled(1000, 100);
            // Burn 20 ms of CPU (not of wall time: on a busy machine this
            // thread may wait for a core meanwhile).
            let start = read().cpu_ns;
            while read().cpu_ns < start + 20_000_000 {}
            // Inside the gap: the same values, although CPU time was used.
            assert_eq!(sampled(1099, 100), a);
            // At the gap: a new read, which sees the CPU time burnt.
            let b = sampled(1100, 100);
            assert!(b.cpu_ns >= a.cpu_ns + 10_000_000, "{a:?} -> {b:?}");
            assert!(b.sched_wait_ns >= a.sched_wait_ns);
            // `read` is always fresh and never behind the sample (its CPU
            // clock includes the current slice, schedstat's may not).
            let c = read();
            assert!(c.cpu_ns >= b.cpu_ns && c.sched_wait_ns >= b.sched_wait_ns);
            // The sample's CPU time is schedstat's, within a slice of it.
            assert!(c.cpu_ns - b.cpu_ns < 1_000_000_000, "{b:?} vs {c:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn reads_the_wait_from_schedstat() {
        let t = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        let fresh: u64 = t.split_whitespace().nth(1).unwrap().parse().unwrap();
        let r = read();
        assert!(r.sched_wait_ns >= fresh, "{r:?} vs {fresh}");
        assert!(r.cpu_ns > 0);
    }
}
