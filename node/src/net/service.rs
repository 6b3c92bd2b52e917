//! What serves the frames of a connection: the broker's shards and the name server
//! implement [`Service`]; the native read loop (`connection.rs`) and the remoting one
//! (`remoting/`) both hand it whole frames. Below both of them, so neither imports the other.

use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::command::pull::FilterType;

use crate::acl::{Acl, Caller};
use crate::metrics::shard::Protocol as Via;
use crate::net::out_queue::OutQueue;
use crate::net::reply::Outcome;
pub use crate::net::shard_view::ShardView;

/// Bytes requested from the socket per read.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What serves the frames of a connection (the broker's shards, the name server).
pub trait Service {
    /// Largest frame accepted.
    fn frame_bytes_max(&self) -> usize;
    /// Longest a send waits while its connection has the most requests in flight.
    fn send_wait(&self) -> std::time::Duration {
        crate::limits::SEND_WAIT_MAX
    }
    /// Handles one request frame (the whole frame, prefix included) from `caller` (already
    /// authenticated; the service authorizes).
    fn handle(&self, frame: Vec<u8>, caller: &Caller) -> Outcome;
    /// [`Service::handle`] for a frame this process encoded from a peer's request (the
    /// remoting edge's translation): its records' body CRCs were computed here, so the
    /// service need not compute them again. Everything else is checked as for `handle`.
    fn handle_encoded_here(&self, frame: Vec<u8>, caller: &Caller) -> Outcome {
        self.handle(frame, caller)
    }
    /// The ACL, when on: requests are authenticated before [`Service::handle`].
    fn acl(&self) -> Option<&Acl> {
        None
    }
    /// If this frame is a HELLO asking for another shard, that shard.
    fn handoff_target(&self, _frame: &[u8]) -> Option<u16> {
        None
    }
    /// Whether [`Service::served`] wants to hear about requests (metrics on).
    fn timing(&self) -> bool {
        false
    }
    /// A request with native code `code` was answered `status`, its reply queued `since`
    /// the connection handed its frame over (request latency metrics).
    fn served(
        &self,
        _code: u16,
        _status: Status,
        _protocol: Via,
        _since: crate::io::clock::Instant,
    ) {
    }
    /// A request's frame waited `micros` µs from the read that completed it to its handler
    /// (frames of one read are handled in turn), and a reply waited `micros` µs from being
    /// queued to its write completing (request stage metrics; only when [`Service::timing`]).
    fn stage(&self, _stage: crate::metrics::shard::Stage, _micros: u64) {}
    /// Connection opened / closed (counters).
    fn opened(&self) {}
    fn closed(&self) {}
    /// The connection's queue of outgoing frames, for requests the server sends to the
    /// client on its own (broker -> client notifications).
    fn attached(&self, _out: &Rc<OutQueue>) {}
    /// The subscription of `group` to `topic` from the group's last heartbeat (a remoting
    /// pull without the subscription bit uses it).
    fn subscription(&self, _group: &str, _topic: &str) -> Option<(FilterType, String)> {
        None
    }
    /// The broker's name (`brokerName`), for the recall handle of a scheduled remoting send;
    /// `None` where no broker serves.
    fn broker_name(&self) -> Option<String> {
        None
    }

    /// On a shard's own port (a broker with several shards): the view remoting requests on
    /// this connection are read in (queue ids, broker name). `None`: the broker as a whole.
    fn shard_view(&self) -> Option<ShardView> {
        None
    }

    /// The broker's cluster (`brokerClusterName`): a remoting request message (one with
    /// `CORRELATION_ID` and `REPLY_TO_CLIENT`) gets it as its `CLUSTER` property, which a
    /// RocketMQ replier needs to name the reply topic.
    fn cluster_name(&self) -> Option<&str> {
        None
    }
}
