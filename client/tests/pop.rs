//! POP consumption against a real `ringmq standalone`: simple consumers of one group share a
//! topic's messages whatever its queue count, each message acked once; an unacked message
//! comes back after its invisible time from the pop retry topic with its reconsume count
//! raised, and goes to the dead-letter topic after the group's limit; an ack after the
//! invisible time is refused; a changed invisible time holds; a kill -9 in the middle of
//! consumption redelivers no acked message and forgets no unacked one; POP and queue-based
//! consumers cannot share a group.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{body, producer, reader, send_all, Node};
use ringmq_client::consumer::dlq_topic;
use ringmq_client::wire::code::Status;
use ringmq_client::{PoppedMessage, PullStatus, SimpleConsumer};

/// A "does not hang" bound.
const WAIT: Duration = Duration::from_secs(30);

async fn simple(node: &Node, group: &str, topic: &str) -> SimpleConsumer {
    SimpleConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .subscribe(topic, "*")
        .await_duration(Duration::from_millis(300))
        .start()
        .await
        .unwrap()
}

fn bodies(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Receives until `want` distinct bodies arrived or `limit` passed; every delivery, in order.
async fn receive_all(
    c: &SimpleConsumer,
    invisible: Duration,
    want: usize,
    limit: Duration,
    ack: bool,
) -> Vec<PoppedMessage> {
    let deadline = Instant::now() + limit;
    let mut got: Vec<PoppedMessage> = Vec::new();
    let mut distinct = BTreeSet::new();
    while distinct.len() < want && Instant::now() < deadline {
        for m in c.receive(16, invisible).await.unwrap() {
            if ack {
                c.ack(&m).await.unwrap();
            }
            distinct.insert(body(&m.message));
            got.push(m);
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_a_topic_and_each_message_is_acked_once() {
    let node = Node::start();
    let topic = "pop-share";
    node.create_topic(topic, 3).await;
    let p = producer(&node).await;
    let sent = send_all(&p, topic, bodies(60, "m")).await;
    // More members than queues: the broker hands messages to any of them.
    let members: Vec<SimpleConsumer> = futures_join(&node, "pop-share-group", topic, 4).await;
    let mut tasks = Vec::new();
    for c in members.clone() {
        tasks.push(tokio::spawn(async move {
            let deadline = Instant::now() + WAIT;
            let mut mine = Vec::new();
            let mut idle = 0;
            while Instant::now() < deadline && idle < 3 {
                let got = c.receive(8, Duration::from_secs(30)).await.unwrap();
                if got.is_empty() {
                    idle += 1;
                }
                for m in got {
                    idle = 0;
                    c.ack(&m).await.unwrap();
                    mine.push(body(&m.message));
                }
            }
            mine
        }));
    }
    let mut all = Vec::new();
    let mut busy_members = 0;
    for t in tasks {
        let mine = t.await.unwrap();
        busy_members += usize::from(!mine.is_empty());
        all.extend(mine);
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), sent.len(), "every message delivered");
    assert_eq!(all.len(), sent.len(), "no message delivered twice: {all:?}");
    assert!(
        busy_members >= 2,
        "the work was shared ({busy_members} members got some)"
    );
    // Nothing comes back.
    let again = members[0]
        .receive(8, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(again.is_empty(), "acked messages came back: {again:?}");
}

/// The messages of `%DLQ%<group>`, once there are some (waits up to WAIT).
async fn dead_letters(node: &Node, group: &str) -> Vec<ringmq_client::ReceivedMessage> {
    let r = reader(node, &format!("{group}-dlq-reader")).await;
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(qs) = r.fetch_queues(&dlq_topic(group)).await {
            let res = r.pull(&qs[0], 0, 10, "*").await.unwrap();
            if res.status == PullStatus::Found {
                return res.messages;
            }
        }
        assert!(
            Instant::now() < deadline,
            "nothing reached {}",
            dlq_topic(group)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn futures_join(node: &Node, group: &str, topic: &str, n: usize) -> Vec<SimpleConsumer> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(simple(node, group, topic).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacked_message_comes_back_then_dead_letters_and_a_late_ack_is_refused() {
    let node = Node::start_configured(2, &["maxReconsumeTimes=2"]);
    let topic = "pop-revive";
    let group = "pop-revive-group";
    node.create_topic(topic, 2).await;
    let p = producer(&node).await;
    send_all(&p, topic, vec!["lonely".to_string()]).await;
    let c = simple(&node, group, topic).await;
    let invisible = Duration::from_millis(400);
    let first = receive_all(&c, invisible, 1, WAIT, false).await;
    assert_eq!(first.len(), 1);
    let first = &first[0];
    assert_eq!(first.message.reconsume_times, 0);
    assert_eq!(first.message.topic, topic);

    // Not acked: delivered again from the pop retry topic, its count raised.
    let second = receive_all(&c, invisible, 1, WAIT, false).await;
    assert_eq!(second.len(), 1, "{second:?}");
    let second = &second[0];
    assert_eq!(body(&second.message), "lonely");
    assert_eq!(second.message.reconsume_times, 1);
    assert_eq!(second.message.topic, format!("%RETRY%{group}_{topic}"));
    assert_eq!(second.topic(), topic);
    // The first delivery's handle no longer acks anything.
    let late = c.ack(first).await.unwrap_err();
    assert_eq!(late.status(), Some(Status::InvalidReceiptHandle), "{late}");

    let third = receive_all(&c, invisible, 1, WAIT, false).await;
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].message.reconsume_times, 2);
    // Reconsumed twice (the limit): the next expiry dead-letters it.
    let dead = dead_letters(&node, group).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(body(&dead[0]), "lonely");
    assert_eq!(dead[0].reconsume_times, 3);
    let none = c.receive(4, invisible).await.unwrap();
    assert!(
        none.is_empty(),
        "a dead letter was delivered again: {none:?}"
    );
    // What `ringmq-ctl group progress` shows: three deliveries, two revives, one dead letter.
    let admin = ringmq_client::Admin::connect(&node.namesrv())
        .await
        .unwrap();
    let s = admin.pop_status(group).await.unwrap();
    assert_eq!(
        (s.in_flight, s.popped, s.acked, s.revived, s.dead_lettered),
        (0, 3, 0, 2, 1),
        "{s:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_invisible_time_holds_and_batch_acks_settle_the_rest() {
    let node = Node::start();
    let topic = "pop-change";
    node.create_topic(topic, 1).await;
    let p = producer(&node).await;
    send_all(&p, topic, bodies(5, "c")).await;
    let c = simple(&node, "pop-change-group", topic).await;
    let mut got = receive_all(&c, Duration::from_millis(500), 5, WAIT, false).await;
    assert_eq!(got.len(), 5);
    let old = got[0].clone();
    c.change_invisible_duration(&mut got[0], Duration::from_secs(60))
        .await
        .unwrap();
    assert_ne!(old.receipt_handle, got[0].receipt_handle);
    let e = c.ack(&old).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::InvalidReceiptHandle), "{e}");
    // The other four are acked in one batch; the first stays invisible past its old time.
    let (acked, refused) = c.ack_batch(&got[1..]).await.unwrap();
    assert_eq!((acked, refused), (4, 0));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let none = c.receive(8, Duration::from_secs(30)).await.unwrap();
    assert!(none.is_empty(), "{none:?}");
    c.ack(&got[0]).await.unwrap();
    // Acking twice is fine while the checkpoint lives; a batch of stale handles is refused.
    let (acked, refused) = c.ack_batch(&[old]).await.unwrap();
    assert_eq!((acked, refused), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_consumption_redelivers_no_acked_message_and_loses_none() {
    let mut node = Node::start();
    let topic = "pop-crash";
    let group = "pop-crash-group";
    node.create_topic(topic, 4).await;
    let p = producer(&node).await;
    let sent = send_all(&p, topic, bodies(200, "k")).await;
    p.shutdown().await;
    let c = simple(&node, group, topic).await;
    let invisible = Duration::from_secs(2);
    // Receive about half; ack every other one.
    let got = receive_all(&c, invisible, 100, WAIT, false).await;
    let mut acked = BTreeSet::new();
    for (i, m) in got.iter().enumerate() {
        if i % 2 == 0 {
            c.ack(m).await.unwrap();
            acked.insert(body(&m.message));
        }
    }
    c.shutdown().await;
    node.kill();
    node.restart();
    let c = simple(&node, group, topic).await;
    let expect = sent.len() - acked.len();
    let after = receive_all(&c, invisible, expect, Duration::from_secs(60), true).await;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for m in &after {
        *seen.entry(body(&m.message)).or_default() += 1;
    }
    let back: Vec<&String> = acked.iter().filter(|b| seen.contains_key(*b)).collect();
    assert!(
        back.is_empty(),
        "acked before the kill, delivered again: {back:?}"
    );
    let lost: Vec<&String> = sent
        .iter()
        .filter(|b| !acked.contains(*b) && !seen.contains_key(*b))
        .collect();
    assert!(
        lost.is_empty(),
        "never acked, never delivered after the kill: {lost:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_and_queue_based_consumers_cannot_share_a_group() {
    let node = Node::start();
    let topic = "pop-mix";
    node.create_topic(topic, 1).await;
    let p = producer(&node).await;
    send_all(&p, topic, bodies(2, "x")).await;
    let c = simple(&node, "pop-mix-group", topic).await;
    let got = receive_all(&c, Duration::from_secs(30), 1, WAIT, true).await;
    assert!(!got.is_empty());
    // A pull of the popped queue by the same group is refused.
    let r = reader(&node, "pop-mix-group").await;
    let mq = r.fetch_queues(topic).await.unwrap()[0].clone();
    let e = r.pull(&mq, 0, 10, "*").await.unwrap_err();
    assert!(e.remark().unwrap_or_default().contains("POP"), "{e}");
    // A group with a push consumer cannot pop.
    let push_group = "pop-mix-push";
    let (_push, _seen) =
        common::clustering_consumer(&node, push_group, topic, "pop-mix-push-member").await;
    let popper = simple(&node, push_group, topic).await;
    let deadline = Instant::now() + WAIT;
    let e = loop {
        match popper.receive(1, Duration::from_secs(30)).await {
            Err(e) => break e,
            Ok(_) => {
                assert!(Instant::now() < deadline, "the pop was never refused");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(
        e.remark().unwrap_or_default().contains("queue-based"),
        "{e}"
    );
}

async fn orderly(node: &Node, group: &str, topic: &str) -> SimpleConsumer {
    SimpleConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .subscribe(topic, "*")
        .await_duration(Duration::from_millis(300))
        .orderly(true)
        .start()
        .await
        .unwrap()
}

/// Receives until something arrives (or WAIT passes).
async fn next_batch(c: &SimpleConsumer, max: u32, invisible: Duration) -> Vec<PoppedMessage> {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = c.receive(max, invisible).await.unwrap();
        if !got.is_empty() || Instant::now() >= deadline {
            return got;
        }
    }
}

fn shown(got: &[PoppedMessage]) -> Vec<(String, i32)> {
    got.iter()
        .map(|m| (body(&m.message), m.message.reconsume_times))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_pop_holds_a_queue_and_redelivers_from_the_first_unacked_across_a_kill() {
    let mut node = Node::start_configured(2, &["maxReconsumeTimes=1"]);
    let (group, topic) = ("pop-order-group", "pop-order");
    node.create_topic(topic, 1).await;
    let p = producer(&node).await;
    send_all(&p, topic, bodies(6, "o")).await;
    p.shutdown().await;
    let a = orderly(&node, group, topic).await;
    let b = orderly(&node, group, topic).await;
    let invisible = Duration::from_millis(500);
    let got = next_batch(&a, 3, invisible).await;
    assert_eq!(
        shown(&got),
        [("o-0".into(), 0), ("o-1".into(), 0), ("o-2".into(), 0)]
    );
    // The queue is held: another member gets nothing meanwhile.
    assert!(b.receive(3, invisible).await.unwrap().is_empty());
    // Acks in any order: o-2 before o-1.
    a.ack(&got[2]).await.unwrap();
    a.ack(&got[0]).await.unwrap();
    // o-1 expires: the queue is rewound to it, with o-2 (acked) to pass over; the rewind is
    // in the log, so it holds across a kill.
    tokio::time::sleep(invisible + Duration::from_millis(500)).await;
    a.shutdown().await;
    b.shutdown().await;
    node.kill();
    node.restart();
    let c = orderly(&node, group, topic).await;
    let again = next_batch(&c, 2, invisible).await;
    assert_eq!(shown(&again), [("o-1".into(), 1), ("o-3".into(), 0)]);
    c.ack(&again[1]).await.unwrap();
    // o-1 was delivered twice (the limit is one retry): dead-lettered when it expires again;
    // the queue goes on after o-3 (acked).
    tokio::time::sleep(invisible + Duration::from_millis(300)).await;
    let mut rest = Vec::new();
    let deadline = Instant::now() + WAIT;
    while rest.len() < 2 && Instant::now() < deadline {
        let got = c.receive(8, Duration::from_secs(30)).await.unwrap();
        for m in &got {
            c.ack(m).await.unwrap();
        }
        rest.extend(shown(&got));
    }
    assert_eq!(rest, [("o-4".into(), 0), ("o-5".into(), 0)]);
    // Nothing else comes: o-2 and o-3 were acked.
    assert!(c
        .receive(8, Duration::from_secs(30))
        .await
        .unwrap()
        .is_empty());
    let dead = dead_letters(&node, group).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(body(&dead[0]), "o-1");
    assert_eq!(dead[0].reconsume_times, 2);
}
