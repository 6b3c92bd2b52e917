//! Master/slave replication as state machines (sans-IO): what the master ships and when a
//! SYNC_MASTER send may be acknowledged ([`master`]), and how a slave joins its master
//! ([`slave`]). The shard tasks in `crate::broker::ha` move the bytes.
//!
//! Per shard: the slave's shard i connects to the master's shard i (HA_HELLO names the
//! shard), the master answers where it will start (and tells a slave that is ahead to
//! truncate), then streams whole log entries (HA_PUSH, body = raw CommitLog bytes, the same
//! bytes at the same offsets), and the slave acknowledges its log end (HA_ACK) after each
//! append.

pub mod master;
pub mod slave;
