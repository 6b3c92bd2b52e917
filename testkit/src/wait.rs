//! Waiting for a condition instead of sleeping a fixed time before an assertion.
//!
//! Each helper polls its condition every few milliseconds until it holds or the limit
//! passes. Limits are generous (a shared machine may be slow); the poll interval is short
//! so a fast machine does not wait for nothing.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often a condition is polled.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `cond` until it holds or `limit` passes; false on timeout.
pub fn poll_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `cond` until it holds; panics "timed out after LIMIT waiting for WHAT" otherwise.
pub fn wait_until(limit: Duration, what: impl Display, cond: impl FnMut() -> bool) {
    if !poll_until(limit, cond) {
        panic!("timed out after {limit:?} waiting for {what}");
    }
}

/// Polls `probe` until it returns `Some` and returns that; panics like [`wait_until`].
pub fn wait_for<T>(limit: Duration, what: impl Display, mut probe: impl FnMut() -> Option<T>) -> T {
    let mut out = None;
    wait_until(limit, what, || {
        out = probe();
        out.is_some()
    });
    out.expect("the probe returned Some")
}

/// [`poll_until`] for async tests (sleeps on the tokio timer).
pub async fn poll_until_async(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_until`] for async tests.
pub async fn wait_until_async(limit: Duration, what: impl Display, cond: impl FnMut() -> bool) {
    if !poll_until_async(limit, cond).await {
        panic!("timed out after {limit:?} waiting for {what}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_never_holds_times_out() {
        assert!(!poll_until(Duration::from_millis(50), || false));
        let mut n = 0;
        assert!(poll_until(Duration::from_secs(30), || {
            n += 1;
            n == 3
        }));
    }

    #[test]
    #[should_panic(expected = "waiting for the impossible")]
    fn wait_until_names_what_it_waited_for() {
        wait_until(Duration::from_millis(10), "the impossible", || false);
    }
}
