//! `cargo bench -p ringmq-node --bench metrics_scrape`: what a Prometheus scrape costs on a
//! broker with many series. A real `ringmq standalone` (2 shards, `metricsExporterType=PROM`)
//! gets `RINGMQ_BENCH_TOPICS` topics (default 10,000; one queue each, one message each) and
//! `RINGMQ_BENCH_GROUPS` consumer groups (default 1,000; each pulls one topic and commits an
//! offset on ten), so the endpoint shows a series per topic, per (group, topic) pair and per
//! lagging (group, topic). Then it is scraped `RINGMQ_BENCH_RUNS` times (default 20) over a
//! fresh TCP connection each; printed: median and slowest scrape time, body size, series
//! count, the shards' own time to build their views (`ringmq_metrics_view_build_seconds`),
//! and the broker's CPU per second while idle with those views being built (from
//! `/proc/<pid>/stat`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{tempdir, Client, Msg, Node};
use ringmq_wire::code::RequestCode;
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::PullRequest;

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn scrape(addr: SocketAddr) -> (Duration, String) {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
        .expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&out).into_owned();
    (took, text)
}

fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn main() {
    let topics = env_num("RINGMQ_BENCH_TOPICS", 10_000);
    let groups = env_num("RINGMQ_BENCH_GROUPS", 1_000);
    let runs = env_num("RINGMQ_BENCH_RUNS", 20).max(1);
    let dir = tempdir("bench-metrics-scrape");
    let node = Node::standalone(
        &dir.path().join("data"),
        &[
            "--shards",
            "2",
            "--set",
            "metricsExporterType=PROM",
            "--set",
            "metricsPromExporterHost=127.0.0.1",
            "--set",
            "metricsPromExporterPort=0",
            // 10,000 one-queue topics: ConsumeQueue files of 1,000 units (20 KB) instead of
            // RocketMQ's 6 MB, which would preallocate 60 GB.
            "--set",
            "mappedFileSizeConsumeQueue=20000",
        ],
    );
    let addr: SocketAddr = common::metrics_addr(&node.log());
    let mut c = Client::connect(node.broker_addr());
    let name = |i: usize| format!("scrape-topic-{i:05}");

    let t0 = Instant::now();
    for i in 0..topics {
        c.create_topic_ok(&name(i), 1);
        c.send_ok(&Msg::new(&name(i), 0, format!("m{i}")));
        if (i + 1) % 1000 == 0 {
            eprintln!(
                "  {} topics created and sent to ({:.1} s)",
                i + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    for g in 0..groups {
        let group = format!("scrape-group-{g:04}");
        let h = PullRequest {
            consumer_group: group.clone(),
            topic: name(g % topics),
            queue_id: 0,
            queue_offset: 0,
            max_messages: 1,
            max_bytes: 1 << 20,
            filter_type: FilterType::Tag,
            expression: "*".to_string(),
            suspend_timeout_ms: 0,
            commit_offset: None,
        };
        c.call(RequestCode::PullMessage, &h, &[]).ok();
        for k in 0..10 {
            c.commit_offset(&group, &name((g * 10 + k) % topics), 0, 0);
        }
        if (g + 1) % 250 == 0 {
            eprintln!("  {} groups pulled and committed", g + 1);
        }
    }
    eprintln!(
        "set-up done in {:.1} s: {topics} topics, {groups} groups",
        t0.elapsed().as_secs_f64()
    );
    // Wait for views that show every group's lag.
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = groups.min(topics) * 10;
    loop {
        let (_, text) = scrape(addr);
        let lag_series = text
            .lines()
            .filter(|l| l.starts_with("ringmq_consumer_lag_messages{"))
            .count();
        if lag_series >= want.min(topics * groups) || Instant::now() > deadline {
            eprintln!("views published: {lag_series} lag series");
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    let mut times = Vec::with_capacity(runs);
    let mut body = String::new();
    for _ in 0..runs {
        let (took, text) = scrape(addr);
        times.push(took);
        body = text;
        std::thread::sleep(Duration::from_millis(100));
    }
    times.sort();
    let series = body
        .lines()
        .filter(|l| !l.starts_with('#') && l.starts_with("ringmq_"))
        .count();
    let build: Vec<String> = body
        .lines()
        .filter(|l| l.starts_with("ringmq_metrics_view_build_seconds{"))
        .map(|l| {
            let v: f64 = l
                .rsplit_once(' ')
                .map_or(0.0, |(_, v)| v.parse().unwrap_or(0.0));
            format!("{:.2} ms", v * 1e3)
        })
        .collect();
    // The broker idle but for its periodic work (views included), over 10 s.
    let ticks_per_s = 100.0;
    let (a, t) = (cpu_ticks(node.pid()), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let idle_cpu = (cpu_ticks(node.pid()) - a) as f64 / ticks_per_s / t.elapsed().as_secs_f64();
    println!(
        "metrics scrape, {topics} topics, {groups} groups, 2 shards: median {:.2} ms, slowest {:.2} ms over {runs} scrapes; body {} KiB, {series} samples; view build per shard {}; broker CPU while idle {:.1} % of a core",
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        body.len() / 1024,
        build.join(", "),
        idle_cpu * 100.0
    );
}
