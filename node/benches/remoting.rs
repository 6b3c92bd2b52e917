//! `cargo bench -p ringmq-node --bench remoting`: what the remoting edge costs per SEND
//! beside the native one, apart from the store: a RocketMQ client's SEND_BATCH_MESSAGE (the
//! JSON header with `SendMessageRequestHeaderV2`'s short names, as RocketMQ's Java client and
//! `ringmq-perf --protocol remoting` send it) parsed, translated into the native send, and
//! its native answer translated back into the response and encoded; and the same records as
//! a native SEND parsed and its answer encoded. Batches of 1 and 32 messages of 1 KiB.
//!
//! Environment: `RINGMQ_BENCH_RUNS` (default 5; the median is printed).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::net::SocketAddr;

use ringmq_node::acl::Caller;
use ringmq_node::net::remoting::request::{self, ReplyKind, Translated};
use ringmq_node::net::remoting::{reply, Peer};
use ringmq_node::net::reply::{Outcome, Reply};
use ringmq_node::net::service::Service;
use ringmq_wire::command::{Request, SendResponse};
use ringmq_wire::frame::{self, Flags};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::remoting::batch;
use ringmq_wire::remoting::code::request as rc;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};

const REQUESTS: usize = 5_000;
const BODY_BYTES: usize = 1024;

/// A service that only answers what the translation asks (the broker as a whole).
struct Edge;

impl Service for Edge {
    fn frame_bytes_max(&self) -> usize {
        rframe::FRAME_BYTES_MAX
    }
    fn handle(&self, _frame: Vec<u8>, _caller: &Caller) -> Outcome {
        unreachable!("the bench calls no handler")
    }
}

fn props(seq: u64) -> String {
    let key = format!("7F0000010000{seq:020X}");
    let mut out = Vec::new();
    properties::encode([("WAIT", "true"), (keys::UNIQ_KEY, key.as_str())], &mut out)
        .expect("properties");
    String::from_utf8(out).expect("text")
}

/// A RocketMQ client's send of `n` messages (SEND_MESSAGE for 1, else SEND_BATCH_MESSAGE).
fn remoting_frame(n: usize) -> Vec<u8> {
    let mut ext = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        ext.insert(k.to_string(), v);
    };
    let body_bytes = vec![0x5au8; BODY_BYTES];
    let (code, body) = if n == 1 {
        for (k, v) in [
            ("producerGroup", "pg"),
            ("topic", "orders"),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "0"),
            ("sysFlag", "0"),
            ("bornTimestamp", "1765152000000"),
            ("flag", "0"),
            ("reconsumeTimes", "0"),
            ("unitMode", "false"),
            ("batch", "false"),
            ("bname", "broker-a"),
        ] {
            put(k, v.to_string());
        }
        put("properties", props(0));
        (rc::SEND_MESSAGE, body_bytes)
    } else {
        for (k, v) in [
            ("a", "pg"),
            ("b", "orders"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "0"),
            ("f", "0"),
            ("g", "1765152000000"),
            ("h", "0"),
            ("j", "0"),
            ("k", "false"),
            ("m", "true"),
            ("n", "broker-a"),
        ] {
            put(k, v.to_string());
        }
        put("i", props(u64::MAX));
        let mut body = Vec::new();
        for i in 0..n {
            batch::encode(&mut body, 0, &body_bytes, props(i as u64)).expect("batch");
        }
        (rc::SEND_BATCH_MESSAGE, body)
    };
    let mut cmd = Command::request(code, 7, ext);
    cmd.language = ringmq_wire::remoting::command::Language::Java;
    rframe::encode(&cmd, SerializeType::Json, &body).expect("frame")
}

/// The native send the translation makes of `remoting`, with a client's request id.
fn native_frame(remoting: &[u8]) -> Vec<u8> {
    let parsed = rframe::parse(remoting).expect("remoting frame");
    match request::translate(&Edge, &parsed.command, parsed.body, peer()) {
        Translated::Native { frame: f, .. } => {
            let p = frame::parse(&f).expect("native frame");
            let mut out = Vec::new();
            frame::encode_prefix(
                &mut out,
                p.code,
                Flags::REQUEST,
                7,
                p.header.len(),
                p.body.len(),
            )
            .expect("prefix");
            out.extend_from_slice(p.header);
            out.extend_from_slice(p.body);
            out
        }
        other => panic!("not translated into a native send: {other:?}"),
    }
}

fn peer() -> Peer {
    Peer {
        addr: SocketAddr::from(([127, 0, 0, 1], 40_000)),
    }
}

fn answer(records: u32) -> Reply {
    Reply::ok(SendResponse {
        queue_id: 0,
        first_queue_offset: 1_000,
        record_count: records,
        first_physical_offset: 1 << 30,
        store_host: SocketAddr::from(([127, 0, 0, 1], 10_911)),
        store_timestamp_ms: 1_765_152_000_001,
        deliver_at_ms: 0,
    })
}

/// This thread's CPU time in ns: unlike the wall clock, it leaves out the
/// time a virtual machine's host ran something else.
fn thread_cpu_ns() -> i64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .expect("the thread's CPU clock");
    t.tv_sec() * 1_000_000_000 + t.tv_nsec()
}

/// Nanoseconds of CPU per call of `f`, over `REQUESTS` calls in a row.
fn time_per_call(mut f: impl FnMut()) -> f64 {
    let t0 = thread_cpu_ns();
    for _ in 0..REQUESTS {
        f();
    }
    (thread_cpu_ns() - t0) as f64 / REQUESTS as f64
}

/// The remoting edge's stages for one request frame `f` of `records` messages, in µs per
/// request: parse, translate, answer (translated back and encoded).
fn remoting_stages(f: &[u8], records: u32) -> [f64; 3] {
    let parsed = rframe::parse(f).expect("frame");
    let Translated::Native { kind, .. } =
        request::translate(&Edge, &parsed.command, parsed.body, peer())
    else {
        panic!("not a native send")
    };
    assert!(matches!(kind, ReplyKind::Send { .. }));
    let parse = time_per_call(|| {
        black_box(rframe::parse(black_box(f)).expect("frame"));
    });
    let translate = time_per_call(|| {
        black_box(request::translate(
            &Edge,
            black_box(&parsed.command),
            parsed.body,
            peer(),
        ));
    });
    let answer = time_per_call(|| {
        let (mut resp, body) = reply::translate(&kind, answer(records), None);
        resp.opaque = parsed.command.opaque;
        resp.flag = rframe::FLAG_RESPONSE;
        let (head, encoded) =
            ringmq_node::net::remoting::response_head(&resp, parsed.serialize_type, body.len());
        assert!(encoded);
        black_box(head);
    });
    [parse, translate, answer].map(|ns| ns / 1000.0)
}

/// The native edge's stages for the same records: the frame parsed and its header decoded
/// (the store checks records for both protocols), the answer encoded; µs per request.
fn native_stages(f: &[u8], records: u32) -> [f64; 2] {
    let parse = time_per_call(|| {
        let parsed = frame::parse(black_box(f)).expect("frame");
        black_box(Request::from_frame(&parsed).expect("request"));
    });
    let answer = time_per_call(|| {
        let r = answer(records);
        let mut out = Vec::with_capacity(128);
        frame::encode_prefix(&mut out, r.status, Flags::RESPONSE, 7, r.header.len(), 0)
            .expect("prefix");
        out.extend_from_slice(&r.header);
        black_box(out);
    });
    [parse, answer].map(|ns| ns / 1000.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("RINGMQ_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    println!(
        "The edge's work per SEND request (µs of thread CPU; median of {runs} runs of {REQUESTS}):"
    );
    for n in [1usize, 32] {
        let rf = remoting_frame(n);
        let nf = native_frame(&rf);
        let mut r: [Vec<f64>; 3] = Default::default();
        let mut nt: [Vec<f64>; 2] = Default::default();
        for _ in 0..runs {
            for (v, x) in r.iter_mut().zip(remoting_stages(&rf, n as u32)) {
                v.push(x);
            }
            for (v, x) in nt.iter_mut().zip(native_stages(&nf, n as u32)) {
                v.push(x);
            }
        }
        let body = vec![0x5au8; BODY_BYTES];
        let crc = median(
            (0..runs)
                .map(|_| {
                    time_per_call(|| {
                        for _ in 0..n {
                            black_box(ringmq_wire::record::body_crc(black_box(&body)));
                        }
                    }) / 1000.0
                })
                .collect(),
        );
        let [rp, rt, ra] = r.map(median);
        let [np, na] = nt.map(median);
        let remoting = rp + rt + ra;
        let native = np + na;
        println!(
            "  {n:>2} x 1 KiB: remoting {remoting:>6.2} (parse {rp:.2}, translate {rt:.2} of which \
             body CRCs {crc:.2}, answer {ra:.2}), native {native:>5.2} (parse {np:.2}, answer \
             {na:.2}); remoting's extra, the CRCs aside (the store computes them for a native \
             send): {:.3} µs per message",
            (remoting - crc - native) / n as f64
        );
    }
}
