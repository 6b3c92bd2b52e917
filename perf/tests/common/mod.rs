//! Real processes for the perf tests, on the workspace's process guard
//! (`ringmq_testkit::Proc`): a `ringmq standalone` node (the workspace's binary, built if
//! missing) on ephemeral loopback ports, and `ringmq-perf` runs with their exit code,
//! output and JSON result.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use ringmq_testkit::{Proc, Spawn};

/// How long a node may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Segment size for test nodes: small, so a start does not pre-write 1 GiB per shard.
pub const SEGMENT_BYTES: u64 = 8 << 20;

/// The `ringmq` server binary of this workspace (see `ringmq_testkit::bin`).
pub fn ringmq_bin() -> PathBuf {
    ringmq_testkit::bin::ringmq()
}

pub fn perf_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringmq-perf")
}

/// A `ringmq standalone` process on the workspace's process guard (SIGKILLed when dropped
/// unless stopped; its stderr, `<data>.log`, printed when a test fails).
pub struct Node {
    proc: Proc,
    pub namesrv: String,
    pub data: PathBuf,
}

impl Node {
    pub fn start(data: &Path) -> Node {
        Node::start_with(data, &[])
    }

    /// A node with more broker keys (`key=value`, RocketMQ spelling).
    pub fn start_with(data: &Path, sets: &[&str]) -> Node {
        Node::start_at(data, (0, 0), sets)
    }

    /// A node on these (name server, broker) ports (0: any free one), e.g. to start it
    /// again where its clients expect it after [`Node::kill`].
    pub fn start_at(data: &Path, ports: (u16, u16), sets: &[&str]) -> Node {
        let mut spawn = Spawn::new("ringmq", ringmq_bin())
            .arg("standalone")
            .arg("--data")
            .arg(data)
            .args(["--namesrv-port", &ports.0.to_string()])
            .args(["--broker-port", &ports.1.to_string(), "--shards", "2"])
            // No gRPC listener on the fixed default port (8081) that parallel tests share.
            .args(["--grpc-port", "0"])
            .args(["--set", &format!("mappedFileSizeCommitLog={SEGMENT_BYTES}")])
            .args(["--set", "haListenPort=0"])
            .env("RUST_LOG", "warn")
            .log(data.with_extension("log"));
        for s in sets {
            spawn = spawn.args(["--set", s]);
        }
        let mut proc = spawn.start();
        let ready = proc.wait_ready(START_TIMEOUT);
        Node {
            proc,
            namesrv: ready.namesrv_addr().to_string(),
            data: data.to_path_buf(),
        }
    }

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid().expect("the node is running")
    }

    /// SIGKILL: no flush, no checkpoint (the page cache keeps what was written).
    pub fn kill(mut self) {
        self.proc.kill9();
    }

    /// SIGTERM (graceful: flush, checkpoint) and wait for the exit.
    pub fn stop(mut self) {
        self.proc.term(Duration::from_secs(20));
    }
}

/// Two loopback ports that were free a moment ago.
pub fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a port");
    let b = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a port");
    let port = |l: &std::net::TcpListener| l.local_addr().expect("a bound address").port();
    (port(&a), port(&b))
}

/// A finished `ringmq-perf` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `ringmq-perf args...` (at most 60 s).
pub fn perf(args: &[&str]) -> Run {
    finish(spawn_perf(args), args, Duration::from_secs(60))
}

/// The environment variables of the TLS and credential flags.
pub const SECURITY_ENV: [&str; 6] = [
    "RINGMQ_TLS",
    "RINGMQ_CA",
    "RINGMQ_TLS_CERT",
    "RINGMQ_TLS_KEY",
    "RINGMQ_ACCESS_KEY",
    "RINGMQ_SECRET_KEY",
];

/// Starts `ringmq-perf args...` (see [`finish`]); killed if dropped unfinished.
pub fn spawn_perf(args: &[&str]) -> Proc {
    spawn_perf_env(args, &[])
}

/// [`spawn_perf`] with environment variables set (the caller's [`SECURITY_ENV`] never
/// leaks into a run).
pub fn spawn_perf_env(args: &[&str], env: &[(&str, &str)]) -> Proc {
    let mut spawn = Spawn::new("ringmq-perf", perf_bin())
        .args(args)
        .env("RUST_LOG", "warn");
    for k in SECURITY_ENV {
        spawn = spawn.env_remove(k);
    }
    for (k, v) in env {
        spawn = spawn.env(k, v);
    }
    spawn.start()
}

/// [`perf`] with environment variables set.
pub fn perf_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    finish(spawn_perf_env(args, env), args, Duration::from_secs(60))
}

/// Waits (at most `limit`) for a run [`spawn_perf`] started.
pub fn finish(proc: Proc, args: &[&str], limit: Duration) -> Run {
    let out = proc.finish(limit);
    let run = Run {
        code: out.code,
        stdout: out.stdout,
        stderr: out.stderr,
    };
    eprintln!(
        "--- ringmq-perf {args:?} -> {}\n{}{}",
        run.code, run.stdout, run.stderr
    );
    run
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the result is JSON")
}

/// Checks the stable top-level fields of a result and returns (messages, errors).
pub fn check_stable_fields(doc: &serde_json::Value) -> (u64, u64) {
    for f in ["messages", "bytes", "errors"] {
        assert!(doc[f].is_u64(), "{f} missing in {doc}");
    }
    for f in ["elapsed_s", "msgs_per_s", "mb_per_s"] {
        assert!(doc[f].is_number(), "{f} missing in {doc}");
    }
    let l = &doc["latency_us"];
    let p: Vec<u64> = ["p50", "p90", "p99", "p999", "p9999", "max"]
        .iter()
        .map(|k| {
            l[k].as_u64()
                .unwrap_or_else(|| panic!("latency_us.{k} missing"))
        })
        .collect();
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "percentiles not ordered: {p:?}"
    );
    let messages = doc["messages"].as_u64().unwrap();
    let bytes = doc["bytes"].as_u64().unwrap();
    let elapsed = doc["elapsed_s"].as_f64().unwrap();
    let rate = doc["msgs_per_s"].as_f64().unwrap();
    let mb = doc["mb_per_s"].as_f64().unwrap();
    if messages > 0 {
        assert!(elapsed > 0.0 && elapsed < 120.0, "elapsed_s {elapsed}");
        assert!(p[0] >= 1, "p50 of {messages} messages is 0");
        let expect = messages as f64 / elapsed;
        assert!(
            (rate - expect).abs() <= expect * 0.01 + 1.0,
            "msgs_per_s {rate} vs {expect}"
        );
        let expect_mb = bytes as f64 / 1e6 / elapsed;
        assert!(
            (mb - expect_mb).abs() <= expect_mb * 0.01 + 0.01,
            "mb_per_s {mb} vs {expect_mb}"
        );
    }
    (messages, doc["errors"].as_u64().unwrap())
}

/// Acknowledged messages in a verify log: its lines but the header (a torn last line would
/// not parse as five fields).
pub fn acked_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| {
        t.lines()
            .filter(|l| !l.starts_with('#') && l.split_whitespace().count() == 5)
            .count()
    })
}
