//! The parameters of the analyses' MCP tools: which ones a tool takes
//! ([`Param`], listed in [`crate::registry`]) and their values in one call
//! ([`Params`], read by [`crate::views`]).
//!
//! ```
//! use runtrace_analyze::params::{Param, Params};
//! let p = Params::defaults(&[Param::Limit(20, "entries"), Param::ThresholdMs]);
//! assert_eq!((p.limit, p.threshold_ns), (20, 10_000_000));
//! ```

use crate::blocked::BlockedOptions;
use crate::outliers::{Category, Method};

/// A parameter an MCP tool takes (besides `trace_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `limit`: at most this many entries per list (the default), the
    /// answer saying what it cut; `what` names the lists.
    Limit(usize, &'static str),
    /// `threshold_ms`: a wait longer than this many milliseconds counts
    /// (default 10).
    ThresholdMs,
    /// `method` of `detect_outliers` (default IQR).
    Method,
    /// `category` of `detect_outliers` (default all).
    Category,
    /// `kind` of `get_flamegraph`: `cpu` (default), `off_cpu`, `alloc`
    /// (bytes allocated) or `live` (bytes live at `to`, default the end).
    ProfileKind,
    /// `location`: only samples in polls of tasks whose spawn location
    /// contains this text.
    Location,
    /// `from` and `to`: only samples in this time range (ns since the
    /// recording started, either end optional).
    TimeRange,
    /// `resource`: only resource sites whose kind or creation site
    /// contains this text.
    Resource,
}

/// The parameters of one tool call, parsed (defaults filled in).
#[derive(Debug, Clone)]
pub struct Params {
    /// `limit`.
    pub limit: usize,
    /// `threshold_ms`, in ns.
    pub threshold_ns: u64,
    /// `method`.
    pub method: Method,
    /// `category`.
    pub category: Category,
    /// `kind` is `off_cpu`.
    pub off_cpu: bool,
    /// `kind` is `alloc` or `live` (`live` at `to`, default the end).
    pub memory: Option<crate::folded::MemoryView>,
    /// `location`.
    pub location: Option<String>,
    /// `from` (ns since the recording started).
    pub from_ns: Option<i64>,
    /// `to` (ns since the recording started).
    pub to_ns: Option<i64>,
    /// `resource`.
    pub resource: Option<String>,
}

impl Params {
    /// The defaults of a tool taking `params`.
    pub fn defaults(params: &[Param]) -> Params {
        let limit = params
            .iter()
            .find_map(|p| match p {
                Param::Limit(n, _) => Some(*n),
                _ => None,
            })
            .unwrap_or(usize::MAX);
        Params {
            limit,
            threshold_ns: BlockedOptions::default().threshold_ns,
            method: Method::Iqr,
            category: Category::All,
            off_cpu: false,
            memory: None,
            location: None,
            from_ns: None,
            to_ns: None,
            resource: None,
        }
    }
}
