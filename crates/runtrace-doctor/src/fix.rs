//! The "Fix:" list of the report: exact remedies, each given once even
//! when several checks call for it.

/// Adds `text` to the fixes unless it is there already.
pub(crate) fn push_fix(fix: &mut Vec<String>, text: String) {
    if !fix.contains(&text) {
        fix.push(text);
    }
}
