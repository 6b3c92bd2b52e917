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

mod decision_log;
mod decisions;
mod outcome;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::admin::TopicTarget;
use ringmq_client::{
    Admin, EndOutcome, Message, StartPosition, TransactionCheck, TransactionProducer,
    TransactionState,
};
use serde_json::{json, Value};

use crate::args::TxnArgs;
use crate::consume::{Consumers, Deliveries, RecvPlan};
use crate::modes::{self, Setup, DEFAULT_DURATION};
use crate::payload::{self, BodyMaker, Head};
use crate::report::{self, Context};
use crate::security::Target;
use crate::stats::{us_since, Meter};
use decision_log::{Checks, DecisionLog};
use decisions::{Decisions, TxnPlan, END_ACKED, EXEC_COMMIT, EXEC_ROLLBACK, EXEC_UNKNOWN};
use outcome::Outcome;

/// The brokers publish their transaction counts once per check-loop turn (at most 1 s).
const STATUS_LAG: Duration = Duration::from_millis(1500);
/// How often the settle phase looks at the decisions.
const SETTLE_POLL: Duration = Duration::from_millis(200);

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
    fn new(
        a: &TxnArgs,
        meter: &Arc<Meter>,
        decisions: &Arc<Decisions>,
        stop: &Arc<AtomicBool>,
    ) -> Lanes {
        Lanes {
            topic: a.common.topic.clone(),
            maker: BodyMaker::new(a.size),
            meter: Arc::clone(meter),
            decisions: Arc::clone(decisions),
            stop: Arc::clone(stop),
            remaining: a.length.count.map(AtomicU64::new),
            deadline: match (a.length.count, a.length.duration) {
                (_, Some(d)) => Some(Instant::now() + d),
                (None, None) => Some(Instant::now() + DEFAULT_DURATION),
                (Some(_), None) => None,
            },
            errors: Mutex::new(BTreeMap::new()),
            end_failed: AtomicU64::new(0),
            next_seq: (0..a.producers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

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
pub async fn run(a: TxnArgs, target: Target, embedded: bool) -> Result<i32, String> {
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
    let mut setup = Setup::new(c, &target, true).await?;
    let log = c
        .verify
        .as_deref()
        .map(|p| DecisionLog::create(p).map_err(|e| format!("verify log {}: {e}", p.display())))
        .transpose()?;
    let decisions = Arc::new(Decisions::new(setup.run_id, a.producers, log));
    let producer_group = format!("perf-txn-{:012x}", setup.run_id);
    let recv = recv_plan(&a, &target, setup.run_id);
    let recv_meter = Arc::new(Meter::default());
    let sink = Arc::new(Deliveries::new(Arc::clone(&recv_meter), true, None));
    let consume = a.consumers > 0;
    let consumers = match consume {
        true => Some(Consumers::start(&recv, Arc::clone(&sink)).await?),
        false => None,
    };
    let producers =
        start_producers(&a, &target, &producer_group, plan, &decisions, setup.run_id).await?;
    let meter = Arc::new(Meter::default());
    let lag = Arc::new(crate::broker_info::LagSampler::start(None, &[]));
    let progress_stop = Arc::new(AtomicBool::new(false));
    let meters = vec![
        ("txn", Arc::clone(&meter)),
        ("recv", Arc::clone(&recv_meter)),
    ];
    let progress = modes::progress(c, meters, &lag, &progress_stop);
    setup.mark().await;
    let lanes = Arc::new(Lanes::new(&a, &meter, &decisions, &setup.stop));
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
    let (settled, end_applied) = settle(
        &decisions,
        consume.then_some(&*sink),
        a.settle_timeout,
        &setup.stop,
        (&setup.admin, &producer_group),
    )
    .await;
    let settle_s = settle_started.elapsed().as_secs_f64();
    let config = json!({
        "size": a.size, "producers": a.producers, "inflight": a.inflight,
        "count": a.length.count, "duration_s": a.length.duration.map(|d| d.as_secs_f64()),
        "commit_ratio": report_round(commit), "rollback_ratio": a.rollback_ratio, "unknown_ratio": a.unknown_ratio,
        "settle_timeout_s": a.settle_timeout.as_secs_f64(), "producer_group": producer_group,
        "group": recv.group, "consumers": a.consumers, "queues": c.queues, "threads": c.threads,
        "verify": c.verify.as_ref().map(|p| p.display().to_string()),
    });
    let ctx: Context = setup.context("txn", c, config, embedded).await;
    progress_stop.store(true, Ordering::Relaxed);
    let timelines = progress.await.unwrap_or_default();
    if let Some(cs) = &consumers {
        cs.shutdown().await;
    }
    for (_, p) in &producers {
        p.shutdown().await;
    }
    let checks = match &c.verify {
        Some(path) => {
            let (m, torn) = DecisionLog::load(path)?;
            Checks::of(m, torn, format!("the log {}", path.display()))
        }
        None => Checks::of(decisions.decisions(), false, "memory".to_string()),
    };
    let outcome = Outcome {
        totals: decisions.totals(),
        checked: decisions.checked.load(Ordering::Relaxed),
        errors: lanes
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        end_failed: lanes.end_failed.load(Ordering::Relaxed),
        end_applied,
        settled,
        settle_s,
        verdict: consume.then(|| checks.verdict(&delivered_counts(&sink))),
        torn: checks.torn,
        source: checks.source,
        log_error: decisions
            .log_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
    };
    let summary = meter.summary(send_elapsed);
    let recv_summary = recv_meter.summary(sink.active());
    let mut extra = outcome.json();
    extra.insert("recv".into(), report::summary_json(&recv_summary));
    let rows = [("txn", &summary), ("recv", &recv_summary)];
    let shown = if consume { 2 } else { 1 };
    let notes = outcome.notes();
    print!("{}", report::table(&ctx, &rows[..shown], &summary, &notes));
    modes::write_json(c, report::document(&ctx, &summary, Value::Object(extra)))?;
    modes::write_html(
        c,
        &ctx,
        (&rows[..shown], &summary, &notes),
        &timelines[..timelines.len().min(shown)],
        &[("txn", &meter), ("recv", &recv_meter)][..shown],
    )?;
    Ok(outcome.exit_code())
}

/// The consumer group of a run: from the end of each queue, a delivery record per message.
fn recv_plan(a: &TxnArgs, target: &Target, run_id: u64) -> RecvPlan {
    RecvPlan {
        target: target.clone(),
        topic: a.common.topic.clone(),
        group: a
            .group
            .clone()
            .unwrap_or_else(|| format!("perf-{run_id:012x}")),
        consumers: a.consumers,
        from: StartPosition::Last,
        pull_batch: a.pull_batch,
        pull_ahead: 1,
        verify: true,
        run_id,
        max_reconsume: None,
        orderly: false,
        single: false,
        remoting: None,
        pop: None,
        count: None,
    }
}

/// `x` to 3 decimals (for the JSON).
fn report_round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

async fn start_producers(
    a: &TxnArgs,
    target: &Target,
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
            .client_config(target.client_config())
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
///
/// A transaction whose END_TRANSACTION got no answer (a broker killed in between) stays
/// pending here until a check-back asks about it, which never happens when the broker did
/// get the decision. So while some are pending, the brokers' count of the group's undecided
/// halves is read every [`STATUS_LAG`]: two readings of 0 in a row (the first taken a lag
/// after the sends ended, as the count is published once per check-loop turn) mean every
/// END_TRANSACTION arrived ([`Decisions::resolve_unanswered`]).
async fn settle(
    decisions: &Decisions,
    sink: Option<&Deliveries>,
    limit: Duration,
    stop: &AtomicBool,
    brokers: (&Admin, &str),
) -> (bool, u64) {
    let deadline = Instant::now() + limit;
    let mut next_status = Instant::now() + STATUS_LAG;
    let mut clear_readings = 0;
    let mut resolved = 0;
    loop {
        let t = decisions.totals();
        if t.pending == 0 && sink.is_none_or(|s| s.delivered() >= t.committed) {
            return (true, resolved);
        }
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            return (false, resolved);
        }
        if t.pending > 0 && Instant::now() >= next_status {
            next_status = Instant::now() + STATUS_LAG;
            match broker_pending(brokers.0, brokers.1).await {
                Some(0) => clear_readings += 1,
                _ => clear_readings = 0,
            }
            if clear_readings >= 2 {
                resolved += decisions.resolve_unanswered();
                clear_readings = 0;
            }
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Undecided halves of `group` on every master (`None` if one did not answer).
async fn broker_pending(admin: &Admin, group: &str) -> Option<u64> {
    let all = admin
        .transaction_statuses(&TopicTarget::AllMasters)
        .await
        .ok()?;
    let mut n = 0;
    for b in all {
        let s = b.status.ok()?;
        n += s
            .groups
            .iter()
            .filter(|g| g.producer_group == group)
            .map(|g| g.pending)
            .sum::<u64>();
    }
    Some(n)
}
