//! What findings and the report need to name things: workers as
//! (pid, tid, worker, kind), locations by text, ticks as ns since the
//! recording started, and the [`Finding`] constructor.

use super::report::{Finding, FindingKind, Severity, WorkerId};
use super::state::{LocStats, Window, Worker};
use runtrace_format::NO_WORKER;
use runtrace_model::fmt_ns;
use runtrace_model::model::Model;
use serde_json::{json, Value};

/// Made by [`super::engine::Engine::ctx`]: the engine's workers and
/// locations, not the engine itself, so that the analyses the engine runs
/// (the waiting ones) can name things without importing it.
pub(crate) struct Ctx<'a> {
    pub m: &'a Model,
    pub workers: &'a [Worker],
    pub locs: &'a [LocStats],
}

impl Ctx<'_> {
    pub fn worker_id(&self, wi: u32) -> WorkerId {
        let w = &self.workers[wi as usize];
        WorkerId {
            pid: self.m.procs[w.proc as usize].pid,
            tid: self.m.threads[w.thread as usize].tid,
            worker: (w.worker != NO_WORKER).then_some(w.worker),
            kind: if w.saw_executor && w.saw_tokio {
                "mixed"
            } else if w.saw_executor {
                "executor"
            } else if w.saw_tokio {
                "tokio"
            } else {
                "unknown"
            },
        }
    }

    pub fn loc(&self, l: u32) -> String {
        self.m.locs[l as usize].text.to_string()
    }

    pub fn ns_at(&self, proc: u32, ticks: u64) -> i64 {
        self.m.procs[proc as usize].ns(ticks)
    }

    pub fn window(&self, wi: u32, a: u64, b: u64) -> (i64, i64) {
        let p = self.workers[wi as usize].proc;
        (self.ns_at(p, a), self.ns_at(p, b))
    }

    /// The top `n` locations of a per-location vector, largest first.
    pub fn top(&self, v: &[u64], n: usize) -> Vec<(u32, u64)> {
        let mut t: Vec<(u32, u64)> = v
            .iter()
            .enumerate()
            .filter(|(_, &x)| x > 0)
            .map(|(i, &x)| (i as u32, x))
            .collect();
        t.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        t.truncate(n);
        t
    }

    /// "a.rs:1:2 (62%), b.rs:3:4 (20%)" for a top list of ns.
    pub fn share_list(&self, top: &[(u32, u64)], total: u64) -> String {
        top.iter()
            .map(|&(l, v)| {
                format!(
                    "{} ({:.0}% of that time, {})",
                    self.loc(l),
                    100.0 * v as f64 / total.max(1) as f64,
                    fmt_ns(v)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn window_json(&self, w: &Window) -> Value {
        let (a, b) = self.window(w.worker, w.wake, w.poll);
        json!({
            "delay_ns": w.delay_ns,
            "wake_at_ns": a,
            "poll_at_ns": b,
            "task": w.task,
            "spawn_loc": self.loc(w.victim),
            "worker": self.worker_json(w.worker),
            "max_local_q": w.max_local_q,
        })
    }

    pub fn worker_json(&self, wi: u32) -> Value {
        let id = self.worker_id(wi);
        json!({"pid": id.pid, "tid": id.tid, "worker": id.worker, "kind": id.kind})
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn finding(
    kind: FindingKind,
    severity: Severity,
    c: &Ctx<'_>,
    locs: &[u32],
    worker: Option<u32>,
    window_ns: Option<(i64, i64)>,
    detail: String,
    evidence: Value,
) -> Finding {
    Finding {
        kind,
        severity,
        spawn_loc: locs.first().map(|&l| c.loc(l)),
        spawn_loc_id: locs.first().map(|&l| c.m.locs[l as usize].trace_id),
        spawn_locs: locs.iter().map(|&l| c.loc(l)).collect(),
        worker: worker.map(|w| c.worker_id(w)),
        window_ns,
        detail,
        evidence,
        victims: Vec::new(),
        effects: Vec::new(),
        functions: None,
        spans: Vec::new(),
    }
}
