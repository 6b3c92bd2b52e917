//! `ringmq-ctl` without a cluster: `--help` on every command, usage errors, and a name
//! server that is not there (one clear line, non-zero exit, within seconds).
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::ctl;

const COMMANDS: &[&[&str]] = &[
    &[],
    &["cluster"],
    &["cluster", "list"],
    &["topic"],
    &["topic", "create"],
    &["topic", "update"],
    &["topic", "delete"],
    &["topic", "list"],
    &["topic", "route"],
    &["topic", "status"],
    &["group"],
    &["group", "list"],
    &["group", "progress"],
    &["group", "reset-offset"],
    &["group", "dlq"],
    &["group", "resend-dlq"],
    &["msg"],
    &["msg", "id"],
    &["msg", "key"],
    &["msg", "dump"],
    &["send"],
    &["consume"],
    &["broker"],
    &["broker", "status"],
    &["broker", "config"],
    &["broker", "readonly"],
    &["delay"],
    &["delay", "status"],
    &["clusterList"],
    &["updateTopic"],
    &["deleteTopic"],
    &["topicList"],
    &["topicRoute"],
    &["topicStatus"],
    &["consumerProgress"],
    &["queryMsgById"],
    &["queryMsgByKey"],
];

#[test]
fn help_on_every_command() {
    for cmd in COMMANDS {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = ctl(&args);
        out.ok(&args);
        assert!(
            out.stdout.contains("Usage: ringmq-ctl"),
            "{args:?}:\n{}",
            out.stdout
        );
        assert!(
            out.stdout.contains("--namesrv"),
            "{args:?}: -n is global:\n{}",
            out.stdout
        );
        assert!(out.stdout.contains("--json"), "{args:?}:\n{}", out.stdout);
        // Every command explains itself beyond its name.
        let first = out.stdout.lines().next().unwrap_or("");
        assert!(first.split_whitespace().count() >= 3, "{args:?}: {first:?}");
    }
    let out = ctl(&["--help"]);
    for alias in [
        "clusterList",
        "updateTopic",
        "consumerProgress",
        "queryMsgByKey",
    ] {
        assert!(out.stdout.contains(alias), "{alias} missing from --help");
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["topic", "status"][..],
        &["topic", "create", "T", "--perm", "x"],
        &["no-such-command"],
        &["msg", "key", "OnlyTopic"],
        &["broker", "readonly"],
        &["send", "T", "b", "--delay", "1s", "--delay-level", "1"],
        &["send", "T", "b", "--delay", "5x"],
        &["send", "T", "b", "--deliver-at", "2026-12-04T10:00:00"],
        &["delay", "status", "-c", "C", "-b", "127.0.0.1:1"],
    ] {
        let out = ctl(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn unreachable_name_server_is_one_clear_line() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ns = format!("127.0.0.1:{port}");
    for args in [
        vec!["-n", ns.as_str(), "cluster", "list"],
        vec!["-n", ns.as_str(), "topic", "list", "--json"],
        vec!["clusterList", "-n", ns.as_str()],
    ] {
        let out = ctl(&args);
        let line = out.failed_one_line(&args);
        assert!(
            line.contains(&format!("name server {ns} is unreachable")),
            "{line}"
        );
        assert!(line.contains("--namesrv"), "{line}");
        assert!(out.stdout.is_empty(), "{}", out.stdout);
        // Not a speed check: the command gives up instead of hanging (its connect timeout
        // is seconds; 10 s leaves a slow machine room).
        assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
    }
    let out = common::ctl_env(&["topic", "list"], &[("RINGMQ_NAMESRV", &ns)]);
    let line = out.failed_one_line(&["topic", "list"]);
    assert!(line.contains(&ns), "{line}");
    let args = ["-n", "no-such-host.invalid:9876", "topic", "list"];
    let line = ctl(&args).failed_one_line(&args).to_string();
    assert!(line.contains("no-such-host.invalid"), "{line}");
}
