//! 2m-2s-sync with real processes: a SYNC_MASTER and its slave (two shards each, a name
//! server). `kill -9` of the master under load loses no acknowledged message (every OK is on
//! the slave, same body); the restarted master rejoins and the pair converges to
//! byte-identical CommitLogs. Committed consumer offsets reach the slave.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn sync_master_kill9_loses_no_acknowledged_message() {
    let r = master_kill9_scenario("sync", "SYNC_MASTER", 2);
    assert!(
        r.lost.is_empty(),
        "SYNC_MASTER: {} of {} acknowledged messages are not on the slave after kill -9 of the master: {:?}",
        r.lost.len(),
        r.acked,
        &r.lost[..r.lost.len().min(20)]
    );
    assert!(r.identical_bytes > 0);
}

/// The slave copies its master's committed consumer offsets every 5 s, so a consumer that
/// moves to the slave (master down) continues where its group was.
#[test]
fn committed_offsets_reach_the_slave() {
    const QUEUES: u32 = 4;
    let topic = "HaOffsets";
    let group = "ha-offsets-group";
    let dir = tempdir("ha-offsets");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "SYNC_MASTER", 2);
    let mut master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.unwrap()));
    let slave = HaBroker::slave(&dir.path().join("slave"), 2, Some(ha)).start(nsa);
    let (maddr, saddr) = (master.broker_addr(), slave.broker_addr());
    let mut mc = Client::connect(maddr);
    mc.create_topic_ok(topic, QUEUES);
    assert!(wait_slaves_connected(maddr, 2, Duration::from_secs(10)));
    assert!(wait_topic_on(saddr, topic, Duration::from_secs(10)));
    for q in 0..QUEUES {
        for i in 0..10 {
            mc.send_ok(&Msg::new(topic, q, format!("q{q} m{i}")));
        }
    }
    let mut sc = Client::connect(saddr);
    assert_eq!(sc.query_offset(group, topic, 0), None);
    let committed_at = Instant::now();
    for q in 0..QUEUES {
        mc.commit_offset(group, topic, q, u64::from(q) + 3);
    }
    let want: Vec<Option<u64>> = (0..QUEUES).map(|q| Some(u64::from(q) + 3)).collect();
    let seen = wait_for(Duration::from_secs(15), || {
        let got: Vec<Option<u64>> = (0..QUEUES)
            .map(|q| sc.query_offset(group, topic, q))
            .collect();
        (got == want).then_some(())
    });
    let took = committed_at.elapsed();
    assert!(
        seen.is_some(),
        "committed offsets {want:?} did not reach the slave within 15 s (the slave copies them every 5 s)"
    );
    eprintln!("committed offsets reached the slave after {took:?}");

    // The master dies; a consumer moving to the slave resumes from the committed offsets.
    master.kill9();
    for q in 0..QUEUES {
        let at = sc.query_offset(group, topic, q).unwrap();
        assert_eq!(at, u64::from(q) + 3);
        let body = sc.pull_all(topic, q, at, 1);
        let recs = decode_records(&body);
        assert_eq!(recs[0].queue_offset, at);
        assert_eq!(recs[0].body, format!("q{q} m{at}").as_bytes());
    }
}
