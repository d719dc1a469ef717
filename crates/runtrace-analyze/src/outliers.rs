//! `runtrace outliers`: statistical outliers of wake->poll delay
//! (`latency`), poll duration (`poll`) and CPU share (`cpu`), judged
//! within each spawn location and within each task.
//!
//! The [`Outliers`] pass collects one sample per wake->poll delay and per
//! poll (with its task, spawn location, worker and time window), and one
//! per task and [`CPU_WINDOW_NS`] window in which the task ran (its share
//! of that window spent in polls). [`Outliers::report`] groups the samples
//! by spawn location and by task, and flags in each group of at least
//! [`MIN_SAMPLES`] the samples beyond the [bounds] of the chosen
//! [`Method`]:
//! - `iqr`: below Q1 - 1.5 IQR or above Q3 + 1.5 IQR (quartiles by linear
//!   interpolation between order statistics);
//! - `mad`: modified z-score 0.6745 |x - median| / MAD above 3.5 (a group
//!   whose MAD is 0 is skipped: the score is undefined);
//! - `stddev`: more than 3 population standard deviations from the mean;
//! - `percentile`: above the 99th percentile (interpolated).
//!
//! ```
//! use runtrace_analyze::outliers::{bounds, Method};
//! let mut v: Vec<f64> = (1..=20).map(|x| x as f64).collect();
//! v.push(1000.0);
//! let b = bounds(Method::Iqr, &mut v).unwrap();
//! assert!(1000.0 > b.hi && 20.0 < b.hi);
//! ```

use runtrace_format::NO_WORKER;
use runtrace_model::event::Ev;
use runtrace_model::fmt_ns;
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::lifecycle::{Life, Poll, Slots, Task};
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use serde_json::{json, Value};
use std::fmt::Write;

/// Groups with fewer samples are not judged (their statistics mean little).
pub const MIN_SAMPLES: usize = 10;

/// Width of the windows of the `cpu` category.
pub const CPU_WINDOW_NS: i64 = 10_000_000;

/// How outliers are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Beyond Q1 - 1.5 IQR / Q3 + 1.5 IQR.
    Iqr,
    /// Modified z-score above 3.5.
    Mad,
    /// Beyond 3 standard deviations.
    StdDev,
    /// Above the 99th percentile.
    Percentile,
}

impl Method {
    /// `iqr`, `mad`, `stddev` or `percentile` (any case).
    pub fn parse(s: &str) -> Result<Method, String> {
        match s.to_ascii_lowercase().as_str() {
            "iqr" => Ok(Method::Iqr),
            "mad" => Ok(Method::Mad),
            "stddev" => Ok(Method::StdDev),
            "percentile" => Ok(Method::Percentile),
            _ => Err(format!(
                "unknown outlier method {s:?}: expected iqr, mad, stddev or percentile"
            )),
        }
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Iqr => "iqr",
            Method::Mad => "mad",
            Method::StdDev => "stddev",
            Method::Percentile => "percentile",
        }
    }
}

/// Which values are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Wake (or spawn) -> poll start delays.
    Latency,
    /// Poll durations.
    Poll,
    /// A task's share of a [`CPU_WINDOW_NS`] window spent in polls.
    Cpu,
    /// All three.
    All,
}

impl Category {
    /// `latency`, `poll`, `cpu` or `all` (any case).
    pub fn parse(s: &str) -> Result<Category, String> {
        match s.to_ascii_lowercase().as_str() {
            "latency" => Ok(Category::Latency),
            "poll" => Ok(Category::Poll),
            "cpu" => Ok(Category::Cpu),
            "all" => Ok(Category::All),
            _ => Err(format!(
                "unknown outlier category {s:?}: expected latency, poll, cpu or all"
            )),
        }
    }
}

/// Values beyond these are outliers: above `hi`, or below `lo` when the
/// method has a lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Lower bound (None: the method flags high values only).
    pub lo: Option<f64>,
    /// Upper bound.
    pub hi: f64,
}

impl Bounds {
    /// Whether `x` is an outlier.
    pub fn outside(&self, x: f64) -> bool {
        x > self.hi || self.lo.is_some_and(|lo| x < lo)
    }
}

/// The `p` quantile (0..=1) of sorted values, interpolating linearly
/// between the order statistics at positions floor/ceil of p (n - 1).
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let i = pos.floor() as usize;
    let frac = pos - i as f64;
    match sorted.get(i + 1) {
        Some(&next) => sorted[i] + frac * (next - sorted[i]),
        None => sorted[i],
    }
}

/// The `p` quantile (0..=1) of `values` as [`quantile`] gives it for the
/// sorted values, by selection (O(n); `values` is reordered).
fn quantile_select(values: &mut [f64], p: f64) -> f64 {
    let pos = p * (values.len() - 1) as f64;
    let i = pos.floor() as usize;
    let frac = pos - i as f64;
    let (_, &mut x, above) = values.select_nth_unstable_by(i, f64::total_cmp);
    match above.iter().copied().min_by(f64::total_cmp) {
        Some(next) => x + frac * (next - x),
        None => x,
    }
}

/// [`bounds`] and the median of `values`, without sorting them where the
/// method needs only a few order statistics (the same values: each
/// quantile is the same pair of order statistics, interpolated alike).
fn bounds_and_median(method: Method, values: &mut [f64]) -> Option<(Bounds, f64)> {
    if values.len() < MIN_SAMPLES {
        return None;
    }
    let b = match method {
        Method::Iqr => {
            let (q1, q3) = (quantile_select(values, 0.25), quantile_select(values, 0.75));
            let iqr = q3 - q1;
            Bounds {
                lo: Some(q1 - 1.5 * iqr),
                hi: q3 + 1.5 * iqr,
            }
        }
        Method::Mad => {
            let m = quantile_select(values, 0.5);
            let mut dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
            let mad = quantile_select(&mut dev, 0.5);
            if mad <= 0.0 {
                return None;
            }
            let r = 3.5 * mad / 0.6745;
            Bounds {
                lo: Some(m - r),
                hi: m + r,
            }
        }
        Method::Percentile => Bounds {
            lo: None,
            hi: quantile_select(values, 0.99),
        },
        // Sums in sorted order, as `bounds` does (the same bits).
        Method::StdDev => {
            let b = bounds(method, values)?;
            return Some((b, quantile(values, 0.5)));
        }
    };
    Some((b, quantile_select(values, 0.5)))
}

/// The bounds of `method` over `values` (sorted in place), or None when
/// there are fewer than [`MIN_SAMPLES`] values or (MAD) no spread.
pub fn bounds(method: Method, values: &mut [f64]) -> Option<Bounds> {
    if values.len() < MIN_SAMPLES {
        return None;
    }
    values.sort_unstable_by(f64::total_cmp);
    match method {
        Method::Iqr => {
            let (q1, q3) = (quantile(values, 0.25), quantile(values, 0.75));
            let iqr = q3 - q1;
            Some(Bounds {
                lo: Some(q1 - 1.5 * iqr),
                hi: q3 + 1.5 * iqr,
            })
        }
        Method::Mad => {
            let m = quantile(values, 0.5);
            let mut dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
            dev.sort_unstable_by(f64::total_cmp);
            let mad = quantile(&dev, 0.5);
            if mad <= 0.0 {
                return None;
            }
            // 0.6745 |x - m| / MAD > 3.5  <=>  |x - m| > 3.5 MAD / 0.6745
            let r = 3.5 * mad / 0.6745;
            Some(Bounds {
                lo: Some(m - r),
                hi: m + r,
            })
        }
        Method::StdDev => {
            let n = values.len() as f64;
            let mean = values.iter().sum::<f64>() / n;
            let var = values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
            let s = var.sqrt();
            Some(Bounds {
                lo: Some(mean - 3.0 * s),
                hi: mean + 3.0 * s,
            })
        }
        Method::Percentile => Some(Bounds {
            lo: None,
            hi: quantile(values, 0.99),
        }),
    }
}

/// One judged value and what it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Process index ([`Model::procs`]).
    pub proc: u32,
    /// Task id.
    pub task: u64,
    /// The task's life ([`runtrace_model::lifecycle::Task::serial`]): the
    /// `task` scope's groups.
    pub serial: u32,
    /// Spawn location index ([`Model::locs`]).
    pub loc: u32,
    /// Worker index (`NO_WORKER`: none).
    pub worker: u32,
    /// Window start, ns since the recording started.
    pub start_ns: i64,
    /// Window end.
    pub end_ns: i64,
    /// The value (ns, or a share for `cpu`).
    pub value: f64,
}

/// The CPU window a task's polls are being summed into: (window index,
/// busy ns, last worker). A task's polls arrive in time order, so a window
/// is done when a later one starts (no map of all windows).
#[derive(Clone, Copy)]
struct CpuWindow {
    task: u64,
    window: i64,
    busy_ns: u64,
    worker: u32,
    loc: u32,
}

impl CpuWindow {
    /// The window's CPU sample.
    fn sample(self, proc: u32, serial: u32) -> Sample {
        Sample {
            proc,
            task: self.task,
            serial,
            loc: self.loc,
            worker: self.worker,
            start_ns: self.window * CPU_WINDOW_NS,
            end_ns: (self.window + 1) * CPU_WINDOW_NS,
            value: self.busy_ns as f64 / CPU_WINDOW_NS as f64,
        }
    }
}

/// The pass of `runtrace outliers`: collects the samples from the polls
/// the lifecycle pairs ([`runtrace_model::lifecycle`]).
#[derive(Default)]
pub struct Outliers {
    /// The CPU window being summed, per live task (by lifecycle slot).
    cpu_open: Slots<CpuWindow>,
    /// The same for polls after their task's end (no slot; by process and
    /// life: rare, so a map).
    cpu_late: FxHashMap<(u32, u32), CpuWindow>,
    /// Wake -> poll delays.
    pub latency: Vec<Sample>,
    /// Poll durations.
    pub poll: Vec<Sample>,
    /// CPU shares of the windows done (all after [`Pass::finish`]).
    pub cpu: Vec<Sample>,
}

impl Outliers {
    fn poll_start(&mut self, p: &Poll, model: &Model) {
        let proc = model.threads[p.thread as usize].proc;
        let pr = &model.procs[proc as usize];
        if let Some(w) = p.wake {
            let (s, e) = (pr.ns(w), pr.ns(p.start));
            self.latency.push(Sample {
                proc,
                task: p.task,
                serial: p.serial,
                loc: p.loc,
                worker: p.worker,
                start_ns: s,
                end_ns: e,
                value: (e - s).max(0) as f64,
            });
        }
    }

    fn poll_end(&mut self, p: &Poll, model: &Model) {
        let proc = model.threads[p.thread as usize].proc;
        let pr = &model.procs[proc as usize];
        let (s, e) = (pr.ns(p.start), pr.ns(p.end).max(pr.ns(p.start)));
        self.poll.push(Sample {
            proc,
            task: p.task,
            serial: p.serial,
            loc: p.loc,
            worker: p.worker,
            start_ns: s,
            end_ns: e,
            value: (e - s) as f64,
        });
        // Split the poll over the CPU windows it spans.
        let mut at = s;
        while at < e {
            let w = at.div_euclid(CPU_WINDOW_NS);
            let until = ((w + 1) * CPU_WINDOW_NS).min(e);
            let fresh = CpuWindow {
                task: p.task,
                window: w,
                busy_ns: 0,
                worker: p.worker,
                loc: p.loc,
            };
            let c = match self.cpu_open.get_or_insert_with(p.slot, || fresh) {
                Some(c) => c,
                None => self.cpu_late.entry((proc, p.serial)).or_insert(fresh),
            };
            if c.window != w {
                self.cpu.push(c.sample(proc, p.serial));
                *c = fresh;
            }
            c.busy_ns += (until - at) as u64;
            c.worker = p.worker;
            at = until;
        }
    }

    /// A task's life is over: its last CPU window is done.
    fn task_done(&mut self, t: &Task) {
        if let Some(c) = self.cpu_open.remove(t.slot) {
            self.cpu.push(c.sample(t.proc, t.serial));
        }
    }
}

impl Pass for Outliers {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE
    }

    fn event(&mut self, _ev: &Ev, _model: &Model) {}

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        match *rec {
            Life::PollStart(p) => self.poll_start(p, model),
            Life::PollEnd(p) => self.poll_end(p, model),
            Life::End(t) | Life::Alive(t) => self.task_done(t),
            _ => {}
        }
    }

    fn finish(&mut self, _model: &Model) {
        // Tasks whose polls were after their terminate (rule 4 of the
        // lifecycle) left a window open.
        for ((proc, serial), c) in std::mem::take(&mut self.cpu_late) {
            self.cpu.push(c.sample(proc, serial));
        }
        // The order of task ends is not the order of windows: the report
        // must not depend on either.
        self.cpu
            .sort_unstable_by_key(|s| (s.proc, s.task, s.start_ns));
    }
}

impl Outliers {
    /// The outliers of `category` by `method`, as JSON (keys in
    /// docs/mcp.md): per category the samples, groups judged and skipped,
    /// and the `limit` strongest outliers (furthest beyond their bound,
    /// relative to it), with `outliers_total` and `truncated`.
    pub fn report(&self, model: &Model, method: Method, category: Category, limit: usize) -> Value {
        let mut cats = serde_json::Map::new();
        let want = |c: Category| category == c || category == Category::All;
        if want(Category::Latency) {
            cats.insert(
                "latency".into(),
                judge(model, &self.latency, method, "ns", limit),
            );
        }
        if want(Category::Poll) {
            cats.insert("poll".into(), judge(model, &self.poll, method, "ns", limit));
        }
        if want(Category::Cpu) {
            cats.insert(
                "cpu".into(),
                judge(model, &self.cpu, method, "share", limit),
            );
        }
        json!({
            "method": method.as_str(),
            "min_samples": MIN_SAMPLES,
            "cpu_window_ns": CPU_WINDOW_NS,
            "limit": limit,
            "categories": cats,
        })
    }
}

/// One outlier found.
struct Hit {
    scope: &'static str,
    sample: usize,
    bound: f64,
    high: bool,
    group_samples: usize,
    group_median: f64,
    /// How far beyond its bound, relative to the bound.
    score: f64,
}

/// Judges the groups of `samples` (a scope: `group` gives each sample's
/// group as a dense id below `groups`), adding their outliers to `hits`;
/// returns (groups judged, groups skipped). Groups without samples do not
/// count.
fn judge_scope(
    samples: &[Sample],
    scope: &'static str,
    (group, groups): (Vec<u32>, usize),
    method: Method,
    hits: &mut Vec<Hit>,
) -> (u64, u64) {
    // Group by counting (linear): the group sizes, then every sample in
    // its group's range. The order groups are judged in does not show:
    // hits are ranked by score and sample afterwards.
    let mut size = vec![0u32; groups];
    for &g in &group {
        size[g as usize] += 1;
    }
    let mut start: Vec<u32> = Vec::with_capacity(size.len() + 1);
    let mut at = 0u32;
    for &n in &size {
        start.push(at);
        at += n;
    }
    start.push(at);
    // Each sample's value beside its index, in its group's range: the
    // groups are then read front to back (the samples are too many for
    // the cache; a gather per value costs a miss).
    let mut fill = start.clone();
    let mut grouped = vec![(0f64, 0u32); samples.len()];
    for (i, (s, &g)) in samples.iter().zip(&group).enumerate() {
        grouped[fill[g as usize] as usize] = (s.value, i as u32);
        fill[g as usize] += 1;
    }
    let (mut checked, mut skipped) = (0, 0);
    let mut vals = Vec::new();
    for g in 0..size.len() {
        let run = &grouped[start[g] as usize..start[g + 1] as usize];
        if run.is_empty() {
            continue;
        }
        if run.len() < MIN_SAMPLES {
            skipped += 1;
            continue;
        }
        vals.clear();
        vals.extend(run.iter().map(|&(v, _)| v));
        let Some((b, median)) = bounds_and_median(method, &mut vals) else {
            skipped += 1;
            continue;
        };
        checked += 1;
        for &(x, i) in run {
            if b.outside(x) {
                let high = x > b.hi;
                let bound = if high { b.hi } else { b.lo.unwrap_or(b.hi) };
                hits.push(Hit {
                    scope,
                    sample: i as usize,
                    bound,
                    high,
                    group_samples: run.len(),
                    group_median: median,
                    score: (x - bound).abs() / bound.abs().max(1e-9),
                });
            }
        }
    }
    (checked, skipped)
}

/// Flags the outliers of `samples` by location and by task.
fn judge(model: &Model, samples: &[Sample], method: Method, unit: &str, limit: usize) -> Value {
    let mut hits = Vec::new();
    // Locations are few: a small map gives their dense ids. Task lives
    // have theirs.
    let mut ids: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    let by_loc: Vec<u32> = samples
        .iter()
        .map(|s| {
            let next = ids.len() as u32;
            *ids.entry((s.proc, s.loc)).or_insert(next)
        })
        .collect();
    let locs = ids.len();
    let (c1, s1) = judge_scope(samples, "location", (by_loc, locs), method, &mut hits);
    let by_task: Vec<u32> = samples.iter().map(|s| s.serial).collect();
    let lives = by_task.iter().max().map_or(0, |&m| m as usize + 1);
    let (c2, s2) = judge_scope(samples, "task", (by_task, lives), method, &mut hits);
    let (checked, skipped) = (c1 + c2, s1 + s2);
    let total = hits.len();
    // The strongest first; ties in trace order of the samples.
    hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.sample.cmp(&b.sample)));
    hits.truncate(limit);
    let outliers: Vec<Value> = hits
        .iter()
        .map(|h| {
            let s = &samples[h.sample];
            let p = &model.procs[s.proc as usize];
            let loc = &model.locs[s.loc as usize];
            json!({
                "scope": h.scope,
                "task_id": s.task,
                "pid": p.pid,
                "spawn_loc": &*loc.text,
                "spawn_loc_id": loc.trace_id,
                "worker": (s.worker != NO_WORKER).then_some(s.worker),
                "window_ns": [s.start_ns, s.end_ns],
                "value": s.value,
                "threshold": h.bound,
                "direction": if h.high { "high" } else { "low" },
                "unit": unit,
                "group_samples": h.group_samples,
                "group_median": h.group_median,
            })
        })
        .collect();
    json!({
        "unit": unit,
        "samples": samples.len(),
        "groups_checked": checked,
        "groups_skipped": skipped,
        "outliers_total": total,
        "truncated": total > outliers.len(),
        "outliers": outliers,
    })
}

fn text_value(v: &Value, unit: &str) -> String {
    let x = v.as_f64().unwrap_or(0.0);
    if unit == "ns" {
        fmt_ns(x.max(0.0) as u64)
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

/// The text form of an [`Outliers::report`] (`runtrace outliers` without
/// `--json`).
///
/// ```
/// let t = runtrace_analyze::outliers::text(&serde_json::json!({"method": "iqr", "min_samples": 10}));
/// assert!(t.starts_with("method: iqr (groups of at least 10 samples)"));
/// ```
pub fn text(r: &Value) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "method: {} (groups of at least {} samples)",
        r["method"].as_str().unwrap_or(""),
        r["min_samples"]
    );
    for (cat, c) in r["categories"].as_object().into_iter().flatten() {
        let unit = c["unit"].as_str().unwrap_or("ns");
        let _ = writeln!(
            t,
            "\n=== {cat}: {} outliers in {} samples ({} groups judged, {} too small or without spread){}",
            c["outliers_total"],
            c["samples"],
            c["groups_checked"],
            c["groups_skipped"],
            if c["truncated"] == true { "; the strongest:" } else { "" }
        );
        for o in c["outliers"].as_array().into_iter().flatten() {
            let w = &o["window_ns"];
            let _ =
                writeln!(
                t,
                "  task {} at {} (pid {}): {} {} threshold {} in its {}, worker {}, {:.6}..{:.6} s",
                o["task_id"],
                o["spawn_loc"].as_str().unwrap_or(""),
                o["pid"],
                text_value(&o["value"], unit),
                if o["direction"] == "high" { "above" } else { "below" },
                text_value(&o["threshold"], unit),
                o["scope"].as_str().unwrap_or(""),
                o["worker"],
                w[0].as_f64().unwrap_or(0.0) / 1e9,
                w[1].as_f64().unwrap_or(0.0) / 1e9,
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The selection path gives the bits the sorting path gives, for
    /// every method, on data with ties, heavy tails and odd and even sizes.
    #[test]
    fn selection_equals_sorting() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for n in [MIN_SAMPLES, 11, 64, 101, 1000] {
            for shape in 0..3 {
                let v: Vec<f64> = (0..n)
                    .map(|_| match shape {
                        0 => (next() % 1000) as f64,
                        1 => 1.0 / ((next() % 10_000) as f64 + 1e-3),
                        _ => (next() % 5) as f64,
                    })
                    .collect();
                for m in [Method::Iqr, Method::Mad, Method::StdDev, Method::Percentile] {
                    let mut sorted = v.clone();
                    let want = bounds(m, &mut sorted).map(|b| (b, quantile(&sorted, 0.5)));
                    let got = bounds_and_median(m, &mut v.clone());
                    assert_eq!(got, want, "{m:?} n={n} shape={shape}");
                }
            }
        }
    }
}
