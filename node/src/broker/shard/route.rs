//! Where a queue request runs, and the one place where store errors become statuses: the
//! shard core's routing, which every feature uses and which names no feature. A request
//! about a queue runs on the shard that owns it; one that lands elsewhere is forwarded once
//! through the owner's mailbox (a forwarded request that still is not local is answered
//! WRONG_SHARD, never forwarded again).

use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::command::WrongShard;

use crate::broker::shard::Shard;
use crate::net::reply::{Outcome, Reply};
use crate::shard::mailbox::Mail;
use crate::store::StoreError;

/// How a request reached this shard.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// Forwarded by another shard: answer here or WRONG_SHARD, never forward again.
    pub forwarded: bool,
    /// The reply may carry log runs for zero-copy sends (not when it must cross threads).
    pub zero_copy: bool,
    /// The client connection it came on (`None` when forwarded): a heartbeat makes it the
    /// client's channel.
    pub conn: Option<u64>,
    /// The frame's records were encoded in this process (the remoting edge's translation of
    /// a RocketMQ send, a POP retry copy), their body CRCs computed as they were written: the
    /// send path checks everything but those CRCs. Never set for bytes a peer sent.
    pub encoded_here: bool,
}

/// Why a queue request cannot run here.
pub enum NotLocal {
    Remote(u16),
    Refused(Reply),
}

impl NotLocal {
    pub fn redirect(self, shard: &Rc<Shard>, frame: Vec<u8>, origin: Origin) -> Outcome {
        match self {
            NotLocal::Remote(owner) => forward_or_refuse(shard, owner, frame, origin),
            NotLocal::Refused(r) => r.into(),
        }
    }
}

/// Whether this shard owns `topic`/`queue_id`: the owner to forward to, or the refusal.
pub fn route(shard: &Rc<Shard>, topic: &str, queue_id: u32) -> Result<(), NotLocal> {
    let table = shard.broker.topics.snapshot();
    let Some(cfg) = table.get(topic) else {
        return Err(NotLocal::Refused(Reply::error(
            Status::TopicNotExist,
            format!(
                "topic {topic} does not exist on broker {}",
                shard.broker.config.broker_name
            ),
        )));
    };
    match cfg.queue_shards.get(queue_id as usize) {
        Some(&owner) if owner == shard.id => Ok(()),
        Some(&owner) => Err(NotLocal::Remote(owner)),
        None => Err(NotLocal::Refused(Reply::error(
            Status::MessageIllegal,
            format!(
                "queue {queue_id} does not exist: topic {topic} has {} queues",
                cfg.queue_shards.len()
            ),
        ))),
    }
}

/// Sends the request to the owning shard's mailbox (once), or answers WRONG_SHARD when it
/// was already forwarded.
pub fn forward_or_refuse(shard: &Rc<Shard>, owner: u16, frame: Vec<u8>, origin: Origin) -> Outcome {
    if origin.forwarded {
        return Reply::status_fields(
            Status::WrongShard,
            format!("the queue is on shard {owner}"),
            WrongShard {
                shard_id: owner,
                shard_count: shard.broker.shard_count,
            },
        )
        .into();
    }
    let Some(mailbox) = shard.broker.mailboxes.get(usize::from(owner)) else {
        return Reply::error(Status::SystemError, format!("no shard {owner}")).into();
    };
    let (tx, rx) = flume::bounded(1);
    match mailbox.try_send(Mail::Request { frame, reply: tx }) {
        Ok(()) => Outcome::later(async move {
            match rx.recv_async().await {
                Ok(r) => Reply::from_send(r),
                Err(_) => Reply::error(
                    Status::ServiceNotAvailable,
                    format!("shard {owner} stopped"),
                ),
            }
        }),
        Err(flume::TrySendError::Full(_)) => Reply::error(
            Status::SystemBusy,
            format!("shard {owner} is busy (mailbox full)"),
        )
        .into(),
        Err(flume::TrySendError::Disconnected(_)) => Reply::error(
            Status::ServiceNotAvailable,
            format!("shard {owner} stopped"),
        )
        .into(),
    }
}

/// Maps a store error to a reply. Fatal errors stop the broker (fail-stop).
pub fn store_error(shard: &Shard, e: StoreError) -> Reply {
    match e {
        StoreError::DiskFull { detail } => Reply::error(Status::DiskFull, detail),
        StoreError::BadRecord { .. } | StoreError::BadBatch { .. } => {
            Reply::error(Status::MessageIllegal, e.to_string())
        }
        StoreError::NotFound { detail } => Reply::error(Status::QueryNotFound, detail),
        StoreError::Fatal { .. } | StoreError::Poisoned => {
            crate::fail_stop(&format!("shard {}: {e}", shard.id))
        }
        other => Reply::error(Status::SystemError, other.to_string()),
    }
}

/// A reply whose body is `value`, encoded (SYSTEM_ERROR if it cannot be).
pub fn encoded_body<T: ringmq_wire::codec::Encode>(value: T) -> Reply {
    match value.to_vec() {
        Ok(bytes) => Reply::ok_body(
            ringmq_wire::codec::Empty,
            crate::net::reply::Body::Bytes(bytes),
        ),
        Err(e) => Reply::error(Status::SystemError, format!("encoding the reply: {e}")),
    }
}

/// The shard a HELLO frame asks for, if the frame is a HELLO with a preference (a
/// connection the client wants served by another shard is handed over to it).
pub fn hello_target(frame_bytes: &[u8]) -> Option<u16> {
    use ringmq_wire::codec::Decode;
    let f = ringmq_wire::frame::parse(frame_bytes).ok()?;
    if f.request_code().ok()? != ringmq_wire::code::RequestCode::Hello {
        return None;
    }
    ringmq_wire::command::HelloRequest::decode(f.header)
        .ok()?
        .preferred_shard
}
