//! The broker families under RocketMQ 5's own names, units and labels, so dashboards and
//! alert rules written for a RocketMQ 5 broker's Prometheus exporter read a ringmq broker
//! unchanged. Built from the same views as the `ringmq_…` families ([`super::render`]).
//!
//! What RocketMQ 5 does, in ringmq's words: every sample carries the node's labels
//! `cluster` (brokerClusterName), `node_type` (`broker`) and `node_id` (brokerName; the
//! broker id is not part of it). Latencies are in milliseconds, sizes in bytes, booleans
//! `true`/`false`, request and response codes the lower-case names of RocketMQ's constants
//! (the number when it has none). `aggregation="delta"` only appears in RocketMQ with its
//! delta mode, which ringmq does not have, so it is never written.
//!
//! Invariant: a family is written only from a value ringmq measures. A RocketMQ family or
//! label ringmq has no figure for is absent (docs/operations.md "Metrics" lists which), never
//! filled with a made-up value.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::family;
use super::hist::Hist;
use super::render::{hist, merged, sample, Views};
use super::shard::{Lag, RequestKey, ShardView};
use crate::limits::is_system_topic;

/// RocketMQ's prefix of system consumer groups (compared ignoring case).
const SYSTEM_GROUP_PREFIX: &str = "cid_rmq_sys_";
/// Retry and dead-letter topics of consumer groups.
const RETRY_TOPIC_PREFIX: &str = "%RETRY%";
const DLQ_TOPIC_PREFIX: &str = "%DLQ%";

/// Appends the RocketMQ-named families to `out` (brokers only: nothing without shards).
pub fn render(out: &mut String, v: &Views) {
    let (Some(node), false) = (&v.node, v.shards.is_empty()) else {
        return;
    };
    let common = [
        ("cluster", node.cluster.as_str()),
        ("node_type", "broker"),
        ("node_id", node.broker_name.as_str()),
    ];
    let l = Labels { common: &common };
    flows(out, &l, &v.shards);
    histograms(out, &l, &v.shards);
    consumers(out, &l, &v.shards);
    broker_gauges(out, &l, v);
    storage(out, &l, v);
}

/// Writes samples with the node's labels in front of their own.
struct Labels<'a> {
    common: &'a [(&'a str, &'a str); 3],
}

impl Labels<'_> {
    fn sample(
        &self,
        out: &mut String,
        name: &str,
        own: &[(&str, &str)],
        value: impl std::fmt::Display,
    ) {
        sample(out, name, &self.with(own), value);
    }

    fn hist(&self, out: &mut String, name: &str, own: &[(&str, &str)], h: &Hist, per_base: f64) {
        hist(out, name, &self.with(own), h, per_base);
    }

    fn with<'b>(&'b self, own: &[(&'b str, &'b str)]) -> Vec<(&'b str, &'b str)> {
        let mut all: Vec<(&str, &str)> = self.common.to_vec();
        all.extend_from_slice(own);
        all
    }
}

fn bool_label(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

fn is_system_group(group: &str) -> bool {
    group
        .get(..SYSTEM_GROUP_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(SYSTEM_GROUP_PREFIX))
}

fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_TOPIC_PREFIX) || topic.starts_with(DLQ_TOPIC_PREFIX)
}

fn flows(out: &mut String, l: &Labels, views: &[Arc<ShardView>]) {
    let mut topics_in: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut topics_out: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for s in views {
        for (t, f) in &s.topics_in {
            let e = topics_in.entry(t).or_default();
            e.0 += f.messages;
            e.1 += f.bytes;
        }
        for (g, t, f) in &s.out {
            let e = topics_out.entry((t, g)).or_default();
            e.0 += f.messages;
            e.1 += f.bytes;
        }
    }
    for (name, help, bytes) in [
        (
            "rocketmq_messages_in_total",
            "Total number of incoming messages",
            false,
        ),
        (
            "rocketmq_throughput_in_total",
            "Total traffic of incoming messages",
            true,
        ),
    ] {
        family(out, name, "counter", help);
        for (t, (m, b)) in &topics_in {
            let own = [("topic", *t), ("is_system", bool_label(is_system_topic(t)))];
            l.sample(out, name, &own, if bytes { b } else { m });
        }
    }
    for (name, help, bytes) in [
        (
            "rocketmq_messages_out_total",
            "Total number of outgoing messages",
            false,
        ),
        (
            "rocketmq_throughput_out_total",
            "Total traffic of outgoing messages",
            true,
        ),
    ] {
        family(out, name, "counter", help);
        for ((t, g), (m, b)) in &topics_out {
            let system = is_system_topic(t) || is_system_group(g);
            let own = [
                ("topic", *t),
                ("consumer_group", *g),
                ("is_system", bool_label(system)),
            ];
            l.sample(out, name, &own, if bytes { b } else { m });
        }
    }
}

fn histograms(out: &mut String, l: &Labels, views: &[Arc<ShardView>]) {
    if let Some(h) = merged(views, |v| &v.message_size) {
        let name = "rocketmq_message_size";
        family(out, name, "histogram", "Incoming messages size");
        l.hist(out, name, &[], &h, 1.0);
    }
    let mut requests: BTreeMap<RequestKey, Hist> = BTreeMap::new();
    for s in views {
        for (k, h) in &s.requests {
            match requests.get_mut(k) {
                Some(a) => a.merge(h),
                None => {
                    requests.insert(*k, h.clone());
                }
            }
        }
    }
    let name = "rocketmq_rpc_latency";
    family(out, name, "histogram", "Rpc latency");
    for (k, h) in &requests {
        let (code, status) = (
            k.code_label().to_lowercase(),
            k.status_label().to_lowercase(),
        );
        let own = [
            ("protocol_type", k.protocol.label()),
            ("request_code", code.as_str()),
            ("response_code", status.as_str()),
        ];
        // Recorded in µs; RocketMQ's unit is ms.
        l.hist(out, name, &own, h, 1e3);
    }
}

fn consumers(out: &mut String, l: &Labels, views: &[Arc<ShardView>]) {
    let mut lag: BTreeMap<(&str, &str), Lag> = BTreeMap::new();
    for s in views {
        for x in &s.lag {
            let e = lag.entry((&x.group, &x.topic)).or_default();
            e.messages += x.messages;
            e.inflight += x.inflight;
            e.oldest_ms = e.oldest_ms.max(x.oldest_ms);
        }
    }
    for (name, help, value) in [
        (
            "rocketmq_consumer_lag_messages",
            "Consumer lag messages",
            (|x: &Lag| x.messages) as fn(&Lag) -> u64,
        ),
        (
            "rocketmq_consumer_lag_latency",
            "Consumer lag time",
            |x: &Lag| x.oldest_ms,
        ),
        (
            "rocketmq_consumer_inflight_messages",
            "Consumer inflight messages",
            |x: &Lag| x.inflight,
        ),
        (
            "rocketmq_consumer_ready_messages",
            "Consumer ready messages",
            |x: &Lag| x.messages.saturating_sub(x.inflight),
        ),
    ] {
        family(out, name, "gauge", help);
        for ((g, t), x) in &lag {
            let system = is_system_topic(t) || is_system_group(g);
            let own = [
                ("consumer_group", *g),
                ("topic", *t),
                ("is_retry", bool_label(is_retry_topic(t))),
                ("is_system", bool_label(system)),
            ];
            l.sample(out, name, &own, value(x));
        }
    }
    let mut dlq: BTreeMap<&str, u64> = BTreeMap::new();
    for s in views {
        for (g, e) in &s.groups {
            *dlq.entry(g).or_default() += e.dead_lettered;
        }
    }
    let name = "rocketmq_send_to_dlq_messages_total";
    family(out, name, "counter", "Consumer send to DLQ messages");
    for (g, n) in &dlq {
        let own = [
            ("consumer_group", *g),
            ("is_system", bool_label(is_system_group(g))),
        ];
        l.sample(out, name, &own, n);
    }
}

fn broker_gauges(out: &mut String, l: &Labels, v: &Views) {
    if let Some(b) = v.shards.iter().find_map(|s| s.broker.as_ref()) {
        for (name, help, value) in [
            ("rocketmq_topic_number", "Active topic number", b.topics),
            (
                "rocketmq_consumer_group_number",
                "Active subscription group number",
                b.groups,
            ),
            (
                "rocketmq_producer_connections",
                "Producer connections",
                b.producers,
            ),
            (
                "rocketmq_consumer_connections",
                "Consumer connections",
                b.consumers,
            ),
        ] {
            family(out, name, "gauge", help);
            l.sample(out, name, &[], value);
        }
    }
    if let Some(p) = v.permission {
        let name = "rocketmq_broker_permission";
        family(out, name, "gauge", "Broker permission");
        l.sample(out, name, &[], p);
    }
    let commits: u64 = v.shards.iter().map(|s| s.txn.commits).sum();
    let rollbacks: u64 = v.shards.iter().map(|s| s.txn.rollbacks).sum();
    for (name, help, value) in [
        (
            "rocketmq_commit_messages_total",
            "Total number of commit messages",
            commits,
        ),
        (
            "rocketmq_rollback_messages_total",
            "Total number of rollback messages",
            rollbacks,
        ),
    ] {
        family(out, name, "counter", help);
        l.sample(out, name, &[], value);
    }
    let half: u64 = v
        .txn
        .iter()
        .flat_map(|t| t.pending.values())
        .map(|(n, _)| *n)
        .sum();
    let name = "rocketmq_half_messages";
    family(out, name, "gauge", "Half messages of all topics");
    l.sample(out, name, &[], half);
}

fn storage(out: &mut String, l: &Labels, v: &Views) {
    let own = [("storage_type", "local"), ("storage_medium", "disk")];
    if let Some(used) = v.disk_used_bytes {
        let name = "rocketmq_storage_size";
        family(out, name, "gauge", "Broker storage size");
        l.sample(out, name, &own, used);
    }
    let flush: u64 = v.shards.iter().map(|s| s.flush_behind_bytes).sum();
    let dispatch: u64 = v.shards.iter().map(|s| s.dispatch_behind_bytes).sum();
    let reserve_ms = v.shards.iter().map(|s| s.reserve_ms).max().unwrap_or(0);
    for (name, help, value) in [
        (
            "rocketmq_storage_flush_behind_bytes",
            "Broker flush behind bytes",
            flush,
        ),
        (
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            dispatch,
        ),
    ] {
        family(out, name, "gauge", help);
        l.sample(out, name, &own, value);
    }
    // RocketMQ writes no sample while the store holds no message.
    if reserve_ms > 0 {
        let name = "rocketmq_storage_message_reserve_time";
        family(out, name, "gauge", "Broker message reserve time");
        l.sample(out, name, &own, reserve_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_and_retry_labels_follow_rocketmq() {
        assert!(is_system_group("CID_RMQ_SYS_TRANS"));
        assert!(is_system_group("cid_rmq_sys_x"));
        assert!(!is_system_group("orders"));
        assert!(!is_system_group("cid"));
        assert!(is_retry_topic("%RETRY%g"));
        assert!(is_retry_topic("%DLQ%g"));
        assert!(!is_retry_topic("orders"));
    }
}
