//! Handing a failed message back to its broker (CONSUMER_SEND_MSG_BACK): the broker stores
//! a copy in the group's retry topic (`%RETRY%<group>`), delivered again after a delay that
//! grows with each retry, or, once the message was retried `max_reconsume_times` times (or
//! when asked with delay level -1), in the group's dead-letter topic (`%DLQ%<group>`).
//!
//! The request goes to the master of the broker the message was pulled from (its store holds
//! the record at `physical_offset`); a slave refuses it, so while a master is down its
//! messages cannot be handed back and the caller keeps retrying them itself.

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::ConsumerSendBackRequest;
pub use ringmq_wire::command::{dlq_topic, retry_topic, DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX};

use crate::batch::MessageView;
use crate::error::Result;
use crate::instance::Instance;
use crate::message::{ReceivedMessage, RETRY_TOPIC};
use crate::route::MessageQueue;

/// Delay level asking the broker to dead-letter the message at once.
pub const DELAY_LEVEL_DLQ: i32 = -1;
/// Delay level asking the broker to pick `3 + reconsume times`.
pub const DELAY_LEVEL_BROKER: i32 = 0;

/// The topic the application consumed `msg` from: its `RETRY_TOPIC` property if it came
/// through a retry topic, else its topic.
pub fn original_topic(msg: &ReceivedMessage) -> &str {
    msg.property(RETRY_TOPIC).unwrap_or(&msg.topic)
}

/// What a send-back names of the message: the topic the application consumed it from, its
/// record (physical offset on the broker) and its id.
#[derive(Debug, Clone)]
pub(crate) struct SendBack<'a> {
    pub original_topic: &'a str,
    pub physical_offset: u64,
    /// The producer's unique key, else the offset message id.
    pub original_message_id: std::borrow::Cow<'a, str>,
}

impl<'a> SendBack<'a> {
    pub fn of(msg: &'a ReceivedMessage) -> Self {
        SendBack {
            original_topic: original_topic(msg),
            physical_offset: msg.physical_offset,
            original_message_id: msg.unique_key().unwrap_or(&msg.msg_id).into(),
        }
    }

    pub fn of_view(msg: &MessageView<'a>) -> Self {
        SendBack {
            original_topic: msg.property(RETRY_TOPIC).unwrap_or(msg.topic()),
            physical_offset: msg.physical_offset(),
            original_message_id: match msg.unique_key() {
                Some(k) => k.into(),
                None => msg.msg_id().into(),
            },
        }
    }
}

/// Sends `msg`, pulled from `mq`, back to its broker for `group`. `delay_level`: 0 = the
/// broker picks, -1 = dead-letter now, n > 0 = that level; `max_reconsume_times`: 0 = the
/// group's limit on the broker.
pub(crate) async fn send_back(
    inst: &Instance,
    group: &str,
    mq: &MessageQueue,
    msg: &SendBack<'_>,
    delay_level: i32,
    max_reconsume_times: u32,
) -> Result<()> {
    let header = ConsumerSendBackRequest {
        consumer_group: group.to_string(),
        original_topic: msg.original_topic.to_string(),
        physical_offset: msg.physical_offset,
        delay_level,
        max_reconsume_times,
        original_message_id: msg.original_message_id.to_string(),
    };
    inst.queue_call(
        mq,
        RequestCode::ConsumerSendMsgBack,
        &header,
        inst.cfg.request_timeout,
    )
    .await?
    .expect(&[Status::Success])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    fn received(topic: &str, props: &[(&str, &str)]) -> ReceivedMessage {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        ReceivedMessage {
            topic: topic.into(),
            broker_name: "b".into(),
            queue_id: 0,
            queue_offset: 0,
            physical_offset: 0,
            msg_id: "ID".into(),
            body: bytes::Bytes::from_static(b"x"),
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: addr,
            store_timestamp_ms: 0,
            store_host: addr,
            reconsume_times: 0,
            properties: props
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn send_backs_name_the_original_topic() {
        let retry = retry_topic("g");
        assert_eq!(retry, "%RETRY%g");
        assert_eq!(dlq_topic("g"), "%DLQ%g");
        let m = received(&retry, &[(RETRY_TOPIC, "Orders")]);
        assert_eq!(original_topic(&m), "Orders");
        assert_eq!(SendBack::of(&m).original_topic, "Orders");
        assert_eq!(SendBack::of(&m).original_message_id, "ID");
        let plain = received("Orders", &[(ringmq_wire::properties::keys::UNIQ_KEY, "U1")]);
        assert_eq!(original_topic(&plain), "Orders");
        assert_eq!(SendBack::of(&plain).original_message_id, "U1");
    }
}
