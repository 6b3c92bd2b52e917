//! What one shard records for the metrics endpoint, on its own loop: plain integers in a
//! `RefCell` the shard alone touches (no atomics, no shared cache lines on the data path).
//! Once per timer tick (at most every second) the shard copies what it recorded, plus
//! gauges it computes from its own state (consumer lag, flush and dispatch behind, reserve
//! time, replication per slave), into a [`ShardView`] and swaps it into its slot of
//! [`crate::broker::Broker::metric_views`]; the metrics thread only clones those `Arc`s, so
//! a scrape never waits for a shard and a shard never waits for a scrape.
//!
//! With metrics off (`metricsExporterType=DISABLE`) nothing is recorded and nothing is
//! published: every `record_*` returns at its first branch.
//!
//! Label cardinality: at most [`Recorder::series_max`] topics (and as many (group, topic)
//! pairs, and groups) get their own series per shard; the rest are added to one series
//! labelled [`OVERFLOW`], and each such recording counts in `overflowed`, so totals stay
//! right and the loss of detail shows.

use std::collections::HashMap;

use ringmq_wire::code::{RequestCode, Status};

use super::hist::{Hist, LATENESS_BOUNDS_MS, SIZE_BOUNDS_BYTES};

/// The label value that stands for every topic or group past the cap.
pub const OVERFLOW: &str = "_overflow";

/// Default of `metricsSeriesMax` (a config key: the default lives with it).
pub use crate::config::SERIES_MAX_DEFAULT;

/// Something kept per group, then topic (looked up by `&str` at each level, no allocation).
pub type ByGroupTopic<T> = HashMap<String, HashMap<String, T>>;

/// Messages and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Flow {
    pub messages: u64,
    pub bytes: u64,
}

impl Flow {
    fn add(&mut self, messages: u64, bytes: u64) {
        self.messages += messages;
        self.bytes += bytes;
    }
}

/// What happened to one consumer group's messages on this shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupEvents {
    /// Messages handed back for a later retry (CONSUMER_SEND_MSG_BACK to `%RETRY%`).
    pub retried: u64,
    /// Messages moved to `%DLQ%` (retries exhausted, or sent there directly).
    pub dead_lettered: u64,
}

/// Transaction decisions appended by this shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnEvents {
    pub commits: u64,
    pub rollbacks: u64,
    /// Halves given up after `transactionCheckMax` check-backs.
    pub discards: u64,
}

/// Pull responses that carried records, by how their records went out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PullBodies {
    /// Sent from the log file: spliced to the socket, or read with io_uring on TLS.
    pub file: Responses,
    /// Copied from the log's mapping on the shard's thread.
    pub copied: Responses,
    /// Sent from the log's mapping: the kernel copies them into the socket.
    pub mapped: Responses,
    /// Released log bytes read without the page cache (`O_DIRECT`) and copied from there.
    pub direct: Responses,
}

/// How a pull response's records went out ([`Recorder::pull_body`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPath {
    File,
    Copy,
    Mapped,
    Direct,
}

/// A count of responses and of the record bytes they carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Responses {
    pub count: u64,
    pub bytes: u64,
}

/// Which protocol a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Native,
    Remoting,
}

impl Protocol {
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Native => "native",
            Protocol::Remoting => "remoting",
        }
    }
}

/// Where a request's time goes on the broker, besides its handler (`ringmq_rpc_latency_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// From the read that completed the frame to its handler starting (native protocol).
    Read,
    /// From the reply being queued to its bytes being written to the socket.
    Write,
}

impl Stage {
    pub const ALL: [Stage; 2] = [Stage::Read, Stage::Write];

    pub fn label(self) -> &'static str {
        match self {
            Stage::Read => "read_to_handler",
            Stage::Write => "queued_to_written",
        }
    }
}

/// A request latency series: request code, response status, protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey {
    pub code: u16,
    pub status: u16,
    pub protocol: Protocol,
}

impl RequestKey {
    pub fn code_label(&self) -> String {
        RequestCode::try_from(self.code)
            .map(|c| c.name().to_string())
            .unwrap_or_else(|_| self.code.to_string())
    }

    pub fn status_label(&self) -> String {
        Status::try_from(self.status)
            .map(|s| s.name().to_string())
            .unwrap_or_else(|_| self.status.to_string())
    }
}

/// One shard's recordings (see the module docs).
#[derive(Debug)]
pub struct Recorder {
    on: bool,
    series_max: usize,
    /// Messages and bytes stored, per topic (real topic for scheduled and half messages once
    /// delivered or committed; the system topic while they wait).
    pub topics_in: HashMap<String, Flow>,
    /// Messages and bytes returned by pulls, per group, then topic.
    pub out: ByGroupTopic<Flow>,
    out_pairs: usize,
    /// Next queue offset each (group, topic, queue) pulled up to (in-flight = this minus the
    /// committed offset).
    pub pulled: ByGroupTopic<HashMap<u32, u64>>,
    /// Store time of the message at each (group, topic, queue)'s committed offset, as last
    /// read: (committed offset, store ms). Read again only when the offset moves.
    stamps: ByGroupTopic<HashMap<u32, (u64, i64)>>,
    pub groups: HashMap<String, GroupEvents>,
    pub requests: HashMap<RequestKey, Hist>,
    pub message_size: Hist,
    /// Per [`Stage`], in [`Stage::ALL`] order.
    pub stages: [Hist; 2],
    pub append: Hist,
    pub fdatasync: Hist,
    /// Scheduled messages: delivery time minus due time, ms.
    pub schedule_lateness: Hist,
    pub txn: TxnEvents,
    pub pull_bodies: PullBodies,
    /// Recordings added to the [`OVERFLOW`] series.
    pub overflowed: u64,
}

impl Recorder {
    pub fn new(on: bool, series_max: usize) -> Self {
        Recorder {
            on,
            series_max: series_max.max(1),
            topics_in: HashMap::new(),
            out: HashMap::new(),
            out_pairs: 0,
            pulled: HashMap::new(),
            stamps: HashMap::new(),
            groups: HashMap::new(),
            requests: HashMap::new(),
            message_size: Hist::new(SIZE_BOUNDS_BYTES),
            stages: [Hist::latency(), Hist::latency()],
            append: Hist::latency(),
            fdatasync: Hist::latency(),
            schedule_lateness: Hist::new(LATENESS_BOUNDS_MS),
            txn: TxnEvents::default(),
            pull_bodies: PullBodies::default(),
            overflowed: 0,
        }
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    pub fn series_max(&self) -> usize {
        self.series_max
    }

    /// A batch of `messages` stored in `topic`, `bytes` of records in all; `sizes` are the
    /// bodies' sizes (message size histogram).
    #[inline]
    pub fn stored(&mut self, topic: &str, bytes: u64, sizes: impl Iterator<Item = u64>) {
        if !self.on {
            return;
        }
        let mut n = 0;
        for s in sizes {
            self.message_size.record(s);
            n += 1;
        }
        let full = self.topics_in.len() >= self.series_max;
        let key = series_key(&self.topics_in, topic, full, &mut self.overflowed);
        match self.topics_in.get_mut(key) {
            Some(f) => f.add(n, bytes),
            None => {
                self.topics_in
                    .insert(key.to_string(), Flow { messages: n, bytes });
            }
        }
    }

    /// A pull returned `messages` (`bytes`) of `topic` queue `queue` to `group`, up to
    /// queue offset `next`.
    #[inline]
    pub fn pulled(
        &mut self,
        group: &str,
        topic: &str,
        queue: u32,
        next: u64,
        messages: u64,
        bytes: u64,
    ) {
        if !self.on {
            return;
        }
        let full = self.out_pairs >= self.series_max;
        let known = self.out.get(group).is_some_and(|m| m.contains_key(topic));
        let (g, t) = if known || !full {
            (group, topic)
        } else {
            self.overflowed += 1;
            (OVERFLOW, OVERFLOW)
        };
        let by_topic = match self.out.get_mut(g) {
            Some(m) => m,
            None => self.out.entry(g.to_string()).or_default(),
        };
        match by_topic.get_mut(t) {
            Some(f) => f.add(messages, bytes),
            None => {
                by_topic.insert(t.to_string(), Flow { messages, bytes });
                self.out_pairs += 1;
            }
        }
        if g == OVERFLOW {
            return;
        }
        let queues = match self.pulled.get_mut(g).and_then(|m| m.get_mut(t)) {
            Some(q) => q,
            None => self
                .pulled
                .entry(g.to_string())
                .or_default()
                .entry(t.to_string())
                .or_default(),
        };
        let e = queues.entry(queue).or_insert(next);
        *e = (*e).max(next);
    }

    /// The store time of the message at `committed` in a group's queue: cached while the
    /// committed offset stays, else `read` (and cached).
    pub fn stamp(
        &mut self,
        group: &str,
        topic: &str,
        queue: u32,
        committed: u64,
        read: impl FnOnce() -> Option<i64>,
    ) -> Option<i64> {
        let queues = match self.stamps.get_mut(group).and_then(|m| m.get_mut(topic)) {
            Some(q) => q,
            None => self
                .stamps
                .entry(group.to_string())
                .or_default()
                .entry(topic.to_string())
                .or_default(),
        };
        match queues.get(&queue) {
            Some(&(at, ms)) if at == committed => Some(ms),
            _ => {
                let ms = read()?;
                queues.insert(queue, (committed, ms));
                Some(ms)
            }
        }
    }

    /// What was kept about a topic that no longer exists on this shard is dropped.
    pub fn forget_topic(&mut self, topic: &str) {
        for m in self.pulled.values_mut() {
            m.remove(topic);
        }
        for m in self.stamps.values_mut() {
            m.remove(topic);
        }
    }

    fn group_events(&mut self, group: &str) -> Option<&mut GroupEvents> {
        if !self.on {
            return None;
        }
        let full = self.groups.len() >= self.series_max;
        let key = series_key(&self.groups, group, full, &mut self.overflowed).to_string();
        Some(self.groups.entry(key).or_default())
    }

    /// A message of `group` handed back for a retry.
    pub fn retried(&mut self, group: &str) {
        if let Some(g) = self.group_events(group) {
            g.retried += 1;
        }
    }

    /// A message of `group` moved to its dead-letter topic.
    pub fn dead_lettered(&mut self, group: &str) {
        if let Some(g) = self.group_events(group) {
            g.dead_lettered += 1;
        }
    }

    /// A request answered `status` after `micros` µs.
    #[inline]
    /// A pull response carrying `bytes` of records, sent the way `path` says.
    pub fn pull_body(&mut self, path: PullPath, bytes: u64) {
        if !self.on {
            return;
        }
        let r = match path {
            PullPath::File => &mut self.pull_bodies.file,
            PullPath::Copy => &mut self.pull_bodies.copied,
            PullPath::Mapped => &mut self.pull_bodies.mapped,
            PullPath::Direct => &mut self.pull_bodies.direct,
        };
        r.count += 1;
        r.bytes += bytes;
    }

    pub fn served(&mut self, code: u16, status: Status, protocol: Protocol, micros: u64) {
        if !self.on {
            return;
        }
        let key = RequestKey {
            code,
            status: status.into(),
            protocol,
        };
        match self.requests.get_mut(&key) {
            Some(h) => h.record(micros),
            None => {
                let mut h = Hist::latency();
                h.record(micros);
                self.requests.insert(key, h);
            }
        }
    }

    /// A request or reply spent `micros` µs in `stage`.
    #[inline]
    pub fn stage(&mut self, stage: Stage, micros: u64) {
        if self.on {
            self.stages[stage as usize].record(micros);
        }
    }

    #[inline]
    pub fn appended(&mut self, micros: u64) {
        if self.on {
            self.append.record(micros);
        }
    }

    pub fn synced(&mut self, micros: u64) {
        if self.on {
            self.fdatasync.record(micros);
        }
    }

    /// `n` scheduled messages delivered `late_ms` after they were due.
    pub fn delivered_late(&mut self, late_ms: u64, n: u64) {
        if self.on {
            self.schedule_lateness.record_n(late_ms, n);
        }
    }

    pub fn txn_commit(&mut self) {
        if self.on {
            self.txn.commits += 1;
        }
    }

    pub fn txn_rollback(&mut self) {
        if self.on {
            self.txn.rollbacks += 1;
        }
    }

    pub fn txn_discard(&mut self) {
        if self.on {
            self.txn.discards += 1;
        }
    }
}

/// `name` itself when it has a series or there is room for one, else [`OVERFLOW`] (counted).
fn series_key<'a, V>(
    map: &HashMap<String, V>,
    name: &'a str,
    full: bool,
    overflowed: &mut u64,
) -> &'a str {
    if !full || map.contains_key(name) {
        name
    } else {
        *overflowed += 1;
        OVERFLOW
    }
}

/// Consumer lag of one (group, topic) on one shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lag {
    pub group: String,
    pub topic: String,
    /// Messages stored but not committed by the group.
    pub messages: u64,
    /// Messages pulled but not committed.
    pub inflight: u64,
    /// Age of the oldest message not committed (0 with no lag), ms.
    pub oldest_ms: u64,
}

/// Replication of one slave of this shard (master role).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlaveLag {
    /// The slave's replication connection id on this shard.
    pub slave: u64,
    pub bytes: u64,
    /// Time since the slave last had everything, ms (0 when it has).
    pub ms: u64,
}

/// What a shard publishes each tick (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct ShardView {
    pub topics_in: Vec<(String, Flow)>,
    pub out: Vec<(String, String, Flow)>,
    pub groups: Vec<(String, GroupEvents)>,
    pub requests: Vec<(RequestKey, Hist)>,
    pub message_size: Option<Hist>,
    pub stages: Vec<(Stage, Hist)>,
    pub append: Option<Hist>,
    pub fdatasync: Option<Hist>,
    pub schedule_lateness: Option<Hist>,
    pub txn: TxnEvents,
    pub pull_bodies: PullBodies,
    pub overflowed: u64,
    pub lag: Vec<Lag>,
    /// Log bytes appended but not yet fdatasync'ed.
    pub flush_behind_bytes: u64,
    /// Log bytes the key index has not read yet (ConsumeQueues are written with the log).
    pub dispatch_behind_bytes: u64,
    /// Age of the oldest message this shard keeps, ms (0 with none).
    pub reserve_ms: u64,
    pub slaves: Vec<SlaveLag>,
    /// Broker-wide gauges, published by shard 0 only.
    pub broker: Option<BrokerGauges>,
    /// Time this shard took to build the view, µs.
    pub build_us: u64,
}

/// Broker-wide counts (shard 0 publishes them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerGauges {
    pub topics: u64,
    /// Consumer groups with a live member.
    pub groups: u64,
    /// Live producer clients (distinct client ids).
    pub producers: u64,
    /// Live consumer clients (distinct client ids).
    pub consumers: u64,
    /// Live members per consumer group.
    pub members: Vec<(String, u64)>,
}

impl Recorder {
    /// The recorded part of a view (the caller adds the computed gauges).
    pub fn view(&self) -> ShardView {
        let mut out = Vec::with_capacity(self.out_pairs);
        for (g, topics) in &self.out {
            for (t, f) in topics {
                out.push((g.clone(), t.clone(), *f));
            }
        }
        ShardView {
            topics_in: self
                .topics_in
                .iter()
                .map(|(t, f)| (t.clone(), *f))
                .collect(),
            out,
            groups: self.groups.iter().map(|(g, e)| (g.clone(), *e)).collect(),
            requests: self.requests.iter().map(|(k, h)| (*k, h.clone())).collect(),
            message_size: Some(self.message_size.clone()),
            stages: Stage::ALL
                .iter()
                .map(|&st| (st, self.stages[st as usize].clone()))
                .collect(),
            append: Some(self.append.clone()),
            fdatasync: Some(self.fdatasync.clone()),
            schedule_lateness: Some(self.schedule_lateness.clone()),
            txn: self.txn,
            pull_bodies: self.pull_bodies,
            overflowed: self.overflowed,
            ..ShardView::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_records_nothing() {
        let mut r = Recorder::new(false, 10);
        r.stored("t", 100, [100u64].into_iter());
        r.pulled("g", "t", 0, 5, 1, 100);
        r.served(10, Status::Success, Protocol::Native, 30);
        r.retried("g");
        let v = r.view();
        assert!(v.topics_in.is_empty() && v.out.is_empty() && v.requests.is_empty());
        assert!(v.groups.is_empty());
        assert_eq!(v.message_size.unwrap().count(), 0);
    }

    #[test]
    fn topics_past_the_cap_go_to_overflow_and_totals_stay() {
        let mut r = Recorder::new(true, 2);
        for t in ["a", "b", "c", "d", "a"] {
            r.stored(t, 10, [5u64, 5].into_iter());
        }
        let mut v = r.view().topics_in;
        v.sort();
        assert_eq!(
            v,
            vec![
                (
                    "_overflow".to_string(),
                    Flow {
                        messages: 4,
                        bytes: 20
                    }
                ),
                (
                    "a".to_string(),
                    Flow {
                        messages: 4,
                        bytes: 20
                    }
                ),
                (
                    "b".to_string(),
                    Flow {
                        messages: 2,
                        bytes: 10
                    }
                ),
            ]
        );
        // Two topics past the cap (c, d); the overflow series itself made the map full.
        assert_eq!(r.overflowed, 2);
        assert_eq!(r.message_size.count(), 10);
    }

    #[test]
    fn pulls_track_out_flow_and_position() {
        let mut r = Recorder::new(true, 2);
        r.pulled("g", "t", 1, 10, 10, 1000);
        r.pulled("g", "t", 1, 7, 0, 0);
        r.pulled("g", "u", 0, 3, 3, 30);
        r.pulled("h", "t", 0, 3, 3, 30);
        assert_eq!(r.pulled["g"]["t"][&1], 10, "positions never move back");
        assert_eq!(r.out["g"]["t"].messages, 10);
        assert_eq!(r.out[OVERFLOW][OVERFLOW].messages, 3);
        assert_eq!(r.overflowed, 1);
        assert!(!r.pulled.contains_key("h"));
    }
}
