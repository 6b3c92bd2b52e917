//! RocketMQ's admin requests against a real `ringmq standalone` on loopback (issue #39,
//! item 1), three ways:
//! - `admin_requests_over_remoting`: each admin request code as RocketMQ's tools send it
//!   (a bare remoting client, `admin/remoting.rs`), its answer read as RocketMQ's JSON, and
//!   ringmq's own view checked with the native admin client; bad input gets a clear status;
//! - `rocketmq_client_creates_a_topic`: rocketmq-client-rust's `producer.create_topic`
//!   (UPDATE_AND_CREATE_TOPIC);
//! - `rocketmq_admin_cli_*`: the Rust port's mqadmin, `rocketmq-admin-cli` 1.0.0 (crates.io
//!   source, built by `scripts/install-admin-cli.sh` without its RocksDB export feature),
//!   run as a process against `ringmq standalone`, a name server with two brokers, and a
//!   node with ACL 2.0: topics, groups, offsets, connections, broker config and runtime,
//!   messages, users and ACLs (`admin/cli.rs`). Without the tool these fail in CI and
//!   elsewhere say so loudly and pass.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use ringmq_client::route::MessageQueue;
use ringmq_testkit::{Proc, Spawn};

#[path = "admin/cli.rs"]
mod cli;
#[path = "admin/remoting.rs"]
mod remoting;

use remoting::call;

const START_TIMEOUT: Duration = Duration::from_secs(20);
const BROKER: &str = "broker-a";

/// RocketMQ request and response codes used here.
mod code {
    pub const SEND_MESSAGE: i32 = 10;
    pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
    pub const UPDATE_AND_CREATE_TOPIC: i32 = 17;
    pub const GET_ALL_TOPIC_CONFIG: i32 = 21;
    pub const UPDATE_BROKER_CONFIG: i32 = 25;
    pub const GET_BROKER_CONFIG: i32 = 26;
    pub const GET_BROKER_RUNTIME_INFO: i32 = 28;
    pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: i32 = 200;
    pub const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: i32 = 201;
    pub const GET_TOPIC_STATS_INFO: i32 = 202;
    pub const GET_CONSUMER_CONNECTION_LIST: i32 = 203;
    pub const GET_PRODUCER_CONNECTION_LIST: i32 = 204;
    pub const DELETE_SUBSCRIPTIONGROUP: i32 = 207;
    pub const GET_CONSUME_STATS: i32 = 208;
    pub const DELETE_TOPIC_IN_BROKER: i32 = 215;
    pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub const INVOKE_BROKER_TO_RESET_OFFSET: i32 = 222;
    pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub const QUERY_TOPIC_CONSUME_BY_WHO: i32 = 300;
    pub const GET_CONSUMER_RUNNING_INFO: i32 = 307;
    pub const CLONE_GROUP_OFFSET: i32 = 314;
    pub const DELETE_TOPIC_IN_BROKER_LIST: i32 = 5002;
    pub const QUERY_TOPICS_BY_CONSUMER: i32 = 343;
    pub const GET_TOPIC_CONFIG: i32 = 351;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_SUBSCRIPTIONGROUP_CONFIG: i32 = 352;

    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const CONSUMER_NOT_ONLINE: i32 = 206;
}

/// A running `ringmq standalone` (killed on drop with its folder).
struct Node {
    _proc: Proc,
    _dir: tempfile::TempDir,
    namesrv: String,
    broker: String,
}

impl Node {
    fn start() -> Node {
        let dir = ringmq_testkit::tempdir("interop-admin");
        let mut proc = Spawn::new("ringmq", ringmq_testkit::bin::ringmq())
            .log(dir.path().join("ringmq.log"))
            .arg("standalone")
            .arg("--data")
            .arg(dir.path().join("data"))
            .args(["--host", "127.0.0.1", "--namesrv-port", "0"])
            .args(["--broker-port", "0", "--grpc-port", "0", "--shards", "2"])
            .args(["--set", "mappedFileSizeCommitLog=8388608"])
            .args(["--set", "haListenPort=0"])
            .env_default("RUST_LOG", "info")
            .start();
        let ready = proc.wait_ready(START_TIMEOUT);
        Node {
            namesrv: ready.namesrv_addr().to_string(),
            broker: ready.broker_addr().to_string(),
            _proc: proc,
            _dir: dir,
        }
    }

    fn broker_addr(&self) -> std::net::SocketAddr {
        self.broker.parse().unwrap()
    }

    async fn admin(&self) -> ringmq_client::Admin {
        ringmq_client::Admin::connect(&self.namesrv).await.unwrap()
    }
}

fn mq(topic: &str, queue_id: u32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_string(),
        broker_name: BROKER.to_string(),
        queue_id,
    }
}

/// The unsigned number right after `prefix` in `body`.
fn json_number(body: &str, prefix: &str) -> u64 {
    let from = body
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix} in {body}"))
        + prefix.len();
    let digits: String = body[from..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after {prefix} in {body}"))
}

/// Asserts `a` has code `want`, showing the remark otherwise.
macro_rules! expect_code {
    ($a:expr, $want:expr) => {{
        let a = $a;
        assert_eq!(a.code, $want, "remark {:?}, body {:?}", a.remark, a.body);
        a
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requests_over_remoting() {
    let node = Node::start();
    let (b, n) = (node.broker.as_str(), node.namesrv.as_str());
    let admin = node.admin().await;
    let t = "adm-raw";

    // Topics.
    let create = [
        ("topic", t),
        ("defaultTopic", "TBW102"),
        ("readQueueNums", "4"),
        ("writeQueueNums", "4"),
        ("perm", "6"),
        ("topicFilterType", "SINGLE_TAG"),
        ("attributes", "+message.type=NORMAL"),
    ];
    expect_code!(
        call(b, code::UPDATE_AND_CREATE_TOPIC, &create, &[]),
        code::SUCCESS
    );
    let cfg = admin
        .topic_config(node.broker_addr(), t)
        .await
        .unwrap()
        .expect("the topic exists on the broker");
    assert_eq!(
        (cfg.read_queue_count, cfg.write_queue_count, cfg.perm),
        (4, 4, 6)
    );
    assert_eq!(
        cfg.attributes.get("message.type").map(String::as_str),
        Some("NORMAL")
    );
    let zero = [
        ("topic", "bad"),
        ("readQueueNums", "0"),
        ("writeQueueNums", "4"),
        ("perm", "6"),
    ];
    let a = expect_code!(
        call(b, code::UPDATE_AND_CREATE_TOPIC, &zero, &[]),
        code::SYSTEM_ERROR
    );
    assert!(a.remark.contains("readQueueNums"), "{}", a.remark);
    let perm = [
        ("topic", "bad"),
        ("readQueueNums", "1"),
        ("writeQueueNums", "1"),
        ("perm", "16"),
    ];
    let a = expect_code!(
        call(b, code::UPDATE_AND_CREATE_TOPIC, &perm, &[]),
        code::SYSTEM_ERROR
    );
    assert!(a.remark.contains("perm 16"), "{}", a.remark);
    assert!(admin
        .topic_config(node.broker_addr(), "bad")
        .await
        .unwrap()
        .is_none());

    let all = expect_code!(call(b, code::GET_ALL_TOPIC_CONFIG, &[], &[]), code::SUCCESS);
    assert!(
        all.body
            .contains(r#""adm-raw":{"topicName":"adm-raw","readQueueNums":4"#),
        "{}",
        all.body
    );
    assert!(all.body.contains(r#""dataVersion":{"#), "{}", all.body);
    let one = expect_code!(
        call(b, code::GET_TOPIC_CONFIG, &[("topic", t)], &[]),
        code::SUCCESS
    );
    assert!(one.body.contains(r#""writeQueueNums":4"#), "{}", one.body);
    expect_code!(
        call(b, code::GET_TOPIC_CONFIG, &[("topic", "nope")], &[]),
        code::TOPIC_NOT_EXIST
    );

    // Three messages to queue 0, RocketMQ's SEND_MESSAGE as a client sends it.
    for i in 0..3 {
        let send = [
            ("producerGroup", "adm-p"),
            ("topic", t),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "0"),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "0"),
            ("properties", ""),
            ("reconsumeTimes", "0"),
        ];
        let body = format!("message {i}");
        expect_code!(
            call(b, code::SEND_MESSAGE, &send, body.as_bytes()),
            code::SUCCESS
        );
    }
    let stats = expect_code!(
        call(b, code::GET_TOPIC_STATS_INFO, &[("topic", t)], &[]),
        code::SUCCESS
    );
    assert!(
        stats.body.contains(
            r#"{"brokerName":"broker-a","queueId":0,"topic":"adm-raw"}:{"minOffset":0,"maxOffset":3"#
        ),
        "{}",
        stats.body
    );
    assert!(stats.body.contains(r#""topicPutTps":"#), "{}", stats.body);
    assert_eq!(stats.body.matches(r#""topic":"adm-raw"}:"#).count(), 4);
    // On each shard's port (a broker of its own to RocketMQ clients: `broker-a@N`), that
    // shard's queues only, numbered from 0 as its route says; together, the whole topic.
    let route = expect_code!(
        call(n, code::GET_ROUTEINFO_BY_TOPIC, &[("topic", t)], &[]),
        code::SUCCESS
    );
    let (mut queues, mut stored) = (0, 0);
    for shard in ["broker-a@0", "broker-a@1"] {
        let count = json_number(
            &route.body,
            &format!(r#""brokerName":"{shard}","readQueueNums":"#),
        );
        let at = format!(r#""brokerName":"{shard}","brokerAddrs":{{"0":""#);
        let from = route.body.find(&at).expect("the shard's address") + at.len();
        let addr = &route.body[from..from + route.body[from..].find('"').expect("quoted")];
        let stats = expect_code!(
            call(addr, code::GET_TOPIC_STATS_INFO, &[("topic", t)], &[]),
            code::SUCCESS
        );
        assert_eq!(
            stats.body.matches(r#""topic":"adm-raw"}:"#).count() as u64,
            count
        );
        let one = expect_code!(
            call(addr, code::GET_TOPIC_CONFIG, &[("topic", t)], &[]),
            code::SUCCESS
        );
        assert_eq!(json_number(&one.body, r#""readQueueNums":"#), count);
        for q in 0..count {
            let key = format!(
                r#"{{"brokerName":"{shard}","queueId":{q},"topic":"adm-raw"}}:{{"minOffset":0,"maxOffset":"#
            );
            stored += json_number(&stats.body, &key);
        }
        queues += count;
    }
    assert_eq!(
        (queues, stored),
        (4, 3),
        "queues and messages over the shards"
    );

    // Broker config and runtime.
    let cfg = expect_code!(call(b, code::GET_BROKER_CONFIG, &[], &[]), code::SUCCESS);
    assert!(
        cfg.body.contains("brokerClusterName=DefaultCluster\n"),
        "{}",
        cfg.body
    );
    assert!(cfg.ext.contains_key("version"));
    expect_code!(
        call(
            b,
            code::UPDATE_BROKER_CONFIG,
            &[],
            b"flushIntervalCommitLog=700\n"
        ),
        code::SUCCESS
    );
    let live = admin.broker_config(node.broker_addr()).await.unwrap();
    assert_eq!(
        live.get("flushIntervalCommitLog").map(String::as_str),
        Some("700")
    );
    let a = expect_code!(
        call(b, code::UPDATE_BROKER_CONFIG, &[], b"noSuchKey=1\n"),
        code::MESSAGE_ILLEGAL
    );
    assert!(a.remark.contains("noSuchKey"), "{}", a.remark);
    expect_code!(
        call(b, code::UPDATE_BROKER_CONFIG, &[], b"no value"),
        code::SYSTEM_ERROR
    );
    let rt = expect_code!(
        call(b, code::GET_BROKER_RUNTIME_INFO, &[], &[]),
        code::SUCCESS
    );
    for key in [
        "brokerVersionDesc",
        "putTps",
        "getTransferredTps",
        "msgPutTotalTodayNow",
        "bootTimestamp",
        "commitLogDiskRatio",
    ] {
        assert!(
            rt.body.contains(&format!("\"{key}\":")),
            "{key} in {}",
            rt.body
        );
    }
    assert!(rt.body.starts_with(r#"{"table":{"#), "{}", rt.body);
    assert!(
        rt.body.contains(r#""msgPutTotalTodayNow":"3""#),
        "{}",
        rt.body
    );

    // Groups.
    let g = "adm-g";
    expect_code!(
        call(
            b,
            code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            &[],
            br#"{"groupName":"adm-g","consumeEnable":true,"retryMaxTimes":3}"#
        ),
        code::SUCCESS
    );
    let groups = admin.subscription_groups(node.broker_addr()).await.unwrap();
    let mine = groups
        .groups
        .iter()
        .find(|x| x.group == g)
        .expect("the group");
    assert_eq!(mine.retry_max_times, 3);
    expect_code!(
        call(
            b,
            code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            &[],
            b"{not json"
        ),
        code::SYSTEM_ERROR
    );
    let all = expect_code!(
        call(b, code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, &[], &[]),
        code::SUCCESS
    );
    assert!(
        all.body.contains(r#""adm-g":{"groupName":"adm-g""#),
        "{}",
        all.body
    );
    assert!(all.body.contains(r#""forbiddenTable":{}"#), "{}", all.body);
    let one = expect_code!(
        call(b, code::GET_SUBSCRIPTIONGROUP_CONFIG, &[("group", g)], &[]),
        code::SUCCESS
    );
    assert!(one.body.contains(r#""retryMaxTimes":3"#), "{}", one.body);

    // Offsets.
    let commit = [
        ("consumerGroup", g),
        ("topic", t),
        ("queueId", "0"),
        ("commitOffset", "2"),
    ];
    expect_code!(
        call(b, code::UPDATE_CONSUMER_OFFSET, &commit, &[]),
        code::SUCCESS
    );
    let cs = expect_code!(
        call(
            b,
            code::GET_CONSUME_STATS,
            &[("consumerGroup", g), ("topic", t)],
            &[]
        ),
        code::SUCCESS
    );
    assert!(
        cs.body.contains(
            r#"{"brokerName":"broker-a","queueId":0,"topic":"adm-raw"}:{"brokerOffset":3,"consumerOffset":2"#
        ),
        "{}",
        cs.body
    );
    assert!(cs.body.contains(r#""consumeTps":"#), "{}", cs.body);
    // No topic: every topic the group has offsets for.
    let cs = expect_code!(
        call(b, code::GET_CONSUME_STATS, &[("consumerGroup", g)], &[]),
        code::SUCCESS
    );
    assert!(cs.body.contains(r#""topic":"adm-raw"}"#), "{}", cs.body);
    let who = expect_code!(
        call(b, code::QUERY_TOPIC_CONSUME_BY_WHO, &[("topic", t)], &[]),
        code::SUCCESS
    );
    assert_eq!(who.body, r#"{"groupList":["adm-g"]}"#);
    let topics = expect_code!(
        call(b, code::QUERY_TOPICS_BY_CONSUMER, &[("group", g)], &[]),
        code::SUCCESS
    );
    assert_eq!(topics.body, r#"{"topicList":["adm-raw"]}"#);
    // Reset to the end (timestamp -1), then one queue to an offset.
    let reset = [
        ("group", g),
        ("topic", t),
        ("timestamp", "-1"),
        ("isForce", "true"),
    ];
    let r = expect_code!(
        call(b, code::INVOKE_BROKER_TO_RESET_OFFSET, &reset, &[]),
        code::SUCCESS
    );
    assert!(r.body.contains(r#""topic":"adm-raw"}:3"#), "{}", r.body);
    assert_eq!(admin.committed_offset(g, &mq(t, 0)).await.unwrap(), Some(3));
    let one = [
        ("group", g),
        ("topic", t),
        ("queueId", "0"),
        ("offset", "1"),
        ("timestamp", "0"),
        ("isForce", "true"),
    ];
    expect_code!(
        call(b, code::INVOKE_BROKER_TO_RESET_OFFSET, &one, &[]),
        code::SUCCESS
    );
    assert_eq!(admin.committed_offset(g, &mq(t, 0)).await.unwrap(), Some(1));
    let past = [
        ("group", g),
        ("topic", t),
        ("queueId", "9"),
        ("offset", "1"),
        ("timestamp", "0"),
        ("isForce", "true"),
    ];
    expect_code!(
        call(b, code::INVOKE_BROKER_TO_RESET_OFFSET, &past, &[]),
        code::SYSTEM_ERROR
    );

    // Connections: nobody is online.
    expect_code!(
        call(
            b,
            code::GET_CONSUMER_CONNECTION_LIST,
            &[("consumerGroup", g)],
            &[]
        ),
        code::CONSUMER_NOT_ONLINE
    );
    expect_code!(
        call(
            b,
            code::GET_PRODUCER_CONNECTION_LIST,
            &[("producerGroup", "adm-p")],
            &[]
        ),
        code::SYSTEM_ERROR
    );

    // A clone without its destination and a list body without a name are refused, naming
    // what is missing; nothing changes.
    expect_code!(
        call(b, code::CLONE_GROUP_OFFSET, &[("srcGroup", g)], &[]),
        code::SYSTEM_ERROR
    );
    let a = expect_code!(
        call(
            b,
            code::DELETE_TOPIC_IN_BROKER_LIST,
            &[],
            br#"{"topicList":[]}"#
        ),
        code::SYSTEM_ERROR
    );
    assert!(a.remark.contains("topicList"), "{}", a.remark);
    assert!(admin
        .topic_config(node.broker_addr(), t)
        .await
        .unwrap()
        .is_some());

    // Deletions, twice each (RocketMQ's deletions are idempotent).
    for _ in 0..2 {
        expect_code!(
            call(b, code::DELETE_SUBSCRIPTIONGROUP, &[("groupName", g)], &[]),
            code::SUCCESS
        );
    }
    let groups = admin.subscription_groups(node.broker_addr()).await.unwrap();
    assert!(groups
        .groups
        .iter()
        .all(|x| x.group != g || x.retry_max_times != 3));
    let by_cluster = expect_code!(
        call(
            n,
            code::GET_TOPICS_BY_CLUSTER,
            &[("cluster", "DefaultCluster")],
            &[]
        ),
        code::SUCCESS
    );
    assert!(
        by_cluster.body.contains(r#""adm-raw""#),
        "{}",
        by_cluster.body
    );
    expect_code!(
        call(
            n,
            code::GET_TOPICS_BY_CLUSTER,
            &[("cluster", "NoSuchCluster")],
            &[]
        ),
        code::SYSTEM_ERROR
    );
    for _ in 0..2 {
        expect_code!(
            call(b, code::DELETE_TOPIC_IN_BROKER, &[("topic", t)], &[]),
            code::SUCCESS
        );
        expect_code!(
            call(
                n,
                code::DELETE_TOPIC_IN_NAMESRV,
                &[("topic", t), ("clusterName", "DefaultCluster")],
                &[]
            ),
            code::SUCCESS
        );
    }
    assert!(admin
        .topic_config(node.broker_addr(), t)
        .await
        .unwrap()
        .is_none());

    // Still refused, with the code named.
    let a = expect_code!(
        call(
            b,
            code::GET_CONSUMER_RUNNING_INFO,
            &[("consumerGroup", g), ("clientId", "x")],
            &[]
        ),
        code::REQUEST_CODE_NOT_SUPPORTED
    );
    assert!(a.remark.contains("307"), "{}", a.remark);
    admin.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_client_creates_a_topic() {
    use rocketmq_client_rust::{
        ClientRuntime, ClientRuntimeConfig, DefaultMQProducer, TelemetryHandle,
    };
    use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

    let node = Node::start();
    let owner = RuntimeOwner::plan(RuntimeConfig {
        thread_name: "interop-admin".to_string(),
        worker_threads: 2,
        shutdown_timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .unwrap()
    .build()
    .unwrap();
    let runtime = ClientRuntime::try_new(
        owner.root_context().component("client"),
        ClientRuntimeConfig {
            shutdown_timeout: Duration::from_secs(5),
            ..Default::default()
        },
        TelemetryHandle::noop(),
    )
    .unwrap();
    let mut producer = DefaultMQProducer::builder(runtime)
        .producer_group("adm-client-p".to_string())
        .name_server_addr(node.namesrv.clone())
        .send_msg_timeout(5_000)
        .build();
    producer.start().await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        producer.create_topic("TBW102", "adm-client", 3, HashMap::new()),
    )
    .await
    .expect("create_topic within 30 s")
    .expect("create_topic succeeds");
    let admin = node.admin().await;
    let cfg = admin
        .topic_config(node.broker_addr(), "adm-client")
        .await
        .unwrap()
        .expect("the topic exists on the broker");
    assert_eq!((cfg.read_queue_count, cfg.write_queue_count), (3, 3));
    admin.close();
    producer.shutdown().await;
}

/// The tool on `ringmq standalone`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_admin_cli_standalone() {
    let Some(bin) = cli::tool() else { return };
    let target = cli::Target::standalone(&[]);
    let tool = cli::Cli {
        bin,
        namesrv: target.namesrv.clone(),
        creds: None,
    };
    cli::families(&tool, &target).await;
}

/// The tool on a 2-shard `ringmq standalone` (see `cli::shards`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_admin_cli_two_shards() {
    let Some(bin) = cli::tool() else { return };
    let target = cli::Target::standalone_shards(&[], 2);
    let tool = cli::Cli {
        bin,
        namesrv: target.namesrv.clone(),
        creds: None,
    };
    cli::shards(&tool, &target, 2);
}

/// The tool on a name server and two `ringmq broker` masters of one cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_admin_cli_two_brokers() {
    let Some(bin) = cli::tool() else { return };
    let target = cli::Target::two_brokers();
    let tool = cli::Cli {
        bin,
        namesrv: target.namesrv.clone(),
        creds: None,
    };
    cli::families(&tool, &target).await;
}

/// The tool's user and ACL commands on `ringmq standalone` with ACL 2.0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_admin_cli_acl2() {
    let Some(bin) = cli::tool() else { return };
    let target = cli::Target::standalone(&cli::acl2_sets());
    cli::acl(&bin, &target).await;
}
