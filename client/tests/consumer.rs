//! Consumers against a real `ringmq standalone`: clustering rebalance as members join and
//! leave, broadcasting, resuming from committed offsets, start positions, a broadcasting
//! member's own redelivery of failed batches (clustering members hand them back to the
//! broker: `retry.rs`), and the pull consumer's direct and managed modes, and its commits
//! that ride on pulls.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    body, clustering_consumer, collecting_consumer, covers, distinct, duplicates, fast_push, owned,
    owned_queues, producer, send_all, start_collecting, wait_until, Node,
};
use ringmq_client::{
    ConsumeResult, Message, MessageModel, Producer, PullConsumer, PullStatus, ReceivedMessage,
    StartPosition,
};

const WAIT: Duration = Duration::from_secs(20);

/// A fresh node with `topic` (of `queues` queues), and a producer.
async fn node_and_producer(topic: &str, queues: u32) -> (Node, Producer) {
    let node = Node::start();
    node.create_topic(topic, queues).await;
    let p = producer(&node).await;
    (node, p)
}

/// The offset a broadcasting member (`instance`) of `group` committed to its local file
/// for the only queue it consumed.
fn local_offset(node: &Node, instance: &str, group: &str) -> Option<u64> {
    let file = node
        .dir
        .path()
        .join("offsets")
        .join(instance)
        .join(format!("{group}.offsets"));
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().next()?.rsplit('\t').next()?.parse().ok()
}

/// The distinct strings of `v`.
fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustering_rebalances_when_members_join_and_leave() {
    let topic = "Rebalance";
    let (node, p) = node_and_producer(topic, 8).await;
    let group = "rebalance-group";
    let (a, seen_a) = clustering_consumer(&node, group, topic, "member-a").await;
    assert_eq!(owned(&a, topic), 8, "a lone member owns every queue");

    // A producer sends throughout the joins and leaves.
    let sending = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let acked: Arc<Mutex<Vec<String>>> = Default::default();
    let sender = {
        let (p, sending, acked) = (p.clone(), sending.clone(), acked.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while sending.load(std::sync::atomic::Ordering::Relaxed) {
                let body = format!("m-{i}");
                p.send(Message::new(topic, body.clone())).await.unwrap();
                acked.lock().unwrap().push(body);
                i += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };
    // Messages flow while A is alone, between the joins and after the leave: each phase
    // lasts until 50 more sends were acknowledged.
    let flowing = |what: &'static str| {
        let acked = acked.clone();
        let from = acked.lock().unwrap().len();
        async move {
            ringmq_testkit::wait_until_async(WAIT, what, || {
                acked.lock().unwrap().len() >= from + 50
            })
            .await
        }
    };
    flowing("50 sends while A is alone").await;

    // B joins: the queues split 4/4, disjoint, covering all 8.
    let (b, seen_b) = clustering_consumer(&node, group, topic, "member-b").await;
    let split = wait_until(WAIT, || owned(&a, topic) == 4 && owned(&b, topic) == 4).await;
    assert!(split, "a {:?} b {:?}", a.assignment(), b.assignment());
    let qa = owned_queues(&a, topic);
    let qb = owned_queues(&b, topic);
    assert!(qa.is_disjoint(&qb));
    assert_eq!(qa.union(&qb).count(), 8);
    flowing("50 sends while A and B share the queues").await;

    // A leaves: B takes every queue.
    a.shutdown().await;
    assert!(wait_until(WAIT, || owned(&b, topic) == 8).await);
    flowing("50 sends after A left").await;
    sending.store(false, std::sync::atomic::Ordering::Relaxed);
    sender.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 100, "sent {}", acked.len());

    // Nothing acknowledged is lost; duplicates only from the two handovers.
    let all: common::Seen = Default::default();
    let delivered = wait_until(WAIT, || {
        let mut v = seen_a.lock().unwrap().clone();
        v.extend(seen_b.lock().unwrap().iter().cloned());
        *all.lock().unwrap() = v;
        covers(&all, &acked)
    })
    .await;
    assert!(delivered, "lost messages");
    let dups = duplicates(&all);
    assert!(
        dups * 5 < acked.len(),
        "{dups} duplicates for {} messages",
        acked.len()
    );

    // After the rebalance settles, every message is delivered exactly once.
    let before = seen_b.lock().unwrap().len();
    let fin = send_all(&p, topic, (0..100).map(|i| format!("final-{i}"))).await;
    assert!(wait_until(WAIT, || covers(&seen_b, &fin)).await);
    // Time for a duplicate to show up, if there were one (proving none comes takes time).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after: Vec<String> = seen_b.lock().unwrap()[before..].to_vec();
    assert_eq!(after.len(), fin.len(), "exactly once in steady state");
    b.shutdown().await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_gives_every_member_every_message_and_resumes_from_its_file() {
    let topic = "Broadcast";
    let (node, p) = node_and_producer(topic, 4).await;
    let group = "broadcast-group";
    let member = |name| {
        collecting_consumer(
            &node,
            group,
            topic,
            MessageModel::Broadcasting,
            StartPosition::First,
            name,
        )
    };
    let (a, seen_a) = member("bc-a").await;
    let (b, seen_b) = member("bc-b").await;
    assert_eq!(owned(&a, topic), 4);
    assert_eq!(owned(&b, topic), 4);
    let sent = send_all(&p, topic, (0..60).map(|i| format!("bc-{i}"))).await;
    assert!(wait_until(WAIT, || covers(&seen_a, &sent) && covers(&seen_b, &sent)).await);
    a.shutdown().await;
    let file = node.dir.path().join("offsets/bc-a/broadcast-group.offsets");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");

    // A restarts with the same instance name: it resumes from its file, no redelivery.
    let more = send_all(&p, topic, (0..20).map(|i| format!("bc-more-{i}"))).await;
    let (a2, seen_a2) = member("bc-a").await;
    assert!(wait_until(WAIT, || covers(&seen_a2, &more)).await);
    // Time for a redelivery of an old message to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(distinct(&seen_a2), set(&more), "only the new messages");
    assert!(wait_until(WAIT, || covers(&seen_b, &more)).await);
    a2.shutdown().await;
    b.shutdown().await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resumes_from_the_committed_offset() {
    let topic = "Resume";
    let (node, p) = node_and_producer(topic, 4).await;
    let group = "resume-group";
    let first = send_all(&p, topic, (0..50).map(|i| format!("r1-{i}"))).await;
    let (c, seen) = clustering_consumer(&node, group, topic, "resume-1").await;
    assert!(wait_until(WAIT, || covers(&seen, &first)).await);
    c.shutdown().await;

    let second = send_all(&p, topic, (0..50).map(|i| format!("r2-{i}"))).await;
    let (c2, seen2) = clustering_consumer(&node, group, topic, "resume-2").await;
    assert!(wait_until(WAIT, || covers(&seen2, &second)).await);
    // Time for a redelivery of the first batch to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        distinct(&seen2),
        set(&second),
        "continues where the group left off"
    );
    assert_eq!(seen2.lock().unwrap().len(), second.len());
    c2.shutdown().await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_positions_last_and_timestamp_and_tag_expressions() {
    let topic = "Positions";
    let (node, p) = node_and_producer(topic, 2).await;
    send_all(&p, topic, (0..20).map(|i| format!("old-{i}"))).await;
    // The clock moves on between the old messages, `t` and the mid ones, so their store
    // times fall on either side of `t`.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mid = send_all(&p, topic, (0..20).map(|i| format!("mid-{i}"))).await;

    let (last, seen_last) = collecting_consumer(
        &node,
        "last-group",
        topic,
        MessageModel::Clustering,
        StartPosition::Last,
        "pos-last",
    )
    .await;
    let (ts, seen_ts) = collecting_consumer(
        &node,
        "ts-group",
        topic,
        MessageModel::Clustering,
        StartPosition::Timestamp(t),
        "pos-ts",
    )
    .await;
    // Tagged messages, and a consumer that only wants TagA.
    let (tagged, seen_tag) = start_collecting(
        fast_push(&node, "tag-group", "pos-tag")
            .subscribe(topic, "TagA || TagZ")
            .start_position(StartPosition::Last),
    )
    .await;
    let mut new = Vec::new();
    let mut tag_a = Vec::new();
    for i in 0..20 {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        let body = format!("new-{i}");
        p.send(Message::new(topic, body.clone()).with_tag(tag))
            .await
            .unwrap();
        if tag == "TagA" {
            tag_a.push(body.clone());
        }
        new.push(body);
    }
    assert!(wait_until(WAIT, || covers(&seen_last, &new)).await);
    let mut mid_and_new = mid.clone();
    mid_and_new.extend(new.iter().cloned());
    assert!(wait_until(WAIT, || covers(&seen_ts, &mid_and_new)).await);
    assert!(wait_until(WAIT, || covers(&seen_tag, &tag_a)).await);
    // Time for an unwanted message (older, or another tag) to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(distinct(&seen_last), set(&new));
    assert_eq!(distinct(&seen_ts), set(&mid_and_new));
    assert_eq!(distinct(&seen_tag), set(&tag_a));
    for c in [last, ts, tagged] {
        c.shutdown().await;
    }
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_redelivers_failed_batches_itself_and_holds_the_offset() {
    let topic = "Redeliver";
    let (node, p) = node_and_producer(topic, 1).await;
    // body -> (attempt, reconsume_times) of each delivery
    type Attempts = Arc<Mutex<HashMap<String, Vec<(u32, i32)>>>>;
    let attempts: Attempts = Default::default();
    let sink = attempts.clone();
    let group = "redeliver-group";
    // A broadcasting member has no retry topic: it hands failed batches over again itself.
    let c = fast_push(&node, group, "redeliver-1")
        .subscribe(topic, "*")
        .message_model(MessageModel::Broadcasting)
        .offset_dir(node.dir.path().join("offsets"))
        .start_position(StartPosition::First)
        .consume_batch_max(1)
        .start(
            move |msgs: Vec<ReceivedMessage>, ctx: ringmq_client::ConsumeContext| {
                let sink = sink.clone();
                async move {
                    let m = &msgs[0];
                    let body = body(m);
                    sink.lock()
                        .unwrap()
                        .entry(body.clone())
                        .or_default()
                        .push((ctx.attempt, m.reconsume_times));
                    if body == "poison" && ctx.attempt < 2 {
                        return ConsumeResult::Retry;
                    }
                    if body == "panics" && ctx.attempt == 0 {
                        panic!("listener bug");
                    }
                    ConsumeResult::Success
                }
            },
        )
        .await
        .unwrap();
    let sent = send_all(
        &p,
        topic,
        ["a", "poison", "b", "panics", "c"].map(String::from),
    )
    .await;
    let done = wait_until(WAIT, || {
        let a = attempts.lock().unwrap();
        sent.iter().all(|b| a.contains_key(b))
            && a["poison"].len() == 3
            && a.get("panics").is_some_and(|v| v.len() == 2)
    })
    .await;
    assert!(done, "{:?}", attempts.lock().unwrap());
    assert_eq!(
        attempts.lock().unwrap()["poison"],
        vec![(0, 0), (1, 1), (2, 2)]
    );
    c.shutdown().await;
    // Everything succeeded in the end: the committed offset is past all five.
    assert_eq!(local_offset(&node, "redeliver-1", group), Some(5));
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcasting_member_does_not_commit_past_a_failing_batch() {
    let topic = "Hold";
    let (node, p) = node_and_producer(topic, 1).await;
    let group = "hold-group";
    let tried: common::Seen = Default::default();
    let sink = tried.clone();
    let c = fast_push(&node, group, "hold-1")
        .subscribe(topic, "*")
        .message_model(MessageModel::Broadcasting)
        .offset_dir(node.dir.path().join("offsets"))
        .start_position(StartPosition::First)
        .consume_batch_max(1)
        .start(move |msgs: Vec<ReceivedMessage>, _| {
            let sink = sink.clone();
            async move {
                let b = body(&msgs[0]);
                sink.lock().unwrap().push(b.clone());
                if b == "stuck" {
                    ConsumeResult::Retry
                } else {
                    ConsumeResult::Success
                }
            }
        })
        .await
        .unwrap();
    send_all(
        &p,
        topic,
        ["ok-0", "ok-1", "stuck", "ok-3"].map(String::from),
    )
    .await;
    // Until the offset file holds the messages before stuck and stuck failed a second time
    // (the file is written every commit interval).
    ringmq_testkit::wait_until_async(WAIT, "offset 2 written and two tries of stuck", || {
        let stuck = tried
            .lock()
            .unwrap()
            .iter()
            .filter(|x| *x == "stuck")
            .count();
        stuck >= 2 && local_offset(&node, "hold-1", group) == Some(2)
    })
    .await;
    c.shutdown().await;
    assert_eq!(
        local_offset(&node, "hold-1", group),
        Some(2),
        "the offset stops at the message that never succeeded"
    );
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_consumer_direct_assigned_and_subscribed() {
    let topic = "PullModes";
    let (node, p) = node_and_producer(topic, 4).await;
    let sent = send_all(&p, topic, (0..40).map(|i| format!("p-{i}"))).await;
    let group = "pull-group";
    let new_consumer = |name: &'static str| {
        PullConsumer::builder()
            .group(group)
            .name_server(node.namesrv())
            .instance_name(name)
            .start_position(StartPosition::First)
            .heartbeat_interval(Duration::from_millis(200))
            .rebalance_interval(Duration::from_millis(300))
            .start()
    };

    // Direct: pull one queue from an offset, commit, read the commit back.
    let c = new_consumer("pull-1").await.unwrap();
    let queues = c.fetch_queues(topic).await.unwrap();
    let mq = &queues[0];
    let max = c.max_offset(mq).await.unwrap();
    assert!(max > 0);
    assert_eq!(c.min_offset(mq).await.unwrap(), 0);
    let r = c.pull(mq, 1, 100, "*").await.unwrap();
    assert_eq!(r.messages.len() as u64, max - 1);
    assert_eq!(r.next_offset, max);
    let r = c.pull(mq, max + 100, 10, "*").await.unwrap();
    assert_eq!(r.status, PullStatus::OffsetIllegal);
    assert_eq!(r.next_offset, max, "past the end: continue at the end");
    assert_eq!(c.committed_offset(mq).await.unwrap(), None);
    c.commit(mq, 2).await.unwrap();
    assert_eq!(c.committed_offset(mq).await.unwrap(), Some(2));
    // Long polling: a pull at the end waits for the next message.
    let waiter = {
        let (c, mq) = (c.clone(), mq.clone());
        tokio::spawn(async move {
            c.pull_blocking(&mq, max, 10, "*", Duration::from_secs(5))
                .await
                .unwrap()
        })
    };
    // Lets the pull park at the end first. Not a precondition of the assertions: a pull
    // that had not parked yet just finds the message at once.
    tokio::time::sleep(Duration::from_millis(200)).await;
    p.send_to_queue(Message::new(topic, "late"), mq)
        .await
        .unwrap();
    let r = waiter.await.unwrap();
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.messages[0].body.as_ref(), b"late");

    // Assigned: poll resumes from the committed offset (2) on queue 0, from the start
    // elsewhere; commit_positions stores where poll got to.
    c.assign(queues.clone());
    let mut got = Vec::new();
    let mut expected = set(&sent);
    expected.insert("late".to_string());
    let skipped: Vec<String> = {
        let r = c.pull(mq, 0, 2, "*").await.unwrap();
        r.messages.iter().map(body).collect()
    };
    for s in &skipped {
        expected.remove(s);
    }
    while got.len() < expected.len() {
        let batch = c.poll(Duration::from_secs(2)).await.unwrap();
        assert!(!batch.is_empty(), "poll ran dry at {}", got.len());
        got.extend(batch.iter().map(body));
    }
    assert_eq!(set(&got), expected);
    assert_eq!(got.len(), expected.len());
    assert!(c.poll(Duration::from_millis(100)).await.unwrap().is_empty());
    c.commit_positions().await.unwrap();
    for q in &queues {
        assert_eq!(
            c.committed_offset(q).await.unwrap(),
            Some(c.max_offset(q).await.unwrap())
        );
    }
    c.shutdown().await;

    // Subscribed: two members split the queues.
    let s1 = new_consumer("pull-s1").await.unwrap();
    let s2 = new_consumer("pull-s2").await.unwrap();
    s1.subscribe(topic, "*").await.unwrap();
    s2.subscribe(topic, "*").await.unwrap();
    let split = wait_until(WAIT, || {
        s1.assignment().len() == 2 && s2.assignment().len() == 2
    })
    .await;
    assert!(split, "{:?} / {:?}", s1.assignment(), s2.assignment());
    let a: BTreeSet<_> = s1.assignment().into_iter().collect();
    let b: BTreeSet<_> = s2.assignment().into_iter().collect();
    assert!(a.is_disjoint(&b));
    s2.shutdown().await;
    assert!(wait_until(WAIT, || s1.assignment().len() == 4).await);
    s1.shutdown().await;
    p.shutdown().await;
}

/// A commit made with `commit_on_next_pull` reaches the broker on the queue's next pull and
/// not before (that pull made by `poll_batch`, which reads the messages in place); an explicit commit replaces a pending one (the offset never moves back);
/// shutdown writes what is still pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_rides_on_the_next_pull_and_shutdown_writes_what_is_pending() {
    let topic = "PullCommitRides";
    let (node, p) = node_and_producer(topic, 1).await;
    send_all(&p, topic, (0..30).map(|i| format!("r-{i}"))).await;
    let group = "pull-ride-group";
    let new_consumer = |name: &'static str| {
        PullConsumer::builder()
            .group(group)
            .name_server(node.namesrv())
            .instance_name(name)
            .start_position(StartPosition::First)
            .poll_batch_max(10)
            .start()
    };
    let c = new_consumer("ride-1").await.unwrap();
    let queues = c.fetch_queues(topic).await.unwrap();
    let mq = queues[0].clone();
    c.assign([mq.clone()]);
    assert_eq!(c.poll(WAIT).await.unwrap().len(), 10);
    c.commit_on_next_pull(&mq, 10).unwrap();
    // No request of its own: the broker has nothing yet.
    assert_eq!(c.committed_offset(&mq).await.unwrap(), None);
    // The next poll pulls the queue and carries the commit. (poll_batch: the same
    // messages as poll, read in place.)
    let batch = c.poll_batch(WAIT).await.unwrap();
    let seen: Vec<(u64, Vec<u8>)> = batch
        .iter()
        .map(|m| (m.queue_offset(), m.body().to_vec()))
        .collect();
    let want: Vec<(u64, Vec<u8>)> = (10..20)
        .map(|i| (i, format!("r-{i}").into_bytes()))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(c.committed_offset(&mq).await.unwrap(), Some(10));

    // An explicit commit drops the pending one: a later pull must not carry 15 over 20.
    c.commit_on_next_pull(&mq, 15).unwrap();
    c.commit(&mq, 20).await.unwrap();
    assert_eq!(c.poll(WAIT).await.unwrap().len(), 10);
    assert_eq!(c.committed_offset(&mq).await.unwrap(), Some(20));

    // What no pull carried is written at shutdown; a new member resumes there.
    c.commit_on_next_pull(&mq, 25).unwrap();
    c.shutdown().await;
    let c2 = new_consumer("ride-2").await.unwrap();
    assert_eq!(c2.committed_offset(&mq).await.unwrap(), Some(25));
    c2.assign([mq.clone()]);
    let rest = c2.poll(WAIT).await.unwrap();
    assert_eq!(rest.len(), 5);
    assert_eq!(rest[0].queue_offset, 25);
    c2.shutdown().await;
    p.shutdown().await;
}

/// With `pull_ahead`, each queue's next pull is already answered when the next poll comes:
/// it still returns every message once and in offset order per queue, a seek drops the
/// answer pulled from the old position, commits ride on later pulls and shutdown writes what
/// is pending; and a poll made after the node is gone returns what was pulled ahead before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulling_ahead_keeps_each_queue_in_order_and_is_answered_before_the_poll() {
    let topic = "PullAhead";
    let (mut node, p) = node_and_producer(topic, 3).await;
    let sent = send_all(&p, topic, (0..300).map(|i| format!("a-{i}"))).await;
    let group = "pull-ahead-group";
    let ahead = |group: &'static str, name: &'static str, poll_max: u32| {
        PullConsumer::builder()
            .group(group)
            .name_server(node.namesrv())
            .instance_name(name)
            .start_position(StartPosition::First)
            .poll_batch_max(poll_max)
            .pull_ahead(true)
            .start()
    };
    let c = ahead(group, "ahead-1", 16).await.unwrap();
    let queues = c.fetch_queues(topic).await.unwrap();
    assert_eq!(queues.len(), 3);
    c.assign(queues.clone());

    // Every message once, each queue's offsets in order with no gap.
    let mut got = Vec::new();
    let mut next: HashMap<u32, u64> = HashMap::new();
    while got.len() < sent.len() {
        let batch = c.poll(WAIT).await.unwrap();
        assert!(!batch.is_empty(), "poll ran dry at {}", got.len());
        assert!(batch.len() <= 16, "a poll returned {}", batch.len());
        for m in &batch {
            let want = next.entry(m.queue_id).or_insert(0);
            assert_eq!(m.queue_offset, *want, "queue {}", m.queue_id);
            *want += 1;
            got.push(body(m));
        }
    }
    assert_eq!(got.len(), sent.len());
    assert_eq!(set(&got), set(&sent));

    // A seek back: the queue's next messages start where the seek put it.
    let mq = queues[0].clone();
    c.seek(&mq, 5).unwrap();
    let mut again = Vec::new();
    while again.len() < 3 {
        let batch = c.poll(WAIT).await.unwrap();
        assert!(!batch.is_empty(), "nothing after the seek");
        again.extend(batch.iter().map(|m| (m.queue_id, m.queue_offset)));
    }
    assert_eq!(
        &again[..3],
        &[(mq.queue_id, 5), (mq.queue_id, 6), (mq.queue_id, 7)]
    );

    // Commits ride on later pulls; shutdown writes the one still pending.
    c.seek(&mq, 20).unwrap();
    assert!(!c.poll(WAIT).await.unwrap().is_empty());
    c.commit_on_next_pull(&mq, 30).unwrap();
    c.shutdown().await;
    let probe = common::reader(&node, group).await;
    assert_eq!(probe.committed_offset(&mq).await.unwrap(), Some(30));
    probe.shutdown().await;

    // Pulled ahead: after a poll, the queue's next messages are pulled while the caller
    // works, two answers deep by default; polls after the node is gone still return them.
    let c = ahead("pull-ahead-group-2", "ahead-2", 10).await.unwrap();
    c.assign([mq.clone()]);
    let first = c.poll(WAIT).await.unwrap();
    assert_eq!(first.len(), 10);
    tokio::time::sleep(Duration::from_millis(500)).await;
    node.kill();
    for want in [10..20, 20..30] {
        let got = c.poll(Duration::from_secs(1)).await.unwrap();
        let offsets: Vec<u64> = got.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, want.collect::<Vec<u64>>());
    }
    c.shutdown().await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_queues_of_a_topic_are_taken_after_a_route_refresh() {
    let node = Node::start();
    let topic = "Growing";
    node.create_topic(topic, 2).await;
    let (c, seen) = start_collecting(
        fast_push(&node, "growing-group", "growing-1")
            .route_refresh_interval(Duration::from_millis(200))
            .subscribe(topic, "*")
            .start_position(StartPosition::First),
    )
    .await;
    assert_eq!(owned(&c, topic), 2);
    node.create_topic(topic, 6).await;
    assert!(
        wait_until(WAIT, || owned(&c, topic) == 6).await,
        "{:?}",
        c.assignment()
    );
    let p = producer(&node).await;
    let queues = p.write_queues(topic).await.unwrap();
    assert_eq!(queues.len(), 6);
    let mut sent = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        let body = format!("q{i}");
        p.send_to_queue(Message::new(topic, body.clone()), q)
            .await
            .unwrap();
        sent.push(body);
    }
    assert!(wait_until(WAIT, || covers(&seen, &sent)).await);
    c.shutdown().await;
    p.shutdown().await;
}
