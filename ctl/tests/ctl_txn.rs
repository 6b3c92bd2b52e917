//! `ringmq-ctl txn status` against a real standalone node with a live transaction producer
//! whose local transactions stay unknown: the halves show as pending for their producer
//! group (JSON and table), then, after `transactionCheckMax` check-backs answered Unknown,
//! as moved to the check-max topic with the checks counted.
//!
//! The broker here checks a half 5 s after it was stored, every 200 ms, twice; waits poll
//! until a deadline and assert no speed.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::Node;
use ringmq_client::{Message, TransactionProducer, TransactionState};
use serde_json::Value;

const GROUP: &str = "ctl-txn-producers";
/// How long a change may take to show in the status on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(30);

#[test]
fn pending_halves_then_moved_after_the_last_check() {
    let node = Node::start_with(&[
        "transactionTimeOut=5000",
        "transactionCheckInterval=200",
        "transactionCheckMax=2",
    ]);
    node.json(&["topic", "create", "TxnOrders", "--queues", "2"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let producer = rt.block_on(async {
        let p: TransactionProducer<()> = TransactionProducer::builder()
            .group(GROUP)
            .name_servers(&node.namesrv)
            .executor(|_, ()| async { TransactionState::Unknown })
            .checker(|_| async { TransactionState::Unknown })
            .start()
            .await
            .unwrap();
        for i in 0..2 {
            let r = p
                .send_in_transaction(Message::new("TxnOrders", format!("order {i}")), ())
                .await
                .unwrap();
            assert_eq!(r.state, TransactionState::Unknown);
        }
        p
    });

    let j = status_until(&node, |j| group_row(j).is_some_and(|g| g["pending"] == 2));
    let g = group_row(&j).unwrap();
    assert!(g["oldest_age_ms"].as_i64().unwrap() >= 0, "{j}");
    assert!(g["oldest_stored_ms"].as_i64().unwrap() > 0, "{j}");
    let b = &j["brokers"][0];
    assert_eq!(b["timeout_ms"], 5000, "{j}");
    assert_eq!(b["check_interval_ms"], 200, "{j}");
    assert_eq!(b["check_max"], 2, "{j}");
    assert_eq!(b["checking"], true, "{j}");
    assert_eq!(b["moved_to_check_max"], 0, "{j}");

    let t = node.table(&["txn", "status"]);
    t.assert_header(&[
        "BROKER",
        "ADDRESS",
        "PRODUCER_GROUP",
        "PENDING[msg]",
        "OLDEST_STORED[UTC]",
        "OLDEST_AGE[ms]",
    ]);
    assert_eq!(t.column("PRODUCER_GROUP"), vec![GROUP.to_string()]);
    assert_eq!(t.column("PENDING[msg]"), vec!["2".to_string()]);

    // Two checks each, answered Unknown: then both go to the check-max topic.
    let j = status_until(&node, |j| j["brokers"][0]["moved_to_check_max"] == 2);
    assert!(group_row(&j).is_none(), "still pending: {j}");
    let b = &j["brokers"][0];
    assert_eq!(b["pending"], 0, "{j}");
    assert!(b["checks_sent"].as_u64().unwrap() >= 4, "{j}");
    rt.block_on(producer.shutdown());
}

/// The `groups` row of [`GROUP`], if any.
fn group_row(j: &Value) -> Option<&Value> {
    j["groups"]
        .as_array()?
        .iter()
        .find(|g| g["producer_group"] == GROUP)
}

/// `txn status --json` once `cond` holds (fails the test after [`DEADLINE`]).
fn status_until(node: &Node, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let j = node.json(&["txn", "status"]);
        if cond(&j) {
            return j;
        }
        assert!(
            Instant::now() < deadline,
            "not reached within {DEADLINE:?}: {j}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
