//! The broker's side of consumer groups against the real binary, on raw frames: membership
//! change notices pushed on a client's own connection (NOTIFY_CONSUMER_IDS_CHANGED), a
//! closed connection taking its client out of the group and releasing its queue locks,
//! LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, and CONSUMER_SEND_MSG_BACK into the retry topic with
//! growing delays and then the dead-letter topic.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{
    ConsumeFromWhere, ConsumeType, ConsumerGroupData, ConsumerList, ConsumerSendBackRequest,
    GetConsumerListRequest, HeartbeatData, LockBatchRequest, LockBatchResponse, MessageModel,
    MessageQueue, NotifyConsumerIdsChanged, PullResponse, SendResponse, Subscription,
    UnregisterClientRequest,
};
use ringmq_wire::properties::keys;
use ringmq_wire::record::RecordView;

const GROUP: &str = "cg-consumers";
const TOPIC: &str = "ConsumersTopic";

fn heartbeat(c: &mut Client, client_id: &str) {
    let hb = HeartbeatData {
        client_id: client_id.to_string(),
        producer_groups: vec![],
        consumer_groups: vec![ConsumerGroupData {
            group: GROUP.to_string(),
            consume_type: ConsumeType::Passively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::FirstOffset,
            subscriptions: vec![Subscription {
                topic: TOPIC.to_string(),
                filter_type: FilterType::Tag,
                expression: "*".to_string(),
                version: 1,
            }],
        }],
    };
    c.call(RequestCode::HeartBeat, &Empty, &hb.to_vec().unwrap())
        .ok();
}

fn members(c: &mut Client) -> Vec<String> {
    let r = c.call(
        RequestCode::GetConsumerListByGroup,
        &GetConsumerListRequest {
            consumer_group: GROUP.to_string(),
        },
        &[],
    );
    if r.status() == Status::SubscriptionNotExist {
        return Vec::new();
    }
    r.ok();
    ConsumerList::decode(&r.body).unwrap().client_ids
}

fn notices(pushed: &[Resp]) -> Vec<String> {
    pushed
        .iter()
        .filter(|p| p.code == RequestCode::NotifyConsumerIdsChanged as u16)
        .map(|p| {
            NotifyConsumerIdsChanged::decode(&p.header)
                .unwrap()
                .consumer_group
        })
        .collect()
}

fn queue(broker: &str, id: u32) -> MessageQueue {
    MessageQueue {
        topic: TOPIC.to_string(),
        broker_name: broker.to_string(),
        queue_id: id,
    }
}

fn lock(c: &mut Client, client_id: &str, queues: &[MessageQueue]) -> Vec<MessageQueue> {
    let body = LockBatchRequest {
        consumer_group: GROUP.to_string(),
        client_id: client_id.to_string(),
        queues: queues.to_vec(),
    };
    let r = c.call(RequestCode::LockBatchMq, &Empty, &body.to_vec().unwrap());
    r.ok();
    LockBatchResponse::decode(&r.body).unwrap().locked
}

fn broker_name(c: &mut Client) -> String {
    c.runtime_info().broker_name
}

#[test]
fn members_are_told_of_joins_and_closed_connections_and_locks_follow_the_holder() {
    let dir = tempdir("consumers-notify");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let mut a = Client::connect(node.broker_addr());
    let mut b = Client::connect(node.broker_addr());
    let name = broker_name(&mut a);

    heartbeat(&mut a, "client-a");
    // The group's retry topic exists as soon as a clustering member heartbeats.
    let r = a.call(RequestCode::GetAllTopicConfig, &Empty, &[]);
    r.ok();
    assert!(
        String::from_utf8_lossy(&r.body).contains(&format!("%RETRY%{GROUP}")),
        "no retry topic after a clustering heartbeat"
    );

    // Every member is told of a join, the joiner too (RocketMQ's broker does the same).
    let got = notices(&a.wait_pushed(Duration::from_secs(10)));
    assert_eq!(
        got,
        vec![GROUP.to_string()],
        "a was not told of its own join"
    );

    heartbeat(&mut b, "client-b");
    let got = notices(&a.wait_pushed(Duration::from_secs(10)));
    assert_eq!(got, vec![GROUP.to_string()], "a was not told b joined");
    let got = notices(&b.wait_pushed(Duration::from_secs(10)));
    assert_eq!(
        got,
        vec![GROUP.to_string()],
        "b was not told of its own join"
    );
    assert_eq!(members(&mut a), vec!["client-a", "client-b"]);
    // A repeated heartbeat is no change: nobody is told.
    heartbeat(&mut b, "client-b");
    assert!(notices(&a.wait_pushed(Duration::from_millis(300))).is_empty());

    // Locks: one holder per queue; the holder renews; others get what is free.
    assert_eq!(
        lock(&mut a, "client-a", &[queue(&name, 0), queue(&name, 1)]),
        vec![queue(&name, 0), queue(&name, 1)]
    );
    assert_eq!(
        lock(&mut b, "client-b", &[queue(&name, 1), queue(&name, 2)]),
        vec![queue(&name, 2)]
    );
    assert_eq!(
        lock(&mut a, "client-a", &[queue(&name, 1)]),
        vec![queue(&name, 1)]
    );
    // A lock for a queue of another broker is refused with the reason.
    let body = LockBatchRequest {
        consumer_group: GROUP.to_string(),
        client_id: "client-a".to_string(),
        queues: vec![queue("some-other-broker", 0)],
    };
    let r = a.call(RequestCode::LockBatchMq, &Empty, &body.to_vec().unwrap());
    r.expect_status(Status::MessageIllegal);
    assert!(r.remark().contains("some-other-broker"), "{}", r.remark());

    // a's connection closes without a goodbye: it leaves the group, b is told, and a's
    // locks are free at once (not after rebalanceLockMaxLiveTime).
    drop(a);
    let got = notices(&b.wait_pushed(Duration::from_secs(10)));
    assert_eq!(got, vec![GROUP.to_string()], "b was not told a left");
    assert_eq!(members(&mut b), vec!["client-b"]);
    assert_eq!(
        lock(&mut b, "client-b", &[queue(&name, 0), queue(&name, 1)]),
        vec![queue(&name, 0), queue(&name, 1)]
    );

    // A third member joins and unregisters cleanly: b hears both.
    let mut c = Client::connect(node.broker_addr());
    heartbeat(&mut c, "client-c");
    assert_eq!(notices(&b.wait_pushed(Duration::from_secs(10))).len(), 1);
    let unregister = UnregisterClientRequest {
        client_id: "client-c".to_string(),
        producer_group: None,
        consumer_group: Some(GROUP.to_string()),
    };
    c.call(RequestCode::UnregisterClient, &unregister, &[]).ok();
    assert_eq!(notices(&b.wait_pushed(Duration::from_secs(10))).len(), 1);
    assert_eq!(members(&mut b), vec!["client-b"]);
    // Unlock releases only what the caller holds.
    let body = LockBatchRequest {
        consumer_group: GROUP.to_string(),
        client_id: "client-b".to_string(),
        queues: vec![queue(&name, 0)],
    };
    b.call(RequestCode::UnlockBatchMq, &Empty, &body.to_vec().unwrap())
        .ok();
    assert_eq!(
        lock(&mut c, "client-c", &[queue(&name, 0), queue(&name, 1)]),
        vec![queue(&name, 0)]
    );
}

/// Pulls one record from `topic` queue 0 at `offset`, waiting up to 10 s for it.
fn pull_one(c: &mut Client, topic: &str, offset: u64) -> (Vec<u8>, u64) {
    let got = wait_for(Duration::from_secs(10), || {
        let r = c.pull(topic, 0, offset, 1, 0);
        if r.status() != Status::Success {
            return None;
        }
        let fields: PullResponse = r.fields().unwrap();
        (!r.body.is_empty()).then(|| (r.body.clone(), fields.next_begin_offset))
    });
    got.unwrap_or_else(|| panic!("nothing in {topic} at {offset} within 10 s"))
}

fn send_back(c: &mut Client, rec: &RecordView<'_>, delay_level: i32, max: u32) -> Resp {
    let h = ConsumerSendBackRequest {
        consumer_group: GROUP.to_string(),
        original_topic: TOPIC.to_string(),
        physical_offset: rec.physical_offset,
        delay_level,
        max_reconsume_times: max,
        original_message_id: rec.property(keys::UNIQ_KEY).unwrap_or("").to_string(),
    };
    c.call(RequestCode::ConsumerSendMsgBack, &h, &[])
}

#[test]
fn send_back_retries_with_growing_delays_then_dead_letters() {
    let dir = tempdir("consumers-retry");
    let levels = "messageDelayLevel=10ms 20ms 100ms 200ms 300ms 400ms 500ms";
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "2", "--set", levels],
    );
    let mut c = Client::connect(node.broker_addr());
    let sent: SendResponse = c.send_ok(&Msg::new(TOPIC, 0, b"poison".to_vec()).props(&[
        (keys::UNIQ_KEY, "UNIQ-1"),
        (keys::TAGS, "TagA"),
        ("k", "v"),
    ]));
    let body = c.pull_all(TOPIC, 0, sent.first_queue_offset, 1);
    let first = decode_records(&body).remove(0);
    let retry = format!("%RETRY%{GROUP}");
    let dlq = format!("%DLQ%{GROUP}");

    // Three failures with a limit of 3: retry copies 1, 2, 3 (levels 3, 4, 5), then the DLQ.
    send_back(&mut c, &first, 0, 3).ok();
    let mut offset = 0;
    let mut current = body.clone();
    for n in 1..=3 {
        let (got, next) = pull_one(&mut c, &retry, offset);
        offset = next;
        let rec = decode_records(&got).remove(0);
        assert_eq!(rec.body, b"poison");
        assert_eq!(rec.reconsume_times, n);
        assert_eq!(
            rec.property(keys::RECONSUME_TIME),
            Some(n.to_string().as_str())
        );
        assert_eq!(rec.property(keys::RETRY_TOPIC), Some(TOPIC));
        assert_eq!(rec.property(keys::UNIQ_KEY), Some("UNIQ-1"));
        assert_eq!(rec.property(keys::ORIGIN_MESSAGE_ID), Some("UNIQ-1"));
        assert_eq!(rec.property(keys::TAGS), Some("TagA"));
        assert_eq!(rec.property("k"), Some("v"));
        assert_eq!(rec.property(keys::MAX_RECONSUME_TIMES), Some("3"));
        assert_eq!(
            rec.property(keys::DELAY),
            None,
            "the delivered copy still asks for a delay"
        );
        let scheduled_for = rec
            .property(keys::TIMER_OUT_MS)
            .unwrap()
            .parse::<i64>()
            .unwrap();
        assert!(
            scheduled_for <= rec.store_timestamp_ms,
            "delivered before due"
        );
        current = got.clone();
        send_back(&mut c, &rec, 0, 3).ok();
    }
    let (got, _) = pull_one(&mut c, &dlq, 0);
    let dead = decode_records(&got).remove(0);
    assert_eq!(dead.body, b"poison");
    // The dead letter counts the failed delivery too, as RocketMQ does.
    assert_eq!(dead.reconsume_times, 4);
    assert_eq!(dead.property(keys::RETRY_TOPIC), Some(TOPIC));
    assert_eq!(dead.property(keys::ORIGIN_MESSAGE_ID), Some("UNIQ-1"));
    assert_eq!(dead.property(keys::DELAY), None);
    // Nothing more went to the retry topic after the third copy.
    assert_eq!(c.max_offset(&retry, 0), 3);
    drop(current);

    // delay_level -1 sends straight to the DLQ; a bad level and a bad offset are refused.
    let again = c.send_ok(&Msg::new(TOPIC, 1, b"straight".to_vec()));
    let rec_body = c.pull_all(TOPIC, 1, again.first_queue_offset, 1);
    let rec = decode_records(&rec_body).remove(0);
    send_back(&mut c, &rec, -1, 16).ok();
    let (got, _) = pull_one(&mut c, &dlq, 1);
    assert_eq!(decode_records(&got)[0].body, b"straight");
    send_back(&mut c, &rec, -2, 16).expect_status(Status::MessageIllegal);
    let bad = ConsumerSendBackRequest {
        consumer_group: GROUP.to_string(),
        original_topic: TOPIC.to_string(),
        physical_offset: rec.physical_offset + 3,
        delay_level: 0,
        max_reconsume_times: 16,
        original_message_id: String::new(),
    };
    let r = c.call(RequestCode::ConsumerSendMsgBack, &bad, &[]);
    assert_ne!(
        r.status(),
        Status::Success,
        "a send-back of no message succeeded"
    );
    // The broker still serves.
    c.send_ok(&Msg::new(TOPIC, 0, b"after".to_vec()));
}

#[test]
fn a_groups_retry_limit_applies_when_the_consumer_sets_none_and_survives_a_restart() {
    use ringmq_wire::command::{
        ConsumerGroupList, DeleteSubscriptionGroupRequest, SubscriptionGroupConfig,
    };
    let dir = tempdir("consumers-group-config");
    let data = dir.path().join("data");
    let levels = "messageDelayLevel=10ms 20ms 30ms";
    let mut node = Node::standalone(&data, &["--shards", "1", "--set", levels]);
    let mut c = Client::connect(node.broker_addr());
    let set = SubscriptionGroupConfig {
        group: GROUP.to_string(),
        retry_max_times: 1,
        consume_message_orderly: true,
    };
    c.call(RequestCode::UpdateAndCreateSubscriptionGroup, &set, &[])
        .ok();
    let bad = SubscriptionGroupConfig {
        group: "bad group name".to_string(),
        retry_max_times: 1,
        consume_message_orderly: false,
    };
    c.call(RequestCode::UpdateAndCreateSubscriptionGroup, &bad, &[])
        .expect_status(Status::MessageIllegal);
    node.term();
    let node = Node::standalone(&data, &["--shards", "1", "--set", levels]);
    let mut c = Client::connect(node.broker_addr());
    let r = c.call(RequestCode::GetAllSubscriptionGroupConfig, &Empty, &[]);
    let list = ConsumerGroupList::decode(&r.ok().body).unwrap();
    let g = list.groups.iter().find(|g| g.group == GROUP).unwrap();
    assert_eq!(
        g.retry_max_times, 1,
        "the setting did not survive a restart"
    );
    assert!(
        g.consume_message_orderly,
        "the orderly flag did not survive"
    );

    let sent = c.send_ok(&Msg::new(TOPIC, 0, b"once".to_vec()));
    let body = c.pull_all(TOPIC, 0, sent.first_queue_offset, 1);
    let rec = decode_records(&body).remove(0);
    // max 0 in the request: the group's limit (1) applies: one retry, then the DLQ.
    send_back(&mut c, &rec, 0, 0).ok();
    let (got, _) = pull_one(&mut c, &format!("%RETRY%{GROUP}"), 0);
    let retried = decode_records(&got).remove(0);
    assert_eq!(retried.reconsume_times, 1);
    send_back(&mut c, &retried, 0, 0).ok();
    let (got, _) = pull_one(&mut c, &format!("%DLQ%{GROUP}"), 0);
    assert_eq!(decode_records(&got)[0].body, b"once");

    let del = DeleteSubscriptionGroupRequest {
        group: GROUP.to_string(),
    };
    c.call(RequestCode::DeleteSubscriptionGroup, &del, &[]).ok();
    c.call(RequestCode::DeleteSubscriptionGroup, &del, &[])
        .expect_status(Status::SubscriptionNotExist);
}
