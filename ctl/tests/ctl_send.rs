//! `ringmq-ctl send` against a real standalone node: without flags it picks the queue as
//! the producer does (round robin from a random start, so one-shot sends spread over the
//! queues); `--queue`, `--broker` and `--sharding-key` choose it; a queue or broker that
//! does not exist is refused with one line and exit 1.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use common::Node;

#[test]
fn send_picks_or_takes_its_queue() {
    let node = Node::start();
    node.json(&["topic", "create", "Spread", "--queues", "4"]);
    let queue_of = |args: &[&str]| -> u64 {
        let mut all = vec!["send", "Spread", "body"];
        all.extend_from_slice(args);
        let j = node.json(&all);
        j["sent"]["queue"].as_u64().unwrap()
    };
    // 20 one-shot sends: all on one queue would mean every producer starts at the same one.
    let used: BTreeSet<u64> = (0..20).map(|_| queue_of(&[])).collect();
    assert!(used.len() > 1, "20 sends all went to queue {used:?}");

    assert_eq!(queue_of(&["--queue", "2"]), 2);
    let broker = node.json(&["send", "Spread", "x"])["sent"]["broker"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(queue_of(&["--broker", &broker, "--queue", "3"]), 3);
    assert!(queue_of(&["--broker", &broker]) < 4);
    let a = queue_of(&["--sharding-key", "order-42"]);
    assert_eq!(queue_of(&["--sharding-key", "order-42"]), a);

    let out = node.ctl(&["send", "Spread", "x", "--queue", "9"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("no writable queue 9"), "{}", out.stderr);
    let out = node.ctl(&["send", "Spread", "x", "--broker", "nobody"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("broker nobody"), "{}", out.stderr);
    let out = node.ctl(&["send", "Spread", "x", "--queue", "1", "--sharding-key", "k"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
}
