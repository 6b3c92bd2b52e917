//! The deterministic simulator in CI: a fixed set of seeds must run clean, the same seeds
//! must give the same digest twice, and every planted bug must be found within a bounded
//! number of seeds (the proof that the checks can fail). Runs in-process on virtual time;
//! no sockets, no real store files (only the brokers' small config files in a temp dir).
#![allow(clippy::unwrap_used)]

use ringmq_node::planted::Bug;
use ringmq_node::sim::{run_one, Options, Report};

/// Virtual seconds per run: enough for several faults per run at the nemesis's rates.
const VIRTUAL_SECS: u64 = 10;
/// Clean seeds run in CI (about a minute in a debug build on the 2-core CI machine).
const CLEAN_SEEDS: u64 = 24;
/// A planted bug must be found within this many seeds.
const BUG_SEEDS_MAX: u64 = 40;

/// The first seed searched for `bug`. `join-unfenced` needs a narrow race (a slave entering
/// the SyncStateSet while the master acknowledges alone, then that master's death and the
/// slave's election): about one failover seed in 250 finds it (157, 199 and 510 of 1-800
/// at `e058955`: `ringmq-sim --scenario failover --inject-bug join-unfenced --seed 1
/// --runs 800 --virtual-secs 20 --keep-going`), so CI searches from just below the first.
/// A change that moves the runs' course can move it out of the window: find it again with
/// that command.
fn first_seed(bug: Bug) -> u64 {
    match bug {
        Bug::JoinUnfenced => 150,
        _ => 1,
    }
}
/// The failover scenario (three controllers, a set of three brokers in controller mode):
/// virtual seconds of faults per run (after 3 s of start), and the clean seeds CI runs
/// (seed 5 is the one that found a master acknowledging after its lease ran out).
const FAILOVER_VIRTUAL_SECS: u64 = 20;
const FAILOVER_CLEAN_SEEDS: u64 = 6;

/// The POP scenario (a master crashed at random points under POP producers and consumers,
/// `sim::pop_crash`): virtual seconds of faults per run, and the clean seeds CI runs (the
/// sweep of seeds 1-2000 in docs/simulation.md runs clean too).
const POP_VIRTUAL_SECS: u64 = 20;
const POP_CLEAN_SEEDS: u64 = 6;
/// The POP seeds searched for each planted POP bug (they run clean without it: seeds
/// 1-200 do). `pop-offset-before-checkpoint` has a narrow race: it fails seeds 6, 15, 19,
/// 20, 30, 33 and 38 of 1-40 (`scripts/sim.sh --scenario pop --inject-bug pop-offset-before-checkpoint
/// --seed 1 --runs 40 --virtual-secs 20 --keep-going`); the others fail seed 1. A change
/// that moves the runs' course can move them: find them again with that command.
const POP_BUG_SEEDS: u64 = 24;

/// The recall scenario (a master crashed at random points under scheduled sends and their
/// recalls, `sim::recall_crash`): virtual seconds of faults per run, and the clean seeds CI
/// runs, and the first seed searched for the planted recall bug: `recall-ack-before-durable`
/// fails seeds 3, 5, 11 and 15 of 1-20 (`scripts/sim.sh --scenario recall --inject-bug
/// recall-ack-before-durable --seed 1 --runs 20 --virtual-secs 20 --keep-going`); CI starts
/// at the first to stay under a few seconds. A change that moves the runs' course can move
/// it: find it again with that command.
const RECALL_VIRTUAL_SECS: u64 = 20;
const RECALL_CLEAN_SEEDS: u64 = 2;
const RECALL_BUG_FIRST_SEED: u64 = 3;

/// A run of the scenario that finds `bug`: the failover one for the failover bugs, the POP
/// one for the POP bugs.
fn run(seed: u64, bug: Option<Bug>, dir: &std::path::Path) -> Report {
    if bug.is_some_and(Bug::is_failover) {
        return run_failover(seed, bug, dir);
    }
    if bug.is_some_and(Bug::is_pop) {
        return run_pop(seed, bug, dir);
    }
    if bug.is_some_and(Bug::is_recall) {
        return run_recall(seed, bug, dir);
    }
    run_one(&Options {
        seed,
        bug,
        virtual_secs: VIRTUAL_SECS,
        scratch_dir: dir.to_path_buf(),
    })
}

fn run_pop(seed: u64, bug: Option<Bug>, dir: &std::path::Path) -> Report {
    ringmq_node::sim::pop_crash::run_one(&Options {
        seed,
        bug,
        virtual_secs: POP_VIRTUAL_SECS,
        scratch_dir: dir.to_path_buf(),
    })
}

/// POP under crashes at random points (kill -9, power loss, torn writes, a dying disk) with
/// pops, acks, batch acks, invisible-time changes, expiries and orderly pops: nothing
/// acknowledged to a producer is lost to the group, nothing acked comes back (outside the
/// documented window), on a fixed seed set; and a seed replays exactly.
#[test]
fn pop_seeds_run_clean_and_replay_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut crashes, mut retried, mut changed, mut orderly) = (0, 0, 0, 0);
    for seed in 1..=POP_CLEAN_SEEDS {
        let r = run_pop(seed, None, dir.path());
        assert!(
            r.failure.is_none(),
            "POP seed {seed} ({}) failed: {}\nfaults: {:#?}\nreplay: scripts/sim.sh --scenario pop --seed {seed} --runs 1 --virtual-secs {POP_VIRTUAL_SECS}",
            r.mode,
            r.failure.unwrap(),
            r.faults
        );
        let p = r.pop.unwrap();
        assert!(p.acks_ok > 0, "seed {seed}: nothing was acked: {p:?}");
        crashes += r.crashes;
        retried += p.retry_deliveries;
        changed += p.changes_ok;
        orderly += p.orderly_deliveries;
    }
    assert!(
        crashes > POP_CLEAN_SEEDS as u32 && retried > 0 && changed > 0 && orderly > 0,
        "the POP runs did not reach every path: {crashes} crashes, {retried} deliveries from \
         the retry topic, {changed} invisible-time changes, {orderly} orderly deliveries"
    );
    let (a, b) = (run_pop(2, None, dir.path()), run_pop(2, None, dir.path()));
    assert_eq!(
        (a.digest, a.events),
        (b.digest, b.events),
        "POP seed 2 is not deterministic"
    );
}

fn run_recall(seed: u64, bug: Option<Bug>, dir: &std::path::Path) -> Report {
    ringmq_node::sim::recall_crash::run_one(&Options {
        seed,
        bug,
        virtual_secs: RECALL_VIRTUAL_SECS,
        scratch_dir: dir.to_path_buf(),
    })
}

/// Scheduled sends recalled at random points (before and after their due time) while the
/// master is killed or loses power: nothing acknowledged and not recalled is lost or early,
/// nothing whose recall was acknowledged is delivered (outside ASYNC_FLUSH's power-loss
/// window), nothing is delivered twice, on a fixed seed set; and a seed replays exactly.
#[test]
fn recall_seeds_run_clean_and_replay_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut crashes, mut recalled, mut too_late, mut delivered) = (0, 0, 0, 0);
    let mut last = None;
    for seed in 1..=RECALL_CLEAN_SEEDS {
        let r = run_recall(seed, None, dir.path());
        last = Some((r.digest, r.events));
        assert!(
            r.failure.is_none(),
            "recall seed {seed} ({}) failed: {}\nfaults: {:#?}\nreplay: scripts/sim.sh --scenario recall --seed {seed} --runs 1 --virtual-secs {RECALL_VIRTUAL_SECS}",
            r.mode,
            r.failure.unwrap(),
            r.faults
        );
        let c = r.recall.unwrap();
        crashes += r.crashes;
        recalled += c.recalls_ok;
        too_late += c.recalls_too_late;
        delivered += c.delivered;
    }
    assert!(
        crashes >= RECALL_CLEAN_SEEDS as u32 && recalled > 0 && too_late > 0 && delivered > 0,
        "the recall runs did not reach every path: {crashes} crashes, {recalled} recalls \
         answered SUCCESS, {too_late} too late, {delivered} delivered"
    );
    let again = run_recall(RECALL_CLEAN_SEEDS, None, dir.path());
    assert_eq!(
        last,
        Some((again.digest, again.events)),
        "recall seed {RECALL_CLEAN_SEEDS} is not deterministic"
    );
}

/// The recall scenario finds each planted recall bug within a bounded number of seeds.
#[test]
fn every_planted_recall_bug_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for bug in Bug::ALL.into_iter().filter(|b| b.is_recall()) {
        let from = RECALL_BUG_FIRST_SEED;
        let found = (from..from + BUG_SEEDS_MAX).find_map(|seed| {
            let r = run_recall(seed, Some(bug), dir.path());
            r.failure.map(|f| (seed, f))
        });
        let (seed, failure) = found.unwrap_or_else(|| {
            panic!(
                "planted bug {} not found in {BUG_SEEDS_MAX} recall seeds from {from}",
                bug.name()
            )
        });
        eprintln!("{} found at seed {seed}: {failure}", bug.name());
    }
}

fn run_failover(seed: u64, bug: Option<Bug>, dir: &std::path::Path) -> Report {
    ringmq_node::sim::failover::run_one(&Options {
        seed,
        bug,
        virtual_secs: FAILOVER_VIRTUAL_SECS,
        scratch_dir: dir.to_path_buf(),
    })
}

/// Automatic failover under faults (kill -9 of brokers and controllers, a master cut off
/// from the controllers, partitions, clock jumps, slow, full and failing disks): clean on a
/// fixed seed set, every seed failing over at least once, and deterministic.
#[test]
fn failover_seeds_run_clean_and_replay_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut epochs = 0;
    for seed in 1..=FAILOVER_CLEAN_SEEDS {
        let r = run_failover(seed, None, dir.path());
        assert!(
            r.failure.is_none(),
            "failover seed {seed} ({}) failed: {}\nfaults: {:#?}\nreplay: scripts/sim.sh --scenario failover --seed {seed} --runs 1 --virtual-secs {FAILOVER_VIRTUAL_SECS}",
            r.mode,
            r.failure.unwrap(),
            r.faults
        );
        assert!(r.sends_ok > 0, "seed {seed}: nothing was acknowledged");
        epochs += r.epochs_acked;
    }
    assert!(
        epochs > FAILOVER_CLEAN_SEEDS as u32,
        "sends were acknowledged in only {epochs} master epochs over {FAILOVER_CLEAN_SEEDS} seeds: no failover happened"
    );
    let (a, b) = (
        run_failover(1, None, dir.path()),
        run_failover(1, None, dir.path()),
    );
    assert_eq!(
        (a.digest, a.events),
        (b.digest, b.events),
        "failover seed 1 is not deterministic"
    );
}

#[test]
fn fixed_seeds_run_clean_and_replay_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut events, mut fuzzed) = (0, 0);
    for seed in 1..=CLEAN_SEEDS {
        let r = run(seed, None, dir.path());
        assert!(
            r.failure.is_none(),
            "seed {seed} ({}) failed: {}\nfaults: {:#?}\nreplay: scripts/sim.sh --seed {seed} --runs 1 --virtual-secs {VIRTUAL_SECS}",
            r.mode,
            r.failure.unwrap(),
            r.faults
        );
        assert!(r.sends_ok > 0, "seed {seed}: nothing was acknowledged");
        events += r.events;
        fuzzed += r.fuzz_answered;
    }
    assert!(events > 0);
    assert!(fuzzed > 0, "no fuzzed request was answered");
    // The same seed twice: the same trace.
    for seed in [1, 2, 3] {
        let (a, b) = (run(seed, None, dir.path()), run(seed, None, dir.path()));
        assert_eq!(a.digest, b.digest, "seed {seed} is not deterministic");
        assert_eq!(a.events, b.events, "seed {seed} is not deterministic");
    }
}

#[test]
fn every_planted_bug_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for bug in Bug::ALL
        .into_iter()
        .filter(|b| !b.is_pop() && !b.is_recall() && !b.is_catch_up())
    {
        let from = first_seed(bug);
        let found = (from..from + BUG_SEEDS_MAX).find_map(|seed| {
            let r = run(seed, Some(bug), dir.path());
            r.failure.map(|f| (seed, f))
        });
        let (seed, failure) = found.unwrap_or_else(|| {
            panic!(
                "planted bug {} not found in {BUG_SEEDS_MAX} seeds from {from}",
                bug.name()
            )
        });
        eprintln!("{} found at seed {seed}: {failure}", bug.name());
    }
}

/// The POP scenario finds each planted POP bug within [`POP_BUG_SEEDS`] seeds that run clean
/// without it (so what it finds is the planted bug).
#[test]
fn every_planted_pop_bug_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for bug in Bug::ALL.into_iter().filter(|b| b.is_pop()) {
        let found = (1..=POP_BUG_SEEDS).find_map(|seed| {
            let r = run_pop(seed, Some(bug), dir.path());
            r.failure.map(|f| (seed, f))
        });
        let (seed, failure) = found.unwrap_or_else(|| {
            panic!(
                "planted bug {} not found in POP seeds 1-{POP_BUG_SEEDS}",
                bug.name()
            )
        });
        eprintln!("{} found at seed {seed}: {failure}", bug.name());
    }
}

/// The confirmOffset read cap through the real broker: pulls and POPs see nothing above
/// it, and parked ones are answered as soon as it moves.
#[test]
fn consumers_never_read_past_the_confirm_offset() {
    let dir = tempfile::tempdir().unwrap();
    let r = ringmq_node::sim::confirm::run(3, dir.path()).unwrap();
    assert_eq!(r.capped_pull, Vec::<u64>::new(), "{r:?}");
    assert_eq!(r.capped_pop, Vec::<u64>::new(), "{r:?}");
    assert_eq!(r.partial_pull, vec![0, 1, 2], "{r:?}");
    assert_eq!(r.woken_pull, vec![3, 4], "{r:?}");
    assert!(
        (1_000..5_000).contains(&r.woken_after_ms),
        "the parked pull is answered when the cap is lifted (1 s in), not at its timeout: {r:?}"
    );
    assert_eq!(r.woken_pop, vec![0], "{r:?}");
}

/// The 2 h delay level and a 3-day delivery time on virtual time: delivered when due and
/// never before, across a kill -9, with retention kept off their segment until then.
#[test]
fn long_delays_on_the_simulated_clock() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let r = ringmq_node::sim::long_delay::run(7, dir.path()).unwrap();
    eprintln!(
        "long delays: {} events, {} virtual s in {:?}; log start {} while pending, {} after",
        r.events,
        r.virtual_s,
        started.elapsed(),
        r.min_offset_pending,
        r.min_offset_after
    );
}

/// RocketMQ's 16 growing retry delays (10 s ... 2 h, ~4 h 46 min) end to end on virtual
/// time: each retry on time and never early, across a kill -9, then the dead-letter topic.
#[test]
fn sixteen_retries_then_the_dead_letter_topic_on_the_simulated_clock() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let r = ringmq_node::sim::retry::run(11, dir.path()).unwrap();
    assert_eq!(r.deliveries.len(), 16);
    assert!(r.dead_lettered);
    let late: Vec<i64> = r
        .deliveries
        .iter()
        .map(|d| d.stored_ms - d.sent_back_ms)
        .collect();
    eprintln!(
        "16 retries: {} events, {} virtual s in {:?}; send-back to retry stored, ms: {late:?}",
        r.events,
        r.virtual_s,
        started.elapsed(),
    );
}

/// POP invisible times of 5 minutes on virtual time: an unacked message comes back from the
/// pop retry topic when its invisible time ends (never before, within a second after),
/// across a kill -9 while it is in flight, then dead-letters at the group's limit; the acked
/// one never comes back, and a stale handle's ack is refused.
#[test]
fn pop_invisible_times_expire_on_the_simulated_clock() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let r = ringmq_node::sim::pop::run(13, dir.path()).unwrap();
    assert_eq!(r.deliveries.len(), 3);
    assert!(r.dead_lettered);
    let after: Vec<i64> = r
        .deliveries
        .windows(2)
        .map(|w| w[1].stored_ms - w[0].popped_ms)
        .collect();
    eprintln!(
        "POP: {} events, {} virtual s in {:?}; pop to redelivery stored, ms: {after:?}",
        r.events,
        r.virtual_s,
        started.elapsed(),
    );
}

/// Transactions with the broker's default check-back timing (6 s, every 30 s, 15 checks)
/// on virtual time, across a power loss of a SYNC_FLUSH master: committed exactly once,
/// rolled back never, unanswered ones in the check-max topic.
#[test]
fn transactions_checked_back_on_the_simulated_clock() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let r = ringmq_node::sim::txn::run(5, dir.path()).unwrap();
    eprintln!(
        "transactions: {} events, {} virtual s in {:?}; {} check-backs answered or ignored, \
         {} delivered, {} in the check-max topic",
        r.events,
        r.virtual_s,
        started.elapsed(),
        r.checks_received,
        r.delivered,
        r.check_max
    );
}

/// The name server's broker leases run on the monotonic clock: a jump of its wall clock
/// neither drops a registered broker early nor keeps a silent one. Found by the simulator
/// (`ringmq-sim --seed 12 --runs 1 --virtual-secs 20`): a forward jump of the name server's
/// clock dropped every broker at the next scan, and a backward one kept silent brokers for
/// as long as the jump.
#[test]
fn name_server_leases_ignore_wall_clock_jumps() {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::Duration;

    use ringmq_node::io::sim::{NetConfig, World};
    use ringmq_node::sim::cluster::{NamesrvNode, BROKER_EXPIRY_MS, NAMESRV, NAMESRV_SCAN_MS};
    use ringmq_wire::code::{RequestCode, Status};
    use ringmq_wire::codec::{Empty, Encode};
    use ringmq_wire::command::route::{BrokerRegistration, BrokerRole, DataVersion};

    let world = World::new(1, NetConfig::default());
    let _entered = world.enter();
    let mut ns = NamesrvNode::new();
    ns.start(&world).unwrap();
    let reg = BrokerRegistration {
        cluster: "c".into(),
        broker_name: "b".into(),
        broker_id: 0,
        address: "10.0.1.1:10911".into(),
        ha_address: String::new(),
        role: BrokerRole::AsyncMaster,
        shard_count: 1,
        version: "test".into(),
        heartbeat_timeout_ms: 120_000,
        data_version: DataVersion::default(),
        topics: Vec::new(),
        shard_addresses: Vec::new(),
    };
    let body = reg.to_vec().unwrap();
    let answered: Rc<Cell<Option<Status>>> = Rc::default();
    let (addr, slot) = (ns.addr, Rc::clone(&answered));
    world.spawn_on(20, async move {
        let r = ringmq_node::net::call::call(
            addr,
            RequestCode::RegisterBroker,
            &Empty,
            &body,
            None,
            None,
        )
        .await;
        slot.set(Some(r.map(|(s, _, _)| s).unwrap_or(Status::SystemError)));
    });
    assert!(world.run_until(1_000_000_000, || answered.get().is_some()));
    assert_eq!(answered.get(), Some(Status::Success));
    let listed = |ns: &NamesrvNode| {
        ns.running
            .as_ref()
            .unwrap()
            .with_routes(|t| t.broker_count())
    };
    assert_eq!(listed(&ns), 1);
    // An hour forward: the lease (registered a moment ago) still runs.
    world.jump_clock(NAMESRV, 3_600_000);
    world.run_for(Duration::from_millis(3 * NAMESRV_SCAN_MS));
    assert_eq!(listed(&ns), 1, "dropped early after a forward clock jump");
    // Two hours back, and silent for longer than the expiry: dropped.
    world.jump_clock(NAMESRV, -7_200_000);
    world.run_for(Duration::from_millis(
        BROKER_EXPIRY_MS + 2 * NAMESRV_SCAN_MS,
    ));
    assert_eq!(
        listed(&ns),
        0,
        "a silent broker kept after a backward clock jump"
    );
}

/// Catch-up reads of released log bytes (4 KiB direct-read chunks) across a cut of the log
/// (`sim::catch_up_cut`): every pull returns what the log holds at its offsets, before and
/// after the cut; with chunks kept across the cut planted, a pull returns bytes that were
/// cut.
#[test]
fn catch_up_chunks_never_outlive_a_cut_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let r = ringmq_node::sim::catch_up_cut::run(5, None, dir.path()).unwrap();
    assert_eq!((r.read_before, r.read_after), (160, 80), "{r:?}");
    assert!(
        r.chunks_read >= 40,
        "the pulls were not served from direct-read chunks: {r:?}"
    );
    for bug in Bug::ALL.into_iter().filter(|b| b.is_catch_up()) {
        let err = ringmq_node::sim::catch_up_cut::run(5, Some(bug), dir.path())
            .expect_err("the planted bug was not found");
        eprintln!("{} found: {err}", bug.name());
    }
}
