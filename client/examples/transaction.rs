//! Transactional messages: an order is written to a (here: in-memory) database and its
//! "order created" message is delivered if and only if the write committed.
//!
//! ```text
//! ringmq standalone &                      # name server on 127.0.0.1:9876
//! cargo run -p ringmq-client --example transaction -- [NAMESRV] [TOPIC] [COUNT]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`. Orders whose number ends
//! in 4 or 9 fail (rolled back: never delivered); every third order's outcome is not known
//! when the executor returns (Unknown): the broker checks back after `transactionTimeOut`
//! (6 s by default) and the checker answers from the database. The example waits for those
//! check-backs (at most a minute) before it exits.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{Message, TransactionCheck, TransactionProducer, TransactionState};

/// The application's database: order number -> committed.
type Orders = Arc<Mutex<BTreeMap<u64, bool>>>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "ExampleOrders".to_string());
    let count: u64 = args.next().map(|c| c.parse()).transpose()?.unwrap_or(10);

    let db: Orders = Arc::default();
    let checked: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let producer = TransactionProducer::builder()
        .group("example-order-service")
        .name_servers(&namesrv)
        // The local transaction: runs after the half message is stored, gets the order.
        .executor({
            let db = db.clone();
            move |_half, order: u64| {
                let db = db.clone();
                async move {
                    let committed = order % 5 != 4;
                    db.lock()
                        .expect("no holder panics")
                        .insert(order, committed);
                    match (committed, order % 3 == 2) {
                        // E.g. the database's commit answer was lost: ask it again later.
                        (_, true) => TransactionState::Unknown,
                        (true, false) => TransactionState::Commit,
                        (false, false) => TransactionState::Rollback,
                    }
                }
            }
        })
        // The broker asks about a half with no decision: look the order up.
        .checker({
            let (db, checked) = (db.clone(), checked.clone());
            move |check: TransactionCheck| {
                let order: Option<u64> =
                    check.message.property("order").and_then(|o| o.parse().ok());
                let committed =
                    order.and_then(|o| db.lock().expect("no holder panics").get(&o).copied());
                checked
                    .lock()
                    .expect("no holder panics")
                    .insert(check.transaction_id.clone());
                println!(
                    "check-back of order {order:?} from {}: committed {committed:?}",
                    check.broker
                );
                async move {
                    match committed {
                        Some(true) => TransactionState::Commit,
                        Some(false) | None => TransactionState::Rollback,
                    }
                }
            }
        })
        .start()
        .await?;

    let mut unknown = BTreeSet::new();
    for order in 0..count {
        let msg = Message::new(&topic, format!("order {order} created"))
            .with_key(format!("order-{order}"))
            .with_property("order", order.to_string());
        let r = producer.send_in_transaction(msg, order).await?;
        println!(
            "order {order}: half at {} offset {}, executor {:?}, end {:?}",
            r.half.queue, r.half.queue_offset, r.state, r.end
        );
        if r.state == TransactionState::Unknown {
            unknown.insert(r.transaction_id);
        }
    }

    if !unknown.is_empty() {
        println!(
            "waiting for the broker to check back {} transaction(s)...",
            unknown.len()
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline
            && !unknown.is_subset(&checked.lock().expect("no holder panics"))
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Let the last answers reach the broker.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    producer.shutdown().await;
    Ok(())
}
