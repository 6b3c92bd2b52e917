//! `ringmq-perf`: benchmark and verification harness. Args -> (embedded node) -> runtime ->
//! mode; the modes live in `modes`, the halves of a run in `produce` and `consume`.
//!
//! Threads: the load generator is a tokio runtime with `--threads` workers (default 2), plus
//! one pacer thread under `--rate`; `--embedded` adds the node's own threads (one pinned per
//! shard, the name server, the segment preparer). The final report says how much CPU each
//! side used, because on a small machine they compete for the same cores.
#![forbid(unsafe_code)]

mod args;
mod broker_info;
mod consume;
mod counted;
mod dead;
mod deliveries;
mod embedded;
mod fail;
mod failover;
mod html;
mod modes;
mod node_cpu;
mod payload;
mod pop;
mod produce;
mod remoting;
mod report;
mod request;
mod security;
mod stages;
mod stats;
mod threads;
mod timeline;
mod txn;
mod units;
mod verify;

use clap::Parser;

use crate::args::{Cli, Mode};
use crate::security::Target;

fn main() {
    let cli = Cli::parse();
    let env = env_logger::Env::default().default_filter_or("warn");
    env_logger::Builder::from_env(env)
        .format_timestamp_millis()
        .format_target(false)
        .init();
    let common = match &cli.mode {
        Mode::Failover(a) => std::process::exit(failover::main(a.clone())),
        Mode::Produce(a) => &a.common,
        Mode::Consume(a) => &a.common,
        Mode::E2e(a) => &a.common,
        Mode::Txn(a) => &a.common,
        Mode::Request(a) => &a.common,
    };
    let threads = usize::from(common.threads);
    // The TLS and credential flags are checked (and the TLS files read) before anything
    // starts; the name servers are known once the embedded node, if any, runs.
    let mut target = match security::Target::new(String::new(), &cli.security) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ringmq-perf: {e}");
            std::process::exit(modes::EXIT_FAILED);
        }
    };
    let node = if common.embedded.embedded {
        match embedded::Embedded::start(&common.embedded) {
            Ok(n) => {
                eprintln!(
                    "ringmq-perf: embedded node started (name server {}, {} shards)",
                    n.namesrv, n.shards
                );
                Some(n)
            }
            Err(e) => {
                eprintln!("ringmq-perf: {e}");
                std::process::exit(modes::EXIT_FAILED);
            }
        }
    } else {
        None
    };
    let namesrv = node
        .as_ref()
        .map_or_else(|| common.namesrv.clone(), |n| n.namesrv.clone());
    target.namesrv = namesrv;
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("perf-worker")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ringmq-perf: starting the runtime: {e}");
            std::process::exit(modes::EXIT_FAILED);
        }
    };
    let code = rt.block_on(run(cli.mode, target, node.is_some()));
    // Clients first (their connections close), then the node (a graceful stop).
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    drop(node);
    std::process::exit(code);
}

/// Runs a mode against `target`; returns the exit code.
async fn run(mode: Mode, target: Target, embedded: bool) -> i32 {
    let r = match mode {
        Mode::Produce(a) => modes::produce_mode(a, target, embedded).await,
        Mode::Consume(a) => modes::consume_mode(a, target, embedded).await,
        Mode::E2e(a) => modes::e2e_mode(a, target, embedded).await,
        Mode::Txn(a) => txn::run(a, target, embedded).await,
        Mode::Request(a) => request::run(a, target, embedded).await,
        // It starts its own deployment and runtime (failover::main).
        Mode::Failover(_) => Err("failover is not run against a target".to_string()),
    };
    r.unwrap_or_else(|e| {
        eprintln!("ringmq-perf: {e}");
        modes::EXIT_FAILED
    })
}
