//! TEMPORARY: the contract's `runtrace_format::frame::Mapping`, until the
//! w3-fmt branch that defines it is merged (then this file goes away).

/// An executable file-backed mapping of the recorded process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub file_offset: u64,
    /// GNU build id (empty: unknown).
    pub build_id: Vec<u8>,
    /// Path of the file.
    pub path: String,
}
