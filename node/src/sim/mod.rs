//! The deterministic simulator: a whole deployment (a name server, a master broker, by the
//! seed a slave, and clients) in one thread on virtual time, through the real name server and
//! broker code (connection handling, request handlers, registration and broker expiry, group
//! commit, flusher, timers, replication, recovery), with faults injected between and inside
//! steps, and invariants checked after every slice, after every crash and at the end of each
//! run. See `docs/simulation.md` for the fault model and the invariants.
//!
//! A run is a pure function of its seed (and the planted bug, if any): the same seed gives
//! the same event trace and the same digest. A failing seed is replayed with
//! `scripts/sim.sh --seed S --runs 1`.

pub mod catch_up_cut;
pub mod check;
pub mod client;
pub mod cluster;
pub mod confirm;
pub mod failover;
pub mod long_delay;
pub mod namesrv;
pub mod pop;
pub mod pop_client;
pub mod pop_crash;
pub mod recall_crash;
pub mod retry;
pub mod txn;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use crate::config::{BrokerRole, FlushDiskType};
use crate::io::sim::{NetConfig, NodeId, World};
use crate::planted::{self, Bug};
use crate::store::fault_disk::Crash;

use client::{Checks, Oracle, Shared};
use cluster::{BrokerNode, Mode, CLIENTS, MASTER, MASTER_ADDR, NAMESRV, SLAVE, SLAVE_ADDR};
use namesrv::NsWatch;

/// Virtual time between two fault decisions.
pub const SLICE_MS: u64 = 100;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    pub bug: Option<Bug>,
    /// Virtual seconds of faults and load per run (then a quiet period and the final checks).
    pub virtual_secs: u64,
    /// Where the brokers' configuration files go (a fresh directory per run is made in it).
    pub scratch_dir: PathBuf,
}

/// How one run ended.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub mode: String,
    /// Tasks polled (simulated events).
    pub events: u64,
    pub digest: u64,
    pub virtual_ms: u64,
    /// The first invariant broken, with the virtual time it was found at.
    pub failure: Option<String>,
    pub crashes: u32,
    pub sends_ok: u64,
    pub pulled_records: u64,
    pub long_polls_woken: u64,
    /// Fuzzed requests (every request code, sampled / mutated / random headers) answered.
    pub fuzz_answered: u64,
    /// Scheduled messages delivered (checked at the end) and acknowledged.
    pub scheduled_delivered: usize,
    pub scheduled_acked: usize,
    /// Name-server side: route answers the clients got, brokers seen dropped by the expiry
    /// scan, name server restarts, pulls a slave served, sends to a slave (all refused).
    pub route_fetches: u64,
    pub brokers_expired: u64,
    pub namesrv_restarts: u32,
    pub slave_pulls: u64,
    pub misrouted_sends: u64,
    /// Failover scenario: master epochs in which sends were acknowledged.
    pub epochs_acked: u32,
    /// POP scenario: what its clients did and saw.
    pub pop: Option<pop_client::PopCounts>,
    /// Recall scenario: what its clients did and saw.
    pub recall: Option<recall_crash::RecallCounts>,
    pub faults: Vec<String>,
}

/// Runs one seed.
pub fn run_one(opts: &Options) -> Report {
    let world = World::new(opts.seed, NetConfig::default());
    let entered = world.enter();
    planted::plant(opts.bug);
    let dir = opts
        .scratch_dir
        .join(format!("ringmq-sim-{}-{}", std::process::id(), opts.seed));
    let _ = std::fs::remove_dir_all(&dir);
    let mut sim = Sim::new(&world, opts, &dir);
    let failure = sim.run(opts).err();
    let checks = sim.checks.borrow();
    let report = Report {
        seed: opts.seed,
        mode: sim.mode.to_string(),
        events: world.polls(),
        digest: world.trace_digest(),
        virtual_ms: world.now_ns() / 1_000_000,
        failure: failure.map(|f| format!("at {} ms: {f}", world.now_ns() / 1_000_000)),
        crashes: sim.crashes,
        sends_ok: checks.sends_ok,
        pulled_records: checks.pulled_records,
        long_polls_woken: checks.long_polls_woken,
        fuzz_answered: checks.fuzz_answered,
        scheduled_delivered: sim.delivered,
        scheduled_acked: sim.oracle.borrow().scheduled.len(),
        route_fetches: checks.route_fetches,
        brokers_expired: sim.ns.expired,
        namesrv_restarts: sim.ns.restarts,
        slave_pulls: checks.slave_pulls,
        misrouted_sends: checks.misrouted_sends,
        epochs_acked: 0,
        pop: None,
        recall: None,
        faults: sim.faults.clone(),
    };
    drop(checks);
    sim.shutdown(&world);
    drop(sim);
    planted::plant(None);
    drop(entered);
    let _ = std::fs::remove_dir_all(&dir);
    report
}

/// The mode a seed deploys; a planted bug forces the mode that can show it.
pub fn mode_for(seed: u64, bug: Option<Bug>) -> Mode {
    let mut rng = crate::io::sim::Rng::new(seed ^ 0x5EED);
    let mut mode = Mode {
        flush: if rng.chance(0.5) {
            FlushDiskType::SyncFlush
        } else {
            FlushDiskType::AsyncFlush
        },
        role: if rng.chance(0.5) {
            BrokerRole::SyncMaster
        } else {
            BrokerRole::AsyncMaster
        },
        slave: true,
    };
    mode.slave = mode.role == BrokerRole::SyncMaster || rng.chance(0.5);
    match bug {
        Some(Bug::AckBeforeFsync) => {
            mode.flush = FlushDiskType::SyncFlush;
            mode.role = BrokerRole::AsyncMaster;
            mode.slave = false;
        }
        Some(Bug::AckBeforeSlave) => {
            mode.role = BrokerRole::SyncMaster;
            mode.slave = true;
        }
        Some(
            Bug::SkipCqWrite
            | Bug::DeliverEarly
            | Bug::ProgressAhead
            | Bug::NamesrvNoExpiry
            | Bug::NoFencing
            | Bug::TruncateTooLittle
            | Bug::ElectOutOfSync
            | Bug::JoinUnfenced
            | Bug::PopOffsetBeforeCheckpoint
            | Bug::PopReviveSkips
            | Bug::PopAckBeforeDurable
            | Bug::PopRewindForgetsAcks
            | Bug::RecallAckBeforeDurable
            | Bug::CatchUpKeepsCutChunks,
        )
        | None => {}
    }
    mode
}

struct Sim {
    world: World,
    mode: Mode,
    ns: NsWatch,
    master: Rc<RefCell<BrokerNode>>,
    slave: Option<Rc<RefCell<BrokerNode>>>,
    /// A broker kept down after a kill -9 until this virtual ms.
    down_until: BTreeMap<NodeId, u64>,
    oracle: Rc<RefCell<Oracle>>,
    checks: Rc<RefCell<Checks>>,
    crashes: u32,
    faults: Vec<String>,
    disk_full: bool,
    /// Connections are being reset at random.
    resets_on: bool,
    /// The kind of the crash of a master kept down, for the checks at its restart.
    pending_crash: Option<Crash>,
    /// Scheduled messages found delivered at the end.
    delivered: usize,
}

impl Sim {
    fn new(world: &World, opts: &Options, dir: &std::path::Path) -> Self {
        let mode = mode_for(opts.seed, opts.bug);
        let ns = NsWatch::new();
        let master = BrokerNode::registered(
            MASTER,
            SocketAddr::from(MASTER_ADDR),
            &dir.join("master"),
            mode,
            false,
            ns.addr(),
        )
        .expect("the simulator's own broker config is valid");
        let slave = mode.slave.then(|| {
            let s = BrokerNode::registered(
                SLAVE,
                SocketAddr::from(SLAVE_ADDR),
                &dir.join("slave"),
                mode,
                true,
                ns.addr(),
            )
            .expect("the simulator's own broker config is valid");
            Rc::new(RefCell::new(s))
        });
        Sim {
            world: world.clone(),
            mode,
            ns,
            master: Rc::new(RefCell::new(master)),
            slave,
            down_until: BTreeMap::new(),
            oracle: Rc::default(),
            checks: Rc::default(),
            crashes: 0,
            faults: Vec::new(),
            disk_full: false,
            resets_on: false,
            pending_crash: None,
            delivered: 0,
        }
    }

    fn now_ms(&self) -> u64 {
        self.world.now_ns() / 1_000_000
    }

    fn run(&mut self, opts: &Options) -> Result<(), String> {
        self.ns.start(&self.world, 0)?;
        self.master.borrow_mut().start(&self.world)?;
        if let Some(s) = &self.slave {
            s.borrow_mut().start(&self.world)?;
        }
        self.start_clients();
        let slices = opts.virtual_secs * 1000 / SLICE_MS;
        for _ in 0..slices {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            self.after_slice()?;
            self.nemesis()?;
        }
        self.quiesce()?;
        self.world.run_for(Duration::from_secs(3));
        self.after_slice()?;
        self.final_checks()
    }

    fn start_clients(&self) {
        let master = Rc::clone(&self.master);
        let slave = self.slave.clone();
        let shared = Shared {
            world: self.world.clone(),
            oracle: Rc::clone(&self.oracle),
            checks: Rc::clone(&self.checks),
            log_end: Rc::new(move |addr| {
                let node = if addr == SocketAddr::from(MASTER_ADDR) {
                    &master
                } else {
                    slave.as_ref()?
                };
                let b = node.try_borrow().ok()?;
                let shard = b.shard()?;
                let end = shard.store.try_borrow().ok()?.write_offset();
                Some(end)
            }),
        };
        let ns = self.ns.addr();
        for id in 0..3 {
            self.world
                .spawn_on(CLIENTS, client::producer(shared.clone(), id, ns));
        }
        for id in 0..2 {
            self.world
                .spawn_on(CLIENTS, client::consumer(shared.clone(), id, ns));
        }
        self.world.spawn_on(
            CLIENTS,
            client::fuzzer(shared.clone(), SocketAddr::from(MASTER_ADDR), ns),
        );
        self.world.spawn_on(CLIENTS, client::admin(shared, ns));
    }

    /// Panics are bugs; a fail-stop kills its node, which is restarted from its disk; nodes
    /// kept down come back when their time is up; client checks that failed end the run;
    /// then the name server's table is checked.
    fn after_slice(&mut self) -> Result<(), String> {
        if let Some((node, msg)) = self.world.take_panics().into_iter().next() {
            return Err(format!("panic on node {node}: {msg}"));
        }
        for (node, why) in self.world.take_fail_stops() {
            self.faults.push(format!("fail-stop of node {node}: {why}"));
        }
        if let Some(f) = self.checks.borrow().failures.first() {
            return Err(f.clone());
        }
        let now = self.now_ms();
        let master_dead = self.master.borrow().running.is_some() && self.world.is_dead(MASTER);
        if master_dead {
            let kind = self.draw_crash_kind();
            self.crash_master(kind, 0)?;
        } else if self.down_until.get(&MASTER).is_some_and(|&t| now >= t) {
            self.restart_master()?;
        }
        if let Some(s) = self.slave.clone() {
            let dead = s.borrow().running.is_some() && self.world.is_dead(SLAVE);
            let due = self.down_until.get(&SLAVE).is_some_and(|&t| now >= t);
            if dead || due {
                self.restart_slave(&s, dead)?;
            }
        }
        self.ns.restart_due(&self.world, now, false)?;
        let master = self.master.borrow();
        let slave = self.slave.as_ref().map(|s| s.borrow());
        self.ns.check(
            &self.world,
            now,
            self.mode,
            &master,
            slave.as_deref(),
            self.resets_on,
        )
    }

    fn restart_slave(&mut self, s: &Rc<RefCell<BrokerNode>>, crashed: bool) -> Result<(), String> {
        let now = self.now_ms();
        if crashed {
            s.borrow_mut().crash(&self.world, Crash::KeepWritten);
        }
        self.down_until.remove(&SLAVE);
        s.borrow_mut().start(&self.world)?;
        self.ns.reconnect(&self.world, SLAVE, true, now);
        Ok(())
    }

    /// Power-loss crashes of a master are drawn only where they cannot make a slave hold
    /// bytes the master lost (no slave): RocketMQ's master/slave has no log truncation, so
    /// that divergence is outside the model (docs/simulation.md).
    fn draw_crash_kind(&self) -> Crash {
        if self.slave.is_some() {
            return Crash::KeepWritten;
        }
        match self.world.with_rng(|r| r.below(3)) {
            0 => Crash::KeepWritten,
            1 => Crash::DropUnsynced,
            _ => Crash::TearLast,
        }
    }

    /// Crashes the master and restarts it at once (`down_ms` 0) or `down_ms` later.
    fn crash_master(&mut self, kind: Crash, down_ms: u64) -> Result<(), String> {
        let now = self.now_ms();
        self.crashes += 1;
        self.faults.push(format!(
            "master crash ({kind:?}) at {now} ms{}",
            if down_ms > 0 {
                format!(", down for {down_ms} ms")
            } else {
                String::new()
            }
        ));
        if self.mode.role == BrokerRole::SyncMaster && self.master.borrow().running.is_some() {
            if let Some(s) = &self.slave {
                let s = s.borrow();
                if let Some(shard) = s.shard() {
                    let store = shard.store.borrow();
                    check::acked_present(&store, &self.oracle.borrow(), "SYNC_MASTER slave")?;
                }
            }
        }
        self.master.borrow_mut().crash(&self.world, kind);
        if down_ms > 0 {
            // Its disk is checked at the restart, under the promise of this crash.
            self.down_until.insert(MASTER, now + down_ms);
            self.pending_crash = Some(kind);
            self.ns.cut(MASTER, now);
            return Ok(());
        }
        self.restart_master_checked(kind)
    }

    fn restart_master(&mut self) -> Result<(), String> {
        let kind = self.pending_crash.take().unwrap_or(Crash::KeepWritten);
        self.restart_master_checked(kind)
    }

    fn restart_master_checked(&mut self, kind: Crash) -> Result<(), String> {
        let now = self.now_ms();
        self.down_until.remove(&MASTER);
        self.pending_crash = None;
        self.master
            .borrow_mut()
            .start(&self.world)
            .map_err(|e| format!("master restart after a crash: {e}"))?;
        self.ns.reconnect(&self.world, MASTER, true, now);
        let master = self.master.borrow();
        let shard = master.shard().ok_or("master not running after restart")?;
        let store = shard.store.borrow();
        let log = check::scan_log(&store)?;
        check::queues_match_log(&store, &log)?;
        check::schedule_kept(&store, &log, &self.oracle.borrow(), i64::MIN)?;
        let promised = kind == Crash::KeepWritten || self.mode.flush == FlushDiskType::SyncFlush;
        if promised {
            check::acked_present(&store, &self.oracle.borrow(), "master after crash")
        } else {
            check::forget_lost(&store, &mut self.oracle.borrow_mut());
            Ok(())
        }
    }

    /// Draws this slice's fault, if any.
    fn nemesis(&mut self) -> Result<(), String> {
        let roll = self.world.with_rng(|r| r.below(1000));
        let now_ms = self.now_ms();
        match roll {
            // (A master kept down comes back when its time is up, checked under its crash.)
            0..=5 if !self.down_until.contains_key(&MASTER) => {
                let kind = self.draw_crash_kind();
                return self.crash_master(kind, 0);
            }
            6..=9 => {
                if let Some(s) = self.slave.clone() {
                    self.faults.push(format!("slave kill -9 at {now_ms} ms"));
                    self.restart_slave(&s, true)?;
                }
            }
            // A disk failing while its broker is down would fail the restart instead.
            10..=13 if !self.down_until.contains_key(&MASTER) => {
                let master = self.master.borrow();
                let n = master.disk.ops() + self.world.with_rng(|r| 1 + r.below(300));
                master.disk.crash_at(n);
                drop(master);
                self.faults
                    .push(format!("master disk dies at I/O {n} (from {now_ms} ms)"));
            }
            14..=25 => {
                let slow = self.world.with_rng(|r| r.chance(0.5));
                let us = if slow {
                    self.world.with_rng(|r| 5_000 + r.below(200_000))
                } else {
                    100
                };
                self.master.borrow().sync_us.set(us);
                self.faults
                    .push(format!("master fdatasync takes {us} us (at {now_ms} ms)"));
            }
            26..=29 => {
                let master = self.master.borrow();
                if self.disk_full {
                    master.disk.set_capacity(None);
                } else {
                    let room = self.world.with_rng(|r| r.below(64 << 10));
                    master
                        .disk
                        .set_capacity(Some(master.disk.used_bytes() + room));
                }
                self.disk_full = !self.disk_full;
                self.faults.push(format!(
                    "master disk full: {} at {now_ms} ms",
                    self.disk_full
                ));
            }
            30..=39 => {
                let p = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        0.0
                    } else {
                        0.001 + r.below(30) as f64 / 1000.0
                    }
                });
                self.world.set_reset_chance(p);
                self.resets_on = p > 0.0;
                self.ns.disturb_all(now_ms);
                self.faults.push(format!(
                    "connection reset chance {p} per write at {now_ms} ms"
                ));
            }
            40..=44 => {
                let (a, b) = if self.slave.is_some() && self.world.with_rng(|r| r.chance(0.6)) {
                    (MASTER, SLAVE)
                } else {
                    (CLIENTS, MASTER)
                };
                self.world.partition(a, b);
                self.faults
                    .push(format!("partition {a} | {b} at {now_ms} ms"));
            }
            45..=69 => self.heal(),
            70..=72 => {
                let delta = self
                    .world
                    .with_rng(|r| r.below(7_200_000) as i64 - 3_600_000);
                self.world.jump_clock(MASTER, delta);
                self.faults
                    .push(format!("master clock jumps {delta} ms at {now_ms} ms"));
            }
            73..=77 => {
                let pick = self.world.with_rng(|r| r.below(10));
                let other = match pick {
                    0..=3 => MASTER,
                    4..=6 if self.slave.is_some() => SLAVE,
                    4..=6 => MASTER,
                    _ => CLIENTS,
                };
                self.world.partition(NAMESRV, other);
                if other != CLIENTS {
                    self.ns.cut(other, now_ms);
                }
                self.faults
                    .push(format!("partition {NAMESRV} | {other} at {now_ms} ms"));
            }
            78..=79 => {
                let down = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        0
                    } else {
                        200 + r.below(3_000)
                    }
                });
                self.faults.push(format!(
                    "name server kill -9 at {now_ms} ms, down for {down} ms"
                ));
                self.ns.kill(&self.world, now_ms, now_ms + down)?;
            }
            80..=81 => {
                let delta = self
                    .world
                    .with_rng(|r| r.below(7_200_000) as i64 - 3_600_000);
                self.world.jump_clock(NAMESRV, delta);
                self.faults
                    .push(format!("name server clock jumps {delta} ms at {now_ms} ms"));
            }
            82..=83 => {
                if self.down_until.contains_key(&MASTER) {
                    return Ok(());
                }
                let down = self.world.with_rng(|r| 500 + r.below(5_000));
                let kind = self.draw_crash_kind();
                return self.crash_master(kind, down);
            }
            84..=85 => {
                if let Some(s) = &self.slave {
                    if self.down_until.contains_key(&SLAVE) {
                        return Ok(());
                    }
                    let down = self.world.with_rng(|r| 500 + r.below(5_000));
                    self.faults
                        .push(format!("slave kill -9 at {now_ms} ms, down for {down} ms"));
                    s.borrow_mut().crash(&self.world, Crash::KeepWritten);
                    self.down_until.insert(SLAVE, now_ms + down);
                    self.ns.cut(SLAVE, now_ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Ends every partition.
    fn heal(&mut self) {
        let now = self.now_ms();
        self.world.heal();
        let master_up = self.master.borrow().is_up(&self.world);
        let slave_up = self
            .slave
            .as_ref()
            .is_some_and(|s| s.borrow().is_up(&self.world));
        self.ns.reconnect(&self.world, MASTER, master_up, now);
        self.ns.reconnect(&self.world, SLAVE, slave_up, now);
    }

    /// Lifts every fault: the end of a run checks a quiet deployment.
    fn quiesce(&mut self) -> Result<(), String> {
        let now = self.now_ms();
        self.world.set_reset_chance(0.0);
        self.resets_on = false;
        self.ns.restart_due(&self.world, now, true)?;
        if self.down_until.contains_key(&MASTER) {
            self.restart_master()?;
        }
        if let Some(s) = self.slave.clone() {
            if self.down_until.contains_key(&SLAVE) {
                self.restart_slave(&s, false)?;
            }
        }
        self.heal();
        self.ns.disturb_all(now);
        let master = self.master.borrow();
        master.sync_us.set(100);
        master.disk.set_capacity(None);
        master.disk.crash_at(u64::MAX);
        self.disk_full = false;
        Ok(())
    }

    fn final_checks(&mut self) -> Result<(), String> {
        {
            let master = self.master.borrow();
            let shard = master.shard().ok_or("master down at the end")?;
            let store = shard.store.borrow();
            let log = check::scan_log(&store)?;
            check::queues_match_log(&store, &log)?;
            check::acked_present(&store, &self.oracle.borrow(), "master at the end")?;
            // Everything due two seconds before the end (of the quiet period) is delivered.
            let now = self.world.as_node(MASTER, crate::io::clock::now_ms);
            self.delivered =
                check::schedule_kept(&store, &log, &self.oracle.borrow(), now - 2_000)?.len();
        }
        if let Some(s) = &self.slave {
            let s = s.borrow();
            let shard = s.shard().ok_or("slave down at the end")?;
            // 11: the slave replicates from the HA address the name server gave it.
            let ha = SocketAddr::new(std::net::IpAddr::from(MASTER_ADDR.0), MASTER_ADDR.1 + 1);
            let learned = shard.broker.master_ha_addr();
            if learned != Some(ha) {
                return Err(format!(
                    "the slave's master HA address is {learned:?} at the end, the master's is {ha}"
                ));
            }
            let store = shard.store.borrow();
            let log = check::scan_log(&store)?;
            check::queues_match_log(&store, &log)?;
        }
        // Last, a power cut under load where the promise covers it: SYNC_FLUSH acked = durable.
        if self.slave.is_none() {
            self.master.borrow().sync_us.set(20_000);
            self.world.run_for(Duration::from_millis(
                300 + self.world.with_rng(|r| r.below(700)),
            ));
            self.after_slice()?;
            self.crash_master(Crash::DropUnsynced, 0)?;
        }
        Ok(())
    }

    fn shutdown(&mut self, world: &World) {
        world.kill_node(CLIENTS);
        world.kill_node(SLAVE);
        world.kill_node(MASTER);
        world.kill_node(NAMESRV);
        if let Some(s) = &self.slave {
            s.borrow_mut().running = None;
        }
        self.master.borrow_mut().running = None;
        self.ns.node.running = None;
    }
}
