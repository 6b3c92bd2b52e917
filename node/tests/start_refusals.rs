//! A node says `ready` only when it can serve, and refuses to start, with one line and a
//! non-zero exit, when it cannot: a standalone node whose broker cannot register with its
//! own name server, a second process on a data directory or on a port a live node serves.
//! And `--set` reports a key as a config file does. Real processes on loopback.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;

const ACL: &str = "\
accounts:
  - accessKey: root
    secretKey: rootsecret1
    admin: true
";

/// `ringmq standalone` on `data` with the given ports and extra args.
fn standalone_on(data: &Path, namesrv_port: u16, broker_port: u16, extra: &[&str]) -> Launch {
    let mut args: Vec<String> = vec![
        "standalone".into(),
        "--data".into(),
        data.display().to_string(),
        "--host".into(),
        "127.0.0.1".into(),
        "--namesrv-port".into(),
        namesrv_port.to_string(),
        "--broker-port".into(),
        broker_port.to_string(),
        "--shards".into(),
        "1".into(),
        "--set".into(),
        SEGMENT_SET.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Launch {
        args,
        ..Launch::default()
    }
}

/// Asserts a refused start: non-zero exit and `needle` in what it printed.
#[track_caller]
fn refused(dir: &Path, launch: Launch, needle: &str) -> String {
    let (status, stderr) = Node::start_expect_exit("refused", dir, launch);
    assert!(!status.success(), "exited with success: {stderr}");
    let last = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("ringmq: "))
        .unwrap_or_else(|| panic!("no `ringmq: ` error line in:\n{stderr}"))
        .to_string();
    assert!(last.contains(needle), "want {needle:?} in {last:?}");
    last
}

#[test]
fn a_key_given_with_set_is_reported_as_in_a_file() {
    let dir = tempdir("set-as-file");
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "1", "--set", "checkCRCOnRecover=true"],
    );
    let log = node.log();
    assert_eq!(
        log_lines_containing(&log, "checkCRCOnRecover ignored (not implemented)").len(),
        1,
        "--set checkCRCOnRecover=true is not reported as ignored:\n{log}"
    );
    let conf = dir.path().join("broker.properties");
    std::fs::write(
        &conf,
        format!(
            "brokerName=b\nlistenPort=0\nstorePathRootDir={}\ncheckCRCOnRecover=true\n",
            dir.path().join("b").display()
        ),
    )
    .unwrap();
    let broker = Node::broker(
        dir.path(),
        &conf,
        &[node.namesrv_addr()],
        &["--shards", "1"],
    );
    let blog = broker.log();
    assert_eq!(
        log_lines_containing(&blog, "checkCRCOnRecover ignored (not implemented)").len(),
        1,
        "{blog}"
    );
    // A typo is refused on both paths, naming the key.
    refused(
        dir.path(),
        standalone_on(
            &dir.path().join("c"),
            0,
            0,
            &["--set", "checkCRCOnRecovr=true"],
        ),
        "unknown key \"checkCRCOnRecovr\"",
    );
}

#[test]
fn a_standalone_whose_broker_cannot_register_refuses_to_start() {
    let dir = tempdir("standalone-acl");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, ACL).unwrap();
    let acl_set = format!("aclFilePath={}", acl.display());
    let mut launch = standalone_on(
        &dir.path().join("data"),
        0,
        0,
        &["--set", "aclEnable=true", "--set", &acl_set],
    );
    launch
        .env
        .push(("RINGMQ_INNER_SECRET_KEY".into(), String::new()));
    let line = refused(
        dir.path(),
        launch,
        "could not register with this standalone's name server",
    );
    assert!(line.contains("innerAccessKey"), "{line}");
    // With the inner account it starts, and is ready only once registered.
    let launch = standalone_on(
        &dir.path().join("data"),
        0,
        0,
        &[
            "--set",
            "aclEnable=true",
            "--set",
            &acl_set,
            "--set",
            "innerAccessKey=root",
            "--set",
            "innerSecretKey=rootsecret1",
        ],
    );
    let node = Node::start("standalone", dir.path(), launch);
    assert!(
        !log_lines_containing(&node.log(), "registered at").is_empty(),
        "ready before the registration:\n{}",
        node.log()
    );
}

#[test]
fn one_process_per_data_directory_and_per_port() {
    let dir = tempdir("one-per-dir");
    let data = dir.path().join("data");
    let mut first = Node::start("first", dir.path(), standalone_on(&data, 0, 0, &[]));
    let (ns_port, broker_port) = (
        first.namesrv_addr().port().to_string(),
        first.broker_addr().port(),
    );
    // Same directory, other ports.
    let line = refused(
        dir.path(),
        standalone_on(&data, 0, 0, &[]),
        "is in use by another process",
    );
    assert!(line.contains(&format!("(pid {})", first.pid())), "{line}");
    // Same ports, other directories: the name server's, then the broker's.
    let ns_port: u16 = ns_port.parse().unwrap();
    refused(
        dir.path(),
        standalone_on(&dir.path().join("d2"), ns_port, 0, &[]),
        "in use",
    );
    refused(
        dir.path(),
        standalone_on(&dir.path().join("d3"), 0, broker_port, &[]),
        "in use",
    );
    refused(
        dir.path(),
        Launch {
            args: vec![
                "namesrv".into(),
                "--host".into(),
                "127.0.0.1".into(),
                "--port".into(),
                ns_port.to_string(),
            ],
            ..Launch::default()
        },
        "in use",
    );
    // The lock goes with the process, kill -9 included.
    first.kill9();
    let again = Node::start("again", dir.path(), standalone_on(&data, 0, 0, &[]));
    assert!(again.pid() > 0);
}
