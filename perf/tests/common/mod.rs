//! Real processes for the perf tests: a `ringmq standalone` node (the debug binary, built if
//! missing) on ephemeral loopback ports, and `ringmq-perf` runs with their exit code,
//! output and JSON result.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Segment size for test nodes: small, so a start does not pre-write 1 GiB per shard.
pub const SEGMENT_BYTES: u64 = 8 << 20;

pub fn ringmq_bin() -> PathBuf {
    static BUILD: Once = Once::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug").join("ringmq");
    BUILD.call_once(|| {
        if !bin.exists() {
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "ringmq-node", "--bin", "ringmq"])
                .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
                .status()
                .expect("running cargo build for the ringmq binary");
            assert!(status.success(), "building the ringmq binary failed");
        }
    });
    bin
}

pub fn perf_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringmq-perf")
}

/// A `ringmq standalone` process; SIGKILLed when dropped unless stopped.
pub struct Node {
    child: Option<Child>,
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
        let mut cmd = Command::new(ringmq_bin());
        cmd.arg("standalone")
            .arg("--data")
            .arg(data)
            .args(["--namesrv-port", &ports.0.to_string()])
            .args(["--broker-port", &ports.1.to_string(), "--shards", "2"])
            .args(["--set", &format!("mappedFileSizeCommitLog={SEGMENT_BYTES}")])
            .args(["--set", "haListenPort=0"]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning ringmq standalone");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the ready line");
        // "ringmq standalone ready: namesrv 127.0.0.1:P broker 127.0.0.1:Q (N shards)"
        let namesrv = line
            .split_whitespace()
            .skip_while(|w| *w != "namesrv")
            .nth(1)
            .unwrap_or_else(|| panic!("no name server address in {line:?}"))
            .to_string();
        Node {
            child: Some(child),
            namesrv,
            data: data.to_path_buf(),
        }
    }

    /// SIGKILL: no flush, no checkpoint (the page cache keeps what was written).
    pub fn kill(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM (graceful: flush, checkpoint) and wait for the exit.
    pub fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the node did not stop within 20 s of SIGTERM");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
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

/// Starts `ringmq-perf args...` (see [`finish`]).
pub fn spawn_perf(args: &[&str]) -> Child {
    Command::new(perf_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning ringmq-perf")
}

/// Waits (at most `limit`) for a run [`spawn_perf`] started.
pub fn finish(mut child: Child, args: &[&str], limit: Duration) -> Run {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ringmq-perf {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collecting perf output");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
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
