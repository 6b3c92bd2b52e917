//! ringmq's wire crate: the one message record (RocketMQ's CommitLog layout, used on the wire,
//! on disk and in replication) and the one frame envelope of the native protocol.
//!
//! Pure: no I/O, no async runtime, no global state. Every decoder checks lengths against a
//! named maximum before it allocates or slices, and never panics on arbitrary input.
#![forbid(unsafe_code)]

pub mod auth;
pub mod code;
pub mod codec;
pub mod command;
pub mod error;
pub mod frame;
pub mod properties;
pub mod recall;
pub mod record;
pub mod remoting;
pub mod reply;
pub mod schedule;
pub mod sql92;
pub mod transaction;

pub use error::WireError;
