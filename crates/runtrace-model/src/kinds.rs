//! The catalog names of the event kinds of [`crate::event::Ev`]
//! (`task_spawn`, `lock_wait`, ...), as `runtrace summary` lists them and
//! `query_trace_events` filters by them.
//!
//! ```
//! use runtrace_model::event::kind;
//! use runtrace_model::kinds;
//! assert_eq!(kinds::name(kind::POLL_START), Some("task_poll_start"));
//! assert_eq!(kinds::by_name("task_wake"), Some(kind::WAKE));
//! assert_eq!(kinds::name(kind::CPU_SAMPLE), Some("cpu_sample"));
//! assert_eq!(kinds::by_name("no_such_event"), None);
//! ```

use crate::event::kind;

/// Every kind with its catalog name, in catalog order.
pub const ALL: [(u8, &str); 20] = [
    (kind::SPAWN, "task_spawn"),
    (kind::POLL_START, "task_poll_start"),
    (kind::POLL_END, "task_poll_end"),
    (kind::WAKE, "task_wake"),
    (kind::TERMINATE, "task_terminate"),
    (kind::PARK, "worker_park"),
    (kind::UNPARK, "worker_unpark"),
    (kind::QUEUE_SAMPLE, "queue_sample"),
    (kind::WORKER_START, "worker_start"),
    (kind::WORKER_STOP, "worker_stop"),
    (kind::LOCK_WAIT, "lock_wait"),
    (kind::LOCK_HOLD, "lock_hold"),
    (kind::ENQUEUE, "enqueue"),
    (kind::DEQUEUE, "dequeue"),
    (kind::PROCESSING_END, "processing_end"),
    (kind::ITEM_DROPPED, "item_dropped"),
    (kind::QUEUE_SNAPSHOT, "queue_snapshot"),
    (kind::BACKLOG_TRIGGER, "backlog_trigger"),
    (kind::IO, "io"),
    (kind::HEARTBEAT, "thread_heartbeat"),
];

/// The CPU profile's kinds with their catalog names: counted by
/// `runtrace summary`, read by the CPU profile pass (`runtrace_model::profile`), not kept as events
/// (`query_trace_events` does not return them).
pub const PROFILE: [(u8, &str); 2] = [(kind::CPU_SAMPLE, "cpu_sample"), (kind::OFF_CPU, "off_cpu")];

/// The catalog name of kind `k` (the CPU profile's included).
pub fn name(k: u8) -> Option<&'static str> {
    ALL.iter()
        .chain(&PROFILE)
        .find(|(id, _)| *id == k)
        .map(|(_, n)| *n)
}

/// The kind named `name`, among those kept as events ([`ALL`]).
pub fn by_name(name: &str) -> Option<u8> {
    ALL.iter().find(|(_, n)| *n == name).map(|(id, _)| *id)
}

/// Whether events of kind `k` name a task in `Ev::x`.
pub fn has_task(k: u8) -> bool {
    matches!(
        k,
        kind::SPAWN | kind::POLL_START | kind::POLL_END | kind::WAKE | kind::TERMINATE
    )
}

/// Whether events of kind `k` carry a worker index in `Ev::worker`.
pub fn has_worker(k: u8) -> bool {
    matches!(
        k,
        kind::POLL_START
            | kind::POLL_END
            | kind::WAKE
            | kind::PARK
            | kind::UNPARK
            | kind::WORKER_START
            | kind::WORKER_STOP
    )
}
