//! RocketMQ 5's Python SDK (PyPI `rocketmq-python-client` 5.1.2, unchanged) against a ringmq
//! cluster: one `ringmq namesrv` and two `ringmq broker` processes (broker-a, broker-b), each
//! with its gRPC edge (`grpcServerPort=0`), all on loopback with ports of their own choosing.
//!
//! `python_sdk_against_two_brokers` runs `grpc/grpc_cluster.py`: QueryRoute through each
//! edge names the queues of both brokers with that edge's address as every broker's
//! endpoint; the Producer sends through broker-a's edge (normal, FIFO in 2 message groups,
//! one committed and one rolled-back half), SimpleConsumers receive through broker-b's edge:
//! every message, each FIFO group in send order (its consumer group orderly on both
//! brokers), only the committed half. Then ringmq's side, with the native admin client:
//! the normal messages are stored on both brokers (every one once, under the SDK's message
//! id), each FIFO group on one broker's queue; each consumer group's POP counts summed over
//! both brokers: all acked, none in flight.
//!
//! Build the server first: `cargo build -p ringmq-node --bin ringmq`.

#[path = "grpc/harness.rs"]
mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ringmq_client::wire::properties::keys;
use ringmq_client::{Admin, MessageQueue};

const SCRIPT_LIMIT: Duration = Duration::from_secs(170);
const QUEUES: u32 = 4;
const N: usize = 40;
const NORMAL: &str = "ClusterNormal";
const FIFO: &str = "ClusterFifo";
const TXN: &str = "ClusterTxn";

#[test]
fn python_sdk_against_two_brokers() {
    let dir = ringmq_testkit::tempdir("grpc-cluster");
    let (ns, namesrv) = harness::namesrv(dir.path());
    let (a, _, grpc_a) = harness::broker(dir.path(), "GrpcCluster", "broker-a", namesrv);
    let (b, _, grpc_b) = harness::broker(dir.path(), "GrpcCluster", "broker-b", namesrv);
    let rt = harness::runtime();
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    // Both brokers registered before the topics are made on every master.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let masters = rt.block_on(admin.brokers()).map(|v| v.len()).unwrap_or(0);
        if masters == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the name server knows {masters} brokers"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for topic in [NORMAL, FIFO, TXN] {
        rt.block_on(admin.create_topic(topic, QUEUES, Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
        let route = rt
            .block_on(admin.topic_route(topic))
            .unwrap_or_else(|e| panic!("route of {topic}: {e}"));
        let brokers: BTreeSet<&str> = route
            .read_queues
            .iter()
            .map(|q| q.broker_name.as_str())
            .collect();
        assert_eq!(brokers.len(), 2, "{topic} is on both brokers");
    }
    let changed = rt
        .block_on(admin.set_group_settings("grpc-cluster-fifo", 16, true))
        .expect("making the FIFO group orderly");
    assert_eq!(changed.len(), 2, "brokers that took the orderly flag");

    let out = harness::script(
        dir.path(),
        "grpc_cluster.py",
        &[
            grpc_a.to_string(),
            grpc_b.to_string(),
            NORMAL.into(),
            FIFO.into(),
            TXN.into(),
            N.to_string(),
        ],
        SCRIPT_LIMIT,
        &[&ns, &a, &b],
    );
    assert!(out.contains("ok: done"));

    // The sends as the script reports them: kind -> (message id -> body).
    let mut sent: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    for line in out.lines() {
        if let ["sent", kind, id, body] = line.split_whitespace().collect::<Vec<_>>()[..] {
            sent.entry(kind).or_default().insert(id, body);
        }
    }
    assert_eq!(sent.get("normal").map(BTreeMap::len), Some(N));
    assert_eq!(sent.get("fifo").map(BTreeMap::len), Some(N));

    // What each broker stored.
    let normal = rt.block_on(stored(&admin, NORMAL));
    let per_broker: BTreeMap<&str, usize> = normal.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.broker.as_str()).or_default() += 1;
        m
    });
    println!("normal messages stored per broker: {per_broker:?}");
    assert_eq!(normal.len(), N, "normal messages stored");
    assert_eq!(per_broker.len(), 2, "normal messages on both brokers");
    let ids: BTreeSet<&str> = normal.iter().map(|s| s.id.as_str()).collect();
    let want: BTreeSet<&str> = sent["normal"].keys().copied().collect();
    assert_eq!(
        ids, want,
        "normal messages stored under the SDK's message ids"
    );

    let fifo = rt.block_on(stored(&admin, FIFO));
    assert_eq!(fifo.len(), N, "FIFO messages stored");
    let mut queues_of: BTreeMap<&str, BTreeSet<(&str, u32)>> = BTreeMap::new();
    for s in &fifo {
        let g = s.group.as_deref().expect("a FIFO message has its group");
        queues_of
            .entry(g)
            .or_default()
            .insert((s.broker.as_str(), s.queue_id));
    }
    for (g, qs) in &queues_of {
        assert_eq!(qs.len(), 1, "message group {g} sits in one queue: {qs:?}");
    }

    let txn = rt.block_on(stored(&admin, TXN));
    let bodies: Vec<&str> = txn.iter().map(|s| s.body.as_str()).collect();
    assert_eq!(
        bodies,
        vec!["commit"],
        "transaction topic holds the committed half"
    );

    for (group, n) in [
        ("grpc-cluster-normal", N as u64),
        ("grpc-cluster-fifo", N as u64),
        ("grpc-cluster-txn", 1),
    ] {
        let pop = rt
            .block_on(admin.pop_status(group))
            .unwrap_or_else(|e| panic!("POP status of {group}: {e}"));
        assert_eq!(
            (pop.acked, pop.in_flight),
            (n, 0),
            "POP counts (acked, in flight) of {group} over both brokers"
        );
    }
}

struct Stored {
    broker: String,
    queue_id: u32,
    id: String,
    body: String,
    group: Option<String>,
}

/// Every message of `topic` on both brokers, read with the native admin pull.
async fn stored(admin: &Admin, topic: &str) -> Vec<Stored> {
    let mut out = Vec::new();
    for broker in ["broker-a", "broker-b"] {
        for q in 0..QUEUES {
            let mq = MessageQueue::new(topic, broker, q);
            for m in admin
                .read_messages(&mq, 0, 1000)
                .await
                .unwrap_or_else(|e| panic!("reading {mq}: {e}"))
            {
                out.push(Stored {
                    broker: broker.to_string(),
                    queue_id: q,
                    id: m.property(keys::UNIQ_KEY).unwrap_or("").to_string(),
                    body: String::from_utf8_lossy(&m.body).into_owned(),
                    group: m.property(keys::SHARDING_KEY).map(str::to_string),
                });
            }
        }
    }
    out
}
