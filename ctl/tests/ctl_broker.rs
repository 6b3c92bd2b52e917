//! `ringmq-ctl broker status|config|readonly` against a real standalone node: tables, JSON,
//! an allow-listed change and a refused one, and read-only on -> a send fails with
//! NO_PERMISSION -> off -> sends work again.
#![allow(clippy::unwrap_used)]

mod common;

use common::{record, Node};

#[test]
fn broker_status_config_and_readonly() {
    let node = Node::start();
    node.json(&["topic", "create", "Payments", "--queues", "2"]);
    node.json(&["send", "Payments", "before"]);

    // status by address: a record, the shards, the extra keys.
    let out = node.ctl(&["broker", "status", &node.broker]);
    out.ok(&["broker", "status"]);
    let summary = record(&out.stdout);
    let keys: Vec<&str> = summary.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "BROKER",
            "ID",
            "ADDRESS",
            "ROLE",
            "VERSION",
            "FLUSH",
            "UPTIME[ms]",
            "DISK_USED[%]",
            "CONNECTIONS",
            "SHARDS",
            "IN[msg/s]",
            "OUT[msg/s]"
        ]
    );
    assert!(summary.contains(&("ADDRESS".to_string(), node.broker.clone())));
    assert!(summary.contains(&("ROLE".to_string(), "ASYNC_MASTER".to_string())));
    let t = common::Table::parse(&out.stdout);
    let shards = &t.more[0];
    shards.assert_header(&[
        "SHARD",
        "QUEUES",
        "CONNECTIONS",
        "PARKED_PULLS",
        "IN[msg]",
        "OUT[msg]",
        "IN[B]",
        "OUT[B]",
        "IN[msg/s]",
        "OUT[msg/s]",
        "STORE[B]",
        "LOG_MIN[B]",
        "LOG_MAX[B]",
        "REPL_LAG[B]",
        "REPL_LAG[ms]",
        "SLAVES",
    ]);
    assert_eq!(shards.column("SHARD"), ["0", "1"]);
    t.more[1].assert_header(&["KEY", "VALUE"]);

    // ... and by broker name, as JSON.
    let name = node.json(&["cluster", "list", "--sample", "0"])["brokers"][0]["broker"]
        .as_str()
        .unwrap()
        .to_string();
    let j = node.json(&["broker", "status", "-b", &name]);
    assert_eq!(j["broker"]["address"], node.broker.as_str());
    assert_eq!(j["broker"]["broker"], name.as_str());
    assert_eq!(j["broker"]["role"], "ASYNC_MASTER");
    assert_eq!(j["broker"]["flush_disk_type"], "ASYNC_FLUSH");
    assert_eq!(j["broker"]["shards"], 2);
    assert!(j["broker"]["uptime_ms"].as_u64().unwrap() > 0);
    let shards = j["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 2);
    let msgs_in: u64 = shards.iter().map(|s| s["msgs_in"].as_u64().unwrap()).sum();
    assert_eq!(msgs_in, 1);
    assert!(j["extra"].is_array());

    // config: everything, then an allowed change, then a refused key.
    let t = node.table(&["broker", "config", &node.broker]);
    t.assert_header(&["KEY", "VALUE"]);
    assert!(t.column("KEY").contains(&"brokerPermission".to_string()));
    let j = node.json(&["broker", "config", &node.broker]);
    let perm = j["config"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "brokerPermission")
        .unwrap();
    assert_eq!(perm["value"], "6");
    let j = node.json(&[
        "broker",
        "config",
        "-b",
        &node.broker,
        "--set",
        "maxMessageSize=2000000",
    ]);
    assert_eq!(
        j["config"],
        serde_json::json!([{"key": "maxMessageSize", "value": "2000000"}])
    );
    let args = [
        "-n",
        node.namesrv.as_str(),
        "broker",
        "config",
        node.broker.as_str(),
        "--set",
        "storePathRootDir=/tmp/x",
    ];
    let line = common::ctl(&args).failed_one_line(&args).to_string();
    assert!(line.contains("storePathRootDir"), "{line}");

    // read-only: sends refused with NO_PERMISSION, reads go on; then writable again.
    let j = node.json(&["broker", "readonly", &node.broker, "on"]);
    assert_eq!(j["broker"]["read_only"], true);
    assert_eq!(j["broker"]["broker_permission"], 4);
    let args = ["-n", node.namesrv.as_str(), "send", "Payments", "during"];
    let line = common::ctl(&args).failed_one_line(&args).to_string();
    assert!(line.contains("NO_PERMISSION"), "{line}");
    let j = node.json(&["topic", "status", "Payments"]);
    assert_eq!(
        j["queues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["max_offset"].as_u64().unwrap())
            .sum::<u64>(),
        1
    );
    let out = node.ctl(&["broker", "readonly", "-b", &node.broker, "off"]);
    out.ok(&["broker", "readonly", "off"]);
    let rec = record(&out.stdout);
    assert!(
        rec.contains(&("READ_ONLY".to_string(), "false".to_string())),
        "{rec:?}"
    );
    let j = node.json(&["send", "Payments", "after"]);
    assert_eq!(j["sent"]["status"], "SEND_OK");
    let out = node.ctl(&["broker", "readonly", &node.broker, "maybe"]);
    assert_eq!(out.code, 2, "{out:?}");
}
