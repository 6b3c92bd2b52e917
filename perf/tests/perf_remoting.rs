//! `--protocol remoting` against a real standalone node: batched sends (JSON headers) and
//! single sends (binary headers) through RocketMQ's remoting protocol, then a remoting
//! catch-up pull of the topic, counting every message; a native consumer reads the same
//! messages; options the remoting driver does not implement are refused.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_stable_fields, perf, read_json, Node};

const SIZE: u64 = 256;

#[test]
fn remoting_produce_and_consume_count_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    let json = |name: &str| dir.path().join(name);
    let batched = json("batched.json");
    let p = perf(&[
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfRemoting",
        "--protocol",
        "remoting",
        "--size",
        "256",
        "--batch",
        "16",
        "--producers",
        "2",
        "--inflight",
        "4",
        "--count",
        "2000",
        "-q",
        "--json",
        batched.to_str().unwrap(),
    ]);
    assert_eq!(p.code, 0);
    let doc = read_json(&batched);
    assert_eq!(check_stable_fields(&doc), (2000, 0));
    assert_eq!(doc["bytes"].as_u64(), Some(2000 * SIZE));
    assert_eq!(doc["config"]["protocol"], "remoting");
    assert_eq!(doc["config"]["remoting_header"], "json");
    // The broker's CPU is counted the same way as for native runs.
    let source = format!("/proc of pid {}", node.pid());
    assert_eq!(doc["cpu"]["node_source"].as_str(), Some(source.as_str()));
    assert!(doc["cpu"]["node_us_per_msg"].as_f64().is_some(), "{doc}");

    let single = json("single.json");
    let p = perf(&[
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfRemoting",
        "--protocol",
        "remoting",
        "--remoting-header",
        "rocketmq",
        "--size",
        "256",
        "--batch",
        "1",
        "--count",
        "300",
        "-q",
        "--json",
        single.to_str().unwrap(),
    ]);
    assert_eq!(p.code, 0);
    let doc = read_json(&single);
    assert_eq!(check_stable_fields(&doc), (300, 0));
    assert_eq!(doc["config"]["remoting_header"], "rocketmq");

    // Native consumers share queues by group rebalance: two members starting together may
    // both read a queue for a moment (at-least-once), so the exact count runs with one. The
    // remoting driver splits the queues itself and never overlaps.
    for (protocol, file, consumers) in [
        ("remoting", "pull.json", "2"),
        ("native", "native-pull.json", "1"),
    ] {
        let out = json(file);
        let c = perf(&[
            "consume",
            "-n",
            &node.namesrv,
            "--topic",
            "PerfRemoting",
            "--protocol",
            protocol,
            "--consumers",
            consumers,
            "--pull-batch",
            "64",
            "--from",
            "first",
            "--idle-exit",
            "2s",
            "-q",
            "--json",
            out.to_str().unwrap(),
        ]);
        assert_eq!(c.code, 0, "{protocol}");
        let doc = read_json(&out);
        assert_eq!(check_stable_fields(&doc), (2300, 0), "{protocol}");
        assert_eq!(
            doc["foreign"].as_u64(),
            Some(0),
            "{protocol}: every body is perf's"
        );
        if protocol == "remoting" {
            // Every read queue of the topic (native consumers also own the retry queue).
            assert_eq!(doc["config"]["queues_assigned"].as_u64(), Some(8));
        }
        assert!(doc["cpu"]["node_us_per_msg"].as_f64().is_some(), "{doc}");
    }
    node.stop();
}

#[test]
fn remoting_refuses_what_it_does_not_drive() {
    let r = perf(&[
        "consume",
        "-n",
        "127.0.0.1:1",
        "--protocol",
        "remoting",
        "--orderly",
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("does not support --orderly"),
        "{}",
        r.stderr
    );
    let help = perf(&["produce", "--help"]);
    assert!(help.stdout.contains("--protocol"));
    assert!(help.stdout.contains("--remoting-header"));
}
