//! Store unit tests over the fault disk. Crash-image and model tests live in
//! `tests_crash.rs` / `tests_model.rs`.

use std::net::SocketAddr;
use std::path::Path;

use ringmq_wire::{properties, record};

use super::fault_disk::{Crash, FaultDisk};
use super::*;

pub(crate) fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

pub(crate) fn small_config(root: &str) -> StoreConfig {
    let mut cfg = StoreConfig::new(root, 0, host());
    cfg.segment_bytes = 4096;
    cfg.cq_units_per_file = 8;
    cfg
}

/// Encodes one record for `topic`/`queue` whose body is `body` and tag `tag`.
pub(crate) fn encode(topic: &str, queue: u32, body: &[u8], tag: Option<&str>, out: &mut Vec<u8>) {
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

fn append_one(
    store: &mut Store<FaultDisk>,
    topic: &str,
    q: u32,
    body: &[u8],
    now: i64,
) -> Appended {
    let mut buf = Vec::new();
    encode(topic, q, body, None, &mut buf);
    store.append(&mut buf, now).unwrap().records[0]
}

fn bodies(store: &Store<FaultDisk>, topic: &str, q: u32, from: u64) -> Vec<Vec<u8>> {
    let r = store.get(topic, q, from, 1000, u64::MAX, |_| true).unwrap();
    let mut out = Vec::new();
    for run in r.runs {
        let mut buf = vec![0u8; run.len as usize];
        store.read(run.physical_offset, &mut buf).unwrap();
        for rec in record::iter(&buf) {
            out.push(rec.unwrap().body.to_vec());
        }
    }
    out
}

#[test]
fn append_assigns_offsets_and_reads_back() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk, small_config("/s")).unwrap();
    let a = append_one(&mut store, "T", 0, b"a", 10);
    let b = append_one(&mut store, "T", 0, b"b", 11);
    let c = append_one(&mut store, "T", 1, b"c", 12);
    assert_eq!((a.queue_offset, b.queue_offset, c.queue_offset), (0, 1, 0));
    assert_eq!(a.physical_offset, 0);
    assert_eq!(b.physical_offset, u64::from(a.size));
    assert_eq!(
        bodies(&store, "T", 0, 0),
        vec![b"a".to_vec(), b"b".to_vec()]
    );
    let rec = store.read_record(b.physical_offset).unwrap();
    let view = record::decode_one(&rec).unwrap();
    assert_eq!(view.queue_offset, 1);
    assert_eq!(view.store_timestamp_ms, 11);
    assert_eq!(view.store_host, host());
    assert_eq!(store.queue_range("T", 0), Some((0, 2)));
    assert_eq!(store.offset_for_timestamp("T", 0, 11).unwrap(), 1);
    assert_eq!(store.offset_for_timestamp("T", 0, 99).unwrap(), 2);
}

#[test]
fn segments_roll_with_blank_and_records_never_span() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    let body = vec![7u8; 1000];
    let mut appended = Vec::new();
    for i in 0..12 {
        appended.push(append_one(&mut store, "T", 0, &body, i));
    }
    for a in &appended {
        let seg_start = a.physical_offset - a.physical_offset % 4096;
        assert!(a.physical_offset + u64::from(a.size) <= seg_start + 4096);
    }
    assert!(store.log_disk_bytes() >= 3 * 4096);
    assert_eq!(bodies(&store, "T", 0, 0).len(), 12);
    store.close().unwrap();
    let store = Store::open(disk, small_config("/s")).unwrap();
    assert!(store.recovery().clean);
    assert_eq!(bodies(&store, "T", 0, 0).len(), 12);
}

#[test]
fn batch_is_all_or_nothing_on_write_failure() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    append_one(&mut store, "T", 0, b"first", 1);
    let mut batch = Vec::new();
    for i in 0..3u8 {
        encode("T", 0, &[i], None, &mut batch);
    }
    disk.fail_op(disk.ops(), libc::EIO);
    assert!(store.append(&mut batch.clone(), 2).is_err());
    assert_eq!(store.queue_range("T", 0), Some((0, 1)));
    let out = store.append(&mut batch, 3).unwrap();
    assert_eq!(out.records[0].queue_offset, 1);
    assert_eq!(bodies(&store, "T", 0, 0).len(), 4);
}

#[test]
fn bad_record_in_batch_stores_nothing() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk, small_config("/s")).unwrap();
    let mut batch = Vec::new();
    encode("T", 0, b"ok", None, &mut batch);
    let at = batch.len();
    encode("T", 0, b"bad", None, &mut batch);
    batch[at + 88] ^= 0xFF;
    assert!(matches!(
        store.append(&mut batch, 1),
        Err(StoreError::BadRecord { .. })
    ));
    assert_eq!(store.queue_range("T", 0), None);
}

#[test]
fn tag_filter_skips_and_advances() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk, small_config("/s")).unwrap();
    let mut batch = Vec::new();
    encode("T", 0, b"x", Some("A"), &mut batch);
    encode("T", 0, b"y", Some("B"), &mut batch);
    encode("T", 0, b"z", Some("A"), &mut batch);
    store.append(&mut batch, 1).unwrap();
    let want = record::tag_hash("B");
    let r = store.get("T", 0, 0, 10, u64::MAX, |h| h == want).unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(r.messages, 1);
    assert_eq!(r.next_offset, 3);
    let r = store.get("T", 0, 2, 10, u64::MAX, |h| h == want).unwrap();
    assert_eq!(r.status, PullStatus::NoMatchedMessage);
    assert_eq!(r.next_offset, 3);
    let r = store.get("T", 0, 3, 10, u64::MAX, |_| true).unwrap();
    assert_eq!(r.status, PullStatus::NoNewMessage);
    let r = store.get("T", 0, 9, 10, u64::MAX, |_| true).unwrap();
    assert_eq!(r.status, PullStatus::OffsetOverflow);
    let r = store.get("T", 0, 0, 1, u64::MAX, |_| true).unwrap();
    assert_eq!((r.messages, r.next_offset), (1, 1));
}

#[test]
fn torn_tail_is_truncated_and_offsets_reused() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    append_one(&mut store, "T", 0, b"durable", 1);
    store.sync().unwrap();
    let torn = append_one(&mut store, "T", 0, b"torn-away-record-body", 2);
    let mut image = disk.image(Crash::KeepWritten);
    drop(store);
    // The second record's write reached the disk only half-way.
    let seg = image
        .file_mut(Path::new("/s/commitlog/0/00000000000000000000"))
        .unwrap();
    let half = (torn.physical_offset + u64::from(torn.size) / 2) as usize;
    seg[half..(torn.physical_offset + u64::from(torn.size)) as usize].fill(0);
    let disk2 = FaultDisk::from_image(&image);
    let mut store = Store::open(disk2, small_config("/s")).unwrap();
    assert!(!store.recovery().clean);
    assert!(store.recovery().torn_tail.is_some());
    assert_eq!(bodies(&store, "T", 0, 0), vec![b"durable".to_vec()]);
    let again = append_one(&mut store, "T", 0, b"next", 3);
    assert_eq!(again.queue_offset, 1);
    assert_eq!(again.physical_offset, torn.physical_offset);
}

/// After a clean close the bytes past the log's end are known to be zero, so opening does
/// not read the rest of the tail segment; after a crash it does (and zeroes what it finds).
#[test]
fn only_an_unclean_open_reads_the_tail_segment_through() {
    let mut cfg = small_config("/s");
    cfg.segment_bytes = 1 << 20;
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), cfg.clone()).unwrap();
    append_one(&mut store, "T", 0, b"one", 1);
    append_one(&mut store, "T", 0, b"two", 2);
    store.sync().unwrap();
    let crashed = disk.image(Crash::KeepWritten);
    store.close().unwrap();

    let before = disk.bytes_read();
    let store = Store::open(disk.clone(), cfg.clone()).unwrap();
    let read = disk.bytes_read() - before;
    assert!(store.recovery().clean);
    assert!(read < 64 << 10, "a clean open read {read} bytes");
    assert_eq!(
        bodies(&store, "T", 0, 0),
        vec![b"one".to_vec(), b"two".to_vec()]
    );

    let disk = FaultDisk::from_image(&crashed);
    let store = Store::open(disk.clone(), cfg.clone()).unwrap();
    assert!(!store.recovery().clean);
    let read = disk.bytes_read();
    assert!(
        read >= cfg.segment_bytes - 4096,
        "an unclean open read {read} bytes"
    );
    assert_eq!(
        bodies(&store, "T", 0, 0),
        vec![b"one".to_vec(), b"two".to_vec()]
    );
}

#[test]
fn unsynced_records_may_vanish_but_synced_ones_stay() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    append_one(&mut store, "T", 0, b"synced", 1);
    store.sync().unwrap();
    append_one(&mut store, "T", 0, b"buffered", 2);
    let image = disk.image(Crash::DropUnsynced);
    drop(store);
    let store = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap();
    assert_eq!(bodies(&store, "T", 0, 0), vec![b"synced".to_vec()]);
    assert_eq!(store.queue_range("T", 0), Some((0, 1)));
}

#[test]
fn corruption_below_durable_offset_is_reported() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    let a = append_one(&mut store, "T", 0, b"one", 1);
    append_one(&mut store, "T", 0, b"two", 2);
    store.checkpoint().unwrap();
    let mut image = disk.image(Crash::DropUnsynced);
    drop(store);
    let seg = Path::new("/s/commitlog/0/00000000000000000000");
    let bytes = image.file_mut(seg).unwrap();
    bytes[(a.physical_offset + 88) as usize] ^= 0x55;
    // Corruption is found even when the checkpoint says the ConsumeQueue covered it: recovery
    // is forced to rescan from zero by removing the checkpoint.
    let cp = Path::new("/s/checkpoint.0");
    let cp_bytes = image.file_mut(cp).unwrap();
    let head = Checkpoint::newest(cp_bytes).unwrap();
    let rescan = Checkpoint {
        sequence: head.sequence + 1,
        cq_offset: 0,
        ..head
    };
    cp_bytes[rescan.slot() as usize..][..64].copy_from_slice(&rescan.encode());
    let err = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { offset: 0, .. }),
        "{err}"
    );
}

#[test]
fn disk_full_is_distinct_and_recoverable() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    let body = vec![1u8; 1500];
    append_one(&mut store, "T", 0, &body, 1);
    disk.set_capacity(Some(disk.used_bytes()));
    let mut err = None;
    for i in 0..10 {
        let mut buf = Vec::new();
        encode("T", 0, &body, None, &mut buf);
        if let Err(e) = store.append(&mut buf, 2 + i) {
            err = Some(e);
            break;
        }
    }
    assert!(matches!(err, Some(StoreError::DiskFull { .. })), "{err:?}");
    let before = bodies(&store, "T", 0, 0).len();
    disk.set_capacity(None);
    append_one(&mut store, "T", 0, &body, 100);
    assert_eq!(bodies(&store, "T", 0, 0).len(), before + 1);
}

#[test]
fn retention_removes_old_segments_and_moves_queue_minimum() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk, small_config("/s")).unwrap();
    let body = vec![3u8; 1000];
    for i in 0..12 {
        append_one(&mut store, "T", 0, &body, 1000 + i);
    }
    let segs_before = store.log_disk_bytes() / 4096;
    let out = store.remove_expired(1_000_000, 10, false, 10).unwrap();
    assert!(out.removed_segments >= 1);
    assert_eq!(
        store.log_disk_bytes() / 4096,
        segs_before - u64::from(out.removed_segments)
    );
    let (min, max) = store.queue_range("T", 0).unwrap();
    assert!(min > 0 && max == 12);
    let r = store.get("T", 0, 0, 10, u64::MAX, |_| true).unwrap();
    assert_eq!(r.status, PullStatus::OffsetTooSmall);
    assert_eq!(bodies(&store, "T", 0, min).len() as u64, max - min);
    // Nothing expired: nothing removed unless forced.
    assert_eq!(
        store
            .remove_expired(1000, 1_000_000, false, 10)
            .unwrap()
            .removed_segments,
        0
    );
}

#[test]
fn fsync_failure_poisons_the_store() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    append_one(&mut store, "T", 0, b"x", 1);
    disk.fail_op(disk.ops(), libc::EIO);
    assert!(store.sync().unwrap_err().is_fatal());
    let mut buf = Vec::new();
    encode("T", 0, b"y", None, &mut buf);
    assert!(matches!(
        store.append(&mut buf, 2),
        Err(StoreError::Poisoned)
    ));
}

#[test]
fn durable_log_bytes_behind_the_kept_window_are_released() {
    const MIB: u64 = 1 << 20;
    let disk = FaultDisk::new();
    let mut cfg = small_config("/s");
    cfg.segment_bytes = 4 * MIB;
    cfg.cache_keep_bytes = 3 * MIB;
    let mut store = Store::open(disk.clone(), cfg).unwrap();
    let body = vec![7u8; 256 << 10];
    let mut appended = Vec::new();
    while store.write_offset() < 24 * MIB {
        appended.push(append_one(&mut store, "T", 0, &body, 1));
    }
    assert!(
        disk.released().is_empty(),
        "nothing is released before it is durable"
    );
    let synced = store.sync().unwrap();
    let released = disk.released();
    assert!(!released.is_empty());
    assert!(
        released.iter().all(|r| r.3),
        "only durable bytes are released"
    );
    let mut covered = 0;
    for (path, offset, len, _) in &released {
        let start: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        assert_eq!(
            start + offset,
            covered,
            "ranges are contiguous from the log start"
        );
        assert!(offset + len <= 4 * MIB, "a range stays inside its segment");
        covered = start + offset + len;
    }
    assert_eq!(
        covered,
        synced - 3 * MIB,
        "everything older than the kept window"
    );
    // Releasing is advice: every record still reads back.
    assert_eq!(bodies(&store, "T", 0, 0).len(), appended.len());
    // A second sync with less than a release step of new durable bytes releases nothing.
    append_one(&mut store, "T", 0, &body, 2);
    store.sync().unwrap();
    assert_eq!(disk.released().len(), released.len());
    // The next release starts RELEASE_OVERLAP_BYTES below where this one ended: a
    // page-cache folio across that end is dropped only by a release that covers it whole.
    while store.write_offset() < synced + 12 * MIB {
        append_one(&mut store, "T", 0, &body, 3);
    }
    let synced2 = store.sync().unwrap();
    let all = disk.released();
    let again: Vec<(u64, u64)> = all[released.len()..]
        .iter()
        .map(|(path, offset, len, _)| {
            let start: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
            (start + offset, start + offset + len)
        })
        .collect();
    use super::commitlog::cache::RELEASE_OVERLAP_BYTES;
    assert_eq!(again.first().unwrap().0, covered - RELEASE_OVERLAP_BYTES);
    assert_eq!(again.last().unwrap().1, synced2 - 3 * MIB);
}

/// A store with 64 MiB segments and an 8 MiB kept window, `mib` MiB of 256 KiB records on
/// queue T/0 appended and synced (so all but the last ~8 MiB released), and the records'
/// physical offsets.
fn released_log(mib: u64) -> (FaultDisk, Store<FaultDisk>, Vec<u64>) {
    const MIB: u64 = 1 << 20;
    let disk = FaultDisk::new();
    let mut cfg = small_config("/s");
    cfg.segment_bytes = 64 * MIB;
    cfg.cache_keep_bytes = 8 * MIB;
    let mut store = Store::open(disk.clone(), cfg).unwrap();
    let body = vec![7u8; 256 << 10];
    let mut phys = Vec::new();
    while store.write_offset() < mib * MIB {
        phys.push(append_one(&mut store, "T", 0, &body, 1).physical_offset);
    }
    store.sync().unwrap();
    (disk, store, phys)
}

/// A pull in released bytes asks for the next stretch of them to be read back, once per
/// half window as the reader moves on, never past the released end; pulls in the kept
/// window ask for nothing.
#[test]
fn a_reader_in_released_bytes_has_them_read_ahead() {
    use super::commitlog::cache::READ_AHEAD_BYTES;
    const MIB: u64 = 1 << 20;
    let (disk, store, phys) = released_log(100);
    let released = store.cache_released();
    assert!(released > 80 * MIB);
    let pull = |q: u64| store.get("T", 0, q, 4, u64::MAX, |_| true).unwrap();
    // (absolute offset, length) of each request.
    let calls = || -> Vec<(u64, u64)> {
        disk.read_ahead_calls()
            .iter()
            .map(|(path, off, len)| {
                let start: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
                (start + off, *len)
            })
            .collect()
    };
    // From the start: one request for the first window.
    pull(0);
    let c = calls();
    assert_eq!(c, vec![(phys[0], READ_AHEAD_BYTES)]);
    // Within the first half of it: nothing more.
    let q_at = |off: u64| phys.iter().position(|p| *p >= off).unwrap() as u64;
    pull(q_at(READ_AHEAD_BYTES / 4));
    assert_eq!(calls().len(), 1);
    // Past its middle: the stretch after it, not again what was asked for.
    let q = q_at(READ_AHEAD_BYTES * 3 / 4);
    pull(q);
    let c = calls();
    assert_eq!(c.len(), 2);
    assert_eq!(
        c[1].0,
        phys[0] + READ_AHEAD_BYTES,
        "it goes on from the window's end"
    );
    assert_eq!(c[1].0 + c[1].1, phys[q as usize] + READ_AHEAD_BYTES);
    // Near the released end: never past it (a window across segments is one request per
    // segment).
    pull(q_at(released - MIB));
    let last = *calls().last().unwrap();
    assert_eq!(last.0 + last.1, released);
    // In the kept window: nothing.
    let n = calls().len();
    pull(q_at(released + MIB));
    assert_eq!(calls().len(), n);
    // Two readers far apart each keep their own window: pulling them in turn asks for
    // nothing new until one passes the middle of its window.
    let (a, b) = (q_at(20 * MIB), q_at(60 * MIB));
    pull(a);
    pull(b);
    let n = calls().len();
    for _ in 0..3 {
        pull(a);
        pull(b);
        pull(a + 1);
        pull(b + 1);
    }
    assert_eq!(calls().len(), n, "readers restarted each other's windows");
}

#[test]
fn nothing_is_released_without_a_kept_window() {
    let disk = FaultDisk::new();
    let mut cfg = small_config("/s");
    cfg.segment_bytes = 1 << 20;
    let mut store = Store::open(disk.clone(), cfg).unwrap();
    let body = vec![7u8; 256 << 10];
    while store.write_offset() < 24 << 20 {
        append_one(&mut store, "T", 0, &body, 1);
    }
    store.sync().unwrap();
    assert!(disk.released().is_empty());
}

/// Zeros written ahead of the appends (`commitLogPrewriteBytes`, the shard's idle steps) land
/// only past the log's end, inside its segment, up to the asked distance; every record reads
/// back, after segment rolls, a rollback and a crash that keeps or drops unsynced writes.
#[test]
fn zeros_ahead_of_the_appends_never_touch_a_record() {
    use super::commitlog::PREWRITE_STEP_BYTES;
    const KIB: u64 = 1 << 10;
    let disk = FaultDisk::new();
    let mut cfg = small_config("/s");
    cfg.segment_bytes = 1 << 20;
    cfg.prewrite_bytes = 192 * KIB;
    let mut store = Store::open(disk.clone(), cfg.clone()).unwrap();
    assert!(!store.prewrite_pending(), "no segment yet: nothing to do");
    let mut appended = Vec::new();
    let mut steps = 0;
    for i in 0..120u8 {
        let body = vec![i | 1; 9_000 + usize::from(i) * 331];
        appended.push(body.clone());
        append_one(&mut store, "T", 0, &body, 1);
        if i % 3 != 0 {
            // The loop is idle after most appends, not all.
            while store.prewrite_pending() {
                store.prewrite_step().unwrap();
                steps += 1;
            }
            let end = store.write_offset();
            let seg_end = (end / (1 << 20) + 1) * (1 << 20);
            let (file, at) = store.locate(end).unwrap();
            let want = (192 * KIB).min(seg_end - end);
            let mut ahead = vec![1u8; want as usize];
            disk.read_at(file, at, &mut ahead).unwrap();
            assert!(ahead.iter().all(|&b| b == 0), "zeros up to the distance");
            assert_eq!(
                disk.file_len(file).unwrap(),
                1 << 20,
                "never past the segment"
            );
        }
        if i == 60 {
            // An append that fails after placing is rolled back: the zeros written past it
            // are past the restored end too.
            let sp = store.log.save_point();
            store.log.place(50_000).unwrap();
            store.prewrite_step().unwrap();
            store.log.restore(sp);
        }
    }
    assert!(steps > 10, "steps ran: {steps}");
    assert!(store.write_offset() > 3 << 20, "several segment rolls");
    assert!(
        PREWRITE_STEP_BYTES as u64 >= 64 * KIB,
        "a step covers a batch"
    );
    assert_eq!(bodies(&store, "T", 0, 0), appended);
    store.sync().unwrap();
    let last = vec![0xEEu8; 20_000];
    append_one(&mut store, "T", 0, &last, 2);
    store.prewrite_step().unwrap();
    for crash in [Crash::KeepWritten, Crash::DropUnsynced, Crash::TearLast] {
        let image = disk.image(crash);
        let reopened = Store::open(FaultDisk::from_image(&image), cfg.clone()).unwrap();
        let got = bodies(&reopened, "T", 0, 0);
        assert_eq!(got[..appended.len()], appended[..], "{crash:?}");
        if crash == Crash::KeepWritten {
            assert_eq!(got.last(), Some(&last));
        }
    }
}

/// Off by default in a bare store, and a store with it off never has zeros to write.
#[test]
fn no_zeros_ahead_unless_asked() {
    let mut store = Store::open(FaultDisk::new(), small_config("/s")).unwrap();
    append_one(&mut store, "T", 0, b"x", 1);
    assert!(!store.prewrite_pending());
}

/// A reader catching up through released bytes has what it read back released again once
/// it is [`READ_AHEAD_BYTES`] past it (the page cache recycles those pages for its next
/// read-ahead), but not while another reader is behind: that one still needs them.
#[test]
fn what_a_catch_up_reader_read_back_is_released_behind_it() {
    use super::commitlog::cache::{self, READ_AHEAD_BYTES};
    const MIB: u64 = 1 << 20;
    let (disk, store, phys) = released_log(200);
    let released = store.cache_released();
    assert!(released > 180 * MIB);
    let first_release = disk.released().len();
    let q_at = |off: u64| phys.iter().position(|p| *p >= off).unwrap() as u64;
    let pull = |q: u64| {
        store.get("T", 0, q, 4, u64::MAX, |_| true).unwrap();
    };
    // Released again: absolute (start, end) of each release after the first.
    let again = || -> Vec<(u64, u64)> {
        disk.released()[first_release..]
            .iter()
            .map(|(path, off, len, _)| {
                let start: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
                (start + off, start + off + len)
            })
            .collect()
    };
    // Two readers pulling in turn, one 40 MiB ahead: whatever is released again is behind
    // the slower one by the read-ahead distance, so the faster one releases nothing the
    // slower one still has to read.
    let (mut slow, mut fast) = (0, 40 * MIB);
    while fast < 120 * MIB {
        pull(q_at(slow));
        pull(q_at(fast));
        for &(a, b) in &again() {
            assert!(
                b + READ_AHEAD_BYTES <= phys[q_at(slow) as usize],
                "released {a}..{b} ahead of the slow reader at {slow}"
            );
        }
        slow += MIB / 2;
        fast += MIB;
    }
    assert!(
        !again().is_empty(),
        "the slower reader released behind itself"
    );
    // The slower one stops; the other goes on and, once the stopped one is stale, releases
    // behind itself.
    let before = again().len();
    let mut n = 0;
    while n < cache::READ_AHEAD_STALE_TURNS + 100 {
        pull(q_at(fast));
        n += 1;
        fast += MIB / 32;
    }
    let got = again();
    assert!(got.len() > before, "nothing released behind the reader");
    let reader = phys[q_at(fast) as usize];
    for &(a, b) in &got {
        assert!(
            b + READ_AHEAD_BYTES <= reader,
            "released {a}..{b}, within {READ_AHEAD_BYTES} bytes of the reader at {reader}"
        );
    }
    let covered: u64 = got.iter().map(|(a, b)| b - a).sum();
    assert!(
        covered >= 100 * MIB,
        "behind the readers: {covered} bytes released again"
    );
    // Every record still reads back.
    assert_eq!(bodies(&store, "T", 0, 0).len(), phys.len().min(1000));
}

#[test]
fn a_larger_segment_size_is_refused_and_removes_no_record() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    append_one(&mut store, "T", 0, b"kept", 10);
    store.shutdown().unwrap();
    drop(store);
    let mut bigger = small_config("/s");
    bigger.segment_bytes = 8192;
    let Err(err) = Store::open(disk.clone(), bigger) else {
        panic!("a larger segment size was accepted");
    };
    assert!(
        err.to_string().contains("was the segment size changed?"),
        "{err}"
    );
    let mut store = Store::open(disk, small_config("/s")).unwrap();
    assert_eq!(bodies(&store, "T", 0, 0), vec![b"kept".to_vec()]);
    store.shutdown().unwrap();
}
