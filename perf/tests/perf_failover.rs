//! `ringmq-perf failover` against the workspace's `ringmq` binary: three controllers and a
//! broker set of three SYNC_MASTER brokers started by perf, two kills of the master under
//! a running producer. The run must finish with exit 0, two failovers measured (each with a
//! new master in a higher epoch that was in the SyncStateSet), and every acknowledged
//! message read back from the final master (lost 0).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;

#[test]
fn two_kills_of_the_master_lose_no_acknowledged_send() {
    let dir = ringmq_testkit::tempdir("perf-failover");
    let json = dir.path().join("failover.json");
    let html = dir.path().join("failover.html");
    let ringmq = ringmq_bin();
    let args = [
        "failover",
        "--ringmq",
        ringmq.to_str().unwrap(),
        "--kills",
        "2",
        "--producers",
        "1",
        "--settle",
        "1s",
        "--timeout",
        "20s",
        // Small segments (three brokers would fallocate 128 MiB each), and the highest
        // disk-full limit: the test writes a few MB, on a disk other jobs may have filled
        // past the default 90 % (writes are refused above it).
        "--broker-set",
        "mappedFileSizeCommitLog=8388608",
        "--broker-set",
        "diskSpaceWarningLevelRatio=98",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ];
    let run = finish(spawn_perf(&args), &args, Duration::from_secs(120));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = read_json(&json);
    assert_eq!(doc["lost"], 0, "{doc}");
    assert_eq!(doc["duplicates"], 0, "{doc}");
    assert_eq!(doc["misplaced"], 0, "{doc}");
    assert!(doc["acked"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["replicas_agree"], true, "{doc}");
    let kills = doc["kills"].as_array().unwrap();
    assert_eq!(kills.len(), 2, "{doc}");
    for k in kills {
        let failover = k["failover_ms"].as_f64().unwrap();
        assert!(failover > 0.0, "{k}");
        assert_ne!(k["new_master"], k["killed"], "{k}");
        assert!(
            k["epoch"].as_u64().unwrap() > k["epoch_before"].as_u64().unwrap(),
            "{k}"
        );
        assert_eq!(k["from_sync_state_set"], true, "{k}");
    }
    assert!(doc["failover_ms"]["max"].as_f64().unwrap() > 0.0, "{doc}");
    assert!(run.stdout.contains("failover time"), "{}", run.stdout);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg id=\"acknowledged\""), "{page}");
    assert!(page.contains("failover time"), "{page}");
}
