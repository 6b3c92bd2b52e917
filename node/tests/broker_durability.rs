//! Durability across restarts of the real binary: a graceful restart keeps data and consumer
//! offsets; `kill -9` in the middle of a SYNC_FLUSH load loses no acknowledged record;
//! SIGTERM while producers are sending exits 0, and the next start reports a clean shutdown
//! and still has every acknowledged record.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::route::TopicConfigTable;

/// In-flight sends per producer thread.
const PIPELINE: usize = 4;

/// Checks every acknowledged record is stored at its offset with its body; returns the
/// number of records stored in the queues.
fn verify_acked(c: &mut Client, topic: &str, queues: u32, acked: &[AckedSend]) -> usize {
    let mut stored = 0;
    let mut by_queue: Vec<BTreeMap<u64, Vec<u8>>> = Vec::new();
    for q in 0..queues {
        let m: BTreeMap<u64, Vec<u8>> = read_queue_stored(c, topic, q)
            .into_iter()
            .map(|(offset, rec)| (offset, rec.body))
            .collect();
        stored += m.len();
        by_queue.push(m);
    }
    let mut lost = Vec::new();
    for a in acked {
        match by_queue[a.queue as usize].get(&a.offset) {
            Some(b) if *b == a.body => {}
            Some(_) => lost.push(format!("{}/{}: different body", a.queue, a.offset)),
            None => lost.push(format!("{}/{}: missing", a.queue, a.offset)),
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged records lost, e.g. {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(10)]
    );
    stored
}

#[test]
fn restart_keeps_data_and_consumer_offsets() {
    let dir = tempdir("restart");
    let data = dir.path().join("data");
    let topic = "Restart";
    let mut sent: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    {
        let mut node = Node::standalone(&data, &["--shards", "2"]);
        let mut c = Client::connect(node.broker_addr());
        c.create_topic_ok(topic, 4);
        for i in 0..100u32 {
            let q = i % 4;
            let m = Msg::new(topic, q, format!("restart {i}")).props(&[("TAGS", "r")]);
            let bytes = m.encode();
            c.send_bytes(topic, q, &bytes).ok();
            sent[q as usize].push(bytes);
        }
        c.commit_offset("g1", topic, 0, 7);
        c.commit_offset("g1", topic, 1, 25);
        c.commit_offset("g2", topic, 1, 3);
        // A pull can commit an offset too (RocketMQ's commitOffset).
        let mut h = pull_request(topic, 2, 10, 1, 0);
        h.consumer_group = "g1".to_string();
        h.commit_offset = Some(10);
        c.call(RequestCode::PullMessage, &h, &[]).ok();
        assert_eq!(c.query_offset("g1", topic, 2), Some(10));
        let status = node.term();
        assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
        assert!(node.log().contains("stopped cleanly"), "log says stopped");
    }
    let node = Node::standalone(&data, &["--shards", "2"]);
    let log = node.log();
    let shard_lines = log_lines_containing(&log, "shutdown last time");
    assert_eq!(shard_lines.len(), 2, "one line per shard:\n{log}");
    for l in &shard_lines {
        assert!(
            l.contains("clean shutdown last time") && !l.contains("unclean"),
            "{l}"
        );
    }
    let mut c = Client::connect(node.broker_addr());
    assert_eq!(c.query_offset("g1", topic, 0), Some(7));
    assert_eq!(c.query_offset("g1", topic, 1), Some(25));
    assert_eq!(c.query_offset("g2", topic, 1), Some(3));
    assert_eq!(c.query_offset("g1", topic, 2), Some(10));
    assert_eq!(c.query_offset("g1", topic, 3), None);
    assert_eq!(c.query_offset("never", topic, 0), None);
    // The topic kept its 4 queues (not re-created with the default 8).
    let r = c.call(RequestCode::GetAllTopicConfig, &Empty, &[]);
    r.ok();
    let table = TopicConfigTable::decode(&r.body).unwrap();
    let cfg = table.topics.iter().find(|t| t.topic == topic).unwrap();
    assert_eq!(cfg.write_queue_count, 4);
    for (q, recs) in sent.iter().enumerate() {
        let q = q as u32;
        assert_eq!(c.max_offset(topic, q), recs.len() as u64);
        let body = c.pull_all(topic, q, 0, recs.len());
        for (got, want) in decode_records(&body).iter().zip(recs) {
            assert_same_record(want, got);
        }
    }
    // New sends continue after the old offsets.
    let s = c.send_ok(&Msg::new(topic, 0, "after restart"));
    assert_eq!(s.first_queue_offset, 25);

    // The shard count cannot change under existing data: a clear refusal, not a mix-up.
    let mut node = node;
    assert_eq!(node.term().code(), Some(0));
    let (status, log) = Node::start_expect_exit(
        "reshard",
        dir.path(),
        standalone_launch(&data, &["--shards", "1"]),
    );
    assert!(
        !status.success(),
        "a start with another shard count must fail"
    );
    assert!(
        log.contains("2 shards") && log.contains("--shards 2"),
        "the refusal names the shard count to use:\n{log}"
    );
}

/// With `warmMapedFileEnable=true` a fresh SYNC_FLUSH master pre-writes each shard's first
/// segment before it says it is ready, so the first sends do not wait for it.
#[test]
fn warm_segments_are_prewritten_before_ready() {
    let dir = tempdir("warm");
    let data = dir.path().join("data");
    let args = [
        "--shards",
        "2",
        "--flush",
        "sync",
        "--set",
        "warmMapedFileEnable=true",
        "--set",
        "mappedFileSizeCommitLog=8388608",
    ];
    let node = Node::standalone(&data, &args);
    for shard in 0..2u64 {
        let first = data
            .join("commitlog")
            .join(shard.to_string())
            .join(format!("{:020}", shard << 48));
        assert!(first.exists(), "{} missing at ready", first.display());
        let line = format!("shard {shard}: log segment at {} pre-written", shard << 48);
        assert!(
            node.log().contains(&line),
            "no '{line}' in:\n{}",
            node.log()
        );
    }
}

#[test]
fn kill9_mid_load_with_sync_flush_loses_no_acknowledged_record() {
    let dir = tempdir("kill9");
    let data = dir.path().join("data");
    let topic = "Crash";
    let queues = 8u32;
    let args = ["--shards", "2", "--flush", "sync"];
    // Default segments: cold (only fallocated), so the first fdatasyncs of every segment
    // also convert its unwritten extents.
    let mut node = Node::standalone(&data, &args);
    Client::connect(node.broker_addr()).create_topic_ok(topic, queues);
    let mut acked: Vec<AckedSend> = Vec::new();
    // Three kill -9 / recover rounds on the same data, each killed at a different moment;
    // every round checks everything acknowledged so far.
    for round in 0..3usize {
        let addr = node.broker_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let progress: Vec<Arc<AtomicUsize>> = (0..4).map(|_| Arc::default()).collect();
        let producers: Vec<_> = (0..4)
            .map(|i| {
                spawn_counted_sender(
                    addr,
                    topic,
                    round * 10 + i,
                    vec![i as u32, i as u32 + 4],
                    PIPELINE,
                    Arc::clone(&stop),
                    Arc::clone(&progress[i]),
                )
            })
            .collect();
        // Kill mid-stream, at a different point each round: once every producer has had
        // some sends acknowledged (more each round).
        let want = 20 + 40 * round;
        wait_until(
            Duration::from_secs(30),
            format_args!("every producer to have {want} sends acknowledged"),
            || progress.iter().all(|p| p.load(Ordering::Relaxed) >= want),
        );
        let killed_at = Instant::now();
        node.kill9();
        let results: Vec<SendLog> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        assert!(killed_at.elapsed() < Duration::from_secs(20));
        let before = acked.len();
        acked.extend(results.iter().flat_map(|r| r.acked.iter().cloned()));
        for (i, r) in results.iter().enumerate() {
            assert!(
                r.ended_by.is_some(),
                "round {round}: producer {i} should have seen the connection die"
            );
            assert!(
                r.refused.is_empty(),
                "round {round}: producer {i}: refused sends {:?}",
                r.refused
            );
            assert!(
                !r.acked.is_empty(),
                "round {round}: producer {i} got no acknowledgement"
            );
        }

        let restart = Instant::now();
        node = Node::standalone(&data, &args);
        let restart_took = restart.elapsed();
        let log = node.log();
        let shard_lines = log_lines_containing(&log, "shutdown last time");
        assert_eq!(shard_lines.len(), 2, "one line per shard:\n{log}");
        for l in &shard_lines {
            assert!(
                l.contains("unclean"),
                "kill -9 is not a clean shutdown: {l}"
            );
        }
        let mut c = Client::connect(node.broker_addr());
        let stored = verify_acked(&mut c, topic, queues, &acked);
        assert!(stored >= acked.len());
        eprintln!(
            "kill -9 round {round} under SYNC_FLUSH: {} acknowledged this round, {} in all, {} \
             stored after recovery ({} of them unacknowledged: in flight at a kill, or \
             probes), 0 lost; restart took {restart_took:?}",
            acked.len() - before,
            acked.len(),
            stored,
            stored - acked.len()
        );
        // The recovered broker appends right after the recovered tail.
        for q in 0..queues {
            let max = c.max_offset(topic, q);
            let s = c.send_ok(&Msg::new(topic, q, format!("after recovery {round}")));
            assert_eq!(s.first_queue_offset, max);
        }
    }
}

#[test]
fn sigterm_under_load_exits_zero_and_restarts_clean() {
    for flush in ["async", "sync"] {
        sigterm_under_load(flush);
    }
}

fn sigterm_under_load(flush: &str) {
    let dir = tempdir("sigterm");
    let data = dir.path().join("data");
    let topic = "Graceful";
    let queues = 4u32;
    let args = ["--shards", "2", "--flush", flush];
    let mut node = Node::standalone(&data, &args);
    let addr = node.broker_addr();
    let mut admin = Client::connect(addr);
    admin.create_topic_ok(topic, queues);
    admin.create_topic_ok("Idle", 1);
    // A long poll parked for 30 s must not hold the stop up.
    let mut waiter = Client::connect(addr);
    let wid = waiter.send_frame(
        RequestCode::PullMessage,
        &pull_request("Idle", 0, 0, 1, 30_000),
        &[],
    );
    let waiter = std::thread::spawn(move || {
        let r = waiter.try_recv(wid).map(|r| r.status());
        (r, Instant::now())
    });
    let parked = wait_for(Duration::from_secs(3), || {
        let n: u32 = admin
            .runtime_info()
            .shards
            .iter()
            .map(|s| s.parked_pulls)
            .sum();
        (n >= 1).then_some(())
    });
    assert!(parked.is_some(), "the long poll was never parked");
    let stop = Arc::new(AtomicBool::new(false));
    let progress: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    let producers: Vec<_> = (0..3)
        .map(|i| {
            let queues = (0..queues).collect();
            let p = Arc::clone(&progress[i]);
            spawn_counted_sender(addr, topic, i, queues, PIPELINE, Arc::clone(&stop), p)
        })
        .collect();
    // SIGTERM under load: once every producer has had sends acknowledged.
    wait_until(
        Duration::from_secs(30),
        "every producer to have 50 sends acknowledged",
        || progress.iter().all(|p| p.load(Ordering::Relaxed) >= 50),
    );
    let t_term = Instant::now();
    let status = node.term();
    let term_took = t_term.elapsed();
    stop.store(true, Ordering::Relaxed);
    let results: Vec<SendLog> = producers.into_iter().map(|p| p.join().unwrap()).collect();
    assert_eq!(
        status.code(),
        Some(0),
        "{flush}: SIGTERM under load exits 0"
    );
    assert!(
        term_took < Duration::from_secs(10),
        "{flush}: stopping took {term_took:?} (a parked pull held it up?)"
    );
    let (parked_answer, answered_at) = waiter.join().unwrap();
    assert!(
        answered_at.duration_since(t_term) < Duration::from_secs(10),
        "{flush}: the parked pull was not released by the stop"
    );
    match &parked_answer {
        Ok(s) => assert!(
            matches!(s, Status::PullNotFound | Status::ServiceNotAvailable),
            "{flush}: the parked pull was answered {}",
            s.name()
        ),
        Err(e) => assert!(e.contains("closed") || e.contains("reset"), "{flush}: {e}"),
    }
    let log = node.log();
    assert!(
        log.contains("SIGTERM: stopping"),
        "log says stopping:\n{log}"
    );
    assert!(log.contains("stopped cleanly"), "log says stopped:\n{log}");
    let acked: Vec<AckedSend> = results
        .iter()
        .flat_map(|r| r.acked.iter().cloned())
        .collect();
    let refused: u64 = results.iter().flat_map(|r| r.refused.values()).sum();
    for (i, r) in results.iter().enumerate() {
        assert!(
            !r.acked.is_empty(),
            "{flush}: producer {i} got no acknowledgement"
        );
        for s in r.refused.keys() {
            assert_eq!(
                *s, "SERVICE_NOT_AVAILABLE",
                "{flush}: producer {i}: unexpected refusal"
            );
        }
    }

    let node = Node::standalone(&data, &args);
    let log = node.log();
    let shard_lines = log_lines_containing(&log, "shutdown last time");
    assert_eq!(shard_lines.len(), 2, "one line per shard:\n{log}");
    for l in &shard_lines {
        assert!(
            l.contains("clean shutdown last time") && !l.contains("unclean"),
            "{flush}: {l}"
        );
    }
    let mut c = Client::connect(node.broker_addr());
    let stored = verify_acked(&mut c, topic, queues, &acked);
    eprintln!(
        "SIGTERM under load ({flush} flush): {} acknowledged, {refused} refused while stopping, \
         {} stored, 0 lost; stop took {term_took:?}, the parked pull got {parked_answer:?}",
        acked.len(),
        stored
    );
}
