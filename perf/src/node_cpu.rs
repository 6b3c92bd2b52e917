//! The node's CPU time over a run, from the best source there is:
//!
//! 1. `--embedded`: the node's threads in this process ([`crate::threads`]).
//! 2. A broker process on this machine: `/proc/<pid>/stat` (user + system, every thread,
//!    exited ones included). The pid is `--node-pid` (repeatable), else found from the
//!    broker's address: the listening socket of that address and port in
//!    `/proc/net/tcp{,6}`, then the process holding that socket (`/proc/*/fd`). Only
//!    addresses of this machine are looked up (one that a socket can be bound to).
//! 3. Otherwise the broker's own count, `processCpuTimeMs` in GET_BROKER_RUNTIME_INFO.
//!
//! Every broker the run discovered is counted (a master and its slaves on one machine add
//! up); when one broker has no source, the node's CPU is unknown (`None`), never a partial
//! sum presented as the whole.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use ringmq_client::Admin;

use crate::broker_info::BrokerView;

/// `/proc` reports CPU time in USER_HZ ticks, 100 per second on every Linux ABI.
const TICKS_PER_S: f64 = 100.0;
/// The runtime-info key a broker reports its process CPU time under (user + system, ms).
pub const PROCESS_CPU_KEY: &str = "processCpuTimeMs";
/// TCP state LISTEN in `/proc/net/tcp`.
const TCP_LISTEN: &str = "0A";

/// Where the node's CPU time comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The node runs in this process: its threads.
    Embedded,
    /// Local broker processes.
    Pids(Vec<u32>),
    /// The brokers' runtime info.
    RuntimeInfo(Vec<SocketAddr>),
    /// No source for at least one broker.
    Unknown,
}

impl Source {
    /// Picks the source for `brokers`: `embedded`, the given pids, local processes, or
    /// runtime info (each broker that is not local must report [`PROCESS_CPU_KEY`]).
    pub async fn pick(
        embedded: bool,
        pids: &[u32],
        brokers: &[BrokerView],
        admin: &Admin,
    ) -> Source {
        if embedded {
            return Source::Embedded;
        }
        if !pids.is_empty() {
            return Source::Pids(pids.to_vec());
        }
        if brokers.is_empty() {
            return Source::Unknown;
        }
        let own = std::process::id();
        let mut found = BTreeSet::new();
        let mut remote = Vec::new();
        for b in brokers {
            match local_pid(b.addr) {
                Some(p) if p == own => return Source::Unknown,
                Some(p) => {
                    found.insert(p);
                }
                None => remote.push(b.addr),
            }
        }
        if remote.is_empty() {
            return Source::Pids(found.into_iter().collect());
        }
        if !found.is_empty() {
            // Mixed: count every broker by its runtime info, so all figures come from one
            // kind of source.
            remote = brokers.iter().map(|b| b.addr).collect();
        }
        for &addr in &remote {
            if runtime_cpu_s(admin, addr).await.is_none() {
                return Source::Unknown;
            }
        }
        Source::RuntimeInfo(remote)
    }

    /// What the report calls it.
    pub fn describe(&self) -> Option<String> {
        match self {
            Source::Embedded => Some("embedded node threads".into()),
            Source::Pids(p) => Some(format!(
                "/proc of pid {}",
                p.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            )),
            Source::RuntimeInfo(_) => Some(format!("broker runtime info ({PROCESS_CPU_KEY})")),
            Source::Unknown => None,
        }
    }

    /// CPU seconds of the node's processes now; `None` for [`Source::Embedded`] (the thread
    /// sample has it), [`Source::Unknown`], or when a process or broker did not answer.
    pub async fn sample(&self, admin: &Admin) -> Option<f64> {
        match self {
            Source::Pids(pids) => {
                let mut sum = 0.0;
                for p in pids {
                    sum += process_cpu_s(*p)?;
                }
                Some(sum)
            }
            Source::RuntimeInfo(addrs) => {
                let mut sum = 0.0;
                for &a in addrs {
                    sum += runtime_cpu_s(admin, a).await?;
                }
                Some(sum)
            }
            Source::Embedded | Source::Unknown => None,
        }
    }
}

/// User + system CPU seconds of process `pid`.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may hold spaces; fields after it are plain: state(0)
    // ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(11) stime(12).
    let rest = text.get(text.rfind(')')? + 2..)?;
    let mut f = rest.split_whitespace().skip(11);
    let utime: f64 = f.next()?.parse().ok()?;
    let stime: f64 = f.next()?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_S)
}

async fn runtime_cpu_s(admin: &Admin, addr: SocketAddr) -> Option<f64> {
    let info = admin.runtime_info(addr).await.ok()?;
    let ms: f64 = info.extra.get(PROCESS_CPU_KEY)?.parse().ok()?;
    Some(ms / 1000.0)
}

/// The pid of the process on this machine listening on `addr`, if there is one.
pub fn local_pid(addr: SocketAddr) -> Option<u32> {
    if !is_local_ip(addr.ip()) {
        return None;
    }
    let inode = listen_inode(addr)?;
    socket_owner(inode)
}

/// An address of this machine: one a socket can be bound to.
fn is_local_ip(ip: IpAddr) -> bool {
    ip.is_loopback() || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// The inode of the socket listening on `addr` (or on the wildcard address, same port).
fn listen_inode(addr: SocketAddr) -> Option<u64> {
    let files: &[&str] = match addr.ip() {
        IpAddr::V4(_) => &["/proc/net/tcp", "/proc/net/tcp6"],
        IpAddr::V6(_) => &["/proc/net/tcp6"],
    };
    let mut wildcard = None;
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let Some((ip, port, inode)) = parse_listen_line(line) else {
                continue;
            };
            if port != addr.port() {
                continue;
            }
            if ip == addr.ip() || v4_mapped(ip) == Some(addr.ip()) {
                return Some(inode);
            }
            if ip.is_unspecified() {
                wildcard = Some(inode);
            }
        }
    }
    wildcard
}

fn v4_mapped(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
        IpAddr::V4(_) => None,
    }
}

/// (local ip, local port, inode) of a LISTEN line of `/proc/net/tcp{,6}`.
fn parse_listen_line(line: &str) -> Option<(IpAddr, u16, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    if f.get(3)? != &TCP_LISTEN {
        return None;
    }
    let (ip_hex, port_hex) = f.get(1)?.split_once(':')?;
    let port = u16::from_str_radix(port_hex, 16).ok()?;
    let inode: u64 = f.get(9)?.parse().ok()?;
    Some((parse_proc_ip(ip_hex)?, port, inode))
}

/// `/proc/net/tcp` prints addresses as 32-bit words in host byte order (little-endian here).
fn parse_proc_ip(hex: &str) -> Option<IpAddr> {
    let word = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_ne_bytes);
    match hex.len() {
        8 => Some(IpAddr::from(word(hex)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(hex.get(i * 8..i * 8 + 8)?)?);
            }
            Some(IpAddr::from(b))
        }
        _ => None,
    }
}

/// The process holding socket `inode` (the first found; a forked child may share it).
fn socket_owner(inode: u64) -> Option<u32> {
    let want = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};

    #[test]
    fn proc_addresses() {
        assert_eq!(
            parse_proc_ip("0100007F"),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        assert_eq!(
            parse_proc_ip("00000000000000000000000001000000"),
            Some(IpAddr::V6(Ipv6Addr::LOCALHOST))
        );
        let line = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 123456 1 0000000000000000 100 0 0 10 0";
        assert_eq!(
            parse_listen_line(line),
            Some((IpAddr::V4(Ipv4Addr::LOCALHOST), 8080, 123456))
        );
        let established = line.replace(" 0A ", " 01 ");
        assert_eq!(parse_listen_line(&established), None);
    }

    #[test]
    fn own_listener_is_found() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert_eq!(local_pid(addr), Some(std::process::id()));
        drop(l);
        assert_eq!(local_pid(addr), None);
        assert!(process_cpu_s(std::process::id()).is_some());
    }

    #[test]
    fn remote_addresses_are_not_looked_up() {
        // TEST-NET-1 (RFC 5737): never an address of this machine.
        assert!(!is_local_ip("192.0.2.1".parse().unwrap()));
        assert_eq!(local_pid("192.0.2.1:10911".parse().unwrap()), None);
    }
}
