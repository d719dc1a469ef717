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
use std::collections::VecDeque;

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
/// Kept in spawn order (an append per spawn) with a map of the live tasks
/// to their life's position (an end is a direct index: a binary search
/// over a million lives per terminate was a tenth of opening a
/// recording). A hash map holding every life cost a quarter of opening a
/// 9M-event recording (cache misses on a table of a million lives); the
/// map holds the live tasks only. It is an [`IdMap`] per recording, as the
/// lifecycle keeps its live tasks: a hash map by (recording, task) was
/// about a tenth of following the demo service (one insert per spawn, one
/// remove per terminate).
///
/// A live view forgets lives as its window moves on
/// ([`Lives::forget_before`]): the lives begun before the cut are a
/// prefix, dropped from the front a block at a time, and those of them
/// still alive (or ended after the cut: the long-lived tasks, a few) move
/// to a short list of their own. A position is a life's number since the
/// first, so nothing after the prefix moves. Sweeping every life kept and
/// re-entering every live task in the map at every refresh was 4-5% of
/// `top`'s CPU following 1M events/s (`perf record`); the blocks (not one
/// ring) keep the memory touched to the lives kept: a ring cycles through
/// all of its capacity, up to twice that (+30 MiB at 1M events/s).
#[derive(Debug, Default, Clone)]
pub struct Lives {
    /// Lives begun since the last cut (and a few before it, in the
    /// cut's block), in spawn order, in blocks of [`BLOCK`]: life number
    /// `base + i` is `recent[i / BLOCK][i % BLOCK]`.
    recent: VecDeque<Vec<LifeSpan>>,
    base: usize,
    /// Lives begun before the last cut that had not ended before it, in
    /// spawn order.
    old: Vec<LifeSpan>,
    /// By recording, task id of the live tasks: their life's position (a
    /// life number, or [`OLD`] and an index into `old`).
    live: Vec<IdMap<usize>>,
    /// Ticks of the newest spawn or end taken.
    newest: u64,
    /// The application's span lives.
    pub spans: SpanLives,
}

/// The bit that makes a position an index into [`Lives::old`].
const OLD: usize = 1 << (usize::BITS - 1);

/// Lives per block of [`Lives::recent`] (32 KiB: from the allocator's
/// arenas, not a mapping of its own).
#[cfg(not(test))]
const BLOCK: usize = 1024;
/// Small in the unit tests, so that they cross many blocks.
#[cfg(test)]
const BLOCK: usize = 4;

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
        self.newest = self.newest.max(ticks);
        if self.recent.back().is_none_or(|b| b.len() == BLOCK) {
            self.recent.push_back(Vec::with_capacity(BLOCK));
        }
        let n = self.recent.len();
        let at = self.base + (n - 1) * BLOCK + self.recent[n - 1].len();
        if let Some(old) = self.live_of(proc).insert(task, at) {
            self.end(old, ticks);
        }
        self.recent[n - 1].push(LifeSpan {
            proc,
            task,
            loc,
            from: ticks,
            end: u64::MAX,
        });
    }

    /// Task `task` of recording `proc` terminated at `ticks`.
    pub fn ended(&mut self, proc: u32, task: u64, ticks: u64) {
        self.newest = self.newest.max(ticks);
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

    /// The life at position `i`.
    fn at(&self, i: usize) -> Option<&LifeSpan> {
        if i & OLD != 0 {
            self.old.get(i & !OLD)
        } else {
            let j = i.checked_sub(self.base)?;
            self.recent.get(j / BLOCK)?.get(j % BLOCK)
        }
    }

    fn end(&mut self, i: usize, ticks: u64) {
        let l = if i & OLD != 0 {
            self.old.get_mut(i & !OLD)
        } else {
            i.checked_sub(self.base)
                .and_then(|j| self.recent.get_mut(j / BLOCK)?.get_mut(j % BLOCK))
        };
        if let Some(l) = l {
            l.end = ticks.max(l.from);
        }
    }

    /// Forgets lives that ended before `t` (a live view's window moved on).
    pub fn forget_before(&mut self, t: u64) {
        self.spans.forget_before(t);
        // In spawn order (events come in time order): the lives begun
        // before `t` are a prefix. Whole blocks of it are dropped (the
        // rest of it stays in the first block kept), their lives not
        // ended before `t` moved aside.
        let mut moved = false;
        while self.recent.len() > 1 && self.recent[0].last().is_some_and(|l| l.from < t) {
            let Some(block) = self.recent.pop_front() else {
                break;
            };
            self.base += BLOCK;
            self.old.extend(block.into_iter().filter(|l| l.end >= t));
            moved = true;
        }
        if moved || self.old.iter().any(|l| l.end < t) {
            self.old.retain(|l| l.end >= t);
            // Positions in `old` changed: the live ones' again (a few).
            for i in 0..self.old.len() {
                let l = self.old[i];
                if l.end == u64::MAX {
                    self.live_of(l.proc).insert(l.task, OLD | i);
                }
            }
        }
    }

    /// Lives alive at `t` (began at or before, not ended before) of
    /// recording `proc`, in spawn order.
    pub fn alive_at(&self, proc: u32, t: u64) -> impl Iterator<Item = &LifeSpan> {
        self.old
            .iter()
            .chain(self.recent.iter().flatten())
            .filter(move |l| l.proc == proc && l.from <= t && l.end > t)
    }

    /// The spawn location of each life [`Lives::alive_at`] gives, in no
    /// particular order. At or after the newest spawn and end taken (a
    /// live view's newest event) those are the live tasks, counted from
    /// the map of them, not from every life kept (a window's worth).
    ///
    /// ```
    /// use runtrace_top::lives::Lives;
    /// let mut l = Lives::default();
    /// l.spawned(0, 7, 3, 1_000);
    /// l.spawned(0, 8, 4, 2_000);
    /// l.ended(0, 8, 5_000);
    /// let at = |t| {
    ///     let mut locs = Vec::new();
    ///     l.alive_locs_at(0, t, |loc| locs.push(loc));
    ///     locs.sort();
    ///     locs
    /// };
    /// assert_eq!(at(3_000), [3, 4]);
    /// assert_eq!(at(6_000), [3]);
    /// ```
    pub fn alive_locs_at(&self, proc: u32, t: u64, mut f: impl FnMut(u32)) {
        if t < self.newest {
            return self.alive_at(proc, t).for_each(|l| f(l.loc));
        }
        if let Some(m) = self.live.get(proc as usize) {
            for (_, &i) in m.iter() {
                if let Some(l) = self.at(i) {
                    f(l.loc);
                }
            }
        }
    }

    /// How many lives are kept (tasks and spans).
    pub fn len(&self) -> usize {
        let recent = match self.recent.back() {
            Some(b) => (self.recent.len() - 1) * BLOCK + b.len(),
            None => 0,
        };
        self.old.len() + recent + self.spans.len()
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
        assert_eq!(l.len(), 3, "forgotten by the block");
        l.spawned(0, 4, 4, 50);
        l.spawned(0, 5, 5, 52);
        l.forget_before(51);
        // Task 1's life is gone with its block (the first four lives);
        // 2, 3 and 4 live on, moved aside.
        assert_eq!(l.len(), 4);
        assert_eq!(l.old.len(), 3);
        assert_eq!(alive(&l, 53), vec![2, 3, 4, 5]);
        // Ends find lives moved aside and lives in blocks.
        l.ended(0, 4, 54);
        l.ended(0, 5, 55);
        assert_eq!(alive(&l, 56), vec![2, 3]);
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

    /// Against every life kept forever: after forgets, the lives alive at
    /// any time since the last cut are the same (in spawn order), the live
    /// view's count per location says the same, and only the lives that
    /// had not ended before the cut are kept. Reused ids, two recordings,
    /// long-lived tasks that move to the short list and end there.
    #[test]
    fn forgetting_keeps_what_every_later_window_needs() {
        let mut l = Lives::default();
        // (proc, task, loc, from, end) of every life, and the live ones.
        let mut all: Vec<(u32, u64, u32, u64, u64)> = Vec::new();
        let mut live: std::collections::HashMap<(u32, u64), usize> = Default::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut cut = 0;
        let mut moved = false;
        for step in 0..6_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = 1_000 + step * 10;
            // Tasks 0-3 live long; the others come and go.
            let (proc, task) = ((x >> 60) as u32 % 2, (x >> 8) % 64);
            let ends = x.is_multiple_of(3) && (task >= 4 || x.is_multiple_of(97));
            if ends {
                l.ended(proc, task, t);
                if let Some(i) = live.remove(&(proc, task)) {
                    all[i].4 = t;
                }
            } else {
                l.spawned(proc, task, (x % 7) as u32, t);
                if let Some(i) = live.insert((proc, task), all.len()) {
                    all[i].4 = t;
                }
                all.push((proc, task, (x % 7) as u32, t, u64::MAX));
            }
            if step.is_multiple_of(97) {
                cut = t.saturating_sub(300);
                l.forget_before(cut);
                moved |= !l.old.is_empty();
                // At most a block more than the lives not ended before the
                // cut.
                let needed = all.iter().filter(|a| a.4 >= cut).count();
                assert!(
                    l.len() <= needed + BLOCK,
                    "step {step}: {} kept, {needed} needed",
                    l.len()
                );
            }
            for proc in 0..2 {
                for at in [t, t + 5, t.saturating_sub(25), cut] {
                    if at < cut {
                        continue;
                    }
                    let got: Vec<(u64, u32, u64)> = l
                        .alive_at(proc, at)
                        .map(|a| (a.task, a.loc, a.from))
                        .collect();
                    let want: Vec<(u64, u32, u64)> = all
                        .iter()
                        .filter(|a| a.0 == proc && a.3 <= at && a.4 > at)
                        .map(|a| (a.1, a.2, a.3))
                        .collect();
                    assert_eq!(got, want, "step {step}, recording {proc}, at {at}");
                    let mut counted = Vec::new();
                    l.alive_locs_at(proc, at, |loc| counted.push(loc));
                    counted.sort();
                    let mut locs: Vec<u32> = want.iter().map(|w| w.1).collect();
                    locs.sort();
                    assert_eq!(counted, locs, "step {step}, recording {proc}, at {at}");
                }
            }
        }
        assert!(moved, "long-lived tasks moved to the short list");
    }
}
