//! SEND_MESSAGE / SEND_BATCH_MESSAGE: the batch arrives decoded and checked once
//! ([`CheckedBatch`]: every record decodes, CRC included); here it is held to the topic
//! (the header's topic, existing queues of one shard, size limits), appended to the shard's
//! store in one write without decoding it again, then acknowledge by the flush policy: at once for ASYNC_FLUSH
//! ("acked from page cache"), after the group-commit fdatasync that covers it for SYNC_FLUSH
//! ("acked after fdatasync"), FLUSH_DISK_TIMEOUT if that takes longer than
//! `syncFlushTimeout` (the record is stored; it is never a plain OK).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use ringmq_wire::code::Status;
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{SendRequest, SendResponse};

use crate::broker::shard::ack::{acknowledge, micros};
use crate::broker::shard::route::store_error;
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::limits;
use crate::net::reply::{Outcome, Reply};
use crate::store::{CheckedBatch, RecordMeta};

/// RocketMQ's default message trace topic (`TopicValidator.RMQ_SYS_TRACE_TOPIC`): a
/// reserved name that clients may write and that is auto-created like any topic.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// `queue_id` in a send header meaning "each record names its own queue".
pub const MULTI_QUEUE: u32 = u32::MAX;

/// Makes sure the topic exists (creating it when `autoCreateTopicEnable`) and is writable.
pub fn ensure_topic(shard: &Rc<Shard>, h: &SendRequest) -> Result<(), Outcome> {
    let broker = &shard.broker;
    if ringmq_wire::schedule::is_schedule_topic(&h.topic)
        || ringmq_wire::transaction::is_transaction_topic(&h.topic)
    {
        return Err(Reply::error(
            Status::NoPermission,
            format!("{} is a system topic: only the broker writes it", h.topic),
        )
        .into());
    }
    let table = broker.topics.snapshot();
    let cfg = match table.get(&h.topic) {
        Some(cfg) => cfg.clone(),
        None if broker.live.auto_create_topic() => {
            let n = broker.live.default_queue_count();
            let created = if h.topic == TRACE_TOPIC {
                // Reserved, but written by clients (RocketMQ's trace dispatcher).
                broker
                    .topics
                    .upsert_system(&h.topic, n, perm::READ_WRITE, Broker::now_ms())
            } else {
                broker.topics.upsert(
                    &h.topic,
                    n,
                    n,
                    perm::READ_WRITE,
                    BTreeMap::new(),
                    Broker::now_ms(),
                )
            };
            match created {
                Ok(cfg) => {
                    log::info!("auto-created topic {} with {n} queues", h.topic);
                    broker.topics_changed.notify(usize::MAX);
                    cfg
                }
                Err(e) => return Err(Reply::error(Status::MessageIllegal, e.to_string()).into()),
            }
        }
        None => {
            return Err(Reply::error(
                Status::TopicNotExist,
                format!(
                    "topic {} does not exist and autoCreateTopicEnable is off",
                    h.topic
                ),
            )
            .into())
        }
    };
    if !perm::is_writeable(cfg.perm) || !perm::is_writeable(broker.live.permission()) {
        return Err(Reply::error(
            Status::NoPermission,
            format!("topic {} is not writable on this broker", h.topic),
        )
        .into());
    }
    Ok(())
}

/// Checks every record of the (already decoded) batch against the topic's config and the
/// limits, and returns the shard that owns its queue(s).
pub fn owner_of_batch(
    shard: &Rc<Shard>,
    h: &SendRequest,
    body: &[u8],
    checked: &CheckedBatch,
) -> Result<u16, Reply> {
    let broker = &shard.broker;
    let table = broker.topics.snapshot();
    let Some(cfg) = table.get(&h.topic) else {
        return Err(Reply::error(
            Status::TopicNotExist,
            format!("topic {} does not exist", h.topic),
        ));
    };
    let illegal = |detail: String| Reply::error(Status::MessageIllegal, detail);
    let count = checked.metas.len();
    if count > limits::BATCH_RECORDS_MAX {
        return Err(illegal(format!(
            "batch over {} records",
            limits::BATCH_RECORDS_MAX
        )));
    }
    check_counts(h, count)?;
    let mut owner = None;
    for (i, m) in checked.metas.iter().enumerate() {
        check_target(h, i, m, body, cfg.write_queue_count, "write queues")?;
        if m.body_len > broker.live.max_message_size_bytes() {
            return Err(illegal(format!(
                "body of {} bytes is over maxMessageSize ({} bytes)",
                m.body_len,
                broker.live.max_message_size_bytes()
            )));
        }
        let o = cfg
            .queue_shards
            .get(m.queue_id as usize)
            .copied()
            .unwrap_or(0);
        match owner {
            None => owner = Some(o),
            Some(prev) if prev != o => {
                return Err(illegal(
                    "a multi-queue batch must target queues of one shard (see queue_shards in the route)"
                        .to_string(),
                ))
            }
            _ => {}
        }
    }
    owner.ok_or_else(|| illegal("no records".to_string()))
}

/// A send to a topic that does not exist yet is checked before `ensure_topic` may
/// auto-create the topic, so a request that is refused anyway (records for another topic or
/// queue, a wrong count) creates nothing.
pub fn check_before_auto_create(
    shard: &Shard,
    h: &SendRequest,
    body: &[u8],
    checked: &CheckedBatch,
) -> Result<(), Reply> {
    let broker = &shard.broker;
    if !broker.live.auto_create_topic() || broker.topics.snapshot().get(&h.topic).is_some() {
        return Ok(());
    }
    check_counts(h, checked.metas.len())?;
    let queues = broker.live.default_queue_count();
    for (i, m) in checked.metas.iter().enumerate() {
        check_target(h, i, m, body, queues, "queues in a new topic")?;
    }
    Ok(())
}

/// SEND_MESSAGE carries one record; `record_count` matches the body.
fn check_counts(h: &SendRequest, count: usize) -> Result<(), Reply> {
    if !h.batch && count != 1 {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!("SEND_MESSAGE carries one record, got {count}; use a batch"),
        ));
    }
    if count != h.record_count as usize {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "record_count is {}, the body holds {count} records",
                h.record_count
            ),
        ));
    }
    Ok(())
}

/// Record `i` is for the request's topic and queue, and the queue exists (`queues` of them).
fn check_target(
    h: &SendRequest,
    i: usize,
    m: &RecordMeta,
    body: &[u8],
    queues: u32,
    what: &str,
) -> Result<(), Reply> {
    let illegal = |detail: String| Reply::error(Status::MessageIllegal, detail);
    let topic = m.topic(body);
    if topic != h.topic {
        return Err(illegal(format!(
            "record {i} is for topic {topic}, the request for {}",
            h.topic
        )));
    }
    if h.queue_id != MULTI_QUEUE && m.queue_id != h.queue_id {
        return Err(illegal(format!(
            "record {i} is for queue {}, the request for {}",
            m.queue_id, h.queue_id
        )));
    }
    if m.queue_id >= queues {
        return Err(illegal(format!(
            "queue {} does not exist: topic {} has {queues} {what}",
            m.queue_id, h.topic
        )));
    }
    Ok(())
}

/// Appends a validated batch on its owning shard and acknowledges it by policy.
pub fn send(shard: &Rc<Shard>, h: SendRequest, body: &mut [u8], checked: &CheckedBatch) -> Outcome {
    let broker = &shard.broker;
    if broker.is_shutting_down() {
        return Reply::error(Status::ServiceNotAvailable, "broker is shutting down").into();
    }
    if let Some((status, why)) = broker.write_refusal(shard.serving_epoch.get()) {
        return Reply::error(status, why).into();
    }
    if let Some(why) = crate::broker::shard::ack::too_few_in_sync(broker) {
        return Reply::error(Status::InSyncReplicasNotEnough, why).into();
    }
    let now = Broker::now_ms();
    let real_queue = checked.metas[0].queue_id;
    // A half message is stored under the half topic, a scheduled one under the timer
    // topic: each with its own bytes and check.
    let mut rerouted = match crate::broker::shard::reroute::reroute_half(shard, &h, body, checked) {
        Ok(None) => {
            match crate::broker::shard::reroute::reroute_scheduled(shard, body, checked, now) {
                Ok(r) => r,
                Err(reply) => return reply.into(),
            }
        }
        Ok(Some(half)) => Some(half),
        Err(reply) => return reply.into(),
    };
    let hidden = rerouted.is_some();
    let (body, checked, deliver_at_ms) = match rerouted.as_mut() {
        None => (body, checked, 0),
        Some(r) => (&mut r.bytes[..], &r.checked, r.due_ms),
    };
    let timed = shard
        .metrics
        .borrow()
        .is_on()
        .then(crate::io::clock::Instant::now);
    let appended = shard.store.borrow_mut().append_checked(body, checked, now);
    let out = match appended {
        Ok(o) => o,
        Err(e) => return store_error(shard, e).into(),
    };
    if let Some(t0) = timed {
        let mut m = shard.metrics.borrow_mut();
        m.appended(micros(t0.elapsed()));
        m.stored(
            &h.topic,
            body.len() as u64,
            checked.metas.iter().map(|m| m.body_len as u64),
        );
    }
    let c = shard.counters();
    c.msgs_in
        .fetch_add(out.records.len() as u64, Ordering::Relaxed);
    c.bytes_in.fetch_add(body.len() as u64, Ordering::Relaxed);
    if deliver_at_ms != 0 {
        // Nothing to wake in the real topic yet: the delivery loop indexes it.
        shard.schedule_kick.notify(usize::MAX);
    } else if hidden {
        // A half message: nothing to wake until it is committed.
    } else {
        let mut last_q = None;
        for r in &out.records {
            if last_q != Some(r.queue_id) {
                shard.wake_queue(&h.topic, r.queue_id);
                last_q = Some(r.queue_id);
            }
        }
    }
    shard.log_appended.notify(usize::MAX);
    let first = out.records[0];
    let resp = SendResponse {
        queue_id: if hidden { real_queue } else { first.queue_id },
        first_queue_offset: first.queue_offset,
        record_count: out.records.len() as u32,
        first_physical_offset: first.physical_offset,
        store_host: broker.addr,
        store_timestamp_ms: out.store_timestamp_ms,
        deliver_at_ms,
    };
    acknowledge(shard, out.end_offset, resp)
}
