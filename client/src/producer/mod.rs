//! The producer: sync, async (future or callback) and one-way sends, batches, and ordered
//! sends through a queue selector or a sharding key.
//!
//! Every send goes to the shard that owns its queue, on that shard's pipelined connection.
//! A failed attempt is retried (up to `retries` more times, within `send_timeout` overall)
//! only when the broker certainly did not store the message ([`Outcome::NotStored`](crate::Outcome::NotStored)): no
//! connection, reconnect backoff, or a refusal status (SYSTEM_BUSY, SERVICE_NOT_AVAILABLE,
//! DISK_FULL, WRONG_SHARD, SYSTEM_ERROR, TOPIC_NOT_EXIST, NO_PERMISSION, LIMIT_EXCEEDED). A
//! send whose outcome is unknown (written, then a timeout or a lost connection) is retried
//! only with [`ProducerBuilder::retry_unknown_outcome`], because the retry can duplicate it.
//! FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE mean *stored* and are
//! returned as a [`SendStatus`], never retried. Unordered sends retry on another broker when
//! there is one; ordered sends retry on the same queue (order is per queue).
//!
//! A failure that suggests a failover (the broker cannot be reached, or answers NOT_MASTER
//! or SERVICE_NOT_AVAILABLE) fetches the topic's route at once; when the route now names
//! another master for the same broker name (controller mode), the retry goes there first,
//! on the same queue and without a pause (see `retry`).

mod announce;
mod recall;
mod reply;
mod request;
mod retry;
mod send;
mod transaction;
mod transaction_check;
mod transaction_end;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use ringmq_wire::command::HeartbeatData;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::background::{ticker, Background};
use crate::error::{Error, Result};
use crate::instance::{client_setters, encode_heartbeat, ClientConfig, Instance};
use crate::message::{Message, ReceivedMessage};
use crate::route::MessageQueue;
use crate::trace::{TraceConfig, TraceStats, Tracer};

pub use reply::Reply;
pub use request::REQUESTS_PENDING_MAX;
use send::Form;
pub use send::{SendResult, SendStatus};
pub use transaction::{
    EndOutcome, HalfMessage, TransactionProducer, TransactionProducerBuilder,
    TransactionSendResult, CHECKS_IN_FLIGHT_MAX_DEFAULT, CHECKS_QUEUED_MAX,
};
pub use transaction_end::{TransactionCheck, TransactionState};

/// Largest message body by default (RocketMQ's `maxMessageSize`, 4 MiB).
pub const MESSAGE_BYTES_MAX_DEFAULT: usize = ringmq_wire::record::BODY_BYTES_MAX;
/// Most records in one batch (the broker's limit).
pub const BATCH_RECORDS_MAX: usize = 4096;

/// Picks a queue for a message from the topic's writable queues (in route order); the
/// result is taken modulo the number of queues.
pub trait QueueSelector: Send + Sync {
    fn select(&self, queues: &[MessageQueue], msg: &Message) -> usize;
}

impl<F> QueueSelector for F
where
    F: Fn(&[MessageQueue], &Message) -> usize + Send + Sync,
{
    fn select(&self, queues: &[MessageQueue], msg: &Message) -> usize {
        self(queues, msg)
    }
}

/// Writes unique key `seq` of `prefix` into `out` (cleared first): the prefix and the
/// counter as 8 upper-case hex digits.
pub(crate) fn unique_key(prefix: &str, seq: u32, out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    out.clear();
    out.push_str(prefix);
    for shift in (0..8).rev() {
        out.push(char::from(DIGITS[((seq >> (shift * 4)) & 0xF) as usize]));
    }
}

/// A random starting point for the round robin (std's randomly keyed hasher).
fn random_start() -> usize {
    use std::hash::{BuildHasher, Hasher};
    let h = std::collections::hash_map::RandomState::new().build_hasher();
    (h.finish() as usize) & 0xFFFF
}

/// The queue index a sharding key maps to among `queue_count` queues: FNV-1a (64-bit) of
/// the key's bytes, modulo the count. Stable across processes and versions, so every
/// producer sends one key to one queue while the topic's queues do not change.
pub fn sharding_index(key: &str, queue_count: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % queue_count.max(1) as u64) as usize
}

/// Settings of a producer.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub group: String,
    /// More attempts after the first, for failures that certainly stored nothing (default 2).
    pub retries: u32,
    /// Also retry sends whose outcome is unknown (may duplicate). Default false.
    pub retry_unknown_outcome: bool,
    /// Overall time for a send, retries included (default 3 s).
    pub send_timeout: Duration,
    /// Largest body accepted (default 4 MiB).
    pub message_bytes_max: usize,
    /// Async sends not yet answered; `send_async` waits for room past it (default 10 000).
    pub async_sends_max: usize,
    /// How often the producer heartbeats its brokers (default 30 s). It also heartbeats a
    /// broker right after its first send there, so the broker lists it at once.
    pub heartbeat_interval: Duration,
    /// Bodies longer than this many bytes are compressed (RocketMQ's
    /// `compressMsgBodyOverHowmuch`, default 4 KiB); `usize::MAX` never compresses.
    pub compress_over: usize,
    /// How bodies over `compress_over` are compressed (RocketMQ 5's `compressType`; default
    /// zlib).
    pub compression: ringmq_wire::record::Compression,
}

/// Builds a [`Producer`].
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    client: ClientConfig,
    cfg: ProducerConfig,
    /// Heartbeat every master the name servers list, not only those of the routes in use
    /// (a transaction producer must be known to every broker that may check back).
    heartbeat_every_master: bool,
    /// Message trace: `Some` records a `Pub` per stored message ([`crate::trace`]).
    trace: Option<TraceConfig>,
}

impl ProducerBuilder {
    client_setters!();

    /// The producer group (required).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.cfg.group = group.into();
        self
    }

    pub fn retries(mut self, n: u32) -> Self {
        self.cfg.retries = n;
        self
    }

    /// Retry sends whose outcome is unknown too: they may have been stored, so a retry can
    /// deliver the message twice.
    pub fn retry_unknown_outcome(mut self, yes: bool) -> Self {
        self.cfg.retry_unknown_outcome = yes;
        self
    }

    pub fn send_timeout(mut self, t: Duration) -> Self {
        self.cfg.send_timeout = t;
        self
    }

    pub fn message_bytes_max(mut self, n: usize) -> Self {
        self.cfg.message_bytes_max = n;
        self
    }

    pub fn async_sends_max(mut self, n: usize) -> Self {
        self.cfg.async_sends_max = n;
        self
    }

    pub fn heartbeat_interval(mut self, t: Duration) -> Self {
        self.cfg.heartbeat_interval = t;
        self
    }

    /// Compress bodies longer than `bytes` (RocketMQ's `compressMsgBodyOverHowmuch`, default
    /// 4,096); `usize::MAX` turns compression off. A body that would not get smaller is sent
    /// as it is. See [`crate::compress`].
    pub fn compress_over(mut self, bytes: usize) -> Self {
        self.cfg.compress_over = bytes;
        self
    }

    /// How to compress bodies over [`ProducerBuilder::compress_over`]: zlib (the default, as
    /// RocketMQ 5's `compressType`), LZ4 or Zstandard.
    pub fn compression(mut self, kind: ringmq_wire::record::Compression) -> Self {
        self.cfg.compression = kind;
        self
    }

    /// Message trace (off by default): record every stored message's send (group, time,
    /// cost, where it went) to the trace topic `RMQ_SYS_TRACE_TOPIC`, in RocketMQ's format,
    /// through a bounded background queue. See [`crate::trace`].
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on.then(|| self.trace.take().unwrap_or_default());
        self
    }

    /// Message trace to another topic or with another queue size (turns tracing on).
    pub fn trace_config(mut self, cfg: TraceConfig) -> Self {
        self.trace = Some(cfg);
        self
    }

    /// Validates the settings and starts the producer's timers (route refresh, heartbeat).
    /// Connections open on first use.
    pub async fn start(self) -> Result<Producer> {
        if self.cfg.group.is_empty() {
            return Err(Error::Config("a producer group is required".into()));
        }
        if self.cfg.message_bytes_max == 0 || self.cfg.message_bytes_max > MESSAGE_BYTES_MAX_DEFAULT
        {
            return Err(Error::Config(format!(
                "message_bytes_max must be in 1..={MESSAGE_BYTES_MAX_DEFAULT}"
            )));
        }
        if self.cfg.async_sends_max == 0 || self.cfg.send_timeout.is_zero() {
            return Err(Error::Config(
                "async_sends_max and send_timeout must be above zero".into(),
            ));
        }
        let trace = match &self.trace {
            Some(t) => Some(Tracer::start(self.client.clone(), &self.cfg.group, t).await?),
            None => None,
        };
        let inst = Instance::new(self.client).await?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let uniq_prefix: Arc<str> = format!(
            "{:08X}{:012X}{:04X}",
            std::process::id(),
            now_ms & 0xFFFF_FFFF_FFFF,
            SEQ.fetch_add(1, Ordering::Relaxed) & 0xFFFF
        )
        .into();
        let inner = Arc::new(Inner {
            async_permits: Arc::new(Semaphore::new(self.cfg.async_sends_max)),
            cfg: self.cfg,
            inst,
            // A random first queue, as RocketMQ's producer: short-lived producers (one send
            // each, like `ringmq-ctl send`) spread over the queues instead of all writing
            // the first one.
            round_robin: AtomicUsize::new(random_start()),
            uniq_prefix,
            uniq_seq: AtomicU64::new(0),
            shut: AtomicBool::new(false),
            background: Background::default(),
            heartbeat_every_master: self.heartbeat_every_master,
            announced: announce::Announced::default(),
            trace,
        });
        inner
            .background
            .push(tokio::spawn(timers(Arc::downgrade(&inner))));
        Ok(Producer { inner })
    }
}

pub(crate) struct Inner {
    pub(crate) cfg: ProducerConfig,
    pub(crate) inst: Arc<Instance>,
    pub(crate) round_robin: AtomicUsize,
    /// Every unique key is this prefix and 8 hex digits of a 32-bit counter.
    uniq_prefix: Arc<str>,
    uniq_seq: AtomicU64,
    async_permits: Arc<Semaphore>,
    shut: AtomicBool,
    background: Background,
    heartbeat_every_master: bool,
    /// The connection each master last got this producer's heartbeat on.
    announced: announce::Announced,
    trace: Option<Arc<Tracer>>,
}

impl Inner {
    /// Reserves `n` consecutive unique keys (the counter wraps at 2^32): their prefix and
    /// the first counter value; key `i` is [`unique_key`]`(prefix, first + i)`.
    pub(crate) fn unique_keys(&self, n: usize) -> (Arc<str>, u32) {
        let first = self.uniq_seq.fetch_add(n as u64, Ordering::Relaxed) as u32;
        (Arc::clone(&self.uniq_prefix), first)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.shut.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }
}

/// A producer. Cheap to clone (all clones share connections and routes); sends from many
/// tasks at once are pipelined on the same connections.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("group", &self.inner.cfg.group)
            .field("client_id", &self.inner.inst.id)
            .finish()
    }
}

/// How a send picks its queue.
pub(crate) enum Pick<'a> {
    /// Round robin over writable queues, avoiding the broker that just failed.
    Any,
    /// This queue, every attempt.
    Queue(&'a MessageQueue),
    /// The selector's pick (made once, kept for every attempt).
    Select(&'a dyn QueueSelector),
}

impl Producer {
    pub fn builder() -> ProducerBuilder {
        ProducerBuilder {
            client: ClientConfig::default(),
            cfg: ProducerConfig {
                group: String::new(),
                retries: 2,
                retry_unknown_outcome: false,
                send_timeout: Duration::from_secs(3),
                message_bytes_max: MESSAGE_BYTES_MAX_DEFAULT,
                async_sends_max: 10_000,
                heartbeat_interval: Duration::from_secs(30),
                compress_over: crate::compress::COMPRESS_OVER_BYTES_DEFAULT,
                compression: ringmq_wire::record::Compression::Zlib,
            },
            heartbeat_every_master: false,
            trace: None,
        }
    }

    /// The client id this producer announces.
    pub fn client_id(&self) -> &str {
        &self.inner.inst.id
    }

    /// Sends one message and waits for the broker's answer.
    pub async fn send(&self, msg: Message) -> Result<SendResult> {
        traced(
            &self.inner,
            std::slice::from_ref(&msg),
            Pick::Any,
            None,
            Form::Single,
        )
        .await
    }

    /// Sends messages of one topic as one batch to one queue, stored contiguously.
    pub async fn send_batch(&self, msgs: &[Message]) -> Result<SendResult> {
        traced(&self.inner, msgs, Pick::Any, None, Form::Batch).await
    }

    /// Sends to one queue (retries stay on it).
    pub async fn send_to_queue(&self, msg: Message, mq: &MessageQueue) -> Result<SendResult> {
        traced(
            &self.inner,
            std::slice::from_ref(&msg),
            Pick::Queue(mq),
            None,
            Form::Single,
        )
        .await
    }

    /// Sends to the queue `selector` picks (ordered send: retries stay on that queue).
    pub async fn send_with_selector(
        &self,
        msg: Message,
        selector: &dyn QueueSelector,
    ) -> Result<SendResult> {
        traced(
            &self.inner,
            std::slice::from_ref(&msg),
            Pick::Select(selector),
            None,
            Form::Single,
        )
        .await
    }

    /// Ordered send: every message with the same `sharding_key` goes to the same queue
    /// ([`sharding_index`]), so a consumer of that queue sees them in send order, provided
    /// each send is awaited before the next one of that key. The key travels as the
    /// `__SHARDINGKEY` property.
    pub async fn send_ordered(&self, msg: Message, sharding_key: &str) -> Result<SendResult> {
        let key = sharding_key.to_string();
        let selector =
            move |queues: &[MessageQueue], _: &Message| sharding_index(&key, queues.len());
        traced(
            &self.inner,
            std::slice::from_ref(&msg),
            Pick::Select(&selector),
            Some(sharding_key),
            Form::Single,
        )
        .await
    }

    /// Sends without waiting for an answer: returns once the frame is written. The broker
    /// sends nothing back, so nothing tells whether it stored the message.
    pub async fn send_oneway(&self, msg: Message) -> Result<()> {
        send::send_oneway(&self.inner, &msg).await
    }

    /// Starts a send and returns at once (after waiting for room if `async_sends_max`
    /// sends are outstanding); the handle resolves to the result. Many async sends are in
    /// flight on one connection at the same time.
    pub async fn send_async(&self, msg: Message) -> SendHandle {
        let permit = Arc::clone(&self.inner.async_permits).acquire_owned().await;
        let producer = self.clone();
        SendHandle {
            task: tokio::spawn(async move {
                let result = producer.send(msg).await;
                drop(permit);
                result
            }),
        }
    }

    /// Starts a send and calls `callback` with its result (on a tokio task).
    pub async fn send_with_callback<F>(&self, msg: Message, callback: F)
    where
        F: FnOnce(Result<SendResult>) + Send + 'static,
    {
        let permit = Arc::clone(&self.inner.async_permits).acquire_owned().await;
        let producer = self.clone();
        tokio::spawn(async move {
            let result = producer.send(msg).await;
            drop(permit);
            callback(result);
        });
    }

    /// Recalls a scheduled message before it is due (RocketMQ 5.3's recall), by the
    /// [`SendResult::recall_handle`] of its send; returns its message id. The handle names
    /// the topic and the broker; the request goes to that broker's master.
    ///
    /// `Ok` means the message will not be delivered (also when it was already recalled).
    /// A message already delivered gives [`Error::Broker`] with
    /// [`Status::RecallTooLate`](ringmq_wire::code::Status::RecallTooLate); a handle that
    /// does not decode gives [`Error::InvalidMessage`]; one that names no scheduled message
    /// of the broker, `Error::Broker` with `MESSAGE_ILLEGAL`. Attempts whose answer was lost
    /// are sent again within `send_timeout` (a recall is idempotent).
    pub async fn recall(&self, handle: &str) -> Result<String> {
        let topic = ringmq_wire::recall::RecallHandle::decode(handle)
            .map_err(|e| Error::InvalidMessage(format!("recall handle: {e}")))?
            .topic;
        recall::recall(&self.inner, &topic, handle).await
    }

    /// [`Self::recall`], with the request naming `topic` (the broker refuses a handle of
    /// another topic, as RocketMQ does; `ringmq-ctl msg recall --topic` uses it).
    pub async fn recall_in(&self, topic: &str, handle: &str) -> Result<String> {
        recall::recall(&self.inner, topic, handle).await
    }

    /// Request-reply: sends `msg` as a request and waits for its reply, at most `timeout`
    /// (the send included). A replier consuming the topic answers with
    /// [`Producer::send_reply`]; the broker pushes the reply to this client. When the
    /// broker stored the request but no reply came in time, the call fails with
    /// [`Error::RequestTimeout`] (the request may have been consumed); when the send itself
    /// got no answer in time, with [`Error::Timeout`]. Nothing of it stays behind. Requests from many
    /// tasks run at once, each matched to its reply by its `CORRELATION_ID`; see
    /// `docs/consumers.md`, "Request-reply".
    pub async fn request(&self, msg: Message, timeout: Duration) -> Result<ReceivedMessage> {
        request::request(&self.inner, msg, timeout).await
    }

    /// Request-reply: sends a reply built by [`Reply::to`] from a consumed request. The
    /// broker pushes it to the requester and stores it in the reply topic
    /// (`storeReplyMessageEnable`; when it does not store it, the result has
    /// `record_count() == 0` and an empty `msg_id`). A requester the broker does not know
    /// (gone, or its request timed out and it left) is answered REPLY_TO_CLIENT_NOT_FOUND.
    pub async fn send_reply(&self, reply: Reply) -> Result<SendResult> {
        reply::send_reply(&self.inner, reply).await
    }

    /// Requests of this producer waiting for their replies (for monitoring and tests).
    pub fn requests_pending(&self) -> usize {
        self.inner.inst.pool.inbox().replies_pending()
    }

    /// The writable queues of a topic, in route order (for selectors and `send_to_queue`).
    pub async fn write_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        Ok(self.inner.inst.route(topic).await?.write_queues.clone())
    }

    /// The tracer's counters, when tracing is on ([`ProducerBuilder::trace`]).
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.inner.trace.as_ref().map(|t| t.stats())
    }

    /// Stops the timers, unregisters from the brokers and closes every connection; later
    /// sends fail with [`Error::Shutdown`]. Outstanding async sends fail if unanswered, and
    /// requests waiting for replies fail with [`Error::Shutdown`]. With tracing on, the
    /// queued trace records are sent first.
    pub async fn shutdown(&self) {
        if self.inner.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(t) = &self.inner.trace {
            t.shutdown().await;
        }
        self.inner.background.abort_all();
        // Requests still waiting end with Error::Shutdown.
        self.inner.inst.pool.inbox().drop_replies();
        send::unregister(&self.inner).await;
        self.inner.inst.pool.close_all();
    }
}

/// [`send::send`], recording a `Pub` per stored message when tracing is on (the send path
/// pays for building the records and offering them to the tracer's queue, nothing more).
async fn traced(
    inner: &Inner,
    msgs: &[Message],
    pick: Pick<'_>,
    sharding_key: Option<&str>,
    form: Form,
) -> Result<SendResult> {
    let Some(t) = &inner.trace else {
        return send::send(inner, msgs, pick, sharding_key, form).await;
    };
    let ordered = matches!(pick, Pick::Select(_));
    let started_ms = crate::trace::now_ms();
    let started = std::time::Instant::now();
    let r = send::send(inner, msgs, pick, sharding_key, form).await;
    if let Ok(sr) = &r {
        let cost = started.elapsed();
        crate::trace::record_send(t, &inner.cfg.group, msgs, sr, started_ms, cost, ordered);
    }
    r
}

/// The result of [`Producer::send_async`], as a future.
#[derive(Debug)]
pub struct SendHandle {
    task: JoinHandle<Result<SendResult>>,
}

impl Future for SendHandle {
    type Output = Result<SendResult>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.task).poll(cx) {
            Poll::Ready(Ok(r)) => Poll::Ready(r),
            Poll::Ready(Err(_)) => Poll::Ready(Err(Error::Shutdown)),
            Poll::Pending => Poll::Pending,
        }
    }
}

async fn timers(weak: Weak<Inner>) {
    let (refresh, heartbeat) = match weak.upgrade() {
        Some(i) => (i.inst.cfg.route_refresh_interval, i.cfg.heartbeat_interval),
        None => return,
    };
    let Some(mut reconnects) = weak.upgrade().map(|i| i.inst.pool.reconnects()) else {
        return;
    };
    let mut refresh_tick = ticker(refresh).await;
    let mut heartbeat_tick = ticker(heartbeat.max(Duration::from_millis(10))).await;
    loop {
        tokio::select! {
            _ = refresh_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.inst.refresh_all_routes().await;
            }
            _ = heartbeat_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                heartbeat_all(&inner).await;
            }
            // A broker came back (a transaction's check-back needs the producer group).
            Ok(()) = reconnects.changed() => {
                let Some(inner) = weak.upgrade() else { return };
                heartbeat_all(&inner).await;
            }
        }
    }
}

pub(super) async fn heartbeat_all(inner: &Inner) {
    let mut to = send::known_masters(inner);
    if inner.heartbeat_every_master {
        match inner.inst.cluster_info().await {
            Ok(info) => to.extend(info.brokers.iter().filter_map(|b| {
                let master = b.replicas.get(&ringmq_wire::command::route::MASTER_ID)?;
                master.address.parse::<std::net::SocketAddr>().ok()
            })),
            Err(e) => log::debug!("heartbeat: listing the brokers: {e}"),
        }
        to.sort();
        to.dedup();
    }
    let hb = HeartbeatData {
        client_id: inner.inst.id.clone(),
        producer_groups: vec![inner.cfg.group.clone()],
        consumer_groups: Vec::new(),
    };
    let Some(body) = encode_heartbeat(&hb) else {
        return;
    };
    inner.inst.heartbeat_to(to, &body).await;
}
