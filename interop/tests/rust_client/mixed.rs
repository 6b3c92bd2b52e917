//! Mixed traffic: messages sent by `rocketmq-client-rust` (remoting) consumed by ringmq's
//! native client and the other way round, with the same ids, tag, keys, properties and
//! body; and one consumer group with a member of each kind sharing the queues.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{ConsumeResult, PushConsumer, ReceivedMessage, StartPosition};
use rocketmq_client_rust::MQPushConsumer;
use rocketmq_model::common::message::message_single::Message;

use super::groups::{create_topic, held_queues};
use super::rmq::{self, duplicates, wait_deliveries, Record, Rmq};
use super::sends::{assert_offset_id, message, Sent};

type Received = Arc<Mutex<Vec<ReceivedMessage>>>;

async fn native_consumer(namesrv: &str, group: &str, topic: &str, got: &Received) -> PushConsumer {
    let sink = got.clone();
    PushConsumer::builder()
        .group(group)
        .name_servers(namesrv)
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let sink = sink.clone();
            async move {
                sink.lock().expect("the sink's lock").extend(msgs);
                ConsumeResult::Success
            }
        })
        .await
        .expect("starting the native consumer")
}

async fn wait_native(
    got: &Received,
    limit: Duration,
    what: &str,
    cond: impl Fn(&[ReceivedMessage]) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        {
            let g = got.lock().expect("the sink's lock");
            if cond(&g) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the native consumer got {:?}",
                g.iter()
                    .map(|m| String::from_utf8_lossy(&m.body).into_owned())
                    .collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sent with `rocketmq-client-rust`, consumed by ringmq's native push consumer.
pub async fn rocketmq_to_native(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropToNative";
    let mut p = rmq.producer("interop-to-native-pg").await;
    let mut sent = Sent::new();
    let mut results = BTreeMap::new();
    for i in 0..4 {
        let body = format!("from-rocketmq-{i}");
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagX",
            &[&format!("kx-{i}"), "shared"],
            &[("origin", "rocketmq-client-rust"), ("i", &i.to_string())],
        );
        let r = p
            .send(m)
            .await
            .unwrap_or_else(|e| panic!("{body}: {e}"))
            .expect("a result");
        results.insert(body, r);
    }
    let got: Received = Arc::default();
    let c = native_consumer(namesrv, "interop-to-native-cg", topic, &got).await;
    wait_native(&got, Duration::from_secs(20), "all 4", |g| g.len() >= 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = got.lock().expect("the sink's lock").clone();
    assert_eq!(got.len(), 4, "once each");
    for m in &got {
        let body = String::from_utf8_lossy(&m.body).into_owned();
        let (tag, keys, props) = &sent[&body];
        let r = &results[&body];
        assert_eq!(m.topic, topic);
        assert_eq!(m.tag(), Some(tag.as_str()), "{m:?}");
        assert_eq!(
            m.keys(),
            keys.iter().map(String::as_str).collect::<Vec<_>>(),
            "{m:?}"
        );
        for (k, v) in props {
            assert_eq!(m.property(k), Some(v.as_str()), "{k} of {m:?}");
        }
        assert_eq!(
            m.unique_key(),
            r.msg_id.as_deref(),
            "UNIQ_KEY of {m:?} vs {r:?}"
        );
        assert_eq!(
            Some(m.msg_id.as_str()),
            r.offset_msg_id.as_deref(),
            "offset id of {m:?}"
        );
        let mq = r.message_queue.as_ref().expect("a queue");
        assert_eq!(
            m.queue_id as i32,
            rmq::broker_queue_id(topic, mq.broker_name(), mq.queue_id()),
            "{m:?}"
        );
        assert_eq!(m.queue_offset, r.queue_offset, "{m:?}");
        assert_eq!(m.reconsume_times, 0);
    }
    c.shutdown().await;
    p.shutdown().await;
    rmq.finish().await;
}

/// Sent with ringmq's native producer, consumed by a `rocketmq-client-rust` push consumer.
pub async fn native_to_rocketmq(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropFromNative";
    let p = ringmq_client::Producer::builder()
        .group("interop-from-native-pg")
        .name_servers(namesrv)
        .start()
        .await
        .expect("starting the native producer");
    let mut results = BTreeMap::new();
    for i in 0..4 {
        let body = format!("from-native-{i}");
        let m = ringmq_client::Message::new(topic, body.clone())
            .with_tag("TagN")
            .with_keys([format!("kn-{i}"), "shared".to_string()])
            .with_property("origin", "ringmq-client")
            .with_property("i", i.to_string());
        let r = p.send(m).await.unwrap_or_else(|e| panic!("{body}: {e}"));
        results.insert(body, r);
    }
    let sink = rmq::sink();
    let mut c = rmq.push("interop-from-native-cg", topic, "TagN").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    let got = wait_deliveries(&sink, Duration::from_secs(20), "all 4", |g| g.len() >= 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = if rmq::snapshot(&sink).len() > got.len() {
        rmq::snapshot(&sink)
    } else {
        got
    };
    assert_eq!(got.len(), 4, "once each: {got:?}");
    for g in &got {
        let body = g.body_str();
        let r = &results[&body];
        let i = body.trim_start_matches("from-native-");
        assert_eq!(g.topic, topic);
        assert_eq!(g.tags, "TagN", "{g:?}");
        assert_eq!(g.keys, format!("kn-{i} shared"), "{g:?}");
        assert_eq!(g.prop("origin"), Some("ringmq-client"), "{g:?}");
        assert_eq!(g.prop("i"), Some(i), "{g:?}");
        assert_eq!(g.uniq, r.unique_key, "UNIQ_KEY of {g:?}");
        assert_offset_id(&g.offset_id);
        assert_eq!(g.offset_id, r.msg_id, "offset id of {g:?}");
        assert_eq!(
            rmq::delivered_broker_queue_id(topic, g) as u32,
            r.queue.queue_id,
            "{g:?}"
        );
        assert_eq!(g.queue_offset as u64, r.queue_offset, "{g:?}");
    }
    c.shutdown().await;
    p.shutdown().await;
    rmq.finish().await;
}

/// One group, one native member and one `rocketmq-client-rust` member: they split the
/// queues (each sees the other in GET_CONSUMER_LIST_BY_GROUP) and every message reaches
/// exactly one of them.
pub async fn one_group_both_protocols(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropMixedGroup";
    let group = "interop-mixed-cg";
    create_topic(&rmq, topic).await;
    let native_got: Received = Arc::default();
    let native = native_consumer(namesrv, group, topic, &native_got).await;
    let sink = rmq::sink();
    let mut r = rmq.push(group, topic, "*").await;
    r.register_message_listener_concurrently(Record::ok("rocketmq", &sink));
    r.start().await.expect("starting the rocketmq member");

    let deadline = Instant::now() + Duration::from_secs(25);
    loop {
        let theirs: Vec<u32> = native
            .assignment()
            .iter()
            .filter(|q| q.topic == topic)
            .map(|q| q.queue_id)
            .collect();
        let ours = held_queues(&r, topic).await;
        let split = !theirs.is_empty()
            && !ours.is_empty()
            && theirs.len() + ours.len() == 8
            && theirs.iter().all(|q| !ours.contains(&(*q as i32)));
        if split {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the two members never split the 8 queues: native {theirs:?}, rocketmq {ours:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let mut p = rmq.producer("interop-mixed-pg").await;
    let mut sent = Sent::new();
    for i in 0..40 {
        let body = format!("mixed-{i}");
        let m = message(&mut sent, topic, &body, "TagM", &[], &[]);
        p.send(m).await.unwrap_or_else(|e| panic!("{body}: {e}"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let bodies = || -> Vec<(String, &'static str)> {
        let mut v: Vec<(String, &'static str)> = rmq::snapshot(&sink)
            .iter()
            .map(|g| (g.body_str(), "rocketmq"))
            .collect();
        v.extend(
            native_got
                .lock()
                .expect("the sink's lock")
                .iter()
                .map(|m| (String::from_utf8_lossy(&m.body).into_owned(), "native")),
        );
        v.retain(|(b, _)| b != "warmup");
        v
    };
    while !sent.keys().all(|b| bodies().iter().any(|(x, _)| x == b)) {
        assert!(
            Instant::now() < deadline,
            "not all 40 delivered: {:?}",
            bodies()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let all = bodies();
    let dups = duplicates(all.iter().map(|(b, _)| b.clone()));
    assert!(
        dups.is_empty(),
        "delivered more than once: {dups:?} in {all:?}"
    );
    assert_eq!(all.len(), 40);
    for who in ["native", "rocketmq"] {
        assert!(
            all.iter().any(|(_, w)| *w == who),
            "{who} got none: {all:?}"
        );
    }
    r.shutdown().await;
    native.shutdown().await;
    p.shutdown().await;
    rmq.finish().await;
}

/// A body over the client's compression threshold (4 KiB): `rocketmq-client-rust` sends
/// it zlib-compressed (sysFlag COMPRESSED | ZLIB). A consumer of either kind must hand the
/// application the original bytes.
pub async fn compressed_body_to_both_kinds(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropCompressed";
    let body: Vec<u8> = b"ringmq speaks remoting; "
        .iter()
        .copied()
        .cycle()
        .take(16 * 1024)
        .collect();
    let mut p = rmq.producer("interop-compressed-pg").await;
    let m = Message::builder()
        .topic(topic.to_string())
        .tags("TagZ")
        .key("big")
        .body_slice(&body)
        .build()
        .expect("a valid message");
    let r = p.send(m).await.expect("the send").expect("a result");
    p.shutdown().await;

    let sink = rmq::sink();
    let mut c = rmq.push("interop-compressed-cg", topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    let got = wait_deliveries(&sink, Duration::from_secs(20), "the large message", |g| {
        !g.is_empty()
    })
    .await;
    assert_eq!(
        got[0].body.len(),
        body.len(),
        "rocketmq consumer: length of {:?}",
        got[0].uniq
    );
    assert!(got[0].body == body, "rocketmq consumer: the original bytes");

    let native_got: Received = Arc::default();
    let n = native_consumer(namesrv, "interop-compressed-native-cg", topic, &native_got).await;
    wait_native(
        &native_got,
        Duration::from_secs(20),
        "the large message",
        |g| !g.is_empty(),
    )
    .await;
    let m = native_got.lock().expect("the sink's lock")[0].clone();
    assert_eq!(m.unique_key(), r.msg_id.as_deref(), "{m:?}");
    assert_eq!(
        m.body.len(),
        body.len(),
        "native consumer: body of {} bytes, sysFlag {:#x} (the client compressed it)",
        m.body.len(),
        m.sys_flag
    );
    assert!(m.body == body, "native consumer: the original bytes");
    n.shutdown().await;
    c.shutdown().await;
    rmq.finish().await;
}

type Timed = Arc<Mutex<Vec<(Instant, ReceivedMessage)>>>;

/// Delays and transactions across the two kinds of client: a delay level and a committed
/// and a rolled-back transaction from each kind of producer, read by one consumer of each
/// kind: both consumers get the two delayed messages no sooner than their delay and the
/// two committed ones, never a rolled-back one.
pub async fn delays_and_transactions_across_kinds(namesrv: &str) {
    use ringmq_client::{TransactionProducer, TransactionState};
    use rocketmq_client_rust::TransactionMQProducer;

    let rmq = Rmq::new(namesrv);
    let topic = "InteropMixedTimed";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    let mut c = rmq.push("interop-mixed-timed-rmq-cg", topic, "TagD").await;
    c.register_message_listener_concurrently(Record::ok("rocketmq", &sink));
    c.start().await.expect("starting the rocketmq consumer");
    let timed: Timed = Arc::default();
    let tsink = timed.clone();
    let n = PushConsumer::builder()
        .group("interop-mixed-timed-native-cg")
        .name_servers(namesrv)
        .subscribe(topic, "TagD")
        .start_position(StartPosition::First)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let tsink = tsink.clone();
            async move {
                let now = Instant::now();
                tsink
                    .lock()
                    .expect("the sink's lock")
                    .extend(msgs.into_iter().map(|m| (now, m)));
                ConsumeResult::Success
            }
        })
        .await
        .expect("starting the native consumer");

    let np = ringmq_client::Producer::builder()
        .group("interop-mixed-timed-native-pg")
        .name_servers(namesrv)
        .start()
        .await
        .expect("starting the native producer");
    let mut rp = rmq.producer("interop-mixed-timed-rmq-pg").await;
    let sent_at = Instant::now();
    np.send(
        ringmq_client::Message::new(topic, "native-delayed")
            .with_tag("TagD")
            .with_delay_level(2),
    )
    .await
    .expect("the native delayed send");
    let m = Message::builder()
        .topic(topic.to_string())
        .tags("TagD")
        .delay_level(2)
        .body_slice(b"rocketmq-delayed")
        .build()
        .expect("a valid message");
    rp.send(m).await.expect("the rocketmq delayed send");

    let ntx = TransactionProducer::<bool>::builder()
        .group("interop-mixed-timed-native-txpg")
        .name_servers(namesrv)
        .executor(|_half, commit: bool| async move {
            if commit {
                TransactionState::Commit
            } else {
                TransactionState::Rollback
            }
        })
        .checker(|_check| async { TransactionState::Rollback })
        .start()
        .await
        .expect("starting the native transaction producer");
    for (body, commit) in [("native-tx-commit", true), ("native-tx-rollback", false)] {
        let m = ringmq_client::Message::new(topic, body).with_tag("TagD");
        ntx.send_in_transaction(m, commit)
            .await
            .unwrap_or_else(|e| panic!("{body}: {e}"));
    }
    let mut rtx = TransactionMQProducer::builder(rmq.client_runtime())
        .producer_group("interop-mixed-timed-rmq-txpg")
        .name_server_addr(rmq.namesrv.clone())
        .topics(vec![topic])
        .rpc_hook(rmq.wire.clone())
        .transaction_listener(super::tx::ByCase {
            checked: Arc::default(),
        })
        .build();
    rtx.start()
        .await
        .expect("starting the rocketmq transaction producer");
    for case in ["commit", "rollback"] {
        let mut sent = Sent::new();
        let body = format!("rocketmq-tx-{case}");
        let m = message(&mut sent, topic, &body, "TagD", &[], &[("case", case)]);
        rtx.send_message_in_transaction::<(), _>(m, None)
            .await
            .unwrap_or_else(|e| panic!("{body}: {e}"));
    }

    let want = [
        "native-delayed",
        "rocketmq-delayed",
        "native-tx-commit",
        "rocketmq-tx-commit",
    ];
    wait_deliveries(
        &sink,
        Duration::from_secs(20),
        "the 4 at the rocketmq consumer",
        |g| want.iter().all(|b| g.iter().any(|x| x.body_str() == *b)),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let bodies: Vec<String> = timed
            .lock()
            .expect("the sink's lock")
            .iter()
            .map(|(_, m)| String::from_utf8_lossy(&m.body).into_owned())
            .collect();
        if want.iter().all(|b| bodies.iter().any(|x| x == b)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the native consumer got only {bodies:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let at_least = super::node::LEVEL_2_DELAY - Duration::from_millis(300);
    let rgot = rmq::snapshot(&sink);
    for g in &rgot {
        let b = g.body_str();
        assert!(
            !b.contains("rollback"),
            "rocketmq consumer got a rolled-back message: {g:?}"
        );
        if b.ends_with("-delayed") {
            let waited = g.at.duration_since(sent_at);
            assert!(
                waited >= at_least,
                "rocketmq consumer got {b} after {waited:?}"
            );
        }
    }
    assert!(
        duplicates(rgot.iter().map(|g| g.body_str())).is_empty(),
        "{rgot:?}"
    );
    let ngot = timed.lock().expect("the sink's lock").clone();
    for (at, m) in &ngot {
        let b = String::from_utf8_lossy(&m.body).into_owned();
        assert!(
            !b.contains("rollback"),
            "native consumer got a rolled-back message: {m:?}"
        );
        if b.ends_with("-delayed") {
            let waited = at.duration_since(sent_at);
            assert!(
                waited >= at_least,
                "native consumer got {b} after {waited:?}"
            );
        }
    }
    let nbodies: Vec<String> = ngot
        .iter()
        .map(|(_, m)| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert!(
        duplicates(nbodies.iter().cloned()).is_empty(),
        "{nbodies:?}"
    );
    n.shutdown().await;
    c.shutdown().await;
    ntx.shutdown().await;
    np.shutdown().await;
    rp.shutdown().await;
    rtx.shutdown().await;
    rmq.finish().await;
}
