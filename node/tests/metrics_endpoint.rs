//! The Prometheus endpoint of `ringmq standalone` (`metricsExporterType=PROM`): counters match
//! what the test sent exactly; unknown paths are 404; an oversized request head is 431; a
//! silent connection is closed within the timeout while another scrape is served.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;

fn metrics_node(dir: &std::path::Path) -> (Node, SocketAddr) {
    let node = Node::standalone(
        &dir.join("data"),
        &[
            "--shards",
            "2",
            "--set",
            "metricsExporterType=PROM",
            "--set",
            "metricsPromExporterHost=127.0.0.1",
            "--set",
            "metricsPromExporterPort=0",
        ],
    );
    let log = node.log();
    let line = log_lines_containing(&log, "metrics endpoint: http://");
    let addr = line
        .first()
        .and_then(|l| l.split("http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"));
    (node, addr)
}

/// Sends `request` raw and reads the whole answer (the server closes after one).
fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A connection closed at accept (over the cap) may refuse the write; the answer is empty.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(addr: SocketAddr, path: &str) -> String {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes(),
    )
}

/// The sum over all series of `name` (any labels).
fn sum(body: &str, name: &str) -> u64 {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn scrape_counts_exactly_what_was_sent() {
    let dir = tempdir("metrics");
    let (node, addr) = metrics_node(dir.path());
    let mut c = Client::connect(node.broker_addr());
    let topic = "MetricsTopic";
    let mut sent = 0u64;
    for i in 0..40u32 {
        c.send_ok(&Msg::new(topic, i % 8, format!("m{i}")));
        sent += 1;
    }
    let batch: Vec<Msg> = (0..10)
        .map(|i| Msg::new(topic, 3, format!("b{i}")))
        .collect();
    c.send_batch(topic, 3, &batch).ok();
    sent += 10;

    let resp = get(addr, "/metrics");
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(
        body.contains("# TYPE ringmq_messages_in_total counter"),
        "{body}"
    );
    assert!(body.contains("ringmq_build_info{version=\""), "{body}");
    assert!(
        body.contains("ringmq_messages_in_total{shard=\"1\"}"),
        "{body}"
    );
    assert_eq!(sum(body, "ringmq_messages_in_total"), sent, "{body}");
    assert!(sum(body, "ringmq_bytes_in_total") > 0, "{body}");
    assert_eq!(sum(body, "ringmq_connections"), 1, "{body}");
    // The standalone's broker registered with its name server before the ready line.
    assert_eq!(sum(body, "ringmq_namesrv_brokers"), 1, "{body}");
    assert!(sum(body, "ringmq_namesrv_topics") >= 1, "{body}");
    assert_eq!(
        sum(body, "ringmq_namesrv_broker_expiries_total"),
        0,
        "{body}"
    );

    let index = get(addr, "/");
    assert!(
        index.starts_with("HTTP/1.1 200 OK") && index.contains("/metrics"),
        "{index}"
    );
    let missing = get(addr, "/nope");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let post = http(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    let mut big = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    let too_large = http(addr, &big);
    assert!(too_large.starts_with("HTTP/1.1 431"), "{too_large}");
}

#[test]
fn silent_connection_is_closed_and_others_are_served() {
    let dir = tempdir("metrics-silent");
    let (_node, addr) = metrics_node(dir.path());
    let started = Instant::now();
    let mut silent = TcpStream::connect(addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // Another scrape is served while the silent one holds its slot.
    let ok = get(addr, "/metrics");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    let mut buf = [0u8; 64];
    let n = silent.read(&mut buf).unwrap_or(0);
    let waited = started.elapsed();
    assert_eq!(n, 0, "the silent connection got an answer");
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(10),
        "closed after {waited:?}, want about 5 s"
    );
}

#[test]
fn connections_over_the_cap_are_closed_at_once() {
    let dir = tempdir("metrics-cap");
    let (_node, addr) = metrics_node(dir.path());
    // METRICS_CONNECTIONS_MAX (8) silent connections hold every slot for the timeout.
    let held: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let n = extra.read(&mut buf).unwrap_or(usize::MAX);
    assert_eq!(n, 0, "the ninth connection was not closed at once");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Once the silent ones time out, scrapes are served again.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let resp = get(addr, "/metrics");
        if resp.starts_with("HTTP/1.1 200 OK") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no scrape served after the timeout"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(held);
}
