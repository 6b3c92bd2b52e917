//! A broker with `aclEnable=true` against hostile input on both protocols: every mutation of a
//! validly signed request, unsigned and wrongly signed requests, replays and RocketMQ frames
//! with bad signatures. Nothing that was not signed by an account allowed to do it is stored
//! or changed, and the broker keeps serving.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use ringmq_wire::auth::{sign_remoting, Credentials, Signer};
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::frame;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};

const ACL: &str = r#"
accounts:
  - accessKey: root
    secretKey: root-secret-1
    admin: true
  - accessKey: producer
    secretKey: producer-secret-1
    topicPerms:
      - orders=PUB
"#;

fn root() -> Credentials {
    Credentials::new("root", "root-secret-1").expect("creds")
}

fn producer() -> Credentials {
    Credentials::new("producer", "producer-secret-1").expect("creds")
}

fn start(dir: &std::path::Path) -> Node {
    let acl = dir.join("plain_acl.yml");
    std::fs::write(&acl, ACL).expect("writing the ACL file");
    let acl_arg = format!("aclFilePath={}", acl.display());
    let data = dir.join("data");
    let mut launch = standalone_launch(
        &data,
        &[
            "--shards",
            "1",
            "--set",
            "aclEnable=true",
            "--set",
            &acl_arg,
            "--set",
            "innerAccessKey=root",
        ],
    );
    // The inner secret from the environment, not the command line.
    launch.env.push((
        "RINGMQ_INNER_SECRET_KEY".to_owned(),
        "root-secret-1".to_owned(),
    ));
    let node = Node::start("standalone", dir, launch);
    // The name server (ACL on) took the broker's signed registration.
    wait_until(
        Duration::from_secs(10),
        "the name server to take the broker's signed registration",
        || !log_lines_containing(&node.log(), "registered at").is_empty(),
    );
    assert!(
        !node.log().contains("root-secret-1"),
        "the secret is not logged"
    );
    node
}

fn now_ms() -> u64 {
    common::now_ms() as u64
}

/// A SEND of one record to `orders`, signed by the producer on a connection with `nonce`.
fn signed_send(nonce: u8) -> Vec<u8> {
    let msg = Msg::new("orders", 0, b"hostile".to_vec());
    let h = Client::send_request("orders", 0, false, 1);
    let mut f = Vec::new();
    frame::encode_request(
        &mut f,
        RequestCode::SendMessage,
        false,
        77,
        &h,
        &msg.encode(),
    )
    .expect("encoding");
    let mut s = Signer::new(producer(), [nonce; 16]);
    s.sign(&mut f, now_ms()).expect("sign");
    f
}

/// Sends `bytes` after an (unsigned, refused) opener on a fresh connection; the status of the
/// answer to request id 77, or None if the broker closed or said nothing within a second.
fn try_once(addr: std::net::SocketAddr, bytes: &[u8]) -> Option<Status> {
    let mut c = Client::try_connect_as(addr, None).ok()?;
    c.set_read_timeout(Duration::from_secs(1));
    c.send_raw(bytes).ok()?;
    c.try_recv(77).ok().map(|r| r.status())
}

fn stored(admin: &mut Client) -> u64 {
    admin.max_offset("orders", 0)
}

#[test]
fn no_mutation_of_a_signed_request_is_accepted_and_nothing_unsigned_is_stored() {
    let dir = ringmq_testkit::tempdir("acl-gate");
    let node = start(dir.path());
    let addr = node.broker_addr();
    let mut admin = Client::connect_as(addr, &root());
    admin.create_topic_ok("orders", 1);
    assert_eq!(stored(&mut admin), 0);

    // The genuine request is accepted once.
    let genuine = signed_send(1);
    assert_eq!(try_once(addr, &genuine), Some(Status::Success));
    assert_eq!(stored(&mut admin), 1);

    // Every single-byte change after the length field (code, flags, request id, header,
    // body, trailer) is refused or not answered; none is stored.
    let template = signed_send(2);
    let mut accepted = Vec::new();
    for i in 4..template.len() {
        let mut m = template.clone();
        m[i] ^= 0x5a;
        // A changed request id gets its answer under another id: not 77, so not counted;
        // the stored count below still catches it.
        if try_once(addr, &m) == Some(Status::Success) {
            accepted.push(i);
        }
    }
    assert!(
        accepted.is_empty(),
        "accepted mutations at bytes {accepted:?}"
    );
    // A changed length field.
    for delta in [1u8, 0x10] {
        let mut m = template.clone();
        m[3] = m[3].wrapping_sub(delta);
        assert_ne!(try_once(addr, &m), Some(Status::Success));
    }
    // Trailer cut off, or SIGNED cleared (then it is simply unsigned).
    let mut cut = template.clone();
    cut.truncate(template.len() - 10);
    let len = (cut.len() - 4) as u32;
    cut[..4].copy_from_slice(&len.to_be_bytes());
    assert_ne!(try_once(addr, &cut), Some(Status::Success));
    let mut unsigned = template.clone();
    unsigned[7] &= !4;
    assert_ne!(try_once(addr, &unsigned), Some(Status::Success));

    // Replays: the genuine request again, on a new connection and on its own.
    assert_eq!(try_once(addr, &genuine), Some(Status::NoPermission));
    let mut c = Client::try_connect_as(addr, None).expect("connect");
    c.set_read_timeout(Duration::from_secs(2));
    let fresh = signed_send(3);
    c.send_raw(&fresh).expect("send");
    assert_eq!(c.try_recv(77).expect("answer").status(), Status::Success);
    c.send_raw(&fresh).expect("send again");
    let again = c.try_recv(77).expect("answer");
    assert_eq!(again.status(), Status::NoPermission);
    assert!(again.remark().contains("replayed"), "{}", again.remark());
    assert_eq!(
        stored(&mut admin),
        2,
        "the genuine send and the fresh one only"
    );

    // Wrong secret, unknown key, no signature.
    let mut wrong = Client::connect_as(addr, &Credentials::new("producer", "guess").expect("c"));
    let r = wrong.send(&Msg::new("orders", 0, b"x".to_vec()));
    assert_eq!(r.status(), Status::NoPermission);
    assert!(r.remark().contains("signature"), "{}", r.remark());
    let mut anon = Client::connect(addr);
    assert_eq!(
        anon.send(&Msg::new("orders", 0, b"x".to_vec())).status(),
        Status::NoPermission
    );
    // Random frames with SIGNED set.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..200 {
        let mut f = template.clone();
        let at = 20 + (x % (f.len() as u64 - 20)) as usize;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f[at..].iter_mut().for_each(|b| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        });
        f[7] |= 4;
        assert_ne!(try_once(addr, &f), Some(Status::Success));
    }
    assert_eq!(stored(&mut admin), 2);

    // RocketMQ remoting: UPDATE_CONSUMER_OFFSET of group g1 with the root account's
    // signature over other values, and with the producer's good signature (it holds no SUB on
    // the group): neither commits an offset.
    for (creds, tamper) in [(root(), true), (producer(), false)] {
        let mut ext = ringmq_wire::remoting::ext::ExtFields::new();
        for (k, v) in [
            ("consumerGroup", "g1"),
            ("topic", "orders"),
            ("queueId", "0"),
            ("commitOffset", "1"),
        ] {
            ext.insert(k, v);
        }
        sign_remoting(&mut ext, &creds, &creds.remoting_key(), b"");
        if tamper {
            ext.insert("commitOffset", "2");
        }
        let cmd = Command::request(15, 5, ext);
        let bytes = rframe::encode(&cmd, SerializeType::Json, b"").expect("encode");
        let mut s = Client::connect_raw(addr).expect("connect");
        s.write_all(&bytes).expect("write");
        let (code, remark) = read_remoting_answer(&mut s);
        assert_eq!(code, 16, "NO_PERMISSION: {remark}");
    }
    assert_eq!(
        admin.query_offset("g1", "orders", 0),
        None,
        "no offset committed"
    );

    // A request code no table lists: unsigned, refused before anything reads it; signed by
    // the admin, not served.
    let mut unknown = Vec::new();
    frame::encode_prefix(&mut unknown, 9_999u16, frame::Flags::REQUEST, 77, 0, 0).expect("prefix");
    assert_eq!(try_once(addr, &unknown), Some(Status::NoPermission));
    let mut signed_unknown = unknown.clone();
    Signer::new(root(), [4; 16])
        .sign(&mut signed_unknown, now_ms())
        .expect("sign");
    assert_eq!(
        try_once(addr, &signed_unknown),
        Some(Status::RequestCodeNotSupported)
    );

    // Still serving: the producer's next genuine send is stored.
    let mut p = Client::connect_as(addr, &producer());
    p.send(&Msg::new("orders", 0, b"after".to_vec())).ok();
    assert_eq!(stored(&mut admin), 3);
    let info = admin.runtime_info();
    let refused: u64 = info
        .extra
        .iter()
        .filter(|(k, _)| k.starts_with("acl.refused."))
        .map(|(_, v)| v.parse::<u64>().unwrap_or(0))
        .sum();
    assert!(refused > 200, "refusals counted: {refused}");
    drop(node);
}

fn read_remoting_answer(s: &mut std::net::TcpStream) -> (i32, String) {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(n)) = rframe::check(&buf, rframe::FRAME_BYTES_MAX) {
            let p = rframe::parse(&buf[..n]).expect("a remoting frame");
            return (p.command.code, p.command.remark.unwrap_or_default());
        }
        let n = s.read(&mut chunk).expect("reading the answer");
        assert!(n > 0, "closed without an answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn a_node_without_acl_serves_signed_requests() {
    // A client configured with credentials talks to a broker that has ACL off: its trailer is
    // removed and the request is served as it would be unsigned.
    let dir = ringmq_testkit::tempdir("acl-off");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "1"]);
    let mut c = Client::connect_as(node.broker_addr(), &producer());
    c.create_topic_ok("orders", 1);
    c.send(&Msg::new("orders", 0, b"signed, ACL off".to_vec()))
        .ok();
    assert_eq!(c.max_offset("orders", 0), 1);
    drop(node);
}
