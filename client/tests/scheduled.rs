//! Scheduled messages against a real `ringmq standalone`: delay levels, delays and delivery
//! times arrive in their real topic no earlier than due, with RocketMQ's properties; bad
//! schedules are refused and store nothing; a kill -9 with messages pending loses none.
//! "Not early" is checked on the broker's own clock (the delivered record's store time
//! against its due time), so no assertion depends on this machine's speed.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{body, producer, read_all, Node};
use ringmq_client::wire::properties::keys;
use ringmq_client::{Error, Message, PullConsumer, ReceivedMessage};

/// Reads `topic` until `want` distinct bodies arrived or `limit` passed.
async fn wait_for(
    c: &PullConsumer,
    topic: &str,
    want: usize,
    limit: Duration,
) -> Vec<ReceivedMessage> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let got = read_all(c, topic).await;
        let distinct: std::collections::BTreeSet<String> = got.iter().map(body).collect();
        if distinct.len() >= want || std::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A delivered message was stored in its topic no earlier than it was due.
fn assert_not_early(m: &ReceivedMessage) {
    let due = m
        .deliver_at_ms()
        .expect("a delivered scheduled message names its due time");
    assert!(
        m.store_timestamp_ms >= due,
        "{} delivered at {} before it was due at {due}",
        body(m),
        m.store_timestamp_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levels_delays_and_times_arrive_when_due_with_their_properties() {
    let node = Node::start();
    let topic = "Scheduled";
    node.create_topic(topic, 4).await;
    let p = producer(&node).await;
    let c = common::reader(&node, "scheduled-reader").await;

    let sent_at = now_ms();
    let level = p
        .send(
            Message::new(topic, "level-1")
                .with_tag("TagL")
                .with_key("order-1")
                .with_delay_level(1),
        )
        .await
        .unwrap();
    let delay = p
        .send(Message::new(topic, "delay-300ms").with_delay(Duration::from_millis(300)))
        .await
        .unwrap();
    let at = p
        .send(Message::new(topic, "at-plus-600ms").with_deliver_at_ms(sent_at + 600))
        .await
        .unwrap();
    let past = p
        .send(Message::new(topic, "at-in-the-past").with_deliver_at_ms(sent_at - 60_000))
        .await
        .unwrap();
    let level0 = p
        .send(Message::new(topic, "level-0").with_delay_level(0))
        .await
        .unwrap();
    assert_eq!(
        past.deliver_at_ms, None,
        "a time in the past delivers at once"
    );
    assert_eq!(level0.deliver_at_ms, None, "level 0 is no delay");
    let level_due = level.deliver_at_ms.unwrap();
    assert!(level_due >= level.store_timestamp_ms + 1000, "{level:?}");
    assert!(delay.deliver_at_ms.unwrap() >= delay.store_timestamp_ms + 300);
    assert_eq!(at.deliver_at_ms, Some(sent_at + 600));

    // Refused, and nothing stored: beyond timerMaxDelaySec (3 days), a batch.
    let far = p
        .send(Message::new(topic, "too-far").with_delay(Duration::from_secs(4 * 86_400)))
        .await
        .unwrap_err();
    assert!(
        far.to_string().contains("timerMaxDelaySec"),
        "refusal names the limit: {far}"
    );
    let batch = p
        .send_batch(&[
            Message::new(topic, "b0").with_delay_level(2),
            Message::new(topic, "b1"),
        ])
        .await
        .unwrap_err();
    assert!(matches!(batch, Error::InvalidMessage(_)), "{batch}");

    let all = wait_for(&c, topic, 5, Duration::from_secs(30)).await;
    let by_body: BTreeMap<String, &ReceivedMessage> = all.iter().map(|m| (body(m), m)).collect();
    assert_eq!(
        by_body.keys().cloned().collect::<Vec<_>>(),
        [
            "at-in-the-past",
            "at-plus-600ms",
            "delay-300ms",
            "level-0",
            "level-1"
        ],
        "every message once, nothing refused got stored"
    );
    assert_eq!(all.len(), 5, "no duplicates");
    let l = by_body["level-1"];
    assert_not_early(l);
    assert_eq!(l.deliver_at_ms(), Some(level_due));
    assert_eq!(l.topic, topic);
    assert_eq!(l.tag(), Some("TagL"));
    assert_eq!(l.keys(), ["order-1"]);
    assert_eq!(l.property(keys::REAL_TOPIC), Some(topic));
    assert_eq!(
        l.property(keys::ORIGIN_MESSAGE_ID),
        Some(level.msg_id.as_str()),
        "the id the producer got back is kept"
    );
    assert_eq!(l.unique_key(), Some(level.unique_key.as_str()));
    assert_eq!(l.property(keys::DELAY), None, "the delay is spent");
    assert_eq!(l.born_timestamp_ms, by_body["level-1"].born_timestamp_ms);
    assert_eq!(
        l.queue_id, level.queue.queue_id,
        "stored in the queue it was sent to"
    );
    assert_not_early(by_body["delay-300ms"]);
    assert_not_early(by_body["at-plus-600ms"]);
    assert_eq!(by_body["at-in-the-past"].deliver_at_ms(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_fill_loses_no_acknowledged_message_and_delivers_none_early() {
    let mut node = Node::start();
    let topic = "ScheduledCrash";
    node.create_topic(topic, 4).await;
    let p = producer(&node).await;
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    // The fill: delays from 0.2 s growing by 20 ms per message, until a send fails (the kill).
    let sender = {
        let acked = Arc::clone(&acked);
        tokio::spawn(async move {
            for i in 0..2_000u64 {
                let m = Message::new(topic, format!("m{i}"))
                    .with_delay(Duration::from_millis(200 + i * 20));
                match p.send(m).await {
                    Ok(_) => acked.lock().unwrap().push(format!("m{i}")),
                    Err(_) => break,
                }
            }
            p
        })
    };
    let filled = common::wait_until(Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 300
    })
    .await;
    assert!(filled, "the fill did not reach 300 messages");
    node.kill();
    let p = sender.await.unwrap();
    p.shutdown().await;
    let acked = acked.lock().unwrap().clone();
    eprintln!(
        "{} scheduled messages acknowledged when kill -9 struck",
        acked.len()
    );
    node.restart();
    let c = common::reader(&node, "scheduled-crash-reader").await;
    // Until every acknowledged message arrived (an unacknowledged one may arrive too).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let (all, distinct) = loop {
        let all = read_all(&c, topic).await;
        let distinct: std::collections::BTreeSet<String> = all.iter().map(body).collect();
        if acked.iter().all(|b| distinct.contains(b)) || std::time::Instant::now() > deadline {
            break (all, distinct);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let missing: Vec<&String> = acked.iter().filter(|b| !distinct.contains(*b)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged, lost after kill -9: {missing:?}"
    );
    for m in &all {
        assert_not_early(m);
    }
    // At most one delivery append (256 messages) is repeated after a crash.
    assert!(
        all.len() - distinct.len() <= 256,
        "{} duplicates",
        all.len() - distinct.len()
    );
}
