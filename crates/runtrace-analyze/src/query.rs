//! Questions to a loaded trace ([`TraceIndex`]): events by type, task,
//! spawn location, worker and time window ([`query`]), and one task's
//! life ([`timeline`]), as JSON.
//!
//! ```
//! use runtrace_analyze::index::TraceIndex;
//! use runtrace_analyze::query::{query, timeline, Query};
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 3, 5);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! b.terminate(7, 6_000, 1);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let ix = TraceIndex::load(&[path]);
//! let q = Query { event_type: Some("task_poll_end".into()), ..Query::default() };
//! let r = query(&ix, &q).unwrap();
//! assert_eq!(r["events"][0]["ready"], true);
//! assert_eq!(r["events"][0]["spawn_loc"], "src/main.rs:3:5");
//! assert_eq!(timeline(&ix, 1, None).unwrap()["events"].as_array().unwrap().len(), 4);
//! ```

use crate::index::TraceIndex;
use runtrace_format::NO_WORKER;
use runtrace_model::event::{kind, Ev};
use runtrace_model::kinds;
use serde_json::{json, Map, Value};

/// `limit` when none is given.
pub const DEFAULT_LIMIT: usize = 100;

/// What to look for; every filter given must match.
#[derive(Debug, Clone)]
pub struct Query {
    /// A catalog event name (`task_poll_start`, `lock_wait`, ...).
    pub event_type: Option<String>,
    /// Events of this task (spawn, wake, poll start/end, terminate).
    pub task_id: Option<u64>,
    /// Task events of tasks spawned at a location whose `file:line:col`
    /// contains this text, or whose trace id is this number.
    pub spawn_loc: Option<String>,
    /// Events of this worker index.
    pub worker: Option<u32>,
    /// Events at or after this time (ns since the recording started).
    pub start_ns: Option<i64>,
    /// Events at or before this time.
    pub end_ns: Option<i64>,
    /// At most this many events in the answer.
    pub limit: usize,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            event_type: None,
            task_id: None,
            spawn_loc: None,
            worker: None,
            start_ns: None,
            end_ns: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// One event as JSON: `event` (its catalog name), `ts_ns` (since the
/// recording started), `pid`, `tid`, and its fields.
pub fn event_json(ix: &TraceIndex, ev: &Ev) -> Value {
    let m = &ix.model;
    let proc = ix.proc_of(ev);
    let p = &m.procs[proc as usize];
    let mut o = Map::new();
    o.insert("event".into(), json!(kinds::name(ev.kind)));
    o.insert("ts_ns".into(), json!(p.ns(ev.ticks)));
    o.insert("pid".into(), json!(p.pid));
    o.insert("tid".into(), json!(m.threads[ev.thread as usize].tid));
    let mut put = |k: &str, v: Value| {
        o.insert(k.into(), v);
    };
    if kinds::has_task(ev.kind) {
        put("task_id", json!(ev.x));
        let loc = &m.locs[ix.task_loc(proc, ev.x) as usize];
        put("spawn_loc", json!(&*loc.text));
    }
    if kinds::has_worker(ev.kind) {
        put(
            "worker",
            json!((ev.worker != NO_WORKER).then_some(ev.worker)),
        );
    }
    let name = || json!(m.name(ev.worker));
    match ev.kind {
        kind::POLL_START | kind::PARK => put("local_q", json!(ev.a)),
        kind::POLL_END => put("ready", json!(ev.flag != 0)),
        kind::UNPARK => put("sched_wait_ns", json!(ev.x)),
        kind::QUEUE_SAMPLE => {
            put("depth", json!(ev.x));
            put("global_q", json!(ev.a));
            put("queue", json!(m.queues.get(ev.worker as usize)));
        }
        kind::WORKER_START | kind::WORKER_STOP => put("runtime", json!(ev.a)),
        kind::LOCK_WAIT | kind::LOCK_HOLD => {
            put("name", name());
            let key = if ev.kind == kind::LOCK_WAIT {
                "wait_ns"
            } else {
                "hold_ns"
            };
            put(key, json!(ev.x));
            put("write", json!(ev.flag != 0));
        }
        kind::ENQUEUE => {
            put("name", name());
            put("seqno", json!(ev.x));
            put("queue_size", json!(ev.a));
        }
        kind::DEQUEUE => {
            put("name", name());
            put("queue_delay_ns", json!(ev.x));
            put("queue_size", json!(ev.a));
        }
        kind::PROCESSING_END => {
            put("name", name());
            put("processing_ns", json!(ev.x));
            put("success", json!(ev.flag != 0));
        }
        kind::ITEM_DROPPED => {
            put("name", name());
            put("cause", json!(m.name(ev.x as u32)));
            put("queue_size", json!(ev.a));
        }
        kind::QUEUE_SNAPSHOT => {
            put("name", name());
            put("produced_total", json!(ev.x));
            put("queue_size", json!(ev.a));
        }
        kind::BACKLOG_TRIGGER => {
            put("name", name());
            put("queue_size", json!(ev.a));
        }
        kind::IO => {
            put("name", name());
            put("io_ns", json!(ev.x));
            let bytes = if ev.flag == 1 {
                m.side.get(ev.a as usize).copied().unwrap_or(0)
            } else {
                ev.a as u64
            };
            put("bytes", json!(bytes));
        }
        kind::HEARTBEAT => {
            put("name", name());
            put("gap_ns", json!(ev.x));
        }
        _ => {}
    }
    Value::Object(o)
}

/// The events matching `q`, in trace order: `{matched, returned,
/// truncated, limit, events}` (`truncated` when more matched than
/// `limit`). An unknown `event_type` is an error naming the valid ones.
pub fn query(ix: &TraceIndex, q: &Query) -> Result<Value, String> {
    let kind = match &q.event_type {
        None => None,
        Some(t) => Some(kinds::by_name(t).ok_or_else(|| {
            let all: Vec<&str> = kinds::ALL.iter().map(|(_, n)| *n).collect();
            format!(
                "unknown event_type {t:?}: expected one of {}",
                all.join(", ")
            )
        })?),
    };
    // Locations matching `spawn_loc`, by index.
    let locs: Option<Vec<bool>> = q.spawn_loc.as_ref().map(|s| {
        let id: Option<u64> = s.parse().ok();
        ix.model
            .locs
            .iter()
            .map(|l| l.text.contains(s.as_str()) || Some(l.trace_id) == id && l.trace_id != 0)
            .collect()
    });
    // The time window in each recording's ticks (one compare per event).
    let windows: Vec<(u64, u64)> = ix
        .model
        .procs
        .iter()
        .map(|p| {
            let to_ticks = |ns: i64| -> u64 {
                let t = p.anchor_ticks as i128
                    + ns as i128 * p.ticks_per_sec.max(1) as i128 / 1_000_000_000;
                t.clamp(0, u64::MAX as i128) as u64
            };
            (
                q.start_ns.map_or(0, |s| to_ticks(s).saturating_sub(1)),
                q.end_ns.map_or(u64::MAX, |e| to_ticks(e).saturating_add(1)),
            )
        })
        .collect();
    let mut matched = 0u64;
    let mut events = Vec::new();
    for ev in &ix.events {
        if kind.is_some_and(|k| ev.kind != k)
            || q.task_id
                .is_some_and(|t| !kinds::has_task(ev.kind) || ev.x != t)
            || q.worker
                .is_some_and(|w| !kinds::has_worker(ev.kind) || ev.worker != w)
        {
            continue;
        }
        let proc = ix.proc_of(ev);
        let (lo, hi) = windows[proc as usize];
        if ev.ticks < lo || ev.ticks > hi {
            continue;
        }
        if q.start_ns.is_some() || q.end_ns.is_some() {
            // Exact check at the edges (the tick window is one tick wide).
            let ns = ix.model.procs[proc as usize].ns(ev.ticks);
            if q.start_ns.is_some_and(|s| ns < s) || q.end_ns.is_some_and(|e| ns > e) {
                continue;
            }
        }
        if let Some(locs) = &locs {
            if !kinds::has_task(ev.kind) || !locs[ix.task_loc(proc, ev.x) as usize] {
                continue;
            }
        }
        matched += 1;
        if events.len() < q.limit {
            events.push(event_json(ix, ev));
        }
    }
    Ok(json!({
        "matched": matched,
        "returned": events.len(),
        "truncated": matched > events.len() as u64,
        "limit": q.limit,
        "events": events,
    }))
}

/// Task `task`'s life: its spawn, every wake, poll start and end, and its
/// termination, in trace order (at most `limit` events when given). An
/// error when the trace has no event of that task.
pub fn timeline(ix: &TraceIndex, task: u64, limit: Option<usize>) -> Result<Value, String> {
    let q = Query {
        task_id: Some(task),
        limit: limit.unwrap_or(usize::MAX),
        ..Query::default()
    };
    let mut r = query(ix, &q)?;
    if r["matched"] == 0 {
        return Err(format!("task {task}: no event of this task in the trace"));
    }
    let events = r["events"].take();
    let first = &events[0];
    Ok(json!({
        "task_id": task,
        "pid": first["pid"],
        "spawn_loc": first["spawn_loc"],
        "spawned": events.as_array().is_some_and(|e| e.iter().any(|e| e["event"] == "task_spawn")),
        "terminated": events.as_array().is_some_and(|e| e.iter().any(|e| e["event"] == "task_terminate")),
        "matched": r["matched"],
        "truncated": r["truncated"],
        "events": events,
    }))
}
