#![allow(clippy::unwrap_used)]
//! The store on real files (testing ladder, rung 5): `RealDisk` with io_uring and with the
//! pwrite/fdatasync fallback, the segment preparer thread, and a genuinely full file system
//! (a 4 MiB tmpfs mounted for the test: ENOSPC, not a simulated one).
//!
//! The tmpfs test needs root (to mount). Without it, it prints a `SKIP` line and passes; CI
//! runs as root, so there it always runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ringmq_node::io::disk::{Driver, RealDisk};
use ringmq_node::store::commitlog::segment_name;
use ringmq_node::store::{PullStatus, Store, StoreConfig, StoreError};
use ringmq_wire::{properties, record};

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn encode(topic: &str, queue: u32, body: &[u8], tag: Option<&str>, out: &mut Vec<u8>) {
    let mut props = Vec::new();
    if let Some(t) = tag {
        properties::encode([("TAGS", t)], &mut props).unwrap();
    }
    let msg = record::Message {
        topic,
        queue_id: queue,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: 1,
        born_host: "127.0.0.1:4000".parse().unwrap(),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: &props,
    };
    record::encode(&msg, out).unwrap();
}

/// A temp dir under cargo's target dir (a real disk, not tmpfs).
fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn config(root: &Path, segment_bytes: u64) -> StoreConfig {
    let mut cfg = StoreConfig::new(root, 0, host());
    cfg.segment_bytes = segment_bytes;
    cfg.cq_units_per_file = 1024;
    cfg
}

/// What the tests expect each queue to hold: queue offset -> (physical offset, body).
type Expected = BTreeMap<(String, u32), BTreeMap<u64, (u64, Vec<u8>)>>;

/// Appends one batch; records it in `expected` when it is acknowledged.
fn append_batch(
    store: &mut Store<RealDisk>,
    expected: &mut Expected,
    msgs: &[(&str, u32, Vec<u8>, Option<&str>)],
    now_ms: i64,
) -> Result<(), StoreError> {
    let mut batch = Vec::new();
    for (t, q, body, tag) in msgs {
        encode(t, *q, body, *tag, &mut batch);
    }
    let out = store.append(&mut batch, now_ms)?;
    for (a, (t, q, body, _)) in out.records.iter().zip(msgs) {
        let queue = expected.entry((t.to_string(), *q)).or_default();
        let next = queue.keys().next_back().map_or(a.queue_offset, |k| k + 1);
        assert_eq!(a.queue_offset, next, "{t}/{q}: offsets are dense");
        queue.insert(a.queue_offset, (a.physical_offset, body.clone()));
    }
    Ok(())
}

/// Every expected record at or above its queue's minimum reads back intact, through `get`
/// and through `read_record`; records below the minimum answer `OffsetTooSmall`. Returns
/// how many were checked.
fn verify(store: &Store<RealDisk>, expected: &Expected) -> usize {
    let seg = store.config().segment_bytes;
    let mut checked = 0;
    for ((t, q), recs) in expected {
        let (min, max) = store.queue_range(t, *q).unwrap();
        assert_eq!(max, recs.keys().next_back().unwrap() + 1, "{t}/{q} max");
        let mut off = min;
        while off < max {
            let r = store.get(t, *q, off, 64, u64::MAX, |_| true).unwrap();
            assert_eq!(r.status, PullStatus::Found, "{t}/{q} at {off}");
            for run in &r.runs {
                let mut buf = vec![0u8; run.len as usize];
                store.read(run.physical_offset, &mut buf).unwrap();
                let mut at = run.physical_offset;
                for rec in record::iter(&buf) {
                    let rec = rec.unwrap();
                    let (phys, body) = &recs[&rec.queue_offset];
                    assert_eq!((rec.topic, rec.queue_id), (t.as_str(), *q));
                    assert_eq!(rec.queue_offset, off, "{t}/{q}: dense offsets");
                    assert_eq!((rec.physical_offset, at), (*phys, *phys));
                    assert_eq!(rec.body, body.as_slice(), "{t}/{q}@{off}");
                    assert_eq!(phys / seg, (phys + rec.len() as u64 - 1) / seg, "spans");
                    at += rec.len() as u64;
                    off += 1;
                    checked += 1;
                }
            }
            assert_eq!(r.next_offset, off);
        }
        for (&o, (phys, body)) in recs.range(..min) {
            let r = store.get(t, *q, o, 1, u64::MAX, |_| true).unwrap();
            assert_eq!(r.status, PullStatus::OffsetTooSmall, "{t}/{q}@{o}");
            assert!(*phys < store.min_offset(), "{t}/{q}@{o} {body:?} lost");
        }
        for (_, (phys, body)) in recs.range(min..).step_by(7) {
            let bytes = store.read_record(*phys).unwrap();
            assert_eq!(record::decode_one(&bytes).unwrap().body, body.as_slice());
        }
    }
    checked
}

fn body(id: usize, len: usize) -> Vec<u8> {
    let mut b = format!("{id}:").into_bytes();
    b.extend((0..len).map(|i| (i * 7 + id) as u8));
    b
}

/// Append, sync, read, clean restart, crash-like restart (no close: a process kill leaves
/// the page cache), read again.
fn round_trip(disk: impl Fn() -> RealDisk) {
    let dir = temp_dir("ringmq-roundtrip");
    let cfg = config(dir.path(), 1 << 20);
    let mut expected = Expected::new();
    let mut store = Store::open(disk(), cfg.clone()).unwrap();
    let tags = [None, Some("TagA"), Some("TagB")];
    for i in 0..300 {
        let msgs: Vec<_> = (0..3)
            .map(|j| {
                let id = i * 3 + j;
                (
                    "RoundTrip",
                    (id % 4) as u32,
                    body(id, id % 700),
                    tags[id % 3],
                )
            })
            .collect();
        append_batch(&mut store, &mut expected, &msgs, 1_000 + i as i64).unwrap();
        if i % 50 == 0 {
            assert_eq!(store.sync().unwrap(), store.write_offset());
        }
    }
    assert_eq!(verify(&store, &expected), 900);
    let want = record::tag_hash("TagB");
    let r = store
        .get("RoundTrip", 1, 0, 1000, u64::MAX, |h| h == want)
        .unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert!(
        r.messages > 50 && r.messages < 100,
        "{} TagB records",
        r.messages
    );
    assert_eq!(
        store.offset_for_timestamp("RoundTrip", 0, 1_100).unwrap(),
        75
    );
    store.close().unwrap();

    let mut store = Store::open(disk(), cfg.clone()).unwrap();
    assert!(store.recovery().clean);
    assert_eq!(verify(&store, &expected), 900);
    for i in 0..50 {
        let msgs = vec![("RoundTrip", 2, body(10_000 + i, 100), None)];
        append_batch(&mut store, &mut expected, &msgs, 5_000).unwrap();
    }
    drop(store); // no close, no sync: a kill

    let store = Store::open(disk(), cfg).unwrap();
    assert!(!store.recovery().clean);
    assert_eq!(verify(&store, &expected), 950);
    store.close().unwrap();
}

#[test]
fn round_trip_and_restart_with_io_uring() {
    let disk = RealDisk::new();
    match disk.driver() {
        Driver::IoUring => println!("driver: io_uring"),
        Driver::Fallback(why) => {
            println!("io_uring unavailable here, testing the fallback instead: {why}")
        }
    }
    round_trip(RealDisk::new);
}

#[test]
fn round_trip_and_restart_with_fallback() {
    assert!(matches!(
        RealDisk::fallback("test").driver(),
        Driver::Fallback(_)
    ));
    round_trip(|| RealDisk::fallback("test"));
}

#[test]
fn segments_roll_with_the_preparer_thread() {
    segments_roll(true);
}

/// Cold segments (`warmMapedFileEnable=false`, the ASYNC_FLUSH default): only fallocated,
/// never pre-written; records and recovery must not notice.
#[test]
fn cold_segments_roll_with_the_preparer_thread() {
    segments_roll(false);
}

fn segments_roll(warm: bool) {
    let disk = || {
        let d = RealDisk::new();
        d.set_warm_segments(warm);
        d
    };
    let dir = temp_dir("ringmq-roll");
    const SEG: u64 = 64 << 10;
    let cfg = config(dir.path(), SEG);
    let log_dir = dir.path().join("commitlog").join("0");
    let mut store = Store::open(disk(), cfg.clone()).unwrap();
    let mut expected = Expected::new();
    for i in 0..200 {
        let msgs: Vec<_> = (0..4)
            .map(|j| ("Roll", j, body(i * 4 + j as usize, 1900), Some("TagA")))
            .collect();
        append_batch(&mut store, &mut expected, &msgs, 1_000 + i as i64).unwrap();
    }
    store.sync().unwrap();
    let segments = std::fs::read_dir(&log_dir).unwrap().count() as u64;
    assert!(segments >= 20, "{segments} segment files");
    assert!(store.log_disk_bytes() >= 20 * SEG);
    assert_eq!(verify(&store, &expected), 800);

    // The preparer makes the next segment ahead of need, off the append path.
    let next = (store.write_offset() / SEG + 1) * SEG;
    let path: PathBuf = log_dir.join(segment_name(next));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&path).map_or(true, |m| m.len() < SEG) {
        assert!(
            Instant::now() < deadline,
            "{} never prepared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    let inode = std::fs::metadata(&path).unwrap().ino();
    store.close().unwrap();
    let mut store = Store::open(disk(), cfg.clone()).unwrap();
    assert!(store.recovery().clean);
    assert_eq!(verify(&store, &expected), 800);
    // A clean restart keeps the prepared segment (the same file, not made again), and the
    // appends that follow roll into it.
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.ino()).ok(),
        Some(inode),
        "{} was removed or recreated by the restart",
        path.display()
    );
    for i in 200..240 {
        let msgs: Vec<_> = (0..4)
            .map(|j| ("Roll", j, body(i * 4 + j as usize, 1900), Some("TagA")))
            .collect();
        append_batch(&mut store, &mut expected, &msgs, 1_000 + i as i64).unwrap();
    }
    assert!(
        store.write_offset() > next + SEG,
        "the appends rolled past the kept segment"
    );
    store.close().unwrap();
    let store = Store::open(disk(), cfg).unwrap();
    assert!(store.recovery().clean);
    assert_eq!(verify(&store, &expected), 960);
}

/// Regression: the preparer thread used to outlive its disk, still zero-filling a segment
/// file a reopened store in the same process might already be writing records into.
#[test]
fn dropping_a_disk_stops_its_preparer() {
    use ringmq_node::store::disk::Disk;
    let dir = temp_dir("ringmq-prepare");
    let path = dir.path().join(segment_name(0));
    let disk = RealDisk::new();
    disk.prepare(&path, 512 << 20);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(Instant::now() < deadline, "preparation never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Let the zero-filling get under way, so the drop lands mid-preparation.
    std::thread::sleep(Duration::from_millis(20));
    drop(disk);
    let written = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.len(), m.modified().unwrap(), m.blocks())
    };
    let at_drop = written(&path);
    // Proving that nothing happens takes time: a live preparer writes far more than once
    // in 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        written(&path),
        at_drop,
        "the file changed after its disk was dropped"
    );
}

/// A tmpfs mounted on a temp dir for one test; unmounted (and the dir removed) on drop,
/// also when the test fails.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::Builder::new()
            .prefix("ringmq-tmpfs")
            .tempdir()
            .unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                println!(
                    "SKIP disk-full test: cannot mount a tmpfs (needs root): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!("SKIP disk-full test: cannot run mount: {e}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something still holds a file (a failing test's store): detach lazily.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Appends batches until the store refuses one; returns the error.
fn fill(store: &mut Store<RealDisk>, expected: &mut Expected, next_id: &mut usize) -> StoreError {
    for _ in 0..100_000 {
        let msgs: Vec<_> = (0..4)
            .map(|q| {
                *next_id += 1;
                ("Full", q, body(*next_id, 1000), Some("TagA"))
            })
            .collect();
        // The clock advances 1 ms a batch, so the used-ratio check (once a second) rarely
        // runs: it is ENOSPC that stops the appends.
        if let Err(e) = append_batch(store, expected, &msgs, 1_000 + *next_id as i64) {
            return e;
        }
        if *next_id % 40 == 0 {
            store.sync().unwrap();
        }
    }
    panic!("a 4 MiB file system never filled up");
}

#[test]
fn disk_full_on_a_small_tmpfs() {
    let Some(fs) = Tmpfs::mount("4m") else {
        return;
    };
    // Space to give back later.
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![0x5Au8; 512 << 10]).unwrap();
    let mut cfg = config(&fs.path().join("store"), 256 << 10);
    cfg.disk_full_ratio = 0.99;
    let mut store = Store::open(RealDisk::new(), cfg.clone()).unwrap();
    let mut expected = Expected::new();
    let mut id = 0;

    let err = fill(&mut store, &mut expected, &mut id);
    println!("full after {id} records: {err}");
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err}");
    assert!(
        err.to_string().contains("No space left on device"),
        "ENOSPC, not the ratio, stops the appends: {err}"
    );
    assert!(!err.is_fatal());
    let acked = verify(&store, &expected);
    assert!(acked > 1000, "only {acked} records fit");
    // Still refused, still readable, not poisoned.
    let again = append_batch(
        &mut store,
        &mut expected,
        &[("Full", 0, body(0, 1000), None)],
        99_999,
    );
    assert!(
        matches!(again, Err(StoreError::DiskFull { .. })),
        "{again:?}"
    );
    store.sync().unwrap();
    store.close().unwrap();

    // Reopen on the full disk: nothing lost, nothing half-prepared in the way.
    let mut store = Store::open(RealDisk::new(), cfg.clone()).unwrap();
    assert!(store.recovery().clean);
    assert_eq!(verify(&store, &expected), acked);

    // Free space: appends work again.
    std::fs::remove_file(&filler).unwrap();
    for i in 0..100 {
        let msgs = vec![("Full", (i % 4) as u32, body(50_000 + i, 1000), None)];
        append_batch(&mut store, &mut expected, &msgs, 200_000).unwrap();
    }
    assert_eq!(verify(&store, &expected), acked + 100);

    // Fill again, then let forced retention make room.
    let err = fill(&mut store, &mut expected, &mut id);
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err}");
    let out = store.remove_expired(300_000, 0, true, 3).unwrap();
    assert_eq!(out.removed_segments, 3);
    for i in 0..100 {
        let msgs = vec![("Full", (i % 4) as u32, body(90_000 + i, 1000), None)];
        append_batch(&mut store, &mut expected, &msgs, 300_000).unwrap();
    }
    let left = verify(&store, &expected);
    store.close().unwrap();
    let store = Store::open(RealDisk::new(), cfg).unwrap();
    assert_eq!(verify(&store, &expected), left);
    drop(store);
    drop(fs);
}
