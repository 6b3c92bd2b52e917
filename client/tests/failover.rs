//! Producers during a failover, against real processes: two broker groups under one name
//! server, one killed with SIGKILL while a producer sends in a loop.
//!
//! - Every send begun after the kill is either stored on the surviving broker or reported
//!   failed; the first one stored comes within seconds (the failure fetches the route at once
//!   and the retry avoids the dead broker), far inside the 30 s route poll; every send
//!   reported stored is read back from the brokers afterwards.
//! - A broker group whose master comes back at another address (what a controller's
//!   election does: the route names a new master for the same broker name) gets its ordered
//!   sends back on the same queue as soon as the name server names the new address.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{free_port, read_all, reader, wait_brokers_registered, Node};
use ringmq_client::{Message, MessageQueue, Producer};

/// The bound on the first stored send after the kill: well under the 30 s route poll, so
/// it cannot be met by the poll.
const FIRST_SUCCESS_MAX: Duration = Duration::from_secs(5);

/// One send of the loop.
#[derive(Debug, Clone)]
struct Sent {
    body: String,
    started: Instant,
    done: Instant,
    /// The broker name it was stored on and the storing broker's port, or the error.
    result: Result<(String, u16), String>,
}

async fn producer(node: &Node, group: &str) -> Producer {
    Producer::builder()
        .group(group)
        .name_server(node.namesrv())
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .start()
        .await
        .unwrap()
}

/// Sends `m-0`, `m-1`, ... through `send` until `go` turns false, recording each.
fn send_loop<F, Fut>(
    send: F,
    go: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Sent>>>,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(String) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ringmq_client::Result<ringmq_client::SendResult>> + Send,
{
    tokio::spawn(async move {
        let mut i = 0;
        while go.load(Ordering::Relaxed) {
            let body = format!("m-{i}");
            i += 1;
            let started = Instant::now();
            let result = send(body.clone())
                .await
                .map(|r| {
                    let (host, _) = ringmq_wire::record::parse_message_id(&r.msg_id).unwrap();
                    (r.queue.broker_name, host.port())
                })
                .map_err(|e| e.to_string());
            let failed = result.is_err();
            log.lock().unwrap().push(Sent {
                body,
                started,
                done: Instant::now(),
                result,
            });
            let pause = if failed { 20 } else { 2 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    })
}

fn acked(log: &Mutex<Vec<Sent>>, since: Option<Instant>) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|s| s.result.is_ok() && since.is_none_or(|t| s.started >= t))
        .count()
}

/// Every body reported stored is in the topic (read from every queue of both brokers).
async fn assert_all_read_back(node: &Node, topic: &str, log: &[Sent]) {
    let want: BTreeSet<&str> = log
        .iter()
        .filter(|s| s.result.is_ok())
        .map(|s| s.body.as_str())
        .collect();
    let c = reader(node, "failover-readers").await;
    let stored: BTreeSet<String> = read_all(&c, topic).await.iter().map(common::body).collect();
    let missing: Vec<&&str> = want.iter().filter(|b| !stored.contains(**b)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} sends reported stored are on no broker, e.g. {:?}",
        missing.len(),
        want.len(),
        &missing[..missing.len().min(10)]
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_reach_the_surviving_broker_within_seconds_of_a_kill() {
    let node = Node::start();
    let mut b = tokio::task::block_in_place(|| Node::start_broker(&node, "broker-b"));
    wait_brokers_registered(&node, 2).await;
    let topic = "FailoverKill";
    node.create_topic(topic, 2).await;
    let p = producer(&node, "failover-producers").await;
    assert_eq!(p.write_queues(topic).await.unwrap().len(), 4);

    let go = Arc::new(AtomicBool::new(true));
    let log: Arc<Mutex<Vec<Sent>>> = Default::default();
    let sender = {
        let p = p.clone();
        send_loop(
            move |body| {
                let p = p.clone();
                async move { p.send(Message::new(topic, body)).await }
            },
            go.clone(),
            log.clone(),
        )
    };
    ringmq_testkit::wait_until_async(Duration::from_secs(20), "100 sends stored", || {
        acked(&log, None) >= 100
    })
    .await;
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|s| s.result.as_ref().is_ok_and(|(b, _)| b == "broker-b")),
        "broker-b took sends before the kill"
    );
    tokio::task::block_in_place(|| b.kill());
    let killed = Instant::now();
    let resumed =
        common::wait_until(Duration::from_secs(20), || acked(&log, Some(killed)) >= 100).await;
    go.store(false, Ordering::Relaxed);
    sender.await.unwrap();
    let log = log.lock().unwrap().clone();
    let after: Vec<&Sent> = log.iter().filter(|s| s.started >= killed).collect();
    let failed: Vec<&Sent> = after
        .iter()
        .copied()
        .filter(|s| s.result.is_err())
        .collect();
    eprintln!(
        "{} sends begun after the kill, {} failed{}",
        after.len(),
        failed.len(),
        failed
            .first()
            .map_or(String::new(), |s| format!(", e.g. {:?}", s.result))
    );
    assert!(
        resumed,
        "100 sends after the kill were not stored within 20 s"
    );
    for s in &after {
        if let Ok((broker, _)) = &s.result {
            assert_eq!(broker, "broker-a", "{} stored on the dead broker", s.body);
        }
    }
    let first = after
        .iter()
        .find(|s| s.result.is_ok())
        .expect("a send after the kill was stored");
    let took = first.done.duration_since(killed);
    eprintln!("first send stored {took:?} after the kill");
    assert!(
        took < FIRST_SUCCESS_MAX,
        "the first send stored after the kill took {took:?}"
    );

    // Bring broker-b back (same ports and data) to read what it acknowledged before it died.
    tokio::task::block_in_place(|| b.restart());
    assert_all_read_back(&node, topic, &log).await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_sends_follow_a_new_master_of_the_same_broker_name() {
    let node = Node::start();
    let mut b = tokio::task::block_in_place(|| Node::start_broker(&node, "broker-b"));
    wait_brokers_registered(&node, 2).await;
    let topic = "FailoverMoved";
    node.create_topic(topic, 2).await;
    let p = producer(&node, "moved-producers").await;
    let mq = MessageQueue::new(topic, "broker-b", 0);
    assert!(p.write_queues(topic).await.unwrap().contains(&mq));
    let old_port = b.broker_port;

    let go = Arc::new(AtomicBool::new(true));
    let log: Arc<Mutex<Vec<Sent>>> = Default::default();
    let sender = {
        let (p, mq) = (p.clone(), mq.clone());
        send_loop(
            move |body| {
                let (p, mq) = (p.clone(), mq.clone());
                async move { p.send_to_queue(Message::new(topic, body), &mq).await }
            },
            go.clone(),
            log.clone(),
        )
    };
    ringmq_testkit::wait_until_async(Duration::from_secs(20), "50 sends stored", || {
        acked(&log, None) >= 50
    })
    .await;
    // The master of broker-b dies and comes back at another address with the same store:
    // the name server replaces the group's master address, as after an election.
    tokio::task::block_in_place(|| {
        b.kill();
        b.broker_port = free_port();
        b.restart();
    });
    let up = Instant::now();
    let resumed = common::wait_until(Duration::from_secs(20), || acked(&log, Some(up)) >= 50).await;
    go.store(false, Ordering::Relaxed);
    sender.await.unwrap();
    let log = log.lock().unwrap().clone();
    assert!(
        resumed,
        "50 sends after the move were not stored within 20 s"
    );
    let first = log
        .iter()
        .find(|s| s.started >= up && s.result.is_ok())
        .expect("a send after the move was stored");
    let took = first.done.duration_since(up);
    eprintln!(
        "first send stored {took:?} after the new master was up (port {old_port} -> {})",
        b.broker_port
    );
    assert!(took < FIRST_SUCCESS_MAX, "took {took:?}");
    for s in log.iter().filter(|s| s.started >= up) {
        if let Ok((broker, port)) = &s.result {
            assert_eq!(broker, "broker-b", "ordered sends stay on their queue");
            assert_eq!(*port, b.broker_port, "stored by the new master");
        }
    }
    assert_all_read_back(&node, topic, &log).await;
    p.shutdown().await;
}
