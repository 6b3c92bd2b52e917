//! The embedded controllers as real processes: three name servers with
//! `enableControllerInNamesrv=true` elect a Raft leader, answer CONTROLLER_GET_METADATA_INFO
//! alike, and a new leader takes over when the leader is killed; followers refuse
//! leader-only requests with CONTROLLER_NOT_LEADER naming the leader; a name server without
//! the controller refuses controller requests.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{ControllerMetadata, ElectMasterRequest, NotLeader};

/// Free loopback ports (bound, then released, so the controllers can be told each other's
/// addresses before they start).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn peers(ports: &[u16]) -> String {
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("n{i}-127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(";")
}

fn controller(dir: &Path, ports: &[u16], i: usize) -> Node {
    let store = dir.join("controllers");
    let args = [
        "namesrv".to_string(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        ports[i].to_string(),
        "--set".into(),
        "enableControllerInNamesrv=true".into(),
        "--set".into(),
        format!("controllerDLegerPeers={}", peers(ports)),
        "--set".into(),
        format!("controllerDLegerSelfId=n{i}"),
        "--set".into(),
        format!("controllerStorePath={}", store.display()),
    ];
    Node::start(
        "controller",
        dir,
        Launch {
            args: args.to_vec(),
            ..Launch::default()
        },
    )
}

fn metadata(addr: SocketAddr) -> Option<ControllerMetadata> {
    let mut c = Client::try_connect(addr).ok()?;
    c.set_read_timeout(Duration::from_secs(2));
    let r = c
        .try_call(RequestCode::ControllerGetMetadataInfo, &Empty, &[])
        .ok()?;
    r.fields::<ControllerMetadata>()
}

/// Polls until every listed controller names the same leader (other than `not`); returns it
/// and the term.
fn agreed_leader(addrs: &[SocketAddr], not: Option<u64>, within: Duration) -> (u64, u64) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let views: Vec<Option<ControllerMetadata>> = addrs.iter().map(|a| metadata(*a)).collect();
        if let Some(Some(first)) = views.first() {
            if let Some(l) = first.leader_id.filter(|l| Some(*l) != not) {
                if views
                    .iter()
                    .all(|v| v.as_ref().is_some_and(|m| m.leader_id == Some(l)))
                {
                    return (l, first.term);
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no agreed leader within {within:?}: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn three_controllers_elect_a_leader_and_replace_it_when_it_dies() {
    let dir = tempdir("controllers");
    let ports = free_ports(3);
    let mut nodes: Vec<Node> = (0..3).map(|i| controller(dir.path(), &ports, i)).collect();
    let addrs: Vec<SocketAddr> = ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect();
    let (leader, term) = agreed_leader(&addrs, None, Duration::from_secs(20));
    let m = metadata(addrs[leader as usize]).unwrap();
    assert_eq!(m.self_id, leader);
    assert_eq!(m.members.len(), 3);
    assert!(
        m.applied_index >= 1,
        "the membership entry is applied: {m:?}"
    );

    // A follower refuses an election request and names the leader.
    let follower = (leader as usize + 1) % 3;
    let mut c = Client::connect(addrs[follower]);
    let r = c.call(
        RequestCode::ControllerElectMaster,
        &ElectMasterRequest {
            cluster: "c".into(),
            broker_name: "nobody".into(),
            broker_id: None,
        },
        &[],
    );
    r.expect_status(Status::ControllerNotLeader);
    assert_eq!(
        r.fields::<NotLeader>().unwrap().leader_addr,
        Some(addrs[leader as usize])
    );
    // The leader knows no such set.
    let mut c = Client::connect(addrs[leader as usize]);
    c.call(
        RequestCode::ControllerElectMaster,
        &ElectMasterRequest {
            cluster: "c".into(),
            broker_name: "nobody".into(),
            broker_id: None,
        },
        &[],
    )
    .expect_status(Status::ControllerUnknownSet);

    // Kill the leader: the other two elect one of themselves in a later term.
    nodes[leader as usize].kill9();
    let rest: Vec<SocketAddr> = (0..3)
        .filter(|i| *i != leader as usize)
        .map(|i| addrs[i])
        .collect();
    let (new_leader, new_term) = agreed_leader(&rest, Some(leader), Duration::from_secs(20));
    assert_ne!(new_leader, leader);
    assert!(new_term > term);

    // The old leader restarts from its log and follows the new leader.
    nodes[leader as usize] = controller(dir.path(), &ports, leader as usize);
    let (l, _) = agreed_leader(&addrs, None, Duration::from_secs(20));
    assert_eq!(
        l, new_leader,
        "a restarted controller does not unseat a live leader"
    );
}

#[test]
fn a_name_server_without_a_controller_refuses_controller_requests() {
    let dir = tempdir("no-controller");
    let ns = Node::namesrv(dir.path(), &[]);
    let mut c = Client::connect(ns.namesrv_addr());
    c.call(RequestCode::ControllerGetMetadataInfo, &Empty, &[])
        .expect_status(Status::RequestCodeNotSupported);
}

#[test]
fn bad_controller_settings_stop_the_start_with_a_clear_error() {
    let dir = tempdir("bad-controller");
    let (status, log) = Node::start_expect_exit(
        "namesrv",
        dir.path(),
        Launch {
            args: [
                "namesrv",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--set",
                "enableControllerInNamesrv=true",
                "--set",
                "controllerDLegerPeers=n0-127.0.0.1:1",
                "--set",
                "controllerDLegerSelfId=n5",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            ..Launch::default()
        },
    );
    assert!(!status.success());
    assert!(
        log.contains("controllerDLegerSelfId n5 is not in controllerDLegerPeers"),
        "{log}"
    );
}
