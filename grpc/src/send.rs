//! SendMessage: each gRPC message becomes a native message ([`crate::convert::to_native`])
//! sent by the edge's native producer: a message with a message group with the group as its
//! sharding key (one queue per group, in send order: FIFO), a delayed one with its delivery
//! time, several plain ones as one batch (one queue, contiguous offsets), a transactional
//! one as a half ([`crate::transaction`]). Each entry
//! answers the client's own message id; the response's status is the entries' common code,
//! or MULTIPLE_RESULTS when they differ (as RocketMQ's proxy answers).

use std::time::SystemTime;

use ringmq_client::{Message, Producer, SendResult, SendStatus};

use crate::convert::to_native;
use crate::pb::{self, Code, MessageType};
use crate::route::topic_name;
use crate::status::{from_error, ok, status};
use crate::transaction::Transactions;

/// Most messages one SendMessage may carry.
pub(crate) const SEND_MESSAGES_MAX: usize = 1024;

/// SendMessage. `peer`: the gRPC client's address, stored as each record's BORNHOST (as
/// RocketMQ's proxy does); unknown, the edge's own.
pub(crate) async fn send_message(
    producer: &Producer,
    txn: &Transactions,
    req: pb::SendMessageRequest,
    peer: Option<std::net::SocketAddr>,
) -> pb::SendMessageResponse {
    let refuse = |s: pb::Status| pb::SendMessageResponse {
        status: Some(s),
        entries: Vec::new(),
    };
    if req.messages.is_empty() {
        return refuse(status(Code::BadRequest, "no message to send"));
    }
    if req.messages.len() > SEND_MESSAGES_MAX {
        return refuse(status(
            Code::PayloadTooLarge,
            format!("more than {SEND_MESSAGES_MAX} messages in one request"),
        ));
    }
    let topic = match topic_name(req.messages[0].topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return refuse(s),
    };
    let now = SystemTime::now();
    let mut msgs = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        let half = m
            .system_properties
            .as_ref()
            .is_some_and(|s| s.message_type == MessageType::Transaction as i32);
        match to_native(m, &topic, now) {
            Ok((mut msg, group)) => {
                msg.born_host = peer;
                msgs.push((msg, group, half))
            }
            Err(s) => return refuse(s),
        }
    }
    let plain = msgs
        .iter()
        .all(|(m, g, half)| g.is_none() && !m.is_scheduled() && !half);
    let entries = if msgs.len() > 1 && plain {
        send_batch(producer, msgs.into_iter().map(|(m, _, _)| m).collect()).await
    } else {
        let mut out = Vec::with_capacity(msgs.len());
        for (m, group, half) in msgs {
            out.push(match half {
                true => txn.send_half(&topic, m).await,
                false => send_one(producer, m, group.as_deref()).await,
            });
        }
        out
    };
    pb::SendMessageResponse {
        status: Some(overall(&entries)),
        entries,
    }
}

async fn send_one(producer: &Producer, m: Message, group: Option<&str>) -> pb::SendResultEntry {
    let id = m.unique_key.clone().unwrap_or_default();
    let result = match group {
        Some(g) => producer.send_ordered(m, g).await,
        None => producer.send(m).await,
    };
    match result {
        Ok(r) => entry(&r, id, 0),
        Err(e) => failed(from_error(&e)),
    }
}

async fn send_batch(producer: &Producer, msgs: Vec<Message>) -> Vec<pb::SendResultEntry> {
    match producer.send_batch(&msgs).await {
        Ok(r) => msgs
            .iter()
            .enumerate()
            .map(|(i, m)| entry(&r, m.unique_key.clone().unwrap_or_default(), i as u64))
            .collect(),
        Err(e) => {
            let s = from_error(&e);
            msgs.iter().map(|_| failed(s.clone())).collect()
        }
    }
}

/// RecallMessage: withdraws a scheduled message by the recall handle its send answered.
pub(crate) async fn recall_message(
    producer: &Producer,
    req: pb::RecallMessageRequest,
) -> pb::RecallMessageResponse {
    let answer = |s, id: String| pb::RecallMessageResponse {
        status: Some(s),
        message_id: id,
    };
    let topic = match topic_name(req.topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return answer(s, String::new()),
    };
    if req.recall_handle.is_empty() {
        return answer(
            status(Code::BadRequest, "recall handle is empty"),
            String::new(),
        );
    }
    match producer.recall_in(&topic, &req.recall_handle).await {
        Ok(id) => answer(ok(), id),
        Err(ringmq_client::Error::InvalidMessage(m)) => {
            answer(status(Code::BadRequest, m), String::new())
        }
        Err(e) => answer(from_error(&e), String::new()),
    }
}

/// The entry of record `i` of a stored send.
fn entry(r: &SendResult, message_id: String, i: u64) -> pb::SendResultEntry {
    let s = match r.status {
        SendStatus::Ok => ok(),
        SendStatus::FlushDiskTimeout => status(
            Code::MasterPersistenceTimeout,
            "send message failed, sendStatus=FLUSH_DISK_TIMEOUT",
        ),
        SendStatus::FlushSlaveTimeout => status(
            Code::SlavePersistenceTimeout,
            "send message failed, sendStatus=FLUSH_SLAVE_TIMEOUT",
        ),
        SendStatus::SlaveNotAvailable => status(
            Code::HaNotAvailable,
            "send message failed, sendStatus=SLAVE_NOT_AVAILABLE",
        ),
    };
    pb::SendResultEntry {
        status: Some(s),
        message_id,
        transaction_id: String::new(),
        offset: i64::try_from(r.queue_offset.saturating_add(i)).unwrap_or(i64::MAX),
        recall_handle: r.recall_handle.clone().unwrap_or_default(),
    }
}

fn failed(s: pb::Status) -> pb::SendResultEntry {
    pb::SendResultEntry {
        status: Some(s),
        ..Default::default()
    }
}

/// The entries' common code, or MULTIPLE_RESULTS.
fn overall(entries: &[pb::SendResultEntry]) -> pb::Status {
    let codes: Vec<&pb::Status> = entries.iter().filter_map(|e| e.status.as_ref()).collect();
    match codes.first() {
        None => status(Code::InternalServerError, "send status is empty"),
        Some(first) if codes.iter().all(|c| c.code == first.code) => (*first).clone(),
        Some(_) => status(Code::MultipleResults, "MULTIPLE_RESULTS"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_entries_are_multiple_results() {
        let a = failed(ok());
        let b = failed(status(Code::TopicNotFound, "x"));
        assert_eq!(overall(&[a.clone(), a.clone()]).code, Code::Ok as i32);
        assert_eq!(overall(&[a, b]).code, Code::MultipleResults as i32);
        assert_eq!(overall(&[]).code, Code::InternalServerError as i32);
    }
}
