//! The ringmq server: name server, broker and standalone node.
//!
//! `store`, `ha` and `namesrv` never import `net`, `shard` or `io`: they take bytes, ticks and
//! completions and return what to write or send. Only `io` names the event-loop runtime or
//! uses `unsafe`.
#![deny(unsafe_code)]

pub mod acl;
pub mod broker;
pub mod config;
pub(crate) mod controller;
pub(crate) mod ha;
pub mod io;
pub(crate) mod limits;
pub mod metrics;
pub(crate) mod namesrv;
pub mod net;
pub mod planted;
pub(crate) mod shard;
pub mod sim;
pub mod store;

/// The ringmq version (published to name servers and in runtime info).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Stops the process at once after an error that makes further acknowledgements unsafe (an
/// fdatasync failed: the kernel may have dropped dirty pages). Nothing more is acknowledged;
/// the next start recovers from what is on disk.
pub fn fail_stop(why: &str) -> ! {
    if io::sim::active() {
        // The simulator kills this node, as the exit would (see `io::sim`).
        std::panic::panic_any(io::sim::FailStop(why.to_string()));
    }
    log::error!(
        "fatal: {why}; stopping the broker (fail-stop) so that nothing more is acknowledged"
    );
    eprintln!("ringmq: fatal: {why}");
    std::process::exit(70)
}
