//! The loaded traces, by id. Loading reads the files once
//! ([`TraceIndex::load`]); a damaged trace loads what is readable, and the
//! answer says what was read and where it broke.
//!
//! ```
//! use runtrace_mcp::traces::Traces;
//! let t = Traces::new();
//! let err = t.load("a", &["/no/such/dir/trace.0.bin".into()]).unwrap_err();
//! assert!(err.contains("/no/such/dir/trace.0.bin"), "{err}");
//! assert!(t.get("a").is_err());
//! ```

use runtrace_analyze::index::TraceIndex;
use runtrace_format::files;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One loaded trace.
pub struct Loaded {
    /// Its id.
    pub id: String,
    /// The paths it was loaded from.
    pub paths: Vec<PathBuf>,
    /// The trace.
    pub index: TraceIndex,
    /// Loading took this long.
    pub load_ms: f64,
}

/// The loaded traces (shared by the calls of one server).
#[derive(Default)]
pub struct Traces {
    map: Mutex<BTreeMap<String, Arc<Loaded>>>,
}

impl Traces {
    /// No traces yet.
    pub fn new() -> Traces {
        Traces::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Loaded>>> {
        // A panic elsewhere while holding the lock leaves the map intact.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loads `paths` under `id` (replacing a trace of that id). An error
    /// when no path is readable or nothing in them is; a damaged trace
    /// with readable events loads, and its answer lists the damage.
    pub fn load(&self, id: &str, paths: &[PathBuf]) -> Result<Value, String> {
        if id.is_empty() {
            return Err("argument `trace_id` must not be empty".into());
        }
        // A recording's directory stands for its trace.N.bin files.
        let files = files::expand(paths)?;
        if let Some(why) = files.iter().find_map(|f| files::unreadable(f)) {
            return Err(why);
        }
        let t = Instant::now();
        let index = TraceIndex::load(&files);
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        if index.stats.events == 0 && index.stats.damaged {
            return Err(format!(
                "cannot load trace {id:?}: nothing readable: {}",
                index.stats.errors.join("; ")
            ));
        }
        let loaded = Arc::new(Loaded {
            id: id.to_string(),
            paths: files,
            index,
            load_ms,
        });
        let replaced = self.lock().insert(id.to_string(), loaded.clone()).is_some();
        let mut v = describe(&loaded);
        v["replaced"] = json!(replaced);
        Ok(v)
    }

    /// The trace `id`, or an error naming the loaded ones.
    pub fn get(&self, id: &str) -> Result<Arc<Loaded>, String> {
        let map = self.lock();
        map.get(id).cloned().ok_or_else(|| {
            let ids: Vec<&str> = map.keys().map(String::as_str).collect();
            format!(
                "unknown trace_id {id:?}: loaded traces are [{}] (load one with load_trace)",
                ids.join(", ")
            )
        })
    }

    /// Forgets trace `id`.
    pub fn unload(&self, id: &str) -> Result<Value, String> {
        self.get(id)?;
        self.lock().remove(id);
        Ok(json!({"trace_id": id, "unloaded": true}))
    }

    /// Every loaded trace, described.
    pub fn list(&self) -> Value {
        let traces: Vec<Value> = self.lock().values().map(|l| describe(l)).collect();
        json!({"traces": traces})
    }
}

/// What a loaded trace is: files, size, events, damage.
fn describe(l: &Loaded) -> Value {
    let s = &l.index.stats;
    json!({
        "trace_id": l.id,
        "files": s.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "bytes": s.bytes,
        "events": s.events,
        "events_indexed": l.index.events.len(),
        "recordings": l.index.model.procs.len(),
        "duration_ns": l.index.duration_ns(),
        "load_ms": l.load_ms,
        "damaged": s.damaged,
        "errors": s.errors,
        "unsealed_files": s.unsealed.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "note": (!s.unsealed.is_empty()).then(|| format!(
            "{} file(s) have no END frame: the recording was still being written, or its process died; what they held when loaded is here",
            s.unsealed.len()
        )),
    })
}
