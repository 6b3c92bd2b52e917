//! `cargo bench -p ringmq-wire --bench record`: what the record codec costs per message of
//! 1 KiB, the work a producer does for every record it sends and a consumer for every record
//! it receives, beside the two floors under it (the body's CRC and a copy of its bytes).
//!
//! Cases, in nanoseconds per message (a batch of 100 messages per timed pass, as
//! `ringmq-perf produce --batch 100` sends them; medians of `RINGMQ_BENCH_RUNS` runs):
//! - `crc32 of the body`: BODYCRC alone ([`record::body_crc`]), the floor of encode and decode;
//! - `copy of the body`: 1 KiB appended to a buffer that has room, the other floor of encode;
//! - `properties, encode`: the block a producer writes per record, from keys made before the
//!   timed passes (`UNIQ_KEY` of 32 hex digits; then also `TAGS` and `KEYS`);
//! - `record, encode`: [`record::encode`] of the record into a frame buffer (lengths checked,
//!   CRC, every field, the body copied);
//! - `records, decode`: [`record::iter`] over the 100 encoded records (lengths and CRC
//!   checked), as a consumer splits a pull body;
//! - `property lookup, absent key`: [`properties::get`] of a key the block does not hold (a
//!   scan of the whole block, what a consumer pays asking each record for an optional
//!   property such as `TIMER_OUT_MS`).
//!
//! Environment: `RINGMQ_BENCH_RUNS` (default 5), `RINGMQ_BENCH_PASSES` (timed passes of 100
//! messages per case and run, default 20,000).

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Instant;

use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message};

const BATCH: usize = 100;
const BODY: usize = 1024;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The unique key of message `i`: 24 hex digits of the producer's prefix and 8 of a counter,
/// as the client writes it (made before the timed passes).
fn unique_key(i: usize, out: &mut String) {
    use std::fmt::Write;
    out.clear();
    let _ = write!(out, "7F0000010F2A18B4AAC2{:04X}{:08X}", 0x1d3e, i as u32);
}

fn properties_of(key: &str, tags: bool, out: &mut Vec<u8>) {
    let tagged = [(keys::TAGS, "TagA"), (keys::KEYS, "order-1234")];
    let extra = if tags { &tagged[..] } else { &[][..] };
    properties::encode(
        extra
            .iter()
            .copied()
            .chain(std::iter::once((keys::UNIQ_KEY, key))),
        out,
    )
    .expect("properties");
}

fn message<'a>(body: &'a [u8], props: &'a [u8]) -> Message<'a> {
    Message {
        topic: "bench-topic",
        queue_id: 3,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: 1_765_000_000_000,
        born_host: SocketAddr::from(([127, 0, 0, 1], 40_000)),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: props,
    }
}

/// Nanoseconds per message of `passes` runs of `pass` (each handles [`BATCH`] messages).
fn time(passes: usize, mut pass: impl FnMut()) -> f64 {
    pass(); // warm-up
    let t = Instant::now();
    for _ in 0..passes {
        pass();
    }
    t.elapsed().as_nanos() as f64 / (passes * BATCH) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

fn main() {
    let runs = env_usize("RINGMQ_BENCH_RUNS", 5).max(1);
    let passes = env_usize("RINGMQ_BENCH_PASSES", 20_000).max(1);
    let bodies: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| (0..BODY).map(|j| (i * 31 + j * 7) as u8).collect())
        .collect();
    let keys: Vec<String> = (0..BATCH)
        .map(|i| {
            let mut k = String::new();
            unique_key(i, &mut k);
            k
        })
        .collect();
    let blocks: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| {
            let mut b = Vec::new();
            properties_of(k, false, &mut b);
            b
        })
        .collect();
    let mut encoded = Vec::new();
    for (b, p) in bodies.iter().zip(&blocks) {
        record::encode(&message(b, p), &mut encoded).expect("encode");
    }

    let mut cases: Vec<(&str, Vec<f64>)> = Vec::new();
    let mut add = |name: &'static str, v: f64| match cases.iter_mut().find(|(n, _)| *n == name) {
        Some((_, list)) => list.push(v),
        None => cases.push((name, vec![v])),
    };
    let mut frame: Vec<u8> = Vec::with_capacity(encoded.len() + 4096);
    let mut props: Vec<u8> = Vec::with_capacity(BATCH * 128);
    for _ in 0..runs {
        add(
            "crc32 of the body",
            time(passes, || {
                for b in &bodies {
                    black_box(record::body_crc(black_box(b)));
                }
            }),
        );
        add(
            "copy of the body",
            time(passes, || {
                frame.clear();
                for b in &bodies {
                    frame.extend_from_slice(black_box(b));
                }
                black_box(&frame);
            }),
        );
        for (name, tags) in [
            ("properties, encode (UNIQ_KEY)", false),
            ("properties, encode (TAGS, KEYS, UNIQ_KEY)", true),
        ] {
            add(
                name,
                time(passes, || {
                    props.clear();
                    for k in &keys {
                        properties_of(k, tags, &mut props);
                    }
                    black_box(&props);
                }),
            );
        }
        add(
            "record, encode",
            time(passes, || {
                frame.clear();
                for (b, p) in bodies.iter().zip(&blocks) {
                    record::encode(&message(b, p), &mut frame).expect("encode");
                }
                black_box(&frame);
            }),
        );
        add(
            "records, decode",
            time(passes, || {
                for r in record::iter(black_box(&encoded)) {
                    black_box(r.expect("decode").body.len());
                }
            }),
        );
        add(
            "property lookup, absent key",
            time(passes, || {
                for p in &blocks {
                    black_box(properties::get(black_box(p), keys::TIMER_OUT_MS));
                }
            }),
        );
    }
    println!(
        "record codec, ns per 1 KiB message, median of {runs} runs of {passes} x {BATCH} messages"
    );
    for (name, v) in cases {
        let list: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "{name:45} {:>8.1}   runs: {}",
            median(v.clone()),
            list.join(" / ")
        );
    }
}
