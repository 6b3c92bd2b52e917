//! `ringmq-ctl` against a real standalone node: cluster list and every topic command, as
//! tables and as JSON, and their mqadmin aliases.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ctl, Node};
use serde_json::Value;

#[test]
fn cluster_list_table_json_and_alias() {
    let node = Node::start();
    let t = node.table(&["cluster", "list"]);
    t.assert_header(&[
        "CLUSTER",
        "BROKER",
        "ID",
        "ADDRESS",
        "ROLE",
        "SHARDS",
        "VERSION",
        "IN[msg/s]",
        "OUT[msg/s]",
        "DISK_USED[%]",
        "REPL_LAG[B]",
        "REPL_LAG[ms]",
    ]);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.column("ADDRESS"), [node.broker.as_str()]);
    assert_eq!(t.column("ROLE"), ["ASYNC_MASTER"]);
    assert_eq!(t.column("SHARDS"), ["2"]);
    assert_eq!(
        t.column("REPL_LAG[B]"),
        ["-"],
        "a master shows no replication lag"
    );

    let j = node.json(&["cluster", "list"]);
    let b = &j["brokers"][0];
    assert_eq!(j["brokers"].as_array().unwrap().len(), 1);
    assert_eq!(b["address"], node.broker.as_str());
    assert_eq!(b["cluster"], "DefaultCluster");
    assert_eq!(b["id"], 0);
    assert_eq!(b["shards"], 2);
    assert_eq!(b["role"], "ASYNC_MASTER");
    assert!(b["msgs_in_per_s"].is_number(), "{b}");
    assert!(b["msgs_out_per_s"].is_number(), "{b}");
    let disk = b["disk_used_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&disk), "{disk}");
    assert_eq!(b["repl_lag_bytes"], Value::Null);
    assert_eq!(b["error"], Value::Null);

    let alias = node.json(&["clusterList", "-c", "DefaultCluster"]);
    assert_eq!(alias["brokers"][0]["address"], node.broker.as_str());

    // RINGMQ_NAMESRV stands in for -n.
    let out = common::ctl_env(
        &["cluster", "list", "--json"],
        &[("RINGMQ_NAMESRV", &node.namesrv)],
    );
    out.ok(&["cluster", "list"]);
    let j: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["brokers"][0]["address"], node.broker.as_str());

    let args = [
        "-n",
        node.namesrv.as_str(),
        "cluster",
        "list",
        "-c",
        "NoSuchCluster",
    ];
    let line = ctl(&args).failed_one_line(&args).to_string();
    assert!(line.contains("NoSuchCluster"), "{line}");
}

#[test]
fn topic_commands_and_aliases() {
    let node = Node::start();
    let broker_name = node.json(&["cluster", "list", "--sample", "0"])["brokers"][0]["broker"]
        .as_str()
        .unwrap()
        .to_string();

    // create: table, then JSON with mqadmin flags on one broker.
    let t = node.table(&["topic", "create", "Orders", "--queues", "4"]);
    t.assert_header(&[
        "BROKER",
        "ADDRESS",
        "TOPIC",
        "READ_QUEUES",
        "WRITE_QUEUES",
        "PERM",
        "QUEUE_SHARDS",
    ]);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.column("TOPIC"), ["Orders"]);
    assert_eq!(t.column("READ_QUEUES"), ["4"]);
    assert_eq!(t.column("PERM"), ["rw"]);
    assert_eq!(t.column("QUEUE_SHARDS")[0].split(',').count(), 4);

    let j = node.json(&[
        "topic",
        "create",
        "-t",
        "Audit",
        "-r",
        "2",
        "-w",
        "2",
        "--perm",
        "r",
        "-b",
        &broker_name,
    ]);
    let row = &j["topic"][0];
    assert_eq!(row["broker"], broker_name.as_str());
    assert_eq!(row["address"], node.broker.as_str());
    assert_eq!(row["read_queues"], 2);
    assert_eq!(row["perm"], 4);
    assert_eq!(row["queue_shards"].as_array().unwrap().len(), 2);

    let args = ["-n", node.namesrv.as_str(), "topic", "create", "Orders"];
    let line = ctl(&args).failed_one_line(&args).to_string();
    assert!(line.contains("already exists"), "{line}");

    // update keeps what is not given; an update with nothing to change is a usage error.
    let j = node.json(&["topic", "update", "Orders", "--write-queues", "6"]);
    assert_eq!(j["topic"][0]["read_queues"], 4);
    assert_eq!(j["topic"][0]["write_queues"], 6);
    let out = node.ctl(&["topic", "update", "Orders"]);
    assert_eq!(out.code, 2, "{out:?}");
    let out = node.ctl(&["topic", "update", "Nope", "--queues", "2"]);
    out.failed_one_line(&["topic", "update", "Nope"]);

    // updateTopic: mqadmin's create-or-update.
    let j = node.json(&[
        "updateTopic",
        "-t",
        "Orders",
        "-c",
        "DefaultCluster",
        "-r",
        "6",
    ]);
    assert_eq!(j["topic"][0]["read_queues"], 6);
    assert_eq!(j["topic"][0]["write_queues"], 6);
    let j = node.json(&["updateTopic", "-t", "Fresh", "-b", &node.broker]);
    assert_eq!(j["topic"][0]["read_queues"], 8);
    assert_eq!(j["topic"][0]["perm"], 6);

    // list
    let t = node.table(&["topic", "list"]);
    t.assert_header(&["TOPIC", "KIND"]);
    let names = t.column("TOPIC");
    for want in ["Orders", "Audit", "Fresh"] {
        assert!(names.contains(&want.to_string()), "{names:?}");
    }
    let j = node.json(&["topicList"]);
    let topics = j["topics"].as_array().unwrap();
    assert!(topics
        .iter()
        .any(|t| t["topic"] == "Orders" && t["kind"] == "normal"));

    // route
    let t = node.table(&["topic", "route", "Orders"]);
    t.assert_header(&[
        "CLUSTER", "BROKER", "ID", "ADDRESS", "ROLE", "SHARDS", "VERSION",
    ]);
    assert_eq!(t.column("ADDRESS"), [node.broker.as_str()]);
    assert_eq!(t.more.len(), 1);
    t.more[0].assert_header(&[
        "BROKER",
        "READ_QUEUES",
        "WRITE_QUEUES",
        "PERM",
        "QUEUE_SHARDS",
    ]);
    assert_eq!(t.more[0].column("READ_QUEUES"), ["6"]);
    let j = node.json(&["topicRoute", "-t", "Audit"]);
    assert_eq!(j["brokers"][0]["address"], node.broker.as_str());
    assert_eq!(j["brokers"][0]["role"], "ASYNC_MASTER");
    assert_eq!(j["queues"][0]["perm"], 4);
    assert_eq!(j["queues"][0]["write_queues"], 2);

    // status: empty queues, then after three sends.
    let j = node.json(&["topic", "status", "Orders"]);
    let queues = j["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 6);
    assert!(queues
        .iter()
        .all(|q| q["max_offset"] == 0 && q["last_update_ms"].is_null()));
    let before = now_ms();
    for i in 0..3 {
        node.json(&["send", "Orders", &format!("order {i}")]);
    }
    let after = now_ms();
    let t = node.table(&["topic", "status", "Orders"]);
    t.assert_header(&[
        "BROKER",
        "QUEUE",
        "SHARD",
        "MIN_OFFSET[msg]",
        "MAX_OFFSET[msg]",
        "LAST_UPDATE[UTC]",
    ]);
    assert_eq!(t.rows.len(), 6);
    assert_eq!(t.column("QUEUE"), ["0", "1", "2", "3", "4", "5"]);
    let j = node.json(&["topicStatus", "-t", "Orders"]);
    let queues = j["queues"].as_array().unwrap();
    let total: u64 = queues
        .iter()
        .map(|q| q["max_offset"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 3);
    for q in queues {
        assert_eq!(q["topic"], "Orders");
        assert_eq!(q["min_offset"], 0);
        match q["last_update_ms"].as_i64() {
            Some(ms) => {
                assert!(q["max_offset"].as_u64().unwrap() > 0);
                assert!(
                    (before - 1000..=after + 1000).contains(&ms),
                    "{ms} not in {before}..{after}"
                );
            }
            None => assert_eq!(q["max_offset"], 0),
        }
    }

    // delete: from the broker and the name servers; aliases; unknown topics fail.
    let j = node.json(&["topic", "delete", "Audit"]);
    assert_eq!(j["deleted"][0]["broker"], broker_name.as_str());
    assert_eq!(j["deleted"][0]["topic"], "Audit");
    let t = node.table(&["deleteTopic", "-t", "Fresh", "-c", "DefaultCluster"]);
    t.assert_header(&["BROKER", "ADDRESS", "TOPIC"]);
    assert_eq!(t.column("TOPIC"), ["Fresh"]);
    let names = node.table(&["topic", "list"]).column("TOPIC");
    assert!(!names.contains(&"Audit".to_string()), "{names:?}");
    assert!(!names.contains(&"Fresh".to_string()), "{names:?}");
    let args = ["-n", node.namesrv.as_str(), "topic", "route", "Audit"];
    ctl(&args).failed_one_line(&args);
    let args = ["-n", node.namesrv.as_str(), "topic", "delete", "Audit"];
    ctl(&args).failed_one_line(&args);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A topic no broker has: one line that names it once (the name server's own remark is not
/// repeated after the client's).
#[test]
fn a_missing_topic_is_named_once() {
    let node = Node::start();
    let out = node.ctl(&["topic", "route", "NoSuchTopic"]);
    let line = out.failed_one_line(&["topic", "route"]);
    assert_eq!(
        line.matches("no route for topic NoSuchTopic").count(),
        1,
        "{line}"
    );
}
