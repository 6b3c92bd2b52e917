//! Epochs: the consistent point of two replicas' epoch lists (cases and a replication model
//! with elections, unclean ones too), and the store's epoch file (durability across
//! restarts and crashes, truncation).

use std::path::Path;

use proptest::prelude::*;

use super::commitlog::shard_base;
use super::epoch::{consistent_point, push_entry, span_at, EpochEntry};
use super::fault_disk::{Crash, FaultDisk};
use super::tests::{encode, small_config};
use super::*;

fn e(epoch: u32, start_offset: u64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

#[test]
fn old_master_tail_is_cut_where_the_new_epoch_begins() {
    // The old master (epoch 1) wrote up to 1000; the new master (epoch 2) had only 600 of it
    // and has written on to 900 since.
    let old = [e(1, 0)];
    let new = [e(1, 0), e(2, 600)];
    assert_eq!(consistent_point(&old, 1000, &new, 900), Some(600));
    assert_eq!(consistent_point(&new, 900, &old, 1000), Some(600));
    // A replica that has less than the new master of epoch 1 keeps all of it.
    assert_eq!(consistent_point(&old, 400, &new, 900), Some(400));
    // Same history: the shorter end.
    assert_eq!(consistent_point(&new, 700, &new, 900), Some(700));
}

#[test]
fn epochs_with_different_starts_do_not_match() {
    // Both were master of epoch 3 by their lists, from different offsets (one learned of it
    // wrongly): the newest epoch that matches is 2.
    let a = [e(1, 0), e(2, 100), e(3, 300)];
    let b = [e(1, 0), e(2, 100), e(3, 250)];
    assert_eq!(consistent_point(&a, 500, &b, 400), Some(250));
    // An epoch only one side has is skipped.
    let c = [e(1, 0), e(2, 100), e(4, 350)];
    assert_eq!(consistent_point(&a, 500, &c, 400), Some(300));
}

#[test]
fn logs_from_before_epochs() {
    // Neither side has epochs: everything up to the shorter end is epoch 0 on both.
    assert_eq!(consistent_point(&[], 500, &[], 800), Some(500));
    // A slave from before controller mode and a master that began epoch 1 at 500.
    assert_eq!(consistent_point(&[], 800, &[e(1, 500)], 900), Some(500));
    assert_eq!(consistent_point(&[], 300, &[e(1, 500)], 900), Some(300));
    // A master whose first epoch starts at the log's very beginning shares nothing with a
    // log that has no epochs.
    assert_eq!(consistent_point(&[], 300, &[e(1, 0)], 900), None);
    // Shard 1: offsets start at its base; the bytes before it are nobody's.
    let base = shard_base(1);
    assert_eq!(
        consistent_point(&[], base + 300, &[e(1, base)], base + 900),
        Some(base)
    );
    assert_eq!(
        consistent_point(&[e(1, base)], base + 300, &[e(1, base)], base + 900),
        Some(base + 300)
    );
}

#[test]
fn spans() {
    let list = [e(1, 100), e(3, 400)];
    let s = span_at(&list, 50);
    assert_eq!((s.epoch, s.start_offset, s.next_start), (0, 0, Some(100)));
    let s = span_at(&list, 100);
    assert_eq!((s.epoch, s.start_offset, s.next_start), (1, 100, Some(400)));
    let s = span_at(&list, 399);
    assert_eq!((s.epoch, s.next_start), (1, Some(400)));
    let s = span_at(&list, 400);
    assert_eq!((s.epoch, s.start_offset, s.next_start), (3, 400, None));
    assert_eq!(span_at(&[], 7).epoch, 0);
}

#[test]
fn entry_rules() {
    let mut l = Vec::new();
    assert_eq!(push_entry(&mut l, 1, 0), Ok(true));
    assert_eq!(push_entry(&mut l, 1, 0), Ok(false), "the same entry again");
    assert!(
        push_entry(&mut l, 1, 10).is_err(),
        "same epoch, other start"
    );
    assert_eq!(push_entry(&mut l, 2, 10), Ok(true));
    assert!(push_entry(&mut l, 1, 20).is_err(), "lower epoch");
    assert!(push_entry(&mut l, 3, 5).is_err(), "start going back");
    // Epoch 2 held no bytes when epoch 3 began at the same offset: it is replaced.
    assert_eq!(push_entry(&mut l, 3, 10), Ok(true));
    assert_eq!(l, vec![e(1, 0), e(3, 10)]);
}

/// One replica in the replication model: its log (the (epoch, write number) of each
/// one-byte record) and its epoch list.
#[derive(Debug, Clone, Default)]
struct Node {
    log: Vec<(u32, u64)>,
    epochs: Vec<EpochEntry>,
}

impl Node {
    fn end(&self) -> u64 {
        self.log.len() as u64
    }

    /// Joins `master` as the HA link does: cut back to the consistent point, then copy the
    /// rest, one epoch span at a time, learning each epoch's start before its bytes.
    fn follow(&mut self, master: &Node) {
        let p =
            consistent_point(&self.epochs, self.end(), &master.epochs, master.end()).unwrap_or(0);
        assert!(
            self.log[..p as usize] == master.log[..p as usize],
            "the consistent point {p} keeps bytes the master does not have: {self:?} {master:?}"
        );
        if self.end() > p {
            self.log.truncate(p as usize);
            self.epochs.retain(|x| x.start_offset < p);
        }
        let mut at = self.end();
        while at < master.end() {
            let span = span_at(&master.epochs, at);
            let to = span.next_start.unwrap_or(master.end()).min(master.end());
            let last = self.epochs.last().map_or(0, |x| x.epoch);
            if span.epoch > last {
                push_entry(&mut self.epochs, span.epoch, span.start_offset).unwrap();
            }
            self.log
                .extend_from_slice(&master.log[at as usize..to as usize]);
            at = to;
        }
        assert_eq!(self.log, master.log);
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// The master writes n records.
    Write(u8),
    /// Node i follows the master (catches up fully).
    Follow(u8),
    /// Node i follows the master part way (k records at most).
    FollowSome(u8, u8),
    /// Node i becomes master of the next epoch (in sync or not: an unclean election).
    Elect(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u8..5).prop_map(Step::Write),
        (0u8..3).prop_map(Step::Follow),
        (0u8..3, 0u8..6).prop_map(|(i, k)| Step::FollowSome(i, k)),
        (0u8..3).prop_map(Step::Elect),
    ]
}

proptest! {
    /// Whatever the elections, a replica that joins the current master never keeps a byte
    /// the master does not have at the same offset, and ends with the master's log.
    #[test]
    fn joining_by_consistent_point_never_forks(steps in proptest::collection::vec(step(), 1..60)) {
        let mut nodes = [Node::default(), Node::default(), Node::default()];
        let (mut master, mut epoch, mut writes) = (0usize, 0u32, 0u64);
        for s in steps {
            match s {
                Step::Write(n) => {
                    for _ in 0..n {
                        writes += 1;
                        nodes[master].log.push((epoch, writes));
                    }
                }
                Step::Follow(i) if usize::from(i) != master => {
                    let m = nodes[master].clone();
                    nodes[usize::from(i)].follow(&m);
                }
                Step::FollowSome(i, k) if usize::from(i) != master => {
                    let mut m = nodes[master].clone();
                    let keep = consistent_point(
                        &nodes[usize::from(i)].epochs,
                        nodes[usize::from(i)].end(),
                        &m.epochs,
                        m.end(),
                    )
                    .unwrap_or(0)
                    .saturating_add(u64::from(k))
                    .min(m.end());
                    m.log.truncate(keep as usize);
                    m.epochs.retain(|x| x.start_offset <= keep);
                    nodes[usize::from(i)].follow(&m);
                }
                Step::Elect(i) => {
                    epoch += 1;
                    master = usize::from(i);
                    let end = nodes[master].end();
                    push_entry(&mut nodes[master].epochs, epoch, end).unwrap();
                }
                _ => {}
            }
        }
    }
}

fn append(store: &mut Store<FaultDisk>, n: u8) {
    for i in 0..n {
        let mut b = Vec::new();
        encode("T", 0, &[i; 200], None, &mut b);
        store.append(&mut b, 1).unwrap();
    }
}

#[test]
fn begin_epoch_is_durable_and_monotonic() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    assert_eq!(store.last_epoch(), 0);
    assert!(store.epochs().is_empty());
    store.begin_epoch(1).unwrap();
    append(&mut store, 3);
    let at = store.write_offset();
    store.begin_epoch(2).unwrap();
    store.begin_epoch(2).unwrap();
    assert_eq!(store.epochs(), &[e(1, 0), e(2, at)]);
    assert!(store.begin_epoch(1).is_err(), "a lower epoch is refused");
    assert_eq!(store.last_epoch(), 2);
    store.sync().unwrap();
    // Power loss right after: the file was synced and renamed into place.
    let image = disk.image(Crash::DropUnsynced);
    let reopened = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap();
    assert_eq!(reopened.epochs(), &[e(1, 0), e(2, at)]);
    store.close().unwrap();
    let reopened = Store::open(disk, small_config("/s")).unwrap();
    assert_eq!(reopened.epochs(), &[e(1, 0), e(2, at)]);
}

#[test]
fn epochs_past_a_crashed_log_end_are_dropped() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    store.begin_epoch(1).unwrap();
    append(&mut store, 2);
    store.sync().unwrap();
    let synced = store.write_offset();
    append(&mut store, 2);
    store.begin_epoch(2).unwrap();
    // The unsynced records are lost; epoch 2 began after them.
    let image = disk.image(Crash::DropUnsynced);
    let mut reopened = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap();
    assert_eq!(reopened.write_offset(), synced);
    assert_eq!(reopened.epochs(), &[e(1, 0)]);
    // The next master epoch starts at the recovered end.
    reopened.begin_epoch(3).unwrap();
    assert_eq!(reopened.epochs(), &[e(1, 0), e(3, synced)]);
}

#[test]
fn a_crash_during_a_rewrite_leaves_the_old_list_or_the_new() {
    let old = [e(1, 0)];
    for k in 0..8 {
        let disk = FaultDisk::new();
        let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
        store.begin_epoch(1).unwrap();
        append(&mut store, 2);
        store.sync().unwrap();
        let at = store.write_offset();
        // The power goes at the k-th operation of the rewrite.
        disk.crash_at(disk.ops() + k);
        let done = store.begin_epoch(2).is_ok();
        for crash in [Crash::KeepWritten, Crash::DropUnsynced, Crash::TearLast] {
            let image = disk.image(crash);
            let reopened = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap();
            let got = reopened.epochs().to_vec();
            assert!(
                got == old || got == [e(1, 0), e(2, at)],
                "k {k} {crash:?}: {got:?}"
            );
            if done {
                assert_eq!(got, [e(1, 0), e(2, at)], "k {k} {crash:?}: acknowledged");
            }
        }
    }
}

#[test]
fn a_corrupt_epoch_file_stops_the_open() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
    store.begin_epoch(4).unwrap();
    store.close().unwrap();
    let mut image = disk.image(Crash::KeepWritten);
    let f = image.file_mut(Path::new("/s/epoch.0")).unwrap();
    f[14] ^= 1;
    let err = Store::open(FaultDisk::from_image(&image), small_config("/s")).unwrap_err();
    assert!(err.to_string().contains("epoch"), "{err}");
}

#[test]
fn truncation_drops_later_epochs_and_a_slave_records_its_masters() {
    let mut store = Store::open(FaultDisk::new(), small_config("/s")).unwrap();
    store.record_epoch_at(1, 0).unwrap();
    append(&mut store, 3);
    let mid = store.write_offset();
    store.record_epoch_at(2, mid).unwrap();
    append(&mut store, 3);
    assert!(
        store.record_epoch_at(3, store.write_offset() + 1).is_err(),
        "an epoch cannot start past the log end"
    );
    assert!(store.record_epoch_at(1, mid).is_err());
    store.truncate_to(mid).unwrap();
    assert_eq!(store.epochs(), &[e(1, 0)]);
    assert_eq!(store.last_epoch(), 1);
    assert_eq!(store.queue_range("T", 0), Some((0, 3)));
}
