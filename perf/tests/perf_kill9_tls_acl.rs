//! `kill -9` of a `ringmq standalone` node under TLS and ACL loses nothing acknowledged: the
//! node runs with every listener enforcing TLS (`tls.server.mode=enforcing`, its broker
//! registering with its own name server over TLS), `aclEnable=true`, SYNC_FLUSH and 8 MiB
//! log segments; `ringmq-perf produce --verify` sends over TLS signed by an account that may
//! only publish to the topic; the node is killed with SIGKILL mid-stream and started again
//! on the same data and ports with the same settings while the producer keeps going (it
//! reconnects over TLS); then `ringmq-perf consume --verify`, over TLS and signed by an
//! account that may only subscribe, must find every acknowledged message: the ones
//! acknowledged before the kill, and the ones after the restart. Unacknowledged sends (in
//! flight at the kill) may show up or not, and may be duplicated.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{acked_lines, finish, free_ports, perf_env, read_json, spawn_perf_env, Node};
use ringmq_testkit::certs::TestPki;

const TOPIC: &str = "Kill9Tls";
const GROUP: &str = "kill9-readers";
const ROOT_SECRET: &str = "root-secret-k9";
const PRODUCER_SECRET: &str = "producer-secret-k9";
const CONSUMER_SECRET: &str = "consumer-secret-k9";
/// Acknowledged sends the producer must have logged before the kill.
const BEFORE_KILL: usize = 1500;

/// The ACL file: the inner admin, a producer that may only publish to [`TOPIC`], a consumer
/// that may only subscribe to it in [`GROUP`].
fn acl_yaml() -> String {
    format!(
        "accounts:\n\
         \x20 - accessKey: root\n\
         \x20   secretKey: {ROOT_SECRET}\n\
         \x20   admin: true\n\
         \x20 - accessKey: producer\n\
         \x20   secretKey: {PRODUCER_SECRET}\n\
         \x20   admin: false\n\
         \x20   defaultTopicPerm: DENY\n\
         \x20   defaultGroupPerm: DENY\n\
         \x20   topicPerms:\n\
         \x20     - {TOPIC}=PUB\n\
         \x20 - accessKey: consumer\n\
         \x20   secretKey: {CONSUMER_SECRET}\n\
         \x20   admin: false\n\
         \x20   defaultTopicPerm: DENY\n\
         \x20   defaultGroupPerm: DENY\n\
         \x20   topicPerms:\n\
         \x20     - {TOPIC}=SUB\n\
         \x20   groupPerms:\n\
         \x20     - {GROUP}=SUB\n"
    )
}

/// The node's settings, the same at the first start and at the restart.
fn node_sets(pki: &TestPki, acl: &Path) -> Vec<String> {
    let path = |k: &str, p: &Path| format!("{k}={}", p.display());
    vec![
        "flushDiskType=SYNC_FLUSH".to_string(),
        "tls.server.mode=enforcing".to_string(),
        path("tls.server.certPath", &pki.server_cert),
        path("tls.server.keyPath", &pki.server_key),
        "tls.enable=true".to_string(),
        path("tls.client.trustCertPath", &pki.ca),
        "aclEnable=true".to_string(),
        path("aclFilePath", acl),
        "innerAccessKey=root".to_string(),
        format!("innerSecretKey={ROOT_SECRET}"),
    ]
}

fn start(data: &Path, ports: (u16, u16), sets: &[String]) -> Node {
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    Node::start_at(data, ports, &sets)
}

fn n(doc: &serde_json::Value, field: &str) -> u64 {
    doc[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing in {doc}"))
}

#[test]
fn kill9_under_tls_and_acl_with_sync_flush_loses_no_acknowledged_message() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, acl_yaml()).unwrap();
    let sets = node_sets(&pki, &acl);
    let data = dir.path().join("data");
    let ports = free_ports();
    let node = start(&data, ports, &sets);
    let namesrv = node.namesrv.clone();
    let ca = pki.ca.to_str().unwrap().to_string();

    // The topic, made by the admin (the producer may not create topics): one message, not
    // in any verify log.
    let setup = perf_env(
        &[
            "produce",
            "-n",
            &namesrv,
            "--topic",
            TOPIC,
            "--queues",
            "8",
            "--size",
            "64",
            "--count",
            "1",
            "--ca",
            &ca,
            "--access-key",
            "root",
            "--quiet",
        ],
        &[("RINGMQ_SECRET_KEY", ROOT_SECRET)],
    );
    assert_eq!(setup.code, 0, "creating the topic: {}", setup.stderr);

    // The producer: over TLS, signed by `producer`, for long enough to span the kill and
    // the restart.
    let acks = dir.path().join("acks");
    let pj = dir.path().join("produce.json");
    let produce_args = [
        "produce",
        "-n",
        &namesrv,
        "--topic",
        TOPIC,
        "--size",
        "256",
        "--producers",
        "2",
        "--inflight",
        "8",
        "--duration",
        "8s",
        "--send-timeout",
        "1s",
        "--ca",
        &ca,
        "--access-key",
        "producer",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        pj.to_str().unwrap(),
        "--quiet",
    ];
    let producer = spawn_perf_env(&produce_args, &[("RINGMQ_SECRET_KEY", PRODUCER_SECRET)]);

    // Kill mid-stream, once enough sends are acknowledged (fdatasynced) and logged.
    let deadline = Instant::now() + Duration::from_secs(20);
    while acked_lines(&acks) < BEFORE_KILL {
        assert!(
            Instant::now() < deadline,
            "fewer than {BEFORE_KILL} acknowledged sends within 20 s ({} so far)",
            acked_lines(&acks)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    node.kill();
    // The process is reaped: every line logged so far was acknowledged by the killed node.
    let acked_before_kill = acked_lines(&acks);

    let restarted = Instant::now();
    let node = start(&data, ports, &sets);
    let restart_took = restarted.elapsed();

    let run = finish(producer, &produce_args, Duration::from_secs(60));
    assert_eq!(run.code, 0, "produce:\n{}{}", run.stdout, run.stderr);
    let doc = read_json(&pj);
    assert_eq!(doc["durability"], "acked after fdatasync", "{doc}");
    assert_eq!(doc["config"]["tls"], true, "{doc}");
    assert_eq!(doc["config"]["access_key"], "producer", "{doc}");
    assert!(
        n(&doc, "errors") > 0,
        "the producer should have seen the node die: {doc}"
    );
    let acked = acked_lines(&acks);
    assert!(
        acked > acked_before_kill,
        "no send acknowledged by the restarted node ({acked} in all, {acked_before_kill} \
         before the kill)"
    );

    // Read everything back over TLS as `consumer`, checked against the log.
    let cj = dir.path().join("consume.json");
    let consume_args = [
        "consume",
        "-n",
        &namesrv,
        "--topic",
        TOPIC,
        "--group",
        GROUP,
        "--consumers",
        "2",
        "--idle-exit",
        "2s",
        "--ca",
        &ca,
        "--access-key",
        "consumer",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        cj.to_str().unwrap(),
    ];
    let c = perf_env(&consume_args, &[("RINGMQ_SECRET_KEY", CONSUMER_SECRET)]);
    assert_eq!(c.code, 0, "consume --verify:\n{}{}", c.stdout, c.stderr);
    let doc = read_json(&cj);
    assert_eq!(doc["config"]["tls"], true, "{doc}");
    assert_eq!(doc["config"]["access_key"], "consumer", "{doc}");
    assert_eq!(n(&doc, "acked"), acked as u64, "{doc}");
    assert_eq!(n(&doc, "lost"), 0, "{doc}");
    assert_eq!(n(&doc, "received"), acked as u64, "{doc}");
    assert_eq!(n(&doc, "misplaced"), 0, "{doc}");
    assert!(n(&doc, "messages") >= acked as u64, "{doc}");
    for (path, secret) in [
        (&acks, PRODUCER_SECRET),
        (&pj, PRODUCER_SECRET),
        (&cj, CONSUMER_SECRET),
    ] {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains(secret), "{} shows a secret", path.display());
    }
    eprintln!(
        "kill -9 under TLS + ACL + SYNC_FLUSH: {acked_before_kill} acknowledged before the \
         kill, {acked} in all; consumed {} ({} unlisted: the admin's topic-making message and \
         sends in flight at the kill; {} duplicates), {} received of {} acknowledged, {} lost; \
         restart took {restart_took:?}, test {:?}",
        n(&doc, "messages"),
        n(&doc, "unlisted"),
        n(&doc, "duplicates"),
        n(&doc, "received"),
        n(&doc, "acked"),
        n(&doc, "lost"),
        started.elapsed()
    );
    node.stop();
}
