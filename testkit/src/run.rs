//! A command run to completion under a deadline.

use std::time::Duration;

use crate::proc::{Output, Spawn};

/// Runs `spawn` to its exit (at most `limit`; killed and a panic after that).
pub fn run(spawn: Spawn, limit: Duration) -> Output {
    spawn.start().finish(limit)
}
