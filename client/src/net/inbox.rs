//! Requests a broker sends to this client over one of the client's own connections (the
//! broker answers nothing on them and the client answers none of them: they are ONEWAY).
//! The broker uses the connection a client's latest heartbeat came on. Routed by code:
//!
//! - NOTIFY_CONSUMER_IDS_CHANGED: wakes the consumers of that group, which rebalance at
//!   once instead of at their next timer tick;
//! - CHECK_TRANSACTION_STATE: handed to the transaction producer of the half's producer
//!   group (the record's `PGROUP` property), which asks its checker and answers the broker
//!   with END_TRANSACTION;
//! - PUSH_REPLY_MESSAGE_TO_CLIENT: the reply to a request of this client
//!   ([`crate::Producer::request`]), handed to the waiting request by its `CORRELATION_ID`;
//!   a reply no request waits for (timed out, or never asked here) is dropped;
//! - any other code, or a header that does not decode: logged and ignored.
//!
//! Bounded: one wake-up per group registered by this client's own consumers (a [`Notify`]
//! keeps at most one pending permit, so a burst of notices costs one rebalance); nothing
//! is queued per notice, and a notice for a group nobody here registered is dropped.
//! Check-backs go into the producer's bounded channel; when it is full, or no producer of
//! the group is here, the check is dropped (logged): the broker asks again at its next
//! check interval, so nothing is lost, only later. Waiting requests are at most the
//! limit [`Inbox::await_reply`] is given; each entry leaves when its reply comes or its
//! waiter is dropped (a timeout included).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::Decode;
use ringmq_wire::command::transaction::CheckTransactionRequest;
use ringmq_wire::command::{NotifyConsumerIdsChanged, PushReplyRequest};
use ringmq_wire::properties::keys;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::message::ReceivedMessage;

/// A CHECK_TRANSACTION_STATE a broker sent: which half it asks about and the half record.
#[derive(Debug)]
pub struct CheckBack {
    /// The broker that asked (and that the answer goes to).
    pub broker: SocketAddr,
    pub request: CheckTransactionRequest,
    /// The half record as the broker stores it (topic `RMQ_SYS_TRANS_HALF_TOPIC`).
    pub record: bytes::Bytes,
}

/// Where broker -> client requests go (one per connection pool, shared by its connections).
#[derive(Debug, Default)]
pub struct Inbox {
    groups: Mutex<HashMap<String, Arc<Notify>>>,
    checkers: Mutex<HashMap<String, mpsc::Sender<CheckBack>>>,
    replies: Arc<Mutex<HashMap<String, oneshot::Sender<ReceivedMessage>>>>,
}

/// A request waiting for its reply: [`PendingReply::reply`] gets it. Dropping it (the
/// request timed out, or its future was dropped) removes the entry.
#[derive(Debug)]
pub struct PendingReply {
    id: String,
    rx: oneshot::Receiver<ReceivedMessage>,
    replies: Arc<Mutex<HashMap<String, oneshot::Sender<ReceivedMessage>>>>,
}

impl PendingReply {
    /// The reply, when it comes (never, if the inbox is dropped).
    pub async fn reply(&mut self) -> Option<ReceivedMessage> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        lock(&self.replies).remove(&self.id);
    }
}

impl Inbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// The wake-up of `group`'s consumers: notified (one permit) whenever a broker says the
    /// group's members changed. Registering a group twice returns the same wake-up.
    pub fn register_group(&self, group: &str) -> Arc<Notify> {
        let mut groups = self.lock();
        Arc::clone(groups.entry(group.to_string()).or_default())
    }

    /// Check-backs for half messages of producer group `group` go to `to` from now on
    /// (replacing an earlier registration of the group).
    pub fn register_checker(&self, group: &str, to: mpsc::Sender<CheckBack>) {
        lock(&self.checkers).insert(group.to_string(), to);
    }

    /// No more check-backs for `group` here.
    pub fn unregister_checker(&self, group: &str) {
        lock(&self.checkers).remove(group);
    }

    /// Registers a request with `correlation_id`: its reply comes through the returned
    /// handle. `None` when `limit` requests already wait, or the id is already waiting.
    pub fn await_reply(&self, correlation_id: &str, limit: usize) -> Option<PendingReply> {
        let (tx, rx) = oneshot::channel();
        let mut replies = lock(&self.replies);
        if replies.len() >= limit || replies.contains_key(correlation_id) {
            return None;
        }
        replies.insert(correlation_id.to_string(), tx);
        Some(PendingReply {
            id: correlation_id.to_string(),
            rx,
            replies: Arc::clone(&self.replies),
        })
    }

    /// Every waiting request ends without a reply (its owner shut down).
    pub fn drop_replies(&self) {
        lock(&self.replies).clear();
    }

    /// Requests waiting for their reply.
    pub fn replies_pending(&self) -> usize {
        lock(&self.replies).len()
    }

    /// Handles one request frame from the peer at `addr`.
    pub fn deliver(&self, addr: SocketAddr, code: u16, header: &[u8], body: &[u8]) {
        match RequestCode::try_from(code) {
            Ok(RequestCode::NotifyConsumerIdsChanged) => {
                match NotifyConsumerIdsChanged::decode(header) {
                    Ok(n) => self.consumer_ids_changed(addr, &n.consumer_group),
                    Err(e) => log::warn!("{addr}: NOTIFY_CONSUMER_IDS_CHANGED header: {e}"),
                }
            }
            Ok(RequestCode::CheckTransactionState) => {
                match CheckTransactionRequest::decode(header) {
                    Ok(c) => self.check_transaction(addr, c, body),
                    Err(e) => log::warn!("{addr}: CHECK_TRANSACTION_STATE header: {e}"),
                }
            }
            Ok(RequestCode::PushReplyMessageToClient) => match PushReplyRequest::decode(header) {
                Ok(h) => self.reply(addr, &h.broker_name, body),
                Err(e) => log::warn!("{addr}: PUSH_REPLY_MESSAGE_TO_CLIENT header: {e}"),
            },
            Ok(other) => log::debug!("{addr}: request {} from the broker ignored", other.name()),
            Err(_) => log::debug!("{addr}: unknown request code {code} from the broker ignored"),
        }
    }

    fn reply(&self, addr: SocketAddr, broker_name: &str, body: &[u8]) {
        let buf = bytes::Bytes::copy_from_slice(body);
        let msg = match ringmq_wire::record::decode_one(&buf) {
            Ok(r) => ReceivedMessage::from_record(&buf, &r, broker_name),
            Err(e) => {
                log::warn!("{addr}: PUSH_REPLY_MESSAGE_TO_CLIENT record: {e}");
                return;
            }
        };
        let Some(id) = msg.property(keys::CORRELATION_ID) else {
            log::warn!("{addr}: a pushed reply without {}", keys::CORRELATION_ID);
            return;
        };
        let Some(tx) = lock(&self.replies).remove(id) else {
            log::debug!("{addr}: reply to request {id}, which no longer waits here: dropped");
            return;
        };
        // A waiter dropped between the lookup and here is gone: nothing to do.
        let _ = tx.send(msg);
    }

    fn check_transaction(&self, addr: SocketAddr, request: CheckTransactionRequest, body: &[u8]) {
        let group = match ringmq_wire::record::decode_one(body) {
            Ok(r) => r
                .property(keys::PRODUCER_GROUP)
                .unwrap_or_default()
                .to_string(),
            Err(e) => {
                log::warn!("{addr}: CHECK_TRANSACTION_STATE record: {e}");
                return;
            }
        };
        let Some(to) = lock(&self.checkers).get(&group).cloned() else {
            log::debug!(
                "{addr}: check-back of {} for producer group {group:?}: no transaction producer \
                 of it here",
                request.transaction_id
            );
            return;
        };
        let id = request.transaction_id.clone();
        let check = CheckBack {
            broker: addr,
            request,
            record: bytes::Bytes::copy_from_slice(body),
        };
        match to.try_send(check) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => log::warn!(
                "{addr}: check-back of {id} dropped: {group}'s check queue is full (the broker \
                 asks again later)"
            ),
            Err(TrySendError::Closed(_)) => {
                log::debug!("{addr}: check-back of {id}: {group}'s producer is shut down")
            }
        }
    }

    fn consumer_ids_changed(&self, addr: SocketAddr, group: &str) {
        let wake = self.lock().get(group).cloned();
        match wake {
            Some(n) => {
                log::debug!("{addr}: members of {group} changed");
                n.notify_one();
            }
            None => log::debug!("{addr}: members of {group} changed; no consumer of it here"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        lock(&self.groups)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::codec::Encode;
    use std::time::Duration;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 1))
    }

    fn notice(group: &str) -> Vec<u8> {
        NotifyConsumerIdsChanged {
            consumer_group: group.into(),
        }
        .to_vec()
        .unwrap()
    }

    #[tokio::test]
    async fn notices_wake_only_their_group_once_per_burst() {
        let inbox = Inbox::new();
        let a = inbox.register_group("a");
        let b = inbox.register_group("b");
        let code = RequestCode::NotifyConsumerIdsChanged as u16;
        for _ in 0..3 {
            inbox.deliver(addr(), code, &notice("a"), &[]);
        }
        inbox.deliver(addr(), code, &notice("unknown"), &[]);
        inbox.deliver(addr(), code, b"\xff", &[]);
        inbox.deliver(addr(), RequestCode::CheckTransactionState as u16, b"", &[]);
        inbox.deliver(addr(), 65_000, b"", &[]);
        let short = Duration::from_millis(50);
        assert!(tokio::time::timeout(short, a.notified()).await.is_ok());
        assert!(
            tokio::time::timeout(short, a.notified()).await.is_err(),
            "three notices in a row leave one wake-up, not three"
        );
        assert!(tokio::time::timeout(short, b.notified()).await.is_err());
        assert!(Arc::ptr_eq(&a, &inbox.register_group("a")));
    }

    fn half_record(group: &str) -> Vec<u8> {
        let mut props = Vec::new();
        ringmq_wire::properties::encode([(keys::PRODUCER_GROUP, group)], &mut props).unwrap();
        let m = ringmq_wire::record::Message {
            topic: ringmq_wire::transaction::HALF_TOPIC,
            queue_id: 0,
            flag: 0,
            sys_flag: ringmq_wire::record::sys_flag::TRANSACTION_PREPARED_TYPE,
            born_timestamp_ms: 0,
            born_host: addr(),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"x",
            properties: &props,
        };
        let mut out = Vec::new();
        ringmq_wire::record::encode(&m, &mut out).unwrap();
        out
    }

    #[test]
    fn check_backs_go_to_their_group_and_a_full_queue_drops_them() {
        let inbox = Inbox::new();
        let (tx, mut rx) = mpsc::channel(1);
        inbox.register_checker("pg", tx);
        let check = |id: &str| {
            CheckTransactionRequest {
                half_queue_offset: 7,
                physical_offset: 9,
                message_id: "m".into(),
                transaction_id: id.into(),
            }
            .to_vec()
            .unwrap()
        };
        let code = RequestCode::CheckTransactionState as u16;
        inbox.deliver(addr(), code, &check("other"), &half_record("other-group"));
        inbox.deliver(addr(), code, &check("t1"), &half_record("pg"));
        inbox.deliver(addr(), code, &check("t2"), &half_record("pg"));
        inbox.deliver(addr(), code, &check("bad"), b"not a record");
        let got = rx.try_recv().unwrap();
        assert_eq!(got.request.transaction_id, "t1");
        assert_eq!(got.request.half_queue_offset, 7);
        assert_eq!(got.broker, addr());
        assert_eq!(&got.record[..], &half_record("pg")[..]);
        assert!(
            rx.try_recv().is_err(),
            "t2 found the queue full; others are not pg's"
        );
        inbox.unregister_checker("pg");
        inbox.deliver(addr(), code, &check("t3"), &half_record("pg"));
        assert!(rx.try_recv().is_err());
    }

    fn reply_record(correlation_id: &str) -> Vec<u8> {
        let mut props = Vec::new();
        ringmq_wire::properties::encode(
            [
                (keys::CORRELATION_ID, correlation_id),
                (keys::MESSAGE_TYPE, "reply"),
            ],
            &mut props,
        )
        .unwrap();
        let m = ringmq_wire::record::Message {
            topic: "C_REPLY_TOPIC",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: addr(),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"pong",
            properties: &props,
        };
        let mut out = Vec::new();
        ringmq_wire::record::encode(&m, &mut out).unwrap();
        out
    }

    #[tokio::test]
    async fn a_reply_reaches_its_request_and_a_dropped_request_leaves_nothing() {
        let inbox = Inbox::new();
        let code = RequestCode::PushReplyMessageToClient as u16;
        let header = PushReplyRequest {
            broker_name: "b".into(),
            producer_group: "g".into(),
        }
        .to_vec()
        .unwrap();
        let mut a = inbox.await_reply("a", 2).unwrap();
        let b = inbox.await_reply("b", 2).unwrap();
        assert!(inbox.await_reply("c", 2).is_none(), "over the limit");
        assert!(inbox.await_reply("a", 3).is_none(), "already waiting");
        assert_eq!(inbox.replies_pending(), 2);
        inbox.deliver(addr(), code, &header, &reply_record("unknown"));
        inbox.deliver(addr(), code, &header, &reply_record("a"));
        let got = a.reply().await.unwrap();
        assert_eq!(&got.body[..], b"pong");
        assert_eq!(got.broker_name, "b");
        assert_eq!(inbox.replies_pending(), 1);
        drop(b);
        assert_eq!(inbox.replies_pending(), 0);
        inbox.deliver(addr(), code, &header, &reply_record("b"));
        drop(a);
        assert_eq!(inbox.replies_pending(), 0);
    }
}
