//! A real Prometheus server (`/usr/bin/prometheus`, Debian's `prometheus` package; scripts/test.sh
//! installs it) scrapes `ringmq standalone`'s endpoint every second, and the PromQL of a
//! RocketMQ 5 dashboard, asked through Prometheus' HTTP API, answers what the test sent:
//! exact counts for counters and lag gauges, a finite p99 from `rocketmq_rpc_latency`.
//! Everything listens on 127.0.0.1; Prometheus keeps its data in the test's temp dir and is
//! killed when the test ends.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// The Prometheus process, killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_prometheus(dir: &std::path::Path, target: SocketAddr) -> Prometheus {
    assert!(
        std::path::Path::new(PROMETHEUS).exists(),
        "{PROMETHEUS} missing: apt-get install -y prometheus (scripts/test.sh does)"
    );
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: ringmq\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Prometheus { child, addr }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `/api/v1/query` answered: each series' labels and value (NaN kept as NaN).
fn query(p: &Prometheus, promql: &str) -> Option<Vec<(serde_json::Value, f64)>> {
    let mut s = TcpStream::connect(p.addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let path = format!("/api/v1/query?query={}", percent_encode(promql));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let body = resp.split_once("\r\n\r\n")?.1;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    if v["status"] != "success" {
        return None;
    }
    let out = v["data"]["result"]
        .as_array()?
        .iter()
        .map(|r| {
            let value = r["value"][1].as_str().unwrap_or("NaN");
            (
                r["metric"].clone(),
                value.parse::<f64>().unwrap_or(f64::NAN),
            )
        })
        .collect();
    Some(out)
}

/// Asks `promql` until `ok` accepts the answer (scrapes land every second).
fn query_until(
    p: &Prometheus,
    promql: &str,
    ok: impl Fn(&[(serde_json::Value, f64)]) -> bool,
) -> Vec<(serde_json::Value, f64)> {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut last = None;
    loop {
        if let Some(r) = query(p, promql) {
            if ok(&r) {
                return r;
            }
            last = Some(r);
        }
        assert!(
            Instant::now() < deadline,
            "`{promql}` never answered as expected; last answer: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn one_value(r: &[(serde_json::Value, f64)]) -> Option<f64> {
    match r {
        [(_, v)] => Some(*v),
        _ => None,
    }
}

#[test]
fn rocketmq_dashboard_queries_answer_what_was_sent() {
    let dir = tempdir("metrics-prometheus");
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
            "--set",
            "brokerClusterName=PromCluster",
            "--set",
            "brokerName=prom-broker",
        ],
    );
    let target = metrics_addr(&node.log());
    let prom = start_prometheus(dir.path(), target);

    let mut c = Client::connect(node.broker_addr());
    let topic = "PromTopic";
    c.create_topic_ok(topic, 4);
    for i in 0..60u32 {
        c.send_ok(&Msg::new(topic, i % 4, format!("prom-{i:04}")));
    }
    // Group "it-consumers" pulls 10 of queue 0's 15 and commits 6.
    c.pull(topic, 0, 0, 10, 0).ok();
    c.commit_offset("it-consumers", topic, 0, 6);

    let node_labels = "cluster=\"PromCluster\",node_type=\"broker\",node_id=\"prom-broker\"";
    let r = query_until(&prom, "sum(rocketmq_messages_in_total) by (topic)", |r| {
        r.iter().any(|(m, v)| m["topic"] == topic && *v == 60.0)
    });
    assert!(
        r.iter().any(|(m, v)| m["topic"] == topic && *v == 60.0),
        "{r:?}"
    );
    let sel = format!("{{{node_labels},topic=\"{topic}\",consumer_group=\"it-consumers\"}}");
    for (family, want) in [
        ("rocketmq_messages_out_total", 10.0),
        ("rocketmq_consumer_lag_messages", 9.0),
        ("rocketmq_consumer_inflight_messages", 4.0),
        ("rocketmq_consumer_ready_messages", 5.0),
    ] {
        query_until(&prom, &format!("{family}{sel}"), |r| {
            one_value(r) == Some(want)
        });
    }
    query_until(
        &prom,
        &format!("sum(rocketmq_throughput_in_total{{topic=\"{topic}\"}})"),
        |r| one_value(r).is_some_and(|v| v >= 60.0 * 9.0),
    );
    query_until(&prom, "rocketmq_topic_number", |r| {
        one_value(r).is_some_and(|v| v >= 1.0)
    });
    query_until(&prom, "sum(rocketmq_message_size_count)", |r| {
        one_value(r) == Some(60.0)
    });
    // Sends keep arriving so the rate over the window is not zero.
    let q = "histogram_quantile(0.99, sum(rate(rocketmq_rpc_latency_bucket[1m])) by (le))";
    let deadline = Instant::now() + Duration::from_secs(40);
    let p99 = loop {
        c.send_ok(&Msg::new(topic, 1, "tick".to_string()));
        if let Some(v) = query(&prom, q).as_deref().and_then(one_value) {
            if v.is_finite() {
                break v;
            }
        }
        assert!(Instant::now() < deadline, "`{q}` never gave a finite value");
        std::thread::sleep(Duration::from_millis(500));
    };
    // In ms: a local send is served far below 10 s (the last finite bucket).
    assert!((0.0..=10_000.0).contains(&p99), "p99 {p99} ms");
    query_until(
        &prom,
        "sum(rocketmq_rpc_latency_count{protocol_type=\"native\",response_code=\"success\"})",
        |r| one_value(r).is_some_and(|v| v >= 60.0),
    );
}
