//! A closed-loop load generator over RocketMQ 5's gRPC protocol, driven by RocketMQ 5's own
//! Rust SDK (crates.io `rocketmq` 5.0.0, unchanged): the same client against any gRPC
//! access point, ringmq's edge or the Rust port's `rocketmq-proxy` (scripts/bench-grpc.sh).
//!
//! `send`: `--concurrency` tasks share one `Producer`; each sends `--batch` messages of
//! `--size` bytes per request (`Producer::send` for 1, `Producer::batch_send` above: one
//! SendMessage RPC either way) and sends the next when the answer came, until `--count`
//! messages are acknowledged. `receive`: `--concurrency` tasks share one `SimpleConsumer`;
//! each receives up to `--batch` messages (ReceiveMessage, long polling) and acks each
//! (AckMessage, one RPC per message as the SDK has it), until `--count` messages came or
//! none came for `--idle-exit-s`.
//!
//! It prints one JSON line: messages, seconds, msgs/s, errors and the request latency
//! percentiles (µs; a send request, or a receive call). Exit 1 when it moved fewer messages
//! than asked for.
//!
//! Bounds: in flight at most `--concurrency` requests; latencies in a histogram.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use rocketmq_grpc_sdk::conf::{ClientOption, ProducerOption, SimpleConsumerOption};
use rocketmq_grpc_sdk::model::common::{FilterExpression, FilterType};
use rocketmq_grpc_sdk::model::message::MessageBuilder;
use rocketmq_grpc_sdk::{Producer, SimpleConsumer};

/// Requests in flight at most.
const CONCURRENCY_MAX: usize = 1024;
/// Messages per request at most (ringmq's gRPC edge refuses more than 4,096 entries).
const BATCH_MAX: usize = 4096;
/// Latencies above this (µs) are recorded as this.
const LATENCY_MAX_US: u64 = 60_000_000;

#[derive(Parser, Debug)]
#[command(
    name = "grpc_bench",
    about = "Closed-loop sends or receives over RocketMQ 5's gRPC protocol with the `rocketmq` 5.0.0 SDK"
)]
struct Args {
    /// gRPC access point, HOST:PORT (plaintext).
    #[arg(long)]
    endpoint: String,
    /// Topic (must exist).
    #[arg(long)]
    topic: String,
    /// Messages to move.
    #[arg(long)]
    count: u64,
    /// Messages per request (send) or at most per receive.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Requests in flight.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Request timeout, seconds.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Send --count messages.
    Send {
        /// Body bytes per message.
        #[arg(long, default_value_t = 1024)]
        size: usize,
    },
    /// Receive and ack --count messages as a consumer group.
    Receive {
        /// Consumer group.
        #[arg(long)]
        group: String,
        /// How long a received message stays invisible, seconds.
        #[arg(long, default_value_t = 30)]
        invisible_s: u64,
        /// Stop when no message came for this long, seconds.
        #[arg(long, default_value_t = 5)]
        idle_exit_s: u64,
    },
}

/// What all tasks counted together.
struct Tally {
    messages: AtomicU64,
    errors: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
}

impl Tally {
    fn new() -> Self {
        Self {
            messages: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency_us: Mutex::new(
                Histogram::new_with_max(LATENCY_MAX_US, 3).expect("a valid histogram bound"),
            ),
        }
    }

    fn record(&self, since: Instant) {
        let us = (since.elapsed().as_micros() as u64).clamp(1, LATENCY_MAX_US);
        self.latency_us
            .lock()
            .expect("no task panics holding the histogram")
            .saturating_record(us);
    }
}

fn main() {
    let args = Args::parse();
    if args.concurrency == 0 || args.concurrency > CONCURRENCY_MAX {
        fail(&format!("--concurrency must be 1..={CONCURRENCY_MAX}"));
    }
    if args.batch == 0 || args.batch > BATCH_MAX {
        fail(&format!("--batch must be 1..={BATCH_MAX}"));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("a tokio runtime: {e}")));
    let tally = Arc::new(Tally::new());
    let run = match &args.mode {
        Mode::Send { size } => rt.block_on(send(&args, *size, tally.clone())),
        Mode::Receive {
            group,
            invisible_s,
            idle_exit_s,
        } => rt.block_on(receive(
            &args,
            group,
            Duration::from_secs(*invisible_s),
            Duration::from_secs(*idle_exit_s),
            tally.clone(),
        )),
    };
    let secs = run.unwrap_or_else(|e| fail(&e));
    let messages = tally.messages.load(Ordering::Relaxed);
    let h = tally.latency_us.lock().expect("the tasks are done");
    println!(
        "{{\"messages\":{messages},\"seconds\":{secs:.3},\"msgs_per_s\":{:.0},\"errors\":{},\"latency_us\":{{\"p50\":{},\"p99\":{},\"max\":{}}}}}",
        messages as f64 / secs.max(1e-6),
        tally.errors.load(Ordering::Relaxed),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.max()
    );
    if messages < args.count {
        eprintln!("grpc_bench: moved {messages} of {} messages", args.count);
        std::process::exit(1);
    }
}

fn fail(why: &str) -> ! {
    eprintln!("grpc_bench: {why}");
    std::process::exit(2);
}

fn client_option(args: &Args) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(args.endpoint.as_str());
    option.set_enable_tls(false);
    option.set_timeout(Duration::from_secs(args.timeout_s));
    option
}

/// Sends until `count` messages are acknowledged; the seconds it took (start-up excluded).
async fn send(args: &Args, size: usize, tally: Arc<Tally>) -> Result<f64, String> {
    let mut option = ProducerOption::default();
    option.set_topics(vec![args.topic.as_str()]);
    let mut producer =
        Producer::new(option, client_option(args)).map_err(|e| format!("new producer: {e:?}"))?;
    producer
        .start()
        .await
        .map_err(|e| format!("producer start: {e:?}"))?;
    let producer = Arc::new(producer);
    let claimed = Arc::new(AtomicU64::new(0));
    let body = vec![b'a'; size];
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(args.concurrency);
    for _ in 0..args.concurrency {
        let (producer, claimed, tally) = (producer.clone(), claimed.clone(), tally.clone());
        let (topic, body, batch, count) = (
            args.topic.clone(),
            body.clone(),
            args.batch as u64,
            args.count,
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let first = claimed.fetch_add(batch, Ordering::Relaxed);
                if first >= count {
                    return Ok::<(), String>(());
                }
                let n = batch.min(count - first) as usize;
                let mut msgs = Vec::with_capacity(n);
                for _ in 0..n {
                    msgs.push(
                        MessageBuilder::builder()
                            .set_topic(topic.as_str())
                            .set_body(body.clone())
                            .build()
                            .map_err(|e| format!("building a message: {e:?}"))?,
                    );
                }
                let t0 = Instant::now();
                match producer.batch_send(msgs).await {
                    Ok(receipts) => {
                        tally.record(t0);
                        tally
                            .messages
                            .fetch_add(receipts.len() as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        // The batch is not counted; give its messages back to be sent again.
                        claimed.fetch_sub(n as u64, Ordering::Relaxed);
                        if tally.errors.load(Ordering::Relaxed) > 100 {
                            return Err(format!("over 100 send errors, the last: {e:?}"));
                        }
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| format!("a send task: {e}"))??;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Receives and acks until `count` messages came or none came for `idle`; the seconds from
/// the first receive to the last message (the idle tail excluded).
async fn receive(
    args: &Args,
    group: &str,
    invisible: Duration,
    idle: Duration,
    tally: Arc<Tally>,
) -> Result<f64, String> {
    let mut option = SimpleConsumerOption::default();
    option.set_topics(vec![args.topic.as_str()]);
    option.set_consumer_group(group);
    let mut consumer = SimpleConsumer::new(option, client_option(args))
        .map_err(|e| format!("new simple consumer: {e:?}"))?;
    consumer
        .start()
        .await
        .map_err(|e| format!("simple consumer start: {e:?}"))?;
    let consumer = Arc::new(consumer);
    let start = Instant::now();
    let last_ns = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(args.concurrency);
    for _ in 0..args.concurrency {
        let (consumer, tally, last_ns) = (consumer.clone(), tally.clone(), last_ns.clone());
        let (topic, batch, count) = (args.topic.clone(), args.batch as i32, args.count);
        tasks.push(tokio::spawn(async move {
            let all = FilterExpression::new(FilterType::Tag, "*");
            while tally.messages.load(Ordering::Relaxed) < count {
                let since_last = start
                    .elapsed()
                    .saturating_sub(Duration::from_nanos(last_ns.load(Ordering::Relaxed)));
                if since_last > idle {
                    return Ok::<(), String>(());
                }
                let t0 = Instant::now();
                let got = match consumer
                    .receive_with(topic.as_str(), &all, batch, invisible)
                    .await
                {
                    Ok(got) => got,
                    Err(e) => {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        if tally.errors.load(Ordering::Relaxed) > 100 {
                            return Err(format!("over 100 receive errors, the last: {e:?}"));
                        }
                        continue;
                    }
                };
                if got.is_empty() {
                    continue;
                }
                tally.record(t0);
                for m in &got {
                    if let Err(e) = consumer.ack(m).await {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        if tally.errors.load(Ordering::Relaxed) > 100 {
                            return Err(format!("over 100 ack errors, the last: {e:?}"));
                        }
                    }
                }
                tally
                    .messages
                    .fetch_add(got.len() as u64, Ordering::Relaxed);
                last_ns.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| format!("a receive task: {e}"))??;
    }
    let last = Duration::from_nanos(last_ns.load(Ordering::Relaxed));
    Ok(if last.is_zero() {
        start.elapsed()
    } else {
        last
    }
    .as_secs_f64())
}
