//! The broker's side of its clients: heartbeats and unregistration (group membership and
//! each client's channel), queue locks, and requests the broker sends to clients on their
//! channel (NOTIFY_CONSUMER_IDS_CHANGED now; CHECK_TRANSACTION_STATE uses the same path).
//!
//! A broker -> client request is a ONEWAY frame queued on the connection the client's latest
//! heartbeat came on. That connection may be served by another shard: the frame then goes
//! through that shard's mailbox (`Mail::Push`). Nothing waits for an answer; a frame for a
//! connection that closed meanwhile, or whose write queue is full, is dropped (the client's
//! periodic rebalance is the fallback).

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::{
    HeartbeatData, LockBatchRequest, LockBatchResponse, MessageModel, NotifyConsumerIdsChanged,
    UnregisterClientRequest,
};

use crate::broker::groups::Channel;
use crate::broker::shard::route::encoded_body;
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::net::reply::Reply;

/// HEART_BEAT on `channel` (`None` when it did not come on a client connection).
/// A SQL92 subscription that does not parse (or reaches a broker that does not filter by
/// SQL92) refuses the whole heartbeat: nothing of it is recorded.
pub fn heartbeat(shard: &Shard, hb: &HeartbeatData, channel: Option<Channel>) -> Reply {
    if let Err(reply) = crate::broker::shard::filter::check_heartbeat(shard, hb) {
        return reply;
    }
    let now = Broker::now_ms();
    let (joined, expired) = {
        let mut groups = shard.broker.lock_groups();
        let expired = groups.expire(now);
        (groups.heartbeat(hb, now, channel), expired)
    };
    release_locks(shard, &expired.0);
    shard
        .broker
        .lock_locks()
        .expire(now, shard.broker.lock_max_live_ms());
    for g in &hb.consumer_groups {
        if g.message_model == MessageModel::Clustering {
            crate::broker::shard::copy::ensure_retry_topic(shard, &g.group);
        }
    }
    // Every member is told, the joiner too, as RocketMQ's broker does: a client may have
    // run its first rebalance before this heartbeat was registered (rocketmq-client-rust
    // does), and would otherwise wait for its next periodic one (20 s).
    notify_changed(shard, &joined, None);
    notify_changed(shard, &expired.1, None);
    Reply::ok(Empty)
}

/// UNREGISTER_CLIENT: the client leaves the named consumer group (its locks there go too).
pub fn unregister(shard: &Shard, h: &UnregisterClientRequest) -> Reply {
    // Only the group named: a producer leaving (consumer_group None) must not take the
    // same client id out of its consumer groups.
    if let Some(group) = h.consumer_group.as_deref() {
        let left = shard
            .broker
            .lock_groups()
            .unregister(&h.client_id, Some(group));
        shard
            .broker
            .lock_locks()
            .release_group_client(group, &h.client_id);
        notify_changed(shard, &left, None);
    }
    Reply::ok(Empty)
}

/// A client connection closed: clients whose channel it was leave their groups and lose
/// their queue locks; the groups' other members are told.
pub fn channel_closed(shard: &Shard, channel: Channel) {
    let (clients, left) = shard.broker.lock_groups().channel_closed(channel);
    if clients.is_empty() {
        return;
    }
    log::debug!(
        "shard {}: connection of {} closed, leaving {:?}",
        shard.id,
        clients.join(", "),
        left
    );
    release_locks(shard, &clients);
    notify_changed(shard, &left, None);
}

fn release_locks(shard: &Shard, clients: &[String]) {
    if clients.is_empty() {
        return;
    }
    let mut locks = shard.broker.lock_locks();
    for c in clients {
        locks.release_client(c);
    }
}

/// Tells every live member of each group (but `except`) that its membership changed
/// (`notifyConsumerIdsChangedEnable`).
pub fn notify_changed(shard: &Shard, groups: &[String], except: Option<&str>) {
    if groups.is_empty() || !shard.broker.config.notify_consumer_ids_changed_enable {
        return;
    }
    let now = Broker::now_ms();
    let targets: Vec<(String, Vec<Channel>)> = {
        let g = shard.broker.lock_groups();
        groups
            .iter()
            .map(|name| (name.clone(), g.member_channels(name, now, except)))
            .collect()
    };
    for (group, channels) in targets {
        let header = NotifyConsumerIdsChanged {
            consumer_group: group,
        };
        for ch in channels {
            shard.send_oneway(ch, RequestCode::NotifyConsumerIdsChanged, &header, &[]);
        }
    }
}

/// LOCK_BATCH_MQ: locks (or renews) the queues for the client; answers those it holds.
pub fn lock_batch(shard: &Shard, body: &[u8]) -> Reply {
    let req = match LockBatchRequest::decode(body) {
        Ok(r) => r,
        Err(e) => return Reply::error(Status::MalformedRequest, format!("lock body: {e}")),
    };
    if let Err(r) = check_lock_request(shard, &req) {
        return r;
    }
    let now = Broker::now_ms();
    let live = shard.broker.lock_max_live_ms();
    let locked =
        shard
            .broker
            .lock_locks()
            .lock(&req.consumer_group, &req.client_id, &req.queues, now, live);
    encoded_body(LockBatchResponse { locked })
}

/// UNLOCK_BATCH_MQ: releases the listed queues the client holds.
pub fn unlock_batch(shard: &Shard, body: &[u8]) -> Reply {
    let req = match LockBatchRequest::decode(body) {
        Ok(r) => r,
        Err(e) => return Reply::error(Status::MalformedRequest, format!("unlock body: {e}")),
    };
    if let Err(r) = check_lock_request(shard, &req) {
        return r;
    }
    shard
        .broker
        .lock_locks()
        .unlock(&req.consumer_group, &req.client_id, &req.queues);
    Reply::ok(Empty)
}

/// Most queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name (a member locks the queues it
/// was assigned on one broker: far fewer).
pub const LOCK_QUEUES_PER_REQUEST_MAX: usize = 4096;

fn check_lock_request(shard: &Shard, req: &LockBatchRequest) -> Result<(), Reply> {
    if req.queues.len() > LOCK_QUEUES_PER_REQUEST_MAX {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "{} queues in one lock request: at most {LOCK_QUEUES_PER_REQUEST_MAX}",
                req.queues.len()
            ),
        ));
    }
    if req.consumer_group.is_empty() || req.client_id.is_empty() {
        return Err(Reply::error(
            Status::MessageIllegal,
            "a queue lock needs a consumer group and a client id",
        ));
    }
    let name = &shard.broker.config.broker_name;
    if let Some(q) = req.queues.iter().find(|q| &q.broker_name != name) {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "queue {} {} is on broker {}, not {name}: lock it there",
                q.topic, q.queue_id, q.broker_name
            ),
        ));
    }
    Ok(())
}

/// The client registry's hooks: a closed connection leaves every group it was a channel of.
#[derive(Debug)]
pub struct ClientsRoom;

/// The room, for the broker's list.
pub static ROOM: ClientsRoom = ClientsRoom;

impl crate::broker::shard::hooks::Room for ClientsRoom {
    fn name(&self) -> &'static str {
        "clients"
    }

    fn connection_closed(&self, shard: &Shard, channel: Channel) {
        channel_closed(shard, channel);
    }
}
