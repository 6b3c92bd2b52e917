//! Each shard's own listener (brokers with more than one shard). The broker port is shared:
//! every shard accepts on it (SO_REUSEPORT), so a connection lands on any shard. A RocketMQ
//! (remoting) client opens one connection per broker address and cannot say which shard it
//! wants, so routes served to remoting clients announce each shard as a broker of its own
//! at the shard's own port (`net::remoting::view`): a connection there is served by that
//! shard, which owns the queues it is asked about, with no forwarding.
//!
//! The ports are `shardListenPorts` when it is set (one per shard, in shard order; each must
//! bind, as a port asked for must), else picked by the system at the first start and kept in
//! `<storePathRootDir>/config/shardPorts` (one line, the ports in shard order), so a restart
//! announces the same addresses; when a kept port cannot be had (another process took it,
//! after waiting `io::net::PORT_BUSY_WAIT`) the shard gets a new one and the file is
//! rewritten. One shard: no extra listener, nothing kept (`shardListenPorts` is reported as
//! ignored).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::io::net as ionet;

/// Binds one listener per shard on `host` (none for one shard): the listeners and their
/// ports, in shard order.
pub fn bind(
    root: &Path,
    host: std::net::IpAddr,
    shards: u16,
    asked: &[u16],
) -> Result<Vec<std::net::TcpListener>, String> {
    if shards <= 1 {
        if !asked.is_empty() {
            log::warn!("shardListenPorts is ignored: this broker has one shard (no shard ports)");
        }
        return Ok(Vec::new());
    }
    if !asked.is_empty() {
        return bind_asked(host, shards, asked);
    }
    let path = file(root);
    let kept = read(&path);
    let mut out = Vec::with_capacity(usize::from(shards));
    for s in 0..usize::from(shards) {
        let want = kept.get(s).copied().unwrap_or(0);
        let listener = match ionet::bind_exclusive(SocketAddr::new(host, want)) {
            Ok(l) => l,
            Err(e) if want != 0 => {
                log::warn!("shard {s}: its port {want} is not free ({e}); taking another");
                ionet::bind_exclusive(SocketAddr::new(host, 0))
                    .map_err(|e| format!("binding shard {s}'s own port: {e}"))?
            }
            Err(e) => return Err(format!("binding shard {s}'s own port: {e}")),
        };
        out.push(listener);
    }
    let ports = out
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<u16>>>()
        .map_err(|e| format!("shard ports: {e}"))?;
    if ports != kept {
        let text = ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        crate::broker::topics::write_atomically(&path, format!("{text}\n").as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(out)
}

/// `shardListenPorts`: exactly one port per shard, each of which must bind.
fn bind_asked(
    host: std::net::IpAddr,
    shards: u16,
    asked: &[u16],
) -> Result<Vec<std::net::TcpListener>, String> {
    if asked.len() != usize::from(shards) {
        return Err(format!(
            "shardListenPorts names {} port(s) for {shards} shards: give one per shard, in shard order",
            asked.len()
        ));
    }
    asked
        .iter()
        .enumerate()
        .map(|(s, &port)| {
            ionet::bind_exclusive(SocketAddr::new(host, port))
                .map_err(|e| format!("shardListenPorts: shard {s}'s port {port}: {e}"))
        })
        .collect()
}

fn file(root: &Path) -> PathBuf {
    root.join("config").join("shardPorts")
}

/// The kept ports; nothing when the file is missing or unreadable (new ports are taken).
fn read(path: &Path) -> Vec<u16> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let ports: Result<Vec<u16>, _> = text.split_whitespace().map(str::parse).collect();
    match ports {
        Ok(p) => p,
        Err(_) => {
            log::warn!("{}: not a list of ports; taking new ones", path.display());
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_kept_across_starts() {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir_all(dir.path().join("config")).expect("config dir");
        let host = std::net::IpAddr::from([127, 0, 0, 1]);
        assert!(bind(dir.path(), host, 1, &[]).expect("binds").is_empty());
        let first: Vec<u16> = bind(dir.path(), host, 2, &[])
            .expect("binds")
            .iter()
            .map(|l| l.local_addr().expect("bound").port())
            .collect();
        assert_eq!(first.len(), 2);
        assert_ne!(first[0], first[1]);
        assert_eq!(read(&file(dir.path())), first);
        let again: Vec<u16> = bind(dir.path(), host, 2, &[])
            .expect("binds")
            .iter()
            .map(|l| l.local_addr().expect("bound").port())
            .collect();
        assert_eq!(again, first);
    }

    #[test]
    fn asked_ports_are_used_exactly_or_refused() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let host = std::net::IpAddr::from([127, 0, 0, 1]);
        // Two free ports, found by binding and letting go.
        let free: Vec<u16> = (0..2)
            .map(|_| {
                std::net::TcpListener::bind((host, 0))
                    .and_then(|l| l.local_addr())
                    .expect("a free port")
                    .port()
            })
            .collect();
        let got: Vec<u16> = bind(dir.path(), host, 2, &free)
            .expect("binds the asked ports")
            .iter()
            .map(|l| l.local_addr().expect("bound").port())
            .collect();
        assert_eq!(got, free);
        let e = bind(dir.path(), host, 2, &free[..1]).expect_err("one port for two shards");
        assert!(e.contains("1 port(s) for 2 shards"), "{e}");
        let taken = std::net::TcpListener::bind((host, 0)).expect("a listener");
        let port = taken.local_addr().expect("bound").port();
        let e = bind(dir.path(), host, 2, &[port, free[0]]).expect_err("a taken port");
        assert!(e.contains(&format!("shard 0's port {port}")), "{e}");
        assert!(bind(dir.path(), host, 1, &free)
            .expect("ignored")
            .is_empty());
    }
}
