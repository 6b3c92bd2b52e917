//! The families built from the shards' published views ([`super::shard::ShardView`]) and the
//! schedule and transaction counts: merged across shards here, on the metrics thread.
//!
//! The text (format 0.0.4) is written here, not by the `prometheus-client` crate, for what
//! measuring both showed (`cargo bench -p ringmq-node --bench exposition`, 2 shards, 10,000
//! topics and 1,000 groups, 55,225 samples, 4.3 MiB; docs/operations.md "Metrics" has the
//! run): fed the same merged figures through a `Collector`, the crate writes them in
//! 10.2 ms against 15.3 ms here, and filled into a `Registry` of `Family`s per scrape it
//! takes 42 ms. The 5 ms it would save is once per scrape, on this thread, off the shards.
//! Merging the views (3.0 ms) stays either way, and so does a call per family. Moving would
//! change what scrapers read: the crate writes OpenMetrics only (counter families declared
//! without `_total`, a closing `# EOF`, another content type).

use std::collections::BTreeMap;
use std::fmt::Display;
use std::fmt::Write as _;

use super::hist::Hist;
use super::shard::{Flow, GroupEvents, Lag, PullBodies, RequestKey, Responses, ShardView};
use super::{escape, family};
use crate::broker::TxnCounts;
use crate::store::schedule::ScheduleCounts;

/// A family computed from each shard's view: (name, help, value).
type PerShard<T> = (&'static str, &'static str, fn(&ShardView) -> T);

/// What the shards published, read at once.
#[derive(Debug, Clone, Default)]
pub struct Views {
    pub shards: Vec<std::sync::Arc<ShardView>>,
    pub schedule: Vec<ScheduleCounts>,
    pub txn: Vec<TxnCounts>,
    /// Free bytes of the store's file system (statvfs `f_bavail`).
    pub disk_free_bytes: Option<u64>,
    /// Used bytes of the store's file system (statvfs `f_blocks - f_bfree`).
    pub disk_used_bytes: Option<u64>,
    /// The broker's cluster and name, for the RocketMQ-named families.
    pub node: Option<super::NodeLabels>,
    /// brokerPermission.
    pub permission: Option<u8>,
}

pub(super) fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A histogram whose values were recorded in units of `1/per_base` of the base unit (µs for
/// seconds: 1e6; ms for seconds: 1e3; bytes: 1).
pub(super) fn hist(out: &mut String, name: &str, labels: &[(&str, &str)], h: &Hist, per_base: f64) {
    let bucket = format!("{name}_bucket");
    for (bound, n) in h.cumulative() {
        let le = (bound as f64 / per_base).to_string();
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        with_le.push(("le", &le));
        sample(out, &bucket, &with_le, n);
    }
    let mut with_le: Vec<(&str, &str)> = labels.to_vec();
    with_le.push(("le", "+Inf"));
    sample(out, &bucket, &with_le, h.count());
    sample(
        out,
        &format!("{name}_sum"),
        labels,
        h.sum() as f64 / per_base,
    );
    sample(out, &format!("{name}_count"), labels, h.count());
}

pub(super) fn merged(
    views: &[std::sync::Arc<ShardView>],
    pick: fn(&ShardView) -> &Option<Hist>,
) -> Option<Hist> {
    let mut acc: Option<Hist> = None;
    for h in views.iter().filter_map(|v| pick(v).as_ref()) {
        match &mut acc {
            Some(a) => a.merge(h),
            None => acc = Some(h.clone()),
        }
    }
    acc
}

/// Appends every view-based family to `out`.
pub fn render(out: &mut String, v: &Views) {
    if !v.shards.is_empty() {
        flows(out, &v.shards);
        latencies(out, &v.shards);
        consumers(out, &v.shards);
        storage(out, v);
        broker_gauges(out, &v.shards);
    }
    schedule(out, v);
    txn(out, v);
}

fn flows(out: &mut String, views: &[std::sync::Arc<ShardView>]) {
    let mut topics_in: BTreeMap<&str, Flow> = BTreeMap::new();
    let mut topics_out: BTreeMap<(&str, &str), Flow> = BTreeMap::new();
    for s in views {
        for (t, f) in &s.topics_in {
            let e = topics_in.entry(t).or_default();
            e.messages += f.messages;
            e.bytes += f.bytes;
        }
        for (g, t, f) in &s.out {
            let e = topics_out.entry((t, g)).or_default();
            e.messages += f.messages;
            e.bytes += f.bytes;
        }
    }
    for (name, help, bytes) in [
        (
            "ringmq_messages_in_total",
            "Messages stored, by the topic they were sent to.",
            false,
        ),
        (
            "ringmq_bytes_in_total",
            "Record bytes stored, by the topic they were sent to.",
            true,
        ),
    ] {
        family(out, name, "counter", help);
        for (t, f) in &topics_in {
            sample(
                out,
                name,
                &[("topic", t)],
                if bytes { f.bytes } else { f.messages },
            );
        }
    }
    for (name, help, bytes) in [
        (
            "ringmq_messages_out_total",
            "Messages returned to consumers by pulls, by topic and consumer group.",
            false,
        ),
        (
            "ringmq_bytes_out_total",
            "Record bytes returned to consumers by pulls, by topic and consumer group.",
            true,
        ),
    ] {
        family(out, name, "counter", help);
        for ((t, g), f) in &topics_out {
            let value = if bytes { f.bytes } else { f.messages };
            sample(out, name, &[("topic", t), ("consumer_group", g)], value);
        }
    }
    for (name, help, bytes) in [
        (
            "ringmq_pull_responses_total",
            "Pull responses that carried records, by path: file (spliced from the log file, or read from it with io_uring on TLS), copy (copied from the log's mapping on the shard's thread), mapped (sent from the log's mapping, the kernel copying into the socket) or direct (log bytes released from memory, read without the page cache and copied).",
            false,
        ),
        (
            "ringmq_pull_response_bytes_total",
            "Record bytes of pull responses, by path (file, copy, mapped or direct, as ringmq_pull_responses_total).",
            true,
        ),
    ] {
        family(out, name, "counter", help);
        for (path, pick) in [
            ("file", (|b: &PullBodies| b.file) as fn(&PullBodies) -> Responses),
            ("copy", |b: &PullBodies| b.copied),
            ("mapped", |b: &PullBodies| b.mapped),
            ("direct", |b: &PullBodies| b.direct),
        ] {
            let value: u64 = views
                .iter()
                .map(|s| {
                    let r = pick(&s.pull_bodies);
                    if bytes {
                        r.bytes
                    } else {
                        r.count
                    }
                })
                .sum();
            sample(out, name, &[("path", path)], value);
        }
    }
    let name = "ringmq_metrics_overflow_total";
    family(
        out,
        name,
        "counter",
        "Recordings added to the _overflow topic or group series because metricsSeriesMax was reached.",
    );
    sample(
        out,
        name,
        &[],
        views.iter().map(|s| s.overflowed).sum::<u64>(),
    );
}

fn latencies(out: &mut String, views: &[std::sync::Arc<ShardView>]) {
    if let Some(h) = merged(views, |v| &v.message_size) {
        let name = "ringmq_message_size_bytes";
        family(out, name, "histogram", "Body sizes of the messages stored.");
        hist(out, name, &[], &h, 1.0);
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
    let name = "ringmq_rpc_latency_seconds";
    family(
        out,
        name,
        "histogram",
        "Time from a request's frame being read to its reply being queued, by request code, response code and protocol.",
    );
    for (k, h) in &requests {
        let (code, status) = (k.code_label(), k.status_label());
        let labels = [
            ("request_code", code.as_str()),
            ("response_code", status.as_str()),
            ("protocol", k.protocol.label()),
        ];
        hist(out, name, &labels, h, 1e6);
    }
    let mut stages: BTreeMap<&str, Hist> = BTreeMap::new();
    for s in views {
        for (st, h) in &s.stages {
            match stages.get_mut(st.label()) {
                Some(a) => a.merge(h),
                None => {
                    stages.insert(st.label(), h.clone());
                }
            }
        }
    }
    let name = "ringmq_request_stage_latency_seconds";
    family(
        out,
        name,
        "histogram",
        "Where requests wait besides their handler: read_to_handler (from the read that completed the frame to its handler; native protocol) and queued_to_written (from the reply being queued to its write completing).",
    );
    for (stage, h) in &stages {
        hist(out, name, &[("stage", stage)], h, 1e6);
    }
    for (name, help, pick) in [
        (
            "ringmq_store_append_latency_seconds",
            "Time to place one send's records in the CommitLog and its ConsumeQueues (page cache).",
            (|v: &ShardView| &v.append) as fn(&ShardView) -> &Option<Hist>,
        ),
        (
            "ringmq_store_fdatasync_latency_seconds",
            "Time of one CommitLog segment fdatasync (group commit or ASYNC_FLUSH checkpoint).",
            |v: &ShardView| &v.fdatasync,
        ),
    ] {
        if let Some(h) = merged(views, pick) {
            family(out, name, "histogram", help);
            hist(out, name, &[], &h, 1e6);
        }
    }
}

fn consumers(out: &mut String, views: &[std::sync::Arc<ShardView>]) {
    let mut lag: BTreeMap<(&str, &str), Lag> = BTreeMap::new();
    for s in views {
        for l in &s.lag {
            let e = lag.entry((&l.group, &l.topic)).or_default();
            e.messages += l.messages;
            e.inflight += l.inflight;
            e.oldest_ms = e.oldest_ms.max(l.oldest_ms);
        }
    }
    for (name, help, value) in [
        (
            "ringmq_consumer_lag_messages",
            "Messages stored but not yet committed by the consumer group.",
            (|l: &Lag| l.messages as f64) as fn(&Lag) -> f64,
        ),
        (
            "ringmq_consumer_lag_latency_seconds",
            "Age of the oldest message the consumer group has not committed (0 with no lag).",
            |l: &Lag| l.oldest_ms as f64 / 1e3,
        ),
        (
            "ringmq_consumer_inflight_messages",
            "Messages pulled by the consumer group but not yet committed.",
            |l: &Lag| l.inflight as f64,
        ),
    ] {
        family(out, name, "gauge", help);
        for ((g, t), l) in &lag {
            sample(out, name, &[("topic", t), ("consumer_group", g)], value(l));
        }
    }
    let mut groups: BTreeMap<&str, GroupEvents> = BTreeMap::new();
    for s in views {
        for (g, e) in &s.groups {
            let a = groups.entry(g).or_default();
            a.retried += e.retried;
            a.dead_lettered += e.dead_lettered;
        }
    }
    for (name, help, dead) in [
        (
            "ringmq_send_to_dlq_messages_total",
            "Messages moved to the consumer group's dead-letter topic (%DLQ%).",
            true,
        ),
        (
            "ringmq_retry_messages_total",
            "Messages the consumer group handed back for a later retry (%RETRY%).",
            false,
        ),
    ] {
        family(out, name, "counter", help);
        for (g, e) in &groups {
            let value = if dead { e.dead_lettered } else { e.retried };
            sample(out, name, &[("consumer_group", g)], value);
        }
    }
}

fn storage(out: &mut String, v: &Views) {
    let per_shard: [PerShard<f64>; 4] = [
        (
            "ringmq_storage_flush_behind_bytes",
            "CommitLog bytes appended but not yet made durable by fdatasync.",
            |s| s.flush_behind_bytes as f64,
        ),
        (
            "ringmq_storage_dispatch_behind_bytes",
            "CommitLog bytes the key index has not read yet (ConsumeQueues are written with the log).",
            |s| s.dispatch_behind_bytes as f64,
        ),
        (
            "ringmq_storage_message_reserve_time_seconds",
            "Age of the oldest message the shard keeps.",
            |s| s.reserve_ms as f64 / 1e3,
        ),
        (
            "ringmq_metrics_view_build_seconds",
            "Time the shard took to build its last metrics view (lag included).",
            |s| s.build_us as f64 / 1e6,
        ),
    ];
    for (name, help, value) in per_shard {
        family(out, name, "gauge", help);
        for (i, s) in v.shards.iter().enumerate() {
            sample(out, name, &[("shard", &i.to_string())], value(s));
        }
    }
    if let Some(free) = v.disk_free_bytes {
        let name = "ringmq_storage_disk_free_bytes";
        family(
            out,
            name,
            "gauge",
            "Bytes free for the broker on the file system of storePathRootDir.",
        );
        sample(out, name, &[], free);
    }
    for (name, help, seconds) in [
        (
            "ringmq_replication_slave_lag_bytes",
            "CommitLog bytes a connected slave has not acknowledged, per shard and slave connection.",
            false,
        ),
        (
            "ringmq_replication_slave_lag_seconds",
            "Time since a connected slave last had everything (0 when it has), per shard and slave connection.",
            true,
        ),
    ] {
        family(out, name, "gauge", help);
        for (i, s) in v.shards.iter().enumerate() {
            for sl in &s.slaves {
                let (shard, slave) = (i.to_string(), sl.slave.to_string());
                let labels = [("shard", shard.as_str()), ("slave", slave.as_str())];
                if seconds {
                    sample(out, name, &labels, sl.ms as f64 / 1e3);
                } else {
                    sample(out, name, &labels, sl.bytes);
                }
            }
        }
    }
}

fn broker_gauges(out: &mut String, views: &[std::sync::Arc<ShardView>]) {
    let Some(b) = views.iter().find_map(|v| v.broker.as_ref()) else {
        return;
    };
    for (name, help, value) in [
        ("ringmq_topics", "Topics this broker has.", b.topics),
        (
            "ringmq_consumer_groups",
            "Consumer groups with a live member on this broker.",
            b.groups,
        ),
        (
            "ringmq_producer_connections",
            "Live producer clients (distinct client ids that sent a heartbeat).",
            b.producers,
        ),
        (
            "ringmq_consumer_connections",
            "Live consumer clients (distinct client ids that sent a heartbeat).",
            b.consumers,
        ),
    ] {
        family(out, name, "gauge", help);
        sample(out, name, &[], value);
    }
    let name = "ringmq_consumer_group_members";
    family(out, name, "gauge", "Live members of each consumer group.");
    for (g, n) in &b.members {
        sample(out, name, &[("consumer_group", g)], n);
    }
}

fn schedule(out: &mut String, v: &Views) {
    if v.schedule.is_empty() {
        return;
    }
    let mut per_level: BTreeMap<usize, u64> = BTreeMap::new();
    for c in &v.schedule {
        for (level, n) in c.per_level.iter().enumerate() {
            *per_level.entry(level).or_default() += n;
        }
    }
    let name = "ringmq_schedule_pending_messages";
    family(
        out,
        name,
        "gauge",
        "Scheduled messages not yet delivered, by delay level (0: a delivery time).",
    );
    for (level, n) in &per_level {
        sample(out, name, &[("delay_level", &level.to_string())], n);
    }
    let name = "ringmq_schedule_delivered_total";
    family(
        out,
        name,
        "counter",
        "Scheduled messages delivered to their real topic since the broker started.",
    );
    sample(
        out,
        name,
        &[],
        v.schedule
            .iter()
            .map(|c| c.delivered_since_open)
            .sum::<u64>(),
    );
    if let Some(h) = merged(&v.shards, |s| &s.schedule_lateness) {
        let name = "ringmq_schedule_delivery_lateness_seconds";
        family(
            out,
            name,
            "histogram",
            "Time from a scheduled message's due time to its delivery.",
        );
        hist(out, name, &[], &h, 1e3);
    }
}

fn txn(out: &mut String, v: &Views) {
    if v.txn.is_empty() {
        return;
    }
    let mut pending: BTreeMap<&str, u64> = BTreeMap::new();
    for c in &v.txn {
        for (g, (n, _)) in &c.pending {
            *pending.entry(g).or_default() += n;
        }
    }
    let name = "ringmq_txn_half_messages";
    family(
        out,
        name,
        "gauge",
        "Half (prepared) messages not yet committed or rolled back, by producer group.",
    );
    for (g, n) in &pending {
        sample(out, name, &[("producer_group", g)], n);
    }
    let name = "ringmq_txn_check_backs_total";
    family(
        out,
        name,
        "counter",
        "CHECK_TRANSACTION_STATE requests sent to producers since the broker started.",
    );
    sample(
        out,
        name,
        &[],
        v.txn.iter().map(|c| c.checks_sent).sum::<u64>(),
    );
    let decisions: [PerShard<u64>; 3] = [
        (
            "ringmq_txn_commits_total",
            "Half messages committed.",
            |s| s.txn.commits,
        ),
        (
            "ringmq_txn_rollbacks_total",
            "Half messages rolled back.",
            |s| s.txn.rollbacks,
        ),
        (
            "ringmq_txn_discards_total",
            "Half messages given up after transactionCheckMax check-backs.",
            |s| s.txn.discards,
        ),
    ];
    for (name, help, value) in decisions {
        family(out, name, "counter", help);
        sample(
            out,
            name,
            &[],
            v.shards.iter().map(|s| value(s)).sum::<u64>(),
        );
    }
}
