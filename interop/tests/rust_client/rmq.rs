//! `rocketmq-client-rust` 1.0.0 as an application uses it: a runtime owner (its own tokio
//! runtime), a `ClientRuntime`, producers and consumers built from it with nothing but the
//! name server address and a group; plus a listener that records what it is handed.
//!
//! Everything here is the client's public API, unchanged; nothing is configured for
//! ringmq's sake.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ClientConfig, ClientResult, ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus, DefaultMQProducer,
    DefaultMQPushConsumer, MessageListenerConcurrently, MessageListenerOrderly, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::SerializeType;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use rocketmq_transport::api::RPCHook;

/// A deadline for a whole test body: a test that waits longer fails instead of hanging.
pub const TEST_LIMIT: Duration = Duration::from_secs(55);

/// One application's client side: the runtime it owns and the client runtime on it.
pub struct Rmq {
    owner: Option<RuntimeOwner>,
    runtime: Arc<ClientRuntime>,
    pub namesrv: String,
    /// What every producer and consumer made here sent and got back (an RPC hook: the
    /// client's own view of the wire).
    pub wire: Arc<WireLog>,
}

impl Rmq {
    pub fn new(namesrv: &str) -> Rmq {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "interop-rocketmq".to_string(),
            worker_threads: 2,
            shutdown_timeout: Duration::from_secs(5),
            ..Default::default()
        })
        .expect("a valid runtime configuration")
        .build()
        .expect("building the client's runtime");
        let runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig {
                shutdown_timeout: Duration::from_secs(5),
                ..Default::default()
            },
            TelemetryHandle::noop(),
        )
        .expect("creating the ClientRuntime");
        Rmq {
            owner: Some(owner),
            runtime,
            namesrv: namesrv.to_string(),
            wire: Arc::default(),
        }
    }

    /// A started producer of `group`.
    pub async fn producer(&self, group: &str) -> DefaultMQProducer {
        let mut producer = DefaultMQProducer::builder(self.runtime.clone())
            .producer_group(group.to_string())
            .name_server_addr(self.namesrv.clone())
            .send_msg_timeout(5_000)
            .rpc_hook(self.wire.clone())
            .build();
        producer.start().await.expect("starting the producer");
        producer
    }

    /// A push consumer of `group` on `topic` (`expr`: tags), not started, reading a new group
    /// from the first offset.
    pub async fn push(&self, group: &str, topic: &str, expr: &str) -> DefaultMQPushConsumer {
        self.push_as(group, topic, expr, MessageModel::Clustering, None)
            .await
    }

    /// Same, with a message model and an instance name (two members of one group in one
    /// process need two: a broadcasting member keeps the default instance name).
    pub async fn push_as(
        &self,
        group: &str,
        topic: &str,
        expr: &str,
        model: MessageModel,
        instance: Option<&str>,
    ) -> DefaultMQPushConsumer {
        let mut config = ClientConfig {
            namesrv_addr: Some(self.namesrv.clone().into()),
            ..Default::default()
        };
        if let Some(name) = instance {
            config.instance_name = name.to_string().into();
        }
        let mut consumer = DefaultMQPushConsumer::builder(self.runtime.clone())
            .client_config(config)
            .consumer_group(group.to_string())
            .message_model(model)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .rpc_hook(Some(self.wire.clone()))
            .build();
        consumer
            .subscribe(topic.to_string(), expr.to_string())
            .await
            .expect("subscribing");
        consumer
    }

    pub fn client_runtime(&self) -> Arc<ClientRuntime> {
        self.runtime.clone()
    }

    /// Checks the wire log (every exchange in the header serialization the process chose,
    /// no request refused as unsupported), then shuts down.
    pub async fn finish(self) {
        self.wire.assert_all(binary_default());
        self.wire.assert_all_served();
        self.shutdown().await;
    }

    /// Stops the client runtime and the runtime under it (each bounded by 5 s).
    pub async fn shutdown(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.runtime.shutdown()).await;
        if let Some(owner) = self.owner.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), owner.shutdown_tasks()).await;
            owner.shutdown_background();
        }
    }
}

/// RocketMQ request codes the tests look for in the wire log.
pub mod code {
    pub const SEND_MESSAGE: i32 = 10;
    pub const QUERY_MESSAGE: i32 = 12;
    pub const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
    pub const GET_MAX_OFFSET: i32 = 30;
    pub const GET_MIN_OFFSET: i32 = 31;
    pub const VIEW_MESSAGE_BY_ID: i32 = 33;
    pub const PULL_MESSAGE: i32 = 11;
    pub const QUERY_CONSUMER_OFFSET: i32 = 14;
    pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
    pub const HEART_BEAT: i32 = 34;
    pub const UNREGISTER_CLIENT: i32 = 35;
    pub const CONSUMER_SEND_MSG_BACK: i32 = 36;
    pub const END_TRANSACTION: i32 = 37;
    pub const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
    pub const LOCK_BATCH_MQ: i32 = 41;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const SEND_MESSAGE_V2: i32 = 310;
    pub const SEND_BATCH_MESSAGE: i32 = 320;
    pub const LITE_PULL_MESSAGE: i32 = 361;
    /// The answer to a request the server does not serve.
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
}

/// One request the client sent (code, header serialization) and, when one came, the
/// answer (code, header serialization).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub code: i32,
    pub binary: bool,
    pub answer: Option<(i32, bool)>,
}

/// An RPC hook that records every exchange; the client calls it for each request it sends
/// and each answer it receives.
#[derive(Default)]
pub struct WireLog {
    log: Mutex<Vec<Exchange>>,
}

/// Whether this process's client sends binary headers (`ROCKETMQ_SERIALIZE_TYPE`, read
/// once when the first client runtime is made).
pub fn binary_default() -> bool {
    rocketmq_protocol::protocol::remoting_command_defaults::application_remoting_command_factory()
        .defaults()
        .serialize_type()
        == SerializeType::ROCKETMQ
}

fn is_binary(cmd: &RemotingCommand) -> bool {
    cmd.serialize_type() == SerializeType::ROCKETMQ
}

impl WireLog {
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().expect("the wire log's lock").clone()
    }

    /// The distinct request codes sent.
    pub fn codes(&self) -> std::collections::BTreeSet<i32> {
        self.exchanges().iter().map(|e| e.code).collect()
    }

    /// Each of `codes` was sent at least once.
    pub fn assert_sent(&self, codes: &[i32]) {
        let sent = self.codes();
        let missing: Vec<&i32> = codes.iter().filter(|c| !sent.contains(c)).collect();
        assert!(
            missing.is_empty(),
            "request codes never sent: {missing:?}; sent {sent:?}"
        );
    }

    /// No request was answered REQUEST_CODE_NOT_SUPPORTED: ringmq serves every request
    /// this client makes in ordinary use.
    pub fn assert_all_served(&self) {
        let refused: std::collections::BTreeSet<i32> = self
            .exchanges()
            .iter()
            .filter(|e| {
                e.answer
                    .is_some_and(|(c, _)| c == code::REQUEST_CODE_NOT_SUPPORTED)
            })
            .map(|e| e.code)
            .collect();
        assert!(
            refused.is_empty(),
            "requests answered REQUEST_CODE_NOT_SUPPORTED: {refused:?}"
        );
    }

    /// Every request and every answer used binary headers (`true`) or JSON (`false`).
    pub fn assert_all(&self, binary: bool) {
        let odd: Vec<Exchange> = self
            .exchanges()
            .into_iter()
            .filter(|e| e.binary != binary || e.answer.is_some_and(|(_, b)| b != binary))
            .collect();
        let want = if binary { "ROCKETMQ" } else { "JSON" };
        assert!(
            odd.is_empty(),
            "exchanges not all in {want} headers: {odd:?}"
        );
    }
}

impl RPCHook for WireLog {
    fn do_before_request(
        &self,
        _remote_addr: std::net::SocketAddr,
        request: &mut RemotingCommand,
    ) -> Result<(), rocketmq_error::SharedError> {
        self.log
            .lock()
            .expect("the wire log's lock")
            .push(Exchange {
                code: request.code(),
                binary: is_binary(request),
                answer: None,
            });
        Ok(())
    }

    fn do_after_response(
        &self,
        _remote_addr: std::net::SocketAddr,
        request: &RemotingCommand,
        response: &mut RemotingCommand,
    ) -> Result<(), rocketmq_error::SharedError> {
        self.log
            .lock()
            .expect("the wire log's lock")
            .push(Exchange {
                code: request.code(),
                binary: is_binary(request),
                answer: Some((response.code(), is_binary(response))),
            });
        Ok(())
    }
}

/// What a listener was handed: one delivery of one message.
#[derive(Debug, Clone)]
pub struct Got {
    pub member: String,
    pub topic: String,
    /// The client's `UNIQ_KEY` (what `SendResult::msg_id` names).
    pub uniq: String,
    /// The offset message id (store host + commit log offset).
    pub offset_id: String,
    pub tags: String,
    pub keys: String,
    pub props: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub reconsume_times: i32,
    pub at: Instant,
}

impl Got {
    pub fn from_ext(member: &str, m: &MessageExt) -> Got {
        let props: BTreeMap<String, String> = m
            .properties()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let prop = |k: &str| props.get(k).cloned().unwrap_or_default();
        Got {
            member: member.to_string(),
            topic: m.topic().to_string(),
            uniq: prop("UNIQ_KEY"),
            offset_id: m.msg_id().to_string(),
            tags: prop("TAGS"),
            keys: prop("KEYS"),
            body: m.body().map(|b| b.to_vec()).unwrap_or_default(),
            queue_id: m.queue_id(),
            queue_offset: m.queue_offset(),
            reconsume_times: m.reconsume_times(),
            at: Instant::now(),
            props,
        }
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn prop(&self, k: &str) -> Option<&str> {
        self.props.get(k).map(String::as_str)
    }
}

/// Deliveries recorded by listeners, shared with the test.
pub type Sink = Arc<Mutex<Vec<Got>>>;

pub fn sink() -> Sink {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn snapshot(sink: &Sink) -> Vec<Got> {
    sink.lock().expect("the sink's lock").clone()
}

/// A concurrent listener that records every message and answers `status`.
pub struct Record {
    pub member: String,
    pub sink: Sink,
    pub status: ConsumeConcurrentlyStatus,
}

impl Record {
    pub fn ok(member: &str, sink: &Sink) -> Record {
        Record {
            member: member.to_string(),
            sink: sink.clone(),
            status: ConsumeConcurrentlyStatus::ConsumeSuccess,
        }
    }

    pub fn failing(member: &str, sink: &Sink) -> Record {
        Record {
            status: ConsumeConcurrentlyStatus::ReconsumeLater,
            ..Record::ok(member, sink)
        }
    }
}

impl MessageListenerConcurrently for Record {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> ClientResult<ConsumeConcurrentlyStatus> {
        let mut sink = self.sink.lock().expect("the sink's lock");
        for m in msgs {
            sink.push(Got::from_ext(&self.member, m));
        }
        Ok(self.status)
    }
}

/// An orderly listener that records every message.
pub struct RecordOrderly {
    pub member: String,
    pub sink: Sink,
}

impl MessageListenerOrderly for RecordOrderly {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &mut ConsumeOrderlyContext,
    ) -> ClientResult<ConsumeOrderlyStatus> {
        let mut sink = self.sink.lock().expect("the sink's lock");
        for m in msgs {
            sink.push(Got::from_ext(&self.member, m));
        }
        Ok(ConsumeOrderlyStatus::Success)
    }
}

/// Waits (at most `limit`) until `cond` holds over the recorded deliveries; panics with what
/// was recorded if it never does.
pub async fn wait_deliveries(
    sink: &Sink,
    limit: Duration,
    what: &str,
    cond: impl Fn(&[Got]) -> bool,
) -> Vec<Got> {
    let deadline = Instant::now() + limit;
    loop {
        let got = snapshot(sink);
        if cond(&got) {
            return got;
        }
        if Instant::now() >= deadline {
            let summary: Vec<String> = got
                .iter()
                .map(|g| {
                    format!(
                        "{} {} q{}@{} {:?} tags={} keys={} rc={}",
                        g.member,
                        g.topic,
                        g.queue_id,
                        g.queue_offset,
                        g.body_str(),
                        g.tags,
                        g.keys,
                        g.reconsume_times
                    )
                })
                .collect();
            panic!(
                "timed out after {limit:?} waiting for {what}; {} deliveries:\n{}",
                got.len(),
                summary.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Collects the values of `f` that occur more than once.
pub fn duplicates<T: Ord + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = BTreeMap::new();
    for i in items {
        *seen.entry(i).or_insert(0u32) += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}

/// Shards of the node the tests start (`node.rs`).
pub const NODE_SHARDS: u16 = 2;

/// The broker's own queue id of a queue a RocketMQ client names. A broker with several
/// shards is announced to RocketMQ clients as one broker per shard, `<brokerName>@<shard>`
/// at the shard's own port, whose queue j is the shard's j-th queue of the topic in the
/// broker's order (queue q is on shard `shard_of(topic, q)`); native clients name the broker's
/// ids.
pub fn broker_queue_id(topic: &str, broker_name: &str, queue_id: i32) -> i32 {
    use ringmq_client::wire::command::route::{shard_of, split_shard_broker_name};
    let Some((_, shard)) = split_shard_broker_name(broker_name) else {
        return queue_id;
    };
    (0u32..)
        .filter(|&q| shard_of(topic, q, NODE_SHARDS) == shard)
        .nth(usize::try_from(queue_id).expect("a queue id"))
        .and_then(|q| i32::try_from(q).ok())
        .expect("a queue id")
}

/// The broker's own queue id of a message a RocketMQ consumer was handed: its offset id
/// names the shard (physical offsets carry it in their top 16 bits).
pub fn delivered_broker_queue_id(topic: &str, g: &Got) -> i32 {
    let physical = u64::from_str_radix(&g.offset_id[16..], 16).expect("an offset id");
    let shard = u16::try_from(physical >> 48).expect("a shard");
    broker_queue_id(
        topic,
        &ringmq_client::wire::command::route::shard_broker_name("broker-a", shard),
        g.queue_id,
    )
}
