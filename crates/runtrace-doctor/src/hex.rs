//! Addresses and offsets as the report and its messages print them.

/// `0x1f40`.
pub(crate) fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// `0x1f40`, or `-` when unknown.
pub(crate) fn hex_opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), hex)
}

/// `0x1000` or `-0x1000` (a segment's `p_vaddr - p_offset`).
pub(crate) fn signed_hex(v: i128) -> String {
    if v < 0 {
        format!("-{:#x}", -v)
    } else {
        format!("{v:#x}")
    }
}
