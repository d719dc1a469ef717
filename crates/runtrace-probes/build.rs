//! Generates the built-in probes from `probes/events.toml` for the enabled
//! backends (this crate's features).

fn main() {
    // Read at run time, not baked in with `env!`: cargo reuses a build
    // script's binary across checkouts that share a target directory (a
    // `git worktree` built into the main one), and a baked-in path would
    // name the checkout that compiled it, perhaps long deleted.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let catalog = std::path::Path::new(&dir).join("../../probes/events.toml");
    let cat = runtrace_build::builtin_catalog(&catalog).unwrap_or_else(|e| panic!("{e}"));
    let on = |f: &str| std::env::var_os(format!("CARGO_FEATURE_{f}")).is_some();
    let b = runtrace_build::Backends {
        usdt: on("USDT"),
        lttng: on("LTTNG"),
        perf_probe: on("PERF_PROBE"),
        record: on("RECORD"),
    };
    runtrace_build::generate(&cat, b, "crate::__rt").unwrap_or_else(|e| panic!("{e}"));
}
