//! tokio's waker events reach the trace when the recording starts after
//! the runtime ran: `wakes` caches the waker callsites' interest as
//! `never` while nothing records (in builds whose only backend is the
//! recorder), and a recording's start must rebuild it. Its own process:
//! the waker callsites must first register while no recording runs.
//! `.ci/run` also runs this file alone (`cargo test -p runtrace-tokio
//! --test wakes_cached`), a build without the outside backends, where the
//! cached path is the one taken.

mod common;

use common::{one_wake, record, two_workers, wakers_of};

#[test]
fn wakes_are_recorded_when_the_recording_starts_after_the_runtime() {
    let rt = two_workers();
    assert!(runtrace_tokio::wakes::installed());
    // Every waker callsite this workload uses registers now, unrecorded.
    rt.block_on(one_wake());
    let dir = tempfile::tempdir().unwrap();
    let mut pair = (0, 0);
    let events = record(dir.path(), || pair = rt.block_on(one_wake()));
    // After the end, waker events cost nothing again, and nothing breaks.
    rt.block_on(one_wake());
    drop(rt);
    let (waiter, sender) = pair;
    assert_eq!(
        wakers_of(&events, waiter),
        vec![Some(sender)],
        "the waiter's wake, by the sender (probes' outside backends compiled in: {})",
        runtrace_probes::EXTERNAL_BACKENDS
    );
}
