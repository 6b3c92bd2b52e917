//! Counting what a run did: a [`Meter`] per direction (sends, deliveries) with message, byte
//! and error counters and an HdrHistogram of latencies in µs (1 µs to 1 hour, 3 significant
//! digits), and the [`Summary`] a meter ends as.
//!
//! Beside the whole run's histogram a meter keeps one of the current second, which the
//! progress task takes and resets each second ([`Meter::take_second`]) for the
//! per-second latency chart of `--html`.
//!
//! Many tasks record into one meter: counters are atomics, the histogram sits behind a
//! mutex that is held only for one `record` (uncontended on this scale: a record per send,
//! or per delivered message).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Largest latency the histograms hold (longer ones are clamped to it).
pub const LATENCY_US_MAX: u64 = 3_600_000_000;
/// Significant digits of the histograms.
const SIGFIG: u8 = 3;

/// Counters and latencies of one direction of a run.
#[derive(Debug)]
pub struct Meter {
    messages: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    latency: Mutex<Latencies>,
}

/// The whole run's histogram and the current second's (both under one lock).
#[derive(Debug)]
struct Latencies {
    run: Histogram<u64>,
    second: Histogram<u64>,
}

impl Latencies {
    fn record(&mut self, us: u64) {
        let v = us.clamp(1, LATENCY_US_MAX);
        self.run.saturating_record(v);
        self.second.saturating_record(v);
    }
}

impl Default for Meter {
    fn default() -> Self {
        Meter {
            messages: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency: Mutex::new(Latencies {
                run: new_histogram(),
                second: new_histogram(),
            }),
        }
    }
}

/// Counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// Latency percentiles in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
    /// Latencies recorded.
    pub samples: u64,
}

/// What a meter ends as.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    pub messages: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub msgs_per_s: f64,
    /// 10^6 bytes per second.
    pub mb_per_s: f64,
    pub latency_us: Percentiles,
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, SIGFIG).expect("constant, valid bounds")
}

impl Meter {
    /// `messages` of `bytes` in total done; `latency_us` once (one request or one message).
    pub fn record(&self, messages: u64, bytes: u64, latency_us: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.record_latency(latency_us);
    }

    /// Counts without a latency (e.g. messages of someone else's format).
    pub fn count(&self, messages: u64, bytes: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn record_latency(&self, latency_us: u64) {
        self.latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(latency_us);
    }

    /// Many latencies at once (a consumer's batch), one lock.
    pub fn record_latencies(&self, latencies_us: &[u64]) {
        let mut h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        for &l in latencies_us {
            h.record(l);
        }
    }

    pub fn error(&self, messages: u64) {
        self.errors.fetch_add(messages, Ordering::Relaxed);
    }

    pub fn counts(&self) -> Counts {
        Counts {
            messages: self.messages.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// p99 of everything recorded so far, µs (0 before the first record).
    pub fn p99_so_far(&self) -> u64 {
        let h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        if h.run.is_empty() {
            0
        } else {
            h.run.value_at_quantile(0.99)
        }
    }

    /// Percentiles of what was recorded since the last call, and a fresh interval.
    pub fn take_second(&self) -> Percentiles {
        let mut h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let p = percentiles(&h.second);
        h.second.reset();
        p
    }

    /// The whole run's latency distribution: (percentile, µs) at percentiles
    /// `100 (1 - 10^(-k/10))` for k = 0, 1, ... while a tenth of 1 / (1 - percentile)
    /// samples exist (the HdrHistogram percentile plot; the maximum is in the summary).
    pub fn distribution(&self) -> Vec<(f64, u64)> {
        let h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        distribution(&h.run)
    }

    /// The summary over `elapsed` (the measured phase).
    pub fn summary(&self, elapsed: Duration) -> Summary {
        let c = self.counts();
        let h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        summarize(c, &h.run, elapsed)
    }
}

pub fn summarize(c: Counts, h: &Histogram<u64>, elapsed: Duration) -> Summary {
    // The rates are computed from the elapsed time exactly as reported (whole microseconds),
    // so messages / elapsed_s == msgs_per_s holds for a reader of the report, also for runs
    // of a few milliseconds.
    let elapsed_s = elapsed.as_micros() as f64 / 1e6;
    let secs = elapsed_s.max(1e-6);
    Summary {
        messages: c.messages,
        bytes: c.bytes,
        errors: c.errors,
        elapsed_s,
        msgs_per_s: c.messages as f64 / secs,
        mb_per_s: c.bytes as f64 / 1e6 / secs,
        latency_us: percentiles(h),
    }
}

pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        p9999: h.value_at_quantile(0.9999),
        max: h.max(),
        samples: h.len(),
    }
}

/// See [`Meter::distribution`]; at most 61 points (up to 99.9999 %).
pub fn distribution(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    if h.is_empty() {
        return out;
    }
    for k in 0..=60u32 {
        let tail = 10f64.powf(-f64::from(k) / 10.0);
        if k > 0 && (h.len() as f64) * tail < 0.1 {
            break;
        }
        let q = 1.0 - tail;
        out.push((q * 100.0, h.value_at_quantile(q)));
    }
    out
}

/// µs since `t`, saturating.
pub fn us_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let m = Meter::default();
        for i in 1..=1000 {
            m.record(2, 2048, i);
        }
        m.error(3);
        let s = m.summary(Duration::from_secs(2));
        assert_eq!(s.messages, 2000);
        assert_eq!(s.bytes, 2_048_000);
        assert_eq!(s.errors, 3);
        assert!((s.msgs_per_s - 1000.0).abs() < 1e-6);
        assert!((s.mb_per_s - 1.024).abs() < 1e-9);
        assert_eq!(s.latency_us.p50, 500);
        assert_eq!(s.latency_us.p99, 990);
        assert_eq!(s.latency_us.max, 1000);
        assert_eq!(s.latency_us.samples, 1000);
    }

    #[test]
    fn second_interval_resets() {
        let m = Meter::default();
        for i in 1..=100 {
            m.record(1, 1, i);
        }
        let first = m.take_second();
        assert_eq!(first.samples, 100);
        assert_eq!(first.p50, 50);
        assert_eq!(m.take_second().samples, 0);
        m.record(1, 1, 1500);
        assert_eq!(m.take_second().p99, 1500);
        // The whole run keeps all of it.
        assert_eq!(m.summary(Duration::from_secs(1)).latency_us.samples, 101);
        let d = m.distribution();
        assert_eq!(d.first(), Some(&(0.0, 1)));
        // 101 samples: up to 99.9 % (a tenth of a sample beyond it).
        assert!(d.last().is_some_and(|p| p.0 > 99.8 && p.0 < 99.95));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn empty_meter_is_zero() {
        let m = Meter::default();
        assert_eq!(m.p99_so_far(), 0);
        assert_eq!(
            m.summary(Duration::from_secs(1)).latency_us,
            Percentiles::default()
        );
    }
}
