//! The three modes, each: set up (topic, brokers and their durability, Ctrl-C), start the
//! clients, measure, report (table, JSON), and choose the exit code.
//!
//! Exit codes: 0 done; 1 could not run (bad address, no topic, verify log unwritable) or did
//! not do what was asked (fewer than `--count` sent, or no message sent at all; e2e: fewer
//! messages delivered or dead-lettered than sent; consume: fewer than `--count` consumed),
//! with one last stderr line saying why; 3 `--verify` found acknowledged messages lost;
//! 4 `--flush-check` saw sends stored without the promised durability.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq_client::{Admin, StartPosition};
use serde_json::{json, Value};

use crate::args::{
    Common, ConsumeArgs, E2eArgs, FromArg, ProduceArgs, ProtocolOpts, RecvOpts, SendOpts,
};
use crate::broker_info::{self, BrokerView, LagSampler};
use crate::consume::{self, Consumers, Deliveries, RecvPlan, StopWhen};
use crate::dead;
use crate::fail::FailPlan;
use crate::html;
use crate::node_cpu;
use crate::produce::{self, Producers, SendOutcome, SendPlan};
use crate::remoting;
use crate::report::{self, Context};
use crate::security::Target;
use crate::stats::{Meter, Summary};
use crate::threads::{self, CpuSample};
use crate::timeline::Timeline;
use crate::verify::{self, AckLog, Acked, Consumption};

/// Produce and e2e run this long when neither --count nor --duration is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(30);
/// How long creating a topic may take.
const TOPIC_WAIT: Duration = Duration::from_secs(15);
/// How often e2e counts the dead letters while it waits for the last deliveries.
const DLQ_POLL: Duration = Duration::from_millis(500);

pub const EXIT_FAILED: i32 = 1;
pub const EXIT_LOST: i32 = 3;
pub const EXIT_NOT_DURABLE: i32 = 4;

/// What every mode starts with.
pub(crate) struct Setup {
    pub(crate) admin: Admin,
    brokers: Vec<BrokerView>,
    durability: String,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) run_id: u64,
    cpu0: CpuSample,
    wall0: Instant,
    /// Where the node's CPU time comes from, and its reading at the start.
    node_cpu: node_cpu::Source,
    node0: Option<f64>,
    /// TLS and the access key, for the report's config.
    security: Value,
    /// `--metrics-url`, and its scrape when measuring began.
    metrics_url: Option<String>,
    stages0: Option<crate::stages::Snapshot>,
}

impl Setup {
    pub(crate) async fn new(
        c: &Common,
        target: &Target,
        create_topic: bool,
    ) -> Result<Setup, String> {
        if create_topic {
            ensure_topic(target, &c.topic, c.queues).await?;
        } else {
            topic_exists(target, &c.topic).await?;
        }
        let (admin, brokers) = broker_info::discover(target).await?;
        let durability = broker_info::durability(&brokers);
        let node_cpu =
            node_cpu::Source::pick(c.embedded.embedded, &c.node_pid, &brokers, &admin).await;
        let node0 = node_cpu.sample(&admin).await;
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("ringmq-perf: interrupted; finishing (Ctrl-C again to quit at once)");
                s.store(true, Ordering::Relaxed);
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
        Ok(Setup {
            admin,
            brokers,
            durability,
            stop,
            run_id: run_id(),
            cpu0: threads::sample(),
            wall0: Instant::now(),
            node_cpu,
            node0,
            security: target.report(),
            metrics_url: c.metrics_url.clone(),
            stages0: None,
        })
    }

    /// Restarts the CPU and wall clocks (when the measured phase begins).
    /// The broker's stage histograms over the measured phase (`--metrics-url`): report lines
    /// and the JSON `broker_stages`; `None` without the option or when a scrape failed (said
    /// on stderr).
    pub(crate) async fn stages(&self) -> Option<(Vec<String>, Value)> {
        let (url, before) = (self.metrics_url.as_ref()?, self.stages0.as_ref()?);
        // The endpoint's views are rebuilt every second: wait for the one after the run.
        tokio::time::sleep(crate::stages::VIEW_PERIOD).await;
        match crate::stages::scrape(url).await {
            Ok(after) => Some(crate::stages::report(&crate::stages::between(
                before, &after,
            ))),
            Err(e) => {
                eprintln!("ringmq-perf: no broker stages: {e}");
                None
            }
        }
    }

    pub(crate) async fn mark(&mut self) {
        if let Some(url) = &self.metrics_url {
            self.stages0 = match crate::stages::scrape(url).await {
                Ok(s) => Some(s),
                Err(e) => {
                    eprintln!("ringmq-perf: no broker stages: {e}");
                    None
                }
            };
        }
        self.node0 = self.node_cpu.sample(&self.admin).await;
        self.cpu0 = threads::sample();
        self.wall0 = Instant::now();
    }

    pub(crate) async fn context(
        &self,
        mode: &'static str,
        c: &Common,
        mut config: Value,
        embedded: bool,
    ) -> Context {
        if let (Some(o), Some(s)) = (config.as_object_mut(), self.security.as_object()) {
            o.extend(s.clone());
        }
        let wall = self.wall0.elapsed();
        let mut cpu = threads::used(&self.cpu0, &threads::sample());
        let node1 = self.node_cpu.sample(&self.admin).await;
        match (&self.node_cpu, self.node0, node1) {
            (node_cpu::Source::Embedded, _, _) => {}
            (_, Some(a), Some(b)) => cpu.node_s = (b - a).max(0.0),
            _ => {}
        }
        let known = match self.node_cpu {
            node_cpu::Source::Embedded => true,
            _ => self.node0.is_some() && node1.is_some(),
        };
        cpu.node_source = if known {
            self.node_cpu.describe()
        } else {
            None
        };
        Context {
            mode,
            topic: c.topic.clone(),
            brokers: self.brokers.clone(),
            durability: self.durability.clone(),
            config,
            cpu,
            wall,
            embedded,
        }
    }
}

pub(crate) async fn produce_mode(
    a: ProduceArgs,
    target: Target,
    embedded: bool,
) -> Result<i32, String> {
    check_schedule(&a.send)?;
    let c = &a.common;
    if a.protocol.remoting().is_some() {
        remoting::check_supported(c, Some(&a.send), None)?;
    }
    let mut setup = Setup::new(c, &target, true).await?;
    let mut plan = send_plan(
        &a.send,
        &target,
        c,
        a.length.count,
        a.length.duration,
        setup.run_id,
    );
    plan.remoting = a.protocol.remoting();
    let acks = open_ack_log(c.verify.as_deref())?;
    let producers = Producers::start(&plan).await?;
    let meter = Arc::new(Meter::default());
    let lag = Arc::new(LagSampler::start(Some(setup.admin.clone()), &setup.brokers));
    let progress_stop = Arc::new(AtomicBool::new(false));
    let progress = progress(c, vec![("send", Arc::clone(&meter))], &lag, &progress_stop);
    setup.mark().await;
    let outcome = produce::run(
        &plan,
        &producers,
        Arc::clone(&meter),
        acks,
        Arc::clone(&setup.stop),
    )
    .await;
    let mut config = send_config(&a.send, c, &plan);
    add_protocol_config(&mut config, &a.protocol);
    let ctx = setup.context("produce", c, config, embedded).await;
    let stages = setup.stages().await;
    progress_stop.store(true, Ordering::Relaxed);
    let timelines = progress.await.unwrap_or_default();
    let lag_report = lag.finish();
    producers.shutdown().await;
    let summary = meter.summary(outcome.elapsed);
    let mut notes = send_notes(&outcome);
    let mut extra = send_extra(&outcome);
    if let Some(l) = &lag_report {
        notes.push(lag_note(l));
        extra.insert("replication".into(), report::lag_json(l));
    }
    add_stages(stages, &mut notes, &mut extra);
    trace_extra(&producers, &mut notes, &mut extra);
    print!(
        "{}",
        report::table(&ctx, &[("send", &summary)], &summary, &notes)
    );
    write_json(c, report::document(&ctx, &summary, Value::Object(extra)))?;
    write_html(
        c,
        &ctx,
        (&[("send", &summary)], &summary, &notes),
        &timelines,
        &[("send", &meter)],
    )?;
    if outcome.verify_error.is_some() {
        return Ok(EXIT_FAILED);
    }
    if a.send.flush_check && outcome.not_durable > 0 {
        return Ok(EXIT_NOT_DURABLE);
    }
    if let Some(why) = send_shortfall(&outcome, meter.counts().messages, plan.count) {
        eprintln!("ringmq-perf: {why}");
        return Ok(EXIT_FAILED);
    }
    if let Some(why) = trace_shortfall(&producers) {
        eprintln!("ringmq-perf: {why}");
        return Ok(EXIT_FAILED);
    }
    Ok(0)
}

/// e2e with `--verify`, while it waits for the last deliveries: how many listed messages
/// (acknowledged, no recall sent for them) were not delivered yet, from the log read again
/// at most every [`LISTED_POLL`] (0 without a log, or when it cannot be read: the verify
/// check reports that).
struct ListedWait<'a> {
    path: Option<&'a Path>,
    polled: Option<Instant>,
    missing: u64,
}

/// How often e2e reads its verify log again while it waits for the last deliveries.
const LISTED_POLL: Duration = Duration::from_millis(250);

impl<'a> ListedWait<'a> {
    fn new(path: Option<&'a Path>) -> ListedWait<'a> {
        ListedWait {
            path,
            polled: None,
            missing: 0,
        }
    }

    fn missing(&mut self, sink: &Deliveries) -> u64 {
        let Some(path) = self.path else {
            return 0;
        };
        if self.polled.is_some_and(|t| t.elapsed() < LISTED_POLL) {
            return self.missing;
        }
        self.polled = Some(Instant::now());
        self.missing = Acked::load(path).map_or(0, |acked| {
            let must = acked
                .by_msg
                .keys()
                .filter(|k| !acked.recall_sent.contains(k));
            sink.undelivered(must)
        });
        self.missing
    }
}

/// `--verify` with recalls: why the check fails although nothing was lost.
fn recalled_delivered(v: &verify::Report) -> Option<String> {
    let n = v.total.recalled_delivered;
    (n > 0).then(|| {
        format!(
            "{n} messages whose recall the broker acknowledged were delivered (of {} recalled)",
            n + v.total.recalled
        )
    })
}

/// `--trace`: why the broker did not store every trace record the producers made (none
/// stored: most likely no trace topic; some: trace sends failed, e.g. the broker went away).
fn trace_shortfall(producers: &Producers) -> Option<String> {
    let t = producers.traces()?;
    let (made, stored) = (t.recorded, t.sent);
    (stored < made).then(|| {
        let fix = if stored == 0 {
            ": create the topic (ringmq-ctl topic create RMQ_SYS_TRACE_TOPIC) or turn \
             autoCreateTopicEnable on"
        } else {
            ""
        };
        format!(
            "the broker stored {stored} of {made} trace records in RMQ_SYS_TRACE_TOPIC ({} in \
             trace sends that failed, {} dropped with the tracer's queue full){fix}",
            t.failed, t.dropped
        )
    })
}

/// `--trace`: the tracers' counters for the report (`None` without tracing).
fn trace_extra(
    producers: &Producers,
    notes: &mut Vec<String>,
    extra: &mut serde_json::Map<String, Value>,
) {
    let Some(t) = producers.traces() else {
        return;
    };
    notes.push(format!(
        "trace records: {} made, {} stored by the broker (acknowledged), {} in failed trace sends, {} dropped (queue full)",
        t.recorded, t.sent, t.failed, t.dropped
    ));
    extra.insert(
        "trace".into(),
        json!({"made": t.recorded, "stored": t.sent, "failed": t.failed, "dropped": t.dropped}),
    );
}

/// Why the sends did not do what was asked: fewer than `--count` sent, or none at all
/// (every send failed); `None` when they did. A `--duration` run that sent messages counts
/// its failed sends in the report and passes.
fn send_shortfall(o: &SendOutcome, sent: u64, count: Option<u64>) -> Option<String> {
    let failed: u64 = o.error_kinds.values().sum();
    let kinds = o
        .error_kinds
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let why = if kinds.is_empty() {
        "the run was stopped".to_string()
    } else {
        format!("{failed} failed ({kinds})")
    };
    match count {
        Some(n) if sent < n => Some(format!("sent {sent} of {n} messages: {why}")),
        None if sent == 0 => Some(format!("sent no message: {why}")),
        _ => None,
    }
}

pub(crate) async fn consume_mode(
    a: ConsumeArgs,
    target: Target,
    embedded: bool,
) -> Result<i32, String> {
    let c = &a.common;
    if a.protocol.remoting().is_some() {
        remoting::check_supported(c, None, Some(&a.recv))?;
    }
    check_pop(&a.recv)?;
    check_count(&a)?;
    let setup = Setup::new(c, &target, false).await?;
    let from = match a.recv.from {
        FromArg::First => StartPosition::First,
        FromArg::Last => StartPosition::Last,
    };
    let mut plan = recv_plan(&a.recv, &target, c, from, setup.run_id);
    plan.remoting = a.protocol.remoting();
    plan.count = a.length.count;
    let meter = Arc::new(Meter::default());
    let sink = Arc::new(Deliveries::new(
        Arc::clone(&meter),
        plan.verify,
        fail_plan(&a.recv),
    ));
    let lag = Arc::new(LagSampler::start(None, &[]));
    let progress_stop = Arc::new(AtomicBool::new(false));
    let progress = progress(c, vec![("recv", Arc::clone(&meter))], &lag, &progress_stop);
    let consumers = Arc::new(Consumers::start(&plan, Arc::clone(&sink)).await?);
    let churn = start_churn(&consumers, a.recv.consumer_churn, &setup.stop);
    let when = StopWhen {
        count: a.length.count,
        duration: a.length.duration,
        idle: a.idle_exit,
    };
    consume::wait(&sink, when, &setup.stop).await;
    let mut config = json!({
        "group": plan.group, "consumers": plan.consumers, "from": format!("{:?}", a.recv.from).to_lowercase(),
        "pull_batch": plan.pull_batch, "queues_assigned": consumers.queues(),
        "pull_ahead": plan.count.map(|_| plan.pull_ahead),
        "idle_exit_s": a.idle_exit.as_secs_f64(), "threads": c.threads,
    });
    add_recv_config(&mut config, &a.recv);
    add_protocol_config(&mut config, &a.protocol);
    let ctx = setup.context("consume", c, config, embedded).await;
    let churn_error = stop_churn(churn).await;
    consumers.shutdown().await;
    progress_stop.store(true, Ordering::Relaxed);
    let timelines = progress.await.unwrap_or_default();
    let summary = meter.summary(sink.active());
    let mut notes = vec![format!(
        "latency: delivery time minus the send time in the message (catching up: the messages' age)"
    )];
    notes.extend(recv_notes(
        &a.recv,
        &sink,
        &consumers,
        churn_error.as_deref(),
    ));
    let verdict = match &c.verify {
        Some(path) => Some(check(path, &sink, &setup.admin, &plan, &mut notes).await?),
        None => None,
    };
    let mut extra = serde_json::Map::new();
    if let Some(v) = &verdict {
        notes.extend(report::verify_lines(v));
    }
    extra.extend(as_map(report::verify_json(verdict.as_ref())));
    // Scheduled messages read back: how late the broker stored them (receipt lateness of a
    // catching-up read is the messages' age, not the schedule's).
    let lateness = sink.lateness();
    if lateness.samples > 0 {
        notes.extend(report::lateness_lines(&lateness));
        extra.extend(as_map(report::lateness_json(&lateness)));
    }
    extra.insert(
        "foreign".into(),
        json!(sink.foreign.load(Ordering::Relaxed)),
    );
    extra.extend(recv_extra(&sink, &consumers, sink.active()));
    print!(
        "{}",
        report::table(&ctx, &[("recv", &summary)], &summary, &notes)
    );
    write_json(c, report::document(&ctx, &summary, Value::Object(extra)))?;
    write_html(
        c,
        &ctx,
        (&[("recv", &summary)], &summary, &notes),
        &timelines,
        &[("recv", &meter)],
    )?;
    if verdict.as_ref().is_some_and(|v| v.total.lost > 0) {
        return Ok(EXIT_LOST);
    }
    if let Some(why) = verdict.as_ref().and_then(recalled_delivered) {
        eprintln!("ringmq-perf: {why}");
        return Ok(EXIT_FAILED);
    }
    if let Some(e) = consumers.counted_error() {
        eprintln!("ringmq-perf: {e}");
        return Ok(EXIT_FAILED);
    }
    let consumed = sink.consumed();
    if let Some(n) = a.length.count.filter(|&n| consumed < n) {
        let why = if setup.stop.load(Ordering::Relaxed) {
            "interrupted".to_string()
        } else if sink.idle() >= a.idle_exit {
            format!("no message came for --idle-exit {:?}", a.idle_exit)
        } else {
            format!(
                "--duration {:?} ended",
                a.length.duration.unwrap_or_default()
            )
        };
        eprintln!("ringmq-perf: consumed {consumed} of {n} messages: {why}");
        return Ok(EXIT_FAILED);
    }
    if consumed == 0 {
        // The consumers' pulls retry quietly; a run that read nothing says whether it could.
        if let Some(why) = unreachable_broker(&setup.admin, &plan.topic).await {
            eprintln!("ringmq-perf: consumed no message: {why}");
            return Ok(EXIT_FAILED);
        }
    }
    Ok(if churn_error.is_some() || pop_redelivered(&consumers) {
        EXIT_FAILED
    } else {
        0
    })
}

/// `consume --count N` takes exactly N with pull consumers ([`crate::counted`]): not with
/// the options that need the push consumers' listener, the remoting pull loops or POP.
fn check_count(a: &ConsumeArgs) -> Result<(), String> {
    if a.length.count.is_none() {
        return Ok(());
    }
    let r = &a.recv;
    let mut refused = Vec::new();
    for (on, flag) in [
        (r.orderly, "--orderly"),
        (r.fail_ratio.is_some(), "--fail-ratio"),
        (r.consumer_churn.is_some(), "--consumer-churn"),
        (r.pop, "--pop"),
        (a.protocol.remoting().is_some(), "--protocol remoting"),
    ] {
        if on {
            refused.push(flag);
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "consume --count (exactly N consumed and committed) does not take {}; use --duration",
            refused.join(", ")
        ))
    }
}

pub(crate) async fn e2e_mode(a: E2eArgs, target: Target, embedded: bool) -> Result<i32, String> {
    check_schedule(&a.send)?;
    let c = &a.common;
    if a.protocol.remoting().is_some() {
        remoting::check_supported(c, Some(&a.send), Some(&a.recv))?;
    }
    check_pop(&a.recv)?;
    let mut setup = Setup::new(c, &target, true).await?;
    let mut plan = send_plan(
        &a.send,
        &target,
        c,
        a.length.count,
        a.length.duration,
        setup.run_id,
    );
    plan.remoting = a.protocol.remoting();
    let mut recv_plan = recv_plan(&a.recv, &target, c, StartPosition::Last, setup.run_id);
    recv_plan.remoting = a.protocol.remoting();
    let acks = open_ack_log(c.verify.as_deref())?;
    let send_meter = Arc::new(Meter::default());
    let recv_meter = Arc::new(Meter::default());
    let sink = Arc::new(Deliveries::new(
        Arc::clone(&recv_meter),
        recv_plan.verify,
        fail_plan(&a.recv),
    ));
    let dead0 = dead_baseline(&setup.admin, &a.recv, &recv_plan.group).await?;
    let consumers = Arc::new(Consumers::start(&recv_plan, Arc::clone(&sink)).await?);
    let churn = start_churn(&consumers, a.recv.consumer_churn, &setup.stop);
    let producers = Producers::start(&plan).await?;
    let lag = Arc::new(LagSampler::start(Some(setup.admin.clone()), &setup.brokers));
    let progress_stop = Arc::new(AtomicBool::new(false));
    let meters = vec![
        ("send", Arc::clone(&send_meter)),
        ("e2e", Arc::clone(&recv_meter)),
    ];
    let progress = progress(c, meters, &lag, &progress_stop);
    setup.mark().await;
    let send_start = Instant::now();
    let outcome = produce::run(
        &plan,
        &producers,
        Arc::clone(&send_meter),
        acks,
        Arc::clone(&setup.stop),
    )
    .await;
    // The last deliveries: until everything sent arrived, or nothing arrived for idle_exit.
    // Acknowledged recalls are not to arrive; one without an answer may or may not.
    let sent = send_meter.counts().messages;
    let expected = sent.saturating_sub(outcome.recalled);
    let maybe_recalled = outcome.recalls_sent - outcome.recalled;
    let due_end = match (a.send.due_rate, a.send.delay) {
        // The last message is due `sent / due_rate` s after the first, `delay` after the start.
        (Some(r), Some(d)) if r > 0.0 => send_start + d + Duration::from_secs_f64(sent as f64 / r),
        _ => Instant::now() + a.send.schedule_wait(),
    };
    // With failures on purpose: until everything sent was delivered or dead-lettered, or
    // nothing arrived for idle_exit (retries keep the consumers busy). Verify mode counts
    // distinct messages, so duplicates (churn) do not end the wait early.
    let drain_until = due_end.max(Instant::now()) + a.idle_exit;
    // POP: a message popped and not acked (its answer lost in a broker crash) comes back
    // once its invisible time ends. After any failed pop or ack call, wait until nothing
    // arrived for that long (and the broker's revive tick), so such a message counts as
    // delivered, not as lost; the deliveries counted may reach `sent` early with sends that
    // were stored but never acknowledged.
    let pop_quiet = a.recv.invisible_time + POP_REVIVE_MARGIN;
    let pop_until = drain_until + pop_quiet;
    let pop_waits = |idle: Duration| {
        a.recv.pop
            && pop_failed_calls(&consumers) > 0
            && idle < pop_quiet
            && Instant::now() < pop_until
    };
    let mut dead_now = 0u64;
    let mut dead_polled = Instant::now();
    // Verify mode: the count of distinct deliveries also holds sends stored but never
    // acknowledged (answer lost in a broker crash), so it may reach `expected` while listed
    // messages are still on their way; the log says which must come.
    let mut listed = ListedWait::new(c.verify.as_deref());
    while (((sink.delivered() + dead_now < expected || listed.missing(&sink) > dead_now)
        && (Instant::now() < drain_until || (dead0.is_some() && sink.idle() < a.idle_exit)))
        || pop_waits(sink.idle()))
        && !setup.stop.load(Ordering::Relaxed)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(base) = dead0 {
            if dead_polled.elapsed() >= DLQ_POLL {
                dead_polled = Instant::now();
                let n = dead::count(&setup.admin, &recv_plan.group).await?;
                dead_now = n.saturating_sub(base);
            }
        }
    }
    let mut config = send_config(&a.send, c, &plan);
    if let Some(o) = config.as_object_mut() {
        o.insert("group".into(), json!(recv_plan.group));
        o.insert("consumers".into(), json!(recv_plan.consumers));
        o.insert("pull_batch".into(), json!(recv_plan.pull_batch));
    }
    add_recv_config(&mut config, &a.recv);
    add_protocol_config(&mut config, &a.protocol);
    let ctx = setup.context("e2e", c, config, embedded).await;
    let stages = setup.stages().await;
    progress_stop.store(true, Ordering::Relaxed);
    let timelines = progress.await.unwrap_or_default();
    let lag_report = lag.finish();
    let churn_error = stop_churn(churn).await;
    consumers.shutdown().await;
    producers.shutdown().await;
    let send = send_meter.summary(outcome.elapsed);
    let window = sink
        .last_at()
        .map_or(outcome.elapsed, |t| t.saturating_duration_since(send_start));
    let e2e = recv_meter.summary(window);
    let mut notes = send_notes(&outcome);
    notes.push("e2e latency: consumer receipt minus the send time in the message (its intended time under --rate)".into());
    notes.extend(recv_notes(
        &a.recv,
        &sink,
        &consumers,
        churn_error.as_deref(),
    ));
    let mut extra = send_extra(&outcome);
    extra.insert("send".into(), report::summary_json(&send));
    extra.extend(recv_extra(&sink, &consumers, window));
    let lateness = sink.lateness();
    if a.send.scheduled() || lateness.samples > 0 {
        notes.extend(report::lateness_lines(&lateness));
        extra.extend(as_map(report::lateness_json(&lateness)));
    }
    if let Some(l) = &lag_report {
        notes.push(lag_note(l));
        extra.insert("replication".into(), report::lag_json(l));
    }
    let verdict = match &c.verify {
        Some(path) => Some(check(path, &sink, &setup.admin, &recv_plan, &mut notes).await?),
        None => None,
    };
    if let Some(v) = &verdict {
        notes.extend(report::verify_lines(v));
    }
    extra.extend(as_map(report::verify_json(verdict.as_ref())));
    add_stages(stages, &mut notes, &mut extra);
    trace_extra(&producers, &mut notes, &mut extra);
    print!(
        "{}",
        report::table(&ctx, &[("send", &send), ("e2e", &e2e)], &e2e, &notes)
    );
    write_json(c, report::document(&ctx, &e2e, Value::Object(extra)))?;
    write_html(
        c,
        &ctx,
        (&[("send", &send), ("e2e", &e2e)], &e2e, &notes),
        &timelines,
        &[("send", &send_meter), ("e2e", &recv_meter)],
    )?;
    if verdict.as_ref().is_some_and(|v| v.total.lost > 0) {
        return Ok(EXIT_LOST);
    }
    if let Some(why) = verdict.as_ref().and_then(recalled_delivered) {
        eprintln!("ringmq-perf: {why}");
        return Ok(EXIT_FAILED);
    }
    if a.send.flush_check && outcome.not_durable > 0 {
        return Ok(EXIT_NOT_DURABLE);
    }
    if let Some(why) =
        send_shortfall(&outcome, sent, plan.count).or_else(|| trace_shortfall(&producers))
    {
        eprintln!("ringmq-perf: {why}");
        return Ok(EXIT_FAILED);
    }
    let delivered = sink.delivered();
    if delivered + dead_now + maybe_recalled < expected {
        eprintln!(
            "ringmq-perf: {delivered} of {expected} sent messages delivered{}{} within --idle-exit {:?} of the last one",
            if dead_now > 0 { format!(" ({dead_now} more dead-lettered)") } else { String::new() },
            if outcome.recalled > 0 { format!(" ({} more recalled)", outcome.recalled) } else { String::new() },
            a.idle_exit
        );
        return Ok(EXIT_FAILED);
    }
    Ok(
        if outcome.verify_error.is_some()
            || lateness.early > 0
            || churn_error.is_some()
            || pop_redelivered(&consumers)
        {
            EXIT_FAILED
        } else {
            0
        },
    )
}

fn send_plan(
    s: &SendOpts,
    target: &Target,
    c: &Common,
    count: Option<u64>,
    duration: Option<Duration>,
    run_id: u64,
) -> SendPlan {
    SendPlan {
        target: target.clone(),
        topic: c.topic.clone(),
        size: s.size,
        batch: s.batch,
        producers: s.producers,
        inflight: s.inflight,
        rate: s.rate,
        count,
        duration: if count.is_none() {
            Some(duration.unwrap_or(DEFAULT_DURATION))
        } else {
            duration
        },
        flush_check: s.flush_check,
        send_timeout: s.send_timeout,
        run_id,
        delay: s.delay,
        delay_level: s.delay_level,
        due_rate: s.due_rate,
        remoting: None,
        random_payload: s.payload == crate::args::Payload::Random,
        compress: s.compress_over.map(|over| (over, s.compression.kind())),
        trace: s.trace,
        recall_ratio: s.recall_ratio,
    }
}

/// Scheduled messages travel one per send (the broker refuses delayed batches).
fn check_schedule(s: &SendOpts) -> Result<(), String> {
    if s.scheduled() && s.batch > 1 {
        return Err(
            "--delay and --delay-level need --batch 1: scheduled messages are sent one by one"
                .into(),
        );
    }
    if s.recall_ratio.is_some() && !s.scheduled() {
        return Err("--recall-ratio needs --delay or --delay-level: only a scheduled message can be recalled".into());
    }
    Ok(())
}

fn send_config(s: &SendOpts, c: &Common, plan: &SendPlan) -> Value {
    json!({
        "size": s.size, "batch": s.batch, "producers": s.producers, "inflight": s.inflight,
        "rate": s.rate, "loop": if s.rate.is_some() { "open" } else { "closed" },
        "count": plan.count, "duration_s": plan.duration.map(|d| d.as_secs_f64()),
        "flush_check": s.flush_check, "queues": c.queues, "threads": c.threads,
        "verify": c.verify.as_ref().map(|p| p.display().to_string()),
        "delay_ms": s.delay.map(|d| d.as_millis() as u64), "delay_level": s.delay_level,
        "due_rate": s.due_rate, "payload": s.payload.name(),
        "compress_over": s.compress_over,
        "compression": s.compress_over.map(|_| s.compression.name()),
        "trace": s.trace, "recall_ratio": s.recall_ratio,
    })
}

fn send_notes(o: &SendOutcome) -> Vec<String> {
    let mut notes = Vec::new();
    if o.not_durable > 0 {
        notes.push(format!(
            "stored but not durable in time (FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE): {}",
            o.not_durable
        ));
    }
    for (k, n) in &o.error_kinds {
        notes.push(format!("errors {k}: {n} messages"));
    }
    if let Some(l) = &o.start_lag_us {
        notes.push(format!(
            "open loop: latency counted from each send's intended time; sends began after it (all in-flight slots busy, or the generator behind) by p50 {} / p99 {} / max {} µs",
            l.p50, l.p99, l.max
        ));
    }
    if let Some(e) = &o.verify_error {
        notes.push(format!("verify log: {e} (the run stopped)"));
    }
    if o.recalls_sent > 0 {
        notes.push(format!(
            "recalls: {} sent, {} acknowledged (these must never be delivered){}",
            o.recalls_sent,
            o.recalled,
            if o.recall_errors.is_empty() {
                String::new()
            } else {
                format!(
                    ", failed {:?} (may or may not have been recalled)",
                    o.recall_errors
                )
            }
        ));
    }
    notes
}

fn send_extra(o: &SendOutcome) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("not_durable".into(), json!(o.not_durable));
    m.insert("error_kinds".into(), json!(o.error_kinds));
    m.insert(
        "recalls".into(),
        json!({"sent": o.recalls_sent, "acknowledged": o.recalled, "errors": o.recall_errors}),
    );
    m.insert(
        "start_lag_us".into(),
        o.start_lag_us
            .as_ref()
            .map_or(Value::Null, report::percentiles_json),
    );
    m
}

fn lag_note(l: &broker_info::LagReport) -> String {
    format!(
        "replication lag (max over shards, sampled every second, {} samples, {} slave links): bytes p50 {} p99 {} max {}; ms p50 {} p99 {} max {}",
        l.samples, l.slaves, l.bytes_p50, l.bytes_p99, l.bytes_max, l.ms_p50, l.ms_p99, l.ms_max
    )
}

/// The progress task: prints unless --quiet, and keeps the per-second timelines for --html
/// (none when neither is wanted).
pub(crate) fn progress(
    c: &Common,
    meters: Vec<(&'static str, Arc<Meter>)>,
    lag: &Arc<LagSampler>,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Timeline>> {
    if c.quiet && c.html.is_none() {
        return tokio::spawn(async { Vec::new() });
    }
    let l = Arc::clone(lag);
    report::spawn_progress(
        meters,
        Some(Arc::new(move || l.last_bytes())),
        Arc::clone(stop),
        !c.quiet,
    )
}

fn open_ack_log(path: Option<&Path>) -> Result<Option<Arc<AckLog>>, String> {
    path.map(|p| {
        AckLog::create(p)
            .map(Arc::new)
            .map_err(|e| format!("verify log {}: {e}", p.display()))
    })
    .transpose()
}

/// The verify check: the deliveries against the log, with the group's dead letters read
/// now (after the consumers stopped).
async fn check(
    path: &Path,
    sink: &Deliveries,
    admin: &Admin,
    plan: &RecvPlan,
    notes: &mut Vec<String>,
) -> Result<verify::Report, String> {
    let acked = Acked::load(path)?;
    let (dead, cut) = dead::messages(admin, &plan.group)
        .await
        .map_err(|e| format!("reading the dead-letter queue for --verify: {e}"))?;
    if cut {
        notes.push(format!(
            "verify: read only the first {} dead letters of {}; the rest count as lost",
            dead::READ_MAX,
            dead::dlq_topic(&plan.group)
        ));
    }
    let (names, deliveries) = sink.take_record();
    let mode = if plan.orderly {
        Consumption::Orderly
    } else {
        Consumption::Concurrent
    };
    let mut report = verify::check(&acked, &names, &deliveries, &dead, mode);
    report.fail_chosen = sink.fail_plan().map(|plan| {
        let chosen = |&(producer, seq): &(u64, u64)| {
            plan.chosen(&crate::payload::Head {
                producer,
                seq,
                send_us: 0,
            })
        };
        acked.by_msg.keys().filter(|k| chosen(k)).count() as u64
    });
    Ok(report)
}

fn recv_plan(
    r: &RecvOpts,
    target: &Target,
    c: &Common,
    from: StartPosition,
    run_id: u64,
) -> RecvPlan {
    RecvPlan {
        target: target.clone(),
        topic: c.topic.clone(),
        group: r
            .group
            .clone()
            .unwrap_or_else(|| format!("perf-{run_id:012x}")),
        consumers: r.consumers,
        from,
        pull_batch: r.pull_batch,
        pull_ahead: r.pull_ahead,
        verify: c.verify.is_some(),
        run_id,
        max_reconsume: r.max_reconsume,
        orderly: r.orderly,
        single: r.fail_ratio.is_some(),
        remoting: None,
        pop: r.pop.then_some(r.invisible_time),
        count: None,
    }
}

/// The broker stages of the run (`--metrics-url`) into the report's notes and JSON.
fn add_stages(
    stages: Option<(Vec<String>, Value)>,
    notes: &mut Vec<String>,
    extra: &mut serde_json::Map<String, Value>,
) {
    if let Some((lines, json)) = stages {
        notes.extend(lines);
        extra.insert("broker_stages".into(), json);
    }
}

/// The first master of `topic`'s route that does not answer, said as the reason a run that
/// consumed nothing failed; `None` when every one answers (the topic was just empty).
async fn unreachable_broker(admin: &Admin, topic: &str) -> Option<String> {
    let route = match admin.topic_route_data(topic).await {
        Ok(r) => r,
        Err(e) => return Some(format!("reading the route of {topic}: {e}")),
    };
    for b in &route.brokers {
        let Some(addr) = b.master().and_then(|m| m.address.parse().ok()) else {
            continue;
        };
        if let Err(e) = admin.runtime_info(addr).await {
            return Some(format!(
                "broker {} at {addr} does not answer: {e}",
                b.broker_name
            ));
        }
    }
    None
}

/// POP: calls of the members that failed (connection lost, broker error).
fn pop_failed_calls(consumers: &Consumers) -> u64 {
    consumers
        .poppers
        .as_ref()
        .map_or(0, |p| p.counts.errors.load(Ordering::Relaxed))
}

/// POP: how long past a message's invisible time the broker may take to deliver it again
/// (its revive loop looks every 200 ms; the copy goes to the retry topic, then to a pop).
const POP_REVIVE_MARGIN: Duration = Duration::from_secs(3);

/// `--pop` with an option it cannot honour: the error naming them.
fn check_pop(r: &RecvOpts) -> Result<(), String> {
    if !r.pop {
        return Ok(());
    }
    let mut refused = Vec::new();
    if r.fail_ratio.is_some() {
        refused.push("--fail-ratio");
    }
    if r.consumer_churn.is_some() {
        refused.push("--consumer-churn");
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!("--pop does not take {}", refused.join(", ")))
    }
}

/// A POP run delivered a message again after its ack was acknowledged.
fn pop_redelivered(consumers: &Consumers) -> bool {
    consumers
        .poppers
        .as_ref()
        .is_some_and(|p| p.counts.acked_redelivered.load(Ordering::Relaxed) > 0)
}

fn fail_plan(r: &RecvOpts) -> Option<FailPlan> {
    r.fail_ratio.map(|f| FailPlan::new(f, r.fail_times))
}

/// Dead letters already in the group's queue before the run (`None` unless messages are
/// failed on purpose: then e2e also waits for them to be dead-lettered).
async fn dead_baseline(admin: &Admin, r: &RecvOpts, group: &str) -> Result<Option<u64>, String> {
    match r.fail_ratio {
        Some(_) => Ok(Some(dead::count(admin, group).await?)),
        None => Ok(None),
    }
}

/// A running churn task and its stop flag.
struct Churn {
    done: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

/// Replaces one consumer every `every` until `stop` (or [`stop_churn`]).
fn start_churn(
    consumers: &Arc<Consumers>,
    every: Option<Duration>,
    stop: &Arc<AtomicBool>,
) -> Option<Churn> {
    let every = every?;
    let done = Arc::new(AtomicBool::new(false));
    let (cs, d, s) = (Arc::clone(consumers), Arc::clone(&done), Arc::clone(stop));
    let task = tokio::spawn(async move {
        let mut clean = true;
        let mut next = Instant::now() + every;
        loop {
            while Instant::now() < next {
                if d.load(Ordering::Relaxed) || s.load(Ordering::Relaxed) {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            cs.churn(clean).await?;
            clean = !clean;
            next += every;
        }
    });
    Some(Churn { done, task })
}

/// Stops the churn task; why it failed, if it did.
async fn stop_churn(churn: Option<Churn>) -> Option<String> {
    let Churn { done, task } = churn?;
    done.store(true, Ordering::Relaxed);
    match task.await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(format!("the churn task failed: {e}")),
    }
}

fn add_protocol_config(config: &mut Value, p: &ProtocolOpts) {
    if let Some(o) = config.as_object_mut() {
        let name = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
        o.insert("protocol".into(), json!(name(&p.protocol)));
        if p.remoting().is_some() {
            o.insert("remoting_header".into(), json!(name(&p.remoting_header)));
        }
    }
}

fn add_recv_config(config: &mut Value, r: &RecvOpts) {
    if let Some(o) = config.as_object_mut() {
        o.insert("fail_ratio".into(), json!(r.fail_ratio));
        o.insert("fail_times".into(), json!(r.fail_times));
        o.insert("max_reconsume".into(), json!(r.max_reconsume));
        o.insert("orderly".into(), json!(r.orderly));
        o.insert(
            "consumer_churn_s".into(),
            json!(r.consumer_churn.map(|d| d.as_secs_f64())),
        );
    }
}

/// Failures on purpose, retries and churn, for the table.
fn recv_notes(
    r: &RecvOpts,
    sink: &Deliveries,
    consumers: &Consumers,
    churn_error: Option<&str>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(f) = r.fail_ratio {
        let times = r.fail_times.map_or("every delivery".to_string(), |k| {
            format!("the first {k} deliveries")
        });
        notes.push(format!(
            "failures on purpose: {f} of the messages fail {times}; {} deliveries failed, {} came from the retry topic (one message per listener call)",
            sink.failed.load(Ordering::Relaxed),
            sink.retried.load(Ordering::Relaxed),
        ));
    }
    if r.consumer_churn.is_some() {
        notes.push(format!(
            "consumer churn: {} consumers stopped cleanly, {} aborted, each replaced",
            consumers.stopped_clean.load(Ordering::Relaxed),
            consumers.aborted.load(Ordering::Relaxed),
        ));
    }
    if let Some(e) = churn_error {
        notes.push(format!("consumer churn stopped: {e}"));
    }
    if let Some(p) = &consumers.poppers {
        let c = &p.counts;
        notes.push(format!(
            "pop: {} consumers, invisible time {:?}: {} messages acked, {} acks refused, {} \
             delivered again after an acknowledged ack, {} second copies of one revive (a \
             kill between a revive's copy and its record), {} failed calls",
            r.consumers,
            r.invisible_time,
            c.acked.load(Ordering::Relaxed),
            c.ack_refused.load(Ordering::Relaxed),
            c.acked_redelivered.load(Ordering::Relaxed),
            c.twin_copies.load(Ordering::Relaxed),
            c.errors.load(Ordering::Relaxed),
        ));
    }
    notes
}

fn recv_extra(
    sink: &Deliveries,
    consumers: &Consumers,
    window: Duration,
) -> serde_json::Map<String, Value> {
    let retried = sink.retried.load(Ordering::Relaxed);
    let mut m = serde_json::Map::new();
    m.insert(
        "failed_deliveries".into(),
        json!(sink.failed.load(Ordering::Relaxed)),
    );
    m.insert("retry_deliveries".into(), json!(retried));
    m.insert(
        "retry_deliveries_per_s".into(),
        json!(report::rate(retried, window)),
    );
    m.insert(
        "consumers_stopped_clean".into(),
        json!(consumers.stopped_clean.load(Ordering::Relaxed)),
    );
    m.insert(
        "consumers_aborted".into(),
        json!(consumers.aborted.load(Ordering::Relaxed)),
    );
    if let Some(p) = &consumers.poppers {
        let c = &p.counts;
        m.insert(
            "pop".into(),
            json!({
                "acked": c.acked.load(Ordering::Relaxed),
                "ack_refused": c.ack_refused.load(Ordering::Relaxed),
                "acked_redelivered": c.acked_redelivered.load(Ordering::Relaxed),
                "twin_copies": c.twin_copies.load(Ordering::Relaxed),
                "failed_calls": c.errors.load(Ordering::Relaxed),
            }),
        );
    }
    m
}

pub(crate) fn write_json(c: &Common, doc: Value) -> Result<(), String> {
    let Some(path) = &c.json else {
        return Ok(());
    };
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// The table's rows, the summary CPU per message is counted over, and the notes.
pub(crate) type Table<'a> = (&'a [(&'a str, &'a Summary)], &'a Summary, &'a [String]);

/// Writes the --html page, if asked for.
pub(crate) fn write_html(
    c: &Common,
    ctx: &Context,
    (rows, main, notes): Table,
    timelines: &[Timeline],
    meters: &[(&str, &Arc<Meter>)],
) -> Result<(), String> {
    let Some(path) = &c.html else {
        return Ok(());
    };
    let distributions: Vec<(&str, Vec<(f64, u64)>)> =
        meters.iter().map(|(l, m)| (*l, m.distribution())).collect();
    let text = html::page(&html::Page {
        ctx,
        rows,
        main,
        notes,
        timelines,
        distributions: &distributions,
    });
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) fn as_map(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// Creates the topic on every master unless the name servers already route it.
async fn ensure_topic(target: &Target, topic: &str, queues: u32) -> Result<(), String> {
    let admin = broker_info::connect(target).await?;
    if let Ok(r) = admin.topic_route(topic).await {
        if !r.write_queues.is_empty() {
            return Ok(());
        }
    }
    admin
        .create_topic(topic, queues, TOPIC_WAIT)
        .await
        .map_err(|e| format!("creating topic {topic}: {e}"))
}

async fn topic_exists(target: &Target, topic: &str) -> Result<(), String> {
    let admin = broker_info::connect(target).await?;
    match admin.topic_route(topic).await {
        Ok(r) if !r.read_queues.is_empty() => Ok(()),
        Ok(_) => Err(format!("topic {topic} has no readable queue")),
        Err(e) => Err(format!("topic {topic}: {e}")),
    }
}

/// 48 bits that differ between runs: the clock's µs mixed with the process id.
pub(crate) fn run_id() -> u64 {
    let mut x = crate::payload::now_us() ^ (u64::from(std::process::id()) << 24);
    // splitmix64 finalizer: spreads nearby inputs over all bits.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) & 0xFFFF_FFFF_FFFF
}
