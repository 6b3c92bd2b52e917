//! Test harness for `ringmq-ctl`: a real `ringmq standalone` in a temporary folder on
//! loopback ports it picks itself (read from its ready line), killed when dropped (the
//! workspace's process guard, `ringmq_testkit::Proc`); and a runner for the `ringmq-ctl` binary with a deadline, returning its exit code, stdout and
//! stderr, with helpers to parse tables and JSON.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use ringmq_testkit::{Proc, Spawn};
use serde_json::Value;

/// How long the node may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one `ringmq-ctl` run may take before the test fails.
pub const CTL_TIMEOUT: Duration = Duration::from_secs(30);

/// The `ringmq` server binary of this workspace (see `ringmq_testkit::bin`).
pub fn server_binary() -> PathBuf {
    ringmq_testkit::bin::ringmq()
}

/// A running `ringmq standalone` (2 shards, 8 MiB segments) on the workspace's process
/// guard (killed when dropped; its stderr, `<dir>/ringmq.log`, printed when a test fails).
pub struct Node {
    proc: Proc,
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
        let mut spawn = Spawn::new("ringmq", server_binary())
            .arg("standalone")
            .arg("--data")
            .arg(dir.path().join("data"))
            .args(["--namesrv-port", "0", "--broker-port", "0", "--shards", "2"])
            .args(["--set", "mappedFileSizeCommitLog=8388608"])
            .log(dir.path().join("ringmq.log"));
        for s in sets {
            spawn = spawn.args(["--set", s]);
        }
        let mut proc = spawn.start();
        let ready = proc.wait_ready(START_TIMEOUT);
        Node {
            namesrv: ready.namesrv_addr().to_string(),
            broker: ready.broker_addr().to_string(),
            proc,
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

pub use ringmq_testkit::split::Split;

/// `ringmq-ctl` against a [`Split`]'s name server.
pub trait SplitCtl {
    /// Runs `ringmq-ctl -n <this name server> args...`.
    fn ctl(&self, args: &[&str]) -> Out;
}

impl SplitCtl for Split {
    fn ctl(&self, args: &[&str]) -> Out {
        let mut all = vec!["-n", self.namesrv.as_str()];
        all.extend_from_slice(args);
        ctl(&all)
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

/// The environment variables of the TLS and credential flags.
pub const SECURITY_ENV: [&str; 6] = [
    "RINGMQ_TLS",
    "RINGMQ_CA",
    "RINGMQ_TLS_CERT",
    "RINGMQ_TLS_KEY",
    "RINGMQ_ACCESS_KEY",
    "RINGMQ_SECRET_KEY",
];

/// Runs `ringmq-ctl args...` (no `-n` added, `RINGMQ_NAMESRV` and [`SECURITY_ENV`] unset),
/// killed after [`CTL_TIMEOUT`].
pub fn ctl(args: &[&str]) -> Out {
    ctl_env(args, &[])
}

/// [`ctl`] with environment variables set.
pub fn ctl_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut spawn = Spawn::new("ringmq-ctl", env!("CARGO_BIN_EXE_ringmq-ctl"))
        .args(args)
        .env_remove("RINGMQ_NAMESRV");
    // The caller's TLS and credential settings must not leak into a test's run.
    for k in SECURITY_ENV {
        spawn = spawn.env_remove(k);
    }
    for (k, v) in env {
        spawn = spawn.env(k, v);
    }
    let out = ringmq_testkit::run(spawn, CTL_TIMEOUT);
    Out {
        code: out.code,
        stdout: out.stdout,
        stderr: out.stderr,
        elapsed: out.elapsed,
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
