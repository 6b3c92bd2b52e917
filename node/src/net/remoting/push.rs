//! Requests the broker sends on its own to a remoting client, on the client's connection:
//! the native frame the broker builds (the same for both protocols) becomes the remoting
//! request RocketMQ's brokers send, oneway, in the serialization the client opened with.
//!
//! - NOTIFY_CONSUMER_IDS_CHANGED: `consumerGroup`.
//! - CHECK_TRANSACTION_STATE: `tranStateTableOffset`, `commitLogOffset`, `msgId` (the
//!   message's unique key), `transactionId`, `offsetMsgId`; the body is the half record,
//!   already in the layout RocketMQ's `MessageDecoder` reads.
//! - PUSH_REPLY_MESSAGE_TO_CLIENT: RocketMQ's `ReplyMessageRequestHeader` (`producerGroup`,
//!   the reply's `topic`, `queueId`, `sysFlag`, `bornTimestamp`, `flag`, `properties`,
//!   `reconsumeTimes`, `bornHost`, `storeHost`, `storeTimestamp`; `defaultTopic` TBW102); the
//!   body is the reply's body only, as its `sysFlag` says (compressed or not).

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{CheckTransactionRequest, NotifyConsumerIdsChanged, PushReplyRequest};
use ringmq_wire::frame;
use ringmq_wire::record;
use ringmq_wire::remoting::code::request;
use ringmq_wire::remoting::ext::{ExtFields, ToExt};
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType, FLAG_ONEWAY};
use ringmq_wire::remoting::headers::ReplyMessageRequestHeader;

/// Translates a remoting connection's server-sent frames.
#[derive(Debug)]
pub struct PushCodec {
    serialize_type: SerializeType,
    next_opaque: i32,
}

impl PushCodec {
    pub fn new(serialize_type: SerializeType) -> Self {
        PushCodec {
            serialize_type,
            next_opaque: 1,
        }
    }

    /// The remoting frame for a native one; `None` for a frame remoting clients have no
    /// request for (it is dropped, as a notification to a gone client is).
    pub fn translate(&mut self, native: &[u8]) -> Option<Vec<u8>> {
        let f = frame::parse(native).ok()?;
        let code = f.request_code().ok()?;
        let mut ext = ExtFields::new();
        let remoting_code = match code {
            RequestCode::NotifyConsumerIdsChanged => {
                let h = NotifyConsumerIdsChanged::decode(f.header).ok()?;
                ext.insert("consumerGroup", h.consumer_group);
                request::NOTIFY_CONSUMER_IDS_CHANGED
            }
            RequestCode::CheckTransactionState => {
                let h = CheckTransactionRequest::decode(f.header).ok()?;
                let offset_id = record::decode_one_unverified(f.body)
                    .ok()
                    .map(|r| record::message_id(r.store_host, r.physical_offset))
                    .unwrap_or_default();
                ext.insert_display("tranStateTableOffset", h.half_queue_offset);
                ext.insert_display("commitLogOffset", h.physical_offset);
                ext.insert("msgId", h.message_id);
                ext.insert("transactionId", h.transaction_id);
                ext.insert("offsetMsgId", offset_id);
                request::CHECK_TRANSACTION_STATE
            }
            RequestCode::PushReplyMessageToClient => {
                let h = PushReplyRequest::decode(f.header).ok()?;
                let r = record::decode_one_unverified(f.body).ok()?;
                let cmd = self.oneway(request::PUSH_REPLY_MESSAGE_TO_CLIENT, reply_header(&h, &r));
                return rframe::encode(&cmd, self.serialize_type, r.body).ok();
            }
            _ => return None,
        };
        let cmd = self.oneway(remoting_code, ext);
        rframe::encode(&cmd, self.serialize_type, f.body).ok()
    }

    fn oneway(&mut self, code: i32, ext: ExtFields) -> Command {
        let mut cmd = Command::request(code, self.next_opaque, ext);
        cmd.flag = FLAG_ONEWAY;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        cmd
    }
}

/// RocketMQ's header of a pushed reply, from the native header and the reply record.
fn reply_header(h: &PushReplyRequest, r: &record::RecordView<'_>) -> ExtFields {
    ReplyMessageRequestHeader {
        producer_group: h.producer_group.clone(),
        topic: r.topic.to_string(),
        default_topic: "TBW102".to_string(),
        default_topic_queue_nums: 4,
        queue_id: i32::try_from(r.queue_id).unwrap_or(0),
        // The host bits describe the record's layout, which the body alone does not have.
        sys_flag: (r.sys_flag & !(record::sys_flag::BORNHOST_V6 | record::sys_flag::STOREHOST_V6))
            as i32,
        born_timestamp: r.born_timestamp_ms,
        flag: r.flag,
        properties: Some(String::from_utf8_lossy(r.properties).into_owned()),
        reconsume_times: Some(r.reconsume_times),
        unit_mode: false,
        born_host: r.born_host.to_string(),
        store_host: r.store_host.to_string(),
        store_timestamp: r.store_timestamp_ms,
    }
    .to_ext()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_becomes_a_oneway_remoting_request() {
        let mut native = Vec::new();
        frame::encode_request(
            &mut native,
            RequestCode::NotifyConsumerIdsChanged,
            true,
            9,
            &NotifyConsumerIdsChanged {
                consumer_group: "billing".into(),
            },
            &[],
        )
        .expect("encodes");
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let out = PushCodec::new(st).translate(&native).expect("translated");
            let p = rframe::parse(&out).expect("parses");
            assert_eq!(p.serialize_type, st);
            assert_eq!(p.command.code, request::NOTIFY_CONSUMER_IDS_CHANGED);
            assert!(p.command.is_oneway());
            assert_eq!(p.command.ext("consumerGroup"), Some("billing"));
        }
    }

    #[test]
    fn a_pushed_reply_becomes_rocketmqs_reply_message_request() {
        let mut props = Vec::new();
        ringmq_wire::properties::encode(
            [
                ("CORRELATION_ID", "c-1"),
                ("REPLY_TO_CLIENT", "10.0.0.1@7"),
                ("MSG_TYPE", "reply"),
            ],
            &mut props,
        )
        .expect("encodes");
        let born: std::net::SocketAddr = "10.0.0.2:4000".parse().expect("addr");
        let m = record::Message {
            topic: "DefaultCluster_REPLY_TOPIC",
            queue_id: 0,
            flag: 3,
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: born,
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"pong",
            properties: &props,
        };
        let mut rec = Vec::new();
        record::encode(&m, &mut rec).expect("encodes");
        let mut native = Vec::new();
        frame::encode_request(
            &mut native,
            RequestCode::PushReplyMessageToClient,
            true,
            4,
            &PushReplyRequest {
                broker_name: "broker-a".into(),
                producer_group: "repliers".into(),
            },
            &rec,
        )
        .expect("encodes");
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let out = PushCodec::new(st).translate(&native).expect("translated");
            let p = rframe::parse(&out).expect("parses");
            assert_eq!(p.command.code, request::PUSH_REPLY_MESSAGE_TO_CLIENT);
            assert!(p.command.is_oneway());
            assert_eq!(p.body, b"pong");
            let h = <ReplyMessageRequestHeader as ringmq_wire::remoting::ext::FromExt>::from_ext(
                &p.command.ext_fields,
            )
            .expect("RocketMQ's header");
            assert_eq!(h.topic, "DefaultCluster_REPLY_TOPIC");
            assert_eq!(h.producer_group, "repliers");
            assert_eq!(h.flag, 3);
            assert_eq!(h.born_host, "10.0.0.2:4000");
            let props = h.properties.expect("properties");
            assert!(props.contains("CORRELATION_ID\u{1}c-1\u{2}"), "{props:?}");
        }
    }
}
