//! A real `ringmq standalone` for one test: a temp data dir, loopback, free ports, killed
//! and removed on drop. RocketMQ clients get the name server address (`127.0.0.1:P`): the
//! remoting protocol is served on the same listeners as the native one.
//!
//! The broker keys make the slow parts of RocketMQ's contract fast enough for a test that
//! must finish in well under a minute: delay level 2 is 3 s (the delay test), every other
//! level 1 s (retries use levels 3, 4, ...), a half message is checked back after 1 s, and
//! SQL92 filters are on.

use std::net::TcpListener;
use std::time::Duration;

use ringmq_testkit::{Proc, Spawn};

/// How long the node may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `messageDelayLevel`: level 2 is 3 s, all others 1 s.
pub const DELAY_LEVELS: &str = "1s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";

/// The delay of level 2 above.
pub const LEVEL_2_DELAY: Duration = Duration::from_secs(3);

/// A running `ringmq standalone` (dropped: killed, its folder removed).
pub struct Node {
    proc: Option<Proc>,
    pub dir: tempfile::TempDir,
    pub namesrv_port: u16,
    pub broker_port: u16,
}

impl Node {
    /// Starts a node on fresh ports with the test broker keys (see the module docs).
    pub fn start() -> Node {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let [namesrv_port, broker_port] = free_ports();
            let mut node = Node {
                proc: None,
                dir: ringmq_testkit::tempdir("interop-rust"),
                namesrv_port,
                broker_port,
            };
            match node.try_spawn() {
                Ok(()) => return node,
                // A port taken by a parallel test in the meantime: other ports.
                Err(e) if attempt < 3 => eprintln!("ringmq start attempt {attempt} failed: {e}"),
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// `127.0.0.1:<name server port>`: what a RocketMQ application is given.
    pub fn namesrv(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    /// The last lines of the node's log (stderr), for failure messages.
    pub fn log_tail(&self) -> String {
        self.proc
            .as_ref()
            .map(|p| p.log_tail(40))
            .unwrap_or_default()
    }

    /// Stops the node (SIGTERM; killed after 15 s) and starts it again on the same ports
    /// and data.
    pub fn restart(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.term_or_kill(Duration::from_secs(15));
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_spawn() {
                Ok(()) => return,
                // The old listeners may linger a moment.
                Err(e) if attempt < 5 => {
                    eprintln!("ringmq restart attempt {attempt} failed: {e}");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let data = self.dir.path().join("data");
        let mut proc = Spawn::new("ringmq", ringmq_testkit::bin::ringmq())
            .log(self.dir.path().join("ringmq.log"))
            .arg("standalone")
            .arg("--data")
            .arg(&data)
            .args(["--host", "127.0.0.1"])
            .args(["--namesrv-port", &self.namesrv_port.to_string()])
            .args(["--broker-port", &self.broker_port.to_string()])
            .args(["--shards", "2"])
            .args(["--set", "mappedFileSizeCommitLog=8388608"])
            .args(["--set", "haListenPort=0"])
            .args(["--set", "enablePropertyFilter=true"])
            .args(["--set", &format!("messageDelayLevel={DELAY_LEVELS}")])
            .args(["--set", "transactionTimeOut=1000"])
            .args(["--set", "transactionCheckInterval=1000"])
            .start();
        proc.try_wait_line(START_TIMEOUT, "its ready line", |l| l.contains("ready"))?;
        self.proc = Some(proc);
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.kill9();
        }
    }
}

/// `N` distinct loopback ports that were free a moment ago (all held while choosing).
fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("binding a loopback port"))
        .collect();
    let mut out = [0u16; N];
    for (o, l) in out.iter_mut().zip(&held) {
        *o = l.local_addr().expect("a bound port").port();
    }
    out
}
