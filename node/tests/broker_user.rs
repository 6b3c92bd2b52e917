//! The node as an operator runs it: as an ordinary user with an 8 MiB memlock limit (the
//! default for non-root users; io_uring rings count against it on older kernels), and with
//! io_uring switched off (`--no-io-uring`, `RINGMQ_IO=epoll`). Each says in its log which
//! driver it uses, and a round trip (including a pull large enough for the splice path) and a
//! graceful stop work in every case. Tests run as root here, so the first one drops to
//! `nobody` with `setpriv` under `prlimit`.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::*;
use ringmq_wire::code::RequestCode;

const NOBODY: u32 = 65534;
const MEMLOCK_BYTES: u64 = 8 * 1024 * 1024;

/// Sends one record and a batch of 40 x 27,000 bytes (a pull of more than 1 MiB: spliced when
/// io_uring is on), pulls both back, then stops the node with SIGTERM.
fn round_trip_and_stop(mut node: Node) -> String {
    let mut c = Client::connect(node.broker_addr());
    let topic = "UserTopic";
    c.create_topic_ok(topic, 2);
    let one = Msg::new(topic, 0, "as an ordinary user").props(&[("TAGS", "u")]);
    let one_bytes = one.encode();
    c.send_bytes(topic, 0, &one_bytes).ok();
    let body = c.pull_all(topic, 0, 0, 1);
    assert_same_record(&one_bytes, &decode_records(&body)[0]);
    let msgs: Vec<Msg> = (0..40)
        .map(|i| Msg::new(topic, 1, vec![i as u8; 27_000]))
        .collect();
    let (batch, lens) = batch_body(&msgs);
    let h = Client::send_request(topic, 1, true, msgs.len());
    c.call(RequestCode::SendBatchMessage, &h, &batch).ok();
    let pulled = c.pull_all(topic, 1, 0, 40);
    assert_eq!(pulled.len(), batch.len());
    let mut at = 0;
    for (got, len) in decode_records(&pulled).iter().zip(&lens) {
        assert_same_record(&batch[at..at + len], got);
        at += len;
    }
    let status = node.term();
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    node.log()
}

/// The per-shard start lines (`shard N: event loop ..., store writes ...`).
fn driver_lines(log: &str) -> Vec<String> {
    log_lines_containing(log, "event loop")
        .into_iter()
        .map(|l| l.split("] ").nth(1).unwrap_or(l).to_string())
        .collect()
}

/// Why the node cannot be started as `nobody` here, if it cannot.
fn cannot_drop_privileges() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("the test does not run as root, so it cannot switch to uid 65534".into());
    }
    let probe = Command::new("prlimit")
        .arg(format!("--memlock={MEMLOCK_BYTES}"))
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "true",
        ])
        .status();
    match probe {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("prlimit/setpriv probe failed: {s}")),
        Err(e) => Some(format!("prlimit/setpriv not runnable: {e}")),
    }
}

/// `/proc/<pid>/status` Uid and `/proc/<pid>/limits` memlock of the running node.
fn uid_and_memlock(pid: i32) -> (u32, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let memlock = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .unwrap()
        .to_string();
    (uid, memlock)
}

#[test]
fn runs_as_an_ordinary_user_with_an_8_mib_memlock_limit() {
    if let Some(why) = cannot_drop_privileges() {
        eprintln!("SKIP runs_as_an_ordinary_user_with_an_8_mib_memlock_limit: {why}");
        return;
    }
    let dir = tempdir("user");
    // The temp dir is 0700 root; the node (uid 65534) needs to reach and own its data dir.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::os::unix::fs::chown(&data, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut launch = standalone_launch(&data, &["--shards", "2"]);
    launch.prefix = vec![
        "prlimit".into(),
        format!("--memlock={MEMLOCK_BYTES}"),
        "setpriv".into(),
        "--reuid=65534".into(),
        "--regid=65534".into(),
        "--clear-groups".into(),
    ];
    let node = Node::start("nobody", dir.path(), launch);
    let (uid, memlock) = uid_and_memlock(node.pid());
    assert_eq!(uid, NOBODY, "the node runs as nobody");
    assert!(
        memlock.contains(&MEMLOCK_BYTES.to_string()),
        "memlock limit: {memlock}"
    );
    let log = round_trip_and_stop(node);
    let lines = driver_lines(&log);
    assert_eq!(
        lines.len(),
        3,
        "a name server line and one per shard:\n{log}"
    );
    for l in &lines {
        assert!(
            l.contains("event loop io_uring") || l.contains("event loop epoll"),
            "no driver named: {l}"
        );
    }
    for l in lines.iter().filter(|l| l.starts_with("shard")) {
        assert!(l.contains("store writes"), "no store driver named: {l}");
    }
    // The store's files belong to the user that wrote them.
    let meta = std::fs::metadata(data.join("commitlog")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), NOBODY);
    eprintln!("as uid {uid} with {memlock:?}:\n  {}", lines.join("\n  "));
}

#[test]
fn runs_without_io_uring() {
    let dir = tempdir("epoll");
    for (name, launch) in [
        (
            "flag",
            standalone_launch(
                &dir.path().join("flag"),
                &["--shards", "2", "--no-io-uring"],
            ),
        ),
        ("env", {
            let mut l = standalone_launch(&dir.path().join("env"), &["--shards", "2"]);
            l.env.push(("RINGMQ_IO".into(), "epoll".into()));
            l
        }),
    ] {
        let node = Node::start(name, dir.path(), launch);
        let log = round_trip_and_stop(node);
        assert!(
            log.contains("epoll + pwrite (io_uring off by request)"),
            "{name}: the start line says io_uring is off:\n{log}"
        );
        let lines = driver_lines(&log);
        assert_eq!(
            lines.len(),
            3,
            "{name}: a name server line and one per shard:\n{log}"
        );
        for l in &lines {
            assert!(l.contains("event loop epoll (fallback)"), "{name}: {l}");
            assert!(!l.contains("event loop io_uring"), "{name}: {l}");
        }
        for l in lines.iter().filter(|l| l.starts_with("shard")) {
            assert!(
                l.contains("store writes pwrite/fdatasync fallback"),
                "{name}: {l}"
            );
        }
        eprintln!("{name}:\n  {}", lines.join("\n  "));
    }
}
