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
//!
//! The crate is split by job, one file per backend:
//!
//! - [`types`]: the one table of field types (wire encodings, codes, and
//!   how each language sees them), which runtrace-format's build script
//!   also generates from;
//! - `catalog` ([`Catalog`]) reads and checks the TOML (field types,
//!   [`GROUPS`]); `backends` ([`Backends`]) says which backends to
//!   generate;
//! - [`fields`] and [`symbols`]: a field in each generated language (from
//!   [`types`]) and the names probes carry in a binary (shared with
//!   `runtrace doctor`);
//! - [`usdt`], [`perf_probe`], [`lttng`] and [`record`]: each backend's
//!   code (LTTng's C provider included);
//! - [`dispatch`]: the per-event Rust module whose `enabled()` and `fire()`
//!   call the enabled backends.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

mod backends;
mod catalog;
pub mod dispatch;
pub mod fields;
pub mod lttng;
pub mod perf_probe;
pub mod record;
pub mod symbols;
pub mod types;
pub mod usdt;

pub use backends::Backends;
pub use catalog::{group, Catalog, Event, Field, GroupInfo, GROUPS};

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

/// Environment variable naming a TOML file of extra built-in events that
/// [`builtin_catalog`] appends to runtrace's catalog: for tests that show
/// a new event needs nothing but its catalog entry (a build with it set
/// has those events everywhere the catalog is generated into). Unset in
/// every ordinary build.
pub const EXTRA_EVENTS_ENV: &str = "RUNTRACE_TEST_EXTRA_EVENTS";

/// For runtrace's own build scripts: reads the built-in catalog at `path`
/// (`probes/events.toml`), appends the events of the file named by
/// [`EXTRA_EVENTS_ENV`] when that is set, checks it is provider
/// `runtrace`, and tells cargo when to run the script again.
pub fn builtin_catalog(path: &Path) -> Result<Catalog, String> {
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-env-changed={EXTRA_EVENTS_ENV}");
    let mut cat = Catalog::load(path)?;
    if cat.provider != symbols::RUNTRACE_PROVIDER {
        return Err(format!(
            "{}: the built-in provider is {}",
            path.display(),
            symbols::RUNTRACE_PROVIDER
        ));
    }
    if let Some(extra) = std::env::var_os(EXTRA_EVENTS_ENV) {
        let extra = PathBuf::from(extra);
        println!("cargo:rerun-if-changed={}", extra.display());
        println!(
            "cargo:warning=built-in catalog extended with {} ({EXTRA_EVENTS_ENV})",
            extra.display()
        );
        let more = Catalog::load(&extra)?;
        cat.extend(more)
            .map_err(|e| format!("{} + {}: {e}", path.display(), extra.display()))?;
    }
    Ok(cat)
}

/// Generates the Rust module (and the LTTng provider, compiled and linked,
/// when `b.lttng`) into `$OUT_DIR`. `rt` is the path of the runtime support
/// module (`crate::__rt` inside runtrace, `::runtrace::__rt` elsewhere).
pub fn generate(cat: &Catalog, b: Backends, rt: &str) -> Result<PathBuf, String> {
    let out = PathBuf::from(
        std::env::var("OUT_DIR").map_err(|_| "OUT_DIR is not set (run from build.rs)")?,
    );
    let rs = out.join(format!("{}_probes.rs", cat.provider));
    let code = dispatch::generate(cat, b, rt);
    std::fs::write(&rs, code).map_err(|e| format!("{}: {e}", rs.display()))?;
    if b.lttng {
        // Events without a probe site (group `profile`) have no tracepoint.
        lttng::build(&cat.probe_sites(), &out)?;
    }
    Ok(rs)
}
