//! Prometheus text exposition (format 0.0.4) of what the node counts: the broker's per-shard
//! counters (`ShardCounters`, atomics the shards keep anyway), the views each shard publishes
//! once a second ([`shard`]: per topic and group flows, latency histograms, consumer lag,
//! storage and replication gauges), the schedule and transaction counts, ACL refusals and
//! the name server's route table. Rendering only loads atomics and clones `Arc`s, on the
//! metrics thread ([`http`]); it never sends a shard a message, so a scrape cannot stall the
//! data path.
//!
//! Names follow Prometheus conventions: `ringmq_` prefix, the unit last, `_total` on counters.
//! `docs/operations.md` "Metrics" lists each one.

pub mod hist;
pub mod http;
mod render;
pub mod rocketmq;
pub mod shard;

pub use render::Views;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::acl::Acl;
use crate::broker::Broker;

/// The broker's own labels on the RocketMQ-named families ([`rocketmq`]).
#[derive(Debug, Clone, Default)]
pub struct NodeLabels {
    /// brokerClusterName.
    pub cluster: String,
    /// brokerName.
    pub broker_name: String,
}

/// What one node (or one standalone process) exports.
#[derive(Clone, Default)]
pub struct Sources {
    pub broker: Option<Arc<Broker>>,
    /// The name server's ACL, when it runs in this process with `aclEnable=true`.
    pub namesrv_acl: Option<Acl>,
    /// The name server's route table counts, when it runs in this process.
    pub namesrv: Option<Arc<NamesrvCounts>>,
}

/// Route table counts the name server thread publishes when they change (registration,
/// unregistration, topic deletion, expiry scan); the metrics thread reads them.
#[derive(Debug, Default)]
pub struct NamesrvCounts {
    /// Broker replicas registered now.
    pub brokers: AtomicU64,
    /// Topics with at least one broker's queues.
    pub topics: AtomicU64,
    /// Brokers dropped by the expiry scan since start.
    pub expired_total: AtomicU64,
    /// GET_ROUTEINFO_BY_TOPIC answered with a route / with TOPIC_NOT_EXIST.
    pub route_requests: AtomicU64,
    pub route_misses: AtomicU64,
}

/// [`NamesrvCounts`] at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamesrvSample {
    pub brokers: u64,
    pub topics: u64,
    pub expired_total: u64,
    pub route_requests: u64,
    pub route_misses: u64,
}

/// One shard's counters at scrape time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardSample {
    pub msgs_in: u64,
    pub msgs_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub connections: u32,
    pub parked_pulls: u32,
    pub store_bytes: u64,
    pub commitlog_max_offset: u64,
    pub ha_lag_bytes: u64,
    pub ha_slaves: u32,
}

/// Everything a scrape shows, read at once.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub shards: Vec<ShardSample>,
    /// What the broker's shards last published (empty without a broker).
    pub views: Views,
    /// (node role, [(reason, count)]) for each ACL in the process.
    pub acl_refusals: Vec<(&'static str, Vec<(&'static str, u64)>)>,
    pub namesrv: Option<NamesrvSample>,
}

impl Snapshot {
    /// Reads the sources' atomics (Relaxed: each value is exact, the set is not a
    /// point-in-time cut across shards).
    pub fn take(sources: &Sources) -> Snapshot {
        let mut snap = Snapshot::default();
        if let Some(b) = &sources.broker {
            snap.shards = b.counters.iter().map(sample).collect();
            let lock = |m: &std::sync::Mutex<Arc<shard::ShardView>>| {
                Arc::clone(&m.lock().unwrap_or_else(|p| p.into_inner()))
            };
            snap.views.shards = b.metric_views.iter().map(lock).collect();
            snap.views.schedule = b
                .schedule
                .iter()
                .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone())
                .collect();
            snap.views.txn = b
                .txn
                .iter()
                .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone())
                .collect();
            let st = nix::sys::statvfs::statvfs(&b.config.store_path_root_dir).ok();
            snap.views.disk_free_bytes = st
                .as_ref()
                .map(|st| st.blocks_available().saturating_mul(st.fragment_size()));
            snap.views.disk_used_bytes = st.as_ref().map(|st| {
                st.blocks()
                    .saturating_sub(st.blocks_free())
                    .saturating_mul(st.fragment_size())
            });
            snap.views.node = Some(NodeLabels {
                cluster: b.config.broker_cluster_name.clone(),
                broker_name: b.config.broker_name.clone(),
            });
            snap.views.permission = Some(b.config.broker_permission);
            if let Some(acl) = &b.acl {
                snap.acl_refusals.push(("broker", acl.refusal_counts()));
            }
        }
        if let Some(n) = &sources.namesrv {
            snap.namesrv = Some(NamesrvSample {
                brokers: n.brokers.load(Ordering::Relaxed),
                topics: n.topics.load(Ordering::Relaxed),
                expired_total: n.expired_total.load(Ordering::Relaxed),
                route_requests: n.route_requests.load(Ordering::Relaxed),
                route_misses: n.route_misses.load(Ordering::Relaxed),
            });
        }
        if let Some(acl) = &sources.namesrv_acl {
            snap.acl_refusals.push(("namesrv", acl.refusal_counts()));
        }
        snap
    }
}

fn sample(c: &crate::broker::ShardCounters) -> ShardSample {
    let r = Ordering::Relaxed;
    ShardSample {
        msgs_in: c.msgs_in.load(r),
        msgs_out: c.msgs_out.load(r),
        bytes_in: c.bytes_in.load(r),
        bytes_out: c.bytes_out.load(r),
        connections: c.connections.load(r),
        parked_pulls: c.parked_pulls.load(r),
        store_bytes: c.store_bytes.load(r),
        // Bytes into this shard's own log (its offsets start at `shard << 48`).
        commitlog_max_offset: c.max_offset.load(r)
            & ((1u64 << crate::store::commitlog::SHARD_OFFSET_BITS) - 1),
        ha_lag_bytes: c.ha_lag_bytes.load(r),
        ha_slaves: c.ha_slaves.load(r),
    }
}

/// The per-shard families: (name, type, help, value).
type ShardFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ShardSample) -> u64,
);

const SHARD_FAMILIES: &[ShardFamily] = &[
    (
        "ringmq_shard_messages_in_total",
        "counter",
        "Messages stored by this shard (sends accepted).",
        |s| s.msgs_in,
    ),
    (
        "ringmq_shard_messages_out_total",
        "counter",
        "Messages returned to consumers by this shard's pulls.",
        |s| s.msgs_out,
    ),
    (
        "ringmq_shard_bytes_in_total",
        "counter",
        "Message bytes stored by this shard.",
        |s| s.bytes_in,
    ),
    (
        "ringmq_shard_bytes_out_total",
        "counter",
        "Message bytes returned to consumers by this shard.",
        |s| s.bytes_out,
    ),
    (
        "ringmq_connections",
        "gauge",
        "Client connections served by this shard.",
        |s| s.connections.into(),
    ),
    (
        "ringmq_parked_pulls",
        "gauge",
        "Long-polling pulls and pops waiting for messages on this shard.",
        |s| s.parked_pulls.into(),
    ),
    (
        "ringmq_storage_size_bytes",
        "gauge",
        "Bytes of this shard's store on disk.",
        |s| s.store_bytes,
    ),
    (
        "ringmq_commitlog_max_offset_bytes",
        "gauge",
        "Bytes written to this shard's CommitLog since it began (its end, as an offset within the shard).",
        |s| s.commitlog_max_offset,
    ),
    (
        "ringmq_replication_lag_bytes",
        "gauge",
        "Replication lag of this shard: behind the master (slave) or of the best slave (master).",
        |s| s.ha_lag_bytes,
    ),
    (
        "ringmq_replication_slaves",
        "gauge",
        "Slaves connected to this shard (master role).",
        |s| s.ha_slaves.into(),
    ),
];

/// The text exposition of `snap`.
pub fn render(snap: &Snapshot) -> String {
    let mut out = String::with_capacity(256 + snap.shards.len() * 1024);
    family(
        &mut out,
        "ringmq_build_info",
        "gauge",
        "Version of the running ringmq; always 1.",
    );
    let _ = writeln!(
        out,
        "ringmq_build_info{{version=\"{}\"}} 1",
        escape(crate::VERSION)
    );
    if !snap.shards.is_empty() {
        for (name, kind, help, value) in SHARD_FAMILIES {
            family(&mut out, name, kind, help);
            for (shard, s) in snap.shards.iter().enumerate() {
                let _ = writeln!(out, "{name}{{shard=\"{shard}\"}} {}", value(s));
            }
        }
    }
    render::render(&mut out, &snap.views);
    rocketmq::render(&mut out, &snap.views);
    if let Some(n) = &snap.namesrv {
        for (name, kind, help, value) in [
            (
                "ringmq_namesrv_brokers",
                "gauge",
                "Broker replicas registered with the name server.",
                n.brokers,
            ),
            (
                "ringmq_namesrv_topics",
                "gauge",
                "Topics with at least one registered broker's queues.",
                n.topics,
            ),
            (
                "ringmq_namesrv_broker_expiries_total",
                "counter",
                "Brokers the name server dropped for silence.",
                n.expired_total,
            ),
        ] {
            family(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
        let name = "ringmq_namesrv_route_requests_total";
        family(
            &mut out,
            name,
            "counter",
            "GET_ROUTEINFO_BY_TOPIC requests, by result (found: a route; not_found: TOPIC_NOT_EXIST).",
        );
        let _ = writeln!(out, "{name}{{result=\"found\"}} {}", n.route_requests);
        let _ = writeln!(out, "{name}{{result=\"not_found\"}} {}", n.route_misses);
    }
    if !snap.acl_refusals.is_empty() {
        let name = "ringmq_acl_refusals_total";
        family(
            &mut out,
            name,
            "counter",
            "Requests refused by the ACL, by node role and reason.",
        );
        for (role, counts) in &snap.acl_refusals {
            for (reason, n) in counts {
                let _ = writeln!(
                    out,
                    "{name}{{role=\"{}\",reason=\"{}\"}} {n}",
                    escape(role),
                    escape(reason)
                );
            }
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format wants it: `\`, `"` and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_snapshot_has_only_build_info() {
        let text = render(&Snapshot::default());
        assert!(text.contains("# TYPE ringmq_build_info gauge\n"));
        assert!(text.contains(&format!(
            "ringmq_build_info{{version=\"{}\"}} 1\n",
            crate::VERSION
        )));
        assert!(!text.contains("ringmq_shard_messages_in_total"));
        assert!(!text.contains("ringmq_acl_refusals_total"));
    }

    #[test]
    fn shards_and_refusals() {
        let snap = Snapshot {
            shards: vec![
                ShardSample {
                    msgs_in: 3,
                    bytes_in: 300,
                    connections: 2,
                    ..ShardSample::default()
                },
                ShardSample {
                    msgs_in: 4,
                    ha_slaves: 1,
                    ha_lag_bytes: 17,
                    ..ShardSample::default()
                },
            ],
            acl_refusals: vec![("broker", vec![("signature", 5), ("permission", 0)])],
            namesrv: Some(NamesrvSample {
                brokers: 2,
                topics: 9,
                expired_total: 1,
                ..NamesrvSample::default()
            }),
            ..Snapshot::default()
        };
        let text = render(&snap);
        for line in [
            "# HELP ringmq_shard_messages_in_total Messages stored by this shard (sends accepted).",
            "# TYPE ringmq_shard_messages_in_total counter",
            "ringmq_shard_messages_in_total{shard=\"0\"} 3",
            "ringmq_shard_messages_in_total{shard=\"1\"} 4",
            "ringmq_shard_bytes_in_total{shard=\"0\"} 300",
            "# TYPE ringmq_connections gauge",
            "ringmq_connections{shard=\"0\"} 2",
            "ringmq_replication_slaves{shard=\"1\"} 1",
            "ringmq_replication_lag_bytes{shard=\"1\"} 17",
            "# TYPE ringmq_acl_refusals_total counter",
            "ringmq_acl_refusals_total{role=\"broker\",reason=\"signature\"} 5",
            "ringmq_acl_refusals_total{role=\"broker\",reason=\"permission\"} 0",
            "# TYPE ringmq_namesrv_brokers gauge",
            "ringmq_namesrv_brokers 2",
            "ringmq_namesrv_topics 9",
            "# TYPE ringmq_namesrv_broker_expiries_total counter",
            "ringmq_namesrv_broker_expiries_total 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Each family is declared once, before its samples.
        for (name, ..) in SHARD_FAMILIES {
            assert_eq!(
                text.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{name}"
            );
        }
        // Every sample line is `name{labels} integer`.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = l.rsplit_once(' ').expect("a value");
            assert!(series.starts_with("ringmq_"), "{l}");
            assert!(value.parse::<u64>().is_ok(), "{l}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
