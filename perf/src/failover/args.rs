//! `ringmq-perf failover`'s options (parsing only).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::units::{parse_duration, parse_size};

/// Segment size perf gives the brokers unless `--broker-set mappedFileSizeCommitLog=...`
/// says otherwise (the node's default, 1 GiB, would be pre-allocated three times).
pub const SEGMENT_BYTES_DEFAULT: u64 = 128 << 20;

#[derive(Args, Debug, Clone)]
pub struct FailoverArgs {
    /// The `ringmq` server binary (default: `ringmq` in the directory of this executable).
    #[arg(long, value_name = "PATH")]
    pub ringmq: Option<PathBuf>,
    /// Keep the deployment's data and logs here (created if missing; default: a temporary
    /// directory, removed at exit unless the run failed).
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Masters to kill, one after another.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub kills: u32,
    /// Shards of each broker.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub shards: u16,
    /// ASYNC_MASTER (a send is acknowledged once the master stored it) instead of
    /// SYNC_MASTER with allAckInSyncStateSet=true (acknowledged once every member of the
    /// SyncStateSet has it). Under ASYNC a kill can lose acknowledged sends the slaves had
    /// not received: the run counts them and exits 3 like any loss.
    #[arg(long = "async")]
    pub async_master: bool,
    /// A broker key for all three brokers, RocketMQ spelling (repeatable), given after the
    /// ones perf sets: --broker-set brokerHeartbeatInterval=100
    /// --broker-set controllerHeartBeatTimeoutMills=600
    #[arg(long, value_name = "KEY=VALUE")]
    pub broker_set: Vec<String>,
    /// Producers (each its own client).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub producers: u32,
    /// Sends in flight per producer (closed loop: a lane sends again when its send is
    /// answered).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub inflight: u32,
    /// Most sends per second in total (0: no cap, as fast as the lanes go). A lane waits
    /// for the next free slot of the schedule before it sends; slots missed while sends
    /// fail or hang (a failover) are not made up later, so the rate after a switch is the
    /// rate before it. The cap keeps the data small: three brokers each store
    /// RATE x SIZE bytes per second (uncapped, on a small machine, tens of MB/s each).
    #[arg(long, value_name = "SENDS_PER_S", default_value_t = 5000)]
    pub rate: u32,
    /// Body bytes per message (at least 32: the perf head).
    #[arg(long, default_value_t = 1024, value_parser = parse_size)]
    pub size: usize,
    /// Queues of the topic.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub queues: u32,
    /// Send timeout per request (the client's retries included).
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub send_timeout: Duration,
    /// The producers' longest pause between reconnection attempts to a broker that refused
    /// one (the client's `reconnect_backoff_max`; default: the client's, 3 s). A send to a
    /// broker in backoff fails at once and its retry waits out the backoff before it looks
    /// at the route again.
    #[arg(long, value_parser = parse_duration)]
    pub reconnect_backoff_max: Option<Duration>,
    /// Load before the first kill, and after each rejoin before the next kill.
    #[arg(long, value_parser = parse_duration, default_value = "4s")]
    pub settle: Duration,
    /// Give up (and fail the run) when, after a kill, no new master is elected and
    /// acknowledges a send within this long, or when the SyncStateSet is not full again
    /// within this long after the restart.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub timeout: Duration,
    /// Seconds before each kill that the per-second table shows.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=60))]
    pub before_s: u32,
    /// Seconds from each kill on that the per-second table shows (the kill's own second
    /// included).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub after_s: u32,
    /// Write the result as JSON to FILE as well.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a one-page HTML report to FILE as well: the text report and a chart (inline
    /// SVG) of acknowledged sends per second in 100 ms windows over the run.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Worker threads of perf's runtime.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// No progress lines.
    #[arg(short, long)]
    pub quiet: bool,
}
