//! The answers of the analyses' MCP tools (`analyze_*`,
//! `find_scheduling_bottlenecks`; [`crate::registry`] lists them): the
//! parts of `runtrace analyze --json`, `runtrace backlog --json` and
//! `runtrace blocked --json` (same keys, docs/analysis.md) each question
//! needs, lists cut to `limit` with `<list>_total` and `truncated` saying
//! so.
//!
//! ```
//! use runtrace_analyze::views::cut;
//! let (items, total, cut_short) = cut(vec![1.into(), 2.into(), 3.into()], 2);
//! assert_eq!((items.len(), total, cut_short), (2, 3, true));
//! ```

use crate::folded;
use crate::functions::StackNames;
use crate::params::Params;
use crate::reports::Reports;
use serde_json::{json, Map, Value};

/// Lists of the `analyze_*` tools are cut to this many entries by default.
pub const DEFAULT_LIST_LIMIT: usize = 20;

/// The first `limit` items, the total and whether some were left out.
pub fn cut(mut items: Vec<Value>, limit: usize) -> (Vec<Value>, usize, bool) {
    let total = items.len();
    items.truncate(limit);
    (items, total, total > limit)
}

/// `items` cut to `limit` under `key` in `out`, with `<key>_total` and
/// `truncated` (true if any list of `out` was cut).
fn put_list(out: &mut Map<String, Value>, key: &str, items: Vec<Value>, limit: usize) {
    let (items, total, was_cut) = cut(items, limit);
    out.insert(key.into(), Value::Array(items));
    out.insert(format!("{key}_total"), json!(total));
    let before = out
        .get("truncated")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    out.insert("truncated".into(), json!(before || was_cut));
}

fn array(v: &Value, key: &str) -> Vec<Value> {
    v[key].as_array().cloned().unwrap_or_default()
}

/// Findings of the given kinds, most serious first (the report's order).
fn findings(rt: &Value, kinds: &[&str]) -> Vec<Value> {
    array(rt, "findings")
        .into_iter()
        .filter(|f| kinds.iter().any(|k| f["kind"] == *k))
        .collect()
}

/// Sorts by the number at `path` (a JSON pointer), largest first.
fn by_desc(mut v: Vec<Value>, path: &str) -> Vec<Value> {
    let key = |x: &Value| x.pointer(path).and_then(Value::as_f64).unwrap_or(0.0);
    v.sort_by(|a, b| key(b).total_cmp(&key(a)));
    v
}

/// Pick `keys` of an object.
fn pick(v: &Value, keys: &[&str]) -> Value {
    Value::Object(
        keys.iter()
            .filter_map(|k| v.get(*k).map(|x| (k.to_string(), x.clone())))
            .collect(),
    )
}

/// `analyze_wakeup_latency`: wake->poll delays overall and by spawn
/// location (worst p99 first), and the `wake_delay` findings.
pub fn wakeup_latency(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let rt = ix.runtime().to_json();
    let mut out = Map::new();
    out.insert("wake_to_poll_ns".into(), rt["wake_to_poll_ns"].clone());
    let locs = by_desc(array(&rt, "spawn_locations"), "/wake_to_poll_ns/p99")
        .iter()
        .map(|l| pick(l, &["location", "spawn_loc_id", "tasks", "wake_to_poll_ns"]))
        .collect();
    put_list(&mut out, "spawn_locations", locs, limit);
    put_list(&mut out, "findings", findings(&rt, &["wake_delay"]), limit);
    Value::Object(out)
}

/// `analyze_poll_times`: poll durations overall and by spawn location
/// (most poll time first), and the `long_poll` and `slow_poll` findings.
pub fn poll_times(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let rt = ix.runtime().to_json();
    let mut out = Map::new();
    out.insert("poll_ns".into(), rt["poll_ns"].clone());
    out.insert("poll_ns_mean".into(), rt["poll_ns_mean"].clone());
    let keys = [
        "location",
        "spawn_loc_id",
        "polls",
        "poll_ns_total",
        "poll_ns_mean",
        "poll_ns",
        "long_polls",
    ];
    let locs = array(&rt, "spawn_locations")
        .iter()
        .map(|l| pick(l, &keys))
        .collect();
    put_list(&mut out, "spawn_locations", locs, limit);
    put_list(
        &mut out,
        "findings",
        findings(&rt, &["long_poll", "slow_poll"]),
        limit,
    );
    Value::Object(out)
}

/// `analyze_workers`: every worker's polls, busy ratio, parks and queue
/// depth, the queues, and the worker findings.
pub fn workers(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let rt = ix.runtime().to_json();
    let mut out = Map::new();
    put_list(&mut out, "workers", array(&rt, "workers"), limit);
    out.insert("global_queue".into(), rt["global_queue"].clone());
    out.insert("queues".into(), rt["queues"].clone());
    let kinds = [
        "worker_imbalance",
        "idle_while_queued",
        "local_queue_buildup",
    ];
    put_list(&mut out, "findings", findings(&rt, &kinds), limit);
    Value::Object(out)
}

/// `analyze_spawn_locations`: the spawn locations, most poll time first.
pub fn spawn_locations(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let rt = ix.runtime().to_json();
    let mut out = Map::new();
    put_list(
        &mut out,
        "spawn_locations",
        array(&rt, "spawn_locations"),
        limit,
    );
    out.insert("tasks".into(), rt["tasks"].clone());
    Value::Object(out)
}

/// `analyze_backlog`: `runtrace backlog --json` with its lists cut to
/// `limit`, and `applicable` (false, with the reason, when the trace has
/// no runtrace-sync events).
pub fn backlog(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let b = ix.backlog().to_json();
    let mut out = match &b {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for key in [
        "queues",
        "locks",
        "io",
        "heartbeats",
        "triggers",
        "top_causes",
    ] {
        if let Some(Value::Array(a)) = b.get(key) {
            put_list(&mut out, key, a.clone(), limit);
        }
    }
    Value::Object(out)
}

/// `get_resource_waits`: [`crate::runtime::Report::resource_waits`], the
/// sites whose kind or creation site contains `resource` (all without
/// it), cut to `limit` sites and each site's lists to `limit` entries.
pub fn resource_waits(ix: &dyn Reports, p: &Params) -> Value {
    let sites = &ix.runtime().resource_waits;
    let picked: Vec<Value> = sites
        .iter()
        .filter(|s| {
            p.resource.as_deref().is_none_or(|f| {
                s.kind.contains(f) || s.created_at.as_deref().is_some_and(|c| c.contains(f))
            })
        })
        .map(|s| s.to_json(p.limit))
        .collect();
    let mut out = Map::new();
    let lists_cut = picked.iter().any(|s| {
        ["waiters", "holders", "released_by", "longest_waits"]
            .iter()
            .any(|k| s[format!("{k}_total")].as_u64() > s[*k].as_array().map(|a| a.len() as u64))
    });
    put_list(&mut out, "resources", picked, p.limit);
    if lists_cut {
        out.insert("truncated".into(), json!(true));
    }
    out.insert("sites_waited_on".into(), json!(sites.len()));
    out.insert(
        "resource_events".into(),
        ix.runtime().waiting["resources"]["events"].clone(),
    );
    Value::Object(out)
}

/// `get_flamegraph`: the selected samples' folded stacks (as `runtrace
/// flamegraph --folded` prints them), most counted first, cut to
/// `limit`; `total` counts every selected sample (or µs off-CPU), `note`
/// says why there is none.
pub fn flamegraph(ix: &dyn Reports, p: &Params) -> Value {
    let profile = ix.profile();
    let sel = folded::Selection {
        off_cpu: p.off_cpu,
        memory: p.memory,
        location: p.location.clone(),
        worker: None,
        from_ns: p.from_ns,
        to_ns: p.to_ns,
        // runtrace's own threads are left out, as in `runtrace flamegraph`.
        include_runtrace: false,
    };
    let mut names = StackNames::recorded(profile);
    let text = folded::fold(folded::stacks(profile, &sel, &mut names));
    let mut lines: Vec<(&str, u64)> = text
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(stack, n)| (stack, n.parse().unwrap_or(0)))
        .collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let total: u64 = lines.iter().map(|l| l.1).sum();
    let mut out = Map::new();
    out.insert(
        "kind".into(),
        json!(match p.memory {
            Some(folded::MemoryView::Alloc) => "alloc",
            Some(folded::MemoryView::Live { .. }) => "live",
            None if p.off_cpu => "off_cpu",
            None => "cpu",
        }),
    );
    out.insert("count_name".into(), json!(sel.count_name()));
    out.insert("total".into(), json!(total));
    let items = lines
        .into_iter()
        .map(|(stack, n)| json!({"stack": stack, "count": n}))
        .collect();
    put_list(&mut out, "stacks", items, p.limit);
    if total == 0 {
        out.insert("note".into(), json!(folded::why_empty(profile, &sel)));
    }
    let problems = names.problems();
    if !problems.is_empty() {
        out.insert("symbolize_problems".into(), json!(problems));
    }
    Value::Object(out)
}

/// `analyze_blocked`: `runtrace blocked --json` with `threshold_ns`, its
/// culprits and worst waits cut to `limit`, and whether it applies.
pub fn blocked(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let b = ix.blocked(p.threshold_ns).to_json();
    let mut out = match &b {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for key in ["culprits", "worst"] {
        if let Some(Value::Array(a)) = b.get(key) {
            put_list(&mut out, key, a.clone(), limit);
        }
    }
    Value::Object(out)
}

/// `find_scheduling_bottlenecks`: the findings of `runtrace analyze`
/// (long polls, wake delays, queue buildup, imbalance, idle workers while
/// work is queued, CPU-bound locations), most serious first.
pub fn bottlenecks(ix: &dyn Reports, p: &Params) -> Value {
    let limit = p.limit;
    let rt = ix.runtime().to_json();
    let mut out = Map::new();
    put_list(&mut out, "findings", array(&rt, "findings"), limit);
    out.insert(
        "thresholds".into(),
        json!({
            "long_poll_ns": ix.runtime().thresholds.long_poll_ns,
            "wake_delay_ns": ix.runtime().thresholds.wake_delay_ns,
        }),
    );
    Value::Object(out)
}

/// `get_span_latencies`: the span table, cut to `limit` labels and
/// `limit` served entries.
///
/// ```
/// use runtrace_analyze::registry::{self, Params};
/// use runtrace_analyze::reports::OneRead;
/// use runtrace_model::synth::TraceBuilder;
/// let mut b = TraceBuilder::new();
/// b.span_new(1, 1_000, 5, 0, "request", "method=GET uri=/item");
/// b.poll_start(1, 0, 2_000, 9, 0, 0);
/// b.span_enter(1, 2_100, 5);
/// b.span_exit(1, 2_600, 5);
/// b.poll_end(1, 0, 2_700, 9, false);
/// b.span_close(1, 4_000, 5);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let r = OneRead::read(&[path], None);
/// let tool = registry::tool("get_span_latencies").unwrap();
/// let v = tool.answer(&r, &Params::defaults(tool.params));
/// assert_eq!(v["applicable"], true);
/// assert_eq!(v["spans"][0]["label"], "GET /item");
/// assert_eq!(v["spans"][0]["wall_ns"]["max"], 1_900);
/// ```
pub fn spans(ix: &dyn Reports, p: &Params) -> Value {
    let v = ix.runtime().spans.to_json();
    let mut out = Map::new();
    put_list(&mut out, "spans", array(&v, "spans"), p.limit);
    put_list(&mut out, "served", array(&v, "served"), p.limit);
    out.insert("omitted".into(), v["omitted"].clone());
    Value::Object(out)
}

/// `get_memory_growth`: the runtime report's memory table and its
/// `memory_growth` findings' evidence, cut to `limit` each.
pub fn memory_growth(ix: &dyn Reports, p: &Params) -> Value {
    let r = ix.runtime();
    let profile = ix.profile();
    let mut out = Map::new();
    out.insert("live_set".into(), json!(profile.memory.live_set));
    out.insert("untracked".into(), json!(profile.memory.untracked));
    out.insert("lost_frees".into(), json!(profile.memory.lost_frees));
    let locs = r
        .memory
        .iter()
        .map(|m| {
            json!({
                "location": m.location,
                "alloc_bytes": m.alloc_bytes,
                "alloc_bytes_per_sec": m.alloc_bytes_per_sec,
                "samples": m.samples,
                "live_end_bytes": m.live_end_bytes,
            })
        })
        .collect();
    put_list(&mut out, "locations", locs, p.limit);
    let growth = r
        .findings
        .iter()
        .filter(|f| f.kind == crate::runtime::FindingKind::MemoryGrowth)
        .map(|f| f.evidence.clone())
        .collect();
    put_list(&mut out, "growth", growth, p.limit);
    if !profile.memory.live_set && !profile.allocs.is_empty() {
        out.insert(
            "note".into(),
            json!("no live set: record with RUNTRACE_ALLOC_LIVE=on for live bytes and growth"),
        );
    }
    Value::Object(out)
}

/// `runtrace analyze --all`'s `memory`: [`memory_growth`] uncut.
pub fn memory_all(ix: &dyn Reports) -> Value {
    let p = Params::defaults(&[]);
    memory_growth(
        ix,
        &Params {
            limit: usize::MAX,
            ..p
        },
    )
}
