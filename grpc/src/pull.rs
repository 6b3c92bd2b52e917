//! PullMessage: an offset-based pull of one queue for a consumer group, through the edge's
//! native [`EdgeConsumer`] (native PULL_MESSAGE, long polling).
//!
//! The answer is a stream, in this order: one status, then one response per message, then
//! the offset to pull next:
//!
//! | native pull | status | messages | next_offset |
//! |---|---|---|---|
//! | found | OK | the messages the filter takes | after the last one read |
//! | no new message within the poll | MESSAGE_NOT_FOUND | none | the offset asked for |
//! | nothing the filter takes | MESSAGE_NOT_FOUND | none | past what was read |
//! | offset outside the queue | ILLEGAL_OFFSET | none | where the queue can be read from |
//!
//! An error before the pull (bad request, no route) is the status alone. The pull commits
//! nothing: the client commits with UpdateOffset, into the group's one offset table.

use std::time::Duration;

use ringmq_client::consumer::{EdgeConsumer, PullStatus};

use crate::convert::{received_to_pb, std_duration};
use crate::offsets::native_queue;
use crate::pb::{self, pull_message_response::Content, Code};
use crate::receive::{group_name, selector};
use crate::settings::{LONG_POLLING_MAX, RECEIVE_BATCH_SIZE};
use crate::status::{from_error, ok, status};

/// PullMessage: the responses of its stream, in order.
pub(crate) async fn pull_message(
    consumer: &EdgeConsumer,
    req: pb::PullMessageRequest,
) -> Vec<pb::PullMessageResponse> {
    let one = |s: pb::Status| {
        vec![pb::PullMessageResponse {
            content: Some(Content::Status(s)),
        }]
    };
    let group = match group_name(req.group.as_ref()) {
        Ok(g) => g,
        Err(s) => return one(s),
    };
    let mq = match native_queue(req.message_queue.as_ref()) {
        Ok(q) => q,
        Err(s) => return one(s),
    };
    let Ok(offset) = u64::try_from(req.offset) else {
        return one(status(
            Code::IllegalOffset,
            format!("offset {} is negative", req.offset),
        ));
    };
    let selector = match selector(req.filter_expression.as_ref()) {
        Ok(s) => s,
        Err(s) => return one(s),
    };
    let max = req.batch_size.clamp(1, RECEIVE_BATCH_SIZE) as u32;
    // No poll time asked: answer at once, as a plain pull does.
    let wait = req
        .long_polling_timeout
        .as_ref()
        .map_or(Duration::ZERO, std_duration)
        .min(LONG_POLLING_MAX);
    let r = match consumer
        .pull(&group, &mq, offset, max, &selector, wait)
        .await
    {
        Ok(r) => r,
        Err(e) => return one(from_error(&e)),
    };
    let head = match r.status {
        PullStatus::Found if !r.messages.is_empty() => ok(),
        PullStatus::Found | PullStatus::NoNewMessage | PullStatus::NoMatchedMessage => {
            status(Code::MessageNotFound, "no new message")
        }
        PullStatus::OffsetIllegal => status(
            Code::IllegalOffset,
            format!(
                "offset {offset} is outside {mq} (min {}, max {})",
                r.min_offset, r.max_offset
            ),
        ),
    };
    let mut out = Vec::with_capacity(r.messages.len() + 2);
    out.push(pb::PullMessageResponse {
        content: Some(Content::Status(head)),
    });
    for m in &r.messages {
        out.push(pb::PullMessageResponse {
            content: Some(Content::Message(received_to_pb(
                m,
                mq.topic.clone(),
                None,
                None,
            ))),
        });
    }
    out.push(pb::PullMessageResponse {
        content: Some(Content::NextOffset(
            i64::try_from(r.next_offset).unwrap_or(i64::MAX),
        )),
    });
    out
}
