//! RocketMQ 5's Python SDK (PyPI `rocketmq-python-client` 5.1.2, unchanged, gRPC) against
//! a real `ringmq standalone` on loopback, through ringmq's gRPC edge (`grpc/`,
//! `docs/grpc.md`).
//!
//! The test starts its own node (temp data dir, every port picked by the node, gRPC
//! included: it reads `ringmq grpc: ADDR` before the ready line), creates its topics with
//! ringmq's native admin client, and runs `interop/tests/grpc/grpc_simple.py` under a
//! deadline: a Producer sends normal and FIFO messages (several message groups), a
//! SimpleConsumer per topic receives and acks them (one after a ChangeInvisibleDuration),
//! and the script checks bodies, tags, properties, message ids and groups; a scheduled
//! message comes no earlier than its time, and a second one, recalled by its handle
//! (RecallMessage), never. Then the test checks what ringmq itself saw, with the native
//! client:
//! - every message is stored once, with the SDK's message id as its `UNIQ_KEY` and its body;
//! - each FIFO message group sits in one queue, in send order, with its group as the
//!   sharding key;
//! - the scheduled message was delivered into its topic, the recalled one was not;
//! - each consumer group popped and acked every message and has none in flight.
//!
//! Requirements: the SDK in a Python environment of its own (its `rocketmq` package would
//! shadow the C++ client's `rocketmq` 0.4.4 of the remoting tests): `RINGMQ_GRPC_PYTHON`
//! names its interpreter, else `~/.cache/ringmq/grpc-python/bin/python`, which
//! `scripts/test.sh` creates (a venv with `rocketmq-python-client==5.1.2`). A missing SDK
//! FAILS the test (never a silent skip). Build the server first:
//! `cargo build -p ringmq-node --bin ringmq`.

use std::collections::BTreeMap;
use std::time::Duration;

use ringmq_client::wire::properties::keys;
use ringmq_client::{Admin, MessageQueue};
use ringmq_testkit::{run, Spawn};

#[path = "grpc/harness.rs"]
mod harness;
use harness::{python, scripts_dir, standalone as start_node};

/// How long the node may take to print its ready line.
/// The script's own watchdog ends it at 100 s; this is the outer bound.
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);
const NORMAL_TOPIC: &str = "GrpcNormal";
const FIFO_TOPIC: &str = "GrpcFifo";
const DELAY_TOPIC: &str = "GrpcDelay";
const TXN_TOPIC: &str = "GrpcTxn";
const DLQ_TOPIC: &str = "GrpcDlq";
const DLQ_GROUP: &str = "grpc-dlq";
const PUSH_TOPIC: &str = "GrpcPush";
const BAD_TOPIC: &str = "GrpcBad";
const HOLD_TOPIC: &str = "GrpcHold";
/// How long a node with gRPC clients still connected may take to stop: the edge's 2 s grace
/// for what is in flight, then the broker's own stop.
const STOP_LIMIT: Duration = Duration::from_secs(10);
const N_PUSH: usize = 20;
const RENEW_TOPIC: &str = "GrpcRenew";
const N_HOLD: usize = 5;
/// How long the push consumer's listener keeps one message: past the 60 s invisible time the
/// edge pops `auto_renew` messages with, so only the edge's renewal keeps it from coming again.
const HOLD: Duration = Duration::from_secs(75);
const QUEUES: u32 = 8;
const N_NORMAL: usize = 40;
const FIFO_GROUPS: usize = 4;
const PER_GROUP: usize = 10;

#[test]
fn python_sdk_sends_and_receives_through_the_grpc_edge() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    for topic in [NORMAL_TOPIC, FIFO_TOPIC, DELAY_TOPIC] {
        rt.block_on(admin.create_topic(topic, QUEUES, Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
    }

    let script = scripts_dir().join("grpc_simple.py");
    let out = run(
        Spawn::new("grpc_simple.py", &python)
            .arg(&script)
            .arg(grpc.to_string())
            .args([NORMAL_TOPIC, FIFO_TOPIC])
            .arg(N_NORMAL.to_string())
            .arg(FIFO_GROUPS.to_string())
            .arg(PER_GROUP.to_string())
            .arg(DELAY_TOPIC)
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join("grpc_simple.stderr.log")),
        SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "grpc_simple.py failed (exit {}, {:.1?}) against {grpc}\n----- stdout -----\n{}\
             ----- stderr (last 60 lines) -----\n{}\n----- ringmq node log (last 60 lines) \
             -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
            node.log_tail(60),
        );
    }
    print!("{}", out.stdout);
    let sent = Sent::parse(&out.stdout);
    assert_eq!(
        sent.normal.len(),
        N_NORMAL,
        "normal messages the script reports"
    );
    assert_eq!(
        sent.fifo.len(),
        FIFO_GROUPS * PER_GROUP,
        "FIFO messages the script reports"
    );
    assert_eq!(
        (sent.delay.len(), sent.recalled.len()),
        (1, 1),
        "scheduled messages the script reports"
    );
    assert!(
        out.stdout.contains(&format!(
            "received normal {N_NORMAL} fifo {}",
            FIFO_GROUPS * PER_GROUP
        )),
        "the script received every message"
    );

    // What ringmq stored: every message once, under the SDK's message id.
    let stored_normal = rt.block_on(read_topic(&admin, NORMAL_TOPIC));
    let by_id: BTreeMap<&str, &Stored> = stored_normal.iter().map(|s| (s.id.as_str(), s)).collect();
    assert_eq!(stored_normal.len(), N_NORMAL, "normal messages stored");
    for (id, body) in &sent.normal {
        let s = by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("message {id} is not stored under its UNIQ_KEY"));
        assert_eq!(&s.body, body, "body of {id}");
        assert_eq!(s.tag.as_deref(), Some("TagA"), "tag of {id}");
    }

    // FIFO: each message group in one queue, in send order, with its group as sharding key.
    let stored_fifo = rt.block_on(read_topic(&admin, FIFO_TOPIC));
    assert_eq!(
        stored_fifo.len(),
        FIFO_GROUPS * PER_GROUP,
        "FIFO messages stored"
    );
    let fifo_by_id: BTreeMap<&str, &Stored> =
        stored_fifo.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut groups: BTreeMap<&str, Vec<&Stored>> = BTreeMap::new();
    for (id, body, group) in &sent.fifo {
        let s = fifo_by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("FIFO message {id} is not stored under its UNIQ_KEY"));
        assert_eq!(&s.body, body, "body of {id}");
        assert_eq!(
            s.sharding_key.as_deref(),
            Some(group.as_str()),
            "group of {id}"
        );
        groups.entry(group).or_default().push(s);
    }
    for (group, msgs) in &groups {
        let queue = msgs[0].queue_id;
        assert!(
            msgs.iter().all(|m| m.queue_id == queue),
            "message group {group} is spread over several queues"
        );
        assert!(
            msgs.windows(2).all(|w| w[0].offset < w[1].offset),
            "message group {group} is not stored in send order"
        );
    }

    // Scheduled: the kept one delivered into its topic, the recalled one never.
    let stored_delay = rt.block_on(read_topic(&admin, DELAY_TOPIC));
    let delay_ids: Vec<&str> = stored_delay.iter().map(|s| s.id.as_str()).collect();
    let (kept, recalled) = (&sent.delay[0], &sent.recalled[0]);
    assert_eq!(
        delay_ids,
        vec![kept.0.as_str()],
        "delivered scheduled messages"
    );
    assert_eq!(
        stored_delay[0].body, kept.1,
        "body of the scheduled message"
    );
    assert_ne!(kept.0, recalled.0);

    // POP: each consumer group popped and acked every message, none left in flight.
    for (group, n) in [
        ("grpc-simple-normal", N_NORMAL as u64),
        ("grpc-simple-fifo", (FIFO_GROUPS * PER_GROUP) as u64),
        ("grpc-simple-delay", 1),
    ] {
        let st = rt
            .block_on(admin.pop_status(group))
            .unwrap_or_else(|e| panic!("POP status of {group}: {e}"));
        assert_eq!(st.acked, n, "{group} acked: {st:?}");
        assert_eq!(st.in_flight, 0, "{group} in flight: {st:?}");
        assert_eq!(st.revived, 0, "{group} redelivered: {st:?}");
    }
    admin.close();
    node.term(Duration::from_secs(10));
}

/// Transactions: two halves decided by the SDK (commit, rollback), two left undecided and
/// decided by the broker's check-back, which reaches the SDK's TransactionChecker as
/// RecoverOrphanedTransactionCommand on its Telemetry stream. Exactly the two committed
/// messages are delivered (to the SDK's SimpleConsumer, and stored in the topic as ringmq's
/// native admin reads it).
#[test]
fn python_sdk_transactions_through_the_grpc_edge() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python-txn");
    // Check-backs after 1 s, every 1 s: the undecided halves are asked about quickly.
    let (mut node, namesrv, grpc) = start_node(
        dir.path(),
        &["transactionTimeOut=1000", "transactionCheckInterval=1000"],
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    rt.block_on(admin.create_topic(TXN_TOPIC, QUEUES, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("creating {TXN_TOPIC}: {e}"));
    let out = run(
        Spawn::new("grpc_transaction.py", &python)
            .arg(scripts_dir().join("grpc_transaction.py"))
            .arg(grpc.to_string())
            .arg(TXN_TOPIC)
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join("grpc_transaction.stderr.log")),
        SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "grpc_transaction.py failed (exit {}, {:.1?}) against {grpc}\n----- stdout -----\n{}\
             ----- stderr (last 60 lines) -----\n{}\n----- ringmq node log (last 60 lines) \
             -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
            node.log_tail(60),
        );
    }
    print!("{}", out.stdout);
    let delivered: BTreeMap<String, String> = out
        .stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["delivered", id, body] => Some((body.to_string(), id.to_string())),
                _ => None,
            }
        })
        .collect();
    let bodies: Vec<&str> = delivered.keys().map(String::as_str).collect();
    assert_eq!(bodies, vec!["check-commit", "txn-commit"], "delivered");
    let stored = rt.block_on(read_topic(&admin, TXN_TOPIC));
    let mut stored_bodies: Vec<&str> = stored.iter().map(|s| s.body.as_str()).collect();
    stored_bodies.sort();
    assert_eq!(
        stored_bodies,
        vec!["check-commit", "txn-commit"],
        "committed messages in {TXN_TOPIC}"
    );
    for s in &stored {
        assert_eq!(
            Some(&s.id),
            delivered.get(&s.body),
            "UNIQ_KEY of {}",
            s.body
        );
    }
    admin.close();
    node.term(Duration::from_secs(10));
}

/// ForwardMessageToDeadLetterQueue (through the SDK's generated stub; the SDK's own caller is
/// its PushConsumer): the received message moves to `%DLQ%<group>` (read back with ringmq's
/// native admin, under the SDK's message id) and does not come again; a handle the edge did
/// not give out is INVALID_RECEIPT_HANDLE.
#[test]
fn python_sdk_message_forwarded_to_the_dead_letter_queue() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python-dlq");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    rt.block_on(admin.create_topic(DLQ_TOPIC, QUEUES, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("creating {DLQ_TOPIC}: {e}"));
    let out = run(
        Spawn::new("grpc_dlq.py", &python)
            .arg(scripts_dir().join("grpc_dlq.py"))
            .arg(grpc.to_string())
            .args([DLQ_TOPIC, DLQ_GROUP])
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join("grpc_dlq.stderr.log")),
        SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "grpc_dlq.py failed (exit {}, {:.1?}) against {grpc}\n----- stdout -----\n{}\
             ----- stderr (last 60 lines) -----\n{}\n----- ringmq node log (last 60 lines) \
             -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
            node.log_tail(60),
        );
    }
    print!("{}", out.stdout);
    let id = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("dead-lettered "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the script names the dead-lettered message")
        .to_string();
    let dlq = format!("%DLQ%{DLQ_GROUP}");
    let mq = MessageQueue::new(dlq.as_str(), "broker-a", 0);
    let msgs = rt
        .block_on(admin.read_messages(&mq, 0, 10))
        .unwrap_or_else(|e| panic!("reading {mq}: {e}"));
    let stored: Vec<(Option<&str>, &[u8])> = msgs
        .iter()
        .map(|m| (m.property(keys::UNIQ_KEY), m.body.as_ref()))
        .collect();
    assert_eq!(
        stored,
        vec![(Some(id.as_str()), b"dlq-me".as_slice())],
        "{dlq}"
    );
    let st = rt
        .block_on(admin.pop_status(DLQ_GROUP))
        .unwrap_or_else(|e| panic!("POP status of {DLQ_GROUP}: {e}"));
    assert_eq!((st.acked, st.in_flight), (1, 0), "{DLQ_GROUP}: {st:?}");
    admin.close();
    node.term(Duration::from_secs(10));
}

/// The SDK's PushConsumer: QueryAssignment, ReceiveMessage with `auto_renew`, an ack per
/// message, and a failed consumption handed back (ChangeInvisibleDuration with the SDK's
/// backoff) and delivered again with delivery attempt 2. ringmq's POP counts for the group:
/// every delivery acked, none in flight.
#[test]
fn python_sdk_push_consumer_through_the_grpc_edge() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python-push");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    rt.block_on(admin.create_topic(PUSH_TOPIC, QUEUES, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("creating {PUSH_TOPIC}: {e}"));
    let out = run(
        Spawn::new("grpc_push.py", &python)
            .arg(scripts_dir().join("grpc_push.py"))
            .arg(grpc.to_string())
            .arg(PUSH_TOPIC)
            .arg(N_PUSH.to_string())
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join("grpc_push.stderr.log")),
        SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "grpc_push.py failed (exit {}, {:.1?}) against {grpc}\n----- stdout -----\n{}\
             ----- stderr (last 60 lines) -----\n{}\n----- ringmq node log (last 60 lines) \
             -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
            node.log_tail(60),
        );
    }
    print!("{}", out.stdout);
    let calls = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("consumed "))
        .count();
    assert_eq!(calls, N_PUSH + 1, "listener calls");
    let st = rt
        .block_on(admin.pop_status("grpc-push"))
        .unwrap_or_else(|e| panic!("POP status of grpc-push: {e}"));
    assert_eq!(st.in_flight, 0, "grpc-push: {st:?}");
    assert_eq!(st.acked, N_PUSH as u64, "grpc-push: {st:?}");
    admin.close();
    node.term(Duration::from_secs(10));
}

/// `auto_renew`: the SDK's PushConsumer keeps one message for [`HOLD`], longer than the
/// invisible time it was popped with, and then acks it with the receipt handle it was given.
/// The edge renews it ahead of its expiry and acks the renewed handle: every message is
/// consumed once, with delivery attempt 1, and ringmq's POP counts say all acked, none
/// redelivered, none in flight.
#[test]
fn python_sdk_push_consumer_holds_a_message_past_its_invisible_time() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python-renew");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    rt.block_on(admin.create_topic(RENEW_TOPIC, QUEUES, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("creating {RENEW_TOPIC}: {e}"));
    let out = run(
        Spawn::new("grpc_push_hold.py", &python)
            .arg(scripts_dir().join("grpc_push_hold.py"))
            .arg(grpc.to_string())
            .arg(RENEW_TOPIC)
            .arg(N_HOLD.to_string())
            .arg(HOLD.as_secs().to_string())
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join("grpc_push_hold.stderr.log")),
        HOLD + SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "grpc_push_hold.py failed (exit {}, {:.1?}) against {grpc}\n----- stdout -----\n{}\
             ----- stderr (last 60 lines) -----\n{}\n----- ringmq node log (last 60 lines) \
             -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
            node.log_tail(60),
        );
    }
    print!("{}", out.stdout);
    let calls = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("consumed "))
        .count();
    assert_eq!(calls, N_HOLD, "listener calls");
    let st = rt
        .block_on(admin.pop_status("grpc-push-hold"))
        .unwrap_or_else(|e| panic!("POP status of grpc-push-hold: {e}"));
    assert_eq!(st.acked, N_HOLD as u64, "grpc-push-hold: {st:?}");
    assert_eq!(st.in_flight, 0, "grpc-push-hold: {st:?}");
    assert_eq!(st.revived, 0, "grpc-push-hold: {st:?}");
    admin.close();
    node.term(Duration::from_secs(10));
}

/// Bad input through the SDK's generated stubs (`grpc_bad_input.py`): a missing topic, no
/// Settings, no client id, empty Settings on Telemetry, bad messages, a request over the
/// size limit, 2,000 ack entries, a garbage receipt handle, a too short invisible time, an
/// unknown RPC and malformed protobuf each get their status; a good send afterwards works,
/// and the topic holds that one message only.
#[test]
fn bad_grpc_input_gets_a_status_and_stores_nothing() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python-bad");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    rt.block_on(admin.create_topic(BAD_TOPIC, QUEUES, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("creating {BAD_TOPIC}: {e}"));
    let out = run(
        Spawn::new("grpc_bad_input.py", &python)
            .arg(scripts_dir().join("grpc_bad_input.py"))
            .arg(grpc.to_string())
            .arg(BAD_TOPIC)
            .env("HOME", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join("grpc_bad_input.stderr.log")),
        SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "grpc_bad_input.py failed (exit {}, {:.1?}) against {grpc}\n----- stdout -----\n{}\
             ----- stderr (last 60 lines) -----\n{}\n----- ringmq node log (last 60 lines) \
             -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
            node.log_tail(60),
        );
    }
    print!("{}", out.stdout);
    let stored = rt.block_on(read_topic(&admin, BAD_TOPIC));
    let ids: Vec<&str> = stored.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec!["ID-GOOD"], "messages stored in {BAD_TOPIC}");
    admin.close();
    node.term(Duration::from_secs(10));
}

/// A node stops on SIGTERM while the SDK's clients keep their Telemetry streams and a long
/// poll open: the edge gives what is in flight a grace time, then cuts the rest.
#[test]
fn a_node_stops_while_grpc_clients_hold_streams_open() {
    let python = python();
    let dir = ringmq_testkit::tempdir("grpc-python-hold");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    rt.block_on(admin.create_topic(HOLD_TOPIC, QUEUES, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("creating {HOLD_TOPIC}: {e}"));
    admin.close();
    let mut clients = Spawn::new("grpc_hold.py", &python)
        .arg(scripts_dir().join("grpc_hold.py"))
        .arg(grpc.to_string())
        .arg(HOLD_TOPIC)
        .env("HOME", dir.path())
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .log(dir.path().join("grpc_hold.stderr.log"))
        .start();
    clients.wait_line(Duration::from_secs(30), "holding", |l| l == "holding");
    let started = std::time::Instant::now();
    let status = node.term(STOP_LIMIT);
    assert!(status.success(), "exit status {status}");
    println!(
        "stopped in {:.1?} with gRPC clients connected",
        started.elapsed()
    );
    clients.kill9();
}

/// What the script says it sent, in send order.
#[derive(Default)]
struct Sent {
    /// (message id, body)
    normal: Vec<(String, String)>,
    /// (message id, body, message group)
    fifo: Vec<(String, String, String)>,
    /// (message id, body) of the scheduled message kept, and of the one recalled
    delay: Vec<(String, String)>,
    recalled: Vec<(String, String)>,
}

impl Sent {
    fn parse(stdout: &str) -> Sent {
        let mut s = Sent::default();
        for line in stdout.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["sent", "normal", id, body] => s.normal.push((id.to_string(), body.to_string())),
                ["sent", "delay", id, body] => s.delay.push((id.to_string(), body.to_string())),
                ["recalled", id, body] => s.recalled.push((id.to_string(), body.to_string())),
                ["sent", "fifo", id, body, group] => {
                    s.fifo
                        .push((id.to_string(), body.to_string(), group.to_string()))
                }
                _ => {}
            }
        }
        s
    }
}

/// One message as ringmq stored it.
struct Stored {
    id: String,
    body: String,
    tag: Option<String>,
    sharding_key: Option<String>,
    queue_id: u32,
    offset: u64,
}

/// Every message of every queue of `topic` on broker-a, read with the native admin pull.
async fn read_topic(admin: &Admin, topic: &str) -> Vec<Stored> {
    let mut out = Vec::new();
    for q in 0..QUEUES {
        let mq = MessageQueue::new(topic, "broker-a", q);
        let msgs = admin
            .read_messages(&mq, 0, 1000)
            .await
            .unwrap_or_else(|e| panic!("reading {mq}: {e}"));
        for m in msgs {
            out.push(Stored {
                id: m.property(keys::UNIQ_KEY).unwrap_or("").to_string(),
                body: String::from_utf8_lossy(&m.body).into_owned(),
                tag: m.tag().map(str::to_string),
                sharding_key: m.property(keys::SHARDING_KEY).map(str::to_string),
                queue_id: m.queue_id,
                offset: m.queue_offset,
            });
        }
    }
    out
}
