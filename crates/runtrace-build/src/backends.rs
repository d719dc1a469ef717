//! Which backends to generate, as the `runtrace` facade's features pick
//! them.
//!
//! ```
//! let b = runtrace_build::Backends::parse("usdt,record");
//! assert!(b.usdt && b.record && !b.lttng);
//! assert_eq!(b.list(), "usdt,record");
//! ```

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
