//! Scheduled messages with recall, and message trace, across three `kill -9`s of a 2-shard
//! `ringmq standalone` node, under both flush modes: `ringmq-perf e2e --verify` sends at a
//! fixed rate while its push consumers read; the node is killed with SIGKILL three times
//! (once the verify log holds a given number of acknowledged sends) and started again on
//! the same data and ports each time.
//!
//! - Scheduled (`--delay 2s --recall-ratio 0.2`): every acknowledged send that was not
//!   recalled is delivered, none before its due time (the broker's TIMER_OUT_MS, checked on
//!   both the delivered copy's store time and the receipt), and no message whose recall the
//!   broker acknowledged is delivered. A recall sent without an answer (the node died under
//!   it) leaves its message free to come or not, and is counted apart.
//! - Trace (`--trace`): every acknowledged send is delivered; the run reports the trace
//!   records made and stored (acknowledged by the broker), and exits 1 naming the shortfall
//!   when some were not stored (sends in flight at a kill); every stored record is read back
//!   from RMQ_SYS_TRACE_TOPIC after the kills.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{acked_lines, finish, free_ports, read_json, spawn_perf, Node};

/// Acknowledged sends logged before each of the three kills.
const KILL_AT: [usize; 3] = [500, 1_400, 2_300];

/// Starts `ringmq-perf args` against a node with `sets`, kills the node at [`KILL_AT`]
/// (acknowledged lines of `acks`) and restarts it; returns the finished run and the node.
fn run_across_three_kills(
    data: &Path,
    sets: &[&str],
    acks: &Path,
    args: impl Fn(&str) -> Vec<String>,
) -> (common::Run, Node) {
    let ports = free_ports();
    let mut node = Node::start_at(data, ports, sets);
    let args = args(&node.namesrv);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = spawn_perf(&args);
    for (round, at) in KILL_AT.into_iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked_lines(acks) < at {
            assert!(
                Instant::now() < deadline,
                "kill {}: fewer than {at} acknowledged sends within 30 s ({} so far)",
                round + 1,
                acked_lines(acks)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        node.kill();
        node = Node::start_at(data, ports, sets);
    }
    (finish(run, &args, Duration::from_secs(90)), node)
}

fn e2e_args(namesrv: &str, topic: &str, acks: &Path, json: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "e2e",
        "-n",
        namesrv,
        "--topic",
        topic,
        "--queues",
        "4",
        "--size",
        "256",
        "--duration",
        "7s",
        "--rate",
        "500",
        "--send-timeout",
        "1s",
        "--idle-exit",
        "3s",
        "-q",
        "--verify",
        acks.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn count(doc: &serde_json::Value, path: &[&str]) -> u64 {
    let mut v = doc;
    for k in path {
        v = &v[k];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("{} is not a count in {doc}", path.join(".")))
}

fn scheduled_and_recalled_across_three_kills(flush: &str) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flush_set = format!("flushDiskType={flush}");
    let acks = dir.path().join("acks");
    let json = dir.path().join("e2e.json");
    let extra = ["--delay", "2s", "--recall-ratio", "0.2"];
    let (run, node) = run_across_three_kills(&data, &[flush_set.as_str()], &acks, |n| {
        e2e_args(n, "DelayKill9", &acks, &json, &extra)
    });
    assert_eq!(
        run.code, 0,
        "e2e --delay --recall-ratio --verify:\n{}{}",
        run.stdout, run.stderr
    );
    let doc = read_json(&json);
    let n = |f: &str| count(&doc, &[f]);
    let acked = acked_lines(&acks) as u64;
    assert!(acked >= KILL_AT[2] as u64, "{doc}");
    assert_eq!(n("acked"), acked, "{doc}");
    assert_eq!(n("lost"), 0, "{doc}");
    assert_eq!(n("dead_lettered"), 0, "{doc}");
    assert_eq!(
        n("early"),
        0,
        "a scheduled message delivered before due: {doc}"
    );
    assert_eq!(
        n("recalled_delivered"),
        0,
        "a recalled message delivered: {doc}"
    );
    let recalled = count(&doc, &["recalls", "acknowledged"]);
    assert!(recalled > 0, "no recall acknowledged: {doc}");
    assert_eq!(n("recalled"), recalled, "{doc}");
    assert_eq!(
        n("received") + n("recalled") + n("recall_unsure"),
        acked,
        "every acknowledged send delivered, recalled, or with a recall that got no answer: {doc}"
    );
    assert!(
        n("recall_unsure") <= count(&doc, &["recalls", "sent"]) - recalled,
        "{doc}"
    );
    assert!(
        count(&doc, &["send", "errors"]) > 0,
        "the producer should have seen the node die: {doc}"
    );
    eprintln!(
        "scheduled + recall, {flush}, 3 x kill -9: {acked} acknowledged, {} received, {} \
         recalled ({} recalls sent), {} recall_unsure, {} duplicates, lateness p99 {} ms max {} \
         ms; test {:?}",
        n("received"),
        n("recalled"),
        count(&doc, &["recalls", "sent"]),
        n("recall_unsure"),
        n("duplicates"),
        doc["lateness_ms"]["p99"],
        doc["lateness_ms"]["max"],
        started.elapsed()
    );
    node.stop();
}

#[test]
fn scheduled_and_recalled_messages_survive_three_kills_sync_flush() {
    scheduled_and_recalled_across_three_kills("SYNC_FLUSH");
}

#[test]
fn scheduled_and_recalled_messages_survive_three_kills_async_flush() {
    scheduled_and_recalled_across_three_kills("ASYNC_FLUSH");
}

/// Distinct message ids of the `Pub` records of `topic` in the node's trace topic.
fn traced_sends(namesrv: &str, topic: &str) -> HashSet<String> {
    use ringmq_client::trace::{record, TraceRecord, TRACE_TOPIC_DEFAULT};
    use ringmq_client::PullConsumer;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = PullConsumer::builder()
            .name_servers(namesrv)
            .group("trace-reader")
            .start()
            .await
            .unwrap();
        let mut ids = HashSet::new();
        for mq in c.fetch_queues(TRACE_TOPIC_DEFAULT).await.unwrap() {
            let (mut at, end) = (
                c.min_offset(&mq).await.unwrap(),
                c.max_offset(&mq).await.unwrap(),
            );
            while at < end {
                let got = c.pull(&mq, at, 32, "*").await.unwrap();
                assert!(got.next_offset > at, "no progress reading {mq:?} at {at}");
                for m in &got.messages {
                    let body = std::str::from_utf8(&m.body).expect("a trace body is text");
                    for r in record::decode(body) {
                        if let TraceRecord::Pub(p) = r {
                            if p.topic == topic {
                                ids.insert(p.msg_id);
                            }
                        }
                    }
                }
                at = got.next_offset;
            }
        }
        c.shutdown().await;
        ids
    })
}

fn trace_across_three_kills(flush: &str) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flush_set = format!("flushDiskType={flush}");
    let acks = dir.path().join("acks");
    let json = dir.path().join("e2e.json");
    let (run, node) = run_across_three_kills(&data, &[flush_set.as_str()], &acks, |n| {
        e2e_args(n, "TraceKill9", &acks, &json, &["--trace"])
    });
    let doc = read_json(&json);
    let n = |f: &str| count(&doc, &[f]);
    let acked = acked_lines(&acks) as u64;
    assert!(acked >= KILL_AT[2] as u64, "{doc}");
    assert_eq!(n("acked"), acked, "{doc}");
    assert_eq!(n("lost"), 0, "{doc}");
    assert_eq!(n("received"), acked, "{doc}");
    let made = count(&doc, &["trace", "made"]);
    let stored = count(&doc, &["trace", "stored"]);
    assert!(made >= acked, "a trace record per stored send: {doc}");
    assert!(stored > 0 && stored <= made, "{doc}");
    // A run that lost trace records says so: exit 1, the last line naming the counts.
    let last = run.stderr.lines().last().unwrap_or_default().to_string();
    if stored == made {
        assert_eq!(
            run.code, 0,
            "e2e --trace --verify:\n{}{}",
            run.stdout, run.stderr
        );
    } else {
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(
            last.contains(&format!("stored {stored} of {made} trace records")),
            "{last}"
        );
    }
    let found = traced_sends(&node.namesrv, "TraceKill9");
    assert!(
        found.len() as u64 >= stored,
        "{} distinct sends traced in RMQ_SYS_TRACE_TOPIC, {stored} trace records acknowledged: \
         {doc}",
        found.len()
    );
    assert!(found.len() as u64 <= made, "{doc}");
    eprintln!(
        "trace, {flush}, 3 x kill -9: {acked} acknowledged, {} received; trace records {made} \
         made, {stored} acknowledged, {} read back; exit {}; test {:?}",
        n("received"),
        found.len(),
        run.code,
        started.elapsed()
    );
    node.stop();
}

#[test]
fn traced_sends_survive_three_kills_sync_flush() {
    trace_across_three_kills("SYNC_FLUSH");
}

#[test]
fn traced_sends_survive_three_kills_async_flush() {
    trace_across_three_kills("ASYNC_FLUSH");
}

/// Requests with a given outcome in a `request --verify` file.
fn request_lines(path: &Path, outcome: &str) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| {
        t.lines()
            .filter(|l| l.split_whitespace().nth(2) == Some(outcome))
            .count()
    })
}

/// Request-reply across three kills: every reply that comes carries its own request's
/// body; a request without a reply is counted by why (`no_reply`: stored by the broker, no
/// reply within --timeout; else its send's error) and the run exits 1 with one line saying
/// how many; requests are answered again after each restart.
fn request_reply_across_three_kills(flush: &str) {
    const ANSWERED_AT: [usize; 3] = [300, 900, 1_500];
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flush_set = format!("flushDiskType={flush}");
    let sets = [flush_set.as_str()];
    let log = dir.path().join("requests");
    let json = dir.path().join("request.json");
    let ports = free_ports();
    let mut node = Node::start_at(&data, ports, &sets);
    let namesrv = node.namesrv.clone();
    let args = [
        "request",
        "-n",
        &namesrv,
        "--topic",
        "RequestKill9",
        "--queues",
        "4",
        // Long enough that the last kill's threshold is reached even when each restart
        // costs a few hundred requests (CI, 2 cores: 700+ unanswered over two kills).
        "--duration",
        "12s",
        "--rate",
        "300",
        "--timeout",
        "2s",
        "-q",
        "--verify",
        log.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let run = spawn_perf(&args);
    for (round, at) in ANSWERED_AT.into_iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(30);
        while request_lines(&log, "replied") < at {
            assert!(
                Instant::now() < deadline,
                "kill {}: fewer than {at} answered requests within 30 s ({} so far)",
                round + 1,
                request_lines(&log, "replied")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        node.kill();
        node = Node::start_at(&data, ports, &sets);
    }
    let run = finish(run, &args, Duration::from_secs(90));
    let doc = read_json(&json);
    let r = |f: &str| count(&doc, &["requests", f]);
    assert_eq!(
        r("wrong_replies"),
        0,
        "a reply with another request's body: {doc}"
    );
    let answered = request_lines(&log, "replied") as u64;
    assert_eq!(r("answered"), answered, "{doc}");
    assert_eq!(count(&doc, &["messages"]), answered, "{doc}");
    assert!(
        answered > ANSWERED_AT[2] as u64,
        "no request answered after the last restart: {doc}"
    );
    let (no_reply, failed) = (
        request_lines(&log, "no_reply") as u64,
        request_lines(&log, "failed") as u64,
    );
    assert_eq!(r("no_reply"), no_reply, "{doc}");
    assert_eq!(r("send_failed"), failed, "{doc}");
    assert_eq!(
        answered + no_reply + failed,
        r("issued"),
        "every request issued is answered or counted unanswered: {doc}"
    );
    assert!(
        no_reply + failed > 0,
        "three kills and no request lost its reply: {doc}"
    );
    // Unanswered requests make the run fail, saying how many and why.
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "{} of {} requests got no reply: {no_reply} stored without a reply",
            no_reply + failed,
            r("issued")
        )),
        "{last}"
    );
    eprintln!(
        "request-reply, {flush}, 3 x kill -9: {} issued, {answered} answered, {no_reply} stored \
         without a reply, {failed} not stored or unanswered sends ({}); test {:?}",
        r("issued"),
        doc["errors_by_kind"],
        started.elapsed()
    );
    node.stop();
}

#[test]
fn request_reply_across_three_kills_sync_flush() {
    request_reply_across_three_kills("SYNC_FLUSH");
}

#[test]
fn request_reply_across_three_kills_async_flush() {
    request_reply_across_three_kills("ASYNC_FLUSH");
}
