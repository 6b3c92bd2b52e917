//! Name server leases with real processes: a `ringmq broker -c broker.properties` registers
//! with two `ringmq namesrv` processes (short scan interval and expiry for the test), its
//! route appears on both and stays while it re-registers; after `kill -9` both drop it once
//! it has been silent past the expiry; a restarted broker registers again.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::command::route::MASTER_ID;

const EXPIRY_MS: u64 = 1500;
const REGISTER_PERIOD_MS: u64 = 500;

/// Writes broker.properties with `listenPort=0` (any free port, and the HA port too): a port
/// picked free beforehand can be taken by a parallel test before the broker binds it, and its
/// default HA port (`listenPort + 1`) was never checked at all.
fn write_config(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("store");
    let path = dir.join("broker.properties");
    let text = format!(
        "# written by namesrv_expiry.rs\n\
         brokerClusterName=ItCluster\n\
         brokerName=broker-x\n\
         brokerId=0\n\
         listenPort=0\n\
         storePathRootDir={}\n\
         mappedFileSizeCommitLog=8388608\n\
         flushDiskType=ASYNC_FLUSH\n",
        store.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn start_broker(dir: &Path, config: &Path, namesrvs: &[SocketAddr]) -> Node {
    let period = format!("registerNameServerPeriod={REGISTER_PERIOD_MS}");
    Node::broker(dir, config, namesrvs, &["--shards", "1", "--set", &period])
}

fn broker_listed(ns: &mut Client, topic: &str, broker: SocketAddr) -> bool {
    let in_route = ns.route(topic).is_some_and(|r| {
        r.brokers.iter().any(|b| {
            b.broker_name == "broker-x"
                && b.replicas.get(&MASTER_ID).map(|m| m.address.as_str())
                    == Some(&broker.to_string())
        })
    });
    let in_cluster = ns
        .cluster_info()
        .brokers
        .iter()
        .any(|b| b.cluster == "ItCluster" && b.broker_name == "broker-x");
    in_route && in_cluster
}

#[test]
fn name_servers_drop_a_killed_broker_after_expiry() {
    let dir = tempdir("expiry");
    let ns_args = [
        "--scan-interval-ms",
        "200",
        "--broker-expiry-ms",
        &EXPIRY_MS.to_string(),
    ]
    .map(String::from);
    let ns_args: Vec<&str> = ns_args.iter().map(String::as_str).collect();
    let ns_nodes = [
        Node::namesrv(dir.path(), &ns_args),
        Node::namesrv(dir.path(), &ns_args),
    ];
    let ns_addrs: Vec<SocketAddr> = ns_nodes.iter().map(Node::namesrv_addr).collect();
    let config = write_config(dir.path());
    let mut broker = start_broker(dir.path(), &config, &ns_addrs);
    let baddr = broker.broker_addr();
    let topic = "Expiry";
    let cfg = Client::connect(baddr).create_topic_ok(topic, 4);
    assert_eq!(cfg.queue_shards, vec![0, 0, 0, 0]);

    let mut ns: Vec<Client> = ns_addrs.iter().map(|a| Client::connect(*a)).collect();
    for (i, c) in ns.iter_mut().enumerate() {
        let appeared = wait_for(Duration::from_secs(10), || {
            broker_listed(c, topic, baddr).then_some(())
        });
        assert!(
            appeared.is_some(),
            "name server {i}: the broker's route never appeared"
        );
        let route = c.route(topic).unwrap();
        let q = route
            .queues
            .iter()
            .find(|q| q.broker_name == "broker-x")
            .unwrap();
        assert_eq!((q.read_queue_count, q.write_queue_count), (4, 4));
        assert_eq!(q.queue_shards, vec![0, 0, 0, 0]);
        let m = &route.brokers[0].replicas[&MASTER_ID];
        assert_eq!(m.shard_count, 1);
    }

    // Re-registration keeps the broker alive well past one expiry period (time must pass to
    // show it is not dropped: two expiry periods, checked every 250 ms).
    let until = Instant::now() + Duration::from_millis(2 * EXPIRY_MS);
    while Instant::now() < until {
        for (i, c) in ns.iter_mut().enumerate() {
            assert!(
                broker_listed(c, topic, baddr),
                "name server {i} dropped a live broker that registers every {REGISTER_PERIOD_MS} ms"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }

    broker.kill9();
    let killed = Instant::now();
    for (i, c) in ns.iter_mut().enumerate() {
        let gone = wait_for(Duration::from_secs(10), || {
            (!broker_listed(c, topic, baddr) && c.route(topic).is_none()).then_some(())
        });
        assert!(
            gone.is_some(),
            "name server {i} still lists the killed broker after 10 s"
        );
        assert!(
            c.cluster_info().brokers.is_empty(),
            "name server {i}: cluster info still lists a broker"
        );
    }
    let took = killed.elapsed();
    eprintln!("broker dropped {took:?} after kill -9 (expiry {EXPIRY_MS} ms, scan 200 ms)");
    // The last registration was at most one period before the kill.
    assert!(
        took >= Duration::from_millis(EXPIRY_MS - REGISTER_PERIOD_MS - 200),
        "dropped after {took:?}, before the broker could have expired"
    );
    for n in &ns_nodes {
        let log = n.log();
        assert!(
            log.contains("dropped broker ItCluster/broker-x"),
            "{}: no drop line in the log:\n{log}",
            n.name
        );
    }

    // A restarted broker registers again (the topic table was persisted).
    let config = write_config(dir.path());
    let broker = start_broker(dir.path(), &config, &ns_addrs);
    let baddr = broker.broker_addr();
    for (i, c) in ns.iter_mut().enumerate() {
        let back = wait_for(Duration::from_secs(10), || {
            broker_listed(c, topic, baddr).then_some(())
        });
        assert!(
            back.is_some(),
            "name server {i}: the restarted broker did not register"
        );
    }
}

/// `listenPort=0` in broker.properties = any free port (and the HA port too), printed on the
/// ready line, as `--broker-port 0` does for standalone.
#[test]
fn broker_config_accepts_listen_port_zero() {
    let dir = tempdir("port0");
    let ns = Node::namesrv(dir.path(), &[]);
    let config = write_config(dir.path());
    let broker = start_broker(dir.path(), &config, &[ns.namesrv_addr()]);
    assert_ne!(broker.broker_addr().port(), 0);
    Client::connect(broker.broker_addr()).hello(None);
}

/// SIGTERM: the broker flushes, unregisters from every name server and exits 0; both name
/// servers drop it at once although their expiry (120 s) is far away.
#[test]
fn a_stopped_broker_leaves_every_name_server_at_once() {
    let dir = tempdir("unregister");
    let ns_nodes = [
        Node::namesrv(dir.path(), &[]),
        Node::namesrv(dir.path(), &[]),
    ];
    let ns_addrs: Vec<SocketAddr> = ns_nodes.iter().map(Node::namesrv_addr).collect();
    let config = write_config(dir.path());
    let mut broker = start_broker(dir.path(), &config, &ns_addrs);
    let baddr = broker.broker_addr();
    let topic = "Leaving";
    Client::connect(baddr).create_topic_ok(topic, 2);
    let mut ns: Vec<Client> = ns_addrs.iter().map(|a| Client::connect(*a)).collect();
    for c in ns.iter_mut() {
        let listed = wait_for(Duration::from_secs(10), || {
            broker_listed(c, topic, baddr).then_some(())
        });
        assert!(listed.is_some(), "the broker never registered");
    }
    let status = broker.term();
    assert!(status.success(), "SIGTERM exit status {status:?}");
    assert!(
        broker.log().contains("unregistered from name server"),
        "no unregistration in the log:\n{}",
        broker.log()
    );
    for (i, c) in ns.iter_mut().enumerate() {
        assert!(
            !broker_listed(c, topic, baddr),
            "name server {i} still routes to the stopped broker"
        );
    }
}

/// A second SIGTERM while the graceful stop waits (here on a name server that accepts
/// connections and never answers: 1 s per unregistration) ends the process at once with
/// status 1; the data is recovered at the next start.
#[test]
fn a_second_signal_exits_at_once() {
    let dir = tempdir("second-signal");
    let real = Node::namesrv(dir.path(), &[]);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    // Accept and hold connections without a word, so calls to it wait for their timeout.
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = std::sync::Arc::clone(&held);
    std::thread::spawn(move || {
        for c in silent.incoming().flatten() {
            keep.lock().unwrap().push(c);
        }
    });
    let config = write_config(dir.path());
    // The silent one first: the stop waits on it before the real one.
    let mut broker = start_broker(dir.path(), &config, &[silent_addr, real.namesrv_addr()]);
    broker.signal(libc::SIGTERM);
    // The second signal lands while the stop is under way (it logs before it starts; a
    // signal that arrives in between stays pending for the second-signal watcher).
    wait_until(Duration::from_secs(30), "the first SIGTERM's stop", || {
        broker.log().contains("SIGTERM: stopping")
    });
    broker.signal(libc::SIGTERM);
    let status = broker
        .wait(Duration::from_secs(30))
        .expect("no exit within 30 s of two SIGTERMs");
    assert_eq!(
        status.code(),
        Some(1),
        "a second signal should end the stop at once:\n{}",
        broker.log()
    );
    assert!(
        broker.log().contains("again: exiting at once"),
        "{}",
        broker.log()
    );
}
