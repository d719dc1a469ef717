//! A fixed-capacity, lock-free set of nonzero 64-bit keys, for probe sites
//! that must ask "is this one of mine?" on a hot path without a lock, an
//! allocation or a lookup in someone else's structure.
//!
//! runtrace-tokio's span layer keeps the ids of the spans it records here:
//! tracing calls its `on_enter`/`on_exit` with nothing but the span id, and
//! asking the registry for the span's metadata costs a slab lookup (two
//! atomic read-modify-writes) per enter and per exit, more than the event
//! itself.
//!
//! Layout: `buckets` cache lines of 8 slots each; a key lives in the bucket
//! its hash names, in any slot. `contains` reads one cache line (8 loads,
//! no write); `insert` claims an empty slot with one compare-exchange;
//! `remove` frees the key's slot with one. No slot is ever moved, so no
//! reader can miss a key that stays in the set while it looks. A bucket
//! that is full refuses the key (`insert` returns false): the caller counts
//! it, nothing blocks.
//!
//! Each key must be inserted by one party at a time (a span id is unique
//! among live spans; its `remove` happens before the id can be handed out
//! again), which is what makes a plain claim of an empty slot enough:
//! the same key is never in two slots.
//!
//! ```
//! use runtrace_core::idset::IdSet;
//! let set = IdSet::with_buckets(16);
//! assert!(set.insert(42));
//! assert!(set.contains(42));
//! assert!(!set.contains(7));
//! assert!(set.remove(42));
//! assert!(!set.contains(42));
//! assert!(!set.insert(0), "0 marks an empty slot: never a key");
//! ```

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots per bucket: 8 × 8 bytes, one cache line.
pub const SLOTS: usize = 8;

#[repr(align(64))]
struct Bucket([AtomicU64; SLOTS]);

impl Bucket {
    fn new() -> Bucket {
        Bucket(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// The set (see the module docs).
pub struct IdSet {
    buckets: Box<[Bucket]>,
    /// `64 - log2(buckets)`: the hash's top bits pick the bucket.
    shift: u32,
}

impl IdSet {
    /// A set of `buckets` buckets (rounded up to a power of two, at least
    /// 1) of [`SLOTS`] keys each, allocated now and never again.
    ///
    /// ```
    /// let set = runtrace_core::idset::IdSet::with_buckets(1000);
    /// assert_eq!(set.capacity(), 1024 * runtrace_core::idset::SLOTS);
    /// ```
    pub fn with_buckets(buckets: usize) -> IdSet {
        let n = buckets.max(1).next_power_of_two();
        IdSet {
            buckets: (0..n).map(|_| Bucket::new()).collect(),
            shift: 64 - n.trailing_zeros(),
        }
    }

    /// Keys the set can hold at most (fewer when keys crowd one bucket).
    ///
    /// ```
    /// assert_eq!(runtrace_core::idset::IdSet::with_buckets(1).capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    #[inline(always)]
    fn bucket(&self, key: u64) -> &Bucket {
        // Fibonacci hashing: span ids are small, dense and reused, so the
        // multiply spreads them over the buckets; the top bits are the
        // well-mixed ones. `shift` is 64 for a single bucket.
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = h.checked_shr(self.shift).unwrap_or(0) as usize;
        &self.buckets[i]
    }

    /// Adds `key`; false when `key` is 0 or its bucket is full (the key is
    /// then not in the set). The key must not be in the set already.
    ///
    /// ```
    /// let set = runtrace_core::idset::IdSet::with_buckets(1);
    /// for k in 1..=8 {
    ///     assert!(set.insert(k));
    /// }
    /// assert!(!set.insert(9), "one bucket of 8 slots is full");
    /// ```
    #[inline]
    pub fn insert(&self, key: u64) -> bool {
        if key == 0 {
            return false;
        }
        let b = self.bucket(key);
        for slot in &b.0 {
            if slot.load(Ordering::Relaxed) == 0
                && slot
                    .compare_exchange(0, key, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
        }
        false
    }

    /// Whether `key` is in the set: one cache line read, no write.
    ///
    /// ```
    /// let set = runtrace_core::idset::IdSet::with_buckets(4);
    /// set.insert(5);
    /// assert!(set.contains(5) && !set.contains(6) && !set.contains(0));
    /// ```
    #[inline(always)]
    pub fn contains(&self, key: u64) -> bool {
        if key == 0 {
            return false;
        }
        let b = self.bucket(key);
        b.0.iter().any(|s| s.load(Ordering::Acquire) == key)
    }

    /// Removes `key`; false when it was not in the set.
    ///
    /// ```
    /// let set = runtrace_core::idset::IdSet::with_buckets(4);
    /// set.insert(5);
    /// assert!(set.remove(5));
    /// assert!(!set.remove(5));
    /// ```
    #[inline]
    pub fn remove(&self, key: u64) -> bool {
        if key == 0 {
            return false;
        }
        let b = self.bucket(key);
        b.0.iter().any(|s| {
            s.load(Ordering::Relaxed) == key
                && s.compare_exchange(key, 0, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn many_keys_in_many_buckets() {
        let set = IdSet::with_buckets(1024);
        // Dense small ids, as a registry hands them out.
        let fitted: Vec<u64> = (1..=4096u64).filter(|&k| set.insert(k)).collect();
        assert!(fitted.len() >= 4000, "{} of 4096 fitted", fitted.len());
        for k in 1..=4096u64 {
            assert_eq!(set.contains(k), fitted.contains(&k), "key {k}");
        }
        for &k in &fitted {
            assert!(set.remove(k));
        }
        assert!((1..=4096u64).all(|k| !set.contains(k)));
        // Freed slots are reused.
        assert!((1..=4096u64).filter(|&k| set.insert(k)).count() >= 4000);
    }

    #[test]
    fn threads_insert_and_remove_their_own_keys() {
        let set = std::sync::Arc::new(IdSet::with_buckets(8));
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let set = set.clone();
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let k = t * 1_000_000 + round + 1;
                        if set.insert(k) {
                            assert!(set.contains(k));
                            assert!(set.remove(k));
                        }
                        assert!(!set.contains(k));
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Arc;

    /// Two inserters race for the slots of one bucket while a third
    /// removes a key already there: every key inserted is found, the
    /// removed one is gone, no key is in two slots.
    #[test]
    fn loom_insert_remove_one_bucket() {
        loom::model(|| {
            let set = Arc::new(IdSet::with_buckets(1));
            assert!(set.insert(3));
            let a = {
                let set = set.clone();
                loom::thread::spawn(move || assert!(set.insert(1)))
            };
            let b = {
                let set = set.clone();
                loom::thread::spawn(move || assert!(set.insert(2)))
            };
            assert!(set.remove(3));
            a.join().unwrap();
            b.join().unwrap();
            assert!(set.contains(1) && set.contains(2) && !set.contains(3));
            let used = set.buckets[0]
                .0
                .iter()
                .filter(|s| s.load(Ordering::Relaxed) != 0)
                .count();
            assert_eq!(used, 2);
        });
    }

    /// A key inserted before a release store is seen by a reader that
    /// acquires it (a span created, then handed to another thread that
    /// enters it).
    #[test]
    fn loom_insert_then_publish() {
        loom::model(|| {
            let set = Arc::new(IdSet::with_buckets(1));
            let flag = Arc::new(AtomicBool::new(false));
            let w = {
                let (set, flag) = (set.clone(), flag.clone());
                loom::thread::spawn(move || {
                    assert!(set.insert(9));
                    flag.store(true, Ordering::Release);
                })
            };
            if flag.load(Ordering::Acquire) {
                assert!(set.contains(9));
            }
            w.join().unwrap();
            assert!(set.contains(9));
        });
    }
}
