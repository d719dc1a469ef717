//! A mergeable, fixed-precision histogram of `u64` values (nanoseconds).
//!
//! Log-linear buckets, as in HDR histograms: values below 128 each have
//! their own bucket (exact); above that, every power of two is split into 64
//! equal buckets, so a bucket's width is at most 1/64 of its lower bound.
//! A percentile is reported as the middle of its bucket, which is within
//! 1/128 (0.79 %) of every value in the bucket. The bucket array grows only
//! up to the largest value recorded: values up to 10 ms use ~1,150 buckets
//! (4.6 KB of `u32` counts), the whole `u64` range 3,776 buckets (15 KB),
//! whatever the number of samples.
//!
//! Percentiles use the nearest-rank definition: the `q` quantile of `n`
//! values is the value of rank `ceil(q * n)` (at least 1) in ascending
//! order.
//!
//! ```
//! use runtrace_model::hist::Histogram;
//! let mut h = Histogram::new();
//! for v in 1..=1000u64 {
//!     h.record(v * 1000);
//! }
//! let p99 = h.quantile_permille(990);
//! assert!((p99 as f64 - 990_000.0).abs() <= 990_000.0 * 0.01);
//! assert_eq!(h.max(), 1_000_000);
//! ```

/// Bits of sub-bucket precision: 2^SUB_BITS buckets per power of two.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this have exact buckets.
const EXACT: u64 = SUB << 1;

/// The bucket of `v`.
#[inline(always)]
fn index(v: u64) -> usize {
    if v < EXACT {
        v as usize
    } else {
        let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
        let shift = e - SUB_BITS;
        ((shift as u64) * SUB + (v >> shift)) as usize
    }
}

/// The smallest and largest value in bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < EXACT {
        return (i, i);
    }
    let shift = i / SUB - 1;
    let m = i % SUB + SUB;
    let lo = m << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Counts modulo 2^32 (half the cache footprint of u64 counts).
    counts: Vec<u32>,
    /// One entry per time a bucket's count wrapped: +2^32 for that bucket.
    wraps: Vec<u32>,
    count: u64,
    sum: u64,
    max: u64,
}

/// The percentiles reports print, all in the unit recorded (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value (exact).
    pub max: u64,
}

impl Summary {
    /// `{count, p50, p90, p99, p999, max}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p999": self.p999,
            "max": self.max,
        })
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Adds one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = index(v);
        if i >= self.counts.len() {
            self.grow(i);
        }
        let c = &mut self.counts[i];
        *c = c.wrapping_add(1);
        if *c == 0 {
            self.wraps.push(i as u32);
        }
        self.max = self.max.max(v);
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        // Grow in steps of a power of two's worth of buckets.
        self.counts
            .resize((i + SUB as usize).min(index(u64::MAX) + 1), 0);
    }

    /// The count of bucket `i`.
    fn bucket(&self, i: usize) -> u64 {
        let wraps = if self.wraps.is_empty() {
            0
        } else {
            self.wraps.iter().filter(|&&w| w as usize == i).count() as u64
        };
        self.counts.get(i).copied().unwrap_or(0) as u64 + (wraps << 32)
    }

    /// Adds every value of `other` (the result is as if both had recorded
    /// into one histogram).
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (i, (a, b)) in self.counts.iter_mut().zip(&other.counts).enumerate() {
            let (s, wrapped) = a.overflowing_add(*b);
            *a = s;
            if wrapped {
                self.wraps.push(i as u32);
            }
        }
        self.wraps.extend_from_slice(&other.wraps);
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the values (saturating).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Smallest value (within 1/128; 0 when empty).
    pub fn min(&self) -> u64 {
        self.value_at_rank(1)
    }

    /// Largest value (exact; 0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean (0 when empty).
    pub fn mean(&self) -> u64 {
        self.sum.checked_div(self.count).unwrap_or(0)
    }

    /// The value of rank `rank` (1-based, ascending), within 1/128 of the
    /// exact one; 0 when empty.
    pub fn value_at_rank(&self, rank: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = rank.clamp(1, self.count);
        if rank == self.count {
            return self.max;
        }
        let mut seen = 0;
        for i in 0..self.counts.len() {
            seen += self.bucket(i);
            if seen >= rank {
                let (lo, hi) = bounds(i);
                return (lo + (hi - lo) / 2).min(self.max);
            }
        }
        self.max
    }

    /// The nearest-rank quantile for `permille` / 1000 (500: median, 999:
    /// p99.9).
    pub fn quantile_permille(&self, permille: u64) -> u64 {
        let rank = (self.count as u128 * permille as u128).div_ceil(1000) as u64;
        self.value_at_rank(rank)
    }

    /// p50, p90, p99, p99.9 and max.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count,
            p50: self.quantile_permille(500),
            p90: self.quantile_permille(900),
            p99: self.quantile_permille(990),
            p999: self.quantile_permille(999),
            max: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        let mut next = 0u64;
        for i in 0..=index(u64::MAX) {
            let (lo, hi) = bounds(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(hi >= lo);
            assert_eq!(index(lo), i);
            assert_eq!(index(hi), i);
            // Width at most 1/64 of the lower bound.
            assert!(i < EXACT as usize || (hi - lo + 1) * SUB <= lo);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn exact_below_128_and_merge() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for v in 0..100 {
            a.record(v);
            b.record(v + 20);
        }
        assert_eq!(a.quantile_permille(500), 49);
        a.merge(&b);
        assert_eq!(a.count(), 200);
        assert_eq!(a.min(), 0);
        assert_eq!(a.max(), 119);
        assert_eq!(a.quantile_permille(500), 59);
        assert_eq!(Histogram::new().summary(), Summary::default());
    }

    #[test]
    fn counts_past_u32_wrap() {
        let mut h = Histogram::new();
        h.counts = vec![u32::MAX; 3];
        h.count = 3 * u32::MAX as u64;
        h.record(1);
        assert_eq!(h.wraps, vec![1]);
        assert_eq!(h.bucket(1), 1 << 32);
        assert_eq!(h.bucket(0), u32::MAX as u64);
        let mut m = Histogram::new();
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.bucket(1), 2 << 32);
        assert_eq!(m.bucket(2), 2 * u32::MAX as u64);
    }
}
