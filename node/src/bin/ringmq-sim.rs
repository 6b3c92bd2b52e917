//! `ringmq-sim`: runs the deterministic simulator over a range of seeds and prints one JSON
//! line with what it ran (see `docs/simulation.md`). Exit status 1 when a run broke an
//! invariant (the replay command is printed), 2 on bad arguments.

use std::io::Write;
use std::time::Instant;

use clap::Parser;
use ringmq_node::planted::Bug;
use ringmq_node::sim::{self, Options};

/// Deterministic simulation of a ringmq deployment (name server, master, slave, clients) on
/// virtual time, with crashes, torn writes, full and slow disks, connection resets,
/// partitions and clock jumps; checks that nothing acknowledged is lost, that queues match the
/// log and that the name server's routes follow the brokers' registrations and expiry.
#[derive(Parser, Debug)]
#[command(name = "ringmq-sim", version)]
struct Args {
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of seeds to run (seed, seed+1, ...).
    #[arg(long, default_value_t = 10)]
    runs: u64,
    /// Plant a known bug the simulator must find: ack-before-fsync, ack-before-slave,
    /// skip-cq-write, deliver-early, progress-ahead, namesrv-no-expiry; with
    /// `--scenario failover`: no-fencing, truncate-too-little, elect-out-of-sync,
    /// join-unfenced; with `--scenario pop`: pop-offset-before-checkpoint, pop-revive-skips,
    /// pop-ack-before-durable, pop-rewind-forgets-acks; with `--scenario recall`: recall-ack-before-durable;
    /// with `--scenario catch-up-cut`: catch-up-keeps-cut-chunks.
    #[arg(long, value_name = "NAME")]
    inject_bug: Option<String>,
    /// Virtual seconds of load and faults per run.
    #[arg(long, default_value_t = 30)]
    virtual_secs: u64,
    /// Keep going after a failed run (default: stop at the first).
    #[arg(long)]
    keep_going: bool,
    /// Print one line per run.
    #[arg(long)]
    verbose: bool,
    /// What each seed deploys: `deploy` (a name server, a master, by the seed a slave),
    /// `failover` (three controllers, a broker set of three in controller mode) or `pop` (a
    /// master crashed at random points under POP producers and consumers) or `recall` (a
    /// master crashed at random points under scheduled sends and their recalls) or
    /// `catch-up-cut` (a master whose log is cut back under a consumer reading released
    /// bytes the direct way).
    #[arg(long, default_value = "deploy", value_parser = ["deploy", "failover", "pop", "recall", "catch-up-cut"])]
    scenario: String,
}

/// With `RUST_LOG` set, the nodes' log lines go to stderr stamped with the virtual time and
/// the node that wrote them (a replay of one seed is the way to read them).
fn init_log() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    env_logger::Builder::from_default_env()
        .format(|f, rec| {
            let (ms, node) = match ringmq_node::io::sim::current() {
                Some(w) => (w.now_ns() / 1_000_000, w.current_node()),
                None => (0, None),
            };
            let node = node.map_or_else(|| "-".to_string(), |n| n.to_string());
            writeln!(f, "{ms:>7} ms n{node:<3} {:<5} {}", rec.level(), rec.args())
        })
        .init();
}

fn main() {
    let args = Args::parse();
    init_log();
    let bug = match args.inject_bug.as_deref() {
        None => None,
        Some(name) => match Bug::parse(name) {
            Some(b) => Some(b),
            None => {
                let names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
                eprintln!(
                    "ringmq-sim: unknown bug {name:?}; planted bugs: {}",
                    names.join(", ")
                );
                std::process::exit(2);
            }
        },
    };
    let failover = args.scenario == "failover";
    let pop = args.scenario == "pop";
    let recall = args.scenario == "recall";
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let (mut events, mut failed, mut ran) = (0u64, 0u64, 0u64);
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    let mut first_failure: Option<(u64, String)> = None;
    let mut virtual_ms = 0u64;
    for seed in args.seed..args.seed.saturating_add(args.runs) {
        let opts = Options {
            seed,
            bug,
            virtual_secs: args.virtual_secs,
            scratch_dir: std::env::temp_dir(),
        };
        let report = if failover {
            sim::failover::run_one(&opts)
        } else if pop {
            sim::pop_crash::run_one(&opts)
        } else if recall {
            sim::recall_crash::run_one(&opts)
        } else if args.scenario == "catch-up-cut" {
            sim::catch_up_cut::run_one(&opts)
        } else {
            sim::run_one(&opts)
        };
        ran += 1;
        events += report.events;
        virtual_ms += report.virtual_ms;
        digest = (digest ^ report.digest).wrapping_mul(0x0100_0000_01b3);
        if args.verbose {
            eprintln!(
                "seed {seed}: {} | {} events, {} ms virtual, {} crashes, {} sends ok, {} records pulled, {} long polls woken, {}/{} scheduled delivered, {} fuzzed requests answered, {} routes fetched, {} brokers expired, {} name server restarts, {} slave pulls, {} sends to a slave refused, {} epochs acknowledged{}{}",
                report.mode,
                report.events,
                report.virtual_ms,
                report.crashes,
                report.sends_ok,
                report.pulled_records,
                report.long_polls_woken,
                report.scheduled_delivered,
                report.scheduled_acked,
                report.fuzz_answered,
                report.route_fetches,
                report.brokers_expired,
                report.namesrv_restarts,
                report.slave_pulls,
                report.misrouted_sends,
                report.epochs_acked,
                report.pop.map(|p| format!(" | POP: {p:?}")).unwrap_or_default()
                    + &report
                        .recall
                        .map(|r| format!(" | recall: {r:?}"))
                        .unwrap_or_default(),
                report
                    .failure
                    .as_ref()
                    .map(|f| format!(" | FAILED {f}"))
                    .unwrap_or_default()
            );
        }
        if let Some(f) = report.failure {
            failed += 1;
            let replay = format!(
                "scripts/sim.sh --seed {seed} --runs 1 --virtual-secs {}{}{}",
                args.virtual_secs,
                match args.scenario.as_str() {
                    "deploy" => String::new(),
                    s => format!(" --scenario {s}"),
                },
                bug.map(|b| format!(" --inject-bug {}", b.name()))
                    .unwrap_or_default()
            );
            eprintln!("ringmq-sim: seed {seed} ({}) failed: {f}", report.mode);
            for fault in report.faults.iter().rev().take(12).rev() {
                eprintln!("    fault: {fault}");
            }
            eprintln!("ringmq-sim: replay with: {replay}");
            if first_failure.is_none() {
                first_failure = Some((seed, f));
            }
            if !args.keep_going {
                break;
            }
        }
        if last_progress.elapsed().as_secs() >= 5 {
            last_progress = Instant::now();
            eprintln!(
                "ringmq-sim: {ran}/{} seeds, {failed} failed, {events} events, {:.0} events/s",
                args.runs,
                events as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let out = serde_json::json!({
        "seed_start": args.seed,
        "runs": ran,
        "failed": failed,
        "events": events,
        "digest": format!("{digest:016x}"),
        "inject_bug": bug.map(|b| b.name()),
        "scenario": args.scenario,
        "first_failed_seed": first_failure.as_ref().map(|(s, _)| *s),
        "virtual_s": virtual_ms as f64 / 1000.0,
        "wall_s": (secs * 1000.0).round() / 1000.0,
        "events_per_s": (events as f64 / secs.max(1e-9)).round(),
    });
    let _ = writeln!(std::io::stdout(), "{out}");
    std::process::exit(i32::from(failed > 0));
}
