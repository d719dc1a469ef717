//! Tells code that caches "is anyone listening?" that the answer may have
//! changed: the recorder calls [`changed`] when a recording starts and when
//! it ends, and a subscriber registered with [`on_change`] re-reads the
//! probes' `enabled()`.
//!
//! Why: `runtrace_tokio::wakes` is a `tracing` subscriber, and `tracing`
//! caches each callsite's interest. Saying `never` while nothing records
//! makes tokio's waker events free (one cached load) instead of a call
//! into the subscriber per waker operation, ~110 instructions per request
//! on the HTTP server benchmark; the cache must then be rebuilt when a
//! recording starts. Not on any hot path: a lock and a few calls per
//! recording.
//!
//! ```
//! fn rebuild() { /* e.g. tracing::callsite::rebuild_interest_cache() */ }
//! runtrace_core::listeners::on_change(rebuild);
//! runtrace_core::listeners::changed(); // calls `rebuild`
//! ```

use std::sync::Mutex;

static CALLBACKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Calls `f` at every [`changed`] from now on (once per distinct `f`).
///
/// ```
/// runtrace_core::listeners::on_change(|| {});
/// ```
pub fn on_change(f: fn()) {
    let mut cbs = CALLBACKS.lock().unwrap_or_else(|e| e.into_inner());
    if !cbs.iter().any(|g| std::ptr::fn_addr_eq(*g, f)) {
        cbs.push(f);
    }
}

/// Says that a backend started or stopped listening: calls every
/// [`on_change`] callback, on the calling thread, with no lock held.
///
/// ```
/// runtrace_core::listeners::changed();
/// ```
pub fn changed() {
    let cbs = CALLBACKS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for f in cbs {
        f();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    fn count() {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn each_callback_runs_once_per_change() {
        on_change(count);
        on_change(count);
        let before = CALLS.load(Ordering::Relaxed);
        changed();
        assert_eq!(CALLS.load(Ordering::Relaxed), before + 1);
    }
}
