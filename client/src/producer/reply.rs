//! The replier's side of request-reply ([`ringmq_wire::reply`]): [`Reply`] builds the reply
//! to a consumed request (RocketMQ's `MessageUtil.createReplyMessage`) and
//! [`Producer::send_reply`](super::Producer::send_reply) sends it with SEND_REPLY_MESSAGE.
//!
//! The reply goes to the request's cluster's reply topic (`<CLUSTER>_REPLY_TOPIC`), on the
//! broker the request was consumed from when that broker has the topic (every ringmq broker
//! creates it at start): the requester heartbeat that broker before sending it the request,
//! so that broker can push the reply to it. Retries stay on that broker.

use bytes::Bytes;
use ringmq_wire::properties::keys;
use ringmq_wire::reply::{reply_topic, REPLY_MESSAGE_FLAG};

use super::send::{self, Form, SendResult};
use super::{Inner, Pick};
use crate::batch::MessageView;
use crate::error::{Error, Result};
use crate::message::{Message, ReceivedMessage};

/// A reply to a request message, ready for
/// [`Producer::send_reply`](super::Producer::send_reply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    message: Message,
    /// The broker the request was consumed from (where the requester is known).
    broker_name: String,
}

impl Reply {
    /// The reply to `request` carrying `body`: topic `<CLUSTER>_REPLY_TOPIC`, `MSG_TYPE`
    /// `reply`, and the request's `CORRELATION_ID`, `REPLY_TO_CLIENT` and `TTL`. Fails with
    /// [`Error::InvalidMessage`] when `request` is not a request (one of `CLUSTER`,
    /// `CORRELATION_ID`, `REPLY_TO_CLIENT` is missing).
    pub fn to(request: &ReceivedMessage, body: impl Into<Bytes>) -> Result<Reply> {
        Self::build(|k| request.property(k), &request.broker_name, body.into())
    }

    /// [`Reply::to`] for a message read in place (a [`BatchListener`](crate::BatchListener)).
    pub fn to_view(request: &MessageView<'_>, body: impl Into<Bytes>) -> Result<Reply> {
        Self::build(|k| request.property(k), request.broker_name(), body.into())
    }

    fn build<'a>(
        property: impl Fn(&str) -> Option<&'a str>,
        broker_name: &str,
        body: Bytes,
    ) -> Result<Reply> {
        let need = |key: &str| {
            property(key).filter(|v| !v.is_empty()).ok_or_else(|| {
                Error::InvalidMessage(format!(
                    "not a request: the message has no {key} property (send requests with \
                     Producer::request)"
                ))
            })
        };
        let cluster = need(keys::CLUSTER)?;
        let mut message = Message::new(reply_topic(cluster), body)
            .with_property(keys::MESSAGE_TYPE, REPLY_MESSAGE_FLAG)
            .with_property(keys::CORRELATION_ID, need(keys::CORRELATION_ID)?)
            .with_property(keys::REPLY_TO_CLIENT, need(keys::REPLY_TO_CLIENT)?);
        if let Some(ttl) = property(keys::TTL) {
            message = message.with_property(keys::TTL, ttl);
        }
        Ok(Reply {
            message,
            broker_name: broker_name.to_string(),
        })
    }

    /// The reply with a tag.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.message.tag = Some(tag.into());
        self
    }

    /// The reply with a user property (reserved names are refused when it is sent).
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.message.properties.insert(key.into(), value.into());
        self
    }

    /// The message that will be sent.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The request's correlation id, which the reply carries.
    pub fn correlation_id(&self) -> &str {
        self.message
            .properties
            .get(keys::CORRELATION_ID)
            .map_or("", String::as_str)
    }
}

pub(super) async fn send_reply(inner: &Inner, reply: Reply) -> Result<SendResult> {
    inner.check_open()?;
    let Reply {
        message,
        broker_name,
    } = reply;
    let route = inner.inst.route(&message.topic).await?;
    let home = route
        .write_queues
        .iter()
        .find(|q| q.broker_name == broker_name)
        .cloned();
    let msgs = std::slice::from_ref(&message);
    match &home {
        Some(mq) => send::send(inner, msgs, Pick::Queue(mq), None, Form::Reply).await,
        None => send::send(inner, msgs, Pick::Any, None, Form::Reply).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    fn request(props: &[(&str, &str)]) -> ReceivedMessage {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        ReceivedMessage {
            topic: "Orders".into(),
            broker_name: "broker-a".into(),
            queue_id: 0,
            queue_offset: 0,
            physical_offset: 0,
            msg_id: String::new(),
            body: Bytes::from_static(b"ping"),
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
    fn a_reply_carries_what_rocketmq_s_create_reply_message_copies() {
        let req = request(&[
            (keys::CLUSTER, "DefaultCluster"),
            (keys::CORRELATION_ID, "c-7"),
            (keys::REPLY_TO_CLIENT, "10.0.0.1@42"),
            (keys::TTL, "3000"),
            ("color", "red"),
        ]);
        let r = Reply::to(&req, "pong").unwrap().with_tag("t");
        let m = r.message();
        assert_eq!(m.topic, "DefaultCluster_REPLY_TOPIC");
        assert_eq!(&m.body[..], b"pong");
        assert_eq!(m.tag.as_deref(), Some("t"));
        assert_eq!(m.properties.get(keys::MESSAGE_TYPE).unwrap(), "reply");
        assert_eq!(m.properties.get(keys::TTL).unwrap(), "3000");
        assert_eq!(
            m.properties.get(keys::REPLY_TO_CLIENT).unwrap(),
            "10.0.0.1@42"
        );
        assert!(
            !m.properties.contains_key("color"),
            "user properties stay behind"
        );
        assert_eq!(r.correlation_id(), "c-7");
        assert_eq!(r.broker_name, "broker-a");
    }

    #[test]
    fn a_message_that_is_not_a_request_has_no_reply() {
        for missing in [keys::CLUSTER, keys::CORRELATION_ID, keys::REPLY_TO_CLIENT] {
            let props: Vec<(&str, &str)> = [
                (keys::CLUSTER, "C"),
                (keys::CORRELATION_ID, "c"),
                (keys::REPLY_TO_CLIENT, "id"),
            ]
            .into_iter()
            .filter(|(k, _)| *k != missing)
            .collect();
            let e = Reply::to(&request(&props), "x").unwrap_err();
            assert!(e.to_string().contains(missing), "{e}");
        }
    }
}
