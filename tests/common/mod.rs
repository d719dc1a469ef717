//! Helpers shared by integration tests (each test crate uses a part):
//! the skip-or-fail rule for missing tools and privileges, running
//! commands, scratch directories, trace files, building examples.
#![allow(dead_code)]

pub mod lttng;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (the facade crate's directory).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether this runs in CI (`CI=true`), where a missing prerequisite fails
/// the test instead of skipping a part.
pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Under CI a missing prerequisite fails the test; elsewhere it skips.
pub fn missing(what: &str) {
    if ci() {
        panic!("CI=true and {what}");
    }
    eprintln!("skipped: {what}");
}

/// Where `tool` is on `PATH`.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.is_file())
    })
}

/// Whether `tool` is on `PATH`.
pub fn on_path(tool: &str) -> bool {
    which(tool).is_some()
}

/// `missing(...)` for the first absent tool of `tools`; true when all are there.
pub fn tools_present(tools: &[&str]) -> bool {
    let absent: Vec<&str> = tools.iter().copied().filter(|t| !on_path(t)).collect();
    if absent.is_empty() {
        return true;
    }
    missing(&format!("not installed: {}", absent.join(", ")));
    false
}

/// Whether `tool` is installed; `missing(...)` when it is not.
pub fn have(tool: &str) -> bool {
    tools_present(&[tool])
}

/// Whether this process runs as root (effective uid); `missing(...)`
/// naming `what` needs it when it does not.
pub fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        missing(&format!("not root: {what} needs root"));
    }
    root
}

/// Runs `cmd` and returns its stdout; fails the test, with the command,
/// its exit status, stdout and stderr, when it cannot start or fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A scratch directory for one test (`$TMPDIR/runtrace-NAME-XXXX`) that
/// removes itself when dropped, whether the test passed or failed.
///
/// ```ignore
/// let dir = common::scratch_dir("pipeline");
/// let trace = dir.path().join("trace");
/// ```
pub fn scratch_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-{name}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a scratch directory for {name}: {e}"))
}

/// The trace files (`*.bin`) in `dir`, in recording order (format.md §11).
///
/// ```ignore
/// let files = common::trace_files(dir.path());
/// ```
pub fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    files
}

/// A `cargo` command for a nested build, without the variables cargo sets
/// for this test's own run (`CARGO_MANIFEST_DIR`, `OUT_DIR`,
/// `CARGO_PKG_*`, ...).
///
/// A build script that tracks one of them (ring's tracks
/// `CARGO_MANIFEST_DIR` and `OUT_DIR`) sees it change, from unset in
/// `cargo test`'s build to set here: it reruns, and everything above it
/// rebuilds (ring, rustls, reqwest, object_store, the recorder, every
/// test binary: 66 s on 2 cores), then again in the next build without
/// them.
///
/// ```ignore
/// let mut c = common::cargo();
/// c.args(["build", "--example", "quickstart"]);
/// ```
pub fn cargo() -> Command {
    let mut c = Command::new(env!("CARGO"));
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if matches!(
            k,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "OUT_DIR"
        ) || k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_BIN_")
        {
            c.env_remove(k);
        }
    }
    c
}

/// Whether this test binary comes from CI's `cargo test --workspace
/// --all-features` (the facade's optional backends are all on).
pub fn all_features_build() -> bool {
    cfg!(all(
        feature = "object-store",
        feature = "lttng",
        feature = "alloc",
        feature = "usdt",
        feature = "perf-probe",
        feature = "taskdump"
    ))
}

/// The arguments a nested `cargo build` of the facade's examples takes to
/// get `features` (comma-separated; empty: the default ones).
///
/// Under CI's all-features test build they are `--workspace
/// --all-features` instead: a superset of any `features`, and the very
/// feature set that build already compiled, so the nested build is a
/// fresh check (under a second) where another feature set recompiled ~80
/// crates (73 s on 2 cores) and replaced the uplifted `examples/NAME`
/// the other tests run.
///
/// ```ignore
/// common::cargo().args(["build", "--example", "quickstart"])
///     .args(common::feature_args("tokio,record"));
/// ```
pub fn feature_args(features: &str) -> Vec<&str> {
    if all_features_build() {
        vec!["--workspace", "--all-features"]
    } else if features.is_empty() {
        Vec::new()
    } else {
        vec!["--features", features]
    }
}

/// Builds the example with its default features ([`example_with`]).
pub fn example(name: &str) -> PathBuf {
    example_with(name, "")
}

/// Builds the example with `features` ([`feature_args`]; a fresh check
/// under CI's build, which already compiled it) and returns its path, next
/// to the test binaries.
pub fn example_with(name: &str, features: &str) -> PathBuf {
    let st = cargo()
        .args(["build", "--quiet", "--example", name])
        .args(feature_args(features))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success(), "cargo build --example {name} ({features})");
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(p.exists(), "{} not built", p.display());
    p
}

/// A 2-worker multi-thread tokio runtime with runtrace's hooks
/// (`runtrace_tokio::instrument`) and tokio's timers and IO: the service
/// most tests record.
pub fn instrumented_runtime() -> tokio::runtime::Runtime {
    runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .expect("build the instrumented runtime")
}
