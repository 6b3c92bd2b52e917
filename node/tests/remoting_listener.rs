//! RocketMQ's remoting protocol on the real broker and name server ports, spoken by a small
//! blocking remoting client built on `ringmq_wire::remoting`: both protocols on one port
//! (a connection is never misread), both header serializations, the answers' fields, and
//! bad remoting input (truncated frames, header lengths past the frame, invalid JSON, a
//! wrong serialize type, missing fields, huge lengths and counts), each answered with a
//! status or a closed connection while a native client keeps working and nothing from the
//! bad requests is stored. The clients written by others are in `interop/`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{PullResponse, SendResponse};
use ringmq_wire::properties;
use ringmq_wire::remoting::batch;
use ringmq_wire::remoting::code::{request, response};
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};

/// A remoting route's brokers: name -> master address.
fn shard_brokers(route: &serde_json::Value) -> BTreeMap<String, String> {
    route["brokerDatas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["brokerName"].as_str().unwrap().to_string(),
                b["brokerAddrs"]["0"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE's required short-name fields.
fn v2_header<'a>(topic: &'a str, queue: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("a", "pg"),
        ("b", topic),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", queue),
        ("f", "0"),
        ("g", "0"),
        ("h", "0"),
        ("m", "true"),
    ]
}

fn props(pairs: &[(&str, &str)]) -> String {
    let mut out = Vec::new();
    properties::encode(pairs.iter().copied(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Reads until the peer closes; true if it did within the read timeout.
fn closed_by_peer(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

#[test]
fn one_port_serves_native_and_remoting_clients() {
    let dir = tempdir("remoting-listener");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let broker = node.broker_addr();

    // The name server answers a remoting route request for the default topic, in JSON with
    // quoted keys and the fields clients require, naming each of the broker's two shards as
    // a broker at its own port (the cluster info still names the one broker).
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let mut ns = Remoting::connect(node.namesrv_addr(), st);
        let (resp, body) = ns.call(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", "TBW102")], &[]);
        assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
        let route: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let shards = shard_brokers(&route);
        assert_eq!(
            shards.keys().map(String::as_str).collect::<Vec<_>>(),
            ["broker-a@0", "broker-a@1"]
        );
        let addrs: std::collections::BTreeSet<&String> = shards.values().collect();
        assert_eq!(addrs.len(), 2, "{shards:?}");
        assert!(!addrs.contains(&broker.to_string()), "{shards:?}");
        assert_eq!(route["queueDatas"][0]["topicSysFlag"], 0);
        assert!(route["filterServerTable"].is_object());
        let (resp, _) = ns.call(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", "NoSuch")], &[]);
        assert_eq!(resp.code, response::TOPIC_NOT_EXIST);
        let (resp, body) = ns.call(request::GET_BROKER_CLUSTER_INFO, &[], &[]);
        assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
        let info: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            info["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"],
            broker.to_string()
        );
        assert_eq!(info["clusterAddrTable"]["DefaultCluster"][0], "broker-a");
    }

    // A JSON SEND_MESSAGE and a binary SEND_MESSAGE_V2 to the broker port.
    let mut json = Remoting::connect(broker, SerializeType::Json);
    let p = props(&[
        ("TAGS", "TagA"),
        ("KEYS", "k1"),
        ("UNIQ_KEY", "AAAA0001"),
        ("color", "red"),
    ]);
    let (resp, _) = json.call(
        request::SEND_MESSAGE,
        &[
            ("producerGroup", "pg"),
            ("topic", "Mixed"),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "1"),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "7"),
            ("properties", &p),
            ("reconsumeTimes", "0"),
            ("unitMode", "false"),
            ("batch", "false"),
            ("bname", "broker-a"),
        ],
        b"from remoting",
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("queueId"), Some("1"));
    assert_eq!(resp.ext("queueOffset"), Some("0"));
    assert_eq!(resp.ext("transactionId"), Some("AAAA0001"));
    let msg_id = resp.ext("msgId").unwrap().to_string();
    assert_eq!(msg_id.len(), 32);

    let mut bin = Remoting::connect(broker, SerializeType::RocketMq);
    let p2 = props(&[("TAGS", "TagB")]);
    let (resp, _) = bin.call(
        request::SEND_MESSAGE_V2,
        &[
            ("a", "pg"),
            ("b", "Mixed"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "1"),
            ("f", "0"),
            ("g", "1700000000001"),
            ("h", "0"),
            ("i", &p2),
        ],
        b"binary header",
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("queueOffset"), Some("1"));

    // A batch (RocketMQ's batch body) on SEND_BATCH_MESSAGE: one offset id per message.
    let mut body = Vec::new();
    for i in 0..3 {
        batch::encode(
            &mut body,
            0,
            format!("batch {i}").as_bytes(),
            props(&[("TAGS", "B")]),
        )
        .unwrap();
    }
    let (resp, _) = bin.call(request::SEND_BATCH_MESSAGE, &v2_header("Mixed", "1"), &body);
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("msgId").unwrap().split(',').count(), 3);
    assert_eq!(resp.ext("queueOffset"), Some("2"));

    // A native client on the same port reads what the remoting clients sent: the record was
    // built from the remoting fields, born host from the socket.
    let mut native = Client::connect(broker);
    let r = native.call(
        RequestCode::PullMessage,
        &pull_request("Mixed", 1, 0, 32, 0),
        &[],
    );
    assert_eq!(r.status(), Status::Success, "{}", r.remark());
    let recs = decode_records(&r.body);
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[0].body, b"from remoting");
    assert_eq!(recs[0].flag, 7);
    assert_eq!(recs[0].born_timestamp_ms, 1_700_000_000_000);
    assert_eq!(recs[0].born_host.ip(), json.s.local_addr().unwrap().ip());
    assert_eq!(
        recs[0].born_host.port(),
        json.s.local_addr().unwrap().port()
    );
    assert_eq!(recs[0].property("color"), Some("red"));
    assert_eq!(recs[0].tags(), Some("TagA"));
    assert_eq!(
        ringmq_wire::record::message_id(recs[0].store_host, recs[0].physical_offset),
        msg_id
    );
    assert_eq!(recs[1].body, b"binary header");
    assert_eq!(recs[4].body, b"batch 2");

    // And a native send is pulled by the remoting client, with the four offset fields as
    // strings and the body the log's record bytes.
    let h = Client::send_request("Mixed", 1, false, 1);
    let s = native.call(
        RequestCode::SendMessage,
        &h,
        &Msg::new("Mixed", 1, "native").encode(),
    );
    assert_eq!(s.status(), Status::Success);
    assert_eq!(s.fields::<SendResponse>().unwrap().first_queue_offset, 5);
    let (resp, body) = json.call(
        request::PULL_MESSAGE,
        &[
            ("consumerGroup", "cg"),
            ("topic", "Mixed"),
            ("queueId", "1"),
            ("queueOffset", "3"),
            ("maxMsgNums", "32"),
            ("sysFlag", "4"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "0"),
            ("subscription", "TagB || B"),
            ("subVersion", "0"),
        ],
        &[],
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("nextBeginOffset"), Some("6"));
    assert_eq!(resp.ext("maxOffset"), Some("6"));
    assert_eq!(resp.ext("minOffset"), Some("0"));
    assert_eq!(resp.ext("suggestWhichBrokerId"), Some("0"));
    let got = decode_records(&body);
    let bodies: Vec<&[u8]> = got.iter().map(|r| r.body).collect();
    assert_eq!(
        bodies,
        [&b"batch 1"[..], b"batch 2"],
        "the tag filter drops the untagged native message"
    );
    // Past the end: PULL_NOT_FOUND, still with the four fields.
    let (resp, _) = json.call(
        request::PULL_MESSAGE,
        &[
            ("consumerGroup", "cg"),
            ("topic", "Mixed"),
            ("queueId", "1"),
            ("queueOffset", "6"),
            ("maxMsgNums", "32"),
            ("sysFlag", "4"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "0"),
            ("subscription", "*"),
            ("subVersion", "0"),
        ],
        &[],
    );
    assert_eq!(resp.code, response::PULL_NOT_FOUND, "{:?}", resp.remark);
    assert_eq!(resp.ext("nextBeginOffset"), Some("6"));

    // A group with no stored offset on a queue that starts at 0 reads from 0.
    let (resp, _) = json.call(
        request::QUERY_CONSUMER_OFFSET,
        &[
            ("consumerGroup", "fresh"),
            ("topic", "Mixed"),
            ("queueId", "1"),
        ],
        &[],
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("offset"), Some("0"));

    // A native connection is still native on the name server (HELLO first).
    let mut nsn = Client::connect(node.namesrv_addr());
    let r = nsn.call(
        RequestCode::GetRouteInfoByTopic,
        &ringmq_wire::command::route::GetRouteRequest {
            topic: "Mixed".into(),
        },
        &[],
    );
    assert_eq!(r.status(), Status::Success, "{}", r.remark());
}

#[test]
fn bad_remoting_input_gets_an_error_or_a_closed_connection_and_stores_nothing() {
    let dir = tempdir("remoting-bad");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let broker = node.broker_addr();
    let mut native = Client::connect(broker);
    let h = Client::send_request("Bad", 0, false, 1);
    let s = native.call(
        RequestCode::SendMessage,
        &h,
        &Msg::new("Bad", 0, "good").encode(),
    );
    assert_eq!(s.status(), Status::Success);

    let prefix = |len: u32, st: u8, header_len: u32| {
        let mut f = len.to_be_bytes().to_vec();
        f.extend_from_slice(&((u32::from(st) << 24) | header_len).to_be_bytes());
        f
    };
    let bad_frames: Vec<(&str, Vec<u8>)> = vec![
        ("header length past the frame", {
            let mut f = prefix(20, 0, 500);
            f.extend_from_slice(&[b'{'; 16]);
            f
        }),
        ("invalid JSON", {
            let h = b"{\"code\":10,\"extFields\":{";
            let mut f = prefix(4 + h.len() as u32, 0, h.len() as u32);
            f.extend_from_slice(h);
            f
        }),
        ("a binary header that lies about its ext length", {
            let mut h = vec![0, 10, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
            h.extend_from_slice(&u32::MAX.to_be_bytes());
            let mut f = prefix(4 + h.len() as u32, 1, h.len() as u32);
            f.extend_from_slice(&h);
            f
        }),
        ("over the frame maximum", prefix(64 << 20, 0, 10)),
        ("under the frame minimum", vec![0, 0, 0, 2, 0, 0]),
    ];
    for (what, f) in bad_frames {
        let mut s = TcpStream::connect(broker).unwrap();
        s.write_all(&f).unwrap();
        assert!(
            closed_by_peer(&mut s),
            "{what}: the broker kept the connection"
        );
    }
    // A truncated frame from a client that then goes away.
    {
        let mut s = TcpStream::connect(broker).unwrap();
        s.write_all(&prefix(1000, 0, 100)).unwrap();
        s.write_all(b"{\"code\":10").unwrap();
    }
    // A native client that skips HELLO is read as remoting, and closed.
    {
        let mut s = Client::connect_raw(broker).unwrap();
        let mut f = Vec::new();
        ringmq_wire::frame::encode_request(
            &mut f,
            RequestCode::SendMessage,
            false,
            1,
            &Client::send_request("Bad", 0, false, 1),
            &Msg::new("Bad", 0, "no hello").encode(),
        )
        .unwrap();
        s.write_all(&f).unwrap();
        assert!(closed_by_peer(&mut s));
    }

    // Well-formed frames with bad requests get a status and keep the connection.
    let mut r = Remoting::connect(broker, SerializeType::Json);
    let (resp, _) = r.call(9999, &[], &[]);
    assert_eq!(resp.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert!(resp.remark.unwrap().contains("9999"));
    let (resp, _) = r.call(request::SEND_MESSAGE, &[("producerGroup", "pg")], b"x");
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("topic"));
    let (resp, _) = r.call(
        request::SEND_MESSAGE,
        &[
            ("producerGroup", "pg"),
            ("topic", "Bad"),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "zero"),
            ("sysFlag", "0"),
            ("bornTimestamp", "0"),
            ("flag", "0"),
        ],
        b"x",
    );
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("queueId"));
    // A batch whose first message claims a huge size, and one with a huge count of empty
    // entries: refused whole.
    let mut huge = Vec::new();
    huge.extend_from_slice(&i32::MAX.to_be_bytes());
    huge.extend_from_slice(&[0; 40]);
    let (resp, _) = r.call(request::SEND_BATCH_MESSAGE, &v2_header("Bad", "0"), &huge);
    assert_eq!(resp.code, response::MESSAGE_ILLEGAL, "{:?}", resp.remark);
    let mut many = Vec::new();
    for _ in 0..5000 {
        batch::encode(&mut many, 0, b"", "").unwrap();
    }
    let (resp, _) = r.call(request::SEND_BATCH_MESSAGE, &v2_header("Bad", "0"), &many);
    assert_eq!(resp.code, response::MESSAGE_ILLEGAL, "{:?}", resp.remark);
    let (resp, _) = r.call(request::HEART_BEAT, &[], b"{\"clientID\":[");
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    let (resp, _) = r.call(request::LOCK_BATCH_MQ, &[], b"not json");
    assert_eq!(resp.code, response::SYSTEM_ERROR);

    // Nothing of it was stored; the native client still works.
    assert_eq!(native.max_offset("Bad", 0), 1);
    let s = native.call(
        RequestCode::SendMessage,
        &h,
        &Msg::new("Bad", 0, "after").encode(),
    );
    assert_eq!(s.status(), Status::Success);
    let p = native.call(
        RequestCode::PullMessage,
        &pull_request("Bad", 0, 0, 32, 0),
        &[],
    );
    let recs = decode_records(&p.body);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1].body, b"after");
    let _ = p.fields::<PullResponse>().unwrap();
}

/// One popped record as a RocketMQ client sees it: (topic, queue, offset, body,
/// reconsume times), and the receipt handle the client makes (its fallback without
/// `startOffsetInfo`: the first popped offset of the queue names the checkpoint).
struct Popped {
    topic: String,
    queue: u32,
    offset: u64,
    body: Vec<u8>,
    reconsume_times: i32,
    handle: String,
}

fn pop(r: &mut Remoting, group: &str, topic: &str, max: u32, invisible_ms: u64) -> Vec<Popped> {
    let (max_s, inv_s) = (max.to_string(), invisible_ms.to_string());
    let (resp, body) = r.call(
        request::POP_MESSAGE,
        &[
            ("consumerGroup", group),
            ("topic", topic),
            ("queueId", "-1"),
            ("maxMsgNums", &max_s),
            ("invisibleTime", &inv_s),
            ("pollTime", "200"),
            ("bornTime", "0"),
            ("initMode", "0"),
            ("expType", "TAG"),
            ("exp", "*"),
        ],
        &[],
    );
    if resp.code == response::PULL_NOT_FOUND {
        return Vec::new();
    }
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    let pop_time = resp.ext("popTime").unwrap().to_string();
    let invisible = resp.ext("invisibleTime").unwrap().to_string();
    let revive = resp.ext("reviveQid").unwrap().to_string();
    let mut first: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let mut out = Vec::new();
    for rec in ringmq_wire::record::iter(&body) {
        let rec = rec.unwrap();
        let start = *first
            .entry((rec.topic.to_string(), rec.queue_id))
            .or_insert(rec.queue_offset);
        let retry = if rec.topic.starts_with("%RETRY%") {
            "1"
        } else {
            "0"
        };
        out.push(Popped {
            topic: rec.topic.to_string(),
            queue: rec.queue_id,
            offset: rec.queue_offset,
            body: rec.body.to_vec(),
            reconsume_times: rec.reconsume_times,
            handle: format!(
                "{start} {pop_time} {invisible} {revive} {retry} broker-a {} {}",
                rec.queue_id, rec.queue_offset
            ),
        });
    }
    out
}

fn ack(r: &mut Remoting, group: &str, topic: &str, m: &Popped) -> Command {
    let (q, o) = (m.queue.to_string(), m.offset.to_string());
    r.call(
        request::ACK_MESSAGE,
        &[
            ("consumerGroup", group),
            ("topic", topic),
            ("queueId", &q),
            ("extraInfo", &m.handle),
            ("offset", &o),
        ],
        &[],
    )
    .0
}

#[test]
fn pop_ack_and_invisible_time_changes_over_remoting() {
    let dir = tempdir("remoting-pop");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let mut r = Remoting::connect(node.broker_addr(), SerializeType::Json);
    let (group, topic) = ("rpop-group", "RemotingPop");
    for i in 0..3 {
        let q = (i % 2).to_string();
        let (resp, _) = r.call(
            request::SEND_MESSAGE,
            &[
                ("producerGroup", "pg"),
                ("topic", topic),
                ("defaultTopic", "TBW102"),
                ("defaultTopicQueueNums", "4"),
                ("queueId", &q),
                ("sysFlag", "0"),
                ("bornTimestamp", "1700000000000"),
                ("flag", "0"),
                ("reconsumeTimes", "0"),
            ],
            format!("pop-{i}").as_bytes(),
        );
        assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    }
    // Any queue: the two shards' queues may take two pops.
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while got.len() < 3 && std::time::Instant::now() < deadline {
        got.extend(pop(&mut r, group, topic, 3, 60_000));
    }
    let mut bodies: Vec<String> = got
        .iter()
        .map(|m| String::from_utf8(m.body.clone()).unwrap())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["pop-0", "pop-1", "pop-2"]);

    // Ack one, twice (the second is a no-op success).
    assert_eq!(ack(&mut r, group, topic, &got[0]).code, response::SUCCESS);
    assert_eq!(ack(&mut r, group, topic, &got[0]).code, response::SUCCESS);
    // Another: visible again in 300 ms; its old handle no longer acks.
    let (q, o) = (got[1].queue.to_string(), got[1].offset.to_string());
    let (resp, _) = r.call(
        request::CHANGE_MESSAGE_INVISIBLETIME,
        &[
            ("consumerGroup", group),
            ("topic", topic),
            ("queueId", &q),
            ("extraInfo", &got[1].handle),
            ("offset", &o),
            ("invisibleTime", "300"),
        ],
        &[],
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("invisibleTime"), Some("300"));
    assert!(resp.ext("popTime").is_some());
    let stale = ack(&mut r, group, topic, &got[1]);
    assert_ne!(stale.code, response::SUCCESS, "{:?}", stale.remark);
    // The third is acked, so only the changed one comes back, from the pop retry topic.
    assert_eq!(ack(&mut r, group, topic, &got[2]).code, response::SUCCESS);
    let mut again = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while again.is_empty() && std::time::Instant::now() < deadline {
        again = pop(&mut r, group, topic, 3, 60_000);
    }
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].body, got[1].body);
    assert_eq!(again[0].reconsume_times, 1);
    assert_eq!(again[0].topic, format!("%RETRY%{group}_{topic}"));
    // Acked under its original topic name with the handle's retry mark, as clients do.
    assert_eq!(ack(&mut r, group, topic, &again[0]).code, response::SUCCESS);
    assert!(pop(&mut r, group, topic, 3, 60_000).is_empty());
}

/// A JSON SEND_MESSAGE with properties `props`; returns the response.
fn remoting_send(r: &mut Remoting, topic: &str, queue: &str, props: &str, body: &[u8]) -> Command {
    let (resp, _) = r.call(
        request::SEND_MESSAGE,
        &[
            ("producerGroup", "pg"),
            ("topic", topic),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", queue),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "0"),
            ("properties", props),
            ("reconsumeTimes", "0"),
            ("unitMode", "false"),
            ("batch", "false"),
        ],
        body,
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    resp
}

#[test]
fn a_remoting_producer_recalls_a_scheduled_message_by_its_send_handle() {
    use ringmq_wire::recall::RecallHandle;
    let dir = tempdir("remoting-recall");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let broker = node.broker_addr();
    let topic = "RemotingRecall";
    Client::connect(broker).create_topic_ok(topic, 4);
    let mut r = Remoting::connect(broker, SerializeType::Json);

    let plain = remoting_send(&mut r, topic, "0", &props(&[("UNIQ_KEY", "U1")]), b"now");
    assert_eq!(plain.ext("recallHandle"), None, "only a scheduled send");
    let later = remoting_send(
        &mut r,
        topic,
        "1",
        &props(&[("UNIQ_KEY", "U2"), ("TIMER_DELAY_MS", "60000")]),
        b"in a minute",
    );
    let handle = later.ext("recallHandle").expect("recallHandle").to_string();
    let h = RecallHandle::decode(&handle).unwrap();
    assert_eq!(h.topic, topic);
    assert_eq!(h.broker_name, "broker-a");
    assert_eq!(Some(h.message_id.as_str()), later.ext("msgId"));

    let recall = |r: &mut Remoting, handle: &str| {
        r.call(
            request::RECALL_MESSAGE,
            &[
                ("producerGroup", "pg"),
                ("topic", topic),
                ("recallHandle", handle),
                ("bname", "broker-a"),
            ],
            &[],
        )
        .0
    };
    let ok = recall(&mut r, &handle);
    assert_eq!(ok.code, response::SUCCESS, "{:?}", ok.remark);
    assert_eq!(ok.ext("msgId"), Some(h.message_id.as_str()));
    let bad = recall(&mut r, "bm90IGEgaGFuZGxl");
    assert_eq!(bad.code, response::MESSAGE_ILLEGAL, "{:?}", bad.remark);
    let (missing, _) = r.call(request::RECALL_MESSAGE, &[("topic", topic)], &[]);
    assert_eq!(missing.code, response::SYSTEM_ERROR, "{:?}", missing.remark);

    // Delivered before the recall: RocketMQ's ILLEGAL_OPERATION.
    let soon = remoting_send(
        &mut r,
        topic,
        "2",
        &props(&[("UNIQ_KEY", "U3"), ("TIMER_DELAY_MS", "100")]),
        b"soon",
    );
    let soon_handle = soon.ext("recallHandle").unwrap().to_string();
    let mut c = Client::connect(broker);
    wait_until(
        Duration::from_secs(20),
        "the delayed message's delivery",
        || c.max_offset(topic, 2) == 1,
    );
    let late = recall(&mut r, &soon_handle);
    assert_eq!(late.code, response::ILLEGAL_OPERATION, "{:?}", late.remark);
    assert_eq!(
        c.max_offset(topic, 1),
        0,
        "the recalled message is still pending"
    );
}

/// A client that pipelines more sends on one connection than may be in flight there
/// (RocketMQ's async sends) is slowed down, not refused: past the limit the connection is not
/// read until a send finishes, and every send is stored and answered SUCCESS.
#[test]
fn pipelined_remoting_sends_past_the_in_flight_limit_all_succeed() {
    let dir = tempdir("remoting-pipelined");
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "1", "--flush", "sync"],
    );
    let broker = node.broker_addr();
    let topic = "Pipelined";
    Client::connect(broker).create_topic_ok(topic, 4);
    let mut r = Remoting::connect(broker, SerializeType::Json);
    const SENDS: i32 = 2000;
    let mut frames = Vec::new();
    for i in 1..=SENDS {
        let queue = (i % 4).to_string();
        let fields: BTreeMap<String, String> = [
            ("producerGroup", "pg"),
            ("topic", topic),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", queue.as_str()),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "0"),
            ("properties", ""),
            ("reconsumeTimes", "0"),
            ("unitMode", "false"),
            ("batch", "false"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let cmd = Command::request(request::SEND_MESSAGE, i, fields);
        let f =
            ringmq_wire::remoting::frame::encode(&cmd, SerializeType::Json, &[7u8; 1024]).unwrap();
        frames.extend_from_slice(&f);
    }
    // Written from another thread while this one reads: past the limit the broker stops
    // reading, and a writer that waited for it would never see the answers.
    let mut w = r.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&frames));
    // Answers come in any order (a refusal would come before the sends ahead of it).
    let mut refused = Vec::new();
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < SENDS as usize {
        let Some(n) = rframe::check(&r.buf, rframe::FRAME_BYTES_MAX).unwrap() else {
            let mut chunk = [0u8; 64 * 1024];
            let n = r.s.read(&mut chunk).expect("the answers");
            assert!(n > 0, "closed after {} answers", answered.len());
            r.buf.extend_from_slice(&chunk[..n]);
            continue;
        };
        let frame: Vec<u8> = r.buf.drain(..n).collect();
        let resp = rframe::parse(&frame).unwrap().command;
        assert!(
            answered.insert(resp.opaque),
            "answered twice: {}",
            resp.opaque
        );
        if resp.code != response::SUCCESS {
            refused.push((resp.opaque, resp.code, resp.remark));
        }
    }
    writer.join().unwrap().unwrap();
    assert!(
        refused.is_empty(),
        "{} of {SENDS} sends refused, the first: {:?}",
        refused.len(),
        refused.first()
    );
}
