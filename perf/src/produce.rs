//! The sending half: `producers` clients, each with `inflight` lanes (tasks) that keep that
//! many sends outstanding on the producer's pipelined connections.
//!
//! Closed loop (default): a lane sends again as soon as its previous send is answered;
//! latency is each request's round trip. Open loop (`--rate`): a pacer thread issues sends
//! on a fixed schedule (send k is due at `start + k * batch / rate`) to the producers in
//! turn; a lane takes the next due send, and its latency is measured from the *due* time,
//! so when the broker stalls, the sends that queue up behind it count their wait
//! (coordinated omission is not hidden). How late sends began (intended time to the moment
//! a lane started the send: every in-flight slot busy, or the generator behind schedule) is
//! reported apart as `start_lag`.
//!
//! With `--recall-ratio R` (scheduled sends, native protocol, `--verify`), about R of the
//! acknowledged sends, chosen from producer id and sequence, are recalled by their lane
//! right after the acknowledgement: a `recall` line goes to the verify log before the
//! recall is sent and a `recalled` line once the broker acknowledged it (see
//! [`crate::verify`]); the lane's next send waits for the recall.
//!
//! Only sends answered SEND_OK are "acknowledged" (written to the verify log). A send the
//! broker stored but could not make durable in time (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
//! SLAVE_NOT_AVAILABLE) is counted in `not_durable`, and as an error under `--flush-check`.
//!
//! A producer is the ringmq client's, or with `--protocol remoting` perf's remoting producer
//! ([`crate::remoting::send`]); lanes, pacing and accounting are the same for both.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use ringmq_client::trace::TraceStats;
use ringmq_client::wire::remoting::SerializeType;
use ringmq_client::{Error, Message, Producer, SendResult, SendStatus};

use crate::payload::{self, BodyMaker, Head};
use crate::remoting;
use crate::security::Target;
use crate::stats::{new_histogram, percentiles, us_since, Meter, Percentiles};
use crate::verify::AckLog;

/// Producer group perf's producers announce.
pub const PRODUCER_GROUP: &str = "ringmq-perf";
/// Sends due but not yet taken by a lane, per producer, before the pacer waits (the
/// schedule still holds: waiting sends keep their due time).
const DUE_SENDS_MAX: usize = 1 << 16;

/// What to send and for how long.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// Name servers, TLS and credentials.
    pub target: Target,
    pub topic: String,
    pub size: usize,
    pub batch: u32,
    pub producers: u32,
    pub inflight: u32,
    pub rate: Option<f64>,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub flush_check: bool,
    pub send_timeout: Duration,
    /// High 48 bits of every producer id of this run.
    pub run_id: u64,
    /// Every message scheduled after this delay, or with this delay level.
    pub delay: Option<Duration>,
    pub delay_level: Option<u32>,
    /// With `delay`: message k (over all producers) is due at the run's start + `delay` +
    /// k / `due_rate` s, so that they fall due at this rate whatever the send rate.
    pub due_rate: Option<f64>,
    /// Send over RocketMQ's remoting protocol with this header serialization (`None`:
    /// the native protocol).
    pub remoting: Option<SerializeType>,
    /// Random (incompressible) body filler instead of the pattern.
    pub random_payload: bool,
    /// The producers compress bodies longer than this, this way (`None`: never).
    pub compress: Option<(usize, ringmq_client::wire::record::Compression)>,
    /// Message trace on (native producers).
    pub trace: bool,
    /// Recall this share of the acknowledged scheduled sends (`--recall-ratio`).
    pub recall_ratio: Option<f64>,
}

/// What the sends came to (besides the meter).
#[derive(Debug, Clone, Default)]
pub struct SendOutcome {
    /// Messages stored without the promised durability.
    pub not_durable: u64,
    /// Failed messages by kind (status name or error kind).
    pub error_kinds: BTreeMap<String, u64>,
    /// Open loop: intended send time to the moment a lane started it, µs.
    pub start_lag_us: Option<Percentiles>,
    /// The verify log could not be written (the run stopped).
    pub verify_error: Option<String>,
    pub elapsed: Duration,
    /// `--recall-ratio`: recalls sent, and acknowledged by the broker.
    pub recalls_sent: u64,
    pub recalled: u64,
    /// Recalls that failed, by kind (the message may or may not have been recalled).
    pub recall_errors: BTreeMap<String, u64>,
}

/// Started producers.
#[derive(Debug)]
pub struct Producers {
    list: Vec<(u64, Sender)>,
}

/// One producer, of either protocol.
#[derive(Debug, Clone)]
enum Sender {
    Native(Producer),
    Remoting(Arc<remoting::send::Producer>),
}

impl Producers {
    /// Starts `plan.producers` clients and fetches the topic's route in each.
    pub async fn start(plan: &SendPlan) -> Result<Producers, String> {
        let mut list = Vec::new();
        for i in 0..plan.producers {
            let id = (plan.run_id << 16) | u64::from(i);
            if let Some(st) = plan.remoting {
                let p = remoting::send::Producer::start(
                    &plan.target,
                    &plan.topic,
                    PRODUCER_GROUP,
                    st,
                    plan.send_timeout,
                )
                .await
                .map_err(|e| format!("starting remoting producer {i}: {e}"))?;
                list.push((id, Sender::Remoting(Arc::new(p))));
                continue;
            }
            let p = Producer::builder()
                .group(PRODUCER_GROUP)
                .client_config(plan.target.client_config())
                .instance_name(format!("perf-{id:016x}"))
                .send_timeout(plan.send_timeout)
                .request_timeout(plan.send_timeout)
                .compress_over(plan.compress.map_or(usize::MAX, |(over, _)| over))
                .compression(
                    plan.compress
                        .map_or(ringmq_client::wire::record::Compression::Zlib, |(_, k)| k),
                )
                .trace(plan.trace)
                .start()
                .await
                .map_err(|e| format!("starting producer {i}: {e}"))?;
            p.write_queues(&plan.topic)
                .await
                .map_err(|e| format!("route of {}: {e}", plan.topic))?;
            list.push((id, Sender::Native(p)));
        }
        Ok(Producers { list })
    }

    /// Stops the producers (flushing their trace records when tracing).
    pub async fn shutdown(&self) {
        for (_, p) in &self.list {
            if let Sender::Native(p) = p {
                p.shutdown().await;
            }
        }
    }

    /// With tracing, after [`Producers::shutdown`]: the tracers' counters summed over
    /// every producer (`recorded`: made; `sent`: in trace messages the broker stored).
    pub fn traces(&self) -> Option<TraceStats> {
        let mut out: Option<TraceStats> = None;
        for (_, p) in &self.list {
            if let Sender::Native(p) = p {
                if let Some(s) = p.trace_stats() {
                    let o = out.get_or_insert_with(TraceStats::default);
                    o.recorded += s.recorded;
                    o.sent += s.sent;
                    o.dropped += s.dropped;
                    o.failed += s.failed;
                }
            }
        }
        out
    }
}

/// One send the pacer made due.
#[derive(Debug, Clone, Copy)]
struct Due {
    at: Instant,
    send_us: u64,
    messages: u32,
}

/// Shared by every lane of a run.
struct Run {
    plan: SendPlan,
    maker: BodyMaker,
    meter: Arc<Meter>,
    acks: Option<Arc<AckLog>>,
    stop: Arc<AtomicBool>,
    remaining: AtomicU64,
    deadline: Option<Instant>,
    not_durable: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    start_lag: Mutex<Histogram<u64>>,
    verify_error: Mutex<Option<String>>,
    /// `due_rate`: messages given a due time so far, and the run's start (ms since the epoch).
    due_seq: AtomicU64,
    start_ms: i64,
    recalls_sent: AtomicU64,
    recalled: AtomicU64,
    recall_errors: Mutex<BTreeMap<String, u64>>,
}

impl Run {
    /// Claims up to `batch` messages of the count; 0 when the run is over.
    fn claim(&self) -> u32 {
        if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return 0;
        }
        let want = u64::from(self.plan.batch);
        let mut cur = self.remaining.load(Ordering::Relaxed);
        loop {
            let take = cur.min(want);
            if take == 0 {
                return 0;
            }
            match self.remaining.compare_exchange_weak(
                cur,
                cur - take,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return take as u32,
                Err(now) => cur = now,
            }
        }
    }
}

/// Sends until the count, the duration or `stop` ends the run, recording into `meter`.
pub async fn run(
    plan: &SendPlan,
    producers: &Producers,
    meter: Arc<Meter>,
    acks: Option<Arc<AckLog>>,
    stop: Arc<AtomicBool>,
) -> SendOutcome {
    let started = Instant::now();
    // The wall clock at the same moment: the send times written into bodies under --rate are
    // `started_us + (due - started)`, on the consumers' clock, with no offset from the delay
    // before the pacer thread runs.
    let started_us = payload::now_us();
    let run = Arc::new(Run {
        due_seq: AtomicU64::new(0),
        start_ms: (payload::now_us() / 1000) as i64,
        maker: BodyMaker::with_filler(plan.size, plan.random_payload),
        plan: plan.clone(),
        meter,
        acks,
        stop,
        remaining: AtomicU64::new(plan.count.unwrap_or(u64::MAX)),
        deadline: plan.duration.map(|d| started + d),
        not_durable: AtomicU64::new(0),
        errors: Mutex::new(BTreeMap::new()),
        start_lag: Mutex::new(new_histogram()),
        verify_error: Mutex::new(None),
        recalls_sent: AtomicU64::new(0),
        recalled: AtomicU64::new(0),
        recall_errors: Mutex::new(BTreeMap::new()),
    });
    let mut lanes = Vec::new();
    let mut pacer = None;
    if let Some(rate) = plan.rate {
        let mut txs = Vec::new();
        for (id, p) in &producers.list {
            let (tx, rx) = flume::bounded::<Due>(DUE_SENDS_MAX);
            txs.push(tx);
            let seq = Arc::new(AtomicU64::new(0));
            for _ in 0..plan.inflight {
                let (run, p, rx, seq) = (Arc::clone(&run), p.clone(), rx.clone(), Arc::clone(&seq));
                lanes.push(tokio::spawn(paced_lane(run, *id, p, rx, seq)));
            }
        }
        let r = Arc::clone(&run);
        pacer = Some(std::thread::spawn(move || {
            pace(&r, rate, (started, started_us), &txs)
        }));
    } else {
        for (id, p) in &producers.list {
            let seq = Arc::new(AtomicU64::new(0));
            for _ in 0..plan.inflight {
                let (run, p, seq) = (Arc::clone(&run), p.clone(), Arc::clone(&seq));
                lanes.push(tokio::spawn(closed_lane(run, *id, p, seq)));
            }
        }
    }
    for l in lanes {
        let _ = l.await;
    }
    if let Some(p) = pacer {
        let _ = tokio::task::spawn_blocking(move || p.join()).await;
    }
    let elapsed = started.elapsed();
    let start_lag_us = plan
        .rate
        .map(|_| percentiles(&run.start_lag.lock().unwrap_or_else(|p| p.into_inner())));
    let error_kinds = run.errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let verify_error = run
        .verify_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let recall_errors = run
        .recall_errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    SendOutcome {
        not_durable: run.not_durable.load(Ordering::Relaxed),
        error_kinds,
        start_lag_us,
        verify_error,
        elapsed,
        recalls_sent: run.recalls_sent.load(Ordering::Relaxed),
        recalled: run.recalled.load(Ordering::Relaxed),
        recall_errors,
    }
}

/// The open-loop schedule: send k is due at `start + k * batch / rate`, handed to the
/// producers in turn. Runs on its own thread (sleeps with µs resolution, not the async
/// timer's ms).
fn pace(run: &Run, rate: f64, (start, start_us): (Instant, u64), txs: &[flume::Sender<Due>]) {
    let interval_s = f64::from(run.plan.batch) / rate.max(1e-9);
    let mut k: u64 = 0;
    loop {
        let offset = Duration::from_secs_f64(interval_s * k as f64);
        let at = start + offset;
        if run.deadline.is_some_and(|d| at >= d) {
            break;
        }
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        let messages = run.claim();
        if messages == 0 {
            break;
        }
        let due = Due {
            at,
            send_us: start_us + offset.as_micros() as u64,
            messages,
        };
        if txs[(k % txs.len() as u64) as usize].send(due).is_err() {
            break;
        }
        k += 1;
    }
}

async fn closed_lane(run: Arc<Run>, id: u64, p: Sender, seq: Arc<AtomicU64>) {
    let mut msgs = LaneMessages::default();
    loop {
        let n = run.claim();
        if n == 0 {
            return;
        }
        let seq0 = seq.fetch_add(u64::from(n), Ordering::Relaxed);
        let t0 = Instant::now();
        let send = (seq0, n, payload::now_us(), t0);
        if !send_one(&run, id, &p, &mut msgs, send).await {
            return;
        }
    }
}

async fn paced_lane(
    run: Arc<Run>,
    id: u64,
    p: Sender,
    rx: flume::Receiver<Due>,
    seq: Arc<AtomicU64>,
) {
    let mut msgs = LaneMessages::default();
    while let Ok(due) = rx.recv_async().await {
        if run.stop.load(Ordering::Relaxed) {
            continue; // drain what is due; the pacer stops on its own
        }
        let lag = us_since(due.at);
        run.start_lag
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .saturating_record(lag.max(1));
        let seq0 = seq.fetch_add(u64::from(due.messages), Ordering::Relaxed);
        let send = (seq0, due.messages, due.send_us, due.at);
        if !send_one(&run, id, &p, &mut msgs, send).await {
            return;
        }
    }
}

/// A lane's messages, reused from send to send (only bodies and schedules change), and the
/// buffer their bodies share (rewritten in place once the send let go of it).
#[derive(Default)]
struct LaneMessages {
    msgs: Vec<Message>,
    bodies: Option<Bytes>,
}

/// One send of `n` messages from sequence `seq0` (send time `send_us` in their heads);
/// latency from `origin`. False when the run must stop.
async fn send_one(
    run: &Run,
    id: u64,
    p: &Sender,
    lane: &mut LaneMessages,
    send: (u64, u32, u64, Instant),
) -> bool {
    match p {
        Sender::Native(p) => send_native(run, id, p, lane, send).await,
        Sender::Remoting(p) => send_remoting(run, id, p, lane, send).await,
    }
}

/// [`send_one`] over remoting: the bodies go into the request as they are.
async fn send_remoting(
    run: &Run,
    id: u64,
    p: &remoting::send::Producer,
    lane: &mut LaneMessages,
    (seq0, n, send_us, origin): (u64, u32, u64, Instant),
) -> bool {
    let size = run.maker.size();
    let first = Head {
        producer: id,
        seq: seq0,
        send_us,
    };
    let bodies = run
        .maker
        .bodies_reusing(first, n as usize, lane.bodies.take());
    let result = p.send(&bodies, size, (id, seq0)).await;
    lane.bodies = Some(bodies);
    let n64 = u64::from(n);
    let bytes = n64 * size as u64;
    match result {
        Ok(s) => {
            let ack = Ack {
                durable: s.durable,
                broker_name: &s.broker_name,
                queue_id: s.queue_id,
                queue_offset: s.queue_offset,
                status: if s.durable { "Ok" } else { "NotDurable" }.to_string(),
            };
            on_stored(run, id, seq0, n64, bytes, us_since(origin), &ack)
        }
        Err(f) => {
            run.meter.error(n64);
            note_error(run, f.kind, n64, &f.detail);
            true
        }
    }
}

/// [`send_one`] through the ringmq client.
async fn send_native(
    run: &Run,
    id: u64,
    p: &Producer,
    lane: &mut LaneMessages,
    (seq0, n, send_us, origin): (u64, u32, u64, Instant),
) -> bool {
    let size = run.maker.size();
    let first = Head {
        producer: id,
        seq: seq0,
        send_us,
    };
    let msgs = &mut lane.msgs;
    for m in msgs.iter_mut() {
        m.body = Bytes::new(); // let go of the old buffer, so it can be rewritten
    }
    let bodies = run
        .maker
        .bodies_reusing(first, n as usize, lane.bodies.take());
    msgs.truncate(n as usize);
    while msgs.len() < n as usize {
        msgs.push(Message::new(run.plan.topic.clone(), Bytes::new()));
    }
    for (i, m) in msgs.iter_mut().enumerate() {
        m.body = bodies.slice(i * size..(i + 1) * size);
        match (run.plan.delay, run.plan.delay_level) {
            (Some(d), _) if run.plan.due_rate.is_some() => {
                let k = run.due_seq.fetch_add(1, Ordering::Relaxed);
                let rate = run.plan.due_rate.unwrap_or(1.0).max(1e-3);
                let at = run.start_ms + d.as_millis() as i64 + (k as f64 * 1000.0 / rate) as i64;
                m.deliver_at_ms = Some(at);
            }
            (Some(d), _) => m.delay = Some(d),
            (None, Some(l)) => m.delay_level = Some(l),
            (None, None) => {}
        }
    }
    lane.bodies = Some(bodies);
    let result = if run.plan.batch == 1 {
        p.send(msgs[0].clone()).await
    } else {
        p.send_batch(msgs).await
    };
    let n64 = u64::from(n);
    let bytes = n64 * run.maker.size() as u64;
    match result {
        Ok(r) => {
            let ack = Ack::of(&r);
            on_stored(run, id, seq0, n64, bytes, us_since(origin), &ack)
                && (!ack.durable || recall_if_chosen(run, id, seq0, p, &r).await)
        }
        Err(e) => {
            run.meter.error(n64);
            note_error(run, error_kind(&e), n64, &e.to_string());
            true
        }
    }
}

/// A stored send, of either protocol.
struct Ack<'a> {
    durable: bool,
    broker_name: &'a str,
    queue_id: u32,
    queue_offset: u64,
    /// The status's name (for the error count when not durable).
    status: String,
}

impl Ack<'_> {
    fn of(r: &SendResult) -> Ack<'_> {
        Ack {
            durable: r.status == SendStatus::Ok,
            broker_name: &r.queue.broker_name,
            queue_id: r.queue.queue_id,
            queue_offset: r.queue_offset,
            status: format!("{:?}", r.status),
        }
    }
}

fn on_stored(run: &Run, id: u64, seq0: u64, n: u64, bytes: u64, lat: u64, r: &Ack<'_>) -> bool {
    if !r.durable {
        run.not_durable.fetch_add(n, Ordering::Relaxed);
        if run.plan.flush_check {
            run.meter.error(n);
            note_error(run, r.status.clone(), n, "stored, not durable in time");
        } else {
            run.meter.record(n, bytes, lat);
        }
        return true;
    }
    run.meter.record(n, bytes, lat);
    let Some(acks) = &run.acks else {
        return true;
    };
    if let Err(e) = acks.append(id, seq0, n, r.broker_name, r.queue_id, r.queue_offset) {
        let mut v = run.verify_error.lock().unwrap_or_else(|p| p.into_inner());
        if v.is_none() {
            eprintln!("ringmq-perf: writing the verify log: {e}; stopping");
            *v = Some(e.to_string());
        }
        run.stop.store(true, Ordering::Relaxed);
        return false;
    }
    true
}

/// `--recall-ratio`: recalls the acknowledged (and logged) send `seq` of producer `id` if
/// it is one of the chosen share, logging the recall before and, once acknowledged, after.
/// False when the run must stop (the verify log could not be written).
async fn recall_if_chosen(run: &Run, id: u64, seq: u64, p: &Producer, r: &SendResult) -> bool {
    let (Some(ratio), Some(acks), Some(handle)) =
        (run.plan.recall_ratio, &run.acks, r.recall_handle.as_deref())
    else {
        return true;
    };
    let x = (crate::fail::mix(id ^ crate::fail::mix(seq ^ RECALL_SALT)) >> 11) as f64
        / (1u64 << 53) as f64;
    if x >= ratio {
        return true;
    }
    if !log_recall(run, acks, id, seq, false) {
        return false;
    }
    run.recalls_sent.fetch_add(1, Ordering::Relaxed);
    match p.recall(handle).await {
        Ok(_) => {
            run.recalled.fetch_add(1, Ordering::Relaxed);
            log_recall(run, acks, id, seq, true)
        }
        Err(e) => {
            let kind = error_kind(&e);
            let mut m = run.recall_errors.lock().unwrap_or_else(|p| p.into_inner());
            let slot = m.entry(kind.clone()).or_insert(0);
            if *slot == 0 {
                eprintln!("ringmq-perf: recall failed ({kind}): {e}");
            }
            *slot += 1;
            true
        }
    }
}

/// Mixed into the recall choice, so it does not pick the messages --fail-ratio picks.
const RECALL_SALT: u64 = 0x7265_6361_6c6c;

fn log_recall(run: &Run, acks: &AckLog, id: u64, seq: u64, acknowledged: bool) -> bool {
    if let Err(e) = acks.append_recall(id, seq, acknowledged) {
        let mut v = run.verify_error.lock().unwrap_or_else(|p| p.into_inner());
        if v.is_none() {
            eprintln!("ringmq-perf: writing the verify log: {e}; stopping");
            *v = Some(e.to_string());
        }
        run.stop.store(true, Ordering::Relaxed);
        return false;
    }
    true
}

fn note_error(run: &Run, kind: String, n: u64, detail: &str) {
    let mut m = run.errors.lock().unwrap_or_else(|p| p.into_inner());
    let slot = m.entry(kind.clone()).or_insert(0);
    if *slot == 0 {
        eprintln!("ringmq-perf: send failed ({kind}): {detail}");
    }
    *slot += n;
}

/// A short name for an error: the broker's status, else the error's variant.
pub fn error_kind(e: &Error) -> String {
    if let Some(s) = e.status() {
        return s.to_string();
    }
    let dbg = format!("{e:?}");
    let end = dbg
        .find(|c: char| !c.is_alphanumeric() && c != '_')
        .unwrap_or(dbg.len());
    dbg[..end].to_string()
}
