//! `ringmq-perf failover`: automatic failover measured from the producer's side, and checked
//! for lost acknowledged messages.
//!
//! Starts its own deployment ([`deploy`]: three controllers, one broker set of three brokers
//! in controller mode), waits until the set's SyncStateSet holds all three, then keeps a
//! closed-loop load running ([`load`]) while it kills the set's master `--kills` times. Each
//! round: the master (as the leader controller names it) is SIGKILLed; the time from the kill
//! to the first send acknowledged by the new master (a SEND_OK whose store host is the
//! address the controllers list for the newly elected master), as the producer's lane saw
//! it, is that kill's failover time; the killed broker is started again on its ports and
//! store, and the next kill waits until the SyncStateSet is full again and `--settle` has
//! passed. At the end the load stops, the run waits until the three CommitLogs end at the
//! same offsets, reads every queue back from the master and checks the acknowledgement log
//! against it with the verify check (`crate::verify`): lost, duplicates, misplaced.
//!
//! Exit codes: 0; 1 when the deployment or a failover misbehaved (no new master, no
//! acknowledgement by it, no full SyncStateSet again, a process that died on its own) —
//! the data directory and logs are kept and their ends printed; 3 when an acknowledged
//! message was lost.

pub(crate) mod args;
mod deploy;
mod load;
mod report;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq_client::wire::command::ReplicaSet;
use ringmq_client::{Admin, MessageQueue};

pub use args::FailoverArgs;
use deploy::{Deployment, BROKERS, BROKER_NAME};
use load::{Load, LoadPlan, Running};
use report::{KillRecord, Readback, Report};

use crate::modes::{run_id, EXIT_FAILED, EXIT_LOST};
use crate::payload;
use crate::verify::{self, AckLog, Acked, Consumption, Delivery, QueueNames};

/// The topic the load sends to.
pub const TOPIC: &str = "PerfFailover";
/// How often the controllers are asked for the set's state while waiting.
const POLL: Duration = Duration::from_millis(20);
/// How long the topic may take to reach every broker of the set.
const TOPIC_WAIT: Duration = Duration::from_secs(30);
/// Messages per read when the queues are read back.
const READ_BATCH: u32 = 256;
/// How long the three CommitLogs may take to end at the same offsets after the load stops.
const CONVERGE_WAIT: Duration = Duration::from_secs(30);
/// Log lines of each process printed when the run fails.
const LOG_TAIL_LINES: usize = 30;

/// Runs the subcommand; returns the exit code.
pub fn main(a: FailoverArgs) -> i32 {
    let mut dep = match Deployment::start(&a) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ringmq-perf failover: starting the deployment: {e}");
            return EXIT_FAILED;
        }
    };
    note(
        &a,
        &format!(
            "deployment up in {} (controllers {})",
            dep.dir.display(),
            dep.addr_list()
        ),
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(a.threads))
        .thread_name("perf-worker")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ringmq-perf: starting the runtime: {e}");
            return EXIT_FAILED;
        }
    };
    // Ctrl-C ends the run like a failure: the processes are stopped, the data kept.
    let result = rt.block_on(async {
        tokio::select! {
            r = run(&a, &mut dep) => r,
            _ = tokio::signal::ctrl_c() => Err(Failure::new("interrupted")),
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(r) => {
            print!("{}", r.text());
            if let Some(path) = &a.json {
                let text = serde_json::to_string_pretty(&r.json()).unwrap_or_default();
                if let Err(e) = std::fs::write(path, text + "\n") {
                    eprintln!("ringmq-perf: writing {}: {e}", path.display());
                    return EXIT_FAILED;
                }
            }
            if let Some(path) = &a.html {
                if let Err(e) = std::fs::write(path, r.html()) {
                    eprintln!("ringmq-perf: writing {}: {e}", path.display());
                    return EXIT_FAILED;
                }
            }
            dep.stop();
            if r.readback.verdict.lost > 0 {
                dep.keep();
                eprintln!(
                    "ringmq-perf failover: acknowledged messages were lost; data and logs kept in {}",
                    dep.dir.display()
                );
                EXIT_LOST
            } else {
                EXIT_SUCCESS
            }
        }
        Err(f) => {
            eprintln!("ringmq-perf failover: {}", f.what);
            if !f.kills.is_empty() {
                eprintln!("kills before it:");
                for k in &f.kills {
                    eprintln!("  {}", k.line());
                }
            }
            eprintln!("{}", dep.log_tails(LOG_TAIL_LINES));
            dep.stop();
            dep.keep();
            eprintln!(
                "ringmq-perf failover: data, logs and the acknowledgement log kept in {}",
                dep.dir.display()
            );
            EXIT_FAILED
        }
    }
}

const EXIT_SUCCESS: i32 = 0;

/// Why a run stopped early, and what it had measured by then.
struct Failure {
    what: String,
    kills: Vec<KillRecord>,
}

impl Failure {
    fn new(what: impl Into<String>) -> Failure {
        Failure {
            what: what.into(),
            kills: Vec::new(),
        }
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::new(s)
    }
}

async fn run(a: &FailoverArgs, dep: &mut Deployment) -> Result<Report, Failure> {
    let admin = Admin::connect(&dep.addr_list())
        .await
        .map_err(|e| format!("admin client: {e}"))?;
    let ctl = dep.controller_addrs.clone();
    let t0 = Instant::now();
    let set = wait_set(
        &admin,
        &ctl,
        a.timeout,
        "a master and a full SyncStateSet",
        full,
    )
    .await?;
    note(
        a,
        &format!(
            "set {BROKER_NAME}: master broker {} in epoch {}, SyncStateSet {:?} after {} ms",
            set.master_id.unwrap_or(0),
            set.master_epoch,
            set.sync_state_set,
            t0.elapsed().as_millis()
        ),
    );
    admin
        .create_topic(TOPIC, a.queues, TOPIC_WAIT)
        .await
        .map_err(|e| format!("creating {TOPIC}: {e}"))?;
    for b in &dep.brokers {
        wait_topic(&admin, b.addr).await?;
    }
    let ack_path = dep.dir.join("acks.log");
    let acks = AckLog::create(&ack_path).map_err(|e| format!("{}: {e}", ack_path.display()))?;
    let load = Arc::new(Load::new(acks, a.rate));
    let plan = LoadPlan {
        name_servers: dep
            .controller_addrs
            .iter()
            .map(ToString::to_string)
            .collect(),
        topic: TOPIC.to_string(),
        producers: a.producers,
        inflight: a.inflight,
        size: a.size,
        send_timeout: a.send_timeout,
        run_id: run_id(),
        reconnect_backoff_max: a.reconnect_backoff_max,
    };
    let running = Running::start(&plan, Arc::clone(&load)).await?;
    let progress = (!a.quiet).then(|| tokio::spawn(progress(Arc::clone(&load))));
    let kills = kill_rounds(a, dep, &admin, &load).await;
    if let Some(p) = progress {
        p.abort();
    }
    running.stop().await;
    let kills = kills?;
    let elapsed = load.start.elapsed();
    note(a, "load stopped; waiting for the replicas to agree");
    wait_set(
        &admin,
        &ctl,
        a.timeout,
        "a full SyncStateSet at the end",
        full,
    )
    .await
    .map_err(|f| Failure {
        kills: kills.clone(),
        ..f
    })?;
    let replicas_agree = converge(&admin, dep).await;
    let readback = read_back(&dep.addr_list(), &ack_path)
        .await
        .map_err(|e| Failure {
            what: e,
            kills: kills.clone(),
        })?;
    let final_set = current(&admin, &ctl).await.ok();
    Ok(Report {
        config: report::Config::of(a, &dep.dir, dep.is_temporary()),
        kills,
        acked: load.acked.load(std::sync::atomic::Ordering::Relaxed),
        failed: load.failed.load(std::sync::atomic::Ordering::Relaxed),
        not_ok: load.not_ok.load(std::sync::atomic::Ordering::Relaxed),
        errors: load.error_kinds(),
        buckets: load.buckets(),
        elapsed,
        replicas_agree,
        readback,
        final_master: final_set.and_then(|s| s.master_id),
    })
}

/// The kills, one after another; the records so far when one fails.
async fn kill_rounds(
    a: &FailoverArgs,
    dep: &mut Deployment,
    admin: &Admin,
    load: &Load,
) -> Result<Vec<KillRecord>, Failure> {
    let ctl = dep.controller_addrs.clone();
    let mut kills: Vec<KillRecord> = Vec::new();
    for n in 1..=a.kills {
        // The load must be acknowledged before a kill: a failover time is only measured
        // against a master that took sends.
        let acked = load.acked.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(a.settle).await;
        if load.acked.load(std::sync::atomic::Ordering::Relaxed) == acked {
            return Err(Failure {
                what: format!(
                    "no send was acknowledged in the {:?} before kill {n}; failed sends by \
                     kind: {:?}",
                    a.settle,
                    load.error_kinds()
                ),
                kills,
            });
        }
        let round = kill_once(a, dep, admin, load, &ctl, n).await;
        load.unwatch();
        match round {
            Ok(k) => {
                note(a, &k.line());
                kills.push(k);
            }
            Err(what) => return Err(Failure { what, kills }),
        }
        if let Err(e) = dep.check_alive() {
            return Err(Failure {
                what: format!("after kill {n}: {e}"),
                kills,
            });
        }
    }
    tokio::time::sleep(a.settle).await;
    Ok(kills)
}

/// One round: kill the master, wait for the new one to acknowledge, restart the old one and
/// wait until the SyncStateSet is full again.
async fn kill_once(
    a: &FailoverArgs,
    dep: &mut Deployment,
    admin: &Admin,
    load: &Load,
    ctl: &[SocketAddr],
    n: u32,
) -> Result<KillRecord, String> {
    let before = wait_set(
        admin,
        ctl,
        a.timeout,
        "full SyncStateSet before the kill",
        full,
    )
    .await
    .map_err(|f| format!("kill {n}: {}", f.what))?;
    let old = before
        .master_id
        .ok_or_else(|| format!("kill {n}: the set has no master before the kill"))?;
    let old_addr = dep
        .broker(old)
        .map(|b| b.addr)
        .ok_or_else(|| format!("kill {n}: master {old} is not one of the brokers started"))?;
    let failed_before = load.failed.load(std::sync::atomic::Ordering::Relaxed);
    let killed_at = Instant::now();
    load.watch_from(killed_at);
    tokio::task::block_in_place(|| dep.kill9(old))?;
    let after = wait_set(admin, ctl, a.timeout, "a new master", |s| {
        s.master_id.is_some_and(|m| m != old)
    })
    .await
    .map_err(|f| format!("kill {n} (broker {old} at {old_addr}): {}", f.what))?;
    let elected = killed_at.elapsed();
    let new_id = after.master_id.unwrap_or(0);
    let new_addr = after
        .master()
        .map(|m| m.broker_addr)
        .ok_or_else(|| format!("kill {n}: the controllers list no member for master {new_id}"))?;
    let deadline = killed_at + a.timeout;
    let first = loop {
        if let Some(t) = load.first_ack(new_addr) {
            break t;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "kill {n}: broker {new_id} ({new_addr}) became master in epoch {} {} ms after \
                 the kill but acknowledged no send within {:?} of it",
                after.master_epoch,
                elected.as_millis(),
                a.timeout
            ));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let failover = first.saturating_duration_since(killed_at);
    let failed_sends = load.failed.load(std::sync::atomic::Ordering::Relaxed) - failed_before;
    let restarted_at = Instant::now();
    tokio::task::block_in_place(|| dep.restart(old, &a.broker_set))
        .map_err(|e| format!("kill {n}: restarting broker {old}: {e}"))?;
    let rejoined = wait_set(admin, ctl, a.timeout, "the restarted broker back in", |s| {
        full(s) && s.sync_state_set.contains(&old)
    })
    .await
    .map_err(|f| format!("kill {n}: {}", f.what))?;
    Ok(KillRecord {
        n,
        killed: old,
        killed_addr: old_addr,
        at_ms: killed_at.saturating_duration_since(load.start).as_millis() as u64,
        epoch_before: before.master_epoch,
        new_master: new_id,
        new_addr,
        epoch: after.master_epoch,
        from_sync_state_set: before.sync_state_set.contains(&new_id),
        elected_ms: elected.as_secs_f64() * 1e3,
        failover_ms: failover.as_secs_f64() * 1e3,
        failed_sends,
        rejoin_ms: restarted_at.elapsed().as_secs_f64() * 1e3,
        master_after_rejoin: rejoined.master_id,
    })
}

/// A master and all three brokers alive in the SyncStateSet.
fn full(s: &ReplicaSet) -> bool {
    s.master_id.is_some()
        && s.sync_state_set.len() == BROKERS as usize
        && s.members.iter().filter(|m| m.alive).count() == BROKERS as usize
}

/// The set as the leader controller sees it now.
async fn current(admin: &Admin, ctl: &[SocketAddr]) -> Result<ReplicaSet, String> {
    admin
        .replica_info(ctl, Some(BROKER_NAME))
        .await
        .map_err(|e| format!("replica info of {BROKER_NAME}: {e}"))?
        .into_iter()
        .next()
        .ok_or_else(|| format!("the controllers list no set {BROKER_NAME}"))
}

/// Polls the controllers until `ok` holds for the set, at most `within`.
async fn wait_set(
    admin: &Admin,
    ctl: &[SocketAddr],
    within: Duration,
    what: &str,
    ok: impl Fn(&ReplicaSet) -> bool,
) -> Result<ReplicaSet, Failure> {
    let deadline = Instant::now() + within;
    let mut last: Option<ReplicaSet> = None;
    let mut last_error: Option<String> = None;
    loop {
        match current(admin, ctl).await {
            Ok(s) if ok(&s) => return Ok(s),
            Ok(s) => last = Some(s),
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(Failure::new(format!(
                "no {what} within {within:?}; the controllers' last view: {last:#?} \
                 (last error: {last_error:?})"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until broker `addr` has the topic (the slaves copy it from the master).
async fn wait_topic(admin: &Admin, addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + TOPIC_WAIT;
    loop {
        if let Ok(Some(_)) = admin.topic_config(addr, TOPIC).await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "broker {addr} has no topic {TOPIC} after {TOPIC_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every broker's CommitLogs end at the same offsets (shard by shard); whether
/// they did within [`CONVERGE_WAIT`].
async fn converge(admin: &Admin, dep: &Deployment) -> bool {
    let deadline = Instant::now() + CONVERGE_WAIT;
    loop {
        let mut ends = Vec::new();
        for b in &dep.brokers {
            match admin.runtime_info(b.addr).await {
                Ok(info) => {
                    let mut shards = info.shards;
                    shards.sort_by_key(|s| s.shard_id);
                    ends.push(
                        shards
                            .iter()
                            .map(|s| s.commitlog_max_offset)
                            .collect::<Vec<_>>(),
                    );
                }
                Err(e) => log::debug!("runtime info of {}: {e}", b.addr),
            }
        }
        if ends.len() == dep.brokers.len() && ends.windows(2).all(|w| w[0] == w[1]) {
            return true;
        }
        if Instant::now() >= deadline {
            eprintln!("ringmq-perf: the CommitLogs still end at different offsets: {ends:?}");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reads every queue of the topic from the set's master (as the name servers route it now)
/// and checks the acknowledgement log against what is there.
async fn read_back(name_servers: &str, ack_path: &std::path::Path) -> Result<Readback, String> {
    let admin = Admin::connect(name_servers)
        .await
        .map_err(|e| format!("admin client: {e}"))?;
    let route = admin
        .topic_route(TOPIC)
        .await
        .map_err(|e| format!("route of {TOPIC}: {e}"))?;
    let mut names = QueueNames::default();
    let mut deliveries = Vec::new();
    let mut event = 0u64;
    let mut read = 0u64;
    let queues: Vec<MessageQueue> = route.read_queues.to_vec();
    for mq in &queues {
        let q = names.intern(&mq.broker_name, mq.queue_id);
        let mut at = admin
            .min_offset(mq)
            .await
            .map_err(|e| format!("{mq}: {e}"))?;
        let max = admin
            .max_offset(mq)
            .await
            .map_err(|e| format!("{mq}: {e}"))?;
        while at < max {
            let want = (max - at).min(u64::from(READ_BATCH)) as u32;
            let msgs = admin
                .read_messages(mq, at, want)
                .await
                .map_err(|e| format!("reading {mq} at {at}: {e}"))?;
            let Some(last) = msgs.last() else { break };
            at = last.queue_offset + 1;
            read += msgs.len() as u64;
            for m in &msgs {
                let Some(h) = payload::parse(&m.body) else {
                    continue;
                };
                // Each message read once, in a "call" of its own: no overlap to report.
                event += 2;
                deliveries.push(Delivery {
                    producer: h.producer,
                    seq: h.seq,
                    queue: q,
                    offset: m.queue_offset,
                    retry: false,
                    ok: true,
                    begin: event,
                    end: event + 1,
                });
            }
        }
    }
    let acked = Acked::load(ack_path)?;
    let verdict = verify::check(
        &acked,
        &names,
        &deliveries,
        &HashSet::new(),
        Consumption::Concurrent,
    );
    Ok(Readback {
        queues: queues.len(),
        read,
        verdict: verdict.total,
        unlisted: verdict.unlisted,
        lost_examples: verdict.lost_examples,
        torn_tail: verdict.torn_tail,
    })
}

/// A progress line every second (stderr): acknowledged and failed sends in that second.
async fn progress(load: Arc<Load>) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let (mut acked, mut failed) = (0, 0);
    loop {
        tick.tick().await;
        let (a, f) = (load.acked.load(Relaxed), load.failed.load(Relaxed));
        eprintln!(
            "[{:>4.0}s] acknowledged {:>6} sends/s, failed {:>5} sends/s",
            load.start.elapsed().as_secs_f64(),
            a - acked,
            f - failed
        );
        (acked, failed) = (a, f);
    }
}

fn note(a: &FailoverArgs, line: &str) {
    if !a.quiet {
        eprintln!("ringmq-perf failover: {line}");
    }
}
