//! ReceiveMessage, AckMessage and ChangeInvisibleDuration: POP consumption through the
//! edge's native [`EdgeConsumer`].
//!
//! ReceiveMessage pops from the broker the request's queue names (any of its queues: POP
//! picks), long polling for the request's `long_polling_timeout` clamped to 5–20 s, and
//! answers on its stream as RocketMQ's proxy does: `{status OK}`, then the delivery
//! timestamp (when the messages left the server), then one response per message, or a
//! single MESSAGE_NOT_FOUND when nothing came. The invisible duration must be
//! at least 10 s unless `auto_renew` is set; then the message is popped invisible for
//! [`AUTO_RENEW_INVISIBLE`] and the edge keeps renewing it ([`crate::renew`]) until the
//! client acks it or is gone.
//!
//! A FIFO group (its orderly flag on the brokers: [`Groups`]) is popped orderly, as
//! RocketMQ pops a FIFO group: a queue's messages come in batches in queue order, the next
//! batch of a queue is not handed out while a message of the last one is invisible and
//! unacked, and when its invisible time ends the queue is delivered again from the first
//! unacked message (the ones acked behind it are not). The SDKs consume (and ack) different
//! message groups of one batch concurrently, so acks come in any order; the native orderly
//! POP takes them so. An orderly message's invisible time cannot change (the native orderly
//! POP refuses it), so `auto_renew` does not keep it past its 60 s: a FIFO message not acked
//! within that time is delivered again.
//!
//! Acks and invisible-time changes carry the receipt handle the message came with; the
//! handle names its broker, queue and offset, so the edge keeps nothing per message but the
//! `auto_renew` records: for those, the native handle of the latest renewal is used.

use std::time::{Duration, SystemTime};

use ringmq_client::consumer::{EdgeConsumer, PopCall};
use ringmq_client::MessageSelector;

use crate::convert::{epoch_ms, ms_timestamp, std_duration, to_pb};
use crate::groups::Groups;
use crate::handle;
use crate::pb::{self, receive_message_response::Content, Code, FilterType};
use crate::renew::{Renewals, AUTO_RENEW_INVISIBLE};
use crate::route::topic_name;
use crate::settings::{LONG_POLLING_MAX, LONG_POLLING_MIN, RECEIVE_BATCH_SIZE};
use crate::status::{from_error, ok, status};

/// Shortest invisible duration a ReceiveMessage may ask for (RocketMQ's
/// `minInvisibleTimeMillsForRecv`).
pub(crate) const INVISIBLE_MIN: Duration = Duration::from_secs(10);
/// Longest invisible duration (RocketMQ's `maxInvisibleTimeMills`, 12 h).
pub(crate) const INVISIBLE_MAX: Duration = Duration::from_secs(12 * 3600);
/// Most entries one AckMessage may carry.
pub(crate) const ACK_ENTRIES_MAX: usize = 1024;

/// ReceiveMessage: the responses of its stream, in order. `client_id`: the client's
/// `x-mq-client-id`, whose `auto_renew` messages are renewed while it is connected.
pub(crate) async fn receive_message(
    consumer: &EdgeConsumer,
    renewals: &Renewals,
    groups: &Groups,
    client_id: Option<&str>,
    req: pb::ReceiveMessageRequest,
) -> Vec<pb::ReceiveMessageResponse> {
    let one = |s: pb::Status| {
        vec![pb::ReceiveMessageResponse {
            content: Some(Content::Status(s)),
        }]
    };
    let mut call = match pop_call(&req) {
        Ok(c) => c,
        Err(s) => return one(s),
    };
    if groups.policy(&call.group).await.orderly {
        // A FIFO group: orderly POP (see the module docs).
        call.orderly = true;
    }
    let shown_invisible = call.invisible;
    match consumer.pop(&call).await {
        Ok(msgs) if msgs.is_empty() => one(status(Code::MessageNotFound, "no new message")),
        Ok(msgs) => {
            let mut out = Vec::with_capacity(msgs.len() + 1);
            out.push(pb::ReceiveMessageResponse {
                content: Some(Content::Status(ok())),
            });
            // When the messages left the server: the Python SDK's push consumer reads it
            // for every received batch (and fails the batch without it).
            out.push(pb::ReceiveMessageResponse {
                content: Some(Content::DeliveryTimestamp(ms_timestamp(epoch_ms(
                    SystemTime::now(),
                )))),
            });
            for m in &msgs {
                let msg = to_pb(m, shown_invisible);
                if req.auto_renew {
                    renew_later(renewals, client_id, &call, &msg, &m.receipt_handle);
                }
                out.push(pb::ReceiveMessageResponse {
                    content: Some(Content::Message(msg)),
                });
            }
            out
        }
        Err(e) => one(from_error(&e)),
    }
}

/// Records an `auto_renew` message for renewal under the handle its client holds.
fn renew_later(
    renewals: &Renewals,
    client_id: Option<&str>,
    call: &PopCall,
    msg: &pb::Message,
    native: &str,
) {
    let Some(client_handle) = msg
        .system_properties
        .as_ref()
        .and_then(|p| p.receipt_handle.as_deref())
    else {
        return;
    };
    let Some(client_id) = client_id else {
        log::info!("auto_renew without x-mq-client-id: {client_handle} is not renewed");
        return;
    };
    if !renewals.add(
        client_id,
        &call.group,
        &call.topic,
        client_handle,
        native,
        call.invisible,
    ) {
        log::warn!(
            "auto_renew: {} messages renewed already, {client_handle} is not",
            renewals.len()
        );
    }
}

/// The native handle to use for a client's `receipt_handle`: the latest renewal's when the
/// edge was renewing it (the renewal ends here), else the one inside it; and the record's
/// physical offset when the handle carries one.
async fn current_handle(renewals: &Renewals, receipt_handle: &str) -> (String, Option<u64>) {
    let (native, physical_offset) = handle::inward(receipt_handle);
    match renewals.take(receipt_handle).await {
        Some(current) => (current, physical_offset),
        None => (native.to_string(), physical_offset),
    }
}

/// The native POP of a ReceiveMessage, its fields checked as RocketMQ's proxy checks them.
fn pop_call(req: &pb::ReceiveMessageRequest) -> Result<PopCall, pb::Status> {
    let group = group_name(req.group.as_ref())?;
    let mq = req.message_queue.as_ref();
    let topic = topic_name(mq.and_then(|q| q.topic.as_ref()))?;
    let broker_name = mq
        .and_then(|q| q.broker.as_ref())
        .map(|b| b.name.clone())
        .filter(|n| !n.is_empty());
    let poll = req
        .long_polling_timeout
        .as_ref()
        .map_or(LONG_POLLING_MAX, std_duration)
        .clamp(LONG_POLLING_MIN, LONG_POLLING_MAX);
    let invisible = if req.auto_renew {
        AUTO_RENEW_INVISIBLE
    } else {
        let d = req
            .invisible_duration
            .as_ref()
            .map_or(Duration::ZERO, std_duration);
        if !(INVISIBLE_MIN..=INVISIBLE_MAX).contains(&d) {
            return Err(status(
                Code::IllegalInvisibleTime,
                format!(
                    "the invisible time must be {}..={} ms",
                    INVISIBLE_MIN.as_millis(),
                    INVISIBLE_MAX.as_millis()
                ),
            ));
        }
        d
    };
    let selector = selector(req.filter_expression.as_ref())?;
    let max = req.batch_size.clamp(1, RECEIVE_BATCH_SIZE) as u32;
    Ok(PopCall {
        group,
        topic,
        broker_name,
        selector,
        max,
        invisible,
        poll,
        init_last: false,
        orderly: false,
    })
}

pub(crate) fn selector(f: Option<&pb::FilterExpression>) -> Result<MessageSelector, pb::Status> {
    let (kind, expr) = f.map_or((FilterType::Tag as i32, ""), |f| {
        (f.r#type, f.expression.as_str())
    });
    let s = if kind == FilterType::Sql as i32 {
        MessageSelector::sql(expr)
    } else {
        MessageSelector::tag(if expr.trim().is_empty() { "*" } else { expr })
    };
    s.check()
        .map_err(|e| status(Code::IllegalFilterExpression, e.to_string()))?;
    Ok(s)
}

/// The consumer group's name, checked as RocketMQ's proxy checks it.
pub(crate) fn group_name(r: Option<&pb::Resource>) -> Result<String, pb::Status> {
    let name = r.map(|r| r.name.as_str()).unwrap_or("");
    if name.is_empty()
        || name.len() > 255
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '%' || c == '|')
    {
        return Err(status(
            Code::IllegalConsumerGroup,
            format!("consumer group {name:?} is empty, over 255 characters, or not [%A-Za-z0-9_-]"),
        ));
    }
    Ok(name.to_string())
}

/// AckMessage.
pub(crate) async fn ack_message(
    consumer: &EdgeConsumer,
    renewals: &Renewals,
    req: pb::AckMessageRequest,
) -> pb::AckMessageResponse {
    let refuse = |s| pb::AckMessageResponse {
        status: Some(s),
        entries: Vec::new(),
    };
    let group = match group_name(req.group.as_ref()) {
        Ok(g) => g,
        Err(s) => return refuse(s),
    };
    let topic = match topic_name(req.topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return refuse(s),
    };
    if req.entries.is_empty() || req.entries.len() > ACK_ENTRIES_MAX {
        return refuse(status(
            Code::BadRequest,
            format!("an ack carries 1..={ACK_ENTRIES_MAX} entries"),
        ));
    }
    let mut entries = Vec::with_capacity(req.entries.len());
    for e in &req.entries {
        let (native, _) = current_handle(renewals, &e.receipt_handle).await;
        let s = match consumer.ack(&group, &topic, &native).await {
            Ok(()) => ok(),
            Err(ringmq_client::Error::InvalidMessage(m)) => status(Code::InvalidReceiptHandle, m),
            Err(err) => from_error(&err),
        };
        entries.push(pb::AckMessageResultEntry {
            message_id: e.message_id.clone(),
            receipt_handle: e.receipt_handle.clone(),
            status: Some(s),
        });
    }
    let first = entries[0].status.clone().unwrap_or_else(ok);
    let same = entries
        .iter()
        .all(|e| e.status.as_ref().map(|s| s.code) == Some(first.code));
    pb::AckMessageResponse {
        status: Some(if same {
            first
        } else {
            status(Code::MultipleResults, "MULTIPLE_RESULTS")
        }),
        entries,
    }
}

/// ForwardMessageToDeadLetterQueue: the message goes to the group's dead-letter topic at
/// once and is acked.
pub(crate) async fn forward_to_dead_letter(
    consumer: &EdgeConsumer,
    renewals: &Renewals,
    req: pb::ForwardMessageToDeadLetterQueueRequest,
) -> pb::ForwardMessageToDeadLetterQueueResponse {
    let answer = |s| pb::ForwardMessageToDeadLetterQueueResponse { status: Some(s) };
    let group = match group_name(req.group.as_ref()) {
        Ok(g) => g,
        Err(s) => return answer(s),
    };
    let topic = match topic_name(req.topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return answer(s),
    };
    let (native, Some(physical_offset)) = current_handle(renewals, &req.receipt_handle).await
    else {
        return answer(status(
            Code::InvalidReceiptHandle,
            "not a receipt handle this edge gave out",
        ));
    };
    match consumer
        .dead_letter(&group, &topic, &native, physical_offset, &req.message_id)
        .await
    {
        Ok(()) => answer(ok()),
        Err(ringmq_client::Error::InvalidMessage(m)) => {
            answer(status(Code::InvalidReceiptHandle, m))
        }
        Err(e) => answer(from_error(&e)),
    }
}

/// ChangeInvisibleDuration.
pub(crate) async fn change_invisible_duration(
    consumer: &EdgeConsumer,
    renewals: &Renewals,
    req: pb::ChangeInvisibleDurationRequest,
) -> pb::ChangeInvisibleDurationResponse {
    let answer = |s, handle: String| pb::ChangeInvisibleDurationResponse {
        status: Some(s),
        receipt_handle: handle,
    };
    let group = match group_name(req.group.as_ref()) {
        Ok(g) => g,
        Err(s) => return answer(s, String::new()),
    };
    let topic = match topic_name(req.topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return answer(s, String::new()),
    };
    let d = req
        .invisible_duration
        .as_ref()
        .map_or(Duration::ZERO, std_duration);
    if d.is_zero() || d > INVISIBLE_MAX {
        return answer(
            status(
                Code::IllegalInvisibleTime,
                format!(
                    "the invisible time must be 1..={} ms",
                    INVISIBLE_MAX.as_millis()
                ),
            ),
            String::new(),
        );
    }
    let (native, physical_offset) = current_handle(renewals, &req.receipt_handle).await;
    match consumer.change_invisible(&group, &topic, &native, d).await {
        Ok(h) => answer(
            ok(),
            match physical_offset {
                Some(off) => handle::outward(&h, off),
                None => h,
            },
        ),
        Err(ringmq_client::Error::InvalidMessage(m)) => {
            answer(status(Code::InvalidReceiptHandle, m), String::new())
        }
        Err(e) => answer(from_error(&e), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(invisible_s: i64, auto_renew: bool) -> pb::ReceiveMessageRequest {
        pb::ReceiveMessageRequest {
            group: Some(pb::Resource {
                resource_namespace: String::new(),
                name: "G".into(),
            }),
            message_queue: Some(pb::MessageQueue {
                topic: Some(pb::Resource {
                    resource_namespace: String::new(),
                    name: "T".into(),
                }),
                ..Default::default()
            }),
            batch_size: 100,
            invisible_duration: Some(prost_types::Duration {
                seconds: invisible_s,
                nanos: 0,
            }),
            auto_renew,
            long_polling_timeout: Some(prost_types::Duration {
                seconds: 60,
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_receive_is_clamped_and_checked_as_rocketmq_checks_it() {
        let c = pop_call(&request(30, false)).expect("valid");
        assert_eq!(c.max, 32);
        assert_eq!(c.poll, LONG_POLLING_MAX);
        assert_eq!(c.invisible, Duration::from_secs(30));
        let short = pop_call(&request(1, false)).err().map(|s| s.code);
        assert_eq!(short, Some(Code::IllegalInvisibleTime as i32));
        let renewed = pop_call(&request(1, true)).expect("auto renew");
        assert_eq!(renewed.invisible, AUTO_RENEW_INVISIBLE);
    }
}
