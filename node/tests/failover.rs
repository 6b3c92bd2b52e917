//! Automatic failover with real processes: three controllers (name servers with
//! `enableControllerInNamesrv=true`) and one broker set of three brokers in controller mode
//! (SYNC_MASTER, `allAckInSyncStateSet=true`). The controllers elect a master, the slaves
//! join its SyncStateSet once caught up; the master is killed with SIGKILL; a slave of the
//! SyncStateSet becomes master in a new epoch and takes sends; every send acknowledged before
//! the kill is on it; the old master restarts, rejoins as a slave of the new epoch and its log
//! becomes the new master's again.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::{ReplicaSet, TopicConfigTable};

const SET: &str = "broker-f";
const TOPIC: &str = "Failover";

fn broker(home: &Path, id: u64, ctl: &Controllers) -> HaBroker {
    let mut b = HaBroker::master(home, "SYNC_MASTER", 1);
    b.broker_name = SET.to_string();
    b.broker_id = id;
    b.extra = vec![
        "enableControllerMode=true".into(),
        format!("controllerAddr={}", ctl.addr_list()),
        "allAckInSyncStateSet=true".into(),
        "haSendHeartbeatInterval=200".into(),
    ];
    b
}

/// Waits until the set has a master and a SyncStateSet of `size`; returns it.
fn wait_set(ctl: &Controllers, within: Duration, ok: impl Fn(&ReplicaSet) -> bool) -> ReplicaSet {
    let deadline = Instant::now() + within;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(s) = ctl.replica_set(SET) {
            if ok(&s) {
                return s;
            }
            last = Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the set did not reach the state within {within:?}; last: {last:#?}");
}

fn has_topic(addr: SocketAddr) -> bool {
    let Ok(mut c) = Client::try_connect(addr) else {
        return false;
    };
    let r = c.call(RequestCode::GetAllTopicConfig, &Empty, &[]);
    r.status() == Status::Success
        && TopicConfigTable::decode(&r.body)
            .is_ok_and(|t| t.topics.iter().any(|c| c.topic == TOPIC))
}

#[test]
fn a_killed_master_is_replaced_by_an_in_sync_slave_and_rejoins_as_its_slave() {
    let dir = tempdir("failover");
    let ctl = Controllers::start(dir.path(), 3);
    ctl.agreed_leader(None, Duration::from_secs(20));
    let ns = ctl.addrs()[0];
    let homes: Vec<_> = (1..=3u64)
        .map(|id| dir.path().join(format!("b{id}")))
        .collect();
    let cfgs: Vec<HaBroker> = (1..=3u64)
        .map(|id| broker(&homes[id as usize - 1], id, &ctl))
        .collect();
    let mut nodes: Vec<Option<Node>> = cfgs.iter().map(|b| Some(b.start(ns))).collect();
    let set = wait_set(&ctl, Duration::from_secs(30), |s| {
        s.master_id.is_some() && s.sync_state_set.len() == 3
    });
    let old = set.master_id.unwrap();
    let epoch = set.master_epoch;
    let master_addr = set.master().unwrap().broker_addr;
    let mut m = Client::connect(master_addr);
    m.create_topic_ok(TOPIC, 1);
    for member in &set.members {
        let a = member.broker_addr;
        wait_until(
            Duration::from_secs(15),
            format!("broker {} to get the topic", member.broker_id),
            || has_topic(a),
        );
    }
    // SYNC_MASTER with allAckInSyncStateSet: each OK means all three have it.
    let sent = 200;
    for i in 0..sent {
        m.send_ok(&Msg::new(TOPIC, 0, format!("m-{i}")));
    }
    let t0 = Instant::now();
    nodes[old as usize - 1].take().unwrap().kill9();
    let after = wait_set(&ctl, Duration::from_secs(20), |s| {
        s.master_id.is_some_and(|id| id != old)
    });
    assert!(after.master_epoch > epoch, "{after:#?}");
    assert!(
        set.sync_state_set.contains(&after.master_id.unwrap()),
        "the new master was in the SyncStateSet"
    );
    let new_addr = after.master().unwrap().broker_addr;
    let mut n = Client::connect(new_addr);
    wait_until(
        Duration::from_secs(20),
        "a send the new master takes",
        || n.send(&Msg::new(TOPIC, 0, "after")).status() == Status::Success,
    );
    let failover = t0.elapsed();
    eprintln!("failover: first send acknowledged by the new master {failover:?} after the kill");
    let body = n.pull_all(TOPIC, 0, 0, sent + 1);
    let records = decode_records(&body);
    for i in 0..sent {
        let want = format!("m-{i}");
        assert!(
            records.iter().any(|r| r.body == want.as_bytes()),
            "acknowledged message {want} is not on the new master"
        );
    }
    // The old master's first epoch record ends where the new epoch begins: it rejoins as a
    // slave and its log becomes the new master's.
    let old_cfg = &cfgs[old as usize - 1];
    nodes[old as usize - 1] = Some(old_cfg.start(ns));
    let rejoined = wait_set(&ctl, Duration::from_secs(30), |s| {
        s.sync_state_set.contains(&old) && s.master_id != Some(old)
    });
    assert_eq!(rejoined.master_epoch, after.master_epoch);
    let old_addr = rejoined.member(old).unwrap().broker_addr;
    let mut o = Client::connect(old_addr);
    wait_until(
        Duration::from_secs(20),
        "the rejoined broker's log to match the new master's",
        || log_ends(&mut o) == log_ends(&mut n),
    );
    // It refuses sends: it is a slave of the new epoch.
    let r = o.send(&Msg::new(TOPIC, 0, "to-a-slave"));
    assert_eq!(r.status(), Status::NotMaster, "{}", r.remark());
}
