use std::collections::BTreeMap;
use std::net::IpAddr;

use ringmq_wire::auth::{sign_remoting, Credentials, Signer};
use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{PullRequest, Request, SendRequest};
use ringmq_wire::frame::{self, Flags};

use super::*;

const FILE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.0.0.*
accounts:
  - accessKey: producer
    secretKey: p-secret
    defaultTopicPerm: DENY
    topicPerms:
      - orders=PUB
      - audit=PUB
      - audit=DENY
  - accessKey: consumer
    secretKey: c-secret
    whiteRemoteAddress: 127.0.0.1
    topicPerms:
      - orders=SUB
    groupPerms:
      - billing=SUB
  - accessKey: root
    secretKey: r-secret
    admin: true
    topicPerms:
      - secret-topic=DENY
"#;

struct Fixture {
    _dir: tempfile::TempDir,
    acl: Acl,
}

fn fixture(text: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plain_acl.yml");
    std::fs::write(&path, text).expect("write");
    let acl = Acl::load(AclSettings {
        file: path,
        replay_window_ms: 60_000,
    })
    .expect("load");
    Fixture { _dir: dir, acl }
}

fn localhost() -> IpAddr {
    "127.0.0.1".parse().expect("ip")
}

fn frame_of(code: RequestCode, header: &impl ringmq_wire::codec::Encode, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::encode_frame(&mut f, code, Flags::REQUEST, 1, header, body).expect("encode");
    f
}

fn hello_frame() -> Vec<u8> {
    frame_of(RequestCode::GetBrokerRuntimeInfo, &Empty, b"")
}

const NOW: u64 = 1_800_000_000_000;

fn signer(key: &str, secret: &str, nonce: u8) -> Signer {
    Signer::new(Credentials::new(key, secret).expect("creds"), [nonce; 16])
}

#[test]
fn signed_native_requests_authenticate_and_replays_are_refused() {
    let fx = fixture(FILE);
    let mut g = fx.acl.guard(localhost());
    let mut s = signer("consumer", "c-secret", 1);
    let mut f = hello_frame();
    s.sign(&mut f, NOW).expect("sign");
    let replay = f.clone();
    let mut first = f.clone();
    assert_eq!(
        g.native(&mut first, NOW),
        Ok(Caller::Account(Arc::from("consumer")))
    );
    assert_eq!(first, hello_frame(), "the handler reads the unsigned frame");
    // The same frame again on this connection: its sequence is not new.
    let e = g.native(&mut replay.clone(), NOW).expect_err("replay");
    assert_eq!(e.reason, Reason::Replayed);
    // On a new connection: the nonce was used within the window.
    let mut g2 = fx.acl.guard(localhost());
    let e = g2.native(&mut replay.clone(), NOW).expect_err("replay");
    assert_eq!(e.reason, Reason::Replayed);
    // The next signed request on the first connection passes.
    let mut f2 = hello_frame();
    s.sign(&mut f2, NOW + 5).expect("sign");
    assert!(g.native(&mut f2, NOW + 5).is_ok());
}

#[test]
fn each_authentication_failure_has_its_reason() {
    let fx = fixture(FILE);
    let cases: Vec<(Signer, IpAddr, u64, Reason)> = vec![
        (
            signer("consumer", "wrong", 2),
            localhost(),
            NOW,
            Reason::BadSignature,
        ),
        (
            signer("nobody", "x", 3),
            localhost(),
            NOW,
            Reason::UnknownAccessKey,
        ),
        (
            signer("consumer", "c-secret", 4),
            "192.168.1.1".parse().expect("ip"),
            NOW,
            Reason::AddressNotAllowed,
        ),
        (
            signer("consumer", "c-secret", 5),
            localhost(),
            NOW - 120_000,
            Reason::StaleTimestamp,
        ),
    ];
    for (mut s, peer, signed_at, reason) in cases {
        let mut g = fx.acl.guard(peer);
        let mut f = hello_frame();
        s.sign(&mut f, signed_at).expect("sign");
        let e = g.native(&mut f, NOW).expect_err("refused");
        assert_eq!(e.reason, reason, "{}", e.remark);
        assert!(!e.remark.contains("c-secret"), "{}", e.remark);
    }
    // Unsigned: refused unless from a global white address.
    let e = fx
        .acl
        .guard(localhost())
        .native(&mut hello_frame(), NOW)
        .expect_err("unsigned");
    assert_eq!(e.reason, Reason::MissingCredentials);
    let mut white = fx.acl.guard("10.0.0.9".parse().expect("ip"));
    assert_eq!(white.native(&mut hello_frame(), NOW), Ok(Caller::Anonymous));
    let counts: BTreeMap<_, _> = fx.acl.refusal_counts().into_iter().collect();
    assert_eq!(counts["bad_signature"], 1);
    assert_eq!(counts["missing_credentials"], 1);
}

#[test]
fn a_tampered_signed_frame_is_refused() {
    let fx = fixture(FILE);
    let mut s = signer("producer", "p-secret", 6);
    let mut f = frame_of(RequestCode::SendMessage, &send("orders"), b"records");
    s.sign(&mut f, NOW).expect("sign");
    let n = f.len();
    // Change a byte of the body (before the trailer).
    f[n - 80] ^= 0x20;
    let e = fx
        .acl
        .guard(localhost())
        .native(&mut f, NOW)
        .expect_err("tampered");
    assert_eq!(e.reason, Reason::BadSignature);
}

fn send(topic: &str) -> SendRequest {
    SendRequest {
        producer_group: "pg".to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        batch: false,
        record_count: 1,
    }
}

fn pull(topic: &str, group: &str) -> PullRequest {
    PullRequest {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        queue_offset: 0,
        max_messages: 32,
        max_bytes: 1 << 20,
        filter_type: ringmq_wire::command::pull::FilterType::Tag,
        expression: "*".to_owned(),
        suspend_timeout_ms: 0,
        commit_offset: None,
    }
}

fn account(k: &str) -> Caller {
    Caller::Account(Arc::from(k))
}

#[test]
fn each_permission_allows_exactly_what_it_names() {
    let fx = fixture(FILE);
    let acl = &fx.acl;
    let ok = |c: &Caller, r: Request| acl.authorize(c, &r, b"").is_ok();
    let producer = account("producer");
    let consumer = account("consumer");
    let root = account("root");
    assert!(ok(&producer, Request::SendMessage(send("orders"))));
    assert!(
        !ok(&producer, Request::SendMessage(send("payments"))),
        "default DENY"
    );
    assert!(
        !ok(&producer, Request::SendMessage(send("audit"))),
        "DENY wins"
    );
    assert!(!ok(
        &producer,
        Request::PullMessage(pull("orders", "billing"))
    ));
    assert!(ok(
        &consumer,
        Request::PullMessage(pull("orders", "billing"))
    ));
    assert!(!ok(
        &consumer,
        Request::PullMessage(pull("orders", "other"))
    ));
    assert!(
        !ok(&consumer, Request::SendMessage(send("orders"))),
        "SUB is not PUB"
    );
    // A send to a group's retry topic needs the group.
    assert!(ok(&consumer, Request::SendMessage(send("%RETRY%billing"))));
    assert!(!ok(&producer, Request::SendMessage(send("%RETRY%billing"))));
    // Admin requests.
    let create = Request::UpdateBrokerConfig(Empty);
    assert!(!ok(&producer, create.clone()));
    assert!(ok(&root, create.clone()));
    assert!(!ok(&Caller::Anonymous, create));
    // An admin holds every topic unless the file denies it.
    assert!(ok(&root, Request::SendMessage(send("anything"))));
    assert!(!ok(&root, Request::SendMessage(send("secret-topic"))));
    // Anonymous callers on the white list: non-admin requests.
    assert!(ok(&Caller::Anonymous, Request::SendMessage(send("x"))));
    let e = acl
        .authorize(&producer, &Request::SendMessage(send("payments")), b"")
        .expect_err("denied");
    assert_eq!(e.reason, Reason::NoPermission);
    assert!(e.remark.contains("PUB on topic payments"), "{}", e.remark);
}

#[test]
fn remoting_signatures_as_rocketmq_clients_make_them() {
    let fx = fixture(FILE);
    let creds = Credentials::new("producer", "p-secret").expect("creds");
    let mut ext = ringmq_wire::remoting::ext::ExtFields::new();
    ext.insert("topic", "orders");
    sign_remoting(&mut ext, &creds, &creds.remoting_key(), b"body");
    let mut g = fx.acl.guard(localhost());
    assert_eq!(g.remoting(&ext, b"body"), Ok(account("producer")));
    let e = g.remoting(&ext, b"other body").expect_err("body changed");
    assert_eq!(e.reason, Reason::BadSignature);
    ext.insert("topic", "payments");
    assert_eq!(
        g.remoting(&ext, b"body").expect_err("field changed").reason,
        Reason::BadSignature
    );
}

#[test]
fn a_changed_file_takes_effect_and_a_broken_one_keeps_the_last_good() {
    let fx = fixture(FILE);
    let path = fx.acl.path().to_owned();
    let producer = account("producer");
    let send_payments = Request::SendMessage(send("payments"));
    assert!(fx.acl.authorize(&producer, &send_payments, b"").is_err());
    let granted = FILE.replace(
        "      - orders=PUB\n",
        "      - orders=PUB\n      - payments=PUB\n",
    );
    std::fs::write(&path, &granted).expect("write");
    assert!(fx.acl.reload_if_changed());
    assert!(fx.acl.authorize(&producer, &send_payments, b"").is_ok());
    std::fs::write(&path, "accounts: [ {accessKey: x\n").expect("write");
    assert!(!fx.acl.reload_if_changed());
    assert!(fx.acl.authorize(&producer, &send_payments, b"").is_ok());
    assert_eq!(fx.acl.reload_counts(), (1, 1));
}

/// The connection keeps the MAC key of its signer's first request; a new secret in the file
/// is not verified with the key kept from the old one.
#[test]
fn a_plain_connection_checks_every_request_against_the_secret_in_force() {
    let fx = fixture(FILE);
    let path = fx.acl.path().to_owned();
    let mut g = fx.acl.guard(localhost());
    let mut old = signer("consumer", "c-secret", 24);
    for i in 0..2 {
        let mut f = hello_frame();
        old.sign(&mut f, NOW + i).expect("sign");
        assert!(g.native(&mut f, NOW + i).is_ok(), "request {i}");
    }
    std::fs::write(&path, FILE.replace("c-secret", "c-secret-2")).expect("write");
    assert!(fx.acl.reload_if_changed());
    let mut f = hello_frame();
    old.sign(&mut f, NOW + 2).expect("sign");
    let refused = g.native(&mut f, NOW + 2).expect_err("old secret");
    assert_eq!(refused.reason, Reason::BadSignature);
    let mut new = signer("consumer", "c-secret-2", 25);
    let mut f = hello_frame();
    new.sign(&mut f, NOW + 3).expect("sign");
    let mut g2 = fx.acl.guard(localhost());
    assert!(g2.native(&mut f, NOW + 3).is_ok());
}

#[test]
fn a_connection_refused_again_and_again_is_to_be_closed() {
    let fx = fixture(FILE);
    let mut g = fx.acl.guard(localhost());
    for _ in 0..CONSECUTIVE_REFUSALS_MAX {
        assert!(!g.should_close());
        let _ = g.native(&mut hello_frame(), NOW);
    }
    assert!(g.should_close());
}

#[test]
fn handing_a_connection_over_resumes_its_sequence() {
    let fx = fixture(FILE);
    let mut s = signer("root", "r-secret", 9);
    let mut g = fx.acl.guard(localhost());
    let mut hello = hello_frame();
    s.sign(&mut hello, NOW).expect("sign");
    let seq = ConnGuard::peek_seq(&hello);
    assert_eq!(seq, Some(1));
    assert!(g.native(&mut hello.clone(), NOW).is_ok());
    let state = g.handoff_state(seq);
    let mut moved = fx.acl.guard(localhost());
    moved.resume(state);
    // The HELLO is answered again by the new shard, then the connection goes on.
    assert!(moved.native(&mut hello.clone(), NOW).is_ok());
    let mut next = hello_frame();
    s.sign(&mut next, NOW).expect("sign");
    assert!(moved.native(&mut next, NOW).is_ok());
    assert!(moved.native(&mut hello, NOW).is_err(), "no second replay");
}

#[test]
fn one_file_opened_twice_is_one_acl() {
    let fx = fixture(FILE);
    let settings = AclSettings {
        file: fx.acl.path().to_owned(),
        replay_window_ms: 60_000,
    };
    let a = Acl::open(settings.clone()).expect("open");
    let b = Acl::open(settings).expect("open again");
    let mut file = (*a.current()).clone();
    file.accounts.remove("producer");
    a.write(file).expect("write");
    assert!(
        !b.current().accounts.contains_key("producer"),
        "b sees a's write at once"
    );
}

#[test]
fn a_tls_connection_is_bound_to_the_account_of_its_first_signed_request() {
    let fx = fixture(FILE);
    let mut s = signer("consumer", "c-secret", 21);
    let mut g = fx.acl.guard(localhost()).over_tls(true);
    // Unsigned before any signed request: anonymous rules (127.0.0.1 is not white).
    assert!(g.native(&mut hello_frame(), NOW).is_err());
    let mut hello = hello_frame();
    s.sign(&mut hello, NOW).expect("sign");
    let bound = g.native(&mut hello, NOW).expect("signed hello");
    assert_eq!(g.session(), Some(&bound));
    // Unsigned requests after it are the account's.
    for _ in 0..3 {
        assert_eq!(g.native(&mut hello_frame(), NOW), Ok(bound.clone()));
    }
    // A signed request of another account is still that account's, and does not rebind.
    let mut root = signer("root", "r-secret", 21);
    root.sign(&mut hello_frame(), NOW).expect("sign"); // sequence 1, already used
    let mut other = hello_frame();
    root.sign(&mut other, NOW).expect("sign");
    assert_eq!(
        g.native(&mut other, NOW),
        Ok(Caller::Account(Arc::from("root")))
    );
    assert_eq!(g.session(), Some(&bound));
    assert!(!g.should_close());
}

#[test]
fn a_plain_connection_is_never_bound() {
    let fx = fixture(FILE);
    let mut s = signer("consumer", "c-secret", 22);
    let mut g = fx.acl.guard(localhost());
    let mut hello = hello_frame();
    s.sign(&mut hello, NOW).expect("sign");
    assert!(g.native(&mut hello, NOW).is_ok());
    assert_eq!(g.session(), None);
    let refused = g.native(&mut hello_frame(), NOW).expect_err("unsigned");
    assert_eq!(refused.reason, Reason::MissingCredentials);
}

#[test]
fn a_bound_connection_ends_when_its_account_changes() {
    let fx = fixture(FILE);
    let path = fx.acl.path().to_owned();
    let mut s = signer("consumer", "c-secret", 23);
    let mut g = fx.acl.guard(localhost()).over_tls(true);
    let mut hello = hello_frame();
    s.sign(&mut hello, NOW).expect("sign");
    assert!(g.native(&mut hello, NOW).is_ok());
    // Another account's change leaves the binding alone.
    std::fs::write(&path, FILE.replace("r-secret", "r-secret-2")).expect("write");
    assert!(fx.acl.reload_if_changed());
    assert!(g.native(&mut hello_frame(), NOW).is_ok());
    // The bound account's new secret ends it: refused, and the connection is to be closed.
    std::fs::write(&path, FILE.replace("c-secret", "c-secret-2")).expect("write");
    assert!(fx.acl.reload_if_changed());
    let refused = g
        .native(&mut hello_frame(), NOW)
        .expect_err("secret changed");
    assert_eq!(refused.reason, Reason::UnknownAccessKey);
    assert!(
        refused.remark.contains("sign in again"),
        "{}",
        refused.remark
    );
    assert!(g.should_close());
    assert_eq!(g.session(), None);
}

#[test]
fn a_binding_moves_with_its_connection() {
    let fx = fixture(FILE);
    let mut s = signer("root", "r-secret", 24);
    let mut g = fx.acl.guard(localhost()).over_tls(true);
    let mut first = hello_frame();
    s.sign(&mut first, NOW).expect("sign");
    let bound = g.native(&mut first, NOW).expect("signed");
    let mut moved = fx.acl.guard(localhost()).over_tls(true);
    moved.resume(g.handoff_state(None));
    assert_eq!(moved.native(&mut hello_frame(), NOW), Ok(bound));
}
