//! Test harness for `ringmq-ctl`: a real `ringmq standalone` in a temporary folder on
//! loopback ports it picks itself (read from its ready line), killed when dropped; and a
//! runner for the `ringmq-ctl` binary with a deadline, returning its exit code, stdout and
//! stderr, with helpers to parse tables and JSON.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the node may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one `ringmq-ctl` run may take before the test fails.
pub const CTL_TIMEOUT: Duration = Duration::from_secs(30);

/// The `ringmq` server binary of this workspace, built if missing.
pub fn server_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug").join("ringmq");
    if !bin.exists() {
        // Another build may be replacing it right now: give it a moment first.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !bin.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    if !bin.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "ringmq-node", "--bin", "ringmq"])
            .current_dir(&root)
            .status();
        assert!(
            bin.exists(),
            "the ringmq server binary is missing at {} and `cargo build -p ringmq-node --bin ringmq` \
             did not produce it ({status:?}); build the workspace first",
            bin.display()
        );
    }
    bin
}

/// A running `ringmq standalone` (2 shards, 8 MiB segments).
pub struct Node {
    child: Child,
    pub dir: tempfile::TempDir,
    pub namesrv: String,
    pub broker: String,
}

impl Node {
    pub fn start() -> Node {
        Self::start_with(&[])
    }

    /// Starts a node with extra broker keys (`key=value`, each passed as `--set`).
    pub fn start_with(sets: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("ringmq.log")).unwrap();
        let mut child = spawn_server(dir.path(), log, sets);
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("ready") {
                    let _ = tx.send(line);
                }
            }
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "ringmq did not start within {START_TIMEOUT:?}; log:\n{}",
                    std::fs::read_to_string(dir.path().join("ringmq.log")).unwrap_or_default()
                );
            }
        };
        // "ringmq standalone ready: namesrv 127.0.0.1:P broker 127.0.0.1:Q (N shards)"
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |w: &str| {
            let i = words.iter().position(|x| *x == w).unwrap();
            words[i + 1].to_string()
        };
        Node {
            namesrv: after("namesrv"),
            broker: after("broker"),
            child,
            dir,
        }
    }

    /// Runs `ringmq-ctl -n <this node> args...`.
    pub fn ctl(&self, args: &[&str]) -> Out {
        let mut all = vec!["-n", self.namesrv.as_str()];
        all.extend_from_slice(args);
        ctl(&all)
    }

    /// Runs a command that must succeed with `--json`; its parsed output.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.ctl(&all);
        out.ok(args);
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: output is not JSON ({e}):\n{}", out.stdout))
    }

    /// Runs a command that must succeed; its table.
    pub fn table(&self, args: &[&str]) -> Table {
        let out = self.ctl(args);
        out.ok(args);
        Table::parse(&out.stdout)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_server(dir: &Path, log: std::fs::File, sets: &[&str]) -> Child {
    let mut tries = 0;
    loop {
        let mut cmd = Command::new(server_binary());
        cmd.arg("standalone")
            .arg("--data")
            .arg(dir.join("data"))
            .args(["--namesrv-port", "0", "--broker-port", "0", "--shards", "2"])
            .args(["--set", "mappedFileSizeCommitLog=8388608"]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let r = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.try_clone().unwrap()))
            .spawn();
        match r {
            Ok(c) => return c,
            // A concurrent build may be swapping the binary.
            Err(e) if tries < 50 && e.kind() == std::io::ErrorKind::NotFound => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("starting ringmq: {e}"),
        }
    }
}

/// What one `ringmq-ctl` run did.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Out {
    /// Panics (with the output) unless the command succeeded.
    pub fn ok(&self, args: &[&str]) -> &Self {
        assert_eq!(
            self.code, 0,
            "ringmq-ctl {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Panics unless the command failed with one stderr line starting `ringmq-ctl: `.
    pub fn failed_one_line(&self, args: &[&str]) -> &str {
        assert_ne!(
            self.code, 0,
            "ringmq-ctl {args:?} succeeded:\n{}",
            self.stdout
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "{args:?}: stderr is not one line:\n{}",
            self.stderr
        );
        assert!(lines[0].starts_with("ringmq-ctl: "), "{}", lines[0]);
        lines[0]
    }
}

/// Runs `ringmq-ctl args...` (no `-n` added, `RINGMQ_NAMESRV` unset), killed after
/// [`CTL_TIMEOUT`].
pub fn ctl(args: &[&str]) -> Out {
    ctl_env(args, &[])
}

/// [`ctl`] with environment variables set.
pub fn ctl_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let start = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq-ctl"));
    cmd.args(args).env_remove("RINGMQ_NAMESRV");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if start.elapsed() > CTL_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringmq-ctl {args:?} did not finish within {CTL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Out {
        code,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
        elapsed: start.elapsed(),
    }
}

/// A list table: its header words and its rows (cells split on runs of 2+ spaces).
#[derive(Debug)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Every section after the first, the same way.
    pub more: Vec<Table>,
}

impl Table {
    pub fn parse(text: &str) -> Table {
        let mut sections = text.split("\n\n").map(|block| {
            let mut lines = block.lines().filter(|l| !l.is_empty());
            let header = lines
                .next()
                .map(|h| h.split_whitespace().map(String::from).collect())
                .unwrap_or_default();
            let rows = lines.map(split_cells).collect();
            Table {
                header,
                rows,
                more: Vec::new(),
            }
        });
        let mut first = sections.next().unwrap();
        first.more = sections.collect();
        first
    }

    /// Asserts the header is exactly these column names.
    pub fn assert_header(&self, want: &[&str]) {
        assert_eq!(self.header, want, "table header");
    }

    /// The value of `column` in every row.
    pub fn column(&self, column: &str) -> Vec<String> {
        let i = self
            .header
            .iter()
            .position(|h| h == column)
            .unwrap_or_else(|| panic!("no column {column} in {:?}", self.header));
        self.rows.iter().map(|r| r[i].clone()).collect()
    }
}

/// A record table (`HEADER  value` lines) as pairs.
pub fn record(text: &str) -> Vec<(String, String)> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cells = split_cells(l);
            (cells[0].clone(), cells.get(1).cloned().unwrap_or_default())
        })
        .collect()
}

fn split_cells(line: &str) -> Vec<String> {
    line.trim()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}
