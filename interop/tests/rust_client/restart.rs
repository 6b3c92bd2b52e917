//! A broker restart under connected RocketMQ clients: the producer's sends and the push
//! consumer's pulls fail while the node is down, the client reconnects by itself, and
//! every message sent after the restart is delivered (messages from before may come
//! again: delivery is at-least-once and offsets are committed every 5 s).
//!
//! Slow by the client's design, not the broker's: `rocketmq-client-rust` does not fail the
//! requests in flight on a connection that closes; a push consumer's long poll sent just
//! before the old process exited waits out its 30 s timeout before that queue is pulled
//! again. So the messages sent after the restart may take ~33 s to arrive.

use std::time::{Duration, Instant};

use rocketmq_client_rust::{ClientConfig, DefaultMQPushConsumer, MQPushConsumer};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_single::Message;

use super::groups::create_topic;
use super::node::Node;
use super::rmq::{self, wait_deliveries, Record, Rmq};

fn msg(topic: &str, body: &str) -> Message {
    Message::builder()
        .topic(topic.to_string())
        .tags("TagR")
        .body_slice(body.as_bytes())
        .build()
        .expect("a valid message")
}

pub async fn clients_survive_a_broker_restart(node: &mut Node) {
    let rmq = Rmq::new(&node.namesrv());
    let topic = "InteropRestart";
    create_topic(&rmq, topic).await;
    let sink = rmq::sink();
    // Heartbeats every 10 s (the least it allows) instead of 30: after the restart the broker learns the group's
    // subscription from the next heartbeat, and the test should not wait 30 s for it.
    let mut c = DefaultMQPushConsumer::builder(rmq.client_runtime())
        .client_config(ClientConfig {
            namesrv_addr: Some(rmq.namesrv.clone().into()),
            heartbeat_broker_interval: 10_000,
            ..Default::default()
        })
        .consumer_group("interop-restart-cg")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .rpc_hook(Some(rmq.wire.clone()))
        .build();
    c.subscribe(topic, "TagR").await.expect("subscribing");
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    let p = rmq.producer("interop-restart-pg").await;
    for i in 0..5 {
        p.send(msg(topic, &format!("pre-{i}")))
            .await
            .unwrap_or_else(|e| panic!("pre-{i}: {e}"));
    }
    wait_deliveries(
        &sink,
        Duration::from_secs(20),
        "the 5 sent before the restart",
        |g| (0..5).all(|i| g.iter().any(|x| x.body_str() == format!("pre-{i}"))),
    )
    .await;

    tokio::task::block_in_place(|| node.restart());

    // The first sends may meet the dead connection; the application retries, as one would.
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..5 {
        let body = format!("post-{i}");
        loop {
            match p.send(msg(topic, &body)).await {
                Ok(_) => break,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "{body} never sent after the restart: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    wait_deliveries(
        &sink,
        Duration::from_secs(42),
        "the 5 sent after the restart",
        |g| (0..5).all(|i| g.iter().any(|x| x.body_str() == format!("post-{i}"))),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let post = rmq::snapshot(&sink)
        .iter()
        .filter(|g| g.body_str().starts_with("post-"))
        .count();
    assert_eq!(post, 5, "each message sent after the restart once");
    c.shutdown().await;
    let mut p = p;
    p.shutdown().await;
    rmq.finish().await;
}
