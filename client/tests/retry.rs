//! Retry and dead-letter topics against a real `ringmq standalone` whose delay levels are
//! all 100 ms (`messageDelayLevel`), so a retry comes back quickly: a push consumer hands
//! what its listener failed (Retry or a panic) back to the broker, gets it again from the
//! group's retry topic under its original topic, and a message that keeps failing ends in the
//! dead-letter topic after `max_reconsume_times` retries, while its queue's committed offset
//! moves on. The pull consumer's `send_back`, the same path by hand.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{body, fast_push, producer, reader, send_all, wait_until, Node};
use ringmq_client::consumer::{dlq_topic, retry_topic, DELAY_LEVEL_BROKER, DELAY_LEVEL_DLQ};
use ringmq_client::message::RETRY_TOPIC;
use ringmq_client::{
    ConsumeContext, ConsumeResult, MessageBatch, PullConsumer, PullStatus, ReceivedMessage,
    StartPosition,
};

/// A "does not hang" bound: every step here takes well under a second on a quiet machine.
const WAIT: Duration = Duration::from_secs(30);

/// 18 delay levels of 100 ms each.
fn fast_delays() -> String {
    format!("messageDelayLevel={}", vec!["100ms"; 18].join(" "))
}

/// One delivery as the listener saw it.
#[derive(Debug, Clone)]
struct Delivery {
    topic: String,
    queue_topic: String,
    reconsume_times: i32,
    retry_topic_property: Option<String>,
    unique_key: Option<String>,
}

type Deliveries = Arc<Mutex<HashMap<String, Vec<Delivery>>>>;

/// Every message of `topic` (one queue) from offset 0, or `None` while the topic has no
/// route yet.
async fn read_queue(r: &PullConsumer, topic: &str) -> Option<Vec<ReceivedMessage>> {
    let mq = r.fetch_queues(topic).await.ok()?.first()?.clone();
    let res = r.pull(&mq, 0, 100, "*").await.ok()?;
    Some(if res.status == PullStatus::Found {
        res.messages
    } else {
        Vec::new()
    })
}

/// The first message of `topic` (one queue), waiting (up to [`WAIT`]) for the topic and
/// the message to exist.
async fn first_in(r: &PullConsumer, topic: &str) -> Option<ReceivedMessage> {
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        if let Some(m) = read_queue(r, topic).await {
            if let Some(first) = m.into_iter().next() {
                return Some(first);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Notes a delivery and answers as the retry flow's listener does: poison always fails,
/// flaky fails its first delivery, panics panics on its first delivery.
fn note(sink: &Deliveries, d: Delivery, body: String) -> ConsumeResult {
    let first = d.reconsume_times == 0;
    sink.lock()
        .unwrap()
        .entry(body.clone())
        .or_default()
        .push(d);
    match body.as_str() {
        "poison" => ConsumeResult::Retry,
        "flaky" if first => ConsumeResult::Retry,
        "panics" if first => panic!("listener bug"),
        _ => ConsumeResult::Success,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_messages_come_back_from_the_retry_topic_then_go_to_the_dlq() {
    retry_flow("RetryFlow", false).await;
}

/// The same with a listener of batches read in place (`start_batch`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_listener_gets_the_same_retries_and_dead_letters() {
    retry_flow("RetryFlowBatch", true).await;
}

async fn retry_flow(topic: &str, batch_listener: bool) {
    let delays = fast_delays();
    let node = Node::start_configured(2, &[&delays]);
    let group = &format!("{topic}-group");
    node.create_topic(topic, 1).await;
    let p = producer(&node).await;

    let deliveries: Deliveries = Default::default();
    let sink = deliveries.clone();
    let b = fast_push(&node, group, "retry-1")
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .consume_batch_max(1)
        .max_reconsume_times(2);
    let c = if batch_listener {
        b.start_batch(move |batch: MessageBatch, ctx: ConsumeContext| {
            let sink = sink.clone();
            async move {
                let m = batch.get(0).unwrap();
                let d = Delivery {
                    topic: m.topic().to_string(),
                    queue_topic: ctx.queue.topic.clone(),
                    reconsume_times: m.reconsume_times(),
                    retry_topic_property: m.property(RETRY_TOPIC).map(String::from),
                    unique_key: m.unique_key().map(String::from),
                };
                note(&sink, d, String::from_utf8_lossy(m.body()).into_owned())
            }
        })
        .await
        .unwrap()
    } else {
        b.start(move |msgs: Vec<ReceivedMessage>, ctx: ConsumeContext| {
            let sink = sink.clone();
            async move {
                let m = &msgs[0];
                let d = Delivery {
                    topic: m.topic.clone(),
                    queue_topic: ctx.queue.topic.clone(),
                    reconsume_times: m.reconsume_times,
                    retry_topic_property: m.property(RETRY_TOPIC).map(String::from),
                    unique_key: m.unique_key().map(String::from),
                };
                note(&sink, d, body(m))
            }
        })
        .await
        .unwrap()
    };
    let sent = send_all(
        &p,
        topic,
        ["a", "poison", "b", "flaky", "c", "panics", "d"].map(String::from),
    )
    .await;

    // poison: delivered 1 + 2 times, then dead-lettered.
    let dlq_reader = reader(&node, &format!("{topic}-dlq-reader")).await;
    let dlq = dlq_topic(group);
    let mut dead = Vec::new();
    let done = wait_until(WAIT, || {
        let d = deliveries.lock().unwrap();
        sent.iter().all(|b| d.contains_key(b))
            && d["poison"].len() >= 3
            && d.get("flaky").is_some_and(|v| v.len() >= 2)
            && d.get("panics").is_some_and(|v| v.len() >= 2)
    })
    .await;
    assert!(done, "{:#?}", deliveries.lock().unwrap());
    if first_in(&dlq_reader, &dlq).await.is_some() {
        dead = read_queue(&dlq_reader, &dlq).await.unwrap();
    }
    // Give a fourth delivery of poison the time to show up, if the limit were not applied.
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.shutdown().await;

    let d = deliveries.lock().unwrap().clone();
    let retry = retry_topic(group);
    let poison = &d["poison"];
    assert_eq!(
        poison.iter().map(|x| x.reconsume_times).collect::<Vec<_>>(),
        [0, 1, 2],
        "one delivery and max_reconsume_times = 2 retries: {poison:#?}"
    );
    assert_eq!(poison[0].queue_topic, topic);
    for retried in &poison[1..] {
        assert_eq!(retried.queue_topic, retry, "pulled from the retry topic");
        assert_eq!(retried.topic, topic, "shown under the original topic");
        assert_eq!(retried.retry_topic_property.as_deref(), Some(topic));
        assert_eq!(retried.unique_key, poison[0].unique_key, "same message id");
    }
    for once in ["flaky", "panics"] {
        let v = &d[once];
        assert_eq!(v.len(), 2, "{once}: one failure, one success: {v:#?}");
        assert_eq!(v[1].queue_topic, retry);
        assert_eq!(v[1].reconsume_times, 1);
    }
    for ok in ["a", "b", "c", "d"] {
        assert_eq!(d[ok].len(), 1, "{ok} succeeded at once: {:#?}", d[ok]);
    }

    assert_eq!(dead.len(), 1, "only poison is dead-lettered: {dead:#?}");
    let letter = &dead[0];
    assert_eq!(body(letter), "poison");
    assert_eq!(letter.topic, dlq);
    assert_eq!(letter.property(RETRY_TOPIC), Some(topic));
    assert_eq!(
        letter.unique_key().map(String::from),
        poison[0].unique_key,
        "the dead letter keeps the message's id"
    );

    // The original queue's offset moved past poison; the retry queue is consumed too.
    let r = reader(&node, group).await;
    let mq = r.fetch_queues(topic).await.unwrap()[0].clone();
    assert_eq!(r.committed_offset(&mq).await.unwrap(), Some(7));
    let rq = r.fetch_queues(&retry).await.unwrap()[0].clone();
    assert_eq!(
        r.committed_offset(&rq).await.unwrap(),
        Some(r.max_offset(&rq).await.unwrap()),
        "every retry was consumed (or handed back again)"
    );
    r.shutdown().await;
    dlq_reader.shutdown().await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_consumer_sends_back_by_hand() {
    let delays = fast_delays();
    let node = Node::start_configured(2, &[&delays]);
    let topic = "PullBack";
    let group = "pull-back-group";
    node.create_topic(topic, 1).await;
    let p = producer(&node).await;
    send_all(&p, topic, ["first".to_string()]).await;

    let c = reader(&node, group).await;
    let mq = c.fetch_queues(topic).await.unwrap()[0].clone();
    let original = c.pull(&mq, 0, 1, "*").await.unwrap().messages.remove(0);
    c.send_back(&original, DELAY_LEVEL_BROKER).await.unwrap();

    // The copy arrives in the retry topic after the (100 ms) delay.
    let retry = retry_topic(group);
    let copy = first_in(&c, &retry)
        .await
        .unwrap_or_else(|| panic!("no copy in {retry}"));
    assert_eq!(
        copy.topic, retry,
        "a pull consumer sees the record's own topic"
    );
    assert_eq!(copy.property(RETRY_TOPIC), Some(topic));
    assert_eq!(copy.reconsume_times, 1);
    assert_eq!(copy.unique_key(), original.unique_key());
    assert_eq!(copy.body, original.body);

    // Straight to the dead-letter topic.
    c.send_back(&copy, DELAY_LEVEL_DLQ).await.unwrap();
    let dlq = dlq_topic(group);
    let dead = first_in(&c, &dlq)
        .await
        .unwrap_or_else(|| panic!("nothing in {dlq}"));
    assert_eq!(
        dead.property(RETRY_TOPIC),
        Some(topic),
        "original topic kept"
    );
    assert_eq!(dead.unique_key(), original.unique_key());
    assert_eq!(read_queue(&c, &dlq).await.unwrap().len(), 1);

    // A message the broker does not hold at that offset is refused, not stored.
    let mut bogus = original.clone();
    bogus.physical_offset = 1 << 40;
    let e = c.send_back(&bogus, DELAY_LEVEL_BROKER).await.unwrap_err();
    assert!(e.status().is_some(), "the broker answered: {e}");
    let retried = read_queue(&c, &retry).await.unwrap();
    assert_eq!(retried.len(), 1, "nothing more in {retry}");
    c.shutdown().await;
    p.shutdown().await;
}
