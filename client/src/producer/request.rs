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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use ringmq_wire::command::HeartbeatData;
use ringmq_wire::properties::keys;
use tokio::time::Instant;

use super::send::{self, Form};
use super::{unique_key, Inner, Pick};
use crate::error::{Error, Result};
use crate::instance::encode_heartbeat;
use crate::message::{Message, ReceivedMessage};
use crate::net::Connection;

/// Most requests of one producer waiting for their replies at once.
pub const REQUESTS_PENDING_MAX: usize = 65_536;

/// Per producer: the connection each master last got a heartbeat on from a request.
#[derive(Debug, Default)]
pub(crate) struct Announced {
    conns: Mutex<HashMap<SocketAddr, Weak<Connection>>>,
}

impl Announced {
    fn is_current(&self, addr: SocketAddr, conn: &std::sync::Arc<Connection>) -> bool {
        lock(&self.conns)
            .get(&addr)
            .and_then(Weak::upgrade)
            .is_some_and(|c| std::sync::Arc::ptr_eq(&c, conn))
    }

    fn set(&self, addr: SocketAddr, conn: &std::sync::Arc<Connection>) {
        lock(&self.conns).insert(addr, std::sync::Arc::downgrade(conn));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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

/// Heartbeats `addr` on the connection heartbeats use, unless this producer already did
/// on that very connection (the broker knows a client by the connection its latest
/// heartbeat came on, and forgets it when that connection closes).
async fn announce(inner: &Inner, addr: SocketAddr) -> Result<()> {
    let (conn, _) = inner.inst.broker_conn(addr, None).await?;
    if inner.announced.is_current(addr, &conn) {
        return Ok(());
    }
    let hb = HeartbeatData {
        client_id: inner.inst.id.clone(),
        producer_groups: vec![inner.cfg.group.clone()],
        consumer_groups: Vec::new(),
    };
    let Some(body) = encode_heartbeat(&hb) else {
        return Err(Error::InvalidMessage(
            "this producer's heartbeat does not encode".into(),
        ));
    };
    let answer = conn
        .call(
            ringmq_wire::code::RequestCode::HeartBeat,
            &ringmq_wire::codec::Empty,
            &body,
            inner.inst.cfg.request_timeout,
        )
        .await?;
    answer.expect(&[ringmq_wire::code::Status::Success])?;
    inner.announced.set(addr, &conn);
    Ok(())
}
