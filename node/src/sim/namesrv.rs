//! The name server's promises, watched from outside: what the simulator knows of the faults
//! between each broker and the name server, and the checks it makes of the name server's
//! table after every slice (see `docs/simulation.md`, invariants 8-11).
//!
//! - **Expiry** (8): a broker that cannot have reached the name server since `T` (partitioned
//!   from it, or down) is not in its table after `T + brokerChannelExpiredTime +
//!   scanNotActiveBrokerInterval`: its last registration was handled before `T`, and the scan
//!   drops a replica silent for longer than the expiry at the next scan.
//! - **Registration** (9): a broker that has been up, connected to a running name server, with
//!   no partition between them and no connection resets, for one registration period is in
//!   the table at its address, and for the master every topic of its table is routed to it
//!   with the queue counts and permission it published.
//! - **No early expiry** (9, too): a broker whose registration was answered SUCCESS during a
//!   slice that began at `S` (seen through `Broker::registered`, which the simulator clears
//!   after each look) is in the table until `S + brokerChannelExpiredTime`, unless the name
//!   server restarted since.
//! - **Only real brokers** (10): every replica in the table is one the deployment runs, under
//!   its id, address, role and HA address.
//! - A slave learns its master's HA address from the registration answer (11, at the end).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use ringmq_wire::command::route::{perm, DataVersion, QueueData, MASTER_ID};

use super::cluster::{
    BrokerNode, Mode, NamesrvNode, BROKER_EXPIRY_MS, MASTER, NAMESRV, NAMESRV_SCAN_MS,
    REGISTER_PERIOD_MS, SLAVE,
};
use crate::io::sim::{NodeId, World};

/// Virtual ms allowed beyond a deadline for the network and the executor (latencies are
/// under a millisecond; every fault is decided between slices).
const SLACK_MS: u64 = 5;

/// The name server node and what the simulator knows about the links to it.
pub struct NsWatch {
    pub node: NamesrvNode,
    /// Broker node -> virtual ms since which it cannot have reached the name server.
    cut_since: BTreeMap<NodeId, u64>,
    /// Broker node -> virtual ms of the last event that may have kept it from registering
    /// (its start, the name server's start, a partition, a heal, a change of the reset
    /// chance).
    disturbed: BTreeMap<NodeId, u64>,
    /// The name server is down until this virtual ms (then restarted).
    pub down_until: Option<u64>,
    /// Replicas in the table at the last check.
    seen: BTreeSet<u64>,
    /// Virtual ms of the last check.
    last_check_ms: u64,
    /// Replica id -> start of the last slice in which its registration was acknowledged.
    registered_in: BTreeMap<u64, u64>,
    /// The master's topic table version at the last check.
    master_topics: Option<DataVersion>,
    /// Replicas seen dropped from the table while the name server kept running.
    pub expired: u64,
    pub restarts: u32,
}

impl NsWatch {
    pub fn new() -> Self {
        NsWatch {
            node: NamesrvNode::new(),
            cut_since: BTreeMap::new(),
            disturbed: BTreeMap::new(),
            down_until: None,
            seen: BTreeSet::new(),
            last_check_ms: 0,
            registered_in: BTreeMap::new(),
            master_topics: None,
            expired: 0,
            restarts: 0,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.node.addr
    }

    /// Starts (or restarts) the name server: empty, as a real one restarts.
    pub fn start(&mut self, world: &World, now_ms: u64) -> Result<(), String> {
        self.node.start(world)?;
        self.down_until = None;
        self.seen.clear();
        self.registered_in.clear();
        self.disturb_all(now_ms);
        Ok(())
    }

    /// `kill -9`, restarted at `restart_ms` (or at once).
    pub fn kill(&mut self, world: &World, now_ms: u64, restart_ms: u64) -> Result<(), String> {
        self.node.kill(world);
        self.restarts += 1;
        if restart_ms <= now_ms {
            self.start(world, now_ms)
        } else {
            self.down_until = Some(restart_ms);
            self.seen.clear();
            self.registered_in.clear();
            Ok(())
        }
    }

    /// Restarts the name server if its down time is over (or `force`).
    pub fn restart_due(&mut self, world: &World, now_ms: u64, force: bool) -> Result<(), String> {
        match self.down_until {
            Some(t) if force || now_ms >= t => self.start(world, now_ms),
            _ => Ok(()),
        }
    }

    pub fn disturb(&mut self, broker: NodeId, now_ms: u64) {
        self.disturbed.insert(broker, now_ms);
    }

    pub fn disturb_all(&mut self, now_ms: u64) {
        for b in [MASTER, SLAVE] {
            self.disturb(b, now_ms);
        }
    }

    /// `broker` can no longer reach the name server (partitioned from it, or down).
    pub fn cut(&mut self, broker: NodeId, now_ms: u64) {
        self.cut_since.entry(broker).or_insert(now_ms);
        self.disturb(broker, now_ms);
    }

    /// `broker` may reach the name server again (if it is up and not partitioned from it).
    pub fn reconnect(&mut self, world: &World, broker: NodeId, up: bool, now_ms: u64) {
        if up && !world.partitioned(broker, NAMESRV) {
            self.cut_since.remove(&broker);
        }
        self.disturb(broker, now_ms);
    }

    /// The checks after a slice (invariants 8-10).
    pub fn check(
        &mut self,
        world: &World,
        now_ms: u64,
        mode: Mode,
        master: &BrokerNode,
        slave: Option<&BrokerNode>,
        resets_on: bool,
    ) -> Result<(), String> {
        let slice_start = std::mem::replace(&mut self.last_check_ms, now_ms);
        let Some(ns) = self
            .node
            .running
            .as_ref()
            .filter(|_| !world.is_dead(NAMESRV))
        else {
            return Ok(());
        };
        for (id, b) in [(MASTER_ID, Some(master)), (1, slave)] {
            let acked = b
                .and_then(|b| b.running.as_ref())
                .is_some_and(|r| r.broker.registered.swap(false, Ordering::SeqCst));
            if acked && self.node.started_ms <= slice_start {
                self.registered_in.insert(id, slice_start);
            }
        }
        let info = ns.with_routes(|t| t.cluster_info());
        let mut present = BTreeSet::new();
        for b in &info.brokers {
            for (&id, r) in &b.replicas {
                let expected = match id {
                    MASTER_ID => Some(master),
                    1 => slave,
                    _ => None,
                };
                let Some(node) = expected else {
                    return Err(format!(
                        "the name server lists replica {}/{id} at {}, which the deployment does \
                         not run",
                        b.broker_name, r.address
                    ));
                };
                let ha = if id == MASTER_ID {
                    SocketAddr::new(master.addr.ip(), master.addr.port() + 1).to_string()
                } else {
                    String::new()
                };
                let role_ok = r.role.is_master() == (id == MASTER_ID)
                    && (id != MASTER_ID || r.role == mode.role);
                if b.cluster != "SimCluster"
                    || b.broker_name != "broker-a"
                    || r.address != node.addr.to_string()
                    || r.ha_address != ha
                    || !role_ok
                {
                    return Err(format!(
                        "the name server lists {}/{}/{id} at {} (HA {:?}, {}), which is not how \
                         that broker registers",
                        b.cluster,
                        b.broker_name,
                        r.address,
                        r.ha_address,
                        r.role.name()
                    ));
                }
                present.insert(id);
            }
        }
        // 8: expiry.
        for (&node, &since) in &self.cut_since {
            let id = u64::from(node == SLAVE);
            let deadline = since + BROKER_EXPIRY_MS + NAMESRV_SCAN_MS + SLACK_MS;
            if now_ms > deadline && present.contains(&id) {
                return Err(format!(
                    "broker id {id} has been unable to reach the name server since {since} ms, \
                     yet the name server still lists it at {now_ms} ms (expiry \
                     {BROKER_EXPIRY_MS} ms, scan every {NAMESRV_SCAN_MS} ms)"
                ));
            }
        }
        // 9: no early expiry.
        for (&id, &start) in &self.registered_in {
            if now_ms + SLACK_MS <= start + BROKER_EXPIRY_MS && !present.contains(&id) {
                return Err(format!(
                    "broker id {id} registered with the name server after {start} ms, yet the \
                     name server no longer lists it at {now_ms} ms (expiry {BROKER_EXPIRY_MS} ms)"
                ));
            }
        }
        self.expired += self.seen.difference(&present).count() as u64;
        self.seen = present.clone();
        // 9: registration.
        let master_version = master.shard().map(|s| s.broker.topics.snapshot().version);
        let master_unchanged = master_version.is_some() && master_version == self.master_topics;
        self.master_topics = master_version;
        for (node, id, b) in [(MASTER, MASTER_ID, Some(master)), (SLAVE, 1, slave)] {
            let Some(b) = b else { continue };
            let since = self.disturbed.get(&node).copied().unwrap_or(0);
            let clean = b.is_up(world)
                && !resets_on
                && !world.partitioned(node, NAMESRV)
                && now_ms >= since + REGISTER_PERIOD_MS + SLACK_MS;
            if !clean {
                continue;
            }
            if !present.contains(&id) {
                return Err(format!(
                    "broker id {id} has been up and reachable from the name server since \
                     {since} ms (registration every {REGISTER_PERIOD_MS} ms), yet the name \
                     server does not list it at {now_ms} ms"
                ));
            }
            if id != MASTER_ID || !master_unchanged {
                continue;
            }
            let Some(shard) = b.shard() else { continue };
            let table = shard.broker.topics.snapshot();
            let limit = shard.broker.live.permission() | !(perm::READ | perm::WRITE);
            for (topic, cfg) in &table.topics {
                let mut cfg = cfg.clone();
                cfg.perm &= limit;
                let want = QueueData::from_config("broker-a", &cfg);
                let route = ns.with_routes(|t| t.route_by_topic(topic));
                let got = route
                    .as_ref()
                    .and_then(|r| r.queues.iter().find(|q| q.broker_name == "broker-a"));
                if got != Some(&want) {
                    return Err(format!(
                        "the master has published topic {topic} ({want:?}) and registered since, \
                         yet the name server routes it as {got:?} at {now_ms} ms"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Default for NsWatch {
    fn default() -> Self {
        Self::new()
    }
}
