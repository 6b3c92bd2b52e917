//! ringmq-perf's TLS and credential flags: the secret key never shows (`--help`, errors, the
//! table, the JSON report, on either protocol, against a node with ACL on), the report names
//! the access key and whether TLS was on, missing pieces fail before anything starts, and
//! both protocols run over TLS against a node whose listeners take TLS only.
#![allow(clippy::unwrap_used)]

mod common;

use common::{perf_env, read_json, Node};

const SECRET: &str = "S3CRET-never-shown-4711";

#[test]
fn help_never_shows_the_secret_key() {
    let env = [
        ("RINGMQ_ACCESS_KEY", "ak-perf"),
        ("RINGMQ_SECRET_KEY", SECRET),
    ];
    for args in [&["--help"][..], &["produce", "--help"], &["e2e", "-h"]] {
        let run = perf_env(args, &env);
        assert_eq!(run.code, 0, "{args:?}");
        assert!(!run.stdout.contains(SECRET), "{args:?}:\n{}", run.stdout);
        assert!(!run.stderr.contains(SECRET), "{args:?}:\n{}", run.stderr);
        for flag in [
            "--tls",
            "--ca",
            "--tls-cert",
            "--tls-key",
            "--access-key",
            "--secret-key",
        ] {
            assert!(run.stdout.contains(flag), "{args:?}: {flag} missing");
        }
    }
    let run = perf_env(&["produce", "--help"], &env);
    assert!(run.stdout.contains("RINGMQ_SECRET_KEY"), "{}", run.stdout);
    assert!(run.stdout.contains("shell's history"), "{}", run.stdout);
}

#[test]
fn missing_pieces_fail_before_the_run() {
    for (args, env, want) in [
        (&["produce", "--tls"][..], &[][..], "--ca"),
        (&["produce", "--access-key", "ak"], &[], "--secret-key"),
        (
            &["produce"],
            &[("RINGMQ_SECRET_KEY", SECRET)][..],
            "--access-key",
        ),
        (
            &["produce", "--ca", "/no/such/ca.pem"],
            &[],
            "/no/such/ca.pem",
        ),
    ] {
        let mut all = args.to_vec();
        all.extend(["-n", "127.0.0.1:1", "--count", "1"]);
        let run = perf_env(&all, env);
        assert_ne!(run.code, 0, "{all:?}");
        assert!(run.stderr.contains(want), "{all:?}: {}", run.stderr);
        assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
    }
}

#[test]
fn the_report_names_the_access_key_never_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    // ACL on, so the credentials are what lets the runs in (signed on both protocols).
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        format!(
            "accounts:\n  - accessKey: root\n    secretKey: rootsecret1\n    admin: true\n  \
             - accessKey: ak-perf\n    secretKey: {SECRET}\n    admin: true\n"
        ),
    )
    .unwrap();
    let acl_set = format!("aclFilePath={}", acl.display());
    let node = Node::start_with(
        &dir.path().join("data"),
        &[
            "aclEnable=true",
            &acl_set,
            "innerAccessKey=root",
            "innerSecretKey=rootsecret1",
        ],
    );
    for protocol in ["native", "remoting"] {
        let json = dir.path().join(format!("{protocol}.json"));
        let topic = format!("PerfCreds{protocol}");
        let args = [
            "produce",
            "-n",
            &node.namesrv,
            "--protocol",
            protocol,
            "--topic",
            &topic,
            "--size",
            "128",
            "--count",
            "200",
            "--access-key",
            "ak-perf",
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ];
        let run = perf_env(&args, &[("RINGMQ_SECRET_KEY", SECRET)]);
        assert_eq!(run.code, 0, "{protocol}: {}", run.stderr);
        let text = std::fs::read_to_string(&json).unwrap();
        for shown in [&run.stdout, &run.stderr, &text] {
            assert!(!shown.contains(SECRET), "{protocol}: {shown}");
        }
        let doc = read_json(&json);
        assert_eq!(doc["config"]["access_key"], "ak-perf", "{doc}");
        assert_eq!(doc["config"]["tls"], false, "{doc}");
        assert_eq!(doc["messages"].as_u64(), Some(200), "{doc}");
    }
}

#[test]
fn both_protocols_run_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = ringmq_testkit::certs::TestPki::new();
    let sets = [
        "tls.server.mode=enforcing".to_string(),
        format!("tls.server.certPath={}", pki.server_cert.display()),
        format!("tls.server.keyPath={}", pki.server_key.display()),
        "tls.enable=true".to_string(),
        format!("tls.client.trustCertPath={}", pki.ca.display()),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let node = Node::start_with(&dir.path().join("data"), &sets);
    let ca = pki.ca.to_str().unwrap();
    for protocol in ["native", "remoting"] {
        let json = dir.path().join(format!("tls-{protocol}.json"));
        let topic = format!("PerfTls{protocol}");
        let args = [
            "e2e",
            "-n",
            &node.namesrv,
            "--protocol",
            protocol,
            "--topic",
            &topic,
            "--size",
            "256",
            "--count",
            "500",
            "--batch",
            "4",
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ];
        let run = perf_env(&args, &[("RINGMQ_CA", ca)]);
        assert_eq!(run.code, 0, "{protocol}: {}", run.stderr);
        let doc = read_json(&json);
        assert_eq!(doc["config"]["tls"], true, "{doc}");
        assert_eq!(doc["messages"].as_u64(), Some(500), "{protocol}: {doc}");
    }
    // Without TLS: refused, and the run says so.
    let args = ["produce", "-n", &node.namesrv, "--count", "1", "--quiet"];
    let run = perf_env(&args, &[]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("TLS only"), "{}", run.stderr);
}
