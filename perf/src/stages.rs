//! `--metrics-url`: where the broker's requests spent their time during the run, from its
//! Prometheus endpoint. The endpoint's histograms count since the node started, so the run's
//! share is the difference of a scrape when measuring begins and one when it ends. Reported
//! per stage (`ringmq_request_stage_latency_seconds`: from the read that completed a frame
//! to its handler, and from a reply being queued to its write completing), per request code
//! and outcome (`ringmq_rpc_latency_seconds`: frame read to reply queued) and for the store's
//! append (`ringmq_store_append_latency_seconds`): count, p50, p99, as the upper bound of the
//! histogram bucket the percentile falls in (the buckets are 1-2-5 steps). Each shard
//! publishes its histograms every second, so the window is only that exact: the first scrape
//! may miss up to a second of what came before the run, and the last one waits
//! [`VIEW_PERIOD`] for the run's last second.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

/// Families read, and the label that names a series in the report.
const FAMILIES: [(&str, &str); 3] = [
    ("ringmq_request_stage_latency_seconds", "stage"),
    ("ringmq_rpc_latency_seconds", "request_code"),
    ("ringmq_store_append_latency_seconds", ""),
];
/// Largest response read (a scrape of a big cluster is a few MB).
const SCRAPE_BYTES_MAX: usize = 64 << 20;
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// A little over the endpoint's view period (each shard publishes every second): the final
/// scrape waits this long so the run's last requests are in it.
pub const VIEW_PERIOD: Duration = Duration::from_millis(1200);

/// One scrape: per series (family and its labels but `le`), its cumulative buckets.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    series: BTreeMap<String, Vec<(f64, u64)>>,
}

/// Scrapes `url` (`http://host:port/metrics`).
pub async fn scrape(url: &str) -> Result<Snapshot, String> {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || scrape_blocking(&url))
        .await
        .map_err(|e| format!("scraping: {e}"))?
}

fn scrape_blocking(url: &str) -> Result<Snapshot, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--metrics-url {url}: expected http://HOST:PORT/PATH"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let addr: SocketAddr = host
        .parse()
        .map_err(|_| format!("--metrics-url {url}: {host} is not IP:PORT"))?;
    let mut s = TcpStream::connect_timeout(&addr, SCRAPE_TIMEOUT)
        .map_err(|e| format!("connecting to {addr} for metrics: {e}"))?;
    s.set_read_timeout(Some(SCRAPE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("asking {url}: {e}"))?;
    let mut body = Vec::new();
    s.take(SCRAPE_BYTES_MAX as u64)
        .read_to_end(&mut body)
        .map_err(|e| format!("reading {url}: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{url}: not an HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!(
            "{url}: {}",
            head.lines().next().unwrap_or("no status line")
        ));
    }
    Ok(parse(payload))
}

/// Parses the bucket lines of [`FAMILIES`] from Prometheus' text format.
fn parse(text: &str) -> Snapshot {
    let mut series: BTreeMap<String, Vec<(f64, u64)>> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = FAMILIES.iter().find_map(|(f, _)| {
            line.strip_prefix(f)
                .and_then(|r| r.strip_prefix("_bucket{"))
        }) else {
            continue;
        };
        let family = &line[..line.len() - rest.len() - "_bucket{".len()];
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Ok(count) = value.trim().parse::<f64>() else {
            continue;
        };
        let mut le = None;
        let mut kept = Vec::new();
        for kv in labels.split(',') {
            match kv.split_once('=') {
                Some(("le", v)) => le = Some(v.trim_matches('"')),
                Some(_) => kept.push(kv),
                None => {}
            }
        }
        let bound = match le {
            Some("+Inf") => f64::INFINITY,
            Some(v) => match v.parse::<f64>() {
                Ok(b) => b,
                Err(_) => continue,
            },
            None => continue,
        };
        let key = format!("{family}{{{}}}", kept.join(","));
        series.entry(key).or_default().push((bound, count as u64));
    }
    Snapshot { series }
}

/// One series' share of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// `stage=read_to_handler`, `request_code=SEND_MESSAGE,response_code=SUCCESS,...`.
    pub name: String,
    pub count: u64,
    /// Upper bounds of the buckets holding the 50th and 99th percentiles, µs (`None`: past
    /// the last finite bucket).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// What happened between `before` and `after`, series with no request left out.
pub fn between(before: &Snapshot, after: &Snapshot) -> Vec<Stage> {
    let mut out = Vec::new();
    for (key, buckets) in &after.series {
        let old = before.series.get(key);
        let mut delta: Vec<(f64, u64)> = buckets
            .iter()
            .map(|&(b, n)| {
                let was = old
                    .and_then(|o| o.iter().find(|(ob, _)| *ob == b))
                    .map_or(0, |(_, n)| *n);
                (b, n.saturating_sub(was))
            })
            .collect();
        delta.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = delta.last().map_or(0, |(_, n)| *n);
        if count == 0 {
            continue;
        }
        let pct = |q: f64| {
            let want = (count as f64 * q).ceil() as u64;
            delta
                .iter()
                .find(|(_, n)| *n >= want.max(1))
                .and_then(|(b, _)| b.is_finite().then_some((b * 1e6).round()))
        };
        out.push(Stage {
            name: label_of(key),
            count,
            p50_us: pct(0.50),
            p99_us: pct(0.99),
        });
    }
    out
}

/// The report's name of a series: the family's short name and its labels.
fn label_of(key: &str) -> String {
    let (family, labels) = key.split_once('{').unwrap_or((key, "}"));
    let short = match family {
        "ringmq_request_stage_latency_seconds" => "stage",
        "ringmq_rpc_latency_seconds" => "request",
        "ringmq_store_append_latency_seconds" => "append",
        other => other,
    };
    let labels = labels.trim_end_matches('}').replace('"', "");
    if labels.is_empty() {
        short.to_string()
    } else {
        format!("{short} {labels}")
    }
}

/// Report lines (one per series) and the JSON field `broker_stages`.
pub fn report(stages: &[Stage]) -> (Vec<String>, Value) {
    let us = |v: Option<f64>| v.map_or("> last bucket".to_string(), |v| format!("≤ {v} µs"));
    let lines = stages
        .iter()
        .map(|s| {
            format!(
                "broker {}: {} requests, p50 {}, p99 {}",
                s.name,
                s.count,
                us(s.p50_us),
                us(s.p99_us)
            )
        })
        .collect();
    let json = Value::Array(
        stages
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "count": s.count,
                    "p50_us_at_most": s.p50_us,
                    "p99_us_at_most": s.p99_us,
                })
            })
            .collect(),
    );
    (lines, json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
# TYPE ringmq_request_stage_latency_seconds histogram
ringmq_request_stage_latency_seconds_bucket{stage=\"read_to_handler\",le=\"0.00001\"} 5
ringmq_request_stage_latency_seconds_bucket{stage=\"read_to_handler\",le=\"0.00002\"} 5
ringmq_request_stage_latency_seconds_bucket{stage=\"read_to_handler\",le=\"+Inf\"} 5
ringmq_other_bucket{le=\"1\"} 3
";
    const AFTER: &str = "\
ringmq_request_stage_latency_seconds_bucket{stage=\"read_to_handler\",le=\"0.00001\"} 55
ringmq_request_stage_latency_seconds_bucket{stage=\"read_to_handler\",le=\"0.00002\"} 104
ringmq_request_stage_latency_seconds_bucket{stage=\"read_to_handler\",le=\"+Inf\"} 105
ringmq_rpc_latency_seconds_bucket{request_code=\"SEND_MESSAGE\",response_code=\"SUCCESS\",protocol=\"native\",le=\"0.00005\"} 0
ringmq_rpc_latency_seconds_bucket{request_code=\"SEND_MESSAGE\",response_code=\"SUCCESS\",protocol=\"native\",le=\"+Inf\"} 0
";

    #[test]
    fn the_run_is_the_difference_of_two_scrapes() {
        let stages = between(&parse(BEFORE), &parse(AFTER));
        assert_eq!(
            stages,
            vec![Stage {
                name: "stage stage=read_to_handler".into(),
                count: 100,
                p50_us: Some(10.0),
                p99_us: Some(20.0),
            }]
        );
        let (lines, json) = report(&stages);
        assert_eq!(
            lines,
            ["broker stage stage=read_to_handler: 100 requests, p50 ≤ 10 µs, p99 ≤ 20 µs"]
        );
        assert_eq!(json[0]["count"], 100);
    }

    #[test]
    fn a_tail_past_the_last_bucket_says_so() {
        let after = "ringmq_store_append_latency_seconds_bucket{le=\"0.001\"} 1\n\
                     ringmq_store_append_latency_seconds_bucket{le=\"+Inf\"} 4\n";
        let s = between(&Snapshot::default(), &parse(after));
        assert_eq!(s[0].name, "append");
        assert_eq!(s[0].p50_us, None);
        assert_eq!(s[0].count, 4);
    }
}
