//! Queries by time through `ringmq-ctl` against a real standalone node: `msg time` returns
//! exactly the messages stored in [--begin, --end), `group reset-offset --timestamp` moves a
//! group to the first message stored at or after a time, and a range that ends before it
//! begins or an unreadable time is refused with one line (exit 1 and 2).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::Node;
use serde_json::Value;

/// Sends `body` to one-queue topic Timed; its store time (ms).
fn send(node: &Node, body: &str) -> i64 {
    node.json(&["send", "Timed", body]);
    // The newest message of the one queue is the one just sent.
    let j = node.json(&[
        "msg", "dump", "Timed", "-q", "0", "-o", "0", "--count", "100",
    ]);
    let msgs = j["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(last["body"], body, "{j}");
    last["store_time_ms"].as_i64().unwrap()
}

fn bodies(j: &Value) -> Vec<String> {
    j["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn messages_by_time_and_offsets_reset_to_a_time() {
    let node = Node::start();
    node.json(&["topic", "create", "Timed", "--queues", "1"]);
    let mut stored = Vec::new();
    for b in ["first", "second", "third"] {
        stored.push(send(&node, b));
        // Lets the clock move on: each message gets a store time of its own.
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(stored[0] < stored[1] && stored[1] < stored[2], "{stored:?}");
    let s = |i: usize| stored[i].to_string();
    let e = |i: usize| (stored[i] + 1).to_string();

    let j = node.json(&["msg", "time", "Timed", "--begin", &s(1), "--end", &e(1)]);
    assert_eq!(bodies(&j), vec!["second"]);
    let j = node.json(&["msg", "time", "Timed", "--begin", &s(1)]);
    assert_eq!(bodies(&j), vec!["second", "third"]);
    let j = node.json(&["msg", "time", "Timed", "--begin", &s(0), "--end", &s(2)]);
    assert_eq!(bodies(&j), vec!["first", "second"]);
    let out = node.ctl(&["msg", "time", "Timed", "--begin", &e(2), "--end", &e(2)]);
    out.ok(&["msg", "time"]);
    assert!(out.stderr.contains("no message"), "{}", out.stderr);

    // Refusals: one line each.
    let out = node.ctl(&["msg", "time", "Timed", "--begin", &s(2), "--end", &s(0)]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("before it begins"), "{}", out.stderr);
    let out = node.ctl(&["msg", "time", "Timed", "--begin", "yesterday"]);
    assert_eq!(out.code, 2, "{}", out.stderr);

    // consume --from-time: from the first message stored at or after the time.
    let j = node.json(&["consume", "Timed", "--from-time", &s(1), "--wait", "1s"]);
    assert_eq!(bodies(&j), vec!["second", "third"]);

    // reset-offset --timestamp (mqadmin's resetOffsetByTime) = --to TIME.
    let j = node.json(&[
        "group",
        "reset-offset",
        "timed-readers",
        "-t",
        "Timed",
        "--timestamp",
        &s(1),
    ]);
    let offsets = j["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 1, "{j}");
    assert_eq!(offsets[0]["new_offset"], 1, "{j}");
}
