//! `cargo bench -p ringmq-node --bench exposition`: what writing one scrape's text costs,
//! ringmq's hand-written exposition (`ringmq_node::metrics::render`, what `/metrics` serves)
//! against the `prometheus-client` crate writing the same series. No broker and no socket:
//! a snapshot shaped like `metrics_scrape`'s broker (2 shards, `RINGMQ_BENCH_TOPICS` topics,
//! default 10,000, one queue each; `RINGMQ_BENCH_GROUPS` groups, default 1,000, each pulling
//! one topic and lagging on ten), rendered `RINGMQ_BENCH_RUNS` times (default 30) each way.
//!
//! - `hand`: `metrics::render` (merges the shards' views and writes the text).
//! - `prometheus-client, collector`: a registered `Collector` that does the same merges at
//!   scrape time and writes each family through the crate's encoder (`ConstCounter`,
//!   `ConstGauge`, `encode_histogram`): the crate's cheapest way to expose figures that
//!   exist only in a snapshot. The crate escapes label values itself, as ringmq does.
//! - `prometheus-client, registry`: a `Registry` of `Family`s filled from the merged
//!   figures, then encoded: the crate's usual way, rebuilt per scrape (without the request
//!   histograms, which its `Histogram` cannot take from merged counts).
//!
//! Printed per way: median and fastest time over the runs, body size, sample lines; and the
//! time of merging the shards' views alone (the part every way does before writing). The
//! crate writes OpenMetrics (`# EOF`, `# TYPE name counter` without `_total`), so the texts
//! differ in those lines; the sample lines are the same series.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use ringmq_node::metrics::hist::Hist;
use ringmq_node::metrics::shard::{
    BrokerGauges, Flow, GroupEvents, Lag, Protocol, RequestKey, ShardView, Stage,
};
use ringmq_node::metrics::{render, ShardSample, Snapshot, Views};

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let topics = env_num("RINGMQ_BENCH_TOPICS", 10_000).max(1);
    let groups = env_num("RINGMQ_BENCH_GROUPS", 1_000);
    let runs = env_num("RINGMQ_BENCH_RUNS", 30).max(1);
    let snap = Arc::new(snapshot(topics, groups));

    let hand = measure(runs, || render(&snap));
    let mut collector = Registry::default();
    collector.register_collector(Box::new(SnapCollector(Arc::clone(&snap))));
    let via_collector = measure(runs, || {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &collector).expect("encoded");
        out
    });
    let via_registry = measure(runs, || {
        let registry = registry_of(&snap);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encoded");
        out
    });
    // The merge alone (the same maps as the collector's): what any way has to do before
    // writing text, so what a library cannot take away.
    let merge_only = measure(runs, || {
        let m = merge(&snap);
        format!("{}", m.topics_in.len() + m.topics_out.len() + m.lag.len())
    });
    println!(
        "exposition, {topics} topics, {groups} groups, 2 shards, median (fastest) of {runs} runs:"
    );
    println!(
        "  merging the shards' views alone: {:.2} ms ({:.2} ms)",
        merge_only.0[merge_only.0.len() / 2].as_secs_f64() * 1e3,
        merge_only.0[0].as_secs_f64() * 1e3,
    );
    for (way, (times, body)) in [
        ("hand (metrics::render)", hand),
        ("prometheus-client, collector", via_collector),
        ("prometheus-client, registry", via_registry),
    ] {
        let samples = body.lines().filter(|l| !l.starts_with('#')).count();
        println!(
            "  {way}: {:.2} ms ({:.2} ms); body {} KiB, {samples} samples",
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            body.len() / 1024,
        );
    }
}

/// Times `f` `runs` times (after one warm-up); sorted times and the last text.
fn measure(runs: usize, mut f: impl FnMut() -> String) -> (Vec<Duration>, String) {
    let mut body = f();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        body = std::hint::black_box(f());
        times.push(t0.elapsed());
    }
    times.sort();
    (times, body)
}

fn topic(i: usize) -> String {
    format!("scrape-topic-{i:05}")
}

fn group(g: usize) -> String {
    format!("scrape-group-{g:04}")
}

/// Two shards' views: topic `i` on shard `i % 2` with one message stored; group `g` pulled
/// topic `g % topics` and commits on ten topics, each lagging by one message.
fn snapshot(topics: usize, groups: usize) -> Snapshot {
    let mut views = [ShardView::default(), ShardView::default()];
    for i in 0..topics {
        let v = &mut views[i % 2];
        v.topics_in.push((
            topic(i),
            Flow {
                messages: 1,
                bytes: 180,
            },
        ));
    }
    for g in 0..groups {
        let t = g % topics;
        views[t % 2].out.push((
            group(g),
            topic(t),
            Flow {
                messages: 1,
                bytes: 180,
            },
        ));
        views[t % 2].groups.push((group(g), GroupEvents::default()));
        for k in 0..10 {
            let t = (g * 10 + k) % topics;
            views[t % 2].lag.push(Lag {
                group: group(g),
                topic: topic(t),
                messages: 1,
                inflight: 0,
                oldest_ms: 60_000,
            });
        }
    }
    for (shard, v) in views.iter_mut().enumerate() {
        for (code, status) in [(10, 0), (11, 0), (11, 19), (34, 0), (35, 0), (17, 0)] {
            let mut h = Hist::latency();
            for us in [40, 120, 900, 4_000, 70_000] {
                h.record_n(us, 10 + shard as u64);
            }
            let key = RequestKey {
                code,
                status,
                protocol: Protocol::Remoting,
            };
            v.requests.push((key, h));
        }
        v.stages = Stage::ALL.iter().map(|s| (*s, Hist::latency())).collect();
        v.append = Some(Hist::latency());
        v.fdatasync = Some(Hist::latency());
        v.build_us = 4_000;
    }
    views[0].broker = Some(BrokerGauges {
        topics: topics as u64,
        groups: groups as u64,
        producers: 1,
        consumers: 1,
        members: (0..groups).map(|g| (group(g), 1)).collect(),
    });
    Snapshot {
        shards: vec![ShardSample::default(); 2],
        views: Views {
            shards: views.into_iter().map(Arc::new).collect(),
            disk_free_bytes: Some(1 << 40),
            ..Views::default()
        },
        ..Snapshot::default()
    }
}

/// The merged figures of the families that hold nearly every sample.
#[derive(Default)]
struct Merged<'a> {
    topics_in: BTreeMap<&'a str, Flow>,
    topics_out: BTreeMap<(&'a str, &'a str), Flow>,
    lag: BTreeMap<(&'a str, &'a str), Lag>,
    groups: BTreeMap<&'a str, GroupEvents>,
    requests: BTreeMap<RequestKey, Hist>,
    members: Vec<(&'a str, u64)>,
}

fn merge(snap: &Snapshot) -> Merged<'_> {
    let mut m = Merged::default();
    for s in &snap.views.shards {
        for (t, f) in &s.topics_in {
            let e = m.topics_in.entry(t).or_default();
            e.messages += f.messages;
            e.bytes += f.bytes;
        }
        for (g, t, f) in &s.out {
            let e = m.topics_out.entry((t, g)).or_default();
            e.messages += f.messages;
            e.bytes += f.bytes;
        }
        for l in &s.lag {
            let e = m.lag.entry((&l.group, &l.topic)).or_default();
            e.messages += l.messages;
            e.inflight += l.inflight;
            e.oldest_ms = e.oldest_ms.max(l.oldest_ms);
        }
        for (g, e) in &s.groups {
            let a = m.groups.entry(g).or_default();
            a.retried += e.retried;
            a.dead_lettered += e.dead_lettered;
        }
        for (k, h) in &s.requests {
            match m.requests.get_mut(k) {
                Some(a) => a.merge(h),
                None => {
                    m.requests.insert(*k, h.clone());
                }
            }
        }
        if let Some(b) = &s.broker {
            m.members = b.members.iter().map(|(g, n)| (g.as_str(), *n)).collect();
        }
    }
    m
}

/// One lag family's value of a (group, topic).
type LagValue = fn(&Lag) -> f64;

#[derive(Debug)]
struct SnapCollector(Arc<Snapshot>);

impl Collector for SnapCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = merge(&self.0);
        // Counters are named without `_total`: the crate appends it.
        for (name, help, bytes) in [
            ("ringmq_messages_in", "Messages stored, by topic.", false),
            ("ringmq_bytes_in", "Record bytes stored, by topic.", true),
        ] {
            let mut fam = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (t, f) in &m.topics_in {
                let labels = [("topic", *t)];
                let v = if bytes { f.bytes } else { f.messages };
                ConstCounter::new(v).encode(fam.encode_family(&labels)?)?;
            }
        }
        for (name, help, bytes) in [
            (
                "ringmq_messages_out",
                "Messages pulled, by topic and group.",
                false,
            ),
            (
                "ringmq_bytes_out",
                "Record bytes pulled, by topic and group.",
                true,
            ),
        ] {
            let mut fam = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for ((t, g), f) in &m.topics_out {
                let labels = [("topic", *t), ("consumer_group", *g)];
                let v = if bytes { f.bytes } else { f.messages };
                ConstCounter::new(v).encode(fam.encode_family(&labels)?)?;
            }
        }
        let lag_families: [(&str, &str, LagValue); 3] = [
            (
                "ringmq_consumer_lag_messages",
                "Messages not committed.",
                |l| l.messages as f64,
            ),
            ("ringmq_consumer_lag_latency_seconds", "Oldest age.", |l| {
                l.oldest_ms as f64 / 1e3
            }),
            (
                "ringmq_consumer_inflight_messages",
                "Pulled, not committed.",
                |l| l.inflight as f64,
            ),
        ];
        for (name, help, value) in lag_families {
            let mut fam = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for ((g, t), l) in &m.lag {
                let labels = [("topic", *t), ("consumer_group", *g)];
                ConstGauge::new(value(l)).encode(fam.encode_family(&labels)?)?;
            }
        }
        for (name, dead) in [
            ("ringmq_send_to_dlq_messages", true),
            ("ringmq_retry_messages", false),
        ] {
            let mut fam = enc.encode_descriptor(name, "By group.", None, MetricType::Counter)?;
            for (g, e) in &m.groups {
                let labels = [("consumer_group", *g)];
                let v = if dead { e.dead_lettered } else { e.retried };
                ConstCounter::new(v).encode(fam.encode_family(&labels)?)?;
            }
        }
        let mut fam = enc.encode_descriptor(
            "ringmq_consumer_group_members",
            "Live members.",
            None,
            MetricType::Gauge,
        )?;
        for (g, n) in &m.members {
            let labels = [("consumer_group", *g)];
            ConstGauge::new(*n as i64).encode(fam.encode_family(&labels)?)?;
        }
        let mut fam = enc.encode_descriptor(
            "ringmq_rpc_latency_seconds",
            "Request latency.",
            None,
            MetricType::Histogram,
        )?;
        for (k, h) in &m.requests {
            let labels = [
                ("request_code", k.code_label()),
                ("response_code", k.status_label()),
                ("protocol", k.protocol.label().to_string()),
            ];
            // The crate takes per-bucket counts and sums them itself.
            let mut prev = 0;
            let mut buckets: Vec<(f64, u64)> = h
                .cumulative()
                .map(|(bound, n)| {
                    let b = (bound as f64 / 1e6, n - prev);
                    prev = n;
                    b
                })
                .collect();
            buckets.push((f64::MAX, h.count() - prev));
            fam.encode_family(&labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    h.sum() as f64 / 1e6,
                    h.count(),
                    &buckets,
                    None,
                )?;
        }
        Ok(())
    }
}

type Labels = Vec<(&'static str, String)>;

/// A registry of families filled from the merged figures.
fn registry_of(snap: &Snapshot) -> Registry {
    let m = merge(snap);
    let mut r = Registry::default();
    for (name, bytes) in [("ringmq_messages_in", false), ("ringmq_bytes_in", true)] {
        let fam = Family::<Labels, Counter>::default();
        for (t, f) in &m.topics_in {
            let v = if bytes { f.bytes } else { f.messages };
            fam.get_or_create(&vec![("topic", t.to_string())]).inc_by(v);
        }
        r.register(name, "By topic.", fam);
    }
    for (name, bytes) in [("ringmq_messages_out", false), ("ringmq_bytes_out", true)] {
        let fam = Family::<Labels, Counter>::default();
        for ((t, g), f) in &m.topics_out {
            let v = if bytes { f.bytes } else { f.messages };
            let labels = vec![("topic", t.to_string()), ("consumer_group", g.to_string())];
            fam.get_or_create(&labels).inc_by(v);
        }
        r.register(name, "By topic and group.", fam);
    }
    let lag_families: [(&str, LagValue); 3] = [
        ("ringmq_consumer_lag_messages", |l| l.messages as f64),
        ("ringmq_consumer_lag_latency_seconds", |l| {
            l.oldest_ms as f64 / 1e3
        }),
        ("ringmq_consumer_inflight_messages", |l| l.inflight as f64),
    ];
    for (name, value) in lag_families {
        let fam = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for ((g, t), l) in &m.lag {
            let labels = vec![("topic", t.to_string()), ("consumer_group", g.to_string())];
            fam.get_or_create(&labels).set(value(l));
        }
        r.register(name, "By topic and group.", fam);
    }
    for (name, dead) in [
        ("ringmq_send_to_dlq_messages", true),
        ("ringmq_retry_messages", false),
    ] {
        let fam = Family::<Labels, Counter>::default();
        for (g, e) in &m.groups {
            let v = if dead { e.dead_lettered } else { e.retried };
            fam.get_or_create(&vec![("consumer_group", g.to_string())])
                .inc_by(v);
        }
        r.register(name, "By group.", fam);
    }
    let fam = Family::<Labels, Gauge>::default();
    for (g, n) in &m.members {
        fam.get_or_create(&vec![("consumer_group", g.to_string())])
            .set(*n as i64);
    }
    r.register("ringmq_consumer_group_members", "Live members.", fam);
    // The request histograms (a few dozen series) are left out: the crate's `Histogram`
    // records observations and cannot be set from merged bucket counts.
    r
}
