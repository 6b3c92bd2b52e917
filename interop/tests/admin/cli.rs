//! The Rust port's mqadmin, `rocketmq-admin-cli` 1.0.0, as a process against ringmq: where
//! the tool is, how it is run, and the nodes it is run against (`ringmq standalone`, or a
//! name server with two `ringmq broker` processes in one cluster).
//!
//! The tool: `RINGMQ_ADMIN_CLI` names it, else `scripts/install-admin-cli.sh`'s folder
//! (`~/.cache/ringmq/admin-cli`, or `RINGMQ_ADMIN_CLI_ROOT`). Missing, the test fails in CI
//! (`CI` set) and elsewhere says so loudly and passes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringmq_testkit::{bin, Output, Proc, Spawn};

const START_TIMEOUT: Duration = Duration::from_secs(20);
/// One command's limit (the tool's own RPC timeouts are shorter).
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// The tool's binary, or `None` (after saying so) where a skip is allowed.
pub fn tool() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RINGMQ_ADMIN_CLI") {
        let p = PathBuf::from(p);
        assert!(
            p.exists(),
            "RINGMQ_ADMIN_CLI={} does not exist",
            p.display()
        );
        return Some(p);
    }
    let root = std::env::var_os("RINGMQ_ADMIN_CLI_ROOT")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ringmq/admin-cli"))
        });
    let found = root
        .map(|r| r.join("bin/rocketmq-admin-cli"))
        .filter(|p| p.exists());
    if found.is_some() {
        return found;
    }
    let why = "rocketmq-admin-cli 1.0.0 is not installed: run `bash scripts/install-admin-cli.sh` \
               (scripts/test.sh does), or set RINGMQ_ADMIN_CLI to its binary";
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") {
        panic!("{why}");
    }
    // Written to stderr directly, past the test harness's capture: a skip must be seen.
    let msg = format!(
        "\n{bar}\nSKIPPED (not in CI): {why}\n{bar}\n",
        bar = "!".repeat(80)
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes());
    None
}

/// The tool pointed at one name server, with optional ACL credentials.
pub struct Cli {
    pub bin: PathBuf,
    pub namesrv: String,
    pub creds: Option<(String, String)>,
}

impl Cli {
    /// Runs the tool with `args` (the name server also in `NAMESRV_ADDR`: the commands
    /// without `-n` read it there); its output, echoed for the test log.
    pub fn run(&self, args: &[&str]) -> Output {
        let mut s = Spawn::new("rocketmq-admin-cli", &self.bin)
            .env("NAMESRV_ADDR", &self.namesrv)
            .env_remove("ROCKETMQ_ACL_ACCESS_KEY")
            .env_remove("ROCKETMQ_ACL_SECRET_KEY")
            .args(args);
        if let Some((ak, sk)) = &self.creds {
            s = s
                .env("ROCKETMQ_ACL_ACCESS_KEY", ak)
                .env("ROCKETMQ_ACL_SECRET_KEY", sk);
        }
        let out = ringmq_testkit::run(s, COMMAND_LIMIT);
        eprintln!(
            "$ rocketmq-admin-cli {}\nexit {}\n{}{}",
            args.join(" "),
            out.code,
            out.stdout,
            out.stderr
        );
        out
    }

    /// Runs the tool and asserts it exited 0; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.code,
            0,
            "rocketmq-admin-cli {}: {}{}",
            args.join(" "),
            out.stdout,
            out.stderr
        );
        out.stdout
    }
}

/// The node(s) a scenario runs against.
pub struct Target {
    pub cluster: String,
    pub namesrv: String,
    /// Each master: its name and address.
    pub brokers: Vec<(String, SocketAddr)>,
    _procs: Vec<Proc>,
    _dir: tempfile::TempDir,
}

impl Target {
    /// `ringmq standalone` with one shard and `sets` as `--set` entries. One shard: with more,
    /// RocketMQ clients see each shard as a broker of its own (`broker-a@N`), and the admin
    /// answers are not in that view yet (docs/rocketmq-clients.md).
    pub fn standalone(sets: &[String]) -> Target {
        Target::standalone_shards(sets, 1)
    }

    /// `ringmq standalone` with `shards` shards.
    pub fn standalone_shards(sets: &[String], shards: u16) -> Target {
        let dir = ringmq_testkit::tempdir("admin-cli");
        let mut s = Spawn::new("ringmq", bin::ringmq())
            .log(dir.path().join("ringmq.log"))
            .arg("standalone")
            .arg("--data")
            .arg(dir.path().join("data"))
            .args(["--host", "127.0.0.1", "--namesrv-port", "0"])
            .args(["--broker-port", "0", "--grpc-port", "0", "--shards"])
            .arg(shards.to_string())
            .args(["--set", "mappedFileSizeCommitLog=8388608"])
            .args(["--set", "haListenPort=0"])
            .env_default("RUST_LOG", "info");
        for set in sets {
            s = s.arg("--set").arg(set);
        }
        let mut proc = s.start();
        let ready = proc.wait_ready(START_TIMEOUT);
        Target {
            cluster: "DefaultCluster".to_string(),
            namesrv: ready.namesrv_addr().to_string(),
            brokers: vec![("broker-a".to_string(), ready.broker_addr())],
            _procs: vec![proc],
            _dir: dir,
        }
    }

    /// A name server and two `ringmq broker` masters, `broker-a` and `broker-b`, of
    /// cluster `AdminCluster`.
    pub fn two_brokers() -> Target {
        let dir = ringmq_testkit::tempdir("admin-cli-cluster");
        let mut ns = Spawn::new("namesrv", bin::ringmq())
            .args(["namesrv", "--host", "127.0.0.1", "--port", "0"])
            .env_default("RUST_LOG", "info")
            .log(dir.path().join("namesrv.log"))
            .start();
        let line = ns.wait_line(START_TIMEOUT, "its ready line", |l| {
            l.starts_with("ringmq namesrv ready: ")
        });
        let namesrv = line["ringmq namesrv ready: ".len()..].trim().to_string();
        let cluster = "AdminCluster";
        let mut procs = vec![ns];
        let mut brokers = Vec::new();
        for name in ["broker-a", "broker-b"] {
            let home = dir.path().join(name);
            std::fs::create_dir_all(&home).expect("the broker's directory");
            let config = home.join("broker.properties");
            std::fs::write(
                &config,
                format!(
                    "brokerClusterName={cluster}\nbrokerName={name}\nbrokerId=0\nlistenPort=0\n\
                     grpcServerPort=0\nhaListenPort=0\nstorePathRootDir={}\n\
                     mappedFileSizeCommitLog=8388608\nflushDiskType=ASYNC_FLUSH\n",
                    home.join("store").display()
                ),
            )
            .expect("writing broker.properties");
            let mut b = Spawn::new(name, bin::ringmq())
                .arg("broker")
                .arg("-c")
                .arg(&config)
                .args(["--namesrv", &namesrv, "--host", "127.0.0.1"])
                .args(["--shards", "1"])
                .env_default("RUST_LOG", "info")
                .log(home.join("ringmq.log"))
                .start();
            let ready = b.wait_ready(START_TIMEOUT);
            brokers.push((name.to_string(), ready.broker_addr()));
            procs.push(b);
        }
        Target {
            cluster: cluster.to_string(),
            namesrv,
            brokers,
            _procs: procs,
            _dir: dir,
        }
    }

    pub async fn admin(&self) -> ringmq_client::Admin {
        let admin = ringmq_client::Admin::connect(&self.namesrv)
            .await
            .expect("an admin client");
        // Every master registered with the name server before the tool asks it.
        let want = self.brokers.len();
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        loop {
            let n = admin.brokers().await.map(|v| v.len()).unwrap_or(0);
            if n == want {
                return admin;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the name server knows {n} of {want} brokers"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Lines of `out` whose first column is `first`.
fn rows<'a>(out: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.first() == Some(&first))
        .collect()
}

/// `updateTopic -c CLUSTER -t TOPIC -r 4 -w 4`, and that the tool says it succeeded.
fn update_topic(cli: &Cli, n: &str, c: &str, t: &str) {
    let out = cli.ok(&[
        "topic",
        "updateTopic",
        "-n",
        n,
        "-c",
        c,
        "-t",
        t,
        "-r",
        "4",
        "-w",
        "4",
    ]);
    assert!(
        out.contains(&format!("create topic to cluster {c} success")),
        "{out}"
    );
}

/// On a broker of several shards: routes name each shard as a broker of its own
/// (`broker-a@0`, ...), `topicClusterList` still finds the topic's cluster, and `clusterList`
/// lists the broker once, at its address.
pub fn shards(cli: &Cli, target: &Target, shards: u16) {
    let n = target.namesrv.as_str();
    let c = target.cluster.as_str();
    let t = "cli-sharded";
    update_topic(cli, n, c, t);
    let route = cli.ok(&["topic", "topicRoute", "-n", n, "-t", t]);
    for s in 0..shards {
        assert!(route.contains(&format!("broker-a@{s}")), "{route}");
    }
    let out = cli.ok(&["topic", "topicClusterList", "-n", n, "-t", t]);
    assert_eq!(
        out.lines().map(str::trim).collect::<Vec<_>>(),
        vec![c],
        "{out}"
    );
    let out = cli.ok(&["cluster", "clusterList"]);
    let (name, addr) = &target.brokers[0];
    let listed = rows(&out, c);
    assert_eq!(listed.len(), 1, "one row for the broker: {out}");
    assert_eq!(listed[0].get(1), Some(&name.as_str()), "{out}");
    assert_eq!(listed[0].get(3), Some(&addr.to_string().as_str()), "{out}");
}

/// Every command family the tool has for topics, groups, offsets, connections, broker
/// config and runtime, and messages, each checked for what it printed and against ringmq's
/// own view (the native admin client).
pub async fn families(cli: &Cli, target: &Target) {
    use ringmq_client::{
        ConsumeContext, ConsumeResult, Message, MessageQueue, Producer, PushConsumer,
        ReceivedMessage, StartPosition,
    };
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let admin = target.admin().await;
    let n = target.namesrv.as_str();
    let c = target.cluster.as_str();
    let (t, g, g2, g3, p) = (
        "cli-orders",
        "cli-billing",
        "cli-audit",
        "cli-copy",
        "cli-shop",
    );
    let names: Vec<&str> = target.brokers.iter().map(|(b, _)| b.as_str()).collect();
    let mq = |broker: &str, queue_id: u32| MessageQueue {
        topic: t.to_string(),
        broker_name: broker.to_string(),
        queue_id,
    };

    // Cluster and topics.
    let out = cli.ok(&["cluster", "clusterList"]);
    for (name, addr) in &target.brokers {
        let row = rows(&out, c);
        assert!(
            row.iter().any(|r| r.get(1) == Some(&name.as_str())
                && r.get(3) == Some(&addr.to_string().as_str())),
            "{name} at {addr} in {out}"
        );
    }
    update_topic(cli, n, c, t);
    for (_, addr) in &target.brokers {
        let cfg = admin
            .topic_config(*addr, t)
            .await
            .unwrap()
            .expect("created");
        assert_eq!(
            (cfg.read_queue_count, cfg.write_queue_count, cfg.perm),
            (4, 4, 6)
        );
    }
    let out = cli.ok(&["topic", "topicList", "-n", n]);
    assert!(out.lines().any(|l| l.trim() == t), "{out}");
    let route = cli.ok(&["topic", "topicRoute", "-n", n, "-t", t]);
    let out = cli.ok(&["topic", "topicClusterList", "-n", n, "-t", t]);
    assert_eq!(
        out.lines().map(str::trim).collect::<Vec<_>>(),
        vec![c],
        "{out}"
    );

    // A producer and a consumer, online while the connection commands run.
    let producer = Producer::builder()
        .group(p)
        .name_server(n)
        .heartbeat_interval(Duration::from_millis(300))
        .trace(true)
        .start()
        .await
        .unwrap();
    let mut sent = Vec::new();
    for i in 0..8 {
        let m = Message::new(t, format!("cli body {i}"))
            .with_key(format!("cli-key-{i}"))
            .with_tag("TagA");
        sent.push(producer.send(m).await.unwrap());
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    let consumer = PushConsumer::builder()
        .group(g)
        .name_server(n)
        .subscribe(t, "TagA || TagB")
        .start_position(StartPosition::First)
        .rebalance_interval(Duration::from_millis(300))
        .long_poll(Duration::from_secs(2))
        .commit_interval(Duration::from_millis(200))
        .start(move |m: Vec<ReceivedMessage>, _: ConsumeContext| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(m.len(), Ordering::SeqCst);
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    ringmq_testkit::wait_until_async(Duration::from_secs(30), "the consumer took all 8", || {
        seen.load(Ordering::SeqCst) >= 8
    })
    .await;
    for name in &names {
        assert!(
            route.contains(&format!("\"brokerName\":\"{name}\"")),
            "{route}"
        );
    }
    // ringmq's own view first: the producer is live on every broker once it heartbeats.
    let me = vec![producer.client_id().to_string()];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let live = admin.producer_connections(p).await.unwrap();
        if live.len() == names.len() && live.iter().all(|(_, ids)| ids == &me) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "producers: {live:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = cli.ok(&["connection", "producerConnection", "-g", p, "-t", t]);
    assert!(out.contains(producer.client_id()), "{out}");
    let out = cli.ok(&["connection", "consumerConnection", "-g", g]);
    assert!(out.contains(consumer.client_id()), "{out}");
    let sub = rows(&out, t);
    assert_eq!(sub.len(), 1, "{out}");
    assert_eq!(sub[0][1..].join(" "), "TagA || TagB", "{out}");
    // Consumer progress: one row per queue of each broker, all consumed once the commits land.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !admin
        .group_progress(g, Some(t))
        .await
        .is_ok_and(|p| p.queues.len() == 4 * names.len() && p.total_lag() == 0)
    {
        assert!(std::time::Instant::now() < deadline, "the group's commits");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = cli.ok(&["consumer", "consumerProgress", "-n", n, "-g", g]);
    let progress = rows(&out, t);
    assert_eq!(progress.len(), 4 * names.len(), "{out}");
    let total: u64 = progress.iter().map(|r| r[3].parse::<u64>().unwrap()).sum();
    assert_eq!(total, 8, "broker offsets in {out}");
    assert!(
        progress.iter().all(|r| r[3] == r[4] && r[5] == "0"),
        "{out}"
    );
    assert!(out.contains("Consume Diff Total: 0"), "{out}");
    consumer.shutdown().await;

    // Offsets (the group stopped: ringmq does not push a reset to running members).
    let out = cli.ok(&[
        "offset",
        "resetOffsetByTime",
        "-n",
        n,
        "-g",
        g,
        "-t",
        t,
        "-s",
        "0",
    ]);
    assert_eq!(
        out.matches("New Offset: 0").count(),
        4 * names.len(),
        "{out}"
    );
    for name in &names {
        for q in 0..4 {
            assert_eq!(
                admin.committed_offset(g, &mq(name, q)).await.unwrap(),
                Some(0)
            );
        }
    }
    let first = &sent[0].queue;
    admin.commit_offset(g, first, 1).await.unwrap();
    let out = cli.ok(&["offset", "cloneGroupOffset", "-s", g, "-d", g3, "-t", t]);
    assert!(out.contains("clone group offset success"), "{out}");
    for name in &names {
        for q in 0..4 {
            let want = admin.committed_offset(g, &mq(name, q)).await.unwrap();
            assert_eq!(
                admin.committed_offset(g3, &mq(name, q)).await.unwrap(),
                want
            );
        }
    }
    assert_eq!(admin.committed_offset(g3, first).await.unwrap(), Some(1));
    // Every group's lag per broker: the two groups hold 7 of the 8 messages each.
    let mut diff_total = 0;
    for (_, addr) in &target.brokers {
        let out = cli.ok(&["broker", "brokerConsumeStats", "-b", &addr.to_string()]);
        let total = out
            .lines()
            .find_map(|l| l.strip_prefix("Diff Total: "))
            .unwrap_or_else(|| panic!("no Diff Total in {out}"));
        diff_total += total.trim().parse::<u64>().unwrap();
    }
    let mut lag = 0;
    for group in [g, g3] {
        lag += admin
            .group_progress(group, Some(t))
            .await
            .unwrap()
            .total_lag();
    }
    assert_eq!((diff_total, lag), (14, 14));
    // The tool's own fault: it asks for timestamp u64::MAX, which it then refuses to send
    // as a Java long; nothing reaches the broker and the offsets stay.
    let out = cli.run(&["offset", "skipAccumulatedMessage", "-g", g, "-t", t]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("Argument is invalid"), "{}", out.stderr);
    assert_eq!(admin.committed_offset(g, first).await.unwrap(), Some(1));

    // Groups.
    let out = cli.ok(&["consumer", "updateSubGroup", "-c", c, "-g", g2, "-r", "5"]);
    assert_eq!(out.matches("success").count(), names.len(), "{out}");
    for (_, addr) in &target.brokers {
        let groups = admin.subscription_groups(*addr).await.unwrap();
        let mine = groups
            .groups
            .iter()
            .find(|x| x.group == g2)
            .expect("the group");
        assert_eq!(mine.retry_max_times, 5);
    }

    // Broker config and runtime.
    let out = cli.ok(&["broker", "getBrokerConfig", "-n", n, "-c", c]);
    for (name, addr) in &target.brokers {
        assert!(out.contains(&format!("Master: {addr}")), "{out}");
        let live = admin.broker_config(*addr).await.unwrap();
        assert_eq!(live.get("brokerName"), Some(name));
    }
    assert_eq!(rows(&out, "brokerClusterName").len(), names.len(), "{out}");
    cli.ok(&[
        "broker",
        "updateBrokerConfig",
        "-c",
        c,
        "-k",
        "flushIntervalCommitLog",
        "-v",
        "900",
        "-y",
    ]);
    for (_, addr) in &target.brokers {
        let live = admin.broker_config(*addr).await.unwrap();
        assert_eq!(
            live.get("flushIntervalCommitLog").map(String::as_str),
            Some("900")
        );
    }
    let mut put_total = 0;
    for (_, addr) in &target.brokers {
        let a = addr.to_string();
        let out = cli.ok(&["broker", "brokerStatus", "-b", &a]);
        let row = rows(&out, "brokerVersionDesc");
        assert_eq!(row.first().and_then(|r| r.get(2)), Some(&"V5_3_3"), "{out}");
        let put = rows(&out, "msgPutTotalTodayNow");
        put_total += put[0][2].parse::<u64>().unwrap();
    }
    // The 8 sends and their trace records.
    assert!(put_total >= 8, "msgPutTotalTodayNow sums to {put_total}");

    // Messages.
    let by_queue: BTreeMap<(String, u32), Vec<String>> =
        sent.iter()
            .enumerate()
            .fold(BTreeMap::new(), |mut m, (i, s)| {
                m.entry((s.queue.broker_name.clone(), s.queue.queue_id))
                    .or_default()
                    .push(format!("cli body {i}"));
                m
            });
    let s3 = &sent[3];
    let out = cli.ok(&["message", "queryMsgByKey", "-t", t, "-k", "cli-key-3"]);
    assert_eq!(rows(&out, &s3.msg_id).len(), 1, "{s3:?} in {out}");
    let out = cli.ok(&["message", "queryMsgById", "-i", &s3.msg_id, "-t", t]);
    assert!(
        out.contains("Keys: cli-key-3") && out.contains("Tags: TagA"),
        "{out}"
    );
    assert!(
        out.contains(&format!("Unique Key: {}", s3.unique_key)),
        "{out}"
    );
    assert!(
        out.contains(&format!("Queue Offset: {}", s3.queue_offset)),
        "{out}"
    );
    let (qb, qi) = (&s3.queue.broker_name, s3.queue.queue_id.to_string());
    let off = s3.queue_offset.to_string();
    let out = cli.ok(&[
        "message",
        "queryMsgByOffset",
        "-t",
        t,
        "-b",
        qb,
        "-i",
        &qi,
        "-o",
        &off,
    ]);
    assert!(out.contains("BODY: cli body 3"), "{out}");
    let out = cli.ok(&[
        "message",
        "printMsgByQueue",
        "-t",
        t,
        "-a",
        qb,
        "-i",
        &qi,
        "-p",
        "-d",
    ]);
    let want = &by_queue[&(qb.clone(), s3.queue.queue_id)];
    let got: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once("BODY: ").map(|(_, b)| b))
        .collect();
    assert_eq!(&got, want, "{out}");
    let out = cli.ok(&["message", "printMsg", "-t", t, "-d", "true"]);
    let mut got: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once("BODY: ").map(|(_, b)| b))
        .collect();
    got.sort_unstable();
    let mut want: Vec<String> = (0..8).map(|i| format!("cli body {i}")).collect();
    want.sort_unstable();
    assert_eq!(got, want, "{out}");
    let stored = admin.read_messages(first, 0, 16).await.unwrap();
    assert_eq!(
        stored.len(),
        by_queue[&(first.broker_name.clone(), first.queue_id)].len()
    );
    let out = cli.run(&["message", "queryMsgTraceById", "-i", &s3.unique_key]);
    eprintln!("queryMsgTraceById exit {}", out.code);
    producer.shutdown().await;

    // Deletions.
    cli.ok(&[
        "consumer",
        "deleteSubGroup",
        "-n",
        n,
        "-c",
        c,
        "-g",
        g2,
        "-y",
    ]);
    for (_, addr) in &target.brokers {
        let groups = admin.subscription_groups(*addr).await.unwrap();
        assert!(groups
            .groups
            .iter()
            .all(|x| x.group != g2 || x.retry_max_times != 5));
    }
    cli.ok(&["topic", "deleteTopic", "-n", n, "-c", c, "-t", t, "-y"]);
    for (_, addr) in &target.brokers {
        assert!(admin.topic_config(*addr, t).await.unwrap().is_none());
    }
    let out = cli.ok(&["topic", "topicList", "-n", n]);
    assert!(!out.lines().any(|l| l.trim() == t), "{out}");
    admin.close();
}

/// The super user of the ACL scenario's node.
pub const ROOT: (&str, &str) = ("cli-root", "cli-root-pw");

/// `--set` entries for ACL 2.0 with [`ROOT`] as the first super user.
pub fn acl2_sets() -> Vec<String> {
    vec![
        "authenticationEnabled=true".into(),
        "authorizationEnabled=true".into(),
        format!(
            r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
            ROOT.0, ROOT.1
        ),
        format!(
            r#"innerClientAuthenticationCredentials={{"accessKey":"{}","secretKey":"{}"}}"#,
            ROOT.0, ROOT.1
        ),
    ]
}

/// The tool's user and ACL commands against ACL 2.0, each checked with ringmq's native
/// admin client signed as [`ROOT`].
pub async fn acl(bin: &Path, target: &Target) {
    use ringmq_client::{Admin, ClientConfig, Credentials};

    let cfg = ClientConfig {
        name_servers: vec![target.namesrv.clone()],
        credentials: Some(Credentials::new(ROOT.0, ROOT.1)),
        ..Default::default()
    };
    let admin = Admin::with_config(cfg).await.expect("an admin client");
    let (_, addr) = &target.brokers[0];
    let b = addr.to_string();
    let c = target.cluster.as_str();
    let as_user = |user: Option<(&str, &str)>| Cli {
        bin: bin.to_path_buf(),
        namesrv: target.namesrv.clone(),
        creds: user.map(|(a, s)| (a.to_string(), s.to_string())),
    };
    let root = as_user(Some(ROOT));

    let out = root.ok(&[
        "auth",
        "createUser",
        "-b",
        &b,
        "-u",
        "alice",
        "-p",
        "alice-pw",
        "-t",
        "Normal",
    ]);
    assert!(out.contains("success"), "{out}");
    let u = admin
        .user_get(*addr, "alice")
        .await
        .unwrap()
        .expect("alice");
    assert_eq!(
        (u.user_type.as_deref(), u.user_status.as_deref()),
        (Some("Normal"), Some("enable"))
    );
    let out = root.ok(&["auth", "listUser", "-c", c]);
    let listed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| !n.starts_with('#') && *n != "Total")
        .collect();
    let mut want: Vec<String> = admin
        .user_list(*addr, "")
        .await
        .unwrap()
        .into_iter()
        .filter_map(|u| u.username)
        .collect();
    want.sort_unstable();
    let mut got: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    got.sort_unstable();
    assert_eq!(got, want, "{out}");
    assert!(got.contains(&"alice".to_string()) && got.contains(&ROOT.0.to_string()));
    let out = root.ok(&["auth", "getUser", "-b", &b, "-u", "alice"]);
    assert_eq!(
        rows(&out, "alice"),
        vec![vec!["alice", "Normal", "enable"]],
        "{out}"
    );

    // A normal user may not manage; without credentials nothing is served.
    let out = as_user(Some(("alice", "alice-pw"))).run(&["auth", "listUser", "-b", &b]);
    assert_ne!(out.code, 0, "a normal user listed users");
    let out = as_user(None).run(&["auth", "createUser", "-b", &b, "-u", "mallory", "-p", "x"]);
    assert_ne!(out.code, 0, "an unsigned request created a user");
    assert!(admin.user_get(*addr, "mallory").await.unwrap().is_none());

    let out = root.ok(&[
        "auth",
        "createAcl",
        "-b",
        &b,
        "-s",
        "User:alice",
        "-r",
        "Topic:orders",
        "-a",
        "Pub,Sub",
        "-d",
        "Allow",
        "-i",
        "127.0.0.1",
    ]);
    assert!(out.contains("success"), "{out}");
    let acl = admin
        .policy_get(*addr, "User:alice")
        .await
        .unwrap()
        .expect("alice's ACL");
    let e = &acl.policies[0].entries[0];
    assert_eq!(e.resource.as_deref(), Some("Topic:orders"));
    assert_eq!(e.actions, vec!["Pub", "Sub"]);
    assert_eq!(e.source_ips, vec!["127.0.0.1"]);
    assert_eq!(e.decision.as_deref(), Some("Allow"));
    let out = root.ok(&["auth", "getAcl", "-b", &b, "-s", "User:alice"]);
    assert_eq!(
        rows(&out, "User:alice"),
        vec![vec![
            "User:alice",
            "Custom",
            "Topic:orders",
            "Pub,Sub",
            "127.0.0.1",
            "Allow"
        ]],
        "{out}"
    );
    let out = root.ok(&["auth", "listAcl", "-b", &b]);
    assert_eq!(rows(&out, "User:alice").len(), 1, "{out}");
    root.ok(&[
        "auth",
        "updateAcl",
        "-b",
        &b,
        "-s",
        "User:alice",
        "-r",
        "Topic:orders",
        "-a",
        "Pub",
        "-d",
        "Deny",
    ]);
    let acl = admin
        .policy_get(*addr, "User:alice")
        .await
        .unwrap()
        .expect("alice's ACL");
    let e = &acl.policies[0].entries[0];
    assert_eq!(
        (e.actions.clone(), e.decision.as_deref()),
        (vec!["Pub".to_string()], Some("Deny"))
    );
    root.ok(&[
        "auth",
        "deleteAcl",
        "-b",
        &b,
        "-s",
        "User:alice",
        "-r",
        "Topic:orders",
    ]);
    let left = admin.policy_get(*addr, "User:alice").await.unwrap();
    assert!(
        left.is_none_or(|a| a.policies.iter().all(|p| p.entries.is_empty())),
        "alice's entry is gone"
    );

    root.ok(&[
        "auth",
        "updateUser",
        "-b",
        &b,
        "-u",
        "alice",
        "-s",
        "disable",
    ]);
    let u = admin
        .user_get(*addr, "alice")
        .await
        .unwrap()
        .expect("alice");
    assert_eq!(u.user_status.as_deref(), Some("disable"));
    root.ok(&["auth", "deleteUser", "-c", c, "-u", "alice"]);
    assert!(admin.user_get(*addr, "alice").await.unwrap().is_none());
    admin.close();
}
