//! Automatic failover on virtual time: three controllers (name servers with the embedded
//! controller, `enableControllerInNamesrv`, their Raft logs on fault disks) and one broker
//! set of three brokers in controller mode (SYNC_MASTER, `allAckInSyncStateSet=true`), all
//! through the real code ([`crate::net::namesrv::start_sim`], [`BrokerNode::controlled`]),
//! with producers and a consumer on the clients' node, and faults: `kill -9` of brokers
//! and controllers (controllers also lose power: unsynced Raft log bytes dropped or torn),
//! partitions (a master cut off from the controllers only, broker | broker, clients |
//! broker, controller | controller), clock jumps, slow and full disks, a broker disk that
//! dies at an I/O, connection resets.
//!
//! Invariants (see `docs/simulation.md`, "Failover"):
//! - **One master per epoch acknowledges**: each acknowledged send is recorded with the
//!   epoch its broker serves when the answer arrives; two brokers acknowledging in the same
//!   epoch fail the run, and so does an acknowledgement in an older epoch arriving more than
//!   [`STALE_ACK_SLACK_MS`] after a controller applied the election of a newer one (a
//!   deposed master still acknowledging: fencing).
//! - **No acknowledged send is lost**: after the faults are lifted and the set has settled,
//!   every acknowledged record is in the final master's log at its queue offset.
//! - **No delivered record is truncated**: a record the consumer received is in the final
//!   master's log at the same queue offset with the same body, and no queue offset is ever
//!   delivered with two different bodies.
//! - **Replicas converge**: every replica's log is byte for byte the final master's from
//!   its first byte to the master's end; every store's queues match its log.
//! - **Consumers go on from committed offsets**: the consumer restarts now and then and
//!   resumes from the offset the current master has for it, which is never above what it
//!   committed; by the end it has received every acknowledged record.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{
    FilterType, PullRequest, PullResponse, QueryConsumerOffsetRequest, QueryConsumerOffsetResponse,
    Response, UpdateConsumerOffsetRequest,
};
use ringmq_wire::record;

use crate::config::{FlushDiskType, NamesrvConfig};
use crate::controller::ControllerConfig;
use crate::io::node_disk::SimDisk;
use crate::io::rt;
use crate::io::sim::{NetConfig, NodeId, World};
use crate::net::namesrv::{start_sim as start_namesrv, SimNamesrv};
use crate::planted;
use crate::store::fault_disk::{Crash, FaultDisk};

use super::check::{self, Key};
use super::client::{self, Checks, Conns, Known, Oracle, Routes, Shared, CALL_TIMEOUT_MS};
use super::cluster::{BrokerNode, BROKER_EXPIRY_MS, CLIENTS, NAMESRV_SCAN_MS};
use super::{Options, Report, SLICE_MS};

/// The controllers' nodes (each a name server with its controller).
pub const CONTROLLERS: [NodeId; 3] = [21, 22, 23];
/// The brokers' nodes (broker ids 1, 2, 3 of the set).
pub const BROKERS: [NodeId; 3] = [31, 32, 33];
/// An acknowledgement in an older epoch may arrive this long after a controller applied the
/// election of a newer epoch (answers in flight; a deposed master's lease runs out before
/// the controllers replace it).
pub const STALE_ACK_SLACK_MS: u64 = 50;
/// After the faults are lifted: load goes on this long, then the producers stop.
const QUIET_LOAD_MS: u64 = 4_000;
/// Longest the set may take to settle (one master, every replica at its end, the consumer
/// drained) once the producers stopped.
const SETTLE_MAX_MS: u64 = 20_000;
const GROUP: &str = "sim-failover-group";
/// The broker set's name (`BrokerNode`'s `brokerName`).
const SET: &str = "broker-a";

/// Name server / controller `i`'s address.
pub fn ns_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 3, 1 + i as u8], 9876))
}

/// Broker `i`'s address (broker id `i + 1`; HA on the next port).
pub fn broker_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, 1 + i as u8], 10911))
}

/// The failover deployment's broker settings beyond [`BrokerNode::controlled`]: RocketMQ's
/// timings scaled down as the rest of the simulator's.
const BROKER_EXTRA: &str = "allAckInSyncStateSet=true\nhaSendHeartbeatInterval=200\n\
     haHousekeepingInterval=2000\nhaMaxTimeSlaveNotCatchup=3000\n";

/// One controller node: its fault disk (which outlives crashes) and, while up, the name
/// server with its controller.
struct Ctl {
    index: usize,
    disk: FaultDisk,
    sync_us: Rc<Cell<u64>>,
    running: Rc<RefCell<Option<SimNamesrv>>>,
}

impl Ctl {
    fn node(&self) -> NodeId {
        CONTROLLERS[self.index]
    }

    fn config(&self) -> NamesrvConfig {
        NamesrvConfig {
            scan_not_active_broker_interval_ms: NAMESRV_SCAN_MS,
            broker_channel_expired_time_ms: BROKER_EXPIRY_MS,
            controller: ControllerConfig {
                enable: true,
                peers: (0..3).map(|i| (i as u64, ns_addr(i))).collect(),
                self_id: Some(self.index as u64),
                store_path: Some(PathBuf::from("/controller")),
                elect_unclean: false,
            },
            ..NamesrvConfig::default()
        }
    }

    fn start(&mut self, world: &World) -> Result<(), String> {
        world.revive(self.node());
        let disk = SimDisk {
            disk: self.disk.clone(),
            sync_us: Rc::clone(&self.sync_us),
        };
        let (cfg, addr) = (self.config(), ns_addr(self.index));
        let ns = world.as_node(self.node(), || start_namesrv(cfg, addr, Some(disk)))?;
        *self.running.borrow_mut() = Some(ns);
        Ok(())
    }

    fn crash(&mut self, world: &World, kind: Crash) {
        world.kill_node(self.node());
        let image = self.disk.image(kind);
        self.disk = FaultDisk::from_image(&image);
        self.running.borrow_mut().take();
    }

    fn is_running(&self) -> bool {
        self.running.borrow().is_some()
    }
}

/// Acknowledgements by epoch, as the clients saw them.
#[derive(Debug, Default)]
struct Acks {
    /// Epoch -> the broker that acknowledged in it.
    by_epoch: BTreeMap<u32, SocketAddr>,
    /// The newest epoch acknowledged so far, and when its first acknowledgement arrived.
    newest: Option<(u32, u64)>,
    /// Epoch -> when a controller was first seen to have applied its election (looked at
    /// on every acknowledgement and after every slice; the election was committed no
    /// later).
    elected_since: BTreeMap<u32, u64>,
    /// Acknowledgements whose broker served no epoch by the time the answer arrived.
    unknown_epoch: u64,
}

type Brokers = Rc<Vec<Rc<RefCell<BrokerNode>>>>;

/// What the clients share besides [`Shared`].
#[derive(Clone)]
struct Ctx {
    shared: Shared,
    brokers: Brokers,
    namesrvs: Rc<Vec<Rc<RefCell<Option<SimNamesrv>>>>>,
    acks: Rc<RefCell<Acks>>,
    /// Every record the consumer received: key -> body.
    delivered: Rc<RefCell<BTreeMap<Key, Vec<u8>>>>,
    /// Producers stop sending once set.
    stop: Rc<Cell<bool>>,
    restarts: Rc<Cell<u64>>,
}

impl Ctx {
    /// The epoch the broker at `addr` serves now (0: not master or down).
    fn epoch_of(&self, addr: SocketAddr) -> u32 {
        self.brokers
            .iter()
            .find_map(|b| {
                let b = b.try_borrow().ok()?;
                (b.addr == addr).then(|| b.shard().map_or(0, |s| s.serving_epoch.get()))
            })
            .unwrap_or(0)
    }

    /// Notes the master epochs the controllers have applied now.
    fn observe_epochs(&self) {
        let now = self.shared.world.now_ns();
        let mut a = self.acks.borrow_mut();
        for ns in self.namesrvs.iter() {
            let Some(c) = ns.borrow().as_ref().and_then(|n| n.controller()) else {
                continue;
            };
            if let Some(set) = c.applied_set(SET).filter(|s| s.master_epoch > 0) {
                a.elected_since.entry(set.master_epoch).or_insert(now);
            }
        }
    }

    fn note_ack(&self, addr: SocketAddr) {
        self.observe_epochs();
        let now = self.shared.world.now_ns();
        let epoch = self.epoch_of(addr);
        let mut a = self.acks.borrow_mut();
        if epoch == 0 {
            a.unknown_epoch += 1;
            return;
        }
        let mut failure = None;
        match a.by_epoch.get(&epoch) {
            Some(other) if *other != addr => {
                failure = Some(format!(
                    "two masters acknowledged in epoch {epoch}: {other} and {addr}"
                ));
            }
            Some(_) => {}
            None => {
                a.by_epoch.insert(epoch, addr);
            }
        }
        let newer = a.elected_since.range(epoch + 1..).min_by_key(|(_, t)| **t);
        if let Some((&newer, &since)) = newer {
            if now > since + STALE_ACK_SLACK_MS * 1_000_000 {
                failure = Some(format!(
                    "{addr} acknowledged a send in epoch {epoch} at {} ms, {} ms after the controllers elected a master for epoch {newer} (a deposed master still acknowledging)",
                    now / 1_000_000,
                    (now - since) / 1_000_000
                ));
            }
        }
        if a.newest.is_none_or(|(e, _)| epoch > e) {
            a.newest = Some((epoch, now));
        }
        drop(a);
        if let Some(f) = failure {
            self.shared.checks.borrow_mut().failures.push(f);
        }
    }
}

/// The route of `topic` from name server `*ns`, moving on to the next one when it cannot
/// answer.
async fn route(ctx: &Ctx, routes: &mut [Routes], ns: &mut usize, topic: &str) -> Option<Known> {
    let r = routes[*ns].get(&ctx.shared, topic).await;
    if r.is_none() {
        *ns = (*ns + 1) % routes.len();
    }
    r
}

/// A producer: single records and batches to the checked topics, at the master its route
/// names; every acknowledgement goes to the oracle and is recorded with its epoch.
async fn producer(ctx: Ctx, id: u32) {
    let mut routes: Vec<Routes> = (0..3).map(|i| Routes::new(ns_addr(i))).collect();
    let mut ns = id as usize % 3;
    let mut conns = Conns::default();
    let mut seq = 0u64;
    while !ctx.stop.get() {
        let (topic, queue, count, pause_ms) = ctx.shared.world.with_rng(|r| {
            (
                client::TOPICS[r.below(client::TOPICS.len() as u64) as usize],
                r.below(u64::from(client::QUEUES)) as u32,
                if r.chance(0.3) {
                    1 + r.below(8) as usize
                } else {
                    1
                },
                r.below(40),
            )
        });
        let bodies: Vec<Vec<u8>> = (0..count)
            .map(|i| format!("f{id}-{seq}-{i}").into_bytes())
            .collect();
        seq += 1;
        let target = match route(&ctx, &mut routes, &mut ns, topic).await {
            Some(Known::Route(view)) => view.write_target(queue).map(|t| t.addr),
            Some(Known::NoRoute) => routes[ns].any_master().await,
            None => None,
        };
        let Some(addr) = target else {
            routes[ns].stale(topic);
            ns = (ns + 1) % routes.len();
            rt::sleep(Duration::from_millis(50 + pause_ms)).await;
            continue;
        };
        let rpc = conns.to(addr);
        if client::send(&ctx.shared, rpc, topic, queue, &bodies, &[], false).await {
            ctx.note_ack(addr);
        } else {
            routes[ns].stale(topic);
            ns = (ns + 1) % routes.len();
            // A refused connection fails at once: let virtual time pass.
            rt::sleep(Duration::from_millis(10)).await;
        }
        rt::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// The consumer: pulls every queue of the checked topics from the master, commits its
/// offsets there now and then, and now and then restarts (forgets its cursors and resumes
/// from the offsets the master has for its group).
async fn consumer(ctx: Ctx) {
    let mut routes: Vec<Routes> = (0..3).map(|i| Routes::new(ns_addr(i))).collect();
    let mut ns = 0usize;
    let mut conns = Conns::default();
    let mut cursors: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let mut committed: BTreeMap<(String, u32), u64> = BTreeMap::new();
    loop {
        let (topic, queue, suspend_ms, commit, restart) = ctx.shared.world.with_rng(|r| {
            (
                client::TOPICS[r.below(client::TOPICS.len() as u64) as usize],
                r.below(u64::from(client::QUEUES)) as u32,
                if r.chance(0.5) { r.below(300) } else { 0 },
                r.chance(0.2),
                r.chance(0.005),
            )
        });
        if restart {
            cursors.clear();
            ctx.restarts.set(ctx.restarts.get() + 1);
        }
        let key = (topic.to_string(), queue);
        let target = match route(&ctx, &mut routes, &mut ns, topic).await {
            Some(Known::Route(view)) => view.read_target(queue).filter(|t| t.master),
            _ => None,
        };
        let Some(target) = target else {
            rt::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let rpc = conns.to(target.addr);
        let offset = match cursors.get(&key) {
            Some(o) => *o,
            None => {
                let q = QueryConsumerOffsetRequest {
                    consumer_group: GROUP.to_string(),
                    topic: topic.to_string(),
                    queue_id: queue,
                };
                let Ok(a) = rpc
                    .call(RequestCode::QueryConsumerOffset, &q, &[], CALL_TIMEOUT_MS)
                    .await
                else {
                    routes[ns].stale(topic);
                    rt::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let found = match a.status {
                    Status::Success => Response::<QueryConsumerOffsetResponse>::decode(&a.header)
                        .ok()
                        .and_then(|r| r.fields)
                        .map(|f| f.offset),
                    _ => None,
                };
                let at = found.unwrap_or(0);
                let max = committed.get(&key).copied().unwrap_or(0);
                if at > max {
                    ctx.shared.checks.borrow_mut().failures.push(format!(
                        "{topic}/{queue}: {} has the group's offset at {at}, above the highest it committed ({max})",
                        target.addr
                    ));
                }
                at
            }
        };
        match pull(&ctx, rpc, target.addr, topic, queue, offset, suspend_ms).await {
            Some(next) => {
                cursors.insert(key.clone(), next);
                if commit && next > 0 {
                    let h = UpdateConsumerOffsetRequest {
                        consumer_group: GROUP.to_string(),
                        topic: topic.to_string(),
                        queue_id: queue,
                        offset: next,
                    };
                    let e = committed.entry(key).or_insert(0);
                    *e = (*e).max(next);
                    let _ = rpc
                        .call(RequestCode::UpdateConsumerOffset, &h, &[], CALL_TIMEOUT_MS)
                        .await;
                }
            }
            None => {
                routes[ns].stale(topic);
                rt::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// One pull; the next offset, if the answer gives one. FOUND answers are checked
/// ([`client::check_pulled`]) and their records recorded as delivered.
async fn pull(
    ctx: &Ctx,
    rpc: &mut client::Rpc,
    from: SocketAddr,
    topic: &str,
    queue: u32,
    offset: u64,
    suspend_ms: u64,
) -> Option<u64> {
    let h = PullRequest {
        consumer_group: GROUP.to_string(),
        topic: topic.to_string(),
        queue_id: queue,
        queue_offset: offset,
        max_messages: 32,
        max_bytes: 1 << 20,
        filter_type: FilterType::Tag,
        expression: "*".to_string(),
        suspend_timeout_ms: suspend_ms as u32,
        commit_offset: None,
    };
    let ans = rpc
        .call(
            RequestCode::PullMessage,
            &h,
            &[],
            CALL_TIMEOUT_MS + suspend_ms,
        )
        .await
        .ok()?;
    let fields = match Response::<PullResponse>::decode(&ans.header) {
        Ok(Response {
            fields: Some(f), ..
        }) => f,
        _ => return None,
    };
    match ans.status {
        Status::Success => {
            client::check_pulled(&ctx.shared, from, topic, queue, offset, &ans.body, &fields);
            let mut delivered = ctx.delivered.borrow_mut();
            let mut failures = Vec::new();
            for r in record::iter(&ans.body) {
                let Ok(r) = r else { break };
                let key = (topic.to_string(), queue, r.queue_offset);
                match delivered.get(&key) {
                    Some(b) if b.as_slice() != r.body => failures.push(format!(
                        "{key:?} was delivered as {:?} and later as {:?} (a delivered record was truncated)",
                        String::from_utf8_lossy(b),
                        String::from_utf8_lossy(r.body)
                    )),
                    Some(_) => {}
                    None => {
                        delivered.insert(key, r.body.to_vec());
                    }
                }
            }
            drop(delivered);
            ctx.shared.checks.borrow_mut().failures.extend(failures);
            Some(fields.next_begin_offset)
        }
        Status::PullNotFound | Status::PullOffsetMoved | Status::PullRetryImmediately => {
            Some(fields.next_begin_offset)
        }
        _ => None,
    }
}

/// Runs one seed of the failover scenario.
pub fn run_one(opts: &Options) -> Report {
    let world = World::new(opts.seed, NetConfig::default());
    let entered = world.enter();
    planted::plant(opts.bug);
    let dir = opts.scratch_dir.join(format!(
        "ringmq-sim-failover-{}-{}",
        std::process::id(),
        opts.seed
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let flush = if crate::io::sim::Rng::new(opts.seed ^ 0xFA11).chance(0.5) {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    };
    let mut report = Report {
        seed: opts.seed,
        mode: format!("failover/{}", flush.as_str()),
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
        pop: None,
        recall: None,
        faults: Vec::new(),
    };
    match Failover::new(&world, &dir, flush) {
        Ok(mut f) => {
            let failure = f.run(opts).err();
            report.failure = failure.map(|e| format!("at {} ms: {e}", world.now_ns() / 1_000_000));
            let checks = f.ctx.shared.checks.borrow();
            report.sends_ok = checks.sends_ok;
            report.pulled_records = checks.pulled_records;
            report.route_fetches = checks.route_fetches;
            drop(checks);
            report.crashes = f.crashes;
            report.namesrv_restarts = f.ctl_crashes;
            report.epochs_acked = f.ctx.acks.borrow().by_epoch.len() as u32;
            report.faults = f.faults.clone();
            f.shutdown();
        }
        Err(e) => report.failure = Some(format!("starting: {e}")),
    }
    report.events = world.polls();
    report.digest = world.trace_digest();
    report.virtual_ms = world.now_ns() / 1_000_000;
    planted::plant(None);
    drop(entered);
    let _ = std::fs::remove_dir_all(&dir);
    report
}

struct Failover {
    world: World,
    ctls: Vec<Ctl>,
    brokers: Brokers,
    /// Node -> virtual ms until which it is kept down.
    down_until: BTreeMap<NodeId, u64>,
    ctx: Ctx,
    crashes: u32,
    ctl_crashes: u32,
    faults: Vec<String>,
}

impl Failover {
    fn new(world: &World, dir: &Path, flush: FlushDiskType) -> Result<Self, String> {
        let list: Vec<String> = (0..3).map(|i| ns_addr(i).to_string()).collect();
        let list = list.join(";");
        let brokers: Vec<Rc<RefCell<BrokerNode>>> = (0..3)
            .map(|i| {
                BrokerNode::controlled(
                    BROKERS[i],
                    broker_addr(i),
                    &dir.join(format!("b{}", i + 1)),
                    flush,
                    i as u64 + 1,
                    &list,
                    BROKER_EXTRA,
                )
                .map(|b| Rc::new(RefCell::new(b)))
            })
            .collect::<Result<_, _>>()?;
        let brokers: Brokers = Rc::new(brokers);
        let ctls: Vec<Ctl> = (0..3)
            .map(|index| Ctl {
                index,
                disk: FaultDisk::new(),
                sync_us: Rc::new(Cell::new(100)),
                running: Rc::default(),
            })
            .collect();
        let namesrvs = Rc::new(ctls.iter().map(|c| Rc::clone(&c.running)).collect());
        let log_brokers = Rc::clone(&brokers);
        let shared = Shared {
            world: world.clone(),
            oracle: Rc::new(RefCell::new(Oracle::default())),
            checks: Rc::new(RefCell::new(Checks::default())),
            log_end: Rc::new(move |addr| {
                log_brokers.iter().find_map(|b| {
                    let b = b.try_borrow().ok()?;
                    if b.addr != addr {
                        return None;
                    }
                    let end = b.shard()?.store.try_borrow().ok()?.write_offset();
                    Some(end)
                })
            }),
        };
        let ctx = Ctx {
            shared,
            brokers: Rc::clone(&brokers),
            namesrvs,
            acks: Rc::default(),
            delivered: Rc::default(),
            stop: Rc::default(),
            restarts: Rc::default(),
        };
        Ok(Failover {
            world: world.clone(),
            ctls,
            brokers,
            down_until: BTreeMap::new(),
            ctx,
            crashes: 0,
            ctl_crashes: 0,
            faults: Vec::new(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.world.now_ns() / 1_000_000
    }

    fn run(&mut self, opts: &Options) -> Result<(), String> {
        for c in &mut self.ctls {
            c.start(&self.world)?;
        }
        for b in self.brokers.iter() {
            b.borrow_mut().start(&self.world)?;
        }
        for id in 0..2 {
            self.world.spawn_on(CLIENTS, producer(self.ctx.clone(), id));
        }
        self.world.spawn_on(CLIENTS, consumer(self.ctx.clone()));
        // The controllers elect a leader and a master before the faults begin.
        self.world.run_for(Duration::from_secs(3));
        self.after_slice()?;
        let slices = opts.virtual_secs * 1000 / SLICE_MS;
        for _ in 0..slices {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            self.after_slice()?;
            self.nemesis()?;
        }
        self.quiesce()?;
        for _ in 0..QUIET_LOAD_MS / SLICE_MS {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            self.after_slice()?;
        }
        self.ctx.stop.set(true);
        self.settle()?;
        self.final_checks()
    }

    /// Panics fail the run; nodes that fail-stopped are restarted from their disk, nodes
    /// kept down come back when due; failures the clients found end the run.
    fn after_slice(&mut self) -> Result<(), String> {
        self.ctx.observe_epochs();
        if let Some((node, msg)) = self.world.take_panics().into_iter().next() {
            return Err(format!("panic on node {node}: {msg}"));
        }
        for (node, why) in self.world.take_fail_stops() {
            self.faults.push(format!("fail-stop of node {node}: {why}"));
        }
        if let Some(f) = self.ctx.shared.checks.borrow().failures.first() {
            return Err(f.clone());
        }
        let now = self.now_ms();
        for (i, &node) in BROKERS.iter().enumerate() {
            let b = Rc::clone(&self.brokers[i]);
            let dead = b.borrow().running.is_some() && self.world.is_dead(node);
            let due = self.down_until.get(&node).is_some_and(|&t| now >= t);
            if dead {
                b.borrow_mut().crash(&self.world, Crash::KeepWritten);
            }
            if dead || due {
                self.down_until.remove(&node);
                b.borrow_mut()
                    .start(&self.world)
                    .map_err(|e| format!("broker {} restart: {e}", i + 1))?;
                self.check_store(i)?;
            }
        }
        for (i, &node) in CONTROLLERS.iter().enumerate() {
            let dead = self.ctls[i].is_running() && self.world.is_dead(node);
            let due = self.down_until.get(&node).is_some_and(|&t| now >= t);
            if dead {
                self.ctls[i].crash(&self.world, Crash::KeepWritten);
            }
            if dead || due {
                self.down_until.remove(&node);
                self.ctls[i]
                    .start(&self.world)
                    .map_err(|e| format!("controller n{i} restart: {e}"))?;
            }
        }
        Ok(())
    }

    /// A restarted broker's store: its log walks and its queues match it.
    fn check_store(&self, i: usize) -> Result<(), String> {
        let b = self.brokers[i].borrow();
        let shard = b.shard().ok_or("broker not running after its start")?;
        let store = shard.store.borrow();
        let log = check::scan_log(&store).map_err(|e| format!("broker {}: {e}", i + 1))?;
        check::queues_match_log(&store, &log).map_err(|e| format!("broker {}: {e}", i + 1))
    }

    /// The broker serving the newest epoch now, if any.
    fn master(&self) -> Option<(usize, u32)> {
        (0..3)
            .filter_map(|i| {
                let b = self.brokers[i].borrow();
                if !b.is_up(&self.world) {
                    return None;
                }
                let e = b.shard()?.serving_epoch.get();
                (e > 0 && b.running.as_ref()?.broker.is_master()).then_some((i, e))
            })
            .max_by_key(|(_, e)| *e)
    }

    fn crash_broker(&mut self, i: usize, down_ms: u64, why: &str) {
        let now = self.now_ms();
        let node = BROKERS[i];
        if self.down_until.contains_key(&node) || self.brokers[i].borrow().running.is_none() {
            return;
        }
        self.crashes += 1;
        self.faults.push(format!(
            "{why}: broker {} kill -9 at {now} ms, down for {down_ms} ms",
            i + 1
        ));
        self.brokers[i]
            .borrow_mut()
            .crash(&self.world, Crash::KeepWritten);
        self.down_until.insert(node, now + down_ms);
    }

    /// Draws this slice's fault, if any.
    fn nemesis(&mut self) -> Result<(), String> {
        let roll = self.world.with_rng(|r| r.below(1000));
        let now = self.now_ms();
        let any = |w: &World| w.with_rng(|r| r.below(3) as usize);
        let down = |w: &World| {
            w.with_rng(|r| {
                if r.chance(0.4) {
                    0
                } else {
                    500 + r.below(4_000)
                }
            })
        };
        match roll {
            0..=9 => {
                if let Some((m, _)) = self.master() {
                    let d = down(&self.world);
                    self.crash_broker(m, d, "master");
                }
            }
            10..=15 => {
                let (i, d) = (any(&self.world), down(&self.world));
                self.crash_broker(i, d, "any");
            }
            16..=20 => {
                let i = any(&self.world);
                let node = CONTROLLERS[i];
                if self.down_until.contains_key(&node) {
                    return Ok(());
                }
                let kind = match self.world.with_rng(|r| r.below(3)) {
                    0 => Crash::KeepWritten,
                    1 => Crash::DropUnsynced,
                    _ => Crash::TearLast,
                };
                let d = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        0
                    } else {
                        200 + r.below(3_000)
                    }
                });
                self.faults.push(format!(
                    "controller n{i} crash ({kind:?}) at {now} ms, down for {d} ms"
                ));
                self.ctl_crashes += 1;
                self.ctls[i].crash(&self.world, kind);
                self.down_until.insert(node, now + d);
            }
            21..=30 => {
                // The master cut off from every controller, not from clients; half the time
                // from the other brokers too (what it takes until its lease runs out is
                // then on it alone).
                if let Some((m, _)) = self.master() {
                    for c in CONTROLLERS {
                        self.world.partition(BROKERS[m], c);
                    }
                    let alone = self.world.with_rng(|r| r.chance(0.5));
                    if alone {
                        for b in (0..3).filter(|&b| b != m) {
                            self.world.partition(BROKERS[m], BROKERS[b]);
                        }
                    }
                    self.faults.push(format!(
                        "partition broker {} | controllers{} at {now} ms",
                        m + 1,
                        if alone { ", brokers" } else { "" }
                    ));
                }
            }
            31..=35 => {
                let a = any(&self.world);
                let b = (a + 1 + self.world.with_rng(|r| r.below(2) as usize)) % 3;
                self.world.partition(BROKERS[a], BROKERS[b]);
                self.faults.push(format!(
                    "partition broker {} | broker {} at {now} ms",
                    a + 1,
                    b + 1
                ));
            }
            36..=38 => {
                let a = any(&self.world);
                self.world.partition(CLIENTS, BROKERS[a]);
                self.faults
                    .push(format!("partition clients | broker {} at {now} ms", a + 1));
            }
            39..=42 => {
                let a = any(&self.world);
                let (x, what) = if self.world.with_rng(|r| r.chance(0.5)) {
                    let b = (a + 1 + self.world.with_rng(|r| r.below(2) as usize)) % 3;
                    (CONTROLLERS[b], format!("controller n{b}"))
                } else {
                    let b = any(&self.world);
                    (BROKERS[b], format!("broker {}", b + 1))
                };
                self.world.partition(CONTROLLERS[a], x);
                self.faults
                    .push(format!("partition controller n{a} | {what} at {now} ms"));
            }
            43..=69 => self.world.heal(),
            70..=73 => {
                let (node, what) = if self.world.with_rng(|r| r.chance(0.6)) {
                    let i = any(&self.world);
                    (BROKERS[i], format!("broker {}", i + 1))
                } else {
                    let i = any(&self.world);
                    (CONTROLLERS[i], format!("controller n{i}"))
                };
                let delta = self
                    .world
                    .with_rng(|r| r.below(7_200_000) as i64 - 3_600_000);
                self.world.jump_clock(node, delta);
                self.faults
                    .push(format!("{what} clock jumps {delta} ms at {now} ms"));
            }
            74..=80 => {
                let i = any(&self.world);
                let us = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        5_000 + r.below(200_000)
                    } else {
                        100
                    }
                });
                self.brokers[i].borrow().sync_us.set(us);
                self.faults.push(format!(
                    "broker {} fdatasync takes {us} us at {now} ms",
                    i + 1
                ));
            }
            81..=84 => {
                let i = any(&self.world);
                let b = self.brokers[i].borrow();
                let full = self.world.with_rng(|r| r.chance(0.5));
                if full {
                    let room = self.world.with_rng(|r| r.below(64 << 10));
                    b.disk.set_capacity(Some(b.disk.used_bytes() + room));
                } else {
                    b.disk.set_capacity(None);
                }
                self.faults
                    .push(format!("broker {} disk full: {full} at {now} ms", i + 1));
            }
            85..=87 => {
                let i = any(&self.world);
                if self.down_until.contains_key(&BROKERS[i]) {
                    return Ok(());
                }
                let b = self.brokers[i].borrow();
                let n = b.disk.ops() + self.world.with_rng(|r| 1 + r.below(300));
                b.disk.crash_at(n);
                self.faults.push(format!(
                    "broker {} disk dies at I/O {n} (from {now} ms)",
                    i + 1
                ));
            }
            88..=95 => {
                let p = self.world.with_rng(|r| {
                    if r.chance(0.5) {
                        0.0
                    } else {
                        0.001 + r.below(20) as f64 / 1000.0
                    }
                });
                self.world.set_reset_chance(p);
                self.faults
                    .push(format!("connection reset chance {p} per write at {now} ms"));
            }
            _ => {}
        }
        Ok(())
    }

    /// Lifts every fault and brings every node back.
    fn quiesce(&mut self) -> Result<(), String> {
        self.world.set_reset_chance(0.0);
        self.world.heal();
        for b in self.brokers.iter() {
            let b = b.borrow();
            b.sync_us.set(100);
            b.disk.set_capacity(None);
            b.disk.crash_at(u64::MAX);
        }
        let now = self.now_ms();
        for t in self.down_until.values_mut() {
            *t = now;
        }
        self.faults.push(format!("faults lifted at {now} ms"));
        self.after_slice()
    }

    /// Runs until one master serves, every replica is at its end and the consumer has
    /// every acknowledged record (or [`SETTLE_MAX_MS`] passed).
    fn settle(&mut self) -> Result<(), String> {
        let mut waited = 0;
        while waited < SETTLE_MAX_MS {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            waited += SLICE_MS;
            self.after_slice()?;
            if self.settled() {
                return Ok(());
            }
        }
        Ok(())
    }

    fn settled(&self) -> bool {
        let Some((m, _)) = self.master() else {
            return false;
        };
        let end = |i: usize| {
            let b = self.brokers[i].borrow();
            b.shard().map(|s| s.store.borrow().write_offset())
        };
        let master_end = end(m);
        let replicas = (0..3).all(|i| end(i) == master_end);
        let oracle = self.ctx.shared.oracle.borrow();
        let delivered = self.ctx.delivered.borrow();
        replicas && oracle.acked.keys().all(|k| delivered.contains_key(k))
    }

    fn final_checks(&mut self) -> Result<(), String> {
        let (m, epoch) = self
            .master()
            .ok_or("no broker serves as master after the faults were lifted")?;
        let acked_in_quiet = self
            .ctx
            .acks
            .borrow()
            .newest
            .is_some_and(|(e, _)| e == epoch);
        let master = self.brokers[m].borrow();
        let shard = master.shard().ok_or("master down")?;
        let store = shard.store.borrow();
        let log = check::scan_log(&store).map_err(|e| format!("final master: {e}"))?;
        check::queues_match_log(&store, &log).map_err(|e| format!("final master: {e}"))?;
        check::acked_present(&store, &self.ctx.shared.oracle.borrow(), "final master")?;
        let delivered = Oracle {
            acked: self
                .ctx
                .delivered
                .borrow()
                .iter()
                .map(|(k, b)| {
                    let a = client::Acked {
                        body: b.clone(),
                        at_ns: 0,
                    };
                    (k.clone(), a)
                })
                .collect(),
            ..Oracle::default()
        };
        check::acked_present(&store, &delivered, "delivered, on the final master")?;
        for i in (0..3).filter(|&i| i != m) {
            let b = self.brokers[i].borrow();
            let s = b
                .shard()
                .ok_or(format!("broker {} down at the end", i + 1))?;
            let replica = s.store.borrow();
            same_log(&store, &replica).map_err(|e| {
                format!(
                    "broker {}'s log against the final master (broker {}, epoch {epoch}): {e}",
                    i + 1,
                    m + 1
                )
            })?;
            let rlog = check::scan_log(&replica).map_err(|e| format!("broker {}: {e}", i + 1))?;
            check::queues_match_log(&replica, &rlog)
                .map_err(|e| format!("broker {}: {e}", i + 1))?;
        }
        let oracle = self.ctx.shared.oracle.borrow();
        let delivered = self.ctx.delivered.borrow();
        if let Some(k) = oracle.acked.keys().find(|k| !delivered.contains_key(*k)) {
            return Err(format!(
                "acknowledged {k:?} never reached the consumer ({} of {} acknowledged records delivered)",
                oracle.acked.keys().filter(|k| delivered.contains_key(*k)).count(),
                oracle.acked.len()
            ));
        }
        if !acked_in_quiet {
            return Err(format!(
                "no send was acknowledged by the final master (broker {}, epoch {epoch}) after the faults were lifted",
                m + 1
            ));
        }
        Ok(())
    }

    fn shutdown(&mut self) {
        self.world.kill_node(CLIENTS);
        for (i, b) in self.brokers.iter().enumerate() {
            self.world.kill_node(BROKERS[i]);
            b.borrow_mut().running = None;
        }
        for (i, c) in self.ctls.iter_mut().enumerate() {
            self.world.kill_node(CONTROLLERS[i]);
            c.running.borrow_mut().take();
        }
    }
}

/// A replica's log is the master's: same end, same bytes from the replica's first byte.
fn same_log(
    master: &crate::store::Store<crate::io::node_disk::NodeDisk>,
    replica: &crate::store::Store<crate::io::node_disk::NodeDisk>,
) -> Result<(), String> {
    let (m_end, r_end) = (master.write_offset(), replica.write_offset());
    if m_end != r_end {
        return Err(format!("it ends at {r_end}, the master at {m_end}"));
    }
    let from = master.min_offset().max(replica.min_offset());
    let mut pos = from;
    let (mut a, mut b) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    while pos < m_end {
        let n = (m_end - pos).min(a.len() as u64) as usize;
        master
            .read(pos, &mut a[..n])
            .map_err(|e| format!("master read at {pos}: {e}"))?;
        replica
            .read(pos, &mut b[..n])
            .map_err(|e| format!("replica read at {pos}: {e}"))?;
        if a[..n] != b[..n] {
            let at = pos
                + a[..n]
                    .iter()
                    .zip(&b[..n])
                    .take_while(|(x, y)| x == y)
                    .count() as u64;
            return Err(format!("the bytes differ at {at} (compared from {from})"));
        }
        pos += n as u64;
    }
    Ok(())
}
