//! `txn` mode: transactional messages end to end. `producers` transaction producers (one
//! producer group per run) with `inflight` lanes each send half messages; the executor
//! decides each transaction from its producer id and sequence ([`TxnPlan::planned`]); a
//! consumer group reads the topic; after the sends the run settles (every transaction
//! decided, every committed message delivered, or `--settle-timeout`).
//!
//! What perf knows of each transaction is one byte in [`Decisions`] (per producer, indexed
//! by sequence): the executor's decision (it runs only once the half is stored), whether
//! the broker acknowledged its END_TRANSACTION, and the checker's answer. The checker
//! answers the executor's decision when there is one (its END_TRANSACTION was lost),
//! parity for an Unknown one (even sequence: commit), and rollback when the executor never
//! ran (the half's send failed: no local transaction happened). A transaction is decided
//! once its END_TRANSACTION was acknowledged or the checker answered commit or rollback.
//!
//! `--verify FILE` appends one line per decision as it becomes known (producer, sequence,
//! commit|rollback, executor|check), and the check at the end reads it back; without it the
//! check uses the same decisions from memory. Lost: decided commit, never delivered.
//! `rolled_back_delivered`: decided rollback, delivered.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{
    EndOutcome, Message, StartPosition, TransactionCheck, TransactionProducer, TransactionState,
};
use serde_json::{json, Value};

use crate::args::TxnArgs;
use crate::consume::{Consumers, Deliveries, RecvPlan};
use crate::modes::{self, Setup, DEFAULT_DURATION, EXIT_FAILED, EXIT_LOST};
use crate::payload::{self, BodyMaker, Head};
use crate::report::{self, Context};
use crate::stats::{us_since, Meter};

/// The executor's decision (low two bits of a [`Decisions`] byte).
const EXEC_MASK: u8 = 0b11;
const EXEC_COMMIT: u8 = 1;
const EXEC_ROLLBACK: u8 = 2;
const EXEC_UNKNOWN: u8 = 3;
/// The broker acknowledged the executor's END_TRANSACTION.
const END_ACKED: u8 = 1 << 2;
/// The checker answered commit / rollback.
const CHECK_COMMIT: u8 = 1 << 3;
const CHECK_ROLLBACK: u8 = 1 << 4;
/// How often the settle phase looks at the decisions.
const SETTLE_POLL: Duration = Duration::from_millis(200);

/// Which outcome the executor chooses.
#[derive(Debug, Clone, Copy)]
pub struct TxnPlan {
    pub rollback: f64,
    pub unknown: f64,
}

impl TxnPlan {
    /// The executor's decision for a message: rollback with `rollback`, unknown with
    /// `unknown`, commit otherwise, from a hash of producer id and sequence (the same in
    /// every process).
    pub fn planned(&self, producer: u64, seq: u64) -> TransactionState {
        let mut x = producer ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.rollback {
            TransactionState::Rollback
        } else if u < self.rollback + self.unknown {
            TransactionState::Unknown
        } else {
            TransactionState::Commit
        }
    }
}

/// The checker's answer for a transaction in state `b` with sequence `seq`.
fn check_answer(b: u8, seq: u64) -> TransactionState {
    match b & EXEC_MASK {
        EXEC_COMMIT => TransactionState::Commit,
        EXEC_UNKNOWN if seq % 2 == 0 => TransactionState::Commit,
        EXEC_ROLLBACK | EXEC_UNKNOWN => TransactionState::Rollback,
        // The executor never ran: the half's send failed, nothing happened locally.
        _ => TransactionState::Rollback,
    }
}

/// `Some(true)`: decided commit; `Some(false)`: decided rollback; `None`: not decided.
fn decided(b: u8) -> Option<bool> {
    if b & END_ACKED != 0 {
        return Some(b & EXEC_MASK == EXEC_COMMIT);
    }
    if b & CHECK_COMMIT != 0 {
        return Some(true);
    }
    if b & CHECK_ROLLBACK != 0 {
        return Some(false);
    }
    None
}

/// What perf knows of every transaction of the run.
#[derive(Debug)]
pub struct Decisions {
    run_id: u64,
    /// Per producer index, one byte per sequence.
    per: Vec<Mutex<Vec<u8>>>,
    /// Check-backs answered.
    checked: AtomicU64,
    log: Option<DecisionLog>,
    log_error: Mutex<Option<String>>,
}

/// Totals over [`Decisions`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub committed: u64,
    pub rolled_back: u64,
    /// The executor answered Unknown.
    pub unknown: u64,
    /// Half stored, not decided.
    pub pending: u64,
    /// Half not acknowledged and never checked (its send failed).
    pub not_stored: u64,
}

impl Decisions {
    fn new(run_id: u64, producers: u32, log: Option<DecisionLog>) -> Decisions {
        Decisions {
            run_id,
            per: (0..producers).map(|_| Mutex::new(Vec::new())).collect(),
            checked: AtomicU64::new(0),
            log,
            log_error: Mutex::new(None),
        }
    }

    /// Changes the byte of (producer index, seq); returns it before and after.
    fn update(&self, idx: usize, seq: u64, f: impl FnOnce(u8) -> u8) -> Option<(u8, u8)> {
        let mut v = self.per.get(idx)?.lock().unwrap_or_else(|p| p.into_inner());
        let i = usize::try_from(seq).ok()?;
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        let before = v[i];
        v[i] = f(before);
        Some((before, v[i]))
    }

    /// Records a decision that just became known (and logs it).
    fn note(&self, idx: usize, seq: u64, f: impl FnOnce(u8) -> u8, by: &str) {
        let Some((before, after)) = self.update(idx, seq, f) else {
            return;
        };
        if decided(before).is_some() {
            return;
        }
        let (Some(commit), Some(log)) = (decided(after), &self.log) else {
            return;
        };
        let producer = (self.run_id << 16) | idx as u64;
        if let Err(e) = log.append(producer, seq, commit, by) {
            let mut slot = self.log_error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| e.to_string());
        }
    }

    /// The producer index of a producer id of this run.
    fn index(&self, producer: u64) -> Option<usize> {
        (producer >> 16 == self.run_id)
            .then_some((producer & 0xFFFF) as usize)
            .filter(|&i| i < self.per.len())
    }

    /// Answers a check-back of `head`'s transaction.
    fn check(&self, head: Option<Head>) -> TransactionState {
        self.checked.fetch_add(1, Ordering::Relaxed);
        let Some((idx, seq)) = head.and_then(|h| Some((self.index(h.producer)?, h.seq))) else {
            // Not a message of this run: nothing was decided for it here.
            return TransactionState::Rollback;
        };
        let b = self.update(idx, seq, |b| b).map_or(0, |(b, _)| b);
        let answer = check_answer(b, seq);
        let bit = if answer == TransactionState::Commit {
            CHECK_COMMIT
        } else {
            CHECK_ROLLBACK
        };
        self.note(idx, seq, |b| b | bit, "check");
        answer
    }

    fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for v in &self.per {
            for &b in v.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                if b & EXEC_MASK == EXEC_UNKNOWN {
                    t.unknown += 1;
                }
                match decided(b) {
                    Some(true) => t.committed += 1,
                    Some(false) => t.rolled_back += 1,
                    None if b & EXEC_MASK != 0 => t.pending += 1,
                    None => t.not_stored += 1,
                }
            }
        }
        t
    }

    /// Every decision: (producer, seq) -> commit.
    fn decisions(&self) -> HashMap<(u64, u64), bool> {
        let mut out = HashMap::new();
        for (idx, v) in self.per.iter().enumerate() {
            let producer = (self.run_id << 16) | idx as u64;
            for (seq, &b) in v
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .enumerate()
            {
                if let Some(c) = decided(b) {
                    out.insert((producer, seq as u64), c);
                }
            }
        }
        out
    }
}

/// Decisions by (producer, seq): true for commit.
pub type DecisionMap = HashMap<(u64, u64), bool>;

const LOG_HEADER: &str =
    "# ringmq-perf txn verify v1: producer sequence commit|rollback executor|check\n";

/// The decision log of `--verify`: one line per decision, appended as it becomes known.
#[derive(Debug)]
pub struct DecisionLog {
    file: Mutex<File>,
}

impl DecisionLog {
    pub fn create(path: &Path) -> io::Result<DecisionLog> {
        let mut file = File::create(path)?;
        file.write_all(LOG_HEADER.as_bytes())?;
        Ok(DecisionLog {
            file: Mutex::new(file),
        })
    }

    fn append(&self, producer: u64, seq: u64, commit: bool, by: &str) -> io::Result<()> {
        let what = if commit { "commit" } else { "rollback" };
        let line = format!("{producer:016x} {seq} {what} {by}\n");
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(line.as_bytes())
    }

    /// Reads a log back: (producer, seq) -> commit. A malformed last line (torn) is
    /// skipped; a malformed line before it is an error.
    pub fn load(path: &Path) -> Result<(DecisionMap, bool), String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines: Vec<String> = BufReader::new(file)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut out = HashMap::new();
        let mut torn = false;
        for (n, line) in lines.iter().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            match parse_line(line) {
                Some((p, s, c)) => {
                    out.insert((p, s), c);
                }
                None if n + 1 == lines.len() => torn = true,
                None => return Err(format!("{}:{}: bad line {line:?}", path.display(), n + 1)),
            }
        }
        Ok((out, torn))
    }
}

fn parse_line(line: &str) -> Option<(u64, u64, bool)> {
    let mut w = line.split_whitespace();
    let p = u64::from_str_radix(w.next()?, 16).ok()?;
    let s = w.next()?.parse().ok()?;
    let c = match w.next()? {
        "commit" => true,
        "rollback" => false,
        _ => return None,
    };
    matches!(w.next()?, "executor" | "check").then_some((p, s, c))
}

/// The check of deliveries against decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnVerdict {
    /// Decided commit.
    pub acked: u64,
    /// Decided commit, delivered.
    pub received: u64,
    /// Decided commit, never delivered.
    pub lost: u64,
    /// Deliveries beyond a message's first.
    pub duplicates: u64,
    /// Decided rollback, delivered.
    pub rolled_back_delivered: u64,
    /// Delivered messages of this run with no decision (their half's send failed).
    pub unlisted: u64,
}

/// `delivered`: successful deliveries per (producer, seq).
pub fn verdict(
    decisions: &HashMap<(u64, u64), bool>,
    delivered: &HashMap<(u64, u64), u64>,
) -> TxnVerdict {
    let mut v = TxnVerdict::default();
    for (key, &commit) in decisions {
        let n = delivered.get(key).copied().unwrap_or(0);
        if commit {
            v.acked += 1;
            if n > 0 {
                v.received += 1;
            } else {
                v.lost += 1;
            }
        } else if n > 0 {
            v.rolled_back_delivered += 1;
        }
    }
    for (key, &n) in delivered {
        v.duplicates += n.saturating_sub(1);
        if !decisions.contains_key(key) {
            v.unlisted += 1;
        }
    }
    v
}

/// Shared by the lanes.
struct Lanes {
    topic: String,
    maker: BodyMaker,
    meter: Arc<Meter>,
    decisions: Arc<Decisions>,
    stop: Arc<AtomicBool>,
    remaining: Option<AtomicU64>,
    deadline: Option<Instant>,
    errors: Mutex<BTreeMap<String, u64>>,
    /// END_TRANSACTION not acknowledged (left to the check-back).
    end_failed: AtomicU64,
    /// Next sequence per producer index, shared by its lanes (dense from 0, so
    /// [`Decisions`] is a vector per producer).
    next_seq: Vec<AtomicU64>,
}

impl Lanes {
    fn claim(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        match &self.remaining {
            None => true,
            Some(r) => r
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    fn error(&self, kind: String) {
        *self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_default() += 1;
    }
}

type Producer = TransactionProducer<(usize, u64)>;

/// Runs `txn`; returns the exit code.
pub async fn run(a: TxnArgs, namesrv: String, embedded: bool) -> Result<i32, String> {
    let c = &a.common;
    let commit = a
        .commit_ratio
        .unwrap_or(1.0 - a.rollback_ratio - a.unknown_ratio);
    if commit + a.rollback_ratio + a.unknown_ratio > 1.0 + 1e-9 {
        return Err(format!(
            "--commit-ratio {commit} + --rollback-ratio {} + --unknown-ratio {} add up to more than 1",
            a.rollback_ratio, a.unknown_ratio
        ));
    }
    let plan = TxnPlan {
        rollback: a.rollback_ratio,
        unknown: a.unknown_ratio,
    };
    let mut setup = Setup::new(c, &namesrv, true).await?;
    let log = c
        .verify
        .as_deref()
        .map(|p| DecisionLog::create(p).map_err(|e| format!("verify log {}: {e}", p.display())))
        .transpose()?;
    let decisions = Arc::new(Decisions::new(setup.run_id, a.producers, log));
    let producer_group = format!("perf-txn-{:012x}", setup.run_id);
    let recv = RecvPlan {
        namesrv: namesrv.clone(),
        topic: c.topic.clone(),
        group: a
            .group
            .clone()
            .unwrap_or_else(|| format!("perf-{:012x}", setup.run_id)),
        consumers: a.consumers,
        from: StartPosition::Last,
        pull_batch: a.pull_batch,
        verify: true,
        run_id: setup.run_id,
        max_reconsume: None,
        orderly: false,
        single: false,
    };
    let recv_meter = Arc::new(Meter::default());
    let sink = Arc::new(Deliveries::new(Arc::clone(&recv_meter), true, None));
    let consumers = Consumers::start(&recv, Arc::clone(&sink)).await?;
    let producers = start_producers(
        &a,
        &namesrv,
        &producer_group,
        plan,
        &decisions,
        setup.run_id,
    )
    .await?;
    let meter = Arc::new(Meter::default());
    let lag = Arc::new(crate::broker_info::LagSampler::start(None, &[]));
    let progress_stop = Arc::new(AtomicBool::new(false));
    let meters = vec![
        ("txn", Arc::clone(&meter)),
        ("recv", Arc::clone(&recv_meter)),
    ];
    let progress = modes::progress(c, meters, &lag, &progress_stop);
    setup.mark();
    let lanes = Arc::new(Lanes {
        topic: c.topic.clone(),
        maker: BodyMaker::new(a.size),
        meter: Arc::clone(&meter),
        decisions: Arc::clone(&decisions),
        stop: Arc::clone(&setup.stop),
        remaining: a.length.count.map(AtomicU64::new),
        deadline: match (a.length.count, a.length.duration) {
            (_, Some(d)) => Some(Instant::now() + d),
            (None, None) => Some(Instant::now() + DEFAULT_DURATION),
            (Some(_), None) => None,
        },
        errors: Mutex::new(BTreeMap::new()),
        end_failed: AtomicU64::new(0),
        next_seq: (0..a.producers).map(|_| AtomicU64::new(0)).collect(),
    });
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (idx, (id, p)) in producers.iter().enumerate() {
        for _ in 0..a.inflight {
            tasks.push(tokio::spawn(lane(Arc::clone(&lanes), p.clone(), idx, *id)));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let send_elapsed = started.elapsed();
    let settle_started = Instant::now();
    let settled = settle(&decisions, &sink, a.settle_timeout, &setup.stop).await;
    let settle_s = settle_started.elapsed().as_secs_f64();
    let config = json!({
        "size": a.size, "producers": a.producers, "inflight": a.inflight,
        "count": a.length.count, "duration_s": a.length.duration.map(|d| d.as_secs_f64()),
        "commit_ratio": report_round(commit), "rollback_ratio": a.rollback_ratio, "unknown_ratio": a.unknown_ratio,
        "settle_timeout_s": a.settle_timeout.as_secs_f64(), "producer_group": producer_group,
        "group": recv.group, "consumers": a.consumers, "queues": c.queues, "threads": c.threads,
        "verify": c.verify.as_ref().map(|p| p.display().to_string()),
    });
    let ctx: Context = setup.context("txn", c, config, embedded);
    progress_stop.store(true, Ordering::Relaxed);
    let _ = progress.await;
    consumers.shutdown().await;
    for (_, p) in &producers {
        p.shutdown().await;
    }
    let totals = decisions.totals();
    let (decided_map, torn, source) = match &c.verify {
        Some(path) => {
            let (m, torn) = DecisionLog::load(path)?;
            (m, torn, format!("the log {}", path.display()))
        }
        None => (decisions.decisions(), false, "memory".to_string()),
    };
    let delivered = delivered_counts(&sink);
    let v = verdict(&decided_map, &delivered);
    let summary = meter.summary(send_elapsed);
    let recv_summary = recv_meter.summary(sink.active());
    let checked = decisions.checked.load(Ordering::Relaxed);
    let errors = lanes
        .errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let end_failed = lanes.end_failed.load(Ordering::Relaxed);
    let mut notes = vec![
        format!(
            "txn: committed {} rolled_back {} unknown {} checked {} pending {} (END_TRANSACTION not acknowledged: {end_failed}; halves not stored: {}); settled {} after {settle_s:.1} s",
            totals.committed, totals.rolled_back, totals.unknown, checked, totals.pending, totals.not_stored,
            if settled { "yes" } else { "no (settle timeout)" }
        ),
        "txn latency: half send + executor + END_TRANSACTION round trip; recv latency: receipt minus the send time in the message".to_string(),
        format!(
            "verify (decisions from {source}): acked {} received {} lost {} duplicates {} rolled_back_delivered {} unlisted {}{}",
            v.acked, v.received, v.lost, v.duplicates, v.rolled_back_delivered, v.unlisted,
            if torn { "; the log's torn last line was skipped" } else { "" }
        ),
    ];
    for (k, n) in &errors {
        notes.push(format!("errors {k}: {n} transactions"));
    }
    let log_error = decisions
        .log_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(e) = &log_error {
        notes.push(format!("verify log: {e}"));
    }
    let mut extra = serde_json::Map::new();
    extra.insert(
        "txn".into(),
        json!({
            "committed": totals.committed, "rolled_back": totals.rolled_back,
            "unknown": totals.unknown, "checked": checked, "pending": totals.pending,
            "not_stored": totals.not_stored, "end_failed": end_failed,
            "settled": settled, "settle_s": report_round(settle_s),
        }),
    );
    extra.insert("acked".into(), json!(v.acked));
    extra.insert("received".into(), json!(v.received));
    extra.insert("lost".into(), json!(v.lost));
    extra.insert("duplicates".into(), json!(v.duplicates));
    extra.insert(
        "rolled_back_delivered".into(),
        json!(v.rolled_back_delivered),
    );
    extra.insert("unlisted".into(), json!(v.unlisted));
    extra.insert("verify_torn_tail".into(), json!(torn));
    extra.insert("error_kinds".into(), json!(errors));
    extra.insert("recv".into(), report::summary_json(&recv_summary));
    print!(
        "{}",
        report::table(&ctx, &[("txn", &summary), ("recv", &recv_summary)], &notes)
    );
    modes::write_json(c, report::document(&ctx, &summary, Value::Object(extra)))?;
    Ok(if v.lost > 0 || v.rolled_back_delivered > 0 {
        EXIT_LOST
    } else if !settled || log_error.is_some() {
        EXIT_FAILED
    } else {
        0
    })
}

/// `x` to 3 decimals (for the JSON).
fn report_round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

async fn start_producers(
    a: &TxnArgs,
    namesrv: &str,
    group: &str,
    plan: TxnPlan,
    decisions: &Arc<Decisions>,
    run_id: u64,
) -> Result<Vec<(u64, Producer)>, String> {
    let mut list = Vec::new();
    for i in 0..a.producers {
        let id = (run_id << 16) | u64::from(i);
        let exec_decisions = Arc::clone(decisions);
        let check_decisions = Arc::clone(decisions);
        let p: Producer = TransactionProducer::builder()
            .group(group)
            .name_servers(namesrv)
            .instance_name(format!("perf-{id:016x}"))
            .send_timeout(a.send_timeout)
            .request_timeout(a.send_timeout)
            .heartbeat_interval(a.heartbeat_interval)
            .executor(move |_half, (idx, seq): (usize, u64)| {
                let state = plan.planned((run_id << 16) | idx as u64, seq);
                let bits = match state {
                    TransactionState::Commit => EXEC_COMMIT,
                    TransactionState::Rollback => EXEC_ROLLBACK,
                    TransactionState::Unknown => EXEC_UNKNOWN,
                };
                exec_decisions.update(idx, seq, |b| b | bits);
                async move { state }
            })
            .checker(move |check: TransactionCheck| {
                let state = check_decisions.check(payload::parse(&check.message.body));
                async move { state }
            })
            .start()
            .await
            .map_err(|e| format!("starting transaction producer {i}: {e}"))?;
        p.write_queues(&a.common.topic)
            .await
            .map_err(|e| format!("route of {}: {e}", a.common.topic))?;
        list.push((id, p));
    }
    Ok(list)
}

async fn lane(run: Arc<Lanes>, p: Producer, idx: usize, producer: u64) {
    while run.claim() {
        let seq = run.next_seq[idx].fetch_add(1, Ordering::Relaxed);
        let head = Head {
            producer,
            seq,
            send_us: payload::now_us(),
        };
        let body = run.maker.body(head);
        let bytes = body.len() as u64;
        let t0 = Instant::now();
        match p
            .send_in_transaction(Message::new(run.topic.as_str(), body), (idx, seq))
            .await
        {
            Ok(r) => {
                match r.end {
                    EndOutcome::Acknowledged => {
                        run.decisions.note(idx, seq, |b| b | END_ACKED, "executor");
                    }
                    EndOutcome::NotSent => {}
                    EndOutcome::Failed(e) => {
                        run.end_failed.fetch_add(1, Ordering::Relaxed);
                        run.error(format!(
                            "end_transaction {}",
                            crate::produce::error_kind(&e)
                        ));
                    }
                }
                run.meter.record(1, bytes, us_since(t0));
            }
            Err(e) => {
                run.meter.error(1);
                run.error(format!("half {}", crate::produce::error_kind(&e)));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Successful deliveries per (producer, seq).
fn delivered_counts(sink: &Deliveries) -> HashMap<(u64, u64), u64> {
    let (_, record) = sink.take_record();
    let mut out: HashMap<(u64, u64), u64> = HashMap::new();
    for d in record.iter().filter(|d| d.ok) {
        *out.entry((d.producer, d.seq)).or_default() += 1;
    }
    out
}

/// Waits until nothing is pending and every committed message was delivered (distinct),
/// or `limit` passes, or the run is interrupted. True when settled.
async fn settle(
    decisions: &Decisions,
    sink: &Deliveries,
    limit: Duration,
    stop: &AtomicBool,
) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let t = decisions.totals();
        if t.pending == 0 && sink.delivered() >= t.committed {
            return true;
        }
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            return false;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_ratios_hold_roughly() {
        let plan = TxnPlan {
            rollback: 0.2,
            unknown: 0.3,
        };
        let mut n = [0u32; 3];
        for seq in 0..10_000 {
            match plan.planned(0x1234_5678_0000, seq) {
                TransactionState::Rollback => n[0] += 1,
                TransactionState::Unknown => n[1] += 1,
                TransactionState::Commit => n[2] += 1,
            }
        }
        assert!((1800..2200).contains(&n[0]), "{n:?}");
        assert!((2700..3300).contains(&n[1]), "{n:?}");
        assert!((4600..5400).contains(&n[2]), "{n:?}");
    }

    #[test]
    fn checker_answers_the_executor_then_parity_then_rollback() {
        assert_eq!(check_answer(EXEC_COMMIT, 1), TransactionState::Commit);
        assert_eq!(check_answer(EXEC_ROLLBACK, 2), TransactionState::Rollback);
        assert_eq!(check_answer(EXEC_UNKNOWN, 2), TransactionState::Commit);
        assert_eq!(check_answer(EXEC_UNKNOWN, 3), TransactionState::Rollback);
        assert_eq!(check_answer(0, 4), TransactionState::Rollback);
        assert_eq!(decided(EXEC_COMMIT), None);
        assert_eq!(decided(EXEC_COMMIT | END_ACKED), Some(true));
        assert_eq!(decided(EXEC_ROLLBACK | END_ACKED), Some(false));
        assert_eq!(decided(EXEC_UNKNOWN | CHECK_COMMIT), Some(true));
        assert_eq!(decided(CHECK_ROLLBACK), Some(false));
    }

    #[test]
    fn verdict_counts_lost_duplicates_and_rolled_back_deliveries() {
        let decisions = HashMap::from([
            ((1, 0), true),
            ((1, 1), true),
            ((1, 2), false),
            ((1, 3), false),
        ]);
        let delivered = HashMap::from([((1, 0), 2), ((1, 2), 1), ((9, 9), 1)]);
        let v = verdict(&decisions, &delivered);
        assert_eq!(
            v,
            TxnVerdict {
                acked: 2,
                received: 1,
                lost: 1,
                duplicates: 1,
                rolled_back_delivered: 1,
                unlisted: 1,
            }
        );
    }

    #[test]
    fn decision_log_round_trip_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("txn.log");
        let log = DecisionLog::create(&path).unwrap();
        log.append(0xabc, 1, true, "executor").unwrap();
        log.append(0xabc, 2, false, "check").unwrap();
        drop(log);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"0000000000000abc 3 comm")
            .unwrap();
        let (m, torn) = DecisionLog::load(&path).unwrap();
        assert!(torn);
        assert_eq!(m, HashMap::from([((0xabc, 1), true), ((0xabc, 2), false)]));
    }
}
