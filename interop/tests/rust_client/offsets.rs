//! Offsets as a RocketMQ application meets them: a classic pull consumer reading one queue
//! by hand (every pull status with its four offsets: FOUND, PULL_NOT_FOUND on an empty
//! queue and at the end, PULL_OFFSET_MOVED past the end); a new group with the default
//! CONSUME_FROM_LAST_OFFSET on queues that start at 0 (RocketMQ answers offset 0, so it
//! reads them from the start); and a group that resumes where it committed.

use std::time::Duration;

#[allow(deprecated)] // Classic pull: deprecated in the client, still in applications.
use rocketmq_client_rust::DefaultMQPullConsumer;
use rocketmq_client_rust::{
    ClientConfig, DefaultMQPushConsumer, MQPushConsumer, PullResult, PullStatus,
};
use rocketmq_model::common::message::message_queue::MessageQueue;

use super::groups::create_topic;
use super::rmq::{self, code, duplicates, wait_deliveries, Got, Record, Rmq};
use super::sends::{assert_as_sent, message, Sent};

/// Sends `n` messages `<prefix>-<i>` to one queue of `topic` (tags alternate TagA, TagB);
/// returns what was sent and the queue.
async fn send_to_one_queue(rmq: &Rmq, topic: &str, prefix: &str, n: usize) -> (Sent, MessageQueue) {
    let mut p = rmq.producer(&format!("interop-{prefix}-pg")).await;
    let mut sent = Sent::new();
    let mut mq: Option<MessageQueue> = None;
    for i in 0..n {
        let body = format!("{prefix}-{i}");
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        let m = message(
            &mut sent,
            topic,
            &body,
            tag,
            &[&body],
            &[("i", &i.to_string())],
        );
        let r = match &mq {
            None => p.send(m).await,
            Some(q) => p.send_to_queue(m, q.clone()).await,
        };
        let r = r
            .unwrap_or_else(|e| panic!("{body}: {e}"))
            .expect("a result");
        mq.get_or_insert_with(|| r.message_queue.clone().expect("a queue"));
    }
    p.shutdown().await;
    (sent, mq.expect("at least one message"))
}

/// A pull result's status and offsets, for failure messages.
fn show(r: &PullResult) -> String {
    format!(
        "{:?} next {} min {} max {} ({} messages)",
        r.pull_status(),
        r.next_begin_offset(),
        r.min_offset(),
        r.max_offset(),
        r.msg_found_list().map_or(0, <[_]>::len)
    )
}

/// The classic pull consumer is deprecated in `rocketmq-client-rust` but still what many
/// applications use; it pulls one queue at an offset the application chooses.
#[allow(deprecated)]
pub async fn classic_pull(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropPull";
    create_topic(&rmq, topic).await;
    let (sent, mq) = send_to_one_queue(&rmq, topic, "pull", 6).await;
    // The warmup message may share the queue: the test's messages are the last 6.
    let c = DefaultMQPullConsumer::builder(rmq.client_runtime())
        .consumer_group("interop-pull-cg")
        .name_server_addr(rmq.namesrv.clone())
        .rpc_hook(rmq.wire.clone())
        // Long polls held by the broker for 2 s instead of 20: shutting down waits for
        // those in flight.
        .broker_suspend_max_time(Duration::from_secs(2))
        .consumer_timeout_when_suspend(Duration::from_secs(5))
        .build()
        .expect("building the pull consumer");
    c.start().await.expect("starting the pull consumer");
    // As a classic pull application does: learn the topic's queues (and its route) first.
    let queues = c
        .fetch_subscribe_message_queues(topic)
        .await
        .expect("fetching the topic's queues");
    assert_eq!(queues.len(), 8, "{topic} has 8 queues: {queues:?}");

    let max = c.max_offset(&mq).await.expect("GET_MAX_OFFSET");
    assert!(max >= 6, "max offset {max}");
    let first = max - 6;
    let r = c.pull(&mq, "*", first, 32).await.expect("a pull");
    assert_eq!(*r.pull_status(), PullStatus::Found, "{}", show(&r));
    let got: Vec<Got> = r
        .msg_found_list()
        .unwrap_or_default()
        .iter()
        .map(|m| Got::from_ext("pull", m))
        .collect();
    assert_eq!(got.len(), 6, "{got:?}");
    assert_as_sent(&sent, &got);
    assert_eq!(
        (r.next_begin_offset(), r.min_offset(), r.max_offset()),
        (max as u64, 0, max as u64),
        "FOUND: next, min, max"
    );
    let offsets: Vec<i64> = got.iter().map(|g| g.queue_offset).collect();
    assert_eq!(
        offsets,
        (first..max).collect::<Vec<_>>(),
        "queue offsets in order"
    );

    let r = c.pull(&mq, "TagA", first, 32).await.expect("a pull by tag");
    let tags: Vec<String> = r
        .msg_found_list()
        .unwrap_or_default()
        .iter()
        .map(|m| Got::from_ext("pull", m).tags)
        .collect();
    assert_eq!(tags, vec!["TagA"; 3], "only TagA: {}", show(&r));

    let r = c.pull(&mq, "*", max, 32).await.expect("a pull at the end");
    assert_eq!(*r.pull_status(), PullStatus::NoNewMsg, "{}", show(&r));
    assert_eq!(
        (r.next_begin_offset(), r.min_offset(), r.max_offset()),
        (max as u64, 0, max as u64),
        "PULL_NOT_FOUND at the end: next, min, max"
    );

    let r = c
        .pull(&mq, "*", max + 100, 32)
        .await
        .expect("a pull past the end");
    assert_eq!(*r.pull_status(), PullStatus::OffsetIllegal, "{}", show(&r));
    assert_eq!(
        (r.next_begin_offset(), r.min_offset(), r.max_offset()),
        (max as u64, 0, max as u64),
        "PULL_OFFSET_MOVED: next is the end, min, max"
    );

    let empty = MessageQueue::from_parts(topic, mq.broker_name(), (mq.queue_id() + 1) % 4);
    let emax = c.max_offset(&empty).await.expect("GET_MAX_OFFSET");
    if emax == 0 {
        let r = c
            .pull(&empty, "*", 0, 32)
            .await
            .expect("a pull of an empty queue");
        assert_eq!(*r.pull_status(), PullStatus::NoNewMsg, "{}", show(&r));
        assert_eq!(
            (r.next_begin_offset(), r.min_offset(), r.max_offset()),
            (0, 0, 0),
            "PULL_NOT_FOUND on an empty queue: next, min, max"
        );
    }
    c.shutdown().await.expect("shutting the pull consumer down");
    rmq.wire.assert_sent(&[code::PULL_MESSAGE]);
    rmq.finish().await;
}

/// A new group with the client's default start (CONSUME_FROM_LAST_OFFSET) on queues that
/// start at 0: RocketMQ answers QUERY_CONSUMER_OFFSET with 0 for such a queue, so the
/// group reads the messages sent before it existed.
pub async fn new_group_default_start(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropDefaultStart";
    let (sent, _) = send_to_one_queue(&rmq, topic, "early", 5).await;
    let sink = rmq::sink();
    let mut c = DefaultMQPushConsumer::builder(rmq.client_runtime())
        .client_config(ClientConfig {
            namesrv_addr: Some(rmq.namesrv.clone().into()),
            ..Default::default()
        })
        .consumer_group("interop-default-start-cg")
        .rpc_hook(Some(rmq.wire.clone()))
        .build();
    c.subscribe(topic, "*").await.expect("subscribing");
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    wait_deliveries(
        &sink,
        Duration::from_secs(20),
        "the messages sent before the group",
        |g| g.len() >= 5,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_as_sent(&sent, &rmq::snapshot(&sink));
    c.shutdown().await;
    rmq.wire.assert_sent(&[code::QUERY_CONSUMER_OFFSET]);
    rmq.finish().await;
}

/// A group consumes, leaves (committing its offsets), and a new member of the same group
/// gets only what was sent since: UPDATE_CONSUMER_OFFSET stored what QUERY_CONSUMER_OFFSET
/// answers.
pub async fn resume_where_committed(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropResume";
    let group = "interop-resume-cg";
    let (first, mq) = send_to_one_queue(&rmq, topic, "before", 5).await;
    let sink = rmq::sink();
    let mut c = rmq.push(group, topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("first", &sink));
    c.start().await.expect("starting the first member");
    wait_deliveries(&sink, Duration::from_secs(20), "the first 5", |g| {
        g.len() >= 5
    })
    .await;
    c.shutdown().await;
    assert_as_sent(&first, &rmq::snapshot(&sink));

    let mut p = rmq.producer("interop-resume-pg2").await;
    let mut second = Sent::new();
    for i in 0..5 {
        let body = format!("after-{i}");
        let m = message(&mut second, topic, &body, "TagA", &[&body], &[]);
        p.send_to_queue(m, mq.clone())
            .await
            .unwrap_or_else(|e| panic!("{body}: {e}"));
    }
    p.shutdown().await;

    let sink2 = rmq::sink();
    let mut c2 = rmq.push(group, topic, "*").await;
    c2.register_message_listener_concurrently(Record::ok("second", &sink2));
    c2.start().await.expect("starting the second member");
    wait_deliveries(&sink2, Duration::from_secs(20), "the 5 sent since", |g| {
        g.len() >= 5
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rmq::snapshot(&sink2);
    assert!(
        duplicates(got.iter().map(Got::body_str)).is_empty(),
        "{got:?}"
    );
    assert_as_sent(&second, &got);
    c2.shutdown().await;
    rmq.wire
        .assert_sent(&[code::UPDATE_CONSUMER_OFFSET, code::QUERY_CONSUMER_OFFSET]);
    rmq.finish().await;
}
