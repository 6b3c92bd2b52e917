//! Rebalancing driven by the broker's NOTIFY_CONSUMER_IDS_CHANGED against a real `ringmq
//! standalone`: the members' rebalance timer is set to 10 minutes, so only a notice (or the
//! client's quick retry of an unsettled rebalance) can move queues within the test. A
//! member that joins sees itself in its first rebalance (it heartbeats first); when a member
//! joins, aborts (its connections close, no goodbye) or shuts down, every queue is owned
//! again. The time from the change to every queue owned again is printed; the only bound
//! asserted is a generous "does not hang" one.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{clustering_consumer, fast_push, owned_queues, start_collecting, Node};
use ringmq_client::{MessageQueue, PushConsumer, StartPosition};

/// Far longer than any test: a rebalance within it was set off by a notice.
const TIMER: Duration = Duration::from_secs(600);
/// "Does not hang": the broker and the client take about a second; the machine is shared.
const BOUND: Duration = Duration::from_secs(10);

/// A clustering member whose rebalance timer never fires during the test.
async fn member(node: &Node, group: &str, topic: &str, instance: &str) -> PushConsumer {
    start_collecting(
        fast_push(node, group, instance)
            .rebalance_interval(TIMER)
            .subscribe(topic, "*")
            .start_position(StartPosition::First),
    )
    .await
    .0
}

/// Waits until `members` own every queue of `topic` (`all`), each queue once, split as
/// evenly as the group allocates; returns how long that took from `start` (the change).
async fn until_owned(
    members: &[&PushConsumer],
    topic: &str,
    all: &BTreeSet<MessageQueue>,
    what: &str,
    start: Instant,
) -> Duration {
    let even = all.len() / members.len();
    loop {
        let owned: Vec<BTreeSet<MessageQueue>> =
            members.iter().map(|m| owned_queues(m, topic)).collect();
        let union: BTreeSet<&MessageQueue> = owned.iter().flatten().collect();
        let total: usize = owned.iter().map(BTreeSet::len).sum();
        if total == all.len()
            && union.len() == all.len()
            && owned.iter().all(|o| o.len() == even || o.len() == even + 1)
        {
            let took = start.elapsed();
            println!("{what}: every queue owned again after {took:?}");
            return took;
        }
        assert!(
            start.elapsed() < BOUND,
            "{what}: queues not owned within {BOUND:?}: {owned:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_rebalance_when_the_broker_notifies_them() {
    let node = Node::start();
    let topic = "Notified";
    node.create_topic(topic, 8).await;
    let group = "notified-group";
    let a = member(&node, group, topic, "notified-a").await;
    let all = owned_queues(&a, topic);
    assert_eq!(all.len(), 8, "a lone member owns every queue");

    // B joins: its first rebalance already counts it (heartbeat first), and A gives up half
    // on the broker's notice. Times run from the start of the change (B's start included).
    let t = Instant::now();
    let b = member(&node, group, topic, "notified-b").await;
    assert_eq!(
        owned_queues(&b, topic).len(),
        4,
        "B's first rebalance sees B in the member list"
    );
    until_owned(&[&a, &b], topic, &all, "B joined", t).await;

    // A dies without a goodbye: the broker sees its connections close and tells B.
    let t = Instant::now();
    a.abort();
    until_owned(&[&b], topic, &all, "A aborted", t).await;

    // C joins, then B shuts down cleanly (it unregisters).
    let t = Instant::now();
    let c = member(&node, group, topic, "notified-c").await;
    until_owned(&[&b, &c], topic, &all, "C joined", t).await;
    let t = Instant::now();
    b.shutdown().await;
    until_owned(&[&c], topic, &all, "B shut down", t).await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_consumer_rebalances_on_notice_too() {
    let node = Node::start();
    let topic = "NotifiedPull";
    node.create_topic(topic, 4).await;
    let group = "notified-pull-group";
    let puller = ringmq_client::PullConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .instance_name("notified-puller")
        .rebalance_interval(TIMER)
        .heartbeat_interval(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    puller.subscribe(topic, "*").await.unwrap();
    assert_eq!(puller.assignment().len(), 4);
    let start = Instant::now();
    let (pushed, _) = clustering_consumer(&node, group, topic, "notified-pusher").await;
    while puller.assignment().len() != 2 {
        assert!(
            start.elapsed() < BOUND,
            "the pull consumer kept {:?}",
            puller.assignment()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "pull consumer gave up half its queues {:?} after a member started joining",
        start.elapsed()
    );
    pushed.shutdown().await;
    puller.shutdown().await;
}
