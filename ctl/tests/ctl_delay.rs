//! Scheduled messages through `ringmq-ctl` against a real standalone node: `send --delay`,
//! `--delay-level` and `--deliver-at` print the due time the broker set; `delay status`
//! counts them pending (per level, and the timer), as JSON and as tables; `consume` shows
//! them once delivered with their due time; a delay beyond `timerMaxDelaySec` is refused.
//!
//! Nothing here asserts how fast a delivery happens: waits poll until a deadline, and a
//! check made "right after" a 1 s send also accepts that the message was already delivered
//! (a slow machine), which the broker's `delivered` count shows.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{record, Node};
use serde_json::Value;

/// How long a 1 s message may take to show up in `consume` (and to be indexed, for the
/// status checks) on a loaded machine.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(30);

/// Slack on the due time the broker reports (its `timerPrecisionMs` rounding and its
/// schedule floor): due = store time + delay, within this much later.
const DUE_SLACK_MS: i64 = 1_000;

#[test]
fn scheduled_sends_status_and_delivery() {
    let node = Node::start();
    node.json(&["topic", "create", "Later", "--queues", "2"]);

    // --delay-level 1 (1 s by default): the due time, then pending in level 1.
    let (level_sent, before, after) =
        timed_send(&node, &["send", "Later", "by level", "--delay-level", "1"]);
    assert_due(&level_sent, 1_000, before, after);
    let st = status_until(&node, |b| level_pending(b, 1) >= 1 || delivered(b) >= 1);
    let levels = st["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 18, "default messageDelayLevel: {st}");
    assert_eq!(levels[0]["level"], 1);
    assert_eq!(levels[0]["delay_ms"], 1_000);
    assert_eq!(levels[17]["delay_ms"], 7_200_000);
    assert_eq!(st["delivering"], true);
    assert_eq!(st["shards_indexing"], 0);

    // --delay 1s: the due time about 1000 ms after the send, then pending in the timer.
    let (delay_sent, before, after) =
        timed_send(&node, &["send", "Later", "by delay", "--delay", "1s"]);
    assert_due(&delay_sent, 1_000, before, after);
    status_until(&node, |b| timer_pending(b) >= 1 || delivered(b) >= 2);

    // --deliver-at an hour ahead (RFC 3339): pending in the timer until the test ends, due
    // when asked, and the next due time is no later than it.
    let at_ms = (now_ms() / 1000 + 3600) * 1000;
    let at = format!("{}", jiff::Timestamp::from_millisecond(at_ms).unwrap());
    let far = node.json(&["send", "Later", "an hour ahead", "--deliver-at", &at])["sent"].clone();
    let due = far["deliver_at_ms"].as_i64().unwrap();
    assert!(
        (at_ms..at_ms + DUE_SLACK_MS).contains(&due),
        "asked {at}: {far}"
    );
    let st = status_until(&node, |b| timer_pending(b) >= 1 && next_due(b) > 0);
    assert!(next_due(&st) <= due, "{st}");
    // ... and as ms since the epoch, as a table: the due time is shown.
    let out = node.ctl(&[
        "send",
        "Later",
        "also ahead",
        "--deliver-at",
        &at_ms.to_string(),
    ]);
    out.ok(&["send", "--deliver-at"]);
    let sent = record(&out.stdout);
    let want = format!("{:.3}", jiff::Timestamp::from_millisecond(at_ms).unwrap());
    assert!(
        sent.contains(&("DELIVER_AT[UTC]".to_string(), want.clone())),
        "{want}: {sent:?}"
    );

    // A message sent at once has no due time.
    let plain = node.json(&["send", "Later", "at once"])["sent"].clone();
    assert_eq!(plain["deliver_at_ms"], Value::Null, "{plain}");

    // The two 1 s messages are delivered (eventually), each with its due time, stored no
    // earlier than it; the ones an hour ahead are not.
    let got = consume_until(&node, &["by level", "by delay", "at once"]);
    for (body, sent) in [("by level", &level_sent), ("by delay", &delay_sent)] {
        let m = &got[body];
        assert_eq!(m["deliver_at_ms"], sent["deliver_at_ms"], "{body}: {m}");
        let due = m["deliver_at_ms"].as_i64().unwrap();
        assert!(m["store_time_ms"].as_i64().unwrap() >= due, "{body}: {m}");
        assert!(m["born_time_ms"].as_i64().unwrap() <= due, "{body}: {m}");
        assert_eq!(m["topic"], "Later");
    }
    assert_eq!(got["at once"]["deliver_at_ms"], Value::Null);
    assert!(got["at once"]["store_time_ms"].is_i64());
    assert!(!got.contains_key("an hour ahead"));
    let st = status_until(&node, |b| delivered(b) >= 2);
    assert_eq!(level_pending(&st, 1), 0, "{st}");
    assert!(timer_pending(&st) >= 2, "the two an hour ahead: {st}");
}

#[test]
fn delay_status_tables_and_targets() {
    let node = Node::start();
    node.json(&["topic", "create", "Later", "--queues", "2"]);
    node.json(&["send", "Later", "two hours", "--delay-level", "18"]);
    node.json(&["send", "Later", "one day", "--delay", "1d"]);
    status_until(&node, |b| {
        level_pending(b, 18) >= 1 && timer_pending(b) >= 1
    });

    let t = node.table(&["delay", "status"]);
    t.assert_header(&["BROKER", "LEVEL", "DELAY", "PENDING[msg]"]);
    assert_eq!(t.rows.len(), 19, "18 levels and the timer: {t:?}");
    assert_eq!(t.column("DELAY")[0], "1s");
    assert_eq!(t.column("DELAY")[17], "2h");
    assert_eq!(t.column("LEVEL")[18], "timer");
    assert_eq!(t.column("PENDING[msg]")[17], "1");
    assert_eq!(t.column("PENDING[msg]")[18], "1");
    let summary = &t.more[0];
    summary.assert_header(&[
        "BROKER",
        "ADDRESS",
        "NEXT_DUE[UTC]",
        "NEXT_DUE_IN",
        "DELIVERED[msg]",
        "INDEXING[shards]",
        "DELIVERING",
    ]);
    assert_eq!(summary.column("ADDRESS"), [node.broker.as_str()]);
    assert!(
        summary.column("NEXT_DUE[UTC]")[0].ends_with('Z'),
        "{summary:?}"
    );
    let due_in = &summary.column("NEXT_DUE_IN")[0];
    assert!(
        due_in.starts_with("in ") && due_in.ends_with('s'),
        "{due_in}"
    );
    assert_eq!(summary.column("DELIVERING"), ["yes"]);

    // One broker by address, the masters of its cluster: the same broker.
    let j = node.json(&["delay", "status", "--broker", &node.broker]);
    let brokers = j["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1);
    assert_eq!(brokers[0]["address"], node.broker.as_str());
    assert_eq!(brokers[0]["error"], Value::Null);
    let cluster = node.json(&["cluster", "list"])["brokers"][0]["cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let j = node.json(&["delay", "status", "-c", &cluster]);
    assert_eq!(j["brokers"][0]["address"], node.broker.as_str());
    let args = [
        "-n",
        node.namesrv.as_str(),
        "delay",
        "status",
        "-c",
        "NoSuchCluster",
    ];
    let line = common::ctl(&args).failed_one_line(&args).to_string();
    assert!(line.contains("NoSuchCluster"), "{line}");
}

#[test]
fn delays_beyond_the_maximum_are_refused() {
    let node = Node::start();
    node.json(&["topic", "create", "Later", "--queues", "2"]);
    let args = ["send", "Later", "too late", "--delay", "4d"];
    let out = node.ctl(&args);
    let line = out.failed_one_line(&args);
    assert!(line.contains("timerMaxDelaySec"), "{line}");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let st = status_until(&node, |_| true);
    assert_eq!(timer_pending(&st), 0, "nothing stored: {st}");

    // Two ways of scheduling at once: refused before anything is sent.
    for extra in [
        &["--delay", "1s", "--delay-level", "1"][..],
        &["--delay", "1s", "--deliver-at", "1700000000000"],
        &["--delay-level", "2", "--deliver-at", "2026-12-04T10:00:00Z"],
    ] {
        let mut args = vec!["send", "Later", "twice"];
        args.extend_from_slice(extra);
        let out = node.ctl(&args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
    }
}

/// Sends (`args` plus `--json`); what it printed under "sent", and this machine's clock
/// before and after, ms since the epoch.
fn timed_send(node: &Node, args: &[&str]) -> (Value, i64, i64) {
    let before = now_ms();
    let sent = node.json(args)["sent"].clone();
    (sent, before, now_ms())
}

/// The due time is `delay_ms` after the store time, and the store time within the send.
fn assert_due(sent: &Value, delay_ms: i64, before: i64, after: i64) {
    let due = sent["deliver_at_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("no deliver_at_ms: {sent}"));
    let stored = sent["store_time_ms"].as_i64().unwrap();
    assert!(
        (stored + delay_ms..stored + delay_ms + DUE_SLACK_MS).contains(&due),
        "due {due} stored {stored}: {sent}"
    );
    assert!(
        (before + delay_ms..after + delay_ms + DUE_SLACK_MS).contains(&due),
        "due {due}, sent between {before} and {after}: {sent}"
    );
    assert_eq!(sent["status"], "SEND_OK");
}

/// `delay status --json` until `ok` holds for the (only) broker; that broker's object.
fn status_until(node: &Node, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + DELIVERY_DEADLINE;
    loop {
        let j = node.json(&["delay", "status"]);
        let brokers = j["brokers"].as_array().unwrap();
        assert_eq!(brokers.len(), 1, "{j}");
        let b = brokers[0].clone();
        assert_eq!(b["error"], Value::Null, "{b}");
        if ok(&b) {
            return b;
        }
        assert!(Instant::now() < deadline, "status never matched: {b}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `consume --json` until every body in `want` was read; each message by body.
fn consume_until(node: &Node, want: &[&str]) -> serde_json::Map<String, Value> {
    let deadline = Instant::now() + DELIVERY_DEADLINE;
    loop {
        let j = node.json(&["consume", "Later", "--count", "100", "--wait", "1s"]);
        let by_body: serde_json::Map<String, Value> = j["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["body"].as_str().unwrap().to_string(), m.clone()))
            .collect();
        if want.iter().all(|b| by_body.contains_key(*b)) {
            return by_body;
        }
        assert!(
            Instant::now() < deadline,
            "not all of {want:?} delivered within {DELIVERY_DEADLINE:?}: {j}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn level_pending(b: &Value, level: u64) -> u64 {
    b["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["level"] == level)
        .and_then(|l| l["pending"].as_u64())
        .unwrap_or_else(|| panic!("no level {level}: {b}"))
}

fn timer_pending(b: &Value) -> u64 {
    b["timer_pending"].as_u64().unwrap()
}

fn delivered(b: &Value) -> u64 {
    b["delivered"].as_u64().unwrap()
}

fn next_due(b: &Value) -> i64 {
    b["next_due_ms"].as_i64().unwrap()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}
