//! Pull throughput with SQL92 filters (issue #15), not a test: one in-process node
//! (`enablePropertyFilter=true`, 2 shards, async flush, temp dir) holds a backlog of
//! MESSAGES records of BODY_BYTES bytes with a property `n` = i mod 10; a pull consumer
//! reads every queue from offset 0 to its end, once unfiltered (`*`), once with a SQL92
//! filter passing 10 % (`n = 3`) and once passing 100 % (`n >= 0`), ROUNDS times in rotating
//! order, and the medians are printed.
//!
//! "scanned" is the backlog the pulls moved past per second (what a consumer catching up
//! sees); "delivered" is what reached the consumer per second. Direct pulls of at most 1,024
//! messages, one in flight per queue, the four queues in parallel.
//!
//! Run: `cargo bench -p ringmq-perf --bench pull_filter` (release profile).
#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq_client::{Admin, Message, MessageSelector, Producer, PullConsumer, PullStatus};
use ringmq_node::broker::node as run;
use ringmq_node::broker::shard::start::StartOptions;
use ringmq_node::config::{BrokerConfig, NamesrvConfig};
use ringmq_node::net::namesrv;

const TOPIC: &str = "PullFilterBench";
const QUEUES: u32 = 4;
const MESSAGES: u32 = 400_000;
const BODY_BYTES: usize = 256;
const ROUNDS: usize = 3;
const BATCH: usize = 64;

fn main() {
    eprintln!("load average at start: {}", load_average());
    let dir = tempfile::Builder::new()
        .prefix("ringmq-bench-")
        .tempdir()
        .unwrap();
    let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let ns = namesrv::start(NamesrvConfig::default(), SocketAddr::new(host, 0), false).unwrap();
    let mut cfg = BrokerConfig {
        broker_name: "bench".to_string(),
        store_path_root_dir: dir.path().join("data"),
        namesrv_addr: vec![ns.addr.to_string()],
        listen_port: 0,
        shards: Some(2),
        ..BrokerConfig::default()
    };
    cfg.set("enablePropertyFilter", "true", "bench").unwrap();
    let opts = StartOptions {
        listen: SocketAddr::new(host, 0),
        publish_host: host,
        force_fallback: false,
        transfer_msg_by_heap: false,
    };
    let broker = run::start(cfg, opts).unwrap();
    let namesrv = ns.addr.to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(&namesrv));
    drop(rt);
    broker.stop();
    ns.stop();
    eprintln!("load average at end: {}", load_average());
}

/// The 1, 5 and 15 minute load averages (the machine is shared; see docs/perf.md).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |e| format!("unknown ({e})"),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

async fn bench(namesrv: &str) {
    let admin = Admin::connect(namesrv).await.unwrap();
    admin
        .create_topic(TOPIC, QUEUES, Duration::from_secs(10))
        .await
        .unwrap();
    fill(namesrv).await;
    let consumer = PullConsumer::builder()
        .group("pull-filter-bench")
        .name_server(namesrv)
        .pull_bytes_max(8 << 20)
        .start()
        .await
        .unwrap();
    let consumer = Arc::new(consumer);
    let variants = [
        ("unfiltered (*)", MessageSelector::all()),
        ("SQL92 n = 3 (10 %)", MessageSelector::sql("n = 3")),
        ("SQL92 n >= 0 (100 %)", MessageSelector::sql("n >= 0")),
    ];
    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); variants.len()];
    for round in 0..ROUNDS {
        for k in 0..variants.len() {
            let v = (round + k) % variants.len();
            let (scanned, delivered, took) = read_all(&consumer, &variants[v].1).await;
            assert_eq!(scanned, u64::from(MESSAGES), "{} scanned", variants[v].0);
            let secs = took.as_secs_f64();
            samples[v].push((scanned as f64 / secs, delivered as f64 / secs));
            eprintln!(
                "round {round} {:<22} {delivered:>7} msgs delivered in {:.3} s",
                variants[v].0, secs
            );
        }
    }
    println!(
        "\n{MESSAGES} records of {BODY_BYTES} B in {QUEUES} queues, medians of {ROUNDS} rounds"
    );
    println!("| pull | scanned [msgs/s] | delivered [msgs/s] | delivered [MB/s] |");
    println!("|---|---:|---:|---:|");
    for (v, (name, _)) in variants.iter().enumerate() {
        let scanned = median(samples[v].iter().map(|s| s.0).collect());
        let delivered = median(samples[v].iter().map(|s| s.1).collect());
        let mb = delivered * BODY_BYTES as f64 / 1e6;
        println!("| {name} | {scanned:.0} | {delivered:.0} | {mb:.1} |");
    }
    consumer.shutdown().await;
}

/// Sends the backlog in batches of BATCH: n = i mod 10.
async fn fill(namesrv: &str) {
    let p = Producer::builder()
        .group("pull-filter-bench-p")
        .name_server(namesrv)
        .start()
        .await
        .unwrap();
    let body = vec![b'x'; BODY_BYTES];
    let mut i = 0u32;
    while i < MESSAGES {
        let batch: Vec<Message> = (i..(i + BATCH as u32).min(MESSAGES))
            .map(|j| Message::new(TOPIC, body.clone()).with_property("n", (j % 10).to_string()))
            .collect();
        i += batch.len() as u32;
        p.send_batch(&batch).await.unwrap();
    }
    p.shutdown().await;
}

/// Reads every queue from 0 to its end; (records moved past, messages delivered, time).
async fn read_all(c: &Arc<PullConsumer>, selector: &MessageSelector) -> (u64, u64, Duration) {
    let queues = c.fetch_queues(TOPIC).await.unwrap();
    let start = Instant::now();
    let tasks: Vec<_> = queues
        .into_iter()
        .map(|mq| {
            let (c, selector) = (Arc::clone(c), selector.clone());
            tokio::spawn(async move {
                let (mut offset, mut delivered) = (0u64, 0u64);
                loop {
                    let r = c.pull(&mq, offset, 1024, selector.clone()).await.unwrap();
                    delivered += r.messages.len() as u64;
                    if r.status == PullStatus::NoNewMessage || r.next_offset == offset {
                        return (offset, delivered);
                    }
                    offset = r.next_offset;
                }
            })
        })
        .collect();
    let (mut scanned, mut delivered) = (0, 0);
    for t in tasks {
        let (s, d) = t.await.unwrap();
        scanned += s;
        delivered += d;
    }
    (scanned, delivered, start.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
