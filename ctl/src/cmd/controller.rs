//! `cluster controller`, `cluster replicas`, `cluster elect`: the controllers of controller
//! mode (their Raft state, the broker sets they keep, electing a master by hand). The
//! requests are `ringmq_client::Admin`'s; this file resolves `--controller` and shapes the
//! answers into sections.

use std::net::SocketAddr;

use ringmq_client::admin::{replica_lag_bytes, resolve_controllers};
use ringmq_client::wire::command::{ControllerMetadata, ReplicaSet};
use ringmq_client::{Admin, ClientConfig};
use serde_json::{json, Value};

use crate::cli::{ControllerAddrArgs, ControllerArgs, ElectArgs, ReplicasArgs};
use crate::error::{Context, Result};
use crate::output::{int, json_only, text, Column, Report, Section};

pub async fn controller(admin: &Admin, cfg: &ClientConfig, a: &ControllerArgs) -> Result<Report> {
    let addrs = controllers(cfg, &a.controllers).await?;
    let mut s = Section::list("controllers", metadata_columns());
    let mut report = Report::default();
    for addr in addrs {
        match admin.controller_metadata(addr).await {
            Ok(m) => s.push(metadata_row(addr, Some(&m), None)),
            Err(e) => {
                report
                    .notes
                    .push(format!("controller {addr} did not answer: {e}"));
                s.push(metadata_row(addr, None, Some(&e.to_string())));
            }
        }
    }
    report.sections.push(s);
    Ok(report)
}

pub async fn replicas(admin: &Admin, cfg: &ClientConfig, a: &ReplicasArgs) -> Result<Report> {
    let addrs = controllers(cfg, &a.controllers).await?;
    let sets = admin
        .replica_info(&addrs, a.broker_name.as_deref())
        .await
        .doing(|| "reading the broker sets from the controllers".into())?;
    Ok(replicas_report(&sets))
}

pub async fn elect(admin: &Admin, cfg: &ClientConfig, a: &ElectArgs) -> Result<Report> {
    let addrs = controllers(cfg, &a.controllers).await?;
    let name = a
        .broker_name
        .clone()
        .or_else(|| a.broker_name_opt.clone())
        .unwrap_or_default();
    let cluster = match &a.cluster {
        Some(c) => c.clone(),
        None => admin
            .replica_info(&addrs, Some(&name))
            .await
            .doing(|| format!("looking up the cluster of broker set {name}"))?
            .into_iter()
            .find(|s| s.broker_name == name)
            .map(|s| s.cluster)
            .unwrap_or_default(),
    };
    let set = admin
        .elect_master(&addrs, &cluster, &name, a.broker_id)
        .await
        .doing(|| format!("electing a master for broker set {name}"))?;
    Ok(Report::one(Section::record(
        "elected",
        set_columns(),
        set_row(&set),
    )))
}

/// `--controller`, or the name servers (controllers embedded in them).
async fn controllers(cfg: &ClientConfig, a: &ControllerAddrArgs) -> Result<Vec<SocketAddr>> {
    let list = a
        .controller
        .clone()
        .unwrap_or_else(|| cfg.name_servers.join(";"));
    resolve_controllers(&list)
        .await
        .doing(|| format!("controller addresses {list:?}"))
}

fn metadata_columns() -> Vec<Column> {
    vec![
        text("ADDRESS", "address"),
        int("ID", "id"),
        text("LEADER", "leader"),
        text("LEADER_ADDRESS", "leader_address"),
        json_only("leader_id"),
        int("TERM", "term"),
        int("LAST_LOG_INDEX", "last_log_index"),
        int("APPLIED_INDEX", "applied_index"),
        json_only("error"),
    ]
}

/// One controller's row: its answer, or the error it failed with (other cells absent).
fn metadata_row(
    addr: SocketAddr,
    m: Option<&ControllerMetadata>,
    error: Option<&str>,
) -> Vec<Value> {
    let Some(m) = m else {
        return vec![
            json!(addr.to_string()),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            json!(error),
        ];
    };
    let leader = m.leader_id.is_some_and(|l| l == m.self_id);
    vec![
        json!(m.self_addr.to_string()),
        json!(m.self_id),
        json!(leader),
        json!(m.leader_addr.map(|a| a.to_string())),
        json!(m.leader_id),
        json!(m.term),
        json!(m.last_log_index),
        json!(m.applied_index),
        Value::Null,
    ]
}

fn set_columns() -> Vec<Column> {
    vec![
        text("CLUSTER", "cluster"),
        text("BROKER", "broker"),
        int("MASTER_ID", "master_id"),
        text("MASTER_ADDRESS", "master_address"),
        int("MASTER_EPOCH", "master_epoch"),
        text("SYNC_STATE_SET", "sync_state_set"),
        int("SYNC_STATE_SET_EPOCH", "sync_state_set_epoch"),
    ]
}

fn set_row(set: &ReplicaSet) -> Vec<Value> {
    vec![
        json!(set.cluster),
        json!(set.broker_name),
        json!(set.master_id),
        json!(set.master().map(|m| m.broker_addr.to_string())),
        json!(set.master_epoch),
        // A list in JSON; "1,2" in a table (text cells print strings as they are).
        json!(set.sync_state_set),
        json!(set.sync_state_set_epoch),
    ]
}

fn replica_columns() -> Vec<Column> {
    vec![
        text("BROKER", "broker"),
        int("ID", "id"),
        text("ADDRESS", "address"),
        text("ROLE", "role"),
        text("ALIVE", "alive"),
        text("IN_SYNC", "in_sync"),
        int("EPOCH", "epoch"),
        int("LOG[B]", "log_bytes"),
        int("LAG[B]", "lag_bytes"),
        int("PRIORITY", "election_priority"),
    ]
}

/// The `sets` and `replicas` sections of `cluster replicas`.
fn replicas_report(sets: &[ReplicaSet]) -> Report {
    let mut s = Section::list("sets", set_columns());
    let mut r = Section::list("replicas", replica_columns());
    for set in sets {
        s.push(set_row(set));
        let mut members: Vec<_> = set.members.iter().collect();
        members.sort_by_key(|m| m.broker_id);
        for m in members {
            let role = if set.master_id == Some(m.broker_id) {
                "master"
            } else {
                "slave"
            };
            r.push(vec![
                json!(set.broker_name),
                json!(m.broker_id),
                json!(m.broker_addr.to_string()),
                json!(role),
                json!(m.alive),
                json!(set.sync_state_set.contains(&m.broker_id)),
                json!(m.epoch),
                json!(m.log_bytes),
                json!(replica_lag_bytes(set, m.broker_id)),
                json!(m.election_priority),
            ]);
        }
    }
    Report::one(s).with(r)
}

#[cfg(test)]
mod tests {
    use ringmq_client::wire::command::{ControllerMember, ReplicaMember};

    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn set() -> ReplicaSet {
        let member = |id: u64, port, alive, log_bytes| ReplicaMember {
            broker_id: id,
            broker_addr: addr(port),
            ha_addr: None,
            alive,
            epoch: 3,
            log_bytes,
            election_priority: 0,
        };
        ReplicaSet {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            master_id: Some(2),
            master_epoch: 3,
            sync_state_set: vec![1, 2],
            sync_state_set_epoch: 5,
            members: vec![
                member(3, 30913, false, 1000),
                member(2, 20911, true, 5000),
                member(1, 10911, true, 4990),
            ],
        }
    }

    #[test]
    fn replicas_json_and_table() {
        let report = replicas_report(&[set()]);
        let j = report.to_json();
        assert_eq!(j["sets"][0]["master_address"], "127.0.0.1:20911");
        assert_eq!(j["sets"][0]["sync_state_set"], json!([1, 2]));
        assert_eq!(j["sets"][0]["sync_state_set_epoch"], 5);
        let reps = j["replicas"].as_array().unwrap();
        let ids: Vec<u64> = reps.iter().map(|r| r["id"].as_u64().unwrap()).collect();
        assert_eq!(ids, vec![1, 2, 3], "by broker id");
        assert_eq!(reps[0]["lag_bytes"], 10);
        assert_eq!(reps[0]["in_sync"], true);
        assert_eq!(reps[1]["role"], "master");
        assert_eq!(reps[1]["lag_bytes"], 0);
        assert_eq!(reps[2]["alive"], false);
        assert_eq!(reps[2]["in_sync"], false);
        assert_eq!(reps[2]["lag_bytes"], 4000);
        let table = report.to_table();
        assert!(table.contains("LAG[B]"), "{table}");
        assert!(table.contains("LOG[B]"), "{table}");
        assert!(table.contains("SYNC_STATE_SET_EPOCH"), "{table}");
        assert!(table.contains("127.0.0.1:20911"), "{table}");
    }

    #[test]
    fn a_set_without_master_has_no_lag() {
        let mut s = set();
        s.master_id = None;
        let j = replicas_report(&[s]).to_json();
        assert_eq!(j["sets"][0]["master_id"], Value::Null);
        assert_eq!(j["sets"][0]["master_address"], Value::Null);
        assert!(j["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["lag_bytes"].is_null() && r["role"] == "slave"));
    }

    #[test]
    fn controller_rows() {
        let m = ControllerMetadata {
            self_id: 1,
            self_addr: addr(9877),
            leader_id: Some(1),
            leader_addr: Some(addr(9877)),
            term: 4,
            last_log_index: 17,
            applied_index: 16,
            members: vec![ControllerMember {
                id: 1,
                addr: addr(9877),
            }],
        };
        let mut s = Section::list("controllers", metadata_columns());
        s.push(metadata_row(addr(9877), Some(&m), None));
        s.push(metadata_row(addr(9878), None, Some("connection refused")));
        let j = Report::one(s).to_json();
        let rows = j["controllers"].as_array().unwrap();
        assert_eq!(rows[0]["leader"], true);
        assert_eq!(rows[0]["term"], 4);
        assert_eq!(rows[0]["last_log_index"], 17);
        assert_eq!(rows[0]["applied_index"], 16);
        assert_eq!(rows[0]["error"], Value::Null);
        assert_eq!(rows[1]["address"], "127.0.0.1:9878");
        assert_eq!(rows[1]["term"], Value::Null);
        assert_eq!(rows[1]["error"], "connection refused");
    }
}
