//! Thread heartbeats: a stalled thread shows up as a long `gap_ns`.

use crate::{clock, names};
use runtrace_core::Istr;
use runtrace_probes::builtin::thread_heartbeat;
use std::cell::RefCell;

thread_local! {
    /// The calling thread's last beat per role (trace ticks).
    static LAST: RefCell<Vec<(Istr, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Records `thread_heartbeat` (role, gap since this thread's previous beat
/// for the same role) when a backend listens. Call it from a thread's main
/// loop; `runtrace backlog` reports the longest gaps per thread and role.
///
/// The gap is measured between beats seen while a backend listened (the
/// clock is not read otherwise); the first such beat has `gap_ns` 0.
///
/// ```
/// for _ in 0..3 {
///     runtrace_sync::heartbeat("consumer");
/// }
/// ```
#[inline]
pub fn heartbeat(role: &str) {
    if thread_heartbeat::enabled() {
        beat(role);
    }
}

#[cold]
#[inline(never)]
fn beat(role: &str) {
    let t = clock::now();
    let role = names::intern(role);
    let gap_ns = LAST
        .try_with(|l| {
            let mut l = l.borrow_mut();
            match l.iter_mut().find(|(r, _)| *r == role) {
                Some((_, last)) => clock::ns_between(std::mem::replace(last, t), t),
                None => {
                    l.push((role, t));
                    0
                }
            }
        })
        .unwrap_or(0);
    thread_heartbeat::fire_at(t, thread_heartbeat::Args { role, gap_ns });
}
