//! Orders findings by blame: every finding names the location it blames
//! (`spawn_loc`); the findings blaming one location become one, led by its
//! cause (long or slow polls) or, without one, by its strongest symptom,
//! the others attached as `effects`. Causes that explain the most delayed
//! polls come first. docs/analysis.md gives the rules and the reasoning.

use super::report::{Finding, FindingKind, Victim};

/// How strongly a kind of finding proves a cause: measured polls that
/// held a worker first, then symptoms whose culprit was inferred.
/// A lock or resource finding leads the group of its location: it says
/// what the location's long polls (if any) were doing to others.
fn rank(k: FindingKind) -> u8 {
    match k {
        FindingKind::LockConvoy => 0,
        FindingKind::LockHeldAcrossAwait => 1,
        FindingKind::ResourceWait => 2,
        FindingKind::LongPoll => 3,
        FindingKind::SlowPoll => 4,
        FindingKind::TaskLeak => 5,
        FindingKind::StuckTask => 6,
        FindingKind::SelfWake => 7,
        FindingKind::HostStarvation => 8,
        FindingKind::LocalQueueBuildup => 9,
        FindingKind::WakeDelay => 10,
        FindingKind::IdleWhileQueued => 11,
        FindingKind::WorkerImbalance => 12,
        // Added after blame grouping (`add_functions`): ranks last here.
        FindingKind::MemoryGrowth => 13,
    }
}

/// Most delayed polls first, then the longest wait, then by name.
pub(crate) fn sort_victims(v: &mut [Victim]) {
    v.sort_by(|a, b| {
        b.delayed_polls
            .cmp(&a.delayed_polls)
            .then(b.worst_delay_ns.cmp(&a.worst_delay_ns))
            .then(a.location.cmp(&b.location))
    });
}

/// Adds `more` to `into`, keeping one entry per location (the larger
/// counts: the same delayed polls are seen by several symptoms).
fn merge_victims(into: &mut Vec<Victim>, more: &[Victim]) {
    for m in more {
        match into.iter_mut().find(|v| v.location == m.location) {
            Some(v) => {
                v.delayed_polls = v.delayed_polls.max(m.delayed_polls);
                v.worst_delay_ns = v.worst_delay_ns.max(m.worst_delay_ns);
            }
            None => into.push(m.clone()),
        }
    }
    sort_victims(into);
}

/// Groups the findings by blamed location (findings blaming no location
/// stay alone), leads each group by its strongest finding with the rest as
/// its effects, and orders the groups: severity, then cause before
/// symptom, then causes in the process before the host's, then delayed
/// polls of other locations explained, then poll time.
pub(crate) fn arrange(all: Vec<Finding>) -> Vec<Finding> {
    let mut groups: Vec<Vec<Finding>> = Vec::new();
    for f in all {
        let g = f.spawn_loc.as_ref().and_then(|l| {
            groups
                .iter()
                .position(|g| g[0].spawn_loc.as_ref() == Some(l))
        });
        match g {
            Some(i) => groups[i].push(f),
            None => groups.push(vec![f]),
        }
    }
    let mut out: Vec<Finding> = groups
        .into_iter()
        .map(|mut g| {
            g.sort_by(|a, b| {
                rank(a.kind)
                    .cmp(&rank(b.kind))
                    .then(b.severity.cmp(&a.severity))
            });
            let mut lead = g.remove(0);
            for mut eff in g {
                merge_victims(&mut lead.victims, &eff.victims);
                // A symptom only the blamed location suffered (its tasks
                // queued behind each other) does not make it worse for
                // anyone else.
                if hurts_others(&eff) {
                    lead.severity = lead.severity.max(eff.severity);
                }
                for e in std::mem::take(&mut eff.effects) {
                    lead.effects.push(e);
                }
                lead.effects.push(eff);
            }
            lead
        })
        .collect();
    let explained = |f: &Finding| -> u64 {
        f.victims
            .iter()
            .filter(|v| Some(&v.location) != f.spawn_loc.as_ref())
            .map(|v| v.delayed_polls)
            .sum()
    };
    let poll_ns = |f: &Finding| f.evidence["poll_ns_total"].as_u64().unwrap_or(0);
    // Imbalance never leads while another finding exists: it names no
    // delay of its own (the delays are findings of their own).
    let alone = |f: &Finding| f.kind == FindingKind::WorkerImbalance;
    out.sort_by(|a, b| {
        alone(a)
            .cmp(&alone(b))
            .then(b.severity.cmp(&a.severity))
            .then(is_cause(b.kind).cmp(&is_cause(a.kind)))
            // What the process can fix before what the host does to it.
            .then(b.spawn_loc.is_some().cmp(&a.spawn_loc.is_some()))
            .then(explained(b).cmp(&explained(a)))
            .then(poll_ns(b).cmp(&poll_ns(a)))
            .then(rank(a.kind).cmp(&rank(b.kind)))
    });
    out
}

/// Whether a finding's victims include a location other than the one it
/// blames, or it is idle workers beside queued work (no victims named).
/// Imbalance alone hurts nobody: a worker busier than another is only
/// harmful through the delays, which are findings of their own.
fn hurts_others(f: &Finding) -> bool {
    if f.kind == FindingKind::WorkerImbalance {
        return false;
    }
    f.victims.is_empty()
        || f.victims
            .iter()
            .any(|v| Some(&v.location) != f.spawn_loc.as_ref())
}

/// True for the kinds that are causes (polls that held a worker, or the
/// host), as opposed to symptoms.
pub(crate) fn is_cause(k: FindingKind) -> bool {
    rank(k) <= rank(FindingKind::HostStarvation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Severity;
    use serde_json::json;

    fn f(kind: FindingKind, sev: Severity, loc: &str, victims: u64) -> Finding {
        Finding {
            kind,
            severity: sev,
            spawn_loc: Some(loc.into()),
            spawn_loc_id: None,
            spawn_locs: vec![loc.into()],
            worker: None,
            window_ns: None,
            detail: String::new(),
            evidence: json!({}),
            victims: (victims > 0)
                .then(|| Victim {
                    location: "v".into(),
                    delayed_polls: victims,
                    worst_delay_ns: 1,
                })
                .into_iter()
                .collect(),
            effects: Vec::new(),
            functions: None,
            spans: Vec::new(),
        }
    }

    #[test]
    fn symptoms_attach_to_the_cause_they_blame() {
        let out = arrange(vec![
            f(FindingKind::WakeDelay, Severity::Critical, "a", 5),
            f(FindingKind::WorkerImbalance, Severity::Critical, "hog", 0),
            f(FindingKind::LongPoll, Severity::Warning, "hog", 9),
            f(FindingKind::WakeDelay, Severity::Critical, "hog", 12),
            f(FindingKind::LongPoll, Severity::Warning, "b", 0),
            f(FindingKind::WorkerImbalance, Severity::Critical, "b", 0),
        ]);
        let b = out.iter().find(|f| f.spawn_loc.as_deref() == Some("b"));
        assert_eq!(b.unwrap().severity, Severity::Warning, "imbalance alone");
        let out: Vec<Finding> = out
            .into_iter()
            .filter(|f| f.spawn_loc.as_deref() != Some("b"))
            .collect();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].kind, FindingKind::LongPoll);
        assert_eq!(out[0].severity, Severity::Critical, "its worst effect");
        assert_eq!(out[0].effects.len(), 2);
        assert_eq!(out[0].victims[0].delayed_polls, 12);
        assert!(is_cause(out[0].kind) && !is_cause(out[1].kind));
        assert_eq!(out[1].spawn_loc.as_deref(), Some("a"));
    }
}
