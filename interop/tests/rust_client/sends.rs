//! Sends: sync, async (callback), oneway and batch, each with a tag, keys and user
//! properties; a push consumer of a fresh group must get every message once, as sent, and
//! the ids in the send results must name the delivered messages.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_client_rust::{DefaultMQProducer, MQPushConsumer, SendResult, SendStatus};
use rocketmq_model::common::message::message_single::Message;

use super::rmq::{self, code, duplicates, wait_deliveries, Got, Record, Rmq};

/// What a test sent: body -> (tag, keys, user properties).
pub type Sent = BTreeMap<String, (String, Vec<String>, BTreeMap<String, String>)>;

/// A message with a tag, keys and user properties, recorded in `sent`.
pub fn message(
    sent: &mut Sent,
    topic: &str,
    body: &str,
    tag: &str,
    keys: &[&str],
    props: &[(&str, &str)],
) -> Message {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let props: BTreeMap<String, String> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut b = Message::builder()
        .topic(topic.to_string())
        .tags(tag.to_string())
        .keys(keys.clone())
        .body_slice(body.as_bytes());
    for (k, v) in &props {
        b = b
            .raw_property(k.clone(), v.clone())
            .expect("a user property");
    }
    sent.insert(body.to_string(), (tag.to_string(), keys, props));
    b.build().expect("a valid message")
}

/// Every delivery in `got` matches what `sent` says of its body; each body arrives once.
pub fn assert_as_sent(sent: &Sent, got: &[Got]) {
    let dups = duplicates(got.iter().map(|g| g.body_str()));
    assert!(dups.is_empty(), "delivered more than once: {dups:?}");
    for g in got {
        let body = g.body_str();
        let (tag, keys, props) = sent
            .get(&body)
            .unwrap_or_else(|| panic!("delivered a message nobody sent: {g:?}"));
        assert_eq!(&g.tags, tag, "tag of {body}");
        assert_eq!(g.keys, keys.join(" "), "keys of {body}");
        for (k, v) in props {
            assert_eq!(g.prop(k), Some(v.as_str()), "property {k} of {body}: {g:?}");
        }
        assert!(!g.uniq.is_empty(), "{body} has no UNIQ_KEY: {g:?}");
    }
    let missing: Vec<&String> = sent
        .keys()
        .filter(|b| !got.iter().any(|g| &g.body_str() == *b))
        .collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
}

/// An offset message id as RocketMQ writes it: 32 hex digits (IPv4 store host, port,
/// commit log offset).
pub fn assert_offset_id(id: &str) {
    assert!(
        id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "not an offset message id: {id:?}"
    );
}

/// A sync send's result names the stored message.
pub fn assert_send_ok(r: &SendResult, topic: &str) {
    assert_eq!(r.send_status, SendStatus::SendOk, "{r:?}");
    let mq = r
        .message_queue
        .as_ref()
        .expect("a send result names its queue");
    assert_eq!(mq.topic(), topic, "{r:?}");
    assert!(r.msg_id.as_ref().is_some_and(|id| !id.is_empty()), "{r:?}");
    assert_offset_id(r.offset_msg_id.as_deref().unwrap_or_default());
}

/// Sends 3 sync, 3 async, 3 oneway and a batch of 3 to `topic`; returns what was sent and
/// the results that name messages (sync, async, batch).
pub async fn send_all_modes(
    producer: &DefaultMQProducer,
    topic: &str,
) -> (Sent, Vec<(String, SendResult)>) {
    let mut sent = Sent::new();
    let mut results = Vec::new();
    for i in 0..3 {
        let body = format!("sync-{i}");
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagSync",
            &[&format!("ks-{i}"), "order-7"],
            &[("mode", "sync"), ("n", &i.to_string()), ("note", "a b=c;d")],
        );
        let r = producer
            .send(m)
            .await
            .unwrap_or_else(|e| panic!("sync send {i}: {e}"))
            .expect("a sync send returns a result");
        assert_send_ok(&r, topic);
        results.push((body, r));
    }

    let callbacks: Arc<Mutex<Vec<Result<SendResult, String>>>> = Arc::default();
    for i in 0..3 {
        let body = format!("async-{i}");
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagAsync",
            &[&format!("ka-{i}")],
            &[("mode", "async"), ("n", &i.to_string())],
        );
        let sink = callbacks.clone();
        producer
            .send_with_callback(m, move |r, e| {
                let outcome = match (r, e) {
                    (Some(r), _) => Ok(r.clone()),
                    (None, Some(e)) => Err(e.to_string()),
                    (None, None) => Err("a callback with neither result nor error".into()),
                };
                sink.lock().expect("callbacks' lock").push(outcome);
            })
            .await
            .unwrap_or_else(|e| panic!("async send {i}: {e}"));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while callbacks.lock().expect("callbacks' lock").len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "async send callbacks: {:?}",
            callbacks.lock().expect("callbacks' lock")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for outcome in callbacks.lock().expect("callbacks' lock").iter() {
        let r = outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("async send failed: {e}"));
        assert_send_ok(r, topic);
        results.push((String::new(), r.clone()));
    }

    for i in 0..3 {
        let body = format!("oneway-{i}");
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagOneway",
            &[&format!("ko-{i}")],
            &[("mode", "oneway"), ("n", &i.to_string())],
        );
        producer
            .send_oneway(m)
            .await
            .unwrap_or_else(|e| panic!("oneway send {i}: {e}"));
    }

    let batch: Vec<Message> = (0..3)
        .map(|i| {
            message(
                &mut sent,
                topic,
                &format!("batch-{i}"),
                "TagBatch",
                &[&format!("kb-{i}")],
                &[("mode", "batch"), ("n", &i.to_string())],
            )
        })
        .collect();
    let r = producer
        .send_batch(batch)
        .await
        .unwrap_or_else(|e| panic!("batch send: {e}"));
    assert_eq!(r.send_status, SendStatus::SendOk, "{r:?}");
    let ids: Vec<&str> = r.msg_id.as_deref().unwrap_or_default().split(',').collect();
    assert_eq!(ids.len(), 3, "a batch's result names its 3 messages: {r:?}");
    results.push(("batch".into(), r));
    (sent, results)
}

/// The ids of the results name the delivered messages: a sync send's UNIQ_KEY, offset id,
/// queue and queue offset; an async send's UNIQ_KEY and offset id; a batch's UNIQ_KEYs.
pub fn assert_results_name_deliveries(results: &[(String, SendResult)], got: &[Got]) {
    for (body, r) in results {
        let ids: Vec<&str> = r.msg_id.as_deref().unwrap_or_default().split(',').collect();
        for id in &ids {
            let g = got
                .iter()
                .find(|g| g.uniq == *id)
                .unwrap_or_else(|| panic!("no delivery has the UNIQ_KEY {id} of {r:?}"));
            if ids.len() == 1 {
                assert_eq!(
                    Some(g.offset_id.as_str()),
                    r.offset_msg_id.as_deref(),
                    "offset id of {g:?}"
                );
                let mq = r.message_queue.as_ref().expect("a queue");
                assert_eq!(g.queue_id, mq.queue_id(), "queue of {g:?}");
                assert_eq!(
                    g.queue_offset as u64, r.queue_offset,
                    "queue offset of {g:?}"
                );
            } else {
                let offsets = r.offset_msg_id.as_deref().unwrap_or_default();
                assert!(
                    offsets.split(',').any(|o| o == g.offset_id),
                    "the batch's offset ids {offsets} do not name {g:?}"
                );
            }
            if !body.is_empty() && ids.len() == 1 {
                assert_eq!(&g.body_str(), body);
            }
        }
    }
}

/// How the client was told to talk (process-wide settings, see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Defaults: SEND_MESSAGE, JSON headers.
    Json,
    /// `sendSmartMsg`: SEND_MESSAGE_V2, JSON headers.
    V2,
    /// `ROCKETMQ_SERIALIZE_TYPE=ROCKETMQ`: SEND_MESSAGE, binary headers.
    Binary,
}

/// The whole round trip on one node: sends of every mode, then a fresh push group that
/// must get all 12 messages once, as sent; the client's wire log shows the send code and
/// header serialization `mode` asks for, on every request and every answer.
pub async fn roundtrip(namesrv: &str, mode: Mode) {
    let tag = format!("{mode:?}");
    let tag = tag.as_str();
    let rmq = Rmq::new(namesrv);
    let topic = format!("InteropSends{tag}");
    let producer = rmq.producer(&format!("interop-sends-pg-{tag}")).await;
    let (sent, results) = send_all_modes(&producer, &topic).await;

    let sink = rmq::sink();
    let mut consumer = rmq
        .push(&format!("interop-sends-cg-{tag}"), &topic, "*")
        .await;
    consumer.register_message_listener_concurrently(Record::ok("c", &sink));
    consumer.start().await.expect("starting the consumer");
    let got = wait_deliveries(&sink, Duration::from_secs(30), "all 12 messages", |g| {
        sent.keys().all(|b| g.iter().any(|x| &x.body_str() == b))
    })
    .await;
    // A moment for a duplicate to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = {
        let mut all = rmq::snapshot(&sink);
        all.retain(|g| g.topic == topic);
        if all.len() < got.len() {
            got
        } else {
            all
        }
    };
    assert_as_sent(&sent, &got);
    assert_results_name_deliveries(&results, &got);

    let (single, other) = match mode {
        Mode::V2 => (code::SEND_MESSAGE_V2, code::SEND_MESSAGE),
        Mode::Json | Mode::Binary => (code::SEND_MESSAGE, code::SEND_MESSAGE_V2),
    };
    rmq.wire.assert_sent(&[
        code::GET_ROUTEINFO_BY_TOPIC,
        single,
        code::SEND_BATCH_MESSAGE,
        code::HEART_BEAT,
        code::PULL_MESSAGE,
    ]);
    assert!(
        !rmq.wire.codes().contains(&other),
        "sent {other} too: {:?}",
        rmq.wire.codes()
    );
    assert_eq!(
        rmq::binary_default(),
        mode == Mode::Binary,
        "the client's header choice"
    );
    consumer.shutdown().await;
    let mut producer = producer;
    producer.shutdown().await;
    rmq.finish().await;
}

/// A message whose header is far over the native protocol's 64 KiB header cap once its
/// properties are JSON-escaped (thousands of `\u0001`/`\u0002` separators, quotes,
/// backslashes, non-ASCII text): the broker must take it whole, and a consumer must get
/// every property back.
pub async fn huge_escaped_header(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropBigHeader";
    // Short keys and values: each property costs 5 bytes in the record's properties string
    // (which RocketMQ caps at 32767 bytes) and 15 once its separators are JSON-escaped.
    const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut props: BTreeMap<String, String> = (0..3800)
        .map(|i| {
            let k = [ALNUM[i % 62], ALNUM[i / 62 % 62]];
            let k = String::from_utf8_lossy(&k[..if i < 62 { 1 } else { 2 }]).into_owned();
            (format!("_{k}"), "x".to_string())
        })
        .collect();
    props.insert("quotes".into(), "\"\\".repeat(2000));
    props.insert("text".into(), "grüße, 世界 — ✓ ".repeat(20));
    let raw: usize = props.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let escaped: usize = props
        .iter()
        .map(|(k, v)| json_escaped_len(k) + json_escaped_len(v) + 12)
        .sum();
    assert!(
        raw < 32_000 && escaped > 66_000,
        "raw {raw} B, escaped {escaped} B"
    );
    let mut b = Message::builder()
        .topic(topic.to_string())
        .tags("Tag-ü")
        .keys(vec!["schlüssel".to_string(), "键".to_string()])
        .body_slice(b"big header");
    for (k, v) in &props {
        b = b
            .raw_property(k.clone(), v.clone())
            .expect("a user property");
    }
    let m = b.build().expect("a valid message");
    let mut p = rmq.producer("interop-bigheader-pg").await;
    let r = p
        .send(m)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "sending the big-header message: {e}; the client's exchanges: {:?}",
                rmq.wire.exchanges()
            )
        })
        .expect("a result");
    assert_send_ok(&r, topic);
    p.shutdown().await;

    let sink = rmq::sink();
    let mut c = rmq.push("interop-bigheader-cg", topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    let got = wait_deliveries(
        &sink,
        Duration::from_secs(20),
        "the big-header message",
        |g| !g.is_empty(),
    )
    .await;
    let g = &got[0];
    assert_eq!(g.body_str(), "big header");
    assert_eq!(
        (g.tags.as_str(), g.keys.as_str()),
        ("Tag-ü", "schlüssel 键")
    );
    let lost: Vec<&String> = props
        .iter()
        .filter(|(k, v)| g.prop(k) != Some(v.as_str()))
        .map(|(k, _)| k)
        .take(5)
        .collect();
    assert!(
        lost.is_empty(),
        "properties lost or changed (first 5): {lost:?}"
    );
    c.shutdown().await;
    rmq.finish().await;
}

/// The length of `s` inside a JSON string: quotes and backslashes take 2 bytes, other
/// control characters 6 (`\u0001`).
fn json_escaped_len(s: &str) -> usize {
    s.bytes()
        .map(|b| match b {
            b'"' | b'\\' => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// A thousand async sends, 25 in flight at a time on one connection (answers
/// matched by `opaque`; the client's own outbound queue refuses many more at once), in
/// binary-header mode too when the process chose it: every callback reports success with
/// its own (queue, offset), and a consumer gets every message once.
pub async fn many_async_sends_in_flight(namesrv: &str) {
    const N: usize = 1000;
    // The client's own transport admission queue refuses sends past a few dozen in flight
    // on a loaded machine (transport.admission.queue_saturated): waves of 25 (a divisor of
    // N, so the last wave is waited for like the others).
    const WAVE: usize = 25;
    let rmq = Rmq::new(namesrv);
    let topic = "InteropManyAsync";
    let mut producer = rmq.producer("interop-many-async-pg").await;
    let results: Arc<Mutex<Vec<Result<SendResult, String>>>> = Arc::default();
    for i in 0..N {
        let m = Message::builder()
            .topic(topic.to_string())
            .tags("TagM")
            .body_slice(format!("many-{i}").as_bytes())
            .build()
            .expect("a valid message");
        let sink = results.clone();
        producer
            .send_with_callback(m, move |r, e| {
                let outcome = match (r, e) {
                    (Some(r), _) => Ok(r.clone()),
                    (None, Some(e)) => Err(e.to_string()),
                    (None, None) => Err("a callback with neither result nor error".into()),
                };
                sink.lock().expect("results' lock").push(outcome);
            })
            .await
            .unwrap_or_else(|e| panic!("async send {i}: {e}"));
        if (i + 1) % WAVE == 0 {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            while results.lock().expect("results' lock").len() < i + 1 {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "only {} of {} callbacks",
                    results.lock().expect("results' lock").len(),
                    i + 1
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    const _: () = assert!(N % WAVE == 0);
    let results = results.lock().expect("results' lock").clone();
    assert_eq!(results.len(), N, "every send answered");
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} async sends failed, e.g. {:?}",
        failed.len(),
        failed.first()
    );
    let places = duplicates(results.iter().filter_map(|r| r.as_ref().ok()).map(|r| {
        let q = r.message_queue.as_ref().map_or((String::new(), -1), |q| {
            (q.broker_name().to_string(), q.queue_id())
        });
        (q, r.queue_offset)
    }));
    assert!(
        places.is_empty(),
        "two sends answered with one (queue, offset): {places:?}"
    );
    producer.shutdown().await;

    let sink = rmq::sink();
    let mut c = rmq.push("interop-many-async-cg", topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    wait_deliveries(&sink, Duration::from_secs(30), "all 1000", |g| g.len() >= N).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rmq::snapshot(&sink);
    assert!(
        duplicates(got.iter().map(|g| g.body_str())).is_empty(),
        "a message twice"
    );
    assert_eq!(got.len(), N);
    c.shutdown().await;
    rmq.finish().await;
}
