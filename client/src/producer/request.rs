//! The requester's side of request-reply ([`ringmq_wire::reply`]): [`Producer::request`]
//! sends a message and waits for the reply a replier sends with
//! [`Producer::send_reply`](super::Producer::send_reply).
//!
//! One request, step by step:
//! 1. a queue of the topic is picked (round robin over the writable queues);
//! 2. this client heartbeats that queue's master first if it has not on the connection the
//!    broker knows it by (first request there, or the connection was made again since): the
//!    broker pushes replies to the connection of the requester's latest heartbeat;
//! 3. the request's correlation id is registered in the client's inbox, and the message is
//!    sent with `CORRELATION_ID`, `REPLY_TO_CLIENT` (this client's id), `TTL` (the timeout,
//!    ms) and `CLUSTER` (the broker's cluster: where the reply topic is);
//! 4. the inbox hands the pushed reply with that correlation id to the waiting request.
//!
//! The timeout covers the whole: the send and the wait. When it passes while the send is
//! unanswered, the request fails with [`Error::Timeout`] (it may or may not be stored);
//! when it passes after the broker stored the request, with [`Error::RequestTimeout`] (no
//! reply). Either way its inbox entry is removed (also when the caller drops the request's
//! future), so a late reply is dropped and nothing stays behind. At most
//! [`REQUESTS_PENDING_MAX`] requests of one producer wait at once.

use std::time::Duration;

use ringmq_wire::properties::keys;
use tokio::time::Instant;

use super::announce::announce;
use super::send::{self, Form};
use super::{unique_key, Inner, Pick};
use crate::error::{Error, Result};
use crate::message::{Message, ReceivedMessage};

/// Most requests of one producer waiting for their replies at once.
pub const REQUESTS_PENDING_MAX: usize = 65_536;

/// Sends `msg` as a request and waits at most `timeout` (send included) for its reply.
pub(super) async fn request(
    inner: &Inner,
    mut msg: Message,
    timeout: Duration,
) -> Result<ReceivedMessage> {
    inner.check_open()?;
    if timeout.is_zero() {
        return Err(Error::Config(
            "a request's timeout must be above zero".into(),
        ));
    }
    msg.validate(inner.cfg.message_bytes_max)?;
    if msg.is_scheduled() {
        return Err(Error::InvalidMessage(
            "a request cannot be delayed or timed".into(),
        ));
    }
    let deadline = Instant::now() + timeout;
    let route = inner.inst.route(&msg.topic).await?;
    let queues = &route.write_queues;
    if queues.is_empty() {
        return Err(Error::NoRoute {
            topic: msg.topic.clone(),
            detail: "no writable queue on any master".into(),
        });
    }
    let start = inner
        .round_robin
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mq = queues[start % queues.len()].clone();
    let (Some(addr), Some(cluster)) = (
        route.master(&mq.broker_name),
        route
            .brokers
            .get(&mq.broker_name)
            .map(|b| b.cluster.clone()),
    ) else {
        return Err(Error::NoRoute {
            topic: msg.topic.clone(),
            detail: format!("broker {} has no master", mq.broker_name),
        });
    };
    announce(inner, addr).await?;
    let (prefix, seq) = inner.unique_keys(1);
    let mut correlation_id = String::with_capacity(prefix.len() + 9);
    unique_key(&prefix, seq, &mut correlation_id);
    correlation_id.insert(0, 'R');
    let Some(mut pending) = inner
        .inst
        .pool
        .inbox()
        .await_reply(&correlation_id, REQUESTS_PENDING_MAX)
    else {
        return Err(Error::RequestsPending {
            limit: REQUESTS_PENDING_MAX,
        });
    };
    let timed_out = || Error::RequestTimeout {
        correlation_id: correlation_id.clone(),
        timeout,
    };
    msg.properties
        .insert(keys::CORRELATION_ID.into(), correlation_id.clone());
    msg.properties
        .insert(keys::REPLY_TO_CLIENT.into(), inner.inst.id.clone());
    msg.properties
        .insert(keys::TTL.into(), timeout.as_millis().to_string());
    msg.properties.insert(keys::CLUSTER.into(), cluster);
    let sent = tokio::time::timeout_at(
        deadline,
        send::send(
            inner,
            std::slice::from_ref(&msg),
            Pick::Queue(&mq),
            None,
            Form::Request,
        ),
    )
    .await;
    match sent {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e),
        // Not answered: RequestTimeout would say the request was stored.
        Err(_) => {
            return Err(Error::Timeout {
                addr,
                request: "SEND_MESSAGE (request)",
                after: timeout,
            })
        }
    }
    match tokio::time::timeout_at(deadline, pending.reply()).await {
        Ok(Some(reply)) => Ok(reply),
        Ok(None) => Err(Error::Shutdown),
        Err(_) => Err(timed_out()),
    }
}
