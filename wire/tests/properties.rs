//! Codec properties for every frame, command and record: `decode(encode(x)) == x`, the
//! encoded size is what `encoded_len` promised, a truncated encoding is an error (or, cut
//! before an `Appended` field, an older peer's message), and
//! decoding arbitrary bytes never panics. Values of the command types come from
//! [`Sample`] over proptest's bytes, so proptest shrinks them through their bytes.
#![allow(clippy::unwrap_used)]

use std::fmt::Debug;
use std::net::SocketAddr;

use proptest::prelude::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::sample::Sample;
use ringmq_wire::codec::{Decode, Encode, Raw};
use ringmq_wire::command::{self, Request, TagFilter};
use ringmq_wire::frame::{self, Flags, FRAME_BYTES_MAX, PREFIX_BYTES};
use ringmq_wire::{properties, record};

fn round_trip<T>(data: &[u8]) -> Result<(), TestCaseError>
where
    T: Encode + Decode + Sample + PartialEq + Debug,
{
    let value = T::from_bytes(data);
    let bytes = value.to_vec().unwrap();
    prop_assert_eq!(bytes.len(), value.encoded_len().unwrap());
    prop_assert!(bytes.len() >= T::MIN_BYTES);
    prop_assert_eq!(T::decode(&bytes).unwrap(), value);
    if let Some(last) = bytes.len().checked_sub(1) {
        // A truncated encoding is an error, unless the cut dropped a whole `Appended` field:
        // then it reads as an older peer's message, whose own encoding it begins.
        if let Ok(older) = T::decode(&bytes[..last]) {
            prop_assert!(
                older.to_vec().unwrap().starts_with(&bytes[..last]),
                "truncated encoding decoded as {:?}",
                older
            );
        }
    }
    Ok(())
}

macro_rules! every_type {
    ($($t:ty),* $(,)?) => {
        fn round_trip_all(data: &[u8]) -> Result<(), TestCaseError> {
            $( round_trip::<$t>(data)?; )*
            Ok(())
        }

        fn decode_all(data: &[u8]) -> usize {
            let mut ok = 0;
            $( ok += usize::from(<$t as Decode>::decode(data).is_ok()); )*
            ok
        }
    };
}

ringmq_wire::for_each_wire_type!(every_type);

fn message_parts() -> impl Strategy<Value = (String, Vec<u8>, Vec<(String, String)>)> {
    (
        "[a-zA-Z0-9_%-]{1,200}",
        prop::collection::vec(any::<u8>(), 0..300),
        prop::collection::vec(("[A-Z_]{1,8}", "[ -~]{0,16}"), 0..4),
    )
}

proptest! {
    // No regression files: a failure prints its minimal input; add it as a unit test.
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(512)
    })]

    #[test]
    fn commands_round_trip(data in prop::collection::vec(any::<u8>(), 0..400)) {
        round_trip_all(&data)?;
    }

    #[test]
    fn requests_round_trip_by_code(data in prop::collection::vec(any::<u8>(), 0..400)) {
        let req = Request::from_bytes(&data);
        let header = req.to_vec().unwrap();
        prop_assert_eq!(header.len(), req.encoded_len().unwrap());
        prop_assert_eq!(Request::decode(req.code(), &header).unwrap(), req);
    }

    #[test]
    fn command_decoders_never_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        decode_all(&data);
        for &code in RequestCode::ALL {
            let _ = Request::decode(code, &data);
        }
        let _ = command::read_remark(&data);
        if let Ok(text) = std::str::from_utf8(&data) {
            let _ = TagFilter::parse(text);
        }
    }

    #[test]
    fn frames_round_trip(
        code in any::<u16>(),
        flags in prop::sample::select(vec![Flags::REQUEST, Flags::RESPONSE, Flags::ONEWAY]),
        request_id in any::<u64>(),
        header in prop::collection::vec(any::<u8>(), 0..300),
        body in prop::collection::vec(any::<u8>(), 0..300),
        tail in prop::collection::vec(any::<u8>(), 0..30),
    ) {
        let mut out = Vec::new();
        let n = frame::encode_frame(&mut out, code, flags, request_id, &Raw(&header), &body)
            .unwrap();
        prop_assert_eq!(n, PREFIX_BYTES + header.len() + body.len());
        prop_assert_eq!(out.len(), n);
        let mut prefix_only = Vec::new();
        frame::encode_prefix(&mut prefix_only, code, flags, request_id, header.len(), body.len())
            .unwrap();
        prop_assert_eq!(&prefix_only[..], &out[..PREFIX_BYTES]);
        prop_assert_eq!(frame::check(&out[..n - 1], FRAME_BYTES_MAX).unwrap(), None);
        out.extend_from_slice(&tail);
        prop_assert_eq!(frame::check(&out, FRAME_BYTES_MAX).unwrap(), Some(n));
        prop_assert!(frame::check(&out, n - 1).is_err());
        let f = frame::parse(&out[..n]).unwrap();
        prop_assert_eq!(
            (f.code, f.flags, f.request_id, f.header, f.body),
            (code, flags, request_id, &header[..], &body[..])
        );
    }

    #[test]
    fn typed_frames_round_trip(data in prop::collection::vec(any::<u8>(), 0..400), id in any::<u64>()) {
        let req = Request::from_bytes(&data);
        let mut out = Vec::new();
        frame::encode_request(&mut out, req.code(), false, id, &req, b"").unwrap();
        let f = frame::parse(&out).unwrap();
        prop_assert_eq!(Request::from_frame(&f).unwrap(), req);
        let resp = command::Response::<command::PullResponse>::from_bytes(&data);
        let mut out = Vec::new();
        frame::encode_response(&mut out, Status::PullOffsetMoved, id, &resp, b"records").unwrap();
        let f = frame::parse(&out).unwrap();
        prop_assert_eq!(f.status().unwrap(), Status::PullOffsetMoved);
        prop_assert_eq!(command::read_remark(f.header).unwrap().0, resp.remark.as_str());
        prop_assert_eq!(command::Response::decode(f.header).unwrap(), resp);
    }

    #[test]
    fn frame_decoders_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..64),
        max in 0usize..100,
    ) {
        if let Ok(Some(n)) = frame::check(&data, max) {
            // Whatever check accepts, parse accepts.
            prop_assert!(frame::parse(&data[..n]).is_ok());
        }
        let _ = frame::check(&data, FRAME_BYTES_MAX);
        let _ = frame::parse(&data);
        let _ = frame::peek(&data);
    }

    #[test]
    fn records_round_trip(
        (topic, body, props) in message_parts(),
        queue_id in any::<u32>(),
        flag in any::<i32>(),
        sys in any::<u32>(),
        born_timestamp_ms in any::<i64>(),
        born_host in any::<SocketAddr>(),
        store_host_v6 in any::<bool>(),
        reconsume_times in any::<i32>(),
        prepared in any::<u64>(),
        broker in (any::<u64>(), any::<u64>(), any::<i64>(), any::<u16>()),
    ) {
        // The record stores IP and port only (no IPv6 flow info or scope id).
        let born_host = SocketAddr::new(born_host.ip(), born_host.port());
        let mut encoded_props = Vec::new();
        properties::encode(props.iter().map(|(k, v)| (k.as_str(), v.as_str())), &mut encoded_props)
            .unwrap();
        let msg = record::Message {
            topic: &topic,
            queue_id,
            flag,
            sys_flag: sys & !(record::sys_flag::BORNHOST_V6 | record::sys_flag::STOREHOST_V6),
            born_timestamp_ms,
            born_host,
            store_host_v6,
            reconsume_times,
            prepared_transaction_offset: prepared,
            body: &body,
            properties: &encoded_props,
        };
        let mut out = Vec::new();
        let n = record::encode(&msg, &mut out).unwrap();
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(n, record::encoded_len(&msg).unwrap());
        prop_assert_eq!(record::decode_one(&out).unwrap().message(), msg.clone());
        prop_assert!(record::decode(&out[..n - 1]).is_err());
        let store_ip: std::net::IpAddr = if store_host_v6 {
            std::net::Ipv6Addr::from(u128::from(broker.0)).into()
        } else {
            std::net::Ipv4Addr::from(broker.0 as u32).into()
        };
        let fields = record::BrokerFields {
            queue_offset: broker.0,
            physical_offset: broker.1,
            store_timestamp_ms: broker.2,
            store_host: SocketAddr::new(store_ip, broker.3),
        };
        record::patch_broker_fields(&mut out, &fields).unwrap();
        let view = record::decode_one(&out).unwrap();
        prop_assert_eq!(view.message(), msg);
        prop_assert_eq!(
            (view.queue_offset, view.physical_offset, view.store_timestamp_ms, view.store_host),
            (fields.queue_offset, fields.physical_offset, fields.store_timestamp_ms, fields.store_host)
        );
        let pairs: Vec<(&str, &str)> = properties::iter(view.properties).map(|p| p.unwrap()).collect();
        let want: Vec<(&str, &str)> = props.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        prop_assert_eq!(pairs, want);
    }

    #[test]
    fn record_decoders_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..400),
        magic in prop::sample::select(vec![record::MAGIC_V1, record::MAGIC_V2, record::BLANK_MAGIC]),
        size_hint in any::<bool>(),
    ) {
        let _ = record::decode(&data);
        let _ = record::iter(&data).count();
        let _ = properties::iter(&data).count();
        // Also with a plausible size and magic, so decoding gets past the first checks.
        let mut framed = data.clone();
        if framed.len() >= 8 {
            let size = if size_hint { framed.len() as u32 } else { u32::from_be_bytes([framed[0], framed[1], framed[2], framed[3]]) };
            framed[..4].copy_from_slice(&size.to_be_bytes());
            framed[4..8].copy_from_slice(&magic.to_be_bytes());
            let _ = record::decode(&framed);
            let _ = record::iter(&framed).count();
        }
    }
}
