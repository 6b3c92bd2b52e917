//! `ringmq-ctl send --property` and `consume --sql` against a real standalone node (issue
//! #15): properties reach the record, the broker keeps exactly the matching messages
//! (missing properties never match), a malformed expression or property is one line on
//! stderr with exit 1 (2 for a bad command line), and a broker without
//! enablePropertyFilter=true refuses with one line.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use common::Node;
use serde_json::Value;

fn bodies(j: &Value) -> BTreeSet<String> {
    j["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn send_with_properties_and_consume_with_sql() {
    let node = Node::start_with(&["enablePropertyFilter=true"]);
    node.json(&["topic", "create", "Priced", "--queues", "2"]);
    for (body, props) in [
        ("cheap", vec!["price=5", "region=eu"]),
        ("mid", vec!["price=50", "region=us"]),
        ("dear", vec!["price=500", "region=eu"]),
        ("unpriced", vec!["region=eu"]),
        ("odd", vec!["price=n/a"]),
    ] {
        let mut args = vec!["send", "Priced", body, "--tag", "T"];
        for p in &props {
            args.extend(["--property", p]);
        }
        node.json(&args);
    }
    let consume =
        |expr: &str| bodies(&node.json(&["consume", "Priced", "--sql", expr, "--wait", "1s"]));
    assert_eq!(consume("price > 10"), set(&["mid", "dear"]));
    assert_eq!(consume("region = 'eu' AND price < 100"), set(&["cheap"]));
    assert_eq!(consume("price IS NULL"), set(&["unpriced"]));
    assert_eq!(
        consume("NOT (price BETWEEN 10 AND 100)"),
        set(&["cheap", "dear"])
    );
    assert_eq!(consume("TAGS = 'T' AND region IN ('us')"), set(&["mid"]));
    assert!(consume("price > 1000").is_empty());

    // The property is on the record as sent.
    let j = node.json(&["consume", "Priced", "--sql", "price = 50", "--wait", "1s"]);
    let props = j["messages"][0]["properties"].to_string();
    assert!(props.contains("price") && props.contains("50"), "{props}");

    // A malformed expression: one line, exit 1, the position and what was expected.
    let args = ["consume", "Priced", "--sql", "price >", "--wait", "1s"];
    let out = node.ctl(&args);
    assert_eq!(out.code, 1);
    let line = out.failed_one_line(&args);
    assert!(line.contains("at 7: expected a value after '>'"), "{line}");

    // A property without '=' is a bad command line.
    let args = ["send", "Priced", "x", "--property", "novalue"];
    let out = node.ctl(&args);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("expected KEY=VALUE"), "{}", out.stderr);
}

#[test]
fn consume_sql_on_a_broker_without_the_filter_is_refused() {
    let node = Node::start();
    node.json(&["topic", "create", "Plain", "--queues", "1"]);
    node.json(&["send", "Plain", "x", "--property", "n=1"]);
    let args = ["consume", "Plain", "--sql", "n = 1", "--wait", "1s"];
    let out = node.ctl(&args);
    assert_eq!(out.code, 1);
    let line = out.failed_one_line(&args);
    assert!(line.contains("enablePropertyFilter=false"), "{line}");
}

/// `consume --sql` without `-g` reads as a throwaway group that leaves nothing behind: no
/// `%RETRY%ringmq-ctl-...` topic on the broker (issue #36).
#[test]
fn consume_sql_without_a_group_leaves_no_retry_topic() {
    let node = Node::start_with(&["enablePropertyFilter=true"]);
    node.json(&["topic", "create", "Filtered", "--queues", "1"]);
    node.json(&["send", "Filtered", "x", "--property", "n=1"]);
    let j = node.json(&["consume", "Filtered", "--sql", "n = 1", "--wait", "1s"]);
    assert_eq!(j["messages"].as_array().unwrap().len(), 1, "{j}");
    // The broker registers a topic it creates with the name server at once; give it time.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let topics = node.json(&["topic", "list"]).to_string();
    assert!(!topics.contains("%RETRY%ringmq-ctl-"), "{topics}");
    // With -g the group is real: its retry topic is the broker's to keep.
    node.json(&[
        "consume", "Filtered", "--sql", "n = 1", "-g", "kept", "--wait", "1s",
    ]);
}
