//! Orderly push consumers against a real `ringmq standalone`: each queue is consumed by one
//! listener call at a time, in queue-offset order, by the member holding its broker lock.
//! A failed message suspends its queue and comes again before anything after it; one that
//! keeps failing goes to the dead-letter topic after `max_reconsume_times` retries and the
//! queue goes on. When a lock holder dies (abort: its connections close, nothing is
//! unlocked) its queues are locked and consumed by the survivor at once, not after the
//! broker's 60 s lock expiry; a joining member gets its share once the holder has released
//! it. Throughout, no queue is ever consumed by two members at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{body, fast_push, owned_queues, producer, reader, Node};
use ringmq_client::consumer::dlq_topic;
use ringmq_client::message::RETRY_TOPIC;
use ringmq_client::{
    ConsumeContext, ConsumeResult, Message, MessageQueue, PushConsumer, ReceivedMessage,
    StartPosition,
};

/// "Does not hang": a second is typical; the machine is shared.
const BOUND: Duration = Duration::from_secs(10);
/// Generous bound for everything to be consumed.
const WAIT: Duration = Duration::from_secs(30);

/// One delivery: queue, offset, body, reconsume times, member.
type Delivery = (MessageQueue, u64, String, i32, &'static str);

/// What every member's listener records, shared by the members of a test.
#[derive(Default)]
struct Journal {
    /// (queue, offset, body, reconsume_times, member) of every delivery, in call order.
    deliveries: Mutex<Vec<Delivery>>,
    /// Listener calls running per queue, across members.
    running: Mutex<HashMap<MessageQueue, usize>>,
    /// Calls that started while another call of the same queue was running.
    overlaps: AtomicUsize,
    /// Bodies whose delivery succeeded.
    succeeded: Mutex<Vec<String>>,
}

/// Counts a running call of a queue until dropped (also when an aborted member's call is
/// dropped mid-way).
struct Running<'a> {
    journal: &'a Journal,
    queue: MessageQueue,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut r = self.journal.running.lock().unwrap();
        *r.get_mut(&self.queue).unwrap() -= 1;
    }
}

impl Journal {
    fn enter(&self, queue: &MessageQueue) -> Running<'_> {
        let mut r = self.running.lock().unwrap();
        let n = r.entry(queue.clone()).or_default();
        if *n > 0 {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        *n += 1;
        Running {
            journal: self,
            queue: queue.clone(),
        }
    }

    /// Messages whose first delivery came after the first delivery of a higher offset of
    /// the same queue.
    fn out_of_order(&self) -> Vec<(MessageQueue, u64)> {
        let mut highest: BTreeMap<MessageQueue, u64> = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut bad = Vec::new();
        for (q, off, ..) in self.deliveries.lock().unwrap().iter() {
            if !seen.insert((q.clone(), *off)) {
                continue;
            }
            let h = highest.entry(q.clone()).or_insert(*off);
            if *off < *h {
                bad.push((q.clone(), *off));
            }
            *h = (*h).max(*off);
        }
        bad
    }
}

/// Starts an orderly member whose listener records into `journal` and fails as `fail` says
/// (by body and reconsume count): `Some(true)` = panic, `Some(false)` = Retry.
async fn orderly_member(
    node: &Node,
    group: &str,
    topic: &str,
    name: &'static str,
    journal: Arc<Journal>,
    fail: fn(&str, i32) -> Option<bool>,
    rebalance_interval: Duration,
) -> PushConsumer {
    fast_push(node, group, name)
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .orderly(true)
        .consume_batch_max(1)
        .max_reconsume_times(2)
        .suspend_current_queue(Duration::from_millis(200))
        .rebalance_interval(rebalance_interval)
        .start(move |msgs: Vec<ReceivedMessage>, ctx: ConsumeContext| {
            let journal = journal.clone();
            async move {
                let m = &msgs[0];
                let b = body(m);
                let _running = journal.enter(&ctx.queue);
                journal.deliveries.lock().unwrap().push((
                    ctx.queue.clone(),
                    m.queue_offset,
                    b.clone(),
                    m.reconsume_times,
                    name,
                ));
                // Long enough for an overlapping call to show.
                tokio::time::sleep(Duration::from_millis(2)).await;
                match fail(&b, m.reconsume_times) {
                    Some(true) => panic!("listener bug on {b}"),
                    Some(false) => ConsumeResult::Retry,
                    None => {
                        journal.succeeded.lock().unwrap().push(b);
                        ConsumeResult::Success
                    }
                }
            }
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_suspend_the_queue_and_keep_its_order_and_poison_goes_to_the_dlq() {
    let node = Node::start();
    let topic = "OrderlyFail";
    let group = "orderly-fail-group";
    node.create_topic(topic, 2).await;
    let p = producer(&node).await;
    let keys = ["k0", "k1", "k2", "k3"];
    let mut sent = Vec::new();
    for i in 0..10 {
        for k in keys {
            let b = format!("{k}-{i}");
            p.send_ordered(Message::new(topic, b.clone()), k)
                .await
                .unwrap();
            sent.push(b);
        }
    }
    let journal = Arc::new(Journal::default());
    let fail = |b: &str, reconsumed: i32| match b {
        "k1-3" if reconsumed == 0 => Some(false),
        "k3-7" if reconsumed == 0 => Some(true),
        "k2-5" => Some(false),
        _ => None,
    };
    let c = orderly_member(
        &node,
        group,
        topic,
        "orderly-1",
        journal.clone(),
        fail,
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(owned_queues(&c, topic).len(), 2, "both queues locked");
    let want: Vec<String> = sent.iter().filter(|b| *b != "k2-5").cloned().collect();
    let start = Instant::now();
    loop {
        let done = {
            let s = journal.succeeded.lock().unwrap();
            want.iter().all(|b| s.contains(b))
        };
        if done {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "not all consumed: {:?}",
            journal.succeeded.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The dead letter.
    let r = reader(&node, "orderly-fail-dlq-reader").await;
    let dlq = dlq_topic(group);
    let mut dead = Vec::new();
    while dead.is_empty() && start.elapsed() < WAIT {
        if let Ok(qs) = r.fetch_queues(&dlq).await {
            dead = r.pull(&qs[0], 0, 10, "*").await.unwrap().messages;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.shutdown().await;

    assert_eq!(journal.overlaps.load(Ordering::Relaxed), 0);
    assert_eq!(
        journal.out_of_order(),
        vec![],
        "first deliveries in offset order"
    );
    // Every queue's deliveries: offsets never go back (retries are in place).
    let deliveries = journal.deliveries.lock().unwrap().clone();
    let mut last: HashMap<MessageQueue, u64> = HashMap::new();
    for (q, off, b, ..) in &deliveries {
        let l = last.entry(q.clone()).or_insert(*off);
        assert!(*off >= *l, "{b} at {off} after offset {l} of {q}");
        *l = *off;
    }
    // Each key's successes in send order.
    for k in keys {
        let mine: Vec<String> = journal
            .succeeded
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.starts_with(&format!("{k}-")))
            .cloned()
            .collect();
        let expect: Vec<String> = (0..10)
            .map(|i| format!("{k}-{i}"))
            .filter(|b| b != "k2-5")
            .collect();
        assert_eq!(mine, expect, "{k}");
    }
    let tries = |b: &str| -> Vec<i32> {
        deliveries
            .iter()
            .filter(|d| d.2 == b)
            .map(|d| d.3)
            .collect()
    };
    assert_eq!(
        tries("k1-3"),
        [0, 1],
        "failed once, then succeeded in place"
    );
    assert_eq!(
        tries("k3-7"),
        [0, 1],
        "panicked once, then succeeded in place"
    );
    assert_eq!(
        tries("k2-5"),
        [0, 1, 2],
        "1 + max_reconsume_times deliveries"
    );
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!(body(&dead[0]), "k2-5");
    assert_eq!(dead[0].property(RETRY_TOPIC), Some(topic));

    // Offsets moved past everything, the dead letter included.
    let r2 = reader(&node, group).await;
    for q in r2.fetch_queues(topic).await.unwrap() {
        assert_eq!(
            r2.committed_offset(&q).await.unwrap(),
            Some(r2.max_offset(&q).await.unwrap()),
            "{q}"
        );
    }
    r2.shutdown().await;
    r.shutdown().await;
    p.shutdown().await;
}

/// Waits until `members` own (and hold the locks of) every queue of `topic`, each once;
/// prints the time since `start` (the change).
async fn until_owned(
    members: &[&PushConsumer],
    topic: &str,
    queues: usize,
    what: &str,
    start: Instant,
) {
    loop {
        let owned: Vec<_> = members.iter().map(|m| owned_queues(m, topic)).collect();
        let total: usize = owned.iter().map(|o| o.len()).sum();
        let union: std::collections::BTreeSet<_> = owned.iter().flatten().collect();
        if total == queues && union.len() == queues && owned.iter().all(|o| !o.is_empty()) {
            println!(
                "{what}: every queue locked and owned again after {:?}",
                start.elapsed()
            );
            return;
        }
        assert!(start.elapsed() < BOUND, "{what}: {owned:?} after {BOUND:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the members have consumed 20 more messages: each phase of the churn test
/// consumes some.
async fn consuming(journal: &Journal, phase: &str) {
    let from = journal.succeeded.lock().unwrap().len();
    ringmq_testkit::wait_until_async(WAIT, format!("20 messages consumed ({phase})"), || {
        journal.succeeded.lock().unwrap().len() >= from + 20
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_move_between_members_without_overlap_and_a_dead_holders_locks_free_at_once() {
    let node = Node::start();
    let topic = "OrderlyChurn";
    let group = "orderly-churn-group";
    let queues = 4;
    node.create_topic(topic, queues as u32).await;
    let p = producer(&node).await;
    let journal = Arc::new(Journal::default());
    let never = |_: &str, _: i32| None;
    // Rebalance timers that cannot fire during the test: notices move the queues.
    let timer = Duration::from_secs(600);
    let a = orderly_member(
        &node,
        group,
        topic,
        "churn-a",
        journal.clone(),
        never,
        timer,
    )
    .await;
    assert_eq!(owned_queues(&a, topic).len(), queues);

    let sending = Arc::new(AtomicBool::new(true));
    let acked: Arc<Mutex<Vec<String>>> = Default::default();
    let sender = {
        let (p, sending, acked) = (p.clone(), sending.clone(), acked.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while sending.load(Ordering::Relaxed) {
                let key = format!("key-{}", i % 16);
                let b = format!("{key}/{i}");
                p.send_ordered(Message::new(topic, b.clone()), &key)
                    .await
                    .unwrap();
                acked.lock().unwrap().push(b);
                i += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    consuming(&journal, "A alone").await;

    // B joins: A unlocks half after its notice; B locks them once free.
    let t = Instant::now();
    let b = orderly_member(
        &node,
        group,
        topic,
        "churn-b",
        journal.clone(),
        never,
        timer,
    )
    .await;
    until_owned(&[&a, &b], topic, queues, "B joined", t).await;
    consuming(&journal, "B joined").await;

    // A dies holding its locks: the broker frees them when A's connections close (the
    // lock itself would live 60 s), and tells B.
    let t = Instant::now();
    a.abort();
    until_owned(&[&b], topic, queues, "A aborted", t).await;
    consuming(&journal, "A aborted").await;

    // C joins; then B shuts down cleanly (commits, unlocks, unregisters).
    let t = Instant::now();
    let c = orderly_member(
        &node,
        group,
        topic,
        "churn-c",
        journal.clone(),
        never,
        timer,
    )
    .await;
    until_owned(&[&b, &c], topic, queues, "C joined", t).await;
    consuming(&journal, "C joined").await;
    let t = Instant::now();
    b.shutdown().await;
    until_owned(&[&c], topic, queues, "B shut down", t).await;

    sending.store(false, Ordering::Relaxed);
    sender.await.unwrap();
    let sent = acked.lock().unwrap().clone();
    let start = Instant::now();
    loop {
        let missing: Vec<String> = {
            let s = journal.succeeded.lock().unwrap();
            let s: std::collections::HashSet<&String> = s.iter().collect();
            sent.iter().filter(|b| !s.contains(b)).cloned().collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "{} of {} never consumed, e.g. {:?}",
            missing.len(),
            sent.len(),
            &missing[..missing.len().min(5)]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.shutdown().await;

    assert_eq!(
        journal.overlaps.load(Ordering::Relaxed),
        0,
        "a queue was consumed by two calls at once"
    );
    assert_eq!(
        journal.out_of_order(),
        vec![],
        "first deliveries in offset order"
    );
    // Per key, first successes in send order.
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    let mut first = std::collections::HashSet::new();
    for b in journal.succeeded.lock().unwrap().iter() {
        if first.insert(b.clone()) {
            let (k, i) = b.split_once('/').unwrap();
            per_key
                .entry(k.to_string())
                .or_default()
                .push(i.parse().unwrap());
        }
    }
    for (k, v) in per_key {
        assert!(v.windows(2).all(|w| w[0] < w[1]), "{k}: {v:?}");
    }
    let members: std::collections::BTreeSet<&str> = journal
        .deliveries
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.4)
        .collect();
    println!(
        "{} messages, {} deliveries by {members:?}",
        sent.len(),
        journal.deliveries.lock().unwrap().len()
    );
    p.shutdown().await;
}
