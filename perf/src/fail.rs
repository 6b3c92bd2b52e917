//! Failures on purpose (`--fail-ratio`, `--fail-times`): which messages the listener fails,
//! and how many times.
//!
//! A message is chosen from its perf head alone (producer id and sequence, hashed), so every
//! consumer of the run, a restarted one too, chooses the same messages, and about `ratio` of
//! them. A chosen message fails every delivery (it ends in the group's dead-letter queue
//! after the group's `maxReconsumeTimes`), or with `--fail-times K` only its first K
//! deliveries as this process counted them (it succeeds on a retry). Messages without a perf
//! head are never failed.
//!
//! The counts of `--fail-times` live in a map of at most one entry per chosen message of
//! the run (16 bytes of key and 4 of count each).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::payload::Head;

/// Which deliveries the listener fails.
#[derive(Debug)]
pub struct FailPlan {
    /// Fraction of messages chosen, 0..=1.
    ratio: f64,
    /// Fail only the first this many deliveries of a chosen message (`None`: all).
    times: Option<u32>,
    /// Deliveries failed so far per chosen message (with `times` only).
    failed: Mutex<HashMap<(u64, u64), u32>>,
}

impl FailPlan {
    pub fn new(ratio: f64, times: Option<u32>) -> FailPlan {
        FailPlan {
            ratio: ratio.clamp(0.0, 1.0),
            times,
            failed: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the message is one of those that fail.
    pub fn chosen(&self, h: &Head) -> bool {
        // 53 bits of the hash as a fraction in [0, 1).
        let x = (mix(h.producer ^ mix(h.seq)) >> 11) as f64 / (1u64 << 53) as f64;
        x < self.ratio
    }

    /// Whether this delivery of a chosen message fails (and counts it). Call once per
    /// delivery; returns false for messages not chosen.
    pub fn fails_now(&self, h: &Head) -> bool {
        if !self.chosen(h) {
            return false;
        }
        let Some(k) = self.times else {
            return true;
        };
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        let n = failed.entry((h.producer, h.seq)).or_insert(0);
        if *n < k {
            *n += 1;
            true
        } else {
            false
        }
    }
}

/// splitmix64's finalizer: spreads nearby inputs over all bits.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(producer: u64, seq: u64) -> Head {
        Head {
            producer,
            seq,
            send_us: 0,
        }
    }

    #[test]
    fn choice_is_deterministic_and_near_the_ratio() {
        let p = FailPlan::new(0.1, None);
        let q = FailPlan::new(0.1, None);
        let n = (0..100_000)
            .filter(|&s| {
                let h = head(0xABCD_0001, s);
                assert_eq!(p.chosen(&h), q.chosen(&h));
                p.chosen(&h)
            })
            .count();
        assert!((9_000..11_000).contains(&n), "{n} of 100000 chosen at 0.1");
        assert!(!FailPlan::new(0.0, None).chosen(&head(1, 2)));
        assert!(FailPlan::new(1.0, None).chosen(&head(1, 2)));
    }

    #[test]
    fn fail_times_counts_deliveries_per_message() {
        let p = FailPlan::new(1.0, Some(2));
        let (a, b) = (head(1, 1), head(1, 2));
        assert!(p.fails_now(&a));
        assert!(p.fails_now(&b));
        assert!(p.fails_now(&a));
        assert!(!p.fails_now(&a), "the third delivery succeeds");
        assert!(!p.fails_now(&a));
        assert!(p.fails_now(&b));
        let always = FailPlan::new(0.5, None);
        let h = (0..)
            .map(|s| head(7, s))
            .find(|h| always.chosen(h))
            .unwrap();
        assert!((0..20).all(|_| always.fails_now(&h)));
    }
}
