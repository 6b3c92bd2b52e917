//! What the broker does with a message between send and delivery: a delay level, retries
//! through `%RETRY%<group>` ending in `%DLQ%<group>`, a SQL92 filter, and a lite pull
//! consumer reading with a tag filter.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ClientConfig, DefaultLitePullConsumer, DefaultMQPushConsumer, MQPushConsumer, MessageSelector,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_single::Message;

use super::groups::create_topic;
use super::node::LEVEL_2_DELAY;
use super::rmq::{self, code, duplicates, wait_deliveries, Got, Record, Rmq};
use super::sends::{assert_as_sent, message, Sent};

/// A message sent with delay level 2 (3 s on the test node) arrives no sooner; one sent
/// at the same time without a delay arrives at once.
pub async fn delay_level(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropDelay";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    let mut c = rmq.push("interop-delay-cg", topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    wait_deliveries(&sink, Duration::from_secs(20), "the warmup message", |g| {
        !g.is_empty()
    })
    .await;

    let mut p = rmq.producer("interop-delay-pg").await;
    let delayed = Message::builder()
        .topic(topic.to_string())
        .tags("TagD")
        .key("delayed-key")
        .delay_level(2)
        .raw_property("kind", "delayed")
        .expect("a user property")
        .body_slice(b"delayed")
        .build()
        .expect("a valid message");
    let sent_at = Instant::now();
    let r = p
        .send(delayed)
        .await
        .expect("the delayed send")
        .expect("a result");
    assert!(r.msg_id.is_some(), "{r:?}");
    let now = Message::builder()
        .topic(topic.to_string())
        .tags("TagD")
        .body_slice(b"immediate")
        .build()
        .expect("a valid message");
    p.send(now).await.expect("the immediate send");

    let got = wait_deliveries(&sink, Duration::from_secs(20), "the delayed message", |g| {
        g.iter().any(|x| x.body_str() == "delayed")
    })
    .await;
    let d = got
        .iter()
        .find(|x| x.body_str() == "delayed")
        .expect("found above");
    let i = got.iter().find(|x| x.body_str() == "immediate");
    let waited = d.at.duration_since(sent_at);
    assert!(
        waited + Duration::from_millis(300) >= LEVEL_2_DELAY,
        "delivered after {waited:?}, before its delay of {LEVEL_2_DELAY:?}"
    );
    let i = i.expect("the immediate message came before the delayed one");
    assert!(i.at < d.at, "the immediate message came first");
    assert_eq!(d.topic, topic, "delivered on its own topic: {d:?}");
    assert_eq!(
        (d.tags.as_str(), d.keys.as_str()),
        ("TagD", "delayed-key"),
        "{d:?}"
    );
    assert_eq!(d.prop("kind"), Some("delayed"), "{d:?}");
    assert_eq!(
        Some(d.uniq.as_str()),
        r.msg_id.as_deref(),
        "the sender's id: {d:?}"
    );
    p.shutdown().await;
    c.shutdown().await;
    rmq.finish().await;
}

/// A listener that always fails: the client hands each delivery back
/// (CONSUMER_SEND_MSG_BACK), the broker redelivers it through `%RETRY%<group>` with
/// `reconsume_times` counting up, and after `max_reconsume_times` (2) retries puts it in
/// `%DLQ%<group>`, where another group reads it with its tag, keys, properties and id.
pub async fn retry_then_dead_letter(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropRetry";
    let group = "interop-retry-cg";
    create_topic(&rmq, topic).await;
    let mut p = rmq.producer("interop-retry-pg").await;
    let mut sent = Sent::new();
    let m = message(
        &mut sent,
        topic,
        "poison",
        "TagP",
        &["poison-key"],
        &[("why", "fails")],
    );
    let r = p.send(m).await.expect("the send").expect("a result");
    let uniq = r.msg_id.clone().expect("an id").to_string();
    p.shutdown().await;

    let sink = rmq::sink();
    let mut c = DefaultMQPushConsumer::builder(rmq.client_runtime())
        .client_config(ClientConfig {
            namesrv_addr: Some(rmq.namesrv.clone().into()),
            ..Default::default()
        })
        .consumer_group(group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .max_reconsume_times(2)
        .rpc_hook(Some(rmq.wire.clone()))
        .build();
    c.subscribe(topic, "TagP").await.expect("subscribing");
    c.register_message_listener_concurrently(Record::failing("c", &sink));
    c.start().await.expect("starting the failing consumer");
    let got = wait_deliveries(
        &sink,
        Duration::from_secs(30),
        "3 deliveries of the poison message",
        |g| g.iter().filter(|x| x.uniq == uniq).count() >= 3,
    )
    .await;
    let poison: Vec<&Got> = got.iter().filter(|x| x.uniq == uniq).collect();
    let times: Vec<i32> = poison.iter().map(|x| x.reconsume_times).collect();
    assert_eq!(
        times,
        vec![0, 1, 2],
        "reconsume_times of each delivery: {poison:?}"
    );
    for g in &poison {
        assert_eq!(
            g.topic, topic,
            "a retry arrives on the original topic: {g:?}"
        );
        assert_eq!(g.body_str(), "poison");
        assert_eq!(
            (g.tags.as_str(), g.keys.as_str()),
            ("TagP", "poison-key"),
            "{g:?}"
        );
        assert_eq!(g.prop("why"), Some("fails"), "{g:?}");
    }

    let dlq = format!("%DLQ%{group}");
    let dsink = rmq::sink();
    let mut d = rmq.push("interop-dlq-reader-cg", &dlq, "*").await;
    d.register_message_listener_concurrently(Record::ok("dlq", &dsink));
    d.start().await.expect("starting the DLQ reader");
    let dead = wait_deliveries(
        &dsink,
        Duration::from_secs(20),
        "the poison message in the DLQ",
        |g| g.iter().any(|x| x.uniq == uniq),
    )
    .await;
    let g = dead.iter().find(|x| x.uniq == uniq).expect("found above");
    assert_eq!(g.body_str(), "poison");
    assert_eq!(
        (g.tags.as_str(), g.keys.as_str()),
        ("TagP", "poison-key"),
        "{g:?}"
    );
    assert_eq!(g.prop("why"), Some("fails"), "{g:?}");
    let more = rmq::snapshot(&sink)
        .iter()
        .filter(|x| x.uniq == uniq)
        .count();
    assert_eq!(more, 3, "no delivery after the message went to the DLQ");
    c.shutdown().await;
    rmq.wire.assert_sent(&[code::CONSUMER_SEND_MSG_BACK]);
    d.shutdown().await;
    rmq.finish().await;
}

/// A SQL92 subscription: the broker delivers exactly the messages whose properties match.
pub async fn sql92(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropSql";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    let mut c = DefaultMQPushConsumer::builder(rmq.client_runtime())
        .client_config(ClientConfig {
            namesrv_addr: Some(rmq.namesrv.clone().into()),
            ..Default::default()
        })
        .consumer_group("interop-sql-cg")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .rpc_hook(Some(rmq.wire.clone()))
        .build();
    c.subscribe_with_selector(
        topic,
        Some(MessageSelector::by_sql("a > 5 AND color = 'red'")),
    )
    .await
    .expect("subscribing with SQL92");
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the SQL92 consumer");

    let mut p = rmq.producer("interop-sql-pg").await;
    let mut sent = Sent::new();
    let mut want = Sent::new();
    for a in 0..10 {
        let color = if a % 2 == 0 { "red" } else { "blue" };
        let body = format!("sql-{a}");
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagS",
            &[],
            &[("a", &a.to_string()), ("color", color)],
        );
        if a > 5 && color == "red" {
            want.insert(body.clone(), sent[&body].clone());
        }
        p.send(m)
            .await
            .unwrap_or_else(|e| panic!("sending {body}: {e}"));
    }
    wait_deliveries(
        &sink,
        Duration::from_secs(20),
        "the matching messages",
        |g| want.keys().all(|b| g.iter().any(|x| &x.body_str() == b)),
    )
    .await;
    // Time for a wrongly matched one to arrive too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_as_sent(&want, &rmq::snapshot(&sink));
    p.shutdown().await;
    c.shutdown().await;
    rmq.finish().await;
}

/// A lite pull consumer (LITE_PULL_MESSAGE) subscribed to `TagA || TagB` polls exactly
/// those messages, once each.
pub async fn lite_pull(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropLitePull";
    create_topic(&rmq, topic).await;
    let mut p = rmq.producer("interop-lite-pg").await;
    let mut sent = Sent::new();
    let mut want = Sent::new();
    for i in 0..12 {
        let tag = ["TagA", "TagB", "TagC"][i % 3];
        let body = format!("lite-{i}");
        let m = message(
            &mut sent,
            topic,
            &body,
            tag,
            &[&format!("kl-{i}")],
            &[("i", &i.to_string())],
        );
        if tag != "TagC" {
            want.insert(body.clone(), sent[&body].clone());
        }
        p.send(m)
            .await
            .unwrap_or_else(|e| panic!("sending {body}: {e}"));
    }
    p.shutdown().await;

    let c: DefaultLitePullConsumer = DefaultLitePullConsumer::builder(rmq.client_runtime())
        .name_server_addr(rmq.namesrv.clone())
        .consumer_group("interop-lite-cg")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .rpc_hook(rmq.wire.clone())
        // Long polls held by the broker for 2 s instead of 20: shutting down waits for
        // those in flight.
        .broker_suspend_max_time_millis(2_000)
        .consumer_timeout_millis_when_suspend(5_000)
        .build()
        .expect("building the lite pull consumer");
    c.subscribe_with_expression(topic, "TagA || TagB")
        .await
        .expect("subscribing");
    c.start().await.expect("starting the lite pull consumer");
    let deadline = Instant::now() + Duration::from_secs(25);
    let mut got: Vec<Got> = Vec::new();
    loop {
        for m in c.poll_with_timeout(500).await {
            got.push(Got::from_ext("lite", &m));
        }
        let bodies: BTreeSet<String> = got.iter().map(Got::body_str).collect();
        if want.keys().all(|b| bodies.contains(b)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "polled only {bodies:?} of {:?}",
            want.keys().collect::<Vec<_>>()
        );
    }
    // A last poll for anything that should not come.
    for m in c.poll_with_timeout(1000).await {
        got.push(Got::from_ext("lite", &m));
    }
    assert!(
        duplicates(got.iter().map(Got::body_str)).is_empty(),
        "{got:?}"
    );
    assert_as_sent(&want, &got);
    c.shutdown().await;
    rmq.wire.assert_sent(&[code::LITE_PULL_MESSAGE]);
    rmq.finish().await;
}

/// RocketMQ 5's arbitrary delays, set by the client as properties: `TIMER_DELAY_MS` (2 s)
/// and `TIMER_DELIVER_MS` (an absolute time 3 s ahead); each arrives no sooner.
pub async fn timer_delays(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropTimer";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    let mut c = rmq.push("interop-timer-cg", topic, "TagT").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    let mut p = rmq.producer("interop-timer-pg").await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    let sent_at = Instant::now();
    let by_delay = Message::builder()
        .topic(topic.to_string())
        .tags("TagT")
        .delay_millis(2_000)
        .body_slice(b"delay-2000ms")
        .build()
        .expect("a valid message");
    let by_time = Message::builder()
        .topic(topic.to_string())
        .tags("TagT")
        .deliver_time_ms(now_ms + 3_000)
        .body_slice(b"deliver-at-plus-3s")
        .build()
        .expect("a valid message");
    let plain = Message::builder()
        .topic(topic.to_string())
        .tags("TagT")
        .body_slice(b"now")
        .build()
        .expect("a valid message");
    for m in [by_delay, by_time, plain] {
        p.send(m).await.expect("a timed send");
    }
    let got = wait_deliveries(&sink, Duration::from_secs(20), "the timed messages", |g| {
        ["delay-2000ms", "deliver-at-plus-3s", "now"]
            .iter()
            .all(|b| g.iter().any(|x| x.body_str() == *b))
    })
    .await;
    let at = |b: &str| {
        got.iter()
            .find(|x| x.body_str() == b)
            .map(|x| x.at.duration_since(sent_at))
            .expect("found above")
    };
    let slack = Duration::from_millis(300);
    assert!(
        at("delay-2000ms") + slack >= Duration::from_secs(2),
        "TIMER_DELAY_MS: {:?}",
        at("delay-2000ms")
    );
    assert!(
        at("deliver-at-plus-3s") + slack >= Duration::from_secs(3),
        "TIMER_DELIVER_MS: {:?}",
        at("deliver-at-plus-3s")
    );
    assert!(at("now") < at("delay-2000ms"), "the plain message first");
    for g in &got {
        assert_eq!(g.topic, topic, "delivered on its own topic: {g:?}");
    }
    p.shutdown().await;
    c.shutdown().await;
    rmq.finish().await;
}

/// 40 bodies of 200 KB that do not compress (8 MB in one queue): one pull may not answer
/// more than the client takes (a frame body over 4 MiB is refused by the client), so the
/// broker must cut its answers; every message arrives, whole.
pub async fn large_bodies_in_one_queue(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropLarge";
    let mut p = rmq.producer("interop-large-pg").await;
    let mut mq = None;
    let mut bodies = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..40u32 {
        // xorshift: bytes zlib cannot shrink, so the client sends them as they are.
        let mut body = Vec::with_capacity(200_000);
        while body.len() < 200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            body.extend_from_slice(&x.to_le_bytes());
        }
        body[..4].copy_from_slice(&i.to_be_bytes());
        let m = Message::builder()
            .topic(topic.to_string())
            .tags("TagL")
            .body_slice(&body)
            .build()
            .expect("a valid message");
        let r = match &mq {
            None => p.send(m).await,
            Some(q) => {
                p.send_to_queue(
                    m,
                    rocketmq_model::common::message::message_queue::MessageQueue::clone(q),
                )
                .await
            }
        };
        let r = r
            .unwrap_or_else(|e| panic!("large body {i}: {e}"))
            .expect("a result");
        mq.get_or_insert_with(|| r.message_queue.clone().expect("a queue"));
        bodies.push(body);
    }
    p.shutdown().await;
    let sink = rmq::sink();
    let mut c = rmq.push("interop-large-cg", topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    let got = wait_deliveries(
        &sink,
        Duration::from_secs(30),
        "all 40 large messages",
        |g| g.len() >= 40,
    )
    .await;
    for g in &got {
        let i = u32::from_be_bytes([g.body[0], g.body[1], g.body[2], g.body[3]]) as usize;
        assert!(
            g.body == bodies[i],
            "large body {i} arrived changed ({} bytes)",
            g.body.len()
        );
    }
    assert!(duplicates(got.iter().map(|g| g.body[..4].to_vec())).is_empty());
    c.shutdown().await;
    rmq.finish().await;
}
