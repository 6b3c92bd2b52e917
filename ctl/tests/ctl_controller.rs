//! `ringmq-ctl cluster controller|replicas|elect` (and their mqadmin aliases) against real
//! controllers: three `ringmq namesrv` processes with embedded controllers
//! (`enableControllerInNamesrv=true`, a three-member Raft group) and one broker in
//! controller mode (`enableControllerMode=true`) of broker set `broker-a`.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::{ctl, server_binary, Table, START_TIMEOUT};
use ringmq_testkit::{wait_for, Proc, Spawn};
use serde_json::Value;

/// How long the controllers may take to elect a Raft leader and a broker master.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// `N` distinct loopback ports that were free a moment ago (all held while choosing).
fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut out = [0u16; N];
    for (o, l) in out.iter_mut().zip(&held) {
        *o = l.local_addr().unwrap().port();
    }
    out
}

fn start(name: &str, spawn: Spawn, dir: &std::path::Path) -> Proc {
    let mut proc = spawn.log(dir.join(format!("{name}.log"))).start();
    proc.wait_line(START_TIMEOUT, "its ready line", |l| l.contains("ready"));
    proc
}

/// Runs `ringmq-ctl args... --json`, which must succeed; its output.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ctl(&all);
    out.ok(&all);
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn controller_replicas_and_elect() {
    let dir = tempfile::tempdir().unwrap();
    let ns_ports = free_ports::<3>();
    let [broker_port] = free_ports::<1>();
    // Raft messages are requests (CONTROLLER_RAFT) on the name servers' ports.
    let peers = (0..3)
        .map(|i| format!("n{i}-127.0.0.1:{}", ns_ports[i]))
        .collect::<Vec<_>>()
        .join(";");
    let controllers = ns_ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(";");
    let _namesrvs: Vec<Proc> = (0..3)
        .map(|i| {
            let store = dir.path().join(format!("controller-n{i}"));
            let spawn = Spawn::new("ringmq", server_binary())
                .arg("namesrv")
                .args(["--host", "127.0.0.1", "--port", &ns_ports[i].to_string()])
                .args(["--set", "enableControllerInNamesrv=true"])
                .args(["--set", &format!("controllerDLegerPeers={peers}")])
                .args(["--set", &format!("controllerDLegerSelfId=n{i}")])
                .args(["--set", &format!("controllerStorePath={}", store.display())]);
            start(&format!("namesrv-n{i}"), spawn, dir.path())
        })
        .collect();
    let conf = dir.path().join("broker-a-n0.properties");
    std::fs::write(
        &conf,
        format!(
            "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\n\
             namesrvAddr={controllers}\nlistenPort={broker_port}\nstorePathRootDir={}\n\
             enableControllerMode=true\ncontrollerAddr={controllers}\n\
             brokerRole=SYNC_MASTER\n",
            dir.path().join("broker-a-n0").display()
        ),
    )
    .unwrap();
    let broker_addr = format!("127.0.0.1:{broker_port}");
    let _broker = start(
        "broker-a-n0",
        Spawn::new("ringmq", server_binary())
            .arg("broker")
            .arg("-c")
            .arg(&conf)
            .args(["--host", "127.0.0.1", "--shards", "2"])
            .args(["--set", "haListenPort=0"]),
        dir.path(),
    );

    // cluster controller: three rows, one leader that all of them name.
    let rows = wait_for(SETTLE_TIMEOUT, "a Raft leader", || {
        let j = json(&["cluster", "controller", "--controller", &controllers]);
        let rows = j["controllers"].as_array().unwrap().clone();
        let leaders = rows.iter().filter(|r| r["leader"] == true).count();
        let agreed = rows
            .iter()
            .all(|r| r["leader_address"].is_string() && r["leader_id"] == rows[0]["leader_id"]);
        (leaders == 1 && agreed).then_some(rows)
    });
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert!(r["term"].as_u64().unwrap() >= 1, "{r}");
        assert!(
            r["applied_index"].as_u64().unwrap() <= r["last_log_index"].as_u64().unwrap(),
            "{r}"
        );
        assert!(r["error"].is_null(), "{r}");
    }
    let t = Table::parse(
        &ctl(&["cluster", "controller", "--controller", &controllers])
            .ok(&["cluster", "controller"])
            .stdout,
    );
    t.assert_header(&[
        "ADDRESS",
        "ID",
        "LEADER",
        "LEADER_ADDRESS",
        "TERM",
        "LAST_LOG_INDEX",
        "APPLIED_INDEX",
    ]);
    assert_eq!(t.rows.len(), 3);

    // cluster replicas: broker-a's only broker is its master, in the SyncStateSet, no lag.
    let j = wait_for(SETTLE_TIMEOUT, "broker-a's master", || {
        let j = json(&["cluster", "replicas", "--controller", &controllers]);
        // Liveness is the leader's; a leader elected a moment ago has not heard every broker.
        (j["sets"][0]["master_id"] == 1 && j["replicas"][0]["alive"] == true).then_some(j)
    });
    let set = &j["sets"][0];
    assert_eq!(set["broker"], "broker-a");
    assert_eq!(set["cluster"], "DefaultCluster");
    assert_eq!(set["master_address"], broker_addr.as_str());
    assert!(set["master_epoch"].as_u64().unwrap() >= 1);
    assert_eq!(set["sync_state_set"], serde_json::json!([1]));
    let r = &j["replicas"][0];
    assert_eq!(r["id"], 1);
    assert_eq!(r["alive"], true);
    assert_eq!(r["role"], "master");
    assert_eq!(r["lag_bytes"], 0);
    // The alias, with RocketMQ's flags, against the name server list (-n) as controllers.
    let alias = json(&["-n", &controllers, "getSyncStateSet", "-b", "broker-a"]);
    assert_eq!(alias["sets"][0]["master_id"], 1);

    // cluster elect: broker 1 again (followed to the leader from whichever answers first).
    // A leader that took over a moment ago (this machine is loaded under CI) has not heard
    // the broker yet and refuses it as not alive: try again until one has.
    let args = [
        "cluster",
        "elect",
        "broker-a",
        "--broker-id",
        "1",
        "--controller",
        &controllers,
        "--json",
    ];
    let elected: Value = wait_for(SETTLE_TIMEOUT, "an election of broker 1", || {
        let out = ctl(&args);
        (out.code == 0).then(|| serde_json::from_str(&out.stdout).unwrap())
    });
    assert_eq!(elected["elected"]["master_id"], 1);
    assert_eq!(elected["elected"]["master_address"], broker_addr.as_str());
    assert!(
        elected["elected"]["master_epoch"].as_u64().unwrap()
            >= set["master_epoch"].as_u64().unwrap()
    );
    // An unknown set is a one-line failure.
    let out = ctl(&[
        "cluster",
        "elect",
        "nope",
        "-c",
        "DefaultCluster",
        "-a",
        &controllers,
    ]);
    let line = out.failed_one_line(&["cluster", "elect", "nope"]);
    assert!(line.contains("nope"), "{line}");
}
