//! One broker, three protocols: RocketMQ 5's Rust SDK (crates.io `rocketmq` 5.0.0, gRPC),
//! `rocketmq-client-rust` 1.0.0 (remoting) and ringmq's native client, unchanged, in this
//! test process against one real `ringmq standalone` on loopback.
//!
//! `one_broker_three_protocols`, in steps:
//! 1. sent over gRPC, consumed by a native POP consumer and by a remoting push consumer (two
//!    groups), each message with the SDK's message id as its `UNIQ_KEY`, body and tag;
//! 2. sent natively and over remoting, received by a gRPC SimpleConsumer with message ids
//!    equal to the senders' unique keys;
//! 3. one group's POP state shared: a native POP consumer acks 3 of 8 messages, the gRPC
//!    SimpleConsumer of the same group gets exactly the other 5, and a native receive after
//!    the gRPC acks finds nothing;
//! 4. a delayed message sent over gRPC (delivery time 3 s ahead) reaches a native consumer
//!    no earlier than its time;
//! 5. retries across protocols: a message received over gRPC and not acked comes again to
//!    the native POP consumer of the same group after its invisible time, with one
//!    reconsume counted;
//! 6. the gRPC edge reached the shards in process: after all of the above, the node holds
//!    no TCP connection to its own broker port (its edge's native clients would).
//!
//! Build the server first: `cargo build -p ringmq-node --bin ringmq`.

#[path = "grpc/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "rust_client/rmq.rs"]
mod rmq;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringmq_client::{Admin, PoppedMessage, SimpleConsumer as NativeSimple};
use rocketmq_client_rust::MQPushConsumer;
use rocketmq_grpc_sdk::conf::{ClientOption, ProducerOption, SimpleConsumerOption};
use rocketmq_grpc_sdk::model::common::{FilterExpression, FilterType};
use rocketmq_grpc_sdk::model::message::{MessageBuilder, MessageView};
use rocketmq_grpc_sdk::{Producer, SimpleConsumer};
use rocketmq_model::common::message::message_single::Message as RmqMessage;

const TO_OTHERS: &str = "ThreeFromGrpc";
const TO_GRPC: &str = "ThreeToGrpc";
const SHARED: &str = "ThreeShared";
const DELAY: &str = "ThreeDelay";
const RETRY: &str = "ThreeRetry";
const LIMIT: Duration = Duration::from_secs(40);

#[test]
fn one_broker_three_protocols() {
    let dir = ringmq_testkit::tempdir("grpc-three");
    let (node, ready, grpc) = harness::standalone_ready(dir.path(), &[]);
    let namesrv = ready.namesrv_addr();
    let broker = ready.broker.expect("the broker's address");
    let rt = harness::runtime();
    let ns = namesrv.to_string();
    let admin = rt.block_on(Admin::connect(&ns)).expect("an admin client");
    for t in [TO_OTHERS, TO_GRPC, SHARED, DELAY, RETRY] {
        rt.block_on(admin.create_topic(t, 4, Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("creating {t}: {e}"));
    }
    let access = grpc.to_string();
    let result = rt.block_on(async {
        grpc_to_native_and_remoting(&ns, &access).await?;
        native_and_remoting_to_grpc(&ns, &access).await?;
        shared_pop_state(&ns, &access).await?;
        delay_across(&ns, &access).await?;
        retry_across(&ns, &access).await
    });
    if let Err(e) = result {
        panic!(
            "{e}\n----- ringmq node log (last 60 lines) -----\n{}",
            node.log_tail(60)
        );
    }
    let pid = node.pid().expect("the node's pid");
    let to_itself: Vec<_> = harness::tcp_peers(pid)
        .into_iter()
        .filter(|p| p.port() == broker.port())
        .collect();
    assert!(
        to_itself.is_empty(),
        "the node holds TCP connections to its own broker port {broker}: {to_itself:?}"
    );
}

fn client_option(access: &str) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(access);
    option.set_enable_tls(false);
    option.set_timeout(Duration::from_secs(10));
    option
}

async fn grpc_producer(access: &str, topics: Vec<&str>) -> Result<Producer, String> {
    let mut option = ProducerOption::default();
    option.set_topics(topics);
    let mut p =
        Producer::new(option, client_option(access)).map_err(|e| format!("producer: {e:?}"))?;
    p.start()
        .await
        .map_err(|e| format!("producer start: {e:?}"))?;
    Ok(p)
}

async fn grpc_consumer(access: &str, topic: &str, group: &str) -> Result<SimpleConsumer, String> {
    let mut option = SimpleConsumerOption::default();
    option.set_topics(vec![topic]);
    option.set_consumer_group(group);
    let mut c = SimpleConsumer::new(option, client_option(access))
        .map_err(|e| format!("simple consumer {group}: {e:?}"))?;
    c.start()
        .await
        .map_err(|e| format!("simple consumer {group} start: {e:?}"))?;
    Ok(c)
}

/// gRPC receives of `topic` until `n` came (acked when `ack`) or LIMIT passed.
async fn grpc_receive(
    c: &SimpleConsumer,
    topic: &str,
    n: usize,
    ack: bool,
) -> Result<Vec<MessageView>, String> {
    let all = FilterExpression::new(FilterType::Tag, "*");
    let mut got = Vec::new();
    let until = Instant::now() + LIMIT;
    while got.len() < n && Instant::now() < until {
        let batch = c
            .receive_with(topic, &all, 32, Duration::from_secs(10))
            .await
            .map_err(|e| format!("gRPC receive {topic}: {e:?}"))?;
        for m in batch {
            if ack {
                c.ack(&m)
                    .await
                    .map_err(|e| format!("gRPC ack {}: {e:?}", m.message_id()))?;
            }
            got.push(m);
        }
    }
    Ok(got)
}

async fn native_consumer(ns: &str, group: &str, topic: &str) -> Result<NativeSimple, String> {
    NativeSimple::builder()
        .group(group)
        .name_servers(ns)
        .subscribe(topic, "*")
        .await_duration(Duration::from_secs(2))
        .start()
        .await
        .map_err(|e| format!("native consumer {group}: {e}"))
}

/// Native receives until `n` came (acked when `ack`) or `limit` passed.
async fn native_receive(
    c: &NativeSimple,
    n: usize,
    ack: bool,
    limit: Duration,
) -> Result<Vec<PoppedMessage>, String> {
    let mut got = Vec::new();
    let until = Instant::now() + limit;
    while got.len() < n && Instant::now() < until {
        for m in c
            .receive((n - got.len()).min(32) as u32, Duration::from_secs(20))
            .await
            .map_err(|e| format!("native receive: {e}"))?
        {
            if ack {
                c.ack(&m).await.map_err(|e| format!("native ack: {e}"))?;
            }
            got.push(m);
        }
    }
    Ok(got)
}

/// Step 1.
async fn grpc_to_native_and_remoting(ns: &str, access: &str) -> Result<(), String> {
    let p = grpc_producer(access, vec![TO_OTHERS]).await?;
    let mut sent = BTreeMap::new();
    for i in 0..6 {
        let body = format!("from-grpc-{i}");
        let m = MessageBuilder::builder()
            .set_topic(TO_OTHERS)
            .set_body(body.clone().into_bytes())
            .set_tag("TagG")
            .build()
            .map_err(|e| format!("building {body}: {e:?}"))?;
        let r = p
            .send(m)
            .await
            .map_err(|e| format!("sending {body}: {e:?}"))?;
        sent.insert(r.message_id().to_string(), body);
    }
    let c = native_consumer(ns, "three-native", TO_OTHERS).await?;
    let got = native_receive(&c, 6, true, LIMIT).await?;
    let native: BTreeMap<String, String> = got
        .iter()
        .map(|m| {
            (
                m.message.unique_key().unwrap_or("").to_string(),
                String::from_utf8_lossy(&m.message.body).into_owned(),
            )
        })
        .collect();
    if native != sent || got.iter().any(|m| m.message.tag() != Some("TagG")) {
        return Err(format!("native consumer got {native:?}, sent {sent:?}"));
    }
    c.shutdown().await;

    let rmq = rmq::Rmq::new(ns);
    let sink = rmq::sink();
    let mut rc = rmq.push("three-remoting", TO_OTHERS, "*").await;
    rc.register_message_listener_concurrently(rmq::Record::ok("r", &sink));
    rc.start()
        .await
        .map_err(|e| format!("remoting consumer: {e:?}"))?;
    let got = rmq::wait_deliveries(&sink, LIMIT, "6 over remoting", |g| g.len() >= 6).await;
    let remoting: BTreeMap<String, String> =
        got.iter().map(|g| (g.uniq.clone(), g.body_str())).collect();
    if remoting != sent || got.iter().any(|g| g.tags != "TagG") {
        return Err(format!("remoting consumer got {remoting:?}, sent {sent:?}"));
    }
    rc.shutdown().await;
    rmq.shutdown().await;
    println!("ok: 6 sent over gRPC, consumed natively and over remoting");
    Ok(())
}

/// Step 2.
async fn native_and_remoting_to_grpc(ns: &str, access: &str) -> Result<(), String> {
    let mut sent = BTreeMap::new();
    let p = ringmq_client::Producer::builder()
        .group("three-native-pg")
        .name_servers(ns)
        .start()
        .await
        .map_err(|e| format!("native producer: {e}"))?;
    for i in 0..3 {
        let body = format!("from-native-{i}");
        let r = p
            .send(ringmq_client::Message::new(TO_GRPC, body.clone()))
            .await
            .map_err(|e| format!("native send: {e}"))?;
        sent.insert(r.unique_key.clone(), body);
    }
    p.shutdown().await;
    let rmq = rmq::Rmq::new(ns);
    let mut rp = rmq.producer("three-remoting-pg").await;
    for i in 0..3 {
        let body = format!("from-remoting-{i}");
        let m = RmqMessage::builder()
            .topic(TO_GRPC.to_string())
            .body_slice(body.as_bytes())
            .build()
            .map_err(|e| format!("remoting message: {e:?}"))?;
        let r = rp
            .send(m)
            .await
            .map_err(|e| format!("remoting send: {e:?}"))?
            .ok_or("remoting send answered nothing")?;
        let id = r
            .msg_id
            .as_ref()
            .map(ToString::to_string)
            .ok_or("remoting send result without msg id")?;
        sent.insert(id, body);
    }
    rp.shutdown().await;
    rmq.shutdown().await;
    let c = grpc_consumer(access, TO_GRPC, "three-grpc").await?;
    let got = grpc_receive(&c, TO_GRPC, 6, true).await?;
    let by_id: BTreeMap<String, String> = got
        .iter()
        .map(|m| {
            (
                m.message_id().to_string(),
                String::from_utf8_lossy(m.body()).into_owned(),
            )
        })
        .collect();
    if by_id != sent {
        return Err(format!("gRPC consumer got {by_id:?}, sent {sent:?}"));
    }
    println!("ok: 3 sent natively and 3 over remoting, received over gRPC under their ids");
    Ok(())
}

/// Step 3.
async fn shared_pop_state(ns: &str, access: &str) -> Result<(), String> {
    let group = "three-shared";
    let p = ringmq_client::Producer::builder()
        .group("three-shared-pg")
        .name_servers(ns)
        .start()
        .await
        .map_err(|e| format!("native producer: {e}"))?;
    for i in 0..8 {
        p.send(ringmq_client::Message::new(SHARED, format!("shared-{i}")))
            .await
            .map_err(|e| format!("native send: {e}"))?;
    }
    p.shutdown().await;
    let native = native_consumer(ns, group, SHARED).await?;
    let first = native_receive(&native, 3, false, LIMIT).await?;
    let mut native_bodies = BTreeSet::new();
    for m in first.iter().take(3) {
        native
            .ack(m)
            .await
            .map_err(|e| format!("native ack: {e}"))?;
        native_bodies.insert(String::from_utf8_lossy(&m.message.body).into_owned());
    }
    // Anything popped beyond 3 goes back after its invisible time: not part of this step.
    if first.len() != 3 {
        return Err(format!("native receive of 3 got {}", first.len()));
    }
    let c = grpc_consumer(access, SHARED, group).await?;
    let got = grpc_receive(&c, SHARED, 5, true).await?;
    let grpc_bodies: BTreeSet<String> = got
        .iter()
        .map(|m| String::from_utf8_lossy(m.body()).into_owned())
        .collect();
    let all: BTreeSet<String> = (0..8).map(|i| format!("shared-{i}")).collect();
    if got.len() != 5
        || !grpc_bodies.is_disjoint(&native_bodies)
        || grpc_bodies
            .union(&native_bodies)
            .cloned()
            .collect::<BTreeSet<_>>()
            != all
    {
        return Err(format!(
            "native acked {native_bodies:?}, gRPC got {grpc_bodies:?} ({} messages)",
            got.len()
        ));
    }
    let again = native_receive(&native, 1, false, Duration::from_secs(3)).await?;
    if !again.is_empty() {
        return Err(format!(
            "native receive after the gRPC acks got {}",
            again.len()
        ));
    }
    native.shutdown().await;
    println!("ok: one group's POP state shared: 3 acked natively, 5 over gRPC, none again");
    Ok(())
}

/// Step 4.
async fn delay_across(ns: &str, access: &str) -> Result<(), String> {
    let p = grpc_producer(access, vec![DELAY]).await?;
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs() as i64;
    let due_s = now_s + 3;
    let m = MessageBuilder::builder()
        .set_topic(DELAY)
        .set_body(b"delayed".to_vec())
        .set_delivery_timestamp(due_s)
        .build()
        .map_err(|e| format!("building the delayed message: {e:?}"))?;
    p.send(m)
        .await
        .map_err(|e| format!("sending delayed: {e:?}"))?;
    let c = native_consumer(ns, "three-delay", DELAY).await?;
    let got = native_receive(&c, 1, true, LIMIT).await?;
    let at_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs() as i64;
    if got.len() != 1 || got[0].message.body.as_ref() != b"delayed" {
        return Err(format!("native delay consumer got {} messages", got.len()));
    }
    if at_s < due_s {
        return Err(format!("delayed message came at {at_s}, due {due_s}"));
    }
    c.shutdown().await;
    println!("ok: delayed over gRPC, delivered natively at its time");
    Ok(())
}

/// Step 5.
async fn retry_across(ns: &str, access: &str) -> Result<(), String> {
    let group = "three-retry";
    let p = grpc_producer(access, vec![RETRY]).await?;
    let m = MessageBuilder::builder()
        .set_topic(RETRY)
        .set_body(b"retry-me".to_vec())
        .build()
        .map_err(|e| format!("building: {e:?}"))?;
    let id = p
        .send(m)
        .await
        .map_err(|e| format!("sending: {e:?}"))?
        .message_id()
        .to_string();
    let c = grpc_consumer(access, RETRY, group).await?;
    let first = grpc_receive(&c, RETRY, 1, false).await?;
    if first.len() != 1 || first[0].delivery_attempt() != 1 {
        return Err(format!("gRPC first receive got {}", first.len()));
    }
    // Not acked: after its 10 s invisible time it comes again, here to a native member.
    let native = native_consumer(ns, group, RETRY).await?;
    let again = native_receive(&native, 1, true, LIMIT).await?;
    let Some(m) = again.first() else {
        return Err("the unacked gRPC message never came again natively".into());
    };
    if m.message.unique_key() != Some(id.as_str()) || m.message.reconsume_times != 1 {
        return Err(format!(
            "came again as {:?} with {} reconsumes, want {id} with 1",
            m.message.unique_key(),
            m.message.reconsume_times
        ));
    }
    native.shutdown().await;
    println!("ok: unacked over gRPC, delivered again natively with one reconsume");
    Ok(())
}
