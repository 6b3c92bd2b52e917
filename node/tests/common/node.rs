//! A spawned `ringmq` process: launch, ready line, logs, stop.

use super::*;

pub use ringmq_testkit::{parse_ready, tempdir, Ready};

static LOG_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A running `ringmq` process (a [`ringmq_testkit::Proc`]: SIGKILLed and reaped on drop;
/// when the test thread is panicking, drop prints the tail of the node's stderr log).
pub struct Node {
    pub name: String,
    proc: ringmq_testkit::Proc,
    pub ready: Ready,
}

/// How to launch a node.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Programs the binary is run through (e.g. `prlimit ... setpriv ...`); each must exec,
    /// so the child's pid stays the node's pid.
    pub prefix: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Launch {
    /// The process to spawn; stderr goes to `<log_dir>/<name>.stderr.log`.
    fn spawn(&self, name: &str, log_dir: &Path) -> ringmq_testkit::Spawn {
        let mut spawn = ringmq_testkit::Spawn::new(name, bin())
            .prefix(&self.prefix)
            .args(&self.args)
            .log(log_dir.join(format!("{name}.stderr.log")));
        for (k, v) in &self.env {
            spawn = spawn.env(k, v);
        }
        spawn.env_default("RUST_LOG", "info")
    }
}

impl Node {
    /// `ringmq standalone` with data under `data`, ephemeral ports, 8 MiB segments, plus
    /// `extra` args. Logs go next to the data dir.
    pub fn standalone(data: &Path, extra: &[&str]) -> Node {
        Node::start(
            "standalone",
            data.parent().unwrap_or(data),
            standalone_launch(data, extra),
        )
    }

    /// `ringmq namesrv` on an ephemeral port.
    pub fn namesrv(log_dir: &Path, extra: &[&str]) -> Node {
        let mut args: Vec<String> = ["namesrv", "--host", "127.0.0.1", "--port", "0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        Node::start(
            "namesrv",
            log_dir,
            Launch {
                args,
                ..Launch::default()
            },
        )
    }

    /// `ringmq broker -c config --namesrv "ns1;ns2"` (+ 8 MiB segments, extra args).
    pub fn broker(log_dir: &Path, config: &Path, namesrvs: &[SocketAddr], extra: &[&str]) -> Node {
        let list = namesrvs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";");
        let mut args: Vec<String> = vec![
            "broker".into(),
            "-c".into(),
            config.display().to_string(),
            "--namesrv".into(),
            list,
            "--host".into(),
            "127.0.0.1".into(),
            "--set".into(),
            SEGMENT_SET.into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Node::start(
            "broker",
            log_dir,
            Launch {
                args,
                ..Launch::default()
            },
        )
    }

    /// Spawns the binary and waits for its ready line (panics with the log otherwise).
    pub fn start(name: &str, log_dir: &Path, launch: Launch) -> Node {
        let name = format!("{name}-{}", LOG_SEQ.fetch_add(1, Ordering::Relaxed));
        let mut proc = launch.spawn(&name, log_dir).start();
        let ready = proc.wait_ready(READY_TIMEOUT);
        Node { name, proc, ready }
    }

    /// Runs the binary expecting it to refuse to start: waits (at most 30 s) for it to exit
    /// without a ready line and returns its exit status and stderr.
    pub fn start_expect_exit(name: &str, log_dir: &Path, launch: Launch) -> (ExitStatus, String) {
        let name = format!("{name}-{}", LOG_SEQ.fetch_add(1, Ordering::Relaxed));
        let out = ringmq_testkit::run(launch.spawn(&name, log_dir), Duration::from_secs(30));
        assert!(
            out.stdout.lines().all(|l| parse_ready(l).is_none()),
            "{name} printed a ready line: {}",
            out.stdout
        );
        (out.status, out.stderr)
    }

    pub fn broker_addr(&self) -> SocketAddr {
        self.ready.broker_addr()
    }

    pub fn namesrv_addr(&self) -> SocketAddr {
        self.ready.namesrv_addr()
    }

    pub fn pid(&self) -> i32 {
        self.proc.pid().map_or(-1, |p| p as i32)
    }

    /// The node's stderr so far.
    pub fn log(&self) -> String {
        self.proc.log()
    }

    /// Prints the stderr log to the test output.
    pub fn dump_log(&self) {
        eprintln!(
            "----- {} stderr ({}) -----\n{}\n----- end {} -----",
            self.name,
            self.proc.log_path().display(),
            self.log(),
            self.name
        );
    }

    /// SIGTERM, then waits (at most 30 s) for the exit status.
    pub fn term(&mut self) -> ExitStatus {
        self.proc.term(Duration::from_secs(30))
    }

    /// SIGKILL, then waits for the process to be gone.
    pub fn kill9(&mut self) -> ExitStatus {
        self.proc.kill9()
    }

    pub fn signal(&self, sig: i32) {
        self.proc
            .signal(nix::sys::signal::Signal::try_from(sig).expect("a valid signal"));
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.proc.wait(timeout)
    }
}

/// The launch of `ringmq standalone` on loopback with ephemeral ports.
pub fn standalone_launch(data: &Path, extra: &[&str]) -> Launch {
    let mut args: Vec<String> = vec![
        "standalone".into(),
        "--data".into(),
        data.display().to_string(),
        "--host".into(),
        "127.0.0.1".into(),
        "--namesrv-port".into(),
        "0".into(),
        "--broker-port".into(),
        "0".into(),
        "--set".into(),
        SEGMENT_SET.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Launch {
        args,
        ..Launch::default()
    }
}

/// The log lines containing `needle` (e.g. `clean shutdown last time`).
pub fn log_lines_containing<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// The metrics endpoint's address from a node's log (`metrics endpoint: http://ADDR/metrics`);
/// panics with the log when it is not there.
pub fn metrics_addr(log: &str) -> SocketAddr {
    log_lines_containing(log, "metrics endpoint: http://")
        .first()
        .and_then(|l| l.split("http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"))
}
