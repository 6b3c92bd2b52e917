//! The embedded controllers as real processes: three name servers with
//! `enableControllerInNamesrv=true` elect a Raft leader, answer CONTROLLER_GET_METADATA_INFO
//! alike, and a new leader takes over when the leader is killed; followers refuse
//! leader-only requests with CONTROLLER_NOT_LEADER naming the leader; a name server without
//! the controller refuses controller requests.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{ElectMasterRequest, NotLeader};

#[test]
fn three_controllers_elect_a_leader_and_replace_it_when_it_dies() {
    let dir = tempdir("controllers");
    let mut ctl = Controllers::start(dir.path(), 3);
    let addrs = ctl.addrs();
    let (leader, term) = ctl.agreed_leader(None, Duration::from_secs(20));
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
    ctl.kill9(leader as usize);
    let (new_leader, new_term) = ctl.agreed_leader(Some(leader), Duration::from_secs(20));
    assert_ne!(new_leader, leader);
    assert!(new_term > term);

    // The old leader restarts from its log and follows the new leader.
    ctl.restart(leader as usize);
    let (l, _) = ctl.agreed_leader(None, Duration::from_secs(20));
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
