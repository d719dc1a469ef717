//! tokio reports waker clones and drops through their own callsites, which
//! never give a WakeEvent: `wakes` disables each of them after its first
//! event, and must not disable the wake callsites with them; those it
//! learns to read for their task id alone. Its own process: the callsites' interest
//! is global.

mod common;

use common::{one_wake, record, two_workers, wakers_of};

/// Records `rounds` of [`one_wake`]: each waiter must be woken once, by
/// its sender.
fn record_wakes(rt: &tokio::runtime::Runtime, rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut pairs = Vec::new();
    let events = record(dir.path(), || {
        pairs = (0..rounds).map(|_| rt.block_on(one_wake())).collect();
    });
    for (i, (waiter, sender)) in pairs.iter().enumerate() {
        assert_eq!(
            wakers_of(&events, *waiter),
            vec![Some(*sender)],
            "round {i}"
        );
    }
}

#[test]
fn clone_and_drop_callsites_are_disabled_and_wakes_still_recorded() {
    let rt = two_workers();
    assert!(runtrace_tokio::wakes::installed());
    assert_eq!(runtrace_tokio::wakes::disabled_callsites(), 0);
    assert_eq!(runtrace_tokio::wakes::learned_wake_callsites(), 0);
    record_wakes(&rt, 3);
    // The receiver's waker clone and its drop: tokio's two non-wake
    // operations, each its own callsite.
    let learned = runtrace_tokio::wakes::disabled_callsites();
    assert_eq!(learned, 2, "tokio's waker.clone and waker.drop callsites");
    // The wake callsites seen are then read for their task id alone.
    let wakes = runtrace_tokio::wakes::learned_wake_callsites();
    assert!(wakes >= 1, "{wakes} wake callsites learned");
    // A later recording, with those callsites off and the wake ones
    // learned, still has every wake, each from its sender.
    record_wakes(&rt, 3);
    assert_eq!(runtrace_tokio::wakes::disabled_callsites(), learned);
    assert_eq!(runtrace_tokio::wakes::learned_wake_callsites(), wakes);
}
