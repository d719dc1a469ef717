//! Where tasks waited on tokio's async resources, per resource site (one
//! kind created at one place: a oneshot per request is one site): the
//! numbers behind `resource_wait` / `lock_held_across_await`, for every
//! site waited on, judged or not. [`super::Report::resource_waits`] holds
//! them (most total waiting first); the MCP tool `get_resource_waits` and
//! the HTML report's Waiting section show them. `runtrace analyze --json`
//! does not carry them (its findings do, for the sites that matter).
//!
//! ```
//! use runtrace_analyze::{analyze_bytes, Options};
//! use runtrace_model::synth::mutex_held_across_await;
//! let r = analyze_bytes(&mutex_held_across_await(), Options::default());
//! let s = &r.resource_waits[0];
//! assert_eq!((s.kind.as_str(), s.created_at.as_deref()), ("Mutex", Some("src/state.rs:4:17")));
//! assert_eq!(s.waits, 160);
//! assert_eq!(s.holders[0].spawn_loc, "src/sync.rs:12:5");
//! assert_eq!(s.to_json(usize::MAX)["waiters"][0]["spawn_loc"], "src/req.rs:40:9");
//! ```

use serde_json::{json, Value};

/// The waits of one location's tasks on a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteWaiter {
    /// The waiting tasks' spawn location.
    pub spawn_loc: String,
    /// Waits finished.
    pub waits: u64,
    /// Their p50, ns.
    pub wait_p50_ns: u64,
    /// Their p99, ns.
    pub wait_p99_ns: u64,
    /// Their sum, ns.
    pub wait_ns_total: u64,
}

/// One location's holds of a lock-like site (Mutex, RwLock, Semaphore),
/// and the waiting of others they overlapped (what the findings charge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteHolder {
    /// The holding tasks' spawn location.
    pub spawn_loc: String,
    /// Holds (acquire to release).
    pub holds: u64,
    /// Their p99, ns.
    pub hold_p99_ns: u64,
    /// The longest, ns.
    pub hold_max_ns: u64,
    /// Holds during which the holder's polls returned Pending.
    pub holds_across_await: u64,
    /// Others' waiting its holds overlapped, ns (holds overlap a wait
    /// several at a time, so charges can add up to more than the waiting).
    pub charged_wait_ns: u64,
    /// Its holds charged with some waiting, and of those, across an await.
    pub charged_holds: u64,
    /// See `charged_holds`.
    pub charged_across_await: u64,
}

/// One location's wakes that ended others' waits on a site (a contended
/// release, a freed slot, an answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteReleaser {
    /// The waking tasks' spawn location.
    pub spawn_loc: String,
    /// Waits its wakes ended.
    pub waits_ended: u64,
    /// Their waiting, ns.
    pub wait_ns_ended: u64,
}

/// One of the longest waits on a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongestWait {
    /// The waiting task.
    pub task: u64,
    /// Its spawn location.
    pub spawn_loc: String,
    /// Its first Pending poll, ns since its recording started.
    pub start_ns: i64,
    /// Its length, ns.
    pub wait_ns: u64,
    /// The location of the task whose wake ended it, if one did.
    pub released_by: Option<String>,
}

/// The waits on one resource site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSite {
    /// tokio's concrete type (`Mutex`, `Semaphore`, ...; a oneshot's
    /// `Sender|Receiver` is `oneshot`).
    pub kind: String,
    /// Its creation site (`file:line:col`), if tokio gave one.
    pub created_at: Option<String>,
    /// A tokio-internal resource (a bounded mpsc channel's capacity).
    pub internal: bool,
    /// For one without a creation site: the location of the task that
    /// created it (internal ones are told apart by it).
    pub created_by: Option<String>,
    /// Resources of the site that were waited on.
    pub resources: u64,
    /// Waits finished.
    pub waits: u64,
    /// Their p50, ns.
    pub wait_p50_ns: u64,
    /// Their p99, ns.
    pub wait_p99_ns: u64,
    /// The longest, ns.
    pub wait_max_ns: u64,
    /// Their sum, ns.
    pub wait_ns_total: u64,
    /// By waiting location, most waiting first.
    pub waiters: Vec<SiteWaiter>,
    /// By holding location, most charged waiting first (lock-like sites).
    pub holders: Vec<SiteHolder>,
    /// By location whose wakes ended the waits, most waiting ended first.
    pub released_by: Vec<SiteReleaser>,
    /// The longest waits, longest first: exact (each resource keeps its 8
    /// longest, so the site's 8 longest are among them).
    pub longest_waits: Vec<LongestWait>,
}

impl ResourceSite {
    /// "Mutex src/db.rs:12:9", "Semaphore (tokio-internal, created by a
    /// task of src/main.rs:3:5)", or the kind alone.
    ///
    /// ```
    /// use runtrace_analyze::{analyze_bytes, Options};
    /// let r = analyze_bytes(&runtrace_model::synth::mutex_held_across_await(), Options::default());
    /// assert_eq!(r.resource_waits[0].label(), "Mutex src/state.rs:4:17");
    /// ```
    pub fn label(&self) -> String {
        match (&self.created_at, self.internal, &self.created_by) {
            (Some(at), _, _) => format!("{} {at}", self.kind),
            (None, true, Some(by)) => {
                format!("{} (tokio-internal, created by a task of {by})", self.kind)
            }
            (None, true, None) => format!("{} (tokio-internal)", self.kind),
            (None, false, _) => self.kind.clone(),
        }
    }

    /// As JSON (docs/mcp.md, `get_resource_waits`), each list cut to
    /// `limit` with `<list>_total` saying how many there were.
    ///
    /// ```
    /// use runtrace_analyze::{analyze_bytes, Options};
    /// let r = analyze_bytes(&runtrace_model::synth::mutex_held_across_await(), Options::default());
    /// let j = r.resource_waits[0].to_json(1);
    /// assert_eq!(j["longest_waits"].as_array().unwrap().len(), 1);
    /// assert_eq!(j["longest_waits_total"], 8);
    /// ```
    pub fn to_json(&self, limit: usize) -> Value {
        let cut = |v: Vec<Value>| -> (Vec<Value>, usize) {
            let n = v.len();
            (v.into_iter().take(limit).collect(), n)
        };
        let (waiters, waiters_total) = cut(self
            .waiters
            .iter()
            .map(|w| {
                json!({"spawn_loc": w.spawn_loc, "waits": w.waits, "wait_p50_ns": w.wait_p50_ns,
                "wait_p99_ns": w.wait_p99_ns, "wait_ns_total": w.wait_ns_total})
            })
            .collect());
        let (holders, holders_total) = cut(self
            .holders
            .iter()
            .map(|h| {
                json!({"spawn_loc": h.spawn_loc, "holds": h.holds, "hold_p99_ns": h.hold_p99_ns,
                "hold_max_ns": h.hold_max_ns, "holds_across_await": h.holds_across_await,
                "charged_wait_ns": h.charged_wait_ns, "charged_holds": h.charged_holds,
                "charged_across_await": h.charged_across_await})
            })
            .collect());
        let (released_by, released_by_total) = cut(self
            .released_by
            .iter()
            .map(|r| {
                json!({"spawn_loc": r.spawn_loc, "waits_ended": r.waits_ended,
                "wait_ns_ended": r.wait_ns_ended})
            })
            .collect());
        let (longest, longest_total) = cut(self
            .longest_waits
            .iter()
            .map(|l| {
                json!({"task": l.task, "spawn_loc": l.spawn_loc, "start_ns": l.start_ns,
                "wait_ns": l.wait_ns, "released_by": l.released_by})
            })
            .collect());
        json!({
            "resource": {
                "kind": self.kind,
                "created_at": self.created_at,
                "internal": self.internal,
                "created_by": self.created_by,
                "label": self.label(),
            },
            "resources": self.resources,
            "waits": self.waits,
            "wait_p50_ns": self.wait_p50_ns,
            "wait_p99_ns": self.wait_p99_ns,
            "wait_max_ns": self.wait_max_ns,
            "wait_ns_total": self.wait_ns_total,
            "waiters": waiters,
            "waiters_total": waiters_total,
            "holders": holders,
            "holders_total": holders_total,
            "released_by": released_by,
            "released_by_total": released_by_total,
            "longest_waits": longest,
            "longest_waits_total": longest_total,
        })
    }
}
