//! Messages: [`Message`] is what a producer sends (topic, body, tag, keys, user properties,
//! delay level or delivery time); [`ReceivedMessage`] is what a consumer gets (the same plus
//! the broker's fields: queue, queue offset, message id, store time, reconsume count).
//!
//! Tag, keys, unique key, delay and sharding key travel as RocketMQ's reserved properties
//! ([`ringmq_wire::properties::keys`]); user properties may not use those names.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, RecordView};

use crate::error::{Error, Result};
use crate::inflate;

/// Property the broker sets on a message it stores in a retry or dead-letter topic: the
/// topic the message was consumed from (RocketMQ's `RETRY_TOPIC`).
pub const RETRY_TOPIC: &str = keys::RETRY_TOPIC;

/// Property names the client or the broker sets; user properties may not use them.
pub const RESERVED_PROPERTIES: &[&str] = &[
    keys::KEYS,
    keys::TAGS,
    keys::UNIQ_KEY,
    keys::DELAY,
    keys::TIMER_DELIVER_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELAY_MS,
    keys::TIMER_OUT_MS,
    keys::ORIGIN_MESSAGE_ID,
    keys::SHARDING_KEY,
    keys::REAL_TOPIC,
    keys::REAL_QID,
    keys::TRAN_MSG,
    keys::RECONSUME_TIME,
    keys::MAX_RECONSUME_TIMES,
    RETRY_TOPIC,
    keys::CORRELATION_ID,
    keys::REPLY_TO_CLIENT,
    keys::TTL,
    keys::MESSAGE_TYPE,
    keys::CLUSTER,
];

/// The reserved properties of request-reply, which [`crate::Producer::request`] and
/// [`crate::Producer::send_reply`] set (see [`ringmq_wire::reply`]).
pub(crate) const RPC_PROPERTIES: &[&str] = &[
    keys::CORRELATION_ID,
    keys::REPLY_TO_CLIENT,
    keys::TTL,
    keys::MESSAGE_TYPE,
    keys::CLUSTER,
];

/// Highest delay level of RocketMQ's default `messageDelayLevel` (1 s, 5 s, 10 s, 30 s,
/// 1 m, ... 2 h). A broker may configure more or fewer; it treats a level above its highest
/// as its highest.
pub const DELAY_LEVEL_MAX: u32 = 18;

/// Longest message id a message may carry ([`Message::with_unique_key`]).
pub const UNIQUE_KEY_BYTES_MAX: usize = 128;

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub body: Bytes,
    /// One tag, for consumers' tag expressions (`TagA || TagB`).
    pub tag: Option<String>,
    /// Business keys (indexed for query by key).
    pub keys: Vec<String>,
    /// User properties.
    pub properties: BTreeMap<String, String>,
    /// RocketMQ's FLAG field, free for the application.
    pub flag: i32,
    /// Deliver after this delay level (1..; 0 = at once; the broker's `messageDelayLevel`
    /// says how long each level is, 1 s .. 2 h by default).
    pub delay_level: Option<u32>,
    /// Deliver at this time (ms since the epoch; a time in the past delivers at once).
    pub deliver_at_ms: Option<i64>,
    /// Deliver this long after the broker stores the message.
    pub delay: Option<std::time::Duration>,
    /// The message id as the application (or a protocol edge relaying another client's
    /// message) made it, stored as the record's `UNIQ_KEY`; `None`: the producer makes one.
    pub unique_key: Option<String>,
    /// The record's BORNHOST when a protocol edge relays another client's message (that
    /// client's address, as RocketMQ's proxy records it); `None`: this producer's side of its
    /// connection.
    pub born_host: Option<SocketAddr>,
}

impl Message {
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Message {
            topic: topic.into(),
            body: body.into(),
            tag: None,
            keys: Vec::new(),
            properties: BTreeMap::new(),
            flag: 0,
            delay_level: None,
            deliver_at_ms: None,
            delay: None,
            unique_key: None,
            born_host: None,
        }
    }

    /// Stores the message under this message id (`UNIQ_KEY`) instead of one the producer
    /// makes: 1..=128 characters, no blanks or control characters.
    pub fn with_unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }

    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    pub fn with_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.keys.extend(keys.into_iter().map(Into::into));
        self
    }

    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }

    pub fn with_flag(mut self, flag: i32) -> Self {
        self.flag = flag;
        self
    }

    /// Delivery after delay level `level` (RocketMQ's `DELAY`: 1 = 1 s, 2 = 5 s, ...
    /// 18 = 2 h by default; 0 = at once; above the broker's highest = its highest).
    pub fn with_delay_level(mut self, level: u32) -> Self {
        self.delay_level = Some(level);
        self
    }

    /// Delivery at `at_ms` (ms since the epoch; RocketMQ's `TIMER_DELIVER_MS`), at most the
    /// broker's `timerMaxDelaySec` (3 days by default) ahead.
    pub fn with_deliver_at_ms(mut self, at_ms: i64) -> Self {
        self.deliver_at_ms = Some(at_ms);
        self
    }

    /// Delivery `delay` after the broker stores the message (RocketMQ's `TIMER_DELAY_MS`),
    /// at most the broker's `timerMaxDelaySec` (3 days by default).
    pub fn with_delay(mut self, delay: std::time::Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// True if the message asks for a delay level, delay or delivery time.
    pub fn is_scheduled(&self) -> bool {
        self.delay_level.is_some_and(|l| l > 0)
            || self.deliver_at_ms.is_some()
            || self.delay.is_some()
    }

    /// Checks what the client can check before sending.
    pub fn validate(&self, body_bytes_max: usize) -> Result<()> {
        self.validate_allowing(body_bytes_max, &[])
    }

    /// [`Message::validate`], with the reserved properties in `allowed` accepted among the
    /// user properties (the request-reply keys, set by the client itself).
    pub(crate) fn validate_allowing(&self, body_bytes_max: usize, allowed: &[&str]) -> Result<()> {
        if self.topic.is_empty() {
            return Err(Error::InvalidMessage("empty topic".into()));
        }
        if self.body.is_empty() {
            return Err(Error::InvalidMessage("empty body".into()));
        }
        if self.body.len() > body_bytes_max {
            return Err(Error::InvalidMessage(format!(
                "body of {} bytes is over the maximum message size of {body_bytes_max} bytes",
                self.body.len()
            )));
        }
        if let Some(k) = self
            .properties
            .keys()
            .find(|k| RESERVED_PROPERTIES.contains(&k.as_str()) && !allowed.contains(&k.as_str()))
        {
            return Err(Error::InvalidMessage(format!(
                "property {k} is reserved; use the message's own field"
            )));
        }
        let schedules = [
            self.delay_level.is_some_and(|l| l > 0),
            self.deliver_at_ms.is_some(),
            self.delay.is_some(),
        ];
        if schedules.iter().filter(|&&s| s).count() > 1 {
            return Err(Error::InvalidMessage(
                "set one of delay level, delay and delivery time, not several".into(),
            ));
        }
        if self.delay.is_some_and(|d| d.as_millis() > i64::MAX as u128) {
            return Err(Error::InvalidMessage("delay out of range".into()));
        }
        if let Some(k) = &self.unique_key {
            if k.is_empty()
                || k.len() > UNIQUE_KEY_BYTES_MAX
                || k.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(Error::InvalidMessage(format!(
                    "a message id of 1..={UNIQUE_KEY_BYTES_MAX} bytes without blanks or control characters, not {k:?}"
                )));
            }
        }
        if self.keys.iter().any(|k| k.contains(' ') || k.is_empty()) {
            return Err(Error::InvalidMessage(
                "keys may not be empty or contain blanks (they travel blank-separated)".into(),
            ));
        }
        Ok(())
    }

    /// The encoded properties block: tag, keys, unique key, delay, sharding key, the
    /// transaction mark (`TRAN_MSG=true` for a half message), then the user properties.
    #[cfg(test)]
    pub(crate) fn encode_properties(
        &self,
        unique_key: &str,
        sharding_key: Option<&str>,
        half: bool,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_properties_into(unique_key, sharding_key, half, &mut out)?;
        Ok(out)
    }

    /// [`Message::encode_properties`] appended to `out` (the send path encodes every
    /// record's block into one buffer; nothing is allocated for a message without keys,
    /// schedule or user properties).
    pub(crate) fn encode_properties_into(
        &self,
        unique_key: &str,
        sharding_key: Option<&str>,
        half: bool,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let unique_key = self.unique_key.as_deref().unwrap_or(unique_key);
        let keys_joined = self.keys.join(" ");
        let delay = self.delay_level.filter(|&l| l > 0).map(|l| l.to_string());
        let deliver = self.deliver_at_ms.map(|t| t.to_string());
        let delay_ms = self.delay.map(|d| d.as_millis().to_string());
        let pairs = self
            .tag
            .as_deref()
            .map(|t| (keys::TAGS, t))
            .into_iter()
            .chain((!keys_joined.is_empty()).then_some((keys::KEYS, keys_joined.as_str())))
            .chain(std::iter::once((keys::UNIQ_KEY, unique_key)))
            .chain(delay.as_deref().map(|d| (keys::DELAY, d)))
            .chain(deliver.as_deref().map(|d| (keys::TIMER_DELIVER_MS, d)))
            .chain(delay_ms.as_deref().map(|d| (keys::TIMER_DELAY_MS, d)))
            .chain(sharding_key.map(|k| (keys::SHARDING_KEY, k)))
            .chain(half.then_some((keys::TRAN_MSG, "true")))
            .chain(
                self.properties
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            );
        properties::encode(pairs, out)
            .map_err(|e| Error::InvalidMessage(format!("properties: {e}")))
    }
}

/// A message as a consumer receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: u32,
    pub queue_offset: u64,
    pub physical_offset: u64,
    /// Offset message id: store host and physical offset.
    pub msg_id: String,
    /// The body the producer sent: a compressed record's body inflated (see
    /// [`crate::inflate`]), unless [`ReceivedMessage::body_compressed`].
    pub body: Bytes,
    pub flag: i32,
    /// The record's SYSFLAG, COMPRESSED cleared once the body is inflated.
    pub sys_flag: u32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
    /// Times this message was delivered before: the broker's count of retries (the
    /// record's field) plus this consumer's local redeliveries.
    pub reconsume_times: i32,
    /// Every property, reserved ones included.
    pub properties: BTreeMap<String, String>,
}

impl ReceivedMessage {
    /// Copies a decoded record out of `buf` (the body is shared, not copied; a compressed
    /// one is inflated).
    pub(crate) fn from_record(buf: &Bytes, r: &RecordView<'_>, broker_name: &str) -> Self {
        let (body, sys_flag) = match inflate::received_body(r, broker_name) {
            Some(inflated) => (inflated, inflate::shown_sys_flag(r.sys_flag, true)),
            None => (buf.slice_ref(r.body), r.sys_flag),
        };
        Self::with_body(r, broker_name, body, sys_flag)
    }

    /// Copies a decoded record's fields, with the body and sys_flag the consumer shows.
    pub(crate) fn with_body(
        r: &RecordView<'_>,
        broker_name: &str,
        body: Bytes,
        sys_flag: u32,
    ) -> Self {
        let properties = properties::iter(r.properties)
            .filter_map(|p| p.ok())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ReceivedMessage {
            topic: r.topic.to_string(),
            broker_name: broker_name.to_string(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            physical_offset: r.physical_offset,
            msg_id: record::message_id(r.store_host, r.physical_offset),
            body,
            flag: r.flag,
            sys_flag,
            born_timestamp_ms: r.born_timestamp_ms,
            born_host: r.born_host,
            store_timestamp_ms: r.store_timestamp_ms,
            store_host: r.store_host,
            reconsume_times: r.reconsume_times,
            properties,
        }
    }

    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }

    /// True when the record's body is compressed and could not be inflated (corrupt, over
    /// [`crate::inflate::INFLATED_BODY_BYTES_MAX`], or an unknown compression type): `body`
    /// holds the stored bytes, and [`crate::inflate::inflate_body`] tells why. False for
    /// every other message (an inflated body no longer carries COMPRESSED).
    pub fn body_compressed(&self) -> bool {
        self.sys_flag & record::sys_flag::COMPRESSED != 0
    }

    pub fn tag(&self) -> Option<&str> {
        self.property(keys::TAGS)
    }

    pub fn keys(&self) -> Vec<&str> {
        self.property(keys::KEYS)
            .map(|k| k.split(' ').filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }

    /// When a scheduled message was due (ms since the epoch; `TIMER_OUT_MS`), `None` for a
    /// message that was not scheduled.
    pub fn deliver_at_ms(&self) -> Option<i64> {
        self.property(keys::TIMER_OUT_MS)
            .and_then(|v| v.parse().ok())
    }

    /// The producer's unique key (`UNIQ_KEY`).
    pub fn unique_key(&self) -> Option<&str> {
        self.property(keys::UNIQ_KEY)
    }

    /// Properties the application set (reserved ones left out).
    pub fn user_properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.properties
            .iter()
            .filter(|(k, _)| !RESERVED_PROPERTIES.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Decodes a pull body into messages; a record that does not decode ends the list with an
/// error (the caller decides whether what came before it is usable).
pub(crate) fn decode_records(body: &Bytes, broker_name: &str) -> Result<Vec<ReceivedMessage>> {
    let mut out = Vec::new();
    for r in record::iter(body) {
        let r = r.map_err(|e| Error::InvalidMessage(format!("pulled record: {e}")))?;
        out.push(ReceivedMessage::from_record(body, &r, broker_name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_its_own_unique_key() {
        let m = Message::new("t", "x").with_unique_key("0102FC00000001659A0B268BD300000000");
        m.validate(10).unwrap();
        let props = m.encode_properties("MADE", None, false).unwrap();
        assert_eq!(
            properties::get(&props, keys::UNIQ_KEY),
            Some("0102FC00000001659A0B268BD300000000")
        );
        for bad in ["", "a b", "a\u{1}", &"x".repeat(UNIQUE_KEY_BYTES_MAX + 1)] {
            assert!(Message::new("t", "x")
                .with_unique_key(bad)
                .validate(10)
                .is_err());
        }
    }

    #[test]
    fn validate_and_properties() {
        let m = Message::new("t", "hello")
            .with_tag("TagA")
            .with_keys(["k1", "k2"])
            .with_property("color", "red")
            .with_delay_level(3);
        m.validate(1024).unwrap();
        let props = m.encode_properties("U1", Some("order-7"), false).unwrap();
        assert_eq!(properties::get(&props, keys::TAGS), Some("TagA"));
        assert_eq!(properties::get(&props, keys::KEYS), Some("k1 k2"));
        assert_eq!(properties::get(&props, keys::UNIQ_KEY), Some("U1"));
        assert_eq!(properties::get(&props, keys::DELAY), Some("3"));
        assert_eq!(properties::get(&props, keys::SHARDING_KEY), Some("order-7"));
        assert_eq!(properties::get(&props, "color"), Some("red"));
        assert!(Message::new("t", "").validate(10).is_err());
        assert!(Message::new("t", "x".repeat(11)).validate(10).is_err());
        assert!(Message::new("t", "x")
            .with_property("TAGS", "a")
            .validate(10)
            .is_err());
        Message::new("t", "x")
            .with_delay_level(19)
            .validate(10)
            .unwrap();
        assert!(Message::new("t", "x")
            .with_delay_level(2)
            .with_delay(std::time::Duration::from_secs(1))
            .validate(10)
            .is_err());
        let props = Message::new("t", "x")
            .with_delay(std::time::Duration::from_millis(1500))
            .encode_properties("U", None, false)
            .unwrap();
        assert_eq!(properties::get(&props, keys::TIMER_DELAY_MS), Some("1500"));
        let props = Message::new("t", "x")
            .with_delay_level(0)
            .encode_properties("U", None, false)
            .unwrap();
        assert_eq!(properties::get(&props, keys::DELAY), None);
        assert!(Message::new("t", "x").with_key("a b").validate(10).is_err());
    }
}
