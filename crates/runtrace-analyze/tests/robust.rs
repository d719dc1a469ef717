//! Issue 17: hostile and unlucky inputs the analyses must take in stride
//! (debug builds: an overflow panics), and a task's identity kept until
//! its last event.

use runtrace_analyze::{analyze_bytes, Options};
use runtrace_model::synth::TraceBuilder;

/// tokio at runtime shutdown: TaskTerminate, then one more poll of the
/// task on another worker. That poll is still the task spawned at its
/// location: no `<unknown>` location, no task alive at the end.
#[test]
fn a_poll_after_terminate_keeps_the_task_identity() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 3, 9);
    b.spawn(10, 1_000, 7, 0, 1, 0);
    b.poll_start(10, 0, 2_000, 7, 0, 0);
    b.poll_end(10, 0, 3_000, 7, false);
    b.terminate(10, 4_000, 7);
    b.poll_start(11, 1, 5_000, 7, 0, 0);
    b.poll_end(11, 1, 6_000, 7, true);
    let r = analyze_bytes(&b.finish(), Options::default());
    let j = r.to_json();
    assert_eq!(j["processes"][0]["live_tasks"], 0, "{j}");
    let text = format!("{j}{r}");
    assert!(!text.contains("<unknown>"), "{text}");
}

/// Idle-while-queued bookkeeping on a worker's state changes that a
/// crafted file can order at will (poll with a queue, park, poll with an
/// empty queue while parked): no underflow.
#[test]
fn crafted_park_and_poll_orders_do_not_underflow() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 3, 9);
    b.spawn(10, 1_000, 7, 0, 1, 0);
    b.poll_start(10, 0, 2_000, 7, 0, 9);
    b.park(10, 0, 2_500, 9, 0);
    b.poll_start(10, 0, 3_000, 7, 0, 0);
    b.poll_end(10, 0, 3_500, 7, false);
    b.unpark(10, 0, 4_000, 0, 0);
    b.park(10, 0, 4_500, 0, 0);
    b.unpark(10, 0, 5_000, 0, 0);
    b.queue_sample(10, 5_500, 3, 0, 0);
    b.poll_start(10, 0, 6_000, 7, 0, 12);
    b.park(10, 0, 6_500, 12, 0);
    b.poll_end(10, 0, 7_000, 7, true);
    let r = analyze_bytes(&b.finish(), Options::default());
    assert!(!r.is_damaged(), "{r}");
}
