//! Brokers: who the name servers list (cluster info, [`BrokerRef`]s, which masters a topic
//! change goes to), and what one broker reports and accepts: runtime info, the cluster's
//! status (rates, disk use, replication lag), configuration and read-only switching, and
//! what it holds scheduled (delay levels, delivery times: [`Admin::schedule_status`],
//! [`Admin::schedule_statuses`]).
//!
//! Rates are published per shard by the broker (`shard.N.msgs_in_per_s`) or, failing that,
//! sampled from its counters; the pure helpers [`published_rates`], [`sampled_rates`] and
//! [`shard_max`] read a runtime info.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::{BrokerConfigTable, BrokerRuntimeInfo, ClusterInfo, ScheduleStatus};
use tokio::time::Instant;

use super::{Admin, BrokerRef, BROKER_PERMISSION_READ_ONLY, BROKER_PERMISSION_READ_WRITE};
use crate::error::{Error, Result};

/// Which brokers a topic change goes to (and which [`Admin::schedule_statuses`] asks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicTarget {
    /// Every master the name servers know.
    AllMasters,
    /// Every master of this cluster.
    Cluster(String),
    /// One broker: its name (its master) or its address (`ip:port`, a master).
    Broker(String),
}

/// One broker's line of [`Admin::cluster_status`].
#[derive(Debug, Clone)]
pub struct BrokerStatus {
    pub broker: BrokerRef,
    /// Messages stored per second, over the broker's shards.
    pub msgs_in_per_s: Option<f64>,
    /// Messages delivered per second, over the broker's shards.
    pub msgs_out_per_s: Option<f64>,
    pub disk_used_percent: Option<f64>,
    /// A slave's distance behind its master: bytes (largest over its shards).
    pub repl_lag_bytes: Option<u64>,
    /// A slave's distance behind its master as its master measures it, ms.
    pub repl_lag_ms: Option<u64>,
    /// The runtime info it answered, if it did.
    pub runtime: Option<BrokerRuntimeInfo>,
    /// Why the broker did not answer.
    pub error: Option<String>,
}

/// One broker's line of [`Admin::transaction_statuses`].
#[derive(Debug)]
pub struct BrokerTransactions {
    pub broker: BrokerRef,
    /// Its answer to GET_TRANSACTION_STATUS, or why it gave none.
    pub status: Result<ringmq_wire::command::TransactionStatus>,
}

/// One broker's line of [`Admin::schedule_statuses`].
#[derive(Debug)]
pub struct BrokerSchedule {
    pub broker: BrokerRef,
    /// Its answer to GET_SCHEDULE_STATUS, or why it gave none (kept per broker so one
    /// broker down does not hide the others).
    pub status: Result<ScheduleStatus>,
}

impl Admin {
    /// Every broker the name servers know.
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        self.inst.cluster_info().await
    }

    /// Every broker process the name servers know, sorted by cluster, name and id. A
    /// replica whose address is not `ip:port` is left out (and logged).
    pub async fn brokers(&self) -> Result<Vec<BrokerRef>> {
        let info = self.inst.cluster_info().await?;
        let mut out = Vec::new();
        for b in &info.brokers {
            for (id, r) in &b.replicas {
                match r.address.parse() {
                    Ok(addr) => out.push(BrokerRef {
                        cluster: b.cluster.clone(),
                        name: b.broker_name.clone(),
                        id: *id,
                        addr,
                        role: r.role,
                        shard_count: r.shard_count.max(1),
                        version: r.version.clone(),
                    }),
                    Err(_) => log::warn!(
                        "broker {} id {id} publishes address {:?}, which is not ip:port",
                        b.broker_name,
                        r.address
                    ),
                }
            }
        }
        out.sort_by(|a, b| (&a.cluster, &a.name, a.id).cmp(&(&b.cluster, &b.name, b.id)));
        Ok(out)
    }

    /// The address of a broker given as `ip:port` (used as is, the name servers are not
    /// asked) or as a broker name (its master's address).
    pub async fn broker_addr(&self, name_or_addr: &str) -> Result<SocketAddr> {
        if let Ok(addr) = name_or_addr.parse() {
            return Ok(addr);
        }
        let brokers = self.brokers().await?;
        match brokers
            .iter()
            .find(|b| b.name == name_or_addr && b.is_master())
        {
            Some(b) => Ok(b.addr),
            None => Err(unknown_broker(name_or_addr, &brokers)),
        }
    }

    /// The masters a topic change goes to. A [`TopicTarget::Broker`] must be a registered
    /// master (a slave copies its master's topics).
    pub async fn target_masters(&self, target: &TopicTarget) -> Result<Vec<BrokerRef>> {
        let brokers = self.brokers().await?;
        let masters: Vec<BrokerRef> = match target {
            TopicTarget::AllMasters => brokers.iter().filter(|b| b.is_master()).cloned().collect(),
            TopicTarget::Cluster(c) => {
                let found: Vec<BrokerRef> = brokers
                    .iter()
                    .filter(|b| b.is_master() && &b.cluster == c)
                    .cloned()
                    .collect();
                if found.is_empty() {
                    let known: BTreeSet<&str> =
                        brokers.iter().map(|b| b.cluster.as_str()).collect();
                    return Err(Error::NotFound {
                        what: format!(
                            "no master of cluster {c:?} is registered (clusters: {})",
                            join_or_none(known)
                        ),
                    });
                }
                found
            }
            TopicTarget::Broker(b) => {
                let by_addr: Option<SocketAddr> = b.parse().ok();
                let found = brokers.iter().find(|r| match by_addr {
                    Some(a) => r.addr == a,
                    None => &r.name == b && r.is_master(),
                });
                match found {
                    Some(r) if r.is_master() => vec![r.clone()],
                    Some(r) => {
                        return Err(Error::Config(format!(
                            "{b} is slave {} of broker {}; topics are changed on the master",
                            r.id, r.name
                        )))
                    }
                    None => return Err(unknown_broker(b, &brokers)),
                }
            }
        };
        if masters.is_empty() {
            return Err(Error::NotFound {
                what: "the name servers know no master broker".into(),
            });
        }
        Ok(masters)
    }

    /// A broker's counters per shard and its runtime key/values.
    pub async fn runtime_info(&self, addr: SocketAddr) -> Result<BrokerRuntimeInfo> {
        self.call(addr, RequestCode::GetBrokerRuntimeInfo, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }

    /// What a broker holds scheduled: pending messages per delay level and with a delivery
    /// time, the next due time, deliveries since it started (GET_SCHEDULE_STATUS).
    pub async fn schedule_status(&self, addr: SocketAddr) -> Result<ScheduleStatus> {
        self.call(addr, RequestCode::GetScheduleStatus, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }

    /// A broker's undecided half messages per producer group and its check-backs
    /// (GET_TRANSACTION_STATUS).
    pub async fn transaction_status(
        &self,
        addr: SocketAddr,
    ) -> Result<ringmq_wire::command::TransactionStatus> {
        self.call(addr, RequestCode::GetTransactionStatus, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }

    /// [`Admin::schedule_status`] of each target broker, one at a time, in
    /// [`Admin::brokers`] order. Unlike a topic change, a [`TopicTarget::Broker`] may be a
    /// slave (given by address): it holds a copy of its master's schedule, which only the
    /// master delivers. A broker that does not answer is listed with its error.
    pub async fn schedule_statuses(&self, target: &TopicTarget) -> Result<Vec<BrokerSchedule>> {
        let chosen = self.status_targets(target).await?;
        let mut out = Vec::with_capacity(chosen.len());
        for broker in chosen {
            let status = self.schedule_status(broker.addr).await;
            out.push(BrokerSchedule { broker, status });
        }
        Ok(out)
    }

    /// [`Admin::transaction_status`] of each target broker, one at a time, in
    /// [`Admin::brokers`] order; as [`Admin::schedule_statuses`], a [`TopicTarget::Broker`]
    /// may be a slave (it replicates halves and decisions; only its master checks back). A
    /// broker that does not answer is listed with its error.
    pub async fn transaction_statuses(
        &self,
        target: &TopicTarget,
    ) -> Result<Vec<BrokerTransactions>> {
        let chosen = self.status_targets(target).await?;
        let mut out = Vec::with_capacity(chosen.len());
        for broker in chosen {
            let status = self.transaction_status(broker.addr).await;
            out.push(BrokerTransactions { broker, status });
        }
        Ok(out)
    }

    /// The brokers a status command asks: the target's masters, or one broker by name (its
    /// master) or by address (master or slave).
    async fn status_targets(&self, target: &TopicTarget) -> Result<Vec<BrokerRef>> {
        Ok(match target {
            TopicTarget::Broker(b) => {
                let brokers = self.brokers().await?;
                let by_addr: Option<SocketAddr> = b.parse().ok();
                match brokers.iter().find(|r| match by_addr {
                    Some(a) => r.addr == a,
                    None => &r.name == b && r.is_master(),
                }) {
                    Some(r) => vec![r.clone()],
                    None => return Err(unknown_broker(b, &brokers)),
                }
            }
            _ => self.target_masters(target).await?,
        })
    }

    /// Every broker with its rates, disk use and (slaves) replication lag. Rates come from
    /// the brokers' per-shard rates (`shard.N.msgs_in_per_s`, `shard.N.msgs_out_per_s`)
    /// or, where a broker does not publish them, from two samples of its counters `sample`
    /// apart (no rate when `sample` is zero). A broker that does not answer is listed with
    /// its error.
    pub async fn cluster_status(&self, sample: Duration) -> Result<Vec<BrokerStatus>> {
        let brokers = self.brokers().await?;
        let mut first = Vec::with_capacity(brokers.len());
        for b in &brokers {
            first.push((Instant::now(), self.runtime_info(b.addr).await));
        }
        let need_sample = first
            .iter()
            .any(|(_, r)| r.as_ref().is_ok_and(|i| published_rates(i).is_none()));
        let mut second: Vec<Option<(Instant, BrokerRuntimeInfo)>> = vec![None; brokers.len()];
        if need_sample && !sample.is_zero() {
            tokio::time::sleep(sample).await;
            for (i, b) in brokers.iter().enumerate() {
                if matches!(&first[i].1, Ok(info) if published_rates(info).is_none()) {
                    let at = Instant::now();
                    if let Ok(info) = self.runtime_info(b.addr).await {
                        second[i] = Some((at, info));
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(brokers.len());
        for (i, b) in brokers.iter().enumerate() {
            let (at, result) = &first[i];
            let mut s = BrokerStatus {
                broker: b.clone(),
                msgs_in_per_s: None,
                msgs_out_per_s: None,
                disk_used_percent: None,
                repl_lag_bytes: None,
                repl_lag_ms: None,
                runtime: None,
                error: None,
            };
            match result {
                Ok(info) => {
                    let rates = published_rates(info).or_else(|| {
                        second[i]
                            .as_ref()
                            .and_then(|(at2, info2)| sampled_rates(info, info2, *at2 - *at))
                    });
                    if let Some((r_in, r_out)) = rates {
                        s.msgs_in_per_s = Some(r_in);
                        s.msgs_out_per_s = Some(r_out);
                    }
                    s.disk_used_percent = info
                        .extra
                        .get("disk_used_percent")
                        .and_then(|v| v.parse().ok());
                    if !b.is_master() {
                        s.repl_lag_bytes = shard_max(info, "ha_lag_bytes");
                        let master = brokers.iter().position(|m| {
                            m.name == b.name && m.cluster == b.cluster && m.is_master()
                        });
                        s.repl_lag_ms = master
                            .and_then(|m| first[m].1.as_ref().ok())
                            .and_then(|mi| shard_max(mi, "ha_lag_ms"));
                    }
                    s.runtime = Some(info.clone());
                }
                Err(e) => s.error = Some(e.to_string()),
            }
            out.push(s);
        }
        Ok(out)
    }

    /// Every effective configuration key of a broker, RocketMQ spelling.
    pub async fn broker_config(&self, addr: SocketAddr) -> Result<BTreeMap<String, String>> {
        let table: BrokerConfigTable = self
            .call(addr, RequestCode::GetBrokerConfig, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()?;
        Ok(table.entries)
    }

    /// Changes runtime keys of a broker (an allow-list; the broker refuses any other key
    /// with MESSAGE_ILLEGAL and applies nothing of the request).
    pub async fn update_broker_config(
        &self,
        addr: SocketAddr,
        changes: BTreeMap<String, String>,
    ) -> Result<()> {
        let body = BrokerConfigTable { entries: changes }.to_vec()?;
        self.call(addr, RequestCode::UpdateBrokerConfig, &Empty, &body)
            .await?
            .expect(&[Status::Success])?;
        Ok(())
    }

    /// Makes a broker refuse writes (`on`, `brokerPermission=4`: sends answer
    /// NO_PERMISSION, reads go on) or take them again (`brokerPermission=6`).
    pub async fn set_read_only(&self, addr: SocketAddr, on: bool) -> Result<()> {
        let value = if on {
            BROKER_PERMISSION_READ_ONLY
        } else {
            BROKER_PERMISSION_READ_WRITE
        };
        self.update_broker_config(
            addr,
            BTreeMap::from([("brokerPermission".to_string(), value.to_string())]),
        )
        .await
    }

    // ---- helpers ------------------------------------------------------------------------

    /// The addresses of every master the name servers know.
    pub(super) async fn masters(&self) -> Result<Vec<SocketAddr>> {
        Ok(self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
            .map(|b| b.addr)
            .collect())
    }
}

/// Messages in and out per second summed over a broker's shards from the per-shard rates
/// it publishes (`shard.N.msgs_in_per_s`, `shard.N.msgs_out_per_s`); `None` unless every
/// shard publishes both.
pub fn published_rates(info: &BrokerRuntimeInfo) -> Option<(f64, f64)> {
    if info.shards.is_empty() {
        return None;
    }
    let mut sum = (0.0, 0.0);
    for s in &info.shards {
        let get = |k: &str| -> Option<f64> {
            info.extra
                .get(&format!("shard.{}.{k}", s.shard_id))
                .and_then(|v| v.parse().ok())
        };
        sum.0 += get("msgs_in_per_s")?;
        sum.1 += get("msgs_out_per_s")?;
    }
    Some(sum)
}

/// Messages in and out per second between two runtime infos of one broker taken
/// `elapsed` apart (`None` if no time passed).
pub fn sampled_rates(
    before: &BrokerRuntimeInfo,
    after: &BrokerRuntimeInfo,
    elapsed: Duration,
) -> Option<(f64, f64)> {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    let total = |i: &BrokerRuntimeInfo| {
        i.shards
            .iter()
            .fold((0u64, 0u64), |(a, b), s| (a + s.msgs_in, b + s.msgs_out))
    };
    let (i0, o0) = total(before);
    let (i1, o1) = total(after);
    Some((
        i1.saturating_sub(i0) as f64 / secs,
        o1.saturating_sub(o0) as f64 / secs,
    ))
}

/// The largest `shard.N.<key>` value of a broker's runtime info (`None` if no shard has it).
pub fn shard_max(info: &BrokerRuntimeInfo, key: &str) -> Option<u64> {
    info.extra
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix("shard.")?;
            let (_, name) = rest.split_once('.')?;
            (name == key).then(|| v.parse::<u64>().ok()).flatten()
        })
        .max()
}

fn unknown_broker(name_or_addr: &str, brokers: &[BrokerRef]) -> Error {
    let names: BTreeSet<&str> = brokers.iter().map(|b| b.name.as_str()).collect();
    Error::NotFound {
        what: format!(
            "no broker {name_or_addr:?} is registered with the name servers (brokers: {})",
            join_or_none(names)
        ),
    }
}

fn join_or_none(items: BTreeSet<&str>) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.into_iter().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::command::ShardStats;

    fn info(shards: &[(u64, u64)], extra: &[(&str, &str)]) -> BrokerRuntimeInfo {
        BrokerRuntimeInfo {
            broker_name: "b".into(),
            broker_id: 0,
            shards: shards
                .iter()
                .enumerate()
                .map(|(i, &(msgs_in, msgs_out))| ShardStats {
                    shard_id: i as u16,
                    msgs_in,
                    msgs_out,
                    ..ShardStats::default()
                })
                .collect(),
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn rates_published_or_sampled() {
        let partial = info(
            &[(0, 0), (0, 0)],
            &[
                ("shard.0.msgs_in_per_s", "5"),
                ("shard.0.msgs_out_per_s", "1"),
            ],
        );
        assert_eq!(published_rates(&partial), None, "shard 1 publishes nothing");
        let full = info(
            &[(0, 0), (0, 0)],
            &[
                ("shard.0.msgs_in_per_s", "5"),
                ("shard.0.msgs_out_per_s", "1"),
                ("shard.1.msgs_in_per_s", "7"),
                ("shard.1.msgs_out_per_s", "2"),
            ],
        );
        assert_eq!(published_rates(&full), Some((12.0, 3.0)));
        let a = info(&[(10, 0), (20, 5)], &[]);
        let b = info(&[(30, 0), (40, 25)], &[]);
        assert_eq!(
            sampled_rates(&a, &b, Duration::from_secs(2)),
            Some((20.0, 10.0))
        );
        assert_eq!(sampled_rates(&a, &b, Duration::ZERO), None);
    }

    #[test]
    fn shard_max_reads_per_shard_keys() {
        let i = info(
            &[],
            &[
                ("shard.0.ha_lag_bytes", "10"),
                ("shard.1.ha_lag_bytes", "300"),
                ("shard.1.ha_lag_ms", "7"),
                ("disk_used_percent", "41.0"),
            ],
        );
        assert_eq!(shard_max(&i, "ha_lag_bytes"), Some(300));
        assert_eq!(shard_max(&i, "ha_lag_ms"), Some(7));
        assert_eq!(shard_max(&i, "ha_slaves"), None);
    }
}
