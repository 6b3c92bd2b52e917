//! Native Rust client for ringmq. Producers and consumers arrive with the client issue; this
//! crate exists now so the workspace has its final shape.
#![forbid(unsafe_code)]

pub use ringmq_wire as wire;
