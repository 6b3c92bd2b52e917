//! Retries and dead letters (CONSUMER_SEND_MSG_BACK, 36). A consumer hands back a message
//! its listener failed; the broker stores a copy in the group's retry topic
//! (`%RETRY%<group>`, one queue) with the next delay level (`3 + reconsume_times`, RocketMQ's
//! rule: 10 s, 30 s, 1 min, ... 2 h with the default levels), delivered by the scheduled-message
//! mechanism; once the message has been reconsumed `max_reconsume_times` times (the
//! client's setting, else the group's `retry_max_times` on this broker, else
//! `maxReconsumeTimes`, 16), or when the consumer asks for it, the
//! copy goes to the dead-letter topic (`%DLQ%<group>`, one queue) at once.
//!
//! The copy keeps body, flag, born time and host, tags, keys, `UNIQ_KEY` and user properties,
//! and records `RETRY_TOPIC` (the topic first consumed), `ORIGIN_MESSAGE_ID`,
//! `RECONSUME_TIME` / the record's reconsume count (n + 1, for a dead letter too) and
//! `MAX_RECONSUME_TIMES`.
//!
//! The request runs on the shard whose log holds the message (forwarded there once); the
//! copy is then stored through the ordinary send path (its checks, its shard forwarding,
//! its flush and replication promise), so the answer is SUCCESS only once the copy is
//! stored as any send would be.

use std::collections::BTreeMap;
use std::rc::Rc;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{dlq_topic, retry_topic, ConsumerSendBackRequest, SendRequest};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Entry, Message, RecordView};
use ringmq_wire::schedule::SCHEDULE_KEYS;

use crate::broker::dispatch::dispatch;
use crate::broker::shard::route::{forward_or_refuse, store_error, Origin};
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::limits;
use crate::net::reply::{Outcome, Reply};
use crate::store::commitlog::shard_of_offset;

/// Queues of a retry or dead-letter topic (RocketMQ: 1).
pub const RETRY_QUEUES: u32 = 1;
/// The delay level of a message's first retry is this plus its reconsume count.
pub const FIRST_RETRY_LEVEL: u32 = 3;

/// Properties the copy sets itself (dropped from the original first).
const REPLACED_KEYS: [&str; 8] = [
    keys::TRAN_MSG,
    keys::TIMER_OUT_MS,
    keys::REAL_TOPIC,
    keys::REAL_QID,
    keys::RECONSUME_TIME,
    keys::MAX_RECONSUME_TIMES,
    keys::RETRY_TOPIC,
    keys::ORIGIN_MESSAGE_ID,
];

/// Where a sent-back message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The retry topic, delivered after this delay level.
    Retry {
        level: u32,
    },
    DeadLetter,
}

/// Decides where a message reconsumed `reconsume_times` times goes.
pub fn destination(
    reconsume_times: i32,
    delay_level: i32,
    max_reconsume_times: u32,
    levels: usize,
) -> Destination {
    let n = u32::try_from(reconsume_times).unwrap_or(0);
    if delay_level < 0 || n >= max_reconsume_times {
        return Destination::DeadLetter;
    }
    let level = match u32::try_from(delay_level) {
        Ok(0) | Err(_) => FIRST_RETRY_LEVEL.saturating_add(n),
        Ok(l) => l,
    };
    Destination::Retry {
        level: level.clamp(1, u32::try_from(levels.max(1)).unwrap_or(u32::MAX)),
    }
}

/// Creates `%RETRY%<group>` if missing (a clustering group heartbeats, or sends back).
pub fn ensure_retry_topic(shard: &Shard, group: &str) {
    ensure_group_topic(shard, &retry_topic(group));
}

/// Creates a retry or dead-letter topic (one queue) if missing; the error when it cannot.
pub fn ensure_group_topic(shard: &Shard, topic: &str) -> Option<String> {
    let broker = &shard.broker;
    if broker.topics.snapshot().get(topic).is_some() {
        return None;
    }
    if !broker.is_master() {
        // A slave takes its topics from its master.
        return None;
    }
    match broker.topics.upsert(
        topic,
        RETRY_QUEUES,
        RETRY_QUEUES,
        perm::READ_WRITE,
        BTreeMap::new(),
        Broker::now_ms(),
    ) {
        Ok(_) => {
            log::info!("created {topic} ({RETRY_QUEUES} queue)");
            broker.topics_changed.notify(usize::MAX);
            None
        }
        Err(e) => Some(format!("creating {topic}: {e}")),
    }
}

/// CONSUMER_SEND_MSG_BACK.
pub fn send_back(
    shard: &Rc<Shard>,
    h: ConsumerSendBackRequest,
    frame: Vec<u8>,
    origin: Origin,
) -> Outcome {
    if let Err(reply) = check(shard, &h) {
        return reply.into();
    }
    let owner = shard_of_offset(h.physical_offset);
    if owner != shard.id {
        if usize::from(owner) < shard.broker.mailboxes.len() {
            return forward_or_refuse(shard, owner, frame, origin);
        }
        return Reply::error(
            Status::QueryNotFound,
            format!("no message at physical offset {}", h.physical_offset),
        )
        .into();
    }
    let stored = match shard.store.borrow().read_record(h.physical_offset) {
        Ok(bytes) => bytes,
        Err(e) => return store_error(shard, e).into(),
    };
    let view = match record::decode(&stored) {
        Ok(Entry::Record(v)) => v,
        Ok(Entry::Blank { .. }) | Err(_) => {
            return Reply::error(
                Status::QueryNotFound,
                format!("no message at physical offset {}", h.physical_offset),
            )
            .into()
        }
    };
    let max = if h.max_reconsume_times > 0 {
        h.max_reconsume_times
    } else {
        shard.broker.retry_max_times(&h.consumer_group)
    };
    let dest = destination(
        view.reconsume_times,
        h.delay_level,
        max,
        shard.broker.config.message_delay_level_ms.len(),
    );
    let topic = match dest {
        Destination::Retry { .. } => retry_topic(&h.consumer_group),
        Destination::DeadLetter => dlq_topic(&h.consumer_group),
    };
    if let Some(e) = ensure_group_topic(shard, &topic) {
        return Reply::error(Status::SystemError, e).into();
    }
    let level = match dest {
        Destination::Retry { level } => Some(level),
        Destination::DeadLetter => None,
    };
    let copy = match copy_record(
        &view,
        &h.original_topic,
        &h.original_message_id,
        &topic,
        level,
        max,
    ) {
        Ok(c) => c,
        Err(e) => return Reply::error(Status::MessageIllegal, e).into(),
    };
    if dest == Destination::DeadLetter {
        log::info!(
            "message {} of group {} dead-lettered after {} reconsumes",
            h.original_message_id,
            h.consumer_group,
            view.reconsume_times
        );
    }
    let dead = dest == Destination::DeadLetter;
    let group = h.consumer_group;
    match store_copy(shard, topic, copy) {
        Outcome::Now(r) => {
            note_stored(shard, &r, &group, dead);
            answer(r).into()
        }
        Outcome::Later(fut) => {
            let shard = Rc::clone(shard);
            Outcome::later(async move {
                let r = fut.await;
                note_stored(&shard, &r, &group, dead);
                answer(r)
            })
        }
    }
}

/// Stores a copy made by this module in `topic` (queue 0) through the ordinary send path
/// (its checks, its shard forwarding, its flush and replication promise).
pub fn store_copy(shard: &Rc<Shard>, topic: String, copy: Vec<u8>) -> Outcome {
    let send = SendRequest {
        producer_group: String::new(),
        topic,
        queue_id: 0,
        batch: false,
        record_count: 1,
    };
    let mut send_frame = Vec::with_capacity(copy.len() + 128);
    if let Err(e) = ringmq_wire::frame::encode_request(
        &mut send_frame,
        RequestCode::SendMessage,
        false,
        0,
        &send,
        &copy,
    ) {
        return Reply::error(Status::SystemError, format!("encoding the copy: {e}")).into();
    }
    let inner = Origin {
        forwarded: false,
        zero_copy: false,
        conn: None,
    };
    dispatch(shard, send_frame, inner, None)
}

/// The copy of a POP message whose invisible time ended, for `topic` (the group's pop retry
/// topic, or its dead-letter topic past `max` reconsumes): delivered at once, its reconsume
/// count raised.
pub fn revive_copy(
    orig: &RecordView<'_>,
    first_topic: &str,
    topic: &str,
    max: u32,
) -> Result<Vec<u8>, String> {
    copy_record(orig, first_topic, "", topic, None, max)
}

/// Counts a copy the retry or dead-letter topic stored (metrics).
fn note_stored(shard: &Shard, send: &Reply, group: &str, dead: bool) {
    if send.status.message_stored() {
        let mut m = shard.metrics.borrow_mut();
        if dead {
            m.dead_lettered(group);
        } else {
            m.retried(group);
        }
    }
}

fn check(shard: &Shard, h: &ConsumerSendBackRequest) -> Result<(), Reply> {
    if let Err(e) = limits::validate_group_name(&h.consumer_group) {
        return Err(Reply::error(Status::MessageIllegal, e.to_string()));
    }
    if h.delay_level < -1 {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "delay level {} is not -1 (dead letter), 0 (next) or a level",
                h.delay_level
            ),
        ));
    }
    if let Some(refusal) = shard.broker.controller_refusal() {
        return Err(refusal);
    }
    if !shard.broker.is_master() {
        return Err(Reply::error(
            Status::ServiceNotAvailable,
            "this broker is a slave: send messages back to the master",
        ));
    }
    Ok(())
}

/// The copy of `orig` for `topic`, delivered after delay `level` (`None`: at once).
/// `original_topic` and `original_id` are the consumer's word, used when the stored
/// message does not say (empty: unknown).
fn copy_record(
    orig: &RecordView<'_>,
    original_topic: &str,
    original_id: &str,
    topic: &str,
    level: Option<u32>,
    max: u32,
) -> Result<Vec<u8>, String> {
    // Both copies count the delivery that failed (RocketMQ does the same).
    let next = orig.reconsume_times.max(0).saturating_add(1);
    // The topic first consumed: kept from an earlier retry, else the request's, else the
    // stored message's own (RocketMQ's; the C++ client sends no originTopic).
    let retry_topic_value = orig
        .property(keys::RETRY_TOPIC)
        .filter(|t| !t.is_empty())
        .or(Some(original_topic).filter(|t| !t.is_empty()))
        .unwrap_or(orig.topic)
        .to_owned();
    let origin_id = orig
        .property(keys::ORIGIN_MESSAGE_ID)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            if original_id.is_empty() {
                record::message_id(orig.store_host, orig.physical_offset)
            } else {
                original_id.to_owned()
            }
        });
    let next_s = next.to_string();
    let max_s = max.to_string();
    let level_s = level.map(|l| l.to_string());
    let kept = properties::iter(orig.properties)
        .filter_map(|p| p.ok())
        .filter(|(k, _)| !SCHEDULE_KEYS.contains(k) && !REPLACED_KEYS.contains(k));
    let added = [
        (keys::RETRY_TOPIC, retry_topic_value.as_str()),
        (keys::ORIGIN_MESSAGE_ID, origin_id.as_str()),
        (keys::RECONSUME_TIME, next_s.as_str()),
        (keys::MAX_RECONSUME_TIMES, max_s.as_str()),
    ];
    let mut props = Vec::with_capacity(orig.properties.len() + 128);
    properties::encode(
        kept.chain(added)
            .chain(level_s.as_deref().map(|l| (keys::DELAY, l))),
        &mut props,
    )
    .map_err(|e| format!("properties: {e}"))?;
    let base = orig.message();
    let msg = Message {
        topic,
        queue_id: 0,
        reconsume_times: next,
        properties: &props,
        // A committed transactional message is retried as a plain one.
        sys_flag: base.sys_flag & !record::sys_flag::TRANSACTION_MASK,
        ..base
    };
    let len = record::encoded_len(&msg).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(len);
    record::encode(&msg, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The send-back answer from the copy's send answer: stored (whatever the flush or
/// replication wait said, the copy is in the log) is SUCCESS, anything else is passed on.
fn answer(send: Reply) -> Reply {
    if send.status.message_stored() {
        return Reply::ok(Empty);
    }
    Reply {
        body: Default::default(),
        ..send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_grow_then_dead_letter() {
        assert_eq!(destination(0, 0, 16, 18), Destination::Retry { level: 3 });
        assert_eq!(destination(5, 0, 16, 18), Destination::Retry { level: 8 });
        // Past the highest level: the highest.
        assert_eq!(destination(15, 0, 16, 18), Destination::Retry { level: 18 });
        assert_eq!(destination(16, 0, 16, 18), Destination::DeadLetter);
        assert_eq!(destination(0, -1, 16, 18), Destination::DeadLetter);
        assert_eq!(destination(2, 7, 16, 18), Destination::Retry { level: 7 });
        assert_eq!(destination(0, 0, 0, 18), Destination::DeadLetter);
    }
}
