//! Dead letters through `ringmq-ctl` against a real standalone node. A pull consumer of
//! group `billing` sends three messages of `Orders` back with delay level -1 (straight to
//! `%DLQ%billing`, the broker's send-back path); then `group dlq` lists them (original
//! topic, reconsume count, store time, unique key kept), `consume %DLQ%billing` reads them
//! like any topic, `group progress` counts them as DLQ lag, `group resend-dlq --id` resends
//! one without moving the resend mark, `group resend-dlq` resends every one not resent yet
//! and a second run resends nothing, and the copies in `Orders` keep body, tag, keys and
//! user properties without the broker's retry properties.
//!
//! Waits poll until a deadline; nothing here asserts how fast anything happens.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Node;
use ringmq_client::{
    Message, MessageQueue, Producer, PullConsumer, ReceivedMessage, StartPosition,
};
use serde_json::Value;

const GROUP: &str = "billing";
const DLQ: &str = "%DLQ%billing";
/// How long the dead letters may take to show up on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(30);

#[test]
fn dead_letters_listed_consumed_and_resent() {
    let node = Node::start();
    node.json(&["topic", "create", "Orders", "--queues", "2"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sent = rt.block_on(send_orders(&node.namesrv));
    let before_ms = now_ms();
    rt.block_on(dead_letter_all(&node.namesrv, sent.len()));

    // group dlq: the three dead letters, oldest first.
    let j = dlq_until(&node, sent.len());
    let letters = j["dead_letters"].as_array().unwrap();
    let uniq: BTreeSet<&str> = letters
        .iter()
        .map(|l| l["unique_key"].as_str().unwrap())
        .collect();
    let sent_uniq: BTreeSet<&str> = sent.iter().map(String::as_str).collect();
    assert_eq!(
        uniq, sent_uniq,
        "the dead letters keep the unique keys: {j}"
    );
    for l in letters {
        assert_eq!(l["original_topic"], "Orders", "{l}");
        assert!(l["reconsume_times"].is_u64(), "{l}");
        let stored = l["store_time_ms"].as_i64().unwrap();
        assert!(
            (before_ms - 1_000..=now_ms() + 1_000).contains(&stored),
            "dead-lettered at {stored}, after {before_ms}: {l}"
        );
        assert_eq!(l["resent"], "no");
        assert_eq!(l["tag"], "paid");
        assert_eq!(l["properties"]["color"], "red", "{l}");
    }
    assert_eq!(j["summary"]["dead_letters"], 3);
    assert_eq!(j["summary"]["not_resent"], 3);
    let t = node.table(&["group", "dlq", GROUP]);
    t.assert_header(&[
        "MSG_ID",
        "UNIQ_KEY",
        "ORIGINAL_TOPIC",
        "RECONSUME_TIMES",
        "STORE_TIME[UTC]",
        "OFFSET[msg]",
        "RESENT",
        "TAG",
        "KEYS",
        "BODY_SIZE[B]",
        "BODY",
    ]);
    assert_eq!(t.column("ORIGINAL_TOPIC"), ["Orders"; 3]);
    assert!(t.column("STORE_TIME[UTC]").iter().all(|s| s.ends_with('Z')));

    // consume %DLQ%billing works like any topic, with a group that commits.
    let out = node.ctl(&[
        "consume",
        DLQ,
        "-g",
        "dlq-reader",
        "--count",
        "10",
        "--wait",
        "1s",
        "--json",
    ]);
    out.ok(&["consume", DLQ]);
    let read: Value = serde_json::from_str(&out.stdout).unwrap();
    let read = read["messages"].as_array().unwrap();
    assert_eq!(read.len(), 3, "{out:?}");
    for m in read {
        assert_eq!(m["properties"]["RETRY_TOPIC"], "Orders", "{m}");
        assert_eq!(m["queue"], 0);
    }
    let p = node.json(&["group", "progress", "dlq-reader", "--topic", DLQ]);
    let committed: Vec<u64> = p["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["topic"] == DLQ)
        .map(|q| q["consumer_offset"].as_u64().unwrap())
        .collect();
    assert_eq!(
        committed,
        [3],
        "dlq-reader committed past the dead letters: {p}"
    );

    // group progress: the dead letters are the group's DLQ lag.
    let p = node.json(&["group", "progress", GROUP, "--topic", "Orders"]);
    assert_eq!(p["summary"]["dlq_lag"], 3, "{p}");

    // resend-dlq --id: one message, the mark stays.
    let first = &sent[0];
    let r = node.json(&["group", "resend-dlq", GROUP, "--id", first]);
    assert_eq!(r["summary"]["resent"], 1, "{r}");
    assert_eq!(r["resent"][0]["unique_key"], first.as_str());
    assert_eq!(r["resent"][0]["topic"], "Orders");
    let p = node.json(&["group", "progress", GROUP, "--topic", "Orders"]);
    assert_eq!(
        p["summary"]["dlq_lag"], 3,
        "--id does not move the mark: {p}"
    );

    // resend-dlq: every one not resent yet, then nothing.
    let r = node.json(&["group", "resend-dlq", GROUP]);
    assert_eq!(r["summary"]["resent"], 3, "{r}");
    let again = node.json(&["group", "resend-dlq", GROUP]);
    assert_eq!(again["summary"]["resent"], 0, "{again}");
    let j = node.json(&["group", "dlq", GROUP]);
    assert_eq!(j["summary"]["not_resent"], 0, "{j}");
    assert!(j["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["resent"] == "yes"));
    let p = node.json(&["group", "progress", GROUP, "--topic", "Orders"]);
    assert_eq!(p["summary"]["dlq_lag"], 0, "{p}");

    // An id no dead letter has: one clear line, exit 1.
    let out = node.ctl(&["group", "resend-dlq", GROUP, "--id", "NO-SUCH-ID"]);
    let line = out.failed_one_line(&["resend-dlq", "--id"]);
    assert!(line.contains("NO-SUCH-ID"), "{line}");

    // The copies in Orders: 3 originals + 4 resent, each resent one as the application
    // sent it, without the broker's retry properties and with a new unique key.
    let out = node.ctl(&[
        "consume", "Orders", "--count", "20", "--wait", "1s", "--json",
    ]);
    out.ok(&["consume", "Orders"]);
    let all: Value = serde_json::from_str(&out.stdout).unwrap();
    let all = all["messages"].as_array().unwrap();
    assert_eq!(all.len(), 7, "{}", out.stdout);
    let copies: Vec<&Value> = all
        .iter()
        .filter(|m| !sent_uniq.contains(m["unique_key"].as_str().unwrap()))
        .collect();
    assert_eq!(copies.len(), 4);
    for c in copies {
        let body = c["body"].as_str().unwrap();
        assert!(body.starts_with("order "), "{c}");
        assert_eq!(c["tag"], "paid");
        let i = body.trim_start_matches("order ");
        assert_eq!(c["keys"], serde_json::json!([format!("k{i}")]), "{c}");
        let props = c["properties"].as_object().unwrap();
        assert_eq!(props["color"], "red", "{c}");
        for broker_key in [
            "RETRY_TOPIC",
            "ORIGIN_MESSAGE_ID",
            "RECONSUME_TIME",
            "MAX_RECONSUME_TIMES",
        ] {
            assert!(!props.contains_key(broker_key), "{broker_key} in {c}");
        }
        assert_eq!(c["reconsume_times"], 0);
    }
}

#[test]
fn no_dead_letters_is_an_empty_list() {
    let node = Node::start();
    let out = node.ctl(&["group", "dlq", "nobody", "--json"]);
    out.ok(&["group", "dlq"]);
    let j: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["dead_letters"], serde_json::json!([]));
    assert_eq!(j["summary"]["dead_letters"], 0);
    assert!(out.stderr.contains("no dead letters"), "{}", out.stderr);
    let out = node.ctl(&["group", "resend-dlq", "nobody"]);
    out.failed_one_line(&["resend-dlq"]);
}

/// `group update -r 0`: the group's failed messages go to its DLQ at their first send-back
/// (the pull consumer names no limit of its own); `--reset` drops the setting.
#[test]
fn a_groups_retry_limit_is_set_and_reset() {
    let node = Node::start();
    node.json(&["topic", "create", "Orders", "--queues", "2"]);
    let j = node.json(&["group", "update", GROUP, "-r", "0"]);
    let brokers = j["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1, "{j}");
    assert_eq!(brokers[0]["retry_max_times"], 0, "{j}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sent = rt.block_on(send_orders(&node.namesrv));
    rt.block_on(send_back_all(&node.namesrv, sent.len(), 0));
    let j = dlq_until(&node, sent.len());
    for l in j["dead_letters"].as_array().unwrap() {
        assert_eq!(l["original_topic"], "Orders", "{l}");
    }
    let j = node.json(&["group", "update", GROUP, "--reset"]);
    assert_eq!(j["brokers"].as_array().unwrap().len(), 1, "{j}");
    let out = node.ctl(&["group", "update", GROUP, "--reset"]);
    out.ok(&["group", "update", "--reset"]);
    assert!(out.stderr.contains("had no settings"), "{}", out.stderr);
    let out = node.ctl(&["group", "update", GROUP]);
    assert_ne!(out.code, 0, "update without -r or --reset succeeded");
}

/// Sends `order <i>` with tag `paid`, key `k<i>` and property color=red; their unique keys.
async fn send_orders(namesrv: &str) -> Vec<String> {
    let p = Producer::builder()
        .name_servers(namesrv)
        .group("orders-producer")
        .start()
        .await
        .unwrap();
    let mut keys = Vec::new();
    for i in 0..3 {
        let m = Message::new("Orders", format!("order {i}"))
            .with_tag("paid")
            .with_key(format!("k{i}"))
            .with_property("color", "red");
        let r = p.send(m).await.unwrap();
        keys.push(r.unique_key.clone());
    }
    p.shutdown().await;
    keys
}

/// Group `billing` reads `n` messages of Orders and sends each back straight to its DLQ.
async fn dead_letter_all(namesrv: &str, n: usize) {
    send_back_all(namesrv, n, -1).await;
}

/// Group `billing` reads `n` messages of Orders and sends each back with `delay_level`.
async fn send_back_all(namesrv: &str, n: usize, delay_level: i32) {
    let c = PullConsumer::builder()
        .name_servers(namesrv)
        .group(GROUP)
        .start_position(StartPosition::First)
        .start()
        .await
        .unwrap();
    let queues: Vec<MessageQueue> = c.fetch_queues("Orders").await.unwrap();
    c.assign(queues);
    let mut got: Vec<ReceivedMessage> = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "read {} of {n} orders",
            got.len()
        );
        got.extend(c.poll(Duration::from_millis(500)).await.unwrap());
    }
    for m in &got {
        c.send_back(m, delay_level).await.unwrap();
    }
    c.shutdown().await;
}

/// `group dlq billing --json` once it lists `n` dead letters.
fn dlq_until(node: &Node, n: usize) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let j = node.json(&["group", "dlq", GROUP]);
        if j["dead_letters"].as_array().map_or(0, Vec::len) >= n {
            return j;
        }
        assert!(Instant::now() < deadline, "not {n} dead letters yet: {j}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A dead letter whose original topic is unknown (no RETRY_TOPIC property: here one sent
/// straight to the DLQ topic) cannot be resent: `resend-dlq` prints what it did and exits
/// non-zero, its last line saying how many it could not resend.
#[test]
fn resend_dlq_that_skips_a_dead_letter_fails() {
    let node = Node::start();
    let dlq = format!("%DLQ%{GROUP}");
    node.json(&["topic", "create", &dlq, "--queues", "1"]);
    node.json(&["send", &dlq, "orphan"]);
    let out = node.ctl(&["group", "resend-dlq", GROUP]);
    assert_ne!(out.code, 0, "resend-dlq succeeded:\n{}", out.stdout);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("1 dead letter(s) of group") && last.contains("could not be resent"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("SKIPPED"), "{}", out.stdout);
}
