//! `runtrace blocked`: seed 000's blocked analysis done for the user.
//! Every period where a task waited more than a threshold from its wake to
//! its poll (the runtime engine's wake->poll pairing, [`Engine::waits`]),
//! the on-CPU samples taken meanwhile on the thread of the worker that
//! finally polled it: what that worker ran instead. Each such sample is
//! blamed on its *culprit*, the spawn location of the poll it was taken in
//! (or the thread outside polls), and the culprits' samples are tallied
//! into top functions, self and inclusive.
//!
//! A sample inside several overlapping waits of one worker counts once.
//! Samples are matched to waits by thread id and time (ns since the
//! recording started); a trace of several recordings whose thread ids
//! collide mixes them (rare: tids are unique on a host at a time).
//!
//! ```no_run
//! use runtrace_analyze::blocked::{analyze_files, BlockedOptions};
//! let (r, _profile, _names) = analyze_files(&["trace.0.bin"], &BlockedOptions::default(), Default::default());
//! println!("{r}");
//! ```

use crate::functions::{FunctionStat, StackNames, Tally};
use crate::runtime::{Engine, Thresholds, Wait, WhenProfiled};
use runtrace_model::fmt_ns;
use runtrace_model::input;
use runtrace_model::profile::{Profile, SampleKind};
use runtrace_symbolize::SymbolizeOptions;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// Waits kept at most (the worst are reported; the count of the rest too).
pub(crate) const MAX_WAITS: usize = 1 << 20;

/// The name of the culprit of samples taken outside every poll.
pub const OUTSIDE_POLLS: &str = "(outside polls)";

/// Options of the blocked analysis.
#[derive(Debug, Clone)]
pub struct BlockedOptions {
    /// A wait longer than this (wake to poll) is a blocked period (10 ms).
    pub threshold_ns: u64,
    /// Functions listed per culprit, self and inclusive each (10).
    pub top: usize,
    /// Worst waits listed (10).
    pub worst: usize,
}

impl Default for BlockedOptions {
    fn default() -> Self {
        BlockedOptions {
            threshold_ns: 10_000_000,
            top: 10,
            worst: 10,
        }
    }
}

/// A location whose polls (or a thread outside polls) ran on a worker
/// while a task waited for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    /// Spawn location (`file:line:col`), `<unknown>`, or
    /// [`OUTSIDE_POLLS`].
    pub location: String,
    /// On-CPU samples blamed on it.
    pub samples: u64,
    /// Its share of all blamed samples.
    pub share: f64,
    /// Waits in which it had samples.
    pub waits: u64,
    /// The waiting tasks' locations and how many of its waits each.
    pub victims: Vec<(String, u64)>,
    /// Top functions by self samples.
    pub functions_self: Vec<FunctionStat>,
    /// Top functions by inclusive samples.
    pub functions_inclusive: Vec<FunctionStat>,
}

/// One wait, for the worst list.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitReport {
    /// The wait.
    pub wait: Wait,
    /// On-CPU samples of the worker's thread during it.
    pub samples: u64,
    /// The culprit with the most of them, if any.
    pub culprit: Option<String>,
}

/// A location whose polls blocked their worker in place: off-CPU in a
/// system call inside one poll for longer than the threshold, whether or
/// not another task's wake waited meanwhile (work stealing may have kept
/// wake-to-poll delays short while the worker itself was stuck).
#[derive(Debug, Clone, PartialEq)]
pub struct InPlace {
    /// Spawn location of the polls (`file:line:col`, or `<unknown>`).
    pub location: String,
    /// Its polls that blocked in place longer than the threshold.
    pub polls: u64,
    /// Their time blocked (off-CPU in system calls), in all.
    pub blocked_ns: u64,
    /// The longest of them.
    pub longest_ns: u64,
    /// Where they blocked: top functions by blocked time (the own frame
    /// of each switch-out's stack; `samples` are ns).
    pub functions: Vec<FunctionStat>,
}

/// What `runtrace blocked` reports.
#[derive(Debug, Clone, Default)]
pub struct BlockedReport {
    /// The threshold used.
    pub threshold_ns: u64,
    /// Waits over the threshold.
    pub waits: u64,
    /// ... of which not kept (memory bound).
    pub waits_lost: u64,
    /// Waits with at least one sample.
    pub waits_with_samples: u64,
    /// On-CPU samples in the profile.
    pub profile_samples: u64,
    /// Samples inside waits (each once).
    pub samples: u64,
    /// Culprits, most samples first.
    pub culprits: Vec<Culprit>,
    /// The longest waits, longest first.
    pub worst: Vec<WaitReport>,
    /// Locations whose polls blocked their worker in place, longest
    /// blocked time first (from the off-CPU samples).
    pub in_place: Vec<InPlace>,
    /// Indexes into the profile's samples of the samples inside waits,
    /// with their culprit (for folded stacks).
    pub selected: Vec<(usize, String)>,
    /// What the profile or the symbolizer said (no samples, missing
    /// binaries, ...).
    pub notes: Vec<String>,
    /// Damage found while reading (file and byte offset).
    pub errors: Vec<String>,
    /// Some file was damaged (exit code 1).
    pub damaged: bool,
}

/// The waits over `threshold_ns` of `paths` (the runtime engine's
/// pairing), how many more there were than kept, and the CPU profile, over
/// one read.
pub fn read<P: AsRef<Path>>(
    paths: &[P],
    threshold_ns: u64,
    progress: input::Progress<'_>,
) -> (Vec<Wait>, u64, Profile) {
    let paths = input::sorted(paths);
    let mut e = Engine::new(Thresholds {
        wake_delay_ns: threshold_ns,
        ..Thresholds::default()
    });
    e.keep_waits(MAX_WAITS);
    let mut passes = (e, WhenProfiled::new(&paths));
    let (model, stats) = input::read(&paths, &mut passes, progress);
    let (w, lost) = passes.0.waits(&model);
    (w, lost, passes.1.pass.profile(&model, stats))
}

/// The blocked analysis of trace files ([`read`], then [`attribute`]),
/// symbolized with the recorded mappings and `sym`; also returns the
/// profile and the named stacks (for folded stacks of
/// [`BlockedReport::selected`]). The profile's notes and the
/// symbolizer's problems are the report's notes.
pub fn analyze_files<P: AsRef<Path>>(
    paths: &[P],
    opts: &BlockedOptions,
    sym: SymbolizeOptions,
) -> (BlockedReport, Profile, StackNames) {
    let (ws, lost, profile) = read(paths, opts.threshold_ns, None);
    let mut names = StackNames::for_mappings(&profile.mappings, sym);
    let r = report(&ws, lost, &profile, &mut names, opts);
    (r, profile, names)
}

/// [`attribute`], with the waits lost over [`MAX_WAITS`], the profile's
/// notes, the symbolizer's problems and the read's damage added: what
/// [`analyze_files`] and `TraceIndex::blocked` (the MCP server) report.
pub(crate) fn report(
    waits: &[Wait],
    lost: u64,
    profile: &Profile,
    names: &mut StackNames,
    opts: &BlockedOptions,
) -> BlockedReport {
    let mut r = attribute(waits, profile, names, opts);
    r.notes.extend(profile.notes.iter().cloned());
    r.notes.extend(names.problems());
    r.waits_lost = lost;
    r.errors.extend(profile.stats.errors.iter().cloned());
    r.damaged |= profile.stats.damaged;
    r
}

/// One thread's on-CPU samples in time order, with their culprits' dense
/// ids, and where each culprit's samples are (for counts over a range).
#[derive(Default)]
struct TidSamples {
    /// Sample indices in the profile.
    idx: Vec<usize>,
    /// The culprit of each.
    culprit: Vec<u32>,
    /// Per culprit on this thread, the positions (in `idx`) of its samples.
    positions: HashMap<u32, Vec<u32>>,
}

impl TidSamples {
    fn push(&mut self, i: usize, c: u32) {
        self.positions
            .entry(c)
            .or_default()
            .push(self.idx.len() as u32);
        self.idx.push(i);
        self.culprit.push(c);
    }

    /// The samples per culprit in positions `from..to`, into `out`
    /// (culprits with none left out), in the cheaper of two ways: a scan
    /// of the range, or two binary searches per culprit of the thread. So a
    /// fan-out of many waits over the same long range costs a few searches
    /// per wait, not the range each time.
    /// `scratch` is one zeroed counter per culprit id (left zeroed).
    /// `work` counts the steps taken (for the test of the fan-out).
    fn count(
        &self,
        (from, to): (usize, usize),
        scratch: &mut [u64],
        out: &mut Vec<(u32, u64)>,
        work: &mut u64,
    ) {
        let log = (usize::BITS - self.idx.len().leading_zeros()) as usize;
        if to - from <= self.positions.len() * log {
            *work += (to - from) as u64;
            for &c in &self.culprit[from..to] {
                if scratch[c as usize] == 0 {
                    out.push((c, 0));
                }
                scratch[c as usize] += 1;
            }
            for e in out.iter_mut() {
                e.1 = std::mem::take(&mut scratch[e.0 as usize]);
            }
            return;
        }
        *work += (self.positions.len() * 2 * log) as u64;
        for (&c, pos) in &self.positions {
            let n = pos.partition_point(|&p| (p as usize) < to)
                - pos.partition_point(|&p| (p as usize) < from);
            if n > 0 {
                out.push((c, n as u64));
            }
        }
    }
}

/// Blames the on-CPU samples of `profile` taken during `waits` on the
/// worker's thread (the pure part of [`analyze_files`]).
///
/// ```
/// use runtrace_analyze::blocked::{attribute, BlockedOptions};
/// use runtrace_analyze::functions::StackNames;
/// use runtrace_model::profile::Profile;
/// use runtrace_symbolize::Symbolizer;
/// let mut names = StackNames::new(Symbolizer::new(&[], Default::default()));
/// let r = attribute(&[], &Profile::default(), &mut names, &BlockedOptions::default());
/// assert_eq!((r.waits, r.samples), (0, 0));
/// ```
pub fn attribute(
    waits: &[Wait],
    profile: &Profile,
    names: &mut StackNames,
    opts: &BlockedOptions,
) -> BlockedReport {
    attribute_counting(waits, profile, names, opts).0
}

/// [`attribute`], and the steps it took over the samples (a scan of one,
/// or a binary search): linear in waits and samples for a fan-out, however
/// much their ranges overlap.
fn attribute_counting(
    waits: &[Wait],
    profile: &Profile,
    names: &mut StackNames,
    opts: &BlockedOptions,
) -> (BlockedReport, u64) {
    let mut work = 0u64;
    // On-CPU samples by thread, in time order (the profile's order), each
    // with its culprit as a dense id (a name is made once per culprit, not
    // once per sample and wait).
    let mut by_tid: HashMap<u64, TidSamples> = HashMap::new();
    let mut culprit_ids: HashMap<String, u32> = HashMap::new();
    let mut culprit_names: Vec<String> = Vec::new();
    let mut profile_samples = 0;
    for (i, s) in profile.samples.iter().enumerate() {
        if !matches!(s.kind, SampleKind::OnCpu) {
            continue;
        }
        let name = match (&s.location, s.task) {
            (Some(l), _) => l.to_string(),
            (None, Some(_)) => "<unknown>".to_string(),
            (None, None) => OUTSIDE_POLLS.to_string(),
        };
        let next = culprit_names.len() as u32;
        let c = *culprit_ids.entry(name).or_insert_with_key(|n| {
            culprit_names.push(n.clone());
            next
        });
        by_tid.entry(s.tid).or_default().push(i, c);
        profile_samples += 1;
    }
    struct Acc {
        tally: Tally,
        waits: u64,
        victims: HashMap<String, u64>,
    }
    let mut acc: HashMap<u32, Acc> = HashMap::new();
    let mut reports: Vec<WaitReport> = Vec::new();
    let mut with_samples = 0;
    // The sample ranges the waits cover, by thread, taken once each below.
    let mut covered: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
    let mut per: Vec<(u32, u64)> = Vec::new();
    let mut scratch = vec![0u64; culprit_names.len()];
    for w in waits {
        per.clear();
        let mut n = 0u64;
        if let Some(t) = by_tid.get(&w.worker.tid) {
            let from = t
                .idx
                .partition_point(|&i| profile.samples[i].ts_ns < w.wake_ns);
            let to = t
                .idx
                .partition_point(|&i| profile.samples[i].ts_ns <= w.poll_ns)
                .max(from);
            n = (to - from) as u64;
            if n > 0 {
                t.count((from, to), &mut scratch, &mut per, &mut work);
                covered.entry(w.worker.tid).or_default().push((from, to));
            }
        }
        if n > 0 {
            with_samples += 1;
        }
        for &(c, _) in &per {
            let a = acc.entry(c).or_insert_with(|| Acc {
                tally: Tally::default(),
                waits: 0,
                victims: HashMap::new(),
            });
            a.waits += 1;
            *a.victims.entry(w.location.clone()).or_insert(0) += 1;
        }
        let culprit = per
            .iter()
            .max_by(|a, b| {
                a.1.cmp(&b.1)
                    .then(culprit_names[b.0 as usize].cmp(&culprit_names[a.0 as usize]))
            })
            .map(|x| culprit_names[x.0 as usize].clone());
        reports.push(WaitReport {
            wait: w.clone(),
            samples: n,
            culprit,
        });
    }
    // Every sample some wait covers, once: a sweep over each thread's
    // ranges sorted by start.
    let mut selected = Vec::new();
    for (tid, mut ranges) in covered {
        let t = &by_tid[&tid];
        ranges.sort_unstable();
        let mut done = 0;
        for (from, to) in ranges {
            for k in from.max(done)..to {
                work += 1;
                let (i, c) = (t.idx[k], t.culprit[k]);
                let frames = names.frames(&profile.samples[i].stack);
                if let Some(a) = acc.get_mut(&c) {
                    a.tally.add(&frames, 0, 1);
                }
                selected.push((i, culprit_names[c as usize].clone()));
            }
            done = done.max(to);
        }
    }
    selected.sort_by_key(|x| x.0);
    let samples = selected.len() as u64;
    let mut culprits: Vec<Culprit> = acc
        .into_iter()
        .map(|(c, a)| {
            let location = culprit_names[c as usize].clone();
            let mut victims: Vec<(String, u64)> = a.victims.into_iter().collect();
            victims.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            Culprit {
                samples: a.tally.samples(),
                share: a.tally.samples() as f64 / samples.max(1) as f64,
                waits: a.waits,
                victims,
                functions_self: a.tally.top_self(opts.top),
                functions_inclusive: a.tally.top_inclusive(opts.top),
                location,
            }
        })
        .collect();
    culprits.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.location.cmp(&b.location)));
    reports.sort_by(|a, b| {
        b.wait
            .delay_ns
            .cmp(&a.wait.delay_ns)
            .then(a.wait.poll_ns.cmp(&b.wait.poll_ns))
    });
    reports.truncate(opts.worst);
    let in_place = blocked_in_place(profile, names, opts);
    let mut notes = Vec::new();
    if waits.is_empty() {
        notes.push(format!(
            "no task waited more than {} from its wake to its poll",
            fmt_ns(opts.threshold_ns)
        ));
    } else if profile_samples == 0 {
        notes.push("the trace has no on-CPU samples: nothing to blame (record with CPU profiling: RUNTRACE_CPU_HZ=99 or Recorder::builder().cpu_profile(99))".to_string());
    }
    (
        BlockedReport {
            threshold_ns: opts.threshold_ns,
            waits: waits.len() as u64,
            waits_lost: 0,
            waits_with_samples: with_samples,
            profile_samples,
            samples,
            culprits,
            worst: reports,
            in_place,
            selected,
            notes,
            errors: Vec::new(),
            damaged: false,
        },
        work,
    )
}

/// The polls of `profile` that blocked their worker in place longer than
/// `opts.threshold_ns`, by location: each poll's off-CPU switch-outs in
/// system calls summed (its preemptions are time waiting for a CPU, not
/// blocking).
fn blocked_in_place(
    profile: &Profile,
    names: &mut StackNames,
    opts: &BlockedOptions,
) -> Vec<InPlace> {
    // Per poll (thread, start): its blocking switch-outs.
    let mut polls: HashMap<(u64, i64), (u64, Vec<usize>)> = HashMap::new();
    for (i, s) in profile.samples.iter().enumerate() {
        let (SampleKind::OffCpu { off_ns }, Some(start)) = (s.kind, s.poll_start_ns) else {
            continue;
        };
        if s.task.is_none() || !crate::runtime::in_syscall(&names.frames(&s.stack)) {
            continue;
        }
        let p = polls.entry((s.tid, start)).or_default();
        p.0 = p.0.saturating_add(off_ns);
        p.1.push(i);
    }
    struct Acc {
        polls: u64,
        ns: u64,
        longest: u64,
        tally: Tally,
    }
    let mut by: HashMap<String, Acc> = HashMap::new();
    for (ns, idx) in polls.into_values() {
        if ns <= opts.threshold_ns {
            continue;
        }
        let s0 = &profile.samples[idx[0]];
        let loc = s0.location.as_deref().unwrap_or("<unknown>").to_string();
        let a = by.entry(loc).or_insert_with(|| Acc {
            polls: 0,
            ns: 0,
            longest: 0,
            tally: Tally::default(),
        });
        a.polls += 1;
        a.ns = a.ns.saturating_add(ns);
        a.longest = a.longest.max(ns);
        for i in idx {
            let s = &profile.samples[i];
            let frames = names.frames(&s.stack);
            if let SampleKind::OffCpu { off_ns } = s.kind {
                a.tally
                    .add(&frames, crate::functions::own_frame(&frames), off_ns.max(1));
            }
        }
    }
    let mut v: Vec<InPlace> = by
        .into_iter()
        .map(|(location, a)| InPlace {
            location,
            polls: a.polls,
            blocked_ns: a.ns,
            longest_ns: a.longest,
            functions: a.tally.top_self(opts.top),
        })
        .collect();
    v.sort_by(|a, b| {
        b.blocked_ns
            .cmp(&a.blocked_ns)
            .then(a.location.cmp(&b.location))
    });
    v
}

impl BlockedReport {
    /// The folded stacks of the blamed samples (inferno's `a;b;c N`), each
    /// under its culprit spawn location as the root frame, for a flame
    /// graph (`runtrace blocked --folded-out`).
    ///
    /// ```no_run
    /// use runtrace_analyze::blocked::{analyze_files, BlockedOptions};
    /// let files = ["traces/"];
    /// let (r, profile, mut names) = analyze_files(&files, &BlockedOptions::default(), Default::default());
    /// print!("{}", r.folded(&profile, &mut names));
    /// ```
    pub fn folded(&self, profile: &Profile, names: &mut StackNames) -> String {
        let mut all = Vec::new();
        for c in &self.culprits {
            let stacks = self
                .selected
                .iter()
                .filter(|(_, culprit)| *culprit == c.location)
                .map(|&(i, _)| (&profile.samples[i].stack, 1));
            for (mut frames, n) in crate::folded::named(stacks, names) {
                frames.insert(0, c.location.clone());
                all.push((frames, n));
            }
        }
        crate::folded::fold(all)
    }

    /// The JSON `runtrace blocked --json` prints (keys in
    /// docs/analysis.md).
    pub fn to_json(&self) -> Value {
        json!({
            "threshold_ns": self.threshold_ns,
            "waits": self.waits,
            "waits_lost": self.waits_lost,
            "waits_with_samples": self.waits_with_samples,
            "profile_samples": self.profile_samples,
            "samples": self.samples,
            "culprits": self.culprits.iter().map(|c| json!({
                "location": c.location,
                "samples": c.samples,
                "share": c.share,
                "waits": c.waits,
                "victims": c.victims.iter().map(|(l, n)| json!({"location": l, "waits": n})).collect::<Vec<_>>(),
                "functions_self": c.functions_self.iter().map(|f| f.to_json(false)).collect::<Vec<_>>(),
                "functions_inclusive": c.functions_inclusive.iter().map(|f| f.to_json(true)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "worst": self.worst.iter().map(|w| json!({
                "task": w.wait.task,
                "location": w.wait.location,
                "delay_ns": w.wait.delay_ns,
                "wake_at_ns": w.wait.wake_ns,
                "poll_at_ns": w.wait.poll_ns,
                "worker": {"pid": w.wait.worker.pid, "tid": w.wait.worker.tid, "worker": w.wait.worker.worker, "kind": w.wait.worker.kind},
                "samples": w.samples,
                "culprit": w.culprit,
            })).collect::<Vec<_>>(),
            "in_place": self.in_place.iter().map(|p| json!({
                "location": p.location,
                "polls": p.polls,
                "blocked_ns": p.blocked_ns,
                "longest_ns": p.longest_ns,
                "functions": p.functions.iter().map(|f| f.to_json(false)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "notes": self.notes,
            "errors": self.errors,
            "damaged": self.damaged,
        })
    }
}

impl fmt::Display for BlockedReport {
    /// The text report of `runtrace blocked`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} waits over {} from wake to poll{}; {} of them with samples; {} on-CPU samples on the polling worker meanwhile (of {} in the profile)",
            self.waits,
            fmt_ns(self.threshold_ns),
            if self.waits_lost > 0 {
                format!(" ({} more not kept: memory bound)", self.waits_lost)
            } else {
                String::new()
            },
            self.waits_with_samples,
            self.samples,
            self.profile_samples
        )?;
        for c in &self.culprits {
            writeln!(f)?;
            writeln!(
                f,
                "=== {} : {} samples ({:.1}%), in {} waits",
                c.location,
                c.samples,
                100.0 * c.share,
                c.waits
            )?;
            let v: Vec<String> = c
                .victims
                .iter()
                .take(5)
                .map(|(l, n)| format!("{l} ({n})"))
                .collect();
            writeln!(f, "  delayed: {}", v.join(", "))?;
            let list = |f: &mut fmt::Formatter<'_>, what: &str, v: &[(f64, u64, String)]| {
                writeln!(f, "  {what}:")?;
                for (share, n, label) in v {
                    writeln!(f, "    {:>5.1}% {n:>7}  {label}", 100.0 * share)?;
                }
                Ok::<(), fmt::Error>(())
            };
            let by_self = c.functions_self.iter();
            list(
                f,
                "self",
                &by_self
                    .map(|x| (x.share, x.samples, x.label()))
                    .collect::<Vec<_>>(),
            )?;
            let by_incl = c.functions_inclusive.iter();
            list(
                f,
                "inclusive",
                &by_incl
                    .map(|x| (x.inclusive_share, x.inclusive, x.label()))
                    .collect::<Vec<_>>(),
            )?;
        }
        if !self.worst.is_empty() {
            writeln!(f)?;
            writeln!(f, "=== Longest waits")?;
            for w in &self.worst {
                writeln!(
                    f,
                    "  {} task {} ({}) on {}, {:.6}..{:.6} s: {} samples{}",
                    fmt_ns(w.wait.delay_ns),
                    w.wait.task,
                    w.wait.location,
                    w.wait.worker,
                    w.wait.wake_ns as f64 / 1e9,
                    w.wait.poll_ns as f64 / 1e9,
                    w.samples,
                    w.culprit
                        .as_ref()
                        .map_or(String::new(), |c| format!(", mostly {c}"))
                )?;
            }
        }
        if !self.in_place.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "=== Workers blocked in place (a poll off-CPU in system calls for over {})",
                fmt_ns(self.threshold_ns)
            )?;
            for p in &self.in_place {
                writeln!(
                    f,
                    "  {}: {} polls blocked {} in all (longest {})",
                    p.location,
                    p.polls,
                    fmt_ns(p.blocked_ns),
                    fmt_ns(p.longest_ns)
                )?;
                for x in p.functions.iter().take(3) {
                    writeln!(f, "    {:>5.1}%  {}", 100.0 * x.share, x.label())?;
                }
            }
        }
        if !self.notes.is_empty() {
            writeln!(f)?;
            writeln!(f, "=== Notes")?;
            for n in &self.notes {
                writeln!(f, "{n}")?;
            }
        }
        crate::text::errors_section(f, &self.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::WorkerId;
    use runtrace_model::profile::Sample;
    use runtrace_symbolize::Symbolizer;
    use std::sync::Arc;

    /// A 100k-task fan-out (issue 37): every task woken at once and polled
    /// one after the other on one worker, 100k samples meanwhile from three
    /// locations. The waits' ranges all overlap; the attribution's steps
    /// stay linear (it walked every sample of every wait: 5e9 steps).
    #[test]
    fn a_fan_out_costs_linear_work() {
        const N: usize = 100_000;
        let locs: Vec<Arc<str>> = ["a.rs:1:1", "b.rs:2:2", "c.rs:3:3"]
            .iter()
            .map(|&l| Arc::from(l))
            .collect();
        let samples: Vec<Sample> = (0..N)
            .map(|i| Sample {
                ts_ns: i as i64,
                tid: 7,
                thread: String::new(),
                stack: Arc::from(&[0x1000u64][..]),
                kind: SampleKind::OnCpu,
                task: Some(i as u64),
                location: Some(locs[i % 3].clone()),
                worker: Some(0),
                poll_start_ns: Some(i as i64),
                poll_end_ns: None,
            })
            .collect();
        let profile = Profile {
            samples,
            ..Profile::default()
        };
        let waits: Vec<Wait> = (0..N)
            .map(|i| Wait {
                worker: WorkerId {
                    pid: 1,
                    tid: 7,
                    worker: Some(0),
                    kind: "tokio",
                },
                task: 1_000_000 + i as u64,
                location: "fan.rs:9:9".into(),
                wake_ns: 0,
                poll_ns: i as i64,
                delay_ns: i as u64,
            })
            .collect();
        let mut names = StackNames::new(Symbolizer::new(&[], Default::default()));
        let (r, work) =
            attribute_counting(&waits, &profile, &mut names, &BlockedOptions::default());
        assert_eq!(r.samples, N as u64, "every sample taken once");
        assert_eq!(r.culprits.len(), 3);
        assert_eq!(r.culprits[0].waits, N as u64, "{:?}", r.culprits[0]);
        // Per wait: two binary searches per culprit (3 x 2 x 17 steps);
        // per sample: one step. The old walk took 5e9.
        assert!(
            work < 120 * N as u64,
            "{work} steps for {N} waits and {N} samples"
        );
    }
}
