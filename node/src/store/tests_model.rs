//! The store against a model (testing ladder, rung 3). Seeded random operations run on a
//! [`FaultDisk`] store and on an in-memory oracle (per queue: its records in offset order and
//! its minimum offset), and every answer of the store is checked against the oracle:
//!
//! - append batches of 1..4 records to random (topic, queue), with random bodies (empty to
//!   1.5 KiB, so 4 KiB segments roll) and tags; sometimes with an I/O error injected into one
//!   of the append's operations, or with the disk full (by ratio or by ENOSPC): then the
//!   append must fail and leave nothing behind;
//! - sync, checkpoint;
//! - get with random offsets (below min, in range, at and past max), limits (messages and
//!   bytes) and tag filters: status, offsets, runs and the record bytes;
//! - read_record by physical offset (real and bogus), offset_for_timestamp;
//! - remove_expired with time advancing, forced or not: the oracle drops what lies below the
//!   new log start; unforced retention must only remove expired records;
//! - clean close + reopen: nothing changes;
//! - crash + reopen under a random [`Crash`] mode: everything synced survives, a process kill
//!   keeps everything, and the store equals the oracle cut at the recovered log end.
//!
//! After reopens (and every few steps) the whole store is compared with the oracle, and its
//! ConsumeQueues with a rebuild from the log. `RINGMQ_MODEL_SEEDS` sets how many seeds run
//! (default 48); a failure names its seed and step.

use std::collections::BTreeMap;
use std::path::Path;

use ringmq_wire::record;

use super::disk::Disk;
use super::fault_disk::{Crash, FaultDisk};
use super::tests::{encode, small_config};
use super::tests_crash::{assert_queues_match_log, collect, scan_log_entries, unique, Rng, MODES};
use super::*;

const ROOT: &str = "/model";
const STEPS_PER_SEED: usize = 400;
const SEEDS_DEFAULT: u64 = 48;
const TOPICS: [&str; 3] = ["Alpha", "Beta", "%DLQ%group"];
const TAGS: [Option<&str>; 4] = [None, Some("TagA"), Some("TagB"), Some("TagC")];

/// One record the oracle knows.
#[derive(Debug, Clone)]
struct Rec {
    physical_offset: u64,
    size: u32,
    body: Vec<u8>,
    tag: Option<&'static str>,
    store_timestamp_ms: i64,
}

/// One queue of the oracle: `recs[i]` has queue offset `i`; `recs[..min]` were removed by
/// retention.
#[derive(Debug, Clone, Default)]
struct OracleQueue {
    recs: Vec<Rec>,
    min: u64,
}

impl OracleQueue {
    fn max(&self) -> u64 {
        self.recs.len() as u64
    }
}

type Oracle = BTreeMap<(String, u32), OracleQueue>;

/// One message of a batch: topic, queue, body, tag.
type Msg = (String, u32, Vec<u8>, Option<&'static str>);

fn config() -> StoreConfig {
    let mut cfg = small_config(ROOT);
    // Only a really full disk refuses by ratio, so ENOSPC is reached too.
    cfg.disk_full_ratio = 0.999;
    cfg
}

struct Model {
    rng: Rng,
    disk: FaultDisk,
    store: Store<FaultDisk>,
    oracle: Oracle,
    now_ms: i64,
    next_id: u64,
    ctx: String,
    stats: BTreeMap<&'static str, u64>,
    /// Log end when each topic was last deleted: its records below stay in the log only.
    deleted_before: BTreeMap<String, u64>,
}

impl Model {
    fn new(seed: u64) -> Self {
        let disk = FaultDisk::new();
        let store = Store::open(disk.clone(), config()).expect("open");
        Model {
            rng: Rng::new(seed),
            disk,
            store,
            oracle: Oracle::new(),
            now_ms: 1_000,
            next_id: 0,
            ctx: String::new(),
            stats: BTreeMap::new(),
            deleted_before: BTreeMap::new(),
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_insert(0) += 1;
    }

    fn step(&mut self) {
        self.now_ms += self.rng.range(0, 30) as i64;
        let (name, op): (&str, fn(&mut Self)) = match self.rng.range(0, 100) {
            0..=37 => ("append", Self::append),
            38..=45 => ("sync", Self::sync),
            46..=49 => ("checkpoint", Self::checkpoint),
            50..=69 => ("get", Self::get),
            70..=75 => ("read_record", Self::read_record),
            76..=80 => ("offset_for_timestamp", Self::offset_for_timestamp),
            81..=86 => ("remove_expired", Self::remove_expired),
            87..=89 => ("reopen_clean", Self::reopen_clean),
            90..=93 => ("crash_and_reopen", Self::crash_and_reopen),
            94 => ("delete_topic", Self::delete_topic),
            _ => ("append_with_fault", Self::append_with_fault),
        };
        self.ctx.push_str(&format!(" ({name})"));
        if std::env::var_os("RINGMQ_MODEL_TRACE").is_some() {
            println!("{}", self.ctx);
        }
        op(self);
    }

    fn random_queue(&mut self) -> (String, u32) {
        let topic = *self.rng.pick(&TOPICS);
        (topic.to_string(), self.rng.range(0, 3) as u32)
    }

    /// A random batch and what each record of it is.
    fn batch(&mut self) -> (Vec<u8>, Vec<Msg>) {
        let n = self.rng.range(1, 5);
        let mut bytes = Vec::new();
        let mut msgs = Vec::new();
        for _ in 0..n {
            let (t, q) = self.random_queue();
            let len = if self.rng.chance(10) {
                self.rng.range(0, 1500)
            } else {
                self.rng.range(0, 120)
            };
            let id = self.next_id;
            self.next_id += 1;
            let mut body = if self.rng.chance(5) {
                Vec::new()
            } else {
                format!("{id}:").into_bytes()
            };
            body.extend((0..len).map(|i| (i as u8).wrapping_mul(31) ^ id as u8));
            let tag = *self.rng.pick(&TAGS);
            encode(&t, q, &body, tag, &mut bytes);
            msgs.push((t, q, body, tag));
        }
        (bytes, msgs)
    }

    fn append(&mut self) {
        let (mut bytes, msgs) = self.batch();
        let out = self
            .store
            .append(&mut bytes, self.now_ms)
            .unwrap_or_else(|e| panic!("{}: append: {e}", self.ctx));
        self.apply_append(&out, msgs);
        self.count("append ok");
    }

    fn apply_append(&mut self, out: &AppendOutcome, msgs: Vec<Msg>) {
        assert_eq!(out.records.len(), msgs.len());
        assert_eq!(out.store_timestamp_ms, self.now_ms);
        for (a, (t, q, body, tag)) in out.records.iter().zip(msgs) {
            let oq = self.oracle.entry((t.clone(), q)).or_default();
            assert_eq!(a.queue_id, q);
            assert_eq!(a.queue_offset, oq.max(), "{}: {t}/{q} offset", self.ctx);
            if let Some(last) = oq.recs.last() {
                assert!(a.physical_offset > last.physical_offset);
            }
            oq.recs.push(Rec {
                physical_offset: a.physical_offset,
                size: a.size,
                body,
                tag,
                store_timestamp_ms: self.now_ms,
            });
        }
        assert_eq!(out.end_offset, self.store.write_offset());
    }

    /// An append that meets a fault: an I/O error on one of its operations, or a full disk.
    /// If it fails, nothing of it may be visible, now or after any reopen.
    fn append_with_fault(&mut self) {
        let (mut bytes, msgs) = self.batch();
        let before = self.store.write_offset();
        let used = self.disk.used_bytes();
        let fault = self.rng.range(0, 3);
        let target = self.disk.ops() + self.rng.range(0, 4);
        match fault {
            0 => self.disk.fail_op(target, libc::EIO),
            1 => self.disk.set_capacity(Some(used)),
            _ => self.disk.set_capacity(Some(used + self.rng.range(0, 2500))),
        }
        let res = self.store.append(&mut bytes, self.now_ms);
        self.disk.set_capacity(None);
        if fault == 0 {
            // Disarm an injected error the append did not reach.
            while self.disk.ops() <= target {
                let _ = self.disk.create_dir_all(Path::new("/burn"));
            }
        }
        match res {
            Ok(out) => {
                self.apply_append(&out, msgs);
                self.count("append ok despite fault");
            }
            Err(e) => {
                if fault > 0 {
                    assert!(
                        matches!(e, StoreError::DiskFull { .. }),
                        "{}: {e}",
                        self.ctx
                    );
                    self.count("append DiskFull");
                } else {
                    self.count("append EIO");
                }
                if std::env::var_os("RINGMQ_MODEL_TRACE").is_some() {
                    println!(
                        "  failed: {e}; ids {}..{}",
                        self.next_id - msgs.len() as u64,
                        self.next_id
                    );
                }
                assert!(
                    !e.is_fatal(),
                    "{}: a failed write is not fatal: {e}",
                    self.ctx
                );
                assert_eq!(
                    self.store.write_offset(),
                    before,
                    "{}: offsets reused",
                    self.ctx
                );
                self.check_ranges();
            }
        }
    }

    fn sync(&mut self) {
        let end = self.store.sync().expect("sync");
        assert_eq!(end, self.store.write_offset());
        assert_eq!(self.store.synced_offset(), end);
        self.count("sync");
    }

    fn checkpoint(&mut self) {
        self.store.checkpoint().expect("checkpoint");
        assert_eq!(self.store.synced_offset(), self.store.write_offset());
        self.count("checkpoint");
    }

    fn get(&mut self) {
        let (t, q) = self.random_queue();
        let oq = self.oracle.get(&(t.clone(), q)).cloned();
        let (min, max) = oq.as_ref().map_or((0, 0), |o| (o.min, o.max()));
        let offset = self.rng.range(min.saturating_sub(2), max + 3);
        let max_messages = self.rng.range(1, 9) as u32;
        let max_bytes = if self.rng.chance(30) {
            self.rng.range(1, 2000)
        } else {
            u64::MAX
        };
        let want_tag = if self.rng.chance(40) {
            Some(*self.rng.pick(&["TagA", "TagB", "TagC", "Nope"]))
        } else {
            None
        };
        let want_hash = want_tag.map(record::tag_hash);
        let filter = |h: i64| want_hash.is_none_or(|w| w == h);
        let r = self
            .store
            .get(&t, q, offset, max_messages, max_bytes, filter)
            .expect("get");
        let ctx = format!(
            "{}: get {t}/{q} from {offset} max {max_messages} msgs {max_bytes} bytes tag {want_tag:?}",
            self.ctx
        );
        if r.status == PullStatus::NoQueue {
            // Only a queue without records may be unknown to the store.
            assert_eq!(oq.map_or(0, |o| o.max()), 0, "{ctx}");
            self.count("get no queue");
            return;
        }
        let oq = oq.unwrap_or_default();
        assert_eq!((r.min_offset, r.max_offset), (min, max), "{ctx}");
        let (status, next) = if offset < min {
            (PullStatus::OffsetTooSmall, min)
        } else if offset == max {
            (PullStatus::NoNewMessage, offset)
        } else if offset > max {
            (PullStatus::OffsetOverflow, max)
        } else {
            (PullStatus::NoMatchedMessage, offset)
        };
        let mut expect = (status, next, Vec::<u64>::new());
        let mut runs: Vec<Run> = Vec::new();
        if status == PullStatus::NoMatchedMessage {
            let mut bytes = 0u64;
            let end = max.min(offset + PULL_SCAN_UNITS_MAX);
            for off in offset..end {
                let rec = &oq.recs[off as usize];
                let n = expect.2.len() as u32;
                if n >= max_messages || (n > 0 && bytes + u64::from(rec.size) > max_bytes) {
                    break;
                }
                expect.1 += 1;
                if !filter(rec.tag.map_or(0, record::tag_hash)) {
                    continue;
                }
                expect.2.push(off);
                bytes += u64::from(rec.size);
                match runs.last_mut() {
                    Some(run)
                        if run.physical_offset + u64::from(run.len) == rec.physical_offset =>
                    {
                        run.len += rec.size;
                    }
                    _ => runs.push(Run {
                        physical_offset: rec.physical_offset,
                        len: rec.size,
                    }),
                }
            }
            if !expect.2.is_empty() {
                expect.0 = PullStatus::Found;
            }
        }
        assert_eq!((r.status, r.next_offset), (expect.0, expect.1), "{ctx}");
        assert_eq!(r.messages as usize, expect.2.len(), "{ctx}");
        assert_eq!(r.runs, runs, "{ctx}");
        let mut got = Vec::new();
        for run in &r.runs {
            let mut buf = vec![0u8; run.len as usize];
            self.store
                .read(run.physical_offset, &mut buf)
                .expect("read");
            for rec in record::iter(&buf) {
                let rec = rec.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!((rec.topic, rec.queue_id), (t.as_str(), q), "{ctx}");
                let o = &oq.recs[rec.queue_offset as usize];
                assert_eq!(rec.body, o.body.as_slice(), "{ctx}");
                assert_eq!(rec.tags(), o.tag, "{ctx}");
                assert_eq!(rec.store_timestamp_ms, o.store_timestamp_ms, "{ctx}");
                got.push(rec.queue_offset);
            }
        }
        assert_eq!(got, expect.2, "{ctx}");
        self.count(match r.status {
            PullStatus::Found => "get found",
            PullStatus::NoMatchedMessage => "get no match",
            PullStatus::OffsetTooSmall => "get too small",
            _ => "get at/past end",
        });
    }

    fn read_record(&mut self) {
        let live: Vec<(&String, u32, &Rec, u64)> = self
            .oracle
            .iter()
            .flat_map(|((t, q), oq)| {
                oq.recs[oq.min as usize..]
                    .iter()
                    .enumerate()
                    .map(move |(i, r)| (t, *q, r, oq.min + i as u64))
            })
            .collect();
        if live.is_empty() {
            return;
        }
        let (t, q, rec, off) = *self.rng.pick(&live);
        let bytes = self
            .store
            .read_record(rec.physical_offset)
            .unwrap_or_else(|e| panic!("{}: read_record {}: {e}", self.ctx, rec.physical_offset));
        let view = record::decode_one(&bytes).expect("valid record");
        assert_eq!(
            (view.topic, view.queue_id, view.queue_offset),
            (t.as_str(), q, off)
        );
        assert_eq!(view.body, rec.body.as_slice());
        let bogus = rec.physical_offset + self.rng.range(1, u64::from(rec.size));
        assert!(
            self.store.read_record(bogus).is_err(),
            "{}: a record inside another at {bogus}",
            self.ctx
        );
        assert!(self.store.read_record(self.store.write_offset()).is_err());
        assert!(
            self.store.read_record(1 << 50).is_err(),
            "another shard's offset"
        );
        self.count("read_record");
    }

    fn offset_for_timestamp(&mut self) {
        let (t, q) = self.random_queue();
        let ts = self.rng.range(900, self.now_ms as u64 + 50) as i64;
        let got = self.store.offset_for_timestamp(&t, q, ts).expect("by time");
        let want = match self.oracle.get(&(t.clone(), q)) {
            None => 0,
            Some(oq) => (oq.min..oq.max())
                .find(|&o| oq.recs[o as usize].store_timestamp_ms >= ts)
                .unwrap_or(oq.max()),
        };
        assert_eq!(got, want, "{}: offset_for_timestamp {t}/{q} {ts}", self.ctx);
        self.count("offset_for_timestamp");
    }

    fn remove_expired(&mut self) {
        self.now_ms += self.rng.range(0, 400) as i64;
        let reserved = self.rng.range(0, 1500) as i64;
        let force = self.rng.chance(25);
        let max = self.rng.range(1, 4) as u32;
        let before = self.store.min_offset();
        let out = self
            .store
            .remove_expired(self.now_ms, reserved, force, max)
            .expect("retention");
        let log_min = self.store.min_offset();
        assert!(out.removed_segments <= max);
        assert_eq!(
            log_min - before,
            u64::from(out.removed_segments) * self.store.config().segment_bytes
        );
        for ((t, q), oq) in self.oracle.iter_mut() {
            while oq.min < oq.max() && oq.recs[oq.min as usize].physical_offset < log_min {
                let rec = &oq.recs[oq.min as usize];
                assert!(
                    force || rec.store_timestamp_ms <= self.now_ms - reserved,
                    "{}: {t}/{q}@{} removed before it expired",
                    self.ctx,
                    oq.min
                );
                oq.min += 1;
            }
        }
        self.count(if out.removed_segments > 0 {
            "retention removed"
        } else {
            "retention none"
        });
        self.check_ranges();
    }

    fn delete_topic(&mut self) {
        let topic = *self.rng.pick(&TOPICS);
        self.store.delete_topic(topic).expect("delete topic");
        self.oracle.retain(|(t, _), _| t != topic);
        self.deleted_before
            .insert(topic.to_string(), self.store.write_offset());
        self.check_ranges();
        self.count("delete_topic");
    }

    fn reopen_clean(&mut self) {
        let spare = self.placeholder();
        let store = std::mem::replace(&mut self.store, spare);
        store.close().expect("close");
        self.store = Store::open(self.disk.clone(), config()).expect("reopen");
        assert!(self.store.recovery().clean, "{}", self.ctx);
        self.check_all("clean reopen");
        self.count("reopen clean");
    }

    fn crash_and_reopen(&mut self) {
        let mode = *self.rng.pick(&MODES);
        let synced = self.store.synced_offset();
        let written = self.store.write_offset();
        let image = self.disk.image(mode);
        self.disk = FaultDisk::from_image(&image);
        let spare = self.placeholder();
        let old = std::mem::replace(&mut self.store, spare);
        drop(old);
        self.store = Store::open(self.disk.clone(), config())
            .unwrap_or_else(|e| panic!("{}: reopen after {mode:?}: {e}", self.ctx));
        let end = self.store.write_offset();
        if std::env::var_os("RINGMQ_MODEL_TRACE").is_some() {
            println!(
                "  {mode:?}: synced {synced} written {written} end {end}, {:?}",
                self.store.recovery()
            );
            for (t, qs) in &self.store.queues {
                for (q, cq) in qs {
                    let units: Vec<(u64, u32)> = (cq.min_offset()..cq.max_offset())
                        .map(|o| {
                            cq.unit(o)
                                .map(|u| (u.physical_offset, u.size))
                                .unwrap_or((0, 0))
                        })
                        .collect();
                    println!(
                        "    {t}/{q} {}..{} {units:?}",
                        cq.min_offset(),
                        cq.max_offset()
                    );
                }
            }
            for ((t, q), oq) in &self.oracle {
                let units: Vec<(u64, u32)> = oq.recs[oq.min as usize..]
                    .iter()
                    .map(|r| (r.physical_offset, r.size))
                    .collect();
                println!("    oracle {t}/{q} {}..{} {units:?}", oq.min, oq.max());
            }
        }
        assert!(
            end >= synced,
            "{}: {mode:?} lost synced bytes: end {end} < synced {synced}",
            self.ctx
        );
        if mode == Crash::KeepWritten {
            assert_eq!(end, written, "{}: a process kill loses nothing", self.ctx);
        }
        for oq in self.oracle.values_mut() {
            while oq
                .recs
                .last()
                .is_some_and(|r| r.physical_offset + u64::from(r.size) > end)
            {
                oq.recs.pop();
            }
            oq.min = oq.min.min(oq.max());
        }
        self.check_all(&format!(
            "crash {mode:?}, synced {synced}, written {written}, end {end}"
        ));
        self.count(if end < written {
            "crash lost unsynced"
        } else {
            "crash kept all"
        });
    }

    /// A throwaway store on an empty disk, to move the real one out of `self`.
    fn placeholder(&self) -> Store<FaultDisk> {
        Store::open(FaultDisk::new(), config()).expect("placeholder")
    }

    /// Queue ranges match. A queue the oracle has no records for may be absent from the
    /// store or empty (a failed append may have created it).
    fn check_ranges(&self) {
        for ((t, q), oq) in &self.oracle {
            match self.store.queue_range(t, *q) {
                Some(r) => assert_eq!(r, (oq.min, oq.max()), "{}: {t}/{q} range", self.ctx),
                None => assert_eq!(
                    oq.max(),
                    0,
                    "{}: {t}/{q} ({}, {}) is missing",
                    self.ctx,
                    oq.min,
                    oq.max()
                ),
            }
        }
        for (t, q) in self.store.queues() {
            if !self.oracle.contains_key(&(t.clone(), q)) {
                assert_eq!(
                    self.store.queue_range(&t, q),
                    Some((0, 0)),
                    "{}: unknown queue {t}/{q}",
                    self.ctx
                );
            }
        }
    }

    /// The whole store equals the oracle, and its ConsumeQueues equal a rebuild from the log.
    fn check_all(&self, what: &str) {
        let ctx = format!("{} ({what})", self.ctx);
        let state = collect(&self.store);
        for ((t, q, off), seen) in &state.records {
            let known = self
                .oracle
                .get(&(t.clone(), *q))
                .and_then(|oq| oq.recs.get(*off as usize));
            assert!(
                known.is_some(),
                "{ctx}: {t}/{q}@{off} is not in the oracle: body {:?}",
                String::from_utf8_lossy(&seen.body[..seen.body.len().min(12)])
            );
        }
        self.check_ranges();
        let mut log = scan_log_entries(&self.store);
        log.retain(|((t, _, _), phys)| self.deleted_before.get(t).is_none_or(|end| phys >= end));
        assert_queues_match_log(&state, &unique(log), &ctx);
        let mut n = 0;
        for ((t, q), oq) in &self.oracle {
            for off in oq.min..oq.max() {
                let rec = &oq.recs[off as usize];
                let seen = state
                    .records
                    .get(&(t.clone(), *q, off))
                    .unwrap_or_else(|| panic!("{ctx}: {t}/{q}@{off} missing"));
                assert_eq!(seen.physical_offset, rec.physical_offset, "{ctx}");
                assert_eq!(seen.body, rec.body, "{ctx}: {t}/{q}@{off}");
                assert_eq!(seen.tag.as_deref(), rec.tag, "{ctx}");
                assert_eq!(seen.store_timestamp_ms, rec.store_timestamp_ms, "{ctx}");
                n += 1;
            }
        }
        assert_eq!(
            state.records.len(),
            n,
            "{ctx}: records the oracle does not have"
        );
    }
}

#[test]
fn store_matches_model() {
    let seeds = std::env::var("RINGMQ_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS_DEFAULT);
    let started = std::time::Instant::now();
    let mut totals: BTreeMap<&'static str, u64> = BTreeMap::new();
    let first: u64 = std::env::var("RINGMQ_MODEL_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let mut m = Model::new(seed);
        for step in 0..STEPS_PER_SEED {
            m.ctx = format!("seed {seed} step {step}");
            m.step();
            if step % 25 == 24 {
                m.check_all("periodic");
            }
        }
        m.ctx = format!("seed {seed} end");
        m.check_all("end");
        for (k, v) in m.stats {
            *totals.entry(k).or_insert(0) += v;
        }
    }
    println!(
        "model: {seeds} seeds x {STEPS_PER_SEED} steps in {:.2?}: {totals:?}",
        started.elapsed()
    );
    for what in [
        "append ok",
        "append EIO",
        "append DiskFull",
        "get found",
        "get no match",
        "get too small",
        "retention removed",
        "reopen clean",
        "crash lost unsynced",
        "crash kept all",
        "read_record",
        "delete_topic",
    ] {
        assert!(
            totals.get(what).copied().unwrap_or(0) > 0,
            "the model never did: {what}"
        );
    }
}
