//! The transaction producer against a real broker: a committed message is delivered, a
//! rolled-back one never, an Unknown one is decided by the checker when the broker checks
//! back, a producer that dies between half and decision is replaced by another of its
//! group, and a broker killed with -9 with halves pending ends with every committed
//! message stored exactly once and no rolled-back one.
//!
//! The broker checks back fast here (`transactionTimeOut=200`, `transactionCheckInterval=300`
//! ms), so an undecided half is asked about within about a second. "Delivered" is read with
//! a pull consumer over every queue of the topic, from offset 0: what any consumer would
//! get, with each copy counted.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{reader, wait_until, Node};
use ringmq_client::{
    Admin, EndOutcome, HalfMessage, Message, TransactionCheck, TransactionProducer,
    TransactionState,
};

const FAST_CHECKS: [&str; 2] = ["transactionTimeOut=200", "transactionCheckInterval=300"];

/// Bodies stored in `topic` (every queue, from offset 0), with how many copies each has.
async fn stored(node: &Node, topic: &str) -> BTreeMap<String, usize> {
    let c = reader(node, "txn-test-reader").await;
    let mut out = BTreeMap::new();
    for mq in c.fetch_queues(topic).await.unwrap() {
        let mut at = 0;
        loop {
            let r = c.pull(&mq, at, 32, "*").await.unwrap();
            if r.messages.is_empty() {
                break;
            }
            for m in &r.messages {
                *out.entry(common::body(m)).or_default() += 1;
            }
            at = r.next_offset;
        }
    }
    c.shutdown().await;
    out
}

fn broker(node: &Node) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], node.broker_port))
}

/// Undecided halves of `group` on the node's broker (None: the broker did not answer).
async fn pending(node: &Node, group: &str) -> Option<u64> {
    let admin = Admin::connect(&node.namesrv()).await.ok()?;
    let s = admin.transaction_status(broker(node)).await.ok();
    admin.close();
    let s = s?;
    Some(
        s.groups
            .iter()
            .filter(|g| g.producer_group == group)
            .map(|g| g.pending)
            .sum(),
    )
}

/// The broker publishes its transaction counts once per turn of its check loop (every
/// 200 ms with [`FAST_CHECKS`]); a count read sooner than this after a change may predate it.
const STATUS_LAG: Duration = Duration::from_secs(1);

/// Waits (up to `limit`) until the broker says `group` has no undecided half, in a count
/// published after every half sent so far (call it after the last send).
async fn settled(node: &Node, group: &str, limit: Duration) -> bool {
    pending_is(node, group, 0, limit).await
}

/// Waits (up to `limit`) until the broker's count of `group`'s undecided halves, published
/// after this call, is `want`.
async fn pending_is(node: &Node, group: &str, want: u64, limit: Duration) -> bool {
    tokio::time::sleep(STATUS_LAG).await;
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if pending(node, group).await == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A checker that answers by body: `c-*` Commit, `r-*` Rollback, `u-<n>` Commit for even
/// n and Rollback for odd n; it records the transaction ids it was asked about.
fn by_body(asked: Arc<Mutex<Vec<(String, String)>>>) -> impl Fn(TransactionCheck) -> DecideFut {
    move |check: TransactionCheck| {
        let body = String::from_utf8(check.message.body.to_vec()).unwrap();
        asked
            .lock()
            .unwrap()
            .push((check.transaction_id.clone(), body.clone()));
        let state = decide(&body, true);
        Box::pin(async move { state })
    }
}

type DecideFut = std::pin::Pin<Box<dyn std::future::Future<Output = TransactionState> + Send>>;

/// The executor's decision (`checking` false: `u-*` is Unknown) or the checker's.
fn decide(body: &str, checking: bool) -> TransactionState {
    let (kind, n) = body.split_once('-').unwrap();
    match kind {
        "c" => TransactionState::Commit,
        "r" => TransactionState::Rollback,
        _ if !checking => TransactionState::Unknown,
        _ if n.parse::<u64>().unwrap() % 2 == 0 => TransactionState::Commit,
        _ => TransactionState::Rollback,
    }
}

async fn start_producer(
    node: &Node,
    group: &str,
    asked: Arc<Mutex<Vec<(String, String)>>>,
) -> TransactionProducer<()> {
    TransactionProducer::builder()
        .group(group)
        .name_server(node.namesrv())
        .heartbeat_interval(Duration::from_millis(300))
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(300))
        .executor(|half: HalfMessage, ()| async move {
            decide(std::str::from_utf8(&half.message.body).unwrap(), false)
        })
        .checker(by_body(asked))
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_is_delivered_rollback_never_and_unknown_is_decided_by_check_back() {
    let node = Node::start_configured(2, &FAST_CHECKS);
    let topic = "TxnOutcomes";
    node.create_topic(topic, 2).await;
    let group = "txn-outcomes";
    let asked = Arc::new(Mutex::new(Vec::new()));
    let p = start_producer(&node, group, asked.clone()).await;

    let bodies: Vec<String> = (0..4)
        .flat_map(|i| [format!("c-{i}"), format!("r-{i}"), format!("u-{i}")])
        .collect();
    let mut unknown_ids = BTreeMap::new();
    for b in &bodies {
        let r = p
            .send_in_transaction(Message::new(topic, b.clone()), ())
            .await
            .unwrap();
        assert_eq!(r.state, decide(b, false), "{b}");
        assert_eq!(
            r.half.queue.topic, topic,
            "the half's result names the real topic"
        );
        match r.state {
            TransactionState::Unknown => {
                assert!(matches!(r.end, EndOutcome::NotSent), "{b}: {:?}", r.end);
                unknown_ids.insert(r.transaction_id.clone(), b.clone());
            }
            _ => assert!(
                matches!(r.end, EndOutcome::Acknowledged),
                "{b}: {:?}",
                r.end
            ),
        }
    }
    let decided_now = stored(&node, topic).await;
    assert_eq!(
        decided_now.keys().cloned().collect::<BTreeSet<_>>(),
        (0..4).map(|i| format!("c-{i}")).collect(),
        "right after the sends only the executor's commits are delivered"
    );

    assert!(
        settled(&node, group, Duration::from_secs(30)).await,
        "the Unknown halves were not decided by check-back within 30 s (pending {:?}); log:\n{}",
        pending(&node, group).await,
        std::fs::read_to_string(node.log_path()).unwrap_or_default()
    );
    let got = stored(&node, topic).await;
    let want: BTreeMap<String, usize> = bodies
        .iter()
        .filter(|b| decide(b, true) == TransactionState::Commit)
        .map(|b| (b.clone(), 1))
        .collect();
    assert_eq!(got, want, "delivered exactly the committed ones, once each");
    let asked = asked.lock().unwrap().clone();
    let asked_ids: BTreeMap<String, String> = asked.into_iter().collect();
    assert_eq!(
        asked_ids, unknown_ids,
        "the checker was asked about the Unknown ones only, by their transaction id"
    );
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_dead_between_half_and_decision_is_replaced_by_another_of_its_group() {
    // Checks go unanswered until the second producer starts: enough of them (100 x 300 ms)
    // that the half is not moved to the check-max topic meanwhile on a slow machine.
    let node = Node::start_configured(
        2,
        &[FAST_CHECKS[0], FAST_CHECKS[1], "transactionCheckMax=100"],
    );
    let topic = "TxnHandOver";
    node.create_topic(topic, 1).await;
    let group = "txn-hand-over";
    let first_asked = Arc::new(AtomicUsize::new(0));
    let executing = Arc::new(tokio::sync::Notify::new());
    let first: TransactionProducer<()> = {
        let (first_asked, executing) = (first_asked.clone(), executing.clone());
        TransactionProducer::builder()
            .group(group)
            .name_server(node.namesrv())
            .executor(move |_, ()| {
                let executing = executing.clone();
                async move {
                    // The local transaction never ends: the process dies in it.
                    executing.notify_one();
                    std::future::pending::<TransactionState>().await
                }
            })
            .checker(move |_| {
                first_asked.fetch_add(1, Ordering::Relaxed);
                async { TransactionState::Rollback }
            })
            .start()
            .await
            .unwrap()
    };
    let sending = {
        let first = first.clone();
        tokio::spawn(async move {
            first
                .send_in_transaction(Message::new(topic, "handed-over"), ())
                .await
        })
    };
    tokio::time::timeout(Duration::from_secs(10), executing.notified())
        .await
        .expect("the half was not stored within 10 s");
    // The producer dies: its task and its last handle go, its connections close.
    sending.abort();
    assert!(sending.await.unwrap_err().is_cancelled());
    drop(first);
    assert!(pending_is(&node, group, 1, Duration::from_secs(10)).await);

    let asked = Arc::new(Mutex::new(Vec::new()));
    let second: TransactionProducer<()> = TransactionProducer::builder()
        .group(group)
        .name_server(node.namesrv())
        .executor(|_, ()| async { TransactionState::Rollback })
        .checker({
            let asked = asked.clone();
            move |c: TransactionCheck| {
                asked.lock().unwrap().push(c.message.clone());
                async { TransactionState::Commit }
            }
        })
        .start()
        .await
        .unwrap();
    assert!(
        settled(&node, group, Duration::from_secs(30)).await,
        "the half was not decided through the second producer within 30 s; log:\n{}",
        std::fs::read_to_string(node.log_path()).unwrap_or_default()
    );
    let asked = asked.lock().unwrap().clone();
    assert!(!asked.is_empty(), "the second producer was never asked");
    assert_eq!(asked[0].topic, topic, "the check names the real topic");
    assert_eq!(common::body(&asked[0]), "handed-over");
    assert_eq!(
        first_asked.load(Ordering::Relaxed),
        0,
        "the dead producer was asked"
    );
    assert_eq!(
        stored(&node, topic).await,
        BTreeMap::from([("handed-over".to_string(), 1)])
    );
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_kill_with_halves_pending_commits_exactly_once_and_rolls_back_never() {
    let mut node = Node::start_configured(2, &FAST_CHECKS);
    let topic = "TxnKill";
    node.create_topic(topic, 2).await;
    let group = "txn-kill";
    let asked = Arc::new(Mutex::new(Vec::new()));
    let p = start_producer(&node, group, asked.clone()).await;

    // Transactions go on while the broker is killed and restarted: some are decided
    // before, some have halves pending or decisions in flight at the kill, some come after.
    let running = Arc::new(AtomicBool::new(true));
    let stored_halves: Arc<Mutex<Vec<String>>> = Default::default();
    let unsure: Arc<Mutex<Vec<String>>> = Default::default();
    let sender = {
        let (p, running) = (p.clone(), running.clone());
        let (stored_halves, unsure) = (stored_halves.clone(), unsure.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            while running.load(Ordering::Relaxed) {
                let body = match i % 3 {
                    0 => format!("c-{i}"),
                    1 => format!("r-{i}"),
                    _ => format!("u-{i}"),
                };
                i += 1;
                match p
                    .send_in_transaction(Message::new(topic, body.clone()), ())
                    .await
                {
                    Ok(_) => stored_halves.lock().unwrap().push(body),
                    // The half may or may not be stored.
                    Err(_) => {
                        unsure.lock().unwrap().push(body);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        })
    };
    assert!(
        wait_until(Duration::from_secs(20), || stored_halves
            .lock()
            .unwrap()
            .len()
            >= 60)
        .await
    );
    tokio::task::block_in_place(|| {
        node.kill();
        node.restart();
    });
    let at_restart = stored_halves.lock().unwrap().len();
    let resumed = wait_until(Duration::from_secs(30), || {
        stored_halves.lock().unwrap().len() >= at_restart + 30
    })
    .await;
    running.store(false, Ordering::Relaxed);
    sender.await.unwrap();
    assert!(resumed, "transactions did not resume after the restart");
    assert!(
        settled(&node, group, Duration::from_secs(60)).await,
        "halves still undecided 60 s after the restart (pending {:?}); log:\n{}",
        pending(&node, group).await,
        std::fs::read_to_string(node.log_path()).unwrap_or_default()
    );

    let got = stored(&node, topic).await;
    let stored_halves = stored_halves.lock().unwrap().clone();
    let unsure = unsure.lock().unwrap().clone();
    let committed = |b: &&String| decide(b, true) == TransactionState::Commit;
    let must: Vec<&String> = stored_halves.iter().filter(committed).collect();
    let may: BTreeSet<&String> = unsure.iter().filter(committed).collect();
    let missing: Vec<&&String> = must.iter().filter(|b| !got.contains_key(**b)).collect();
    assert!(
        missing.is_empty(),
        "committed, never delivered: {missing:?}"
    );
    let twice: Vec<(&String, &usize)> = got.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let wrong: Vec<&String> = got
        .keys()
        .filter(|b| decide(b, true) != TransactionState::Commit)
        .collect();
    assert!(wrong.is_empty(), "rolled back, yet delivered: {wrong:?}");
    let unexpected: Vec<&String> = got
        .keys()
        .filter(|b| !must.contains(b) && !may.contains(b))
        .collect();
    assert!(
        unexpected.is_empty(),
        "delivered, never sent: {unexpected:?}"
    );
    eprintln!(
        "{} halves stored ({} with an unsure send), {} delivered, {} check-backs answered",
        stored_halves.len(),
        unsure.len(),
        got.len(),
        asked.lock().unwrap().len()
    );
    p.shutdown().await;
}
