//! A command run to completion under a deadline.

use std::process::ExitStatus;
use std::time::Duration;

use crate::proc::Spawn;

/// What a finished process did.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: ExitStatus,
    /// The exit code; -1 when a signal ended the process.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// From the spawn to the exit (never asserted on: speed is not tested).
    pub elapsed: Duration,
}

/// Runs `spawn` to its exit (at most `limit`; killed and a panic after that).
pub fn run(spawn: Spawn, limit: Duration) -> Output {
    spawn.start().finish(limit)
}
