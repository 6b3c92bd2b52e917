//! `ringmq-perf produce --metrics-url`: the report carries the broker's per-stage latency of
//! the run's requests, scraped from a real node's Prometheus endpoint before and after.
#![allow(clippy::unwrap_used)]

mod common;

use common::{perf, read_json, Node};

#[test]
fn produce_reports_the_brokers_stages_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // A free port for the endpoint (the node logs it only at info level).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let port_set = format!("metricsPromExporterPort={port}");
    let node = Node::start_with(
        &dir.path().join("data"),
        &[
            "metricsExporterType=PROM",
            "metricsPromExporterHost=127.0.0.1",
            &port_set,
        ],
    );
    let json = dir.path().join("stages.json");
    let url = format!("http://127.0.0.1:{port}/metrics");
    let run = perf(&[
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "Stages",
        "--size",
        "128",
        "--count",
        "2000",
        "--metrics-url",
        &url,
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = read_json(&json);
    let stages = doc["broker_stages"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc}"));
    let find = |name: &str| {
        stages
            .iter()
            .find(|s| s["name"].as_str().is_some_and(|n| n.contains(name)))
            .unwrap_or_else(|| panic!("no {name} in {doc}"))
    };
    let sends = find("request_code=SEND_MESSAGE,response_code=SUCCESS");
    assert!(sends["count"].as_u64().unwrap() >= 2000, "{sends}");
    assert!(sends["p50_us_at_most"].as_f64().unwrap() > 0.0, "{sends}");
    let read = find("stage=read_to_handler");
    assert!(read["count"].as_u64().unwrap() >= 2000, "{read}");
    let written = find("stage=queued_to_written");
    assert!(written["count"].as_u64().unwrap() >= 2000, "{written}");
    assert!(find("append")["count"].as_u64().unwrap() >= 2000);
    assert!(
        run.stdout.contains("broker stage stage=read_to_handler:"),
        "{}",
        run.stdout
    );
    node.stop();
}
