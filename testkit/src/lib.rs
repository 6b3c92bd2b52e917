//! Test support shared by the integration tests of `node`, `client`, `ctl` and `perf`
//! (a dev-dependency only; never part of a shipped binary).
//!
//! - [`Proc`]: one spawned process (a `ringmq` node or any other binary) as a guard: its
//!   stdout lines are read by a thread of their own, its stderr goes to a log file, it is
//!   killed and reaped on drop, and a panicking test prints the tail of that log.
//! - [`run`]: a command run to completion under a deadline (exit code, stdout, stderr).
//! - [`bin`]: where the workspace's binaries are, from any crate's tests.
//! - [`ready`]: the ready lines `ringmq` prints and the addresses in them.
//! - [`wait`]: polling a condition under a deadline instead of sleeping a fixed time.
//! - [`certs`]: a throwaway CA with server and client certificates, for TLS tests.
//! - [`split`]: a name server and a broker as two processes, to kill the broker alone.
//!
//! Every wait here is bounded and every timeout panics with what was awaited and the
//! process's recent stderr, so a hung process fails its test instead of hanging the suite.
#![forbid(unsafe_code)]

pub mod bin;
pub mod certs;
mod proc;
pub mod ready;
mod run;
pub mod split;
pub mod wait;

pub use proc::{Output, Proc, Spawn, TEST_BROKER_SETS};
pub use ready::{parse_ready, Ready};
pub use run::run;
pub use wait::{poll_until, poll_until_async, wait_for, wait_until, wait_until_async};

/// A fresh temp dir for one test, removed on drop.
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ringmq-it-{prefix}-"))
        .tempdir()
        .expect("creating a temp dir")
}

/// The last `n` lines of `text`, joined.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `len` bytes that do not compress and never repeat within a test's sizes: a xorshift64
/// stream from a fixed seed (the same bytes every call).
pub fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
