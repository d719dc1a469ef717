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

/// At most this many values in the ring, an id far past its end moves the
/// ring there ([`IdMap::insert`]); more, and the id goes aside.
const JUMP: usize = 64;

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
    /// No id above this was ever put aside: a new task's id (above it,
    /// once the long-lived ones are aside) is not looked for there. The
    /// probe cost a hash lookup per spawn whenever any task was aside, a
    /// third of `insert`'s instructions following the demo service.
    aside_hi: u64,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            base: 0,
            ring: VecDeque::new(),
            in_ring: 0,
            aside: FxHashMap::default(),
            aside_hi: 0,
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
        if !self.maybe_aside(id) {
            return None;
        }
        self.aside.get_mut(&id)
    }

    /// Whether `id` may be aside.
    #[inline(always)]
    fn maybe_aside(&self, id: u64) -> bool {
        id <= self.aside_hi && !self.aside.is_empty()
    }

    /// Puts `id` aside.
    fn put_aside(&mut self, id: u64, v: V) -> Option<V> {
        self.aside_hi = self.aside_hi.max(id);
        self.aside.insert(id, v)
    }

    /// Sets the value of `id`, returning the one it replaces.
    #[inline]
    pub fn insert(&mut self, id: u64, v: V) -> Option<V> {
        if self.ring.is_empty() {
            if self.maybe_aside(id) {
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
            let may = self.maybe_aside(id);
            let slot = &mut self.ring[i as usize];
            if slot.is_some() {
                return slot.replace(v);
            }
            // An id put aside before the ring reached it moves in.
            let old = if may { self.aside.remove(&id) } else { None };
            *slot = Some(v);
            self.in_ring += 1;
            return old;
        }
        if id < self.base || i - len >= REACH {
            if id < self.base || self.in_ring > JUMP {
                return self.put_aside(id, v);
            }
            // Far past the end, with few values in the ring: the ring
            // moves to the new id, its values aside. A window seeded with
            // a long-lived task (an id from the recording's start) and
            // then the young ones (ids far above it) otherwise put every
            // task spawned after them aside, in the hash map: more than
            // half of a window's spawns following the demo service.
            self.restart(id);
            return self.insert(id, v);
        }
        // Just past the end (new tasks): extend the ring to it.
        let old = if self.maybe_aside(id) {
            self.aside.remove(&id)
        } else {
            None
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
        if !self.maybe_aside(id) {
            return None;
        }
        let old = self.aside.remove(&id);
        if self.aside.is_empty() {
            self.aside_hi = 0;
        }
        old
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.in_ring + self.aside.len()
    }

    /// None held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (id, value), in no order.
    ///
    /// ```
    /// use runtrace_model::idmap::IdMap;
    /// let mut m = IdMap::default();
    /// m.insert(9, 'b');
    /// m.insert(1 << 40, 'c');
    /// let mut all: Vec<(u64, char)> = m.iter().map(|(k, v)| (k, *v)).collect();
    /// all.sort();
    /// assert_eq!(all, [(9, 'b'), (1 << 40, 'c')]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        let base = self.base;
        self.ring
            .iter()
            .enumerate()
            .filter_map(move |(i, v)| Some((base.wrapping_add(i as u64), v.as_ref()?)))
            .chain(self.aside.iter().map(|(k, v)| (*k, v)))
    }

    /// Every (id, value), in id order, the map left as it is.
    ///
    /// ```
    /// use runtrace_model::idmap::IdMap;
    /// let mut m = IdMap::default();
    /// m.insert(9, 'b');
    /// m.insert(1 << 40, 'c');
    /// m.insert(7, 'a');
    /// let all: Vec<(u64, char)> = m.sorted().into_iter().map(|(k, v)| (k, *v)).collect();
    /// assert_eq!(all, [(7, 'a'), (9, 'b'), (1 << 40, 'c')]);
    /// assert_eq!(m.len(), 3);
    /// ```
    pub fn sorted(&self) -> Vec<(u64, &V)> {
        let base = self.base;
        let mut all: Vec<(u64, &V)> = self
            .ring
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((base.wrapping_add(i as u64), v.as_ref()?)))
            .collect();
        all.extend(self.aside.iter().map(|(k, v)| (*k, v)));
        all.sort_unstable_by_key(|e| e.0);
        all
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
        self.aside_hi = 0;
        all.sort_unstable_by_key(|e| e.0);
        self.in_ring = 0;
        all
    }

    /// Moves the ring's values aside and empties it; the next insert
    /// starts it at its id.
    #[cold]
    fn restart(&mut self, id: u64) {
        let base = self.base;
        let ring = std::mem::take(&mut self.ring);
        for (k, v) in ring.into_iter().enumerate() {
            if let Some(v) = v {
                self.put_aside(base.wrapping_add(k as u64), v);
            }
        }
        self.in_ring = 0;
        self.base = id;
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
                self.put_aside(self.base, v);
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

    /// A long-lived id and then young ones far above it (a window seeded
    /// with the tasks alive at its start): the young ones are in the
    /// ring, not aside, and a spawn does not probe the hash map.
    #[test]
    fn young_ids_far_above_an_old_one_stay_in_the_ring() {
        let mut m = IdMap::default();
        m.insert(4, 0u32);
        for id in 700_000..700_100u64 {
            m.insert(id, 1);
        }
        assert_eq!(m.aside.len(), 1, "only the old id aside");
        assert_eq!(m.in_ring, 100);
        assert!(!m.maybe_aside(700_100), "a new id is not looked for aside");
        // Many values in the ring: a far id goes aside, the ring stays.
        m.insert(9_000_000, 2);
        assert_eq!((m.aside.len(), m.in_ring), (2, 100));
        assert_eq!(m.remove(4), Some(0));
        assert_eq!(m.get_mut(9_000_000).copied(), Some(2));
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
