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
    /// From now on a second SIGINT or SIGTERM ends the process at once (exit status 1),
    /// without waiting for a graceful stop already under way. Safe: the next start
    /// recovers from the log.
    pub fn exit_on_next(&self) {
        let set = self.0;
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let name = Signals(set).wait();
                log::warn!("{name} again: exiting at once (the next start recovers)");
                std::process::exit(1);
            });
        if let Err(e) = spawned {
            log::warn!("cannot watch for a second signal: {e}");
        }
    }

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
