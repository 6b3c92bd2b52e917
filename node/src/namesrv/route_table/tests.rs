//! Route table tests: registration and routes, re-registration, several brokers per topic,
//! leases at their exact boundary, unregister, topic deletion, slaves, and refusals that
//! leave the table unchanged. Every test ends with `check_invariants`.

use ringmq_wire::command::route::{BrokerRole, DataVersion, TopicConfig, MASTER_ID};

use super::*;

const EXPIRY_MS: u64 = 120_000;

fn version(n: u64) -> DataVersion {
    DataVersion {
        state_version: n,
        timestamp_ms: 0,
        counter: n,
    }
}

fn reg(name: &str, id: u64, port: u16, topics: &[(&str, u32)], v: u64) -> BrokerRegistration {
    BrokerRegistration {
        cluster: "DefaultCluster".into(),
        broker_name: name.into(),
        broker_id: id,
        address: format!("10.0.0.1:{port}"),
        ha_address: format!("10.0.0.1:{}", port + 1),
        role: if id == MASTER_ID {
            BrokerRole::SyncMaster
        } else {
            BrokerRole::Slave
        },
        shard_count: 2,
        version: "0.1.0".into(),
        heartbeat_timeout_ms: 0,
        data_version: version(v),
        topics: topics
            .iter()
            .map(|&(t, queues)| TopicConfig::new(t, queues, 2))
            .collect(),
        shard_addresses: Vec::new(),
    }
}

fn topics(table: &RouteTable) -> Vec<String> {
    table.topic_list().topics
}

#[test]
fn register_then_route() {
    let mut t = RouteTable::new();
    let out = t
        .register(
            &reg("broker-a", 0, 10911, &[("orders", 4), ("audit", 1)], 1),
            1_000,
        )
        .unwrap();
    assert!(out.new_broker);
    assert!(!out.topics_unchanged);
    assert_eq!(out.topics_added, vec!["orders", "audit"]);
    assert_eq!(
        out.master_address, None,
        "a master is not told about itself"
    );

    let route = t.route_by_topic("orders").unwrap();
    assert_eq!(route.topic, "orders");
    assert_eq!(route.brokers.len(), 1);
    assert_eq!(route.brokers[0].cluster, "DefaultCluster");
    assert_eq!(route.brokers[0].address(MASTER_ID), Some("10.0.0.1:10911"));
    assert_eq!(route.brokers[0].master().unwrap().shard_count, 2);
    assert_eq!(route.queues.len(), 1);
    let q = &route.queues[0];
    assert_eq!(q.broker_name, "broker-a");
    assert_eq!((q.read_queue_count, q.write_queue_count), (4, 4));
    assert_eq!(q.queue_shards, vec![0, 1, 0, 1]);
    assert_eq!(q.perm, perm::READ_WRITE);

    assert_eq!(t.route_by_topic("missing"), None);
    assert_eq!(topics(&t), vec!["audit", "orders"]);
    assert_eq!(
        t.cluster_info().clusters().get("DefaultCluster"),
        Some(&vec!["broker-a"])
    );
    assert_eq!((t.broker_count(), t.topic_count()), (1, 2));
    assert_eq!(t.data_version("broker-a", 0), Some(version(1)));
    t.check_invariants();
}

#[test]
fn reregister_same_version_only_refreshes_the_lease() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 0)
        .unwrap();
    t.delete_topic("orders", None);
    // Same DataVersion: routes untouched (the deleted topic does not come back)...
    let out = t
        .register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 30_000)
        .unwrap();
    assert!(!out.new_broker);
    assert!(out.topics_unchanged);
    assert!(out.topics_added.is_empty());
    assert_eq!(t.route_by_topic("orders"), None);
    // ...but the lease is refreshed.
    assert!(t.expire(30_000 + EXPIRY_MS, EXPIRY_MS).is_empty());
    t.check_invariants();
}

#[test]
fn reregister_new_version_adds_updates_and_removes() {
    let mut t = RouteTable::new();
    t.register(
        &reg(
            "broker-a",
            0,
            10911,
            &[("orders", 4), ("old", 1), ("same", 2)],
            1,
        ),
        0,
    )
    .unwrap();
    let out = t
        .register(
            &reg(
                "broker-a",
                0,
                10911,
                &[("orders", 8), ("same", 2), ("new", 1)],
                2,
            ),
            1,
        )
        .unwrap();
    assert_eq!(out.topics_added, vec!["new"]);
    assert_eq!(out.topics_updated, vec!["orders"]);
    assert_eq!(out.topics_removed, vec!["old"]);
    assert_eq!(
        t.route_by_topic("orders").unwrap().queues[0].write_queue_count,
        8
    );
    assert_eq!(t.route_by_topic("old"), None);
    assert_eq!(topics(&t), vec!["new", "orders", "same"]);
    t.check_invariants();
}

#[test]
fn two_brokers_same_topic() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-b", 0, 20911, &[("orders", 2)], 1), 0)
        .unwrap();
    t.register(
        &reg("broker-a", 0, 10911, &[("orders", 4), ("only-a", 1)], 1),
        0,
    )
    .unwrap();
    let route = t.route_by_topic("orders").unwrap();
    let names: Vec<_> = route
        .brokers
        .iter()
        .map(|b| b.broker_name.as_str())
        .collect();
    assert_eq!(names, vec!["broker-a", "broker-b"]);
    let queues: Vec<_> = route
        .queues
        .iter()
        .map(|q| (q.broker_name.as_str(), q.write_queue_count))
        .collect();
    assert_eq!(queues, vec![("broker-a", 4), ("broker-b", 2)]);
    assert_eq!(t.route_by_topic("only-a").unwrap().brokers.len(), 1);

    // broker-a goes silent; broker-b keeps "orders" alive.
    t.heartbeat("broker-b", 0, 100_000);
    let dropped = t.expire(EXPIRY_MS + 1, EXPIRY_MS);
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].key.broker_name, "broker-a");
    assert_eq!(dropped[0].topics_removed, vec!["only-a"]);
    let route = t.route_by_topic("orders").unwrap();
    assert_eq!(route.brokers.len(), 1);
    assert_eq!(route.queues[0].broker_name, "broker-b");
    t.check_invariants();
}

#[test]
fn expiry_exactly_at_the_boundary() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 5_000)
        .unwrap();
    // Silent for exactly the lease: still alive (RocketMQ: last + timeout < now).
    assert!(t.expire(5_000 + EXPIRY_MS, EXPIRY_MS).is_empty());
    assert!(t.route_by_topic("orders").is_some());
    // One millisecond more: dropped, with its routes.
    let dropped = t.expire(5_000 + EXPIRY_MS + 1, EXPIRY_MS);
    assert_eq!(
        dropped,
        vec![DroppedBroker {
            key: BrokerKey {
                cluster: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_id: 0,
            },
            address: "10.0.0.1:10911".into(),
            last_heartbeat_ms: 5_000,
            topics_removed: vec!["orders".into()],
        }]
    );
    assert_eq!(t.route_by_topic("orders"), None);
    assert_eq!((t.broker_count(), t.topic_count()), (0, 0));
    assert!(t.cluster_info().brokers.is_empty());
    // A clock that steps back never expires anyone.
    t.register(&reg("broker-a", 0, 10911, &[], 1), 10_000)
        .unwrap();
    assert!(t.expire(0, EXPIRY_MS).is_empty());
    t.check_invariants();
}

#[test]
fn a_broker_may_ask_for_a_shorter_lease_not_a_longer_one() {
    let mut t = RouteTable::new();
    let mut short = reg("broker-a", 0, 10911, &[], 1);
    short.heartbeat_timeout_ms = 5_000;
    let mut long = reg("broker-b", 0, 20911, &[], 1);
    long.heartbeat_timeout_ms = 600_000;
    t.register(&short, 0).unwrap();
    t.register(&long, 0).unwrap();
    assert!(t.expire(5_000, EXPIRY_MS).is_empty());
    let dropped = t.expire(5_001, EXPIRY_MS);
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].key.broker_name, "broker-a");
    let dropped = t.expire(EXPIRY_MS + 1, EXPIRY_MS);
    assert_eq!(dropped[0].key.broker_name, "broker-b");
    t.check_invariants();
}

#[test]
fn heartbeat_extends_the_lease() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 0, 10911, &[("orders", 1)], 1), 0)
        .unwrap();
    assert!(t.heartbeat("broker-a", 0, 100_000));
    assert!(!t.heartbeat("broker-a", 1, 100_000), "unknown replica");
    assert!(!t.heartbeat("nobody", 0, 100_000));
    assert!(t.expire(EXPIRY_MS + 1, EXPIRY_MS).is_empty());
    assert_eq!(t.expire(100_000 + EXPIRY_MS + 1, EXPIRY_MS).len(), 1);
    t.check_invariants();
}

#[test]
fn slaves_appear_in_addresses_and_learn_their_master() {
    let mut t = RouteTable::new();
    // A slave registering before its master gets no master address, and its topics are
    // not routes.
    let out = t
        .register(&reg("broker-a", 1, 10921, &[("orders", 4)], 1), 0)
        .unwrap();
    assert_eq!((out.master_address, out.master_ha_address), (None, None));
    assert!(out.topics_unchanged);
    assert_eq!(t.route_by_topic("orders"), None);

    t.register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 0)
        .unwrap();
    let out = t
        .register(&reg("broker-a", 1, 10921, &[("orders", 4)], 1), 1)
        .unwrap();
    assert_eq!(out.master_address.as_deref(), Some("10.0.0.1:10911"));
    assert_eq!(out.master_ha_address.as_deref(), Some("10.0.0.1:10912"));
    t.register(&reg("broker-a", 2, 10931, &[], 1), 1).unwrap();

    let route = t.route_by_topic("orders").unwrap();
    let b = &route.brokers[0];
    assert_eq!(b.address(0), Some("10.0.0.1:10911"));
    assert_eq!(b.address(1), Some("10.0.0.1:10921"));
    assert_eq!(b.address(2), Some("10.0.0.1:10931"));
    assert_eq!(b.replicas[&1].role, BrokerRole::Slave);
    assert_eq!(t.broker_count(), 3);
    t.check_invariants();
}

#[test]
fn master_gone_slave_keeps_the_route_readable() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 0)
        .unwrap();
    t.register(&reg("broker-a", 1, 10921, &[], 1), 0).unwrap();
    t.heartbeat("broker-a", 1, 60_000);
    let dropped = t.expire(EXPIRY_MS + 1, EXPIRY_MS);
    assert_eq!(dropped.len(), 1);
    assert!(dropped[0].topics_removed.is_empty());
    let route = t.route_by_topic("orders").unwrap();
    assert_eq!(route.brokers[0].master(), None);
    assert_eq!(route.brokers[0].address(1), Some("10.0.0.1:10921"));
    t.check_invariants();
}

#[test]
fn unregister() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 0)
        .unwrap();
    t.register(&reg("broker-a", 1, 10921, &[], 1), 0).unwrap();
    // Wrong address (an old instance), wrong cluster, unknown id: nothing happens.
    assert_eq!(
        t.unregister("DefaultCluster", "broker-a", 0, "10.0.0.9:10911"),
        None
    );
    assert_eq!(t.unregister("Other", "broker-a", 0, "10.0.0.1:10911"), None);
    assert_eq!(
        t.unregister("DefaultCluster", "broker-a", 7, "10.0.0.1:10911"),
        None
    );
    assert_eq!(t.broker_count(), 2);

    let gone = t
        .unregister("DefaultCluster", "broker-a", 0, "10.0.0.1:10911")
        .unwrap();
    assert_eq!(gone.key.broker_id, 0);
    assert!(
        gone.topics_removed.is_empty(),
        "the slave still serves reads"
    );
    assert!(t.route_by_topic("orders").is_some());

    let gone = t
        .unregister("DefaultCluster", "broker-a", 1, "10.0.0.1:10921")
        .unwrap();
    assert_eq!(gone.topics_removed, vec!["orders"]);
    assert_eq!(t.route_by_topic("orders"), None);
    assert!(t.cluster_info().brokers.is_empty());
    t.check_invariants();
}

#[test]
fn delete_topic_everywhere_or_in_one_cluster() {
    let mut t = RouteTable::new();
    t.register(
        &reg("broker-a", 0, 10911, &[("orders", 4), ("audit", 1)], 1),
        0,
    )
    .unwrap();
    let mut other = reg("broker-x", 0, 30911, &[("orders", 2)], 1);
    other.cluster = "OtherCluster".into();
    t.register(&other, 0).unwrap();

    assert_eq!(t.topics_by_cluster("OtherCluster").topics, vec!["orders"]);
    assert_eq!(
        t.topics_by_cluster("DefaultCluster").topics,
        vec!["audit", "orders"]
    );

    assert!(t.delete_topic("orders", Some("OtherCluster")));
    let route = t.route_by_topic("orders").unwrap();
    assert_eq!(route.queues.len(), 1);
    assert_eq!(route.queues[0].broker_name, "broker-a");
    assert!(
        !t.delete_topic("orders", Some("OtherCluster")),
        "already gone there"
    );

    assert!(t.delete_topic("orders", None));
    assert_eq!(t.route_by_topic("orders"), None);
    assert!(!t.delete_topic("orders", None));
    assert!(!t.delete_topic("never-existed", None));
    assert_eq!(topics(&t), vec!["audit"]);
    // The master brings it back with its next new DataVersion.
    let out = t
        .register(
            &reg("broker-a", 0, 10911, &[("orders", 4), ("audit", 1)], 2),
            1,
        )
        .unwrap();
    assert_eq!(out.topics_added, vec!["orders"]);
    t.check_invariants();
}

#[test]
fn promoted_slave_replaces_its_old_id_and_cluster_moves() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 1, 10921, &[], 1), 0).unwrap();
    // The same process (same address) comes back as the master.
    let out = t
        .register(&reg("broker-a", 0, 10921, &[("orders", 1)], 1), 1)
        .unwrap();
    assert_eq!(out.replaced_ids, vec![1]);
    assert!(out.new_broker);
    assert_eq!(t.broker_count(), 1);
    assert_eq!(
        t.route_by_topic("orders").unwrap().brokers[0].address(1),
        None
    );

    let mut moved = reg("broker-a", 0, 10911, &[("orders", 1)], 1);
    moved.cluster = "NewCluster".into();
    let out = t.register(&moved, 2).unwrap();
    assert_eq!(out.cluster_changed_from.as_deref(), Some("DefaultCluster"));
    assert!(out.address_changed);
    assert_eq!(
        t.route_by_topic("orders").unwrap().brokers[0].cluster,
        "NewCluster"
    );
    t.check_invariants();
}

#[test]
fn write_permission_wipe_and_restore() {
    let mut t = RouteTable::new();
    t.register(
        &reg("broker-a", 0, 10911, &[("orders", 4), ("audit", 1)], 1),
        0,
    )
    .unwrap();
    assert_eq!(t.wipe_write_perm("broker-a"), 2);
    assert_eq!(t.wipe_write_perm("broker-a"), 0);
    assert_eq!(
        t.route_by_topic("orders").unwrap().queues[0].perm,
        perm::READ
    );
    assert_eq!(t.add_write_perm("broker-a"), 2);
    assert_eq!(
        t.route_by_topic("orders").unwrap().queues[0].perm,
        perm::READ_WRITE
    );
    assert_eq!(t.wipe_write_perm("nobody"), 0);
    t.check_invariants();
}

#[test]
fn refused_registrations_leave_the_table_unchanged() {
    let mut t = RouteTable::new();
    t.register(&reg("broker-a", 0, 10911, &[("orders", 4)], 1), 0)
        .unwrap();
    let before = (t.broker_count(), t.topic_list(), t.cluster_info());

    let mut cases: Vec<(BrokerRegistration, &str)> = Vec::new();
    let mut r = reg("broker-b", 0, 20911, &[], 1);
    r.role = BrokerRole::Slave;
    cases.push((r, "role SLAVE needs a broker id > 0"));
    let mut r = reg("broker-b", 1, 20911, &[], 1);
    r.role = BrokerRole::AsyncMaster;
    cases.push((r, "role ASYNC_MASTER needs broker id 0"));
    let mut r = reg("broker-b", 0, 20911, &[], 1);
    r.shard_count = 0;
    cases.push((r, "shard count 0 outside 1..="));
    let mut r = reg("broker-b", 0, 20911, &[], 1);
    r.broker_name = String::new();
    cases.push((r, "broker name: empty"));
    let mut r = reg("broker-b", 0, 20911, &[], 1);
    r.cluster = "a b".into();
    cases.push((r, "cluster: ' ' is not allowed"));
    cases.push((
        reg("broker-b", 0, 20911, &[("new", 1), ("a/b", 1)], 1),
        "topic \"a/b\": topic name has '/'",
    ));
    cases.push((
        reg("broker-b", 0, 20911, &[("new", 1), ("new", 1)], 1),
        "topic \"new\" is listed twice",
    ));
    cases.push((
        reg("broker-b", 0, 20911, &[("huge", 1025)], 1),
        "topic \"huge\" has 1025 queues, over the maximum of 1024",
    ));
    let mut r = reg("broker-b", 0, 20911, &[("new", 2)], 1);
    r.topics[0].queue_shards = vec![0, 5];
    cases.push((r, "topic \"new\": invalid queue_shards"));
    // A new version of broker-a that is invalid must not remove "orders" either.
    cases.push((reg("broker-a", 0, 10911, &[("x y", 1)], 2), "topic \"x y\""));

    for (r, expected) in cases {
        let err = t.register(&r, 1).unwrap_err().to_string();
        assert!(err.contains(expected), "{err:?} lacks {expected:?}");
        assert_eq!((t.broker_count(), t.topic_list(), t.cluster_info()), before);
    }
    t.check_invariants();
}

#[test]
fn system_topics_register_like_any_other() {
    let mut t = RouteTable::new();
    t.register(
        &reg(
            "broker-a",
            0,
            10911,
            &[("TBW102", 8), ("%RETRY%group", 1)],
            1,
        ),
        0,
    )
    .unwrap();
    assert!(t.route_by_topic("TBW102").is_some());
    assert!(t.route_by_topic("%RETRY%group").is_some());
}

#[test]
fn broker_capacity_is_bounded() {
    let mut t = RouteTable::new();
    for i in 0..limits::NAMESRV_BROKERS_MAX {
        t.register(&reg(&format!("b{i}"), 0, 10911, &[], 1), 0)
            .unwrap();
    }
    let err = t
        .register(&reg("one-more", 0, 10911, &[], 1), 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            NamesrvError::Full {
                what: "brokers",
                ..
            }
        ),
        "{err}"
    );
    // Refreshing an existing one is still fine.
    t.register(&reg("b0", 0, 10911, &[], 1), 1).unwrap();
    t.check_invariants();
}
