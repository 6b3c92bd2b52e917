//! Fixed-bucket histograms as Prometheus wants them: cumulative buckets with upper bounds,
//! a sum and a count. Recorded on a shard's own loop (plain integers, no atomics) and merged
//! across shards at scrape.

/// Latency bucket upper bounds, in µs: 50 µs .. 10 s. A broker reply takes 20 µs to a few
/// ms; fdatasync 100 µs to hundreds of ms; long polls up to 30 s land in `+Inf`.
pub const LATENCY_BOUNDS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

/// Lateness bucket upper bounds, in ms: 1 ms .. 5 min (scheduled deliveries).
pub const LATENESS_BOUNDS_MS: &[u64] = &[
    1, 10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// Message size bucket upper bounds, in bytes: 64 B .. 4 MiB (the largest body).
pub const SIZE_BOUNDS_BYTES: &[u64] = &[
    64, 256, 1_024, 4_096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304,
];

/// One histogram: per-bucket counts (not cumulative), the last bucket is `+Inf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hist {
    bounds: &'static [u64],
    counts: Box<[u64]>,
    sum: u64,
    count: u64,
}

impl Hist {
    pub fn new(bounds: &'static [u64]) -> Self {
        Hist {
            bounds,
            counts: vec![0; bounds.len() + 1].into_boxed_slice(),
            sum: 0,
            count: 0,
        }
    }

    pub fn latency() -> Self {
        Hist::new(LATENCY_BOUNDS_US)
    }

    /// Records one value (in the bounds' unit).
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    /// Records `n` values of `v`.
    #[inline]
    pub fn record_n(&mut self, v: u64, n: u64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i] += n;
        self.sum = self.sum.saturating_add(v.saturating_mul(n));
        self.count += n;
    }

    /// Adds `o`'s counts (same bounds; a histogram with other bounds is ignored).
    pub fn merge(&mut self, o: &Hist) {
        if !std::ptr::eq(self.bounds, o.bounds) && self.bounds != o.bounds {
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.sum = self.sum.saturating_add(o.sum);
        self.count += o.count;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// `(upper bound, cumulative count)` per finite bucket; `+Inf` is [`Hist::count`].
    pub fn cumulative(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut acc = 0;
        self.bounds
            .iter()
            .zip(self.counts.iter())
            .map(move |(&b, &c)| {
                acc += c;
                (b, acc)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_bounds_inclusive() {
        let mut h = Hist::new(&[10, 100]);
        for v in [0, 10, 11, 100, 101, 5_000] {
            h.record(v);
        }
        let c: Vec<_> = h.cumulative().collect();
        assert_eq!(c, vec![(10, 2), (100, 4)]);
        assert_eq!(h.count(), 6);
        assert_eq!(h.sum(), 5_222);
    }

    #[test]
    fn merge_adds_and_refuses_other_bounds() {
        let mut a = Hist::latency();
        let mut b = Hist::latency();
        a.record(40);
        b.record_n(3_000, 2);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.sum(), 6_040);
        let other = Hist::new(SIZE_BOUNDS_BYTES);
        a.merge(&other);
        assert_eq!(a.count(), 3);
    }
}
