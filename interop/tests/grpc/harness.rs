//! What the gRPC interop tests share: real `ringmq` processes on loopback (every port,
//! gRPC included, picked by the process), the Python SDK's interpreter, and running one of
//! the scripts beside this file under a deadline.

#![allow(dead_code)] // each test file uses part of it

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ringmq_testkit::{bin, run, Proc, Spawn};

/// How long a process may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A `ringmq standalone` with the broker keys `sets`: the guard, the name server address
/// and the gRPC address.
pub fn standalone(dir: &Path, sets: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let (node, ready, grpc) = standalone_ready(dir, sets);
    (node, ready.namesrv_addr(), grpc)
}

/// [`standalone`], with its whole ready line (the broker's native address too).
pub fn standalone_ready(dir: &Path, sets: &[&str]) -> (Proc, ringmq_testkit::Ready, SocketAddr) {
    let mut node = Spawn::new("ringmq", bin::ringmq())
        .args(["standalone", "--data"])
        .arg(dir.join("data"))
        .args([
            "--namesrv-port",
            "0",
            "--broker-port",
            "0",
            "--grpc-port",
            "0",
        ])
        .args(["--shards", "2"])
        // 8 MiB CommitLog segments: the 1 GiB default reserves GiBs of disk per test.
        .args(["--set", "mappedFileSizeCommitLog=8388608"])
        .args(sets.iter().flat_map(|k| ["--set", k]))
        .env_default("RUST_LOG", "info")
        .log(dir.join("ringmq.log"))
        .start();
    let grpc = grpc_line(&mut node);
    let ready = node.wait_ready(START_TIMEOUT);
    (node, ready, grpc)
}

/// The remote ends of the TCP connections process `pid` holds (from `/proc/PID/fd` and
/// `/proc/net/tcp{,6}`; listeners are left out).
pub fn tcp_peers(pid: u32) -> Vec<SocketAddr> {
    let mut inodes = std::collections::BTreeSet::new();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the node's descriptors");
    for fd in fds.flatten() {
        if let Ok(link) = std::fs::read_link(fd.path()) {
            let link = link.to_string_lossy().into_owned();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
            {
                inodes.insert(inode.to_string());
            }
        }
    }
    let mut peers = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if cols.len() < 10 || cols[3] == "0A" || !inodes.contains(cols[9]) {
                continue;
            }
            if let Some(addr) = proc_net_addr(cols[2]) {
                peers.push(addr);
            }
        }
    }
    peers
}

/// `0100007F:1F90` (IPv4, little-endian words) or the 32-digit IPv6 form, as /proc/net/tcp
/// writes addresses.
fn proc_net_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).map(u32::swap_bytes))
        .collect::<Result<_, _>>()
        .ok()?;
    let ip: std::net::IpAddr = match words.as_slice() {
        [w] => std::net::Ipv4Addr::from(*w).into(),
        [a, b, c, d] => {
            let v6 = std::net::Ipv6Addr::from(
                (u128::from(*a) << 96)
                    | (u128::from(*b) << 64)
                    | (u128::from(*c) << 32)
                    | u128::from(*d),
            );
            v6.to_ipv4_mapped().map_or(v6.into(), Into::into)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// `ringmq namesrv` on a free port: the guard and its address.
pub fn namesrv(dir: &Path) -> (Proc, SocketAddr) {
    let mut ns = Spawn::new("namesrv", bin::ringmq())
        .args(["namesrv", "--host", "127.0.0.1", "--port", "0"])
        .env_default("RUST_LOG", "info")
        .log(dir.join("namesrv.log"))
        .start();
    let line = ns.wait_line(START_TIMEOUT, "its ready line", |l| {
        l.starts_with("ringmq namesrv ready: ")
    });
    let addr = line["ringmq namesrv ready: ".len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("name server address in {line:?}: {e}"));
    (ns, addr)
}

/// `ringmq broker -c broker.properties` named `name` in cluster `cluster`, registered with
/// `namesrv`, its gRPC edge on a free port (`grpcServerPort=0`): the guard, its native
/// address and its gRPC address.
pub fn broker(
    dir: &Path,
    cluster: &str,
    name: &str,
    namesrv: SocketAddr,
) -> (Proc, SocketAddr, SocketAddr) {
    let home = dir.join(name);
    std::fs::create_dir_all(&home).expect("the broker's directory");
    let config = home.join("broker.properties");
    std::fs::write(
        &config,
        format!(
            "brokerClusterName={cluster}\nbrokerName={name}\nbrokerId=0\nlistenPort=0\n\
             grpcServerPort=0\nstorePathRootDir={}\nmappedFileSizeCommitLog=8388608\n\
             flushDiskType=ASYNC_FLUSH\n",
            home.join("store").display()
        ),
    )
    .expect("writing broker.properties");
    let mut b = Spawn::new(name, bin::ringmq())
        .arg("broker")
        .arg("-c")
        .arg(&config)
        .args(["--namesrv", &namesrv.to_string(), "--host", "127.0.0.1"])
        .args(["--shards", "1"])
        .env_default("RUST_LOG", "info")
        .log(home.join("ringmq.log"))
        .start();
    let grpc = grpc_line(&mut b);
    let ready = b.wait_ready(START_TIMEOUT);
    (b, ready.broker_addr(), grpc)
}

fn grpc_line(p: &mut Proc) -> SocketAddr {
    let line = p.wait_line(START_TIMEOUT, "its gRPC line", |l| {
        l.starts_with("ringmq grpc: ")
    });
    line["ringmq grpc: ".len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("gRPC address in {line:?}: {e}"))
}

/// Runs `interop/tests/grpc/<script>` with `args` under `limit`; its stdout, or a panic with
/// its output and the tails of `logs` (the nodes' logs).
pub fn script(
    dir: &Path,
    script: &str,
    args: &[String],
    limit: Duration,
    logs: &[&Proc],
) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    script_env(dir, script, &args, &[], limit, logs)
}

/// [`script`] with more environment variables.
pub fn script_env(
    dir: &Path,
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
    logs: &[&Proc],
) -> String {
    let python = python();
    let mut spawn = Spawn::new(script, &python)
        .arg(scripts_dir().join(script))
        .args(args.iter().copied())
        .env("HOME", dir)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .log(dir.join(format!("{script}.stderr.log")));
    for (k, v) in env {
        spawn = spawn.env(k, v);
    }
    let out = run(spawn, limit);
    if out.code != 0 {
        let nodes: String = logs
            .iter()
            .map(|p| format!("----- node log (last 40 lines) -----\n{}\n", p.log_tail(40)))
            .collect();
        panic!(
            "{script} failed (exit {}, {:.1?})\n----- stdout -----\n{}----- stderr (last 60 \
             lines) -----\n{}\n{nodes}-----",
            out.code,
            out.elapsed,
            out.stdout,
            ringmq_testkit::tail(&out.stderr, 60),
        );
    }
    print!("{}", out.stdout);
    out.stdout
}

pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("grpc")
}

/// The interpreter of the SDK's Python environment; fails the test when the SDK is missing.
pub fn python() -> PathBuf {
    let python = match std::env::var_os("RINGMQ_GRPC_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/ringmq/grpc-python/bin/python")
        }
    };
    let ok = Command::new(&python)
        .args(["-c", "import rocketmq.v5, grpc"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "RocketMQ 5's Python SDK is missing at {}: run scripts/test.sh (it creates that venv), \
         or set RINGMQ_GRPC_PYTHON",
        python.display()
    );
    python
}

/// A tokio runtime for the native client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
