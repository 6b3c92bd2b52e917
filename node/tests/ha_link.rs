//! The master-slave link under SYNC_MASTER, with real processes and a TCP proxy the test
//! controls between the slave and the master's HA port (the slave's `haMasterAddress` is the
//! proxy). While the link is stalled (bytes held, connections open) or cut (connections
//! closed, new ones refused), sends answer FLUSH_SLAVE_TIMEOUT within about
//! `syncFlushTimeout` or SLAVE_NOT_AVAILABLE, never OK, and the records stay on the master;
//! once the link is back the slave catches up and sends are OK again. A SYNC_MASTER with no
//! slave at all answers SLAVE_NOT_AVAILABLE and keeps the record.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::SendResponse;

const SHARDS: u16 = 2;
const QUEUES: u32 = 4;
const SYNC_FLUSH_TIMEOUT_MS: u64 = 1_000;

const FORWARD: u8 = 0;
/// Connections stay open, no byte moves either way (a silent partition).
const STALL: u8 = 1;
/// Connections are closed and new ones refused.
const REFUSE: u8 = 2;

/// One proxied connection: the slave's side, the master's side, and whether it was made
/// half-open (master side closed, slave side left open and silent).
struct Link {
    down: TcpStream,
    up: TcpStream,
    muted: Arc<AtomicBool>,
}

/// A TCP proxy to `upstream` whose forwarding the test switches.
struct Proxy {
    addr: SocketAddr,
    mode: Arc<AtomicU8>,
    links: Arc<Mutex<Vec<Link>>>,
    stop: Arc<AtomicBool>,
    accepted: Arc<Mutex<u32>>,
}

impl Proxy {
    fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let p = Proxy {
            addr,
            mode: Arc::new(AtomicU8::new(FORWARD)),
            links: Arc::default(),
            stop: Arc::default(),
            accepted: Arc::default(),
        };
        let (mode, links, stop, accepted) = (
            Arc::clone(&p.mode),
            Arc::clone(&p.links),
            Arc::clone(&p.stop),
            Arc::clone(&p.accepted),
        );
        std::thread::spawn(move || {
            for down in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(down) = down else { continue };
                *accepted.lock().unwrap() += 1;
                if mode.load(Ordering::Relaxed) == REFUSE {
                    continue; // dropped: closed at once
                }
                let Ok(up) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
                    continue;
                };
                let muted = Arc::new(AtomicBool::new(false));
                links.lock().unwrap().push(Link {
                    down: down.try_clone().unwrap(),
                    up: up.try_clone().unwrap(),
                    muted: Arc::clone(&muted),
                });
                for (from, to) in [
                    (down.try_clone().unwrap(), up.try_clone().unwrap()),
                    (up, down),
                ] {
                    let (mode, stop, muted) =
                        (Arc::clone(&mode), Arc::clone(&stop), Arc::clone(&muted));
                    std::thread::spawn(move || pump(from, to, &mode, &stop, &muted));
                }
            }
        });
        p
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
        if mode == REFUSE {
            for l in self.links.lock().unwrap().drain(..) {
                let _ = l.down.shutdown(Shutdown::Both);
                let _ = l.up.shutdown(Shutdown::Both);
            }
        }
    }

    /// Closes the master's side of every current connection and leaves the slave's side open
    /// and silent (a half-open connection: the master saw the link go, the slave did not).
    /// New connections are forwarded.
    fn half_open(&self) {
        for l in self.links.lock().unwrap().iter() {
            l.muted.store(true, Ordering::SeqCst);
            let _ = l.up.shutdown(Shutdown::Both);
        }
    }

    fn accepted(&self) -> u32 {
        *self.accepted.lock().unwrap()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.set(REFUSE);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
    }
}

/// Copies `from` to `to` while the mode is FORWARD; holds what it read while STALL; ends on
/// REFUSE, EOF, an error or a half-open cut (which leaves both sockets as they are).
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    mode: &AtomicU8,
    stop: &AtomicBool,
    muted: &AtomicBool,
) {
    from.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        if stop.load(Ordering::Relaxed)
            || mode.load(Ordering::Relaxed) == REFUSE
            || muted.load(Ordering::Relaxed)
        {
            break;
        }
        if mode.load(Ordering::Relaxed) == STALL {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => break,
        };
        // Bytes read just as the link stalled are held until it is back (or cut).
        while mode.load(Ordering::Relaxed) == STALL {
            std::thread::sleep(Duration::from_millis(10));
        }
        if mode.load(Ordering::Relaxed) == REFUSE
            || muted.load(Ordering::Relaxed)
            || to.write_all(&buf[..n]).is_err()
        {
            break;
        }
    }
    if !muted.load(Ordering::Relaxed) {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}

/// One answered send of [`send_round`]: queue, status, response fields, time to the answer,
/// body.
type Answer = (u32, Status, Option<SendResponse>, Duration, Vec<u8>);

/// Sends one record to each queue, pipelined on one connection; returns (queue, status,
/// response fields, time to the answer) per send.
fn send_round(c: &mut Client, topic: &str, tag: &str) -> Vec<Answer> {
    let t0 = Instant::now();
    let ids: Vec<(u32, u64, Vec<u8>)> = (0..QUEUES)
        .map(|q| {
            let body = format!("{tag} q{q}").into_bytes();
            let h = Client::send_request(topic, q, false, 1);
            let id = c.send_frame(
                RequestCode::SendMessage,
                &h,
                &Msg::new(topic, q, body.clone()).encode(),
            );
            (q, id, body)
        })
        .collect();
    ids.into_iter()
        .map(|(q, id, body)| {
            let r = c.recv(id);
            let took = t0.elapsed();
            (q, r.status(), r.fields::<SendResponse>(), took, body)
        })
        .collect()
}

/// The record at `offset` of `topic`/`queue` on `c` has `body`.
fn stored_on(c: &mut Client, topic: &str, queue: u32, offset: u64, body: &[u8]) {
    let got = c.pull_all(topic, queue, offset, 1);
    let recs = decode_records(&got);
    assert_eq!(recs[0].queue_offset, offset);
    assert_eq!(recs[0].body, body, "{topic}/{queue} offset {offset}");
}

#[test]
fn sync_master_link_cut_never_acknowledges_and_slave_catches_up() {
    let topic = "HaLink";
    let dir = tempdir("ha-link");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "SYNC_MASTER", SHARDS);
    mcfg.sync_flush_timeout_ms = SYNC_FLUSH_TIMEOUT_MS;
    let master = mcfg.start(nsa);
    let maddr = master.broker_addr();
    let proxy = Proxy::start(registered_ha_address(nsa, &mcfg.broker_name));
    let slave = HaBroker::slave(&dir.path().join("slave"), SHARDS, Some(proxy.addr)).start(nsa);
    let saddr = slave.broker_addr();
    Client::connect(maddr).create_topic_ok(topic, QUEUES);
    assert!(wait_slaves_connected(
        maddr,
        SHARDS.into(),
        Duration::from_secs(10)
    ));
    assert!(wait_topic_on(saddr, topic, Duration::from_secs(10)));
    let mut c = Client::connect(maddr);
    let mut statuses: BTreeMap<(&str, &str), u32> = BTreeMap::new();

    // Link up: OK.
    for i in 0..5 {
        for (q, st, _, _, _) in send_round(&mut c, topic, &format!("up {i}")) {
            assert_eq!(st, Status::Success, "queue {q}, link up");
            *statuses.entry(("up", st.name())).or_default() += 1;
        }
    }

    // Stalled link: no acknowledgement arrives; each send times out after syncFlushTimeout.
    // Not a wait for state (the proxy reads the mode before every forward); it lets bytes
    // already on their way through the proxy land before the stalled sends start.
    proxy.set(STALL);
    std::thread::sleep(Duration::from_millis(100));
    let mut worst = Duration::ZERO;
    for i in 0..2 {
        for (q, st, f, took, body) in send_round(&mut c, topic, &format!("stalled {i}")) {
            *statuses.entry(("stalled", st.name())).or_default() += 1;
            assert_eq!(st, Status::FlushSlaveTimeout, "queue {q}, link stalled");
            assert!(
                took >= Duration::from_millis(SYNC_FLUSH_TIMEOUT_MS - 100)
                    && took <= Duration::from_millis(SYNC_FLUSH_TIMEOUT_MS + 1_500),
                "FLUSH_SLAVE_TIMEOUT after {took:?}, syncFlushTimeout is {SYNC_FLUSH_TIMEOUT_MS} ms"
            );
            worst = worst.max(took);
            let f =
                f.expect("FLUSH_SLAVE_TIMEOUT carries the send's fields (the record is stored)");
            stored_on(&mut c, topic, q, f.first_queue_offset, &body);
        }
    }
    eprintln!("stalled link: FLUSH_SLAVE_TIMEOUT after at most {worst:?} (syncFlushTimeout {SYNC_FLUSH_TIMEOUT_MS} ms)");
    // The master sees its slave fall behind (counters refresh every 500 ms; waited for,
    // not slept on, so a slow machine's late tick is not a failure).
    let mut mc = Client::connect(maddr);
    let lags = wait_for(Duration::from_secs(10), || {
        let info = mc.runtime_info();
        let lags: Vec<(u64, u64)> = (0..usize::from(SHARDS))
            .map(|s| {
                (
                    shard_extra(&info, s, "ha_lag_bytes").unwrap_or(0),
                    shard_extra(&info, s, "ha_lag_ms").unwrap_or(0),
                )
            })
            .collect();
        lags.iter()
            .all(|&(bytes, ms)| bytes > 0 && ms >= 1_000)
            .then_some(lags)
    });
    let lags = lags.expect("the master did not report its stalled slave's lag within 10 s");
    for (s, (bytes, ms)) in lags.iter().enumerate() {
        eprintln!("stalled link: shard {s} lag {bytes} bytes, {ms} ms");
    }

    // Cut link: the master sees the slave go; sends answer at once.
    let cut_at = Instant::now();
    proxy.set(REFUSE);
    let gone = wait_for(Duration::from_secs(5), || {
        let info = mc.runtime_info();
        (0..usize::from(SHARDS))
            .all(|s| shard_extra(&info, s, "ha_slaves") == Some(0))
            .then_some(())
    });
    assert!(
        gone.is_some(),
        "the master still counts a slave 5 s after the link was cut"
    );
    eprintln!(
        "link cut: the master dropped the slave after {:?}",
        cut_at.elapsed()
    );
    let mut worst = Duration::ZERO;
    for i in 0..3 {
        for (q, st, f, took, body) in send_round(&mut c, topic, &format!("cut {i}")) {
            *statuses.entry(("cut", st.name())).or_default() += 1;
            assert!(
                st == Status::SlaveNotAvailable || st == Status::FlushSlaveTimeout,
                "queue {q}, link cut: {}",
                st.name()
            );
            worst = worst.max(took);
            stored_on(
                &mut c,
                topic,
                q,
                f.expect("fields").first_queue_offset,
                &body,
            );
        }
    }
    eprintln!("cut link: answers within {worst:?}");
    // The slave keeps trying while the link refuses it: wait for one more refused attempt.
    let cut_accepts = proxy.accepted();
    wait_until(
        Duration::from_secs(30),
        "the slave to retry the cut link",
        || proxy.accepted() > cut_accepts,
    );
    let refused_links = proxy.accepted();

    // Link back: the slave reconnects, catches up, sends are OK again.
    let back_at = Instant::now();
    proxy.set(FORWARD);
    assert!(
        wait_slaves_connected(maddr, SHARDS.into(), Duration::from_secs(10)),
        "the slave did not reconnect within 10 s of the link coming back"
    );
    let reconnected = back_at.elapsed();
    let took = wait_caught_up(maddr, saddr, Duration::from_secs(10))
        .expect("the slave did not catch up within 10 s of reconnecting");
    let n = assert_same_queues(maddr, saddr, topic, QUEUES);
    let info = Client::connect(saddr).runtime_info();
    for s in 0..usize::from(SHARDS) {
        assert_eq!(
            shard_extra(&info, s, "ha_lag_bytes"),
            Some(0),
            "slave shard {s}"
        );
    }
    for i in 0..5 {
        for (q, st, _, _, _) in send_round(&mut c, topic, &format!("back {i}")) {
            *statuses.entry(("back", st.name())).or_default() += 1;
            assert_eq!(st, Status::Success, "queue {q}, link back");
        }
    }
    eprintln!(
        "link back: slave reconnected after {reconnected:?} (proxy saw {refused_links} connection attempts so far), caught up (lag 0, same ends) {took:?} later; {n} records identical on both"
    );
    eprintln!("answers by phase: {statuses:?}");
    let info = Client::connect(maddr).runtime_info();
    for s in 0..usize::from(SHARDS) {
        assert_eq!(shard_extra(&info, s, "ha_slaves"), Some(1), "shard {s}");
    }
    drop(slave);
    drop(proxy);
    drop(ns);
}

#[test]
fn sync_master_without_slave_answers_slave_not_available_and_keeps_the_record() {
    let topic = "HaAlone";
    let dir = tempdir("ha-alone");
    let ns = Node::namesrv(dir.path(), &[]);
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "SYNC_MASTER", SHARDS);
    mcfg.sync_flush_timeout_ms = SYNC_FLUSH_TIMEOUT_MS;
    let master = mcfg.start(ns.namesrv_addr());
    let mut c = Client::connect(master.broker_addr());
    c.create_topic_ok(topic, QUEUES);
    let mut worst = Duration::ZERO;
    for i in 0..3 {
        for (q, st, f, took, body) in send_round(&mut c, topic, &format!("alone {i}")) {
            assert_eq!(st, Status::SlaveNotAvailable, "queue {q}");
            assert!(
                took < Duration::from_millis(SYNC_FLUSH_TIMEOUT_MS),
                "answered after {took:?}"
            );
            worst = worst.max(took);
            let f = f.expect("SLAVE_NOT_AVAILABLE carries the send's fields");
            assert_eq!(f.first_queue_offset, i);
            stored_on(&mut c, topic, q, f.first_queue_offset, &body);
        }
    }
    for q in 0..QUEUES {
        assert_eq!(c.max_offset(topic, q), 3);
    }
    eprintln!("no slave: 12 sends answered SLAVE_NOT_AVAILABLE within {worst:?}, all 12 stored");
}

/// A half-open link (the master's side closed, the slave's side left open and silent, as
/// when a middlebox drops its state or the master's host vanishes): the master drops the
/// slave at once; the slave must notice the silence within `haHousekeepingInterval` (the
/// master sends a heartbeat every `haSendHeartbeatInterval` when idle), reconnect and catch
/// up, so sends are OK again.
#[test]
fn half_open_link_is_detected_and_the_slave_reconnects() {
    const HOUSEKEEPING_MS: u64 = 3_000;
    let topic = "HaHalfOpen";
    let dir = tempdir("ha-half-open");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let ha_keys = vec![
        format!("haHousekeepingInterval={HOUSEKEEPING_MS}"),
        "haSendHeartbeatInterval=1000".to_string(),
    ];
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "SYNC_MASTER", SHARDS);
    mcfg.sync_flush_timeout_ms = SYNC_FLUSH_TIMEOUT_MS;
    mcfg.extra = ha_keys.clone();
    let master = mcfg.start(nsa);
    let maddr = master.broker_addr();
    let proxy = Proxy::start(registered_ha_address(nsa, &mcfg.broker_name));
    let mut scfg = HaBroker::slave(&dir.path().join("slave"), SHARDS, Some(proxy.addr));
    scfg.extra = ha_keys;
    let slave = scfg.start(nsa);
    let saddr = slave.broker_addr();
    Client::connect(maddr).create_topic_ok(topic, QUEUES);
    assert!(wait_slaves_connected(
        maddr,
        SHARDS.into(),
        Duration::from_secs(10)
    ));
    let mut c = Client::connect(maddr);
    // The healthy link carries acknowledgements. The first round may time out on a busy
    // machine (syncFlushTimeout is 1 s here, so that the half-open phase fails fast, and
    // the slave's first writes open its files): rounds until one is acknowledged whole.
    let mut rounds_before = 0;
    let healthy = wait_for(Duration::from_secs(30), || {
        rounds_before += 1;
        send_round(&mut c, topic, "before")
            .iter()
            .all(|(_, st, _, _, _)| *st == Status::Success)
            .then_some(())
    });
    assert!(
        healthy.is_some(),
        "no round was acknowledged by the slave over a healthy link within 30 s"
    );

    let cut_at = Instant::now();
    proxy.half_open();
    let mut mc = Client::connect(maddr);
    let dropped = wait_for(Duration::from_secs(5), || {
        let info = mc.runtime_info();
        (0..usize::from(SHARDS))
            .all(|s| shard_extra(&info, s, "ha_slaves") == Some(0))
            .then_some(cut_at.elapsed())
    })
    .expect("the master did not drop the slave whose link it saw close");
    for (q, st, _, _, _) in send_round(&mut c, topic, "half-open") {
        assert_ne!(st, Status::Success, "queue {q}: OK without a slave");
    }
    let back = wait_for(Duration::from_secs(15), || {
        let info = mc.runtime_info();
        (0..usize::from(SHARDS))
            .all(|s| shard_extra(&info, s, "ha_slaves") == Some(1))
            .then_some(cut_at.elapsed())
    });
    eprintln!(
        "half-open link: master dropped the slave after {dropped:?}; slave reconnected after {back:?} (haHousekeepingInterval {HOUSEKEEPING_MS} ms, proxy saw {} connections)",
        proxy.accepted()
    );
    let back = back.expect(
        "the slave did not notice its half-open link within 15 s (haHousekeepingInterval is 3 s)",
    );
    assert!(
        back <= Duration::from_millis(HOUSEKEEPING_MS + 3_000),
        "the slave took {back:?} to notice a silent link, haHousekeepingInterval is {HOUSEKEEPING_MS} ms"
    );
    wait_caught_up(maddr, saddr, Duration::from_secs(10)).expect("caught up after reconnecting");
    // Every round stored one record per queue, acknowledged or not: the "before" rounds and
    // the half-open one.
    let stored = (rounds_before + 1) * QUEUES as usize;
    assert_eq!(assert_same_queues(maddr, saddr, topic, QUEUES), stored);
    for (q, st, _, _, _) in send_round(&mut c, topic, "after") {
        assert_eq!(st, Status::Success, "queue {q}");
    }

    // A silent link (nothing moves, nothing closes): the master drops the slave after
    // haHousekeepingInterval, so sends answer SLAVE_NOT_AVAILABLE at once instead of waiting
    // out syncFlushTimeout each.
    let silent_at = Instant::now();
    proxy.set(STALL);
    let dropped = wait_for(Duration::from_secs(10), || {
        let info = mc.runtime_info();
        (0..usize::from(SHARDS))
            .all(|s| shard_extra(&info, s, "ha_slaves") == Some(0))
            .then_some(silent_at.elapsed())
    })
    .expect("the master still counts a slave it has not heard from for 10 s");
    assert!(
        dropped >= Duration::from_millis(HOUSEKEEPING_MS - 500),
        "the master dropped a live-looking slave after {dropped:?}, before haHousekeepingInterval"
    );
    let mut statuses = Vec::new();
    for (q, st, _, took, _) in send_round(&mut c, topic, "silent") {
        assert_ne!(st, Status::Success, "queue {q}: OK over a silent link");
        statuses.push((st.name(), took));
    }
    proxy.set(FORWARD);
    let back = wait_for(Duration::from_secs(15), || {
        let info = mc.runtime_info();
        (0..usize::from(SHARDS))
            .all(|s| shard_extra(&info, s, "ha_slaves") == Some(1))
            .then_some(silent_at.elapsed())
    })
    .expect("the slave did not reconnect after the silent link came back");
    wait_caught_up(maddr, saddr, Duration::from_secs(10)).expect("caught up after the silence");
    // Two rounds more: "after" and "silent".
    assert_eq!(
        assert_same_queues(maddr, saddr, topic, QUEUES),
        stored + 2 * QUEUES as usize
    );
    for (q, st, _, _, _) in send_round(&mut c, topic, "after silence") {
        assert_eq!(st, Status::Success, "queue {q}");
    }
    eprintln!(
        "silent link: master dropped the slave after {dropped:?}; sends then answered {statuses:?}; slave back {back:?} after the silence began"
    );
    drop(proxy);
}
