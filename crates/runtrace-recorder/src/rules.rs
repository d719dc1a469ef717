//! Built-in snapshot triggers the writer thread evaluates on what it
//! drains (docs/flight-recorder.md, "Triggers"):
//!
//! - slow poll (`snapshot_on_slow_poll`, `RUNTRACE_SNAPSHOT_POLL_MS`): a
//!   poll (`task_poll_start` to `task_poll_end` on one thread) longer
//!   than the limit fires once, either when the writer drains its end or,
//!   for a poll still running, at the first round that finds it open past
//!   the limit;
//! - wake-to-poll p99 (`snapshot_on_wake_p99`): in each window, the p99 of
//!   the time from a task's first wake to its next poll start above the
//!   limit fires at the window's end;
//! - dropped events (`snapshot_on_drops`): a round that reports at least
//!   the given number of events lost to full buffers (the writer counts
//!   those, no decoding needed);
//! - application events (`snapshot_on_event`): a `snapshot_request` event
//!   (`runtrace::snapshot!`) whose reason is listed, or an application
//!   event (`provider:name`) that is.
//!
//! The rules that look at events decode every event of the pieces the
//! writer takes, which it otherwise takes whole without decoding: they
//! cost the writer thread (not the recording threads) a walk of each
//! event.

use runtrace_format::chunk::{walk, ChunkState, RawValue};
use runtrace_format::schema::{ids, Schema};
use std::collections::HashMap;

/// Reason of the slow-poll rule's triggers.
pub(crate) const SLOW_POLL: &str = "slow-poll";
/// Reason of the wake-to-poll rule's triggers.
pub(crate) const WAKE_P99: &str = "wake-p99";
/// Reason of the dropped-events rule's triggers.
pub(crate) const DROPPED: &str = "dropped";

/// Fewest wake-to-poll samples a window needs for its p99 to count:
/// with fewer, "p99" is the largest of a handful and one late task would
/// fire it.
pub(crate) const MIN_WAKE_SAMPLES: u64 = 100;

/// Most tasks the wake-to-poll rule tracks as woken and not yet polled
/// (a wake beyond that is not measured): bounds its memory when tasks are
/// woken and never polled again.
const MAX_WOKEN: usize = 1 << 16;

/// One thread's poll in progress, as the rule last saw it.
#[derive(Default)]
pub(crate) struct PollWatch {
    /// When the open poll started (trace ticks).
    open: Option<u64>,
    /// The open poll already fired.
    fired: bool,
}

/// The slow-poll rule.
pub(crate) struct SlowPoll {
    /// The limit in trace ticks.
    pub(crate) limit: u64,
}

impl SlowPoll {
    /// Notes one event of a thread; pushes the time of a slow poll's end
    /// onto `fired`.
    fn event(&self, watch: &mut PollWatch, id: u32, ticks: u64, fired: &mut Vec<u64>) {
        if id == ids::TASK_POLL_START {
            *watch = PollWatch {
                open: Some(ticks),
                fired: false,
            };
        } else if id == ids::TASK_POLL_END {
            if let Some(t0) = watch.open.take() {
                if !watch.fired && ticks.saturating_sub(t0) > self.limit {
                    fired.push(ticks);
                }
            }
            watch.fired = false;
        }
    }

    /// Looks through one drained piece of a thread's events (`bytes`
    /// from registers `start`); pushes the time of each slow poll's end
    /// onto `fired`.
    #[cfg(test)]
    pub(crate) fn piece<'s>(
        &self,
        watch: &mut PollWatch,
        bytes: &[u8],
        start: ChunkState,
        schema: impl Fn(u32) -> Option<&'s Schema>,
        fired: &mut Vec<u64>,
    ) {
        let mut st = start;
        let _ = walk(bytes, &mut st, schema, |ev| {
            self.event(watch, ev.schema.id, ev.ticks, fired);
            Ok(())
        });
    }

    /// Whether the thread's open poll has run past the limit at `now`
    /// and has not fired yet (it fires now).
    pub(crate) fn still_running(&self, watch: &mut PollWatch, now: u64) -> bool {
        match watch.open {
            Some(t0) if !watch.fired && now.saturating_sub(t0) > self.limit => {
                watch.fired = true;
                true
            }
            _ => false,
        }
    }
}

/// What the wake-to-poll rule keeps of an event.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Wake,
    Poll,
    Gone,
}

/// The wake-to-poll p99 rule.
///
/// Threads' events come in per thread, a round at a time, so a wake on
/// one thread can be drained after the poll it led to on another. The
/// rule therefore keeps the round's wakes and poll starts, and walks them
/// in time order only up to the round's watermark (every event before it
/// has been drained), keeping the rest for the next round.
///
/// p99 above the limit, by nearest rank (`p99 = x[ceil(0.99 n)]` of the
/// window's `n` samples sorted), is `above > n - ceil(0.99 n)` where
/// `above` counts the samples over the limit: two counters per window,
/// no histogram.
pub(crate) struct WakeP99 {
    /// The limit and the window, in trace ticks.
    limit: u64,
    window: u64,
    /// Wakes and poll starts not yet walked (ticks, step, task).
    seen: Vec<(u64, Step, u64)>,
    /// Tasks woken and not polled since: their first wake's ticks.
    woken: HashMap<u64, u64>,
    /// The current window's start, and its samples (all, over the limit).
    start: Option<u64>,
    n: u64,
    above: u64,
}

impl WakeP99 {
    pub(crate) fn new(limit: u64, window: u64) -> WakeP99 {
        WakeP99 {
            limit,
            window: window.max(1),
            seen: Vec::new(),
            woken: HashMap::new(),
            start: None,
            n: 0,
            above: 0,
        }
    }

    fn event(&mut self, ev: &runtrace_format::chunk::RawEvent<'_, '_, '_>) {
        let step = match ev.schema.id {
            ids::TASK_WAKE => Step::Wake,
            ids::TASK_POLL_START => Step::Poll,
            ids::TASK_TERMINATE => Step::Gone,
            _ => return,
        };
        if let Some(RawValue::Task(t)) = ev.values.first() {
            self.seen.push((ev.ticks, step, *t));
        }
    }

    /// Whether the window's p99 is above the limit.
    fn window_fires(&self) -> bool {
        let n = self.n;
        n >= MIN_WAKE_SAMPLES && self.above > n - n.saturating_mul(99).div_ceil(100)
    }

    /// Closes the windows that end at or before `t`; pushes the end of
    /// each that fires.
    fn close_until(&mut self, t: u64, fired: &mut Vec<u64>) {
        let Some(start) = self.start else { return };
        if t < start.saturating_add(self.window) {
            return;
        }
        if self.window_fires() {
            fired.push(start + self.window);
        }
        // The next window holding `t` (empty ones in between are skipped).
        self.start = Some(start + (t - start) / self.window * self.window);
        self.n = 0;
        self.above = 0;
    }

    /// Walks, in time order, the kept events older than `watermark`.
    fn advance(&mut self, watermark: u64, fired: &mut Vec<u64>) {
        // Stable: a wake and the poll start it led to can share a tick.
        self.seen.sort_by_key(|&(t, s, _)| (t, s));
        let upto = self.seen.partition_point(|&(t, _, _)| t < watermark);
        for k in 0..upto {
            let (t, step, task) = self.seen[k];
            self.close_until(t, fired);
            match step {
                Step::Wake => {
                    if self.woken.len() < MAX_WOKEN || self.woken.contains_key(&task) {
                        self.woken.entry(task).or_insert(t);
                    }
                }
                Step::Poll => {
                    if let Some(w) = self.woken.remove(&task) {
                        self.start.get_or_insert(t);
                        self.n += 1;
                        if t.saturating_sub(w) > self.limit {
                            self.above += 1;
                        }
                    }
                }
                Step::Gone => {
                    self.woken.remove(&task);
                }
            }
        }
        self.seen.drain(..upto);
        self.close_until(watermark, fired);
    }
}

/// The application-event rule: names of `snapshot_request` reasons
/// (`*`: any) and of events (`provider:name`) that trigger a snapshot.
pub(crate) struct EventRule {
    /// Reasons of `snapshot!` that fire (empty with `any`).
    reasons: Vec<String>,
    any_request: bool,
    /// Events (provider, name) that fire.
    events: Vec<(String, String)>,
    /// Per schema id: 0 not looked at yet, 1 no, 2 fires.
    by_id: Vec<u8>,
}

impl EventRule {
    /// The rule for these names (checked by the configuration: none
    /// empty).
    pub(crate) fn new(names: &[String]) -> EventRule {
        let mut r = EventRule {
            reasons: Vec::new(),
            any_request: false,
            events: Vec::new(),
            by_id: Vec::new(),
        };
        for n in names {
            if n == "*" {
                r.any_request = true;
            } else if let Some((p, e)) = n.split_once(':') {
                r.events.push((p.to_string(), e.to_string()));
            } else {
                r.reasons.push(n.clone());
            }
        }
        r
    }

    fn event(
        &mut self,
        ev: &runtrace_format::chunk::RawEvent<'_, '_, '_>,
        fired: &mut Vec<(u64, String)>,
    ) {
        let id = ev.schema.id;
        if id == ids::SNAPSHOT_REQUEST {
            if let Some(RawValue::Str(reason)) = ev.values.first() {
                if self.any_request || self.reasons.iter().any(|r| r == reason) {
                    fired.push((ev.ticks, (*reason).to_string()));
                }
            }
            return;
        }
        if self.events.is_empty() {
            return;
        }
        let i = id as usize;
        if self.by_id.len() <= i {
            self.by_id.resize(i + 1, 0);
        }
        if self.by_id[i] == 0 {
            let s = ev.schema;
            let hit = self
                .events
                .iter()
                .any(|(p, n)| *p == s.provider && *n == s.name);
            self.by_id[i] = if hit { 2 } else { 1 };
        }
        if self.by_id[i] == 2 {
            let s = ev.schema;
            fired.push((ev.ticks, format!("{}:{}", s.provider, s.name)));
        }
    }
}

/// The built-in rules a recording has, and what they found this round.
#[derive(Default)]
pub(crate) struct Rules {
    pub(crate) slow_poll: Option<SlowPoll>,
    pub(crate) wake: Option<WakeP99>,
    /// Fewest events lost in one round that fire.
    pub(crate) drops: Option<u64>,
    pub(crate) events: Option<EventRule>,
    /// Slow polls' ends found while draining this round.
    pub(crate) slow: Vec<u64>,
    /// Application events found while draining this round.
    pub(crate) found: Vec<(u64, String)>,
    /// Windows found to fire.
    pub(crate) wake_fired: Vec<u64>,
    /// Events lost this round (reported by the rings).
    pub(crate) round_drops: u64,
}

impl Rules {
    /// Whether any rule reads events (the writer then decodes what it
    /// drains).
    pub(crate) fn decodes(&self) -> bool {
        self.slow_poll.is_some() || self.wake.is_some() || self.events.is_some()
    }

    /// Looks through one drained piece of a thread's events (`bytes`
    /// from registers `start`).
    pub(crate) fn piece<'s>(
        &mut self,
        watch: &mut PollWatch,
        bytes: &[u8],
        start: ChunkState,
        schema: impl Fn(u32) -> Option<&'s Schema>,
    ) {
        if !self.decodes() {
            return;
        }
        let mut st = start;
        let Rules {
            slow_poll,
            wake,
            events,
            slow,
            found,
            ..
        } = self;
        // An event the writer cannot decode is reported where the piece is
        // counted; the rules just stop at it.
        let _ = walk(bytes, &mut st, schema, |ev| {
            if let Some(r) = slow_poll.as_ref() {
                r.event(watch, ev.schema.id, ev.ticks, slow);
            }
            if let Some(r) = wake.as_mut() {
                r.event(ev);
            }
            if let Some(r) = events.as_mut() {
                r.event(ev, found);
            }
            Ok(())
        });
    }

    /// Notes events a thread's ring lost (reported this round).
    pub(crate) fn dropped(&mut self, n: u64) {
        self.round_drops = self.round_drops.saturating_add(n);
    }

    /// The triggers the rules found this round, pushed onto `out` as
    /// (ticks, reason): `watermark` is the round's (every event before it
    /// has been drained), `now` its start, `polls` every thread's open
    /// poll.
    pub(crate) fn take<'a>(
        &mut self,
        watermark: u64,
        now: u64,
        polls: impl Iterator<Item = &'a mut PollWatch>,
        out: &mut Vec<(u64, String)>,
    ) {
        if let Some(rule) = &self.slow_poll {
            for t in self.slow.drain(..) {
                out.push((t, SLOW_POLL.into()));
            }
            for w in polls {
                if rule.still_running(w, watermark) {
                    out.push((watermark, SLOW_POLL.into()));
                }
            }
        }
        if let Some(rule) = self.wake.as_mut() {
            rule.advance(watermark, &mut self.wake_fired);
            for t in self.wake_fired.drain(..) {
                out.push((t, WAKE_P99.into()));
            }
        }
        out.append(&mut self.found);
        let lost = std::mem::take(&mut self.round_drops);
        if self.drops.is_some_and(|min| lost >= min) {
            out.push((now, DROPPED.into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_format::schema::builtin_schemas;

    /// A poll of 50 ticks against limits of 40 and 60; a poll still open.
    #[test]
    fn slow_polls_fire_once() {
        let schemas = builtin_schemas();
        let look = |id: u32| schemas.iter().find(|s| s.id == id);
        // task_poll_start(task 1, queue istr 0, local_q 0) at +10, then
        // task_poll_end(task 1, ready false) at +50 (worker: register).
        let bytes = [
            ids::TASK_POLL_START as u8,
            10,
            2,
            0,
            0,
            ids::TASK_POLL_END as u8,
            50,
            0,
            0,
        ];
        let st = ChunkState {
            ticks: 1000,
            task_reg: 0,
            worker_reg: 0,
        };
        for (limit, want) in [(40, vec![1060]), (60, vec![])] {
            let rule = SlowPoll { limit };
            let mut w = PollWatch::default();
            let mut fired = Vec::new();
            rule.piece(&mut w, &bytes, st, look, &mut fired);
            assert_eq!(fired, want, "limit {limit}");
        }
        // Open since 1010: fires once at the round past the limit, and not
        // again at its end.
        let rule = SlowPoll { limit: 40 };
        let mut w = PollWatch::default();
        let mut fired = Vec::new();
        rule.piece(&mut w, &bytes[..5], st, look, &mut fired);
        assert!(!rule.still_running(&mut w, 1030));
        assert!(rule.still_running(&mut w, 1100));
        assert!(!rule.still_running(&mut w, 1200));
        let st2 = ChunkState {
            ticks: 1010,
            task_reg: 1,
            worker_reg: 0,
        };
        rule.piece(&mut w, &bytes[5..], st2, look, &mut fired);
        assert!(fired.is_empty(), "{fired:?}");
    }

    /// p99 by nearest rank: of 100 delays, 1 over the limit is not a p99
    /// above it, 2 are; a window closes when time passes its end.
    #[test]
    fn wake_p99_counts_by_nearest_rank() {
        for (late, want) in [(1u64, 0usize), (2, 1)] {
            let mut r = WakeP99::new(10, 1000);
            for task in 0..100u64 {
                let t = task * 5;
                let delay = if task < late { 50 } else { 1 };
                r.seen.push((t, Step::Wake, task));
                r.seen.push((t + delay, Step::Poll, task));
            }
            let mut fired = Vec::new();
            r.advance(900, &mut fired);
            assert!(fired.is_empty(), "the window is still open");
            r.advance(2000, &mut fired);
            assert_eq!(fired.len(), want, "{late} late");
            if want == 1 {
                // The window starts at its first sample (task 2's poll at
                // 11) and fires at its end.
                assert_eq!(fired[0], 11 + 1000);
            }
        }
        // A task polled without a wake in view is no sample.
        let mut r = WakeP99::new(10, 1000);
        r.seen.push((5, Step::Poll, 1));
        r.advance(10, &mut Vec::new());
        assert_eq!(r.n, 0);
    }
}
