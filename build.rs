//! Tells dependents' build scripts which probe backends this build of
//! runtrace has (`DEP_RUNTRACE_BACKENDS`), so application probes generated
//! by `runtrace-build` match.

fn main() {
    let mut v = Vec::new();
    for (feat, name) in [
        ("USDT", "usdt"),
        ("LTTNG", "lttng"),
        ("PERF_PROBE", "perf-probe"),
        ("RECORD", "record"),
    ] {
        if std::env::var_os(format!("CARGO_FEATURE_{feat}")).is_some() {
            v.push(name);
        }
    }
    println!("cargo:backends={}", v.join(","));
}
