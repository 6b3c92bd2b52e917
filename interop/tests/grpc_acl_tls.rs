//! ringmq's gRPC edge with ACL on, TLS on its port, and bad input, against RocketMQ 5's Python
//! SDK (PyPI `rocketmq-python-client` 5.1.2, unchanged) and requests made by hand through its
//! generated stubs, each a real process against a real `ringmq standalone` on loopback
//! (`docs/grpc.md`). Requirements as in `grpc_python.rs`: the SDK's venv, and
//! `cargo build -p ringmq-node --bin ringmq` first.
//!
//! - `grpc_signatures_are_checked_against_the_acl` (`grpc/grpc_acl.py`): with `aclEnable=true`
//!   and a `plain_acl.yml`, the SDK's Producer and SimpleConsumer with right credentials send,
//!   receive and ack; unsigned, wrong secret, unknown key, stale or future or unreadable date
//!   answer UNAUTHORIZED; a missing permission FORBIDDEN; Telemetry ends with UNAUTHENTICATED /
//!   PERMISSION_DENIED; both date forms and both hex cases are accepted. ringmq's native admin
//!   then finds in the topic exactly the accepted messages.
//! - `grpc_acl2_policies_see_the_callers_address` (`grpc/grpc_acl2.py`): ACL 2.0 users whose
//!   policy allows Pub from 127.0.0.1/32 (sends) or only from 10.0.0.0/8 (FORBIDDEN).
//! - `grpc_port_serves_tls_and_plaintext` (`grpc/grpc_tls.py`): `tls.server.mode=permissive`
//!   serves the SDK over TLS (its CA given through gRPC's default roots file) and plaintext on
//!   the same port; `enforcing` closes plaintext connections and still serves TLS.
//! - `bad_grpc_streams_get_a_status_and_store_nothing` (`grpc/grpc_bad_stream.py`): a
//!   Telemetry stream that never sends Settings, an AckMessage of a million receipt handles, a
//!   SendMessage of 100,000 empty messages; then a good send is the topic's one message.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use ringmq_client::wire::properties::keys;
use ringmq_client::{Admin, ClientConfig, Credentials, MessageQueue, TlsOptions};
use ringmq_testkit::{certs::TestPki, Proc};

#[path = "grpc/harness.rs"]
mod harness;
use harness::{runtime, standalone as start_node};

const SCRIPT_LIMIT: Duration = Duration::from_secs(120);
const QUEUES: u32 = 8;
const TOPIC: &str = "GrpcAcl";
const GROUP: &str = "grpc-acl";

const ACL: &str = "\
accounts:
  - accessKey: root
    secretKey: rootsecret1
    admin: true
  - accessKey: gpub
    secretKey: gpubsecret1
    admin: false
    topicPerms:
      - GrpcAcl=PUB
  - accessKey: gsub
    secretKey: gsubsecret1
    admin: false
    topicPerms:
      - GrpcAcl=SUB
    groupPerms:
      - grpc-acl=SUB
";

#[test]
fn grpc_signatures_are_checked_against_the_acl() {
    harness::python(); // fails now, before a node starts, when the SDK is missing
    let dir = ringmq_testkit::tempdir("grpc-acl");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, ACL).expect("writing plain_acl.yml");
    let acl_file = format!("aclFilePath={}", acl.display());
    let (mut node, namesrv, grpc) = start_node(
        dir.path(),
        &[
            "aclEnable=true",
            &acl_file,
            "innerAccessKey=root",
            "innerSecretKey=rootsecret1",
        ],
    );
    let rt = runtime();
    let admin = rt
        .block_on(Admin::with_config(ClientConfig {
            name_servers: vec![namesrv.to_string()],
            credentials: Some(Credentials::new("root", "rootsecret1")),
            ..ClientConfig::default()
        }))
        .expect("an admin client");
    rt.block_on(admin.create_topic(TOPIC, QUEUES, Duration::from_secs(10)))
        .expect("creating the topic");

    let out = script(
        dir.path(),
        "grpc_acl.py",
        &[
            &grpc.to_string(),
            TOPIC,
            GROUP,
            "gpub",
            "gpubsecret1",
            "gsub",
            "gsubsecret1",
        ],
        &[],
        &mut node,
    );
    let sent: BTreeSet<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("sent "))
        .map(str::to_string)
        .collect();
    assert_eq!(sent.len(), 7, "5 SDK sends and 2 signed by hand accepted");
    let stored: BTreeSet<String> = rt.block_on(read_ids(&admin, TOPIC)).into_iter().collect();
    assert_eq!(
        stored, sent,
        "the topic holds exactly the accepted messages (nothing of a refused send)"
    );
    assert!(
        !node.log_tail(400).contains("panicked"),
        "the node logged a panic"
    );
}

/// ACL 2.0 over gRPC: a user's policy entries with `sourceIps` are judged by the caller's
/// address (the edge passes it), an entry for 127.0.0.1/32 allows, one for 10.0.0.0/8 does
/// not; the topic holds only the allowed message.
#[test]
fn grpc_acl2_policies_see_the_callers_address() {
    use ringmq_client::wire::command::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};
    harness::python(); // fails now, before a node starts, when the SDK is missing
    let dir = ringmq_testkit::tempdir("grpc-acl2");
    let (mut node, namesrv, grpc) = start_node(
        dir.path(),
        &[
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            r#"initAuthenticationUser={"username":"root","password":"rootpw-2"}"#,
            r#"innerClientAuthenticationCredentials={"accessKey":"root","secretKey":"rootpw-2"}"#,
        ],
    );
    let topic = "GrpcAcl2";
    let rt = runtime();
    let admin = rt
        .block_on(Admin::with_config(ClientConfig {
            name_servers: vec![namesrv.to_string()],
            credentials: Some(Credentials::new("root", "rootpw-2")),
            ..ClientConfig::default()
        }))
        .expect("an admin client");
    rt.block_on(admin.create_topic(topic, QUEUES, Duration::from_secs(10)))
        .expect("creating the topic");
    let broker = rt
        .block_on(admin.broker_addr("broker-a"))
        .expect("broker-a's address");
    for (user, pw, from) in [
        ("near", "nearpw-2", "127.0.0.1/32"),
        ("far", "farpw-2", "10.0.0.0/8"),
    ] {
        let u = UserInfo {
            username: Some(user.into()),
            password: Some(pw.into()),
            user_type: Some("Normal".into()),
            ..UserInfo::default()
        };
        rt.block_on(admin.user_write(broker, false, &u))
            .unwrap_or_else(|e| panic!("creating user {user}: {e}"));
        let acl = AclInfo {
            subject: Some(format!("User:{user}")),
            policies: vec![PolicyInfo {
                policy_type: Some("Custom".into()),
                entries: vec![PolicyEntryInfo {
                    resource: Some(format!("Topic:{topic}")),
                    actions: vec!["Pub".into()],
                    source_ips: vec![from.into()],
                    decision: Some("Allow".into()),
                }],
            }],
        };
        rt.block_on(admin.policy_write(broker, false, &acl))
            .unwrap_or_else(|e| panic!("the policy of {user}: {e}"));
    }
    let out = script(
        dir.path(),
        "grpc_acl2.py",
        &[
            &grpc.to_string(),
            topic,
            "near",
            "nearpw-2",
            "far",
            "farpw-2",
        ],
        &[],
        &mut node,
    );
    let sent: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("sent "))
        .map(str::to_string)
        .collect();
    assert_eq!(sent, vec!["ACL2-NEAR".to_string()]);
    assert_eq!(rt.block_on(read_ids(&admin, topic)), sent, "stored");
}

#[test]
fn grpc_port_serves_tls_and_plaintext() {
    harness::python(); // fails now, before a node starts, when the SDK is missing
    let pki = TestPki::new();
    for mode in ["permissive", "enforcing"] {
        let dir = ringmq_testkit::tempdir(&format!("grpc-tls-{mode}"));
        let sets = [
            format!("tls.server.mode={mode}"),
            format!("tls.server.certPath={}", pki.server_cert.display()),
            format!("tls.server.keyPath={}", pki.server_key.display()),
            "tls.enable=true".to_string(),
            format!("tls.client.trustCertPath={}", pki.ca.display()),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (mut node, namesrv, grpc) = start_node(dir.path(), &sets);
        let rt = runtime();
        let admin = rt
            .block_on(Admin::with_config(ClientConfig {
                name_servers: vec![namesrv.to_string()],
                tls: TlsOptions {
                    enabled: true,
                    ca_path: Some(pki.ca.clone()),
                    ..TlsOptions::default()
                },
                ..ClientConfig::default()
            }))
            .expect("an admin client");
        let topic = format!("GrpcTls_{mode}");
        rt.block_on(admin.create_topic(&topic, QUEUES, Duration::from_secs(10)))
            .expect("creating the topic");
        let ca = pki.ca.display().to_string();
        let out = script(
            dir.path(),
            "grpc_tls.py",
            &[&grpc.to_string(), &topic, mode],
            &[("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", ca.as_str())],
            &mut node,
        );
        let sent: BTreeSet<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix("sent "))
            .map(str::to_string)
            .collect();
        let want = if mode == "permissive" { 2 } else { 1 };
        assert_eq!(sent.len(), want, "{mode}: messages the script sent");
        let stored: BTreeSet<String> = rt.block_on(read_ids(&admin, &topic)).into_iter().collect();
        assert_eq!(stored, sent, "{mode}: the topic holds what was sent");
    }
}

#[test]
fn bad_grpc_streams_get_a_status_and_store_nothing() {
    harness::python(); // fails now, before a node starts, when the SDK is missing
    let dir = ringmq_testkit::tempdir("grpc-bad-stream");
    let (mut node, namesrv, grpc) = start_node(dir.path(), &[]);
    let rt = runtime();
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    let topic = "GrpcBadStream";
    rt.block_on(admin.create_topic(topic, QUEUES, Duration::from_secs(10)))
        .expect("creating the topic");
    let out = script(
        dir.path(),
        "grpc_bad_stream.py",
        &[&grpc.to_string(), topic],
        &[],
        &mut node,
    );
    let sent: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("sent "))
        .map(str::to_string)
        .collect();
    assert_eq!(sent, vec!["ID-GOOD".to_string()]);
    assert_eq!(rt.block_on(read_ids(&admin, topic)), sent, "stored");
}

/// Runs `interop/tests/grpc/NAME` with `args` (the clients' clocks in UTC: the Python SDK
/// signs local time with a literal `Z`); its stdout, or the test fails with its output and
/// the node's log.
fn script(dir: &Path, name: &str, args: &[&str], env: &[(&str, &str)], node: &mut Proc) -> String {
    let mut all = vec![("TZ", "UTC")];
    all.extend_from_slice(env);
    harness::script_env(dir, name, args, &all, SCRIPT_LIMIT, &[node])
}

/// The `UNIQ_KEY` of every message of every queue of `topic` on broker-a.
async fn read_ids(admin: &Admin, topic: &str) -> Vec<String> {
    let mut out = Vec::new();
    for q in 0..QUEUES {
        let mq = MessageQueue::new(topic, "broker-a", q);
        let msgs = admin
            .read_messages(&mq, 0, 1000)
            .await
            .unwrap_or_else(|e| panic!("reading {mq}: {e}"));
        out.extend(
            msgs.iter()
                .map(|m| m.property(keys::UNIQ_KEY).unwrap_or("").to_string()),
        );
    }
    out
}
