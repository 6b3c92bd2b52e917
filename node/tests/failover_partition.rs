//! A master cut off from the controllers but not from its clients and slaves, with network
//! namespaces the test makes itself (root, iproute2): three controllers in namespace `c`,
//! the master in namespace `m`, its two slaves and the test's clients in the test's own
//! namespace; veth links host–c, host–m and m–c. Cutting m–c leaves the master reachable by
//! producers, yet it must stop acknowledging before the controllers' new master starts:
//! never two masters that both acknowledge. Healed, the old master learns it was replaced,
//! follows the new master and holds its log.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};

const SET: &str = "broker-p";
const TOPIC: &str = "Partition";

/// Broker `id` of the set: `controllers` as it reaches them, `host` to listen and publish on,
/// launched through `prefix`.
fn start_broker(
    dir: &Path,
    id: u64,
    controllers: &[SocketAddr],
    host: IpAddr,
    prefix: Vec<String>,
) -> Node {
    let list = controllers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(";");
    let mut b = HaBroker::master(&dir.join(format!("b{id}")), "SYNC_MASTER", 1);
    b.broker_name = SET.to_string();
    b.broker_id = id;
    b.extra = vec![
        "enableControllerMode=true".into(),
        format!("controllerAddr={list}"),
        "allAckInSyncStateSet=true".into(),
        "haSendHeartbeatInterval=200".into(),
    ];
    let config = b.write_config();
    let args = vec![
        "broker".to_string(),
        "-c".into(),
        config.display().to_string(),
        "--namesrv".into(),
        list,
        "--host".into(),
        host.to_string(),
        "--shards".into(),
        "1".into(),
        "--set".into(),
        format!("mappedFileSizeCommitLog={HA_SEGMENT_BYTES}"),
    ];
    Node::start(
        &format!("broker{id}"),
        &b.home,
        Launch {
            args,
            prefix,
            ..Launch::default()
        },
    )
}

#[test]
fn a_master_cut_off_from_the_controllers_stops_acknowledging_before_a_new_master_does() {
    let dir = tempdir("partition");
    let pid = std::process::id();
    let tag = format!("rq{}", pid % 100_000);
    let octet = (pid % 200 + 20) as u8;
    let mut net = Netns::new(&tag, &["c", "m"])
        .unwrap_or_else(|e| panic!("this test makes network namespaces (root, iproute2): {e}"));
    let addr = |link: u8, end: u8| IpAddr::from([10, octet, link, end]);
    let cidr = |link: u8, end: u8| format!("{}/30", addr(link, end));
    let ns_c = Some(net.ns("c"));
    let ns_m = Some(net.ns("m"));
    net.link(
        (&format!("{tag}hc0"), None, &cidr(1, 1)),
        (&format!("{tag}hc1"), ns_c.clone(), &cidr(1, 2)),
    )
    .unwrap();
    net.link(
        (&format!("{tag}hm0"), None, &cidr(2, 1)),
        (&format!("{tag}hm1"), ns_m.clone(), &cidr(2, 2)),
    )
    .unwrap();
    let mc = net
        .link(
            (&format!("{tag}mc0"), ns_m.clone(), &cidr(3, 1)),
            (&format!("{tag}mc1"), ns_c.clone(), &cidr(3, 2)),
        )
        .unwrap();

    let ctl = Controllers::start_at(dir.path(), 3, "0.0.0.0", addr(1, 2), net.exec_prefix("c"));
    ctl.agreed_leader(None, Duration::from_secs(20));
    // The master reaches the controllers over m–c, everyone else over host–c.
    let via_mc: Vec<SocketAddr> = ctl
        .ports
        .iter()
        .map(|p| SocketAddr::new(addr(3, 2), *p))
        .collect();
    let m_node = start_broker(dir.path(), 1, &via_mc, addr(2, 2), net.exec_prefix("m"));
    ctl.wait_set(SET, Duration::from_secs(20), |s| s.master_id == Some(1));
    let _slaves: Vec<Node> = [2, 3]
        .iter()
        .map(|id| start_broker(dir.path(), *id, &ctl.addrs(), addr(2, 1), Vec::new()))
        .collect();
    let set = ctl.wait_set(SET, Duration::from_secs(30), |s| {
        s.master_id == Some(1) && s.sync_state_set.len() == 3
    });
    let m_addr = m_node.broker_addr();
    Client::connect(m_addr).create_topic_ok(TOPIC, 1);
    for member in &set.members {
        let a = member.broker_addr;
        wait_until(Duration::from_secs(15), "the topic on every broker", || {
            has_topic(a, TOPIC)
        });
    }

    // Producers keep sending to the old master the whole time; every OK is recorded.
    let stop = Arc::new(AtomicBool::new(false));
    let m_acks: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let m_refusals: Arc<Mutex<Vec<Status>>> = Arc::default();
    let sender = {
        let (stop, acks, refusals) = (stop.clone(), m_acks.clone(), m_refusals.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(m_addr);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let body = format!("m-{i}");
                i += 1;
                let Ok(r) = c.try_call(
                    RequestCode::SendMessage,
                    &Client::send_request(TOPIC, 0, false, 1),
                    &Msg::new(TOPIC, 0, body.clone()).encode(),
                ) else {
                    c = Client::connect(m_addr);
                    continue;
                };
                if r.status() == Status::Success {
                    acks.lock().unwrap().push((Instant::now(), body));
                } else {
                    refusals.lock().unwrap().push(r.status());
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !m_acks.lock().unwrap().is_empty(),
        "the master took sends before the cut"
    );
    let t_cut = Instant::now();
    net.cut(&mc);
    let after = ctl.wait_set(SET, Duration::from_secs(20), |s| {
        s.master_id.is_some_and(|id| id != 1)
    });
    let new_addr = after.master().unwrap().broker_addr;
    let mut n = Client::connect(new_addr);
    wait_until(
        Duration::from_secs(20),
        "a send the new master takes",
        || n.send(&Msg::new(TOPIC, 0, "new")).status() == Status::Success,
    );
    let t_new = Instant::now();
    // Keep trying the old master a while longer: it must take nothing any more.
    std::thread::sleep(Duration::from_millis(1_000));
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let acks = m_acks.lock().unwrap().clone();
    let last_old = acks.last().map(|(t, _)| *t).unwrap();
    assert!(
        last_old < t_new,
        "the old master acknowledged {:?} after the new master's first acknowledgement",
        last_old.duration_since(t_new)
    );
    eprintln!(
        "partition: old master's last ack {:?} after the cut, new master's first ack {:?} after it; {} acks by the old master",
        last_old.saturating_duration_since(t_cut),
        t_new.duration_since(t_cut),
        acks.len()
    );
    assert!(
        m_refusals.lock().unwrap().contains(&Status::NotMaster),
        "the fenced master answered NOT_MASTER"
    );
    // Everything the old master acknowledged (SYNC, all of the SyncStateSet) is on the new one.
    let max = n.max_offset(TOPIC, 0) as usize;
    let on_new: Vec<Vec<u8>> = decode_records(&n.pull_all(TOPIC, 0, 0, max))
        .iter()
        .map(|r| r.body.to_vec())
        .collect();
    for (_, body) in &acks {
        assert!(
            on_new.iter().any(|b| b == body.as_bytes()),
            "{body}, acknowledged by the old master, is not on the new master"
        );
    }

    // Healed: the old master hears it was replaced and follows the new master.
    net.heal(&mc);
    let rejoined = ctl.wait_set(SET, Duration::from_secs(30), |s| {
        s.sync_state_set.contains(&1) && s.master_id == after.master_id
    });
    assert_eq!(rejoined.master_epoch, after.master_epoch);
    let mut o = Client::connect(m_addr);
    wait_until(
        Duration::from_secs(20),
        "the old master's log to be the new master's",
        || o.max_offset(TOPIC, 0) == n.max_offset(TOPIC, 0) && log_ends(&mut o) == log_ends(&mut n),
    );
    assert_eq!(
        o.send(&Msg::new(TOPIC, 0, "to-the-old")).status(),
        Status::NotMaster
    );
}
