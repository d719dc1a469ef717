//! CPU accounting from /proc: on this shared 2-core machine a run during
//! which another process (or the hypervisor, as steal) took CPU, or the
//! measuring thread waited for one, is suspect, and the benches say so.

use std::time::Instant;

/// System-wide and own CPU ticks at one instant ([`cpu_snap`]).
#[derive(Clone, Copy)]
pub struct CpuSnap {
    at: Instant,
    /// System-wide busy ticks (user, nice, system, irq, softirq).
    busy: u64,
    /// System-wide steal ticks (the hypervisor ran someone else).
    steal: u64,
    /// This process's ticks (utime + stime).
    ours: u64,
}

/// Reads /proc/stat and /proc/self/stat now.
///
/// ```ignore
/// let a = cpu_snap();
/// // ... the measured run ...
/// println!("others used {:.2} cores", other_cores(a, cpu_snap()));
/// ```
pub fn cpu_snap() -> CpuSnap {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let get = |i: usize| f.get(i).copied().unwrap_or(0);
    let me = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest: Vec<u64> = me
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or("")
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let ours = rest.get(11).copied().unwrap_or(0) + rest.get(12).copied().unwrap_or(0);
    CpuSnap {
        at: Instant::now(),
        busy: get(0) + get(1) + get(2) + get(5) + get(6),
        steal: get(7),
        ours,
    }
}

/// Cores other processes used, plus steal, between two snapshots.
pub fn other_cores(a: CpuSnap, b: CpuSnap) -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
    let busy = (b.busy - a.busy) as f64 / hz / secs;
    let ours = (b.ours - a.ours) as f64 / hz / secs;
    let steal = (b.steal - a.steal) as f64 / hz / secs;
    (busy - ours).max(0.0) + steal
}

/// This thread's time spent runnable but not running, so far (ns, from
/// /proc/thread-self/schedstat; 0 when unavailable).
pub fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}
