//! What a run did second by second, per meter: the progress task notes one [`Second`] per
//! wall-clock second since the progress task started (the last one when the run stops),
//! for the charts of `--html`.

use crate::stats::Percentiles;

/// One second of one meter.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Second {
    /// Seconds since the progress task started, at the end of this second.
    pub t_s: f64,
    pub msgs_per_s: f64,
    /// Errors counted in this second.
    pub errors: u64,
    /// Percentiles of the latencies recorded in this second (`samples` 0: none).
    pub latency_us: Percentiles,
}

/// The seconds of one meter (`send`, `recv`, `e2e`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub label: String,
    pub seconds: Vec<Second>,
}

/// Seconds kept per meter (a day); a longer run keeps its first day.
pub const SECONDS_MAX: usize = 86_400;

impl Timeline {
    pub fn new(label: &str) -> Timeline {
        Timeline {
            label: label.to_string(),
            seconds: Vec::new(),
        }
    }

    pub fn push(&mut self, s: Second) {
        if self.seconds.len() < SECONDS_MAX {
            self.seconds.push(s);
        }
    }
}
