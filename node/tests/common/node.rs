//! A spawned `ringmq` process: launch, ready line, logs, stop.

use super::*;

/// Addresses a node printed on its ready line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ready {
    pub namesrv: Option<SocketAddr>,
    pub broker: Option<SocketAddr>,
    pub shards: u16,
}

static LOG_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A running `ringmq` process; SIGKILLed on drop if still alive. When the test thread is
/// panicking, drop prints the tail of the node's stderr log.
pub struct Node {
    pub name: String,
    child: Option<Child>,
    pub ready: Ready,
    pub log_path: PathBuf,
    pub exit: Option<ExitStatus>,
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
        let seq = LOG_SEQ.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(log_dir).expect("creating the log dir");
        let log_path = log_dir.join(format!("{name}-{seq}.stderr.log"));
        let log = std::fs::File::create(&log_path).expect("creating the stderr log");
        let mut cmd = match launch.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        cmd.args(&launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        for (k, v) in &launch.env {
            cmd.env(k, v);
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {} {:?}: {e}", bin(), launch.args));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keep draining stdout so the node never blocks on a full pipe.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut node = Node {
            name: format!("{name}-{seq}"),
            child: Some(child),
            ready: Ready::default(),
            log_path,
            exit: None,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(line) => {
                    if let Some(r) = parse_ready(&line) {
                        node.ready = r;
                        return node;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(100));
                    let status = node
                        .child
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                    panic!(
                        "{} exited before its ready line ({status:?}); stderr:\n{}",
                        node.name,
                        node.log()
                    );
                }
            }
            if let Some(c) = node.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    std::thread::sleep(Duration::from_millis(50));
                    panic!(
                        "{} exited before its ready line ({status}); stderr:\n{}",
                        node.name,
                        node.log()
                    );
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} printed no ready line within {READY_TIMEOUT:?}; stderr:\n{}",
                    node.name,
                    node.log()
                );
            }
        }
    }

    /// Runs the binary expecting it to refuse to start: waits (at most 30 s) for it to exit
    /// without a ready line and returns its exit status and stderr.
    pub fn start_expect_exit(name: &str, log_dir: &Path, launch: Launch) -> (ExitStatus, String) {
        std::fs::create_dir_all(log_dir).expect("creating the log dir");
        let log_path = log_dir.join(format!(
            "{name}-{}.stderr.log",
            LOG_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let log = std::fs::File::create(&log_path).expect("creating the stderr log");
        let out = Command::new(bin())
            .args(&launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawning the binary");
        let mut child = out;
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Ok(Some(s)) = child.try_wait() {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{name} did not exit within 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_string(&mut stdout);
        }
        assert!(
            parse_ready(stdout.lines().next().unwrap_or("")).is_none(),
            "{name} printed a ready line: {stdout}"
        );
        (
            status,
            std::fs::read_to_string(&log_path).unwrap_or_default(),
        )
    }

    pub fn broker_addr(&self) -> SocketAddr {
        self.ready.broker.expect("this node runs a broker")
    }

    pub fn namesrv_addr(&self) -> SocketAddr {
        self.ready.namesrv.expect("this node runs a name server")
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(-1, |c| c.id() as i32)
    }

    /// The node's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Prints the stderr log to the test output.
    pub fn dump_log(&self) {
        eprintln!(
            "----- {} stderr ({}) -----\n{}\n----- end {} -----",
            self.name,
            self.log_path.display(),
            self.log(),
            self.name
        );
    }

    /// SIGTERM, then waits (at most 30 s) for the exit status.
    pub fn term(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{} did not exit within 30 s of SIGTERM", self.name))
    }

    /// SIGKILL, then waits for the process to be gone.
    pub fn kill9(&mut self) -> ExitStatus {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{} survived SIGKILL", self.name))
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.pid();
        if pid > 0 && self.exit.is_none() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::try_from(sig).expect("a valid signal"),
            )
            .unwrap_or_else(|e| panic!("signal {sig} to {}: {e}", self.name));
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.exit {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                self.exit = Some(s);
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.exit.is_none() && !matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "----- {} stderr, last {} lines ({}) -----\n{}\n-----",
                self.name,
                tail.len(),
                self.log_path.display(),
                tail.join("\n")
            );
        }
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

/// Parses the three ready lines `ringmq` prints on stdout.
pub fn parse_ready(line: &str) -> Option<Ready> {
    let addr = |s: &str| s.parse::<SocketAddr>().ok();
    let shards = |s: &str| s.trim_start_matches('(').parse::<u16>().ok();
    if let Some(rest) = line.strip_prefix("ringmq standalone ready: ") {
        // namesrv A broker B (N shards)
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() >= 5 && w[0] == "namesrv" && w[2] == "broker" {
            return Some(Ready {
                namesrv: addr(w[1]),
                broker: addr(w[3]),
                shards: shards(w[4])?,
            });
        }
    } else if let Some(rest) = line.strip_prefix("ringmq namesrv ready: ") {
        return Some(Ready {
            namesrv: addr(rest.trim()),
            broker: None,
            shards: 0,
        });
    } else if let Some(rest) = line.strip_prefix("ringmq broker ready: ") {
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() >= 2 {
            return Some(Ready {
                namesrv: None,
                broker: addr(w[0]),
                shards: shards(w[1])?,
            });
        }
    }
    None
}

/// A fresh temp dir for one test (removed on drop; a failing test prints the node logs).
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ringmq-it-{prefix}-"))
        .tempdir()
        .expect("creating a temp dir")
}

/// The log lines containing `needle` (e.g. `clean shutdown last time`).
pub fn log_lines_containing<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}
