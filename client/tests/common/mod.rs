//! Test harness: a real `ringmq standalone` process in a temporary folder, on loopback, on
//! ports picked for it (kept across a restart), on the workspace's process guard
//! (`ringmq_testkit::Proc`: killed when dropped). Its stderr goes to `<dir>/ringmq.log`,
//! whose tail is printed when a test fails.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use ringmq_testkit::{Proc, Spawn};

use ringmq_client::Admin;

/// How long the node may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The `ringmq` binary of this workspace (see `ringmq_testkit::bin`).
pub fn binary() -> PathBuf {
    ringmq_testkit::bin::ringmq()
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` distinct loopback ports that were free a moment ago (all held while choosing).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut out = [0u16; N];
    for (o, l) in out.iter_mut().zip(&held) {
        *o = l.local_addr().unwrap().port();
    }
    out
}

/// A running `ringmq standalone`, or (see [`Node::start_broker`]) a `ringmq broker` that
/// registers with another node's name server.
pub struct Node {
    proc: Option<Proc>,
    pub dir: tempfile::TempDir,
    pub namesrv_port: u16,
    pub broker_port: u16,
    pub shards: usize,
    /// `Some(name)`: an extra broker of this name, not a standalone node.
    broker_name: Option<String>,
    /// Extra broker keys, passed as `--set key=value`.
    sets: Vec<String>,
}

impl Node {
    /// Starts a node with 2 shards on fresh ports.
    pub fn start() -> Node {
        Self::start_with(2)
    }

    /// Starts a node on fresh ports.
    pub fn start_with(shards: usize) -> Node {
        Self::start_configured(shards, &[])
    }

    /// Starts a node on fresh ports with extra broker keys (`key=value`, each passed as
    /// `--set`).
    pub fn start_configured(shards: usize, sets: &[&str]) -> Node {
        let [namesrv_port, broker_port] = free_ports();
        Self::launch(Node {
            proc: None,
            dir: tempfile::tempdir().unwrap(),
            namesrv_port,
            broker_port,
            shards,
            broker_name: None,
            sets: sets.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// A second broker (`broker_name`, 2 shards) registering with `standalone`'s name
    /// server.
    pub fn start_broker(standalone: &Node, broker_name: &str) -> Node {
        Self::launch(Node {
            proc: None,
            dir: tempfile::tempdir().unwrap(),
            namesrv_port: standalone.namesrv_port,
            broker_port: free_port(),
            shards: 2,
            broker_name: Some(broker_name.to_string()),
            sets: Vec::new(),
        })
    }

    /// Spawns `node`; a start that fails (a port taken in the meantime by a parallel test) is
    /// tried again on other ports. A broker keeps its name server's port.
    fn launch(mut node: Node) -> Node {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match node.try_spawn() {
                Ok(()) => return node,
                Err(e) if attempt < 3 => {
                    eprintln!("ringmq start attempt {attempt} failed: {e}");
                    let [namesrv_port, broker_port] = free_ports();
                    if node.broker_name.is_none() {
                        node.namesrv_port = namesrv_port;
                    }
                    node.broker_port = broker_port;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Kills the process at once (SIGKILL): no clean shutdown, no unregistering.
    pub fn kill(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.kill9();
        }
    }

    /// `127.0.0.1:<namesrv port>`.
    pub fn namesrv(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("ringmq.log")
    }

    fn spawn(&mut self) {
        if let Err(e) = self.try_spawn() {
            panic!("{e}");
        }
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let data = self.dir.path().join("data");
        let mut spawn = Spawn::new("ringmq", binary()).log(self.log_path());
        match &self.broker_name {
            None => {
                spawn = spawn
                    .arg("standalone")
                    .arg("--data")
                    .arg(&data)
                    .args(["--namesrv-port", &self.namesrv_port.to_string()])
                    .args(["--broker-port", &self.broker_port.to_string()]);
            }
            Some(name) => {
                let conf = self.dir.path().join("broker.properties");
                std::fs::write(
                    &conf,
                    format!(
                        "brokerClusterName=DefaultCluster\nbrokerName={name}\nbrokerId=0\n\
                         namesrvAddr=127.0.0.1:{}\nlistenPort={}\nstorePathRootDir={}\n",
                        self.namesrv_port,
                        self.broker_port,
                        data.display()
                    ),
                )
                .unwrap();
                spawn = spawn
                    .arg("broker")
                    .arg("-c")
                    .arg(&conf)
                    .args(["--host", "127.0.0.1"]);
            }
        }
        for s in &self.sets {
            spawn = spawn.args(["--set", s]);
        }
        let mut proc = spawn
            .args(["--shards", &self.shards.to_string()])
            .args(["--set", "mappedFileSizeCommitLog=8388608"])
            // Any free HA port: the default, listenPort + 1, may be taken by a parallel test.
            .args(["--set", "haListenPort=0"])
            .start();
        // A failed start (a port taken meanwhile) drops `proc`: killed and reaped.
        let line = proc.try_wait_line(START_TIMEOUT, "its ready line", |l| l.contains("ready"))?;
        assert!(
            line.contains(&format!("127.0.0.1:{}", self.broker_port)),
            "{line}"
        );
        self.proc = Some(proc);
        Ok(())
    }

    /// Graceful stop: SIGTERM, then kill after 15 s.
    pub fn stop(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.term_or_kill(Duration::from_secs(15));
        }
    }

    /// Starts the node again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Creates a topic and waits for its route.
    pub async fn create_topic(&self, topic: &str, queues: u32) {
        let admin = Admin::connect(&self.namesrv()).await.unwrap();
        admin
            .create_topic(topic, queues, Duration::from_secs(10))
            .await
            .unwrap();
    }
}

/// The queues of `topic` that `c` consumes now (its assignment also holds its group's retry
/// queue).
pub fn owned_queues(
    c: &ringmq_client::PushConsumer,
    topic: &str,
) -> std::collections::BTreeSet<ringmq_client::MessageQueue> {
    c.assignment()
        .into_iter()
        .filter(|q| q.topic == topic)
        .collect()
}

/// How many queues of `topic` `c` consumes now.
pub fn owned(c: &ringmq_client::PushConsumer, topic: &str) -> usize {
    owned_queues(c, topic).len()
}

/// Polls `cond` until it holds or `limit` passes; false on timeout.
pub async fn wait_until(limit: Duration, cond: impl FnMut() -> bool) -> bool {
    ringmq_testkit::poll_until_async(limit, cond).await
}

/// Bodies a push consumer's listener saw, in delivery order.
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// The body of a test message, which is always UTF-8 text.
pub fn body(m: &ringmq_client::ReceivedMessage) -> String {
    String::from_utf8(m.body.to_vec()).unwrap()
}

/// The distinct bodies in `seen`.
pub fn distinct(seen: &Seen) -> std::collections::BTreeSet<String> {
    seen.lock().unwrap().iter().cloned().collect()
}

/// A producer (group `test-producers`) with default settings.
pub async fn producer(node: &Node) -> ringmq_client::Producer {
    ringmq_client::Producer::builder()
        .group("test-producers")
        .name_server(node.namesrv())
        .start()
        .await
        .unwrap()
}

/// A pull consumer of `group` with default settings, for reading queues and offsets.
pub async fn reader(node: &Node, group: &str) -> ringmq_client::PullConsumer {
    ringmq_client::PullConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .start()
        .await
        .unwrap()
}

/// Starts `builder` with a listener that records every body it consumes.
pub async fn start_collecting(
    builder: ringmq_client::consumer::PushConsumerBuilder,
) -> (ringmq_client::PushConsumer, Seen) {
    let seen: Seen = Default::default();
    let sink = seen.clone();
    let c = builder
        .start(move |msgs: Vec<ringmq_client::ReceivedMessage>, _ctx| {
            let sink = sink.clone();
            async move {
                let mut s = sink.lock().unwrap();
                s.extend(msgs.iter().map(body));
                ringmq_client::ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    (c, seen)
}

/// A push consumer with test-speed timers that records every body it consumes.
pub async fn collecting_consumer(
    node: &Node,
    group: &str,
    topic: &str,
    model: ringmq_client::MessageModel,
    start: ringmq_client::StartPosition,
    instance: &str,
) -> (ringmq_client::PushConsumer, Seen) {
    start_collecting(
        fast_push(node, group, instance)
            .subscribe(topic, "*")
            .message_model(model)
            .start_position(start)
            .offset_dir(node.dir.path().join("offsets")),
    )
    .await
}

/// [`collecting_consumer`] in clustering mode, from the first message of each queue.
pub async fn clustering_consumer(
    node: &Node,
    group: &str,
    topic: &str,
    instance: &str,
) -> (ringmq_client::PushConsumer, Seen) {
    collecting_consumer(
        node,
        group,
        topic,
        ringmq_client::MessageModel::Clustering,
        ringmq_client::StartPosition::First,
        instance,
    )
    .await
}

/// A push consumer builder with test-speed timers.
pub fn fast_push(
    node: &Node,
    group: &str,
    instance: &str,
) -> ringmq_client::consumer::PushConsumerBuilder {
    ringmq_client::PushConsumer::builder()
        .group(group)
        .name_server(node.namesrv())
        .instance_name(instance)
        .heartbeat_interval(Duration::from_millis(200))
        .rebalance_interval(Duration::from_millis(300))
        .commit_interval(Duration::from_millis(200))
        .long_poll(Duration::from_secs(2))
        .redeliver_backoff(Duration::from_millis(100))
        .pull_error_backoff(Duration::from_millis(100))
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
}

/// Sends `bodies` one by one (sync) and returns them.
pub async fn send_all(
    p: &ringmq_client::Producer,
    topic: &str,
    bodies: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for b in bodies {
        p.send(ringmq_client::Message::new(topic, b.clone()))
            .await
            .unwrap();
        out.push(b);
    }
    out
}

/// True once every body of `want` is in `seen`.
pub fn covers(seen: &Seen, want: &[String]) -> bool {
    missing(seen, want).is_empty()
}

/// How many deliveries in `seen` repeat an earlier one.
pub fn duplicates(seen: &Seen) -> usize {
    let seen = seen.lock().unwrap();
    let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for b in seen.iter() {
        *count.entry(b).or_default() += 1;
    }
    count.values().map(|n| n - 1).sum()
}

/// The bodies of `want` that are not in `seen`, in `want`'s order.
pub fn missing(seen: &Seen, want: &[String]) -> Vec<String> {
    let s = distinct(seen);
    want.iter().filter(|w| !s.contains(*w)).cloned().collect()
}

/// Every message now in `topic` (every queue from offset 0), in queue order.
pub async fn read_all(
    c: &ringmq_client::PullConsumer,
    topic: &str,
) -> Vec<ringmq_client::ReceivedMessage> {
    let mut out = Vec::new();
    for mq in c.fetch_queues(topic).await.unwrap() {
        let mut offset = 0;
        loop {
            let r = c.pull(&mq, offset, 64, "*").await.unwrap();
            if r.status != ringmq_client::consumer::PullStatus::Found {
                break;
            }
            offset = r.next_offset;
            out.extend(r.messages);
        }
    }
    out
}

/// Waits until the name servers of `node` list `brokers` broker names (panics after 20 s).
pub async fn wait_brokers_registered(node: &Node, brokers: usize) {
    let admin = Admin::connect(&node.namesrv()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !admin
        .cluster_info()
        .await
        .is_ok_and(|i| i.brokers.len() >= brokers)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{brokers} brokers did not register within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
