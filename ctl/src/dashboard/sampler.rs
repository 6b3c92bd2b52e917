//! The background sampler: every `--refresh` it reads the cluster with the ctl process's
//! own credentials, through the same command functions as `ringmq-ctl` (`cluster list`,
//! `broker status`, `topic list`/`status`, `group list`/`progress`), and keeps what the page
//! cannot get from one reading:
//!
//! - rates in msg/s: the change of a counter between two readings over the time between
//!   them (brokers: the shards' `msgs_in`/`msgs_out` counters; topics in: the sum of the
//!   queues' max offsets, read as `topic status` reads them; groups and topics out: the sum of the group's committed offsets).
//!   A counter that went down (a restart, a reset offset) has no rate for that reading.
//! - each group's total lag (`group progress`'s `total_lag`) over the last `--history`.
//! - whether the brokers run with ACL (`aclEnable` in their runtime info).
//!
//! At most [`TOPICS_SAMPLED_MAX`] topics and [`GROUPS_SAMPLED_MAX`] groups are read per
//! round; history holds at most [`HISTORY_POINTS_MAX`] readings per group.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use ringmq_client::Admin;
use serde_json::Value;

use crate::cli::ClusterListArgs;
use crate::cmd::{broker, cluster, group, now_ms, topic};
use crate::error::{Context, CtlError};

/// Topics read per round (their max offsets); later ones have no rates.
pub const TOPICS_SAMPLED_MAX: usize = 1000;
/// Groups read per round (their progress); later ones have no rates or history.
pub const GROUPS_SAMPLED_MAX: usize = 200;
/// Lag readings kept per group.
pub const HISTORY_POINTS_MAX: usize = 10_000;

/// A counter read now and then, and its rate between the last two readings.
#[derive(Debug, Clone, Copy)]
pub struct Counter {
    pub value: u64,
    at: Instant,
    /// msg/s between the last two readings.
    pub per_s: Option<f64>,
}

impl Counter {
    fn first(value: u64, at: Instant) -> Self {
        Counter {
            value,
            at,
            per_s: None,
        }
    }

    fn next(self, value: u64, at: Instant) -> Self {
        let dt = at.duration_since(self.at).as_secs_f64();
        let per_s = (value >= self.value && dt > 0.0).then(|| (value - self.value) as f64 / dt);
        Counter { value, at, per_s }
    }
}

/// What a broker's counters say.
#[derive(Debug, Clone)]
pub struct BrokerSample {
    pub msgs_in: Counter,
    pub msgs_out: Counter,
    /// Sum of the shards' store sizes.
    pub store_bytes: u64,
}

/// (ms since the epoch, in per second, out per second).
pub type RatePoint = (i64, Option<f64>, Option<f64>);

/// One group's readings.
#[derive(Debug, Clone, Default)]
pub struct GroupSample {
    /// (ms since the epoch, total lag in messages, messages the group committed per
    /// second), oldest first.
    pub history: VecDeque<(i64, u64, Option<f64>)>,
    /// Committed offsets summed per topic of the group (not its retry or DLQ topic).
    pub consumed: BTreeMap<String, Counter>,
}

impl GroupSample {
    /// Messages per second the group commits, over all its topics.
    pub fn consume_per_s(&self) -> Option<f64> {
        let rates: Vec<f64> = self.consumed.values().filter_map(|c| c.per_s).collect();
        (!rates.is_empty()).then(|| rates.iter().sum())
    }
}

/// Everything the sampler knows.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    /// By broker address.
    pub brokers: BTreeMap<String, BrokerSample>,
    /// Sum of max offsets per topic.
    pub topics_in: BTreeMap<String, Counter>,
    /// Per topic: (ms since the epoch, messages stored per second, messages its groups
    /// committed per second), one point per reading, oldest first.
    pub topic_history: BTreeMap<String, VecDeque<RatePoint>>,
    pub groups: BTreeMap<String, GroupSample>,
    /// Group names of the last `group list` that worked.
    pub group_names: Vec<String>,
    /// Some broker runs with `aclEnable=true`, or refused the sampler. Once seen it stays
    /// on: a broker that fails to answer one round must not turn the logins off.
    pub acl: bool,
    /// When the last round ended (ms since the epoch); 0 before the first.
    pub sampled_at_ms: i64,
    /// What failed in the last round (one line each), for the page.
    pub errors: Vec<String>,
}

impl Samples {
    /// msg/s out of `topic`: the sum of its groups' commit rates.
    pub fn topic_out_per_s(&self, topic: &str) -> Option<f64> {
        let rates: Vec<f64> = self
            .groups
            .values()
            .filter_map(|g| g.consumed.get(topic).and_then(|c| c.per_s))
            .collect();
        (!rates.is_empty()).then(|| rates.iter().sum())
    }
}

/// Readings kept per group for `history` at one per `refresh` (checked at start against
/// [`HISTORY_POINTS_MAX`]).
pub fn history_points(history: Duration, refresh: Duration) -> usize {
    let n = history.as_secs_f64() / refresh.as_secs_f64().max(1e-3);
    (n.ceil() as usize)
        .saturating_add(1)
        .clamp(2, HISTORY_POINTS_MAX)
}

/// One round: reads the cluster and updates `s`.
pub async fn sample(admin: &Admin, s: &mut Samples, points: usize) {
    let mut errors = Vec::new();
    let now = Instant::now();
    sample_brokers(admin, s, now, &mut errors).await;
    sample_topics(admin, s, now, &mut errors).await;
    sample_groups(admin, s, now, points, &mut errors).await;
    topic_history(s, now_ms(), points);
    s.sampled_at_ms = now_ms();
    s.errors = errors;
}

async fn sample_brokers(admin: &Admin, s: &mut Samples, now: Instant, errors: &mut Vec<String>) {
    let args = ClusterListArgs {
        cluster: None,
        sample: Duration::ZERO,
    };
    let list = match cluster::list(admin, &args).await {
        Ok(r) => r.to_json(),
        Err(e) => {
            errors.push(format!("cluster list: {e}"));
            return;
        }
    };
    let mut seen = BTreeSet::new();
    let mut acl = false;
    for b in rows(&list, "brokers") {
        let Some(addr) = b["address"].as_str() else {
            continue;
        };
        seen.insert(addr.to_string());
        let st = match broker::status(admin, addr).await {
            Ok(r) => r.to_json(),
            Err(e) => {
                acl |= super::answer::not_allowed(&e);
                errors.push(format!("broker status {addr}: {e}"));
                continue;
            }
        };
        acl |= rows(&st, "extra")
            .iter()
            .any(|x| x["key"] == "aclEnable" && x["value"] == "true");
        let shards = rows(&st, "shards");
        let sum = |k: &str| shards.iter().filter_map(|r| r[k].as_u64()).sum::<u64>();
        let (msgs_in, msgs_out, store_bytes) =
            (sum("msgs_in"), sum("msgs_out"), sum("store_bytes"));
        let next = match s.brokers.get(addr) {
            Some(p) => BrokerSample {
                msgs_in: p.msgs_in.next(msgs_in, now),
                msgs_out: p.msgs_out.next(msgs_out, now),
                store_bytes,
            },
            None => BrokerSample {
                msgs_in: Counter::first(msgs_in, now),
                msgs_out: Counter::first(msgs_out, now),
                store_bytes,
            },
        };
        s.brokers.insert(addr.to_string(), next);
    }
    s.brokers.retain(|a, _| seen.contains(a));
    s.acl |= acl;
}

async fn sample_topics(admin: &Admin, s: &mut Samples, now: Instant, errors: &mut Vec<String>) {
    let list = match topic::list(admin).await {
        Ok(r) => r.to_json(),
        Err(e) => {
            errors.push(format!("topic list: {e}"));
            return;
        }
    };
    let mut seen = BTreeSet::new();
    for t in rows(&list, "topics")
        .iter()
        .filter(|t| t["kind"] != "system")
        .take(TOPICS_SAMPLED_MAX)
    {
        let Some(name) = t["topic"].as_str() else {
            continue;
        };
        let max: u64 = match queue_offsets(admin, name).await {
            Ok(qs) => qs.iter().map(|q| q.1).sum(),
            Err(e) => {
                errors.push(format!("offsets of {name}: {e}"));
                continue;
            }
        };
        seen.insert(name.to_string());
        let c = match s.topics_in.get(name) {
            Some(p) => p.next(max, now),
            None => Counter::first(max, now),
        };
        s.topics_in.insert(name.to_string(), c);
    }
    s.topics_in.retain(|t, _| seen.contains(t));
}

async fn sample_groups(
    admin: &Admin,
    s: &mut Samples,
    now: Instant,
    points: usize,
    errors: &mut Vec<String>,
) {
    match group::list(admin).await {
        Ok(r) => {
            s.group_names = rows(&r.to_json(), "groups")
                .iter()
                .filter_map(|g| g["group"].as_str().map(String::from))
                .collect();
        }
        Err(e) => errors.push(format!("group list: {e}")),
    }
    let names: Vec<String> = s
        .group_names
        .iter()
        .take(GROUPS_SAMPLED_MAX)
        .cloned()
        .collect();
    let at_ms = now_ms();
    for name in &names {
        let p = match group::progress(admin, name, None).await {
            Ok(r) => r.to_json(),
            Err(e) => {
                errors.push(format!("group progress {name}: {e}"));
                continue;
            }
        };
        let g = s.groups.entry(name.clone()).or_default();
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        for q in rows(&p, "queues") {
            let Some(t) = q["topic"].as_str() else {
                continue;
            };
            if topic::topic_kind(t) == "normal" {
                *sums.entry(t.to_string()).or_default() +=
                    q["consumer_offset"].as_u64().unwrap_or(0);
            }
        }
        let consumed = sums
            .into_iter()
            .map(|(t, v)| {
                let c = match g.consumed.get(&t) {
                    Some(p) => p.next(v, now),
                    None => Counter::first(v, now),
                };
                (t, c)
            })
            .collect();
        g.consumed = consumed;
        if let Some(lag) = p["summary"]["total_lag"].as_u64() {
            let rate = g.consume_per_s();
            g.history.push_back((at_ms, lag, rate));
            while g.history.len() > points {
                g.history.pop_front();
            }
        }
    }
    s.groups.retain(|g, _| names.contains(g));
}

/// One point per sampled topic: its in rate and its groups' out rate now.
fn topic_history(s: &mut Samples, at_ms: i64, points: usize) {
    let now: Vec<(String, Option<f64>, Option<f64>)> = s
        .topics_in
        .iter()
        .map(|(t, c)| (t.clone(), c.per_s, s.topic_out_per_s(t)))
        .collect();
    for (t, i, o) in now {
        let h = s.topic_history.entry(t).or_default();
        h.push_back((at_ms, i, o));
        while h.len() > points {
            h.pop_front();
        }
    }
    let topics = &s.topics_in;
    s.topic_history.retain(|t, _| topics.contains_key(t));
}

/// (min, max) offset of every read queue of `topic`: `topic status` without the newest
/// message's store time, which the broker can only give by returning that message (and
/// counting it in its messages out).
pub async fn queue_offsets(admin: &Admin, topic: &str) -> Result<Vec<(u64, u64)>, CtlError> {
    let route = admin
        .topic_route(topic)
        .await
        .doing(|| format!("reading the route of {topic}"))?;
    let mut out = Vec::with_capacity(route.read_queues.len());
    for mq in route.read_queues.iter() {
        let (min, max) = crate::cmd::queue_range(admin, mq).await?;
        out.push((min, max.max(min)));
    }
    Ok(out)
}

/// The rows of a report section (empty when absent).
pub fn rows<'a>(doc: &'a Value, section: &str) -> &'a [Value] {
    doc[section].as_array().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_deltas_over_time_and_none_after_a_drop() {
        let t0 = Instant::now();
        let c = Counter::first(100, t0);
        assert_eq!(c.per_s, None);
        let c = c.next(150, t0 + Duration::from_secs(5));
        assert_eq!(c.per_s, Some(10.0));
        let c = c.next(20, t0 + Duration::from_secs(10));
        assert_eq!(c.per_s, None, "a counter that went down has no rate");
    }

    #[test]
    fn history_length_follows_the_flags() {
        assert_eq!(
            history_points(Duration::from_secs(900), Duration::from_secs(5)),
            181
        );
        assert_eq!(
            history_points(Duration::from_secs(1), Duration::from_secs(5)),
            2
        );
        assert_eq!(
            history_points(Duration::from_secs(86_400), Duration::from_millis(1)),
            HISTORY_POINTS_MAX
        );
    }
}
