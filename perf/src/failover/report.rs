//! What `ringmq-perf failover` prints (stdout) and writes with `--json`: the kills (who was
//! killed, who took over in which epoch, the failover time), failover time percentiles, the
//! acknowledged sends per second around each kill, and the read-back check.
//!
//! JSON fields: `config` {...}; `kills` [{`n`, `killed`, `killed_addr`, `at_ms`,
//! `epoch_before`, `new_master`, `new_addr`, `epoch`, `from_sync_state_set`, `elected_ms`,
//! `failover_ms`, `failed_sends`, `rejoin_ms`}]; `failover_ms` {`p50`, `p90`, `max`, `min`}
//! and `elected_ms` (the same over the kills); `acked`, `failed`, `not_ok`, `errors`
//! {kind: count}; `lost`, `duplicates`, `misplaced`, `unlisted`, `read`, `lost_examples`;
//! `replicas_agree`; `per_second` (acknowledged sends in each second of the run);
//! `around_kills` [{`n`, `from_s`, `sends_per_s` [..]}]; `elapsed_s`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::args::FailoverArgs;
use super::deploy::BROKER_NAME;
use super::load::BUCKET_MS;
use crate::verify::Verdict;

/// One kill and what followed.
#[derive(Debug, Clone)]
pub struct KillRecord {
    pub n: u32,
    pub killed: u64,
    pub killed_addr: SocketAddr,
    /// When, in ms since the load started.
    pub at_ms: u64,
    pub epoch_before: u32,
    pub new_master: u64,
    pub new_addr: SocketAddr,
    pub epoch: u32,
    /// The new master was in the SyncStateSet before the kill.
    pub from_sync_state_set: bool,
    /// Kill to the first controller answer naming another master (polled every 20 ms).
    pub elected_ms: f64,
    /// Kill to the first send acknowledged by the new master.
    pub failover_ms: f64,
    /// Sends that failed from the kill to that acknowledgement.
    pub failed_sends: u64,
    /// Restart of the killed broker to a full SyncStateSet.
    pub rejoin_ms: f64,
    pub master_after_rejoin: Option<u64>,
}

impl KillRecord {
    /// One line for the progress output.
    pub fn line(&self) -> String {
        format!(
            "kill {}: broker {} ({}) killed; broker {} ({}) master in epoch {} (was {}), elected \
             {:.0} ms and first send acknowledged {:.0} ms after the kill; {} sends failed \
             meanwhile; the killed broker back in the SyncStateSet {:.0} ms after its restart",
            self.n,
            self.killed,
            self.killed_addr,
            self.new_master,
            self.new_addr,
            self.epoch,
            self.epoch_before,
            self.elected_ms,
            self.failover_ms,
            self.failed_sends,
            self.rejoin_ms
        )
    }

    fn json(&self) -> Value {
        json!({
            "n": self.n,
            "killed": self.killed,
            "killed_addr": self.killed_addr.to_string(),
            "at_ms": self.at_ms,
            "epoch_before": self.epoch_before,
            "new_master": self.new_master,
            "new_addr": self.new_addr.to_string(),
            "epoch": self.epoch,
            "from_sync_state_set": self.from_sync_state_set,
            "elected_ms": round1(self.elected_ms),
            "failover_ms": round1(self.failover_ms),
            "failed_sends": self.failed_sends,
            "rejoin_ms": round1(self.rejoin_ms),
            "master_after_rejoin": self.master_after_rejoin,
        })
    }
}

/// The read-back check.
#[derive(Debug, Clone)]
pub struct Readback {
    pub queues: usize,
    /// Messages read (perf's and any other).
    pub read: u64,
    pub verdict: Verdict,
    /// Messages read that the acknowledgement log does not list (sends that failed or were
    /// in flight, whose outcome the producer did not learn).
    pub unlisted: u64,
    pub lost_examples: Vec<(u64, u64, String, u64)>,
    pub torn_tail: bool,
}

/// The run as configured.
#[derive(Debug, Clone)]
pub struct Config {
    pub kills: u32,
    pub role: &'static str,
    pub shards: u16,
    pub producers: u32,
    pub inflight: u32,
    pub size: usize,
    pub queues: u32,
    pub broker_set: Vec<String>,
    pub rate: u32,
    pub reconnect_backoff_max: Option<Duration>,
    pub settle: Duration,
    pub data: PathBuf,
    pub data_kept: bool,
    pub before_s: u32,
    pub after_s: u32,
}

impl Config {
    pub fn of(a: &FailoverArgs, dir: &Path, temporary: bool) -> Config {
        Config {
            kills: a.kills,
            role: if a.async_master {
                "ASYNC_MASTER"
            } else {
                "SYNC_MASTER, allAckInSyncStateSet=true"
            },
            shards: a.shards,
            producers: a.producers,
            inflight: a.inflight,
            size: a.size,
            queues: a.queues,
            broker_set: a.broker_set.clone(),
            rate: a.rate,
            reconnect_backoff_max: a.reconnect_backoff_max,
            settle: a.settle,
            data: dir.to_path_buf(),
            data_kept: !temporary,
            before_s: a.before_s,
            after_s: a.after_s,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    pub config: Config,
    pub kills: Vec<KillRecord>,
    pub acked: u64,
    pub failed: u64,
    pub not_ok: u64,
    pub errors: BTreeMap<String, u64>,
    /// Acknowledged sends per `BUCKET_MS` of the run.
    pub buckets: Vec<u32>,
    pub elapsed: Duration,
    pub replicas_agree: bool,
    pub readback: Readback,
    pub final_master: Option<u64>,
}

/// Nearest-rank percentiles of a list.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spread {
    pub p50: f64,
    pub p90: f64,
    pub max: f64,
    pub min: f64,
}

impl Spread {
    pub fn of(values: impl Iterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.collect();
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Spread {
            p50: rank(0.5),
            p90: rank(0.9),
            max: v[v.len() - 1],
            min: v[0],
        }
    }

    fn json(&self) -> Value {
        json!({
            "p50": round1(self.p50),
            "p90": round1(self.p90),
            "max": round1(self.max),
            "min": round1(self.min),
        })
    }
}

const BUCKETS_PER_S: usize = (1000 / BUCKET_MS) as usize;

impl Report {
    pub fn failover(&self) -> Spread {
        Spread::of(self.kills.iter().map(|k| k.failover_ms))
    }

    pub fn elected(&self) -> Spread {
        Spread::of(self.kills.iter().map(|k| k.elected_ms))
    }

    /// Acknowledged sends in each whole second of the run.
    pub fn per_second(&self) -> Vec<u64> {
        self.buckets
            .chunks(BUCKETS_PER_S)
            .map(|c| c.iter().map(|&n| u64::from(n)).sum())
            .collect()
    }

    /// Acknowledged sends per second from `before_s` seconds before the kill to `after_s`
    /// seconds after it (second 0 begins at the kill).
    pub fn around(&self, k: &KillRecord) -> Vec<u64> {
        let kill = (k.at_ms / BUCKET_MS) as i64;
        let from = -(i64::from(self.config.before_s));
        (from..i64::from(self.config.after_s))
            .map(|s| {
                let lo = kill + s * BUCKETS_PER_S as i64;
                (lo..lo + BUCKETS_PER_S as i64)
                    .filter(|&i| i >= 0)
                    .map(|i| u64::from(self.buckets.get(i as usize).copied().unwrap_or(0)))
                    .sum()
            })
            .collect()
    }

    pub fn text(&self) -> String {
        let c = &self.config;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "failover: {} kills (SIGKILL) of the master of {BROKER_NAME} (3 brokers, {}), {} \
             shard(s) per broker",
            self.kills.len(),
            c.role,
            c.shards
        );
        let _ = writeln!(
            o,
            "load: {} producer(s) x {} sends in flight, {} B bodies, {} queues, closed loop{}{}",
            c.producers,
            c.inflight,
            c.size,
            c.queues,
            if c.rate > 0 {
                format!(" capped at {} sends/s", c.rate)
            } else {
                String::new()
            },
            c.reconnect_backoff_max.map_or(String::new(), |d| format!(
                ", client reconnect backoff at most {} ms",
                d.as_millis()
            ))
        );
        let sets = if c.broker_set.is_empty() {
            "none (node defaults)".to_string()
        } else {
            c.broker_set.join(" ")
        };
        let _ = writeln!(o, "broker settings given: {sets}");
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:>4}  {:>6}  {:>6}  {:>9}  {:>12}  {:>12}  {:>12}  {:>12}",
            "kill",
            "killed",
            "master",
            "epoch",
            "elected(ms)",
            "failover(ms)",
            "failed sends",
            "rejoin(ms)"
        );
        for k in &self.kills {
            let _ = writeln!(
                o,
                "{:>4}  {:>6}  {:>6}  {:>9}  {:>12.0}  {:>12.0}  {:>12}  {:>12.0}{}",
                k.n,
                k.killed,
                k.new_master,
                format!("{} -> {}", k.epoch_before, k.epoch),
                k.elected_ms,
                k.failover_ms,
                k.failed_sends,
                k.rejoin_ms,
                if k.from_sync_state_set {
                    ""
                } else {
                    "  (new master was NOT in the SyncStateSet)"
                }
            );
        }
        let f = self.failover();
        let e = self.elected();
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "failover time (kill to the first send acknowledged by the new master, as the \
             producer saw it), {} kills: p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms, min {:.0} ms",
            self.kills.len(),
            f.p50,
            f.p90,
            f.max,
            f.min
        );
        let _ = writeln!(
            o,
            "election (kill to the controllers naming the new master, polled every 20 ms): p50 \
             {:.0} ms, max {:.0} ms",
            e.p50, e.max
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "acknowledged sends per second around each kill (column +0s begins at the kill):"
        );
        let mut head = format!("{:>4}", "kill");
        for s in -(c.before_s as i64)..i64::from(c.after_s) {
            let _ = write!(head, "  {:>8}", format!("{s:+}s"));
        }
        let _ = writeln!(o, "{head}");
        for k in &self.kills {
            let mut line = format!("{:>4}", k.n);
            for n in self.around(k) {
                let _ = write!(line, "  {n:>8}");
            }
            let _ = writeln!(o, "{line}  (sends/s)");
        }
        let _ = writeln!(o);
        let r = &self.readback;
        let v = &r.verdict;
        let _ = writeln!(
            o,
            "sends: {} acknowledged, {} failed, {} stored without SEND_OK, in {:.1} s ({:.0} \
             acknowledged sends/s on average)",
            self.acked,
            self.failed,
            self.not_ok,
            self.elapsed.as_secs_f64(),
            self.acked as f64 / self.elapsed.as_secs_f64().max(1e-9)
        );
        if !self.errors.is_empty() {
            let kinds: Vec<String> = self
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let _ = writeln!(o, "failed sends by kind: {}", kinds.join(", "));
        }
        let _ = writeln!(
            o,
            "read back from the master (broker {}): {} messages from {} queues; replicas' \
             CommitLogs end at the same offsets: {}",
            self.final_master.map_or("?".to_string(), |m| m.to_string()),
            r.read,
            r.queues,
            if self.replicas_agree { "yes" } else { "NO" }
        );
        let _ = writeln!(
            o,
            "verify: {} acknowledged, {} found, lost {}, duplicates {}, misplaced {} (found at \
             another offset than acknowledged), unlisted {} (stored, not acknowledged to the \
             producer){}",
            v.acked,
            v.received,
            v.lost,
            v.duplicates,
            v.misplaced,
            r.unlisted,
            if r.torn_tail {
                "; the log's last line was torn"
            } else {
                ""
            }
        );
        for (p, s, q, off) in &r.lost_examples {
            let _ = writeln!(
                o,
                "  lost: producer {p:016x} sequence {s}, acknowledged at {q} offset {off}"
            );
        }
        if c.data_kept {
            let _ = writeln!(o, "data and logs: {}", c.data.display());
        }
        o
    }

    pub fn json(&self) -> Value {
        let c = &self.config;
        let r = &self.readback;
        let v = &r.verdict;
        let around: Vec<Value> = self
            .kills
            .iter()
            .map(|k| {
                json!({
                    "n": k.n,
                    "from_s": -(i64::from(c.before_s)),
                    "sends_per_s": self.around(k),
                })
            })
            .collect();
        json!({
            "mode": "failover",
            "config": {
                "kills": c.kills,
                "role": c.role,
                "shards": c.shards,
                "producers": c.producers,
                "inflight": c.inflight,
                "size": c.size,
                "queues": c.queues,
                "broker_set": c.broker_set,
                "rate": c.rate,
                "reconnect_backoff_max_ms": c.reconnect_backoff_max.map(|d| d.as_millis() as u64),
                "settle_s": c.settle.as_secs_f64(),
                "data": c.data_kept.then(|| c.data.display().to_string()),
            },
            "kills": self.kills.iter().map(KillRecord::json).collect::<Vec<_>>(),
            "failover_ms": self.failover().json(),
            "elected_ms": self.elected().json(),
            "acked": self.acked,
            "failed": self.failed,
            "not_ok": self.not_ok,
            "errors": self.errors,
            "read": r.read,
            "lost": v.lost,
            "duplicates": v.duplicates,
            "misplaced": v.misplaced,
            "unlisted": r.unlisted,
            "lost_examples": r.lost_examples.iter().map(|(p, s, q, o)| json!({
                "producer": format!("{p:016x}"), "seq": s, "queue": q, "offset": o,
            })).collect::<Vec<_>>(),
            "replicas_agree": self.replicas_agree,
            "final_master": self.final_master,
            "per_second": self.per_second(),
            "around_kills": around,
            "elapsed_s": round1(self.elapsed.as_secs_f64()),
        })
    }
}

/// Bucket width of the HTML chart.
const CHART_WINDOW_MS: u64 = 100;

impl Report {
    /// One page: the text report, the kills with their times in the run, and a chart of
    /// acknowledged sends per second in 100 ms windows over the whole run.
    pub fn html(&self) -> String {
        let per = (CHART_WINDOW_MS / BUCKET_MS) as usize;
        let scale = 1000.0 / CHART_WINDOW_MS as f64;
        let points: Vec<(f64, f64, String)> = self
            .buckets
            .chunks(per)
            .enumerate()
            .map(|(i, c)| {
                let t_s = (i as u64 * CHART_WINDOW_MS) as f64 / 1000.0;
                let rate = c.iter().map(|&n| f64::from(n)).sum::<f64>() * scale;
                (t_s, rate, format!("{t_s:.1} s: {rate:.0} sends/s"))
            })
            .collect();
        let mut body = String::new();
        let _ = writeln!(
            body,
            "<h2>Acknowledged sends per second, 100 ms windows</h2>\n<p>Kills at: {}</p>",
            self.kills
                .iter()
                .map(|k| format!("{:.1} s (kill {})", k.at_ms as f64 / 1000.0, k.n))
                .collect::<Vec<_>>()
                .join(", ")
        );
        body.push_str(&crate::html::line_chart(
            "acknowledged",
            ("time since the load started (s)", "acknowledged (sends/s)"),
            "acknowledged",
            points,
        ));
        let _ = writeln!(
            body,
            "<h2>Report</h2>\n<pre>{}</pre>",
            crate::html::esc(&self.text())
        );
        crate::html::plain_page("ringmq-perf failover", &body)
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Spread::of([5.0, 1.0, 3.0, 2.0, 4.0].into_iter());
        assert_eq!((s.p50, s.p90, s.max, s.min), (3.0, 5.0, 5.0, 1.0));
        let s = Spread::of([10.0, 20.0].into_iter());
        assert_eq!((s.p50, s.max), (10.0, 20.0));
        assert_eq!(Spread::of(std::iter::empty()).max, 0.0);
    }
}
