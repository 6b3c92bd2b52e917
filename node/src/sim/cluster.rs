//! The simulated deployment: a name server, a master broker and, by the run's mode, a slave,
//! each a node of the world. Brokers have their own [`FaultDisk`] and are started through the
//! same `open_shard` / `run` as a real broker ([`crate::broker::node::start_sim`]), crashed
//! with `kill -9` or power-loss semantics and restarted from what its disk kept. The name
//! server is the real one ([`crate::net::namesrv::start_sim`]): in memory, so a restart
//! starts it empty, as a real one does.

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::broker::node::start_sim;
use crate::broker::shard::start::SimBroker;
use crate::broker::shard::Shard;
use crate::config::{BrokerConfig, BrokerRole, FlushDiskType, NamesrvConfig};
use crate::io::node_disk::SimDisk;
use crate::io::sim::{NodeId, World};
use crate::net::namesrv::{start_sim as start_namesrv, SimNamesrv};
use crate::store::fault_disk::{Crash, FaultDisk};

pub const MASTER: NodeId = 1;
pub const SLAVE: NodeId = 2;
pub const NAMESRV: NodeId = 3;
pub const CLIENTS: NodeId = 10;

pub const MASTER_ADDR: ([u8; 4], u16) = ([10, 0, 1, 1], 10911);
pub const SLAVE_ADDR: ([u8; 4], u16) = ([10, 0, 2, 1], 10911);
pub const NAMESRV_ADDR: ([u8; 4], u16) = ([10, 0, 3, 1], 9876);

/// RocketMQ's timing (brokers register every 30 s, a name server drops a broker silent for
/// 120 s, scanning every 10 s; clients refresh routes every 30 s) scaled down 60x, so expiry
/// happens within a run: `registerNameServerPeriod`.
pub const REGISTER_PERIOD_MS: u64 = 500;
/// `brokerChannelExpiredTime` (4 registration periods, as RocketMQ's 120 s / 30 s).
pub const BROKER_EXPIRY_MS: u64 = 2_000;
/// `scanNotActiveBrokerInterval`.
pub const NAMESRV_SCAN_MS: u64 = 250;
/// How often a simulated client fetches the routes it uses again.
pub const ROUTE_REFRESH_MS: u64 = 500;

/// What a run deploys (drawn from its seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub flush: FlushDiskType,
    pub role: BrokerRole,
    pub slave: bool,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}{}",
            self.role.name(),
            self.flush.as_str(),
            if self.slave { "+slave" } else { "" }
        )
    }
}

/// A scenario's one master (ASYNC_MASTER at [`MASTER_ADDR`]), its data under `scratch`.
pub struct LoneMaster {
    pub node: BrokerNode,
    dir: PathBuf,
}

impl LoneMaster {
    /// Starts it with `flush` and `extra` broker.properties lines (`key=value\n`...), in a
    /// directory named after the scenario, the process and the seed.
    pub fn start(
        world: &World,
        scratch: &Path,
        scenario: &str,
        seed: u64,
        flush: FlushDiskType,
        extra: &str,
    ) -> Result<Self, String> {
        let dir = scratch.join(format!(
            "ringmq-sim-{scenario}-{}-{seed}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mode = Mode {
            flush,
            role: BrokerRole::AsyncMaster,
            slave: false,
        };
        let mut node = BrokerNode::with_settings(
            MASTER,
            SocketAddr::from(MASTER_ADDR),
            &dir.join("master"),
            mode,
            None,
            extra,
        )?;
        node.start(world)?;
        Ok(LoneMaster { node, dir })
    }

    /// Kills the clients' node and the master, and removes the data.
    pub fn finish(mut self, world: &World) {
        world.kill_node(CLIENTS);
        world.kill_node(MASTER);
        self.node.running = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One broker node: its disk (which outlives crashes) and, while up, its running broker.
pub struct BrokerNode {
    pub id: NodeId,
    pub addr: SocketAddr,
    pub root: PathBuf,
    pub disk: FaultDisk,
    pub sync_us: Rc<Cell<u64>>,
    pub running: Option<SimBroker>,
    config: BrokerConfig,
}

/// The deployment's brokers (and lone masters) keep 4 KiB of log in memory, so consumers
/// any further behind read released bytes the direct way (`broker::shard::catch_up`, in
/// 4 KiB chunks) through crashes and restarts. The failover scenario's brokers keep the
/// default: its seed windows for planted bugs were found with it.
const KEEP_LITTLE: &str = "commitLogCacheKeepBytes=4096\n";

impl BrokerNode {
    pub fn new(
        id: NodeId,
        addr: SocketAddr,
        root: &Path,
        mode: Mode,
        master_ha: Option<SocketAddr>,
    ) -> Result<Self, String> {
        Self::with_settings(id, addr, root, mode, master_ha, "")
    }

    /// A broker of the deployment: it registers with the name server at `namesrv` every
    /// [`REGISTER_PERIOD_MS`]; a slave learns its master's HA address from the registration
    /// answer (no `haMasterAddress`), as in production.
    pub fn registered(
        id: NodeId,
        addr: SocketAddr,
        root: &Path,
        mode: Mode,
        slave: bool,
        namesrv: SocketAddr,
    ) -> Result<Self, String> {
        let role = if slave { "SLAVE" } else { mode.role.name() };
        let props = format!(
            "brokerId={}\nbrokerRole={role}\nnamesrvAddr={namesrv}\n\
             registerNameServerPeriod={REGISTER_PERIOD_MS}\n{KEEP_LITTLE}",
            u8::from(slave),
        );
        Self::build(id, addr, root, mode, &props)
    }

    /// A broker in controller mode (`enableControllerMode`): its role comes from the
    /// controllers at `controllers`; it registers with the name servers `namesrvs` (the
    /// same nodes). `extra` adds `broker.properties` lines (`key=value\n`...).
    pub fn controlled(
        id: NodeId,
        addr: SocketAddr,
        root: &Path,
        flush: FlushDiskType,
        broker_id: u64,
        controllers: &str,
        extra: &str,
    ) -> Result<Self, String> {
        let mode = Mode {
            flush,
            role: BrokerRole::SyncMaster,
            slave: true,
        };
        let props = format!(
            "brokerId={broker_id}\nbrokerRole=SYNC_MASTER\nnamesrvAddr={controllers}\n\
             registerNameServerPeriod={REGISTER_PERIOD_MS}\nenableControllerMode=true\n\
             controllerAddr={controllers}\n{extra}"
        );
        Self::build(id, addr, root, mode, &props)
    }

    /// [`Self::new`] with more `broker.properties` lines (`key=value\n`...).
    pub fn with_settings(
        id: NodeId,
        addr: SocketAddr,
        root: &Path,
        mode: Mode,
        master_ha: Option<SocketAddr>,
        extra: &str,
    ) -> Result<Self, String> {
        let role = if master_ha.is_some() {
            "SLAVE"
        } else {
            mode.role.name()
        };
        let props = format!(
            "brokerId={}\nbrokerRole={role}\n{KEEP_LITTLE}{}{extra}",
            u8::from(master_ha.is_some()),
            master_ha
                .map(|a| format!("haMasterAddress={a}\n"))
                .unwrap_or_default(),
        );
        Self::build(id, addr, root, mode, &props)
    }

    /// The simulator's broker settings plus `props` (`key=value\n`...: id, role, ...).
    fn build(
        id: NodeId,
        addr: SocketAddr,
        root: &Path,
        mode: Mode,
        props: &str,
    ) -> Result<Self, String> {
        let props = format!(
            "brokerClusterName=SimCluster\nbrokerName=broker-a\n\
             flushDiskType={}\nstorePathRootDir={}\nflushIntervalCommitLog=200\n\
             syncFlushTimeout=2000\nautoCreateTopicEnable=true\nwarmMapedFileEnable=false\n\
             mappedFileSizeConsumeQueue=2000\nmappedFileSizeCommitLog=8388608\n{props}",
            mode.flush.as_str(),
            root.display(),
        );
        let loaded = BrokerConfig::from_properties_str(&props, "simulator")
            .map_err(|e| format!("simulator broker config: {e}"))?;
        std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
        Ok(BrokerNode {
            id,
            addr,
            root: root.to_path_buf(),
            disk: FaultDisk::new(),
            sync_us: Rc::new(Cell::new(100)),
            running: None,
            config: loaded.config,
        })
    }

    /// Starts the broker on its disk as it is now (recovery runs if it crashed).
    pub fn start(&mut self, world: &World) -> Result<(), String> {
        world.revive(self.id);
        let disk = SimDisk {
            disk: self.disk.clone(),
            sync_us: Rc::clone(&self.sync_us),
        };
        let config = self.config.clone();
        let addr = self.addr;
        let b = world.as_node(self.id, || start_sim(config, addr, disk))?;
        self.running = Some(b);
        Ok(())
    }

    /// Ends the node at once; its disk keeps what `crash` says survives. The broker is
    /// restarted by [`Self::start`].
    pub fn crash(&mut self, world: &World, crash: Crash) {
        world.kill_node(self.id);
        // The image first: nothing the dropped broker's destructors do may reach the disk
        // that survives (a killed process runs no destructors).
        let image = self.disk.image(crash);
        self.disk = FaultDisk::from_image(&image);
        self.running = None;
    }

    /// The running shard, if the node is up.
    pub fn shard(&self) -> Option<&Rc<Shard>> {
        self.running.as_ref().and_then(|b| b.shards.first())
    }

    pub fn is_up(&self, world: &World) -> bool {
        self.running.is_some() && !world.is_dead(self.id)
    }
}

/// The name server node: the real request handling and expiry scan, in memory.
pub struct NamesrvNode {
    pub addr: SocketAddr,
    pub running: Option<SimNamesrv>,
    /// Virtual ms of the last (re)start: its table is empty from then on.
    pub started_ms: u64,
}

impl NamesrvNode {
    pub fn new() -> Self {
        NamesrvNode {
            addr: SocketAddr::from(NAMESRV_ADDR),
            running: None,
            started_ms: 0,
        }
    }

    /// The name server's configuration in the simulator (scaled timing, see the consts).
    pub fn config() -> NamesrvConfig {
        NamesrvConfig {
            scan_not_active_broker_interval_ms: NAMESRV_SCAN_MS,
            broker_channel_expired_time_ms: BROKER_EXPIRY_MS,
            ..NamesrvConfig::default()
        }
    }

    /// Starts it (empty, as any start of an in-memory name server).
    pub fn start(&mut self, world: &World) -> Result<(), String> {
        world.revive(NAMESRV);
        let addr = self.addr;
        let ns = world.as_node(NAMESRV, || start_namesrv(Self::config(), addr, None))?;
        self.running = Some(ns);
        self.started_ms = world.now_ns() / 1_000_000;
        Ok(())
    }

    /// `kill -9`: its table is gone.
    pub fn kill(&mut self, world: &World) {
        world.kill_node(NAMESRV);
        self.running = None;
    }

    pub fn is_up(&self, world: &World) -> bool {
        self.running.is_some() && !world.is_dead(NAMESRV)
    }
}

impl Default for NamesrvNode {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the record at `queue_offset` of queue 0 of `topic` ends in `shard`'s log.
pub(crate) fn record_end(
    shard: &crate::broker::shard::Shard,
    topic: &str,
    queue_offset: u64,
) -> Result<u64, String> {
    let store = shard.store.borrow();
    let r = store
        .get(topic, 0, queue_offset, 1, u64::MAX, |_| true)
        .map_err(|e| e.to_string())?;
    let run = r.runs.first().ok_or(format!("no record {queue_offset}"))?;
    Ok(run.physical_offset + u64::from(run.len))
}
