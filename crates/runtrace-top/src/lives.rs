//! What was alive when: the task lives and the application's span lives
//! of a recording, which a window seeds into its lifecycle tracker (so a
//! task spawned, or a span created, before the window keeps its location
//! or its name in it) and counts (tasks alive per location).
//!
//! ```
//! use runtrace_model::lifecycle::Life;
//! use runtrace_model::spans::Span;
//! use runtrace_top::lives::Lives;
//! let mut l = Lives::default();
//! let s = Span { name: 3, ..Span::seen(42, 0, 1_000) };
//! l.spans.record(&Life::SpanNew(&s), |_| 0);
//! l.spans.record(&Life::SpanClose(&Span { close: Some(9_000), ..s }), |_| 0);
//! assert_eq!(l.spans.alive_at(0, 5_000).map(|s| s.id).collect::<Vec<_>>(), [42]);
//! assert_eq!(l.spans.alive_at(0, 9_500).count(), 0);
//! ```

use runtrace_model::fxhash::FxHashMap;
use runtrace_model::lifecycle::Life;
use runtrace_model::spans::Span;

/// One task life: where and when it began and ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifeSpan {
    /// Its recording ([`Model::procs`](runtrace_model::model::Model::procs) index).
    pub proc: u32,
    /// Task id.
    pub task: u64,
    /// Spawn location ([`Model::locs`](runtrace_model::model::Model::locs) index).
    pub loc: u32,
    /// Ticks of its spawn, or of its first sight.
    pub from: u64,
    /// Ticks of its end (`u64::MAX`: alive).
    pub end: u64,
}

/// Task lives by the lifecycle's serial number: what a window needs to
/// seed (tasks alive at its start) and to count tasks alive per location.
///
/// Kept as a vector in serial order (serials grow with each new life):
/// an append per life and a binary search per end. A hash map by serial
/// cost a quarter of opening a 9M-event recording (cache misses on a
/// table of a million lives); the vector is written in order. An end
/// finds its life through the live task's slot (a direct index), else by
/// binary search.
#[derive(Debug, Default, Clone)]
pub struct Lives {
    by_serial: Vec<(u32, LifeSpan)>,
    /// By live task slot ([`Task::slot`](runtrace_model::lifecycle::Task)):
    /// its life's position in `by_serial`, plus one (0: not known).
    at_slot: Vec<u32>,
    /// The application's span lives.
    pub spans: SpanLives,
}

impl Lives {
    /// Takes one task record (span records go to [`SpanLives::record`]).
    pub fn record(&mut self, rec: &Life<'_>) {
        match *rec {
            Life::Spawn(t) | Life::Seen(t) => {
                let from = t.spawn.or(t.first_poll).unwrap_or(0);
                let life = LifeSpan {
                    proc: t.proc,
                    task: t.task,
                    loc: t.loc,
                    from,
                    end: u64::MAX,
                };
                match self.by_serial.last() {
                    Some(&(last, _)) if last >= t.serial => {
                        match self.by_serial.binary_search_by_key(&t.serial, |e| e.0) {
                            Ok(i) => self.by_serial[i].1 = life,
                            Err(i) => {
                                // Positions after `i` move: forget them all.
                                self.by_serial.insert(i, (t.serial, life));
                                self.at_slot.clear();
                            }
                        }
                    }
                    _ => {
                        self.by_serial.push((t.serial, life));
                        let slot = t.slot as usize;
                        if slot < (1 << 24) {
                            if self.at_slot.len() <= slot {
                                self.at_slot.resize(slot + 1, 0);
                            }
                            self.at_slot[slot] = self.by_serial.len().min(u32::MAX as usize) as u32;
                        }
                    }
                }
            }
            Life::End(t) => {
                let by_slot = match self.at_slot.get(t.slot as usize) {
                    Some(&p) if p > 0 => Some(p as usize - 1)
                        .filter(|&i| self.by_serial.get(i).is_some_and(|e| e.0 == t.serial)),
                    _ => None,
                };
                let found = by_slot.map_or_else(
                    || self.by_serial.binary_search_by_key(&t.serial, |e| e.0),
                    Ok,
                );
                if let Ok(i) = found {
                    let l = &mut self.by_serial[i].1;
                    // Replaced by a new spawn of its id (`end: None`): over
                    // now, at the latest time known, its last event.
                    l.end = t.end.unwrap_or(l.from.max(t.first_poll.unwrap_or(0)));
                }
            }
            _ => {}
        }
    }

    /// Forgets lives that ended before `t` (a live view's window moved on).
    pub fn forget_before(&mut self, t: u64) {
        self.by_serial.retain(|(_, l)| l.end >= t);
        // Positions moved: ends of older lives take the binary search.
        self.at_slot.clear();
        self.spans.forget_before(t);
    }

    /// Lives alive at `t` (began at or before, not ended before) of
    /// recording `proc`.
    pub fn alive_at(&self, proc: u32, t: u64) -> impl Iterator<Item = &LifeSpan> {
        self.by_serial
            .iter()
            .map(|(_, l)| l)
            .filter(move |l| l.proc == proc && l.from <= t && l.end > t)
    }

    /// How many lives are kept (tasks and spans).
    pub fn len(&self) -> usize {
        self.by_serial.len() + self.spans.len()
    }

    /// None kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One span life, as much as a window needs to seed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanLife {
    /// Its id.
    pub id: u64,
    /// Its recording ([`Model::procs`](runtrace_model::model::Model::procs) index).
    pub proc: u32,
    /// Name index of its name ([`Span::name`]).
    pub name: u32,
    /// Name index of its fields' text ([`Span::fields`]).
    pub fields: u32,
    /// Ticks of its creation.
    pub new: u64,
    /// Ticks of its first enter.
    pub first_enter: Option<u64>,
    /// Ticks of its close (None: open, or its close was never seen).
    pub close: Option<u64>,
}

impl SpanLife {
    /// The span as a tracker is seeded with it
    /// ([`SpanTracker::seed`](runtrace_model::spans::SpanTracker::seed)).
    pub fn span(&self) -> Span {
        Span {
            name: self.name,
            fields: self.fields,
            first_enter: self.first_enter,
            ..Span::seen(self.id, self.proc, self.new)
        }
    }
}

/// The application's span lives, in order of creation, with the live
/// ones indexed by (recording, id) for their first enter and close.
/// Compact (48 bytes a span) since a service records one or more spans
/// per request; spans never seen created (rule 5 of
/// [`runtrace_model::spans`]) are not kept: a window meets them nameless
/// as the whole read does.
#[derive(Debug, Default, Clone)]
pub struct SpanLives {
    spans: Vec<SpanLife>,
    live: FxHashMap<(u32, u64), usize>,
}

impl SpanLives {
    /// Takes one span record (others are ignored); `proc_of` gives a
    /// thread index's recording (an enter's record names its thread).
    pub fn record(&mut self, rec: &Life<'_>, proc_of: impl FnOnce(u32) -> u32) {
        match *rec {
            Life::SpanNew(s) => {
                // An id still live lost its close: its life ends here.
                if let Some(i) = self.live.insert((s.proc, s.id), self.spans.len()) {
                    self.spans[i].close.get_or_insert(s.new);
                }
                self.spans.push(SpanLife {
                    id: s.id,
                    proc: s.proc,
                    name: s.name,
                    fields: s.fields,
                    new: s.new,
                    first_enter: s.first_enter,
                    close: None,
                });
            }
            Life::SpanEnter(e) => {
                if let Some(&i) = self.live.get(&(proc_of(e.thread), e.span)) {
                    self.spans[i].first_enter.get_or_insert(e.start);
                }
            }
            Life::SpanClose(s) => {
                if let Some(i) = self.live.remove(&(s.proc, s.id)) {
                    self.spans[i].close = s.close;
                }
            }
            _ => {}
        }
    }

    /// Spans of recording `proc` created before `t` and not closed by then.
    pub fn alive_at(&self, proc: u32, t: u64) -> impl Iterator<Item = &SpanLife> {
        self.spans
            .iter()
            .filter(move |s| s.proc == proc && s.new < t && s.close.is_none_or(|c| c > t))
    }

    /// Forgets spans closed before `t`.
    pub fn forget_before(&mut self, t: u64) {
        self.spans.retain(|s| s.close.is_none_or(|c| c >= t));
        self.live.clear();
        for (i, s) in self.spans.iter().enumerate() {
            if s.close.is_none() {
                self.live.insert((s.proc, s.id), i);
            }
        }
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// None kept.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_model::lifecycle::Task;

    fn task(task: u64, serial: u32, slot: u32, from: u64, end: Option<u64>) -> Task {
        Task {
            task,
            serial,
            slot,
            proc: 0,
            loc: task as u32,
            parent: 0,
            queue: 0,
            spawn: Some(from),
            spawn_thread: 0,
            first_poll: None,
            end,
        }
    }

    fn alive(l: &Lives, t: u64) -> Vec<u64> {
        let mut v: Vec<u64> = l.alive_at(0, t).map(|x| x.task).collect();
        v.sort();
        v
    }

    /// Ends find their lives by slot (a reused slot ends the life that
    /// holds it now), by binary search after a forget or an out-of-order
    /// serial.
    #[test]
    fn ends_find_their_lives_by_slot_or_search() {
        let mut l = Lives::default();
        l.record(&Life::Spawn(&task(1, 0, 0, 10, None)));
        l.record(&Life::Spawn(&task(2, 1, 1, 20, None)));
        l.record(&Life::End(&task(1, 0, 0, 10, Some(30))));
        // Slot 0 reused by a new life.
        l.record(&Life::Spawn(&task(3, 2, 0, 40, None)));
        assert_eq!(alive(&l, 35), vec![2]);
        assert_eq!(alive(&l, 45), vec![2, 3]);
        l.forget_before(35);
        assert_eq!(l.len(), 2);
        // After the forget: found by search.
        l.record(&Life::End(&task(2, 1, 1, 20, Some(60))));
        assert_eq!(alive(&l, 65), vec![3]);
        // An out-of-order serial is inserted in place.
        l.record(&Life::Seen(&task(9, 1, 5, 70, None)));
        l.record(&Life::End(&task(3, 2, 0, 40, Some(80))));
        l.record(&Life::End(&task(9, 1, 5, 70, Some(90))));
        assert_eq!(alive(&l, 75), vec![3, 9]);
        assert!(alive(&l, 95).is_empty());
    }
}
