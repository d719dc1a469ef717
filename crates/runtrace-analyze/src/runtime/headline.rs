//! One line per finding, for the person on call (issue 35 item 7): what
//! `runtrace analyze`'s text and the HTML report show first, before the
//! evidence. A headline says the severity, the kind, the blamed location,
//! what its polls did (the top function and whether they burned CPU or
//! blocked, when the trace has samples; else the finding's first clause),
//! and the impact (how many polls of other locations it delayed, the
//! worst delay). The "what to fix first" list is the first findings'
//! headlines, in blame order.

use super::report::{Finding, Report, Severity};
use runtrace_model::fmt_ns;
use std::fmt::Write as _;

/// The most findings the "what to fix first" list names.
pub const FIX_FIRST: usize = 5;

/// Longest function name a headline shows whole; longer ones keep their
/// end (the function's own name) after an ellipsis.
const NAME_MAX: usize = 80;

/// Longest first clause of a finding's detail a headline shows.
const CLAUSE_MAX: usize = 140;

impl Finding {
    /// The finding's one-line headline: severity, kind, blamed location,
    /// the top function and the CPU-or-blocked verdict (or, without CPU
    /// samples, the detail's first clause), and the impact on other
    /// locations.
    ///
    /// ```
    /// # use runtrace_analyze::analyze_bytes;
    /// # use runtrace_model::synth::TraceBuilder;
    /// let mut b = TraceBuilder::new();
    /// b.location(1, "src/main.rs", 10, 5);
    /// b.spawn(7, 1_000, 1, 0, 1, 0);
    /// b.poll_start(7, 0, 2_000, 1, 0, 0);
    /// b.poll_end(7, 0, 60_000_000, 1, true); // a 60 ms poll
    /// let r = analyze_bytes(&b.finish(), Default::default());
    /// let h = r.findings[0].headline();
    /// assert!(h.starts_with("[CRITICAL] long_poll at src/main.rs:10:5: "), "{h}");
    /// ```
    pub fn headline(&self) -> String {
        let sev = match self.severity {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "WARNING",
        };
        format!("[{sev}] {}", self.headline_text())
    }

    /// [`Finding::headline`] without its severity (for a page that shows
    /// the severity its own way).
    ///
    /// ```
    /// # use runtrace_analyze::analyze_bytes;
    /// # use runtrace_model::synth::TraceBuilder;
    /// let mut b = TraceBuilder::new();
    /// b.location(1, "src/main.rs", 10, 5);
    /// b.spawn(7, 1_000, 1, 0, 1, 0);
    /// b.poll_start(7, 0, 2_000, 1, 0, 0);
    /// b.poll_end(7, 0, 60_000_000, 1, true);
    /// let r = analyze_bytes(&b.finish(), Default::default());
    /// assert!(r.findings[0].headline_text().starts_with("long_poll at src/main.rs:10:5: "));
    /// ```
    pub fn headline_text(&self) -> String {
        let mut h = self.kind.as_str().to_string();
        if let Some(l) = &self.spawn_loc {
            let _ = write!(h, " at {l}");
        }
        let _ = write!(h, ": {}", self.verdict());
        if let Some(i) = self.impact() {
            let _ = write!(h, "; {i}");
        }
        if self.evidence.get("lost_events").is_some() {
            // Judged on a read that lost events (findings::caveat_lost).
            h.push_str("; unconfirmed: the read lost events");
        }
        h
    }

    /// What the blamed polls did: "burning CPU in F (S% of N samples)" or
    /// "blocked in F via V (S% of the blocked time)" from the finding's
    /// own samples, else the detail's first clause.
    fn verdict(&self) -> String {
        if let Some(c) = &self.functions {
            if let Some(top) = c.functions.first() {
                let name = shortened(&top.function);
                let via = top
                    .via
                    .as_ref()
                    .map_or(String::new(), |v| format!(" via {}", shortened(v)));
                return if top.off_cpu {
                    format!(
                        "blocked in {name}{via} ({:.0}% of {} blocked)",
                        100.0 * top.share,
                        fmt_ns(c.off_cpu_ns)
                    )
                } else {
                    format!(
                        "burning CPU in {name}{via} ({:.0}% of {} samples)",
                        100.0 * top.share,
                        c.on_cpu_samples
                    )
                };
            }
        }
        first_clause(&self.detail)
    }

    /// "delayed N polls of K other locations (worst W)", from the
    /// victims other than the blamed location (its own delayed polls when
    /// it delayed only itself); None when it delayed no one.
    fn impact(&self) -> Option<String> {
        let own = self.spawn_loc.as_deref();
        let (mut polls, mut locs, mut worst) = (0u64, 0usize, 0u64);
        for v in self.victims.iter().filter(|v| Some(&*v.location) != own) {
            polls += v.delayed_polls;
            locs += 1;
            worst = worst.max(v.worst_delay_ns);
        }
        if locs > 0 {
            return Some(format!(
                "delayed {polls} poll{} of {locs} other location{} (worst {})",
                if polls == 1 { "" } else { "s" },
                if locs == 1 { "" } else { "s" },
                fmt_ns(worst)
            ));
        }
        let v = self.victims.iter().find(|v| Some(&*v.location) == own)?;
        Some(format!(
            "delayed {} of its own polls (worst {})",
            v.delayed_polls,
            fmt_ns(v.worst_delay_ns)
        ))
    }
}

impl Report {
    /// The "what to fix first" lines: the first [`FIX_FIRST`] findings'
    /// headlines, numbered, in blame order (causes first), and how many
    /// more follow; empty without findings.
    ///
    /// ```
    /// # use runtrace_analyze::analyze_bytes;
    /// # use runtrace_model::synth::TraceBuilder;
    /// let r = analyze_bytes(&TraceBuilder::new().finish(), Default::default());
    /// assert!(r.fix_first().is_empty());
    /// ```
    pub fn fix_first(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .findings
            .iter()
            .take(FIX_FIRST)
            .enumerate()
            .map(|(i, f)| format!("{}. {}", i + 1, f.headline()))
            .collect();
        let more = self.findings.len().saturating_sub(FIX_FIRST);
        if more > 0 {
            out.push(format!(
                "(and {more} more finding{} below)",
                if more == 1 { "" } else { "s" }
            ));
        }
        out
    }
}

/// A name of at most [`NAME_MAX`] characters: a longer one keeps its end.
fn shortened(name: &str) -> String {
    let n = name.chars().count();
    if n <= NAME_MAX {
        return name.to_string();
    }
    let tail: String = name.chars().skip(n - (NAME_MAX - 1)).collect();
    format!("…{tail}")
}

/// The detail's first clause: up to its first "; " or ": " outside
/// parentheses (what follows a colon is the list of evidence), at most
/// [`CLAUSE_MAX`] characters (a longer one ends at a word, with an
/// ellipsis).
fn first_clause(detail: &str) -> String {
    let mut depth = 0i32;
    let mut end = detail.len();
    let b = detail.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b';' | b':' if depth <= 0 && b.get(i + 1) == Some(&b' ') => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let clause = &detail[..end];
    if clause.chars().count() <= CLAUSE_MAX {
        return clause.to_string();
    }
    let head: String = clause.chars().take(CLAUSE_MAX - 1).collect();
    let cut = match head.rfind(' ') {
        Some(i) if i > 0 => &head[..i],
        _ => &head[..],
    };
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_keep_their_end_and_clauses_their_start() {
        let long = format!("{}::handler", "a".repeat(200));
        let s = shortened(&long);
        assert_eq!(s.chars().count(), NAME_MAX);
        assert!(s.starts_with('…') && s.ends_with("::handler"), "{s}");
        assert_eq!(shortened("f"), "f");
        assert_eq!(first_clause("one; two"), "one");
        let c = first_clause(&"é".repeat(500));
        assert_eq!(c.chars().count(), CLAUSE_MAX);
        assert!(c.ends_with('…'));
        // A clause stops before its list of evidence, not inside
        // parentheses, or at a word.
        assert_eq!(first_clause("a (b; c: d) e: f"), "a (b; c: d) e");
        assert_eq!(
            first_clause("at src/a.rs:3:1 took 5 ms; more"),
            "at src/a.rs:3:1 took 5 ms"
        );
        let list = format!(
            "workers were starved: {}",
            "worker 1 waited 2 s, ".repeat(20)
        );
        assert_eq!(first_clause(&list), "workers were starved");
        let words = "word ".repeat(60);
        let c = first_clause(&words);
        assert!(
            c.ends_with("word…") && c.chars().count() <= CLAUSE_MAX,
            "{c}"
        );
    }
}
