//! The registry of analyses: each one's name, the events it needs, its
//! answer in `runtrace analyze --all` and `run_all_analyzers`, and its MCP
//! tool. `runtrace summary` (which analyses apply, and why not), `analyze
//! --all`, the MCP server's tool list and `run_all_analyzers` all read
//! [`ANALYSES`]; adding an analysis is its module plus one entry here.
//!
//! ```
//! use runtrace_analyze::registry::{self, ANALYSES};
//! use runtrace_analyze::reports::OneRead;
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let r = OneRead::read(&[path], None);
//! let poll_times = ANALYSES.iter().find(|a| a.name == "poll_times").unwrap();
//! assert!(poll_times.applies(&r).is_ok());
//! let all = registry::run_all(&r);
//! assert_eq!(all["analyze"]["poll_ns"]["max"], 3_000);
//! assert!(all["backlog"].is_null()); // no runtrace-sync events
//! ```

use crate::blocked::BlockedOptions;
use crate::counts::Counts;
use crate::outliers::{Category, Method};
pub use crate::params::{Param, Params};
use crate::reports::Reports;
use crate::summary;
use crate::views;
use runtrace_model::event::kind;
use runtrace_model::kinds;
use serde_json::{json, Map, Value};

/// What an analysis needs from a trace.
#[derive(Debug, Clone, Copy)]
pub enum Needs {
    /// Events of every one of these kinds.
    All(&'static [u8]),
    /// Events of at least one of these kinds.
    Any(&'static [u8]),
    /// Application-instrumentation events (runtrace-sync's), any of them.
    AppEvents,
}

/// An analysis's answer in `runtrace analyze --all` and
/// `run_all_analyzers`: under `key`, `null` when it does not apply.
#[derive(Clone, Copy)]
pub struct Answer {
    /// Its key.
    pub key: &'static str,
    /// Computes it.
    pub run: fn(&dyn Reports) -> Value,
}

/// An analysis's MCP tool.
#[derive(Clone, Copy)]
pub struct Tool {
    /// Its name.
    pub name: &'static str,
    /// What it answers, for the client's model.
    pub description: &'static str,
    /// Its parameters besides `trace_id`.
    pub params: &'static [Param],
    /// Its answer ([`Tool::answer`] calls it).
    pub view: fn(&dyn Reports, &Params) -> Value,
    /// Its answer also says whether its analysis applies (`applicable`,
    /// and `reason` when it does not): for analyses whose events many
    /// traces lack.
    pub applicability: bool,
}

impl Tool {
    /// Its answer for the trace of `r`: its view, with whether its
    /// analysis applies when [`Tool::applicability`] is set.
    ///
    /// ```
    /// use runtrace_analyze::registry::{self, Params};
    /// use runtrace_analyze::reports::OneRead;
    /// use runtrace_model::synth::TraceBuilder;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("trace.0.bin");
    /// std::fs::write(&path, TraceBuilder::new().finish()).unwrap();
    /// let r = OneRead::read(&[path], None);
    /// let t = registry::tool("analyze_backlog").unwrap();
    /// let v = t.answer(&r, &Params::defaults(t.params));
    /// assert_eq!(v["applicable"], false);
    /// ```
    pub fn answer(&self, r: &dyn Reports, p: &Params) -> Value {
        let mut v = (self.view)(r, p);
        let analysis = ANALYSES
            .iter()
            .find(|a| a.tool.is_some_and(|t| t.name == self.name));
        if let (true, Some(a), Value::Object(out)) = (self.applicability, analysis, &mut v) {
            match a.applies(r) {
                Ok(()) => {
                    out.insert("applicable".into(), json!(true));
                }
                Err(reason) => {
                    out.insert("applicable".into(), json!(false));
                    out.insert("reason".into(), json!(reason));
                }
            }
        }
        v
    }
}

/// One analysis.
#[derive(Clone, Copy)]
pub struct Analysis {
    /// Its name (in `summary`'s `analyzers`).
    pub name: &'static str,
    /// The events it needs.
    pub needs: Needs,
    /// What to say when it does not apply (followed by the kinds missing).
    pub why: &'static str,
    /// Its answer in `analyze --all`, for the analysis that owns a report
    /// (others are views of it).
    pub answer: Option<Answer>,
    /// The command that draws it, for analyses that are pictures.
    pub elsewhere: Option<&'static str>,
    /// Its MCP tool.
    pub tool: Option<Tool>,
}

const POLLS: &[u8] = &[kind::POLL_START, kind::POLL_END];
const LIST: usize = views::DEFAULT_LIST_LIMIT;

/// Every analysis, in the order `summary` lists them.
pub static ANALYSES: &[Analysis] = &[
    Analysis {
        name: "poll_times",
        needs: Needs::All(POLLS),
        why: "needs polls",
        answer: Some(Answer {
            key: "analyze",
            run: |r| r.runtime().to_json(),
        }),
        elsewhere: None,
        tool: Some(Tool {
            name: "analyze_poll_times",
            description: "Poll durations overall and by spawn location (most poll time first), and long_poll / slow_poll findings.",
            params: &[Param::Limit(LIST, "spawn locations and findings")],
            view: views::poll_times,
            applicability: false,
        }),
    },
    Analysis {
        name: "wakeup_latency",
        needs: Needs::All(&[kind::WAKE, kind::POLL_START]),
        why: "needs wakes and polls",
        answer: None,
        elsewhere: None,
        tool: Some(Tool {
            name: "analyze_wakeup_latency",
            description: "Wake->poll delays overall and by spawn location (worst p99 first), and wake_delay findings.",
            params: &[Param::Limit(LIST, "spawn locations and findings")],
            view: views::wakeup_latency,
            applicability: false,
        }),
    },
    Analysis {
        name: "workers",
        needs: Needs::All(POLLS),
        why: "needs polls by workers",
        answer: None,
        elsewhere: None,
        tool: Some(Tool {
            name: "analyze_workers",
            description: "Per worker: polls, busy ratio, parks, local queue depth, scheduler wait; queues; worker findings.",
            params: &[Param::Limit(LIST, "workers and findings")],
            view: views::workers,
            applicability: false,
        }),
    },
    Analysis {
        name: "spawn_locations",
        needs: Needs::All(&[kind::SPAWN, kind::POLL_START, kind::POLL_END]),
        why: "needs spawns and polls",
        answer: None,
        elsewhere: None,
        tool: Some(Tool {
            name: "analyze_spawn_locations",
            description: "Per spawn location: tasks, polls, poll time, poll and wake->poll percentiles, long polls.",
            params: &[Param::Limit(LIST, "spawn locations")],
            view: views::spawn_locations,
            applicability: false,
        }),
    },
    Analysis {
        name: "scheduling_bottlenecks",
        needs: Needs::All(POLLS),
        why: "the findings of `runtrace analyze` need polls",
        answer: None,
        elsewhere: None,
        tool: Some(Tool {
            name: "find_scheduling_bottlenecks",
            description: "The findings: long polls, wake delays, local queue buildup, worker imbalance, idle workers while work is queued, CPU-bound spawn locations; each names the spawn locations and evidence.",
            params: &[Param::Limit(LIST, "findings")],
            view: views::bottlenecks,
            applicability: false,
        }),
    },
    Analysis {
        name: "outliers",
        needs: Needs::All(POLLS),
        why: "needs polls",
        answer: Some(Answer {
            key: "outliers",
            run: |r| r.outliers().report(r.model(), Method::Iqr, Category::All, 100),
        }),
        elsewhere: None,
        tool: Some(Tool {
            name: "detect_outliers",
            description: "Statistical outliers of wake->poll delay (latency), poll duration (poll) and CPU share (cpu), judged within each spawn location and each task: task, location, worker, window, value, threshold.",
            params: &[Param::Method, Param::Category, Param::Limit(100, "outliers per category")],
            view: |r, p| r.outliers().report(r.model(), p.method, p.category, p.limit),
            applicability: false,
        }),
    },
    Analysis {
        name: "backlog",
        needs: Needs::AppEvents,
        why: "needs runtrace-sync events (queues, locks, I/O, heartbeats); the trace has none",
        answer: Some(Answer {
            key: "backlog",
            run: |r| r.backlog().to_json(),
        }),
        elsewhere: None,
        tool: Some(Tool {
            name: "analyze_backlog",
            description: "Queues, locks, I/O, heartbeats and the ranked root causes of every backlog trigger (needs runtrace-sync events).",
            params: &[Param::Limit(LIST, "entries per list")],
            view: views::backlog,
            applicability: true,
        }),
    },
    // The application's spans (runtrace-tokio's layer, opt-in).
    Analysis {
        name: "spans",
        needs: Needs::Any(&[kind::SPAN_NEW, kind::SPAN_ENTER]),
        why: "needs the application's spans (record them with runtrace_tokio::spans::record or RUNTRACE_SPANS, and runtrace_tokio::layer() in the application's subscriber)",
        answer: Some(Answer {
            key: "spans",
            run: |r| r.runtime().spans.to_json(),
        }),
        elsewhere: None,
        tool: Some(Tool {
            name: "get_span_latencies",
            description: "The application's tracing spans by label (`GET /item` for an HTTP request span): count, wall time first enter to close (p50/p99), busy time inside polls, wake->poll delay suffered while open, slowest p99 first; and which spans each spawn location's polls served.",
            params: &[Param::Limit(LIST, "span labels and served locations")],
            view: views::spans,
            applicability: true,
        }),
    },
    // tokio's async resources (runtrace-tokio's layer).
    Analysis {
        name: "resource_waits",
        needs: Needs::All(&[kind::RESOURCE_POLL]),
        why: "needs tokio's resource events (runtrace::tokio::layer() in the application's subscriber, tokio built with --cfg tokio_unstable and its tracing feature)",
        answer: None,
        elsewhere: None,
        tool: Some(Tool {
            name: "get_resource_waits",
            description: "What tasks waited on: tokio's Mutexes, RwLocks, Semaphores, channels and oneshots, per resource site (kind, creation site, internal or not), most total waiting first: wait count, p50/p99/max/total; per waiting spawn location; the holders charged with the waiting (location, holds, hold p99, holds across an await, wait ns overlapped); the locations whose wakes ended the waits; and the longest waits (task, location, start, ns, released_by location). Optionally only sites whose kind or creation site contains `resource`.",
            params: &[Param::Resource, Param::Limit(LIST, "resource sites and entries per list")],
            view: views::resource_waits,
            applicability: true,
        }),
    },
    // A wait is from a task's wake, or its spawn, to its poll.
    Analysis {
        name: "blocked",
        needs: Needs::All(&[kind::CPU_SAMPLE, kind::POLL_START]),
        why: "needs polls and CPU samples (record with RUNTRACE_CPU_HZ=99 or Recorder::builder().cpu_profile(99))",
        answer: Some(Answer {
            key: "blocked",
            run: |r| r.blocked(BlockedOptions::default().threshold_ns).to_json(),
        }),
        elsewhere: None,
        tool: Some(Tool {
            name: "analyze_blocked",
            description: "What ran while tasks waited: every wait from wake (or spawn) to poll longer than threshold_ms, the CPU samples of the worker that finally polled the task during it, blamed on the spawn locations whose polls held that worker, with their top functions (self and inclusive) and their victims (needs CPU samples: a recording made with RUNTRACE_CPU_HZ).",
            params: &[Param::ThresholdMs, Param::Limit(LIST, "culprits and worst waits")],
            view: views::blocked,
            applicability: true,
        }),
    },
    // Either kind of sample draws a flame graph (`--off-cpu` the second).
    Analysis {
        name: "flamegraph",
        needs: Needs::Any(&[kind::CPU_SAMPLE, kind::OFF_CPU]),
        why: "needs CPU samples (record with RUNTRACE_CPU_HZ=99 or Recorder::builder().cpu_profile(99))",
        answer: None,
        elsewhere: Some("runtrace flamegraph DIR -o flame.svg (folded stacks: --folded)"),
        tool: Some(Tool {
            name: "get_flamegraph",
            description: "The CPU or memory profile as folded stacks (`root;...;leaf` with a count, most first), what `runtrace flamegraph --folded` draws: kind cpu (on-CPU samples, count = samples), off_cpu (where threads blocked, count = microseconds off-CPU), alloc (sampled allocations, count = bytes allocated) or live (bytes still live at `to`, default the end; needs a recording with the live set, RUNTRACE_ALLOC_LIVE=on); optionally only samples in polls of tasks whose spawn location contains `location`, and only between `from` and `to` (ns since the recording started). When nothing is selected, `note` says why (no profile recorded, none of that kind, none matching). Needs a recording made with RUNTRACE_CPU_HZ.",
            params: &[
                Param::ProfileKind,
                Param::Location,
                Param::TimeRange,
                Param::Limit(LIST, "stacks"),
            ],
            view: views::flamegraph,
            applicability: false,
        }),
    },
    // The memory profile per location and the growth rule.
    Analysis {
        name: "memory",
        needs: Needs::All(&[kind::ALLOC_SAMPLE]),
        why: "needs allocation samples (the global allocator runtrace::alloc::Sampled, recorded with RUNTRACE_ALLOC_SAMPLE_BYTES=512K and, for live bytes, RUNTRACE_ALLOC_LIVE=on)",
        answer: Some(Answer {
            key: "memory",
            run: views::memory_all,
        }),
        elsewhere: Some("runtrace analyze (=== Memory, memory_growth findings); runtrace flamegraph --alloc | --live"),
        tool: Some(Tool {
            name: "get_memory_growth",
            description: "Heap memory per spawn location from the sampled allocations: bytes allocated and per second, bytes live at the end, and `growth`: the locations whose live bytes grow steadily over the recording (least-squares slope over 10 time buckets with R² >= 0.8, growth >= 1 MiB and >= 25% of the end's live bytes), each with the function holding most of its live bytes, slope (bytes/s), R², live bytes at start and end. Needs RUNTRACE_ALLOC_SAMPLE_BYTES (and RUNTRACE_ALLOC_LIVE=on for live bytes and growth).",
            params: &[Param::Limit(LIST, "locations and growth")],
            view: views::memory_growth,
            applicability: true,
        }),
    },
];

impl Analysis {
    /// Whether it applies to the trace of `r`: `Err(reason)` when not.
    pub fn applies(&self, r: &dyn Reports) -> Result<(), String> {
        self.applies_to(r.counts())
    }

    /// Whether it applies to a trace with event counts `c`.
    pub fn applies_to(&self, c: &Counts) -> Result<(), String> {
        let names = |ks: &[u8]| -> Vec<&'static str> {
            ks.iter().filter_map(|&k| kinds::name(k)).collect()
        };
        let missing: Vec<&str> = match self.needs {
            Needs::All(ks) => names(ks)
                .into_iter()
                .zip(ks)
                .filter(|(_, &k)| c.of(k) == 0)
                .map(|(n, _)| n)
                .collect(),
            Needs::Any(ks) if ks.iter().all(|&k| c.of(k) == 0) => names(ks),
            Needs::Any(_) => Vec::new(),
            Needs::AppEvents if (0..=u8::MAX).any(|k| kind::is_app(k) && c.of(k) > 0) => Vec::new(),
            Needs::AppEvents => return Err(self.why.to_string()),
        };
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} (no {} events)",
                self.why,
                missing.join(", no ")
            ))
        }
    }

    /// Its entry in `summary`'s `analyzers`: `{name, applicable, needs,
    /// reason}` (`reason` only when it does not apply).
    pub fn summary_entry(&self, c: &Counts) -> Value {
        let needs = match self.needs {
            Needs::All(ks) | Needs::Any(ks) => {
                json!(ks
                    .iter()
                    .filter_map(|&k| kinds::name(k))
                    .collect::<Vec<_>>())
            }
            Needs::AppEvents => json!("runtrace-sync events"),
        };
        match self.applies_to(c) {
            Ok(()) => json!({"name": self.name, "applicable": true, "needs": needs}),
            Err(reason) => json!({
                "name": self.name,
                "applicable": false,
                "needs": needs,
                "reason": reason,
            }),
        }
    }
}

/// The analyses and whether each applies to a trace with event counts
/// `c`: `{name, applicable, needs, reason}` (`reason` only when it does
/// not apply), for `summary`'s `capabilities.analyzers`.
pub fn analyzers(c: &Counts) -> Vec<Value> {
    ANALYSES.iter().map(|a| a.summary_entry(c)).collect()
}

/// `runtrace summary`'s JSON ([`summary::summary`]) with the registry's
/// [`analyzers`].
pub fn summary(r: &dyn Reports) -> Value {
    summary::summary(r, analyzers(r.counts()))
}

/// The analysis with MCP tool `name`.
pub fn tool(name: &str) -> Option<&'static Tool> {
    ANALYSES
        .iter()
        .filter_map(|a| a.tool.as_ref())
        .find(|t| t.name == name)
}

/// The analysis named `name`.
pub fn analysis(name: &str) -> Option<&'static Analysis> {
    ANALYSES.iter().find(|a| a.name == name)
}

/// Every applicable analysis as one JSON object: `summary`, each answer
/// (`analyze`: the runtime report with its findings; `backlog`;
/// `blocked`; `outliers`: IQR, all categories, the 100 strongest), `null`
/// when it does not apply; `skipped`: the analyses that do not apply and
/// why; `elsewhere`: those drawn by their own command. Keys in
/// docs/mcp.md.
pub fn run_all(r: &dyn Reports) -> Value {
    let mut out = Map::new();
    let mut skipped = Vec::new();
    let mut elsewhere = Vec::new();
    for a in ANALYSES {
        let applies = a.applies(r);
        if let Some(ans) = a.answer {
            let v = if applies.is_ok() {
                (ans.run)(r)
            } else {
                Value::Null
            };
            out.insert(ans.key.into(), v);
        }
        match (applies, a.elsewhere) {
            (Err(reason), _) => skipped.push(json!({"name": a.name, "reason": reason})),
            (Ok(()), Some(cmd)) => elsewhere.push(json!({"name": a.name, "command": cmd})),
            (Ok(()), None) => {}
        }
    }
    out.insert("skipped".into(), Value::Array(skipped));
    out.insert("elsewhere".into(), Value::Array(elsewhere));
    out.insert("summary".into(), summary(r));
    Value::Object(out)
}
