//! The CPU profile in the findings: for every finding that blames a spawn
//! location, the functions that location's polls ran (on-CPU samples) or
//! blocked in (off-CPU switch-outs), and whether they mostly burned CPU or
//! mostly blocked ([`Report::add_functions`]). Stacks are symbolized once
//! per report ([`StackNames`] caches them), not per finding.

use super::engine::Engine;
use super::findings::NO_CPU_TIME;
use super::report::{CpuFunctions, Finding, FindingKind, FunctionShare, LocationCpu, Report};
use super::Options;
use crate::functions::{own_frame, FunctionStat, StackNames, Tally};
use runtrace_model::event::Ev;
use runtrace_model::fmt_ns;
use runtrace_model::input;
use runtrace_model::lifecycle::Life;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::profile::{Profile, ProfilePass, Sample, SampleKind};
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// On-CPU functions listed per finding.
const TOP_ON: usize = 5;
/// Off-CPU functions listed per finding.
const TOP_OFF: usize = 3;
/// The sampling rate assumed when no PROFILE frame gives one.
const DEFAULT_HZ: u64 = 99;

/// A [`ProfilePass`] that runs only when [`WhenProfiled::new`] found a
/// PROFILE frame: a trace recorded without CPU profiling costs
/// `runtrace analyze` one branch per event, not the pass's poll tracking.
#[derive(Default)]
pub struct WhenProfiled {
    /// Some file has a CPU profile: the pass is fed.
    pub on: bool,
    /// The pass (fed only when on).
    pub pass: ProfilePass,
}

impl WhenProfiled {
    /// On when some file of `paths` has a PROFILE frame before its first
    /// chunk (where the recorder writes it, format 1.1): only the frames
    /// before each file's first chunk are read.
    pub fn new(paths: &[PathBuf]) -> WhenProfiled {
        WhenProfiled {
            on: paths.iter().any(|p| profiled(p)),
            pass: ProfilePass::default(),
        }
    }
}

/// Whether the file at `path` has a PROFILE frame before its first chunk.
fn profiled(path: &Path) -> bool {
    let Ok(mut r) = runtrace_format::FileReader::open(path) else {
        return false;
    };
    while let Some(Ok(rec)) = r.next() {
        if r.tables().profile().is_some() {
            return true;
        }
        if matches!(rec, runtrace_format::Record::Events { .. }) {
            return false;
        }
    }
    r.tables().profile().is_some()
}

impl Pass for WhenProfiled {
    #[inline]
    fn wants(&self) -> Wants {
        if self.on {
            self.pass.wants()
        } else {
            Wants::default()
        }
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, model: &Model) {
        if self.on {
            self.pass.event(ev, model);
        }
    }

    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        if self.on {
            self.pass.life(rec, model);
        }
    }

    fn end_recording(&mut self, model: &Model) {
        if self.on {
            self.pass.end_recording(model);
        }
    }

    fn finish(&mut self, model: &Model) {
        if self.on {
            self.pass.finish(model);
        }
    }
}

/// [`super::analyze_files`] and the CPU profile ([`runtrace_model::profile`]) over
/// one read: the report, and the profile to pass to
/// [`Report::add_functions`] (empty for recordings made without CPU
/// profiling).
///
/// ```
/// use runtrace_analyze::runtime::analyze_files_profiled;
/// let (r, p) = analyze_files_profiled(&["no-such/trace.0.bin"], Default::default());
/// assert!(r.damaged && p.samples.is_empty());
/// ```
pub fn analyze_files_profiled<P: AsRef<Path>>(paths: &[P], opts: Options<'_>) -> (Report, Profile) {
    let paths = input::sorted(paths);
    let mut passes = (Engine::new(opts.thresholds), WhenProfiled::new(&paths));
    let (model, stats) = input::read(&paths, &mut passes, opts.progress);
    let report = passes.0.report(&model, stats.clone());
    (report, passes.1.pass.profile(&model, stats))
}

/// The functions each spawn location's polls ran in (on-CPU samples) or
/// blocked in (off-CPU switch-outs), as the findings list them: the
/// verdict's kind first (blocked first when the polls were mostly off
/// CPU), at most 5 on-CPU and 3 off-CPU functions. What `runtrace top`
/// shows for a selected location, whether or not a finding blames it.
///
/// ```
/// use runtrace_analyze::functions::StackNames;
/// use runtrace_analyze::runtime::location_functions;
/// use runtrace_model::profile::{Profile, Sample, SampleKind};
/// let s = Sample {
///     ts_ns: 5_000, tid: 1, thread: String::new(), stack: vec![0x10u64].into(),
///     kind: SampleKind::OnCpu, task: Some(7), location: Some("src/a.rs:1:1".into()),
///     worker: Some(0), poll_start_ns: Some(1_000), poll_end_ns: None,
/// };
/// let p = Profile { samples: vec![s], ..Default::default() };
/// let f = location_functions(&p, &mut StackNames::recorded(&p));
/// assert_eq!(f["src/a.rs:1:1"][0].function, "[unknown] 0x10");
/// assert_eq!(f["src/a.rs:1:1"][0].share, 1.0);
/// ```
pub fn location_functions(
    profile: &Profile,
    names: &mut StackNames,
) -> HashMap<String, Vec<FunctionShare>> {
    let period = period_ns(profile);
    let mut locs: HashMap<&str, LocCpu> = HashMap::new();
    for (l, s, frames) in located(profile, names) {
        locs.entry(l).or_default().add(&frames, s.kind);
    }
    locs.into_iter()
        .map(|(l, lc)| {
            let j = judge(&lc, period);
            let on = j.on.iter().map(|x| share(x, false));
            let off = j.off.iter().map(|x| share(x, true));
            let v = if j.mostly_off_cpu {
                off.chain(on).collect()
            } else {
                on.chain(off).collect()
            };
            (l.to_string(), v)
        })
        .collect()
}

/// The samples of `profile` taken in polls of a known location (not on
/// runtrace's own threads), with their location and their stack's frames.
fn located<'p>(
    profile: &'p Profile,
    names: &mut StackNames,
) -> Vec<(&'p str, &'p Sample, Arc<[runtrace_symbolize::Frame]>)> {
    profile
        .samples
        .iter()
        .filter(|s| !s.is_runtrace())
        .filter_map(|s| Some((s.location.as_deref()?, s, names.frames(&s.stack))))
        .collect()
}

/// The sampling period: from the first PROFILE frame that gives a rate.
fn period_ns(profile: &Profile) -> u64 {
    let hz = profile
        .info
        .iter()
        .map(|(_, i)| i.hz)
        .find(|&h| h > 0)
        .unwrap_or(DEFAULT_HZ);
    1_000_000_000 / hz.max(1)
}

#[derive(Default)]
struct LocCpu {
    on: Tally,
    /// Blocking switch-outs, weighted by off-CPU ns.
    off: Tally,
    /// Preemptions: switch-outs outside syscalls, and their off-CPU ns.
    preempted: u64,
    preempted_ns: u64,
    /// Samples whose stack does not reach its thread's start.
    truncated: u64,
}

impl LocCpu {
    fn add(&mut self, frames: &[runtrace_symbolize::Frame], kind: SampleKind) {
        if !frames.is_empty() && !reaches_thread_start(frames) {
            self.truncated += 1;
        }
        match kind {
            SampleKind::OnCpu => self.on.add(frames, own_frame(frames), 1),
            // A switch-out in a syscall wrapper blocked; one anywhere
            // else was a preemption (runnable, waiting for a CPU).
            SampleKind::OffCpu { off_ns } if in_syscall(frames) => {
                self.off.add(frames, own_frame(frames), off_ns.max(1))
            }
            SampleKind::OffCpu { off_ns } => {
                self.preempted_ns = self.preempted_ns.saturating_add(off_ns);
                self.preempted += 1;
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.on.samples() == 0 && self.off.samples() == 0 && self.preempted == 0
    }
}

/// The samples of one location's polls, three ways: all its polls, its
/// polls over the `long_poll` threshold, and its polls over the
/// `slow_poll` mean threshold. A finding is judged from the polls it is
/// about (docs/analysis.md, "Evidence from the finding's own polls").
#[derive(Default)]
struct LocSets {
    all: LocCpu,
    long: LocCpu,
    slow: LocCpu,
}

/// Whether a stack (leaf first) reaches the start of its thread: its
/// outermost frame is where threads (or the process) begin. A frame-pointer
/// walk that stopped early (in a function without frame pointers, such as
/// glibc's `send`) ends anywhere else.
fn reaches_thread_start(frames: &[runtrace_symbolize::Frame]) -> bool {
    const STARTS: [&str; 6] = [
        "start_thread",
        "clone3",
        "__clone3",
        "clone",
        "__libc_start_call_main",
        "_start",
    ];
    frames.last().is_some_and(|f| {
        let name = f.function.strip_prefix("__GI_").unwrap_or(&f.function);
        STARTS.contains(&name) || name.starts_with("__libc_start_main")
    })
}

/// Whether an off-CPU stack switched out in a system call: its leaf (the
/// user-space instruction the thread left from) is in a shared library,
/// where libc's syscall wrappers are (`clock_nanosleep`, `futex`,
/// `epoll_wait`, `read`). A thread preempted while computing left from its
/// own code (or the vDSO's clock, `linux-vdso.so.1`), so that time was spent waiting for a
/// CPU, not blocked.
pub(crate) fn in_syscall(frames: &[runtrace_symbolize::Frame]) -> bool {
    frames
        .first()
        .is_some_and(|f| f.module.contains(".so") && !f.module.contains("vdso"))
}

impl Report {
    /// Adds [`Finding::functions`] to every finding that blames a spawn
    /// location (not to its effects: they blame the same one), from
    /// `profile`'s samples taken inside the polls the finding is about:
    /// for `long_poll`, that location's polls over the long-poll
    /// threshold; for `slow_poll`, its polls over the slow-poll mean
    /// threshold; for the others, its long polls when samples fell in
    /// some, else all its polls ([`CpuFunctions::polls_over_ns`] says
    /// which). The location-wide profile is kept apart
    /// ([`CpuFunctions::location`]). A `long_poll` / `slow_poll`
    /// finding's detail then says "burning CPU in F" or "blocked in F"
    /// instead of that the trace cannot tell. Samples of runtrace's own
    /// threads never count. Does nothing when the profile has no samples
    /// (the report stays as without a profile).
    ///
    /// ```
    /// use runtrace_analyze::{analyze_bytes, functions::StackNames};
    /// use runtrace_model::profile::Profile;
    /// use runtrace_model::synth::TraceBuilder;
    /// use runtrace_symbolize::Symbolizer;
    /// let mut b = TraceBuilder::new();
    /// b.location(1, "src/main.rs", 10, 5);
    /// b.spawn(7, 1_000, 1, 0, 1, 0);
    /// b.poll_start(7, 0, 2_000, 1, 0, 0);
    /// b.poll_end(7, 0, 60_000_000, 1, true);
    /// let mut r = analyze_bytes(&b.finish(), Default::default());
    /// let mut names = StackNames::new(Symbolizer::new(&[], Default::default()));
    /// r.add_functions(&Profile::default(), &mut names); // no samples: no change
    /// assert!(r.findings.iter().all(|f| f.functions.is_none()));
    /// ```
    pub fn add_functions(&mut self, profile: &Profile, names: &mut StackNames) {
        self.add_memory(profile, names);
        if profile.samples.is_empty() {
            return;
        }
        let period_ns = period_ns(profile);
        let th = self.thresholds;
        let mut locs: HashMap<&str, LocSets> = HashMap::new();
        for (l, s, frames) in located(profile, names) {
            let sets = locs.entry(l).or_default();
            sets.all.add(&frames, s.kind);
            let poll_ns = s.poll_ns().unwrap_or(0);
            if poll_ns > th.long_poll_ns {
                sets.long.add(&frames, s.kind);
            }
            if poll_ns > th.cpu_bound_mean_ns {
                sets.slow.add(&frames, s.kind);
            }
        }
        let ctx = AttachCtx {
            period_ns,
            long_poll_ns: th.long_poll_ns,
            slow_poll_ns: th.cpu_bound_mean_ns,
        };
        for f in &mut self.findings {
            attach(f, &locs, &ctx);
        }
    }
}

struct AttachCtx {
    period_ns: u64,
    long_poll_ns: u64,
    slow_poll_ns: u64,
}

/// The verdict of one set of samples: CPU or blocked, and the top
/// functions (the verdict's kind first).
struct Judged {
    on_cpu_ns: u64,
    off_cpu_ns: u64,
    mostly_off_cpu: bool,
    on: Vec<FunctionStat>,
    off: Vec<FunctionStat>,
}

fn judge(lc: &LocCpu, period_ns: u64) -> Judged {
    let on_cpu_ns = lc.on.samples().saturating_mul(period_ns);
    let off_cpu_ns = lc.off.total();
    Judged {
        on_cpu_ns,
        off_cpu_ns,
        mostly_off_cpu: off_cpu_ns > on_cpu_ns,
        on: lc.on.top_self(TOP_ON),
        off: lc.off.top_self(TOP_OFF),
    }
}

fn share(x: &FunctionStat, off_cpu: bool) -> FunctionShare {
    FunctionShare {
        function: x.function.to_string(),
        file: x.file.as_deref().map(str::to_string),
        line: x.line,
        samples: x.samples,
        share: x.share,
        off_cpu,
        off_ns: if off_cpu { x.weight } else { 0 },
        // What a blocking call went through; on-CPU it would name
        // whatever helper the leaf was in (debug builds: iterator code).
        via: x.via.as_deref().filter(|_| off_cpu).map(str::to_string),
    }
}

fn attach(f: &mut Finding, locs: &HashMap<&str, LocSets>, ctx: &AttachCtx) {
    let Some(loc) = f.spawn_loc.as_deref() else {
        return;
    };
    let empty = LocSets::default();
    let sets = locs.get(loc).unwrap_or(&empty);
    // The polls the finding is about.
    let (lc, over) = match f.kind {
        FindingKind::LongPoll => (&sets.long, ctx.long_poll_ns),
        FindingKind::SlowPoll => (&sets.slow, ctx.slow_poll_ns),
        _ if !sets.long.is_empty() => (&sets.long, ctx.long_poll_ns),
        _ => (&sets.all, 0),
    };
    let j = judge(lc, ctx.period_ns);
    let on_list = j.on.iter().map(|x| share(x, false));
    let off_list = j.off.iter().map(|x| share(x, true));
    let functions: Vec<FunctionShare> = if j.mostly_off_cpu {
        off_list.chain(on_list).collect()
    } else {
        on_list.chain(off_list).collect()
    };
    let wide = judge(&sets.all, ctx.period_ns);
    let location = (over > 0).then(|| LocationCpu {
        on_cpu_samples: sets.all.on.samples(),
        on_cpu_ns: wide.on_cpu_ns,
        off_cpu_ns: wide.off_cpu_ns,
        mostly_off_cpu: wide.mostly_off_cpu,
        top: if wide.mostly_off_cpu {
            wide.off.first().map(|x| share(x, true))
        } else {
            wide.on.first().map(|x| share(x, false))
        },
    });
    if matches!(f.kind, FindingKind::LongPoll | FindingKind::SlowPoll) {
        if f.detail.ends_with(NO_CPU_TIME) {
            let n = f.detail.len() - NO_CPU_TIME.len();
            f.detail.truncate(n);
            f.detail.push_str("; ");
            f.detail.push_str(&verdict(lc, &j, over));
            if lc.truncated > 0 {
                let _ = write!(
                    f.detail,
                    " ({} of those samples had truncated stacks: counted by the poll they landed in)",
                    lc.truncated
                );
            }
        }
        f.evidence["cpu_evidence"] = json!("samples");
    }
    f.functions = Some(CpuFunctions {
        on_cpu_samples: lc.on.samples(),
        on_cpu_ns: j.on_cpu_ns,
        off_cpu_ns: j.off_cpu_ns,
        off_cpu_switches: lc.off.samples(),
        preempted_ns: lc.preempted_ns,
        preempted_switches: lc.preempted,
        mostly_off_cpu: j.mostly_off_cpu,
        functions,
        polls_over_ns: over,
        truncated_stacks: lc.truncated,
        location,
    });
}

/// "burning CPU in F (file:line): 62% of the 40 on-CPU samples in its
/// polls over 10 ms (blocked: 0 ns, preempted: 3 ms)" or
/// "blocked in F (file:line) via G: 95% of the 1.2 s off-CPU in its polls
/// over 10 ms, over 12 switch-outs (CPU samples: 3)".
fn verdict(lc: &LocCpu, j: &Judged, over: u64) -> String {
    let scope = if over > 0 {
        format!("its polls over {}", fmt_ns(over))
    } else {
        "its polls".to_string()
    };
    match (j.mostly_off_cpu, j.on.first(), j.off.first()) {
        (true, _, Some(top)) => format!(
            "blocked in {}: {:.0}% of the {} off-CPU in {scope}, over {} switch-outs (CPU samples: {})",
            top.label(),
            100.0 * top.share,
            fmt_ns(j.off_cpu_ns),
            lc.off.samples(),
            lc.on.samples()
        ),
        (false, Some(top), _) => format!(
            "burning CPU in {}: {:.0}% of the {} on-CPU samples in {scope} (blocked: {}, preempted: {})",
            FunctionStat {
                via: None,
                ..top.clone()
            }
            .label(),
            100.0 * top.share,
            lc.on.samples(),
            fmt_ns(j.off_cpu_ns),
            fmt_ns(lc.preempted_ns)
        ),
        _ => format!("no CPU samples were taken in {scope}"),
    }
}
