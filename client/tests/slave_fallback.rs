//! Consumers fall back to the slave when the master dies, and go back to the master when it
//! returns. Real processes on loopback: a name server (short broker expiry), a SYNC_MASTER
//! and its slave (two shards each, small segments, data in temporary folders), all killed
//! when the test ends.
//!
//! A push consumer and a managed pull consumer (two groups) have consumed some of the
//! messages when the master is killed (`kill -9`); they consume every remaining one from
//! the slave (nothing lost; their in-memory offsets are kept, so nothing is consumed twice
//! except around a switch) and commit their offsets to the slave meanwhile; producers cannot
//! send (they never send to a slave). The master restarts on the same data and ports;
//! messages produced then are consumed too, and the consumers' commits reach the master
//! again (the slave copies offsets from the master, never the other way round, so only a
//! consumer talking to the master can move them there).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{binary, duplicates, missing, Seen, START_TIMEOUT};
use ringmq_client::{
    Admin, ConsumeResult, Message, MessageQueue, Producer, PullConsumer, PushConsumer,
    ReceivedMessage, SendStatus, StartPosition,
};
use ringmq_testkit::{Proc, Spawn};

const BROKER: &str = "broker-fb";
const TOPIC: &str = "SlaveFallback";
const GROUP: &str = "fallback-group";
const PULL_GROUP: &str = "fallback-pull-group";
const QUEUES: u32 = 4;
/// Messages before the master dies.
const BEFORE: usize = 400;
/// Messages after the master is back.
const AFTER: usize = 100;
/// Most messages one queue holds in the consumer (pulled, not yet consumed).
const QUEUE_BUFFER: usize = 8;

/// Starts `ringmq args...` (stderr to `log`) and waits for its ready line; returns the
/// address printed after `marker`.
fn start(name: &str, args: &[String], log: PathBuf, marker: &str) -> (Proc, String) {
    let mut proc = Spawn::new(name, binary()).args(args).log(log).start();
    let line = proc.wait_line(START_TIMEOUT, "its ready line", |l| l.contains("ready"));
    let addr = line
        .split_once(marker)
        .map(|(_, rest)| rest.split_whitespace().next().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("{name}: unexpected ready line {line:?}"));
    (proc, addr)
}

fn namesrv(dir: &Path) -> (Proc, String) {
    let args: Vec<String> = [
        "namesrv",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--broker-expiry-ms",
        "1500",
        "--scan-interval-ms",
        "200",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    start(
        "namesrv",
        &args,
        dir.join("namesrv.log"),
        "ringmq namesrv ready: ",
    )
}

/// Starts a broker of `BROKER` with its home in `home`; `sets` are extra `--set` keys.
fn broker(
    name: &str,
    home: &Path,
    namesrv: &str,
    role: &str,
    id: u32,
    sets: &[String],
) -> (Proc, SocketAddr) {
    std::fs::create_dir_all(home).unwrap();
    let conf = home.join("broker.properties");
    std::fs::write(
        &conf,
        format!(
            "brokerClusterName=FallbackCluster\nbrokerName={BROKER}\nbrokerId={id}\n\
             brokerRole={role}\nflushDiskType=ASYNC_FLUSH\nlistenPort=0\n\
             syncFlushTimeout=2000\nregisterNameServerPeriod=300\nstorePathRootDir={}\n",
            home.join("store").display()
        ),
    )
    .unwrap();
    let mut args: Vec<String> = vec![
        "broker".into(),
        "-c".into(),
        conf.display().to_string(),
        "-n".into(),
        namesrv.into(),
        "--host".into(),
        "127.0.0.1".into(),
        "--shards".into(),
        "2".into(),
        "--set".into(),
        "mappedFileSizeCommitLog=8388608".into(),
    ];
    for s in sets {
        args.push("--set".into());
        args.push(s.clone());
    }
    let (p, addr) = start(
        name,
        &args,
        home.join("broker.log"),
        "ringmq broker ready: ",
    );
    (p, addr.parse().unwrap())
}

/// Waits (up to `limit`) for `f` to give a value.
async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// True once `group` has committed every queue up to its end, asked through `admin` (the
/// master) or through a pull consumer of the group (which reads from the slave while the
/// master is down).
async fn committed_to_end(
    admin: Option<&Admin>,
    reader: Option<&PullConsumer>,
    group: &str,
    queues: &[MessageQueue],
) -> Option<()> {
    for mq in queues {
        let (max, committed) = match (admin, reader) {
            (Some(a), _) => (
                a.max_offset(mq).await.ok()?,
                a.committed_offset(group, mq).await.ok()??,
            ),
            (None, Some(r)) => (
                r.max_offset(mq).await.ok()?,
                r.committed_offset(mq).await.ok()??,
            ),
            (None, None) => return None,
        };
        if committed != max {
            return None;
        }
    }
    Some(())
}

/// Asserts (`what` if not) that `reader`, a pull consumer of `group` (which reads from the
/// slave while the master is down), soon sees every queue committed to its end; then shuts
/// `reader` down.
async fn assert_committed_via(
    reader: PullConsumer,
    group: &str,
    queues: &[MessageQueue],
    what: &str,
) {
    let done = eventually(Duration::from_secs(10), || {
        committed_to_end(None, Some(&reader), group, queues)
    })
    .await;
    assert!(done.is_some(), "{what}");
    reader.shutdown().await;
}

async fn wait_consumed(seen: &Seen, want: &[String], limit: Duration, what: &str) {
    let done = eventually(limit, || async {
        missing(seen, want).is_empty().then_some(())
    })
    .await;
    if done.is_none() {
        let m = missing(seen, want);
        panic!(
            "{what}: {} of {} messages never consumed, e.g. {:?}",
            m.len(),
            want.len(),
            &m[..m.len().min(10)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_reads_the_slave_while_the_master_is_down_and_returns_to_it() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (_ns, ns) = tokio::task::block_in_place(|| namesrv(dir.path()));
    let admin = Admin::connect(&ns).await.unwrap();

    // The master on any free ports; its HA port as it registered it.
    let master_home = dir.path().join("master");
    let (mut master, master_addr) =
        tokio::task::block_in_place(|| broker("master", &master_home, &ns, "SYNC_MASTER", 0, &[]));
    let ha: SocketAddr = eventually(Duration::from_secs(10), || async {
        let info = admin.cluster_info().await.ok()?;
        let b = info.brokers.iter().find(|b| b.broker_name == BROKER)?;
        b.master()?.ha_address.parse().ok()
    })
    .await
    .expect("the master registered an HA address");
    let (mut slave, slave_addr) = tokio::task::block_in_place(|| {
        broker(
            "slave",
            &dir.path().join("slave"),
            &ns,
            "SLAVE",
            1,
            &[format!("haMasterAddress={ha}")],
        )
    });
    admin
        .create_topic(TOPIC, QUEUES, Duration::from_secs(10))
        .await
        .unwrap();
    // The slave copies its master's topics every 3 s: it serves the topic from then on.
    eventually(Duration::from_secs(10), || async {
        admin
            .topic_config(slave_addr, TOPIC)
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await
    .expect("the slave copied the topic");
    eprintln!(
        "master {master_addr} (HA {ha}), slave {slave_addr}, topic ready after {:?}",
        started.elapsed()
    );

    let producer = Producer::builder()
        .group("fallback-producers")
        .name_server(&ns)
        .route_refresh_interval(Duration::from_millis(500))
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .send_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    // SEND_OK from a SYNC_MASTER: the slave has the message too. Other statuses (until the
    // slave replicates every shard: SLAVE_NOT_AVAILABLE) mean stored on the master only.
    let mut acked: Vec<String> = Vec::new();
    let mut master_only: Vec<String> = Vec::new();
    let mut synced = BTreeSet::new();
    let warm_deadline = Instant::now() + Duration::from_secs(15);
    while synced.len() < QUEUES as usize {
        assert!(
            Instant::now() < warm_deadline,
            "the slave never got in sync"
        );
        let body = format!("warmup-{}", acked.len() + master_only.len());
        let r = producer
            .send(Message::new(TOPIC, body.clone()))
            .await
            .unwrap();
        if r.status == SendStatus::Ok {
            synced.insert(r.queue.queue_id);
            acked.push(body);
        } else {
            master_only.push(body);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for i in 0..BEFORE {
        let body = format!("before-{i}");
        let r = producer
            .send(Message::new(TOPIC, body.clone()))
            .await
            .unwrap();
        if r.status == SendStatus::Ok {
            acked.push(body);
        } else {
            master_only.push(body);
        }
    }
    assert!(
        acked.len() >= BEFORE * 9 / 10,
        "{master_only:?} not on the slave"
    );

    // A slow push consumer holding few messages per queue, so most are still on the
    // brokers when the master dies.
    let seen: Seen = Default::default();
    let sink = seen.clone();
    let consumer = PushConsumer::builder()
        .group(GROUP)
        .name_server(&ns)
        .instance_name("fallback-consumer")
        .subscribe(TOPIC, "*")
        .start_position(StartPosition::First)
        .heartbeat_interval(Duration::from_millis(200))
        .rebalance_interval(Duration::from_millis(300))
        .commit_interval(Duration::from_millis(200))
        .route_refresh_interval(Duration::from_millis(500))
        .master_probe_interval(Duration::from_millis(300))
        .long_poll(Duration::from_secs(2))
        .pull_error_backoff(Duration::from_millis(100))
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .consume_concurrency(1)
        .consume_batch_max(4)
        .pull_batch_max(QUEUE_BUFFER as u32)
        .queue_outstanding_max(QUEUE_BUFFER)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let sink = sink.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let mut s = sink.lock().unwrap();
                s.extend(
                    msgs.iter()
                        .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
                );
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    assert_eq!(common::owned(&consumer, TOPIC), QUEUES as usize);
    // A managed pull consumer of another group, polling slowly, auto-committing.
    let puller = PullConsumer::builder()
        .group(PULL_GROUP)
        .name_server(&ns)
        .instance_name("fallback-puller")
        .start_position(StartPosition::First)
        .poll_batch_max(4)
        .auto_commit(Duration::from_millis(200))
        .heartbeat_interval(Duration::from_millis(200))
        .rebalance_interval(Duration::from_millis(300))
        .route_refresh_interval(Duration::from_millis(500))
        .master_probe_interval(Duration::from_millis(300))
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .start()
        .await
        .unwrap();
    puller.subscribe(TOPIC, "*").await.unwrap();
    assert_eq!(puller.assignment().len(), QUEUES as usize);
    let pulled: Seen = Default::default();
    let polling = Arc::new(AtomicBool::new(true));
    let poller = {
        let (puller, pulled, polling) = (puller.clone(), pulled.clone(), polling.clone());
        tokio::spawn(async move {
            while polling.load(Ordering::Relaxed) {
                let msgs = puller.poll(Duration::from_millis(200)).await.unwrap();
                pulled.lock().unwrap().extend(
                    msgs.iter()
                        .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    eventually(Duration::from_secs(20), || async {
        (seen.lock().unwrap().len() >= 60 && pulled.lock().unwrap().len() >= 40).then_some(())
    })
    .await
    .expect("both consumers started consuming");

    // The master dies.
    tokio::task::block_in_place(|| master.kill9());
    let killed = Instant::now();
    let at_kill = seen.lock().unwrap().len();
    let pulled_at_kill = pulled.lock().unwrap().len();
    eprintln!(
        "master killed; {} of {} acknowledged messages left to the push consumer, {} to the \
         pull consumer ({} more stored on the master only)",
        acked.len().saturating_sub(at_kill),
        acked.len(),
        acked.len().saturating_sub(pulled_at_kill),
        master_only.len()
    );
    assert!(
        acked.len() > at_kill.max(pulled_at_kill) + QUEUES as usize * QUEUE_BUFFER * 2,
        "too few messages left to prove anything"
    );
    // Every acknowledged message is on the slave: none may be missing.
    for (kind, consumed) in [("push", &seen), ("pull", &pulled)] {
        let what = format!("{kind}, from the slave");
        wait_consumed(consumed, &acked, Duration::from_secs(20), &what).await;
        eprintln!(
            "{kind} consumer: every message consumed {:?} after the kill (duplicates: {})",
            killed.elapsed(),
            duplicates(consumed)
        );
    }

    // Its commits went to the slave: another client of the group reads them there.
    let reader = PullConsumer::builder()
        .group(GROUP)
        .name_server(&ns)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .start()
        .await
        .unwrap();
    let queues: Vec<MessageQueue> = (0..QUEUES)
        .map(|q| MessageQueue::new(TOPIC, BROKER, q))
        .collect();
    assert_committed_via(
        reader,
        GROUP,
        &queues,
        "the push consumer's offsets did not reach the slave",
    )
    .await;
    let reader = PullConsumer::builder()
        .group(PULL_GROUP)
        .name_server(&ns)
        .start()
        .await
        .unwrap();
    assert_committed_via(
        reader,
        PULL_GROUP,
        &queues,
        "the pull consumer's offsets did not reach the slave",
    )
    .await;

    // No send can succeed: the only live replica is the slave.
    let refused = producer.send(Message::new(TOPIC, "nowhere")).await;
    assert!(
        refused.is_err(),
        "a send succeeded with the master down: {refused:?}"
    );

    // A group that starts while the master is down: its heartbeat reaches the slave before
    // its first rebalance, so that rebalance (asked of the slave) counts it and gives it
    // every queue, and it reads everything from the slave.
    let late_seen: Seen = Default::default();
    let late_sink = late_seen.clone();
    let late = PushConsumer::builder()
        .group("fallback-late-group")
        .name_server(&ns)
        .instance_name("fallback-late")
        .subscribe(TOPIC, "*")
        .start_position(StartPosition::First)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let sink = late_sink.clone();
            async move {
                sink.lock().unwrap().extend(
                    msgs.iter()
                        .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
                );
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    assert_eq!(
        common::owned(&late, TOPIC),
        QUEUES as usize,
        "the first rebalance of a group started with the master down"
    );
    wait_consumed(
        &late_seen,
        &acked,
        Duration::from_secs(20),
        "a group started with the master down",
    )
    .await;
    late.shutdown().await;

    // The master restarts on the same data and ports.
    let restarted = Instant::now();
    let pinned = [
        format!("listenPort={}", master_addr.port()),
        format!("haListenPort={}", ha.port()),
    ];
    let (master2, addr2) = tokio::task::block_in_place(|| {
        broker("master", &master_home, &ns, "SYNC_MASTER", 0, &pinned)
    });
    master = master2;
    assert_eq!(addr2, master_addr);
    eprintln!("master restarted in {:?}", restarted.elapsed());
    // Messages stored on the master only come from it once it is back.
    let mut after = master_only;
    for i in 0..AFTER {
        let body = format!("after-{i}");
        let sent = eventually(Duration::from_secs(10), || {
            let (producer, body) = (&producer, body.clone());
            async move { producer.send(Message::new(TOPIC, body)).await.ok() }
        })
        .await;
        assert!(
            sent.is_some(),
            "{body} could not be sent to the restarted master"
        );
        after.push(body);
    }
    wait_consumed(&seen, &after, Duration::from_secs(20), "push, master back").await;
    wait_consumed(
        &pulled,
        &after,
        Duration::from_secs(20),
        "pull, master back",
    )
    .await;
    let mut produced = acked;
    produced.extend(after);

    // Back on the master: the consumers' commits reach it (the master's own offsets are
    // older than what was consumed from the slave, and nothing else moves them).
    for group in [GROUP, PULL_GROUP] {
        let back = eventually(Duration::from_secs(15), || {
            committed_to_end(Some(&admin), None, group, &queues)
        })
        .await;
        assert!(
            back.is_some(),
            "{group}: offsets never reached the restarted master"
        );
    }
    eprintln!(
        "both groups commit to the master again {:?} after its restart",
        restarted.elapsed()
    );

    polling.store(false, Ordering::Relaxed);
    poller.await.unwrap();
    for (what, seen) in [("push", &seen), ("pull", &pulled)] {
        let dups = duplicates(seen);
        let total = seen.lock().unwrap().len();
        eprintln!(
            "{what}: {total} deliveries of {} messages, {dups} duplicates",
            produced.len()
        );
        assert!(missing(seen, &produced).is_empty());
        // A switch may deliver again what was in flight on the replica left behind; nothing
        // else.
        assert!(
            dups <= 2 * QUEUES as usize * QUEUE_BUFFER,
            "{what}: {dups} duplicates"
        );
    }
    eprintln!("total {:?}", started.elapsed());
    puller.shutdown().await;
    consumer.shutdown().await;
    producer.shutdown().await;
    admin.close();
    drop(master);
    slave.kill9();
}

/// Messages served (pulled) by a broker since it started: its shards' `msgs_out`.
async fn served(admin: &Admin, addr: SocketAddr) -> u64 {
    admin
        .runtime_info(addr)
        .await
        .unwrap()
        .shards
        .iter()
        .map(|s| s.msgs_out)
        .sum()
}

/// `slaveReadEnable`: a consumer far behind (here any distance: the ratio is 0 %) is told by
/// the master to read from the slave, which serves the backlog, so the master's read load
/// falls; once caught up the slave sends it back and new messages come from the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_far_behind_reads_from_the_slave() {
    const BACKLOG: usize = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let (_ns, ns) = tokio::task::block_in_place(|| namesrv(dir.path()));
    let admin = Admin::connect(&ns).await.unwrap();
    let reads = [
        "slaveReadEnable=true".to_string(),
        "accessMessageInMemoryMaxRatio=0".to_string(),
    ];
    let (_master, master_addr) = tokio::task::block_in_place(|| {
        broker(
            "master",
            &dir.path().join("master"),
            &ns,
            "ASYNC_MASTER",
            0,
            &reads,
        )
    });
    let ha: SocketAddr = eventually(Duration::from_secs(10), || async {
        let info = admin.cluster_info().await.ok()?;
        let b = info.brokers.iter().find(|b| b.broker_name == BROKER)?;
        b.master()?.ha_address.parse().ok()
    })
    .await
    .expect("the master registered an HA address");
    let mut slave_sets = reads.to_vec();
    slave_sets.push(format!("haMasterAddress={ha}"));
    let (_slave, slave_addr) = tokio::task::block_in_place(|| {
        broker(
            "slave",
            &dir.path().join("slave"),
            &ns,
            "SLAVE",
            1,
            &slave_sets,
        )
    });
    admin
        .create_topic(TOPIC, QUEUES, Duration::from_secs(10))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), || async {
        admin
            .topic_config(slave_addr, TOPIC)
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await
    .expect("the slave has the topic");
    let producer = Producer::builder()
        .name_servers(&ns)
        .group("slave-read-producer")
        .start()
        .await
        .unwrap();
    for i in 0..BACKLOG {
        producer
            .send(Message::new(TOPIC, format!("backlog {i}")))
            .await
            .unwrap();
    }
    // The slave has the whole backlog before the consumer starts.
    let master_end = |a: SocketAddr| {
        let admin = &admin;
        async move {
            admin
                .runtime_info(a)
                .await
                .ok()
                .map(|i| i.shards.iter().map(|s| s.commitlog_max_offset).sum::<u64>())
        }
    };
    let want = master_end(master_addr).await.unwrap();
    eventually(Duration::from_secs(20), || async {
        (master_end(slave_addr).await? >= want).then_some(())
    })
    .await
    .expect("the slave caught up with the master");

    let (m0, s0) = (
        served(&admin, master_addr).await,
        served(&admin, slave_addr).await,
    );
    let consumer = PullConsumer::builder()
        .name_servers(&ns)
        .group("slave-read-group")
        .start_position(StartPosition::First)
        .start()
        .await
        .unwrap();
    let queues = consumer.fetch_queues(TOPIC).await.unwrap();
    consumer.assign(queues);
    let mut got = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < BACKLOG {
        assert!(Instant::now() < deadline, "read {} of {BACKLOG}", got.len());
        for m in consumer.poll(Duration::from_millis(500)).await.unwrap() {
            got.insert(common::body(&m));
        }
    }
    let (m1, s1) = (
        served(&admin, master_addr).await,
        served(&admin, slave_addr).await,
    );
    eprintln!(
        "backlog of {BACKLOG}: the master served {} messages, the slave {}",
        m1 - m0,
        s1 - s0
    );
    assert!(s1 - s0 > 0, "the slave served nothing");
    assert!(
        m1 - m0 < (BACKLOG / 2) as u64,
        "the master still served {} of {BACKLOG} messages",
        m1 - m0
    );

    // Caught up: new messages come from the master again.
    for i in 0..20 {
        producer
            .send(Message::new(TOPIC, format!("fresh {i}")))
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut fresh = 0;
    while fresh < 20 {
        assert!(
            Instant::now() < deadline,
            "read {fresh} of 20 fresh messages"
        );
        fresh += consumer
            .poll(Duration::from_millis(500))
            .await
            .unwrap()
            .len();
    }
    let m2 = served(&admin, master_addr).await;
    assert!(
        m2 > m1,
        "the caught-up consumer did not return to the master"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
