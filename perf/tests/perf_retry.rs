//! ringmq-perf's failure, retry and orderly verification against a real node with short
//! delay levels (100 ms .. 400 ms, so a message's retries take well under a second):
//! - `--fail-ratio` with `--max-reconsume 2`: every chosen message ends in the group's
//!   dead-letter queue after 3 failed deliveries; verify counts it `dead_lettered`, nothing
//!   is lost, everything else is received;
//! - `--fail-times 2`: the chosen messages fail twice, then are delivered from the retry
//!   topic: nothing lost or dead-lettered;
//! - `--orderly` with failures: no message out of order, no two listener calls of one queue
//!   overlapping, the chosen messages dead-lettered; and with `--consumer-churn` (members
//!   stopped cleanly and aborted while messages flow): nothing lost, still in order and
//!   never concurrent.
//!
//! The expected counts come from perf's own report of which acked messages it chose
//! (`fail_chosen`), not from timing.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{perf, read_json, Node, Run};
use serde_json::Value;

const LEVELS: &str = "messageDelayLevel=100ms 100ms 100ms 200ms 200ms 300ms 300ms 400ms";

/// `ringmq-perf e2e` on `topic` with --verify and --json; the run and its JSON.
fn e2e(node: &Node, dir: &Path, topic: &str, extra: &[&str]) -> (Run, Value) {
    let acks = dir.join(format!("{topic}.acks"));
    let json = dir.join(format!("{topic}.json"));
    let mut args = vec![
        "e2e",
        "-n",
        &node.namesrv,
        "--topic",
        topic,
        "--size",
        "128",
        "--idle-exit",
        "3s",
        "-q",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = perf(&args);
    let doc = read_json(&json);
    (run, doc)
}

fn n(doc: &Value, field: &str) -> u64 {
    doc[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing in {doc}"))
}

#[test]
fn failed_messages_retry_then_dead_letter() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_with(&dir.path().join("data"), &[LEVELS]);

    // Every delivery of the chosen messages fails: dead letters after 1 + 2 deliveries.
    let (run, doc) = e2e(
        &node,
        dir.path(),
        "RetryDead",
        &[
            "--count",
            "400",
            "--fail-ratio",
            "0.05",
            "--max-reconsume",
            "2",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let chosen = n(&doc, "fail_chosen");
    assert!(chosen > 0, "0.05 of 400 chose none: {doc}");
    assert_eq!(n(&doc, "acked"), 400);
    assert_eq!(n(&doc, "lost"), 0, "{doc}");
    assert_eq!(n(&doc, "dead_lettered"), chosen, "{doc}");
    assert_eq!(n(&doc, "received"), 400 - chosen, "{doc}");
    assert!(n(&doc, "failed_deliveries") >= 3 * chosen, "{doc}");
    assert!(n(&doc, "retry_deliveries") >= 2 * chosen, "{doc}");
    assert!(
        run.stdout.contains(&format!("dead_lettered {chosen}")),
        "{}",
        run.stdout
    );

    // Only the first 2 deliveries fail: delivered on the second retry, none dead.
    let (run, doc) = e2e(
        &node,
        dir.path(),
        "RetryOk",
        &[
            "--count",
            "400",
            "--fail-ratio",
            "0.05",
            "--fail-times",
            "2",
            "--max-reconsume",
            "3",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let chosen = n(&doc, "fail_chosen");
    assert!(chosen > 0, "{doc}");
    assert_eq!(n(&doc, "lost"), 0, "{doc}");
    assert_eq!(n(&doc, "dead_lettered"), 0, "{doc}");
    assert_eq!(n(&doc, "received"), 400, "{doc}");
    assert_eq!(n(&doc, "failed_deliveries"), 2 * chosen, "{doc}");
    node.stop();
}

#[test]
fn orderly_stays_in_order_through_failures_and_churn() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_with(&dir.path().join("data"), &[LEVELS]);

    let (run, doc) = e2e(
        &node,
        dir.path(),
        "Orderly",
        &[
            "--count",
            "400",
            "--consumers",
            "2",
            "--orderly",
            "--fail-ratio",
            "0.03",
            "--max-reconsume",
            "1",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let chosen = n(&doc, "fail_chosen");
    assert!(chosen > 0, "{doc}");
    assert_eq!(n(&doc, "lost"), 0, "{doc}");
    assert_eq!(n(&doc, "out_of_order"), 0, "{doc}");
    assert_eq!(n(&doc, "concurrent"), 0, "{doc}");
    assert_eq!(n(&doc, "dead_lettered"), chosen, "{doc}");
    assert_eq!(
        n(&doc, "retry_deliveries"),
        0,
        "orderly retries in place: {doc}"
    );

    // Members replaced every second, alternately cleanly and aborted, while ~4 s of
    // messages flow.
    let (run, doc) = e2e(
        &node,
        dir.path(),
        "OrderlyChurn",
        &[
            "--rate",
            "200",
            "--count",
            "800",
            "--consumers",
            "2",
            "--orderly",
            "--consumer-churn",
            "1s",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(n(&doc, "acked"), 800);
    assert_eq!(n(&doc, "lost"), 0, "{doc}");
    assert_eq!(n(&doc, "out_of_order"), 0, "{doc}");
    assert_eq!(n(&doc, "concurrent"), 0, "{doc}");
    assert!(n(&doc, "consumers_stopped_clean") >= 1, "{doc}");
    assert!(n(&doc, "consumers_aborted") >= 1, "{doc}");
    node.stop();
}
