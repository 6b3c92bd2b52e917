//! The embedded controller's keys (name server: `enableControllerInNamesrv`,
//! `controllerDLegerPeers`, `controllerDLegerSelfId`, `controllerStorePath`,
//! `enableElectUncleanMaster`). What they do: `crate::controller`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The controller's settings (name server keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `enableControllerInNamesrv`.
    pub enable: bool,
    /// `controllerDLegerPeers`: `n0-host:port;n1-host:port;...` (id = the number after `n`).
    pub peers: BTreeMap<u64, SocketAddr>,
    /// `controllerDLegerSelfId`: `n<id>`.
    pub self_id: Option<u64>,
    /// `controllerStorePath`: where the Raft log and snapshots live.
    pub store_path: Option<PathBuf>,
    /// `enableElectUncleanMaster`: elect a live broker outside the SyncStateSet when no member
    /// of it is alive (may lose acknowledged messages).
    pub elect_unclean: bool,
}

impl ControllerConfig {
    /// This controller's directory: `<controllerStorePath>/n<id>` (several controllers may
    /// share one `controllerStorePath`).
    pub fn dir(&self) -> PathBuf {
        self.store_path
            .clone()
            .unwrap_or_default()
            .join(format!("n{}", self.self_id.unwrap_or(0)))
    }

    /// Parses `controllerDLegerPeers`.
    pub fn parse_peers(v: &str) -> Result<BTreeMap<u64, SocketAddr>, String> {
        let mut out = BTreeMap::new();
        for part in v.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, addr) = part
                .split_once('-')
                .ok_or_else(|| format!("{part}: expected n<id>-host:port"))?;
            let id = parse_self_id(id)?;
            let addr: SocketAddr = addr
                .parse()
                .map_err(|_| format!("{part}: {addr} is not an IP:port"))?;
            if out.insert(id, addr).is_some() {
                return Err(format!("controller n{id} is listed twice"));
            }
        }
        if out.is_empty() {
            return Err("no controllers listed".into());
        }
        Ok(out)
    }

    /// Checks the settings once all keys are read.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enable {
            return Ok(());
        }
        let id = self
            .self_id
            .ok_or("enableControllerInNamesrv=true needs controllerDLegerSelfId")?;
        if self.peers.is_empty() {
            return Err("enableControllerInNamesrv=true needs controllerDLegerPeers".into());
        }
        if !self.peers.contains_key(&id) {
            return Err(format!(
                "controllerDLegerSelfId n{id} is not in controllerDLegerPeers"
            ));
        }
        if self.store_path.is_none() {
            return Err("enableControllerInNamesrv=true needs controllerStorePath".into());
        }
        Ok(())
    }
}

/// Parses `n<id>`.
pub fn parse_self_id(v: &str) -> Result<u64, String> {
    v.trim()
        .strip_prefix('n')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{v}: expected n<number>, e.g. n0"))
}
