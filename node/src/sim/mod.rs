//! The deterministic simulator: a whole deployment (a master broker, by the seed a slave,
//! and clients) in one thread on virtual time, through the real broker code (connection
//! handling, request handlers, group commit, flusher, timers, replication, recovery), with
//! faults injected between and inside steps, and invariants checked after every crash and at
//! the end of each run. See `docs/simulation.md` for the fault model and the invariants.
//!
//! A run is a pure function of its seed (and the planted bug, if any): the same seed gives
//! the same event trace and the same digest. A failing seed is replayed with
//! `scripts/sim.sh --seed S --runs 1`.

pub mod check;
pub mod client;
pub mod cluster;
pub mod long_delay;
pub mod retry;
pub mod txn;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use crate::config::{BrokerRole, FlushDiskType};
use crate::io::sim::{NetConfig, World};
use crate::planted::{self, Bug};
use crate::store::fault_disk::Crash;

use client::{Checks, Oracle, Shared};
use cluster::{BrokerNode, Mode, CLIENTS, MASTER, MASTER_ADDR, SLAVE, SLAVE_ADDR};

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
#[derive(Debug, Clone)]
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
        Some(Bug::SkipCqWrite | Bug::DeliverEarly | Bug::ProgressAhead) | None => {}
    }
    mode
}

struct Sim {
    world: World,
    mode: Mode,
    master: Rc<RefCell<BrokerNode>>,
    slave: Option<BrokerNode>,
    oracle: Rc<RefCell<Oracle>>,
    checks: Rc<RefCell<Checks>>,
    crashes: u32,
    faults: Vec<String>,
    disk_full: bool,
    /// Scheduled messages found delivered at the end.
    delivered: usize,
}

impl Sim {
    fn new(world: &World, opts: &Options, dir: &std::path::Path) -> Self {
        let mode = mode_for(opts.seed, opts.bug);
        let master_addr = SocketAddr::from(MASTER_ADDR);
        let master = BrokerNode::new(MASTER, master_addr, &dir.join("master"), mode, None)
            .expect("the simulator's own broker config is valid");
        let slave = mode.slave.then(|| {
            let ha = SocketAddr::new(master_addr.ip(), master_addr.port() + 1);
            BrokerNode::new(
                SLAVE,
                SocketAddr::from(SLAVE_ADDR),
                &dir.join("slave"),
                mode,
                Some(ha),
            )
            .expect("the simulator's own broker config is valid")
        });
        Sim {
            world: world.clone(),
            mode,
            master: Rc::new(RefCell::new(master)),
            slave,
            oracle: Rc::default(),
            checks: Rc::default(),
            crashes: 0,
            faults: Vec::new(),
            disk_full: false,
            delivered: 0,
        }
    }

    fn run(&mut self, opts: &Options) -> Result<(), String> {
        self.master.borrow_mut().start(&self.world)?;
        if let Some(s) = &mut self.slave {
            s.start(&self.world)?;
        }
        self.start_clients();
        let slices = opts.virtual_secs * 1000 / SLICE_MS;
        for _ in 0..slices {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            self.after_slice()?;
            self.nemesis()?;
        }
        self.quiesce();
        self.world.run_for(Duration::from_secs(3));
        self.after_slice()?;
        self.final_checks()
    }

    fn start_clients(&self) {
        let master = Rc::clone(&self.master);
        let shared = Shared {
            world: self.world.clone(),
            oracle: Rc::clone(&self.oracle),
            checks: Rc::clone(&self.checks),
            log_end: Rc::new(move || {
                let m = master.try_borrow().ok()?;
                let shard = m.shard()?;
                let end = shard.store.try_borrow().ok()?.write_offset();
                Some(end)
            }),
        };
        let addr = SocketAddr::from(MASTER_ADDR);
        for id in 0..3 {
            self.world
                .spawn_on(CLIENTS, client::producer(shared.clone(), id, addr));
        }
        for id in 0..2 {
            self.world
                .spawn_on(CLIENTS, client::consumer(shared.clone(), id, addr));
        }
        self.world
            .spawn_on(CLIENTS, client::fuzzer(shared.clone(), addr));
        self.world.spawn_on(CLIENTS, client::admin(shared, addr));
    }

    /// Panics are bugs; a fail-stop kills its node, which is restarted from its disk; client
    /// checks that failed end the run.
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
        let master_dead = self.master.borrow().running.is_some() && self.world.is_dead(MASTER);
        if master_dead {
            let kind = self.draw_crash_kind();
            self.crash_master(kind)?;
        }
        if let Some(s) = &mut self.slave {
            if s.running.is_some() && self.world.is_dead(SLAVE) {
                s.crash(&self.world, Crash::KeepWritten);
                s.start(&self.world)?;
            }
        }
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

    fn crash_master(&mut self, kind: Crash) -> Result<(), String> {
        self.crashes += 1;
        self.faults.push(format!(
            "master crash ({kind:?}) at {} ms",
            self.world.now_ns() / 1_000_000
        ));
        if self.mode.role == BrokerRole::SyncMaster {
            if let Some(shard) = self.slave.as_ref().and_then(|s| s.shard()) {
                let store = shard.store.borrow();
                check::acked_present(&store, &self.oracle.borrow(), "SYNC_MASTER slave")?;
            }
        }
        self.master.borrow_mut().crash(&self.world, kind);
        self.master
            .borrow_mut()
            .start(&self.world)
            .map_err(|e| format!("master restart after a crash: {e}"))?;
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
        let now_ms = self.world.now_ns() / 1_000_000;
        match roll {
            0..=5 => {
                let kind = self.draw_crash_kind();
                return self.crash_master(kind);
            }
            6..=9 => {
                if let Some(s) = &mut self.slave {
                    self.faults.push(format!("slave kill -9 at {now_ms} ms"));
                    s.crash(&self.world, Crash::KeepWritten);
                    s.start(&self.world)?;
                }
            }
            10..=13 => {
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
            45..=69 => self.world.heal(),
            70..=72 => {
                let delta = self
                    .world
                    .with_rng(|r| r.below(7_200_000) as i64 - 3_600_000);
                self.world.jump_clock(MASTER, delta);
                self.faults
                    .push(format!("master clock jumps {delta} ms at {now_ms} ms"));
            }
            _ => {}
        }
        Ok(())
    }

    /// Lifts every fault: the end of a run checks a quiet deployment.
    fn quiesce(&mut self) {
        self.world.heal();
        self.world.set_reset_chance(0.0);
        let master = self.master.borrow();
        master.sync_us.set(100);
        master.disk.set_capacity(None);
        master.disk.crash_at(u64::MAX);
        self.disk_full = false;
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
        if let Some(shard) = self.slave.as_ref().and_then(|s| s.shard()) {
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
            self.crash_master(Crash::DropUnsynced)?;
        }
        Ok(())
    }

    fn shutdown(&mut self, world: &World) {
        world.kill_node(CLIENTS);
        world.kill_node(SLAVE);
        world.kill_node(MASTER);
        if let Some(s) = &mut self.slave {
            s.running = None;
        }
        self.master.borrow_mut().running = None;
    }
}
