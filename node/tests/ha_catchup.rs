//! Slaves catching up, with real processes (an ASYNC_MASTER and its slave, two shards each,
//! a name server): a slave killed mid-stream and restarted resumes from its own log end
//! without duplicating or skipping a byte; a slave started empty against a master with
//! several segments per shard catches up fully; a slave with another shard count is refused,
//! with a clear error in both logs.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

const SHARDS: u16 = 2;
const QUEUES: u32 = 4;

struct Pair {
    _ns: Node,
    nsa: SocketAddr,
    master: Node,
    mcfg: HaBroker,
    ha: SocketAddr,
}

/// A name server and an ASYNC_MASTER with `topic` created (no slave yet).
fn master_with_topic(dir: &Path, topic: &str) -> Pair {
    let ns = Node::namesrv(dir, &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.join("master"), "ASYNC_MASTER", SHARDS);
    let master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.unwrap()));
    let cfg = Client::connect(master.broker_addr()).create_topic_ok(topic, QUEUES);
    for s in 0..SHARDS {
        assert!(cfg.queue_shards.contains(&s), "{:?}", cfg.queue_shards);
    }
    Pair {
        _ns: ns,
        nsa,
        master,
        mcfg,
        ha,
    }
}

/// The `log A..B` range a shard reported when it opened its store.
fn opened_range(log: &str, shard: u16) -> (u64, u64) {
    let prefix = format!("shard {shard}: event loop");
    let line = log
        .lines()
        .find(|l| l.contains(&prefix))
        .unwrap_or_else(|| panic!("no store-open line for shard {shard} in:\n{log}"));
    let range = line
        .split(", log ")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .unwrap_or_else(|| panic!("no log range in {line:?}"));
    let (a, b) = range.split_once("..").unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// Where a slave shard's first link after start began streaming.
fn followed_from(log: &str, shard: u16) -> Option<u64> {
    let prefix = format!("shard {shard}: following master ");
    let line = log.lines().find(|l| l.contains(&prefix))?;
    line.split(" from ").nth(1)?.split(' ').next()?.parse().ok()
}

/// Stops both gracefully and compares every shard's CommitLog files up to the log end;
/// returns the log ends.
fn stop_and_compare(
    master: &mut Node,
    mcfg: &HaBroker,
    slave: &mut Node,
    scfg: &HaBroker,
) -> Vec<u64> {
    let m_info = Client::connect(master.broker_addr()).runtime_info();
    let s_info = Client::connect(slave.broker_addr()).runtime_info();
    term_after_idle(slave);
    term_after_idle(master);
    let (mut segs, mut bytes) = (0, 0);
    let mut ends = Vec::new();
    for s in 0..SHARDS {
        let range = |i: &ringmq_wire::command::BrokerRuntimeInfo| {
            let x = i.shards.iter().find(|x| x.shard_id == s).unwrap();
            (x.commitlog_min_offset, x.commitlog_max_offset)
        };
        assert_eq!(
            range(&m_info),
            range(&s_info),
            "shard {s}: log ranges differ"
        );
        let (from, to) = range(&m_info);
        ends.push(to);
        let (n, b) =
            assert_same_commitlog(&mcfg.commitlog_dir(s), &scfg.commitlog_dir(s), from, to);
        segs += n;
        bytes += b;
    }
    eprintln!("CommitLogs byte-identical: {segs} segments, {bytes} bytes");
    ends
}

/// Every byte of the segment files in `dir` from physical offset `end` on is zero; returns
/// how many bytes that was.
fn assert_zero_after(dir: &Path, end: u64) -> u64 {
    let mut n = 0;
    for (start, path) in segment_files(dir) {
        let data = std::fs::read(&path).unwrap();
        let from = end.saturating_sub(start).min(data.len() as u64) as usize;
        if let Some(i) = data[from..].iter().position(|&b| b != 0) {
            panic!(
                "{}: a non-zero byte at physical offset {} past the log end {end}",
                path.display(),
                start + (from + i) as u64
            );
        }
        n += (data.len() - from) as u64;
    }
    n
}

#[test]
fn restarted_slave_resumes_from_its_own_offset() {
    let topic = "HaResume";
    let dir = tempdir("ha-resume");
    let mut p = master_with_topic(dir.path(), topic);
    let maddr = p.master.broker_addr();
    let scfg = HaBroker::slave(&dir.path().join("slave"), SHARDS, Some(p.ha));
    let mut slave = scfg.start(p.nsa);
    assert!(wait_slaves_connected(
        maddr,
        SHARDS.into(),
        Duration::from_secs(10)
    ));

    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..2)
        .map(|id| {
            spawn_sender(
                maddr,
                topic,
                id,
                (0..QUEUES).collect(),
                4,
                Arc::clone(&stop),
            )
        })
        .collect();
    // Kill the slave once it has replicated something on every shard...
    let saddr = slave.broker_addr();
    let mut sc = Client::connect(saddr);
    let start_ends = log_ends(&mut sc);
    wait_until(
        Duration::from_secs(30),
        "the slave to replicate records on every shard",
        || {
            let ends = log_ends(&mut sc);
            ends.iter().zip(&start_ends).all(|(e, s)| e > s)
        },
    );
    slave.kill9();
    // ... and restart it once the master has moved on without it on every shard.
    let mut mc = Client::connect(maddr);
    let at_kill = log_ends(&mut mc);
    wait_until(
        Duration::from_secs(30),
        "the master to append on every shard while the slave is down",
        || {
            let ends = log_ends(&mut mc);
            ends.iter().zip(&at_kill).all(|(e, k)| e > k)
        },
    );
    let mut slave = scfg.start(p.nsa);
    let restarted_at = log_ends(&mut Client::connect(maddr));
    let log = wait_for(Duration::from_secs(10), || {
        let log = slave.log();
        (0..SHARDS)
            .all(|s| followed_from(&log, s).is_some())
            .then_some(log)
    })
    .expect("the restarted slave did not follow its master on every shard within 10 s");
    for s in 0..SHARDS {
        let (min, end) = opened_range(&log, s);
        let from = followed_from(&log, s).unwrap();
        eprintln!(
            "shard {s}: slave recovered log {min}..{end} ({} bytes), resumed from {from}; master log end {} at the restart",
            end - min,
            restarted_at[s as usize]
        );
        assert!(
            end > min,
            "shard {s}: the slave had replicated nothing before the kill"
        );
        assert_eq!(
            from, end,
            "shard {s}: the slave did not resume from its own log end"
        );
        assert!(
            restarted_at[s as usize] > end,
            "shard {s}: the master did not move on while the slave was down"
        );
    }
    // The restarted slave catches up under live sends: stop them once the master has
    // appended more on every shard since the restart.
    wait_until(
        Duration::from_secs(30),
        "the master to append on every shard after the slave's restart",
        || {
            let ends = log_ends(&mut mc);
            ends.iter().zip(&restarted_at).all(|(e, r)| e > r)
        },
    );
    stop.store(true, Ordering::Relaxed);
    let acked: usize = senders
        .into_iter()
        .map(|h| {
            let l = h.join().unwrap();
            assert!(l.ended_by.is_none(), "a sender failed: {:?}", l.ended_by);
            assert!(l.refused.is_empty(), "refused sends: {:?}", l.refused);
            l.acked.len()
        })
        .sum();
    let saddr = slave.broker_addr();
    let took = wait_caught_up(maddr, saddr, Duration::from_secs(20))
        .expect("the restarted slave did not catch up within 20 s");
    assert!(wait_topic_on(saddr, topic, Duration::from_secs(10)));
    let n = assert_same_queues(maddr, saddr, topic, QUEUES);
    let mut sc = Client::connect(saddr);
    for q in 0..QUEUES {
        check_producer_order(topic, q, &read_queue_stored(&mut sc, topic, q));
    }
    eprintln!(
        "{acked} sends acknowledged; slave caught up {took:?} after the senders stopped; {n} records identical on both"
    );
    assert_eq!(n, acked, "stored records vs acknowledged sends");
    stop_and_compare(&mut p.master, &p.mcfg, &mut slave, &scfg);
}

#[test]
fn empty_slave_catches_up_from_a_master_with_several_segments() {
    const BODY_BYTES: usize = 32 << 10;
    const BATCH: usize = 16;
    let topic = "HaCatchUp";
    let dir = tempdir("ha-catchup");
    let mut p = master_with_topic(dir.path(), topic);
    let maddr = p.master.broker_addr();

    // More than 3 segments on every shard before the slave exists.
    let t0 = Instant::now();
    let mut mc = Client::connect(maddr);
    let want = 3 * HA_SEGMENT_BYTES + HA_SEGMENT_BYTES / 2;
    let mut i = 0u64;
    let mut batches = 0;
    loop {
        let ends = log_ends(&mut mc);
        let bases: Vec<u64> = mc
            .runtime_info()
            .shards
            .iter()
            .map(|s| s.commitlog_min_offset)
            .collect();
        if ends.iter().zip(&bases).all(|(e, b)| e - b >= want) {
            break;
        }
        for q in 0..QUEUES {
            let msgs: Vec<Msg> = (0..BATCH)
                .map(|_| {
                    i += 1;
                    let mut body = format!("record {i} ").into_bytes();
                    body.resize(BODY_BYTES, b'a' + (i % 26) as u8);
                    Msg::new(topic, q, body)
                })
                .collect();
            mc.send_batch(topic, q, &msgs).ok();
            batches += 1;
        }
    }
    let written: u64 = log_ends(&mut mc)
        .iter()
        .zip(
            mc.runtime_info()
                .shards
                .iter()
                .map(|s| s.commitlog_min_offset),
        )
        .map(|(e, b)| e - b)
        .sum();
    for s in 0..SHARDS {
        let n = segment_files(&p.mcfg.commitlog_dir(s)).len();
        assert!(n > 3, "shard {s}: only {n} segments");
    }
    eprintln!(
        "master: {batches} batches, {i} records, {written} bytes in {:?}",
        t0.elapsed()
    );

    let t1 = Instant::now();
    let scfg = HaBroker::slave(&dir.path().join("slave"), SHARDS, Some(p.ha));
    let mut slave = scfg.start(p.nsa);
    let saddr = slave.broker_addr();
    let took = wait_caught_up(maddr, saddr, Duration::from_secs(45))
        .expect("the empty slave did not catch up within 45 s");
    eprintln!(
        "empty slave caught up {written} bytes in {took:?} ({:.0} MB/s; {:?} with its start)",
        written as f64 / took.as_secs_f64() / 1e6,
        t1.elapsed()
    );
    assert!(wait_topic_on(saddr, topic, Duration::from_secs(10)));
    let n = assert_same_queues(maddr, saddr, topic, QUEUES);
    assert_eq!(n as u64, i, "records on both vs records sent");
    stop_and_compare(&mut p.master, &p.mcfg, &mut slave, &scfg);
}

#[test]
fn shard_count_mismatch_is_refused_in_both_logs() {
    let topic = "HaMismatch";
    let dir = tempdir("ha-mismatch");
    let p = master_with_topic(dir.path(), topic);
    let maddr = p.master.broker_addr();
    let mut mc = Client::connect(maddr);
    for q in 0..QUEUES {
        mc.send_ok(&Msg::new(topic, q, "before any slave"));
    }
    let mut slaves = Vec::new();
    for (id, shards) in [(1u64, 1u16), (2, 3)] {
        let mut cfg = HaBroker::slave(&dir.path().join(format!("slave{id}")), shards, Some(p.ha));
        cfg.broker_id = id;
        slaves.push((shards, cfg.start(p.nsa)));
    }
    let needle = "shard count mismatch";
    let seen = wait_for(Duration::from_secs(10), || {
        let master_lines = log_lines_containing(&p.master.log(), needle).len();
        let slaves_ok = slaves
            .iter()
            .all(|(_, s)| !log_lines_containing(&s.log(), needle).is_empty());
        (master_lines >= 2 && slaves_ok).then_some(())
    });
    let mlog = p.master.log();
    for l in log_lines_containing(&mlog, needle).iter().take(2) {
        eprintln!("master: {l}");
    }
    for (shards, s) in &slaves {
        let log = s.log();
        for l in log_lines_containing(&log, needle).iter().take(1) {
            eprintln!("slave ({shards} shards): {l}");
        }
    }
    assert!(
        seen.is_some(),
        "no \"{needle}\" error in the master's log and both slaves' logs within 10 s"
    );
    assert!(
        mlog.contains("this master has 2 shards")
            && mlog.contains("has 1;")
            && mlog.contains("has 3;"),
        "the master's refusal does not name both shard counts"
    );
    for (shards, s) in &slaves {
        let log = s.log();
        assert!(
            log.contains("master refused") && log.contains("this master has 2 shards"),
            "slave ({shards} shards): the refusal reason is not in its log"
        );
        for st in Client::connect(s.broker_addr()).runtime_info().shards {
            assert_eq!(
                st.commitlog_max_offset, st.commitlog_min_offset,
                "slave ({shards} shards), shard {}: replicated bytes despite the refusal",
                st.shard_id
            );
        }
    }
    let info = mc.runtime_info();
    for s in 0..usize::from(SHARDS) {
        assert_eq!(shard_extra(&info, s, "ha_slaves"), Some(0), "shard {s}");
    }
}

/// Copies a directory tree (a stopped broker's store).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Sends batches of 32 KiB records to every queue until each shard's log holds at least
/// `bytes` more than when it started; returns the records sent.
fn fill_shards(c: &mut Client, topic: &str, tag: &str, bytes: u64) -> u64 {
    let start = log_ends(c);
    let mut i = 0u64;
    loop {
        let ends = log_ends(c);
        if ends.iter().zip(&start).all(|(e, s)| e - s >= bytes) {
            return i;
        }
        for q in 0..QUEUES {
            let msgs: Vec<Msg> = (0..16)
                .map(|_| {
                    i += 1;
                    let mut body = format!("{tag} {i} ").into_bytes();
                    body.resize(32 << 10, b'a' + (i % 26) as u8);
                    Msg::new(topic, q, body)
                })
                .collect();
            c.send_batch(topic, q, &msgs).ok();
        }
    }
}

/// An unclean master restart that lost its tail (here: the master's store put back to an
/// older copy) leaves the slave ahead: the slave truncates to the master's end (across a
/// segment end), says so in its log, and the pair converges on the master's new records.
#[test]
fn slave_ahead_of_its_master_truncates() {
    let topic = "HaAhead";
    let dir = tempdir("ha-ahead");
    let mut p = master_with_topic(dir.path(), topic);
    let maddr = p.master.broker_addr();
    let scfg = HaBroker::slave(&dir.path().join("slave"), SHARDS, Some(p.ha));
    let mut slave = scfg.start(p.nsa);
    let saddr = slave.broker_addr();
    assert!(wait_slaves_connected(
        maddr,
        SHARDS.into(),
        Duration::from_secs(10)
    ));
    let mut mc = Client::connect(maddr);
    for q in 0..QUEUES {
        for i in 0..20 {
            mc.send_ok(&Msg::new(topic, q, format!("A q{q} {i}")));
        }
    }
    wait_caught_up(maddr, saddr, Duration::from_secs(10)).expect("caught up after A");
    let ends_a = log_ends(&mut Client::connect(saddr));

    // The master's store as it is now, kept aside.
    term_after_idle(&mut p.master);
    let snapshot = dir.path().join("master-store-A");
    copy_dir(&p.mcfg.store_root(), &snapshot);
    p.master = p.mcfg.start(p.nsa);
    assert!(wait_slaves_connected(
        maddr,
        SHARDS.into(),
        Duration::from_secs(10)
    ));

    // More than a segment more on every shard, replicated.
    let mut mc = Client::connect(maddr);
    let b = fill_shards(&mut mc, topic, "B", HA_SEGMENT_BYTES + (64 << 10));
    wait_caught_up(maddr, saddr, Duration::from_secs(30)).expect("caught up after B");
    let ends_b = log_ends(&mut Client::connect(saddr));

    // The master comes back without B.
    p.master.kill9();
    std::fs::remove_dir_all(p.mcfg.store_root()).unwrap();
    copy_dir(&snapshot, &p.mcfg.store_root());
    p.master = p.mcfg.start(p.nsa);
    let mut mc = Client::connect(maddr);
    let back = wait_for(Duration::from_secs(3), || {
        (log_ends(&mut mc) == ends_a).then_some(())
    });
    assert!(
        back.is_some(),
        "the master's store is not the copy: {:?} vs {ends_a:?}",
        log_ends(&mut mc)
    );
    assert!(wait_slaves_connected(
        maddr,
        SHARDS.into(),
        Duration::from_secs(10)
    ));
    let mut mc = Client::connect(maddr);
    for q in 0..QUEUES {
        for i in 0..20 {
            mc.send_ok(&Msg::new(topic, q, format!("C q{q} {i}")));
        }
    }
    let took = wait_caught_up(maddr, saddr, Duration::from_secs(10))
        .expect("the pair did not converge after the slave truncated");
    let log = slave.log();
    let lines = log_lines_containing(&log, "ahead of its master");
    for l in &lines {
        eprintln!("slave: {l}");
    }
    for s in 0..SHARDS {
        let want = format!(
            "shard {s}: this slave is ahead of its master ({} > {}",
            ends_b[s as usize], ends_a[s as usize]
        );
        assert!(
            lines.iter().any(|l| l.contains(&want)),
            "shard {s}: no truncation line like {want:?}"
        );
    }
    let n = assert_same_queues(maddr, saddr, topic, QUEUES);
    assert_eq!(n as u64, u64::from(QUEUES) * 40, "A and C records on both");
    eprintln!(
        "{b} B records ({:?} -> {:?}) dropped by the slave's truncation; converged {took:?} after C; {n} records identical",
        ends_a, ends_b
    );
    let ends = stop_and_compare(&mut p.master, &p.mcfg, &mut slave, &scfg);
    // Nothing of B survives past the end on the slave (a later recovery must not find it).
    for s in 0..SHARDS {
        let dir = scfg.commitlog_dir(s);
        let zero = assert_zero_after(&dir, ends[s as usize]);
        eprintln!(
            "shard {s}: slave segments {:?}; the {zero} bytes after its log end are all zero",
            segment_files(&dir).keys().collect::<Vec<_>>()
        );
    }
}

/// A master whose retention already removed its oldest segments: an empty slave starts at
/// the master's oldest retained byte (its queues starting at the queue offsets found
/// there), catches up and holds the same queue ranges and bytes.
#[test]
fn empty_slave_starts_at_the_masters_oldest_retained_segment() {
    let topic = "HaRetained";
    let dir = tempdir("ha-retained");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let all_hours = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "ASYNC_MASTER", SHARDS);
    // Every segment but the one being written expires at once; retention runs every 10 s.
    mcfg.extra = vec![
        "fileReservedTime=0".into(),
        format!("deleteWhen={all_hours}"),
    ];
    let mut master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.unwrap()));
    let maddr = master.broker_addr();
    let mut mc = Client::connect(maddr);
    mc.create_topic_ok(topic, QUEUES);
    let t0 = Instant::now();
    let sent = fill_shards(&mut mc, topic, "R", 2 * HA_SEGMENT_BYTES + (256 << 10));
    let bases: Vec<u64> = (0..SHARDS).map(|s| u64::from(s) << 48).collect();
    let mins = wait_for(Duration::from_secs(15), || {
        let mut st = mc.runtime_info().shards;
        st.sort_by_key(|x| x.shard_id);
        let mins: Vec<u64> = st.iter().map(|x| x.commitlog_min_offset).collect();
        mins.iter().zip(&bases).all(|(m, b)| m > b).then_some(mins)
    })
    .expect("retention removed no segment on some shard within 15 s");
    // One more record per queue, so every queue has a record in the retained tail. (A queue
    // whose records all went with the deleted segments has no record for an empty slave to
    // start it from: the master reports it as [n, n), the slave as [0, 0) until the queue's
    // next record arrives. This test is about the queues a slave can see.)
    for q in 0..QUEUES {
        mc.send(&Msg::new(topic, q, b"after retention".to_vec()))
            .ok();
    }
    let sent = sent + u64::from(QUEUES);
    let mut q_mins = Vec::new();
    for q in 0..QUEUES {
        q_mins.push(mc.min_offset(topic, q));
    }
    eprintln!(
        "master: {sent} records; retention left logs from {mins:?} ({:?}); queue min offsets {q_mins:?}",
        t0.elapsed()
    );
    assert!(
        q_mins.iter().all(|&m| m > 0),
        "queue min offsets {q_mins:?}"
    );

    let scfg = HaBroker::slave(&dir.path().join("slave"), SHARDS, Some(ha));
    let mut slave = scfg.start(nsa);
    let saddr = slave.broker_addr();
    let took = wait_caught_up(maddr, saddr, Duration::from_secs(15));
    let log = slave.log();
    for l in log_lines_containing(&log, "replication from")
        .iter()
        .take(4)
    {
        eprintln!("slave: {l}");
    }
    for s in 0..SHARDS {
        let from = followed_from(&log, s);
        eprintln!(
            "shard {s}: empty slave followed from {from:?}, master's oldest byte {}",
            mins[s as usize]
        );
        assert_eq!(from, Some(mins[s as usize]), "shard {s}");
    }
    let took = took.expect("the empty slave did not catch up with a retained master within 15 s");
    assert!(wait_topic_on(saddr, topic, Duration::from_secs(10)));
    let n = assert_same_queues(maddr, saddr, topic, QUEUES);
    eprintln!("empty slave caught up in {took:?}; {n} records identical on both");
    stop_and_compare(&mut master, &mcfg, &mut slave, &scfg);
}
