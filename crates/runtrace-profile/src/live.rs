//! The live set's table (issue 39, item 2): the addresses of the sampled
//! allocations not freed yet, so that a free can tell in a few loads
//! whether it frees a sampled allocation (whose free the trace records).
//!
//! # Protocol
//! A fixed array of address words split into buckets of `B` words; an
//! address belongs to the bucket its hash picks. 0 is an empty word.
//! 1. Insert (the sampling thread, after the inner allocator returned the
//!    address): a compare-exchange of an empty word of the bucket from 0 to
//!    the address. No empty word: the table is full for that address; the
//!    caller counts it and marks the sample untracked (never a leak).
//! 2. Remove (whichever thread frees the address, before the inner
//!    allocator may hand it out again): every word of the bucket holding
//!    the address is compare-exchanged back to 0. Lookups scan the whole
//!    bucket (no early stop at an empty word), so removal needs no
//!    tombstones.
//! 3. The words carry no data besides themselves, so every access is
//!    `Relaxed`: an address is inserted before the pointer is returned to
//!    the program and removed only by a thread the program handed the
//!    pointer to, so the program's own synchronisation orders the insert
//!    before the remove (coherence of the one word does the rest).
//! 4. The same address may be in the table twice (a sampled growth of an
//!    allocation already sampled, grown in place): remove clears every copy.
//!
//! Loom model: `loom_live_*` below.

use crate::sync::{AtomicU64, Ordering};

/// The live set's table: `N` words in buckets of `B` (see the module doc).
pub(crate) struct LiveTable<const N: usize, const B: usize> {
    words: [AtomicU64; N],
}

impl<const N: usize, const B: usize> LiveTable<N, B> {
    const SHAPE: () = assert!(
        B > 0 && N.is_multiple_of(B) && (N / B).is_power_of_two(),
        "N must be a power-of-two number of buckets of B words"
    );

    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        let () = Self::SHAPE;
        LiveTable {
            words: [const { AtomicU64::new(0) }; N],
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        let () = Self::SHAPE;
        LiveTable {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The words of `addr`'s bucket.
    #[inline(always)]
    fn bucket(&self, addr: u64) -> &[AtomicU64] {
        // Allocations are at least 8-aligned: drop the low bits, then a
        // multiplicative hash's high bits pick the bucket.
        let h = (addr >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let buckets = (N / B) as u64;
        let b = if buckets == 1 {
            0
        } else {
            (h >> (64 - buckets.trailing_zeros())) as usize
        };
        &self.words[b * B..b * B + B]
    }

    /// Adds `addr` (non-zero); false when its bucket is full.
    pub(crate) fn insert(&self, addr: u64) -> bool {
        debug_assert!(addr != 0);
        for w in self.bucket(addr) {
            if w.load(Ordering::Relaxed) == 0
                && w.compare_exchange(0, addr, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
        }
        false
    }

    /// Removes every copy of `addr`; true if there was one.
    #[inline]
    pub(crate) fn remove(&self, addr: u64) -> bool {
        let mut found = false;
        for w in self.bucket(addr) {
            if w.load(Ordering::Relaxed) == addr
                && w.compare_exchange(addr, 0, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                found = true;
            }
        }
        found
    }

    /// Empties the table (between recordings).
    pub(crate) fn clear(&self) {
        for w in &self.words {
            w.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_live_insert_remove_race() {
        loom::model(|| {
            // One bucket of 2 words: every address shares it.
            let t = Arc::new(LiveTable::<2, 2>::new());
            let t2 = t.clone();
            let h = loom::thread::spawn(move || {
                assert!(t2.insert(16));
                assert!(t2.remove(16), "its own insert is seen");
            });
            assert!(t.insert(32));
            h.join().unwrap();
            assert!(t.remove(32));
            assert!(!t.remove(16) && !t.remove(32), "both gone");
        });
    }

    #[test]
    fn loom_live_full_bucket_exactly_one_fails() {
        loom::model(|| {
            let t = Arc::new(LiveTable::<2, 2>::new());
            let hs: Vec<_> = [8u64, 24]
                .into_iter()
                .map(|a| {
                    let t = t.clone();
                    loom::thread::spawn(move || t.insert(a))
                })
                .collect();
            let mine = t.insert(40);
            let oks = hs
                .into_iter()
                .map(|h| h.join().unwrap() as u32)
                .sum::<u32>()
                + mine as u32;
            assert_eq!(oks, 2, "two words, three inserts: one refused");
            let kept = [8u64, 24, 40].into_iter().filter(|&a| t.remove(a)).count();
            assert_eq!(kept, 2, "every accepted address is found");
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn full_bucket_refuses_and_remove_frees_a_word() {
        let t = LiveTable::<4, 4>::new();
        for a in 1..=4u64 {
            assert!(t.insert(a * 16));
        }
        assert!(!t.insert(80), "full");
        assert!(t.remove(32));
        assert!(!t.remove(32), "removed once");
        assert!(t.insert(80), "the freed word is reused");
        assert!(t.remove(80) && t.remove(16) && t.remove(48) && t.remove(64));
    }

    #[test]
    fn duplicates_are_removed_together_and_clear_empties() {
        let t = LiveTable::<64, 8>::new();
        assert!(t.insert(4096) && t.insert(4096));
        assert!(t.remove(4096));
        assert!(!t.remove(4096), "both copies gone");
        for a in 1..=40u64 {
            t.insert(a * 64);
        }
        t.clear();
        assert!((1..=40u64).all(|a| !t.remove(a * 64)));
    }

    #[test]
    fn addresses_spread_over_buckets() {
        // 8-aligned heap-like addresses must not all hash to one bucket.
        let t = LiveTable::<1024, 16>::new();
        let ok = (0..512u64)
            .filter(|i| t.insert(0x5555_0000 + i * 48))
            .count();
        assert_eq!(ok, 512, "half the table holds 512 addresses");
    }
}
