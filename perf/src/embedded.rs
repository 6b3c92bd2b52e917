//! `--embedded`: a standalone node (name server + one master broker, what `ringmq standalone`
//! starts) inside this process, on a temporary directory unless `--embedded-dir` is given.
//!
//! In-process rather than a spawned `ringmq` binary so that one command works from a bare
//! checkout (`cargo run -p ringmq-perf -- produce --embedded`), and so the CPU report can
//! split this process's threads exactly: the node's are named `ringmq-*` (one pinned thread
//! per shard, the name server, the segment preparer), everything else is the load
//! generator. Both halves share the machine's cores; the report says how much each used.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ringmq_node::broker::node as run;
use ringmq_node::broker::shard::start::{BrokerHandle, StartOptions};
use ringmq_node::config::{BrokerConfig, FlushDiskType, NamesrvConfig};
use ringmq_node::net::namesrv::{self, NamesrvHandle};

use crate::args::{EmbeddedArgs, FlushArg};

/// A running in-process node; stopped (gracefully) when dropped.
#[derive(Debug)]
pub struct Embedded {
    /// The name server address to give clients.
    pub namesrv: String,
    pub shards: u16,
    broker: Option<BrokerHandle>,
    ns: Option<NamesrvHandle>,
    _dir: Option<tempfile::TempDir>,
}

impl Embedded {
    /// Starts the name server, then the broker (its shards recover or create the store),
    /// and returns once both listen. Blocking: call it outside the async runtime.
    pub fn start(a: &EmbeddedArgs) -> Result<Embedded, String> {
        let (root, dir) = match &a.embedded_dir {
            Some(d) => (d.clone(), None),
            None => {
                let d = tempfile::Builder::new()
                    .prefix("ringmq-perf-")
                    .tempdir()
                    .map_err(|e| format!("creating a temporary directory: {e}"))?;
                (d.path().join("data"), Some(d))
            }
        };
        let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let fallback = std::env::var("RINGMQ_IO").is_ok_and(|v| v == "epoll" || v == "fallback");
        let ns = namesrv::start(NamesrvConfig::default(), SocketAddr::new(host, 0), fallback)?;
        let mut cfg = BrokerConfig {
            broker_name: "broker-a".to_string(),
            store_path_root_dir: root,
            namesrv_addr: vec![ns.addr.to_string()],
            listen_port: 0,
            shards: a.embedded_shards,
            flush_disk_type: match a.embedded_flush {
                FlushArg::Async => FlushDiskType::AsyncFlush,
                FlushArg::Sync => FlushDiskType::SyncFlush,
            },
            auto_create_topic_enable: true,
            default_topic_queue_nums: 8,
            ..BrokerConfig::default()
        };
        let applied = apply_sets(&mut cfg, &a.embedded_set);
        if let Err(e) = applied {
            ns.stop();
            return Err(e);
        }
        let opts = StartOptions {
            listen: SocketAddr::new(host, 0),
            publish_host: host,
            force_fallback: fallback,
            transfer_msg_by_heap: false,
        };
        let broker = match run::start(cfg, opts) {
            Ok(b) => b,
            Err(e) => {
                ns.stop();
                return Err(format!("starting the embedded broker: {e}"));
            }
        };
        Ok(Embedded {
            namesrv: ns.addr.to_string(),
            shards: broker.broker.shard_count,
            broker: Some(broker),
            ns: Some(ns),
            _dir: dir,
        })
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(b) = self.broker.take() {
            b.stop();
        }
        if let Some(ns) = self.ns.take() {
            ns.stop();
        }
    }
}

fn apply_sets(cfg: &mut BrokerConfig, sets: &[String]) -> Result<(), String> {
    for s in sets {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("--embedded-set {s}: expected KEY=VALUE"))?;
        cfg.set(k.trim(), v.trim(), "--embedded-set")
            .map_err(|e| e.to_string())?;
    }
    cfg.validate().map_err(|e| e.to_string())
}
