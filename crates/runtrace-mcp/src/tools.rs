//! The tools: their names, descriptions and argument schemas ([`list`]),
//! and [`call`], which runs one and answers with JSON or an error message.
//!
//! ```
//! let names: Vec<&str> = runtrace_mcp::tools::list().iter().map(|t| t.name).collect();
//! assert!(names.contains(&"query_trace_events"));
//! ```

use crate::args::Args;
use crate::traces::Traces;
use crate::views;
use runtrace_analyze::outliers::{Category, Method};
use runtrace_analyze::query::{self, Query};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A tool's name, description and JSON Schema of its arguments.
pub struct ToolDef {
    /// Name.
    pub name: &'static str,
    /// What it does, for the client's model.
    pub description: &'static str,
    /// JSON Schema of its arguments.
    pub schema: Value,
}

/// Lists of the `analyze_*` tools are cut to this many entries by default.
pub const DEFAULT_LIST_LIMIT: usize = 20;

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn trace_id() -> Value {
    json!({"type": "string", "description": "Id the trace was loaded under (load_trace)."})
}

fn limit(default: usize, what: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "description": format!("At most this many {what} (default {default}); the answer says when it cut.")})
}

/// Every tool.
pub fn list() -> Vec<ToolDef> {
    let with_limit = |what: &str| {
        obj(
            json!({"trace_id": trace_id(), "limit": limit(DEFAULT_LIST_LIMIT, what)}),
            &["trace_id"],
        )
    };
    let only_id = || obj(json!({"trace_id": trace_id()}), &["trace_id"]);
    vec![
        ToolDef {
            name: "load_trace",
            description: "Load a runtrace recording (its directory, a trace.N.bin file, or an array of files) under an id; several traces can be loaded at once. A damaged trace loads what is readable and says where it broke.",
            schema: obj(
                json!({
                    "file_path": {"description": "A recording's directory, a trace file, or an array of them.",
                        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                    "trace_id": {"type": "string", "description": "Id to load it under (replaces a trace of that id)."}
                }),
                &["file_path", "trace_id"],
            ),
        },
        ToolDef {
            name: "list_traces",
            description: "The loaded traces: id, files, events, damage.",
            schema: obj(json!({}), &[]),
        },
        ToolDef {
            name: "unload_trace",
            description: "Forget a loaded trace.",
            schema: only_id(),
        },
        ToolDef {
            name: "get_trace_summary",
            description: "Recordings, duration, event counts and capabilities (available_events; analyzers: which apply and why not), as `runtrace summary --json`.",
            schema: only_id(),
        },
        ToolDef {
            name: "run_all_analyzers",
            description: "Every applicable analysis in one answer: summary, analyze (workers, spawn locations, findings), backlog, outliers; skipped lists what does not apply and why.",
            schema: only_id(),
        },
        ToolDef {
            name: "analyze_wakeup_latency",
            description: "Wake->poll delays overall and by spawn location (worst p99 first), and wake_delay findings.",
            schema: with_limit("spawn locations and findings"),
        },
        ToolDef {
            name: "analyze_poll_times",
            description: "Poll durations overall and by spawn location (most poll time first), and long_poll / slow_poll findings.",
            schema: with_limit("spawn locations and findings"),
        },
        ToolDef {
            name: "analyze_workers",
            description: "Per worker: polls, busy ratio, parks, local queue depth, scheduler wait; queues; worker findings.",
            schema: with_limit("workers and findings"),
        },
        ToolDef {
            name: "analyze_spawn_locations",
            description: "Per spawn location: tasks, polls, poll time, poll and wake->poll percentiles, long polls.",
            schema: with_limit("spawn locations"),
        },
        ToolDef {
            name: "analyze_backlog",
            description: "Queues, locks, I/O, heartbeats and the ranked root causes of every backlog trigger (needs runtrace-sync events).",
            schema: with_limit("entries per list"),
        },
        ToolDef {
            name: "analyze_blocked",
            description: "What ran while tasks waited: every wait from wake (or spawn) to poll longer than threshold_ms, the CPU samples of the worker that finally polled the task during it, blamed on the spawn locations whose polls held that worker, with their top functions (self and inclusive) and their victims (needs CPU samples: a recording made with RUNTRACE_CPU_HZ).",
            schema: obj(
                json!({
                    "trace_id": trace_id(),
                    "threshold_ms": {"type": "integer", "minimum": 1, "description": "A wait longer than this many milliseconds counts (default 10)."},
                    "limit": limit(DEFAULT_LIST_LIMIT, "culprits and worst waits"),
                }),
                &["trace_id"],
            ),
        },
        ToolDef {
            name: "find_scheduling_bottlenecks",
            description: "The findings: long polls, wake delays, local queue buildup, worker imbalance, idle workers while work is queued, CPU-bound spawn locations; each names the spawn locations and evidence.",
            schema: with_limit("findings"),
        },
        ToolDef {
            name: "detect_outliers",
            description: "Statistical outliers of wake->poll delay (latency), poll duration (poll) and CPU share (cpu), judged within each spawn location and each task: task, location, worker, window, value, threshold.",
            schema: obj(
                json!({
                    "trace_id": trace_id(),
                    "method": {"type": "string", "enum": ["IQR", "MAD", "StdDev", "Percentile"], "description": "IQR (default): beyond Q1-1.5 IQR / Q3+1.5 IQR; MAD: modified z-score > 3.5; StdDev: beyond 3 sigma; Percentile: above p99."},
                    "category": {"type": "string", "enum": ["latency", "poll", "cpu", "all"], "description": "Which values (default all)."},
                    "limit": limit(100, "outliers per category"),
                }),
                &["trace_id"],
            ),
        },
        ToolDef {
            name: "query_trace_events",
            description: "Events matching every filter given, in trace order; ts_ns is ns since the recording started.",
            schema: obj(
                json!({
                    "trace_id": trace_id(),
                    "event_type": {"type": "string", "description": "A catalog event name: task_spawn, task_poll_start, task_poll_end, task_wake, task_terminate, worker_park, worker_unpark, queue_sample, worker_start, worker_stop, lock_wait, lock_hold, enqueue, dequeue, processing_end, item_dropped, queue_snapshot, backlog_trigger, io, thread_heartbeat."},
                    "task_id": {"type": "integer", "minimum": 0},
                    "spawn_loc": {"type": "string", "description": "Text in the spawn location (file:line:col) of the event's task, or its id."},
                    "worker": {"type": "integer", "minimum": 0},
                    "start_ns": {"type": "integer", "description": "From this time (ns since the recording started)."},
                    "end_ns": {"type": "integer", "description": "Up to this time."},
                    "limit": limit(query::DEFAULT_LIMIT, "events"),
                }),
                &["trace_id"],
            ),
        },
        ToolDef {
            name: "get_task_timeline",
            description: "One task's life: spawn, every wake, poll start and end, terminate, in order.",
            schema: obj(
                json!({"trace_id": trace_id(), "task_id": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 0, "description": "At most this many events (default all)."}}),
                &["trace_id", "task_id"],
            ),
        },
    ]
}

/// Runs tool `name` with `arguments`: its JSON answer, or an error message
/// for the client (unknown tool, bad argument, unknown trace, unreadable
/// path, ...).
pub fn call(traces: &Traces, name: &str, arguments: &Value) -> Result<Value, String> {
    let a = Args::new(arguments)?;
    let loaded = || traces.get(a.str("trace_id")?);
    match name {
        "load_trace" => {
            let paths: Vec<PathBuf> = a
                .strs("file_path")?
                .into_iter()
                .map(PathBuf::from)
                .collect();
            traces.load(a.str("trace_id")?, &paths)
        }
        "list_traces" => Ok(traces.list()),
        "unload_trace" => traces.unload(a.str("trace_id")?),
        "get_trace_summary" => Ok(loaded()?.index.summary()),
        "run_all_analyzers" => Ok(loaded()?.index.run_all()),
        "analyze_wakeup_latency" => Ok(views::wakeup_latency(
            &loaded()?.index,
            a.limit(DEFAULT_LIST_LIMIT)?,
        )),
        "analyze_poll_times" => Ok(views::poll_times(
            &loaded()?.index,
            a.limit(DEFAULT_LIST_LIMIT)?,
        )),
        "analyze_workers" => Ok(views::workers(
            &loaded()?.index,
            a.limit(DEFAULT_LIST_LIMIT)?,
        )),
        "analyze_spawn_locations" => Ok(views::spawn_locations(
            &loaded()?.index,
            a.limit(DEFAULT_LIST_LIMIT)?,
        )),
        "analyze_backlog" => Ok(views::backlog(
            &loaded()?.index,
            a.limit(DEFAULT_LIST_LIMIT)?,
        )),
        "analyze_blocked" => {
            let t = loaded()?;
            let ms = a.opt_u64("threshold_ms")?.unwrap_or(10);
            if ms == 0 || ms > u64::MAX / 1_000_000 {
                return Err(format!(
                    "argument `threshold_ms` must be a whole number of milliseconds from 1, got {ms}"
                ));
            }
            Ok(views::blocked(
                &t.index,
                ms * 1_000_000,
                a.limit(DEFAULT_LIST_LIMIT)?,
            ))
        }
        "find_scheduling_bottlenecks" => Ok(views::bottlenecks(
            &loaded()?.index,
            a.limit(DEFAULT_LIST_LIMIT)?,
        )),
        "detect_outliers" => {
            let t = loaded()?;
            let method = Method::parse(a.opt_str("method")?.unwrap_or("iqr"))?;
            let category = Category::parse(a.opt_str("category")?.unwrap_or("all"))?;
            Ok(t.index.outliers(method, category, a.limit(100)?))
        }
        "query_trace_events" => {
            let t = loaded()?;
            let q = Query {
                event_type: a.opt_str("event_type")?.map(str::to_string),
                task_id: a.opt_u64("task_id")?,
                spawn_loc: a.opt_text("spawn_loc")?,
                worker: a
                    .opt_u64("worker")?
                    .map(|w| {
                        u32::try_from(w).map_err(|_| format!("argument `worker` is too large: {w}"))
                    })
                    .transpose()?,
                start_ns: a.opt_i64("start_ns")?,
                end_ns: a.opt_i64("end_ns")?,
                limit: a.limit(query::DEFAULT_LIMIT)?,
            };
            query::query(&t.index, &q)
        }
        "get_task_timeline" => {
            let t = loaded()?;
            let limit = a
                .opt_u64("limit")?
                .map(|n| n.min(usize::MAX as u64) as usize);
            query::timeline(&t.index, a.u64("task_id")?, limit)
        }
        other => {
            let names: Vec<&str> = list().iter().map(|t| t.name).collect();
            Err(format!(
                "unknown tool {other:?}: the tools are {}",
                names.join(", ")
            ))
        }
    }
}
