//! ACL on the native protocol at the byte level: a request signed with
//! `ringmq_wire::auth::Signer` is accepted once; the exact same signed bytes sent again (on
//! the same connection or on a fresh one) are refused as a replay and store nothing; an
//! unsigned request is refused.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};

use common::*;
use ringmq_wire::auth::{Credentials, Signer};
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Encode;
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{CreateTopicRequest, GetOffsetRequest, OffsetResponse};
use ringmq_wire::frame;

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

/// A standalone node with ACL on (file in `dir`).
fn start(dir: &std::path::Path) -> Node {
    let acl = dir.join("plain_acl.yml");
    std::fs::write(&acl, ACL).unwrap();
    let file_set = format!("aclFilePath={}", acl.display());
    Node::standalone(
        &dir.join("data"),
        &[
            "--set",
            "aclEnable=true",
            "--set",
            &file_set,
            "--set",
            "innerAccessKey=root",
            "--set",
            "innerSecretKey=rootsecret1",
        ],
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A nonce no other test run uses.
fn nonce(tag: u8) -> [u8; 16] {
    let mut n = [tag; 16];
    n[..8].copy_from_slice(&now_ms().to_be_bytes());
    n[8..12].copy_from_slice(&std::process::id().to_be_bytes());
    n
}

/// A raw connection: frames are written as given and responses read by request id.
struct Raw {
    stream: std::net::TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(addr: std::net::SocketAddr) -> Raw {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next response frame.
    fn read(&mut self) -> Resp {
        loop {
            if let Some(n) = frame::check(&self.buf, frame::FRAME_BYTES_MAX).unwrap() {
                let f = frame::parse(&self.buf[..n]).unwrap();
                assert!(f.is_response(), "the server sent a request");
                let r = Resp {
                    request_id: f.request_id,
                    code: f.code,
                    header: f.header.to_vec(),
                    body: f.body.to_vec(),
                };
                self.buf.drain(..n);
                return r;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// An unsigned request frame.
fn request(code: RequestCode, id: u64, header: &impl Encode, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_request(&mut out, code, false, id, header, body).unwrap();
    out
}

/// A signed connection of `ak`: HELLO, then one request per call, each signed in order.
struct SignedConn {
    raw: Raw,
    signer: Signer,
    next_id: u64,
}

impl SignedConn {
    fn open(addr: std::net::SocketAddr, ak: &str, sk: &str, tag: u8) -> SignedConn {
        let mut signer = Signer::new(Credentials::new(ak, sk).unwrap(), nonce(tag));
        let mut hello = ringmq_wire::command::opener_frame("acl-test");
        signer.sign(&mut hello, now_ms()).unwrap();
        let mut raw = Raw::connect(addr);
        raw.write(&hello);
        let r = raw.read();
        assert_eq!(r.request_id, ringmq_wire::command::OPENER_REQUEST_ID);
        r.ok();
        SignedConn {
            raw,
            signer,
            next_id: 1,
        }
    }

    /// The signed bytes of the next request (not written).
    fn sign(&mut self, code: RequestCode, header: &impl Encode, body: &[u8]) -> Vec<u8> {
        let mut f = request(code, self.next_id, header, body);
        self.next_id += 1;
        self.signer.sign(&mut f, now_ms()).unwrap();
        f
    }

    fn call(&mut self, code: RequestCode, header: &impl Encode, body: &[u8]) -> Resp {
        let f = self.sign(code, header, body);
        self.raw.write(&f);
        self.raw.read()
    }

    fn max_offset(&mut self, topic: &str, queue_id: u32) -> u64 {
        let h = GetOffsetRequest {
            topic: topic.to_string(),
            queue_id,
        };
        let r = self.call(RequestCode::GetMaxOffset, &h, &[]);
        r.ok();
        r.fields::<OffsetResponse>().unwrap().offset
    }
}

#[track_caller]
fn assert_refused(r: &Resp, needle: &str) {
    r.expect_status(Status::NoPermission);
    assert!(
        r.remark().contains(needle),
        "remark {:?} does not name {needle:?}",
        r.remark()
    );
}

#[test]
fn a_replayed_signed_request_is_refused_and_stores_nothing() {
    let dir = tempdir("acl-replay");
    let node = start(dir.path());
    let broker = node.broker_addr();

    let mut root = SignedConn::open(broker, "root", "rootsecret1", 1);
    let create = CreateTopicRequest {
        topic: "orders".to_string(),
        read_queue_count: 1,
        write_queue_count: 1,
        perm: perm::READ_WRITE,
        attributes: Default::default(),
    };
    root.call(RequestCode::UpdateAndCreateTopic, &create, &[])
        .ok();
    assert_eq!(root.max_offset("orders", 0), 0);

    // HELLO and one SEND, signed; the bytes are kept.
    let nonce = nonce(2);
    let mut signer = Signer::new(
        Credentials::new("producer", "producersecret1").unwrap(),
        nonce,
    );
    let mut hello = ringmq_wire::command::opener_frame("acl-replay");
    signer.sign(&mut hello, now_ms()).unwrap();
    let msg = Msg::new("orders", 0, "once");
    let mut send = request(
        RequestCode::SendMessage,
        7,
        &Client::send_request("orders", 0, false, 1),
        &msg.encode(),
    );
    signer.sign(&mut send, now_ms()).unwrap();

    let mut c = Raw::connect(broker);
    c.write(&hello);
    c.read().ok();
    c.write(&send);
    let first = c.read();
    assert_eq!(first.request_id, 7);
    first.ok();
    assert_eq!(root.max_offset("orders", 0), 1);

    // The same bytes again on the same connection: a replay.
    c.write(&send);
    let again = c.read();
    assert_eq!(again.request_id, 7);
    assert_refused(&again, "replayed");

    // The same bytes (HELLO, then SEND) on a fresh connection: the nonce was used.
    let mut fresh = Raw::connect(broker);
    fresh.write(&hello);
    let h = fresh.read();
    assert_refused(&h, "replayed");
    fresh.write(&send);
    let s = fresh.read();
    assert_eq!(s.request_id, 7);
    assert_refused(&s, "replayed");

    // Nothing more was stored.
    assert_eq!(root.max_offset("orders", 0), 1);
    // The producer's own next request on its connection still works.
    let mut next = request(
        RequestCode::SendMessage,
        8,
        &Client::send_request("orders", 0, false, 1),
        &Msg::new("orders", 0, "twice").encode(),
    );
    signer.sign(&mut next, now_ms()).unwrap();
    c.write(&next);
    c.read().ok();
    assert_eq!(root.max_offset("orders", 0), 2);
}

#[test]
fn an_unsigned_send_to_the_broker_is_refused() {
    let dir = tempdir("acl-unsigned");
    let node = start(dir.path());
    let broker = node.broker_addr();
    let mut root = SignedConn::open(broker, "root", "rootsecret1", 3);
    let create = CreateTopicRequest {
        topic: "orders".to_string(),
        read_queue_count: 1,
        write_queue_count: 1,
        perm: perm::READ_WRITE,
        attributes: Default::default(),
    };
    root.call(RequestCode::UpdateAndCreateTopic, &create, &[])
        .ok();

    // A native connection opens with HELLO (here unsigned: refused too).
    let mut raw = Raw::connect(broker);
    raw.write(&ringmq_wire::command::opener_frame("acl-unsigned"));
    let h = raw.read();
    assert_eq!(h.request_id, ringmq_wire::command::OPENER_REQUEST_ID);
    assert_refused(&h, "sign requests");
    let send = request(
        RequestCode::SendMessage,
        5,
        &Client::send_request("orders", 0, false, 1),
        &Msg::new("orders", 0, "unsigned").encode(),
    );
    raw.write(&send);
    let r = raw.read();
    assert_eq!(r.request_id, 5);
    assert_refused(&r, "sign requests");
    assert_eq!(root.max_offset("orders", 0), 0);
}
