//! The memory profile per spawn location and per span (`runtrace
//! analyze`'s memory tables and its `memory_growth` finding, the MCP tool
//! `get_memory_growth`): bytes allocated and their rate, bytes live at the
//! end, the locations whose live bytes grow steadily, and the live bytes
//! over time ([`live_over_time`], the HTML report's chart).
//!
//! # The growth rule (docs/analysis.md, "memory_growth")
//! The recording `[0, end]` is cut into [`BUCKETS`] equal buckets; a
//! location's live bytes are measured at each bucket's end (the weights of
//! its tracked samples made by then and not freed by then). A least-squares
//! line through those points gives the slope (bytes/s) and R². A location
//! grows when the slope is positive, R² >= [`MIN_R2`], and the live bytes
//! at the end exceed those at the first bucket's end by at least
//! [`MIN_GROWTH_BYTES`] and by at least [`MIN_GROWTH_SHARE`] of the end's.
//! Untracked samples (the live set had no room) never count as live.
//!
//! ```
//! use runtrace_analyze::memory::fit;
//! let (slope, r2) = fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]);
//! assert_eq!((slope, r2), (2.0, 1.0));
//! ```

use crate::functions::{is_own, StackNames};
use runtrace_model::profile::{AllocSample, Live, Profile};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Time buckets the growth rule measures live bytes at.
pub const BUCKETS: usize = 10;
/// R² a growth must reach: steady, not a spike.
pub const MIN_R2: f64 = 0.8;
/// Least growth (end minus first bucket) that is reported.
pub const MIN_GROWTH_BYTES: u64 = 1 << 20;
/// Least growth as a share of the live bytes at the end.
pub const MIN_GROWTH_SHARE: f64 = 0.25;

/// What one spawn location allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct LocationMemory {
    /// `file:line:col`, or `(outside tasks)` for allocations made outside
    /// every poll.
    pub location: String,
    /// Bytes allocated (the sum of the samples' weights).
    pub alloc_bytes: u64,
    /// `alloc_bytes` per second of recording.
    pub alloc_bytes_per_sec: f64,
    /// Allocation samples.
    pub samples: u64,
    /// Bytes live at the end (None: no live set in the trace).
    pub live_end_bytes: Option<u64>,
}

/// What the allocations made inside one span label allocated
/// ([`per_span`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanMemory {
    /// The span's label (`GET /item`, `db.query`:
    /// [`runtrace_model::spans::label`]), or `(outside spans)`.
    pub span: String,
    /// Bytes allocated (the sum of the samples' weights).
    pub alloc_bytes: u64,
    /// `alloc_bytes` per second of recording.
    pub alloc_bytes_per_sec: f64,
    /// Allocation samples.
    pub samples: u64,
    /// Bytes live at the end (None: no live set in the trace).
    pub live_end_bytes: Option<u64>,
}

/// A location whose live bytes grow steadily.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    /// The spawn location.
    pub location: String,
    /// The function (of the application's code) holding most of the
    /// location's live bytes at the end, as symbolized.
    pub function: String,
    /// Least-squares slope, bytes per second.
    pub slope_bytes_per_sec: f64,
    /// R² of that fit.
    pub r2: f64,
    /// Live bytes at the end of the first bucket.
    pub start_bytes: u64,
    /// Live bytes at the end.
    pub end_bytes: u64,
}

impl Growth {
    /// The finding's sentence, cause first.
    pub fn detail(&self) -> String {
        format!(
            "{} keeps memory allocated in {}: its live bytes grow steadily, {} -> {} over the recording ({}/s, R² {:.2})",
            self.location,
            self.function,
            bytes(self.start_bytes),
            bytes(self.end_bytes),
            bytes(self.slope_bytes_per_sec.max(0.0) as u64),
            self.r2
        )
    }

    /// As JSON (the finding's evidence, `get_memory_growth`'s items).
    pub fn to_json(&self) -> Value {
        json!({
            "location": self.location,
            "function": self.function,
            "slope_bytes_per_sec": self.slope_bytes_per_sec,
            "r2": self.r2,
            "start_bytes": self.start_bytes,
            "end_bytes": self.end_bytes,
        })
    }
}

/// Bytes for a person: `512 B`, `3.0 KiB`, `12.5 MiB`, `1.2 GiB`.
pub fn bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1024 {
        format!("{b} B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else if f < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", f / (1024.0 * 1024.0))
    } else {
        format!("{:.1} GiB", f / (1024.0 * 1024.0 * 1024.0))
    }
}

/// The least-squares slope of `points` (x, y) and its R² (0 when y does
/// not vary or there are fewer than 2 points).
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.len() < 2 {
        return (0.0, 0.0);
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my) * (p.1 - my)).sum();
    if sxx == 0.0 || syy == 0.0 {
        return (0.0, 0.0);
    }
    let slope = sxy / sxx;
    (slope, (sxy * sxy) / (sxx * syy))
}

const OUTSIDE: &str = "(outside tasks)";

fn location(s: &AllocSample) -> &str {
    s.location.as_deref().unwrap_or(OUTSIDE)
}

/// The end of the recording as the profile shows it: `duration_ns` when
/// known (> 0), else the last allocation or free.
fn end_ns(profile: &Profile, duration_ns: u64) -> i64 {
    if duration_ns > 0 {
        return duration_ns as i64;
    }
    profile
        .allocs
        .iter()
        .map(|s| s.freed_ns.unwrap_or(s.ts_ns).max(s.ts_ns))
        .max()
        .unwrap_or(0)
}

/// Bytes allocated and live at the end per spawn location (runtrace's own
/// threads left out), most allocated first; `duration_ns` is the
/// recording's length (0: take the last sample's time).
///
/// ```
/// use runtrace_model::profile::Profile;
/// assert!(runtrace_analyze::memory::per_location(&Profile::default(), 0).is_empty());
/// ```
pub fn per_location(profile: &Profile, duration_ns: u64) -> Vec<LocationMemory> {
    tally(profile, duration_ns, location)
        .into_iter()
        .map(|(location, t)| LocationMemory {
            location,
            alloc_bytes: t.alloc_bytes,
            alloc_bytes_per_sec: t.alloc_bytes_per_sec,
            samples: t.samples,
            live_end_bytes: t.live_end_bytes,
        })
        .collect()
}

/// Samples made while no span was entered on their thread.
pub const OUTSIDE_SPANS: &str = "(outside spans)";

/// Bytes allocated and live at the end per span label: each allocation
/// sample counts for the span current on its thread when it was made
/// (the innermost entered, [`AllocSample::span`]; none: [`OUTSIDE_SPANS`]),
/// runtrace's own threads left out, most allocated first. Empty when no
/// sample was made inside a span (a trace without spans). A span's live
/// bytes are those of its allocations still live at the end, whether the
/// span closed or not. `duration_ns` as for [`per_location`].
///
/// ```
/// use runtrace_model::profile::{AllocSample, Live, Profile};
/// let s = |span: Option<&str>, weight| AllocSample {
///     ts_ns: 10, tid: 1, thread: String::new(), stack: Vec::new().into(), size: 64,
///     weight, live: Live::Off, freed_ns: None, task: None, location: None,
///     worker: None, span: span.map(Into::into),
/// };
/// let p = Profile {
///     allocs: vec![s(Some("GET /item"), 4096), s(Some("GET /item"), 4096), s(None, 100)],
///     ..Profile::default()
/// };
/// let m = runtrace_analyze::memory::per_span(&p, 1_000_000_000);
/// assert_eq!((m[0].span.as_str(), m[0].alloc_bytes, m[0].samples), ("GET /item", 8192, 2));
/// assert_eq!(m[1].span, "(outside spans)");
/// assert_eq!(m[0].live_end_bytes, None); // no live set
/// ```
pub fn per_span(profile: &Profile, duration_ns: u64) -> Vec<SpanMemory> {
    if !profile.allocs.iter().any(|s| s.span.is_some()) {
        return Vec::new();
    }
    tally(profile, duration_ns, |s| {
        s.span.as_deref().unwrap_or(OUTSIDE_SPANS)
    })
    .into_iter()
    .map(|(span, t)| SpanMemory {
        span,
        alloc_bytes: t.alloc_bytes,
        alloc_bytes_per_sec: t.alloc_bytes_per_sec,
        samples: t.samples,
        live_end_bytes: t.live_end_bytes,
    })
    .collect()
}

/// The sums of [`per_location`] and [`per_span`] for one key.
#[derive(Default)]
struct Tally {
    alloc_bytes: u64,
    alloc_bytes_per_sec: f64,
    samples: u64,
    live_end_bytes: Option<u64>,
}

/// The samples (runtrace's own threads left out) summed by `key`, most
/// allocated first (ties by key).
fn tally<'a>(
    profile: &'a Profile,
    duration_ns: u64,
    key: impl Fn(&'a AllocSample) -> &'a str,
) -> Vec<(String, Tally)> {
    let secs = (end_ns(profile, duration_ns).max(1) as f64) / 1e9;
    let live_set = profile.memory.live_set;
    let mut by: BTreeMap<&str, Tally> = BTreeMap::new();
    for s in profile.allocs.iter().filter(|s| !is_runtrace(s)) {
        let e = by.entry(key(s)).or_insert_with(|| Tally {
            live_end_bytes: live_set.then_some(0),
            ..Tally::default()
        });
        e.alloc_bytes = e.alloc_bytes.saturating_add(s.weight);
        e.samples += 1;
        if let Some(live) = &mut e.live_end_bytes {
            if s.live_at(i64::MAX) {
                *live = live.saturating_add(s.weight);
            }
        }
    }
    let mut out: Vec<(String, Tally)> = by
        .into_iter()
        .map(|(k, mut t)| {
            t.alloc_bytes_per_sec = t.alloc_bytes as f64 / secs;
            (k.to_string(), t)
        })
        .collect();
    out.sort_by(|a, b| b.1.alloc_bytes.cmp(&a.1.alloc_bytes).then(a.0.cmp(&b.0)));
    out
}

fn is_runtrace(s: &AllocSample) -> bool {
    runtrace_model::profile::is_runtrace_thread(&s.thread)
}

/// The frame of the code that allocated, in a leaf-first stack: past the
/// global allocator's shim (`__rust_alloc`, `__rust_realloc`, ...; above
/// it are the wrapper and the sampler), the first frame of the
/// application's own code ([`is_own`]) that is not the sampler's nor the
/// standard library's (`alloc::`, `core::`, `std::`, which line tables
/// alone may leave without a file). The Parquet `alloc_samples` table
/// names its `function` by it too.
///
/// ```
/// use runtrace_symbolize::Frame;
/// use std::sync::Arc;
/// let f = |name: &str, file: &str| Frame {
///     function: Arc::from(name), file: Some(Arc::from(file)), line: None,
///     inlined: false, module: Arc::from("app"),
/// };
/// let stack = [
///     f("on_alloc", "/src/runtrace/crates/runtrace-profile/src/alloc.rs"),
///     f("__rustc::__rust_alloc", "/src/app/src/main.rs"),
///     f("alloc::raw_vec::finish_grow", "/rustc/abc/library/alloc/src/raw_vec.rs"),
///     f("app::cache::remember", "/src/app/src/cache.rs"),
/// ];
/// let site = runtrace_analyze::memory::allocating_frame(&stack).unwrap();
/// assert_eq!(&*site.function, "app::cache::remember");
/// ```
pub fn allocating_frame(
    frames: &[runtrace_symbolize::Frame],
) -> Option<&runtrace_symbolize::Frame> {
    let shim = |f: &runtrace_symbolize::Frame| {
        let n = &*f.function;
        n.contains("__rust_alloc")
            || n.contains("__rust_realloc")
            || n.contains("__rdl_")
            || n.contains("__rg_")
    };
    let start = frames.iter().rposition(shim).map_or(0, |i| i + 1);
    frames[start..].iter().find(|f| {
        let n = f.function.trim_start_matches('<');
        is_own(f)
            && !f
                .file
                .as_deref()
                .is_some_and(|p| p.ends_with("runtrace-profile/src/alloc.rs"))
            && !["alloc::", "core::", "std::"]
                .iter()
                .any(|p| n.starts_with(p))
    })
}

/// The sampled bytes live over the recording: at `points` instants
/// evenly spaced over `[0, end]` (the `k`-th at `end * k / points`, `k` =
/// 1..=points, so the last is the end), each `(ns since the start, live
/// bytes)`: the weights of the tracked samples (runtrace's own threads
/// left out) made by then and not freed by then, as [`growth`] measures
/// them. Empty without a live set. `duration_ns` as for [`per_location`].
///
/// ```
/// use runtrace_model::profile::{AllocSample, Live, MemoryInfo, Profile};
/// let s = |ts_ns, freed_ns| AllocSample {
///     ts_ns, tid: 1, thread: String::new(), stack: Vec::new().into(), size: 64,
///     weight: 1000, live: Live::Tracked, freed_ns, task: None, location: None,
///     worker: None, span: None,
/// };
/// let p = Profile {
///     allocs: vec![s(10, None), s(20, Some(60)), s(70, None)],
///     memory: MemoryInfo { live_set: true, ..MemoryInfo::default() },
///     ..Profile::default()
/// };
/// let live = runtrace_analyze::memory::live_over_time(&p, 100, 4);
/// assert_eq!(live, [(25, 2000), (50, 2000), (75, 2000), (100, 2000)]);
/// let live = runtrace_analyze::memory::live_over_time(&p, 100, 10);
/// assert_eq!(live[5], (60, 1000)); // freed at 60
/// ```
pub fn live_over_time(profile: &Profile, duration_ns: u64, points: usize) -> Vec<(i64, u64)> {
    if !profile.memory.live_set || points == 0 {
        return Vec::new();
    }
    let end = end_ns(profile, duration_ns).max(0);
    // (time, +weight) at each allocation, (time, -weight) at its free.
    let mut deltas: Vec<(i64, i128)> = Vec::new();
    for s in profile
        .allocs
        .iter()
        .filter(|s| s.live == Live::Tracked && !is_runtrace(s))
    {
        deltas.push((s.ts_ns, s.weight as i128));
        if let Some(f) = s.freed_ns {
            deltas.push((f, -(s.weight as i128)));
        }
    }
    // Frees before allocations at one instant: live_at(t) is false when
    // freed at t.
    deltas.sort_unstable_by_key(|d| (d.0, d.1 > 0));
    let mut out = Vec::with_capacity(points);
    let (mut i, mut live) = (0usize, 0i128);
    for k in 1..=points {
        let t = (end as i128 * k as i128 / points as i128) as i64;
        while i < deltas.len() && deltas[i].0 <= t {
            live += deltas[i].1;
            i += 1;
        }
        out.push((t, live.max(0) as u64));
    }
    out
}

/// The locations whose live bytes grow steadily (the module doc's rule),
/// fastest first; empty without a live set. Each names the function
/// holding most of its live bytes at the end.
pub fn growth(profile: &Profile, duration_ns: u64, names: &mut StackNames) -> Vec<Growth> {
    if !profile.memory.live_set {
        return Vec::new();
    }
    let end = end_ns(profile, duration_ns);
    if end <= 0 {
        return Vec::new();
    }
    let at: Vec<i64> = (1..=BUCKETS)
        .map(|k| (end as i128 * k as i128 / BUCKETS as i128) as i64)
        .collect();
    let mut by: BTreeMap<&str, Vec<&AllocSample>> = BTreeMap::new();
    for s in profile.allocs.iter() {
        if s.live == Live::Tracked && s.location.is_some() && !is_runtrace(s) {
            by.entry(location(s)).or_default().push(s);
        }
    }
    let mut out = Vec::new();
    for (loc, samples) in by {
        let live: Vec<u64> = at
            .iter()
            .map(|&t| {
                samples
                    .iter()
                    .filter(|s| s.live_at(t))
                    .map(|s| s.weight)
                    .sum()
            })
            .collect();
        let points: Vec<(f64, f64)> = at
            .iter()
            .zip(&live)
            .map(|(&t, &b)| (t as f64 / 1e9, b as f64))
            .collect();
        let (slope, r2) = fit(&points);
        let (start, last) = (live[0], live[BUCKETS - 1]);
        let grew = last.saturating_sub(start);
        if slope <= 0.0
            || r2 < MIN_R2
            || grew < MIN_GROWTH_BYTES
            || (grew as f64) < MIN_GROWTH_SHARE * last as f64
        {
            continue;
        }
        // The function holding most of the live bytes at the end.
        let mut held: BTreeMap<String, u64> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.live_at(end)) {
            let frames = names.frames(&s.stack);
            let f = allocating_frame(&frames)
                .or(frames.first())
                .map_or_else(|| "[no stack]".to_string(), |f| f.function.to_string());
            *held.entry(f).or_default() += s.weight;
        }
        let function = held
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map_or_else(|| "[no stack]".to_string(), |(f, _)| f);
        out.push(Growth {
            location: loc.to_string(),
            function,
            slope_bytes_per_sec: slope,
            r2,
            start_bytes: start,
            end_bytes: last,
        });
    }
    out.sort_by(|a, b| b.slope_bytes_per_sec.total_cmp(&a.slope_bytes_per_sec));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_of_a_flat_and_a_noisy_series() {
        assert_eq!(fit(&[(0.0, 5.0), (1.0, 5.0), (2.0, 5.0)]), (0.0, 0.0));
        let (s, r2) = fit(&[(0.0, 0.0), (1.0, 10.0), (2.0, 0.0), (3.0, 10.0)]);
        assert!(s > 0.0 && r2 < 0.5, "{s} {r2}");
    }

    #[test]
    fn bytes_for_people() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}
