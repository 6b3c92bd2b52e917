//! The broker restarts (SIGTERM, then start again on the same ports and data) while a
//! producer sends and a push consumer consumes: both reconnect on their own, and every
//! message the producer saw acknowledged is consumed.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{clustering_consumer, covers, wait_until, Node};
use ringmq_client::{Message, Producer};
use ringmq_testkit::wait_until_async;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_reconnect_and_nothing_acknowledged_is_lost() {
    let mut node = Node::start();
    let topic = "Restart";
    node.create_topic(topic, 4).await;
    let p = Producer::builder()
        .group("restart-producers")
        .name_server(node.namesrv())
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .send_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let (c, seen) = clustering_consumer(&node, "restart-group", topic, "restart-consumer").await;

    let sending = Arc::new(AtomicBool::new(true));
    let restarted = Arc::new(AtomicBool::new(false));
    let acked_after_restart = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let acked: Arc<Mutex<Vec<String>>> = Default::default();
    let sender = {
        let (p, sending, acked) = (p.clone(), sending.clone(), acked.clone());
        let (restarted, after, failures) = (
            restarted.clone(),
            acked_after_restart.clone(),
            failures.clone(),
        );
        tokio::spawn(async move {
            let mut i = 0;
            while sending.load(Ordering::Relaxed) {
                let body = format!("m-{i}");
                i += 1;
                match p.send(Message::new(topic, body.clone())).await {
                    Ok(_) => {
                        acked.lock().unwrap().push(body);
                        if restarted.load(Ordering::Relaxed) {
                            after.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Not acknowledged: it may or may not be stored; not counted.
                    Err(_) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    wait_until_async(
        Duration::from_secs(30),
        "50 sends before the restart",
        || acked.lock().unwrap().len() >= 50,
    )
    .await;
    let before = acked.lock().unwrap().len();
    // The node's stop/start blocks (waits for the process); keep the runtime's other
    // worker running the clients meanwhile.
    tokio::task::block_in_place(|| node.restart());
    restarted.store(true, Ordering::Relaxed);
    let resumed = wait_until(Duration::from_secs(20), || {
        acked_after_restart.load(Ordering::Relaxed) >= 50
    })
    .await;
    sending.store(false, Ordering::Relaxed);
    sender.await.unwrap();
    assert!(
        resumed,
        "the producer did not resume after the restart ({} failures); log:\n{}",
        failures.load(Ordering::Relaxed),
        std::fs::read_to_string(node.log_path()).unwrap_or_default()
    );
    let acked = acked.lock().unwrap().clone();
    eprintln!(
        "acknowledged {} ({before} before the restart, {} after), {} failed sends",
        acked.len(),
        acked_after_restart.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed)
    );
    let delivered = wait_until(Duration::from_secs(30), || covers(&seen, &acked)).await;
    if !delivered {
        let missing = common::missing(&seen, &acked);
        panic!(
            "{} of {} acknowledged messages never consumed, e.g. {:?}",
            missing.len(),
            acked.len(),
            &missing[..missing.len().min(20)]
        );
    }
    c.shutdown().await;
    p.shutdown().await;
}

/// A broker killed with SIGKILL and started again knows no client. Consumers (push and
/// pull) and a producer whose heartbeat interval is a minute announce themselves as soon as
/// their connections come back, not at their next heartbeat: the restarted broker lists the
/// group's members and the producer group within seconds. Fails if a reconnection does not
/// heartbeat (the lists would stay empty for a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_broker_hears_from_every_client_as_it_reconnects() {
    let mut node = Node::start();
    let topic = "Rejoin";
    node.create_topic(topic, 4).await;
    let minute = Duration::from_secs(60);
    let (push, _seen) = common::start_collecting(
        common::fast_push(&node, "rejoin-group", "rejoin-push")
            .subscribe(topic, "*")
            .offset_dir(node.dir.path().join("offsets"))
            .heartbeat_interval(minute)
            .rebalance_interval(minute),
    )
    .await;
    let pull = ringmq_client::PullConsumer::builder()
        .group("rejoin-group")
        .name_server(node.namesrv())
        .instance_name("rejoin-pull")
        .heartbeat_interval(minute)
        .rebalance_interval(minute)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .start()
        .await
        .unwrap();
    pull.subscribe(topic, "*").await.unwrap();
    let p = Producer::builder()
        .group("rejoin-producers")
        .name_server(node.namesrv())
        .heartbeat_interval(minute)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .start()
        .await
        .unwrap();
    p.send(Message::new(topic, "before")).await.unwrap();
    let admin = ringmq_client::Admin::connect(&node.namesrv())
        .await
        .unwrap();
    let master = || async {
        let brokers = admin.brokers().await.unwrap_or_default();
        brokers
            .iter()
            .filter(|b| b.is_master())
            .map(|b| b.addr)
            .collect::<Vec<_>>()
    };
    let members = || async {
        let m = master().await;
        admin
            .group_members("rejoin-group", &m)
            .await
            .unwrap_or_default()
    };
    let producers = || async {
        admin
            .producer_connections("rejoin-producers")
            .await
            .map(|l| l.iter().map(|(_, ids)| ids.len()).sum::<usize>())
            .unwrap_or(0)
    };
    let mut listed = false;
    for _ in 0..100 {
        if members().await.len() == 2 && producers().await == 1 {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        listed,
        "the broker did not list both members and the producer at start"
    );
    // The pull consumer reads its queues, as one in use does (its connections are open).
    for _ in 0..3 {
        pull.poll(Duration::from_millis(200)).await.unwrap();
    }

    tokio::task::block_in_place(|| {
        node.kill();
        node.restart();
    });
    // The consumers' pulls reconnect on their own; the producer's next send does.
    let p2 = p.clone();
    let sender = tokio::spawn(async move {
        for _ in 0..100 {
            if p2.send(Message::new(topic, "after")).await.is_ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    });
    let _ = pull.poll(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let mut seen = (0, 0);
    while started.elapsed() < Duration::from_secs(20) {
        let _ = pull.poll(Duration::from_millis(100)).await;
        seen = (members().await.len(), producers().await);
        if seen == (2, 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        sender.await.unwrap(),
        "the producer did not send after the restart"
    );
    assert_eq!(
        seen,
        (2, 1),
        "after the restart the broker listed {} of 2 members and {} of 1 producers within \
         20 s (heartbeats every minute); log:\n{}",
        seen.0,
        seen.1,
        std::fs::read_to_string(node.log_path()).unwrap_or_default()
    );
    eprintln!("listed again {:?} after the restart", started.elapsed());
    push.shutdown().await;
    pull.shutdown().await;
    p.shutdown().await;
}

/// After a broker restart the members of a group heartbeat one by one as they reconnect.
/// The first one back must not take the queues of a member the broker has not heard from
/// yet (it would read them again from the group's committed offset, which the restart may
/// have set back): for `REJOIN_GRACE` after a reconnection a member list missing members
/// is not acted on. Fails if member A, back alone for 1.5 s with rebalances every 300 ms,
/// takes B's queues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_member_back_after_a_restart_keeps_to_its_own_queues() {
    let mut node = Node::start();
    let topic = "Rejoin2";
    node.create_topic(topic, 4).await;
    // A rebalances every 300 ms; B only when told (its timers would reconnect it).
    let member = |name: &'static str, rebalance: Duration| {
        let ns = node.namesrv();
        async move {
            let c = ringmq_client::PullConsumer::builder()
                .group("rejoin2-group")
                .name_server(ns)
                .instance_name(name)
                .heartbeat_interval(Duration::from_secs(60))
                .rebalance_interval(rebalance)
                .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
                .start()
                .await
                .unwrap();
            c.subscribe(topic, "*").await.unwrap();
            c
        }
    };
    let a = member("rejoin2-a", Duration::from_millis(300)).await;
    let b = member("rejoin2-b", Duration::from_secs(60)).await;
    let split = wait_until(Duration::from_secs(15), || {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    assert!(split, "the queues were not split 2 / 2 before the restart");
    for c in [&a, &b] {
        c.poll(Duration::from_millis(100)).await.unwrap();
    }

    tokio::task::block_in_place(|| {
        node.kill();
        node.restart();
    });
    // A's poll reconnects (and heartbeats); B stays away for 1.5 s.
    let started = std::time::Instant::now();
    let mut most = 0;
    while started.elapsed() < Duration::from_millis(1500) {
        let _ = a.poll(Duration::from_millis(50)).await;
        most = most.max(a.assignment().len());
    }
    assert_eq!(
        most, 2,
        "member A took {most} queues while the restarted broker had not heard from B"
    );
    let _ = b.poll(Duration::from_millis(100)).await;
    let resplit = wait_until(Duration::from_secs(15), || {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    assert!(resplit, "the queues were not split 2 / 2 after B came back");
    a.shutdown().await;
    b.shutdown().await;
}
