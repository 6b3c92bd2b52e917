//! ACL against a real `ringmq standalone` with `aclEnable=true`, driven by the native client
//! signing with its credentials: each permission of `plain_acl.yml` allows exactly what it
//! names and nothing else (topics, groups, admin), unsigned and badly signed requests are
//! refused, the file is reloaded under the running broker (a broken one keeps the last
//! good one), and over TLS a connection signs in once.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::Node;
use ringmq_client::consumer::PullStatus;
use ringmq_client::wire::code::Status;
use ringmq_client::{Admin, ClientConfig, Credentials, Error, Message, Producer, PullConsumer};

const ROOT: (&str, &str) = ("root", "rootsecret1");
const PRODUCER: (&str, &str) = ("producer", "producersecret1");
const CONSUMER: (&str, &str) = ("consumer", "consumersecret1");
const DENIED: (&str, &str) = ("denied", "deniedsecret1");

/// The ACL file: an admin, a producer of `orders`, a consumer of `orders` in group `g1`, and
/// an account whose every permission is DENY. `extra_producer_topic` adds one more topic
/// the producer may publish to (for the reload test).
fn acl_yaml(extra_producer_topic: Option<&str>) -> String {
    let extra = extra_producer_topic
        .map(|t| format!("      - {t}=PUB\n"))
        .unwrap_or_default();
    format!(
        "globalWhiteRemoteAddresses:\n\
         accounts:\n\
         \x20 - accessKey: {root}\n\
         \x20   secretKey: {root_s}\n\
         \x20   admin: true\n\
         \x20 - accessKey: {prod}\n\
         \x20   secretKey: {prod_s}\n\
         \x20   admin: false\n\
         \x20   defaultTopicPerm: DENY\n\
         \x20   defaultGroupPerm: DENY\n\
         \x20   topicPerms:\n\
         \x20     - orders=PUB\n\
         {extra}\
         \x20 - accessKey: {cons}\n\
         \x20   secretKey: {cons_s}\n\
         \x20   admin: false\n\
         \x20   defaultTopicPerm: DENY\n\
         \x20   defaultGroupPerm: DENY\n\
         \x20   topicPerms:\n\
         \x20     - orders=SUB\n\
         \x20   groupPerms:\n\
         \x20     - g1=SUB\n\
         \x20 - accessKey: {den}\n\
         \x20   secretKey: {den_s}\n\
         \x20   admin: false\n\
         \x20   defaultTopicPerm: PUB|SUB\n\
         \x20   defaultGroupPerm: SUB\n\
         \x20   topicPerms:\n\
         \x20     - orders=DENY\n\
         \x20   groupPerms:\n\
         \x20     - g1=DENY\n",
        root = ROOT.0,
        root_s = ROOT.1,
        prod = PRODUCER.0,
        prod_s = PRODUCER.1,
        cons = CONSUMER.0,
        cons_s = CONSUMER.1,
        den = DENIED.0,
        den_s = DENIED.1,
    )
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`.
fn write_acl(path: &Path, text: &str) {
    let tmp = path.with_extension("yml.new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A standalone node with ACL on, `root` as its inner account, the file in its temp dir.
fn start_node() -> (Node, std::path::PathBuf, tempfile::TempDir) {
    // The file must exist before the node starts; the node's temp dir is made by `Node`, so
    // the file lives in a dir of its own.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain_acl.yml");
    write_acl(&path, &acl_yaml(None));
    let file_set = format!("aclFilePath={}", path.display());
    let node = Node::start_configured(
        2,
        &[
            "aclEnable=true",
            &file_set,
            "innerAccessKey=root",
            "innerSecretKey=rootsecret1",
        ],
    );
    (node, path, dir)
}

fn creds((ak, sk): (&str, &str)) -> Credentials {
    Credentials::new(ak, sk)
}

async fn admin(node: &Node, c: Option<Credentials>) -> Admin {
    Admin::with_config(ClientConfig {
        name_servers: vec![node.namesrv()],
        credentials: c,
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::default()
    })
    .await
    .unwrap()
}

async fn producer(node: &Node, c: Credentials) -> Producer {
    Producer::builder()
        .group("acl-producers")
        .name_server(node.namesrv())
        .credentials(c)
        .request_timeout(Duration::from_secs(5))
        .start()
        .await
        .unwrap()
}

async fn puller(node: &Node, group: &str, c: Credentials) -> PullConsumer {
    PullConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .credentials(c)
        .request_timeout(Duration::from_secs(5))
        .start()
        .await
        .unwrap()
}

/// Panics unless `r` failed with NO_PERMISSION whose remark contains `needle`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(r: Result<T, Error>, needle: &str) {
    let r = r.map_err(|e| match e {
        Error::RetriesExhausted { last, .. } => *last,
        e => e,
    });
    match r {
        Err(Error::Broker { status, remark, .. }) => {
            assert_eq!(status, Status::NoPermission, "remark: {remark}");
            assert!(
                remark.contains(needle),
                "remark {remark:?} does not contain {needle:?}"
            );
        }
        other => panic!("want NO_PERMISSION ({needle}), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_permission_allows_exactly_what_it_names() {
    let (node, _acl, _acl_dir) = start_node();
    let root = admin(&node, Some(creds(ROOT))).await;
    for t in ["orders", "payments"] {
        root.create_topic(t, 2, Duration::from_secs(10))
            .await
            .unwrap();
    }

    // Topic creation needs an admin account.
    let non_admin = admin(&node, Some(creds(PRODUCER))).await;
    assert_refused(
        non_admin
            .create_topic("not-by-producer", 2, Duration::from_secs(10))
            .await,
        "admin",
    );

    // The producer: orders=PUB, nothing else.
    let p = producer(&node, creds(PRODUCER)).await;
    let sent = p.send(Message::new("orders", "o-1")).await.unwrap();
    assert_eq!(sent.status, ringmq_client::SendStatus::Ok);
    assert_refused(p.send(Message::new("payments", "p-1")).await, "payments");

    // The consumer: orders=SUB with g1; g2 is not its group, and it cannot publish.
    let c1 = puller(&node, "g1", creds(CONSUMER)).await;
    let queues = c1.fetch_queues("orders").await.unwrap();
    assert_eq!(queues.len(), 2);
    let mut got = Vec::new();
    for mq in &queues {
        let r = c1.pull(mq, 0, 32, "*").await.unwrap();
        if r.status == PullStatus::Found {
            got.extend(r.messages.iter().map(common::body));
        }
    }
    assert_eq!(got, ["o-1"]);
    let c2 = puller(&node, "g2", creds(CONSUMER)).await;
    assert_refused(c2.pull(&queues[0], 0, 32, "*").await, "g2");
    let cp = producer(&node, creds(CONSUMER)).await;
    assert_refused(cp.send(Message::new("orders", "c-1")).await, "orders");

    // DENY wins over the account's PUB|SUB default.
    let dp = producer(&node, creds(DENIED)).await;
    assert_refused(dp.send(Message::new("orders", "d-1")).await, "orders");
    dp.send(Message::new("payments", "d-2")).await.unwrap();
    let dc = puller(&node, "g1", creds(DENIED)).await;
    assert_refused(dc.pull(&queues[0], 0, 32, "*").await, "orders");

    // Root may do anything, including creating topics.
    root.create_topic("by-root", 2, Duration::from_secs(10))
        .await
        .unwrap();
    let rp = producer(&node, creds(ROOT)).await;
    rp.send(Message::new("by-root", "r-1")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_and_badly_signed_requests_are_refused() {
    let (node, _acl, _acl_dir) = start_node();
    let root = admin(&node, Some(creds(ROOT))).await;
    root.create_topic("orders", 2, Duration::from_secs(10))
        .await
        .unwrap();

    // No credentials: the name server refuses (the broker's refusal of an unsigned SEND is in
    // node/tests/acl_replay.rs).
    let anon = admin(&node, None).await;
    assert_refused(anon.cluster_info().await, "sign requests");

    // A known access key with the wrong secret: a bad signature.
    let wrong = admin(&node, Some(Credentials::new(PRODUCER.0, "not-the-secret"))).await;
    assert_refused(wrong.cluster_info().await, "signature");

    // An unknown access key.
    let unknown = admin(&node, Some(Credentials::new("nobody", "whatever1"))).await;
    assert_refused(unknown.cluster_info().await, "");

    // The right secret works on the same requests.
    let good = admin(&node, Some(creds(PRODUCER))).await;
    good.cluster_info().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_is_reloaded_and_a_broken_one_keeps_the_last_good_one() {
    let (node, acl, _acl_dir) = start_node();
    let root = admin(&node, Some(creds(ROOT))).await;
    for t in ["orders", "payments", "refunds"] {
        root.create_topic(t, 2, Duration::from_secs(10))
            .await
            .unwrap();
    }
    let p = producer(&node, creds(PRODUCER)).await;
    assert_refused(p.send(Message::new("payments", "before")).await, "payments");

    // Grant payments=PUB: in force within a few seconds, without a restart.
    write_acl(&acl, &acl_yaml(Some("payments")));
    let granted = poll(|| async { p.send(Message::new("payments", "after")).await.is_ok() }).await;
    assert!(
        granted,
        "payments=PUB not in force 10 s after the file changed"
    );
    assert_refused(p.send(Message::new("refunds", "r")).await, "refunds");

    // A broken file: logged, and the last good one stays in force.
    write_acl(&acl, "accounts:\n  - accessKey: [this is not\n");
    let log = node.log_path();
    let logged = ringmq_testkit::poll_until_async(Duration::from_secs(10), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("ACL file changed but is not used")
    })
    .await;
    assert!(
        logged,
        "the broken file was never reported in {}",
        log.display()
    );
    p.send(Message::new("payments", "still")).await.unwrap();
    p.send(Message::new("orders", "still")).await.unwrap();
    assert_refused(p.send(Message::new("refunds", "r")).await, "refunds");

    // A good file again (without payments) takes effect.
    write_acl(&acl, &acl_yaml(None));
    let revoked = poll(|| async { p.send(Message::new("payments", "x")).await.is_err() }).await;
    assert!(
        revoked,
        "payments=PUB still in force 10 s after it was removed"
    );
    assert_refused(p.send(Message::new("payments", "y")).await, "payments");
    p.send(Message::new("orders", "z")).await.unwrap();
}

/// Over TLS a connection signs in once: its signed HELLO binds it to the account and the
/// requests after it go unsigned. A changed secret ends the binding (refused, naming the
/// sign-in, and the connection closed); the reconnection's HELLO, signed with the old
/// secret, is then refused as any badly signed request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_a_connection_signs_in_once_and_a_changed_secret_ends_it() {
    let pki = ringmq_testkit::certs::TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("plain_acl.yml");
    write_acl(&acl, &acl_yaml(None));
    let sets = [
        "aclEnable=true".to_string(),
        format!("aclFilePath={}", acl.display()),
        "innerAccessKey=root".to_string(),
        "innerSecretKey=rootsecret1".to_string(),
        "tls.server.mode=enforcing".to_string(),
        format!("tls.server.certPath={}", pki.server_cert.display()),
        format!("tls.server.keyPath={}", pki.server_key.display()),
        "tls.enable=true".to_string(),
        format!("tls.client.trustCertPath={}", pki.ca.display()),
    ];
    let refs: Vec<&str> = sets.iter().map(String::as_str).collect();
    let node = Node::start_configured(2, &refs);
    let tls = ringmq_client::TlsOptions::with_ca(&pki.ca);
    let root = Admin::with_config(ClientConfig {
        name_servers: vec![node.namesrv()],
        credentials: Some(creds(ROOT)),
        request_timeout: Duration::from_secs(5),
        tls: tls.clone(),
        ..ClientConfig::default()
    })
    .await
    .unwrap();
    root.create_topic("orders", 2, Duration::from_secs(10))
        .await
        .unwrap();
    let p = Producer::builder()
        .group("acl-producers")
        .name_server(node.namesrv())
        .credentials(creds(PRODUCER))
        .tls(tls)
        .request_timeout(Duration::from_secs(5))
        .retries(0)
        .start()
        .await
        .unwrap();
    for i in 0..20 {
        p.send(Message::new("orders", format!("tls-{i}")))
            .await
            .unwrap();
    }
    let batch: Vec<Message> = (0..16)
        .map(|i| Message::new("orders", format!("tls-batch-{i}")))
        .collect();
    p.send_batch(&batch).await.unwrap();
    // What the account may not do stays refused on a bound connection.
    assert_refused(p.send(Message::new("payments", "no")).await, "payments");

    write_acl(&acl, &acl_yaml(None).replace(PRODUCER.1, "producersecret2"));
    // Per-request signatures would fail with "does not match"; the bound connection's
    // unsigned requests fail naming the sign-in instead. Then the new connection's HELLO,
    // signed with the old secret, is refused.
    for (needle, what) in [
        ("sign in again", "the binding did not end"),
        (
            "does not match",
            "the old secret was not refused on a new connection",
        ),
    ] {
        let seen = poll(|| async {
            match p.send(Message::new("orders", "after")).await {
                Err(Error::Broker { remark, .. }) => remark.contains(needle),
                _ => false,
            }
        })
        .await;
        assert!(seen, "{what} within 10 s of the secret's change");
    }
    p.shutdown().await;
}

/// Polls `cond` every 100 ms until it holds or 10 s pass; false on timeout.
async fn poll<F, Fut>(mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
