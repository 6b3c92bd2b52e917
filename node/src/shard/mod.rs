//! The per-core runtime the broker runs on, below the broker and knowing nothing of it: the
//! bounded mailboxes that are the only way one core talks to another ([`mailbox::Mail`]),
//! and the placement rule that says which core owns a queue ([`placement`]). The event
//! loop, clocks, timers, files and sockets a core runs on are in [`crate::io`]; connections
//! and their codecs in [`crate::net`]. What runs on a core (its store, offsets, parked
//! pulls, replication, the background tasks) is [`crate::broker::shard`]: arrows go from the
//! broker to the shard runtime, never back.

pub mod mailbox;
pub mod placement;
