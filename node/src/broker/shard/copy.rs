//! Storing a copy of a stored message under another topic: the retry and dead-letter
//! topics of consumer groups (made here when missing) and the copies that go there, from a
//! consumer's send-back (the retry room) or a POP message whose invisible time ended (the POP
//! room). A copy is stored through the ordinary send path (the router: its checks, its shard
//! forwarding, its flush and replication promise), so it is acknowledged like any send.

use std::collections::BTreeMap;
use std::rc::Rc;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{retry_topic, SendRequest};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message, RecordView};
use ringmq_wire::schedule::SCHEDULE_KEYS;

use crate::broker::shard::route::Origin;
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::net::reply::{Outcome, Reply};

/// Properties the copy sets itself (dropped from the original first).
pub const REPLACED_KEYS: [&str; 8] = [
    keys::TRAN_MSG,
    keys::TIMER_OUT_MS,
    keys::REAL_TOPIC,
    keys::REAL_QID,
    keys::RECONSUME_TIME,
    keys::MAX_RECONSUME_TIMES,
    keys::RETRY_TOPIC,
    keys::ORIGIN_MESSAGE_ID,
];

/// Queues of a retry or dead-letter topic (RocketMQ: 1).
pub const RETRY_QUEUES: u32 = 1;

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
        // The copy's record was encoded just above.
        encoded_here: true,
    };
    shard.dispatch(send_frame, inner, None)
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

/// The copy of `orig` for `topic`, delivered after delay `level` (`None`: at once).
/// `original_topic` and `original_id` are the consumer's word, used when the stored
/// message does not say (empty: unknown).
pub fn copy_record(
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
