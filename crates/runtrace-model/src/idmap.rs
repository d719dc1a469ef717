//! [`IdMap`]: a map from task ids to values for ids that are mostly
//! dense. tokio numbers its tasks from one counter, so the tasks alive at
//! any moment sit in a window of ids: a ring indexed by `id - base` finds
//! them with a subtraction and a bounds check instead of a hash probe.
//! Ids far from the window (another id space, a task that lives much
//! longer than the ones spawned after it) go to a hash map beside it.
//!
//! The lifecycle looks a task up at every poll start, poll end and wake:
//! this is the map it does that in.
//!
//! ```
//! use runtrace_model::idmap::IdMap;
//! let mut m = IdMap::default();
//! for id in 100..110u64 {
//!     m.insert(id, id * 2);
//! }
//! m.insert(7, 1); // far below the window: kept aside
//! assert_eq!(m.get_mut(105).copied(), Some(210));
//! assert_eq!(m.remove(7), Some(1));
//! assert_eq!(m.len(), 10);
//! let all: Vec<(u64, u64)> = m.drain_sorted();
//! assert_eq!(all.first(), Some(&(100, 200)));
//! assert!(m.is_empty());
//! ```

use crate::fxhash::FxHashMap;
use std::collections::VecDeque;

/// How far past the window's end an id may land and still extend it
/// (further: kept aside).
const REACH: u64 = 1 << 16;

/// The ring's length it may grow to beyond four times the values it holds
/// (plus this) before its oldest values are moved aside: a task that
/// outlives a million younger ones must not keep a million empty slots.
const SLACK: usize = 1 << 12;

/// A map from ids to values, fast when the ids in it are close together
/// (see the module docs).
#[derive(Debug, Clone)]
pub struct IdMap<V> {
    /// The id of `ring[0]`.
    base: u64,
    ring: VecDeque<Option<V>>,
    /// Values in `ring`.
    in_ring: usize,
    /// Values whose ids are outside the ring.
    aside: FxHashMap<u64, V>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            base: 0,
            ring: VecDeque::new(),
            in_ring: 0,
            aside: FxHashMap::default(),
        }
    }
}

impl<V> IdMap<V> {
    /// The value of `id`.
    #[inline(always)]
    pub fn get_mut(&mut self, id: u64) -> Option<&mut V> {
        let i = id.wrapping_sub(self.base);
        if i < self.ring.len() as u64 && self.ring[i as usize].is_some() {
            return self.ring[i as usize].as_mut();
        }
        if self.aside.is_empty() {
            return None;
        }
        self.aside.get_mut(&id)
    }

    /// Sets the value of `id`, returning the one it replaces.
    #[inline]
    pub fn insert(&mut self, id: u64, v: V) -> Option<V> {
        if self.ring.is_empty() {
            if !self.aside.is_empty() {
                if let Some(old) = self.aside.remove(&id) {
                    self.aside.insert(id, v);
                    return Some(old);
                }
            }
            self.base = id;
        }
        let i = id.wrapping_sub(self.base);
        let len = self.ring.len() as u64;
        if i < len {
            let slot = &mut self.ring[i as usize];
            if slot.is_some() {
                return slot.replace(v);
            }
            // An id put aside before the ring reached it moves in.
            let old = if self.aside.is_empty() {
                None
            } else {
                self.aside.remove(&id)
            };
            *slot = Some(v);
            self.in_ring += 1;
            return old;
        }
        if id < self.base || i - len >= REACH {
            return self.aside.insert(id, v);
        }
        // Just past the end (new tasks): extend the ring to it.
        let old = if self.aside.is_empty() {
            None
        } else {
            self.aside.remove(&id)
        };
        while (self.ring.len() as u64) < i {
            self.ring.push_back(None);
        }
        self.ring.push_back(Some(v));
        self.in_ring += 1;
        if self.ring.len() > 4 * self.in_ring + SLACK {
            self.shrink();
        }
        old
    }

    /// Removes `id`, returning its value.
    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<V> {
        let i = id.wrapping_sub(self.base);
        if i < self.ring.len() as u64 {
            if let Some(old) = self.ring[i as usize].take() {
                self.in_ring -= 1;
                self.trim();
                return Some(old);
            }
        }
        if self.aside.is_empty() {
            return None;
        }
        self.aside.remove(&id)
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.in_ring + self.aside.len()
    }

    /// None held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (id, value), in id order; the map is left empty.
    pub fn drain_sorted(&mut self) -> Vec<(u64, V)> {
        let base = self.base;
        let mut all: Vec<(u64, V)> = self
            .ring
            .drain(..)
            .enumerate()
            .filter_map(|(i, v)| Some((base.wrapping_add(i as u64), v?)))
            .collect();
        all.extend(self.aside.drain());
        all.sort_unstable_by_key(|e| e.0);
        self.in_ring = 0;
        all
    }

    /// Drops empty slots at the ring's front (the oldest ids, gone).
    #[inline]
    fn trim(&mut self) {
        while matches!(self.ring.front(), Some(None)) {
            self.ring.pop_front();
            self.base = self.base.wrapping_add(1);
        }
    }

    /// Moves the oldest values aside until the ring is at most twice its
    /// values: the window follows the young ids.
    #[cold]
    fn shrink(&mut self) {
        while self.ring.len() > 2 * self.in_ring + SLACK / 2 {
            if let Some(Some(v)) = self.ring.pop_front() {
                self.aside.insert(self.base, v);
                self.in_ring -= 1;
            }
            self.base = self.base.wrapping_add(1);
        }
        self.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Any sequence of inserts and removes (ids in a few clusters, as
        /// tokio's counters and a long-lived task make them) gives what a
        /// BTreeMap gives.
        #[test]
        fn behaves_as_a_map(ops in proptest::collection::vec(
            (0u8..3, prop_oneof![0u64..50, 1_000u64..1_200, 66_000u64..66_050, 70_000u64..70_050, 140_000u64..140_020, Just(u64::MAX)], 0u32..100),
            0..600,
        )) {
            let mut m = IdMap::default();
            let mut b = BTreeMap::new();
            for (op, id, v) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(m.insert(id, v), b.insert(id, v)),
                    _ => prop_assert_eq!(m.remove(id), b.remove(&id)),
                }
                prop_assert_eq!(m.len(), b.len());
                prop_assert_eq!(m.get_mut(id).copied(), b.get(&id).copied());
            }
            let all = m.drain_sorted();
            prop_assert_eq!(all, b.into_iter().collect::<Vec<_>>());
            prop_assert!(m.is_empty());
        }
    }

    /// One task that outlives a million younger ones does not keep a
    /// million slots.
    #[test]
    fn a_long_lived_id_does_not_pin_the_ring() {
        let mut m = IdMap::default();
        m.insert(1, ());
        for id in 2..1_000_000u64 {
            m.insert(id, ());
            m.remove(id);
        }
        assert_eq!(m.len(), 1);
        assert!(m.ring.len() <= SLACK, "{}", m.ring.len());
        assert_eq!(m.remove(1), Some(()));
    }
}
