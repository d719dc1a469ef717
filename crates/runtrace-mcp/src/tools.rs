//! The tools: their names, descriptions and argument schemas ([`list`]),
//! and [`call`], which runs one and answers with JSON or an error message.
//! The server's own tools (loading traces, the summary, every analysis at
//! once, event queries, task timelines) are here; each analysis's tool
//! comes from the registry of analyses (`runtrace_analyze::registry`).
//!
//! ```
//! let names: Vec<&str> = runtrace_mcp::tools::list().iter().map(|t| t.name).collect();
//! assert!(names.contains(&"query_trace_events"));
//! ```

use crate::args::{Args, MAX_LIMIT};
use crate::traces::Traces;
use runtrace_analyze::outliers::{Category, Method};
use runtrace_analyze::query::{self, Query};
use runtrace_analyze::registry::{self, Param, Params, ANALYSES};
use runtrace_model::kinds;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// The largest answer sent (64 MiB); a larger one is a tool error asking
/// for less. With every `limit` at most [`MAX_LIMIT`], only pathological
/// traces (hundreds of thousands of spawn locations) come near it.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// The longest window `get_window` computes (an hour), as `runtrace top`.
pub const MAX_WINDOW_S: f64 = 3_600.0;

/// A tool's name, description and JSON Schema of its arguments.
pub struct ToolDef {
    /// Name.
    pub name: &'static str,
    /// What it does, for the client's model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub schema: Value,
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn trace_id() -> Value {
    json!({"type": "string", "description": "Id the trace was loaded under (load_trace)."})
}

fn limit(default: usize, what: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "description": format!("At most this many {what} (default {default}, at most {MAX_LIMIT}); the answer says when it cut.")})
}

/// The JSON Schema of one registry parameter, under its argument name.
fn param_schema(p: &Param) -> (&'static str, Value) {
    match p {
        Param::Limit(n, what) => ("limit", limit(*n, what)),
        Param::ThresholdMs => (
            "threshold_ms",
            json!({"type": "integer", "minimum": 1, "description": "A wait longer than this many milliseconds counts (default 10)."}),
        ),
        Param::Method => (
            "method",
            json!({"type": "string", "enum": ["IQR", "MAD", "StdDev", "Percentile"], "description": "IQR (default): beyond Q1-1.5 IQR / Q3+1.5 IQR; MAD: modified z-score > 3.5; StdDev: beyond 3 sigma; Percentile: above p99."}),
        ),
        Param::Category => (
            "category",
            json!({"type": "string", "enum": ["latency", "poll", "cpu", "all"], "description": "Which values (default all)."}),
        ),
        Param::ProfileKind => (
            "kind",
            json!({"type": "string", "enum": ["cpu", "off_cpu", "alloc", "live"], "description": "cpu (default): on-CPU samples; off_cpu: where threads blocked, weighted by microseconds off-CPU; alloc: bytes allocated (sampled allocations, by the bytes each stands for); live: bytes still live at `to` (default the end; needs a recording with the live set)."}),
        ),
        Param::Location => (
            "location",
            json!({"type": "string", "description": "Only samples taken in polls of tasks whose spawn location contains this text (e.g. \"src/api.rs\")."}),
        ),
        Param::Resource => (
            "resource",
            json!({"type": "string", "description": "Only resource sites whose kind (Mutex, Semaphore, oneshot, ...) or creation site (file:line:col) contains this text."}),
        ),
        Param::TimeRange => (
            "from",
            json!({"type": "integer", "description": "Only samples from this time on, in ns since the recording started (and `to`: up to that time)."}),
        ),
    }
}

/// The tool of one analysis of the registry.
fn analysis_tool(t: &registry::Tool) -> ToolDef {
    let mut props = Map::new();
    props.insert("trace_id".into(), trace_id());
    for p in t.params {
        let (name, schema) = param_schema(p);
        props.insert(name.into(), schema);
        if *p == Param::TimeRange {
            props.insert(
                "to".into(),
                json!({"type": "integer", "description": "Only samples up to this time, in ns since the recording started."}),
            );
        }
    }
    ToolDef {
        name: t.name,
        description: t.description.into(),
        schema: obj(Value::Object(props), &["trace_id"]),
    }
}

/// Parses the parameters `params` of a registry tool from `a`.
fn parse_params(params: &[Param], a: &Args) -> Result<Params, String> {
    let mut out = Params::defaults(params);
    for p in params {
        match p {
            Param::Limit(n, _) => out.limit = a.limit(*n)?,
            Param::ThresholdMs => {
                let ms = a
                    .opt_u64("threshold_ms")?
                    .unwrap_or(out.threshold_ns / 1_000_000);
                if ms == 0 || ms > u64::MAX / 1_000_000 {
                    return Err(format!(
                        "argument `threshold_ms` must be a whole number of milliseconds from 1, got {ms}"
                    ));
                }
                out.threshold_ns = ms * 1_000_000;
            }
            Param::Method => out.method = Method::parse(a.opt_str("method")?.unwrap_or("iqr"))?,
            Param::Category => {
                out.category = Category::parse(a.opt_str("category")?.unwrap_or("all"))?
            }
            Param::ProfileKind => {
                use runtrace_analyze::folded::MemoryView;
                (out.off_cpu, out.memory) = match a.opt_str("kind")?.unwrap_or("cpu") {
                    "cpu" => (false, None),
                    "off_cpu" => (true, None),
                    "alloc" => (false, Some(MemoryView::Alloc)),
                    // `to` is read after `kind` (TimeRange): set below.
                    "live" => (false, Some(MemoryView::Live { at_ns: None })),
                    other => {
                        return Err(format!(
                            "argument `kind` must be cpu, off_cpu, alloc or live, got {other:?}"
                        ))
                    }
                }
            }
            Param::Location => out.location = a.opt_str("location")?.map(str::to_string),
            Param::Resource => out.resource = a.opt_str("resource")?.map(str::to_string),
            Param::TimeRange => {
                out.from_ns = a.opt_i64("from")?;
                out.to_ns = a.opt_i64("to")?;
                if let (Some(f), Some(t)) = (out.from_ns, out.to_ns) {
                    if f > t {
                        return Err(format!("argument `from` ({f}) is after `to` ({t})"));
                    }
                }
            }
        }
    }
    // `live` is the bytes live at `to` (the end without it).
    if let Some(runtrace_analyze::folded::MemoryView::Live { .. }) = out.memory {
        out.memory = Some(runtrace_analyze::folded::MemoryView::Live { at_ns: out.to_ns });
    }
    Ok(out)
}

/// Every tool: the server's own, then one per analysis of the registry.
pub fn list() -> Vec<ToolDef> {
    let only_id = || obj(json!({"trace_id": trace_id()}), &["trace_id"]);
    let answers: Vec<&str> = ANALYSES
        .iter()
        .filter_map(|a| a.answer.map(|x| x.key))
        .collect();
    let event_names: Vec<&str> = kinds::ALL.iter().map(|(_, n)| *n).collect();
    let mut tools = vec![
        ToolDef {
            name: "load_trace",
            description: "Load a runtrace recording (its directory, a trace.N.bin file, or an array of files) under an id; several traces can be loaded at once. A damaged trace loads what is readable and says where it broke.".into(),
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
            description: "The loaded traces: id, files, events, damage.".into(),
            schema: obj(json!({}), &[]),
        },
        ToolDef {
            name: "unload_trace",
            description: "Forget a loaded trace.".into(),
            schema: only_id(),
        },
        ToolDef {
            name: "get_trace_summary",
            description: "Recordings, duration, event counts and capabilities (available_events; analyzers: which apply and why not), as `runtrace summary --json`.".into(),
            schema: only_id(),
        },
        ToolDef {
            name: "run_all_analyzers",
            description: format!(
                "Every applicable analysis in one answer, as `runtrace analyze --all`: summary, {}; skipped lists what does not apply and why, elsewhere what its own command draws.",
                answers.join(", ")
            ),
            schema: only_id(),
        },
        ToolDef {
            name: "query_trace_events",
            description: "Events matching every filter given, in trace order; ts_ns is ns since the recording started.".into(),
            schema: obj(
                json!({
                    "trace_id": trace_id(),
                    "event_type": {"type": "string", "description": format!("An event name from the catalog (or its JSON name, as `runtrace check` prints it): {}.", event_names.join(", "))},
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
            name: "get_window",
            description: "One window of the recording as `runtrace top --once --json` shows it: workers (busy, polls/s, parks, scheduler wait, what each polls at the window's end), spawn locations (tasks, polls/s, poll share, mean and max poll, wake-to-poll p50/p99, long polls) and the findings over the window, cause first, with their age. Reads the trace's files at each call (a recording still being written: its latest events).".into(),
            schema: obj(
                json!({"trace_id": trace_id(),
                    "at": {"type": "number", "minimum": 0, "description": "The window ends this many seconds into the recording (default: its end)."},
                    "window": {"type": "number", "minimum": 0.1, "maximum": MAX_WINDOW_S, "description": "The window's length in seconds (default 5, from 0.1 to 3600)."}}),
                &["trace_id"],
            ),
        },
        ToolDef {
            name: "get_task_timeline",
            description: "One task's life: spawn, every wake, poll start and end, terminate, in order.".into(),
            schema: obj(
                json!({"trace_id": trace_id(), "task_id": {"type": "integer", "minimum": 0},
                    "limit": limit(MAX_LIMIT, "events")}),
                &["trace_id", "task_id"],
            ),
        },
    ];
    tools.extend(
        ANALYSES
            .iter()
            .filter_map(|a| a.tool.as_ref())
            .map(analysis_tool),
    );
    tools
}

/// Runs tool `name` with `arguments`: its JSON answer, or an error message
/// for the client (unknown tool, bad argument, unknown trace, unreadable
/// path, ...).
pub fn call(traces: &Traces, name: &str, arguments: &Value) -> Result<Value, String> {
    let a = Args::new(arguments)?;
    let loaded = || traces.get(a.str("trace_id")?);
    if let Some(t) = registry::tool(name) {
        let p = parse_params(t.params, &a)?;
        return Ok(t.answer(&loaded()?.index, &p));
    }
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
        "get_window" => {
            let t = loaded()?;
            let window_s = a.opt_seconds("window")?.unwrap_or(5.0);
            if !(0.1..=MAX_WINDOW_S).contains(&window_s) {
                return Err(format!(
                    "argument `window` must be from 0.1 to {MAX_WINDOW_S} seconds, got {window_s}"
                ));
            }
            let opts = runtrace_top::source::Options {
                window_s,
                ..Default::default()
            };
            let source = t.paths.first().cloned().unwrap_or_default();
            let mut r = runtrace_top::source::Replay::open_files(&source, &t.paths, opts)?;
            r.seek(a.opt_seconds("at")?.unwrap_or(f64::MAX));
            Ok(r.snapshot().to_json())
        }
        "get_task_timeline" => {
            let t = loaded()?;
            query::timeline(&t.index, a.u64("task_id")?, Some(a.limit(MAX_LIMIT)?))
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
