//! Time as the node sees it: wall-clock milliseconds (record timestamps, retention, leases)
//! and a monotonic clock (deadlines, rates), both virtual inside a simulated world
//! ([`super::sim`]); and the local hour (RocketMQ's `deleteWhen` is local time).

use std::time::Duration;

use super::sim;

/// Unix time in milliseconds (the node's wall clock; it may jump).
pub fn now_ms() -> i64 {
    match sim::current() {
        Some(world) => world.wall_ms(),
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    }
}

/// A point on the monotonic clock (never jumps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(Duration);

impl Instant {
    pub fn now() -> Self {
        match sim::current() {
            Some(world) => Instant(Duration::from_nanos(world.now_ns())),
            None => Instant(process_start().elapsed()),
        }
    }

    /// Time from `earlier` to `self` (zero if `earlier` is later).
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// The clock's origin (process start; the simulated world's start).
    pub fn zero() -> Self {
        Instant(Duration::ZERO)
    }
}

impl std::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d;
    }
}

impl std::ops::Sub<Duration> for Instant {
    type Output = Instant;

    /// Saturates at the origin.
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d))
    }
}

impl std::ops::SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_sub(d);
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl std::ops::Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

fn process_start() -> std::time::Instant {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *START.get_or_init(std::time::Instant::now)
}

/// The hour of the day (0..=23) in the local time zone.
pub fn local_hour(now_ms: i64) -> u8 {
    let secs = (now_ms / 1000) as libc::time_t;
    // SAFETY: `tm` is a plain C struct for which all-zero bytes are valid; localtime_r only
    // writes into it and reads `secs`, both alive for the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the duration of the call (see above).
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if ok {
        tm.tm_hour.clamp(0, 23) as u8
    } else {
        ((now_ms / 3_600_000) % 24) as u8
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hour_in_range() {
        assert!(super::local_hour(0) < 24);
        assert!(super::local_hour(1_700_000_000_000) < 24);
    }
}
