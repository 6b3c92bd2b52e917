//! Termination signals: blocked in every thread at start, taken synchronously by the main
//! thread with sigwait, so a shard is never interrupted mid-operation.

use nix::sys::signal::{SigSet, SigmaskHow, Signal};

/// The blocked set, to wait on.
#[derive(Debug)]
pub struct Signals(SigSet);

/// Blocks SIGINT and SIGTERM for this thread and every thread it starts afterwards.
pub fn block_termination() -> Signals {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    // Failure leaves the default handlers (the process dies on the signal): still safe, the
    // next start recovers.
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
    Signals(set)
}

impl Signals {
    /// Waits for SIGINT or SIGTERM and names it.
    pub fn wait(&self) -> &'static str {
        match self.0.wait() {
            Ok(Signal::SIGINT) => "SIGINT",
            Ok(Signal::SIGTERM) => "SIGTERM",
            Ok(_) => "signal",
            Err(_) => "sigwait error",
        }
    }
}
