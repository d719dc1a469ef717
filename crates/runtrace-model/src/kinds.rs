//! The names of the event kinds of [`crate::event::Ev`], and the lists of
//! kinds, all derived from the catalog (`probes/events.toml`, generated
//! into [`runtrace_format::schema::BUILTIN_EVENTS`]): which kinds are kept
//! as events and named by `runtrace summary` and `query_trace_events`,
//! which belong to a group, which carry a task or a worker. None of it is
//! a list kept by hand, so an event added to the catalog is in all of them.
//!
//! Every event has two public names: its catalog name (`task_poll_start`)
//! and its JSON name (`PollStart`, printed by `runtrace jsonl` and
//! `runtrace check`); [`by_name`] takes either.
//!
//! ```
//! use runtrace_model::event::kind;
//! use runtrace_model::kinds;
//! use runtrace_format::schema::Group;
//! assert_eq!(kinds::name(kind::POLL_START), Some("task_poll_start"));
//! assert_eq!(kinds::by_name("task_wake"), Some(kind::WAKE));
//! assert_eq!(kinds::by_name("WakeEvent"), Some(kind::WAKE));
//! assert_eq!(kinds::name(kind::CPU_SAMPLE), Some("cpu_sample"));
//! assert_eq!(kinds::by_name("no_such_event"), None);
//! assert!(kinds::names_in_group(Group::App).any(|n| n == "lock_wait"));
//! ```

use runtrace_format::schema::{id_facts, BuiltinEvent, Group, BUILTIN_EVENTS};

/// The groups whose events the reader keeps as [`crate::event::Ev`]s for
/// the passes to query (`runtrace summary`'s `available_events`,
/// `query_trace_events`): runtime and application events. Profile samples
/// are counted but go to the CPU profile pass; executor events have no
/// pass yet.
pub const fn is_kept(g: Group) -> bool {
    matches!(g, Group::Runtime | Group::App | Group::Span)
}

const fn count_kept() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < BUILTIN_EVENTS.len() {
        if is_kept(BUILTIN_EVENTS[i].group) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn count_group(g: Group) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < BUILTIN_EVENTS.len() {
        // `Group` has no const `==`; the discriminants compare.
        if BUILTIN_EVENTS[i].group as u8 == g as u8 {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Every kind kept as an event ([`is_kept`]) with its catalog name, in id
/// order: what `query_trace_events` accepts (also by JSON name, see
/// [`by_name`]) and `runtrace summary` counts as `available_events`.
pub const ALL: [(u8, &str); count_kept()] = {
    let mut out = [(0u8, ""); count_kept()];
    let (mut i, mut j) = (0, 0);
    while i < BUILTIN_EVENTS.len() {
        let e = &BUILTIN_EVENTS[i];
        if is_kept(e.group) {
            // Built-in ids are at most 127 (the catalog's rule).
            out[j] = (e.id as u8, e.name);
            j += 1;
        }
        i += 1;
    }
    out
};

/// The CPU profile's kinds (group `profile`) with their catalog names:
/// counted by `runtrace summary`, read by the CPU profile pass
/// (`runtrace_model::profile`), not kept as events (`query_trace_events`
/// does not return them).
pub const PROFILE: [(u8, &str); count_group(Group::Profile)] = {
    let mut out = [(0u8, ""); count_group(Group::Profile)];
    let (mut i, mut j) = (0, 0);
    while i < BUILTIN_EVENTS.len() {
        let e = &BUILTIN_EVENTS[i];
        if e.group as u8 == Group::Profile as u8 {
            out[j] = (e.id as u8, e.name);
            j += 1;
        }
        i += 1;
    }
    out
};

/// The built-in event of kind `k`.
fn event(k: u8) -> Option<&'static BuiltinEvent> {
    BUILTIN_EVENTS.iter().find(|e| e.id == k as u32)
}

/// The catalog name of kind `k` (any built-in event).
pub fn name(k: u8) -> Option<&'static str> {
    event(k).map(|e| e.name)
}

/// The JSON name of kind `k` (`PollStart`: what `runtrace jsonl` and
/// `runtrace check` print).
///
/// ```
/// use runtrace_model::{event::kind, kinds};
/// assert_eq!(kinds::json_name(kind::WAKE), Some("WakeEvent"));
/// ```
pub fn json_name(k: u8) -> Option<&'static str> {
    event(k).map(|e| e.json_name)
}

/// The kind named `name`, by catalog name (`task_poll_start`) or JSON name
/// (`PollStart`), among those kept as events ([`ALL`]).
pub fn by_name(name: &str) -> Option<u8> {
    BUILTIN_EVENTS
        .iter()
        .find(|e| is_kept(e.group) && (e.name == name || e.json_name == name))
        .map(|e| e.id as u8)
}

/// The kinds of group `g`, in id order.
///
/// ```
/// use runtrace_model::{event::kind, kinds};
/// use runtrace_format::schema::Group;
/// let profile: Vec<u8> = kinds::in_group(Group::Profile).collect();
/// assert_eq!(profile, [kind::CPU_SAMPLE, kind::OFF_CPU, kind::ALLOC_SAMPLE, kind::ALLOC_FREE, kind::ALLOC_NOTE]);
/// ```
pub fn in_group(g: Group) -> impl Iterator<Item = u8> {
    BUILTIN_EVENTS
        .iter()
        .filter(move |e| e.group == g)
        .map(|e| e.id as u8)
}

/// The catalog names of the kinds of group `g`, in id order (e.g. the
/// application events a tool lists).
pub fn names_in_group(g: Group) -> impl Iterator<Item = &'static str> {
    BUILTIN_EVENTS
        .iter()
        .filter(move |e| e.group == g)
        .map(|e| e.name)
}

/// Whether events of kind `k` name a task in `Ev::x`: those with a field
/// of type `task` (the decoder puts it there).
#[inline]
pub fn has_task(k: u8) -> bool {
    id_facts(k as u32).task
}

/// Whether events of kind `k` carry a worker index in `Ev::worker`: those
/// with a field of type `worker`.
#[inline]
pub fn has_worker(k: u8) -> bool {
    id_facts(k as u32).worker
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::kind;

    /// The lists derived from the catalog say what the lists written by
    /// hand before them said (the golden outputs rely on it).
    #[test]
    fn derived_lists_match_the_catalog_of_today() {
        let all: Vec<u8> = ALL.iter().map(|(k, _)| *k).collect();
        let want: Vec<u8> = (kind::SPAWN..=kind::WORKER_STOP)
            .chain(kind::LOCK_WAIT..=kind::HEARTBEAT)
            .chain(kind::SPAN_NEW..=kind::SPAN_CLOSE)
            .chain([kind::RUNTIME_NAME])
            .chain(kind::RESOURCE_NEW..=kind::RESOURCE_RELEASE)
            .chain([kind::TASK_DUMP_START, kind::TASK_DUMP])
            .collect();
        assert_eq!(all, want);
        assert_eq!(
            PROFILE,
            [
                (kind::CPU_SAMPLE, "cpu_sample"),
                (kind::OFF_CPU, "off_cpu"),
                (kind::ALLOC_SAMPLE, "alloc_sample"),
                (kind::ALLOC_FREE, "alloc_free"),
                (kind::ALLOC_NOTE, "alloc_note")
            ]
        );
        let tasks: Vec<u8> = (0..=255).filter(|&k| has_task(k)).collect();
        assert_eq!(
            tasks,
            [
                kind::SPAWN,
                kind::POLL_START,
                kind::POLL_END,
                kind::WAKE,
                kind::TERMINATE,
                kind::RESOURCE_POLL,
                kind::RESOURCE_RELEASE,
                kind::TASK_DUMP
            ]
        );
        // queue_select (executor group) has a worker too; it is not kept.
        let workers: Vec<u8> = (0..=255)
            .filter(|&k| has_worker(k) && by_name(name(k).unwrap()).is_some())
            .collect();
        assert_eq!(
            workers,
            [
                kind::POLL_START,
                kind::POLL_END,
                kind::WAKE,
                kind::PARK,
                kind::UNPARK,
                kind::WORKER_START,
                kind::WORKER_STOP
            ]
        );
        for (k, n) in ALL {
            assert_eq!(by_name(n), Some(k));
            assert_eq!(by_name(json_name(k).unwrap()), Some(k));
        }
        assert_eq!(by_name("cpu_sample"), None, "profile samples are not kept");
        assert_eq!(by_name("queue_select"), None);
    }
}
