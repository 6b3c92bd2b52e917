//! The TLS and credential flags: `ringmq_client::cli`, shared with `ringmq-perf`.

pub use ringmq_client::cli::SecurityArgs;
