//! The memory profile in the runtime report: the per-location table and
//! the `memory_growth` findings ([`crate::memory`] computes both).

use super::report::{Finding, FindingKind, Report, Severity};
use crate::functions::StackNames;
use crate::memory;
use runtrace_model::profile::Profile;

impl Report {
    /// Fills [`Report::memory`] and adds a `memory_growth` finding per
    /// location whose live bytes grow steadily (after the others: it is
    /// its own cause, not grouped with a location's poll findings).
    /// Nothing without allocation samples.
    pub(crate) fn add_memory(&mut self, profile: &Profile, names: &mut StackNames) {
        if profile.allocs.is_empty() {
            return;
        }
        self.memory = memory::per_location(profile, self.duration_ns);
        self.memory_spans = memory::per_span(profile, self.duration_ns);
        if !profile.memory.live_set {
            self.notes.push(
                "the memory profile has no live set (record with RUNTRACE_ALLOC_LIVE=on): live bytes and memory_growth are not known"
                    .to_string(),
            );
        }
        if profile.memory.lost_frees > 0 {
            self.notes.push(format!(
                "{} frees of sampled allocations were lost: live bytes may be overstated",
                profile.memory.lost_frees
            ));
        }
        for g in memory::growth(profile, self.duration_ns, names) {
            self.findings.push(Finding {
                kind: FindingKind::MemoryGrowth,
                severity: Severity::Warning,
                spawn_loc: Some(g.location.clone()),
                spawn_loc_id: None,
                spawn_locs: vec![g.location.clone()],
                worker: None,
                window_ns: Some((0, self.duration_ns as i64)),
                detail: g.detail(),
                evidence: g.to_json(),
                victims: Vec::new(),
                effects: Vec::new(),
                functions: None,
                spans: Vec::new(),
            });
        }
    }
}
