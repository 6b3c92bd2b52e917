//! Automatic failover with real processes: three controllers (name servers with
//! `enableControllerInNamesrv=true`) and one broker set of three brokers in controller mode
//! (SYNC_MASTER, `allAckInSyncStateSet=true`). The controllers elect a master, the slaves
//! join its SyncStateSet once caught up; the master is killed with SIGKILL; a slave of the
//! SyncStateSet becomes master in a new epoch and takes sends; every send acknowledged before
//! the kill is on it; the old master restarts, rejoins as a slave of the new epoch and its log
//! becomes the new master's again.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::Status;
use ringmq_wire::command::ReplicaSet;

const SET: &str = "broker-f";
const TOPIC: &str = "Failover";

fn broker(home: &Path, id: u64, ctl: &Controllers, role: &'static str) -> HaBroker {
    let mut b = HaBroker::master(home, role, 1);
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

/// Three controllers and a set of three brokers in `role`, the SyncStateSet full and the
/// topic on every broker.
struct Deployment {
    ctl: Controllers,
    cfgs: Vec<HaBroker>,
    nodes: Vec<Option<Node>>,
    set: ReplicaSet,
}

impl Deployment {
    fn start(dir: &Path, role: &'static str) -> Deployment {
        let ctl = Controllers::start(dir, 3);
        ctl.agreed_leader(None, Duration::from_secs(20));
        let ns = ctl.addrs()[0];
        let cfgs: Vec<HaBroker> = (1..=3u64)
            .map(|id| broker(&dir.join(format!("b{id}")), id, &ctl, role))
            .collect();
        let nodes: Vec<Option<Node>> = cfgs.iter().map(|b| Some(b.start(ns))).collect();
        let set = ctl.wait_set(SET, Duration::from_secs(30), |s| {
            s.master_id.is_some() && s.sync_state_set.len() == 3
        });
        let mut m = Client::connect(set.master().unwrap().broker_addr);
        m.create_topic_ok(TOPIC, 1);
        for member in &set.members {
            let a = member.broker_addr;
            wait_until(
                Duration::from_secs(15),
                format!("broker {} to get the topic", member.broker_id),
                || has_topic(a, TOPIC),
            );
        }
        Deployment {
            ctl,
            cfgs,
            nodes,
            set,
        }
    }

    fn node(&self, id: u64) -> &Node {
        self.nodes[id as usize - 1].as_ref().unwrap()
    }

    fn kill9(&mut self, id: u64) {
        self.nodes[id as usize - 1].take().unwrap().kill9();
    }

    fn restart(&mut self, id: u64) {
        let ns = self.ctl.addrs()[0];
        self.nodes[id as usize - 1] = Some(self.cfgs[id as usize - 1].start(ns));
    }
}

#[test]
fn a_killed_master_is_replaced_by_an_in_sync_slave_and_rejoins_as_its_slave() {
    let dir = tempdir("failover");
    let mut d = Deployment::start(dir.path(), "SYNC_MASTER");
    let set = d.set.clone();
    let old = set.master_id.unwrap();
    let epoch = set.master_epoch;
    let master_addr = set.master().unwrap().broker_addr;
    let mut m = Client::connect(master_addr);
    // SYNC_MASTER with allAckInSyncStateSet: each OK means all three have it.
    let sent = 200;
    for i in 0..sent {
        m.send_ok(&Msg::new(TOPIC, 0, format!("m-{i}")));
    }
    let t0 = Instant::now();
    d.kill9(old);
    let ctl = &d.ctl;
    let after = ctl.wait_set(SET, Duration::from_secs(20), |s| {
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
    d.restart(old);
    let rejoined = d.ctl.wait_set(SET, Duration::from_secs(30), |s| {
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

/// ASYNC_MASTER: the master acknowledges a tail its slaves do not get (they are stopped, and
/// the tail is larger than the socket buffers that keep taking bytes for them), then dies. A
/// slave of the SyncStateSet takes over without the rest of the tail (the window ASYNC can
/// lose); consumers never saw the tail (the confirmOffset held them below it); the old
/// master, back, finds where its epochs part from the new master's and cuts its tail before
/// it follows.
#[test]
fn an_old_master_truncates_its_unreplicated_tail_by_epoch_when_it_rejoins() {
    let dir = tempdir("failover-async");
    let mut d = Deployment::start(dir.path(), "ASYNC_MASTER");
    let set = d.set.clone();
    let old = set.master_id.unwrap();
    let mut m = Client::connect(set.master().unwrap().broker_addr);
    let replicated = 50;
    for i in 0..replicated {
        m.send_ok(&Msg::new(TOPIC, 0, format!("r-{i}")));
    }
    let slaves: Vec<u64> = set
        .members
        .iter()
        .map(|x| x.broker_id)
        .filter(|id| *id != old)
        .collect();
    for s in &slaves {
        let mut c = Client::connect(set.member(*s).unwrap().broker_addr);
        wait_until(Duration::from_secs(15), "the slaves to catch up", || {
            log_ends(&mut c) == log_ends(&mut m)
        });
    }
    for s in &slaves {
        d.node(*s).signal(libc::SIGSTOP);
    }
    // 48 MiB: more than a stopped reader's socket buffers take in (here tcp_rmem allows
    // 32 MiB, tcp_wmem 4 MiB).
    let tail = 96;
    let chunk = vec![b'x'; 512 * 1024];
    for i in 0..tail {
        let mut body = format!("t-{i}-").into_bytes();
        body.extend_from_slice(&chunk);
        m.send_ok(&Msg::new(TOPIC, 0, body));
    }
    // A consumer of the old master sees only what the SyncStateSet confirmed.
    let r = m.pull(TOPIC, 0, replicated as u64, 32, 0);
    assert_ne!(r.status(), Status::Success, "read past the confirmOffset");
    let old_count = m.max_offset(TOPIC, 0);
    assert_eq!(old_count, (replicated + tail) as u64);
    d.kill9(old);
    for s in &slaves {
        d.node(*s).signal(libc::SIGCONT);
    }
    let after = d.ctl.wait_set(SET, Duration::from_secs(20), |s| {
        s.master_id.is_some_and(|id| id != old)
    });
    let mut n = Client::connect(after.master().unwrap().broker_addr);
    wait_until(
        Duration::from_secs(20),
        "a send the new master takes",
        || n.send(&Msg::new(TOPIC, 0, "after")).status() == Status::Success,
    );
    let max = n.max_offset(TOPIC, 0) as usize;
    assert!(
        max < old_count as usize,
        "part of the tail never reached the new master: it has {max} messages, the old master had {old_count}"
    );
    let on_new: Vec<Vec<u8>> = decode_records(&n.pull_all(TOPIC, 0, 0, max))
        .iter()
        .map(|r| r.body.to_vec())
        .collect();
    for i in 0..replicated {
        let want = format!("r-{i}");
        assert!(on_new.iter().any(|b| b == want.as_bytes()), "{want} lost");
    }
    d.restart(old);
    let rejoined = d.ctl.wait_set(SET, Duration::from_secs(30), |s| {
        s.sync_state_set.contains(&old)
    });
    assert_eq!(rejoined.master_id, after.master_id);
    let mut o = Client::connect(rejoined.member(old).unwrap().broker_addr);
    wait_until(
        Duration::from_secs(20),
        "the old master's log to become the new master's",
        || o.max_offset(TOPIC, 0) == max as u64 && log_ends(&mut o) == log_ends(&mut n),
    );
    let log = d.node(old).log();
    assert!(
        log.contains("truncat"),
        "the rejoin logs the truncation:\n{log}"
    );
    let on_old: Vec<Vec<u8>> = decode_records(&o.pull_all(TOPIC, 0, 0, max))
        .iter()
        .map(|r| r.body.to_vec())
        .collect();
    assert!(
        on_old == on_new,
        "the rejoined broker holds exactly the new master's records"
    );
}

/// Scheduled messages move with the master: sent to the old master (SYNC, so every member of
/// the SyncStateSet has them), due after it died; the new master delivers each exactly once.
#[test]
fn scheduled_messages_sent_to_the_old_master_are_delivered_once_by_the_new_one() {
    let dir = tempdir("failover-timer");
    let mut d = Deployment::start(dir.path(), "SYNC_MASTER");
    let set = d.set.clone();
    let old = set.master_id.unwrap();
    let mut m = Client::connect(set.master().unwrap().broker_addr);
    let due = now_ms() + 4_000;
    let due_text = due.to_string();
    let n = 20;
    for i in 0..n {
        let msg = Msg::new(TOPIC, 0, format!("s-{i}")).props(&[(
            ringmq_wire::properties::keys::TIMER_DELIVER_MS,
            due_text.as_str(),
        )]);
        assert_eq!(m.send_ok(&msg).deliver_at_ms, due);
    }
    assert_eq!(
        m.max_offset(TOPIC, 0),
        0,
        "nothing is delivered before it is due"
    );
    d.kill9(old);
    let after = d.ctl.wait_set(SET, Duration::from_secs(20), |s| {
        s.master_id.is_some_and(|id| id != old)
    });
    assert!(now_ms() < due, "the failover took until the due time");
    let mut c = Client::connect(after.master().unwrap().broker_addr);
    wait_until(Duration::from_secs(20), "the scheduled messages", || {
        c.max_offset(TOPIC, 0) >= n as u64
    });
    // A moment more: nothing is delivered twice.
    std::thread::sleep(Duration::from_millis(1_500));
    let got = c.max_offset(TOPIC, 0) as usize;
    let bodies: Vec<Vec<u8>> = decode_records(&c.pull_all(TOPIC, 0, 0, got))
        .iter()
        .map(|r| r.body.to_vec())
        .collect();
    assert_eq!(bodies.len(), n, "each scheduled message delivered once");
    for i in 0..n {
        let want = format!("s-{i}");
        assert_eq!(
            bodies.iter().filter(|b| *b == want.as_bytes()).count(),
            1,
            "{want}"
        );
    }
}

/// POP across a failover: a group pops 20 messages on the old master (invisible 3 s) and acks
/// the first 10; the master is killed; the new master, which had only replicated the POP
/// state records, delivers the 10 unacked ones again once their invisible time ends, and never
/// the 10 whose acks the old master acknowledged.
#[test]
fn pop_messages_in_flight_on_the_old_master_come_back_from_the_new_one() {
    use ringmq_wire::command::{
        AckRequest, FilterType, PopInitMode, PopRequest, PopResponse, ReceiptHandle,
    };
    const GROUP: &str = "failover-pop";
    let pop = |c: &mut Client, poll_ms: u32| -> Vec<(String, u32, u64, Vec<u8>, String)> {
        let r = c.call(
            ringmq_wire::code::RequestCode::PopMessage,
            &PopRequest {
                consumer_group: GROUP.into(),
                topic: TOPIC.into(),
                queue_id: -1,
                max_messages: 32,
                invisible_time_ms: 3_000,
                poll_time_ms: poll_ms,
                filter_type: FilterType::Tag,
                expression: "*".into(),
                init_mode: PopInitMode::Min,
                order: false,
            },
            &[],
        );
        if r.status() != Status::Success {
            return Vec::new();
        }
        let fields: PopResponse = r.fields().unwrap();
        let records = decode_records(&r.body);
        let start: std::collections::BTreeMap<(String, u32), u64> =
            records.iter().fold(Default::default(), |mut m, rec| {
                let k = (rec.topic.to_string(), rec.queue_id);
                let o = m.entry(k).or_insert(rec.queue_offset);
                *o = (*o).min(rec.queue_offset);
                m
            });
        records
            .iter()
            .map(|rec| {
                let handle = ReceiptHandle {
                    start_offset: start[&(rec.topic.to_string(), rec.queue_id)],
                    pop_time_ms: fields.pop_time_ms,
                    invisible_time_ms: fields.invisible_time_ms,
                    revive_shard: fields.revive_shard,
                    retry: rec.topic != TOPIC,
                    broker_name: SET.into(),
                    queue_id: rec.queue_id,
                    queue_offset: rec.queue_offset,
                };
                (
                    rec.topic.to_string(),
                    rec.queue_id,
                    rec.queue_offset,
                    rec.body.to_vec(),
                    handle.to_string(),
                )
            })
            .collect()
    };
    let dir = tempdir("failover-pop");
    let mut d = Deployment::start(dir.path(), "SYNC_MASTER");
    let set = d.set.clone();
    let old = set.master_id.unwrap();
    let mut m = Client::connect(set.master().unwrap().broker_addr);
    for i in 0..20 {
        m.send_ok(&Msg::new(TOPIC, 0, format!("p-{i}")));
    }
    let got = pop(&mut m, 0);
    assert_eq!(got.len(), 20, "one pop takes all 20");
    for (topic, q, offset, _, handle) in &got[..10] {
        m.call(
            ringmq_wire::code::RequestCode::AckMessage,
            &AckRequest {
                consumer_group: GROUP.into(),
                topic: topic.clone(),
                queue_id: *q,
                extra_info: handle.clone(),
                offset: *offset,
            },
            &[],
        )
        .ok();
    }
    d.kill9(old);
    let after = d.ctl.wait_set(SET, Duration::from_secs(20), |s| {
        s.master_id.is_some_and(|id| id != old)
    });
    let mut n = Client::connect(after.master().unwrap().broker_addr);
    let mut again: Vec<Vec<u8>> = Vec::new();
    let until = Instant::now() + Duration::from_secs(25);
    while again.len() < 10 && Instant::now() < until {
        for (topic, q, offset, body, handle) in pop(&mut n, 1_000) {
            n.call(
                ringmq_wire::code::RequestCode::AckMessage,
                &AckRequest {
                    consumer_group: GROUP.into(),
                    topic,
                    queue_id: q,
                    extra_info: handle,
                    offset,
                },
                &[],
            )
            .ok();
            again.push(body);
        }
    }
    // A moment more: nothing else comes.
    std::thread::sleep(Duration::from_millis(4_000));
    again.extend(pop(&mut n, 0).into_iter().map(|g| g.3));
    let mut want: Vec<Vec<u8>> = (10..20).map(|i| format!("p-{i}").into_bytes()).collect();
    again.sort();
    want.sort();
    assert_eq!(
        again
            .iter()
            .map(|b| String::from_utf8_lossy(b).to_string())
            .collect::<Vec<_>>(),
        want.iter()
            .map(|b| String::from_utf8_lossy(b).to_string())
            .collect::<Vec<_>>(),
        "the new master delivers again exactly the messages in flight, not the acked ones"
    );
}
