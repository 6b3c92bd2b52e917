//! Request-reply (RocketMQ's RPC over topics, [`ringmq_wire::reply`]): SEND_REPLY_MESSAGE
//! from a replier, and the cluster's reply topic.
//!
//! A reply arrives checked and routed like a SEND_MESSAGE (same header, one record, on the
//! shard that owns the reply topic's queue). Then, in RocketMQ's order:
//!
//! 1. the requester is looked up: the channel its latest heartbeat came on, by the reply's
//!    `REPLY_TO_CLIENT`; no channel (it never heartbeat here, or left) answers
//!    REPLY_TO_CLIENT_NOT_FOUND and stores nothing;
//! 2. the reply record is pushed there as a ONEWAY PUSH_REPLY_MESSAGE_TO_CLIENT (through the
//!    connection's shard mailbox when another shard serves it), with this broker's store host
//!    and the current time written in; a push that cannot be queued (mailbox or write queue
//!    full, connection just closed) also answers REPLY_TO_CLIENT_NOT_FOUND;
//! 3. with `storeReplyMessageEnable` (default) the reply is appended to the reply topic and
//!    acknowledged like any send (flush and replication policy); without it the answer is
//!    SUCCESS with `record_count` 0.
//!
//! The push comes before the store, so a requester may hold a reply whose store then failed
//! (the replier gets the store's error; a reply sent again is dropped by the requester, whose
//! request is already answered). Nothing waits for the requester: a reply queued on a
//! connection that closes before it is written is lost, and the requester's request times out.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{PushReplyRequest, SendRequest, SendResponse};
use ringmq_wire::frame;
use ringmq_wire::properties::keys;
use ringmq_wire::record::{self, BrokerFields};
use ringmq_wire::reply::{reply_topic, REPLY_TOPIC_QUEUES};

use crate::broker::shard::Shard;
use crate::broker::topics::Topics;
use crate::broker::Broker;
use crate::net::reply::{Outcome, Reply};
use crate::store::CheckedBatch;

/// Creates the cluster's reply topic (`<brokerClusterName>_REPLY_TOPIC`, one queue, read and
/// write) when the broker starts without it, as RocketMQ's `TopicConfigManager` does.
pub fn ensure_reply_topic(topics: &Topics, cluster: &str) -> Result<(), String> {
    let topic = reply_topic(cluster);
    if topics.snapshot().get(&topic).is_some() {
        return Ok(());
    }
    topics
        .upsert_system(
            &topic,
            REPLY_TOPIC_QUEUES,
            perm::READ_WRITE,
            Broker::now_ms(),
        )
        .map(|_| log::info!("created the reply topic {topic}"))
        .map_err(|e| format!("creating the reply topic {topic}: {e}"))
}

/// SEND_REPLY_MESSAGE on the shard that owns the record's queue (checked and routed by the
/// caller like a send): pushes the reply to the requester, then `Ok` when the reply is to be
/// stored as well (`storeReplyMessageEnable`; the router stores it as a send), or the answer.
pub fn send_reply(
    shard: &Rc<Shard>,
    h: SendRequest,
    body: &mut [u8],
    checked: &CheckedBatch,
) -> Result<SendRequest, Outcome> {
    if h.batch || checked.metas.len() != 1 {
        return Err(Reply::error(
            Status::MessageIllegal,
            "SEND_REPLY_MESSAGE carries one record",
        )
        .into());
    }
    let (reply_to, has_correlation) = match record::decode_one_unverified(body) {
        Ok(r) => (
            r.property(keys::REPLY_TO_CLIENT).map(str::to_owned),
            r.property(keys::CORRELATION_ID).is_some(),
        ),
        Err(e) => return Err(Reply::error(Status::MessageIllegal, e.to_string()).into()),
    };
    let Some(reply_to) = reply_to.filter(|c| !c.is_empty() && has_correlation) else {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "a reply needs the properties {} and {} of its request",
                keys::REPLY_TO_CLIENT,
                keys::CORRELATION_ID
            ),
        )
        .into());
    };
    if let Err(remark) = push(shard, &reply_to, &h.producer_group, body) {
        log::debug!("shard {}: {remark}", shard.id);
        return Err(Reply::error(Status::ReplyToClientNotFound, remark).into());
    }
    if shard.broker.config.store_reply_message_enable {
        return Ok(h);
    }
    Err(Reply::ok(SendResponse {
        queue_id: checked.metas[0].queue_id,
        first_queue_offset: 0,
        record_count: 0,
        first_physical_offset: 0,
        store_host: shard.broker.addr,
        store_timestamp_ms: Broker::now_ms(),
        deliver_at_ms: 0,
    })
    .into())
}

/// Queues the reply on the requester's channel; why not, as the remark to answer.
fn push(shard: &Shard, reply_to: &str, producer_group: &str, rec: &[u8]) -> Result<(), String> {
    let Some(channel) = shard.broker.lock_groups().channel(reply_to) else {
        return Err(format!(
            "cannot push the reply: no channel of {reply_to} (its heartbeat has not reached \
             this broker, or it left)"
        ));
    };
    let header = PushReplyRequest {
        broker_name: shard.broker.config.broker_name.clone(),
        producer_group: producer_group.to_string(),
    };
    let id = shard.broker.push_seq.fetch_add(1, Ordering::Relaxed);
    let mut bytes = Vec::with_capacity(frame::PREFIX_BYTES + 64 + rec.len());
    frame::encode_request(
        &mut bytes,
        RequestCode::PushReplyMessageToClient,
        true,
        id,
        &header,
        rec,
    )
    .map_err(|e| format!("cannot push the reply to {reply_to}: {e}"))?;
    let at = bytes.len() - rec.len();
    let fields = BrokerFields {
        queue_offset: 0,
        physical_offset: 0,
        store_timestamp_ms: Broker::now_ms(),
        store_host: shard.broker.addr,
    };
    // A record whose store-host slot has the other address family keeps its zeros.
    let _ = record::patch_broker_fields(&mut bytes[at..], &fields);
    if shard.push_to_client(channel, bytes) {
        Ok(())
    } else {
        Err(format!(
            "cannot push the reply to {reply_to}: its connection closed or its write queue \
             is full"
        ))
    }
}

/// Request-reply's hooks: the cluster's reply topic exists before any shard starts.
#[derive(Debug)]
pub struct RequestReplyRoom;

/// The room, for the broker's list.
pub static ROOM: RequestReplyRoom = RequestReplyRoom;

impl crate::broker::shard::hooks::Room for RequestReplyRoom {
    fn name(&self) -> &'static str {
        "request-reply"
    }

    fn prepare(&self, topics: &Topics, config: &crate::config::BrokerConfig) -> Result<(), String> {
        ensure_reply_topic(topics, &config.broker_cluster_name)
    }
}
