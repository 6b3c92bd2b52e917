//! Producer against a real `ringmq standalone`: every send mode, message fields, ordered
//! sends, auto-created topics, and the errors a caller sees.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use common::{body, producer, Node};
use ringmq_client::consumer::PullStatus;
use ringmq_client::error::Outcome;
use ringmq_client::wire::code::Status;
use ringmq_client::wire::record;
use ringmq_client::{
    Error, Message, MessageQueue, Producer, PullConsumer, ReceivedMessage, SendStatus,
};

async fn reader(node: &Node) -> PullConsumer {
    common::reader(node, "test-reader").await
}

/// Every message of every queue of `topic`, per queue in offset order.
async fn drain(c: &PullConsumer, topic: &str) -> BTreeMap<MessageQueue, Vec<ReceivedMessage>> {
    let mut out = BTreeMap::new();
    for mq in c.fetch_queues(topic).await.unwrap() {
        let mut offset = 0;
        let mut got = Vec::new();
        loop {
            let r = c.pull(&mq, offset, 32, "*").await.unwrap();
            if r.status != PullStatus::Found {
                break;
            }
            offset = r.next_offset;
            got.extend(r.messages);
        }
        out.insert(mq, got);
    }
    out
}

fn bodies(all: &BTreeMap<MessageQueue, Vec<ReceivedMessage>>) -> BTreeSet<String> {
    all.values().flatten().map(body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_send_mode_and_message_fields() {
    let node = Node::start();
    let topic = "SendModes";
    node.create_topic(topic, 4).await;
    let p = producer(&node).await;
    let mut expected = BTreeSet::new();

    // Sync, with every field a message carries.
    let first = p
        .send(
            Message::new(topic, "sync-0")
                .with_tag("TagA")
                .with_keys(["order-1", "user-9"])
                .with_property("color", "red")
                .with_flag(7),
        )
        .await
        .unwrap();
    expected.insert("sync-0".to_string());
    assert_eq!(first.status, SendStatus::Ok);
    let (host, _) = record::parse_message_id(&first.msg_id).unwrap();
    assert_eq!(host.port(), node.broker_port, "msg id names the store host");

    // Async: many in flight at once on the same connections.
    let mut handles = Vec::new();
    for i in 0..200 {
        let body = format!("async-{i}");
        expected.insert(body.clone());
        handles.push(
            p.send_async(Message::new(topic, body).with_tag("TagB"))
                .await,
        );
    }
    for h in handles {
        assert_eq!(h.await.unwrap().status, SendStatus::Ok);
    }

    // Callback.
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    p.send_with_callback(Message::new(topic, "callback-0"), move |r| {
        let _ = tx.try_send(r);
    })
    .await;
    expected.insert("callback-0".to_string());
    rx.recv().await.unwrap().unwrap();

    // One-way.
    for i in 0..5 {
        let body = format!("oneway-{i}");
        expected.insert(body.clone());
        p.send_oneway(Message::new(topic, body)).await.unwrap();
    }

    // Batch: one queue, consecutive offsets, one id per record.
    let batch: Vec<Message> = (0..10)
        .map(|i| {
            let body = format!("batch-{i}");
            expected.insert(body.clone());
            Message::new(topic, body).with_key(format!("b{i}"))
        })
        .collect();
    let r = p.send_batch(&batch).await.unwrap();
    assert_eq!(r.record_count(), 10);
    let (batch_ids, batch_keys) = (r.msg_ids(), r.unique_keys());
    assert_eq!((batch_ids.len(), batch_keys.len()), (10, 10));
    assert_eq!((&batch_ids[0], &batch_keys[0]), (&r.msg_id, &r.unique_key));
    let distinct = |v: &[String]| v.iter().collect::<HashSet<_>>().len();
    assert_eq!((distinct(&batch_ids), distinct(&batch_keys)), (10, 10));

    // To a chosen queue, and through a selector.
    let queues = p.write_queues(topic).await.unwrap();
    assert_eq!(queues.len(), 4);
    let r = p
        .send_to_queue(Message::new(topic, "queue-3"), &queues[3])
        .await
        .unwrap();
    expected.insert("queue-3".to_string());
    assert_eq!(r.queue, queues[3]);
    let pick_last = |qs: &[MessageQueue], _: &Message| qs.len() - 1;
    let r = p
        .send_with_selector(Message::new(topic, "selected"), &pick_last)
        .await
        .unwrap();
    expected.insert("selected".to_string());
    assert_eq!(r.queue, queues[3]);

    // Everything acknowledged (and the one-way sends) is there, once.
    let c = reader(&node).await;
    let mut all = BTreeMap::new();
    for _ in 0..100 {
        all = drain(&c, topic).await;
        if bodies(&all) == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(bodies(&all), expected);
    let count: usize = all.values().map(Vec::len).sum();
    assert_eq!(count, expected.len(), "no duplicates");

    // Fields survive the trip.
    let m = all
        .values()
        .flatten()
        .find(|m| m.body.as_ref() == b"sync-0")
        .unwrap();
    assert_eq!(m.tag(), Some("TagA"));
    assert_eq!(m.keys(), vec!["order-1", "user-9"]);
    assert_eq!(m.property("color"), Some("red"));
    assert_eq!(
        m.user_properties().collect::<Vec<_>>(),
        vec![("color", "red")]
    );
    assert_eq!(m.flag, 7);
    assert_eq!(m.msg_id, first.msg_id);
    assert_eq!(m.unique_key(), Some(first.unique_key.as_str()));
    assert_eq!(m.queue_offset, first.queue_offset);
    // The batch landed contiguously.
    let q = &all[&r_queue(&all, "batch-0")];
    let at = q
        .iter()
        .position(|m| m.body.as_ref() == b"batch-0")
        .unwrap();
    for i in 0..10 {
        assert_eq!(q[at + i].body, format!("batch-{i}").as_bytes());
        // The ids the producer got back are the records' own.
        assert_eq!(q[at + i].msg_id, batch_ids[i]);
        assert_eq!(q[at + i].unique_key(), Some(batch_keys[i].as_str()));
    }

    // Tag filtering on pull.
    let mq = &m_queue(&all, "sync-0");
    let r = c.pull(mq, 0, 100, "TagA || TagC").await.unwrap();
    assert!(r.messages.iter().all(|m| m.tag() == Some("TagA")));
    assert!(r.messages.iter().any(|m| m.body.as_ref() == b"sync-0"));
    p.shutdown().await;
    c.shutdown().await;
}

fn r_queue(all: &BTreeMap<MessageQueue, Vec<ReceivedMessage>>, body: &str) -> MessageQueue {
    m_queue(all, body)
}

fn m_queue(all: &BTreeMap<MessageQueue, Vec<ReceivedMessage>>, body: &str) -> MessageQueue {
    all.iter()
        .find(|(_, ms)| ms.iter().any(|m| m.body.as_ref() == body.as_bytes()))
        .map(|(q, _)| q.clone())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_send_keeps_per_key_order() {
    let node = Node::start();
    let topic = "Ordered";
    node.create_topic(topic, 4).await;
    let p = producer(&node).await;
    let keys: Vec<String> = (0..6).map(|k| format!("order-{k}")).collect();
    let per_key = 40;
    let mut tasks = Vec::new();
    for key in keys.clone() {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut queues = BTreeSet::new();
            for seq in 0..per_key {
                let r = p
                    .send_ordered(Message::new(topic, format!("{key}:{seq}")), &key)
                    .await
                    .unwrap();
                queues.insert(r.queue);
            }
            assert_eq!(queues.len(), 1, "one key, one queue");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let c = reader(&node).await;
    let all = drain(&c, topic).await;
    let mut seen: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for msgs in all.values() {
        for m in msgs {
            let text = body(m);
            let (key, seq) = text.split_once(':').unwrap();
            assert_eq!(m.property("__SHARDINGKEY"), Some(key));
            seen.entry(key.to_string())
                .or_default()
                .push(seq.parse().unwrap());
        }
    }
    for key in &keys {
        let want: Vec<u32> = (0..per_key).collect();
        assert_eq!(seen[key], want, "{key} in send order");
    }
    p.shutdown().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_is_created_by_the_first_send() {
    let node = Node::start();
    node.create_topic("Other", 1).await; // the broker has registered
    let p = producer(&node).await;
    let r = p.send(Message::new("AutoCreated", "first")).await.unwrap();
    assert_eq!(r.status, SendStatus::Ok);
    // The broker registered the topic: later sends use its route.
    let mut ok = false;
    for _ in 0..100 {
        if let Ok(qs) = p.write_queues("AutoCreated").await {
            ok = !qs.is_empty();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "the auto-created topic got a route");
    p.send(Message::new("AutoCreated", "second")).await.unwrap();
    p.shutdown().await;
}

/// A broker lists a producer as soon as it has sent there, not a heartbeat interval later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_is_listed_by_its_broker_after_its_first_send() {
    let node = Node::start();
    node.create_topic("Listed", 2).await;
    let p = Producer::builder()
        .group("listed-producers")
        .name_server(node.namesrv())
        .heartbeat_interval(Duration::from_secs(3600))
        .start()
        .await
        .unwrap();
    p.send(Message::new("Listed", "one")).await.unwrap();
    let admin = ringmq_client::Admin::connect(&node.namesrv())
        .await
        .unwrap();
    let lists = admin
        .producer_connections("listed-producers")
        .await
        .unwrap();
    let ids: Vec<&String> = lists.iter().flat_map(|(_, ids)| ids).collect();
    assert_eq!(ids.len(), 1, "{lists:?}");
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed() {
    let node = Node::start();
    let p = Producer::builder()
        .group("test-producers")
        .name_server(node.namesrv())
        .message_bytes_max(1024)
        .start()
        .await
        .unwrap();
    let e = p
        .send(Message::new("Errors", vec![0u8; 2048]))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidMessage(_)), "{e}");
    assert_eq!(e.outcome(), Outcome::Rejected);
    // A reserved property name is refused before anything is sent.
    let e = p
        .send(Message::new("Errors", "x").with_property("TAGS", "t"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidMessage(_)), "{e}");
    // The broker's status and remark come through: an illegal topic name.
    node.create_topic("Errors", 1).await;
    let e = p.send(Message::new("bad topic!", "x")).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::MessageIllegal), "{e}");
    assert!(!e.remark().unwrap_or_default().is_empty());
    assert_eq!(e.outcome(), Outcome::Rejected);
    p.shutdown().await;
    let e = p.send(Message::new("Errors", "x")).await.unwrap_err();
    assert!(matches!(e, Error::Shutdown), "{e}");

    // No name server at all: the error says so, quickly.
    let dead = format!("127.0.0.1:{}", common::free_port());
    let p = Producer::builder()
        .group("g")
        .name_server(dead)
        .send_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let e = p.send(Message::new("Errors", "x")).await.unwrap_err();
    assert_eq!(e.outcome(), Outcome::NotStored, "{e}");
    // Not a speed check: the 2 s send timeout is honoured (no hang); 10 s leaves a slow
    // machine 5x room.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
