//! `ringmq-perf e2e --pop --verify` against a real node: simple consumers (POP) of one group,
//! more of them than the topic has queues per shard, receive and ack every message; verify
//! finds nothing lost and the run counts no message delivered again after its ack was
//! acknowledged. Options POP cannot honour are refused by name.
#![allow(clippy::unwrap_used)]

mod common;

use common::{perf, read_json, Node};

#[test]
fn pop_e2e_loses_nothing_and_redelivers_no_acked_message() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_with(&dir.path().join("data"), &[]);
    let acks = dir.path().join("pop.acks");
    let json = dir.path().join("pop.json");
    let run = perf(&[
        "e2e",
        "-n",
        &node.namesrv,
        "--topic",
        "PopPerf",
        "--queues",
        "2",
        "--size",
        "128",
        "--count",
        "3000",
        "--pop",
        "--consumers",
        "3",
        "--pull-batch",
        "16",
        "--idle-exit",
        "3s",
        "-q",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = read_json(&json);
    assert_eq!(doc["acked"], 3000, "{doc}");
    assert_eq!(doc["lost"], 0, "{doc}");
    assert_eq!(doc["received"], 3000, "{doc}");
    assert_eq!(doc["pop"]["acked"], 3000, "{doc}");
    assert_eq!(doc["pop"]["acked_redelivered"], 0, "{doc}");
    assert_eq!(doc["pop"]["ack_refused"], 0, "{doc}");
    assert!(
        run.stdout
            .contains("0 delivered again after an acknowledged ack"),
        "{}",
        run.stdout
    );

    let refused = perf(&[
        "e2e",
        "-n",
        &node.namesrv,
        "--pop",
        "--fail-ratio",
        "0.1",
        "--count",
        "1",
    ]);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("--pop does not take --fail-ratio"),
        "{}",
        refused.stderr
    );
    node.stop();
}
