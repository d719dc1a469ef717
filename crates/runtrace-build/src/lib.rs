//! Generates runtrace probe backends from an event catalog.
//!
//! A catalog is a TOML file like `probes/events.toml`: a `provider` name
//! (default `runtrace`) and a list of `[[event]]`s with typed fields. From
//! it this crate generates, for the backends that are enabled, one Rust
//! module per event with `enabled()` (is anyone listening?) and
//! `fire(Args { .. })`, plus the LTTng-UST tracepoint provider (C) when the
//! `lttng` backend is on. runtrace's built-in events and an application's
//! own events go through the same generator.
//!
//! In an application's `build.rs` (with `runtrace-build` as a
//! build-dependency and `runtrace` as a dependency):
//!
//! ```no_run
//! // build.rs
//! runtrace_build::provider("probes/myapp.toml").expect("probe catalog");
//! ```
//!
//! and in the application: `runtrace::include_provider!(myapp);`, then
//! `runtrace::probe!(myapp::request_done { status, route })`.

#![warn(missing_docs)]

use serde::Deserialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

pub mod lttng;
pub mod rust;

/// A field type of the catalog (see `probes/events.toml`).
pub const FIELD_TYPES: &[&str] = &[
    "u64", "u32", "u16", "u8", "i64", "i32", "bool", "f64", "str", "istr", "loc", "task", "worker",
];

/// An event catalog.
#[derive(Debug, Clone, Deserialize)]
pub struct Catalog {
    /// Provider name (`runtrace` for the built-ins).
    #[serde(default = "default_provider")]
    pub provider: String,
    /// The events.
    #[serde(rename = "event")]
    pub events: Vec<Event>,
}

fn default_provider() -> String {
    "runtrace".into()
}

/// One event of a catalog.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// snake_case name.
    pub name: String,
    /// Wire id (built-ins only; application events get theirs at run time).
    pub id: Option<u32>,
    /// Name printed by `runtrace jsonl` (built-ins).
    pub json: Option<String>,
    /// `runtime` or `meta` (built-ins).
    pub kind: Option<String>,
    /// One-line description.
    pub doc: String,
    /// Fields in order.
    pub fields: Vec<Field>,
}

/// One field of an event.
#[derive(Debug, Clone, Deserialize)]
pub struct Field {
    /// snake_case name.
    pub name: String,
    /// One of [`FIELD_TYPES`].
    #[serde(rename = "type")]
    pub ty: String,
    /// One-line description.
    pub doc: String,
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

impl Catalog {
    /// Reads and checks a catalog; errors name the file and the problem.
    pub fn load(path: impl AsRef<Path>) -> Result<Catalog, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Catalog::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and checks catalog text.
    pub fn parse(text: &str) -> Result<Catalog, String> {
        let cat: Catalog = toml::from_str(text).map_err(|e| e.to_string())?;
        cat.check()?;
        Ok(cat)
    }

    fn check(&self) -> Result<(), String> {
        if !is_ident(&self.provider) {
            return Err(format!("provider {:?} must be snake_case", self.provider));
        }
        let builtin = self.provider == "runtrace";
        let mut names = HashSet::new();
        let mut ids = HashSet::new();
        for ev in &self.events {
            if !is_ident(&ev.name) {
                return Err(format!("event {:?}: names are snake_case", ev.name));
            }
            if !names.insert(&ev.name) {
                return Err(format!("event {} defined twice", ev.name));
            }
            match (builtin, ev.id) {
                (true, Some(id)) if (1..=127).contains(&id) => {
                    if !ids.insert(id) {
                        return Err(format!("{}: id {id} used twice", ev.name));
                    }
                }
                (true, _) => {
                    return Err(format!(
                        "{}: built-in events need an id in 1..=127",
                        ev.name
                    ))
                }
                (false, Some(_)) => {
                    return Err(format!(
                        "{}: application events get their id at run time; remove `id`",
                        ev.name
                    ))
                }
                (false, None) => {}
            }
            if let Some(k) = &ev.kind {
                if k != "runtime" && k != "meta" {
                    return Err(format!("{}: kind must be runtime or meta", ev.name));
                }
            }
            if ev.fields.len() > 32 {
                return Err(format!("{}: at most 32 fields", ev.name));
            }
            let mut fnames = HashSet::new();
            for f in &ev.fields {
                if !is_ident(&f.name) || f.name == "args" {
                    return Err(format!(
                        "{}.{}: field names are snake_case (not `args`)",
                        ev.name, f.name
                    ));
                }
                if !fnames.insert(&f.name) {
                    return Err(format!("{}.{} repeated", ev.name, f.name));
                }
                if !FIELD_TYPES.contains(&f.ty.as_str()) {
                    return Err(format!(
                        "{}.{}: unknown type {:?} (one of {FIELD_TYPES:?})",
                        ev.name, f.name, f.ty
                    ));
                }
                if !builtin && matches!(f.ty.as_str(), "task" | "worker") {
                    return Err(format!(
                        "{}.{}: `{}` is for built-in events; use u64/u32",
                        ev.name, f.name, f.ty
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Which backends to generate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backends {
    /// SystemTap SDT probes.
    pub usdt: bool,
    /// LTTng-UST tracepoints.
    pub lttng: bool,
    /// `#[no_mangle]` functions for `perf probe`.
    pub perf_probe: bool,
    /// The in-process recorder.
    pub record: bool,
}

impl Backends {
    /// The backends the `runtrace` facade was built with, as its build
    /// script publishes them (`DEP_RUNTRACE_BACKENDS`), for application
    /// build scripts.
    pub fn from_runtrace_dependency() -> Backends {
        let v = std::env::var("DEP_RUNTRACE_BACKENDS").unwrap_or_default();
        Backends::parse(&v)
    }

    /// Parses a comma-separated list (`usdt,lttng,perf-probe,record`).
    pub fn parse(list: &str) -> Backends {
        let has = |n: &str| list.split(',').any(|x| x.trim() == n);
        Backends {
            usdt: has("usdt"),
            lttng: has("lttng"),
            perf_probe: has("perf-probe"),
            record: has("record"),
        }
    }

    /// The comma-separated form.
    pub fn list(&self) -> String {
        let mut v = Vec::new();
        for (on, n) in [
            (self.usdt, "usdt"),
            (self.lttng, "lttng"),
            (self.perf_probe, "perf-probe"),
            (self.record, "record"),
        ] {
            if on {
                v.push(n);
            }
        }
        v.join(",")
    }
}

/// For an application's `build.rs`: generates `$OUT_DIR/<provider>_probes.rs`
/// from the catalog at `path` for the backends the `runtrace` dependency was
/// built with (and compiles the LTTng provider when that backend is on).
pub fn provider(path: impl AsRef<Path>) -> Result<PathBuf, String> {
    let path = path.as_ref();
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-env-changed=DEP_RUNTRACE_BACKENDS");
    let cat = Catalog::load(path)?;
    let b = Backends::from_runtrace_dependency();
    generate(&cat, b, "::runtrace::__rt")
}

/// Generates the Rust module (and the LTTng provider, compiled and linked,
/// when `b.lttng`) into `$OUT_DIR`. `rt` is the path of the runtime support
/// module (`crate::__rt` inside runtrace, `::runtrace::__rt` elsewhere).
pub fn generate(cat: &Catalog, b: Backends, rt: &str) -> Result<PathBuf, String> {
    let out = PathBuf::from(
        std::env::var("OUT_DIR").map_err(|_| "OUT_DIR is not set (run from build.rs)")?,
    );
    let rs = out.join(format!("{}_probes.rs", cat.provider));
    let code = rust::generate(cat, b, rt);
    std::fs::write(&rs, code).map_err(|e| format!("{}: {e}", rs.display()))?;
    if b.lttng {
        lttng::build(cat, &out)?;
    }
    Ok(rs)
}
