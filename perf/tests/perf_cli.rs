//! ringmq-perf against real processes: verify on a clean run (0 lost, the JSON's stable
//! fields), verify after data was deleted behind the broker's back (lost > 0, exit code 3),
//! `--embedded`, every mode's `--help`, and a bad name-server address.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_stable_fields, perf, read_json, Node};

const SIZE: u64 = 256;

#[test]
fn every_mode_has_help() {
    let top = perf(&["--help"]);
    assert_eq!(top.code, 0);
    for mode in ["produce", "consume", "e2e", "txn"] {
        assert!(top.stdout.contains(mode), "{mode} missing from --help");
    }
    let produce = perf(&["produce", "--help"]);
    assert_eq!(produce.code, 0);
    for flag in [
        "--namesrv",
        "--topic",
        "--size",
        "--batch",
        "--producers",
        "--inflight",
        "--count",
        "--duration",
        "--rate",
        "--flush-check",
        "--verify",
        "--json",
        "--html",
        "--embedded",
        "--payload",
        "--compress-over",
        "--compression",
    ] {
        assert!(produce.stdout.contains(flag), "produce --help lacks {flag}");
    }
    let consume = perf(&["consume", "--help"]);
    assert_eq!(consume.code, 0);
    for flag in [
        "--group",
        "--consumers",
        "--count",
        "--duration",
        "--idle-exit",
        "--verify",
        "--json",
        "--html",
        "--embedded",
        "--fail-ratio",
        "--fail-times",
        "--max-reconsume",
        "--orderly",
        "--consumer-churn",
    ] {
        assert!(consume.stdout.contains(flag), "consume --help lacks {flag}");
    }
    let e2e = perf(&["e2e", "--help"]);
    assert_eq!(e2e.code, 0);
    for flag in [
        "--producers",
        "--consumers",
        "--rate",
        "--embedded",
        "--json",
        "--html",
        "--fail-ratio",
        "--fail-times",
        "--max-reconsume",
        "--orderly",
        "--consumer-churn",
    ] {
        assert!(e2e.stdout.contains(flag), "e2e --help lacks {flag}");
    }
    let txn = perf(&["txn", "--help"]);
    assert_eq!(txn.code, 0);
    for flag in [
        "--commit-ratio",
        "--rollback-ratio",
        "--unknown-ratio",
        "--settle-timeout",
        "--producers",
        "--inflight",
        "--count",
        "--duration",
        "--verify",
        "--json",
        "--html",
        "--embedded",
    ] {
        assert!(txn.stdout.contains(flag), "txn --help lacks {flag}");
    }
}

#[test]
fn verify_clean_run_reports_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    let acks = dir.path().join("acks");
    let (pj, cj) = (
        dir.path().join("produce.json"),
        dir.path().join("consume.json"),
    );
    let (acks_s, pj_s, cj_s) = (
        acks.to_str().unwrap(),
        pj.to_str().unwrap(),
        cj.to_str().unwrap(),
    );
    let p = perf(&[
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfClean",
        "--size",
        "256",
        "--count",
        "2000",
        "--batch",
        "8",
        "--producers",
        "2",
        "--verify",
        acks_s,
        "--json",
        pj_s,
    ]);
    assert_eq!(p.code, 0);
    assert!(p.stdout.contains("acked from page cache"), "{}", p.stdout);
    let doc = read_json(&pj);
    let (messages, errors) = check_stable_fields(&doc);
    assert_eq!((messages, errors), (2000, 0));
    assert_eq!(doc["bytes"].as_u64(), Some(2000 * SIZE));
    assert_eq!(doc["mode"], "produce");
    assert_eq!(doc["durability"], "acked from page cache");
    // The node is a local process: its CPU is read from /proc, found by its address.
    let source = format!("/proc of pid {}", node.pid());
    assert_eq!(doc["cpu"]["node_source"].as_str(), Some(source.as_str()));
    assert!(doc["cpu"]["node_us_per_msg"].as_f64().is_some(), "{doc}");
    assert!(
        doc["cpu"]["generator_us_per_msg"].as_f64().is_some(),
        "{doc}"
    );
    assert!(
        p.stdout.contains("CPU per message (2,000 messages)"),
        "{}",
        p.stdout
    );
    let lines = std::fs::read_to_string(&acks).unwrap();
    assert_eq!(lines.lines().filter(|l| !l.starts_with('#')).count(), 2000);

    let c = perf(&[
        "consume",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfClean",
        "--consumers",
        "2",
        "--idle-exit",
        "2s",
        "--verify",
        acks_s,
        "--json",
        cj_s,
    ]);
    assert_eq!(c.code, 0, "a clean run must verify");
    let doc = read_json(&cj);
    let (messages, _) = check_stable_fields(&doc);
    assert!(messages >= 2000, "consumed {messages}");
    for (field, want) in [
        ("acked", 2000),
        ("received", 2000),
        ("lost", 0),
        ("out_of_order", 0),
    ] {
        assert_eq!(doc[field].as_u64(), Some(want), "{field}");
    }
    assert!(doc["duplicates"].is_u64());
    let per_queue = doc["per_queue"].as_object().unwrap();
    assert_eq!(per_queue.len(), 8, "8 queues of broker-a");
    let sum: u64 = per_queue
        .values()
        .map(|v| v["received"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 2000);
    assert!(c.stdout.contains("lost 0"), "{}", c.stdout);
    node.stop();
}

#[test]
fn verify_reports_loss_when_a_queue_is_deleted_behind_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let node = Node::start(&data);
    let acks = dir.path().join("acks");
    let cj = dir.path().join("consume.json");
    let (acks_s, cj_s) = (acks.to_str().unwrap(), cj.to_str().unwrap());
    let p = perf(&[
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfLoss",
        "--size",
        "256",
        "--count",
        "1600",
        "--verify",
        acks_s,
        "-q",
    ]);
    assert_eq!(p.code, 0);
    node.stop();

    // Behind the broker's back: queue 3's ConsumeQueue goes. The log still holds the
    // records, but recovery starts at the checkpoint, so nothing rebuilds the queue.
    let q3 = data.join("consumequeue").join("PerfLoss").join("3");
    assert!(q3.is_dir(), "{} should exist", q3.display());
    std::fs::remove_dir_all(&q3).unwrap();
    let acked_q3 = std::fs::read_to_string(&acks)
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(3) == Some("3"))
        .count() as u64;
    assert!(acked_q3 > 0);

    let node = Node::start(&data);
    let c = perf(&[
        "consume",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfLoss",
        "--idle-exit",
        "2s",
        "--verify",
        acks_s,
        "--json",
        cj_s,
    ]);
    assert_eq!(c.code, 3, "lost messages must fail the run");
    let doc = read_json(&cj);
    check_stable_fields(&doc);
    assert_eq!(doc["acked"].as_u64(), Some(1600));
    assert_eq!(doc["lost"].as_u64(), Some(acked_q3));
    assert_eq!(
        doc["per_queue"]["broker-a:3"]["lost"].as_u64(),
        Some(acked_q3)
    );
    assert_eq!(doc["per_queue"]["broker-a:2"]["lost"].as_u64(), Some(0));
    assert!(c.stdout.contains("lost: producer"), "{}", c.stdout);
    node.stop();
}

#[test]
fn embedded_node_runs_e2e_and_produce() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("e2e.json");
    let acks = dir.path().join("acks");
    let seg = format!("mappedFileSizeCommitLog={}", common::SEGMENT_BYTES);
    let e = perf(&[
        "e2e",
        "--embedded",
        "--embedded-shards",
        "1",
        "--embedded-set",
        &seg,
        "--topic",
        "PerfEmbedded",
        "--count",
        "500",
        "--size",
        "128",
        "--batch",
        "4",
        "--idle-exit",
        "5s",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        j.to_str().unwrap(),
    ]);
    assert_eq!(e.code, 0);
    assert!(e.stderr.contains("embedded node started"), "{}", e.stderr);
    assert!(
        e.stdout.contains("embedded node"),
        "CPU split missing: {}",
        e.stdout
    );
    let doc = read_json(&j);
    let (messages, errors) = check_stable_fields(&doc);
    assert_eq!((messages, errors), (500, 0));
    assert_eq!(doc["send"]["messages"].as_u64(), Some(500));
    assert_eq!(doc["lost"].as_u64(), Some(0));
    assert_eq!(doc["cpu"]["embedded"], true);
    assert!(doc["cpu"]["node_threads"].as_u64().unwrap() >= 2);
    assert_eq!(doc["cpu"]["node_source"], "embedded node threads");
    assert!(doc["cpu"]["node_us_per_msg"].as_f64().is_some(), "{doc}");

    let p = perf(&[
        "produce",
        "--embedded",
        "--embedded-flush",
        "sync",
        "--embedded-set",
        &seg,
        "--count",
        "200",
        "--size",
        "64",
        "--flush-check",
    ]);
    assert_eq!(p.code, 0);
    assert!(p.stdout.contains("acked after fdatasync"), "{}", p.stdout);
}

#[test]
fn bad_name_server_fails_with_a_reason() {
    let r = perf(&["produce", "-n", "127.0.0.1:1", "--count", "1", "-q"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("ringmq-perf:"), "{}", r.stderr);
    let r = perf(&["consume", "-n", "127.0.0.1:1", "--count", "1", "-q"]);
    assert_eq!(r.code, 1);
}

/// `--compress-over` sends bodies compressed, `--payload random` bodies that do not compress;
/// either way consumers count and read every body as sent (the client inflates). How much
/// the log grows is checked by the client's own test (`client/tests/compressed.rs`).
#[test]
fn compressed_and_random_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    for (topic, extra) in [
        ("PerfZlib", vec!["--compress-over", "4096"]),
        (
            "PerfZstd",
            vec!["--compress-over", "4096", "--compression", "zstd"],
        ),
        (
            "PerfRandom",
            vec!["--payload", "random", "--compress-over", "4096"],
        ),
    ] {
        let json = dir.path().join(format!("{topic}.json"));
        let mut args = vec![
            "produce",
            "-n",
            &node.namesrv,
            "--topic",
            topic,
            "--size",
            "16384",
            "--count",
            "200",
            "--batch",
            "10",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend(extra.iter().copied());
        let p = perf(&args);
        assert_eq!(p.code, 0, "{topic}: {}{}", p.stdout, p.stderr);
        let doc = read_json(&json);
        assert_eq!(check_stable_fields(&doc), (200, 0), "{topic}");
        assert_eq!(doc["config"]["compress_over"], 4096, "{topic}");
        let cj = dir.path().join(format!("{topic}-c.json"));
        let c = perf(&[
            "consume",
            "-n",
            &node.namesrv,
            "--topic",
            topic,
            "--from",
            "first",
            "--idle-exit",
            "2s",
            "-q",
            "--json",
            cj.to_str().unwrap(),
        ]);
        assert_eq!(c.code, 0, "{topic}");
        let cdoc = read_json(&cj);
        assert_eq!(
            check_stable_fields(&cdoc),
            (200, 0),
            "{topic}: every message back"
        );
        assert_eq!(
            cdoc["foreign"].as_u64(),
            Some(0),
            "{topic}: bodies read as sent"
        );
        assert_eq!(
            cdoc["bytes"].as_u64(),
            Some(200 * 16384),
            "{topic}: original sizes"
        );
    }
    node.stop();
}
