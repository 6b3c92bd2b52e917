//! The simulated deployment: a master broker and, by the run's mode, a slave, each a node of
//! the world with its own [`FaultDisk`]; started through the same `open_shard` / `run` as a
//! real broker ([`crate::shard::start::start_sim`]), crashed with `kill -9` or power-loss
//! semantics and restarted from what its disk kept.

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::config::{BrokerConfig, BrokerRole, FlushDiskType};
use crate::io::node_disk::SimDisk;
use crate::io::sim::{NodeId, World};
use crate::shard::start::{start_sim, SimBroker};
use crate::shard::Shard;
use crate::store::fault_disk::{Crash, FaultDisk};

pub const MASTER: NodeId = 1;
pub const SLAVE: NodeId = 2;
pub const CLIENTS: NodeId = 10;

pub const MASTER_ADDR: ([u8; 4], u16) = ([10, 0, 1, 1], 10911);
pub const SLAVE_ADDR: ([u8; 4], u16) = ([10, 0, 2, 1], 10911);

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
            "brokerClusterName=SimCluster\nbrokerName=broker-a\nbrokerId={}\nbrokerRole={role}\n\
             flushDiskType={}\nstorePathRootDir={}\nflushIntervalCommitLog=200\n\
             syncFlushTimeout=2000\nautoCreateTopicEnable=true\nwarmMapedFileEnable=false\n\
             mappedFileSizeConsumeQueue=2000\nmappedFileSizeCommitLog=8388608\n{}{extra}",
            u8::from(master_ha.is_some()),
            mode.flush.as_str(),
            root.display(),
            master_ha
                .map(|a| format!("haMasterAddress={a}\n"))
                .unwrap_or_default(),
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
