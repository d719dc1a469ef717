//! The `cpu_samples` and `alloc_samples` tables: a recording's
//! CPU-profile samples (format
//! 1.1's `cpu_sample` and `off_cpu` events), attributed to the poll, task,
//! spawn location and worker they were taken in exactly as
//! `runtrace_model::profile` does (its [`ProfilePass`] runs inside the
//! export's one read), with their stacks symbolized (runtrace-symbolize;
//! each distinct stack once).
//!
//! Samples of a recording without a `PROFILE` frame (not written by the
//! recorder, which always writes one with samples) are exported without
//! attribution.
//!
//! `alloc_samples` has one row per sampled allocation (`alloc_sample`),
//! attributed the same way, with `size`, `weight` (the bytes it stands
//! for), `live` (`off`, `tracked`, `untracked`), `freed_ns` (its free, with
//! the live set) and `function`: the allocating function
//! (`runtrace_analyze::memory::allocating_frame`).
//!
//! A recording's samples are held until the recording ends (the attribution
//! hands them over then): about 150 bytes a sample, far fewer than its
//! events (a sample per thread every 10 ms at 99 Hz).
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! use runtrace_format::frame::ProfileInfo;
//! use runtrace_parquet::{export, ExportOptions};
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.profile(&ProfileInfo { mode: 1, hz: 99, flags: 0, message: String::new() });
//! b.stacks(&[(1, &[0x40_1234, 0x40_1000])]);
//! b.spawn(100, 1_000, 7, 0, 1, 0);
//! b.poll_start(100, 0, 2_000, 7, 0, 0);
//! b.cpu_sample(1, 3_000, 100, 1); // in the poll (the writer thread's chunks)
//! b.alloc_sample(1, 3_500, 100, 1, 64, 4096, 0x9000, 1); // a sampled allocation
//! b.alloc_free(1, 3_800, 100, 0x9000, 0); // and its free
//! b.poll_end(100, 0, 4_000, 7, true);
//! let dir = tempfile::tempdir().unwrap();
//! let trace = dir.path().join("trace.0.bin");
//! std::fs::write(&trace, b.finish()).unwrap();
//! let opts = ExportOptions { host: Some("h1".into()), ..Default::default() };
//! let s = export(&[trace], &dir.path().join("ds"), &opts).unwrap();
//! assert_eq!(s.rows("cpu_samples"), 1);
//! assert_eq!(s.rows("alloc_samples"), 1);
//! // No MAPPINGS frame: the frames are `[unknown] 0x...`, and a note says why.
//! assert!(s.notes.iter().any(|n| n.contains("MAPPINGS")), "{:?}", s.notes);
//! ```

use crate::writer::TableWriter;
use runtrace_model::event::{kind, Ev};
use runtrace_model::input::ReadStats;
use runtrace_model::lifecycle::Life;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::profile::{Live, ProfilePass, SampleKind};
use runtrace_symbolize::{SymbolizeOptions, Symbolizer};
use std::collections::HashMap;
use std::sync::Arc;

/// One recording's samples on their way to `cpu_samples`.
#[derive(Default)]
pub struct Samples {
    pass: ProfilePass,
    /// What a user should know (no mappings, binaries not found, ...), one
    /// line each, without repeats.
    pub notes: Vec<String>,
}

impl Samples {
    /// The events the attribution reads.
    pub fn wants() -> Wants {
        ProfilePass::default().wants()
    }

    /// One event of the read (any kind; those the attribution does not
    /// read are ignored). Until a `PROFILE` frame has been read (a
    /// recording with CPU profiling writes one before its first chunk),
    /// only samples are taken: an export without profiles does not pay for
    /// the attribution's bookkeeping of every poll.
    #[inline]
    pub fn event(&mut self, ev: &Ev, m: &Model) {
        if (!m.profiles.is_empty() || kind::is_profile(ev.kind)) && self.pass.wants().has(ev.kind) {
            self.pass.event(ev, m);
        }
    }

    /// One lifecycle record of the read (the attribution pairs polls with
    /// them), taken as [`Samples::event`] takes events.
    #[inline]
    pub fn life(&mut self, rec: &Life<'_>, m: &Model) {
        if !m.profiles.is_empty() {
            self.pass.life(rec, m);
        }
    }

    /// Writes the samples gathered since the last call, those of process
    /// `p` of the model, to `w`, and starts afresh for the next recording.
    /// Allocation samples go to `allocs` (`alloc_samples`).
    pub fn write(
        &mut self,
        w: &mut TableWriter,
        allocs: &mut TableWriter,
        m: &Model,
        p: usize,
    ) -> Result<(), String> {
        let profile = std::mem::take(&mut self.pass).profile(m, ReadStats::default());
        if !profile.has_samples() {
            return Ok(());
        }
        let proc = &m.procs[p];
        let mappings: Vec<runtrace_symbolize::Mapping> = profile
            .mappings
            .iter()
            .map(|x| runtrace_symbolize::Mapping {
                start: x.start,
                end: x.end,
                file_offset: x.file_offset,
                build_id: x.build_id.clone(),
                path: x.path.clone(),
            })
            .collect();
        let mut sym = Symbolizer::new(&mappings, SymbolizeOptions::default());
        // Function names by stack (interned: equal stacks share an Arc).
        let mut names: HashMap<Arc<[u64]>, Vec<Arc<str>>> = HashMap::new();
        let wall = |ns: i64| (proc.anchor_wall_ns as i64).saturating_add(ns);
        for s in &profile.samples {
            let frames = names.entry(s.stack.clone()).or_insert_with(|| {
                sym.stack(&s.stack)
                    .into_iter()
                    .map(|f| f.function)
                    .collect()
            });
            let off = match s.kind {
                SampleKind::OnCpu => None,
                SampleKind::OffCpu { off_ns } => Some(off_ns.min(i64::MAX as u64) as i64),
            };
            w.u64(proc.pid)
                .u64(proc.recording_id)
                .u64(s.tid)
                .i64(wall(s.ts_ns))
                .opt_u64(s.task)
                .str(s.location.as_deref())
                .opt_u32(s.worker)
                .opt_i64(s.poll_start_ns.map(wall))
                .bool(off.is_none())
                .opt_i64(off)
                .str((!s.thread.is_empty()).then_some(s.thread.as_str()))
                .str(frames.first().map(|f| &**f))
                .str_list(frames.iter().map(|f| &**f));
            w.end_row()?;
        }
        for s in &profile.allocs {
            let frames = sym.stack(&s.stack);
            let function = runtrace_analyze::memory::allocating_frame(&frames).or(frames.first());
            let live = match s.live {
                Live::Off => "off",
                Live::Tracked => "tracked",
                Live::Untracked => "untracked",
            };
            allocs
                .u64(proc.pid)
                .u64(proc.recording_id)
                .u64(s.tid)
                .i64(wall(s.ts_ns))
                .opt_u64(s.task)
                .str(s.location.as_deref())
                .opt_u32(s.worker)
                .u64(s.size)
                .u64(s.weight)
                .str(Some(live))
                .opt_i64(s.freed_ns.map(wall))
                .str((!s.thread.is_empty()).then_some(s.thread.as_str()))
                .str(function.map(|f| &*f.function))
                .str_list(frames.iter().map(|f| &*f.function));
            allocs.end_row()?;
        }
        for n in profile.notes.into_iter().chain(sym.problems()) {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
        Ok(())
    }
}
