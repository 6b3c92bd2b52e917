//! Codec properties of the remoting headers, JSON bodies and batch body
//! (`ringmq_wire::remoting::{headers, body, batch}`): `decode(encode(x)) == x`, and decoding
//! arbitrary input never panics (and, when it succeeds, re-encodes to an equal value).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Debug;

use proptest::prelude::*;
use ringmq_wire::remoting::batch;
use ringmq_wire::remoting::body::{self, *};
use ringmq_wire::remoting::ext::{ExtFields, FromExt, ToExt};
use ringmq_wire::remoting::headers::*;

// ---------------------------------------------------------------- headers

/// A map holding every key of a header, each a number that fits every field type, some
/// left out; any header must decode it.
fn numeric_ext(keys: &'static [&'static str]) -> impl Strategy<Value = ExtFields> {
    prop::collection::vec(prop::option::of(any::<i32>()), keys.len()).prop_map(move |values| {
        keys.iter()
            .zip(values)
            .filter_map(|(k, v)| v.map(|v| ((*k).to_owned(), v.to_string())))
            .collect()
    })
}

/// Any map over the header's keys and some noise keys, with values of every shape.
fn any_ext(keys: &'static [&'static str]) -> impl Strategy<Value = ExtFields> {
    let key = prop_oneof![
        prop::sample::select(keys.to_vec()).prop_map(str::to_owned),
        "[a-z]{1,3}",
    ];
    let value = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<i32>().prop_map(|n| n.to_string()),
        prop::sample::select(vec!["true", "FALSE", "", " 1", "+7", "-"]).prop_map(str::to_owned),
        "\\PC{0,12}",
    ];
    prop::collection::btree_map(key, value, 0..20).prop_map(ExtFields::from)
}

fn header_round_trip<H>(ext: &ExtFields, must_decode: bool) -> Result<(), TestCaseError>
where
    H: FromExt + ToExt + PartialEq + Debug,
{
    match H::from_ext(ext) {
        Ok(h) => prop_assert_eq!(H::from_ext(&h.to_ext()).unwrap(), h),
        Err(e) => prop_assert!(!must_decode || is_missing(&e), "{:?}: {}", ext, e),
    }
    Ok(())
}

fn is_missing(e: &ringmq_wire::WireError) -> bool {
    matches!(e, ringmq_wire::WireError::MissingField { .. })
}

macro_rules! header_properties {
    ($($name:ident: $t:ty),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig {
                failure_persistence: None,
                ..ProptestConfig::with_cases(128)
            })]
            $(
                #[test]
                fn $name(numeric in numeric_ext(<$t>::KEYS), any in any_ext(<$t>::KEYS)) {
                    header_round_trip::<$t>(&numeric, true)?;
                    let mut full = numeric.clone();
                    for k in <$t>::KEYS {
                        if !full.contains_key(k) {
                            full.insert(k, "1");
                        }
                    }
                    prop_assert!(<$t>::from_ext(&full).is_ok());
                    header_round_trip::<$t>(&any, false)?;
                }
            )*
        }
    };
}

header_properties! {
    send_request: SendMessageRequestHeader,
    send_response: SendMessageResponseHeader,
    pull_request: PullMessageRequestHeader,
    pull_response: PullMessageResponseHeader,
    query_consumer_offset: QueryConsumerOffsetRequestHeader,
    update_consumer_offset: UpdateConsumerOffsetRequestHeader,
    get_max_offset: GetMaxOffsetRequestHeader,
    get_min_offset: GetMinOffsetRequestHeader,
    search_offset: SearchOffsetRequestHeader,
    earliest_msg_storetime: GetEarliestMsgStoretimeRequestHeader,
    offset_response: OffsetResponseHeader,
    earliest_msg_storetime_response: GetEarliestMsgStoretimeResponseHeader,
    send_back: ConsumerSendMsgBackRequestHeader,
    end_transaction: EndTransactionRequestHeader,
    check_transaction_state: CheckTransactionStateRequestHeader,
    notify_consumer_ids_changed: NotifyConsumerIdsChangedRequestHeader,
    get_consumer_list: GetConsumerListByGroupRequestHeader,
    unregister_client: UnregisterClientRequestHeader,
    query_message: QueryMessageRequestHeader,
    query_message_response: QueryMessageResponseHeader,
    view_message: ViewMessageRequestHeader,
    get_route_info: GetRouteInfoRequestHeader,
    create_topic: CreateTopicRequestHeader,
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn send_v2_round_trips(numeric in numeric_ext(SendMessageRequestHeader::KEYS)) {
        let mut full = numeric;
        for k in SendMessageRequestHeader::KEYS {
            if !full.contains_key(k) {
                full.insert(k, "0");
            }
        }
        let h = SendMessageRequestHeader::from_ext(&full).unwrap();
        prop_assert_eq!(SendMessageRequestHeader::from_ext_v2(&h.to_ext_v2()).unwrap(), h);
    }

    #[test]
    fn send_v2_any_map_never_panics(any in any_ext(&["a", "b", "d", "e", "g", "i", "k", "n"])) {
        if let Ok(h) = SendMessageRequestHeader::from_ext_v2(&any) {
            prop_assert_eq!(SendMessageRequestHeader::from_ext_v2(&h.to_ext_v2()).unwrap(), h);
        }
    }
}

// ---------------------------------------------------------------- JSON bodies

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,10}"
}

fn subscription() -> impl Strategy<Value = SubscriptionData> {
    (
        any::<bool>(),
        text(),
        text(),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(any::<i32>(), 0..3),
        any::<i64>(),
        prop::sample::select(vec!["TAG", "SQL92", ""]),
    )
        .prop_map(
            |(cf, topic, sub, tags, codes, version, kind)| SubscriptionData {
                class_filter_mode: cf,
                topic,
                sub_string: sub,
                tags_set: tags,
                code_set: codes,
                sub_version: version,
                expression_type: kind.to_owned(),
            },
        )
}

fn heartbeat() -> impl Strategy<Value = HeartbeatData> {
    let consumer = (
        text(),
        prop::option::of(prop::sample::select(ConsumeType::ALL.to_vec())),
        prop::option::of(prop::sample::select(MessageModel::ALL.to_vec())),
        prop::option::of(prop::sample::select(ConsumeFromWhere::ALL.to_vec())),
        prop::collection::vec(subscription(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(group, ct, mm, cfw, subs, unit)| ConsumerData {
            group_name: group,
            consume_type: ct,
            message_model: mm,
            consume_from_where: cfw,
            subscription_data_set: subs,
            unit_mode: unit,
        });
    (
        text(),
        prop::collection::vec(text().prop_map(|g| ProducerData { group_name: g }), 0..3),
        prop::collection::vec(consumer, 0..3),
        any::<i32>(),
        any::<bool>(),
    )
        .prop_map(|(id, producers, consumers, fp, without)| HeartbeatData {
            client_id: id,
            producer_data_set: producers,
            consumer_data_set: consumers,
            heartbeat_fingerprint: fp,
            without_sub: without,
        })
}

fn broker_data() -> impl Strategy<Value = BrokerData> {
    (
        text(),
        text(),
        prop::collection::btree_map(any::<i64>(), text(), 0..3),
        prop::option::of(text()),
        any::<bool>(),
    )
        .prop_map(|(cluster, name, addrs, zone, acting)| BrokerData {
            cluster,
            broker_name: name,
            broker_addrs: addrs,
            zone_name: zone,
            enable_acting_master: acting,
        })
}

fn route() -> impl Strategy<Value = TopicRouteData> {
    let queue = (
        text(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(|(name, r, w, perm, flag)| QueueData {
            broker_name: name,
            read_queue_nums: r,
            write_queue_nums: w,
            perm,
            topic_sys_flag: flag,
        });
    (
        prop::option::of(text()),
        prop::collection::vec(queue, 0..3),
        prop::collection::vec(broker_data(), 0..3),
        prop::collection::btree_map(text(), prop::collection::vec(text(), 0..2), 0..2),
    )
        .prop_map(|(conf, queues, brokers, filters)| TopicRouteData {
            order_topic_conf: conf,
            queue_datas: queues,
            broker_datas: brokers,
            filter_server_table: filters
                .into_iter()
                .map(|(k, v)| (k, FilterServers(v)))
                .collect(),
        })
}

fn cluster_info() -> impl Strategy<Value = ClusterInfo> {
    (
        prop::collection::btree_map(text(), broker_data(), 0..3),
        prop::collection::btree_map(text(), prop::collection::vec(text(), 0..3), 0..3),
    )
        .prop_map(|(brokers, clusters)| ClusterInfo {
            broker_addr_table: brokers,
            cluster_addr_table: clusters
                .into_iter()
                .map(|(k, v)| (k, BrokerNames(v)))
                .collect(),
        })
}

fn queues() -> impl Strategy<Value = Vec<MessageQueue>> {
    prop::collection::vec(
        (text(), text(), any::<i32>()).prop_map(|(topic, name, id)| MessageQueue {
            topic,
            broker_name: name,
            queue_id: id,
        }),
        0..4,
    )
}

fn json_round_trip<T: JsonBody + PartialEq + Debug>(value: &T) -> Result<(), TestCaseError> {
    let bytes = value.to_json();
    // Standard JSON: the fastjson pass has nothing to quote.
    prop_assert!(matches!(
        body::quote_bare_keys(&bytes),
        std::borrow::Cow::Borrowed(_)
    ));
    prop_assert_eq!(&T::from_json(&bytes).unwrap(), value);
    Ok(())
}

fn json_decodes_or_errs<T: JsonBody + PartialEq + Debug>(data: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(v) = T::from_json(data) {
        prop_assert_eq!(T::from_json(&v.to_json()).unwrap(), v);
    }
    Ok(())
}

fn json_decode_all(data: &[u8]) -> Result<(), TestCaseError> {
    json_decodes_or_errs::<HeartbeatData>(data)?;
    json_decodes_or_errs::<TopicRouteData>(data)?;
    json_decodes_or_errs::<ClusterInfo>(data)?;
    json_decodes_or_errs::<LockBatchRequestBody>(data)?;
    json_decodes_or_errs::<LockBatchResponseBody>(data)?;
    json_decodes_or_errs::<GetConsumerListByGroupResponseBody>(data)?;
    Ok(())
}

/// JSON-ish text: the body's own field names, brackets, numbers and strings in any order,
/// so the decoders get past the first byte.
fn json_ish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "null",
        "true",
        "0",
        "-1",
        "17",
        "\"x\"",
        "\"0\"",
        "1e3",
        "\"clientID\"",
        "\"consumerDataSet\"",
        "\"subscriptionDataSet\"",
        "\"codeSet\"",
        "\"consumeType\"",
        "\"CLUSTERING\"",
        "\"brokerDatas\"",
        "\"brokerAddrs\"",
        "\"queueDatas\"",
        "\"mqSet\"",
        "\"lockOKMQSet\"",
        "\"consumerIdList\"",
        "\"clusterAddrTable\"",
        "\"brokerAddrTable\"",
        "\"subVersion\"",
    ]);
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn heartbeat_round_trips(v in heartbeat()) { json_round_trip(&v)?; }

    #[test]
    fn route_round_trips(v in route()) { json_round_trip(&v)?; }

    #[test]
    fn cluster_info_round_trips(v in cluster_info()) { json_round_trip(&v)?; }

    #[test]
    fn lock_bodies_round_trip(q in queues(), group in text(), client in text(), only in any::<bool>()) {
        json_round_trip(&LockBatchRequestBody {
            consumer_group: group,
            client_id: client,
            only_this_broker: only,
            mq_set: q.clone(),
        })?;
        json_round_trip(&LockBatchResponseBody { lock_ok_mq_set: q })?;
    }

    #[test]
    fn consumer_list_round_trips(ids in prop::collection::vec(text(), 0..5)) {
        json_round_trip(&GetConsumerListByGroupResponseBody { consumer_id_list: ids })?;
    }

    #[test]
    fn json_bodies_never_panic_on_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        json_decode_all(&data)?;
        let _ = body::quote_bare_keys(&data);
    }

    #[test]
    fn json_bodies_never_panic_on_json_ish(data in json_ish()) {
        json_decode_all(&data)?;
    }
}

// ---------------------------------------------------------------- batch body

type Parts = Vec<(i32, Vec<u8>, String)>;

fn batch_parts() -> impl Strategy<Value = Parts> {
    prop::collection::vec(
        (
            any::<i32>(),
            prop::collection::vec(any::<u8>(), 0..64),
            prop::collection::vec(("[A-Z_]{1,6}", "[ -~]{0,8}"), 0..3).prop_map(|pairs| {
                let mut out = Vec::new();
                ringmq_wire::properties::encode(
                    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                    &mut out,
                )
                .unwrap();
                String::from_utf8(out).unwrap()
            }),
        ),
        0..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(512)
    })]

    #[test]
    fn batch_round_trips(parts in batch_parts()) {
        let mut bytes = Vec::new();
        let mut len = 0;
        for (flag, body, props) in &parts {
            batch::encode(&mut bytes, *flag, body, props).unwrap();
            len += batch::encoded_len(body.len(), props.len());
        }
        prop_assert_eq!(bytes.len(), len);
        prop_assert_eq!(batch::check(&bytes).unwrap(), parts.len());
        let got: Vec<_> = batch::iter(&bytes).map(Result::unwrap).collect();
        prop_assert_eq!(got.len(), parts.len());
        for (m, (flag, body, props)) in got.iter().zip(&parts) {
            prop_assert_eq!(m.flag, *flag);
            prop_assert_eq!(m.body, &body[..]);
            prop_assert_eq!(m.properties, props.as_bytes());
        }
        if let Some(last) = bytes.len().checked_sub(1) {
            prop_assert!(batch::check(&bytes[..last]).is_err(), "truncated batch checked");
        }
    }

    #[test]
    fn batch_never_panics(data in prop::collection::vec(any::<u8>(), 0..300)) {
        let checked = batch::check(&data);
        let mut items = 0;
        for m in batch::iter(&data) {
            match m {
                Ok(m) => {
                    items += 1;
                    let mut again = Vec::new();
                    batch::encode(&mut again, m.flag, m.body, m.properties).unwrap();
                    let back = batch::iter(&again).next().unwrap().unwrap();
                    prop_assert_eq!((back.flag, back.body, back.properties), (m.flag, m.body, m.properties));
                }
                Err(_) => prop_assert!(checked.is_err()),
            }
        }
        if let Ok(n) = checked {
            prop_assert_eq!(n, items);
        }
    }
}

#[test]
fn header_keys_are_unique() {
    let all: &[&[&str]] = &[
        SendMessageRequestHeader::KEYS,
        PullMessageRequestHeader::KEYS,
        EndTransactionRequestHeader::KEYS,
        CreateTopicRequestHeader::KEYS,
    ];
    for keys in all {
        let set: BTreeMap<_, _> = keys.iter().map(|k| (k, ())).collect();
        assert_eq!(set.len(), keys.len());
    }
}

// ---------------------------------------------------------------- frame

use ringmq_wire::remoting::frame::{self as rframe, Command, Language, SerializeType};

fn command() -> impl Strategy<Value = Command> {
    (
        any::<i16>(),
        0u8..14,
        any::<i16>(),
        any::<i32>(),
        0i32..4,
        prop::option::of(text()),
        prop::collection::btree_map("[a-zA-Z]{1,8}", text(), 0..6),
    )
        .prop_map(|(code, lang, version, opaque, flag, remark, ext)| Command {
            code: i32::from(code),
            language: Language::from_code(lang),
            version: i32::from(version),
            opaque,
            flag,
            // The binary header cannot tell an empty remark from none.
            remark: remark.filter(|r| !r.is_empty()),
            ext_fields: ext.into(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Both serializations: decode(encode(x)) == x, `check` sees the whole frame and not a
    /// byte less.
    #[test]
    fn remoting_frame_round_trips(c in command(), body in prop::collection::vec(any::<u8>(), 0..64), binary in any::<bool>()) {
        let st = if binary { SerializeType::RocketMq } else { SerializeType::Json };
        let f = rframe::encode(&c, st, &body).unwrap();
        prop_assert_eq!(rframe::check(&f, rframe::FRAME_BYTES_MAX).unwrap(), Some(f.len()));
        prop_assert_eq!(rframe::check(&f[..f.len() - 1], rframe::FRAME_BYTES_MAX).unwrap(), None);
        let p = rframe::parse(&f).unwrap();
        prop_assert_eq!(p.command, c);
        prop_assert_eq!(p.serialize_type, st);
        prop_assert_eq!(p.body, &body[..]);
    }

    /// Arbitrary bytes, and arbitrary bytes behind a plausible prefix, never panic.
    #[test]
    fn remoting_frame_never_panics(data in prop::collection::vec(any::<u8>(), 0..300), st in 0u8..3) {
        let _ = rframe::check(&data, 1 << 20);
        let _ = rframe::parse(&data);
        let mut f = ((4 + data.len()) as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&((u32::from(st) << 24) | data.len() as u32).to_be_bytes());
        f.extend_from_slice(&data);
        if let Ok(Some(n)) = rframe::check(&f, 1 << 20) {
            let _ = rframe::parse(&f[..n]);
        }
    }
}
