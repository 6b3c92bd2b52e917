//! `ringmq-perf request` against a real node: every request of a counted run (closed loop,
//! then open loop with --rate) gets its reply, the table shows the round trip in µs, and
//! the JSON counts what was asked.
#![allow(clippy::unwrap_used)]

mod common;

use common::{perf, read_json, Node};

#[test]
fn every_request_of_a_run_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    let json = dir.path().join("request.json");
    for extra in [&[][..], &["--rate", "400", "--requesters", "2"][..]] {
        let mut args = vec![
            "request",
            "-n",
            &node.namesrv,
            "--topic",
            "PerfRequests",
            "--queues",
            "4",
            "--count",
            "300",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let run = perf(&args);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("latency µs"), "{}", run.stdout);
        assert!(run.stdout.contains("round trip"), "{}", run.stdout);
        let doc = read_json(&json);
        assert_eq!(doc["mode"], "request", "{doc}");
        assert_eq!(doc["messages"].as_u64(), Some(300), "{doc}");
        assert_eq!(doc["errors"].as_u64(), Some(0), "{doc}");
        assert!(doc["latency_us"]["p99"].as_u64().unwrap() > 0, "{doc}");
    }
}
