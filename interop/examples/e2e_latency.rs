//! End-to-end latency of `rocketmq-client-rust` 1.0.0 (crates.io, unchanged) against a
//! running node: one open-loop producer and one push consumer, both the client's own
//! `DefaultMQProducer` / `DefaultMQPushConsumer` with RocketMQ's defaults (JSON headers,
//! SEND_MESSAGE, PULL_MESSAGE long polls) unless a flag says otherwise (issue #23, item 7).
//!
//! Message `k` is due at `start + k / rate`; a pacer thread (µs sleeps, not the async
//! timer's 1 ms ticks) hands it to the producer as an async send at that time, at most
//! `--inflight` sends unanswered (a send waits for a slot; its latency still counts from
//! its due time, so a stall is not hidden by sending less). The first bytes of each body
//! are the run id, `k` and the due time; the consumer's listener records receipt minus
//! due time into a histogram. Messages due in the warm-up are sent and received but not
//! counted.
//!
//! Body layout (big-endian): `[0, 8)` run id, `[8, 16)` sequence `k`, `[16, 24)` due time
//! in ns since the run's start (this process's monotonic clock), then filler.
//!
//! Bounds: one state byte and one receipt counter per message of the run (rate x (warm-up
//! + duration), capped at [`MESSAGES_MAX`]); sends in flight at most `--inflight`.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use hdrhistogram::Histogram;
use rocketmq_client_rust::{
    ClientConfig, ClientResult, ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer,
    MessageListenerConcurrently, SendStatus, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_protocol::protocol::SerializeType;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of the head every body starts with (run id, sequence, due time).
const HEAD_BYTES: usize = 24;
/// Messages per run at most (rate x (warm-up + duration)): the per-message tables.
const MESSAGES_MAX: u64 = 50_000_000;
/// Sends in flight at most.
const INFLIGHT_MAX: usize = 65_536;
/// Latencies above this (µs) are recorded as this.
const LATENCY_MAX_US: u64 = 600_000_000;
/// `/proc/<pid>/stat` counts CPU time in USER_HZ ticks, 100 per second on every Linux ABI.
const TICKS_PER_S: u64 = 100;
/// Exit code when a message acknowledged in the measured window never arrived.
const EXIT_LOST: i32 = 3;

/// Send state per message.
const PENDING: u8 = 0;
const ACKED: u8 = 1;
const FAILED: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "e2e_latency",
    about = "End-to-end latency of rocketmq-client-rust 1.0.0 against a running node: one \
             open-loop producer (async sends, bounded in flight), one push consumer \
             (clustering, CONSUME_FROM_LAST_OFFSET, a new group); latency is the consumer's \
             receipt minus each message's due send time. Exit code 3 if a message \
             acknowledged in the measured window never arrived."
)]
struct Args {
    /// Name server address the client is given, host:port.
    #[arg(long, default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// Pid of the broker process on this machine: report its CPU time (user + system, from
    /// /proc/PID/stat) over the measured window, per message sent, in µs.
    #[arg(long, value_name = "PID")]
    node_pid: Option<u32>,
    /// Messages per second, open loop: message k is due at start + k / rate.
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    rate: u32,
    /// Body bytes per message (at least 24: run id, sequence and due time).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(HEAD_BYTES as i64..=4_194_304))]
    size: u32,
    /// Async sends in flight at most; when all are out, the next send waits (and its
    /// latency still counts from its due time).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=INFLIGHT_MAX as i64))]
    inflight: u32,
    /// Measured time: messages due in this window count (30s, 500ms, 2m; a bare number is
    /// seconds).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Sent and received before the measured window, not counted (connections, route,
    /// rebalance, the first pulls).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    warmup: Duration,
    /// After the last send: wait at most this long for the last deliveries.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    drain: Duration,
    /// Topic (default: a new one per run, E2eLatency<unix ms>, created by the producer's
    /// first send with --queues queues).
    #[arg(long)]
    topic: Option<String>,
    /// Queues of the topic when the first send creates it (the producer's
    /// defaultTopicQueueNums; the broker may allow fewer).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    queues: u32,
    /// Consumer group (default: a new one per run, e2e-latency-cg-<unix ms>).
    #[arg(long)]
    group: Option<String>,
    /// The consumer's pullBatchSize: messages per PULL_MESSAGE (RocketMQ's default 32).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pull_batch: u32,
    /// The consumer's consumeMessageBatchMaxSize: messages per listener call (RocketMQ's
    /// default 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    consume_batch: u32,
    /// Worker threads of the client's runtime (producer and consumer share it; count them:
    /// they share the cores with the broker when it runs on this machine).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    client_threads: u32,
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("e2e-main")
        .enable_all()
        .build()
        .expect("building the main runtime");
    let code = rt.block_on(run(args, rt.handle().clone()));
    std::process::exit(code);
}

async fn run(args: Args, handle: tokio::runtime::Handle) -> i32 {
    let run_id = unix_ms();
    let topic = args
        .topic
        .clone()
        .unwrap_or_else(|| format!("E2eLatency{run_id}"));
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| format!("e2e-latency-cg-{run_id}"));
    let plan = Plan::new(&args, run_id);
    let client = Client::new(&args);
    let mut producer = client.producer(&args, run_id).await;
    if let Err(e) = create_topic(&producer, &topic, plan.size).await {
        eprintln!("e2e_latency: the first send to {topic} failed: {e}");
        client.shutdown().await;
        return 1;
    }
    let tally = Arc::new(Tally::new(&plan));
    let mut consumer = client.consumer(&args, &topic, &group).await;
    consumer.register_message_listener_concurrently(Listener {
        tally: tally.clone(),
    });
    if let Err(e) = consumer.start().await {
        eprintln!("e2e_latency: starting the consumer failed: {e}");
        client.shutdown().await;
        return 1;
    }
    print_header(&args, &plan, &topic, &group);

    let pacer = {
        let (producer, tally, topic) = (producer.clone(), tally.clone(), topic.clone());
        let plan = plan.clone();
        std::thread::Builder::new()
            .name("e2e-pacer".into())
            .spawn(move || pace(&handle, &producer, &topic, &plan, &tally))
            .expect("spawning the pacer thread")
    };
    let cpu = watch(&tally, &plan, args.node_pid).await;
    let send_end = pacer.join().expect("the pacer thread");
    drain(&tally, args.drain).await;
    let code = report(&tally, &plan, send_end, &cpu, args.node_pid);

    consumer.shutdown().await;
    producer.shutdown().await;
    client.shutdown().await;
    code
}

/// What a run sends: how many, when, how big.
#[derive(Clone)]
struct Plan {
    run_id: u64,
    size: usize,
    inflight: usize,
    interval_ns: f64,
    /// Messages due in the warm-up (sequence numbers below this are not counted).
    warm: u64,
    /// All messages of the run.
    total: u64,
    duration: Duration,
    warmup: Duration,
}

impl Plan {
    fn new(args: &Args, run_id: u64) -> Plan {
        let rate = f64::from(args.rate);
        let warm = (args.warmup.as_secs_f64() * rate).round() as u64;
        let measured = (args.duration.as_secs_f64() * rate).round() as u64;
        let total = warm + measured;
        assert!(
            total <= MESSAGES_MAX,
            "{total} messages per run; at most {MESSAGES_MAX} (lower --rate or --duration)"
        );
        Plan {
            run_id,
            size: args.size as usize,
            inflight: args.inflight as usize,
            interval_ns: 1e9 / rate,
            warm,
            total,
            duration: args.duration,
            warmup: args.warmup,
        }
    }

    fn due_ns(&self, k: u64) -> u64 {
        (k as f64 * self.interval_ns) as u64
    }
}

/// Per-message state and the histograms, shared by the pacer, the send callbacks and the
/// listener.
struct Tally {
    start: Instant,
    run_id: u64,
    warm: u64,
    inflight: Arc<Semaphore>,
    inflight_max: usize,
    state: Box<[AtomicU8]>,
    receipts: Box<[AtomicU32]>,
    sent: AtomicU64,
    acked: AtomicU64,
    failed: AtomicU64,
    received: AtomicU64,
    /// Deliveries of other runs' messages (or the topic's first message).
    other: AtomicU64,
    /// Receipt time (ns since start) of the last message of the measured window.
    last_receipt_ns: AtomicU64,
    /// Bit q: a message arrived from queue q (q < 64).
    queues_seen: AtomicU64,
    hist: Mutex<Hists>,
}

struct Hists {
    /// Measured window: receipt minus due time, µs.
    e2e: Histogram<u64>,
    /// Measured window: send acknowledgement minus due time, µs.
    ack: Histogram<u64>,
    /// Every message since the last progress line (warm-up included), µs.
    second: Histogram<u64>,
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("valid histogram bounds")
}

impl Tally {
    fn new(plan: &Plan) -> Tally {
        let n = plan.total as usize;
        Tally {
            start: Instant::now(),
            run_id: plan.run_id,
            warm: plan.warm,
            inflight: Arc::new(Semaphore::new(plan.inflight)),
            inflight_max: plan.inflight,
            state: (0..n).map(|_| AtomicU8::new(PENDING)).collect(),
            receipts: (0..n).map(|_| AtomicU32::new(0)).collect(),
            sent: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            received: AtomicU64::new(0),
            other: AtomicU64::new(0),
            last_receipt_ns: AtomicU64::new(0),
            queues_seen: AtomicU64::new(0),
            hist: Mutex::new(Hists {
                e2e: new_histogram(),
                ack: new_histogram(),
                second: new_histogram(),
            }),
        }
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn measured(&self, k: u64) -> bool {
        k >= self.warm
    }

    /// A send's callback: acknowledged (`ok`) or failed, at `now_ns`.
    fn on_ack(&self, k: u64, due_ns: u64, ok: bool) {
        let now = self.now_ns();
        let state = if ok { ACKED } else { FAILED };
        self.state[k as usize].store(state, Ordering::Relaxed);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.acked.fetch_add(1, Ordering::Relaxed);
        if self.measured(k) {
            let us = now.saturating_sub(due_ns) / 1000;
            self.lock().ack.saturating_record(us.max(1));
        }
    }

    /// One delivery: a body this run sent, or someone else's.
    fn on_receipt(&self, body: &[u8], queue_id: i32, now_ns: u64) {
        let Some((run, k, due_ns)) = read_head(body) else {
            self.other.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if run != self.run_id || k >= self.receipts.len() as u64 {
            self.other.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.receipts[k as usize].fetch_add(1, Ordering::Relaxed);
        self.received.fetch_add(1, Ordering::Relaxed);
        if (0..64).contains(&queue_id) {
            self.queues_seen.fetch_or(1 << queue_id, Ordering::Relaxed);
        }
        let us = (now_ns.saturating_sub(due_ns) / 1000).max(1);
        let mut h = self.lock();
        h.second.saturating_record(us);
        if self.measured(k) {
            h.e2e.saturating_record(us);
            self.last_receipt_ns.fetch_max(now_ns, Ordering::Relaxed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Hists> {
        self.hist.lock().expect("the histograms' lock")
    }

    /// Measured messages acknowledged and never received / received more than once
    /// (extra copies) / not acknowledged (failed or unanswered).
    fn losses(&self) -> (u64, u64, u64) {
        let (mut lost, mut dups, mut unacked) = (0, 0, 0);
        for k in self.warm as usize..self.state.len() {
            let n = u64::from(self.receipts[k].load(Ordering::Relaxed));
            dups += n.saturating_sub(1);
            match self.state[k].load(Ordering::Relaxed) {
                ACKED if n == 0 => lost += 1,
                ACKED => {}
                _ => unacked += 1,
            }
        }
        (lost, dups, unacked)
    }

    /// Measured messages received at least once.
    fn distinct_measured(&self) -> u64 {
        self.receipts[self.warm as usize..]
            .iter()
            .filter(|r| r.load(Ordering::Relaxed) > 0)
            .count() as u64
    }
}

/// The head of a body: (run id, sequence, due ns).
fn read_head(body: &[u8]) -> Option<(u64, u64, u64)> {
    let word = |i: usize| -> Option<u64> {
        let b: [u8; 8] = body.get(i..i + 8)?.try_into().ok()?;
        Some(u64::from_be_bytes(b))
    };
    Some((word(0)?, word(8)?, word(16)?))
}

fn body(run_id: u64, k: u64, due_ns: u64, size: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(size);
    b.extend_from_slice(&run_id.to_be_bytes());
    b.extend_from_slice(&k.to_be_bytes());
    b.extend_from_slice(&due_ns.to_be_bytes());
    b.resize(size, b'x');
    b
}

/// The listener: receipt time first, then the bookkeeping.
struct Listener {
    tally: Arc<Tally>,
}

impl MessageListenerConcurrently for Listener {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> ClientResult<ConsumeConcurrentlyStatus> {
        let now = self.tally.now_ns();
        for m in msgs {
            let body = m.body().unwrap_or_default();
            self.tally.on_receipt(&body, m.queue_id(), now);
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// The open-loop schedule, on its own thread: message k is sent at `start + k / rate` (or
/// as soon as a send slot is free, if later). Returns when the last send was handed over
/// (ns since start).
fn pace(
    handle: &tokio::runtime::Handle,
    producer: &DefaultMQProducer,
    topic: &str,
    plan: &Plan,
    tally: &Arc<Tally>,
) -> u64 {
    for k in 0..plan.total {
        let due_ns = plan.due_ns(k);
        let at = tally.start + Duration::from_nanos(due_ns);
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        let msg = Message::builder()
            .topic(topic.to_string())
            .body(body(plan.run_id, k, due_ns, plan.size))
            .build()
            .expect("a valid message");
        handle.block_on(send_one(producer, msg, tally, k, due_ns));
    }
    tally.now_ns()
}

/// Sends one message asynchronously once a send slot is free; the send's callback gives
/// the slot back.
async fn send_one(
    producer: &DefaultMQProducer,
    msg: Message,
    tally: &Arc<Tally>,
    k: u64,
    due_ns: u64,
) {
    let permit = tally
        .inflight
        .clone()
        .acquire_owned()
        .await
        .expect("the in-flight semaphore is never closed");
    // The callback is `Fn`: the slot is taken out on its (one) call.
    let slot: Mutex<Option<OwnedSemaphorePermit>> = Mutex::new(Some(permit));
    let t = tally.clone();
    tally.sent.fetch_add(1, Ordering::Relaxed);
    let handed = producer
        .send_with_callback(msg, move |r, e| {
            let ok = e.is_none() && r.is_some_and(|r| r.send_status == SendStatus::SendOk);
            t.on_ack(k, due_ns, ok);
            drop(slot.lock().expect("the slot's lock").take());
        })
        .await;
    if let Err(e) = handed {
        // The client also calls the callback with the error: counted there.
        eprintln!("e2e_latency: send {k} refused: {e}");
    }
}

/// One application's client side: the runtime it owns and the client runtime on it (as
/// `interop/tests/rust_client/rmq.rs` builds it).
struct Client {
    owner: RuntimeOwner,
    runtime: Arc<ClientRuntime>,
    namesrv: String,
}

impl Client {
    fn new(args: &Args) -> Client {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "e2e-rocketmq".to_string(),
            worker_threads: args.client_threads as usize,
            shutdown_timeout: Duration::from_secs(5),
            ..Default::default()
        })
        .expect("a valid runtime configuration")
        .build()
        .expect("building the client's runtime");
        let runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig {
                shutdown_timeout: Duration::from_secs(5),
                ..Default::default()
            },
            TelemetryHandle::noop(),
        )
        .expect("creating the ClientRuntime");
        Client {
            owner,
            runtime,
            namesrv: args.namesrv.clone(),
        }
    }

    async fn producer(&self, args: &Args, run_id: u64) -> DefaultMQProducer {
        let mut producer = DefaultMQProducer::builder(self.runtime.clone())
            .producer_group(format!("e2e-latency-pg-{run_id}"))
            .name_server_addr(self.namesrv.clone())
            .default_topic_queue_nums(args.queues)
            .build();
        producer.start().await.expect("starting the producer");
        producer
    }

    async fn consumer(&self, args: &Args, topic: &str, group: &str) -> DefaultMQPushConsumer {
        let config = ClientConfig {
            namesrv_addr: Some(args.namesrv.clone().into()),
            ..Default::default()
        };
        let mut consumer = DefaultMQPushConsumer::builder(self.runtime.clone())
            .client_config(config)
            .consumer_group(group.to_string())
            .message_model(MessageModel::Clustering)
            .consume_from_where(ConsumeFromWhere::ConsumeFromLastOffset)
            .pull_batch_size(args.pull_batch)
            .consume_message_batch_max_size(args.consume_batch)
            .build();
        consumer
            .subscribe(topic.to_string(), "*".to_string())
            .await
            .expect("subscribing");
        consumer
    }

    /// Stops the client runtime and the runtime under it (each bounded).
    async fn shutdown(self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.runtime.shutdown()).await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.owner.shutdown_tasks()).await;
        self.owner.shutdown_background();
    }
}

/// One sync send (not counted: its head names no run) so the topic exists, with its
/// queues, before the consumer looks up its route.
async fn create_topic(
    producer: &DefaultMQProducer,
    topic: &str,
    size: usize,
) -> Result<(), String> {
    let msg = Message::builder()
        .topic(topic.to_string())
        .body(vec![b'-'; size])
        .build()
        .map_err(|e| e.to_string())?;
    match producer.send(msg).await {
        Ok(Some(r)) if r.send_status == SendStatus::SendOk => Ok(()),
        Ok(r) => Err(format!("answered {r:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// CPU time (user + system, ticks) of the node and of this process at the measured
/// window's start and end.
#[derive(Default)]
struct CpuWindow {
    node: Option<(u64, u64)>,
    own: Option<(u64, u64)>,
}

/// A progress line each second until the last message is due; samples CPU time at the
/// measured window's edges.
async fn watch(tally: &Tally, plan: &Plan, node_pid: Option<u32>) -> CpuWindow {
    let node = || node_pid.and_then(proc_cpu_ticks);
    let own = || proc_cpu_ticks(std::process::id());
    let warm_end = tally.start + plan.warmup;
    let end = warm_end + plan.duration;
    let (mut node0, mut own0) = (None, None);
    let mut prev = Counts::now(tally);
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(tally.start) + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    loop {
        let at = tokio::time::Instant::from_std(warm_end.min(end));
        tokio::select! {
            _ = tick.tick() => {
                let now = Counts::now(tally);
                progress(tally, &prev, &now, Instant::now() < warm_end);
                prev = now;
            }
            _ = tokio::time::sleep_until(at), if node0.is_none() && own0.is_none() => {
                node0 = Some(node());
                own0 = Some(own());
            }
        }
        if Instant::now() >= end {
            break;
        }
    }
    CpuWindow {
        node: node0.flatten().zip(node()),
        own: own0.flatten().zip(own()),
    }
}

/// Counters at one moment, for the progress lines.
struct Counts {
    at: Instant,
    sent: u64,
    acked: u64,
    received: u64,
}

impl Counts {
    fn now(t: &Tally) -> Counts {
        Counts {
            at: Instant::now(),
            sent: t.sent.load(Ordering::Relaxed),
            acked: t.acked.load(Ordering::Relaxed),
            received: t.received.load(Ordering::Relaxed),
        }
    }
}

fn progress(tally: &Tally, prev: &Counts, now: &Counts, warming: bool) {
    let secs = now.at.duration_since(prev.at).as_secs_f64().max(1e-9);
    let per_s = |a: u64, b: u64| (a.saturating_sub(b)) as f64 / secs;
    let (p50, p99, n) = {
        let mut h = tally.lock();
        let r = (
            h.second.value_at_quantile(0.5),
            h.second.value_at_quantile(0.99),
            h.second.len(),
        );
        h.second.reset();
        r
    };
    let free = tally.inflight.available_permits();
    println!(
        "[{:>4.0}s] {:<7} sent {:>6.0} msgs/s  acked {:>6.0} msgs/s  received {:>6.0} msgs/s  \
         in flight {:>3}  e2e p50 {p50} µs  p99 {p99} µs ({n} this second)",
        now.at.duration_since(tally.start).as_secs_f64(),
        if warming { "warm-up" } else { "measure" },
        per_s(now.sent, prev.sent),
        per_s(now.acked, prev.acked),
        per_s(now.received, prev.received),
        tally.inflight_max.saturating_sub(free),
    );
}

/// Waits until every acknowledged message arrived, or at most `limit`.
async fn drain(tally: &Tally, limit: Duration) {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let settled = tally.acked.load(Ordering::Relaxed) + tally.failed.load(Ordering::Relaxed);
        let all_in = tally.received.load(Ordering::Relaxed) >= tally.acked.load(Ordering::Relaxed);
        if settled >= tally.sent.load(Ordering::Relaxed) && all_in {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The result; returns the exit code.
fn report(
    tally: &Tally,
    plan: &Plan,
    send_end_ns: u64,
    cpu: &CpuWindow,
    node_pid: Option<u32>,
) -> i32 {
    let window_start_ns = plan.due_ns(plan.warm);
    let measured = plan.total - plan.warm;
    let send_s = (send_end_ns.saturating_sub(window_start_ns) as f64 / 1e9).max(1e-9);
    let received = tally.distinct_measured();
    let last = tally.last_receipt_ns.load(Ordering::Relaxed);
    let recv_s = (last.saturating_sub(window_start_ns) as f64 / 1e9).max(1e-9);
    let (lost, dups, unacked) = tally.losses();
    let h = tally.lock();
    let queues = tally.queues_seen.load(Ordering::Relaxed).count_ones();
    println!(
        "result: measured window {:.1} s after a {:.1} s warm-up ({measured} messages due)",
        plan.duration.as_secs_f64(),
        plan.warmup.as_secs_f64()
    );
    println!(
        "  sent      {measured} in {send_s:.2} s = {:.0} msgs/s; not acknowledged {unacked} \
         (all run: {} failed)",
        measured as f64 / send_s,
        tally.failed.load(Ordering::Relaxed)
    );
    println!(
        "  received  {received} distinct in {recv_s:.2} s = {:.0} msgs/s; lost {lost}, \
         duplicates {dups}; from {queues} queues; other messages {}",
        received as f64 / recv_s,
        tally.other.load(Ordering::Relaxed)
    );
    println!(
        "  e2e latency (receipt - due send time): {}",
        quantiles(&h.e2e)
    );
    println!(
        "  send ack latency (callback - due send time): {}",
        quantiles(&h.ack)
    );
    let per_msg = |(a, b): (u64, u64)| {
        let us = b.saturating_sub(a) as f64 * 1e6 / TICKS_PER_S as f64;
        format!(
            "{:.0} ms, {:.1} µs/msg",
            us / 1000.0,
            us / measured.max(1) as f64
        )
    };
    match (node_pid, cpu.node) {
        (Some(pid), Some(w)) => println!("  node CPU (pid {pid}, user + system): {}", per_msg(w)),
        (Some(pid), None) => println!("  node CPU: /proc/{pid}/stat unreadable"),
        (None, _) => println!("  node CPU: not measured (--node-pid)"),
    }
    if let Some(w) = cpu.own {
        println!("  client CPU (this process, user + system): {}", per_msg(w));
    }
    if lost > 0 {
        EXIT_LOST
    } else {
        0
    }
}

fn quantiles(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "no samples".into();
    }
    format!(
        "p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs ({} samples)",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
        h.len()
    )
}

fn print_header(args: &Args, plan: &Plan, topic: &str, group: &str) {
    let headers = rocketmq_protocol::protocol::remoting_command_defaults::
        application_remoting_command_factory()
    .defaults()
    .serialize_type();
    let headers = if headers == SerializeType::ROCKETMQ {
        "ROCKETMQ (binary)"
    } else {
        "JSON"
    };
    println!(
        "e2e_latency: rocketmq-client-rust 1.0.0 -> {}, topic {topic} (up to {} queues), group \
         {group}; {} B bodies, {} msgs/s open loop, {} sends in flight at most, {headers} headers; \
         pull batch {}, consume batch {}; warm-up {:.1} s (not counted), measured {:.1} s",
        args.namesrv,
        args.queues,
        plan.size,
        args.rate,
        plan.inflight,
        args.pull_batch,
        args.consume_batch,
        plan.warmup.as_secs_f64(),
        plan.duration.as_secs_f64()
    );
}

/// User + system CPU ticks of process `pid`, from `/proc/<pid>/stat` (fields 14 and 15;
/// the command name in parentheses may hold spaces, so fields count from its `)`).
fn proc_cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A duration: 30s, 500ms, 2m, 1h; a bare number is seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number with an optional unit (ms, s, m, h)"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h)")),
    };
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("{s:?} is out of range (at most a day)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
