//! POP under crashes at random points (`ringmq-sim --scenario pop`): one master (ASYNC_FLUSH
//! or SYNC_FLUSH by the seed, one shard), producers on a plain topic (4 queues) and an
//! orderly one (2 queues), POP consumers that pop, ack, batch-ack, change invisible times or
//! drop what they got, and an orderly POP consumer (`sim::pop_client`). Every 100 ms the
//! nemesis may `kill -9` the master or cut its power (unsynced bytes dropped, or the last
//! write torn), kill its disk a few I/Os ahead (fail-stop), slow its fdatasync, fill its disk
//! or reset connections; the master restarts from its crash image, at once or up to 2 s
//! later. Then the faults stop, producers stop, consumers ack everything, and the run waits
//! (longer than any invisible time) for every acknowledged send to be acked by its group.
//!
//! The POP invariants (docs/simulation.md, "The POP scenario"):
//! - (a) nothing acknowledged to a producer is lost: by the end each such record (not
//!   forgotten under ASYNC_FLUSH's power-loss window) was acked by its group with SUCCESS, or
//!   an ack of it got no clear answer, or it is in the group's dead-letter topic;
//! - (b) nothing acked comes back: no pop sent after an ack was answered SUCCESS delivers
//!   its message again, except (i) under ASYNC_FLUSH after a power loss, between the two,
//!   that took the ack's record, or (ii) a different copy when the log holds two revived
//!   copies of the message with one reconsume count (a revive cut by a crash between storing
//!   the copy and its revived record);
//! - (c) after every restart: every ack answered SUCCESS before the crash is in the recovered
//!   log, unless ASYNC_FLUSH and a power loss (then it is forgotten, and (b)(i) applies);
//!   and every acknowledged send is in the log under the same promise as the classic runs.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use ringmq_wire::codec::Decode;
use ringmq_wire::command::{dlq_topic, pop_retry_topic, PopOp, PopOpKind, POP_STATE_TOPIC};
use ringmq_wire::record;

use crate::config::FlushDiskType;
use crate::io::node_disk::NodeDisk;
use crate::io::sim::{NetConfig, World};
use crate::planted::{self, Bug};
use crate::store::fault_disk::Crash;
use crate::store::{PullStatus, Store};

use super::check;
use super::client::Shared;
use super::cluster::{LoneMaster, CLIENTS, MASTER};
use super::pop_client::{
    self as pc, AckId, AckState, OracleRef, FIFO_GROUP, FIFO_TOPIC, GROUP, TOPIC,
};
use super::{Options, Report, SLICE_MS};

/// The group's retry limit: the fourth expiry of a message dead-letters it.
const MAX_RECONSUME: u32 = 3;
/// Longest the quiet period waits for every acknowledged send to be acked.
const QUIET_MS_MAX: u64 = 60_000;

/// The flush policy a seed runs; a planted bug forces the one that shows it.
pub fn flush_for(seed: u64, bug: Option<Bug>) -> FlushDiskType {
    let mut rng = crate::io::sim::Rng::new(seed ^ 0x90B_C4A5);
    match bug {
        Some(Bug::PopAckBeforeDurable) => FlushDiskType::SyncFlush,
        _ if rng.chance(0.5) => FlushDiskType::SyncFlush,
        _ => FlushDiskType::AsyncFlush,
    }
}

/// Whether a seed's plain POP group starts from each queue's end (`PopInitMode::Max`).
pub fn init_max_for(seed: u64) -> bool {
    crate::io::sim::Rng::new(seed ^ 0x1417_3A11).chance(0.5)
}

/// Runs one seed of the POP scenario.
pub fn run_one(opts: &Options) -> Report {
    let world = World::new(opts.seed, NetConfig::default());
    let entered = world.enter();
    planted::plant(opts.bug);
    let flush = flush_for(opts.seed, opts.bug);
    let mut report = Report {
        seed: opts.seed,
        mode: format!(
            "pop/{}/init-{}",
            flush.as_str(),
            if init_max_for(opts.seed) {
                "max"
            } else {
                "min"
            }
        ),
        events: 0,
        digest: 0,
        virtual_ms: 0,
        failure: None,
        crashes: 0,
        sends_ok: 0,
        pulled_records: 0,
        long_polls_woken: 0,
        fuzz_answered: 0,
        scheduled_delivered: 0,
        scheduled_acked: 0,
        route_fetches: 0,
        brokers_expired: 0,
        namesrv_restarts: 0,
        slave_pulls: 0,
        misrouted_sends: 0,
        epochs_acked: 0,
        faults: Vec::new(),
        pop: None,
        recall: None,
    };
    match PopSim::start(&world, opts, flush) {
        Err(e) => report.failure = Some(format!("at 0 ms: {e}")),
        Ok(mut sim) => {
            let result = sim.run(opts.virtual_secs);
            report.failure = result
                .err()
                .map(|f| format!("at {} ms: {f}", world.now_ns() / 1_000_000));
            report.crashes = sim.oracle.borrow().crashes;
            report.sends_ok = sim.shared.checks.borrow().sends_ok;
            report.pop = Some(sim.oracle.borrow().counts);
            report.pulled_records = sim.oracle.borrow().counts.deliveries;
            report.faults = std::mem::take(&mut sim.faults);
            sim.lone.finish(&world);
        }
    }
    report.events = world.polls();
    report.digest = world.trace_digest();
    report.virtual_ms = world.now_ns() / 1_000_000;
    planted::plant(None);
    drop(entered);
    report
}

struct PopSim {
    world: World,
    flush: FlushDiskType,
    lone: LoneMaster,
    shared: Shared,
    oracle: OracleRef,
    faults: Vec<String>,
    /// The master is down until this virtual ms, after a crash of this kind.
    down: Option<(u64, Crash)>,
    disk_full: bool,
}

impl PopSim {
    fn start(world: &World, opts: &Options, flush: FlushDiskType) -> Result<Self, String> {
        let lone = LoneMaster::start(
            world,
            &opts.scratch_dir,
            "pop-crash",
            opts.seed,
            flush,
            &format!("maxReconsumeTimes={MAX_RECONSUME}\n"),
        )?;
        let shared = Shared::own_checks(world);
        let oracle = OracleRef::default();
        oracle.borrow_mut().init_max = init_max_for(opts.seed);
        for id in 0..2 {
            world.spawn_on(CLIENTS, pc::producer(shared.clone(), oracle.clone(), id));
            world.spawn_on(CLIENTS, pc::consumer(shared.clone(), oracle.clone()));
        }
        world.spawn_on(
            CLIENTS,
            pc::orderly_consumer(shared.clone(), oracle.clone()),
        );
        Ok(PopSim {
            world: world.clone(),
            flush,
            lone,
            shared,
            oracle,
            faults: Vec::new(),
            down: None,
            disk_full: false,
        })
    }

    fn now_ms(&self) -> u64 {
        self.world.now_ns() / 1_000_000
    }

    fn run(&mut self, virtual_secs: u64) -> Result<(), String> {
        for _ in 0..virtual_secs * 1000 / SLICE_MS {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            self.after_slice()?;
            self.nemesis()?;
        }
        self.quiesce()?;
        // Quiet: every acknowledged send must be acked by its group.
        let quiet_from = self.now_ms();
        while !self.unsettled()?.is_empty() && self.now_ms() - quiet_from < QUIET_MS_MAX {
            self.world.run_for(Duration::from_secs(1));
            self.after_slice()?;
        }
        // Longer than any invisible time more: a message acked and due to come back shows.
        self.world
            .run_for(Duration::from_millis(pc::INVISIBLE_MS_MAX * 2 + 2_000));
        self.after_slice()?;
        self.final_checks()
    }

    /// Panics fail the run; a fail-stop (a dead disk) restarts the master from a crash
    /// image; a master kept down comes back when its time is up; client checks that failed
    /// end the run.
    fn after_slice(&mut self) -> Result<(), String> {
        if let Some((node, msg)) = self.world.take_panics().into_iter().next() {
            return Err(format!("panic on node {node}: {msg}"));
        }
        for (node, why) in self.world.take_fail_stops() {
            self.faults.push(format!("fail-stop of node {node}: {why}"));
        }
        if let Some(f) = self.shared.checks.borrow().failures.first() {
            return Err(f.clone());
        }
        let now = self.now_ms();
        if self.lone.node.running.is_some() && self.world.is_dead(MASTER) {
            let kind = self.draw_crash();
            self.crash(kind, 0)?;
        } else if let Some((at, kind)) = self.down {
            if now >= at {
                self.restart(kind)?;
            }
        }
        Ok(())
    }

    fn draw_crash(&self) -> Crash {
        match self.world.with_rng(|r| r.below(3)) {
            0 => Crash::KeepWritten,
            1 => Crash::DropUnsynced,
            _ => Crash::TearLast,
        }
    }

    fn nemesis(&mut self) -> Result<(), String> {
        let roll = self.world.with_rng(|r| r.below(1000));
        let now = self.now_ms();
        if self.down.is_some() {
            return Ok(());
        }
        match roll {
            0..=24 => {
                let kind = self.draw_crash();
                let down = self.world.with_rng(|r| {
                    if r.chance(0.7) {
                        0
                    } else {
                        200 + r.below(1_800)
                    }
                });
                return self.crash(kind, down);
            }
            25..=29 => {
                let disk = &self.lone.node.disk;
                let n = disk.ops() + self.world.with_rng(|r| 1 + r.below(300));
                disk.crash_at(n);
                self.faults
                    .push(format!("master disk dies at I/O {n} (from {now} ms)"));
            }
            30..=39 => {
                let us = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        5_000 + r.below(200_000)
                    } else {
                        100
                    }
                });
                self.lone.node.sync_us.set(us);
                self.faults
                    .push(format!("master fdatasync takes {us} us (at {now} ms)"));
            }
            40..=44 => {
                let p = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        0.0
                    } else {
                        0.001 + r.below(10) as f64 / 1000.0
                    }
                });
                self.world.set_reset_chance(p);
                self.faults
                    .push(format!("connection reset chance {p} per write at {now} ms"));
            }
            45..=47 => {
                let disk = &self.lone.node.disk;
                if self.disk_full {
                    disk.set_capacity(None);
                } else {
                    let room = self.world.with_rng(|r| r.below(64 << 10));
                    disk.set_capacity(Some(disk.used_bytes() + room));
                }
                self.disk_full = !self.disk_full;
                self.faults
                    .push(format!("master disk full: {} at {now} ms", self.disk_full));
            }
            _ => {}
        }
        Ok(())
    }

    /// Crashes the master; restarts it at once (`down_ms` 0) or when its time is up.
    fn crash(&mut self, kind: Crash, down_ms: u64) -> Result<(), String> {
        let now = self.now_ms();
        self.oracle.borrow_mut().crashes += 1;
        self.faults.push(format!(
            "master crash ({kind:?}) at {now} ms, down for {down_ms} ms"
        ));
        self.lone.node.crash(&self.world, kind);
        if down_ms > 0 {
            self.down = Some((now + down_ms, kind));
            return Ok(());
        }
        self.restart(kind)
    }

    /// Restarts the master and checks its recovered store under the crash's promise (c).
    fn restart(&mut self, kind: Crash) -> Result<(), String> {
        self.down = None;
        self.lone
            .node
            .start(&self.world)
            .map_err(|e| format!("master restart after a crash: {e}"))?;
        let shard = self
            .lone
            .node
            .shard()
            .ok_or("master not running after restart")?;
        let store = shard.store.borrow();
        let log = check::scan_log(&store)?;
        check::queues_match_log(&store, &log)?;
        let promised = kind == Crash::KeepWritten || self.flush == FlushDiskType::SyncFlush;
        if promised {
            check::acked_present(&store, &self.shared.oracle.borrow(), "master after crash")?;
        } else {
            check::forget_lost(&store, &mut self.shared.oracle.borrow_mut());
        }
        let in_log = acks_in_log(&store)?;
        if !promised && self.oracle.borrow().init_max {
            // Offsets as loaded from the file (the POP state rebuild has not run yet).
            let offsets = shard.offsets.borrow();
            let kept = queues_positioned(&store)?;
            let now = self.world.now_ns();
            let mut o = self.oracle.borrow_mut();
            for q in 0..8 {
                if !kept.contains(&q) && offsets.get(GROUP, TOPIC, q).is_none() {
                    o.positions_forgotten_ns.insert(q, now);
                }
            }
        }
        let mut o = self.oracle.borrow_mut();
        let crash_no = o.crashes;
        for a in o.acks.iter_mut() {
            if matches!(a.state, AckState::Forgotten(_)) {
                continue;
            }
            if in_log.contains(&a.id) {
                a.state = AckState::InLog;
            } else if promised {
                return Err(format!(
                    "(c) the ack of {:?} ({} {}/{} offset {}, checkpoint {}@{}) answered \
                     SUCCESS at {} ms is not in the log recovered after a {kind:?} crash \
                     ({})",
                    String::from_utf8_lossy(&a.body),
                    a.id.0,
                    a.id.1,
                    a.id.2,
                    a.id.5,
                    a.id.3,
                    a.id.4,
                    a.answered_ns / 1_000_000,
                    self.flush.as_str()
                ));
            } else {
                a.state = AckState::Forgotten(crash_no);
            }
        }
        Ok(())
    }

    /// Lifts every fault and starts the quiet period.
    fn quiesce(&mut self) -> Result<(), String> {
        self.world.set_reset_chance(0.0);
        let node = &self.lone.node;
        node.sync_us.set(100);
        node.disk.set_capacity(None);
        node.disk.crash_at(u64::MAX);
        self.disk_full = false;
        if let Some((_, kind)) = self.down {
            self.restart(kind)?;
        }
        self.oracle.borrow_mut().quiet = true;
        Ok(())
    }

    /// (a): the acknowledged sends not yet acked by their group (nor with an ack of unknown
    /// outcome, nor dead-lettered), each described.
    fn unsettled(&self) -> Result<Vec<String>, String> {
        let shard = self.lone.node.shard().ok_or("master down")?;
        let store = shard.store.borrow();
        let mut dead: BTreeSet<Vec<u8>> = BTreeSet::new();
        for g in [GROUP, FIFO_GROUP] {
            dead.extend(records(&store, &dlq_topic(g))?.into_iter().map(|(b, _)| b));
        }
        let o = self.oracle.borrow();
        let offsets = shard.offsets.borrow();
        let mut out = Vec::new();
        for ((topic, q, off), acked) in &self.shared.oracle.borrow().acked {
            let b = &acked.body;
            if o.acks_of.contains_key(b) || o.unknown.contains(b) || dead.contains(b) {
                continue;
            }
            // Sent before the group surely had a position there (a pop answered before the
            // send started, after a power loss last took the position): not owed to a group
            // that starts from the end.
            let started = o.send_started.get(b).copied().unwrap_or(0);
            if topic == TOPIC && o.init_max && !o.owed_from_end(*q, started) {
                continue;
            }
            let group = if topic == FIFO_TOPIC {
                FIFO_GROUP
            } else {
                GROUP
            };
            out.push(format!(
                "{:?} ({topic}/{q} offset {off}, acknowledged to its producer at {} ms) \
                 delivered {} time(s), never acked; the group's consume offset there is {:?}",
                String::from_utf8_lossy(b),
                acked.at_ns / 1_000_000,
                o.delivered.get(b).copied().unwrap_or(0),
                offsets.get(group, topic, *q)
            ));
        }
        Ok(out)
    }

    fn final_checks(&mut self) -> Result<(), String> {
        let unsettled = self.unsettled()?;
        if let Some(first) = unsettled.first() {
            return Err(format!(
                "(a) {} acknowledged send(s) lost to the POP group; the first: {first}",
                unsettled.len()
            ));
        }
        let shard = self.lone.node.shard().ok_or("master down at the end")?;
        let store = shard.store.borrow();
        let log = check::scan_log(&store)?;
        check::queues_match_log(&store, &log)?;
        check::acked_present(&store, &self.shared.oracle.borrow(), "master at the end")?;
        // Revive copies stored twice (a crash between a copy and its revived record).
        let mut seen: BTreeMap<(Vec<u8>, i32), u32> = BTreeMap::new();
        for c in records(&store, &pop_retry_topic(GROUP, TOPIC))? {
            *seen.entry(c).or_default() += 1;
        }
        let twice: BTreeSet<Vec<u8>> = seen
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|((b, _), _)| b)
            .collect();
        let dead = records(&store, &dlq_topic(GROUP))?.len()
            + records(&store, &dlq_topic(FIFO_GROUP))?.len();
        let mut o = self.oracle.borrow_mut();
        o.counts.dead_lettered = dead as u64;
        let suspects = std::mem::take(&mut o.suspects);
        for s in &suspects {
            let a = &o.acks[s.ack];
            let acked_instance = (a.id.1.clone(), a.id.2, a.id.5);
            match a.state {
                AckState::Forgotten(k) if k <= s.crashes => o.counts.excused_power_loss += 1,
                _ if s.instance != acked_instance && twice.contains(&a.body) => {
                    o.counts.excused_duplicate += 1
                }
                _ => {
                    return Err(format!(
                        "(b) {:?} delivered again ({}/{} offset {}) by a pop sent at {} ms; \
                         its ack ({}/{} offset {}, checkpoint {}@{}) was answered SUCCESS at \
                         {} ms ({:?}, {} crash(es) between)",
                        String::from_utf8_lossy(&a.body),
                        s.instance.0,
                        s.instance.1,
                        s.instance.2,
                        s.pop_sent_ns / 1_000_000,
                        a.id.1,
                        a.id.2,
                        a.id.5,
                        a.id.3,
                        a.id.4,
                        a.answered_ns / 1_000_000,
                        a.state,
                        s.crashes - a.crashes
                    ))
                }
            }
        }
        Ok(())
    }
}

/// The ack records in the shard's POP state queue (shard 0: the simulator's only).
fn acks_in_log(store: &Store<NodeDisk>) -> Result<HashSet<AckId>, String> {
    let mut out = HashSet::new();
    for (body, _) in records(store, POP_STATE_TOPIC)? {
        let op = PopOp::decode(&body).map_err(|e| format!("a POP state record: {e}"))?;
        if op.kind != PopOpKind::Ack {
            continue;
        }
        for o in op.offsets {
            out.insert((
                op.group.clone(),
                op.topic.clone(),
                op.queue_id,
                op.start_offset,
                op.pop_time_ms,
                o,
            ));
        }
    }
    Ok(out)
}

/// Queues of [`TOPIC`] with a position or checkpoint record of [`GROUP`] in the log.
fn queues_positioned(store: &Store<NodeDisk>) -> Result<BTreeSet<u32>, String> {
    let mut out = BTreeSet::new();
    for (body, _) in records(store, POP_STATE_TOPIC)? {
        let op = PopOp::decode(&body).map_err(|e| format!("a POP state record: {e}"))?;
        let positions = matches!(op.kind, PopOpKind::Position | PopOpKind::Checkpoint);
        if positions && op.group == GROUP && op.topic == TOPIC {
            out.insert(op.queue_id);
        }
    }
    Ok(out)
}

/// Body and reconsume count of every record of queue 0 of `topic`, oldest first.
fn records(store: &Store<NodeDisk>, topic: &str) -> Result<Vec<(Vec<u8>, i32)>, String> {
    let Some((min, max)) = store.queue_range(topic, 0) else {
        return Ok(Vec::new());
    };
    let mut at = min;
    let mut out = Vec::new();
    while at < max {
        let r = store
            .get(
                topic,
                0,
                at,
                1024,
                crate::limits::PULL_BYTES_MAX as u64,
                |_| true,
            )
            .map_err(|e| format!("reading {topic}: {e}"))?;
        if r.status != PullStatus::Found {
            break;
        }
        let mut bytes = vec![0u8; r.bytes as usize];
        let mut pos = 0;
        for run in &r.runs {
            let len = run.len as usize;
            store
                .read(run.physical_offset, &mut bytes[pos..pos + len])
                .map_err(|e| format!("reading {topic}: {e}"))?;
            pos += len;
        }
        for rec in record::iter(&bytes) {
            let rec = rec.map_err(|e| format!("a record of {topic}: {e}"))?;
            out.push((rec.body.to_vec(), rec.reconsume_times));
        }
        at = r.next_offset;
    }
    Ok(out)
}
