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
