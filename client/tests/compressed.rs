//! Compressed bodies against a real `ringmq standalone`: records sent as a RocketMQ producer
//! sends a body over 4 KiB (SYSFLAG COMPRESSED plus the type: zlib 0x301, a 4.x producer's
//! bare 0x1, LZ4 0x101, ZSTD 0x201) are stored as sent, and the native push and pull
//! consumers hand the application the original body with COMPRESSED cleared; a body that
//! does not inflate arrives as stored, still marked, and the queue goes on. This crate's own
//! producer compresses bodies over 4 KiB (zlib by default, LZ4 or Zstandard when asked) and
//! stores them smaller; small, incompressible and unasked-for bodies go as they are.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fast_push, wait_until, Node};
use ringmq_client::wire::code::{RequestCode, Status};
use ringmq_client::wire::codec::Decode;
use ringmq_client::wire::command::{
    opener_frame, Response, SendRequest, SendResponse, OPENER_REQUEST_ID,
};
use ringmq_client::wire::frame;
use ringmq_client::wire::properties::{self, keys};
use ringmq_client::wire::record::Compression;
use ringmq_client::wire::record::{self, sys_flag};
use ringmq_client::{
    ConsumeResult, Message, Producer, PullConsumer, ReceivedMessage, StartPosition,
};

const TOPIC: &str = "Compressed";
const WAIT: Duration = Duration::from_secs(20);

/// What was sent: the SYSFLAG, the stored (compressed) body, and what a consumer must show.
struct Sent {
    sys_flag: u32,
    stored: Vec<u8>,
    /// The original body, or `None` for a body that cannot be inflated.
    original: Option<Vec<u8>>,
    key: String,
}

/// 16 KiB that compresses well but not to nothing (the case: 16 KiB, 89 bytes).
fn original(i: u8) -> Vec<u8> {
    (0..16 * 1024u32)
        .map(|n| b"a RocketMQ producer compressed this "[(n % 36) as usize] ^ i)
        .collect()
}

fn zlib(body: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
    z.write_all(body).unwrap();
    z.finish().unwrap()
}

fn lz4(body: &[u8]) -> Vec<u8> {
    let mut f = lz4_flex::frame::FrameEncoder::new(Vec::new());
    f.write_all(body).unwrap();
    f.finish().unwrap()
}

fn zstd(body: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
}

/// The records of the test, in send order (queue offsets 0..).
fn records() -> Vec<Sent> {
    let sent = |sys_flag, stored, original: Option<Vec<u8>>, key: &str| Sent {
        sys_flag,
        stored,
        original,
        key: key.to_string(),
    };
    let mut junk = zlib(&original(9));
    junk[..4].copy_from_slice(b"junk");
    vec![
        sent(
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB,
            zlib(&original(1)),
            Some(original(1)),
            "zlib",
        ),
        sent(
            sys_flag::COMPRESSED,
            zlib(&original(2)),
            Some(original(2)),
            "zlib-4x",
        ),
        sent(
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4,
            lz4(&original(3)),
            Some(original(3)),
            "lz4",
        ),
        sent(
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZSTD,
            zstd(&original(4)),
            Some(original(4)),
            "zstd",
        ),
        sent(
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB,
            junk,
            None,
            "corrupt",
        ),
        sent(0, b"plain after them".to_vec(), None, "plain"),
    ]
}

/// The record a RocketMQ producer's send becomes: tag, keys, unique key, a user property.
fn encode(s: &Sent) -> Vec<u8> {
    let mut props = Vec::new();
    properties::encode(
        [
            (keys::TAGS, "TagC"),
            (keys::KEYS, s.key.as_str()),
            (keys::UNIQ_KEY, s.key.as_str()),
            ("origin", "rocketmq"),
        ],
        &mut props,
    )
    .unwrap();
    let msg = record::Message {
        topic: TOPIC,
        queue_id: 0,
        flag: 0,
        sys_flag: s.sys_flag,
        born_timestamp_ms: 1_700_000_000_000,
        born_host: SocketAddr::from(([127, 0, 0, 1], 40000)),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: &s.stored,
        properties: &props,
    };
    let mut out = Vec::new();
    record::encode(&msg, &mut out).unwrap();
    out
}

/// SEND_MESSAGE of one pre-encoded record on a fresh native connection; returns its queue
/// offset.
fn send_record(broker: SocketAddr, record: &[u8]) -> u64 {
    let mut stream = TcpStream::connect(broker).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(&opener_frame("compressed-test")).unwrap();
    let header = SendRequest {
        producer_group: "rocketmq-producers".to_string(),
        topic: TOPIC.to_string(),
        queue_id: 0,
        batch: false,
        record_count: 1,
    };
    let mut out = Vec::new();
    frame::encode_request(
        &mut out,
        RequestCode::SendMessage,
        false,
        1,
        &header,
        record,
    )
    .unwrap();
    stream.write_all(&out).unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some(n) = frame::check(&buf, frame::FRAME_BYTES_MAX).unwrap() {
            let f = frame::parse(&buf[..n]).unwrap();
            if f.request_id != OPENER_REQUEST_ID {
                assert_eq!(f.code, Status::Success as u16, "send answered {}", f.code);
                let r = Response::<SendResponse>::decode(f.header).unwrap();
                return r.fields.unwrap().first_queue_offset;
            }
            buf.drain(..n);
            continue;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed before the send's answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Checks what a consumer handed the application against what was sent.
fn check(got: &ReceivedMessage, want: &Sent) {
    let key = &want.key;
    assert_eq!(got.keys(), [key.as_str()], "{key}");
    assert_eq!(got.tag(), Some("TagC"), "{key}");
    assert_eq!(got.property("origin"), Some("rocketmq"), "{key}");
    assert_eq!(got.unique_key(), Some(key.as_str()), "{key}");
    match &want.original {
        Some(original) => {
            assert_eq!(got.body.len(), original.len(), "{key}: inflated");
            assert_eq!(&got.body[..], &original[..], "{key}");
            assert_eq!(
                got.sys_flag,
                want.sys_flag & !sys_flag::COMPRESSED,
                "{key}: COMPRESSED cleared, the type bits kept"
            );
            assert!(!got.body_compressed(), "{key}");
        }
        None => {
            assert_eq!(&got.body[..], &want.stored[..], "{key}: as stored");
            assert_eq!(got.sys_flag, want.sys_flag, "{key}");
            assert_eq!(got.body_compressed(), want.sys_flag != 0, "{key}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_bodies_reach_push_and_pull_consumers_inflated() {
    let node = Node::start_with(1);
    node.create_topic(TOPIC, 1).await;
    let broker = SocketAddr::from(([127, 0, 0, 1], node.broker_port));
    let sent = records();
    for (i, s) in sent.iter().enumerate() {
        assert!(s.stored.len() < 1024, "{}: sent compressed", s.key);
        let record = encode(s);
        let offset = tokio::task::spawn_blocking(move || send_record(broker, &record))
            .await
            .unwrap();
        assert_eq!(offset, i as u64);
    }

    // Pull consumer, direct.
    let pull = PullConsumer::builder()
        .group("compressed-pull")
        .name_server(node.namesrv())
        .start()
        .await
        .unwrap();
    let mq = pull.fetch_queues(TOPIC).await.unwrap().remove(0);
    let r = pull.pull(&mq, 0, 32, "*").await.unwrap();
    assert_eq!(r.messages.len(), sent.len());
    for (got, want) in r.messages.iter().zip(&sent) {
        check(got, want);
    }
    assert_eq!(r.next_offset, sent.len() as u64, "the queue goes on");
    pull.shutdown().await;

    // Push consumer.
    let seen: Arc<Mutex<Vec<ReceivedMessage>>> = Default::default();
    let sink = seen.clone();
    let push = fast_push(&node, "compressed-push", "push-1")
        .subscribe(TOPIC, "*")
        .start_position(StartPosition::First)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().extend(msgs);
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    assert!(
        wait_until(WAIT, || seen.lock().unwrap().len() >= sent.len()).await,
        "push consumer got {} of {}",
        seen.lock().unwrap().len(),
        sent.len()
    );
    push.shutdown().await;
    let mut got = seen.lock().unwrap().clone();
    got.sort_by_key(|m| m.queue_offset);
    got.dedup_by_key(|m| m.queue_offset);
    assert_eq!(got.len(), sent.len());
    for (got, want) in got.iter().zip(&sent) {
        check(got, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_compresses_bodies_over_4_kib() {
    const T: &str = "ProducerCompressed";
    let node = Node::start_with(1);
    node.create_topic(T, 1).await;
    // (how the producer is set, the type bits a compressed record carries)
    let setups: [(Option<Compression>, bool, u32); 4] = [
        (None, true, sys_flag::COMPRESSION_ZLIB),
        (Some(Compression::Lz4), true, sys_flag::COMPRESSION_LZ4),
        (Some(Compression::Zstd), true, sys_flag::COMPRESSION_ZSTD),
        (None, false, 0),
    ];
    // (body, the type bits the stored record must carry)
    let mut expect: Vec<(Vec<u8>, u32)> = Vec::new();
    for (i, (kind, on, bits)) in setups.iter().enumerate() {
        let mut b = Producer::builder()
            .group(format!("compressing-{i}"))
            .name_server(node.namesrv());
        if let Some(k) = kind {
            b = b.compression(*k);
        }
        if !on {
            b = b.compress_over(usize::MAX);
        }
        let p = b.start().await.unwrap();
        for (body, compressible) in [
            (original(i as u8), true),
            (vec![b'x'; 1024], false),
            (ringmq_testkit::noise(8 * 1024), false),
        ] {
            p.send(Message::new(T, body.clone())).await.unwrap();
            expect.push((body, if compressible { *bits } else { 0 }));
        }
        p.shutdown().await;
    }
    let end = Producer::builder()
        .group("compressing-end")
        .name_server(node.namesrv())
        .start()
        .await
        .unwrap();
    end.send(Message::new(T, "end")).await.unwrap();
    end.shutdown().await;

    let pull = PullConsumer::builder()
        .group("compressed-reader")
        .name_server(node.namesrv())
        .start()
        .await
        .unwrap();
    let mq = pull.fetch_queues(T).await.unwrap().remove(0);
    let r = pull.pull(&mq, 0, 32, "*").await.unwrap();
    assert_eq!(r.messages.len(), expect.len() + 1);
    for (n, ((body, bits), pair)) in expect.iter().zip(r.messages.windows(2)).enumerate() {
        let got = &pair[0];
        // One queue on one shard: a record ends where the next begins.
        let stored = pair[1].physical_offset - got.physical_offset;
        assert_eq!(&got.body[..], &body[..], "message {n}: the original body");
        assert!(!got.body_compressed(), "message {n}");
        assert_eq!(
            got.sys_flag & sys_flag::COMPRESSION_MASK,
            *bits,
            "message {n}: type bits"
        );
        if *bits != 0 {
            assert!(
                stored < body.len() as u64 / 4,
                "message {n}: stored {stored} bytes for a {} byte body",
                body.len()
            );
        } else {
            assert!(stored > body.len() as u64, "message {n}: stored as sent");
        }
    }
    pull.shutdown().await;
}
