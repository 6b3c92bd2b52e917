//! SQL92 selectors against a real `ringmq standalone` (issue #15): with
//! `enablePropertyFilter=true` push and pull consumers get exactly the messages whose
//! properties match (missing properties and type mismatches never do); a malformed
//! expression fails at subscribe with its position; a broker without the filter refuses the
//! subscription at start, before any pull.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{distinct, fast_push, producer, reader, start_collecting, wait_until, Node};
use ringmq_client::{Message, MessageSelector, PullStatus, StartPosition};

const TOPIC: &str = "SqlSelect";

/// Sends m0..m39: `n` = i; `kind` = 'special' on multiples of 7; `flag` = 1 on multiples of
/// 5, absent on odd i, and "abc" (not a number) otherwise.
async fn send_messages(node: &Node) {
    let p = producer(node).await;
    for i in 0..40u32 {
        let mut m = Message::new(TOPIC, format!("m{i}")).with_property("n", i.to_string());
        if i % 7 == 0 {
            m = m.with_property("kind", "special");
        }
        if i % 5 == 0 {
            m = m.with_property("flag", "1");
        } else if i % 2 == 0 {
            m = m.with_property("flag", "abc");
        }
        p.send(m).await.unwrap();
    }
}

fn bodies(ids: impl IntoIterator<Item = u32>) -> BTreeSet<String> {
    ids.into_iter().map(|i| format!("m{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_selectors_deliver_exactly_the_matching_messages() {
    let node = Node::start_configured(2, &["enablePropertyFilter=true"]);
    node.create_topic(TOPIC, 4).await;
    send_messages(&node).await;

    // Pull consumer, direct pulls: every queue read to its end with each selector.
    let r = reader(&node, "sql-reader").await;
    let queues = r.fetch_queues(TOPIC).await.unwrap();
    for (expr, want) in [
        (
            "n >= 30 OR kind = 'special'",
            bodies((30..40).chain([0, 7, 14, 21, 28])),
        ),
        ("n BETWEEN 10 AND 12", bodies(10..=12)),
        ("flag = 1", bodies((0..40).step_by(5))),
        ("flag IS NULL AND n < 6", bodies([1, 3])),
        ("NOT (flag = 1) AND n < 10", BTreeSet::new()),
        (
            "kind IN ('special') AND n <> 0",
            bodies([7, 14, 21, 28, 35]),
        ),
    ] {
        let mut got = BTreeSet::new();
        for mq in &queues {
            let mut offset = 0;
            loop {
                let res = r
                    .pull(mq, offset, 32, MessageSelector::sql(expr))
                    .await
                    .unwrap();
                got.extend(res.messages.iter().map(common::body));
                if res.status == PullStatus::NoNewMessage || res.next_offset == offset {
                    break;
                }
                offset = res.next_offset;
            }
        }
        assert_eq!(got, want, "{expr}");
    }

    // Push consumer: the matching messages arrive, and nothing else.
    let want = bodies([1, 3, 5, 7, 9]);
    let (c, seen) = start_collecting(
        fast_push(&node, "sql-push", "sql-push-1")
            .subscribe(
                TOPIC,
                MessageSelector::sql("n < 10 AND flag IS NULL OR n = 5"),
            )
            .start_position(StartPosition::First),
    )
    .await;
    let done = wait_until(Duration::from_secs(20), || distinct(&seen) == want).await;
    assert!(done, "got {:?}", distinct(&seen));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_expressions_fail_at_subscribe_with_the_position() {
    let node = Node::start_configured(2, &["enablePropertyFilter=true"]);
    node.create_topic(TOPIC, 4).await;
    let r = reader(&node, "sql-bad").await;
    let e = r
        .subscribe(TOPIC, MessageSelector::sql("n > 1 AND kind IN (1)"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("at 19: expected a string in the IN list"), "{e}");
    assert!(r.assignment().is_empty(), "nothing subscribed");

    let e = fast_push(&node, "sql-bad-push", "p1")
        .subscribe(TOPIC, MessageSelector::sql("n >"))
        .start(|_msgs: Vec<ringmq_client::ReceivedMessage>, _ctx| async {
            ringmq_client::ConsumeResult::Success
        })
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("at 3: expected a value after '>'"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_without_the_property_filter_refuses_at_start() {
    let node = Node::start();
    node.create_topic(TOPIC, 4).await;
    let e = fast_push(&node, "sql-off", "p1")
        .subscribe(TOPIC, MessageSelector::sql("n > 1"))
        .start(|_msgs: Vec<ringmq_client::ReceivedMessage>, _ctx| async {
            ringmq_client::ConsumeResult::Success
        })
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("PROPERTY_FILTER_DISABLED"), "{e}");
    assert!(e.contains("enablePropertyFilter=false"), "{e}");

    let r = reader(&node, "sql-off-reader").await;
    let e = r
        .subscribe(TOPIC, MessageSelector::sql("n > 1"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("enablePropertyFilter=false"), "{e}");
    // A tag subscription on the same broker is fine.
    r.subscribe(TOPIC, "*").await.unwrap();
}
