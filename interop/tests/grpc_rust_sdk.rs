//! RocketMQ 5's Rust SDK (crates.io `rocketmq` 5.0.0, apache/rocketmq-clients, unchanged,
//! gRPC) against a real `ringmq standalone` on loopback, through ringmq's gRPC edge
//! (`grpc/`, `docs/grpc.md`).
//!
//! The test starts its own node (temp data dir, every port picked by the node, gRPC
//! included: it reads `ringmq grpc: ADDR` before the ready line), creates its topics with
//! ringmq's native admin client and drives the SDK in-process:
//! - its Producer sends normal messages (tag, keys, a user property) and FIFO messages in
//!   several message groups; its transaction producer sends two halves, commits one and
//!   rolls the other back;
//! - its SimpleConsumers receive and ack every message, checking body, tag, property,
//!   message id and group; nothing comes again after the acks, and of the transaction
//!   topic only the committed message comes.
//!
//! Then it checks what ringmq itself saw, with the native client: every message stored once
//! under the SDK's message id (`UNIQ_KEY`) with its body and tag; each message group in one
//! queue, in send order, with its group as the sharding key; only the committed half in the
//! transaction topic; each consumer group's POP counts: all acked, none in flight.
//!
//! What the SDK expects, from its source: the access point as `HOST:PORT` without a scheme,
//! TLS off by `ClientOption::set_enable_tls(false)` (on by default); a receive pops one queue
//! it picks from QueryRoute and answers an empty list on MESSAGE_NOT_FOUND. It logs an
//! error on every Settings the server sends back (it does not expect them on its Telemetry
//! stream); that log line is noise, not a failure. Build the server first:
//! `cargo build -p ringmq-node --bin ringmq`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ringmq_client::wire::properties::keys;
use ringmq_client::{Admin, MessageQueue};

#[path = "grpc/harness.rs"]
mod harness;
use rocketmq_grpc_sdk::conf::{ClientOption, ProducerOption, SimpleConsumerOption};
use rocketmq_grpc_sdk::model::common::{FilterExpression, FilterType};
use rocketmq_grpc_sdk::model::message::{MessageBuilder, MessageView};
use rocketmq_grpc_sdk::model::transaction::{Transaction, TransactionResolution};
use rocketmq_grpc_sdk::{Producer, SimpleConsumer};

/// How long the node may take to print its ready line.
/// How long a consumer keeps receiving before the test gives up on the missing messages.
const RECEIVE_LIMIT: Duration = Duration::from_secs(60);
const NORMAL_TOPIC: &str = "RustSdkNormal";
const FIFO_TOPIC: &str = "RustSdkFifo";
const TXN_TOPIC: &str = "RustSdkTxn";
const NORMAL_GROUP: &str = "rust-sdk-normal";
const FIFO_GROUP: &str = "rust-sdk-fifo";
const TXN_GROUP: &str = "rust-sdk-txn";
const QUEUES: u32 = 8;
const N_NORMAL: usize = 30;
const FIFO_GROUPS: usize = 3;
const PER_GROUP: usize = 10;

/// One message as the SDK sent it.
#[derive(Clone, Debug)]
struct Sent {
    id: String,
    body: String,
    group: Option<String>,
}

#[test]
fn rust_sdk_sends_and_receives_through_the_grpc_edge() {
    let dir = ringmq_testkit::tempdir("grpc-rust-sdk");
    let (mut node, namesrv, grpc) = harness::standalone(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    for topic in [NORMAL_TOPIC, FIFO_TOPIC, TXN_TOPIC] {
        rt.block_on(admin.create_topic(topic, QUEUES, Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
    }

    let result = rt.block_on(drive_sdk(grpc));
    let (normal, fifo, committed, rolled_back) = match result {
        Ok(sent) => sent,
        Err(e) => panic!(
            "the Rust SDK against {grpc}: {e}\n----- ringmq node log (last 60 lines) -----\n{}",
            node.log_tail(60)
        ),
    };

    // What ringmq stored: every message once, under the SDK's message id.
    let stored = rt.block_on(read_topic(&admin, NORMAL_TOPIC));
    assert_eq!(stored.len(), N_NORMAL, "normal messages stored");
    let by_id: BTreeMap<&str, &Stored> = stored.iter().map(|s| (s.id.as_str(), s)).collect();
    for m in &normal {
        let s = by_id
            .get(m.id.as_str())
            .unwrap_or_else(|| panic!("message {} is not stored under its UNIQ_KEY", m.id));
        assert_eq!(s.body, m.body, "body of {}", m.id);
        assert_eq!(s.tag.as_deref(), Some("TagA"), "tag of {}", m.id);
        // BORNHOST: the SDK's side of its gRPC connection, as RocketMQ's proxy records it
        // (not the edge's in-process connection, port 0, nor the gRPC port itself).
        assert!(
            s.born_host.ip().is_loopback() && s.born_host.port() != 0 && s.born_host != grpc,
            "BORNHOST of {} is {}, not the SDK's address",
            m.id,
            s.born_host
        );
    }

    // FIFO: each message group in one queue, in send order, with its group as sharding key.
    let stored = rt.block_on(read_topic(&admin, FIFO_TOPIC));
    assert_eq!(
        stored.len(),
        FIFO_GROUPS * PER_GROUP,
        "FIFO messages stored"
    );
    let by_id: BTreeMap<&str, &Stored> = stored.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut groups: BTreeMap<&str, Vec<&Stored>> = BTreeMap::new();
    for m in &fifo {
        let s = by_id
            .get(m.id.as_str())
            .unwrap_or_else(|| panic!("FIFO message {} is not stored under its UNIQ_KEY", m.id));
        assert_eq!(s.body, m.body, "body of {}", m.id);
        let group = m.group.as_deref().expect("a FIFO message has a group");
        assert_eq!(s.sharding_key.as_deref(), Some(group), "group of {}", m.id);
        groups.entry(group).or_default().push(s);
    }
    assert_eq!(groups.len(), FIFO_GROUPS, "message groups stored");
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

    // Transactions: only the committed half reached the topic.
    let stored = rt.block_on(read_topic(&admin, TXN_TOPIC));
    let ids: Vec<&str> = stored.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![committed.id.as_str()],
        "transaction messages stored"
    );
    assert_eq!(
        stored[0].body, committed.body,
        "body of the committed message"
    );
    assert_ne!(committed.id, rolled_back.id);

    // POP: each consumer group popped and acked every message, none left in flight.
    for (group, n) in [
        (NORMAL_GROUP, N_NORMAL as u64),
        (FIFO_GROUP, (FIFO_GROUPS * PER_GROUP) as u64),
        (TXN_GROUP, 1),
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

type SdkResult = (Vec<Sent>, Vec<Sent>, Sent, Sent);

/// The SDK's side: send, receive, ack, and check what came back. Errors name the step.
async fn drive_sdk(grpc: SocketAddr) -> Result<SdkResult, String> {
    let access = grpc.to_string();
    let mut option = ProducerOption::default();
    option.set_topics(vec![NORMAL_TOPIC, FIFO_TOPIC]);
    let mut producer = Producer::new(option, client_option(&access))
        .map_err(|e| format!("new producer: {e:?}"))?;
    producer
        .start()
        .await
        .map_err(|e| format!("producer start: {e:?}"))?;

    let mut normal = Vec::new();
    for i in 0..N_NORMAL {
        let body = format!("rust-normal-{i}");
        let msg = MessageBuilder::builder()
            .set_topic(NORMAL_TOPIC)
            .set_body(body.clone().into_bytes())
            .set_tag("TagA")
            .set_keys(vec![format!("key-{i}")])
            .set_properties(HashMap::from([("seq", i.to_string())]))
            .build()
            .map_err(|e| format!("building normal {i}: {e:?}"))?;
        let receipt = producer
            .send(msg)
            .await
            .map_err(|e| format!("sending normal {i}: {e:?}"))?;
        normal.push(Sent {
            id: receipt.message_id().to_string(),
            body,
            group: None,
        });
    }
    let mut fifo = Vec::new();
    for i in 0..PER_GROUP {
        for g in 0..FIFO_GROUPS {
            let body = format!("rust-fifo-{g}-{i}");
            let group = format!("order-{g}");
            let msg = MessageBuilder::fifo_message_builder(
                FIFO_TOPIC,
                body.clone().into_bytes(),
                group.clone(),
            )
            .build()
            .map_err(|e| format!("building fifo {g}/{i}: {e:?}"))?;
            let receipt = producer
                .send(msg)
                .await
                .map_err(|e| format!("sending fifo {g}/{i}: {e:?}"))?;
            fifo.push(Sent {
                id: receipt.message_id().to_string(),
                body,
                group: Some(group),
            });
        }
    }
    producer
        .shutdown()
        .await
        .map_err(|e| format!("producer shutdown: {e:?}"))?;
    check_ids(&normal)?;
    check_ids(&fifo)?;

    // Transactions: one committed, one rolled back, each by the SDK's own calls. The checker
    // answers ROLLBACK for anything the broker asks about: both were decided already.
    let mut option = ProducerOption::default();
    option.set_topics(vec![TXN_TOPIC]);
    let mut txn_producer = Producer::new_transaction_producer(
        option,
        client_option(&access),
        Box::new(|_, _| TransactionResolution::ROLLBACK),
    )
    .map_err(|e| format!("new transaction producer: {e:?}"))?;
    txn_producer
        .start()
        .await
        .map_err(|e| format!("transaction producer start: {e:?}"))?;
    let mut decided = Vec::new();
    for (i, commit) in [(0, true), (1, false)] {
        let body = format!("rust-txn-{i}");
        let msg = MessageBuilder::transaction_message_builder(TXN_TOPIC, body.clone().into_bytes())
            .build()
            .map_err(|e| format!("building transaction {i}: {e:?}"))?;
        let txn = txn_producer
            .send_transaction_message(msg)
            .await
            .map_err(|e| format!("sending half {i}: {e:?}"))?;
        let id = txn.message_id().to_string();
        if commit {
            txn.commit().await
        } else {
            txn.rollback().await
        }
        .map_err(|e| format!("ending transaction {i}: {e:?}"))?;
        decided.push(Sent {
            id,
            body,
            group: None,
        });
    }
    txn_producer
        .shutdown()
        .await
        .map_err(|e| format!("transaction producer shutdown: {e:?}"))?;
    let rolled_back = decided.pop().expect("two halves");
    let committed = decided.pop().expect("two halves");

    let got = consume(&access, NORMAL_TOPIC, NORMAL_GROUP, N_NORMAL).await?;
    check_received("normal", &normal, &got)?;
    for m in &got {
        if m.tag() != Some("TagA") {
            return Err(format!("tag of {}: {:?}", m.message_id(), m.tag()));
        }
        let seq = m.properties().get("seq").cloned().unwrap_or_default();
        let want = m.body().strip_prefix(b"rust-normal-").unwrap_or_default();
        if seq.as_bytes() != want {
            return Err(format!("property seq of {}: {seq:?}", m.message_id()));
        }
    }
    let got = consume(&access, FIFO_TOPIC, FIFO_GROUP, FIFO_GROUPS * PER_GROUP).await?;
    check_received("fifo", &fifo, &got)?;
    let want: BTreeMap<&str, Option<&str>> = fifo
        .iter()
        .map(|m| (m.id.as_str(), m.group.as_deref()))
        .collect();
    for m in &got {
        if want.get(m.message_id()).copied().flatten() != m.message_group() {
            return Err(format!(
                "message group of {}: {:?}",
                m.message_id(),
                m.message_group()
            ));
        }
    }
    let got = consume(&access, TXN_TOPIC, TXN_GROUP, 1).await?;
    check_received("transaction", std::slice::from_ref(&committed), &got)?;
    Ok((normal, fifo, committed, rolled_back))
}

fn client_option(access: &str) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(access);
    option.set_enable_tls(false);
    option.set_timeout(Duration::from_secs(10));
    option
}

/// Receives from `topic` as `group` until `n` messages came (each acked at once) or
/// RECEIVE_LIMIT passed; then one more receive must find nothing: acked messages stay gone.
async fn consume(
    access: &str,
    topic: &str,
    group: &str,
    n: usize,
) -> Result<Vec<MessageView>, String> {
    let mut option = SimpleConsumerOption::default();
    option.set_topics(vec![topic]);
    option.set_consumer_group(group);
    let mut consumer = SimpleConsumer::new(option, client_option(access))
        .map_err(|e| format!("new simple consumer {group}: {e:?}"))?;
    consumer
        .start()
        .await
        .map_err(|e| format!("simple consumer {group} start: {e:?}"))?;
    let all = FilterExpression::new(FilterType::Tag, "*");
    let mut got: Vec<MessageView> = Vec::new();
    let until = Instant::now() + RECEIVE_LIMIT;
    while got.len() < n && Instant::now() < until {
        let batch = consumer
            .receive_with(topic, &all, 32, Duration::from_secs(15))
            .await
            .map_err(|e| format!("receive {group}: {e:?}"))?;
        for m in batch {
            consumer
                .ack(&m)
                .await
                .map_err(|e| format!("ack {} ({group}): {e:?}", m.message_id()))?;
            got.push(m);
        }
    }
    if got.len() != n {
        return Err(format!("{group} received {} of {n}", got.len()));
    }
    let again = consumer
        .receive_with(topic, &all, 32, Duration::from_secs(15))
        .await
        .map_err(|e| format!("last receive {group}: {e:?}"))?;
    if !again.is_empty() {
        let ids: Vec<&str> = again.iter().map(|m| m.message_id()).collect();
        return Err(format!("{group} received again after the acks: {ids:?}"));
    }
    consumer
        .shutdown()
        .await
        .map_err(|e| format!("simple consumer {group} shutdown: {e:?}"))?;
    Ok(got)
}

/// Message ids are the SDK's: distinct, 34 upper-case hex digits (version 1).
fn check_ids(sent: &[Sent]) -> Result<(), String> {
    let ids: BTreeSet<&str> = sent.iter().map(|m| m.id.as_str()).collect();
    if ids.len() != sent.len() {
        return Err("the SDK's message ids repeat".into());
    }
    match ids
        .iter()
        .find(|id| id.len() != 34 || !id.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        Some(id) => Err(format!("message id {id:?} is not the SDK's format")),
        None => Ok(()),
    }
}

/// Exactly the sent messages came, once each, with their bodies.
fn check_received(what: &str, sent: &[Sent], got: &[MessageView]) -> Result<(), String> {
    let want: BTreeMap<&str, &str> = sent
        .iter()
        .map(|m| (m.id.as_str(), m.body.as_str()))
        .collect();
    let mut seen = BTreeSet::new();
    for m in got {
        let id = m.message_id();
        if !seen.insert(id) {
            return Err(format!("{what}: {id} came twice"));
        }
        match want.get(id) {
            Some(body) if body.as_bytes() == m.body() => {}
            Some(_) => return Err(format!("{what}: body of {id}: {:?}", m.body())),
            None => return Err(format!("{what}: {id} was never sent")),
        }
    }
    if seen.len() != want.len() {
        return Err(format!("{what}: received {} of {}", seen.len(), want.len()));
    }
    Ok(())
}

/// One message as ringmq stored it.
struct Stored {
    id: String,
    body: String,
    tag: Option<String>,
    sharding_key: Option<String>,
    queue_id: u32,
    offset: u64,
    born_host: std::net::SocketAddr,
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
                born_host: m.born_host,
            });
        }
    }
    out
}
