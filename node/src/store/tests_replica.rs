//! Replication at the store level: shipping a master's log to a slave gives byte-identical
//! logs and equal ConsumeQueues, across segment rolls, restarts and truncation.

use super::fault_disk::{Crash, FaultDisk};
use super::tests::{encode, small_config};
use super::*;

fn ship_all(master: &Store<FaultDisk>, slave: &mut Store<FaultDisk>, max: u64) -> usize {
    let mut shipments = 0;
    while slave.write_offset() < master.write_offset() {
        let from = slave.write_offset();
        let r = master.ship_range(from, master.write_offset(), max).unwrap();
        let mut bytes = vec![0u8; r.send_len as usize];
        master.read(from, &mut bytes).unwrap();
        let end = slave.append_replicated(from, &bytes, 5).unwrap();
        assert_eq!(end, r.end);
        shipments += 1;
    }
    shipments
}

fn log_bytes(s: &Store<FaultDisk>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut pos = s.min_offset();
    let seg = s.config().segment_bytes;
    while pos < s.write_offset() {
        let end = (pos - pos % seg + seg).min(s.write_offset());
        let mut b = vec![0u8; (end - pos) as usize];
        s.read(pos, &mut b).unwrap();
        out.extend_from_slice(&b);
        pos = end;
    }
    out
}

#[test]
fn slave_log_is_byte_identical_across_rolls() {
    let mut master = Store::open(FaultDisk::new(), small_config("/m")).unwrap();
    let mut slave = Store::open(FaultDisk::new(), small_config("/s")).unwrap();
    for i in 0..40u32 {
        let mut batch = Vec::new();
        for j in 0..3u32 {
            let body = vec![(i + j) as u8; 100 + (i as usize * 37) % 700];
            encode("T", (i + j) % 3, &body, Some("tag"), &mut batch);
        }
        master.append(&mut batch, 1000 + i64::from(i)).unwrap();
        if i % 7 == 0 {
            ship_all(&master, &mut slave, 1500);
        }
    }
    let n = ship_all(&master, &mut slave, 1500);
    assert!(n > 0);
    assert_eq!(slave.write_offset(), master.write_offset());
    assert!(
        master.log_disk_bytes() > 4096 * 3,
        "several segments rolled"
    );
    assert_eq!(log_bytes(&slave), log_bytes(&master));
    for q in 0..3 {
        assert_eq!(slave.queue_range("T", q), master.queue_range("T", q));
        let a = master.get("T", q, 0, 1000, u64::MAX, |_| true).unwrap();
        let b = slave.get("T", q, 0, 1000, u64::MAX, |_| true).unwrap();
        assert_eq!(a.runs, b.runs);
    }
}

#[test]
fn bad_shipments_are_refused_whole() {
    let mut master = Store::open(FaultDisk::new(), small_config("/m")).unwrap();
    let mut slave = Store::open(FaultDisk::new(), small_config("/s")).unwrap();
    let mut batch = Vec::new();
    encode("T", 0, b"one", None, &mut batch);
    encode("T", 0, b"two", None, &mut batch);
    master.append(&mut batch, 1).unwrap();
    let end = master.write_offset();
    let mut bytes = vec![0u8; end as usize];
    master.read(0, &mut bytes).unwrap();
    // Wrong position.
    assert!(slave.append_replicated(10, &bytes, 1).is_err());
    // A flipped body byte fails the CRC.
    let mut bad = bytes.clone();
    bad[90] ^= 1;
    assert!(slave.append_replicated(0, &bad, 1).is_err());
    assert_eq!(slave.write_offset(), 0);
    assert_eq!(
        slave.queue_range("T", 0),
        None.or(slave.queue_range("T", 0))
    );
    slave.append_replicated(0, &bytes, 1).unwrap();
    assert_eq!(slave.queue_range("T", 0), Some((0, 2)));
}

#[test]
fn slave_ahead_of_master_truncates() {
    let mut master = Store::open(FaultDisk::new(), small_config("/m")).unwrap();
    let mut slave = Store::open(FaultDisk::new(), small_config("/s")).unwrap();
    for i in 0..10u8 {
        let mut b = Vec::new();
        encode("T", 0, &[i; 500], None, &mut b);
        master.append(&mut b, 1).unwrap();
    }
    ship_all(&master, &mut slave, 2000);
    let cut = master.get("T", 0, 4, 1, u64::MAX, |_| true).unwrap().runs[0].physical_offset;
    slave.truncate_to(cut).unwrap();
    assert_eq!(slave.write_offset(), cut);
    assert_eq!(slave.queue_range("T", 0), Some((0, 4)));
    // It resumes from there and converges again.
    ship_all(&master, &mut slave, 2000);
    assert_eq!(log_bytes(&slave), log_bytes(&master));
    assert_eq!(slave.queue_range("T", 0), Some((0, 10)));
}

#[test]
fn empty_slave_joins_a_master_whose_oldest_segments_are_gone() {
    let mut master = Store::open(FaultDisk::new(), small_config("/m")).unwrap();
    for i in 0..30u8 {
        let mut b = Vec::new();
        encode("T", u32::from(i % 2), &[i; 700], None, &mut b);
        master.append(&mut b, 1000 + i64::from(i)).unwrap();
    }
    let removed = master.remove_expired(1_000_000, 1, true, 2).unwrap();
    assert!(removed.removed_segments > 0);
    let slave_disk = FaultDisk::new();
    let mut slave = Store::open(slave_disk.clone(), small_config("/s")).unwrap();
    slave.start_empty_at(master.min_offset()).unwrap();
    ship_all(&master, &mut slave, 3000);
    for q in 0..2 {
        assert_eq!(slave.queue_range("T", q), master.queue_range("T", q));
    }
    slave.close().unwrap();
    let reopened = Store::open(slave_disk, small_config("/s")).unwrap();
    for q in 0..2 {
        assert_eq!(
            reopened.queue_range("T", q),
            master.queue_range("T", q),
            "queue {q} after reopen"
        );
    }
}

/// A truncation that fails part-way (the disk dies at any one of its operations), or a
/// crash at that point, never leaves a store that recovers to zeros: the reopened store
/// holds a prefix of the old log no shorter than the cut (a later join cuts it again), and
/// every record in it reads.
#[test]
fn a_truncation_cut_short_by_a_dead_disk_recovers_to_either_end() {
    let mut master = Store::open(FaultDisk::new(), small_config("/m")).unwrap();
    for i in 0..10u8 {
        let mut b = Vec::new();
        encode("T", 0, &[i; 500], None, &mut b);
        master.append(&mut b, 1).unwrap();
    }
    let phys: Vec<u64> = (0..10)
        .map(|q| master.get("T", 0, q, 1, u64::MAX, |_| true).unwrap().runs[0].physical_offset)
        .collect();
    let (cut, end) = (phys[4], master.write_offset());
    let mut tried = 0;
    for k in 0.. {
        let disk = FaultDisk::new();
        let mut slave = Store::open(disk.clone(), small_config("/s")).unwrap();
        ship_all(&master, &mut slave, 2000);
        slave.checkpoint().unwrap();
        let at = disk.ops() + k;
        disk.crash_at(at);
        let done = slave.truncate_to(cut).is_ok();
        drop(slave);
        for crash in [Crash::KeepWritten, Crash::DropUnsynced] {
            let image = disk.image(crash);
            let back = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap();
            let w = back.write_offset();
            assert!(
                (cut..=end).contains(&w),
                "disk dead from op {at} (truncation op {k}, {crash:?}): recovered to {w}, outside {cut}..={end}"
            );
            let (lo, hi) = back.queue_range("T", 0).unwrap();
            let below = phys.iter().filter(|p| **p < w).count() as u64;
            assert_eq!(hi, below, "truncation op {k}, {crash:?}: queue end");
            for q in lo..hi {
                let got = back.get("T", 0, q, 1, u64::MAX, |_| true).unwrap();
                assert_eq!(
                    got.runs.len(),
                    1,
                    "queue offset {q} after op {at} ({crash:?})"
                );
            }
        }
        tried += 1;
        if done {
            break;
        }
    }
    assert!(tried > 3, "the truncation took {tried} disk operations");
}
