//! Broker requests beyond plain send/pull, against the real binary: tag-filtered pulls,
//! consumer group heartbeats and member lists, topic delete, pipelining across shards, the
//! largest record, and the per-connection in-flight limit (BUSY past it, never silence).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{
    ConsumeFromWhere, ConsumeType, ConsumerGroupData, ConsumerList, DeleteTopicRequest,
    GetConsumerListRequest, HeartbeatData, MessageModel, PullResponse, SendResponse, Subscription,
    UnregisterClientRequest,
};
use ringmq_wire::frame;

fn heartbeat(c: &mut Client, client_id: &str, group: &str, topic: &str) {
    let hb = HeartbeatData {
        client_id: client_id.to_string(),
        producer_groups: vec![],
        consumer_groups: vec![ConsumerGroupData {
            group: group.to_string(),
            consume_type: ConsumeType::Passively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::FirstOffset,
            subscriptions: vec![Subscription {
                topic: topic.to_string(),
                filter_type: FilterType::Tag,
                expression: "*".to_string(),
                version: 1,
            }],
        }],
    };
    let body = ringmq_wire::codec::Encode::to_vec(&hb).unwrap();
    c.call(RequestCode::HeartBeat, &ringmq_wire::codec::Empty, &body)
        .ok();
}

fn members(c: &mut Client, group: &str) -> Resp {
    c.call(
        RequestCode::GetConsumerListByGroup,
        &GetConsumerListRequest {
            consumer_group: group.to_string(),
        },
        &[],
    )
}

#[test]
fn tags_groups_topic_delete_and_pipelining() {
    let dir = tempdir("features");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let addr = node.broker_addr();
    let mut c = Client::connect(addr);
    let topic = "Features";
    let cfg = c.create_topic_ok(topic, 4);

    // Tag filters: only matching records come back; the next offset skips the rest.
    for (i, tag) in ["TagA", "TagB", "", "TagA", "TagC", "TagB"]
        .iter()
        .enumerate()
    {
        let mut m = Msg::new(topic, 0, format!("tagged {i}"));
        if !tag.is_empty() {
            m = m.props(&[("TAGS", tag)]);
        }
        c.send_ok(&m);
    }
    for (expr, want) in [
        ("TagA", vec![0u64, 3]),
        ("TagA || TagB", vec![0, 1, 3, 5]),
        (" TagC ", vec![4]),
        ("*", vec![0, 1, 2, 3, 4, 5]),
    ] {
        let mut h = pull_request(topic, 0, 0, 32, 0);
        h.expression = expr.to_string();
        let r = c.call(RequestCode::PullMessage, &h, &[]);
        r.ok();
        let got: Vec<u64> = decode_records(&r.body)
            .iter()
            .map(|r| r.queue_offset)
            .collect();
        assert_eq!(got, want, "expression {expr:?}");
        assert_eq!(r.fields::<PullResponse>().unwrap().next_begin_offset, 6);
    }
    let mut h = pull_request(topic, 0, 0, 32, 0);
    h.expression = "NoSuchTag".to_string();
    let r = c.call(RequestCode::PullMessage, &h, &[]);
    assert_ne!(r.status(), Status::Success, "nothing matches NoSuchTag");
    assert!(decode_records(&r.body).is_empty());

    // Consumer groups: heartbeats make members, unregister removes one.
    heartbeat(&mut c, "client-b", "cg", topic);
    let mut other = Client::connect(addr);
    heartbeat(&mut other, "client-a", "cg", topic);
    let r = members(&mut c, "cg");
    r.ok();
    assert_eq!(
        ConsumerList::decode(&r.body).unwrap().client_ids,
        vec!["client-a", "client-b"]
    );
    other
        .call(
            RequestCode::UnregisterClient,
            &UnregisterClientRequest {
                client_id: "client-a".to_string(),
                producer_group: None,
                consumer_group: Some("cg".to_string()),
            },
            &[],
        )
        .ok();
    let r = members(&mut c, "cg");
    r.ok();
    assert_eq!(
        ConsumerList::decode(&r.body).unwrap().client_ids,
        vec!["client-b"]
    );
    let r = members(&mut c, "no-such-group");
    assert!(
        r.status() != Status::Success
            || ConsumerList::decode(&r.body).unwrap().client_ids.is_empty(),
        "an unknown group has no members"
    );

    // Pipelining: 200 sends in flight on one connection, to queues of both shards.
    let mut p = Client::connect(addr);
    let ids: Vec<(u64, u32, Vec<u8>)> = (0..200u32)
        .map(|i| {
            let q = 1 + i % 3;
            let body = format!("pipelined {i}").into_bytes();
            let id = p.send_frame(
                RequestCode::SendMessage,
                &Client::send_request(topic, q, false, 1),
                &Msg::new(topic, q, body.clone()).encode(),
            );
            (id, q, body)
        })
        .collect();
    let mut by_queue: BTreeMap<u32, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
    for (id, q, body) in ids {
        let r = p.recv(id);
        r.ok();
        let s = r.fields::<SendResponse>().unwrap();
        assert_eq!(s.queue_id, q);
        assert!(
            by_queue
                .entry(q)
                .or_default()
                .insert(s.first_queue_offset, body)
                .is_none(),
            "two sends got offset {} of queue {q}",
            s.first_queue_offset
        );
    }
    let shards_used: std::collections::BTreeSet<u16> =
        (1..4).map(|q| cfg.queue_shards[q]).collect();
    assert_eq!(shards_used.len(), 2, "queues 1..4 span both shards");
    for (q, recs) in &by_queue {
        let body = c.pull_all(topic, *q, 0, recs.len());
        for (got, (off, want)) in decode_records(&body).iter().zip(recs) {
            assert_eq!(got.queue_offset, *off);
            assert_eq!(got.body, &want[..]);
        }
    }

    // Topic delete: the topic is gone for pulls and offsets.
    c.call(
        RequestCode::DeleteTopicInBroker,
        &DeleteTopicRequest {
            topic: topic.to_string(),
        },
        &[],
    )
    .ok();
    c.pull(topic, 0, 0, 1, 0)
        .expect_status(Status::TopicNotExist);
    c.call(
        RequestCode::DeleteTopicInBroker,
        &DeleteTopicRequest {
            topic: topic.to_string(),
        },
        &[],
    )
    .expect_status(Status::TopicNotExist);
}

#[test]
fn largest_record_and_max_message_size() {
    let dir = tempdir("bigrecord");
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "1", "--set", "maxMessageSize=4194304"],
    );
    let mut c = Client::connect(node.broker_addr());
    let topic = "Big";
    c.create_topic_ok(topic, 1);
    let body: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let big = Msg::new(topic, 0, body.clone()).props(&[("KEYS", "big")]);
    let bytes = big.encode();
    c.send_bytes(topic, 0, &bytes).ok();
    // Two more after it, so a pull has to stop at its byte limit.
    let small = Msg::new(topic, 0, "after the big one").encode();
    c.send_bytes(topic, 0, &small).ok();
    let mut h = pull_request(topic, 0, 0, 32, 0);
    h.max_bytes = 1024; // smaller than the record: at least one record is still returned
    let r = c.call(RequestCode::PullMessage, &h, &[]);
    r.ok();
    let recs = decode_records(&r.body);
    assert_eq!(recs.len(), 1);
    assert_same_record(&bytes, &recs[0]);
    assert_eq!(r.fields::<PullResponse>().unwrap().next_begin_offset, 1);
    let body = c.pull_all(topic, 0, 1, 1);
    assert_same_record(&small, &decode_records(&body)[0]);

    // One byte over maxMessageSize (a smaller limit on a second node) is refused.
    let node2 = Node::standalone(
        &dir.path().join("data2"),
        &["--shards", "1", "--set", "maxMessageSize=65536"],
    );
    let mut c2 = Client::connect(node2.broker_addr());
    c2.create_topic_ok(topic, 1);
    c2.send_ok(&Msg::new(topic, 0, vec![7u8; 65536]));
    c2.send(&Msg::new(topic, 0, vec![7u8; 65537]))
        .expect_status(Status::MessageIllegal);
    assert_eq!(c2.max_offset(topic, 0), 1);
}

/// Sends pipelined past the in-flight limit wait instead of being refused: 1,000 SEND_MESSAGE
/// on one connection under SYNC_FLUSH (each waits for its fdatasync), all stored. With
/// `waitTimeMillsInSendQueue=0` they are refused past the limit, as before the wait. The
/// 1,000 frames go out in one write, so they arrive faster than any fdatasync finishes
/// (written one by one, a slow writer let the flushes keep up and nothing was refused).
#[test]
fn pipelined_sends_past_the_in_flight_limit_all_succeed() {
    for (wait, refusals_expected) in [(None, false), (Some("waitTimeMillsInSendQueue=0"), true)] {
        let dir = tempdir("inflight-sends");
        let mut args = vec!["--shards", "1", "--flush", "sync"];
        if let Some(set) = wait {
            args.extend(["--set", set]);
        }
        let node = Node::standalone(&dir.path().join("data"), &args);
        let addr = node.broker_addr();
        let topic = "Pipelined";
        Client::connect(addr).create_topic_ok(topic, 2);
        let mut c = Client::connect(addr);
        let mut burst = Vec::new();
        let ids: Vec<u64> = (0..1000u32)
            .map(|i| {
                let m = Msg::new(topic, i % 2, vec![7u8; 1024]);
                let h = Client::send_request(topic, i % 2, false, 1);
                let id = 1_000_000 + u64::from(i);
                frame::encode_request(
                    &mut burst,
                    RequestCode::SendMessage,
                    false,
                    id,
                    &h,
                    &m.encode(),
                )
                .expect("encoding");
                id
            })
            .collect();
        c.send_raw(&burst).expect("writing the burst");
        let statuses: Vec<Status> = ids.into_iter().map(|id| c.recv(id).status()).collect();
        let ok = statuses.iter().filter(|s| **s == Status::Success).count();
        let busy = statuses
            .iter()
            .filter(|s| **s == Status::SystemBusy)
            .count();
        assert_eq!(ok + busy, 1000, "{wait:?}: other statuses");
        assert_eq!(busy > 0, refusals_expected, "{wait:?}: {busy} refused");
        assert_eq!(c.max_offset(topic, 0) + c.max_offset(topic, 1), ok as u64);
    }
}

#[test]
fn in_flight_limit_answers_busy_and_parked_pulls_all_wake() {
    let dir = tempdir("inflight");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "1"]);
    let addr = node.broker_addr();
    let topic = "Busy";
    let mut admin = Client::connect(addr);
    admin.create_topic_ok(topic, 1);
    // 300 long-poll pulls pipelined on one connection: the first ones park, the rest are
    // answered SYSTEM_BUSY at once (CONNECTION_REQUESTS_IN_FLIGHT_MAX is 256).
    let mut c = Client::connect(addr);
    let ids: Vec<u64> = (0..300)
        .map(|_| {
            c.send_frame(
                RequestCode::PullMessage,
                &pull_request(topic, 0, 0, 1, 10_000),
                &[],
            )
        })
        .collect();
    let parked = wait_for(Duration::from_secs(5), || {
        let n: u32 = admin
            .runtime_info()
            .shards
            .iter()
            .map(|s| s.parked_pulls)
            .sum();
        (n >= 256).then_some(n)
    })
    .expect("256 pulls parked");
    assert_eq!(parked, 256, "parked pulls per connection are bounded");
    // A send behind them waits a bounded time (SEND_WAIT_MAX, 200 ms), not for the pulls'
    // 10 s long poll, and is then refused: nothing stored.
    let t = Instant::now();
    c.send(&Msg::new(topic, 0, "behind the pulls"))
        .expect_status(Status::SystemBusy);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "a send behind parked pulls waited {:?}",
        t.elapsed()
    );
    assert_eq!(admin.max_offset(topic, 0), 0);
    let t = Instant::now();
    admin.send_ok(&Msg::new(topic, 0, "wake everyone"));
    let mut busy = 0;
    let mut woke = 0;
    for id in ids {
        let r = c.recv(id);
        match r.status() {
            Status::SystemBusy => busy += 1,
            Status::Success => {
                assert_eq!(decode_records(&r.body)[0].body, b"wake everyone");
                woke += 1;
            }
            other => panic!("pull answered {} ({})", other.name(), r.remark()),
        }
    }
    assert_eq!((woke, busy), (256, 44));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the parked pulls waited {:?} after the append",
        t.elapsed()
    );
    // The connection is still usable.
    assert_eq!(c.max_offset(topic, 0), 1);
}
