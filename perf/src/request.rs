//! `request` mode: request-reply round trips. `repliers` push consumers of one group answer
//! every request on the topic with a reply carrying the request's body
//! ([`Reply::to`] + `send_reply`, each reply sent as soon as its request is handed over);
//! `requesters` clients with `inflight` lanes each send requests ([`Producer::request`])
//! and record the round trip: from the request's start (under `--rate`, its intended
//! time, so a stall is not hidden) to its reply's arrival.
//!
//! The repliers start from the end of each queue and the run starts once they own every
//! queue, so no request waits for a rebalance. Every request carries a body of its own (the
//! requester and a sequence in the perf head); a reply counts as the answer only when it
//! carries that body (else `wrong_reply`). A request that got no answer is counted by why:
//! `no_reply` (the broker stored it, no reply within `--timeout`: the client's
//! `RequestTimeout`), or its send's error kind (not stored, or no answer to the send:
//! `Timeout`). The run exits 1 when any request went unanswered, with one line counting
//! them. With `--verify FILE` each request's outcome is appended to FILE as it is known,
//! `requester sequence outcome` (`replied`, `no_reply`, `failed`); CPU per message is per
//! answered request, which is one request stored, one reply pushed and (by default) stored.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{
    ConsumeResult, Error, Message, Producer, PushConsumer, ReceivedMessage, Reply, StartPosition,
};
use serde_json::json;

use crate::args::RequestArgs;
use crate::modes::{self, Setup, DEFAULT_DURATION};
use crate::payload::{self, BodyMaker, Head, HEAD_BYTES};
use crate::report;
use crate::security::Target;
use crate::stats::{us_since, Meter};

/// Due requests not yet taken by a lane, per requester, before the pacer waits.
const DUE_MAX: usize = 1 << 16;
/// How long the repliers may take to own every queue.
const ASSIGN_WAIT: Duration = Duration::from_secs(30);

/// Shared by the lanes.
struct Run {
    topic: String,
    maker: BodyMaker,
    timeout: Duration,
    meter: Arc<Meter>,
    stop: Arc<AtomicBool>,
    remaining: Option<AtomicU64>,
    deadline: Option<Instant>,
    errors: Mutex<BTreeMap<String, u64>>,
    /// Sequence of the next request (over every requester).
    seq: AtomicU64,
    /// Replies whose body was not their request's.
    wrong_replies: AtomicU64,
    /// `--verify`: one line per request outcome.
    log: Option<Mutex<File>>,
}

/// First line of the `--verify` file of `request`.
const LOG_HEADER: &str = "# ringmq-perf request v1: requester sequence outcome\n";

impl Run {
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

    /// Counts an unanswered request by why; returns its outcome word for the log.
    fn error(&self, e: &Error) -> &'static str {
        let (kind, outcome) = match e {
            Error::RequestTimeout { .. } => ("no_reply".to_string(), "no_reply"),
            other => (crate::produce::error_kind(other), "failed"),
        };
        *self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_default() += 1;
        outcome
    }

    /// `--verify`: appends one outcome line (one `write`). A failed write stops the run.
    fn log(&self, requester: u64, seq: u64, outcome: &str) {
        let Some(f) = &self.log else {
            return;
        };
        let line = format!("{requester:016x} {seq} {outcome}\n");
        if let Err(e) = f
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(line.as_bytes())
        {
            eprintln!("ringmq-perf: writing the verify log: {e}; stopping");
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Runs `request`; returns the exit code.
pub async fn run(a: RequestArgs, target: Target, embedded: bool) -> Result<i32, String> {
    let c = &a.common;
    if a.size < HEAD_BYTES {
        return Err(format!("--size must be at least {HEAD_BYTES}"));
    }
    if a.rate.is_some_and(|r| r.is_nan() || r <= 0.0) {
        return Err("--rate must be above 0".into());
    }
    let log = match &c.verify {
        Some(p) => {
            let mut f = File::create(p).map_err(|e| format!("verify log {}: {e}", p.display()))?;
            f.write_all(LOG_HEADER.as_bytes())
                .map_err(|e| format!("verify log {}: {e}", p.display()))?;
            Some(Mutex::new(f))
        }
        None => None,
    };
    let mut setup = Setup::new(c, &target, true).await?;
    let group = format!("perf-reply-{:012x}", setup.run_id);
    let repliers = start_repliers(&a, &target, &group).await?;
    wait_assigned(&setup, &repliers, &c.topic).await?;
    let mut requesters = Vec::new();
    for i in 0..a.requesters {
        let p = Producer::builder()
            .group("ringmq-perf-requesters")
            .client_config(target.client_config())
            .instance_name(format!("perf-req-{:012x}-{i}", setup.run_id))
            .send_timeout(a.timeout)
            .start()
            .await
            .map_err(|e| format!("starting requester {i}: {e}"))?;
        // One request each before the run: routes fetched, the broker knows the client.
        p.request(Message::new(c.topic.as_str(), "warm-up"), ASSIGN_WAIT)
            .await
            .map_err(|e| format!("requester {i}'s first request: {e}"))?;
        requesters.push(p);
    }
    let meter = Arc::new(Meter::default());
    let lag = Arc::new(crate::broker_info::LagSampler::start(None, &[]));
    let progress_stop = Arc::new(AtomicBool::new(false));
    let progress = modes::progress(
        c,
        vec![("request", Arc::clone(&meter))],
        &lag,
        &progress_stop,
    );
    setup.mark().await;
    let started = Instant::now();
    let run = Arc::new(Run {
        topic: c.topic.clone(),
        maker: BodyMaker::new(a.size),
        timeout: a.timeout,
        meter: Arc::clone(&meter),
        stop: Arc::clone(&setup.stop),
        remaining: a.length.count.map(AtomicU64::new),
        deadline: match (a.length.count, a.length.duration) {
            (_, Some(d)) => Some(started + d),
            (None, None) => Some(started + DEFAULT_DURATION),
            (Some(_), None) => None,
        },
        errors: Mutex::new(BTreeMap::new()),
        seq: AtomicU64::new(0),
        wrong_replies: AtomicU64::new(0),
        log,
    });
    drive(&a, &run, &requesters).await;
    let elapsed = started.elapsed();
    let config = json!({
        "size": a.size, "requesters": a.requesters, "inflight": a.inflight,
        "repliers": a.repliers, "rate": a.rate, "timeout_s": a.timeout.as_secs_f64(),
        "count": a.length.count, "duration_s": a.length.duration.map(|d| d.as_secs_f64()),
        "queues": c.queues, "threads": c.threads, "group": group,
    });
    let ctx = setup.context("request", c, config, embedded).await;
    progress_stop.store(true, Ordering::Relaxed);
    let timelines = progress.await.unwrap_or_default();
    for p in &requesters {
        p.shutdown().await;
    }
    for r in &repliers {
        r.shutdown().await;
    }
    let summary = meter.summary(elapsed);
    let errors = run.errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let wrong = run.wrong_replies.load(Ordering::Relaxed);
    let issued = run.seq.load(Ordering::Relaxed);
    let no_reply = errors.get("no_reply").copied().unwrap_or(0);
    let mut notes = vec![
        "round trip: request sent (its intended time under --rate) to its reply received; \
         one request = a request stored, a reply pushed and stored"
            .to_string(),
    ];
    if !errors.is_empty() {
        notes.push(format!(
            "unanswered requests by kind: {errors:?} (no_reply: stored by the broker, no reply \
             within --timeout; the rest: not stored, or the send got no answer)"
        ));
    }
    let rows = [("request", &summary)];
    print!("{}", report::table(&ctx, &rows, &summary, &notes));
    let extra = json!({
        "errors_by_kind": errors,
        "requests": {
            "issued": issued, "answered": summary.messages, "no_reply": no_reply,
            "send_failed": summary.errors.saturating_sub(no_reply + wrong),
            "wrong_replies": wrong,
        },
    });
    modes::write_json(c, report::document(&ctx, &summary, extra))?;
    modes::write_html(
        c,
        &ctx,
        (&rows, &summary, &notes),
        &timelines,
        &[("request", &meter)],
    )?;
    if wrong > 0 {
        eprintln!("ringmq-perf: {wrong} replies did not carry their request's body");
        return Ok(modes::EXIT_FAILED);
    }
    if summary.errors > 0 {
        eprintln!(
            "ringmq-perf: {} of {issued} requests got no reply: {no_reply} stored without a reply \
             within --timeout, {} not stored or without an answer to the send",
            summary.errors,
            summary.errors - no_reply
        );
        return Ok(modes::EXIT_FAILED);
    }
    Ok(0)
}

/// Starts the replying consumers (one group, from the end of each queue).
async fn start_repliers(
    a: &RequestArgs,
    target: &Target,
    group: &str,
) -> Result<Vec<PushConsumer>, String> {
    let mut out = Vec::new();
    for i in 0..a.repliers {
        let sender = Producer::builder()
            .group(group)
            .client_config(target.client_config())
            .instance_name(format!("{group}-p{i}"))
            .start()
            .await
            .map_err(|e| format!("starting replier {i}'s producer: {e}"))?;
        let c = PushConsumer::builder()
            .group(group)
            .client_config(target.client_config())
            .instance_name(format!("{group}-c{i}"))
            .subscribe(a.common.topic.as_str(), "*")
            .start_position(StartPosition::Last)
            .consume_concurrency(64)
            .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
                let sender = sender.clone();
                async move {
                    let mut sends = Vec::with_capacity(msgs.len());
                    for m in &msgs {
                        let Ok(reply) = Reply::to(m, m.body.clone()) else {
                            continue; // not a request
                        };
                        let sender = sender.clone();
                        sends.push(tokio::spawn(async move { sender.send_reply(reply).await }));
                    }
                    for s in sends {
                        if let Ok(Err(e)) = s.await {
                            log::debug!("reply: {e}");
                        }
                    }
                    ConsumeResult::Success
                }
            })
            .await
            .map_err(|e| format!("starting replier {i}: {e}"))?;
        out.push(c);
    }
    Ok(out)
}

/// Waits until the repliers together own every queue of the topic.
async fn wait_assigned(
    setup: &Setup,
    repliers: &[PushConsumer],
    topic: &str,
) -> Result<(), String> {
    let queues = setup
        .admin
        .topic_route(topic)
        .await
        .map_err(|e| format!("route of {topic}: {e}"))?
        .read_queues
        .len();
    let deadline = Instant::now() + ASSIGN_WAIT;
    loop {
        let owned: usize = repliers
            .iter()
            .map(|r| r.assignment().iter().filter(|q| q.topic == topic).count())
            .sum();
        if owned >= queues {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the repliers own {owned} of {queues} queues after {ASSIGN_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the lanes (and the pacer under --rate) until the run ends.
async fn drive(a: &RequestArgs, run: &Arc<Run>, requesters: &[Producer]) {
    let mut lanes = Vec::new();
    let mut pacer = None;
    match a.rate {
        Some(rate) => {
            let mut txs = Vec::new();
            for (i, p) in requesters.iter().enumerate() {
                let (tx, rx) = flume::bounded::<Instant>(DUE_MAX);
                txs.push(tx);
                for _ in 0..a.inflight {
                    let (run, p, rx) = (Arc::clone(run), p.clone(), rx.clone());
                    lanes.push(tokio::spawn(async move {
                        while let Ok(due) = rx.recv_async().await {
                            if run.stop.load(Ordering::Relaxed) {
                                continue;
                            }
                            one(&run, &p, i as u64, due).await;
                        }
                    }));
                }
            }
            let run = Arc::clone(run);
            pacer = Some(std::thread::spawn(move || pace(&run, rate, &txs)));
        }
        None => {
            for (i, p) in requesters.iter().enumerate() {
                for _ in 0..a.inflight {
                    let (run, p) = (Arc::clone(run), p.clone());
                    lanes.push(tokio::spawn(async move {
                        while run.claim() {
                            one(&run, &p, i as u64, Instant::now()).await;
                        }
                    }));
                }
            }
        }
    }
    for l in lanes {
        let _ = l.await;
    }
    if let Some(p) = pacer {
        let _ = tokio::task::spawn_blocking(move || p.join()).await;
    }
}

/// The open-loop schedule: request k is due at `start + k / rate`, handed to the requesters
/// in turn (on its own thread: µs sleeps).
fn pace(run: &Run, rate: f64, txs: &[flume::Sender<Instant>]) {
    let start = Instant::now();
    let interval_s = 1.0 / rate;
    let mut k: u64 = 0;
    loop {
        let at = start + Duration::from_secs_f64(interval_s * k as f64);
        if run.deadline.is_some_and(|d| at >= d) {
            break;
        }
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        if !run.claim() {
            break;
        }
        if txs[(k % txs.len() as u64) as usize].send(at).is_err() {
            break;
        }
        k += 1;
    }
}

/// One request; its round trip counted from `since`.
async fn one(run: &Run, p: &Producer, requester: u64, since: Instant) {
    let seq = run.seq.fetch_add(1, Ordering::Relaxed);
    let body = run.maker.body(Head {
        producer: requester,
        seq,
        send_us: payload::now_us(),
    });
    let bytes = body.len() as u64;
    let outcome = match p
        .request(Message::new(run.topic.as_str(), body.clone()), run.timeout)
        .await
    {
        Ok(reply) if reply.body == body => {
            run.meter.record(1, bytes, us_since(since));
            "replied"
        }
        Ok(_) => {
            run.meter.error(1);
            run.wrong_replies.fetch_add(1, Ordering::Relaxed);
            "wrong_reply"
        }
        Err(e) => {
            run.meter.error(1);
            run.error(&e)
        }
    };
    run.log(requester, seq, outcome);
}
