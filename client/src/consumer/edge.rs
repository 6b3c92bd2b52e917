//! POP consumption on behalf of many groups: the consumer a protocol edge holds (ringmq's
//! gRPC edge, which serves RocketMQ 5's SimpleConsumer and PushConsumer). One
//! [`EdgeConsumer`] owns one connection pool and route cache and pops, acks and changes
//! invisible times for any group, topic and filter its callers name, per call; a
//! [`SimpleConsumer`](super::SimpleConsumer) is one group with fixed subscriptions.
//!
//! Acks and invisible-time changes take the receipt handle alone (with the group and the
//! topic the message was delivered as): the handle names the broker, queue and offset, so
//! an edge keeps no state per delivered message. A handle of a message popped from the
//! group's pop retry topic is acked in that topic. A dead-lettering also needs the record's
//! physical offset, which the caller keeps beside the handle.
//!
//! It also pulls by offset for any group ([`EdgeConsumer::pull`], RocketMQ 5's
//! PullMessage), committing nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{
    pop_retry_topic, AckRequest, ChangeInvisibleTimeRequest, ChangeInvisibleTimeResponse,
    ConsumerSendBackRequest, PopInitMode, PopRequest, PopResponse, ReceiptHandle,
};

use super::simple::{popped, RECEIVE_MAX};
use super::{MessageSelector, PoppedMessage, PullResult};
use crate::error::{Error, Result};
use crate::instance::{ClientConfig, Instance};
use crate::route::{MessageQueue, TopicRouteInfo};

/// Most bytes one [`EdgeConsumer::pull`] answers.
pub const EDGE_PULL_BYTES_MAX: u32 = 4 * 1024 * 1024;

/// One POP request of an [`EdgeConsumer`].
#[derive(Debug, Clone)]
pub struct PopCall {
    pub group: String,
    pub topic: String,
    /// The broker to pop from; `None`: the first master of the route.
    pub broker_name: Option<String>,
    pub selector: MessageSelector,
    /// 1..=32 messages.
    pub max: u32,
    pub invisible: Duration,
    /// How long the broker holds the request when nothing is ready (long polling).
    pub poll: Duration,
    /// Where the group starts in a queue it never popped.
    pub init_last: bool,
    /// Orderly POP: one unsettled pop per queue, in offset order.
    pub orderly: bool,
}

/// POP, ack and invisible-time changes for any group (see the module docs).
#[derive(Clone)]
pub struct EdgeConsumer {
    inst: Arc<Instance>,
}

impl std::fmt::Debug for EdgeConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeConsumer")
            .field("client_id", &self.inst.id)
            .finish()
    }
}

impl EdgeConsumer {
    /// Validates the config and resolves the name servers; connects on first use.
    pub async fn start(cfg: ClientConfig) -> Result<EdgeConsumer> {
        Ok(EdgeConsumer {
            inst: Instance::new(cfg).await?,
        })
    }

    pub fn client_id(&self) -> &str {
        &self.inst.id
    }

    /// The route of `topic` (cached; fetched when absent).
    pub async fn route(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        self.inst.route(topic).await
    }

    /// Up to `call.max` messages; empty when none came within the poll time.
    pub async fn pop(&self, call: &PopCall) -> Result<Vec<PoppedMessage>> {
        if call.max == 0 || call.max > RECEIVE_MAX {
            return Err(Error::Config(format!(
                "a pop asks for 1..={RECEIVE_MAX} messages, not {}",
                call.max
            )));
        }
        call.selector.check()?;
        let route = self.inst.route(&call.topic).await?;
        let (broker_name, addr) =
            pick_master(&route, call.broker_name.as_deref()).ok_or_else(|| Error::NoRoute {
                topic: call.topic.clone(),
                detail: "no broker of the topic has a master".into(),
            })?;
        let header = PopRequest {
            consumer_group: call.group.clone(),
            topic: call.topic.clone(),
            queue_id: -1,
            max_messages: call.max,
            invisible_time_ms: u64::try_from(call.invisible.as_millis()).unwrap_or(u64::MAX),
            poll_time_ms: u32::try_from(call.poll.as_millis()).unwrap_or(u32::MAX),
            filter_type: call.selector.filter_type(),
            expression: call.selector.expression().to_string(),
            init_mode: if call.init_last {
                PopInitMode::Max
            } else {
                PopInitMode::Min
            },
            order: call.orderly,
        };
        let timeout = call.poll + self.inst.cfg.request_timeout;
        let answer = self
            .inst
            .broker_call(addr, None, RequestCode::PopMessage, &header, &[], timeout)
            .await;
        self.inst.refresh_if_misrouted(&call.topic, &answer).await;
        let answer = answer?;
        match answer.status()? {
            Status::Success => {}
            Status::PullNotFound => return Ok(Vec::new()),
            other => return Err(answer.error(other)),
        }
        let fields: PopResponse = answer.required_fields()?;
        let (keep, collided) = popped(&answer.body, &broker_name, addr, &fields, &call.selector)?;
        if !collided.is_empty() {
            // Not the selector's tags (a tag hash collision at the broker): acked unseen.
            for m in &collided {
                let _ = self.ack(&call.group, &call.topic, &m.receipt_handle).await;
            }
        }
        Ok(keep)
    }

    /// An offset-based pull for `group` (RocketMQ 5's PullMessage): up to `max` messages of
    /// `mq` from `offset` that `selector` takes, the broker holding the request up to `wait`
    /// when there is none. Nothing is committed; the group's offsets are its own business
    /// (the admin client's `commit_offset`).
    pub async fn pull(
        &self,
        group: &str,
        mq: &MessageQueue,
        offset: u64,
        max: u32,
        selector: &MessageSelector,
        wait: Duration,
    ) -> Result<PullResult> {
        if max == 0 || max > RECEIVE_MAX {
            return Err(Error::Config(format!(
                "a pull asks for 1..={RECEIVE_MAX} messages, not {max}"
            )));
        }
        selector.check()?;
        super::pull_queue(
            &self.inst,
            group,
            mq,
            offset,
            max,
            EDGE_PULL_BYTES_MAX,
            selector,
            wait,
            None,
        )
        .await
    }

    /// Acks the message `handle` names, delivered to `group` as a message of `topic`.
    pub async fn ack(&self, group: &str, topic: &str, handle: &str) -> Result<()> {
        let h = parse_handle(handle)?;
        let queue_topic = handle_topic(group, topic, &h);
        let addr = self.master_of(topic, &h.broker_name).await?;
        let header = AckRequest {
            consumer_group: group.to_string(),
            topic: queue_topic,
            queue_id: h.queue_id,
            extra_info: handle.to_string(),
            offset: h.queue_offset,
        };
        self.call(addr, RequestCode::AckMessage, &header)
            .await?
            .expect(&[Status::Success])?;
        Ok(())
    }

    /// Keeps the message `handle` names invisible for `invisible` from now; returns its new
    /// receipt handle (the old one no longer acks it).
    pub async fn change_invisible(
        &self,
        group: &str,
        topic: &str,
        handle: &str,
        invisible: Duration,
    ) -> Result<String> {
        let mut h = parse_handle(handle)?;
        let queue_topic = handle_topic(group, topic, &h);
        let addr = self.master_of(topic, &h.broker_name).await?;
        let header = ChangeInvisibleTimeRequest {
            consumer_group: group.to_string(),
            topic: queue_topic,
            queue_id: h.queue_id,
            extra_info: handle.to_string(),
            offset: h.queue_offset,
            invisible_time_ms: u64::try_from(invisible.as_millis()).unwrap_or(u64::MAX),
        };
        let answer = self
            .call(addr, RequestCode::ChangeMessageInvisibleTime, &header)
            .await?
            .expect(&[Status::Success])?;
        let f: ChangeInvisibleTimeResponse = answer.required_fields()?;
        h.start_offset = h.queue_offset;
        h.pop_time_ms = f.pop_time_ms;
        h.invisible_time_ms = f.invisible_time_ms;
        h.revive_shard = f.revive_shard;
        Ok(h.to_string())
    }

    /// Moves the message `handle` names to `group`'s dead-letter topic at once
    /// (CONSUMER_SEND_MSG_BACK with delay level -1; `physical_offset`: the delivered record's,
    /// as [`PoppedMessage::message`] had it), then acks it.
    pub async fn dead_letter(
        &self,
        group: &str,
        topic: &str,
        handle: &str,
        physical_offset: u64,
        original_message_id: &str,
    ) -> Result<()> {
        let h = parse_handle(handle)?;
        let addr = self.master_of(topic, &h.broker_name).await?;
        let header = ConsumerSendBackRequest {
            consumer_group: group.to_string(),
            original_topic: topic.to_string(),
            physical_offset,
            delay_level: -1,
            max_reconsume_times: 0,
            original_message_id: original_message_id.to_string(),
        };
        self.call(addr, RequestCode::ConsumerSendMsgBack, &header)
            .await?
            .expect(&[Status::Success])?;
        self.ack(group, topic, handle).await
    }

    /// Closes the connections.
    pub fn shutdown(&self) {
        self.inst.pool.shutdown();
    }

    /// The master of `broker_name` by the route of `topic` (the pop retry topic has no
    /// route of its own: its messages live on the brokers of the topic).
    async fn master_of(&self, topic: &str, broker_name: &str) -> Result<SocketAddr> {
        let route = self.inst.route(topic).await?;
        if let Some(a) = route.master(broker_name) {
            return Ok(a);
        }
        let route = self.inst.refresh_route(topic).await?;
        route.master(broker_name).ok_or_else(|| Error::NoRoute {
            topic: topic.to_string(),
            detail: format!("broker {broker_name} has no master"),
        })
    }

    async fn call(
        &self,
        addr: SocketAddr,
        code: RequestCode,
        header: &(impl ringmq_wire::codec::Encode + ?Sized),
    ) -> Result<crate::net::connection::Answer> {
        let timeout = self.inst.cfg.request_timeout;
        self.inst
            .broker_call(addr, None, code, header, &[], timeout)
            .await
    }
}

/// The master to pop from: the named broker's, else the first by name.
fn pick_master(route: &TopicRouteInfo, name: Option<&str>) -> Option<(String, SocketAddr)> {
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        if let Some(a) = route.master(n) {
            return Some((n.to_string(), a));
        }
    }
    route
        .brokers
        .iter()
        .find_map(|(n, b)| b.master.map(|a| (n.clone(), a)))
}

fn parse_handle(handle: &str) -> Result<ReceiptHandle> {
    ReceiptHandle::parse(handle).map_err(|e| Error::InvalidMessage(e.to_string()))
}

/// The topic whose queue holds the message: the group's pop retry topic for a redelivery
/// taken from it, else the topic itself.
fn handle_topic(group: &str, topic: &str, h: &ReceiptHandle) -> String {
    if h.retry && !ringmq_wire::command::is_retry_topic(topic) {
        pop_retry_topic(group, topic)
    } else {
        topic.to_string()
    }
}
