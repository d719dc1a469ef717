//! Built-in snapshot triggers the writer thread evaluates on what it
//! drains (`snapshot_on_slow_poll`, `RUNTRACE_SNAPSHOT_POLL_MS`).
//!
//! The slow-poll rule: a poll (`task_poll_start` to `task_poll_end` on
//! one thread) longer than the limit fires once, either when the writer
//! drains its end or, for a poll still running, at the first round that
//! finds it open past the limit. It decodes every event of the threads
//! it watches, which the writer otherwise takes whole without decoding:
//! it costs the writer thread (not the recording threads) a walk of each
//! event (docs/flight-recorder.md).

use runtrace_format::chunk::{walk, ChunkState};
use runtrace_format::schema::{ids, Schema};

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
    /// Looks through one drained piece of a thread's events (`bytes`
    /// from registers `start`); pushes the time of each slow poll's end
    /// onto `fired`.
    pub(crate) fn piece<'s>(
        &self,
        watch: &mut PollWatch,
        bytes: &[u8],
        start: ChunkState,
        schema: impl Fn(u32) -> Option<&'s Schema>,
        fired: &mut Vec<u64>,
    ) {
        let mut st = start;
        // An event the writer cannot decode is reported where the piece is
        // counted; the rule just stops at it.
        let _ = walk(bytes, &mut st, schema, |ev| {
            if ev.schema.id == ids::TASK_POLL_START {
                *watch = PollWatch {
                    open: Some(ev.ticks),
                    fired: false,
                };
            } else if ev.schema.id == ids::TASK_POLL_END {
                if let Some(t0) = watch.open.take() {
                    if !watch.fired && ev.ticks.saturating_sub(t0) > self.limit {
                        fired.push(ev.ticks);
                    }
                }
                watch.fired = false;
            }
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
}
