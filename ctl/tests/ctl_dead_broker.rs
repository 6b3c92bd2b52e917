//! `ringmq-ctl` against a broker killed with SIGKILL while the name server still lists it
//! (a separate `ringmq namesrv` and `ringmq broker`): a command that reads or writes through
//! the broker exits 1 with one line naming the unreachable broker, never an empty table
//! with exit 0 (issue #36).
#![allow(clippy::unwrap_used)]

mod common;

use common::{Split, SplitCtl};

#[test]
fn consume_from_a_killed_broker_fails_with_one_line() {
    let mut split = Split::start();
    split
        .ctl(&["topic", "create", "Gone", "--queues", "2"])
        .ok(&["topic", "create"]);
    split
        .ctl(&["send", "Gone", "before the kill"])
        .ok(&["send"]);
    // Read once with a group, so its committed offsets exist before the kill.
    split
        .ctl(&["consume", "Gone", "-g", "readers", "--wait", "1s"])
        .ok(&["consume", "-g"]);
    split.kill_broker();
    for args in [
        vec!["consume", "Gone", "--wait", "1s"],
        vec!["consume", "Gone", "-g", "readers", "--wait", "1s"],
        vec!["consume", "Gone", "-g", "fresh", "--wait", "1s"],
    ] {
        let out = split.ctl(&args);
        let line = out.failed_one_line(&args);
        assert_eq!(out.code, 1, "{args:?}");
        assert!(
            line.contains(&format!("{} is unreachable", split.broker)),
            "{args:?}: {line}"
        );
        assert!(!line.contains("offsets committed"), "{args:?}: {line}");
        assert!(out.stdout.is_empty(), "{args:?} printed:\n{}", out.stdout);
    }
}
