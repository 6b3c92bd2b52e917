//! `--html FILE` against a real standalone node: a short produce run writes one
//! self-contained page with the throughput chart, the per-second latency chart and the
//! latency distribution, each with at least one point, and the JSON beside it unchanged.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_stable_fields, perf, read_json, Node};

#[test]
fn produce_writes_an_html_report_with_charts() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    let html = dir.path().join("out.html");
    let json = dir.path().join("out.json");
    let pid = node.pid().to_string();
    let p = perf(&[
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "PerfHtml",
        "--count",
        "2000",
        "--node-pid",
        &pid,
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(p.code, 0);
    let (messages, errors) = check_stable_fields(&read_json(&json));
    assert_eq!((messages, errors), (2000, 0));

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    assert!(!page.contains("<script"), "no scripts");
    assert!(
        !page.contains(" src=") && !page.contains(" href="),
        "no external assets"
    );
    assert!(page.contains("ringmq-perf produce on topic PerfHtml"));
    assert!(
        page.contains("<td>2000</td>"),
        "summary lacks the message count"
    );
    assert!(page.contains("CPU per message"));
    let source = format!("/proc of pid {}", node.pid());
    assert!(page.contains(&source), "node CPU from --node-pid");

    let throughput = chart(&page, "throughput");
    assert!(throughput.contains("time (s)") && throughput.contains("throughput (msgs/s)"));
    assert!(points(throughput) >= 1, "{throughput}");
    let latency = chart(&page, "latency-send");
    assert!(latency.contains("time (s)") && latency.contains("latency (µs)"));
    for series in ["p50", "p99", "p99.9"] {
        assert!(
            latency.contains(&format!("<title>{series} at ")),
            "{series} missing"
        );
    }
    assert!(points(latency) >= 3, "{latency}");
    let dist = chart(&page, "distribution");
    assert!(dist.contains("percentile") && dist.contains("latency (µs)"));
    assert!(points(dist) >= 2, "{dist}");
    node.stop();
}

/// The `<svg id="ID">` element of `page`.
fn chart<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let end = page[start..].find("</svg>").unwrap() + start;
    &page[start..end]
}

fn points(svg: &str) -> usize {
    svg.matches("<circle class=\"pt\"").count()
}
