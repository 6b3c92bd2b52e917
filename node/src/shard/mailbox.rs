//! Messages between shards. Each shard has one bounded mailbox (`MAILBOX_MESSAGES_MAX`);
//! a full mailbox answers the sender SYSTEM_BUSY rather than queueing without bound.

use crate::net::reply::SendReply;

/// A message to a shard.
#[derive(Debug)]
pub enum Mail {
    /// A request that arrived on another shard for a queue this shard owns. `frame` is the
    /// whole request frame; the reply goes back on `reply`. Never forwarded again.
    Request {
        frame: Vec<u8>,
        reply: flume::Sender<SendReply>,
    },
    /// A connection handed over after a HELLO that asked for this shard: answer the HELLO
    /// (`hello_frame`), then serve the connection, starting with `pending` bytes.
    Adopt {
        stream: crate::io::net::Handed,
        hello_frame: Vec<u8>,
        pending: Vec<u8>,
        /// The connection's ACL state (ACL on).
        guard: Option<crate::acl::GuardState>,
    },
    /// A new in-process connection from an edge of this process (`crate::io::local`):
    /// serve it as a connection accepted on the broker port.
    Local {
        stream: crate::io::local::LocalStream,
    },
    /// For one of the broker's rooms (features): the room that made it takes it back
    /// (`broker::shard::hooks::Room::mail`).
    Room(Box<dyn std::any::Any + Send>),
    /// A frame the broker sends on its own (a oneway request) to a client whose connection
    /// this shard serves.
    Push { conn: u64, frame: Vec<u8> },
    /// Shard `from` has long polls waiting for a queue of `topic` (`on`): tell it once, at
    /// the next event that may make one of this shard's queues of the topic ready
    /// (`Ready`); or no longer (`!on`).
    Watch { topic: String, from: u16, on: bool },
    /// A queue of `topic` on shard `from` may have become ready for the long polls waiting
    /// here (the answer to a `Watch`).
    Ready { topic: String, from: u16 },
    /// Drop the ConsumeQueues of a deleted topic.
    DeleteTopic { topic: String },
    /// Stop: finish in-flight work, flush, checkpoint, close the store.
    Shutdown,
}
