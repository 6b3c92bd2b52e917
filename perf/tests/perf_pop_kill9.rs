//! POP across three `kill -9`s of a 2-shard `ringmq standalone` node, under both flush modes
//! and with 4 and 16 queues: `ringmq-perf e2e --pop --verify` sends at a fixed rate while
//! simple consumers of one group pop and ack (a new group, positioned at the queues' ends
//! by its first pops: `--from last`, the init mode that skips what it finds); the node is
//! killed with SIGKILL three times while both run and started again on the same data and
//! ports. Every acknowledged send must be delivered (messages popped before a kill and not
//! acked come back after their invisible time), and no message whose ack the broker
//! acknowledged may be delivered again. With `--orderly` (orderly POP, acks one at a time
//! in a shuffled order) also: no message first delivered after one at a higher offset of its
//! queue.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{acked_lines, finish, free_ports, read_json, spawn_perf, Node};

/// How long the producer sends, at what rate (msgs/s): a run by duration, so the sends that
/// fail while the node is down do not make it exit non-zero.
const DURATION: &str = "7s";
const RATE: &str = "1000";
/// Acknowledged sends logged before each of the three kills.
const KILL_AT: [usize; 3] = [600, 1_800, 3_000];

fn pop_across_three_kills(flush: &str, queues: u32, orderly: bool) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ports = free_ports();
    let flush_set = format!("flushDiskType={flush}");
    let sets = [flush_set.as_str()];
    let mut node = Node::start_at(&data, ports, &sets);
    let namesrv = node.namesrv.clone();
    let acks = dir.path().join("acks");
    let json = dir.path().join("e2e.json");
    let queues = queues.to_string();
    let mut args = vec![
        "e2e",
        "-n",
        &namesrv,
        "--topic",
        "PopKill9",
        "--queues",
        &queues,
        "--size",
        "256",
        "--duration",
        DURATION,
        "--rate",
        RATE,
        "--send-timeout",
        "1s",
        "--pop",
        "--consumers",
        "2",
        "--pull-batch",
        "16",
        "--invisible-time",
        "3s",
        "--idle-exit",
        // Orderly: a queue waits out the invisible time of what a kill left unacked (3 s,
        // three times), so the consumers end further behind and take longer to catch up.
        if orderly { "20s" } else { "3s" },
        "-q",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    if orderly {
        args.push("--orderly");
    }
    let run = spawn_perf(&args);
    for (round, at) in KILL_AT.into_iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked_lines(&acks) < at {
            assert!(
                Instant::now() < deadline,
                "kill {}: fewer than {at} acknowledged sends within 30 s ({} so far)",
                round + 1,
                acked_lines(&acks)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        node.kill();
        node = Node::start_at(&data, ports, &sets);
    }
    let run = finish(run, &args, Duration::from_secs(120));
    assert_eq!(
        run.code, 0,
        "e2e --pop --verify:\n{}{}",
        run.stdout, run.stderr
    );
    let doc = read_json(&json);
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {doc}"));
    let acked = acked_lines(&acks) as u64;
    assert!(acked >= KILL_AT[2] as u64, "{doc}");
    assert_eq!(n(&doc["acked"]), acked, "{doc}");
    assert_eq!(n(&doc["lost"]), 0, "{doc}");
    assert_eq!(n(&doc["received"]), acked, "{doc}");
    assert_eq!(n(&doc["pop"]["acked_redelivered"]), 0, "{doc}");
    if orderly {
        assert_eq!(doc["config"]["orderly"], serde_json::json!(true), "{doc}");
        assert_eq!(n(&doc["out_of_order"]), 0, "{doc}");
    }
    assert!(
        n(&doc["pop"]["failed_calls"]) > 0,
        "the consumers should have seen the node die: {doc}"
    );
    eprintln!(
        "POP (orderly: {orderly}), {flush}, {queues} queues, 3 x kill -9: {acked} acknowledged, {} received, {} \
         duplicates, {} unlisted, {} second copies of a revive, {} acks refused, {} failed calls; test {:?}",
        n(&doc["received"]),
        n(&doc["duplicates"]),
        n(&doc["unlisted"]),
        n(&doc["pop"]["twin_copies"]),
        n(&doc["pop"]["ack_refused"]),
        n(&doc["pop"]["failed_calls"]),
        started.elapsed()
    );
    node.stop();
}

#[test]
fn pop_survives_three_kills_sync_flush_4_queues() {
    pop_across_three_kills("SYNC_FLUSH", 4, false);
}

#[test]
fn pop_survives_three_kills_sync_flush_16_queues() {
    pop_across_three_kills("SYNC_FLUSH", 16, false);
}

#[test]
fn pop_survives_three_kills_async_flush_4_queues() {
    pop_across_three_kills("ASYNC_FLUSH", 4, false);
}

#[test]
fn pop_survives_three_kills_async_flush_16_queues() {
    pop_across_three_kills("ASYNC_FLUSH", 16, false);
}

#[test]
fn orderly_pop_survives_three_kills_sync_flush_4_queues() {
    pop_across_three_kills("SYNC_FLUSH", 4, true);
}

#[test]
fn orderly_pop_survives_three_kills_async_flush_4_queues() {
    pop_across_three_kills("ASYNC_FLUSH", 4, true);
}

/// The position a new group takes at its first pops of empty queues (`--from last`: the
/// queues' ends) outlives a kill -9 that comes before the consumer offsets are saved (every
/// 5 s): the messages sent after those pops are delivered after the restart, not skipped
/// by a second "start at the end".
#[test]
fn a_pop_position_taken_before_a_kill_is_kept() {
    use ringmq_client::{SimpleConsumer, StartPosition};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ports = free_ports();
    let node = Node::start_at(&data, ports, &["flushDiskType=SYNC_FLUSH"]);
    let namesrv = node.namesrv.clone();
    let made = common::perf(&[
        "produce", "-n", &namesrv, "--topic", "PopPos", "--queues", "4", "--count", "1", "-q",
    ]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let consumer = |wait: Duration| {
        SimpleConsumer::builder()
            .group("pop-position")
            .name_servers(&namesrv)
            .subscribe("PopPos", "*")
            .await_duration(wait)
            .start_position(StartPosition::Last)
    };
    rt.block_on(async {
        let c = consumer(Duration::ZERO).start().await.unwrap();
        for _ in 0..8 {
            let got = c.receive(32, Duration::from_secs(30)).await.unwrap();
            assert!(got.is_empty(), "the queues' ends hold nothing new");
        }
        c.shutdown().await;
    });
    let acks = dir.path().join("acks");
    let sent = common::perf(&[
        "produce",
        "-n",
        &namesrv,
        "--topic",
        "PopPos",
        "--count",
        "40",
        "-q",
        "--verify",
        acks.to_str().unwrap(),
    ]);
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    node.kill();
    let node = Node::start_at(&data, ports, &["flushDiskType=SYNC_FLUSH"]);
    let got = rt.block_on(async {
        let c = consumer(Duration::from_secs(1)).start().await.unwrap();
        let mut got = 0usize;
        let until = Instant::now() + Duration::from_secs(20);
        while got < 40 && Instant::now() < until {
            let msgs = c.receive(32, Duration::from_secs(30)).await.unwrap();
            got += msgs.len();
            c.ack_batch(&msgs).await.unwrap();
        }
        c.shutdown().await;
        got
    });
    assert_eq!(
        got, 40,
        "messages sent after the group's first pops, delivered after a kill -9"
    );
    node.stop();
}
