//! The lookups an application makes through a consumer: a queue's max and min offsets,
//! the offset of a time (SEARCH_OFFSET_BY_TIMESTAMP), a message by its offset id
//! (VIEW_MESSAGE_BY_ID, sent to the store host named in the id) and messages by key
//! (QUERY_MESSAGE).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rocketmq_model::common::message::message_queue::MessageQueue;

use rocketmq_client_rust::MQPushConsumer;

use super::rmq::{self, code, Got, Record, Rmq};
use super::sends::{message, Sent};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

pub async fn offsets_view_and_query(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropQueries";
    let mut p = rmq.producer("interop-queries-pg").await;
    let mut sent = Sent::new();
    let mut results = Vec::new();
    let before = now_ms();
    for i in 0..5 {
        let body = format!("q-{i}");
        let keys = [format!("qkey-{i}"), "qkey-all".to_string()];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagQ",
            &keys,
            &[("i", &i.to_string())],
        );
        // The first send creates the topic; the others go to the queue it went to.
        let r = match results.first() {
            None => p.send(m).await,
            Some(first) => p.send_to_queue(m, queue_of(first)).await,
        };
        let r = r
            .unwrap_or_else(|e| panic!("{body}: {e}"))
            .expect("a result");
        results.push(r);
    }
    p.shutdown().await;
    let mq = results[0].message_queue.clone().expect("a queue");
    for (i, r) in results.iter().enumerate() {
        let q = r.message_queue.as_ref().expect("a queue");
        assert_eq!(q.queue_id(), mq.queue_id(), "all five on one queue: {r:?}");
        assert_eq!(
            r.queue_offset,
            results[0].queue_offset + i as u64,
            "contiguous offsets: {r:?}"
        );
    }

    // The lookups go through a running consumer (as in RocketMQ's Java client).
    let mut c = rmq.push("interop-queries-cg", topic, "*").await;
    c.register_message_listener_concurrently(Record::ok("c", &rmq::sink()));
    c.start().await.expect("starting the consumer");
    let max = c.max_offset(&mq).await.expect("GET_MAX_OFFSET");
    let min = c.min_offset(&mq).await.expect("GET_MIN_OFFSET");
    assert_eq!(min, 0, "a new queue starts at 0");
    assert_eq!(
        max as u64,
        results[4].queue_offset + 1,
        "max offset is one past the last message"
    );
    let at = c
        .search_offset(&mq, before.saturating_sub(60_000))
        .await
        .expect("SEARCH_OFFSET_BY_TIMESTAMP");
    assert_eq!(
        at as u64, results[0].queue_offset,
        "the first message stored after the time"
    );

    for (i, r) in results.iter().enumerate() {
        let id = r.offset_msg_id.clone().expect("an offset id");
        let m = c
            .view_message(topic, &id)
            .await
            .unwrap_or_else(|e| panic!("VIEW_MESSAGE_BY_ID {id}: {e}"));
        let g = Got::from_ext("view", &m);
        assert_eq!(g.body_str(), format!("q-{i}"), "{g:?}");
        assert_eq!(Some(g.uniq.as_str()), r.msg_id.as_deref(), "{g:?}");
        assert_eq!(g.keys, format!("qkey-{i} qkey-all"), "{g:?}");
        assert_eq!(g.prop("i"), Some(i.to_string().as_str()), "{g:?}");
    }

    let end = now_ms() + 60_000;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = c
            .query_message(topic, "qkey-all", 32, before.saturating_sub(60_000), end)
            .await;
        let bodies: Vec<String> = match &found {
            Ok(r) => r
                .message_list()
                .iter()
                .map(|m| Got::from_ext("query", m).body_str())
                .collect(),
            Err(_) => Vec::new(),
        };
        if bodies.len() >= 5 {
            let mut bodies = bodies;
            bodies.sort();
            bodies.dedup();
            assert_eq!(bodies, (0..5).map(|i| format!("q-{i}")).collect::<Vec<_>>());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "QUERY_MESSAGE by key found {bodies:?} ({:?})",
            found.err().map(|e| e.to_string())
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    c.shutdown().await;
    rmq.wire.assert_sent(&[
        code::GET_MAX_OFFSET,
        code::GET_MIN_OFFSET,
        code::SEARCH_OFFSET_BY_TIMESTAMP,
        code::VIEW_MESSAGE_BY_ID,
        code::QUERY_MESSAGE,
    ]);
    rmq.finish().await;
}

fn queue_of(r: &rocketmq_client_rust::SendResult) -> MessageQueue {
    r.message_queue
        .clone()
        .expect("a send result names its queue")
}
