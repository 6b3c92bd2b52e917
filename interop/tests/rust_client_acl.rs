//! `rocketmq-client-rust` 1.0.0 signing with its own `AclClientRPCHook` against a real
//! `ringmq standalone` with `aclEnable=true`: the producer account's hook may send to the
//! topic it holds PUB on, a topic it does not hold is refused with NO_PERMISSION, and a
//! wrong secret is refused.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use ringmq_testkit::{Proc, Spawn};
use rocketmq_client_rust::{
    AclClientRPCHook, ClientRuntime, ClientRuntimeConfig, DefaultMQProducer, SessionCredentials,
    TelemetryHandle,
};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

const ACL: &str = "\
accounts:
  - accessKey: root
    secretKey: rootsecret1
    admin: true
  - accessKey: producer
    secretKey: producersecret1
    admin: false
    topicPerms:
      - orders=PUB
";

struct Node {
    _proc: Proc,
    _dir: tempfile::TempDir,
    namesrv: String,
}

fn start() -> Node {
    let dir = ringmq_testkit::tempdir("interop-acl");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, ACL).unwrap();
    let mut proc = Spawn::new("ringmq", ringmq_testkit::bin::ringmq())
        .log(dir.path().join("ringmq.log"))
        .arg("standalone")
        .arg("--data")
        .arg(dir.path().join("data"))
        .args([
            "--host",
            "127.0.0.1",
            "--namesrv-port",
            "0",
            "--broker-port",
            "0",
        ])
        .args(["--set", "mappedFileSizeCommitLog=8388608"])
        .args(["--set", "haListenPort=0"])
        .args(["--set", "aclEnable=true"])
        .args(["--set", &format!("aclFilePath={}", acl.display())])
        .args(["--set", "innerAccessKey=root"])
        .args(["--set", "innerSecretKey=rootsecret1"])
        .start();
    let ready = proc.wait_ready(Duration::from_secs(20));
    Node {
        namesrv: ready.namesrv_addr().to_string(),
        _proc: proc,
        _dir: dir,
    }
}

/// Creates the topics with the native admin client signing as `root`.
async fn create_topics(node: &Node, topics: &[&str]) {
    let admin = ringmq_client::Admin::with_config(ringmq_client::ClientConfig {
        name_servers: vec![node.namesrv.clone()],
        credentials: Some(ringmq_client::Credentials::new("root", "rootsecret1")),
        ..ringmq_client::ClientConfig::default()
    })
    .await
    .unwrap();
    for t in topics {
        admin
            .create_topic(t, 2, Duration::from_secs(10))
            .await
            .unwrap();
    }
}

struct App {
    owner: Option<RuntimeOwner>,
    runtime: Arc<ClientRuntime>,
}

impl App {
    fn new() -> App {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "interop-acl".to_string(),
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
        App {
            owner: Some(owner),
            runtime,
        }
    }

    /// A producer signing with (`ak`, `sk`); `Err` if it cannot start.
    async fn producer(
        &self,
        namesrv: &str,
        ak: &str,
        sk: &str,
    ) -> Result<DefaultMQProducer, String> {
        let hook = Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(
            ak.to_string(),
            sk.to_string(),
        )));
        let mut p = DefaultMQProducer::builder(self.runtime.clone())
            .producer_group(format!("acl-{ak}"))
            .name_server_addr(namesrv.to_string())
            .send_msg_timeout(5_000)
            .retry_times_when_send_failed(0)
            .rpc_hook(hook)
            .build();
        p.start().await.map_err(|e| e.to_string())?;
        Ok(p)
    }

    async fn shutdown(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.runtime.shutdown()).await;
        if let Some(owner) = self.owner.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), owner.shutdown_tasks()).await;
            owner.shutdown_background();
        }
    }
}

/// The error's code and its diagnostic fields (the broker's code among them; the remark is
/// a secret-presence field the client never shows).
fn describe(e: &rocketmq_error::Error) -> String {
    match e.diagnostic_view() {
        Ok(v) => {
            let fields: Vec<String> = v.fields().map(|f| format!("{f:?}")).collect();
            format!("{:?} {}", v.code(), fields.join(", "))
        }
        Err(_) => format!("{e:?}"),
    }
}

fn message(topic: &str, body: &str) -> Message {
    Message::builder()
        .topic(topic.to_string())
        .body_slice(body.as_bytes())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_accounts_hook_sends_where_it_holds_pub_only() {
    let node = start();
    create_topics(&node, &["orders", "payments"]).await;
    let app = App::new();
    let body = async {
        let mut p = app
            .producer(&node.namesrv, "producer", "producersecret1")
            .await
            .unwrap();
        let r = p.send(message("orders", "signed by the hook")).await;
        let r = r.unwrap_or_else(|e| panic!("send to orders: {e}"));
        assert!(r.is_some(), "a sync send returns a result");

        let denied = p.send(message("payments", "not allowed")).await;
        let e = describe(&denied.expect_err("payments must be refused"));
        eprintln!("payments refused: {e}");
        // The client redacts the broker's remark; its code is NO_PERMISSION (16).
        assert!(
            e.contains("name: \"broker_code\", visibility: Diagnostic, value: 16 }"),
            "want broker code 16 (NO_PERMISSION): {e}"
        );
        p.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(55), body)
        .await
        .expect("test body within 55 s");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused() {
    let node = start();
    create_topics(&node, &["orders"]).await;
    let app = App::new();
    let body = async {
        // The wrong secret: the name server refuses the route lookup (bad signature), so
        // the client has no route and the send fails before reaching the broker.
        let mut bad = app
            .producer(&node.namesrv, "producer", "wrong-secret")
            .await
            .unwrap();
        let r = bad.send(message("orders", "bad signature")).await;
        let e = describe(&r.expect_err("a wrong secret must be refused"));
        eprintln!("wrong secret refused: {e}");
        bad.shutdown().await;
        // The same account with its right secret sends the same message.
        let mut good = app
            .producer(&node.namesrv, "producer", "producersecret1")
            .await
            .unwrap();
        good.send(message("orders", "good signature"))
            .await
            .unwrap_or_else(|e| panic!("send with the right secret: {}", describe(&e)));
        good.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(55), body)
        .await
        .expect("test body within 55 s");
    app.shutdown().await;
}
