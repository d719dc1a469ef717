//! Sections shared by the text reports.

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
