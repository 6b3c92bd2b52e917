//! The controller (RocketMQ 5's controller mode): a Raft group of controllers, embedded in
//! name servers (`enableControllerInNamesrv=true`), that keeps per broker set who is master
//! in which epoch and the SyncStateSet ([`state`]), replicated with openraft ([`raft`]).
//!
//! The leader controller also keeps, in memory only, when it last heard from each broker
//! (CONTROLLER_BROKER_HEARTBEAT over a persistent connection). Every [`SCAN_MS`] it looks for
//! sets whose master is gone — silent past the heartbeat timeout the broker announced, or its
//! link closed and not re-opened within [`CLOSED_GRACE_MS`] — and elects a new master from the
//! live members of the SyncStateSet ([`state::choose`]) by a Raft command decided against the
//! current epoch. A new leader first waits one heartbeat timeout before it judges anyone, so
//! brokers it has not heard from yet are not taken for dead.
//!
//! Brokers learn their role from the answer to their heartbeat (the set's [`ReplicaSet`]).

pub mod link;
pub mod raft;
pub mod state;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use openraft::BasicNode;
use ringmq_wire::code::Status;
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{
    AlterSyncStateSet, ControllerHeartbeat, ControllerMember, ControllerMetadata,
    ElectMasterRequest, GetReplicaInfoRequest, NotLeader, ReplicaMember, ReplicaSet, ReplicaSets,
};

pub use crate::config::ControllerConfig;
use crate::io::clock::Instant;
use crate::io::node_disk::NodeDisk;
use crate::io::rt;
use crate::net::reply::{Body, Reply};
use raft::{LogStore, Raft, StateMachine};
use state::{choose, Applied, Command, Health, Member, SetState};

/// How often the leader looks for dead masters.
pub const SCAN_MS: u64 = 100;
/// A broker whose heartbeat link closed is taken for dead after this long without a new
/// heartbeat (a live broker reconnects at once; a master whose link drops stops taking
/// writes until it is back, see the broker side).
pub const CLOSED_GRACE_MS: u64 = 300;
/// Heartbeat timeout assumed for a broker the leader has not heard from yet.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: u64 = 2_000;
/// Raft timings: the leader's heartbeat, and the election timeout range of a follower.
pub const RAFT_HEARTBEAT_MS: u64 = 100;
pub const RAFT_ELECTION_MIN_MS: u64 = 400;
pub const RAFT_ELECTION_MAX_MS: u64 = 800;

/// What the leader heard from one broker.
#[derive(Debug, Clone)]
struct Beat {
    last: Instant,
    timeout_ms: u64,
    health: Health,
    /// The connection it came over.
    conn: u64,
    /// When that connection closed (no newer heartbeat since).
    closed: Option<Instant>,
}

/// A running controller.
pub struct Controller {
    pub id: u64,
    pub addr: SocketAddr,
    pub peers: BTreeMap<u64, SocketAddr>,
    pub raft: Raft,
    sm: StateMachine,
    log: LogStore,
    elect_unclean: bool,
    beats: RefCell<HashMap<(String, u64), Beat>>,
    /// When this controller last became leader (`None` while it is not).
    leader_since: Cell<Option<Instant>>,
    /// Sets whose election command is being decided: their brokers' heartbeats get no
    /// answer meanwhile (an answer with the old state would renew a deposed master's lease).
    electing: RefCell<BTreeSet<String>>,
    next_conn: Cell<u64>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish()
    }
}

impl Controller {
    /// Opens the controller's store and joins the Raft group; spawns the election scan.
    pub async fn start(cfg: &ControllerConfig, disk: NodeDisk) -> Result<Rc<Self>, String> {
        cfg.validate()?;
        let id = cfg.self_id.unwrap_or(0);
        let addr = cfg.peers[&id];
        let dir = cfg.dir();
        let log = LogStore::open(disk.clone(), &dir)
            .map_err(|e| format!("controller log in {}: {e}", dir.display()))?;
        let sm = StateMachine::open(disk, &dir)
            .map_err(|e| format!("controller snapshot in {}: {e}", dir.display()))?;
        let fresh = log.is_empty();
        let config = openraft::Config {
            cluster_name: "ringmq-controllers".into(),
            heartbeat_interval: RAFT_HEARTBEAT_MS,
            election_timeout_min: RAFT_ELECTION_MIN_MS,
            election_timeout_max: RAFT_ELECTION_MAX_MS,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(1_000),
            max_in_snapshot_log_to_keep: 100,
            ..Default::default()
        };
        let config = Rc::new(config.validate().map_err(|e| e.to_string())?);
        let raft = Raft::new(
            id,
            std::sync::Arc::from(Rc::unwrap_or_clone(config)),
            raft::Network { self_id: id },
            log.clone(),
            sm.clone(),
        )
        .await
        .map_err(|e| format!("starting Raft: {e}"))?;
        if fresh {
            let members: BTreeMap<u64, BasicNode> = cfg
                .peers
                .iter()
                .map(|(id, a)| (*id, BasicNode::new(a.to_string())))
                .collect();
            // Every controller of a new group proposes the same membership; openraft lets
            // only one of them win and the others join it.
            if let Err(e) = raft.initialize(members).await {
                log::debug!("controller n{id}: initialize: {e}");
            }
        }
        let c = Rc::new(Controller {
            id,
            addr,
            peers: cfg.peers.clone(),
            raft,
            sm,
            log,
            elect_unclean: cfg.elect_unclean,
            beats: RefCell::new(HashMap::new()),
            leader_since: Cell::new(None),
            electing: RefCell::default(),
            next_conn: Cell::new(1),
        });
        log::info!(
            "controller n{id} at {addr}: {} controllers ({}), store {}",
            cfg.peers.len(),
            cfg.peers
                .iter()
                .map(|(i, a)| format!("n{i}-{a}"))
                .collect::<Vec<_>>()
                .join(";"),
            dir.display()
        );
        rt::spawn(scan_loop(Rc::downgrade(&c)));
        Ok(c)
    }

    /// A new id for a connection that may carry heartbeats.
    pub fn new_conn(&self) -> u64 {
        let id = self.next_conn.get();
        self.next_conn.set(id + 1);
        id
    }

    /// The leader's id, as this controller knows it.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.id)
    }

    fn not_leader(&self) -> Reply {
        let leader_addr = self.leader().and_then(|l| self.peers.get(&l).copied());
        Reply::status_fields(
            Status::ControllerNotLeader,
            format!(
                "controller n{} is not the leader{}",
                self.id,
                leader_addr
                    .map(|a| format!("; the leader is {a}"))
                    .unwrap_or_default()
            ),
            NotLeader { leader_addr },
        )
    }

    /// A connection that carried heartbeats closed.
    pub fn link_closed(&self, conn: u64) {
        let now = Instant::now();
        for b in self.beats.borrow_mut().values_mut() {
            if b.conn == conn && b.closed.is_none() {
                b.closed = Some(now);
            }
        }
    }

    fn is_alive(&self, broker_name: &str, id: u64, now: Instant) -> Option<Health> {
        let beats = self.beats.borrow();
        match beats.get(&(broker_name.to_string(), id)) {
            Some(b) => {
                let silent = now.duration_since(b.last) >= Duration::from_millis(b.timeout_ms);
                let closed = b.closed.is_some_and(|c| {
                    now.duration_since(c) >= Duration::from_millis(CLOSED_GRACE_MS)
                });
                (!silent && !closed).then_some(b.health)
            }
            None => None,
        }
    }

    fn replica_set(&self, name: &str, set: &SetState) -> ReplicaSet {
        let now = Instant::now();
        let beats = self.beats.borrow();
        ReplicaSet {
            cluster: set.cluster.clone(),
            broker_name: name.to_string(),
            master_id: set.master_id,
            master_epoch: set.master_epoch,
            sync_state_set: set.sync_state_set.iter().copied().collect(),
            sync_state_set_epoch: set.sync_state_set_epoch,
            members: set
                .members
                .iter()
                .map(|(id, m)| {
                    let beat = beats.get(&(name.to_string(), *id));
                    ReplicaMember {
                        broker_id: *id,
                        broker_addr: m.addr,
                        ha_addr: m.ha_addr,
                        alive: self.is_leader() && self.is_alive_locked(beat, now),
                        epoch: beat.map_or(0, |b| b.health.epoch),
                        log_bytes: beat.map_or(0, |b| b.health.log_bytes),
                        election_priority: m.priority,
                    }
                })
                .collect(),
        }
    }

    fn is_alive_locked(&self, beat: Option<&Beat>, now: Instant) -> bool {
        beat.is_some_and(|b| {
            now.duration_since(b.last) < Duration::from_millis(b.timeout_ms)
                && !b.closed.is_some_and(|c| {
                    now.duration_since(c) >= Duration::from_millis(CLOSED_GRACE_MS)
                })
        })
    }

    fn set_state(&self, name: &str) -> Option<SetState> {
        self.sm.0.borrow().state.sets.get(name).cloned()
    }

    async fn write(&self, cmd: Command) -> Result<Applied, Reply> {
        match self.raft.client_write(cmd).await {
            Ok(resp) => Ok(resp.data),
            Err(e) => {
                if e.forward_to_leader().is_some() {
                    Err(self.not_leader())
                } else {
                    Err(Reply::error(Status::SystemError, format!("Raft: {e}")))
                }
            }
        }
    }

    /// CONTROLLER_BROKER_HEARTBEAT over connection `conn`.
    pub async fn heartbeat(&self, hb: ControllerHeartbeat, conn: u64) -> Reply {
        if !self.is_leader() {
            return self.not_leader();
        }
        let member = Member {
            addr: hb.broker_addr,
            ha_addr: hb.ha_addr,
            priority: hb.election_priority,
        };
        let known = self
            .set_state(&hb.broker_name)
            .and_then(|s| s.members.get(&hb.broker_id).cloned());
        if known.as_ref() != Some(&member) {
            let cmd = Command::Register {
                cluster: hb.cluster.clone(),
                broker_name: hb.broker_name.clone(),
                broker_id: hb.broker_id,
                member,
            };
            match self.write(cmd).await {
                Ok(Applied::Done) => log::info!(
                    "controller n{}: broker {}/{} id {} registered at {}",
                    self.id,
                    hb.cluster,
                    hb.broker_name,
                    hb.broker_id,
                    hb.broker_addr
                ),
                Ok(Applied::Refused(why)) => {
                    return Reply::error(Status::MessageIllegal, why);
                }
                Err(reply) => return reply,
            }
        }
        self.beats.borrow_mut().insert(
            (hb.broker_name.clone(), hb.broker_id),
            Beat {
                last: Instant::now(),
                timeout_ms: hb.heartbeat_timeout_ms.max(100),
                health: Health {
                    epoch: hb.epoch,
                    log_bytes: hb.log_bytes,
                },
                conn,
                closed: None,
            },
        );
        // Only a leader a quorum still follows may renew a master's lease: a deposed leader
        // cut off from the others (it learns of its successor only when it hears from them)
        // would answer with the state it had, and the master it names would go on
        // acknowledging after the new leader replaced it. This confirms the leadership with a
        // quorum after the heartbeat arrived, and waits for this controller to have applied
        // everything committed.
        if self.raft.ensure_linearizable().await.is_err() {
            return self.not_leader();
        }
        if self.electing.borrow().contains(&hb.broker_name) {
            return Reply::error(
                Status::SystemError,
                format!(
                    "broker set {} is electing a master; heartbeat again",
                    hb.broker_name
                ),
            );
        }
        let Some(set) = self.set_state(&hb.broker_name) else {
            return Reply::error(Status::SystemError, "registered set vanished".to_string());
        };
        if set.master_id.is_none() {
            // A new set (or one whose master could not be replaced): elect now rather
            // than at the next scan.
            self.elect_if_needed(&hb.broker_name).await;
        }
        let set = self.set_state(&hb.broker_name).unwrap_or(set);
        Reply::ok(self.replica_set(&hb.broker_name, &set))
    }

    /// CONTROLLER_ALTER_SYNC_STATE_SET.
    pub async fn alter_sync_state_set(&self, req: AlterSyncStateSet) -> Reply {
        if !self.is_leader() {
            return self.not_leader();
        }
        let cmd = Command::AlterSyncStateSet {
            broker_name: req.broker_name.clone(),
            master_id: req.master_id,
            master_epoch: req.master_epoch,
            expect_sync_state_set_epoch: req.sync_state_set_epoch,
            new_set: req.new_set.clone(),
        };
        match self.write(cmd).await {
            Ok(Applied::Done) => {
                log::info!(
                    "controller n{}: {} SyncStateSet is now {:?}",
                    self.id,
                    req.broker_name,
                    req.new_set
                );
                match self.set_state(&req.broker_name) {
                    Some(set) => Reply::ok(self.replica_set(&req.broker_name, &set)),
                    None => Reply::error(Status::ControllerUnknownSet, req.broker_name),
                }
            }
            Ok(Applied::Refused(why)) => Reply::error(Status::ControllerFencedEpoch, why),
            Err(reply) => reply,
        }
    }

    /// CONTROLLER_ELECT_MASTER (an operator's request).
    pub async fn elect_master(&self, req: ElectMasterRequest) -> Reply {
        if !self.is_leader() {
            return self.not_leader();
        }
        let Some(set) = self.set_state(&req.broker_name) else {
            return Reply::error(
                Status::ControllerUnknownSet,
                format!("no broker set {} is registered", req.broker_name),
            );
        };
        let now = Instant::now();
        let live = |id: u64| self.is_alive(&req.broker_name, id, now);
        let chosen = match req.broker_id {
            Some(id) => {
                if !set.members.contains_key(&id) {
                    return Reply::error(
                        Status::ControllerElectFailed,
                        format!("broker {id} is not a member of {}", req.broker_name),
                    );
                }
                if live(id).is_none() {
                    return Reply::error(
                        Status::ControllerElectFailed,
                        format!("broker {id} of {} is not alive", req.broker_name),
                    );
                }
                if set.master_epoch > 0 && !set.sync_state_set.contains(&id) && !self.elect_unclean
                {
                    return Reply::error(
                        Status::ControllerElectFailed,
                        format!(
                            "broker {id} is not in the SyncStateSet {:?} and enableElectUncleanMaster is off",
                            set.sync_state_set
                        ),
                    );
                }
                Some(id)
            }
            None => choose(&set, &live, self.elect_unclean, None),
        };
        let Some(new) = chosen else {
            return Reply::error(
                Status::ControllerElectFailed,
                format!("no member of {} can be elected", req.broker_name),
            );
        };
        if set.master_id == Some(new) {
            return Reply::ok(self.replica_set(&req.broker_name, &set));
        }
        let cmd = Command::Elect {
            broker_name: req.broker_name.clone(),
            expect_master_epoch: set.master_epoch,
            new_master: Some(new),
        };
        match self.write(cmd).await {
            Ok(Applied::Done) => {
                log::warn!(
                    "controller n{}: {} master is now broker {new} (epoch {}, by request)",
                    self.id,
                    req.broker_name,
                    set.master_epoch + 1
                );
                let set = self.set_state(&req.broker_name).unwrap_or(set);
                Reply::ok(self.replica_set(&req.broker_name, &set))
            }
            Ok(Applied::Refused(why)) => Reply::error(Status::ControllerFencedEpoch, why),
            Err(reply) => reply,
        }
    }

    /// CONTROLLER_GET_REPLICA_INFO.
    pub fn replica_info(&self, req: &GetReplicaInfoRequest) -> Reply {
        let sm = self.sm.0.borrow();
        let sets: Vec<ReplicaSet> = sm
            .state
            .sets
            .iter()
            .filter(|(name, _)| req.broker_name.is_empty() || **name == req.broker_name)
            .map(|(name, set)| self.replica_set(name, set))
            .collect();
        drop(sm);
        if !req.broker_name.is_empty() && sets.is_empty() {
            return Reply::error(
                Status::ControllerUnknownSet,
                format!("no broker set {} is registered", req.broker_name),
            );
        }
        match ringmq_wire::codec::Encode::to_vec(&ReplicaSets { sets }) {
            Ok(b) => Reply::ok_body(Empty, Body::Bytes(b)),
            Err(e) => Reply::error(Status::SystemError, e.to_string()),
        }
    }

    /// CONTROLLER_GET_METADATA_INFO.
    pub fn metadata(&self) -> Reply {
        let m = self.raft.metrics().borrow().clone();
        Reply::ok(ControllerMetadata {
            self_id: self.id,
            self_addr: self.addr,
            leader_id: m.current_leader,
            leader_addr: m.current_leader.and_then(|l| self.peers.get(&l).copied()),
            term: m.current_term,
            last_log_index: m.last_log_index.unwrap_or(0),
            applied_index: m.last_applied.map_or(0, |l| l.index),
            members: self
                .peers
                .iter()
                .map(|(id, addr)| ControllerMember {
                    id: *id,
                    addr: *addr,
                })
                .collect(),
        })
    }

    /// Leader only: elects a master for `name` if it has none or its master is gone.
    async fn elect_if_needed(&self, name: &str) {
        let Some(set) = self.set_state(name) else {
            return;
        };
        let now = Instant::now();
        if let Some(since) = self.leader_since.get() {
            // Not before this leader had a chance to hear every broker once.
            if now.duration_since(since) < Duration::from_millis(DEFAULT_HEARTBEAT_TIMEOUT_MS)
                && set.master_id.is_some()
            {
                return;
            }
        }
        let master_alive = set
            .master_id
            .is_some_and(|m| self.is_alive(name, m, now).is_some());
        if master_alive {
            return;
        }
        let live = |id: u64| self.is_alive(name, id, now);
        let Some(new) = choose(&set, &live, self.elect_unclean, set.master_id) else {
            return;
        };
        let cmd = Command::Elect {
            broker_name: name.to_string(),
            expect_master_epoch: set.master_epoch,
            new_master: Some(new),
        };
        if !self.electing.borrow_mut().insert(name.to_string()) {
            return;
        }
        let written = self.write(cmd).await;
        self.electing.borrow_mut().remove(name);
        match written {
            Ok(Applied::Done) => log::warn!(
                "controller n{}: {name}: master {} is gone; elected broker {new} (epoch {})",
                self.id,
                set.master_id
                    .map_or("(none)".to_string(), |m| format!("broker {m}")),
                set.master_epoch + 1
            ),
            Ok(Applied::Refused(why)) => {
                log::info!(
                    "controller n{}: {name}: election not applied: {why}",
                    self.id
                )
            }
            Err(_) => {}
        }
    }

    /// Every set's name.
    fn set_names(&self) -> BTreeSet<String> {
        self.sm.0.borrow().state.sets.keys().cloned().collect()
    }

    /// Set `name`'s state as this controller applied it (the simulator's checks read it).
    pub fn applied_set(&self, name: &str) -> Option<SetState> {
        self.set_state(name)
    }

    /// Index of the last Raft log entry on this controller.
    pub fn last_log_index(&self) -> u64 {
        self.log.last_index()
    }
}

/// The leader's periodic look for dead masters.
async fn scan_loop(c: std::rc::Weak<Controller>) {
    loop {
        rt::sleep(Duration::from_millis(SCAN_MS)).await;
        let Some(c) = c.upgrade() else { return };
        let leader = c.is_leader();
        match (leader, c.leader_since.get()) {
            (true, None) => {
                log::info!("controller n{}: became the leader", c.id);
                c.leader_since.set(Some(Instant::now()));
                c.beats.borrow_mut().clear();
            }
            (false, Some(_)) => {
                c.leader_since.set(None);
                c.beats.borrow_mut().clear();
            }
            _ => {}
        }
        if !leader {
            continue;
        }
        for name in c.set_names() {
            c.elect_if_needed(&name).await;
        }
    }
}
