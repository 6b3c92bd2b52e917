//! The deployment `ringmq-perf failover` runs against: three name servers with embedded
//! controllers (one Raft group) and one broker set of three brokers in controller mode, each
//! a `ringmq` process on loopback ports chosen once (a restarted broker comes back on its
//! ports), data and logs under one directory:
//!
//! ```text
//! DIR/controllers/          the controllers' Raft logs
//! DIR/broker-N/store/       broker N's store; DIR/broker-N/broker.properties
//! DIR/logs/NAME.K.log       stdout and stderr of the K-th start of NAME
//! ```
//!
//! Every process is SIGKILLed when the deployment is dropped (a run that ends normally stops
//! them with SIGTERM first).

use std::fs::{self, File};
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::args::{FailoverArgs, SEGMENT_BYTES_DEFAULT};

/// Broker set and cluster names of the deployment.
pub const BROKER_NAME: &str = "broker-f";
pub const CLUSTER: &str = "FailoverCluster";
/// Brokers of the set (ids 1..=BROKERS) and controllers.
pub const BROKERS: u64 = 3;
const CONTROLLERS: usize = 3;
/// How long a process may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a SIGTERMed process may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One `ringmq` process, its log and how often it was started.
#[derive(Debug)]
struct Proc {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    starts: u32,
}

/// One broker of the set.
#[derive(Debug)]
pub struct Broker {
    pub id: u64,
    pub addr: SocketAddr,
    config: PathBuf,
    proc: Proc,
}

#[derive(Debug)]
pub struct Deployment {
    bin: PathBuf,
    pub dir: PathBuf,
    tmp: Option<tempfile::TempDir>,
    controllers: Vec<Proc>,
    pub controller_addrs: Vec<SocketAddr>,
    pub brokers: Vec<Broker>,
    shards: u16,
}

impl Deployment {
    /// Writes the configs and starts the three controllers, then the three brokers; returns
    /// once every process printed its ready line (the set has no master yet).
    pub fn start(a: &FailoverArgs) -> Result<Deployment, String> {
        let bin = match &a.ringmq {
            Some(p) => p.clone(),
            None => beside_this_executable("ringmq")?,
        };
        if !bin.is_file() {
            return Err(format!(
                "no ringmq binary at {} (give --ringmq PATH)",
                bin.display()
            ));
        }
        let (dir, tmp) = match &a.data {
            Some(d) => {
                fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("ringmq-perf-failover-")
                    .tempdir()
                    .map_err(|e| format!("creating a temporary directory: {e}"))?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        fs::create_dir_all(dir.join("logs")).map_err(|e| format!("{}: {e}", dir.display()))?;
        let ports = free_ports(CONTROLLERS + 2 * BROKERS as usize)?;
        let controller_addrs: Vec<SocketAddr> = ports[..CONTROLLERS]
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect();
        let mut d = Deployment {
            bin,
            dir,
            tmp,
            controllers: Vec::new(),
            controller_addrs,
            brokers: Vec::new(),
            shards: a.shards,
        };
        let peers = d
            .controller_addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("n{i}-{a}"))
            .collect::<Vec<_>>()
            .join(";");
        for i in 0..CONTROLLERS {
            let mut p = Proc::new(&d.dir, &format!("controller-{i}"));
            let args = vec![
                "namesrv".to_string(),
                "--host".into(),
                "127.0.0.1".into(),
                "--port".into(),
                d.controller_addrs[i].port().to_string(),
                "--set".into(),
                "enableControllerInNamesrv=true".into(),
                "--set".into(),
                format!("controllerDLegerPeers={peers}"),
                "--set".into(),
                format!("controllerDLegerSelfId=n{i}"),
                "--set".into(),
                format!(
                    "controllerStorePath={}",
                    d.dir.join("controllers").display()
                ),
            ];
            p.spawn(&d.bin, &args)?;
            d.controllers.push(p);
        }
        for p in &mut d.controllers {
            p.wait_ready("ringmq namesrv ready:")?;
        }
        let list = d.addr_list();
        for id in 1..=BROKERS {
            let i = CONTROLLERS + 2 * (id as usize - 1);
            let (port, ha_port) = (ports[i], ports[i + 1]);
            let home = d.dir.join(format!("broker-{id}"));
            fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
            let config = home.join("broker.properties");
            let text = broker_properties(a, id, port, ha_port, &home, &list);
            fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
            d.brokers.push(Broker {
                id,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                config,
                proc: Proc::new(&d.dir, &format!("broker-{id}")),
            });
        }
        for id in 1..=BROKERS {
            d.spawn_broker(id, &a.broker_set)?;
        }
        for b in &mut d.brokers {
            b.proc.wait_ready("ringmq broker ready:")?;
        }
        Ok(d)
    }

    /// `host:port;host:port;host:port` of the controllers (also the name servers).
    pub fn addr_list(&self) -> String {
        self.controller_addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";")
    }

    pub fn broker(&self, id: u64) -> Option<&Broker> {
        self.brokers.iter().find(|b| b.id == id)
    }

    /// SIGKILL of broker `id` (no flush, no goodbye); returns once the process is gone.
    pub fn kill9(&mut self, id: u64) -> Result<(), String> {
        let b = self.broker_mut(id)?;
        b.proc.kill9()
    }

    /// Starts broker `id` again (same ports, same store) and waits for its ready line.
    pub fn restart(&mut self, id: u64, sets: &[String]) -> Result<(), String> {
        self.spawn_broker(id, sets)?;
        self.broker_mut(id)?.proc.wait_ready("ringmq broker ready:")
    }

    /// Whether every process is still running; else which one exited, and its log's end.
    pub fn check_alive(&mut self) -> Result<(), String> {
        for p in self
            .controllers
            .iter_mut()
            .chain(self.brokers.iter_mut().map(|b| &mut b.proc))
        {
            p.check_alive()?;
        }
        Ok(())
    }

    /// Stops every process (SIGTERM, then SIGKILL after a grace period).
    pub fn stop(&mut self) {
        for b in &mut self.brokers {
            b.proc.stop();
        }
        for c in &mut self.controllers {
            c.stop();
        }
    }

    /// Keeps the directory after the run (a failed run leaves its logs to read).
    pub fn keep(&mut self) {
        if let Some(t) = self.tmp.take() {
            let _ = t.keep();
        }
    }

    /// Whether the directory is removed when the deployment is dropped.
    pub fn is_temporary(&self) -> bool {
        self.tmp.is_some()
    }

    /// The last `n` lines of every log of broker `id`'s starts and of the controllers.
    pub fn log_tails(&self, n: usize) -> String {
        let mut out = String::new();
        let procs = self
            .controllers
            .iter()
            .chain(self.brokers.iter().map(|b| &b.proc));
        for p in procs {
            for k in 1..=p.starts {
                let path = p.log_path(k);
                out.push_str(&format!("==> {} <==\n", path.display()));
                out.push_str(&tail(&path, n));
            }
        }
        out
    }

    fn spawn_broker(&mut self, id: u64, sets: &[String]) -> Result<(), String> {
        let bin = self.bin.clone();
        let list = self.addr_list();
        let shards = self.shards.to_string();
        let b = self.broker_mut(id)?;
        let mut args = vec![
            "broker".to_string(),
            "-c".into(),
            b.config.display().to_string(),
            "--namesrv".into(),
            list,
            "--host".into(),
            "127.0.0.1".into(),
            "--shards".into(),
            shards,
        ];
        for s in sets {
            args.push("--set".into());
            args.push(s.clone());
        }
        b.proc.spawn(&bin, &args)
    }

    fn broker_mut(&mut self, id: u64) -> Result<&mut Broker, String> {
        self.brokers
            .iter_mut()
            .find(|b| b.id == id)
            .ok_or_else(|| format!("no broker with id {id} in the set"))
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for p in self
            .brokers
            .iter_mut()
            .map(|b| &mut b.proc)
            .chain(self.controllers.iter_mut())
        {
            let _ = p.kill9();
        }
    }
}

/// broker.properties of broker `id` (RocketMQ keys).
fn broker_properties(
    a: &FailoverArgs,
    id: u64,
    port: u16,
    ha_port: u16,
    home: &Path,
    controllers: &str,
) -> String {
    let role = if a.async_master {
        "ASYNC_MASTER"
    } else {
        "SYNC_MASTER"
    };
    let mut text = format!(
        "# written by ringmq-perf failover\n\
         brokerClusterName={CLUSTER}\n\
         brokerName={BROKER_NAME}\n\
         brokerId={id}\n\
         brokerRole={role}\n\
         listenPort={port}\n\
         haListenPort={ha_port}\n\
         storePathRootDir={}\n\
         flushDiskType=ASYNC_FLUSH\n\
         enableControllerMode=true\n\
         controllerAddr={controllers}\n\
         haSendHeartbeatInterval=200\n\
         mappedFileSizeCommitLog={SEGMENT_BYTES_DEFAULT}\n",
        home.join("store").display(),
    );
    if !a.async_master {
        text.push_str("allAckInSyncStateSet=true\n");
    }
    text
}

impl Proc {
    fn new(dir: &Path, name: &str) -> Proc {
        Proc {
            name: name.to_string(),
            child: None,
            log: dir.join("logs").join(name),
            starts: 0,
        }
    }

    fn log_path(&self, start: u32) -> PathBuf {
        self.log.with_extension(format!("{start}.log"))
    }

    fn spawn(&mut self, bin: &Path, args: &[String]) -> Result<(), String> {
        self.starts += 1;
        let path = self.log_path(self.starts);
        let out = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let child = Command::new(bin)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or("info".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {} ({}): {e}", self.name, bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the current start's log has a line beginning with `prefix`.
    fn wait_ready(&mut self, prefix: &str) -> Result<(), String> {
        let path = self.log_path(self.starts);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let mut text = String::new();
            if let Ok(mut f) = File::open(&path) {
                let _ = f.read_to_string(&mut text);
            }
            if text.lines().any(|l| l.starts_with(prefix)) {
                return Ok(());
            }
            self.check_alive()?;
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} printed no ready line within {READY_TIMEOUT:?}; {}:\n{}",
                    self.name,
                    path.display(),
                    tail(&path, 40)
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn check_alive(&mut self) -> Result<(), String> {
        let Some(c) = &mut self.child else {
            return Ok(());
        };
        match c.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                let path = self.log_path(self.starts);
                Err(format!(
                    "{} exited ({status}); {}:\n{}",
                    self.name,
                    path.display(),
                    tail(&path, 40)
                ))
            }
            Ok(None) => Ok(()),
            Err(e) => Err(format!("{}: {e}", self.name)),
        }
    }

    fn kill9(&mut self) -> Result<(), String> {
        let Some(mut c) = self.child.take() else {
            return Ok(());
        };
        c.kill()
            .map_err(|e| format!("killing {}: {e}", self.name))?;
        c.wait()
            .map_err(|e| format!("waiting for {}: {e}", self.name))?;
        Ok(())
    }

    fn stop(&mut self) {
        let Some(c) = &mut self.child else { return };
        let pid = nix::unistd::Pid::from_raw(c.id() as i32);
        if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok() {
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    self.child = None;
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.kill9();
    }
}

/// `name` in the directory of the running executable.
fn beside_this_executable(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this executable's path: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| format!("{} has no directory", exe.display()))?;
    Ok(dir.join(name))
}

/// `n` loopback ports that were free a moment ago (bound together, then released, so the
/// processes can be told each other's ports before they start).
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let held = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("finding a free port: {e}"))?;
    held.iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| format!("finding a free port: {e}"))
        })
        .collect()
}

/// The last `n` lines of a file ("" if unreadable).
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    let mut out = lines[from..].join("\n");
    out.push('\n');
    out
}
