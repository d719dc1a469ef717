//! A small, fast, non-cryptographic hasher for the integer keys of the hot
//! maps (task ids): one multiply per `u64`, in the manner of rustc's
//! FxHasher. Trace contents are not adversarial input to a denial-of-service
//! worth defending against here, and SipHash would cost a third of the
//! per-event budget.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// See the module docs.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K);
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes the top 7 bits as the tag and the low bits as
        // the bucket: fold so both depend on every input bit.
        self.0.rotate_left(26)
    }
}

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A `HashSet` with [`FxHasher`].
pub type FxHashSet<K> = std::collections::HashSet<K, BuildHasherDefault<FxHasher>>;
