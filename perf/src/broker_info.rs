//! What perf asks the brokers themselves (GET_BROKER_RUNTIME_INFO through the client's
//! [`Admin`]): the durability a result was acknowledged with (`flushDiskType` and `role` in
//! `extra`), and the replication lag (`shard.N.ha_lag_bytes`, `shard.N.ha_lag_ms`) sampled
//! every second during a run.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use ringmq_client::{Admin, ClientConfig};

use crate::security::Target;

/// How long an admin request (topic creation, runtime info) may take: generous, because a
/// broker under a benchmark's load, or a fresh one, can be slow to answer.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// One broker replica as perf reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerView {
    pub name: String,
    pub id: u64,
    pub addr: SocketAddr,
    /// ASYNC_MASTER, SYNC_MASTER or SLAVE.
    pub role: String,
    /// ASYNC_FLUSH or SYNC_FLUSH.
    pub flush: String,
    pub shards: usize,
}

impl BrokerView {
    pub fn is_master(&self) -> bool {
        self.id == 0
    }

    /// The durability an acknowledgement from this broker stands for.
    pub fn durability(&self) -> &'static str {
        match (self.role.as_str(), self.flush.as_str()) {
            ("SYNC_MASTER", "SYNC_FLUSH") => "acked after fdatasync and slave",
            ("SYNC_MASTER", _) => "acked after slave",
            (_, "SYNC_FLUSH") => "acked after fdatasync",
            _ => "acked from page cache",
        }
    }
}

/// The durability of a set of brokers' acknowledgements (their masters'), e.g. "acked from
/// page cache", or several joined by " / " when the masters differ.
pub fn durability(brokers: &[BrokerView]) -> String {
    let mut modes: Vec<&str> = brokers
        .iter()
        .filter(|b| b.is_master())
        .map(BrokerView::durability)
        .collect();
    modes.sort_unstable();
    modes.dedup();
    if modes.is_empty() {
        "unknown (no master answered)".to_string()
    } else {
        modes.join(" / ")
    }
}

/// Every replica the name servers know, with its role and flush policy, and the admin
/// client that asked.
pub async fn discover(target: &Target) -> Result<(Admin, Vec<BrokerView>), String> {
    let admin = connect(target).await?;
    let info = admin
        .cluster_info()
        .await
        .map_err(|e| format!("cluster info from {}: {e}", target.namesrv))?;
    let mut out = Vec::new();
    for b in &info.brokers {
        for (id, r) in &b.replicas {
            let Ok(addr) = r.address.parse::<SocketAddr>() else {
                log::warn!(
                    "broker {} publishes {:?}, not ip:port",
                    b.broker_name,
                    r.address
                );
                continue;
            };
            match admin.runtime_info(addr).await {
                Ok(rt) => out.push(BrokerView {
                    name: b.broker_name.clone(),
                    id: *id,
                    addr,
                    role: rt.extra.get("role").cloned().unwrap_or_default(),
                    flush: rt.extra.get("flushDiskType").cloned().unwrap_or_default(),
                    shards: rt.shards.len(),
                }),
                Err(e) => log::warn!("runtime info of {} ({addr}): {e}", b.broker_name),
            }
        }
    }
    out.sort_by(|a, b| (&a.name, a.id).cmp(&(&b.name, b.id)));
    Ok((admin, out))
}

/// An admin client for the target's name servers (`h1:9876;h2:9876`), with its TLS and
/// credentials and [`ADMIN_TIMEOUT`] per request.
pub async fn connect(target: &Target) -> Result<Admin, String> {
    let cfg = ClientConfig {
        request_timeout: ADMIN_TIMEOUT,
        ..target.client_config()
    };
    Admin::with_config(cfg)
        .await
        .map_err(|e| format!("name servers {}: {e}", target.namesrv))
}

/// Replication lag of the masters, sampled every second while a run lasts.
#[derive(Debug)]
pub struct LagSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<Mutex<LagState>>,
}

#[derive(Debug)]
struct LagState {
    /// Per sample: the largest lag in bytes over every master's shards.
    bytes: Histogram<u64>,
    /// Per sample: the largest lag in ms.
    ms: Histogram<u64>,
    last_bytes: u64,
    slaves: u64,
}

/// What the sampler saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LagReport {
    pub samples: u64,
    /// Slaves connected at the last sample (sum over shards of every master).
    pub slaves: u64,
    pub bytes_p50: u64,
    pub bytes_p99: u64,
    pub bytes_max: u64,
    pub ms_p50: u64,
    pub ms_p99: u64,
    pub ms_max: u64,
}

impl LagSampler {
    /// Starts sampling the masters of `brokers` (none: nothing is sampled).
    pub fn start(admin: Option<Admin>, brokers: &[BrokerView]) -> LagSampler {
        let masters: Vec<SocketAddr> = brokers
            .iter()
            .filter(|b| b.is_master())
            .map(|b| b.addr)
            .collect();
        let hist = || Histogram::new_with_bounds(1, u64::MAX >> 2, 3).expect("valid bounds");
        let state = Arc::new(Mutex::new(LagState {
            bytes: hist(),
            ms: hist(),
            last_bytes: 0,
            slaves: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let task = match admin {
            Some(admin) => tokio::spawn(sample_loop(
                admin,
                masters,
                Arc::clone(&state),
                Arc::clone(&stop),
            )),
            None => tokio::spawn(async {}),
        };
        LagSampler { stop, task, state }
    }

    /// The lag in bytes at the last sample (for the progress line); `None` without slaves.
    pub fn last_bytes(&self) -> Option<u64> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (s.slaves > 0).then_some(s.last_bytes)
    }

    /// Stops sampling; what was seen (`None` when no master had a slave).
    pub fn finish(&self) -> Option<LagReport> {
        self.stop.store(true, Ordering::Release);
        self.task.abort();
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.slaves == 0 && s.bytes.is_empty() {
            return None;
        }
        let q = |h: &Histogram<u64>, q: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            }
        };
        Some(LagReport {
            samples: s.bytes.len(),
            slaves: s.slaves,
            bytes_p50: q(&s.bytes, 0.5),
            bytes_p99: q(&s.bytes, 0.99),
            bytes_max: s.bytes.max(),
            ms_p50: q(&s.ms, 0.5),
            ms_p99: q(&s.ms, 0.99),
            ms_max: s.ms.max(),
        })
    }
}

async fn sample_loop(
    admin: Admin,
    masters: Vec<SocketAddr>,
    state: Arc<Mutex<LagState>>,
    stop: Arc<AtomicBool>,
) {
    if masters.is_empty() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !stop.load(Ordering::Acquire) {
        tick.tick().await;
        let (mut bytes, mut ms, mut slaves) = (0u64, 0u64, 0u64);
        for &m in &masters {
            let Ok(info) = admin.runtime_info(m).await else {
                continue;
            };
            for (k, v) in &info.extra {
                let Some(rest) = k.strip_prefix("shard.") else {
                    continue;
                };
                let n: u64 = v.parse().unwrap_or(0);
                if rest.ends_with(".ha_lag_bytes") {
                    bytes = bytes.max(n);
                } else if rest.ends_with(".ha_lag_ms") {
                    ms = ms.max(n);
                } else if rest.ends_with(".ha_slaves") {
                    slaves += n;
                }
            }
        }
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        s.slaves = slaves;
        s.last_bytes = bytes;
        if slaves > 0 {
            s.bytes.saturating_record(bytes);
            s.ms.saturating_record(ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: u64, role: &str, flush: &str) -> BrokerView {
        BrokerView {
            name: "broker-a".into(),
            id,
            addr: "127.0.0.1:1".parse().unwrap(),
            role: role.into(),
            flush: flush.into(),
            shards: 2,
        }
    }

    #[test]
    fn durability_names() {
        assert_eq!(
            durability(&[view(0, "ASYNC_MASTER", "ASYNC_FLUSH")]),
            "acked from page cache"
        );
        assert_eq!(
            durability(&[view(0, "ASYNC_MASTER", "SYNC_FLUSH")]),
            "acked after fdatasync"
        );
        assert_eq!(
            durability(&[
                view(0, "SYNC_MASTER", "ASYNC_FLUSH"),
                view(1, "SLAVE", "ASYNC_FLUSH")
            ]),
            "acked after slave"
        );
        assert_eq!(durability(&[]), "unknown (no master answered)");
    }
}
