//! Human-readable units and sections shared by the reports.
//!
//! ```
//! assert_eq!(runtrace_analyze::fmt_ns(1_500), "1.5 µs");
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

/// The `=== Errors (N)` section of a text report (nothing without errors).
pub(crate) fn errors_section(
    f: &mut std::fmt::Formatter<'_>,
    errors: &[String],
) -> std::fmt::Result {
    if errors.is_empty() {
        return Ok(());
    }
    writeln!(f)?;
    writeln!(
        f,
        "=== Errors ({}): the report covers what was readable",
        errors.len()
    )?;
    for e in errors {
        writeln!(f, "{e}")?;
    }
    Ok(())
}
