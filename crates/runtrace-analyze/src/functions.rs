//! Functions of CPU samples: stacks named once each ([`StackNames`], over
//! `runtrace_symbolize`) and the top functions of a set of samples, self
//! and inclusive ([`Tally`]). `runtrace blocked`, the `functions` of
//! `runtrace analyze`'s findings and `runtrace flamegraph` share them.
//!
//! ```
//! use runtrace_analyze::functions::Tally;
//! use runtrace_symbolize::Frame;
//! use std::sync::Arc;
//! let f = |name: &str| Frame {
//!     function: Arc::from(name),
//!     file: None,
//!     line: None,
//!     inlined: false,
//!     module: Arc::from("app"),
//! };
//! let mut t = Tally::default();
//! t.add(&[f("parse"), f("handle"), f("main")], 0, 3); // leaf first
//! t.add(&[f("handle"), f("main")], 0, 1);
//! assert_eq!(&*t.top_self(1)[0].function, "parse");
//! assert_eq!(t.top_self(1)[0].share, 0.75);
//! assert_eq!(&*t.top_inclusive(1)[0].function, "handle"); // then "main": the deeper first
//! assert_eq!(t.top_inclusive(1)[0].inclusive, 4);
//! ```

use runtrace_format::frame::Mapping;
use runtrace_symbolize::{Frame, SymbolizeOptions, Symbolizer};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Names stacks of addresses, each distinct stack once (a profile repeats
/// the same stacks many times; the symbolizer caches per address).
pub struct StackNames {
    sym: Symbolizer,
    cache: HashMap<Arc<[u64]>, Arc<[Frame]>>,
}

impl StackNames {
    /// Names stacks with `sym`.
    ///
    /// ```
    /// use runtrace_analyze::functions::StackNames;
    /// use runtrace_symbolize::Symbolizer;
    /// use std::sync::Arc;
    /// let mut n = StackNames::new(Symbolizer::new(&[], Default::default()));
    /// let frames = n.frames(&Arc::from(&[0x10u64][..]));
    /// assert_eq!(&*frames[0].function, "[unknown] 0x10");
    /// ```
    pub fn new(sym: Symbolizer) -> StackNames {
        StackNames {
            sym,
            cache: HashMap::new(),
        }
    }

    /// Names the stacks of `profile` with its recorded mappings (binaries
    /// looked up at their recorded paths).
    ///
    /// ```
    /// use runtrace_analyze::functions::StackNames;
    /// use runtrace_model::profile::Profile;
    /// let names = StackNames::recorded(&Profile::default());
    /// assert!(names.problems().is_empty());
    /// ```
    pub fn recorded(profile: &runtrace_model::profile::Profile) -> StackNames {
        StackNames::for_mappings(&profile.mappings, SymbolizeOptions::default())
    }

    /// Names stacks of a process with these executable `mappings` (a
    /// profile's), binaries also looked up as `opts` says.
    pub fn for_mappings(mappings: &[Mapping], opts: SymbolizeOptions) -> StackNames {
        StackNames::new(Symbolizer::new(mappings, opts))
    }

    /// The frames of `stack` (addresses leaf first), leaf first, inlined
    /// frames expanded.
    pub fn frames(&mut self, stack: &Arc<[u64]>) -> Arc<[Frame]> {
        if let Some(f) = self.cache.get(stack) {
            return f.clone();
        }
        let f: Arc<[Frame]> = self.sym.stack(stack).into();
        self.cache.insert(stack.clone(), f.clone());
        f
    }

    /// What could not be symbolized, one line each (to print once).
    pub fn problems(&self) -> Vec<String> {
        self.sym.problems()
    }
}

/// The application's own frame of a stack: the first frame (from the
/// leaf) that is neither in a shared library (`*.so*`: libc's syscall
/// wrappers, the vDSO's clock), nor in Rust's standard library (source
/// under `/rustc/`: `std::thread::sleep`, `core::hint::black_box`), nor
/// unresolved; the leaf when there is none. Findings name the functions
/// of a poll by it: "blocked in `my_fn`", not in `clock_nanosleep`.
///
/// ```
/// use runtrace_analyze::functions::own_frame;
/// use runtrace_symbolize::Frame;
/// use std::sync::Arc;
/// let f = |name: &str, file: &str, module: &str| Frame {
///     function: Arc::from(name),
///     file: Some(Arc::from(file)),
///     line: None,
///     inlined: false,
///     module: Arc::from(module),
/// };
/// let stack = [
///     f("clock_nanosleep", "clock_nanosleep.c", "libc.so.6"),
///     f("std::thread::sleep", "/rustc/17067e9/library/std/src/thread/mod.rs", "app"),
///     f("app::audit", "/src/app/src/audit.rs", "app"),
///     f("main", "/src/app/src/main.rs", "app"),
/// ];
/// assert_eq!(own_frame(&stack), 2);
/// assert_eq!(own_frame(&stack[..2]), 0); // none: the leaf
/// ```
pub fn own_frame(frames: &[Frame]) -> usize {
    frames.iter().position(is_own).unwrap_or(0)
}

/// A frame of the application's code ([`own_frame`]'s rule): resolved,
/// outside shared libraries (the kernel's `[vdso]` included) and Rust's
/// standard library.
pub fn is_own(f: &Frame) -> bool {
    !f.is_unknown()
        && !f.module.contains(".so")
        && &*f.module != "[vdso]"
        && !f.file.as_deref().is_some_and(|p| p.starts_with("/rustc/"))
}

/// One function of a [`Tally`].
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionStat {
    /// Function name (demangled), or `[unknown] ...`.
    pub function: Arc<str>,
    /// Source file of its most frequent line.
    pub file: Option<Arc<str>>,
    /// Its most frequent line (where it was when sampled).
    pub line: Option<u32>,
    /// Samples where it was the reported frame (self).
    pub samples: u64,
    /// Their weight (samples, or off-CPU time).
    pub weight: u64,
    /// Weight of the samples it was anywhere in the stack (inclusive).
    pub inclusive: u64,
    /// `weight` over the tally's total.
    pub share: f64,
    /// `inclusive` over the tally's total.
    pub inclusive_share: f64,
    /// The function it was most often in when it was the reported frame
    /// but not the leaf (the call it made: `std::thread::sleep`), if any.
    pub via: Option<Arc<str>>,
}

impl FunctionStat {
    /// `{function, file, line, samples, share}` (and `inclusive`,
    /// `inclusive_share` with `inclusive`).
    pub fn to_json(&self, inclusive: bool) -> Value {
        let mut v = json!({
            "function": &*self.function,
            "file": self.file.as_deref(),
            "line": self.line,
            "samples": self.samples,
            "share": self.share,
        });
        if inclusive {
            v["inclusive"] = json!(self.inclusive);
            v["inclusive_share"] = json!(self.inclusive_share);
        }
        v
    }

    /// `name (dir/file.rs:line)` (the file's last two path components),
    /// then ` via callee` when it has one.
    pub fn label(&self) -> String {
        let mut s = match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{} ({}:{l})", self.function, short_path(f)),
            (Some(f), None) => format!("{} ({})", self.function, short_path(f)),
            _ => self.function.to_string(),
        };
        if let Some(v) = &self.via {
            s.push_str(" via ");
            s.push_str(v);
        }
        s
    }
}

/// `a/b/c/d.rs` -> `c/d.rs`.
fn short_path(p: &str) -> &str {
    match p.rmatch_indices('/').nth(1) {
        Some((i, _)) => &p[i + 1..],
        None => p,
    }
}

/// A source position: (file, line).
type Line = (Option<Arc<str>>, Option<u32>);

#[derive(Default)]
struct Entry {
    samples: u64,
    weight: u64,
    inclusive: u64,
    /// Weight by (file, line) where the function was the reported frame,
    /// or anywhere when never reported.
    lines: BTreeMap<Line, u64>,
    self_lines: bool,
    /// Weight by the function it called, when reported above the leaf.
    vias: BTreeMap<Arc<str>, u64>,
    /// Its deepest position, counted from the root (thread start: 0).
    depth: usize,
    /// Application code ([`is_own`]).
    own: bool,
}

/// Samples by function: self (the reported frame of each sample) and
/// inclusive (every function of its stack, once per sample), weighted.
#[derive(Default)]
pub struct Tally {
    total: u64,
    samples: u64,
    by_fn: HashMap<Arc<str>, Entry>,
}

impl Tally {
    /// Adds one sample whose frames are `frames` (leaf first; empty: an
    /// undefined stack), reported at `frames[reported]`, with `weight`.
    pub fn add(&mut self, frames: &[Frame], reported: usize, weight: u64) {
        self.total = self.total.saturating_add(weight);
        self.samples += 1;
        for (i, f) in frames.iter().enumerate() {
            let first = !frames[..i].iter().any(|g| g.function == f.function);
            let e = self.by_fn.entry(f.function.clone()).or_default();
            e.depth = e.depth.max(frames.len() - 1 - i);
            e.own |= is_own(f);
            if first {
                e.inclusive = e.inclusive.saturating_add(weight);
            }
            let key = (f.file.clone(), f.line);
            if i == reported {
                if i > 0 {
                    *e.vias.entry(frames[i - 1].function.clone()).or_insert(0) += weight;
                }
                e.samples += 1;
                e.weight = e.weight.saturating_add(weight);
                if !e.self_lines {
                    e.lines.clear();
                    e.self_lines = true;
                }
                *e.lines.entry(key).or_insert(0) += weight;
            } else if first && !e.self_lines {
                *e.lines.entry(key).or_insert(0) += weight;
            }
        }
    }

    /// Total weight added.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Samples added.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    fn stat(&self, name: &Arc<str>, e: &Entry) -> FunctionStat {
        // The most frequent line; ties: the first in (file, line) order.
        let mut best: Option<(&Line, u64)> = None;
        for (k, &w) in &e.lines {
            if best.is_none_or(|b| w > b.1) {
                best = Some((k, w));
            }
        }
        let (file, line) = best.map_or((None, None), |b| b.0.clone());
        let mut via: Option<(&Arc<str>, u64)> = None;
        for (k, &w) in &e.vias {
            if via.is_none_or(|b| w > b.1) {
                via = Some((k, w));
            }
        }
        let t = self.total.max(1) as f64;
        FunctionStat {
            function: name.clone(),
            file,
            line,
            samples: e.samples,
            weight: e.weight,
            inclusive: e.inclusive,
            share: e.weight as f64 / t,
            inclusive_share: e.inclusive as f64 / t,
            via: via.map(|v| v.0.clone()),
        }
    }

    /// The `n` functions with the most self weight, most first (ties by
    /// name).
    pub fn top_self(&self, n: usize) -> Vec<FunctionStat> {
        let mut v: Vec<(&Arc<str>, &Entry)> =
            self.by_fn.iter().filter(|(_, e)| e.weight > 0).collect();
        v.sort_by(|a, b| b.1.weight.cmp(&a.1.weight).then(a.0.cmp(b.0)));
        v.truncate(n);
        v.into_iter().map(|(k, e)| self.stat(k, e)).collect()
    }

    /// The `n` functions of the application ([`is_own`]; all when none
    /// is) with the most inclusive weight, most first; among equals the
    /// deepest first. The trunk of functions every sample goes through
    /// (the thread's start, the runtime's poll loop, the task) is listed
    /// as its deepest function only.
    pub fn top_inclusive(&self, n: usize) -> Vec<FunctionStat> {
        let any_own = self.by_fn.values().any(|e| e.own && e.inclusive > 0);
        let mut v: Vec<(&Arc<str>, &Entry)> = self
            .by_fn
            .iter()
            .filter(|(_, e)| e.inclusive > 0 && (e.own || !any_own))
            .collect();
        // The trunk every sample goes through is one entry: its deepest.
        let trunk = v
            .iter()
            .filter(|(_, e)| e.inclusive == self.total)
            .map(|(_, e)| e.depth)
            .max();
        v.retain(|(_, e)| e.inclusive < self.total || Some(e.depth) == trunk);
        v.sort_by(|a, b| {
            (b.1.inclusive, b.1.depth)
                .cmp(&(a.1.inclusive, a.1.depth))
                .then(a.0.cmp(b.0))
        });
        v.truncate(n);
        v.into_iter().map(|(k, e)| self.stat(k, e)).collect()
    }
}
