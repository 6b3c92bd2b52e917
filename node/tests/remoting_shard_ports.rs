//! A broker with several shards, as RocketMQ (remoting) clients see it: the name server's
//! remoting routes name one broker per shard (`broker-a@<shard>`) at the shard's own port,
//! each with its share of the topic's queues numbered from 0; a connection to that port is
//! served by that shard in those ids (sends, pulls and their records, consumer offsets,
//! max offsets, queue locks, POP and its acks), while native clients and the broker port
//! keep the broker's ids and see the same messages, offsets and locks. One shard: nothing
//! changes (one broker at the broker port, no extra port).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use common::*;
use ringmq_wire::command::route::shard_of;
use ringmq_wire::command::{LockBatchRequest, LockBatchResponse, MessageQueue};
use ringmq_wire::remoting::code::{request, response};
use ringmq_wire::remoting::frame::SerializeType;

const TOPIC: &str = "ShardPorts";
const QUEUES: u32 = 8;
const SHARDS: u16 = 2;

/// The broker's queue id of shard `s`'s queue `j`.
fn global(s: u16, j: u32) -> u32 {
    (0..QUEUES)
        .filter(|&q| shard_of(TOPIC, q, SHARDS) == s)
        .nth(j as usize)
        .unwrap()
}

/// The remoting route of `topic`: broker name -> (address, write queues).
fn remoting_route(namesrv: SocketAddr, topic: &str) -> BTreeMap<String, (String, u32)> {
    let mut ns = Remoting::connect(namesrv, SerializeType::Json);
    // The broker registers a new topic with the name server in the background.
    let body = wait_for(READ_TIMEOUT, || {
        let (resp, body) = ns.call(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", topic)], &[]);
        (resp.code == response::SUCCESS).then_some(body)
    })
    .unwrap_or_else(|| panic!("no remoting route for {topic}"));
    let route: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mut out = BTreeMap::new();
    for q in route["queueDatas"].as_array().unwrap() {
        let name = q["brokerName"].as_str().unwrap();
        let b = route["brokerDatas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["brokerName"] == name)
            .unwrap();
        let addr = b["brokerAddrs"]["0"].as_str().unwrap().to_string();
        let n = u32::try_from(q["writeQueueNums"].as_i64().unwrap()).unwrap();
        assert_eq!(q["readQueueNums"], q["writeQueueNums"]);
        out.insert(name.to_string(), (addr, n));
    }
    out
}

fn send(r: &mut Remoting, queue: u32, body: &str) -> (i32, ringmq_wire::remoting::ext::ExtFields) {
    let q = queue.to_string();
    let (resp, _) = r.call(
        request::SEND_MESSAGE,
        &[
            ("producerGroup", "pg"),
            ("topic", TOPIC),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", &q),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "0"),
            ("reconsumeTimes", "0"),
        ],
        body.as_bytes(),
    );
    (resp.code, resp.ext_fields.clone())
}

fn pull(r: &mut Remoting, queue: u32) -> Vec<(u32, String)> {
    let q = queue.to_string();
    let (resp, body) = r.call(
        request::PULL_MESSAGE,
        &[
            ("consumerGroup", "cg"),
            ("topic", TOPIC),
            ("queueId", &q),
            ("queueOffset", "0"),
            ("maxMsgNums", "32"),
            ("sysFlag", "4"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "0"),
            ("subscription", "*"),
            ("subVersion", "0"),
        ],
        &[],
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    ringmq_wire::record::iter(&body)
        .map(|r| {
            let r = r.unwrap();
            (r.queue_id, String::from_utf8_lossy(r.body).into_owned())
        })
        .collect()
}

#[test]
fn each_shard_port_serves_its_queues_in_its_own_ids() {
    let dir = tempdir("remoting-shard-ports");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let broker = node.broker_addr();
    let mut native = Client::connect(broker);
    native.create_topic_ok(TOPIC, QUEUES);

    // One broker per shard, each at its own port, the queues shared out.
    let route = remoting_route(node.namesrv_addr(), TOPIC);
    assert_eq!(
        route.keys().map(String::as_str).collect::<Vec<_>>(),
        ["broker-a@0", "broker-a@1"]
    );
    let counts: Vec<u32> = (0..SHARDS)
        .map(|s| {
            (0..QUEUES)
                .filter(|&q| shard_of(TOPIC, q, SHARDS) == s)
                .count() as u32
        })
        .collect();
    for s in 0..SHARDS {
        assert_eq!(route[&format!("broker-a@{s}")].1, counts[usize::from(s)]);
    }
    // Admin views still show the one broker at the broker port.
    let mut ns = Client::connect(node.namesrv_addr());
    let info = ns.cluster_info();
    assert_eq!(info.brokers.len(), 1);
    assert_eq!(info.brokers[0].broker_name, "broker-a");
    let native_route = ns.route(TOPIC).unwrap();
    assert_eq!(native_route.brokers.len(), 1);
    assert_eq!(native_route.brokers[0].broker_name, "broker-a");

    let mut ports: Vec<Remoting> = (0..SHARDS)
        .map(|s| {
            let addr: SocketAddr = route[&format!("broker-a@{s}")].0.parse().unwrap();
            assert_ne!(addr, broker);
            Remoting::connect(addr, SerializeType::Json)
        })
        .collect();

    // Sends name the shard's queues; the answer names them the same way.
    for s in 0..SHARDS {
        for j in 0..counts[usize::from(s)] {
            let (code, ext) = send(&mut ports[usize::from(s)], j, &format!("s{s}-q{j}"));
            assert_eq!(code, response::SUCCESS, "{ext:?}");
            assert_eq!(ext.get("queueId"), Some(&*j.to_string()));
            assert_eq!(ext.get("queueOffset"), Some("0"));
        }
        // Past the shard's queues: refused, nothing stored.
        let (code, _) = send(
            &mut ports[usize::from(s)],
            counts[usize::from(s)],
            "nowhere",
        );
        assert_ne!(code, response::SUCCESS);
    }
    // Native clients find each in the broker's queue the shard's id names.
    for s in 0..SHARDS {
        for j in 0..counts[usize::from(s)] {
            let q = global(s, j);
            let records = native.pull_all(TOPIC, q, 0, 1);
            let got = decode_records(&records);
            assert_eq!(got.len(), 1, "queue {q}");
            assert_eq!(got[0].body, format!("s{s}-q{j}").as_bytes());
            assert_eq!(got[0].queue_id, q);
            assert_eq!(native.max_offset(TOPIC, q), 1, "only one in queue {q}");
        }
    }
    // Pulls on a shard's port: the records carry the shard's ids.
    for s in 0..SHARDS {
        for j in 0..counts[usize::from(s)] {
            assert_eq!(
                pull(&mut ports[usize::from(s)], j),
                [(j, format!("s{s}-q{j}"))]
            );
        }
    }

    // Consumer offsets: one table, each side in its own ids.
    let p1 = &mut ports[1];
    let (resp, _) = p1.call(
        request::UPDATE_CONSUMER_OFFSET,
        &[
            ("consumerGroup", "og"),
            ("topic", TOPIC),
            ("queueId", "1"),
            ("commitOffset", "1"),
        ],
        &[],
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(native.query_offset("og", TOPIC, global(1, 1)), Some(1));
    assert_eq!(native.query_offset("og", TOPIC, global(1, 0)), None);
    native.commit_offset("og", TOPIC, global(1, 0), 1);
    let (resp, _) = p1.call(
        request::QUERY_CONSUMER_OFFSET,
        &[("consumerGroup", "og"), ("topic", TOPIC), ("queueId", "0")],
        &[],
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.ext("offset"), Some("1"));
    let (resp, _) = p1.call(
        request::GET_MAX_OFFSET,
        &[("topic", TOPIC), ("queueId", "0")],
        &[],
    );
    assert_eq!(resp.ext("offset"), Some("1"));

    // Queue locks: a lock taken on shard 1's port in its ids holds against a native client
    // asking for the same queue in the broker's ids.
    let body = format!(
        r#"{{"consumerGroup":"lg","clientId":"c1","mqSet":[{{"topic":"{TOPIC}","brokerName":"broker-a@1","queueId":1}}]}}"#
    );
    let (resp, answer) = p1.call(request::LOCK_BATCH_MQ, &[], body.as_bytes());
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["lockOKMQSet"][0]["brokerName"], "broker-a@1");
    assert_eq!(answer["lockOKMQSet"][0]["queueId"], 1);
    let other = LockBatchRequest {
        consumer_group: "lg".into(),
        client_id: "c2".into(),
        queues: vec![MessageQueue {
            topic: TOPIC.into(),
            broker_name: "broker-a".into(),
            queue_id: global(1, 1),
        }],
    };
    let r = native.call(
        ringmq_wire::code::RequestCode::LockBatchMq,
        &ringmq_wire::codec::Empty,
        &ringmq_wire::codec::Encode::to_vec(&other).unwrap(),
    );
    r.ok();
    let locked: LockBatchResponse = ringmq_wire::codec::Decode::decode(&r.body).unwrap();
    assert!(locked.locked.is_empty(), "c1 holds it: {locked:?}");

    // POP on shard 0's port and acks in the ids its records carry; nothing comes again.
    let group = "pop-shards";
    let mut popped = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while popped.len() < QUEUES as usize && std::time::Instant::now() < deadline {
        popped.extend(pop_any(&mut ports[0], group));
    }
    let mut bodies: Vec<&str> = popped.iter().map(|p| p.body.as_str()).collect();
    bodies.sort_unstable();
    let mut want: Vec<String> = (0..SHARDS)
        .flat_map(|s| (0..counts[usize::from(s)]).map(move |j| format!("s{s}-q{j}")))
        .collect();
    want.sort_unstable();
    assert_eq!(bodies, want, "every message popped once");
    for p in &popped {
        // Each record's id is its queue in the view of the shard that popped it.
        assert_eq!(p.body, format!("s{}-q{}", p.revive, p.queue));
        let (q, o) = (p.queue.to_string(), p.offset.to_string());
        let (resp, _) = ports[0].call(
            request::ACK_MESSAGE,
            &[
                ("consumerGroup", group),
                ("topic", TOPIC),
                ("queueId", &q),
                ("extraInfo", &p.handle),
                ("offset", &o),
            ],
            &[],
        );
        assert_eq!(
            resp.code,
            response::SUCCESS,
            "{:?} for {:?}",
            resp.remark,
            p.body
        );
    }
    assert!(pop_any(&mut ports[1], group).is_empty());
    assert!(pop_any(&mut ports[0], group).is_empty());
}

#[test]
fn one_shard_is_one_broker_at_the_broker_port() {
    let dir = tempdir("remoting-one-shard");
    let data = dir.path().join("data");
    let node = Node::standalone(&data, &["--shards", "1"]);
    let mut native = Client::connect(node.broker_addr());
    native.create_topic_ok(TOPIC, 4);
    let route = remoting_route(node.namesrv_addr(), TOPIC);
    assert_eq!(
        route,
        BTreeMap::from([("broker-a".to_string(), (node.broker_addr().to_string(), 4))])
    );
    assert!(!data.join("config").join("shardPorts").exists());
}

#[test]
fn shard_listen_ports_names_the_ports_routes_announce() {
    let dir = tempdir("remoting-asked-ports");
    // Two free ports, found by binding and letting go.
    let free: Vec<u16> = (0..2)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap()
                .port()
        })
        .collect();
    let set = format!("shardListenPorts={},{}", free[0], free[1]);
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2", "--set", &set]);
    let mut native = Client::connect(node.broker_addr());
    native.create_topic_ok(TOPIC, QUEUES);
    let route = remoting_route(node.namesrv_addr(), TOPIC);
    let ports: Vec<String> = route.values().map(|(addr, _)| addr.clone()).collect();
    assert_eq!(
        ports,
        vec![
            format!("127.0.0.1:{}", free[0]),
            format!("127.0.0.1:{}", free[1])
        ],
        "{route:?}"
    );
}

struct Popped {
    queue: u32,
    offset: u64,
    body: String,
    revive: u16,
    handle: String,
}

/// POP_MESSAGE of any queue, with each record's receipt handle made as a RocketMQ client
/// makes it (its broker name, the record's queue id).
fn pop_any(r: &mut Remoting, group: &str) -> Vec<Popped> {
    let (resp, body) = r.call(
        request::POP_MESSAGE,
        &[
            ("consumerGroup", group),
            ("topic", TOPIC),
            ("queueId", "-1"),
            ("maxMsgNums", "32"),
            ("invisibleTime", "60000"),
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
    let revive: u16 = resp.ext("reviveQid").unwrap().parse().unwrap();
    let mut first: BTreeMap<u32, u64> = BTreeMap::new();
    ringmq_wire::record::iter(&body)
        .map(|rec| {
            let rec = rec.unwrap();
            let start = *first.entry(rec.queue_id).or_insert(rec.queue_offset);
            Popped {
                queue: rec.queue_id,
                offset: rec.queue_offset,
                body: String::from_utf8_lossy(rec.body).into_owned(),
                revive,
                handle: format!(
                    "{start} {pop_time} {invisible} {revive} 0 broker-a@0 {} {}",
                    rec.queue_id, rec.queue_offset
                ),
            }
        })
        .collect()
}
