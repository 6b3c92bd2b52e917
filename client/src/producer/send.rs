//! One send, attempt by attempt: choose a queue, encode the records straight into the
//! request frame (no intermediate copy), send on the queue's shard connection, read the
//! answer, and decide whether a failure may be retried (see the parent module).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::route::MASTER_ID;
use ringmq_wire::command::{SendRequest, SendResponse, UnregisterClientRequest};
use ringmq_wire::frame::{self, PREFIX_BYTES};
use ringmq_wire::record;
use tokio::time::Instant;

use super::retry::{self, Next};
use super::{unique_key, Inner, Pick, BATCH_RECORDS_MAX};
use crate::error::{Error, Outcome, Result};
use crate::message::Message;
use crate::route::MessageQueue;

/// Room reserved per record for its properties block (unique key and a few more; the
/// buffer grows when a record needs more).
const PROPS_BYTES_GUESS: usize = 64;

/// How the broker stored a message (every variant means *stored*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendStatus {
    /// Stored with the durability the broker is configured for.
    Ok,
    /// SYNC_FLUSH: stored, but the fdatasync did not finish in time.
    FlushDiskTimeout,
    /// SYNC_MASTER: stored on the master; the slave did not acknowledge in time.
    FlushSlaveTimeout,
    /// SYNC_MASTER: stored on the master; no slave is in sync.
    SlaveNotAvailable,
}

impl SendStatus {
    fn from_status(s: Status) -> Self {
        match s {
            Status::FlushDiskTimeout => SendStatus::FlushDiskTimeout,
            Status::FlushSlaveTimeout => SendStatus::FlushSlaveTimeout,
            Status::SlaveNotAvailable => SendStatus::SlaveNotAvailable,
            _ => SendStatus::Ok,
        }
    }
}

/// What the broker answered to a stored send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    pub status: SendStatus,
    /// Offset message id of the first record (store host + physical offset).
    pub msg_id: String,
    /// The `UNIQ_KEY` given to the first record.
    pub unique_key: String,
    pub queue: MessageQueue,
    /// Queue offset of the first record (record `i` has `queue_offset + i`).
    pub queue_offset: u64,
    pub store_timestamp_ms: i64,
    /// For a scheduled message: when the broker will deliver it (ms since the epoch). Until
    /// then it is stored in the broker's timer queue and `queue_offset` is its offset there.
    pub deliver_at_ms: Option<i64>,
    /// For a scheduled message: the handle that withdraws it before it is due
    /// ([`Producer::recall`](super::Producer::recall); RocketMQ 5.3's `recallHandle`, in
    /// its format).
    pub recall_handle: Option<String>,
    /// What every record's ids are made from (formatted only when asked for: a batch's ids
    /// are strings nobody may read).
    records: RecordIds,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RecordIds {
    store_host: SocketAddr,
    first_physical_offset: u64,
    /// Encoded length of each record, in send order.
    lens: Vec<u32>,
    uniq_prefix: Arc<str>,
    uniq_first: u32,
    /// The keys of messages sent with their own ([`Message::unique_key`]), by record; empty
    /// when none was.
    own_keys: Vec<Option<String>>,
}

impl SendResult {
    /// Records stored by the send.
    pub fn record_count(&self) -> usize {
        self.records.lens.len()
    }

    /// Offset message ids of every record, in send order.
    pub fn msg_ids(&self) -> Vec<String> {
        let r = &self.records;
        let mut at = r.first_physical_offset;
        r.lens
            .iter()
            .map(|&len| {
                let id = record::message_id(r.store_host, at);
                at = at.saturating_add(u64::from(len));
                id
            })
            .collect()
    }

    /// A one-record result (for tests of what consumes results).
    #[cfg(test)]
    pub(crate) fn for_test(msg_id: &str, unique_key: &str) -> SendResult {
        let (store_host, first_physical_offset) =
            record::parse_message_id(msg_id).expect("a valid offset message id");
        SendResult {
            status: SendStatus::Ok,
            msg_id: msg_id.to_string(),
            unique_key: unique_key.to_string(),
            queue: MessageQueue::new("T", "broker-a", 0),
            queue_offset: 0,
            store_timestamp_ms: 0,
            deliver_at_ms: None,
            recall_handle: None,
            records: RecordIds {
                store_host,
                first_physical_offset,
                lens: vec![100],
                uniq_prefix: Arc::from(""),
                uniq_first: 0,
                own_keys: Vec::new(),
            },
        }
    }

    /// The `UNIQ_KEY` given to each record, in send order.
    pub fn unique_keys(&self) -> Vec<String> {
        let r = &self.records;
        (0..r.lens.len())
            .map(|i| {
                if let Some(Some(own)) = r.own_keys.get(i) {
                    return own.clone();
                }
                let mut k = String::with_capacity(r.uniq_prefix.len() + 8);
                unique_key(&r.uniq_prefix, r.uniq_first.wrapping_add(i as u32), &mut k);
                k
            })
            .collect()
    }
}

/// Where one attempt goes.
struct Target {
    mq: MessageQueue,
    addr: SocketAddr,
    shard: Option<u16>,
}

pub(super) async fn send(
    inner: &Inner,
    msgs: &[Message],
    pick: Pick<'_>,
    sharding_key: Option<&str>,
    form: Form,
) -> Result<SendResult> {
    inner.check_open()?;
    validate(inner, msgs, form)?;
    let topic = msgs[0].topic.as_str();
    let deadline = Instant::now() + inner.cfg.send_timeout;
    let attempts = inner.cfg.retries.saturating_add(1);
    let mut next = Next::default();
    let mut fixed: Option<MessageQueue> = None;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut target = None;
        let chosen = choose(inner, topic, &pick, &mut fixed, &next, &msgs[0]).await;
        let result = match chosen {
            Ok(t) => {
                let r = send_once(inner, &t, msgs, sharding_key, form, deadline).await;
                if r.is_ok() {
                    super::announce::after_send(inner, t.addr).await;
                }
                target = Some(t);
                r
            }
            Err(e) => Err(e),
        };
        let e = match result {
            Ok(r) => return Ok(r),
            Err(e) => e,
        };
        let route = refresh_after(inner, topic, &e).await;
        if !retry::may_resend(&e, inner.cfg.retry_unknown_outcome)
            || attempt >= attempts
            || Instant::now() >= deadline
        {
            return Err(if attempt > 1 {
                Error::RetriesExhausted {
                    attempts: attempt,
                    last: Box::new(e),
                }
            } else {
                e
            });
        }
        log::debug!("send attempt {attempt} to {topic} failed ({e}); retrying");
        next = match &target {
            Some(t) => retry::next_attempt(&e, &t.mq, t.addr, route.as_deref()),
            None => retry::next_attempt_unrouted(&e),
        };
        let until = (Instant::now() + next.pause).min(deadline);
        tokio::time::sleep_until(until).await;
    }
}

/// Fetches the route again after a failed attempt when the failure says it may be stale: at
/// once after a suspected failover, else throttled. The route, if fetched.
async fn refresh_after(
    inner: &Inner,
    topic: &str,
    e: &Error,
) -> Option<Arc<crate::route::TopicRouteInfo>> {
    if let Some(addr) = e.failover_suspect() {
        inner
            .inst
            .refresh_route_after_failure(topic, addr)
            .await
            .ok()
    } else if e.is_routing_error() {
        inner.inst.refresh_route(topic).await.ok()
    } else {
        None
    }
}

pub(super) async fn send_oneway(inner: &Inner, msg: &Message) -> Result<()> {
    inner.check_open()?;
    let msgs = std::slice::from_ref(msg);
    validate(inner, msgs, Form::Single)?;
    let deadline = Instant::now() + inner.cfg.send_timeout;
    let mut next = Next::default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut fixed = None;
        let t = choose(inner, &msg.topic, &Pick::Any, &mut fixed, &next, msg).await;
        let result = match &t {
            Ok(t) => oneway_once(inner, t, msg, deadline).await,
            Err(_) => Err(Error::Shutdown),
        };
        let e = match (t, result) {
            (Err(e), _) => e,
            (Ok(_), Ok(())) => return Ok(()),
            (Ok(t), Err(e)) => {
                let route = refresh_after(inner, &msg.topic, &e).await;
                next = retry::next_attempt(&e, &t.mq, t.addr, route.as_deref());
                e
            }
        };
        if e.outcome() != Outcome::NotStored
            || attempt > inner.cfg.retries
            || Instant::now() >= deadline
        {
            return Err(e);
        }
        if let Error::Backoff { retry_in, .. } = &e {
            tokio::time::sleep_until((Instant::now() + *retry_in).min(deadline)).await;
        }
    }
}

/// Sends UNREGISTER_CLIENT for the producer group to every known master.
pub(super) async fn unregister(inner: &Inner) {
    let req = UnregisterClientRequest {
        client_id: inner.inst.id.clone(),
        producer_group: Some(inner.cfg.group.clone()),
        consumer_group: None,
    };
    inner
        .inst
        .unregister_from(inner.inst.known_masters(), &req)
        .await;
}

pub(super) fn known_masters(inner: &Inner) -> Vec<SocketAddr> {
    inner.inst.known_masters()
}

fn validate(inner: &Inner, msgs: &[Message], form: Form) -> Result<()> {
    let Some(first) = msgs.first() else {
        return Err(Error::InvalidMessage("no messages to send".into()));
    };
    if msgs.len() > BATCH_RECORDS_MAX {
        return Err(Error::InvalidMessage(format!(
            "a batch holds at most {BATCH_RECORDS_MAX} messages, got {}",
            msgs.len()
        )));
    }
    let allowed = match form {
        Form::Request | Form::Reply => crate::message::RPC_PROPERTIES,
        Form::Single | Form::Batch | Form::Half => &[],
    };
    for m in msgs {
        m.validate_allowing(inner.cfg.message_bytes_max, allowed)?;
        if m.topic != first.topic {
            return Err(Error::InvalidMessage(
                "every message of a batch must have the same topic".into(),
            ));
        }
        if form == Form::Batch && m.is_scheduled() {
            return Err(Error::InvalidMessage(
                "delayed messages cannot be sent in a batch".into(),
            ));
        }
        if matches!(form, Form::Request | Form::Reply) && m.is_scheduled() {
            return Err(Error::InvalidMessage(
                "a request or a reply cannot be delayed or timed".into(),
            ));
        }
        if form == Form::Half && m.is_scheduled() {
            return Err(Error::InvalidMessage(
                "a transactional message cannot also be delayed or timed".into(),
            ));
        }
    }
    Ok(())
}

async fn choose(
    inner: &Inner,
    topic: &str,
    pick: &Pick<'_>,
    fixed: &mut Option<MessageQueue>,
    next: &Next,
    first: &Message,
) -> Result<Target> {
    let avoid = next.avoid.as_deref();
    let route = match inner.inst.route(topic).await {
        Ok(r) => r,
        Err(Error::NoRoute { .. }) if matches!(pick, Pick::Any) => {
            return auto_create_target(inner, topic, avoid).await
        }
        Err(Error::NoRoute { topic, detail }) => {
            return Err(Error::NoRoute {
                topic,
                detail: format!(
                "{detail} (sends to a chosen queue need the topic's route: create the topic first)"
            ),
            })
        }
        Err(e) => return Err(e),
    };
    let queues = &route.write_queues;
    if queues.is_empty() {
        return Err(Error::NoRoute {
            topic: topic.to_string(),
            detail: "no writable queue on any master".into(),
        });
    }
    let n = queues.len();
    let mq = match pick {
        // A new master of the broker name that just failed: the same queue again.
        Pick::Any if next.same_queue.as_ref().is_some_and(|q| queues.contains(q)) => {
            next.same_queue.clone().expect("checked just above")
        }
        Pick::Any => {
            let start = inner
                .round_robin
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (0..n)
                .map(|i| &queues[(start + i) % n])
                .find(|q| Some(q.broker_name.as_str()) != avoid)
                .unwrap_or(&queues[start % n])
                .clone()
        }
        Pick::Queue(mq) => (*mq).clone(),
        Pick::Select(sel) => match fixed {
            Some(mq) => mq.clone(),
            None => {
                let mq = queues[sel.select(queues, first) % n].clone();
                *fixed = Some(mq.clone());
                mq
            }
        },
    };
    let Some(addr) = route.master(&mq.broker_name) else {
        return Err(Error::NoRoute {
            topic: topic.to_string(),
            detail: format!("broker {} has no master", mq.broker_name),
        });
    };
    Ok(Target {
        shard: route.shard(&mq),
        mq,
        addr,
    })
}

/// A topic no broker has yet: send its first message to queue 0 of a master, which creates
/// the topic when `autoCreateTopicEnable` is on (RocketMQ's TBW102 path) and registers it.
async fn auto_create_target(inner: &Inner, topic: &str, avoid: Option<&str>) -> Result<Target> {
    let info = inner.inst.cluster_info().await?;
    let masters: Vec<(String, SocketAddr)> = info
        .brokers
        .iter()
        .filter_map(|b| {
            let addr = b.replicas.get(&MASTER_ID)?.address.parse().ok()?;
            Some((b.broker_name.clone(), addr))
        })
        .collect();
    if masters.is_empty() {
        return Err(Error::NoRoute {
            topic: topic.to_string(),
            detail: "the name servers know no master broker".into(),
        });
    }
    let start = inner
        .round_robin
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let n = masters.len();
    let (name, addr) = (0..n)
        .map(|i| &masters[(start + i) % n])
        .find(|(name, _)| Some(name.as_str()) != avoid)
        .unwrap_or(&masters[start % n])
        .clone();
    Ok(Target {
        mq: MessageQueue::new(topic, name, 0),
        addr,
        shard: None,
    })
}

/// How a send's records travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// One message, SEND_MESSAGE.
    Single,
    /// Messages of one topic, SEND_BATCH_MESSAGE, stored contiguously.
    Batch,
    /// One transactional half message: SEND_MESSAGE with the prepared sysflag and
    /// `TRAN_MSG=true`; the broker hides it until END_TRANSACTION.
    Half,
    /// A request of request-reply: SEND_MESSAGE whose message carries the request-reply
    /// properties.
    Request,
    /// A reply of request-reply: SEND_REPLY_MESSAGE.
    Reply,
}

impl Form {
    fn sys_flag(self) -> u32 {
        match self {
            Form::Half => record::sys_flag::TRANSACTION_PREPARED_TYPE,
            Form::Single | Form::Batch | Form::Request | Form::Reply => 0,
        }
    }

    fn code(self) -> RequestCode {
        match self {
            Form::Batch => RequestCode::SendBatchMessage,
            Form::Reply => RequestCode::SendReplyMessage,
            Form::Single | Form::Half | Form::Request => RequestCode::SendMessage,
        }
    }
}

/// What one send carries.
struct Records<'a> {
    msgs: &'a [Message],
    sharding_key: Option<&'a str>,
    form: Form,
    oneway: bool,
}

/// An encoded send frame.
struct Encoded {
    id: u64,
    frame: Vec<u8>,
    /// Encoded length of each record (for the message ids).
    lens: Vec<u32>,
    /// The records' unique keys: prefix and first counter value.
    uniq: (Arc<str>, u32),
}

/// The frame of one send: header, then the records encoded in place. The records'
/// properties blocks are encoded first, one after another into one buffer.
fn encode(
    inner: &Inner,
    conn: &crate::net::Connection,
    frame_max: usize,
    t: &Target,
    rec: &Records<'_>,
) -> Result<Encoded> {
    let (msgs, sharding_key, form, oneway) = (rec.msgs, rec.sharding_key, rec.form, rec.oneway);
    let batch = form == Form::Batch;
    let born_host = conn.local_addr();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let (uniq_prefix, uniq_first) = inner.unique_keys(msgs.len());
    let mut key = String::with_capacity(uniq_prefix.len() + 8);
    // Ends of each record's properties block in `props`.
    let mut props_end = Vec::with_capacity(msgs.len());
    let mut props = Vec::with_capacity(msgs.len() * PROPS_BYTES_GUESS);
    for (i, m) in msgs.iter().enumerate() {
        unique_key(&uniq_prefix, uniq_first.wrapping_add(i as u32), &mut key);
        m.encode_properties_into(&key, sharding_key, form == Form::Half, &mut props)?;
        props_end.push(props.len());
    }
    // Bodies over the threshold, compressed (when that makes them smaller), with their flags.
    let (over, kind) = (inner.cfg.compress_over, inner.cfg.compression);
    let packed: Vec<Option<Vec<u8>>> = msgs
        .iter()
        .map(|m| {
            (m.body.len() > over)
                .then(|| crate::compress::compress(kind, &m.body))
                .flatten()
        })
        .collect();
    let packed_flag = crate::compress::sys_flag_bits(kind);
    let record = |i: usize| {
        let m = &msgs[i];
        let start = if i == 0 { 0 } else { props_end[i - 1] };
        let (body, extra): (&[u8], u32) = match &packed[i] {
            Some(p) => (p, packed_flag),
            None => (&m.body, 0),
        };
        record::Message {
            topic: &m.topic,
            queue_id: t.mq.queue_id,
            flag: m.flag,
            sys_flag: form.sys_flag() | extra,
            born_timestamp_ms: now_ms,
            born_host: m.born_host.unwrap_or(born_host),
            store_host_v6: t.addr.is_ipv6(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: &props[start..props_end[i]],
        }
    };
    let mut lens = Vec::with_capacity(msgs.len());
    let mut body_len = 0usize;
    for i in 0..msgs.len() {
        let len = record::encoded_len(&record(i))?;
        body_len += len;
        // A record's length is a 32-bit field (encoded_len checks every part's maximum).
        lens.push(len as u32);
    }
    let header = SendRequest {
        producer_group: inner.cfg.group.clone(),
        topic: t.mq.topic.clone(),
        queue_id: t.mq.queue_id,
        batch,
        record_count: msgs.len() as u32,
    };
    let header_len = ringmq_wire::codec::Encode::encoded_len(&header)?;
    let total = frame::frame_len(header_len, body_len)?;
    if total > frame_max {
        return Err(Error::InvalidMessage(format!(
            "the request is {total} bytes, over the broker's frame maximum of {frame_max}"
        )));
    }
    debug_assert!(total >= PREFIX_BYTES);
    let (id, mut frame) = conn.begin_frame(form.code(), oneway, &header, body_len)?;
    for i in 0..msgs.len() {
        record::encode(&record(i), &mut frame)?;
    }
    Ok(Encoded {
        id,
        frame,
        lens,
        uniq: (uniq_prefix, uniq_first),
    })
}

async fn send_once(
    inner: &Inner,
    t: &Target,
    msgs: &[Message],
    sharding_key: Option<&str>,
    form: Form,
    deadline: Instant,
) -> Result<SendResult> {
    let (conn, hello) = inner.inst.broker_conn(t.addr, t.shard).await?;
    let frame_max = hello.map_or(frame::FRAME_BYTES_MAX, |h| h.frame_bytes_max);
    let rec = Records {
        msgs,
        sharding_key,
        form,
        oneway: false,
    };
    let Encoded {
        id,
        frame: buf,
        lens,
        uniq: (uniq_prefix, uniq_first),
    } = encode(inner, &conn, frame_max, t, &rec)?;
    let timeout = deadline
        .saturating_duration_since(Instant::now())
        .min(inner.inst.cfg.request_timeout)
        .max(Duration::from_millis(1));
    let answer = conn.call_frame(form.code(), id, buf, timeout).await?;
    let status = answer.status()?;
    if !status.message_stored() {
        return Err(answer.error(status));
    }
    let resp: SendResponse = answer.required_fields()?;
    // A reply the broker pushed without storing it (`storeReplyMessageEnable=false`).
    let (lens, msg_id) = match form == Form::Reply && resp.record_count == 0 {
        true => (Vec::new(), String::new()),
        false => (lens, resp.message_id(resp.first_physical_offset)),
    };
    let mut first_key = String::with_capacity(uniq_prefix.len() + 8);
    unique_key(&uniq_prefix, uniq_first, &mut first_key);
    let own_keys: Vec<Option<String>> = match msgs.iter().any(|m| m.unique_key.is_some()) {
        true => msgs.iter().map(|m| m.unique_key.clone()).collect(),
        false => Vec::new(),
    };
    if let Some(Some(own)) = own_keys.first() {
        first_key.clone_from(own);
    }
    let recall_handle = (resp.deliver_at_ms != 0).then(|| {
        ringmq_wire::recall::RecallHandle {
            topic: t.mq.topic.clone(),
            broker_name: t.mq.broker_name.clone(),
            deliver_at_ms: resp.deliver_at_ms,
            message_id: msg_id.clone(),
        }
        .encode()
    });
    Ok(SendResult {
        status: SendStatus::from_status(status),
        msg_id,
        recall_handle,
        unique_key: first_key,
        queue: MessageQueue::new(&t.mq.topic, &t.mq.broker_name, resp.queue_id),
        queue_offset: resp.first_queue_offset,
        store_timestamp_ms: resp.store_timestamp_ms,
        deliver_at_ms: (resp.deliver_at_ms != 0).then_some(resp.deliver_at_ms),
        records: RecordIds {
            store_host: resp.store_host,
            first_physical_offset: resp.first_physical_offset,
            lens,
            uniq_prefix,
            uniq_first,
            own_keys,
        },
    })
}

async fn oneway_once(inner: &Inner, t: &Target, msg: &Message, deadline: Instant) -> Result<()> {
    let (conn, hello) = inner.inst.broker_conn(t.addr, t.shard).await?;
    let frame_max = hello.map_or(frame::FRAME_BYTES_MAX, |h| h.frame_bytes_max);
    let msgs = std::slice::from_ref(msg);
    let rec = Records {
        msgs,
        sharding_key: None,
        form: Form::Single,
        oneway: true,
    };
    let buf = encode(inner, &conn, frame_max, t, &rec)?.frame;
    let timeout = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    conn.send_oneway(RequestCode::SendMessage, buf, timeout)
        .await
}
