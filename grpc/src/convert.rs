//! RocketMQ 5 messages and ringmq's, both ways, with RocketMQ's proxy's checks on the way
//! in (each failure a `Code`, as the proxy answers it):
//!
//! | gRPC `SystemProperties` | native message / record property |
//! |---|---|
//! | `message_id` (made by the client) | `UNIQ_KEY` ([`Message::with_unique_key`]) |
//! | `tag`, `keys` | `TAGS`, `KEYS` |
//! | `message_group` (FIFO) | the sharding key: one queue per group, `__SHARDINGKEY` |
//! | `delivery_timestamp` (DELAY) | `TIMER_DELIVER_MS` |
//! | `receipt_handle` (out) | the POP receipt handle (`extraInfo`) and the record's physical offset ([`crate::handle`]) |
//! | `delivery_attempt` (out) | reconsume times + 1 |
//! | `body_digest` (out) | MD5 of the body, upper-case hex (as RocketMQ's proxy sends) |

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use md5::{Digest as _, Md5};
use ringmq_client::message::RESERVED_PROPERTIES;
use ringmq_client::wire::properties::keys;
use ringmq_client::{Message, PoppedMessage, ReceivedMessage};

use crate::handle;
use crate::pb::{self, Code, DigestType, Encoding, MessageType};
use crate::status::status;

/// Largest body a gRPC message may carry (RocketMQ's `maxMessageSize`, 4 MiB); the Settings
/// sent to producers say the same.
pub(crate) const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most user properties on one message (RocketMQ's proxy `userPropertyMaxNum`).
pub(crate) const USER_PROPERTIES_MAX: usize = 128;
/// Bytes of tag, keys and user properties together (RocketMQ's proxy `maxUserPropertySize`).
pub(crate) const USER_PROPERTY_BYTES_MAX: usize = 16 * 1024;
/// Longest message group, exclusive (RocketMQ's proxy `maxMessageGroupSize`).
pub(crate) const MESSAGE_GROUP_BYTES_MAX: usize = 64;
/// Furthest in the future a delivery time may be (RocketMQ's proxy `maxDelayTimeMills`, 1 day).
pub(crate) const DELAY_MAX: Duration = Duration::from_secs(24 * 3600);

/// Property names the broker sets besides the reserved ones; never shown as user properties.
const BROKER_PROPERTIES: &[&str] = &[
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "POP_CK",
    "POP_CK_OFFSET",
    "CONSUME_START_TIME",
    "WAIT",
    "__transactionId__",
    "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
    "ORIGIN_MESSAGE_ID",
    "TRACE_ON",
    "INNER_NUM",
    "INNER_BASE",
    "BORNHOST",
    "BORN_TIMESTAMP",
];

/// A message of a SendMessage request as a native message; its message group (FIFO), if any.
pub(crate) fn to_native(
    m: &pb::Message,
    topic: &str,
    now: SystemTime,
) -> Result<(Message, Option<String>), pb::Status> {
    let name = m.topic.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    if name != topic {
        return Err(status(
            Code::MessageCorrupted,
            "topic in message is not same",
        ));
    }
    if m.body.is_empty() {
        return Err(status(
            Code::MessageBodyEmpty,
            "message body cannot be empty",
        ));
    }
    if m.body.len() > BODY_BYTES_MAX {
        return Err(status(
            Code::MessageBodyTooLarge,
            format!("message body cannot exceed the max {BODY_BYTES_MAX}"),
        ));
    }
    let sys = m.system_properties.clone().unwrap_or_default();
    if sys.message_id.trim().is_empty() {
        return Err(status(Code::IllegalMessageId, "message id cannot be empty"));
    }
    let mut msg = Message::new(topic, m.body.clone()).with_unique_key(sys.message_id.clone());
    let mut user_bytes = 0usize;
    if m.user_properties.len() > USER_PROPERTIES_MAX {
        return Err(status(
            Code::MessagePropertiesTooLarge,
            format!("too many user properties, max is {USER_PROPERTIES_MAX}"),
        ));
    }
    for (k, v) in &m.user_properties {
        if is_system_property(k) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                format!("property is used by system: {k}"),
            ));
        }
        if has_control(k) || has_control(v) || k.is_empty() {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                "the key or value of a property cannot be empty or contain control characters",
            ));
        }
        user_bytes += k.len() + v.len();
        msg.properties.insert(k.clone(), v.clone());
    }
    if let Some(tag) = sys.tag.as_deref() {
        if tag.trim().is_empty() || tag.contains('|') || has_control(tag) {
            return Err(status(
                Code::IllegalMessageTag,
                "tag cannot be blank, contain '|' or control characters",
            ));
        }
        user_bytes += tag.len();
        msg.tag = Some(tag.to_string());
    }
    for k in &sys.keys {
        if k.trim().is_empty() || k.contains(' ') || has_control(k) {
            return Err(status(
                Code::IllegalMessageKey,
                "key cannot be blank or contain blanks or control characters",
            ));
        }
        user_bytes += k.len();
        msg.keys.push(k.clone());
    }
    if user_bytes > USER_PROPERTY_BYTES_MAX {
        return Err(status(
            Code::MessagePropertiesTooLarge,
            format!(
                "the total size of user property is too large, max is {USER_PROPERTY_BYTES_MAX}"
            ),
        ));
    }
    if let Some(at) = &sys.delivery_timestamp {
        let at_ms = timestamp_ms(at);
        if at_ms - epoch_ms(now) > DELAY_MAX.as_millis() as i64 {
            return Err(status(
                Code::IllegalDeliveryTime,
                format!(
                    "the max delay time of message is too large, max is {}",
                    DELAY_MAX.as_millis()
                ),
            ));
        }
        msg.deliver_at_ms = Some(at_ms);
    }
    if sys.body_encoding == Encoding::Gzip as i32 {
        return Err(status(
            Code::Unsupported,
            "GZIP-encoded bodies are not accepted yet",
        ));
    }
    let group = match sys.message_group.as_deref() {
        Some(g) if !g.is_empty() => {
            if g.trim().is_empty() || g.len() >= MESSAGE_GROUP_BYTES_MAX || has_control(g) {
                return Err(status(
                    Code::IllegalMessageGroup,
                    format!(
                        "message group cannot be blank, contain control characters or reach {MESSAGE_GROUP_BYTES_MAX} bytes"
                    ),
                ));
            }
            Some(g.to_string())
        }
        _ => None,
    };
    Ok((msg, group))
}

/// A popped message as a ReceiveMessage response carries it.
pub(crate) fn to_pb(p: &PoppedMessage, invisible: Duration) -> pb::Message {
    received_to_pb(
        &p.message,
        p.topic().to_string(),
        Some(handle::outward(
            &p.receipt_handle,
            p.message.physical_offset,
        )),
        Some(invisible),
    )
}

/// A stored message as gRPC shows it (`topic`: the topic to show; a receipt handle and an
/// invisible duration for a delivery).
pub(crate) fn received_to_pb(
    m: &ReceivedMessage,
    topic: String,
    receipt_handle: Option<String>,
    invisible: Option<Duration>,
) -> pb::Message {
    let user_properties = m
        .properties
        .iter()
        .filter(|(k, _)| !is_system_property(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let group = m.property(keys::SHARDING_KEY).map(str::to_string);
    let deliver_at = m
        .property(keys::TIMER_DELIVER_MS)
        .and_then(|v| v.parse::<i64>().ok());
    let message_type = if m.property(keys::TRAN_MSG) == Some("true") {
        MessageType::Transaction
    } else if deliver_at.is_some()
        || m.property(keys::DELAY).is_some()
        || m.property(keys::TIMER_DELAY_MS).is_some()
        || m.property(keys::TIMER_DELAY_SEC).is_some()
    {
        MessageType::Delay
    } else if group.is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    };
    let sys = pb::SystemProperties {
        tag: m.tag().map(str::to_string),
        keys: m.keys().into_iter().map(str::to_string).collect(),
        message_id: m.unique_key().unwrap_or(&m.msg_id).to_string(),
        body_digest: Some(pb::Digest {
            r#type: DigestType::Md5 as i32,
            checksum: md5_hex(&m.body),
        }),
        body_encoding: Encoding::Identity as i32,
        message_type: message_type as i32,
        born_timestamp: Some(ms_timestamp(m.born_timestamp_ms)),
        born_host: m.born_host.ip().to_string(),
        store_timestamp: Some(ms_timestamp(m.store_timestamp_ms)),
        store_host: m.store_host.to_string(),
        delivery_timestamp: deliver_at.map(ms_timestamp),
        receipt_handle,
        queue_id: m.queue_id as i32,
        queue_offset: Some(m.queue_offset as i64),
        invisible_duration: invisible.map(duration),
        delivery_attempt: Some(m.reconsume_times.saturating_add(1)),
        message_group: group,
        ..Default::default()
    };
    pb::Message {
        topic: Some(pb::Resource {
            resource_namespace: String::new(),
            name: topic,
        }),
        user_properties,
        system_properties: Some(sys),
        body: m.body.to_vec(),
    }
}

fn is_system_property(k: &str) -> bool {
    RESERVED_PROPERTIES.contains(&k) || BROKER_PROPERTIES.contains(&k)
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

fn md5_hex(body: &[u8]) -> String {
    let sum = Md5::digest(body);
    let mut out = String::with_capacity(32);
    for b in sum.iter() {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

pub(crate) fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn timestamp_ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(t.nanos / 1_000_000))
}

pub(crate) fn ms_timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

pub(crate) fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

/// A protobuf duration as a std one; negative ones are zero.
pub(crate) fn std_duration(d: &prost_types::Duration) -> Duration {
    if d.seconds < 0 || d.nanos < 0 {
        return Duration::ZERO;
    }
    Duration::new(d.seconds as u64, d.nanos as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grpc_message(topic: &str, id: &str) -> pb::Message {
        pb::Message {
            topic: Some(pb::Resource {
                resource_namespace: String::new(),
                name: topic.into(),
            }),
            user_properties: Default::default(),
            system_properties: Some(pb::SystemProperties {
                message_id: id.into(),
                tag: Some("TagA".into()),
                keys: vec!["k1".into()],
                message_group: Some("g1".into()),
                ..Default::default()
            }),
            body: b"hello".to_vec(),
        }
    }

    #[test]
    fn a_grpc_message_keeps_its_id_tag_keys_and_group() {
        let (m, group) =
            to_native(&grpc_message("T", "01ABCDEF"), "T", SystemTime::now()).expect("valid");
        assert_eq!(m.unique_key.as_deref(), Some("01ABCDEF"));
        assert_eq!(m.tag.as_deref(), Some("TagA"));
        assert_eq!(m.keys, vec!["k1".to_string()]);
        assert_eq!(group.as_deref(), Some("g1"));
    }

    #[test]
    fn bad_messages_get_rocketmq_codes() {
        let now = SystemTime::now();
        let code = |m: &pb::Message| to_native(m, "T", now).err().map(|s| s.code);
        assert_eq!(
            code(&grpc_message("Other", "id")),
            Some(Code::MessageCorrupted as i32)
        );
        assert_eq!(
            code(&grpc_message("T", " ")),
            Some(Code::IllegalMessageId as i32)
        );
        let mut empty = grpc_message("T", "id");
        empty.body.clear();
        assert_eq!(code(&empty), Some(Code::MessageBodyEmpty as i32));
        let mut reserved = grpc_message("T", "id");
        reserved
            .user_properties
            .insert("UNIQ_KEY".into(), "x".into());
        assert_eq!(
            code(&reserved),
            Some(Code::IllegalMessagePropertyKey as i32)
        );
    }

    #[test]
    fn md5_is_upper_case_hex() {
        assert_eq!(md5_hex(b""), "D41D8CD98F00B204E9800998ECF8427E");
    }

    #[test]
    fn timestamps_round_trip() {
        for ms in [0i64, 1, 999, 1_700_000_000_123, -1] {
            assert_eq!(timestamp_ms(&ms_timestamp(ms)), ms);
        }
    }
}
