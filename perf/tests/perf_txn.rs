//! `ringmq-perf txn` against a real node that checks back fast (`transactionTimeOut=300`,
//! `transactionCheckInterval=300` ms): with commits, rollbacks and unknowns, every
//! transaction is decided, every committed message delivered, no rolled-back one, and the
//! counts add up; the same across a kill -9 of the broker (restarted on its ports and data)
//! in the middle of the run; and with `--consumers 0` (decisions only, deliveries not
//! checked). The expected counts come from perf's own report and decision log, never from
//! timing.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use common::{finish, free_ports, perf, read_json, spawn_perf, Node};
use serde_json::Value;

const FAST_CHECKS: [&str; 2] = ["transactionTimeOut=300", "transactionCheckInterval=300"];

fn n(doc: &Value, path: &[&str]) -> u64 {
    let mut v = doc;
    for p in path {
        v = &v[p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("{path:?} missing in {doc}"))
}

/// The decision log: (producer, sequence) -> commit, and how many lines said "check".
fn decision_log(path: &Path) -> (HashMap<(String, u64), bool>, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = HashMap::new();
    let mut by_check = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w.len(), 4, "{line:?}");
        let commit = match w[2] {
            "commit" => true,
            "rollback" => false,
            other => panic!("{other:?} in {line:?}"),
        };
        if w[3] == "check" {
            by_check += 1;
        }
        let prev = out.insert((w[0].to_string(), w[1].parse().unwrap()), commit);
        assert!(
            prev.is_none_or(|p| p == commit),
            "two decisions for {line:?}"
        );
    }
    (out, by_check)
}

fn txn_args<'a>(namesrv: &'a str, topic: &'a str, log: &'a str, json: &'a str) -> Vec<&'a str> {
    vec![
        "txn",
        "-n",
        namesrv,
        "--topic",
        topic,
        "--size",
        "128",
        "--rollback-ratio",
        "0.25",
        "--unknown-ratio",
        "0.25",
        "--commit-ratio",
        "0.5",
        "--producers",
        "2",
        "--heartbeat-interval",
        "500ms",
        "--settle-timeout",
        "60s",
        "-q",
        "--verify",
        log,
        "--json",
        json,
    ]
}

/// What every run must show: all decided, nothing committed lost, nothing rolled back
/// delivered, the counts adding up with the decision log.
fn check_run(doc: &Value, log: &Path) {
    let txn = &doc["txn"];
    let (committed, rolled_back) = (
        n(doc, &["txn", "committed"]),
        n(doc, &["txn", "rolled_back"]),
    );
    assert_eq!(n(doc, &["txn", "pending"]), 0, "{txn}");
    assert_eq!(txn["settled"], true, "{txn}");
    assert_eq!(n(doc, &["lost"]), 0, "{doc}");
    assert_eq!(n(doc, &["rolled_back_delivered"]), 0, "{doc}");
    assert_eq!(n(doc, &["acked"]), committed, "{doc}");
    assert_eq!(n(doc, &["received"]), committed, "{doc}");
    assert!(committed > 0 && rolled_back > 0, "{txn}");
    assert!(n(doc, &["txn", "unknown"]) > 0, "{txn}");
    assert!(
        n(doc, &["txn", "checked"]) >= n(doc, &["txn", "unknown"]),
        "every unknown one was decided by a check-back: {txn}"
    );
    let (decisions, by_check) = decision_log(log);
    let commits = decisions.values().filter(|c| **c).count() as u64;
    assert_eq!(commits, committed, "{txn}");
    assert_eq!(decisions.len() as u64 - commits, rolled_back, "{txn}");
    assert!(by_check as u64 >= n(doc, &["txn", "unknown"]), "{txn}");
}

#[test]
fn commit_rollback_and_unknown_nothing_lost_nothing_rolled_back_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_with(&dir.path().join("data"), &FAST_CHECKS);
    let log = dir.path().join("txn.log");
    let json = dir.path().join("txn.json");
    let mut args = txn_args(
        &node.namesrv,
        "TxnClean",
        log.to_str().unwrap(),
        json.to_str().unwrap(),
    );
    args.extend(["--count", "600"]);
    let run = perf(&args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc = read_json(&json);
    check_run(&doc, &log);
    assert_eq!(
        n(&doc, &["txn", "committed"]) + n(&doc, &["txn", "rolled_back"]),
        600,
        "{doc}"
    );
    assert_eq!(n(&doc, &["duplicates"]), 0, "{doc}");
    assert!(
        run.stdout.contains("rolled_back_delivered 0"),
        "{}",
        run.stdout
    );

    // --consumers 0: decisions only; what was not checked is null, not 0.
    let json0 = dir.path().join("txn0.json");
    let run = perf(&[
        "txn",
        "-n",
        &node.namesrv,
        "--topic",
        "TxnNoConsumer",
        "--size",
        "64",
        "--count",
        "200",
        "--unknown-ratio",
        "0.5",
        "--consumers",
        "0",
        "-q",
        "--json",
        json0.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc = read_json(&json0);
    assert_eq!(n(&doc, &["txn", "pending"]), 0, "{doc}");
    assert_eq!(
        n(&doc, &["txn", "committed"]) + n(&doc, &["txn", "rolled_back"]),
        200,
        "{doc}"
    );
    assert!(
        doc["lost"].is_null() && doc["rolled_back_delivered"].is_null(),
        "{doc}"
    );
    node.stop();
}

#[test]
fn broker_kill_9_mid_run_loses_no_commit_and_delivers_no_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ports = free_ports();
    let node = Node::start_at(&data, ports, &FAST_CHECKS);
    let namesrv = node.namesrv.clone();
    let log = dir.path().join("txn.log");
    let json = dir.path().join("txn.json");
    let mut args = txn_args(
        &namesrv,
        "TxnKill",
        log.to_str().unwrap(),
        json.to_str().unwrap(),
    );
    args.extend(["--duration", "6s", "--send-timeout", "1s"]);
    let child = spawn_perf(&args);
    // Let transactions flow (the log grows), then kill the broker with halves pending.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&log).map_or(0, |t| t.lines().count()) < 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "no transactions within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    node.kill();
    let node = Node::start_at(&data, ports, &FAST_CHECKS);
    let run = finish(child, &args, Duration::from_secs(120));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc = read_json(&json);
    check_run(&doc, &log);
    node.stop();
}
