//! Human-readable units shared by the reports.
//!
//! ```
//! assert_eq!(runtrace_model::fmt_ns(1_500), "1.5 µs");
//! ```

/// Human-readable duration.
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}
