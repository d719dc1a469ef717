//! Folded stacks of a recording's CPU profile, what `runtrace flamegraph`
//! draws and the MCP tool `get_flamegraph` answers: select samples
//! ([`Selection`]), name their frames ([`StackNames`], over
//! `runtrace_symbolize`), fold identical stacks ([`fold`], inferno's
//! `a;b;c N` format, root first). The SVG is drawn by runtrace-export.
//!
//! ```
//! use runtrace_analyze::folded::fold;
//! let folded = fold([
//!     (vec!["main".to_string(), "parse".to_string()], 3),
//!     (vec!["main".to_string()], 1),
//!     (vec!["main".to_string(), "parse".to_string()], 2),
//! ]);
//! assert_eq!(folded, "main 1\nmain;parse 5\n");
//! ```

use crate::functions::StackNames;
use runtrace_model::profile::{AllocSample, Profile, Sample, SampleKind};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Which samples a flame graph shows. On-CPU samples by default, each
/// weighing 1; with `off_cpu`, the off-CPU switch-outs instead, each
/// weighing its time off-CPU in microseconds (at least 1), so widths are
/// time blocked.
///
/// ```
/// use runtrace_analyze::folded::Selection;
/// use runtrace_model::profile::{Sample, SampleKind};
/// let s = Selection { location: Some("handler.rs".into()), ..Selection::default() };
/// assert_eq!(s.count_name(), "samples");
/// // runtrace's own threads are left out unless asked for.
/// let sampler = Sample {
///     ts_ns: 1, tid: 9, thread: "runtrace-tokio-sampler-0".into(), stack: vec![1].into(),
///     kind: SampleKind::OnCpu, task: None, location: None, worker: None,
///     poll_start_ns: None, poll_end_ns: None,
/// };
/// assert!(!Selection::default().matches(&sampler));
/// assert!(Selection { include_runtrace: true, ..Selection::default() }.matches(&sampler));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Off-CPU stacks (weighted by µs off-CPU) instead of on-CPU samples.
    pub off_cpu: bool,
    /// The memory profile instead of CPU samples: allocation samples,
    /// each weighing the bytes it stands for (`off_cpu` is then ignored).
    pub memory: Option<MemoryView>,
    /// Only samples taken inside polls of tasks whose spawn location
    /// contains this.
    pub location: Option<String>,
    /// Only samples taken inside polls run by this worker index.
    pub worker: Option<u32>,
    /// Only samples from this time on (ns since the recording started).
    pub from_ns: Option<i64>,
    /// Only samples up to this time (ns since the recording started).
    pub to_ns: Option<i64>,
    /// Also samples of runtrace's own threads (the writer, the queue
    /// sampler: [`runtrace_model::profile::is_runtrace_thread`]), which
    /// are left out by default: they are runtrace's cost, not the
    /// application's.
    pub include_runtrace: bool,
}

/// Which bytes a memory flame graph shows.
///
/// ```
/// use runtrace_analyze::folded::{MemoryView, Selection};
/// let s = Selection { memory: Some(MemoryView::Live { at_ns: None }), ..Selection::default() };
/// assert_eq!(s.title(), "bytes live at the end");
/// assert_eq!(s.count_name(), "bytes");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryView {
    /// Bytes allocated (every sample, by its weight).
    Alloc,
    /// Bytes live at `at_ns` (ns since the start; None: the end): the
    /// samples the live set tracked that were made by then and not freed.
    Live {
        /// The instant; None: the end of the recording.
        at_ns: Option<i64>,
    },
}

impl MemoryView {
    /// The view `runtrace flamegraph --alloc` / `--live [--at S]` asks
    /// for (None: neither, a CPU profile).
    ///
    /// ```
    /// use runtrace_analyze::folded::MemoryView;
    /// assert_eq!(MemoryView::from_flags(false, true, Some(1.5)), Some(MemoryView::Live { at_ns: Some(1_500_000_000) }));
    /// assert_eq!(MemoryView::from_flags(false, false, None), None);
    /// ```
    pub fn from_flags(alloc: bool, live: bool, at_s: Option<f64>) -> Option<MemoryView> {
        if live {
            Some(MemoryView::Live {
                at_ns: at_s.map(|s| (s * 1e9) as i64),
            })
        } else {
            alloc.then_some(MemoryView::Alloc)
        }
    }
}

impl Selection {
    /// Whether allocation sample `s` is selected (a memory view only).
    pub fn matches_alloc(&self, s: &AllocSample) -> bool {
        let view_ok = match self.memory {
            None => false,
            Some(MemoryView::Alloc) => true,
            Some(MemoryView::Live { at_ns }) => s.live_at(at_ns.unwrap_or(i64::MAX)),
        };
        view_ok
            && (self.include_runtrace || !runtrace_model::profile::is_runtrace_thread(&s.thread))
            && self.location.as_ref().is_none_or(|want| {
                s.location
                    .as_deref()
                    .is_some_and(|l| l.contains(want.as_str()))
            })
            && self.worker.is_none_or(|w| s.worker == Some(w))
            && self.from_ns.is_none_or(|t| s.ts_ns >= t)
            && self.to_ns.is_none_or(|t| s.ts_ns <= t)
    }

    /// A flame graph's title for this selection.
    ///
    /// ```
    /// use runtrace_analyze::folded::Selection;
    /// let s = Selection { location: Some("get.rs".into()), ..Selection::default() };
    /// assert_eq!(s.title(), "on-CPU samples in polls of get.rs");
    /// ```
    pub fn title(&self) -> String {
        let at;
        let what = match self.memory {
            Some(MemoryView::Alloc) => "bytes allocated",
            Some(MemoryView::Live { at_ns: None }) => "bytes live at the end",
            Some(MemoryView::Live { at_ns: Some(t) }) => {
                at = format!("bytes live at {:.3} s", t as f64 / 1e9);
                &at
            }
            None if self.off_cpu => "off-CPU time",
            None => "on-CPU samples",
        };
        match &self.location {
            Some(l) => format!("{what} in polls of {l}"),
            None => what.to_string(),
        }
    }

    /// Whether sample `s` is selected.
    pub fn matches(&self, s: &Sample) -> bool {
        let kind_ok = match s.kind {
            SampleKind::OnCpu => !self.off_cpu,
            SampleKind::OffCpu { .. } => self.off_cpu,
        };
        kind_ok
            && (self.include_runtrace || !s.is_runtrace())
            && self.location.as_ref().is_none_or(|want| {
                s.location
                    .as_deref()
                    .is_some_and(|l| l.contains(want.as_str()))
            })
            && self.worker.is_none_or(|w| s.worker == Some(w))
            && self.from_ns.is_none_or(|t| s.ts_ns >= t)
            && self.to_ns.is_none_or(|t| s.ts_ns <= t)
    }

    /// The weight of a selected sample: 1, or µs off-CPU (at least 1).
    pub fn weight(&self, s: &Sample) -> u64 {
        match s.kind {
            SampleKind::OnCpu => 1,
            SampleKind::OffCpu { off_ns } => (off_ns / 1000).max(1),
        }
    }

    /// What a width counts: `samples`, or `µs` off-CPU.
    pub fn count_name(&self) -> &'static str {
        if self.memory.is_some() {
            "bytes"
        } else if self.off_cpu {
            "µs"
        } else {
            "samples"
        }
    }
}

/// The stacks of the samples `sel` selects, named by `names`, root first,
/// with their weights ([`Selection::weight`]); each distinct stack is
/// named once. Feed them to [`fold`].
pub fn stacks(
    profile: &Profile,
    sel: &Selection,
    names: &mut StackNames,
) -> Vec<(Vec<String>, u64)> {
    if sel.memory.is_some() {
        return named(
            profile
                .allocs
                .iter()
                .filter(|s| sel.matches_alloc(s))
                .map(|s| (&s.stack, s.weight)),
            names,
        );
    }
    named(
        profile
            .samples
            .iter()
            .filter(|s| sel.matches(s))
            .map(|s| (&s.stack, sel.weight(s))),
        names,
    )
}

/// Names weighted address stacks (leaf first) as frame names, root first,
/// summing the weights of equal address stacks first so each is named
/// once; the result is in the order stacks were first seen.
pub fn named<'a>(
    samples: impl IntoIterator<Item = (&'a Arc<[u64]>, u64)>,
    names: &mut StackNames,
) -> Vec<(Vec<String>, u64)> {
    let mut order: Vec<&Arc<[u64]>> = Vec::new();
    let mut sums: HashMap<&Arc<[u64]>, u64> = HashMap::new();
    for (stack, w) in samples {
        let e = sums.entry(stack).or_insert_with(|| {
            order.push(stack);
            0
        });
        *e = e.saturating_add(w);
    }
    order
        .into_iter()
        .map(|stack| {
            let frames = names.frames(stack);
            let root_first = frames
                .iter()
                .rev()
                .map(|f| f.function.to_string())
                .collect();
            (root_first, sums[stack])
        })
        .collect()
}

/// Why a profile gives no flame graph, for the user: recorded without
/// CPU profiling (no PROFILE frame), profiling impossible (mode 0, with
/// the recorder's message), or samples present but none selected.
///
/// ```
/// use runtrace_model::profile::Profile;
/// use runtrace_analyze::folded::{why_empty, Selection};
/// let m = why_empty(&Profile::default(), &Selection::default());
/// assert!(m.contains("without CPU profiling"), "{m}");
/// ```
pub fn why_empty(profile: &Profile, sel: &Selection) -> String {
    if let Some(view) = sel.memory {
        return why_no_bytes(profile, view);
    }
    if profile.info.is_empty() {
        return "no CPU samples: the trace has no PROFILE frame, it was recorded without CPU profiling (record with RUNTRACE_CPU_HZ=99, or Recorder::builder().cpu_profile(99))".to_string();
    }
    let impossible: Vec<String> = profile
        .info
        .iter()
        .filter(|(_, i)| i.mode == 0)
        .map(|(p, i)| format!("{}: {}", p.display(), i.message))
        .collect();
    if profile.samples.is_empty() && !impossible.is_empty() {
        return format!(
            "no CPU samples: CPU profiling was asked for but was not possible ({})",
            impossible.join("; ")
        );
    }
    let kind = if sel.off_cpu { "off-CPU" } else { "on-CPU" };
    let of_kind = profile
        .samples
        .iter()
        .filter(|s| matches!(s.kind, SampleKind::OffCpu { .. }) == sel.off_cpu)
        .count();
    if of_kind == 0 {
        return format!(
            "no {kind} samples in the trace ({} samples of the other kind{})",
            profile.samples.len(),
            if sel.off_cpu {
                "; off-CPU stacks are recorded only by perf_event_open with context switches"
            } else {
                ""
            }
        );
    }
    let other = Selection {
        off_cpu: !sel.off_cpu,
        ..sel.clone()
    };
    let hint = match profile.samples.iter().filter(|s| other.matches(s)).count() {
        0 => String::new(),
        n => format!(
            "; {n} {} samples do: try {}",
            if sel.off_cpu { "on-CPU" } else { "off-CPU" },
            if sel.off_cpu {
                "without --off-cpu"
            } else {
                "--off-cpu"
            }
        ),
    };
    format!("none of the trace's {of_kind} {kind} samples match the selection (--location, --worker, --from/--to){hint}")
}

/// [`why_empty`] for a memory view.
fn why_no_bytes(profile: &Profile, view: MemoryView) -> String {
    if profile.allocs.is_empty() {
        return "no allocation samples: the trace was recorded without a memory profile (the \
                global allocator runtrace::alloc::Sampled and RUNTRACE_ALLOC_SAMPLE_BYTES=512K, or \
                Recorder::builder().memory_profile(512 * 1024))"
            .to_string();
    }
    if matches!(view, MemoryView::Live { .. }) && !profile.memory.live_set {
        return "no live set: the trace was recorded without it, so frees are unknown (record \
                with RUNTRACE_ALLOC_LIVE=on, or Recorder::builder().memory_live(true)); \
                --alloc shows the bytes allocated"
            .to_string();
    }
    let what = match view {
        MemoryView::Alloc => "allocation samples",
        MemoryView::Live { .. } => "live allocation samples",
    };
    format!(
        "none of the trace's {} allocation samples is selected: no {what} match (--location, --worker, --from/--to, --at)",
        profile.allocs.len()
    )
}

/// Folded stacks: one line `root;...;leaf COUNT` per distinct stack,
/// sorted by stack (so equal inputs give byte-identical output), counts
/// of equal stacks added up, stacks with a zero count left out.
///
/// A frame name never contains `;` (the separator) nor a line break:
/// `;` becomes `:`, control characters become spaces. An empty stack is
/// drawn as the one frame `[no stack]`.
///
/// ```
/// let f = runtrace_analyze::folded::fold([(vec!["a;b".to_string()], 1), (vec![], 2)]);
/// assert_eq!(f, "[no stack] 2\na:b 1\n");
/// ```
pub fn fold<I: IntoIterator<Item = (Vec<String>, u64)>>(stacks: I) -> String {
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for (frames, count) in stacks {
        if count == 0 {
            continue;
        }
        let key = if frames.is_empty() {
            NO_STACK.to_string()
        } else {
            let names: Vec<String> = frames.iter().map(|f| clean(f)).collect();
            names.join(";")
        };
        let sum = sums.entry(key).or_insert(0);
        *sum = sum.saturating_add(count);
    }
    let mut out = String::new();
    for (stack, n) in sums {
        out.push_str(&stack);
        out.push(' ');
        out.push_str(&n.to_string());
        out.push('\n');
    }
    out
}

/// The frame an empty stack (an undefined stack id) is drawn as.
pub const NO_STACK: &str = "[no stack]";

/// A frame name safe in a folded line.
fn clean(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}
