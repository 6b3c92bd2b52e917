//! `cargo bench -p ringmq-node --bench metrics_record`: what a shard's metrics recording adds
//! to one request, apart from everything else the request does. Per send: the frame's wait
//! from its read to its handler and the reply's from queued to written (the connection's
//! stage histograms: two clock reads and one histogram each), the request's latency (two
//! clock reads, one histogram), the append's latency (two clock reads, one histogram), the
//! topic's flow and each body's size; per pull: the two stages, the request's latency and the
//! (group, topic) flow and position. Measured for sends of 1 and of 64 messages over 1,000
//! topics (a hash-map lookup per send), against a recorder that is off (what a node with
//! `metricsExporterType=DISABLE` runs: one branch). The per-message figure is what to set
//! beside the broker's CPU per message (`scripts/bench-metrics.sh`, docs/perf.md).
//!
//! Environment: `RINGMQ_BENCH_RUNS` (default 5; the median is printed).

use std::hint::black_box;
use std::time::Instant;

use ringmq_node::io::clock;
use ringmq_node::metrics::shard::{Protocol, Recorder, Stage, SERIES_MAX_DEFAULT};
use ringmq_wire::code::Status;

const TOPICS: usize = 1_000;
const REQUESTS: usize = 200_000;

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The reply's queued-to-written stage, as the connection's write loop records it.
fn written(r: &mut Recorder) {
    let queued = r.is_on().then(clock::Instant::now);
    if let Some(q) = queued {
        r.stage(Stage::Write, micros(q.elapsed()));
    }
}

/// ns per request of `REQUESTS` sends of `batch` messages each.
fn sends(on: bool, batch: usize, topics: &[String]) -> f64 {
    let mut r = Recorder::new(on, SERIES_MAX_DEFAULT);
    let sizes = vec![1024u64; batch];
    let t0 = Instant::now();
    for i in 0..REQUESTS {
        let topic = &topics[i % topics.len()];
        let arrived = r.is_on().then(clock::Instant::now);
        if let Some(t) = arrived {
            r.stage(Stage::Read, micros(t.elapsed()));
        }
        let since = r.is_on().then(clock::Instant::now);
        let append = r.is_on().then(clock::Instant::now);
        if let Some(a) = append {
            r.appended(micros(a.elapsed()));
            r.stored(
                black_box(topic),
                black_box(batch as u64 * 1100),
                sizes.iter().copied(),
            );
        }
        if let Some(s) = since {
            r.served(10, Status::Success, Protocol::Native, micros(s.elapsed()));
        }
        written(&mut r);
    }
    black_box(&r);
    t0.elapsed().as_nanos() as f64 / REQUESTS as f64
}

/// ns per pull request (one group per topic).
fn pulls(on: bool, topics: &[String]) -> f64 {
    let mut r = Recorder::new(on, SERIES_MAX_DEFAULT);
    let t0 = Instant::now();
    for i in 0..REQUESTS {
        let topic = &topics[i % topics.len()];
        let arrived = r.is_on().then(clock::Instant::now);
        if let Some(t) = arrived {
            r.stage(Stage::Read, micros(t.elapsed()));
        }
        let since = r.is_on().then(clock::Instant::now);
        r.pulled(
            black_box("group-a"),
            black_box(topic),
            (i % 8) as u32,
            i as u64,
            32,
            32 * 1100,
        );
        if let Some(s) = since {
            r.served(11, Status::Success, Protocol::Native, micros(s.elapsed()));
        }
        written(&mut r);
    }
    black_box(&r);
    t0.elapsed().as_nanos() as f64 / REQUESTS as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("RINGMQ_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("bench-topic-{i:04}")).collect();
    println!("metrics recording per request, median of {runs} runs of {REQUESTS} requests over {TOPICS} topics:");
    for (what, batch) in [("send, 1 message", 1usize), ("send, 64 messages", 64)] {
        let off = median((0..runs).map(|_| sends(false, batch, &topics)).collect());
        let on = median((0..runs).map(|_| sends(true, batch, &topics)).collect());
        println!(
            "  {what:<18} off {off:>6.1} ns  on {on:>6.1} ns  added {:>6.1} ns per request, {:>6.2} ns per message",
            on - off,
            (on - off) / batch as f64
        );
    }
    let off = median((0..runs).map(|_| pulls(false, &topics)).collect());
    let on = median((0..runs).map(|_| pulls(true, &topics)).collect());
    println!(
        "  {:<18} off {off:>6.1} ns  on {on:>6.1} ns  added {:>6.1} ns per request",
        "pull",
        on - off
    );
}
