//! What was alive when: the task lives and the application's span lives
//! of a recording, which a window seeds into its lifecycle tracker (so a
//! task spawned, or a span created, before the window keeps its location
//! or its name in it) and counts (tasks alive per location).
//!
//! Both are read from the raw events (spawns and terminates; span
//! creations, enters and closes), not from the lifecycle's records: the
//! windows pair polls and wakes themselves, and pairing every poll and wake
//! of the recording once more only to learn when tasks began and ended
//! cost `top` a hash lookup per poll and wake followed.
//!
//! ```
//! use runtrace_model::{event::{kind, Ev}, model::Model};
//! use runtrace_top::lives::Lives;
//! let mut m = Model::new();
//! # let h = runtrace_format::frame::Header { version_major: 1, version_minor: 2,
//! #     ticks_per_sec: 1_000_000_000, anchor_ticks: 0, anchor_wall_ns: 0, pid: 1,
//! #     process_name: "p".into(), recording_id: 1, file_index: 0, schemas: vec![] };
//! m.add_proc(runtrace_model::model::Process::new(&h));
//! let th = m.thread(0, 1);
//! let ev = |ticks, kind, x| Ev { ticks, x, a: 0, thread: th, worker: 3, kind, flag: 0 };
//! let mut l = Lives::default();
//! l.event(&ev(1_000, kind::SPAN_NEW, 42), &m); // span 42, name index 3
//! l.event(&ev(2_000, kind::SPAWN, 7), &m); // task 7 (location index 0)
//! l.event(&ev(9_000, kind::SPAN_CLOSE, 42), &m);
//! let spans: Vec<u64> = l.spans.alive_at(0, 5_000).map(|s| s.id).collect();
//! assert_eq!(spans, [42]);
//! assert_eq!(l.spans.alive_at(0, 9_500).count(), 0);
//! assert_eq!(l.alive_at(0, 5_000).map(|t| t.task).collect::<Vec<_>>(), [7]);
//! ```

use runtrace_model::event::{kind, Ev};
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::idmap::IdMap;
use runtrace_model::model::Model;
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

/// Task lives in order of spawn: what a window needs to seed (tasks
/// alive at its start) and to count tasks alive per location. Tasks first
/// seen by a poll (spawned before the recording began) are not kept: a
/// window meets them as the lifecycle does, at `<unknown>`.
///
/// Kept as a vector in spawn order (an append per spawn) and a map of the
/// live tasks to their life's position in it (an end is a direct index:
/// a binary search over a million lives per terminate was a tenth of
/// opening a recording). A hash map holding every life cost a quarter of
/// opening a 9M-event recording (cache misses on a table of a million
/// lives); the map holds the live tasks only. It is an [`IdMap`] per
/// recording, as the lifecycle keeps its live tasks: a hash map by
/// (recording, task) was about a tenth of following the demo service
/// (one insert per spawn, one remove per terminate).
#[derive(Debug, Default, Clone)]
pub struct Lives {
    lives: Vec<LifeSpan>,
    /// By recording, task id of the live tasks: their life's position.
    live: Vec<IdMap<usize>>,
    /// The application's span lives.
    pub spans: SpanLives,
}

impl Lives {
    /// Takes one raw event: a task's spawn or terminate, a span's creation,
    /// enter or close (other kinds are ignored).
    #[inline]
    pub fn event(&mut self, ev: &Ev, model: &Model) {
        let proc = || model.threads[ev.thread as usize].proc;
        match ev.kind {
            kind::SPAWN => self.spawned(proc(), ev.x, ev.a, ev.ticks),
            kind::TERMINATE => self.ended(proc(), ev.x, ev.ticks),
            k if kind::is_span(k) => self.spans.event(ev, model, proc()),
            _ => {}
        }
    }

    /// Task `task` of recording `proc` was spawned at location `loc` at
    /// `ticks` (a live task of that id ends there: its id was reused).
    pub fn spawned(&mut self, proc: u32, task: u64, loc: u32, ticks: u64) {
        let at = self.lives.len();
        if let Some(old) = self.live_of(proc).insert(task, at) {
            self.end(old, ticks);
        }
        self.lives.push(LifeSpan {
            proc,
            task,
            loc,
            from: ticks,
            end: u64::MAX,
        });
    }

    /// Task `task` of recording `proc` terminated at `ticks`.
    pub fn ended(&mut self, proc: u32, task: u64, ticks: u64) {
        if let Some(i) = self
            .live
            .get_mut(proc as usize)
            .and_then(|m| m.remove(task))
        {
            self.end(i, ticks);
        }
    }

    /// The live tasks of recording `proc`.
    #[inline]
    fn live_of(&mut self, proc: u32) -> &mut IdMap<usize> {
        let p = proc as usize;
        if p >= self.live.len() {
            self.live.resize_with(p + 1, IdMap::default);
        }
        &mut self.live[p]
    }

    fn end(&mut self, i: usize, ticks: u64) {
        if let Some(l) = self.lives.get_mut(i) {
            l.end = ticks.max(l.from);
        }
    }

    /// Forgets lives that ended before `t` (a live view's window moved on).
    pub fn forget_before(&mut self, t: u64) {
        self.lives.retain(|l| l.end >= t);
        // Positions moved: the live tasks' again.
        for i in 0..self.lives.len() {
            let l = self.lives[i];
            if l.end == u64::MAX {
                self.live_of(l.proc).insert(l.task, i);
            }
        }
        self.spans.forget_before(t);
    }

    /// Lives alive at `t` (began at or before, not ended before) of
    /// recording `proc`.
    pub fn alive_at(&self, proc: u32, t: u64) -> impl Iterator<Item = &LifeSpan> {
        self.lives
            .iter()
            .filter(move |l| l.proc == proc && l.from <= t && l.end > t)
    }

    /// How many lives are kept (tasks and spans).
    pub fn len(&self) -> usize {
        self.lives.len() + self.spans.len()
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
    /// Takes one raw span event of recording `proc` (others are ignored).
    pub fn event(&mut self, ev: &Ev, model: &Model, proc: u32) {
        match ev.kind {
            kind::SPAN_NEW => {
                // An id still live lost its close: its life ends here.
                if let Some(i) = self.live.insert((proc, ev.x), self.spans.len()) {
                    self.spans[i].close.get_or_insert(ev.ticks);
                }
                let (_, fields) = runtrace_model::spans::parent_and_fields(ev, model);
                self.spans.push(SpanLife {
                    id: ev.x,
                    proc,
                    name: ev.worker,
                    fields,
                    new: ev.ticks,
                    first_enter: None,
                    close: None,
                });
            }
            kind::SPAN_ENTER => {
                if let Some(&i) = self.live.get(&(proc, ev.x)) {
                    self.spans[i].first_enter.get_or_insert(ev.ticks);
                }
            }
            kind::SPAN_CLOSE => {
                if let Some(i) = self.live.remove(&(proc, ev.x)) {
                    self.spans[i].close = Some(ev.ticks);
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

    fn alive(l: &Lives, t: u64) -> Vec<u64> {
        let mut v: Vec<u64> = l.alive_at(0, t).map(|x| x.task).collect();
        v.sort();
        v
    }

    /// Ends find their lives after a forget; a reused id ends the life
    /// that holds it.
    #[test]
    fn ends_find_their_lives_and_a_reused_id_ends_the_old_one() {
        let mut l = Lives::default();
        l.spawned(0, 1, 1, 10);
        l.spawned(0, 2, 2, 20);
        l.ended(0, 1, 30);
        l.spawned(0, 3, 3, 40);
        assert_eq!(alive(&l, 35), vec![2]);
        assert_eq!(alive(&l, 45), vec![2, 3]);
        l.forget_before(35);
        assert_eq!(l.len(), 2);
        l.ended(0, 2, 60);
        assert_eq!(alive(&l, 65), vec![3]);
        // Task 3 spawned again: the first life ends there.
        l.spawned(0, 3, 9, 70);
        let at = |t| l.alive_at(0, t).map(|x| x.loc).collect::<Vec<_>>();
        assert_eq!(at(65), [3]);
        assert_eq!(at(75), [9]);
        l.ended(0, 3, 80);
        assert!(alive(&l, 85).is_empty());
        // Another recording's task of the same id is another life.
        l.spawned(1, 3, 4, 90);
        assert!(alive(&l, 95).is_empty());
        assert_eq!(l.alive_at(1, 95).count(), 1);
        // An end of a task never seen spawned changes nothing.
        l.ended(0, 77, 100);
        assert_eq!(l.alive_at(1, 101).count(), 1);
    }
}
