//! UpdateOffset, GetOffset and QueryOffset: a consumer group's committed offsets and a
//! queue's offsets, through the edge's native [`Admin`].
//!
//! - UpdateOffset commits the group's offset of a queue (native UPDATE_CONSUMER_OFFSET),
//!   GetOffset reads it (QUERY_CONSUMER_OFFSET; OFFSET_NOT_FOUND when the group never
//!   committed one). These are the same offsets the group's native and remoting consumers
//!   commit and read: one table per broker, whatever the protocol.
//! - QueryOffset answers a queue's offset by policy: BEGINNING the oldest offset still stored
//!   (GET_MIN_OFFSET), END one past the newest (GET_MAX_OFFSET), TIMESTAMP the first offset
//!   stored at or after the time (SEARCH_OFFSET_BY_TIMESTAMP).
//!
//! A queue is named as QueryRoute names it: its broker's name and its queue id. The edge
//! takes the id as the broker's queue id, which is what QueryRoute numbers when a topic's
//! read and write queue counts are equal (every topic ringmq makes); a topic with more read
//! than write queues numbers its extra read-only queues first, as RocketMQ's proxy does.

use ringmq_client::{Admin, MessageQueue};

use crate::convert::timestamp_ms;
use crate::pb::{self, Code, QueryOffsetPolicy};
use crate::receive::group_name;
use crate::route::topic_name;
use crate::status::{from_error, ok, status};

/// UpdateOffset.
pub(crate) async fn update_offset(
    admin: &Admin,
    req: pb::UpdateOffsetRequest,
) -> pb::UpdateOffsetResponse {
    let answer = |s| pb::UpdateOffsetResponse { status: Some(s) };
    let group = match group_name(req.group.as_ref()) {
        Ok(g) => g,
        Err(s) => return answer(s),
    };
    let mq = match native_queue(req.message_queue.as_ref()) {
        Ok(q) => q,
        Err(s) => return answer(s),
    };
    let Ok(offset) = u64::try_from(req.offset) else {
        return answer(status(
            Code::IllegalOffset,
            format!("offset {} is negative", req.offset),
        ));
    };
    match admin.commit_offset(&group, &mq, offset).await {
        Ok(()) => answer(ok()),
        Err(e) => answer(from_error(&e)),
    }
}

/// GetOffset.
pub(crate) async fn get_offset(admin: &Admin, req: pb::GetOffsetRequest) -> pb::GetOffsetResponse {
    let answer = |s, offset| pb::GetOffsetResponse {
        status: Some(s),
        offset,
    };
    let group = match group_name(req.group.as_ref()) {
        Ok(g) => g,
        Err(s) => return answer(s, 0),
    };
    let mq = match native_queue(req.message_queue.as_ref()) {
        Ok(q) => q,
        Err(s) => return answer(s, 0),
    };
    match admin.committed_offset(&group, &mq).await {
        Ok(Some(offset)) => answer(ok(), clamp(offset)),
        Ok(None) => answer(
            status(
                Code::OffsetNotFound,
                format!("consumer group {group} has no offset of {mq}"),
            ),
            0,
        ),
        Err(e) => answer(from_error(&e), 0),
    }
}

/// QueryOffset.
pub(crate) async fn query_offset(
    admin: &Admin,
    req: pb::QueryOffsetRequest,
) -> pb::QueryOffsetResponse {
    let answer = |s, offset| pb::QueryOffsetResponse {
        status: Some(s),
        offset,
    };
    let mq = match native_queue(req.message_queue.as_ref()) {
        Ok(q) => q,
        Err(s) => return answer(s, 0),
    };
    let found = match QueryOffsetPolicy::try_from(req.query_offset_policy) {
        Ok(QueryOffsetPolicy::Beginning) => admin.min_offset(&mq).await,
        Ok(QueryOffsetPolicy::End) => admin.max_offset(&mq).await,
        Ok(QueryOffsetPolicy::Timestamp) => {
            let Some(t) = req.timestamp.as_ref() else {
                return answer(
                    status(Code::BadRequest, "the TIMESTAMP policy needs a timestamp"),
                    0,
                );
            };
            admin.offset_at(&mq, timestamp_ms(t)).await
        }
        Err(_) => {
            return answer(
                status(
                    Code::BadRequest,
                    format!("unknown query offset policy {}", req.query_offset_policy),
                ),
                0,
            )
        }
    };
    match found {
        Ok(offset) => answer(ok(), clamp(offset)),
        Err(e) => answer(from_error(&e), 0),
    }
}

/// The native queue a request's message queue names: topic, broker name and queue id all
/// required.
pub(crate) fn native_queue(mq: Option<&pb::MessageQueue>) -> Result<MessageQueue, pb::Status> {
    let Some(mq) = mq else {
        return Err(status(Code::BadRequest, "message_queue is required"));
    };
    let topic = topic_name(mq.topic.as_ref())?;
    let broker = mq
        .broker
        .as_ref()
        .map(|b| b.name.as_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| status(Code::BadRequest, "message_queue names no broker"))?;
    let queue_id = u32::try_from(mq.id).map_err(|_| {
        status(
            Code::BadRequest,
            format!("queue id {} is not a queue of the topic", mq.id),
        )
    })?;
    Ok(MessageQueue::new(topic, broker.to_string(), queue_id))
}

fn clamp(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(broker: &str, id: i32) -> pb::MessageQueue {
        pb::MessageQueue {
            topic: Some(pb::Resource {
                resource_namespace: String::new(),
                name: "T".into(),
            }),
            id,
            broker: Some(pb::Broker {
                name: broker.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_queue_needs_a_topic_a_broker_and_a_queue_id() {
        let q = native_queue(Some(&queue("b", 3))).expect("valid");
        assert_eq!(
            (q.topic.as_str(), q.broker_name.as_str(), q.queue_id),
            ("T", "b", 3)
        );
        let code = |r: Result<MessageQueue, pb::Status>| r.err().map(|s| s.code);
        assert_eq!(code(native_queue(None)), Some(Code::BadRequest as i32));
        assert_eq!(
            code(native_queue(Some(&queue("", 0)))),
            Some(Code::BadRequest as i32)
        );
        assert_eq!(
            code(native_queue(Some(&queue("b", -1)))),
            Some(Code::BadRequest as i32)
        );
    }
}
