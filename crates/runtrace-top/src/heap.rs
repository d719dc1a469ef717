//! The memory profile in a window: the sampled heap bytes live at the
//! window's end and at its start, and the bytes allocated in it, from the
//! `alloc_sample` and `alloc_free` events (docs/memory.md), counted as
//! `runtrace analyze` counts them (a sample's weight is live from its
//! allocation to its free; untracked samples never are; runtrace's own
//! threads are left out).
//!
//! Live bytes at an instant depend on every sample since the recording
//! started, not only the window's, so [`Heap`] keeps a change per sample
//! and per free (a live view forgets those before its window into a base
//! sum, [`Heap::forget_before`]); the samples still live are kept by
//! address to pair their frees. Both are bounded by the samples (one per
//! ~512 KiB allocated by default), not by the events.
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! use runtrace_top::heap::Heap;
//! let mut b = TraceBuilder::new();
//! b.alloc_sample(1, 1_000, 100, 0, 64, 4096, 0x10, 1);
//! b.alloc_sample(1, 2_000, 100, 0, 64, 4096, 0x20, 1);
//! b.alloc_free(1, 3_000, 100, 0x10, 0);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut h = Heap::default();
//! runtrace_model::input::read(&[path], &mut h, None);
//! let w = h.window(0, 0, 2_500).unwrap();
//! assert_eq!((w.live_end, w.allocated, w.live_set), (8192, 8192, true));
//! assert_eq!(h.window(0, 0, 3_000).unwrap().live_end, 4096);
//! ```

use runtrace_model::event::{kind, Ev};
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use std::collections::VecDeque;

/// One change: at `ticks` of recording `proc`, live bytes changed by
/// `live` and `alloc` bytes were allocated.
#[derive(Debug, Clone, Copy)]
struct Change {
    proc: u32,
    ticks: u64,
    live: i64,
    alloc: u64,
}

/// The memory profile of a window ([`Heap::window`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapWindow {
    /// Sampled bytes live at the window's end (0 without a live set).
    pub live_end: u64,
    /// ... at its start.
    pub live_start: u64,
    /// Bytes allocated in the window (the samples' weights).
    pub allocated: u64,
    /// Whether the trace has a live set (else only `allocated` is known).
    pub live_set: bool,
}

/// The heap changes of a trace (a pass over its profile events).
#[derive(Debug, Default)]
pub struct Heap {
    /// Changes, in the order read (nearly in time order).
    changes: VecDeque<Change>,
    /// Per recording, the live bytes of the changes forgotten.
    base: FxHashMap<u32, i64>,
    /// Tracked samples still live, by (recording, address): their weights.
    at_addr: FxHashMap<(u32, u64), Vec<u64>>,
    live_set: bool,
    /// Some allocation sample was read.
    pub any: bool,
}

impl Heap {
    /// Takes one event (any kind; only `alloc_sample` and `alloc_free`
    /// count).
    pub fn event(&mut self, ev: &Ev, model: &Model) {
        match ev.kind {
            kind::ALLOC_SAMPLE => self.alloc(ev, model),
            kind::ALLOC_FREE => self.free(ev, model),
            _ => {}
        }
    }

    fn alloc(&mut self, ev: &Ev, model: &Model) {
        let Some(th) = model.threads.get(ev.worker as usize) else {
            return;
        };
        if th
            .name
            .as_deref()
            .is_some_and(runtrace_model::profile::is_runtrace_thread)
        {
            return;
        }
        let i = ev.x as usize;
        let (Some(&weight), Some(&addr)) = (model.side.get(i + 1), model.side.get(i + 2)) else {
            return;
        };
        self.any = true;
        let tracked = ev.flag & 3 == 1;
        self.live_set |= ev.flag & 3 != 0;
        if tracked {
            self.at_addr
                .entry((th.proc, addr))
                .or_default()
                .push(weight);
        }
        self.changes.push_back(Change {
            proc: th.proc,
            ticks: ev.ticks,
            live: if tracked { weight as i64 } else { 0 },
            alloc: weight,
        });
    }

    fn free(&mut self, ev: &Ev, model: &Model) {
        let Some(th) = model.threads.get(ev.worker as usize) else {
            return;
        };
        let Some(weights) = self.at_addr.remove(&(th.proc, ev.x)) else {
            return;
        };
        if ev.a != 0 {
            // Moved by realloc: still live, at the new address.
            if let Some(&to) = model.side.get(ev.a as usize - 1) {
                self.at_addr
                    .entry((th.proc, to))
                    .or_default()
                    .extend(weights);
            }
            return;
        }
        let freed: u64 = weights.iter().sum();
        self.changes.push_back(Change {
            proc: th.proc,
            ticks: ev.ticks,
            live: -(freed as i64),
            alloc: 0,
        });
    }

    /// Folds the changes before `t` (ticks) into the base sums: a live
    /// view keeps memory bounded by its window.
    pub fn forget_before(&mut self, t: u64) {
        while let Some(c) = self.changes.front().filter(|c| c.ticks < t).copied() {
            self.changes.pop_front();
            *self.base.entry(c.proc).or_default() += c.live;
        }
    }

    /// The window `[t0, t1]` (ticks) of recording `proc`; None when the
    /// trace has no allocation sample.
    pub fn window(&self, proc: u32, t0: u64, t1: u64) -> Option<HeapWindow> {
        if !self.any {
            return None;
        }
        let mut start = self.base.get(&proc).copied().unwrap_or_default();
        let (mut end, mut allocated) = (start, 0u64);
        for c in self.changes.iter().filter(|c| c.proc == proc) {
            if c.ticks < t0 {
                start += c.live;
            }
            if c.ticks <= t1 {
                end += c.live;
                if c.ticks >= t0 {
                    allocated += c.alloc;
                }
            }
        }
        Some(HeapWindow {
            live_end: end.max(0) as u64,
            live_start: start.max(0) as u64,
            allocated,
            live_set: self.live_set,
        })
    }

    /// Changes kept (the memory bound's witness).
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// None kept.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

impl Pass for Heap {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::PROFILE
    }
    fn event(&mut self, ev: &Ev, model: &Model) {
        Heap::event(self, ev, model);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_model::synth::TraceBuilder;

    fn read(b: TraceBuilder) -> Heap {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.0.bin");
        std::fs::write(&path, b.finish()).unwrap();
        let mut h = Heap::default();
        runtrace_model::input::read(&[path], &mut h, None);
        h
    }

    #[test]
    fn moves_untracked_samples_and_forgetting() {
        let mut b = TraceBuilder::new();
        b.thread_name(1, "runtrace-writer");
        b.alloc_sample(1, 1_000, 100, 0, 64, 1000, 0x10, 1);
        b.alloc_sample(1, 1_500, 100, 0, 64, 50_000, 0x90, 2); // untracked
        b.alloc_sample(1, 1_600, 1, 0, 64, 7, 0x70, 1); // the writer's own
        b.alloc_free(1, 2_000, 100, 0x10, 0x20); // moved: still live
        b.alloc_free(1, 2_500, 100, 0x90, 0); // untracked: no pairing
        b.alloc_sample(1, 3_000, 100, 0, 64, 300, 0x30, 1);
        b.alloc_free(1, 4_000, 100, 0x20, 0);
        let mut h = read(b);
        let w = h.window(0, 2_000, 3_500).unwrap();
        assert_eq!((w.live_start, w.live_end, w.allocated), (1000, 1300, 300));
        let w = h.window(0, 0, 5_000).unwrap();
        assert_eq!((w.live_end, w.allocated), (300, 51_300));
        // A live view's window moved on: the same figures from the base.
        h.forget_before(3_500);
        assert_eq!(h.len(), 1); // the free at 4 µs
        let w = h.window(0, 3_500, 5_000).unwrap();
        assert_eq!((w.live_start, w.live_end, w.allocated), (1300, 300, 0));
    }

    #[test]
    fn nothing_without_allocation_samples() {
        let mut b = TraceBuilder::new();
        b.poll_start(7, 0, 1_000, 1, 0, 0);
        assert_eq!(read(b).window(0, 0, 10_000), None);
    }
}
