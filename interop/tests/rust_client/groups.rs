//! Consumer groups: two clustering members that share the queues and hand them over when one
//! leaves, broadcasting, and orderly consumption under the broker's queue locks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{DefaultMQPushConsumer, MQPushConsumer};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;

use super::rmq::{self, code, duplicates, wait_deliveries, Record, RecordOrderly, Rmq};

/// Creates `topic` on the broker (created on its first send, 8 queues) with a throwaway
/// producer, so that the test's own producer and consumers find a route with all of its
/// queues. The message it sends has the body `warmup`.
pub async fn create_topic(rmq: &Rmq, topic: &str) {
    let mut p = rmq.producer(&format!("interop-warmup-{topic}")).await;
    let m = Message::builder()
        .topic(topic.to_string())
        .body_slice(b"warmup")
        .build()
        .expect("a valid message");
    p.send(m)
        .await
        .unwrap_or_else(|e| panic!("creating {topic} by a send: {e}"));
    p.shutdown().await;
}

/// The queue ids of `topic` a push consumer holds now, as the broker numbers them.
pub async fn held_queues(c: &DefaultMQPushConsumer, topic: &str) -> BTreeSet<i32> {
    match c.consumer_running_info().await {
        Ok(info) => info
            .mq_table
            .keys()
            .filter(|mq| mq.topic() == topic)
            .map(|mq| rmq::broker_queue_id(topic, mq.broker_name(), mq.queue_id()))
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// Waits (at most `limit`) until the members together hold `n` queues of `topic`, each
/// held once and each member holding some.
async fn wait_split(members: &[&DefaultMQPushConsumer], topic: &str, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let mut held = Vec::new();
        for m in members {
            held.push(held_queues(m, topic).await);
        }
        let all: BTreeSet<i32> = held.iter().flatten().copied().collect();
        let total: usize = held.iter().map(BTreeSet::len).sum();
        if all.len() == n && total == n && held.iter().all(|h| !h.is_empty()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the members never split the {n} queues of {topic}: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn send_bodies(rmq: &Rmq, group: &str, topic: &str, bodies: &[String]) {
    let mut p = rmq.producer(group).await;
    for b in bodies {
        let m = Message::builder()
            .topic(topic.to_string())
            .tags("TagR")
            .body_slice(b.as_bytes())
            .build()
            .expect("a valid message");
        p.send(m)
            .await
            .unwrap_or_else(|e| panic!("sending {b}: {e}"));
    }
    p.shutdown().await;
}

/// Two members split the 8 queues; every message reaches exactly one of them. Then one
/// leaves (a clean shutdown: offsets committed, client unregistered) and the other takes
/// all queues over: again nothing lost and nothing delivered twice.
pub async fn rebalance_when_a_member_leaves(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropRebalance";
    let group = "interop-rebalance-cg";
    create_topic(&rmq, topic).await;

    let sink = rmq::sink();
    let mut a = rmq.push(group, topic, "*").await;
    a.register_message_listener_concurrently(Record::ok("A", &sink));
    a.start().await.expect("starting member A");
    let mut b = rmq.push(group, topic, "*").await;
    b.register_message_listener_concurrently(Record::ok("B", &sink));
    b.start().await.expect("starting member B");
    wait_split(&[&a, &b], topic, 8, Duration::from_secs(20)).await;

    let first: Vec<String> = (0..40).map(|i| format!("r1-{i}")).collect();
    send_bodies(&rmq, "interop-rebalance-pg1", topic, &first).await;
    let got = wait_deliveries(&sink, Duration::from_secs(20), "the first 40", |g| {
        first.iter().all(|b| g.iter().any(|x| &x.body_str() == b))
    })
    .await;
    let by = |member: &str, prefix: &str| {
        got.iter()
            .filter(|g| g.member == member && g.body_str().starts_with(prefix))
            .count()
    };
    assert!(
        by("A", "r1-") > 0 && by("B", "r1-") > 0,
        "both members get messages while both are in the group: A {} B {}",
        by("A", "r1-"),
        by("B", "r1-")
    );

    b.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while held_queues(&a, topic).await.len() < 8 {
        assert!(
            Instant::now() < deadline,
            "A never took over B's queues: {:?}",
            held_queues(&a, topic).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second: Vec<String> = (0..40).map(|i| format!("r2-{i}")).collect();
    send_bodies(&rmq, "interop-rebalance-pg2", topic, &second).await;
    wait_deliveries(&sink, Duration::from_secs(20), "the second 40", |g| {
        second.iter().all(|b| g.iter().any(|x| &x.body_str() == b))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let got: Vec<_> = rmq::snapshot(&sink)
        .into_iter()
        .filter(|g| g.body_str() != "warmup")
        .collect();
    let dups = duplicates(got.iter().map(|g| g.body_str()));
    assert!(
        dups.is_empty(),
        "delivered more than once (to one or both members): {dups:?}"
    );
    let late_to_b: Vec<_> = got
        .iter()
        .filter(|g| g.member == "B" && g.body_str().starts_with("r2-"))
        .collect();
    assert!(
        late_to_b.is_empty(),
        "delivered to a member that left: {late_to_b:?}"
    );
    assert_eq!(got.len(), 80, "every message once");
    a.shutdown().await;
    rmq.wire.assert_sent(&[
        code::GET_CONSUMER_LIST_BY_GROUP,
        code::QUERY_CONSUMER_OFFSET,
        code::UPDATE_CONSUMER_OFFSET,
        code::UNREGISTER_CLIENT,
    ]);
    rmq.finish().await;
}

/// Two broadcasting members each get every message once. (Run in a child process: the
/// client keeps broadcasting offsets in a local folder named by an environment variable.)
pub async fn broadcasting(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropBroadcast";
    let group = "interop-broadcast-cg";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    let mut members = Vec::new();
    for name in ["M1", "M2"] {
        let mut m = rmq
            .push_as(group, topic, "*", MessageModel::Broadcasting, Some(name))
            .await;
        m.register_message_listener_concurrently(Record::ok(name, &sink));
        m.start().await.expect("starting a broadcasting member");
        members.push(m);
    }
    let bodies: Vec<String> = (0..10).map(|i| format!("b-{i}")).collect();
    send_bodies(&rmq, "interop-broadcast-pg", topic, &bodies).await;
    let want: BTreeSet<String> = bodies
        .iter()
        .cloned()
        .chain(["warmup".to_string()])
        .collect();
    wait_deliveries(
        &sink,
        Duration::from_secs(25),
        "every message at both members",
        |g| {
            ["M1", "M2"].iter().all(|m| {
                let mine: BTreeSet<String> = g
                    .iter()
                    .filter(|x| x.member == *m)
                    .map(|x| x.body_str())
                    .collect();
                mine == want
            })
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rmq::snapshot(&sink);
    for m in ["M1", "M2"] {
        let dups = duplicates(got.iter().filter(|g| g.member == m).map(|g| g.body_str()));
        assert!(dups.is_empty(), "{m} got some twice: {dups:?}");
    }
    for mut m in members {
        m.shutdown().await;
    }
    rmq.finish().await;
}

/// Orders of 8 steps each, sent by order id to one queue each, reach an orderly listener
/// step by step. The client consumes a queue orderly only while the broker grants it the
/// queue's lock (LOCK_BATCH_MQ), so nothing arrives at all without the locks.
pub async fn orderly(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropOrderly";
    create_topic(&rmq, topic).await;
    let mut p = rmq.producer("interop-orderly-pg").await;
    for step in 0..8 {
        for order in 0..3usize {
            let m = Message::builder()
                .topic(topic.to_string())
                .tags("TagO")
                .key(format!("order-{order}"))
                .body_slice(format!("o{order}-s{step}").as_bytes())
                .build()
                .expect("a valid message");
            let r = p
                .send_with_selector(
                    m,
                    |mqs, _m, order: &usize| mqs.get(order % mqs.len()).cloned(),
                    order,
                )
                .await
                .unwrap_or_else(|e| panic!("ordered send: {e}"))
                .expect("a result");
            let q = r.message_queue.as_ref().map(|q| q.queue_id());
            assert_eq!(
                q,
                Some(order as i32),
                "order {order} goes to queue {order}: {r:?}"
            );
        }
    }
    p.shutdown().await;

    let sink = rmq::sink();
    let mut c = rmq.push("interop-orderly-cg", topic, "TagO").await;
    c.register_message_listener_orderly(RecordOrderly {
        member: "orderly".into(),
        sink: sink.clone(),
    });
    c.start().await.expect("starting the orderly consumer");
    let got = wait_deliveries(&sink, Duration::from_secs(30), "all 24 steps", |g| {
        g.len() >= 24
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = if rmq::snapshot(&sink).len() > got.len() {
        rmq::snapshot(&sink)
    } else {
        got
    };
    let mut steps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in &got {
        steps.entry(g.keys.clone()).or_default().push(g.body_str());
    }
    for order in 0..3 {
        let want: Vec<String> = (0..8).map(|s| format!("o{order}-s{s}")).collect();
        assert_eq!(
            steps.get(&format!("order-{order}")),
            Some(&want),
            "order {order} in queue order, once each"
        );
    }
    assert_eq!(got.len(), 24, "nothing else, nothing twice");
    c.shutdown().await;
    rmq.wire
        .assert_sent(&[code::LOCK_BATCH_MQ, code::PULL_MESSAGE]);
    rmq.finish().await;
}

/// Waits (at most `limit`) until every queue of `topic` a member holds is locked for it
/// by the broker (LOCK_BATCH_MQ granted).
async fn wait_locked(members: &[&DefaultMQPushConsumer], topic: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let mut unlocked = Vec::new();
        for (i, m) in members.iter().enumerate() {
            if let Ok(info) = m.consumer_running_info().await {
                for (mq, pq) in &info.mq_table {
                    if mq.topic() == topic && !pq.locked {
                        unlocked.push((i, mq.queue_id()));
                    }
                }
            }
        }
        if unlocked.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "queues held but never locked (member, queue): {unlocked:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two orderly members of one group: the broker's queue locks give each queue to one of
/// them; 8 orders (one per queue) of 6 steps each arrive in order, each order at one
/// member only, and both members work. (Run in a child process with the client's
/// rebalance and lock intervals at 2 s instead of 20 s: a member whose first lock attempt
/// races the other member's unlock tries again soon.)
pub async fn orderly_two_members(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropOrderly2";
    let group = "interop-orderly2-cg";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    let mut members = Vec::new();
    for name in ["A", "B"] {
        let mut m = rmq.push(group, topic, "TagO").await;
        m.register_message_listener_orderly(RecordOrderly {
            member: name.into(),
            sink: sink.clone(),
        });
        m.start().await.expect("starting an orderly member");
        members.push(m);
    }
    let refs: Vec<&DefaultMQPushConsumer> = members.iter().collect();
    wait_split(&refs, topic, 8, Duration::from_secs(20)).await;
    wait_locked(&refs, topic, Duration::from_secs(20)).await;

    let mut p = rmq.producer("interop-orderly2-pg").await;
    for step in 0..6 {
        for order in 0..8usize {
            let m = Message::builder()
                .topic(topic.to_string())
                .tags("TagO")
                .key(format!("order-{order}"))
                .body_slice(format!("o{order}-s{step}").as_bytes())
                .build()
                .expect("a valid message");
            p.send_with_selector(
                m,
                |mqs, _m, order: &usize| mqs.get(order % mqs.len()).cloned(),
                order,
            )
            .await
            .unwrap_or_else(|e| panic!("ordered send: {e}"));
        }
    }
    p.shutdown().await;
    wait_deliveries(&sink, Duration::from_secs(25), "all 48 steps", |g| {
        g.len() >= 48
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rmq::snapshot(&sink);
    let mut steps: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for g in &got {
        steps
            .entry(g.keys.clone())
            .or_default()
            .push((g.member.clone(), g.body_str()));
    }
    for order in 0..8 {
        let want: Vec<String> = (0..6).map(|s| format!("o{order}-s{s}")).collect();
        let seen = steps
            .get(&format!("order-{order}"))
            .cloned()
            .unwrap_or_default();
        let bodies: Vec<String> = seen.iter().map(|(_, b)| b.clone()).collect();
        assert_eq!(bodies, want, "order {order} in queue order, once each");
        let who: BTreeSet<&String> = seen.iter().map(|(m, _)| m).collect();
        assert_eq!(
            who.len(),
            1,
            "order {order} consumed by one member only: {seen:?}"
        );
    }
    for name in ["A", "B"] {
        assert!(
            got.iter().any(|g| g.member == name),
            "member {name} consumed nothing"
        );
    }
    assert_eq!(got.len(), 48);
    for mut m in members {
        m.shutdown().await;
    }
    rmq.wire.assert_sent(&[code::LOCK_BATCH_MQ]);
    rmq.finish().await;
}
