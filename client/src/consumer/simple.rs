//! The simple consumer (RocketMQ 5's `SimpleConsumer`, on POP consumption): receive up to N
//! messages, each invisible to the group's other members for an invisible time, then ack
//! each one; a message not acked in time is delivered again (to any member) with its
//! reconsume count raised, and goes to `%DLQ%<group>` after the group's retry limit.
//!
//! The broker decides which queue each message comes from, so a group has as many members
//! as it likes, whatever the queue count, and one slow message holds up nothing else. The
//! group keeps no queue assignment and sends no heartbeats; it must not also have push or
//! pull consumers (the broker refuses the mix).
//!
//! ```no_run
//! # async fn demo() -> ringmq_client::Result<()> {
//! use std::time::Duration;
//! use ringmq_client::SimpleConsumer;
//!
//! let consumer = SimpleConsumer::builder()
//!     .group("invoice-workers")
//!     .name_servers("127.0.0.1:9876")
//!     .subscribe("Orders", "*")
//!     .start()
//!     .await?;
//! for m in consumer.receive(16, Duration::from_secs(30)).await? {
//!     println!("{}", String::from_utf8_lossy(&m.message.body));
//!     consumer.ack(&m).await?;
//! }
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Encode;
use ringmq_wire::command::{
    AckHandles, AckRequest, BatchAckRequest, BatchAckResponse, ChangeInvisibleTimeRequest,
    ChangeInvisibleTimeResponse, PopInitMode, PopRequest, PopResponse, ReceiptHandle,
    RETRY_TOPIC_PREFIX,
};
use ringmq_wire::record;

use super::{MessageSelector, StartPosition};
use crate::error::{Error, Result};
use crate::instance::{client_setters, ClientConfig, Instance};
use crate::message::ReceivedMessage;
use crate::trace::{consume_end, pop_begin, ConsumeSpan, TraceConfig, TraceStats, Tracer};

/// RocketMQ's `ConsumeReturnType` ordinal of a success, written in `SubAfter`.
const CONTEXT_SUCCESS: i32 = 0;

/// Most messages one `receive` asks for (the broker's limit).
pub const RECEIVE_MAX: u32 = 32;

/// Settings of a simple consumer.
#[derive(Debug, Clone)]
pub struct SimpleConfig {
    pub group: String,
    /// Topics and their filters.
    pub subscriptions: BTreeMap<String, MessageSelector>,
    /// How long a `receive` waits at the broker for a message when none is ready
    /// (long polling; default 5 s).
    pub await_duration: Duration,
    /// Where the group starts in a queue it has never popped: `First` (default) or `Last`.
    pub start: StartPosition,
    /// Orderly POP (default off).
    pub orderly: bool,
    /// Message trace: `Some` records each delivery and its ack ([`crate::trace`]).
    pub trace: Option<TraceConfig>,
}

/// Builds a [`SimpleConsumer`].
#[derive(Debug, Clone)]
pub struct SimpleConsumerBuilder {
    client: ClientConfig,
    cfg: SimpleConfig,
}

impl SimpleConsumerBuilder {
    client_setters!();

    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.cfg.group = group.into();
        self
    }

    /// Receives messages of `topic` that `selector` matches (a tag expression as a `&str`,
    /// or a [`MessageSelector`]).
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        selector: impl Into<MessageSelector>,
    ) -> Self {
        self.cfg.subscriptions.insert(topic.into(), selector.into());
        self
    }

    /// How long a `receive` waits at the broker when no message is ready.
    pub fn await_duration(mut self, d: Duration) -> Self {
        self.cfg.await_duration = d;
        self
    }

    /// Where the group starts in a queue it never popped: [`StartPosition::First`] or
    /// [`StartPosition::Last`].
    pub fn start_position(mut self, start: StartPosition) -> Self {
        self.cfg.start = start;
        self
    }

    /// Orderly POP: the broker hands a queue to one `receive` at a time, its messages in
    /// offset order; acks may come in any order. When the invisible time ends, the unacked
    /// ones are delivered again from the same queue (the acked ones among them are not), the
    /// first of them with its reconsume count raised; past the group's retry limit it goes
    /// to `%DLQ%<group>` and the queue goes on. A queue's messages wait while an earlier pop
    /// of it is unsettled. `change_invisible_duration` is refused.
    pub fn orderly(mut self, on: bool) -> Self {
        self.cfg.orderly = on;
        self
    }

    /// Message trace (off by default): a `SubBefore` record when a message is received and
    /// a `SubAfter` when its ack is acknowledged (cost: the time between), to the trace
    /// topic `RMQ_SYS_TRACE_TOPIC` in RocketMQ's format, through a bounded background queue.
    /// See [`crate::trace`].
    pub fn trace(mut self, on: bool) -> Self {
        self.cfg.trace = on.then(|| self.cfg.trace.take().unwrap_or_default());
        self
    }

    /// Message trace to another topic or with another queue size (turns tracing on).
    pub fn trace_config(mut self, cfg: TraceConfig) -> Self {
        self.cfg.trace = Some(cfg);
        self
    }

    pub async fn start(self) -> Result<SimpleConsumer> {
        let cfg = self.cfg;
        if cfg.group.is_empty() {
            return Err(Error::Config("a consumer group is required".into()));
        }
        if cfg.subscriptions.is_empty() {
            return Err(Error::Config(
                "subscribe to at least one topic before start".into(),
            ));
        }
        for s in cfg.subscriptions.values() {
            s.check()?;
        }
        if matches!(cfg.start, StartPosition::Timestamp(_)) {
            return Err(Error::Config(
                "a simple consumer starts at First or Last, not at a timestamp".into(),
            ));
        }
        let trace = match &cfg.trace {
            Some(t) => Some(Tracer::start(self.client.clone(), &cfg.group, t).await?),
            None => None,
        };
        let inst = Instance::new(self.client).await?;
        Ok(SimpleConsumer {
            inner: Arc::new(Inner {
                inst,
                cfg,
                turn: AtomicUsize::new(0),
                trace,
            }),
        })
    }
}

struct Inner {
    inst: Arc<Instance>,
    cfg: SimpleConfig,
    turn: AtomicUsize,
    trace: Option<Arc<Tracer>>,
}

/// A simple consumer. Cheap to clone; every clone is the same member.
#[derive(Clone)]
pub struct SimpleConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimpleConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleConsumer")
            .field("group", &self.inner.cfg.group)
            .field("client_id", &self.inner.inst.id)
            .finish()
    }
}

/// A received message and what acks it.
#[derive(Debug, Clone)]
pub struct PoppedMessage {
    pub message: ReceivedMessage,
    /// RocketMQ's receipt handle (`extraInfo`): names the message's checkpoint at the
    /// broker. [`SimpleConsumer::change_invisible_duration`] replaces it.
    pub receipt_handle: String,
    /// When the message becomes visible to the group again unless acked (ms since the
    /// epoch, the broker's clock).
    pub invisible_until_ms: i64,
    broker: SocketAddr,
    /// With message trace: the delivery's span, ended by its ack.
    span: Option<ConsumeSpan>,
}

impl PoppedMessage {
    /// The topic the message was consumed from first (its pop retry topic's base for a
    /// redelivery).
    pub fn topic(&self) -> &str {
        self.message
            .property(ringmq_wire::properties::keys::RETRY_TOPIC)
            .unwrap_or(&self.message.topic)
    }
}

impl SimpleConsumer {
    pub fn builder() -> SimpleConsumerBuilder {
        SimpleConsumerBuilder {
            client: ClientConfig::default(),
            cfg: SimpleConfig {
                group: String::new(),
                subscriptions: BTreeMap::new(),
                await_duration: Duration::from_secs(5),
                start: StartPosition::First,
                orderly: false,
                trace: None,
            },
        }
    }

    pub fn client_id(&self) -> &str {
        &self.inner.inst.id
    }

    /// Up to `max` (1..=32) messages of one subscribed topic, each invisible to the group's
    /// other members for `invisible`. Waits up to the await duration when none is ready
    /// (then returns an empty list). Topics and brokers take turns from call to call.
    pub async fn receive(&self, max: u32, invisible: Duration) -> Result<Vec<PoppedMessage>> {
        if max == 0 || max > RECEIVE_MAX {
            return Err(Error::Config(format!(
                "receive asks for 1..={RECEIVE_MAX} messages, not {max}"
            )));
        }
        let invisible_ms = u64::try_from(invisible.as_millis()).unwrap_or(u64::MAX);
        if invisible_ms == 0 {
            return Err(Error::Config(
                "the invisible duration must be above zero".into(),
            ));
        }
        let inner = &self.inner;
        let turn = inner.turn.fetch_add(1, Ordering::Relaxed);
        let topics: Vec<(&String, &MessageSelector)> = inner.cfg.subscriptions.iter().collect();
        let (topic, selector) = topics[turn % topics.len()];
        let route = inner.inst.route(topic).await?;
        let mut brokers: Vec<(&String, SocketAddr)> = route
            .brokers
            .iter()
            .filter_map(|(name, b)| b.master.map(|m| (name, m)))
            .collect();
        if brokers.is_empty() {
            let _ = inner.inst.refresh_route(topic).await;
            return Err(Error::NoRoute {
                topic: topic.clone(),
                detail: "no broker of the topic has a master".into(),
            });
        }
        brokers.sort();
        let (broker_name, addr) = brokers[(turn / topics.len()) % brokers.len()];
        let header = PopRequest {
            consumer_group: inner.cfg.group.clone(),
            topic: topic.clone(),
            queue_id: -1,
            max_messages: max,
            invisible_time_ms: invisible_ms,
            poll_time_ms: u32::try_from(inner.cfg.await_duration.as_millis()).unwrap_or(u32::MAX),
            filter_type: selector.filter_type(),
            expression: selector.expression().to_string(),
            init_mode: match inner.cfg.start {
                StartPosition::Last => PopInitMode::Max,
                _ => PopInitMode::Min,
            },
            order: inner.cfg.orderly,
        };
        let timeout = inner.cfg.await_duration + inner.inst.cfg.request_timeout;
        let answer = inner
            .inst
            .broker_call(addr, None, RequestCode::PopMessage, &header, &[], timeout)
            .await;
        inner.inst.refresh_if_misrouted(topic, &answer).await;
        let answer = answer?;
        match answer.status()? {
            Status::Success => {}
            Status::PullNotFound => return Ok(Vec::new()),
            other => return Err(answer.error(other)),
        }
        let fields: PopResponse = answer.required_fields()?;
        let (mut keep, collided) = popped(&answer.body, broker_name, addr, &fields, selector)?;
        if let Some(t) = &inner.trace {
            for m in &mut keep {
                m.span = Some(pop_begin(t, &inner.cfg.group, &m.message));
            }
        }
        if !collided.is_empty() {
            // Not this subscription's tags (a tag hash collision at the broker): acked
            // unseen, as a pull consumer skips them.
            self.ack_batch(&collided).await?;
        }
        Ok(keep)
    }

    /// Acks one message: it is never delivered again. Fails with INVALID_RECEIPT_HANDLE
    /// when its invisible time already ended (it is being delivered again; ack that delivery).
    pub async fn ack(&self, m: &PoppedMessage) -> Result<()> {
        let header = AckRequest {
            consumer_group: self.inner.cfg.group.clone(),
            topic: m.message.topic.clone(),
            queue_id: m.message.queue_id,
            extra_info: m.receipt_handle.clone(),
            offset: m.message.queue_offset,
        };
        self.call(m.broker, RequestCode::AckMessage, &header, &[])
            .await?
            .expect(&[Status::Success])?;
        self.trace_acked(std::slice::from_ref(m));
        Ok(())
    }

    /// Ends the trace spans of acknowledged acks.
    fn trace_acked(&self, msgs: &[PoppedMessage]) {
        let Some(t) = &self.inner.trace else { return };
        for span in msgs.iter().filter_map(|m| m.span.clone()) {
            consume_end(t, &self.inner.cfg.group, span, CONTEXT_SUCCESS);
        }
    }

    /// The tracer's counters, when tracing is on ([`SimpleConsumerBuilder::trace`]).
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.inner.trace.as_ref().map(|t| t.stats())
    }

    /// Acks several messages, one request per queue. Returns how many were acked (or had
    /// been) and how many were refused (their invisible time had ended, or the handle names
    /// nothing in flight).
    pub async fn ack_batch(&self, msgs: &[PoppedMessage]) -> Result<(u32, u32)> {
        let mut by_queue: BTreeMap<(SocketAddr, &str, u32), Vec<String>> = BTreeMap::new();
        for m in msgs {
            by_queue
                .entry((m.broker, m.message.topic.as_str(), m.message.queue_id))
                .or_default()
                .push(m.receipt_handle.clone());
        }
        let (mut acked, mut refused) = (0, 0);
        for ((addr, topic, queue_id), handles) in by_queue.clone() {
            let header = BatchAckRequest {
                consumer_group: self.inner.cfg.group.clone(),
                topic: topic.to_string(),
                queue_id,
            };
            let body = AckHandles { handles }
                .to_vec()
                .map_err(|e| Error::InvalidMessage(format!("batch ack: {e}")))?;
            let answer = self
                .call(addr, RequestCode::BatchAckMessage, &header, &body)
                .await?
                .expect(&[Status::Success])?;
            let f: BatchAckResponse = answer.required_fields()?;
            acked += f.acked;
            refused += f.refused;
            if f.refused == 0 {
                let of_queue: Vec<PoppedMessage> = msgs
                    .iter()
                    .filter(|m| {
                        m.broker == addr
                            && m.message.topic == topic
                            && m.message.queue_id == queue_id
                    })
                    .cloned()
                    .collect();
                self.trace_acked(&of_queue);
            }
        }
        Ok((acked, refused))
    }

    /// Keeps `m` invisible for `invisible` from now (longer work, or a sooner retry) and
    /// updates its receipt handle; the old handle no longer acks it.
    pub async fn change_invisible_duration(
        &self,
        m: &mut PoppedMessage,
        invisible: Duration,
    ) -> Result<()> {
        let invisible_ms = u64::try_from(invisible.as_millis()).unwrap_or(u64::MAX);
        let header = ChangeInvisibleTimeRequest {
            consumer_group: self.inner.cfg.group.clone(),
            topic: m.message.topic.clone(),
            queue_id: m.message.queue_id,
            extra_info: m.receipt_handle.clone(),
            offset: m.message.queue_offset,
            invisible_time_ms: invisible_ms,
        };
        let answer = self
            .call(
                m.broker,
                RequestCode::ChangeMessageInvisibleTime,
                &header,
                &[],
            )
            .await?
            .expect(&[Status::Success])?;
        let f: ChangeInvisibleTimeResponse = answer.required_fields()?;
        let mut h = ReceiptHandle::parse(&m.receipt_handle)
            .map_err(|e| Error::InvalidMessage(e.to_string()))?;
        h.start_offset = m.message.queue_offset;
        h.pop_time_ms = f.pop_time_ms;
        h.invisible_time_ms = f.invisible_time_ms;
        h.revive_shard = f.revive_shard;
        m.invisible_until_ms = h.deadline_ms();
        m.receipt_handle = h.to_string();
        Ok(())
    }

    async fn call(
        &self,
        addr: SocketAddr,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
    ) -> Result<crate::net::connection::Answer> {
        let timeout = self.inner.inst.cfg.request_timeout;
        self.inner
            .inst
            .broker_call(addr, None, code, header, body, timeout)
            .await
    }

    /// Closes the connections. Messages received and not acked are delivered again after
    /// their invisible time.
    pub async fn shutdown(&self) {
        self.inner.inst.pool.shutdown();
        if let Some(t) = &self.inner.trace {
            t.shutdown().await;
        }
    }
}

/// The messages of a POP answer with their receipt handles: those the selector's tags
/// match, and those it does not (tag hash collisions). Also the edge consumer's.
pub(super) fn popped(
    body: &Bytes,
    broker_name: &str,
    addr: SocketAddr,
    f: &PopResponse,
    selector: &MessageSelector,
) -> Result<(Vec<PoppedMessage>, Vec<PoppedMessage>)> {
    // A checkpoint starts at the first offset the pop took from each queue.
    let mut starts: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let mut views = Vec::new();
    for r in record::iter(body) {
        let r = r.map_err(|e| Error::InvalidMessage(format!("popped record: {e}")))?;
        let start = starts
            .entry((r.topic.to_string(), r.queue_id))
            .or_insert(r.queue_offset);
        *start = (*start).min(r.queue_offset);
        views.push(r);
    }
    let tags = selector.tag_filter();
    let mut out = Vec::with_capacity(views.len());
    let mut collided = Vec::new();
    for r in views {
        let handle = ReceiptHandle {
            start_offset: starts[&(r.topic.to_string(), r.queue_id)],
            pop_time_ms: f.pop_time_ms,
            invisible_time_ms: f.invisible_time_ms,
            revive_shard: f.revive_shard,
            retry: r.topic.starts_with(RETRY_TOPIC_PREFIX),
            broker_name: broker_name.to_string(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
        };
        let m = PoppedMessage {
            message: ReceivedMessage::from_record(body, &r, broker_name),
            receipt_handle: handle.to_string(),
            invisible_until_ms: handle.deadline_ms(),
            broker: addr,
            span: None,
        };
        if tags
            .as_ref()
            .is_some_and(|t| !t.matches(r.property(ringmq_wire::properties::keys::TAGS)))
        {
            collided.push(m);
        } else {
            out.push(m);
        }
    }
    Ok((out, collided))
}
