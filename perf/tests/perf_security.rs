//! ringmq-perf's TLS and credential flags: the secret key never shows (`--help`, errors, the
//! table, the JSON report, on either protocol), the report names the access key and whether
//! TLS was on, and missing pieces fail before anything starts.
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
    let node = Node::start(&dir.path().join("data"));
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
