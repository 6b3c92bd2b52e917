//! `msg trace` against a real standalone node (delay levels of 100 ms): a traced producer
//! sends one message, a traced push consumer of group `billing` fails it every time
//! (`max_reconsume_times` 2), the broker dead-letters it; `msg trace ID --json` prints the
//! send (with where it is stored), the three failed calls with reconsume times 0, 1, 2 and
//! the dead letter, in time order, and the table shows the same events.
//!
//! Waits poll until a deadline; nothing here asserts how fast anything happens.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Node;
use ringmq_client::{
    ConsumeContext, ConsumeResult, Message, Producer, PushConsumer, ReceivedMessage, SendResult,
    StartPosition,
};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(30);

#[test]
fn msg_trace_shows_send_failed_calls_and_dead_letter() {
    let delays = format!("messageDelayLevel={}", vec!["100ms"; 18].join(" "));
    let node = Node::start_with(&[&delays]);
    node.json(&["topic", "create", "Orders", "--queues", "1"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (sent, p, c) = rt.block_on(send_and_fail(&node.namesrv));

    let j = trace_until(&node, &sent.unique_key, |events| {
        events
            .iter()
            .filter(|e| e["event"] == "consume" && e["status"] == "failed")
            .count()
            == 3
            && events.iter().any(|e| e["event"] == "dead-letter")
    });
    rt.block_on(async {
        c.shutdown().await;
        p.shutdown().await;
    });
    let events = j["trace"].as_array().unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["send", "consume", "consume", "consume", "dead-letter"],
        "{j}"
    );
    let times: Vec<i64> = events
        .iter()
        .map(|e| e["time_ms"].as_i64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "sorted by time: {j}"
    );

    let send = &events[0];
    assert_eq!(send["group"], "trace-producers", "{send}");
    assert_eq!(send["status"], "success");
    assert_eq!(send["topic"], "Orders");
    assert_eq!(send["queue"], sent.queue.queue_id, "{send}");
    assert_eq!(send["queue_offset"], sent.queue_offset, "{send}");
    assert_eq!(send["offset_msg_id"], sent.msg_id.as_str());
    assert!(send["client_host"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    let retries: Vec<i64> = events[1..4]
        .iter()
        .map(|e| e["reconsume_times"].as_i64().unwrap())
        .collect();
    assert_eq!(retries, [0, 1, 2], "{j}");
    for c in &events[1..4] {
        assert_eq!(c["group"], "billing");
        assert_eq!(c["status"], "failed");
        assert!(c["cost_ms"].is_i64(), "{c}");
    }
    let dead = &events[4];
    assert_eq!(dead["topic"], "%DLQ%billing", "{dead}");
    assert_eq!(dead["group"], "billing");

    // The table: one line per event, and the offset message id finds the same trace.
    let t = node.table(&["msg", "trace", &sent.msg_id]);
    assert_eq!(t.column("EVENT"), kinds);
    assert_eq!(t.column("RECONSUME")[1..4], ["0", "1", "2"]);

    // A message nobody traced: an empty timeline and a note, not an error.
    let out = node.ctl(&["msg", "trace", "0123456789ABCDEF0123456789ABCDEF", "--json"]);
    out.ok(&["msg", "trace"]);
    assert!(out.stderr.contains("no trace record"), "{}", out.stderr);
}

/// Starts a traced producer and a traced consumer that fails every delivery, sends one
/// message and waits for its third delivery; returns the send and the running clients.
async fn send_and_fail(namesrv: &str) -> (SendResult, Producer, PushConsumer) {
    let p = Producer::builder()
        .group("trace-producers")
        .name_server(namesrv)
        .trace(true)
        .start()
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let c = PushConsumer::builder()
        .group("billing")
        .name_server(namesrv)
        .subscribe("Orders", "*")
        .start_position(StartPosition::First)
        .max_reconsume_times(2)
        .rebalance_interval(Duration::from_millis(300))
        .long_poll(Duration::from_secs(2))
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
        .send(Message::new("Orders", "poison").with_key("order-9"))
        .await
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    while calls.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(calls.load(Ordering::SeqCst) >= 3, "three deliveries");
    (sent, p, c)
}

/// `msg trace ID --json` until `done` holds for its events (the key index lags a little).
fn trace_until(node: &Node, id: &str, done: impl Fn(&[Value]) -> bool) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let j = node.json(&["msg", "trace", id]);
        if done(j["trace"].as_array().unwrap()) || Instant::now() >= deadline {
            return j;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `send --trace` writes the send's trace, which `msg trace` reads back; before any trace
/// exists, `msg trace` says what to do instead of "no route for topic"; with topic
/// auto-creation off and no trace topic, `send --trace` fails, naming the fix (issue #36).
#[test]
fn send_trace_is_read_back_and_a_missing_trace_topic_says_what_to_do() {
    let node = Node::start();
    node.json(&["topic", "create", "Traced", "--queues", "1"]);
    let sent = node.json(&["send", "Traced", "hello"]);
    let untraced = sent["sent"]["unique_key"].as_str().unwrap().to_string();
    let args = ["msg", "trace", &untraced];
    let out = node.ctl(&args);
    let line = out.failed_one_line(&args);
    assert!(line.contains("send --trace"), "{line}");
    assert!(line.contains("topic create RMQ_SYS_TRACE_TOPIC"), "{line}");

    let sent = node.json(&["send", "Traced", "traced", "--trace"]);
    let id = sent["sent"]["unique_key"].as_str().unwrap().to_string();
    let j = trace_until(&node, &id, |events| {
        events.iter().any(|e| e["event"] == "send")
    });
    let send = j["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "send")
        .unwrap()
        .clone();
    assert_eq!(send["status"], "success", "{j}");
    assert_eq!(send["topic"], "Traced", "{j}");

    let strict = Node::start_with(&["autoCreateTopicEnable=false"]);
    strict.json(&["topic", "create", "Traced", "--queues", "1"]);
    let args = ["send", "Traced", "x", "--trace"];
    let out = strict.ctl(&args);
    let line = out.failed_one_line(&args);
    assert!(
        line.contains("did not store its trace")
            && line.contains("topic create RMQ_SYS_TRACE_TOPIC"),
        "{line}"
    );
}
