//! Requests the broker sends on its own to a remoting client, on the client's connection:
//! the native frame the broker builds (the same for both protocols) becomes the remoting
//! request RocketMQ's brokers send, oneway, in the serialization the client opened with.
//!
//! - NOTIFY_CONSUMER_IDS_CHANGED: `consumerGroup`.
//! - CHECK_TRANSACTION_STATE: `tranStateTableOffset`, `commitLogOffset`, `msgId` (the
//!   message's unique key), `transactionId`, `offsetMsgId`; the body is the half record,
//!   already in the layout RocketMQ's `MessageDecoder` reads.

use std::collections::BTreeMap;

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{CheckTransactionRequest, NotifyConsumerIdsChanged};
use ringmq_wire::frame;
use ringmq_wire::record;
use ringmq_wire::remoting::code::request;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType, FLAG_ONEWAY};

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
        let mut ext = BTreeMap::new();
        let remoting_code = match code {
            RequestCode::NotifyConsumerIdsChanged => {
                let h = NotifyConsumerIdsChanged::decode(f.header).ok()?;
                ext.insert("consumerGroup".to_string(), h.consumer_group);
                request::NOTIFY_CONSUMER_IDS_CHANGED
            }
            RequestCode::CheckTransactionState => {
                let h = CheckTransactionRequest::decode(f.header).ok()?;
                let offset_id = record::decode_one_unverified(f.body)
                    .ok()
                    .map(|r| record::message_id(r.store_host, r.physical_offset))
                    .unwrap_or_default();
                ext.insert(
                    "tranStateTableOffset".to_string(),
                    h.half_queue_offset.to_string(),
                );
                ext.insert("commitLogOffset".to_string(), h.physical_offset.to_string());
                ext.insert("msgId".to_string(), h.message_id);
                ext.insert("transactionId".to_string(), h.transaction_id);
                ext.insert("offsetMsgId".to_string(), offset_id);
                request::CHECK_TRANSACTION_STATE
            }
            _ => return None,
        };
        let mut cmd = Command::request(remoting_code, self.next_opaque, ext);
        cmd.flag = FLAG_ONEWAY;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        rframe::encode(&cmd, self.serialize_type, f.body).ok()
    }
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
}
