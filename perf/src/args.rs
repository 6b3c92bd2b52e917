//! Command line: the modes (`produce`, `consume`, `e2e`, `txn`, `request`) sharing the target,
//! embedded-node, run-length and output options; produce, consume and e2e also choose the
//! protocol. Parsing only; `main` turns these into runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::security::SecurityArgs;
use crate::units::{parse_duration, parse_size};

/// Benchmark and verification harness for ringmq.
///
/// Prints a progress line every second (stderr), then a table (stdout) and, with --json, the
/// same as JSON; with --html, a self-contained page with throughput and latency percentiles
/// per second and the latency distribution. Every result names the durability the broker acknowledged with ("acked
/// from page cache", "acked after fdatasync", "acked after slave").
///
/// Exit codes: 0 the run did what was asked; 1 it could not run, or did not do what was
/// asked (fewer than --count sent, no message sent at all, e2e: fewer messages delivered
/// than sent, consume: fewer than --count consumed), the last stderr line saying why; 3
/// --verify found acknowledged messages lost; 4 --flush-check saw sends stored without the
/// promised durability. A --duration run that sent messages counts failed sends in the
/// report ("errors") and exits 0.
///
/// With TLS on the servers, give --ca (the CA bundle; implies --tls) and, for mutual TLS,
/// --tls-cert and --tls-key; they apply to both protocols. With ACL on, give --access-key
/// and the secret key in RINGMQ_SECRET_KEY (rather than --secret-key, which stays in the
/// shell's history).
#[derive(Parser, Debug)]
#[command(name = "ringmq-perf", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub mode: Mode,
    #[command(flatten)]
    pub security: SecurityArgs,
}

#[derive(Subcommand, Debug)]
pub enum Mode {
    /// Send messages: throughput and send latency (closed loop, or open loop with --rate).
    Produce(ProduceArgs),
    /// Consume a topic as a consumer group: throughput, delivery latency, --verify checks.
    Consume(ConsumeArgs),
    /// Producers and consumers together: end-to-end latency (send timestamp in the body to
    /// the consumer's receipt).
    E2e(E2eArgs),
    /// Transactional messages: each send is a half message, a local "transaction" decides
    /// commit, rollback or unknown (the broker checks back), and a consumer group checks
    /// that every committed message is delivered and no rolled-back one.
    ///
    /// Each message's outcome is drawn from its producer id and sequence: rollback with
    /// --rollback-ratio, unknown with --unknown-ratio, commit otherwise. An unknown one is
    /// decided by the checker when the broker checks back: commit for an even sequence,
    /// rollback for an odd one. A check-back of a transaction whose executor had decided
    /// (its END_TRANSACTION lost) answers that decision; of one whose executor never ran
    /// (its half's send failed), rollback. After the sends, the run waits until every
    /// transaction is decided and every committed message delivered, or --settle-timeout.
    Txn(TxnArgs),
    /// Request-reply: requesters send requests (`Producer::request`) to the topic, a
    /// replier group answers each with a reply of the same body (`send_reply`), pushed back
    /// by the broker. Reports the round trip (request sent to reply received), and the CPU
    /// per request (a request message stored, a reply pushed and stored).
    Request(RequestArgs),
    /// Automatic failover, measured: starts its own deployment from the `ringmq` binary
    /// (three name servers with embedded controllers, one broker set of three brokers in
    /// controller mode, SYNC_MASTER with allAckInSyncStateSet=true unless --async; loopback
    /// ports, data in a temporary directory unless --data), waits until the SyncStateSet
    /// holds all three, then sends continuously (closed loop, every acknowledged message
    /// logged as with --verify) while it kills the set's master with SIGKILL --kills times.
    ///
    /// Per kill: the failover time, from the kill to the first send acknowledged by the new
    /// master as the producer saw it (a SEND_OK whose store host is the broker the
    /// controllers elected); the new master's epoch; the sends that failed meanwhile. The
    /// killed broker is then started again on its ports and store and rejoins as a slave;
    /// the next kill waits until the SyncStateSet is full again and --settle has passed.
    /// At the end the load stops, and every queue is read back from the master and checked
    /// against the log: lost (acknowledged, not found), duplicates, misplaced.
    ///
    /// Prints per-kill times, their p50, p90 and max, and the acknowledged sends per second
    /// around each kill (stdout; --json too); progress on stderr. Exit code 3 if anything
    /// acknowledged was lost, 1 if a failover did not complete within --timeout (the data
    /// directory and the processes' logs are kept then and their ends printed). Runs without
    /// TLS or ACL (the global security flags do not apply). The brokers get
    /// mappedFileSizeCommitLog=128 MiB, flushDiskType=ASYNC_FLUSH and
    /// haSendHeartbeatInterval=200 ms; --broker-set overrides any broker key, e.g.
    /// --broker-set brokerHeartbeatInterval=100 --broker-set
    /// controllerHeartBeatTimeoutMills=600 for a faster failover.
    Failover(crate::failover::args::FailoverArgs),
}

#[derive(Args, Debug, Clone)]
pub struct RequestArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub length: RunLength,
    /// Open loop: this many requests per second in total, on a fixed schedule; the round
    /// trip is measured from each request's intended time (coordinated omission is not
    /// hidden). Without it: closed loop, each lane sends its next request when its reply
    /// comes.
    #[arg(long, value_name = "REQUESTS_PER_S")]
    pub rate: Option<f64>,
    /// Body bytes of a request (the reply carries the same body).
    #[arg(long, default_value_t = 128, value_parser = parse_size)]
    pub size: usize,
    /// Requesters (each its own client).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub requesters: u32,
    /// Requests in flight per requester (the lanes that take due requests under --rate).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub inflight: u32,
    /// Replying consumers, in one group (each its own client).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub repliers: u32,
    /// A request without its reply after this long fails (counted as `no_reply` when the
    /// broker stored it, else by its send's error).
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub timeout: Duration,
}

#[derive(Args, Debug, Clone)]
pub struct TxnArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub length: RunLength,
    /// Fraction of transactions the executor commits (default: the rest after
    /// --rollback-ratio and --unknown-ratio; the three may not add up to more than 1).
    #[arg(long, value_name = "C", value_parser = parse_ratio)]
    pub commit_ratio: Option<f64>,
    /// Fraction of transactions the executor rolls back.
    #[arg(long, value_name = "R", value_parser = parse_ratio, default_value_t = 0.0)]
    pub rollback_ratio: f64,
    /// Fraction of transactions the executor answers Unknown (decided by check-back).
    #[arg(long, value_name = "U", value_parser = parse_ratio, default_value_t = 0.0)]
    pub unknown_ratio: f64,
    /// After the sends: wait at most this long for every transaction to be decided and
    /// every committed message to be delivered (what is still pending is reported).
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    pub settle_timeout: Duration,
    /// Body bytes per message (at least 32: the perf head).
    #[arg(long, default_value_t = 1024, value_parser = parse_size)]
    pub size: usize,
    /// Transaction producers (each its own client), all of one producer group per run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub producers: u32,
    /// Transactions in flight per producer.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub inflight: u32,
    /// Timeout of a half's send (retries included) and of END_TRANSACTION.
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub send_timeout: Duration,
    /// How often the producers heartbeat every broker (a broker checks back only a
    /// producer whose heartbeat it has; after a broker restart, the next heartbeat or send
    /// registers it again).
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub heartbeat_interval: Duration,
    /// Consumer group (default: a new group per run, starting at the end of each queue).
    #[arg(long)]
    pub group: Option<String>,
    /// Consumers in the group. 0: consume nothing (a throughput run: the settle phase
    /// waits for the decisions only, and lost / rolled_back_delivered are not checked).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub consumers: u32,
    /// Messages per pull.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pull_batch: u32,
}

#[derive(Args, Debug, Clone)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub protocol: ProtocolOpts,
    #[command(flatten)]
    pub send: SendOpts,
    #[command(flatten)]
    pub length: RunLength,
}

#[derive(Args, Debug, Clone)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub protocol: ProtocolOpts,
    #[command(flatten)]
    pub recv: RecvOpts,
    #[command(flatten)]
    pub length: RunLength,
    /// Stop after no message arrived for this long (also with --count or --duration).
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub idle_exit: Duration,
}

#[derive(Args, Debug, Clone)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub protocol: ProtocolOpts,
    #[command(flatten)]
    pub send: SendOpts,
    #[command(flatten)]
    pub recv: RecvOpts,
    #[command(flatten)]
    pub length: RunLength,
    /// After the producers stop: wait at most this long for the last deliveries.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub idle_exit: Duration,
}

/// Which protocol the sends and pulls travel on.
#[derive(Args, Debug, Clone)]
pub struct ProtocolOpts {
    /// native: ringmq's own protocol, through the ringmq client. remoting: RocketMQ's
    /// remoting protocol on the same ports, spoken by perf's own driver as RocketMQ's clients
    /// speak it: the route from the name server's GET_ROUTEINFO_BY_TOPIC (JSON body), sends
    /// as SEND_MESSAGE (--batch 1) or SEND_BATCH_MESSAGE (RocketMQ's batch body, V2 short
    /// field names) with UNIQ_KEY and WAIT on every message, one connection per producer and
    /// broker pipelined by opaque (--inflight sends outstanding per producer, --rate open
    /// loop as native); consumers send PULL_MESSAGE per queue (subscription "*" in the
    /// request, long poll, offsets committed with the next pull) and decode the records
    /// from the body. Topic creation, broker discovery and the node's CPU count use the
    /// native protocol in both. Not with --verify, --delay/--delay-level, --fail-ratio,
    /// --orderly or --consumer-churn.
    #[arg(long, value_enum, default_value_t = ProtocolArg::Native)]
    pub protocol: ProtocolArg,
    /// With --protocol remoting: how request headers are serialized (json: RocketMQ's
    /// default; rocketmq: the binary RocketMQSerializable). The broker answers in the same.
    #[arg(long, value_enum, default_value_t = HeaderArg::Json)]
    pub remoting_header: HeaderArg,
}

impl ProtocolOpts {
    /// The header serialization when the run speaks remoting; `None` for native.
    pub fn remoting(&self) -> Option<ringmq_client::wire::remoting::SerializeType> {
        use ringmq_client::wire::remoting::SerializeType;
        match (self.protocol, self.remoting_header) {
            (ProtocolArg::Native, _) => None,
            (ProtocolArg::Remoting, HeaderArg::Json) => Some(SerializeType::Json),
            (ProtocolArg::Remoting, HeaderArg::Rocketmq) => Some(SerializeType::RocketMq),
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolArg {
    Native,
    Remoting,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderArg {
    Json,
    Rocketmq,
}

/// Where to send, and what to print.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Name servers, "h1:9876;h2:9876" (ignored with --embedded).
    #[arg(
        short = 'n',
        long = "namesrv",
        env = "RINGMQ_NAMESRV",
        default_value = "127.0.0.1:9876"
    )]
    pub namesrv: String,
    /// Topic (created with --queues queues on every master if it does not exist).
    #[arg(long, default_value = "PerfTopic")]
    pub topic: String,
    /// Queues per master when perf creates the topic.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub queues: u32,
    /// Verify file. produce: every acknowledged message (producer, sequence, queue, offset)
    /// is appended as its acknowledgement arrives. consume: check delivery against it (lost,
    /// duplicates, out of order; exit code 3 if anything acknowledged was lost). e2e: both.
    /// request: each request's outcome as it is known (requester, sequence, `replied`,
    /// `no_reply` or `failed`).
    #[arg(long, value_name = "FILE")]
    pub verify: Option<PathBuf>,
    /// Write the result as JSON to FILE as well.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a one-page HTML report to FILE as well: configuration and summary, charts
    /// (inline SVG, no scripts) of msgs/s and of latency p50/p99/p99.9 (µs) per second, and
    /// the whole run's latency distribution. Opens in a browser as a file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Worker threads of the load generator's runtime (count them: they share the cores
    /// with the broker when it runs on this machine).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// Pid of a broker process on this machine whose CPU time the report counts as the
    /// node's (repeatable; default: the process listening on each broker's address when it
    /// is local, else the broker's runtime info).
    #[arg(long, value_name = "PID")]
    pub node_pid: Vec<u32>,
    /// produce, e2e: the broker's Prometheus endpoint (`http://IP:PORT/metrics`, a node
    /// started with `metricsExporterType=PROM`): the report adds where its requests spent
    /// their time during the run (per stage, per request code, the store's append: count,
    /// p50, p99 as bucket bounds in µs), from a scrape when measuring begins and one about a
    /// second after it ends (the endpoint's views are rebuilt every second).
    #[arg(long, value_name = "URL")]
    pub metrics_url: Option<String>,
    /// No progress lines.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub embedded: EmbeddedArgs,
}

/// The in-process node.
#[derive(Args, Debug, Clone)]
pub struct EmbeddedArgs {
    /// Start a standalone node (name server + broker) in this process on a temporary
    /// directory, and run against it.
    #[arg(long)]
    pub embedded: bool,
    /// Data directory of the embedded node (default: a temporary directory, removed at exit).
    #[arg(long, value_name = "DIR", requires = "embedded")]
    pub embedded_dir: Option<PathBuf>,
    /// Shards of the embedded broker (default: one per core).
    #[arg(long, value_name = "N", requires = "embedded")]
    pub embedded_shards: Option<usize>,
    /// Flush policy of the embedded broker.
    #[arg(long, value_enum, default_value_t = FlushArg::Async, requires = "embedded")]
    pub embedded_flush: FlushArg,
    /// A broker key for the embedded node, RocketMQ spelling (repeatable):
    /// --embedded-set mappedFileSizeCommitLog=67108864
    #[arg(long, value_name = "KEY=VALUE", requires = "embedded")]
    pub embedded_set: Vec<String>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushArg {
    /// Acknowledge from the page cache (ASYNC_FLUSH).
    Async,
    /// Acknowledge after the fdatasync that covers the message (SYNC_FLUSH).
    Sync,
}

/// How long a run lasts: whichever of --count and --duration comes first. Neither: produce
/// and e2e run 30 s; consume runs until idle.
#[derive(Args, Debug, Clone)]
pub struct RunLength {
    /// Stop after this many messages (all producers, or all consumers, together; consume
    /// with --verify counts distinct messages: a redelivery is reported, not counted).
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long: 30s, 500ms, 2m, 1h (a bare number is seconds).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

/// How producers send.
#[derive(Args, Debug, Clone)]
pub struct SendOpts {
    /// Body bytes per message (at least 32: the perf head).
    #[arg(long, default_value_t = 1024, value_parser = parse_size)]
    pub size: usize,
    /// What fills a body after the perf head: `pattern` (a repeating alphabet, which
    /// compresses well) or `random` (bytes that do not compress).
    #[arg(long, value_enum, default_value_t = Payload::Pattern)]
    pub payload: Payload,
    /// Compress bodies longer than BYTES as RocketMQ's producers do
    /// (`compressMsgBodyOverHowmuch`; the native client's own default is 4096). Off unless
    /// given: perf sends the bytes it is told to.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub compress_over: Option<usize>,
    /// How --compress-over compresses: zlib (RocketMQ 5's default compressType), lz4 or zstd.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zlib, requires = "compress_over")]
    pub compression: CompressionArg,
    /// Messages per send (1: SEND_MESSAGE; more: one SEND_BATCH_MESSAGE to one queue).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch: u32,
    /// Producers (each its own client: its own connections).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub producers: u32,
    /// Sends in flight per producer (pipelined on its connections).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub inflight: u32,
    /// Open loop: this many messages per second in total, on a fixed schedule; latency is
    /// measured from each send's intended time, so a stall is not hidden by sending less
    /// (coordinated omission).
    #[arg(long, value_name = "MSGS_PER_S")]
    pub rate: Option<f64>,
    /// Count a send the broker stored but could not make durable in time
    /// (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) as an error, and exit
    /// non-zero if there was any. Without it such sends count as sent and are reported
    /// apart. Either way they are never written to --verify.
    #[arg(long)]
    pub flush_check: bool,
    /// Send timeout per request (retries included).
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub send_timeout: Duration,
    /// Schedule every message: the broker delivers it this long after storing it
    /// (TIMER_DELAY_MS). e2e then reports lateness (delivery minus due time) and early
    /// deliveries. Needs --batch 1 (scheduled messages are not batched).
    #[arg(long, value_parser = parse_duration, conflicts_with = "delay_level")]
    pub delay: Option<Duration>,
    /// Schedule every message with this delay level (1 = 1 s, 2 = 5 s, ... 18 = 2 h with the
    /// broker's default messageDelayLevel). Needs --batch 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub delay_level: Option<u32>,
    /// Message trace: the producers write every stored send's trace record (RocketMQ's
    /// format) to the trace topic RMQ_SYS_TRACE_TOPIC, as a client with `.trace(true)` does;
    /// read one back with `ringmq-ctl msg trace UNIQ_KEY`. The broker creates the topic at
    /// the first trace when autoCreateTopicEnable is on; otherwise create it first. A run
    /// whose trace records the broker did not all store exits 1. Native protocol only.
    #[arg(long)]
    pub trace: bool,
    /// With --delay: give the messages delivery times that fall due at this many messages
    /// per second in total, starting --delay after the run starts, whatever the send rate
    /// (fill a schedule first, then measure delivery alone).
    #[arg(long, value_name = "MSGS_PER_S", requires = "delay")]
    pub due_rate: Option<f64>,
    /// With --delay or --delay-level and --verify: recall about this share of the scheduled
    /// sends (chosen from producer id and sequence) right after each one's acknowledgement.
    /// The verify log notes each recall sent and each one the broker acknowledged; the check
    /// counts an acknowledged recall as a message that must not be delivered (delivered
    /// anyway: `recalled_delivered`, exit 1), and a recall without an answer as neither lost
    /// nor expected. Native protocol only.
    #[arg(long, value_name = "R", value_parser = parse_ratio, requires = "verify")]
    pub recall_ratio: Option<f64>,
}

impl SendOpts {
    /// The longest a message of this run waits to be due (for how long e2e waits for the
    /// last deliveries); levels as the broker's default `messageDelayLevel`.
    pub fn schedule_wait(&self) -> Duration {
        const LEVELS_S: [u64; 18] = [
            1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
        ];
        match (self.delay, self.delay_level) {
            (Some(d), _) => d,
            (None, Some(l)) => Duration::from_secs(LEVELS_S[(l as usize).clamp(1, 18) - 1]),
            (None, None) => Duration::ZERO,
        }
    }

    /// Whether messages are scheduled.
    pub fn scheduled(&self) -> bool {
        self.delay.is_some() || self.delay_level.is_some()
    }
}

/// How consumers receive.
#[derive(Args, Debug, Clone)]
pub struct RecvOpts {
    /// Consumer group (default: a new group per run, so it starts with no offsets).
    #[arg(long)]
    pub group: Option<String>,
    /// Consumers in the group (each its own client; queues balanced across them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub consumers: u32,
    /// Where a queue with no committed offset starts (consume default: first; e2e always
    /// starts at the end, before the producers start).
    #[arg(long, value_enum, default_value_t = FromArg::First)]
    pub from: FromArg,
    /// Messages per pull (the broker allows up to 1024).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pull_batch: u32,
    /// With `consume --count`: the most answers each queue's pull consumer holds ahead of
    /// its polls, the pull in flight counted (`PullConsumerBuilder::pull_ahead_depth`; 1: a
    /// queue's next pull starts when a poll takes the last one's messages).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub pull_ahead: u32,
    /// Fail every delivery of this fraction of the messages (0..1), chosen from each
    /// message's producer id and sequence (the same choice in every consumer): the client
    /// sends them back to the broker, which redelivers them from the group's retry topic
    /// with growing delays and, after --max-reconsume failures, stores them in the group's
    /// dead-letter queue (--verify counts them as dead_lettered, not lost). The listener
    /// then gets one message per call.
    #[arg(long, value_name = "F", value_parser = parse_ratio)]
    pub fail_ratio: Option<f64>,
    /// With --fail-ratio: fail the chosen messages only on their first K deliveries (as
    /// this process counts them), so they are delivered on a retry instead of dead-lettered.
    #[arg(long, value_name = "K", requires = "fail_ratio")]
    pub fail_times: Option<u32>,
    /// Failed deliveries before a message goes to the dead-letter queue (the consumers'
    /// maxReconsumeTimes; default: the group's limit on the broker, 16 unless configured).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_reconsume: Option<u32>,
    /// Orderly consumers: each queue locked on its broker and consumed by one listener
    /// call at a time in offset order; a failure suspends the queue and redelivers in place.
    #[arg(long)]
    pub orderly: bool,
    /// Every DURATION, stop one consumer, alternately cleanly (commit, unlock, leave the
    /// group) and by dropping its connections without a goodbye (as a crash would), and
    /// start a new one in its place.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub consumer_churn: Option<Duration>,
    /// POP consumption: the consumers are simple consumers (RocketMQ 5's SimpleConsumer)
    /// that receive up to --pull-batch (at most 32) messages from any queue, each invisible
    /// to the others for --invisible-time, and ack them. The report counts acks, refused
    /// acks and messages delivered again after their ack was acknowledged (must be 0).
    /// With --orderly: orderly POP (a queue to one receive at a time, in offset order),
    /// each member acking one message at a time in a shuffled order. Not with --fail-ratio,
    /// --consumer-churn or --protocol remoting.
    #[arg(long)]
    pub pop: bool,
    /// With --pop: how long a received message stays invisible to the group's other
    /// members before it is delivered again unless acked.
    #[arg(long, value_parser = parse_duration, default_value = "30s", requires = "pop")]
    pub invisible_time: Duration,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromArg {
    First,
    Last,
}

/// A fraction from 0 to 1.
pub fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "{s:?}: expected a fraction from 0 to 1 (e.g. 0.01)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("0.25"), Ok(0.25));
        assert_eq!(parse_ratio("1"), Ok(1.0));
        assert!(parse_ratio("1.5").is_err());
        assert!(parse_ratio("-0.1").is_err());
        assert!(parse_ratio("NaN").is_err());
    }

    #[test]
    fn failure_and_churn_flags() {
        let cli = Cli::try_parse_from([
            "ringmq-perf",
            "e2e",
            "--fail-ratio",
            "0.1",
            "--fail-times",
            "2",
            "--max-reconsume",
            "3",
            "--orderly",
            "--consumer-churn",
            "2s",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Mode::E2e(a) = cli.mode else {
            panic!("not e2e")
        };
        assert_eq!(a.recv.fail_ratio, Some(0.1));
        assert_eq!(a.recv.fail_times, Some(2));
        assert_eq!(a.recv.max_reconsume, Some(3));
        assert!(a.recv.orderly);
        assert_eq!(a.recv.consumer_churn, Some(Duration::from_secs(2)));
        let no_ratio = Cli::try_parse_from(["ringmq-perf", "consume", "--fail-times", "2"]);
        assert!(no_ratio.is_err(), "--fail-times needs --fail-ratio");
    }

    #[test]
    fn request_flags() {
        let cli = Cli::try_parse_from([
            "ringmq-perf",
            "request",
            "--rate",
            "500",
            "--size",
            "64",
            "--repliers",
            "2",
            "--timeout",
            "1s",
        ])
        .unwrap();
        let Mode::Request(a) = cli.mode else {
            panic!("not request")
        };
        assert_eq!(a.rate, Some(500.0));
        assert_eq!((a.size, a.repliers, a.requesters), (64, 2, 1));
        assert_eq!(a.timeout, Duration::from_secs(1));
    }

    #[test]
    fn txn_flags() {
        let cli = Cli::try_parse_from([
            "ringmq-perf",
            "txn",
            "--commit-ratio",
            "0.5",
            "--rollback-ratio",
            "0.25",
            "--unknown-ratio",
            "0.25",
            "--count",
            "100",
            "--settle-timeout",
            "30s",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Mode::Txn(a) = cli.mode else {
            panic!("not txn")
        };
        assert_eq!(a.commit_ratio, Some(0.5));
        assert_eq!(a.rollback_ratio, 0.25);
        assert_eq!(a.unknown_ratio, 0.25);
        assert_eq!(a.length.count, Some(100));
        assert_eq!(a.settle_timeout, Duration::from_secs(30));
        let Mode::Txn(d) = Cli::try_parse_from(["ringmq-perf", "txn"]).unwrap().mode else {
            panic!("not txn")
        };
        assert_eq!(d.settle_timeout, Duration::from_secs(120));
    }

    #[test]
    fn protocol_flags() {
        use ringmq_client::wire::remoting::SerializeType;
        let Mode::Produce(a) = Cli::try_parse_from(["ringmq-perf", "produce"])
            .unwrap()
            .mode
        else {
            panic!("not produce")
        };
        assert_eq!(a.protocol.remoting(), None);
        let cli = Cli::try_parse_from([
            "ringmq-perf",
            "consume",
            "--protocol",
            "remoting",
            "--remoting-header",
            "rocketmq",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Mode::Consume(a) = cli.mode else {
            panic!("not consume")
        };
        assert_eq!(a.protocol.remoting(), Some(SerializeType::RocketMq));
        let Mode::E2e(a) = Cli::try_parse_from(["ringmq-perf", "e2e", "--protocol", "remoting"])
            .unwrap()
            .mode
        else {
            panic!("not e2e")
        };
        assert_eq!(a.protocol.remoting(), Some(SerializeType::Json));
        assert!(Cli::try_parse_from(["ringmq-perf", "txn", "--protocol", "remoting"]).is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

/// What fills a perf body after its head.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    Pattern,
    Random,
}

impl Payload {
    pub fn name(self) -> &'static str {
        match self {
            Payload::Pattern => "pattern",
            Payload::Random => "random",
        }
    }
}

/// `--compression`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionArg {
    Zlib,
    Lz4,
    Zstd,
}

impl CompressionArg {
    pub fn kind(self) -> ringmq_client::wire::record::Compression {
        use ringmq_client::wire::record::Compression;
        match self {
            CompressionArg::Zlib => Compression::Zlib,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CompressionArg::Zlib => "zlib",
            CompressionArg::Lz4 => "lz4",
            CompressionArg::Zstd => "zstd",
        }
    }
}
