//! Bad input against the real broker: garbage bytes, oversized frames, impossible header
//! lengths, unknown request codes, undecodable headers, bad topic names, broken record CRCs,
//! records that disagree with their header, truncated batches. Each gets its status (or a
//! closed connection for that client only) while a second client keeps sending and pulling
//! successfully the whole time, and nothing from a bad request is stored.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::codec::{Empty, Raw};
use ringmq_wire::command::route::TopicConfigTable;
use ringmq_wire::command::{PullResponse, SendResponse};
use ringmq_wire::frame::{self, Flags};

/// What the well-behaved client did while the other one misbehaved.
#[derive(Debug, Default)]
struct GoodReport {
    sent: u64,
    errors: Vec<String>,
}

/// Sends a record and pulls it back, over and over, until `stop`; counts its sends in
/// `sent` as they are acknowledged.
fn good_client(
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<GoodReport> {
    std::thread::spawn(move || {
        let mut rep = GoodReport::default();
        let mut c = Client::connect(addr);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) && rep.errors.len() < 5 {
            let q = (i % 4) as u32;
            let body = format!("good {i}").into_bytes();
            i += 1;
            let h = Client::send_request("Good", q, false, 1);
            let r = match c.try_call(
                RequestCode::SendMessage,
                &h,
                &Msg::new("Good", q, body.clone()).encode(),
            ) {
                Ok(r) => r,
                Err(e) => {
                    rep.errors.push(format!("send: {e}"));
                    break;
                }
            };
            if r.status() != Status::Success {
                rep.errors
                    .push(format!("send: {} {}", r.status().name(), r.remark()));
                continue;
            }
            rep.sent += 1;
            sent.fetch_add(1, Ordering::Relaxed);
            let off = r.fields::<SendResponse>().unwrap().first_queue_offset;
            let p = match c.try_call(
                RequestCode::PullMessage,
                &pull_request("Good", q, off, 1, 0),
                &[],
            ) {
                Ok(p) => p,
                Err(e) => {
                    rep.errors.push(format!("pull: {e}"));
                    break;
                }
            };
            if p.status() != Status::Success {
                rep.errors
                    .push(format!("pull: {} {}", p.status().name(), p.remark()));
                continue;
            }
            let recs = decode_records(&p.body);
            if recs.first().map(|r| r.body) != Some(&body[..]) {
                rep.errors.push(format!("pull at {off}: wrong record"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        rep
    })
}

/// Reads responses until the broker closes the connection; returns them.
fn read_until_closed(c: &mut Client) -> Vec<Resp> {
    c.set_read_timeout(Duration::from_secs(5));
    let mut out = Vec::new();
    loop {
        match c.read_any() {
            Ok(r) => out.push(r),
            Err(e) => {
                assert!(
                    e.contains("closed") || e.contains("reset"),
                    "expected the broker to close the connection, got: {e}"
                );
                return out;
            }
        }
    }
}

/// A raw request frame with any code.
fn raw_frame(code: u16, request_id: u64, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_frame(
        &mut out,
        code,
        Flags::REQUEST,
        request_id,
        &Raw(header),
        body,
    )
    .unwrap();
    out
}

/// Small deterministic PRNG (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn bad_input_gets_a_status_and_disturbs_no_one_else() {
    let dir = tempdir("badinput");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let addr = node.broker_addr();
    let mut admin = Client::connect(addr);
    admin.create_topic_ok("Good", 4);
    admin.create_topic_ok("BadInput", 4);
    let stop = Arc::new(AtomicBool::new(false));
    let good_sent = Arc::new(AtomicU64::new(0));
    let good = good_client(addr, Arc::clone(&stop), Arc::clone(&good_sent));
    wait_until(
        Duration::from_secs(30),
        "the good client's first send",
        || good_sent.load(Ordering::Relaxed) >= 1 || good.is_finished(),
    );

    // 1. Not a frame at all (an HTTP request): MALFORMED_REQUEST, then the connection closes.
    let mut c = Client::connect(addr);
    c.send_raw(b"GET / HTTP/1.1\r\nHost: ringmq\r\n\r\n")
        .unwrap();
    let got = read_until_closed(&mut c);
    assert_eq!(got.len(), 1, "one answer before the close");
    got[0].expect_status(Status::MalformedRequest);

    // 2. A header length larger than the frame: MALFORMED_REQUEST and close.
    let mut c = Client::connect(addr);
    let mut f = raw_frame(RequestCode::GetMaxOffset.into(), 5, b"abc", b"");
    f[16..20].copy_from_slice(&1000u32.to_be_bytes());
    c.send_raw(&f).unwrap();
    let got = read_until_closed(&mut c);
    assert_eq!(got.len(), 1);
    got[0].expect_status(Status::MalformedRequest);
    assert_eq!(got[0].request_id, 5);

    // 3. Random garbage on fresh connections: only well-formed error responses, then a close.
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for round in 0..30 {
        let len = 1 + (rng.next() % 300) as usize;
        let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let mut c = Client::connect(addr);
        c.send_raw(&junk).unwrap();
        c.stream().shutdown(Shutdown::Write).unwrap();
        for r in read_until_closed(&mut c) {
            assert!(
                matches!(
                    r.status(),
                    Status::MalformedRequest
                        | Status::FrameTooLarge
                        | Status::RequestCodeNotSupported
                ),
                "round {round}: garbage answered {} ({})",
                r.status().name(),
                r.remark()
            );
        }
    }

    // 4. One connection, kept through every recoverable error.
    let mut c = Client::connect(addr);
    // 4a. A frame over 16 MiB: FRAME_TOO_LARGE to its request id, its bytes skipped.
    let frame_len = frame::FRAME_BYTES_MAX + 100;
    let mut big = Vec::with_capacity(frame_len);
    big.extend_from_slice(&((frame_len - 4) as u32).to_be_bytes());
    big.extend_from_slice(&u16::from(RequestCode::SendMessage).to_be_bytes());
    big.extend_from_slice(&0u16.to_be_bytes());
    big.extend_from_slice(&0xABCu64.to_be_bytes());
    big.extend_from_slice(&0u32.to_be_bytes());
    big.resize(frame_len, 0x5A);
    c.send_raw(&big).unwrap();
    let r = c.recv(0xABC);
    r.expect_status(Status::FrameTooLarge);
    c.max_offset("BadInput", 0); // the connection is still in sync and served
                                 // 4b. An unknown request code.
    c.send_raw(&raw_frame(9999, 0xC0DE, b"", b"")).unwrap();
    c.recv(0xC0DE)
        .expect_status(Status::RequestCodeNotSupported);
    // 4c. A name server request sent to the broker.
    c.call(RequestCode::RegisterBroker, &Empty, b"")
        .expect_status(Status::RequestCodeNotSupported);
    // 4d. A header that does not decode.
    c.call(RequestCode::SendMessage, &Raw(b"\xff\xff\xff"), b"")
        .expect_status(Status::MalformedRequest);
    c.call(RequestCode::PullMessage, &Raw(b""), b"")
        .expect_status(Status::MalformedRequest);

    // 4e. Bad topic names: path characters, too long, empty.
    let long = "t".repeat(200);
    for topic in ["a/b", "../etc", "a b", "a.b", long.as_str()] {
        let r = c.send_bytes(topic, 0, &Msg::new(topic, 0, "x").encode());
        r.expect_status(Status::MessageIllegal);
        c.create_topic(topic, 4)
            .expect_status(Status::MessageIllegal);
        assert_ne!(c.pull(topic, 0, 0, 1, 0).status(), Status::Success);
    }
    c.create_topic("", 4).expect_status(Status::MessageIllegal);
    c.create_topic("ZeroQueues", 0)
        .expect_status(Status::MessageIllegal);

    // 4f. A record whose body CRC is broken.
    let mut rec = Msg::new("BadInput", 0, "crc will not match").encode();
    let body_at = 84 + 4; // IPv4 hosts: BODY length at 84, bytes at 88
    rec[body_at] ^= 0xFF;
    c.send_bytes("BadInput", 0, &rec)
        .expect_status(Status::MessageIllegal);
    // ... also to a topic that does not exist yet (auto-create must not run for it).
    let mut rec = Msg::new("NewTopicBadCrc", 0, "crc will not match").encode();
    rec[body_at] ^= 0xFF;
    c.send_bytes("NewTopicBadCrc", 0, &rec)
        .expect_status(Status::MessageIllegal);
    // 4g. A record for another topic than the header's (an existing and a new header topic).
    let other = Msg::new("Other", 0, "wrong topic").encode();
    c.send_bytes("BadInput", 0, &other)
        .expect_status(Status::MessageIllegal);
    c.send_bytes("NewTopicWrongRecord", 0, &Msg::new("Good", 0, "x").encode())
        .expect_status(Status::MessageIllegal);
    // 4h. A record for another queue than the header's, and a queue that does not exist.
    c.send_bytes("BadInput", 1, &Msg::new("BadInput", 0, "q0").encode())
        .expect_status(Status::MessageIllegal);
    c.send_bytes("BadInput", 99, &Msg::new("BadInput", 99, "q99").encode())
        .expect_status(Status::MessageIllegal);
    // 4i. Batches: one bad record (CRC, truncated) rejects the whole batch.
    let good_rec = Msg::new("BadInput", 2, "fine").encode();
    let mut bad_rec = Msg::new("BadInput", 2, "broken").encode();
    bad_rec[body_at] ^= 0x01;
    for body in [
        [good_rec.clone(), bad_rec.clone()].concat(),
        [good_rec.clone(), good_rec[..50].to_vec()].concat(),
        [good_rec.clone(), vec![0u8; 3]].concat(),
    ] {
        let h = Client::send_request("BadInput", 2, true, 2);
        c.call(RequestCode::SendBatchMessage, &h, &body)
            .expect_status(Status::MessageIllegal);
    }
    // 4j. A batch whose header counts more records than its body holds.
    let h = Client::send_request("BadInput", 2, true, 3);
    let two_good = [good_rec.clone(), good_rec.clone()].concat();
    c.call(RequestCode::SendBatchMessage, &h, &two_good)
        .expect_status(Status::MessageIllegal);
    // 4k. SEND_MESSAGE with two records, and with none.
    let two = [good_rec.clone(), good_rec.clone()].concat();
    let h = Client::send_request("BadInput", 2, false, 2);
    c.call(RequestCode::SendMessage, &h, &two)
        .expect_status(Status::MessageIllegal);
    let h = Client::send_request("BadInput", 2, false, 1);
    c.call(RequestCode::SendMessage, &h, b"")
        .expect_status(Status::MessageIllegal);

    // The misbehaving connection is still served.
    assert_eq!(c.max_offset("BadInput", 2), 0);

    // The good client is still served after all that (or it stopped on an error, which
    // the assertions below report).
    let after_bad = good_sent.load(Ordering::Relaxed);
    wait_until(Duration::from_secs(30), "10 more good sends", || {
        good_sent.load(Ordering::Relaxed) >= after_bad + 10 || good.is_finished()
    });
    stop.store(true, Ordering::Relaxed);
    let rep = good.join().unwrap();
    assert!(
        rep.errors.is_empty(),
        "the good client was disturbed: {:?}",
        rep.errors
    );
    assert!(
        rep.sent >= 10,
        "the good client sent only {} records",
        rep.sent
    );
    eprintln!("good client: {} sends and pulls, all fine", rep.sent);

    // Nothing from a bad request was stored: no records, no topics.
    let mut c = Client::connect(addr);
    for q in 0..4 {
        assert_eq!(c.max_offset("BadInput", q), 0, "BadInput/{q} holds records");
    }
    let good_total: u64 = (0..4).map(|q| c.max_offset("Good", q)).sum();
    assert_eq!(good_total, rep.sent);
    let info = c.runtime_info();
    assert_eq!(
        info.shards.iter().map(|s| s.msgs_in).sum::<u64>(),
        rep.sent,
        "only the good client's records were stored"
    );
    let r = c.call(RequestCode::GetAllTopicConfig, &Empty, &[]);
    r.ok();
    let topics: Vec<String> = TopicConfigTable::decode(&r.body)
        .unwrap()
        .topics
        .into_iter()
        .map(|t| t.topic)
        .collect();
    let mut sorted = topics.clone();
    sorted.sort();
    // The cluster's reply topic is the broker's own, created at start.
    assert_eq!(
        sorted,
        vec!["BadInput", "DefaultCluster_REPLY_TOPIC", "Good"],
        "topics created by bad requests"
    );
    // A pull past the end of an empty queue still answers normally.
    let r = c.pull("BadInput", 0, 0, 1, 0);
    r.expect_status(Status::PullNotFound);
    assert_eq!(r.fields::<PullResponse>().unwrap().max_offset, 0);
    assert!(
        !node.log().contains("panicked"),
        "the broker logged a panic"
    );
}
