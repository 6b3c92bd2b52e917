//! Message trace against a real `ringmq standalone` (delay levels of 100 ms, so retries
//! come back quickly): a traced producer and a traced push consumer whose listener always
//! fails; the trace read back by the message's unique key shows the send (and where the
//! message is stored), each failed listener call with its reconsume count, and the dead
//! letter. Without tracing nothing is written to the trace topic.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{fast_push, wait_until, Node};
use ringmq_client::consumer::dlq_topic;
use ringmq_client::trace::{MessageTrace, TRACE_TOPIC_DEFAULT};
use ringmq_client::{
    Admin, ConsumeContext, ConsumeResult, Message, Producer, ReceivedMessage, StartPosition,
};

/// A "does not hang" bound: every step here takes well under a second on a quiet machine.
const WAIT: Duration = Duration::from_secs(30);

fn fast_delays() -> String {
    format!("messageDelayLevel={}", vec!["100ms"; 18].join(" "))
}

/// Reads the trace of `id` until `done` holds for it (the key index and the trace
/// producer both lag a little), or `WAIT` passes.
async fn trace_until(
    admin: &Admin,
    id: &str,
    done: impl Fn(&MessageTrace) -> bool,
) -> MessageTrace {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let t = admin.message_trace(id, TRACE_TOPIC_DEFAULT).await;
        match t {
            Ok(t) if done(&t) => return t,
            Ok(t) if std::time::Instant::now() >= deadline => return t,
            Err(e) if std::time::Instant::now() >= deadline => panic!("reading the trace: {e}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_follows_a_message_through_its_retries_into_the_dlq() {
    let delays = fast_delays();
    let node = Node::start_configured(2, &[&delays]);
    let topic = "Traced";
    let group = "traced-group";
    node.create_topic(topic, 1).await;
    let p = Producer::builder()
        .group("traced-producers")
        .name_server(node.namesrv())
        .trace(true)
        .start()
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let c = fast_push(&node, group, "trace-1")
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .consume_batch_max(1)
        .max_reconsume_times(2)
        .trace(true)
        .start(move |_: Vec<ReceivedMessage>, _: ConsumeContext| {
            let seen = Arc::clone(&seen);
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                ConsumeResult::Retry
            }
        })
        .await
        .unwrap();
    let sent = p
        .send(
            Message::new(topic, "poison")
                .with_tag("T1")
                .with_key("order-7"),
        )
        .await
        .unwrap();

    // One delivery and two retries, then the broker dead-letters it.
    assert!(wait_until(WAIT, || calls.load(Ordering::SeqCst) >= 3).await);
    let admin = Admin::connect(&node.namesrv()).await.unwrap();
    let t = trace_until(&admin, &sent.unique_key, |t| {
        t.sends.len() == 1
            && t.consumes.len() == 3
            && t.consumes.iter().all(|c| c.success.is_some())
            && t.dead_letters.len() == 1
    })
    .await;
    c.shutdown().await;
    p.shutdown().await;
    for stats in [p.trace_stats().unwrap(), c.trace_stats().unwrap()] {
        assert_eq!((stats.dropped, stats.failed), (0, 0), "{stats:?}");
        assert_eq!(stats.sent, stats.recorded, "{stats:?}");
    }

    assert_eq!(t.msg_id, sent.unique_key);
    assert_eq!(t.sends.len(), 1, "{t:#?}");
    let s = &t.sends[0];
    assert_eq!(
        (s.group.as_str(), s.topic.as_str()),
        ("traced-producers", topic)
    );
    assert_eq!((s.tags.as_str(), s.keys.as_str()), ("T1", "order-7"));
    assert_eq!(s.offset_msg_id, sent.msg_id);
    assert!(s.success);
    let stored = s.stored.as_ref().expect("the broker still has the message");
    assert_eq!(stored.queue_id, sent.queue.queue_id);
    assert_eq!(stored.queue_offset, sent.queue_offset);
    assert_eq!(stored.broker_name, sent.queue.broker_name);

    assert_eq!(
        t.consumes.iter().map(|c| c.retry_times).collect::<Vec<_>>(),
        [0, 1, 2],
        "{t:#?}"
    );
    for c in &t.consumes {
        assert_eq!(c.group, group);
        assert_eq!(c.success, Some(false));
        assert_eq!(
            c.context_code,
            Some(4),
            "FAILED: the listener asked to retry"
        );
        assert!(c.timestamp_ms >= s.timestamp_ms);
    }
    assert_eq!(t.dead_letters.len(), 1, "{t:#?}");
    let d = &t.dead_letters[0];
    assert_eq!(
        (d.group.as_str(), d.topic.clone()),
        (group, dlq_topic(group))
    );
    // The hand-back that dead-lettered it counts too (RocketMQ's broker does the same).
    assert_eq!(d.reconsume_times, 3);

    // Read by the offset message id too (its unique key is looked up).
    let by_offset_id = admin
        .message_trace(&sent.msg_id, TRACE_TOPIC_DEFAULT)
        .await
        .unwrap();
    assert_eq!(by_offset_id.sends.len(), 1);
    assert_eq!(by_offset_id.msg_id, sent.unique_key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracing_is_off_by_default_and_writes_nothing() {
    let node = Node::start();
    let topic = "Untraced";
    node.create_topic(topic, 1).await;
    let p = Producer::builder()
        .group("untraced-producers")
        .name_server(node.namesrv())
        .start()
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let c = fast_push(&node, "untraced-group", "untraced-1")
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .start(move |_: Vec<ReceivedMessage>, _: ConsumeContext| {
            let seen = Arc::clone(&seen);
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    let sent = p.send(Message::new(topic, "plain")).await.unwrap();
    assert!(wait_until(WAIT, || calls.load(Ordering::SeqCst) >= 1).await);
    assert!(p.trace_stats().is_none() && c.trace_stats().is_none());
    c.shutdown().await;
    p.shutdown().await;

    // The trace topic was never written: the broker did not create it.
    let admin = Admin::connect(&node.namesrv()).await.unwrap();
    let topics = admin.topic_list().await.unwrap();
    assert!(topics.iter().any(|t| t == topic), "{topics:?}");
    assert!(
        !topics.iter().any(|t| t == TRACE_TOPIC_DEFAULT),
        "{topics:?}"
    );
    let t = admin
        .message_trace(&sent.unique_key, TRACE_TOPIC_DEFAULT)
        .await;
    assert!(t.is_err() || t.unwrap().sends.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_consumer_traces_each_delivery_until_its_ack() {
    let node = Node::start_configured(2, &[]);
    let topic = "TracedPop";
    let group = "traced-pop-group";
    node.create_topic(topic, 1).await;
    let p = Producer::builder()
        .group("traced-pop-producers")
        .name_server(node.namesrv())
        .trace(true)
        .start()
        .await
        .unwrap();
    let sent = p.send(Message::new(topic, "popped")).await.unwrap();
    let c = ringmq_client::SimpleConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .subscribe(topic, "*")
        .await_duration(Duration::from_millis(300))
        .trace(true)
        .start()
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let got = loop {
        let got = c.receive(4, Duration::from_secs(30)).await.unwrap();
        if !got.is_empty() || std::time::Instant::now() >= deadline {
            break got;
        }
    };
    assert_eq!(got.len(), 1);
    c.ack(&got[0]).await.unwrap();
    // The tracers send what they queued before they stop.
    c.shutdown().await;
    p.shutdown().await;
    let admin = Admin::connect(&node.namesrv()).await.unwrap();
    let t = trace_until(&admin, &sent.unique_key, |t| {
        !t.sends.is_empty() && t.consumes.iter().any(|e| e.success.is_some())
    })
    .await;
    assert_eq!(t.sends.len(), 1, "{t:?}");
    assert_eq!(t.consumes.len(), 1, "{t:?}");
    let e = &t.consumes[0];
    assert_eq!(e.group, group);
    assert_eq!(e.retry_times, 0);
    assert_eq!(e.success, Some(true), "{t:?}");
    assert_eq!(e.context_code, Some(0));
    assert!(t.dead_letters.is_empty());
}
