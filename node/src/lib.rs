//! The ringmq server: name server, broker and standalone node.
//!
//! `store`, `ha` and `namesrv` never import `net`, `shard` or `io`: they take bytes, ticks and
//! completions and return what to write or send. Only `io` names the event-loop runtime or
//! uses `unsafe`.
#![deny(unsafe_code)]

pub mod config;
pub mod io;
pub mod limits;
pub mod namesrv;
pub mod store;
