//! Crash-image tests (testing ladder, rung 4). A fixed workload (several topics and queues,
//! batches of 1..6 records with and without tags, 4 KiB segments so the log rolls often,
//! SYNC_FLUSH acks after `sync`, ASYNC_FLUSH acks after `append`, checkpoints, one forced
//! retention pass, a clean close) runs once on a [`FaultDisk`] to count its I/O operations
//! N. Then, for every crash point n in 0..=N and every [`Crash`] mode, it runs again on a
//! fresh disk that fails operation n and everything after it (the power cut; the first
//! failing step ends the run), the image the crash leaves is reopened, and:
//! - (a) no acknowledged record is lost: everything acked by a `sync` (or a checkpoint) is
//!   there with its queue offset and body; after a process kill (`KeepWritten`) everything
//!   acked by `append` is there too;
//! - (b) no garbage: every record of every queue decodes with a valid CRC and is exactly the
//!   record the workload appended at that (topic, queue, offset); queue offsets are dense;
//!   the recovered records are one contiguous run of the append order (a prefix, minus what
//!   retention removed from the front);
//! - (c) the recovered ConsumeQueues equal ones rebuilt by scanning the log bytes here;
//! - (d) the recovered store takes new appends, and a crash after they are synced gives the
//!   same state plus them.
//!
//! Targeted tests cover a crash inside a segment roll, inside a checkpoint write and inside
//! recovery itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use ringmq_wire::record::{self, Entry, BLANK_BYTES};

use super::disk::Disk;
use super::fault_disk::{Crash, DiskImage, FaultDisk};
use super::tests::{encode, small_config};
use super::*;

const ROOT: &str = "/crash";
pub(super) const MODES: [Crash; 3] = [Crash::KeepWritten, Crash::DropUnsynced, Crash::TearLast];

/// SplitMix64: a tiny seeded PRNG so workloads are reproducible from a seed.
#[derive(Debug, Clone)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub(super) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 100) < percent
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }
}

/// A queue key and a record key.
pub(super) type QueueKey = (String, u32);
pub(super) type RecordKey = (String, u32, u64);

/// A record as read back from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub physical_offset: u64,
    pub body: Vec<u8>,
    pub tag: Option<String>,
    pub store_timestamp_ms: i64,
}

/// Everything a store serves: queue ranges and every record of every queue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct State {
    pub ranges: BTreeMap<QueueKey, (u64, u64)>,
    pub records: BTreeMap<RecordKey, Seen>,
}

/// Reads every record of every queue through `get` + `read`, asserting that each decodes
/// (CRC included), belongs to the queue it was served for, carries the queue offset it was
/// served at and the physical offset it was read from, and that offsets are dense.
pub(super) fn collect<D: Disk + Clone>(store: &Store<D>) -> State {
    let mut state = State::default();
    for (topic, q) in store.queues() {
        let (min, max) = store.queue_range(&topic, q).expect("listed queue exists");
        assert!(min <= max, "{topic}/{q}: min {min} > max {max}");
        state.ranges.insert((topic.clone(), q), (min, max));
        let mut off = min;
        while off < max {
            let r = store
                .get(&topic, q, off, u32::MAX, u64::MAX, |_| true)
                .expect("get");
            assert_eq!(r.status, PullStatus::Found, "{topic}/{q} at {off}: {r:?}");
            assert_eq!((r.min_offset, r.max_offset), (min, max));
            let mut expect = off;
            for run in &r.runs {
                let mut buf = vec![0u8; run.len as usize];
                store.read(run.physical_offset, &mut buf).expect("read run");
                let mut at = 0usize;
                for rec in record::iter(&buf) {
                    let rec = rec.unwrap_or_else(|e| {
                        panic!(
                            "{topic}/{q}: garbage in run at {}: {e}",
                            run.physical_offset
                        )
                    });
                    let phys = run.physical_offset + at as u64;
                    assert_eq!(rec.topic, topic, "record at {phys} served for {topic}");
                    assert_eq!(rec.queue_id, q, "record at {phys} served for queue {q}");
                    assert_eq!(rec.queue_offset, expect, "{topic}/{q}: offsets not dense");
                    assert_eq!(rec.physical_offset, phys, "record claims another position");
                    state.records.insert(
                        (topic.clone(), q, expect),
                        Seen {
                            physical_offset: phys,
                            body: rec.body.to_vec(),
                            tag: rec.tags().map(str::to_string),
                            store_timestamp_ms: rec.store_timestamp_ms,
                        },
                    );
                    at += rec.len();
                    expect += 1;
                }
                assert_eq!(at, buf.len(), "{topic}/{q}: run ends inside a record");
            }
            assert_eq!(expect - off, u64::from(r.messages));
            assert_eq!(r.next_offset, expect, "{topic}/{q}: next offset");
            off = expect;
        }
    }
    state
}

/// Rebuilds the ConsumeQueue view from the log bytes alone: walks `[min_offset,
/// write_offset)` entry by entry (records and BLANKs, segment by segment) and maps (topic,
/// queue, queue offset) to the physical offset. Every entry must decode.
pub(super) fn scan_log<D: Disk + Clone>(store: &Store<D>) -> BTreeMap<RecordKey, u64> {
    unique(scan_log_entries(store))
}

/// The (topic, queue, queue offset) -> physical offset map of log entries, each key once.
pub(super) fn unique(entries: Vec<(RecordKey, u64)>) -> BTreeMap<RecordKey, u64> {
    let mut out = BTreeMap::new();
    for (key, pos) in entries {
        if let Some(first) = out.insert(key.clone(), pos) {
            panic!("{key:?} stored twice, at {first} and {pos}");
        }
    }
    out
}

/// Every record of the log in order, as (topic, queue, queue offset) and physical offset.
/// A queue offset repeats only when its topic was deleted and recreated.
pub(super) fn scan_log_entries<D: Disk + Clone>(store: &Store<D>) -> Vec<(RecordKey, u64)> {
    let seg = store.config().segment_bytes;
    let (mut pos, end) = (store.min_offset(), store.write_offset());
    let mut out = Vec::new();
    while pos < end {
        let seg_end = pos - pos % seg + seg;
        let mut head = [0u8; BLANK_BYTES];
        store.read(pos, &mut head).expect("read entry header");
        let (size, _) = record::peek_header(&head).expect("8 bytes");
        let size = u64::from(size);
        assert!(
            size >= BLANK_BYTES as u64 && pos + size <= seg_end,
            "bad size at {pos}"
        );
        let mut buf = vec![0u8; size as usize];
        if pos + size <= end {
            store.read(pos, &mut buf).expect("read entry");
        } else {
            // Only a BLANK reaches past the write offset's segment data; its header suffices.
            buf[..BLANK_BYTES].copy_from_slice(&head);
        }
        match record::decode(&buf).unwrap_or_else(|e| panic!("log garbage at {pos}: {e}")) {
            Entry::Blank { len } => {
                assert_eq!(
                    pos + len as u64,
                    seg_end,
                    "BLANK at {pos} must fill its segment"
                );
            }
            Entry::Record(rec) => {
                assert_eq!(rec.physical_offset, pos, "record claims another position");
                out.push(((rec.topic.to_string(), rec.queue_id, rec.queue_offset), pos));
            }
        }
        pos += size;
    }
    assert_eq!(pos, end, "log walk overshot the write offset");
    out
}

/// (c): the ConsumeQueues the store serves equal the ones the log implies.
pub(super) fn assert_queues_match_log(state: &State, log: &BTreeMap<RecordKey, u64>, ctx: &str) {
    let from_cq: BTreeMap<RecordKey, u64> = state
        .records
        .iter()
        .map(|(k, s)| (k.clone(), s.physical_offset))
        .collect();
    if from_cq != *log {
        let only_cq: Vec<_> = from_cq
            .iter()
            .filter(|(k, _)| !log.contains_key(*k))
            .collect();
        let only_log: Vec<_> = log
            .iter()
            .filter(|(k, _)| !from_cq.contains_key(*k))
            .collect();
        let differ: Vec<_> = from_cq
            .iter()
            .filter(|(k, v)| log.get(*k).is_some_and(|l| l != *v))
            .collect();
        panic!(
            "{ctx}: ConsumeQueues differ from the log: only in CQ {only_cq:?}, only in log \
             {only_log:?}, different physical offset {differ:?}"
        );
    }
}

/// One message of the workload.
#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub topic: &'static str,
    pub queue: u32,
    pub body: Vec<u8>,
    pub tag: Option<&'static str>,
}

impl Msg {
    fn encode(&self, out: &mut Vec<u8>) {
        encode(self.topic, self.queue, &self.body, self.tag, out);
    }
}

/// One step of the crash workload.
#[derive(Debug, Clone)]
enum Step {
    /// ASYNC_FLUSH: acked when `append` returns.
    Append(Vec<Msg>),
    /// SYNC_FLUSH: everything appended before is acked when `sync` returns.
    Sync,
    Checkpoint,
    /// Forced retention of one segment (disk pressure).
    Retain,
    Close,
}

/// A record the workload tried to append, with the queue offset it gets if stored.
#[derive(Debug, Clone)]
struct Sent {
    topic: &'static str,
    queue: u32,
    queue_offset: u64,
    body: Vec<u8>,
    tag: Option<&'static str>,
    /// Known once `append` acked it.
    physical_offset: Option<u64>,
}

/// What one run of the workload did before it stopped.
#[derive(Debug, Default)]
struct Run {
    sent: Vec<Sent>,
    /// `sent[..acked]` were acknowledged by `append` (ASYNC_FLUSH).
    acked: usize,
    /// `sent[..synced]` were acknowledged by a `sync`, checkpoint or close (SYNC_FLUSH).
    synced: usize,
    retention_started: bool,
    /// I/O operation count before each step, and after the last one that ran.
    ops_before_step: Vec<u64>,
    completed: bool,
}

const TOPICS: [(&str, u32); 4] = [("Orders", 0), ("Orders", 1), ("Audit", 0), ("%RETRY%g1", 2)];
const TAGS: [Option<&str>; 4] = [None, Some("TagA"), Some("TagB"), Some("*x")];

fn body(rng: &mut Rng, id: usize, max: u64) -> Vec<u8> {
    let mut b = format!("rec-{id}:").into_bytes();
    let n = rng.range(0, max);
    b.extend((0..n).map(|i| b'a' + ((i as usize + id) % 26) as u8));
    b
}

/// The fixed crash workload: ~40 steps, about 14 segments of 4 KiB.
fn workload() -> Vec<Step> {
    let mut rng = Rng::new(0x5EED_CAFE);
    let mut steps = Vec::new();
    let mut id = 0;
    for i in 0..34 {
        let n = *rng.pick(&[1u64, 1, 2, 3, 6]);
        let mut batch = Vec::new();
        for _ in 0..n {
            let (topic, queue) = *rng.pick(&TOPICS);
            let max = if rng.chance(20) { 1200 } else { 300 };
            batch.push(Msg {
                topic,
                queue,
                body: body(&mut rng, id, max),
                tag: *rng.pick(&TAGS),
            });
            id += 1;
        }
        steps.push(Step::Append(batch));
        match i % 7 {
            1 | 4 => steps.push(Step::Sync),
            5 => steps.push(Step::Checkpoint),
            _ => {}
        }
        if i == 20 {
            steps.push(Step::Retain);
        }
    }
    steps.push(Step::Close);
    steps
}

const STEP_TIME_MS: i64 = 10;

/// Runs `steps` on `disk` until a step fails (the crash) or all are done.
fn run_steps(disk: &FaultDisk, steps: &[Step]) -> Run {
    let mut run = Run::default();
    run.ops_before_step.push(disk.ops());
    let Ok(mut store) = Store::open(disk.clone(), small_config(ROOT)) else {
        return run;
    };
    let mut next: HashMap<(&str, u32), u64> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        run.ops_before_step.push(disk.ops());
        let now = 1000 + i as i64 * STEP_TIME_MS;
        match step {
            Step::Append(msgs) => {
                let first = run.sent.len();
                let mut batch = Vec::new();
                let mut planned = next.clone();
                for m in msgs {
                    m.encode(&mut batch);
                    let off = planned.entry((m.topic, m.queue)).or_insert(0);
                    run.sent.push(Sent {
                        topic: m.topic,
                        queue: m.queue,
                        queue_offset: *off,
                        body: m.body.clone(),
                        tag: m.tag,
                        physical_offset: None,
                    });
                    *off += 1;
                }
                let Ok(out) = store.append(&mut batch, now) else {
                    return run;
                };
                for (s, a) in run.sent[first..].iter_mut().zip(&out.records) {
                    assert_eq!(
                        a.queue_offset, s.queue_offset,
                        "store assigned another offset"
                    );
                    s.physical_offset = Some(a.physical_offset);
                }
                next = planned;
                run.acked = run.sent.len();
            }
            Step::Sync => {
                if store.sync().is_err() {
                    return run;
                }
                run.synced = run.acked;
            }
            Step::Checkpoint => {
                if store.checkpoint().is_err() {
                    return run;
                }
                run.synced = run.acked;
            }
            Step::Retain => {
                run.retention_started = true;
                if store.remove_expired(now, 0, true, 1).is_err() {
                    return run;
                }
            }
            Step::Close => {
                if store.close().is_err() {
                    return run;
                }
                run.synced = run.acked;
                run.ops_before_step.push(disk.ops());
                run.completed = true;
                return run;
            }
        }
    }
    run.ops_before_step.push(disk.ops());
    run.completed = true;
    run
}

/// Opens the image, checks (a)-(d) against what the run sent and acknowledged, and returns
/// the recovered state.
fn check_image(image: &DiskImage, run: &Run, mode: Crash, ctx: &str) -> State {
    let disk = FaultDisk::from_image(image);
    let mut store = Store::open(disk.clone(), small_config(ROOT))
        .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
    let state = collect(&store);
    let log = scan_log(&store);
    assert_queues_match_log(&state, &log, ctx);

    // (b) every record is one the workload sent, at the same (topic, queue, offset).
    let index: HashMap<(&str, u32, u64), usize> = run
        .sent
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.topic, s.queue, s.queue_offset), i))
        .collect();
    let mut present = BTreeSet::new();
    for ((t, q, off), seen) in &state.records {
        let Some(&i) = index.get(&(t.as_str(), *q, *off)) else {
            panic!("{ctx}: garbage: {t}/{q} offset {off} was never sent");
        };
        let s = &run.sent[i];
        assert_eq!(seen.body, s.body, "{ctx}: {t}/{q}@{off} has another body");
        assert_eq!(
            seen.tag.as_deref(),
            s.tag,
            "{ctx}: {t}/{q}@{off} has another tag"
        );
        if let Some(p) = s.physical_offset {
            assert_eq!(seen.physical_offset, p, "{ctx}: {t}/{q}@{off} moved");
        }
        present.insert(i);
    }
    // The survivors are one contiguous run of the append order: a crash cuts a suffix,
    // retention a prefix.
    if let (Some(&lo), Some(&hi)) = (present.first(), present.last()) {
        assert_eq!(
            present.len(),
            hi + 1 - lo,
            "{ctx}: survivors are not contiguous"
        );
    }
    // (a) nothing acknowledged is lost; only retention may remove acknowledged records, and
    // only those in removed segments.
    let must_keep = if mode == Crash::KeepWritten {
        run.acked
    } else {
        run.synced
    };
    for (i, s) in run.sent.iter().enumerate() {
        if present.contains(&i) {
            continue;
        }
        let removed = s.physical_offset.is_some_and(|p| p < store.min_offset());
        assert!(
            !removed || run.retention_started,
            "{ctx}: {}/{}@{} is below the log start without retention",
            s.topic,
            s.queue,
            s.queue_offset
        );
        assert!(
            i >= must_keep || removed,
            "{ctx}: LOST acknowledged {}/{}@{} (record {i}; acked {}, synced {})",
            s.topic,
            s.queue,
            s.queue_offset,
            run.acked,
            run.synced
        );
    }

    // (d) the store takes new appends and a crash after syncing them changes nothing else.
    let mut expected = state.clone();
    let mut targets: Vec<QueueKey> = state.ranges.keys().cloned().collect();
    targets.push(("AfterCrash".to_string(), 3));
    for (i, (t, q)) in targets.iter().enumerate() {
        let max = state.ranges.get(&(t.clone(), *q)).map_or(0, |r| r.1);
        let body = format!("after-{i}").into_bytes();
        let mut buf = Vec::new();
        encode(t, *q, &body, Some("TagA"), &mut buf);
        let out = store
            .append(&mut buf, 1_000_000 + i as i64)
            .unwrap_or_else(|e| panic!("{ctx}: append after recovery: {e}"));
        let a = out.records[0];
        assert_eq!(
            a.queue_offset, max,
            "{ctx}: {t}/{q} next offset after recovery"
        );
        let range = expected.ranges.entry((t.clone(), *q)).or_insert((0, 0));
        range.1 = max + 1;
        expected.records.insert(
            (t.clone(), *q, max),
            Seen {
                physical_offset: a.physical_offset,
                body,
                tag: Some("TagA".to_string()),
                store_timestamp_ms: 1_000_000 + i as i64,
            },
        );
    }
    store.sync().expect("sync after recovery");
    let image2 = disk.image(Crash::DropUnsynced);
    drop(store);
    let store = Store::open(FaultDisk::from_image(&image2), small_config(ROOT))
        .unwrap_or_else(|e| panic!("{ctx}: second reopen failed: {e}"));
    let again = collect(&store);
    assert_queues_match_log(&again, &scan_log(&store), &format!("{ctx}, second reopen"));
    assert_state_eq(&again, &expected, &format!("{ctx}, second reopen"));
    state
}

pub(super) fn assert_state_eq(got: &State, want: &State, ctx: &str) {
    if got.ranges != want.ranges {
        panic!(
            "{ctx}: queue ranges {:?}, expected {:?}",
            got.ranges, want.ranges
        );
    }
    for (k, w) in &want.records {
        match got.records.get(k) {
            Some(g) if g == w => {}
            other => panic!("{ctx}: {k:?} is {other:?}, expected {w:?}"),
        }
    }
    assert_eq!(
        got.records.len(),
        want.records.len(),
        "{ctx}: extra records"
    );
}

/// Runs the workload with a crash at each of `points` under every mode and checks the image.
/// Returns how many (point, mode) pairs were tried.
fn explore(steps: &[Step], points: impl Iterator<Item = u64> + Clone) -> usize {
    let mut tried = 0;
    for mode in MODES {
        for n in points.clone() {
            let disk = FaultDisk::new();
            disk.crash_at(n);
            let run = run_steps(&disk, steps);
            let image = disk.image(mode);
            drop(disk);
            check_image(&image, &run, mode, &format!("crash at op {n}, {mode:?}"));
            tried += 1;
        }
    }
    tried
}

/// A dry run without a crash: the op count before each step.
fn count(steps: &[Step]) -> Run {
    let disk = FaultDisk::new();
    let run = run_steps(&disk, steps);
    assert!(run.completed, "the workload runs to the end without faults");
    run
}

#[test]
fn every_crash_point_every_mode() {
    let started = Instant::now();
    let steps = workload();
    let dry = count(&steps);
    let n = *dry.ops_before_step.last().expect("counted");
    // The workload must exercise what it claims to.
    let rolls = dry
        .sent
        .windows(2)
        .filter(|w| {
            let (a, b) = (w[0].physical_offset, w[1].physical_offset);
            a.zip(b).is_some_and(|(a, b)| a / 4096 != b / 4096)
        })
        .count();
    assert!(rolls >= 8, "only {rolls} segment rolls");
    assert!(dry.sent.len() >= 60, "only {} records", dry.sent.len());
    let tried = explore(&steps, 0..=n);
    println!(
        "crash images: {n} I/O ops, {} records, {rolls} segment rolls; tried {tried} crash \
         points x modes ({} points x {} modes) in {:.2?}",
        dry.sent.len(),
        n + 1,
        MODES.len(),
        started.elapsed()
    );
    assert!(tried > 100, "tried only {tried} crash points");
}

/// The op window of step `i` in a dry run (`ops_before_step[0]` is the open).
fn step_window(dry: &Run, i: usize) -> std::ops::Range<u64> {
    dry.ops_before_step[i + 1]..dry.ops_before_step[i + 2]
}

#[test]
fn crash_during_segment_roll() {
    // Fill most of the first segment, sync, then append a record that cannot fit.
    let mut steps = Vec::new();
    for i in 0..3 {
        steps.push(Step::Append(vec![Msg {
            topic: "Roll",
            queue: 0,
            body: vec![b'0' + i; 1100],
            tag: Some("TagA"),
        }]));
    }
    steps.push(Step::Sync);
    let roll = steps.len();
    steps.push(Step::Append(vec![
        Msg {
            topic: "Roll",
            queue: 0,
            body: vec![b'r'; 700],
            tag: None,
        },
        Msg {
            topic: "Roll",
            queue: 1,
            body: vec![b's'; 10],
            tag: None,
        },
    ]));
    steps.push(Step::Sync);
    let dry = count(&steps);
    let (a, b) = (dry.sent[2].physical_offset, dry.sent[3].physical_offset);
    assert_eq!(
        (a.map(|p| p / 4096), b.map(|p| p / 4096)),
        (Some(0), Some(1)),
        "the fourth record starts the second segment"
    );
    let window = step_window(&dry, roll);
    assert!(
        window.end - window.start >= 5,
        "roll: create, size, sync dir, BLANK, record"
    );
    let tried = explore(&steps, window);
    println!("segment roll: tried {tried} crash points x modes");
}

#[test]
fn crash_during_checkpoint_write() {
    let mut steps = Vec::new();
    for round in 0..3u8 {
        for q in 0..3 {
            steps.push(Step::Append(vec![Msg {
                topic: "Cp",
                queue: q,
                body: vec![b'a' + round; 300],
                tag: Some("TagB"),
            }]));
        }
        steps.push(Step::Checkpoint);
    }
    let dry = count(&steps);
    let mut tried = 0;
    for (i, s) in steps.iter().enumerate() {
        if matches!(s, Step::Checkpoint) {
            tried += explore(&steps, step_window(&dry, i));
        }
    }
    println!("checkpoint writes: tried {tried} crash points x modes");

    // A torn checkpoint slot: recovery falls back to the other slot and rescans from there.
    let last = steps.len() - 1;
    let window = step_window(&dry, last);
    let disk = FaultDisk::new();
    disk.crash_at(window.end - 1); // the fdatasync after the slot write
    let run = run_steps(&disk, &steps);
    let image = disk.image(Crash::TearLast);
    let store = Store::open(FaultDisk::from_image(&image), small_config(ROOT)).expect("reopen");
    let previous = dry.sent[6].physical_offset.expect("acked");
    assert_eq!(
        store.recovery().scanned_from,
        previous,
        "a torn newest slot must send recovery back to the previous checkpoint: {:?}",
        store.recovery()
    );
    drop(store);
    check_image(&image, &run, Crash::TearLast, "torn checkpoint slot");
}

#[test]
fn crash_during_recovery() {
    let steps = workload();
    let dry = count(&steps);
    let total = *dry.ops_before_step.last().expect("counted");
    // Images whose recovery has work to do: a torn tail to cut and ConsumeQueue units to
    // redispatch (TearLast), and a page cache full of unsynced records (KeepWritten).
    let mut tried = 0;
    for (mode, want_torn) in [(Crash::TearLast, true), (Crash::KeepWritten, false)] {
        let (image, run) = (total / 3..total)
            .find_map(|n| {
                let disk = FaultDisk::new();
                disk.crash_at(n);
                let run = run_steps(&disk, &steps);
                let image = disk.image(mode);
                let probe = FaultDisk::from_image(&image);
                let store = Store::open(probe, small_config(ROOT)).ok()?;
                let r = store.recovery();
                let busy = r.records_scanned >= 3 && r.torn_tail.is_some() == want_torn;
                busy.then_some((image, run))
            })
            .expect("some crash point leaves recovery work");
        let probe = FaultDisk::from_image(&image);
        let before = probe.ops();
        let store = Store::open(probe.clone(), small_config(ROOT)).expect("recover");
        let recovery_ops = probe.ops() - before;
        let reference = collect(&store);
        drop(store);
        for k in 0..recovery_ops {
            for second in MODES {
                let disk = FaultDisk::from_image(&image);
                disk.crash_at(k);
                let opened = Store::open(disk.clone(), small_config(ROOT));
                assert!(opened.is_err(), "recovery did op {k} of {recovery_ops}");
                drop(opened);
                let image2 = disk.image(second);
                let ctx = format!("{mode:?} image, recovery crashed at op {k}, {second:?}");
                let state = check_image(&image2, &run, mode, &ctx);
                assert_state_eq(&state, &reference, &ctx);
                tried += 1;
            }
        }
    }
    println!("crash during recovery: tried {tried} crash points x modes");
    assert!(tried > 30);
}

/// Regression: BODYCRC covers only the body, so a write torn inside the topic (the tail of
/// a record without properties) used to decode and be served with a mangled topic.
#[test]
fn write_torn_inside_the_topic_is_cut() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config(ROOT)).expect("open");
    let mut buf = Vec::new();
    encode("Orders", 0, b"kept", None, &mut buf);
    store.append(&mut buf, 1).expect("append");
    store.sync().expect("sync");
    let mut buf = Vec::new();
    encode("Orders", 0, b"torn", None, &mut buf);
    let torn = store.append(&mut buf, 2).expect("append").records[0];
    let mut image = disk.image(Crash::KeepWritten);
    drop(store);
    // The last 3 bytes of "Orders" and the (zero) PROPLEN never reached the disk.
    let seg = image
        .file_mut(std::path::Path::new(
            "/crash/commitlog/0/00000000000000000000",
        ))
        .expect("segment");
    let end = (torn.physical_offset + u64::from(torn.size)) as usize;
    seg[end - 5..end].fill(0);
    let store = Store::open(FaultDisk::from_image(&image), small_config(ROOT)).expect("reopen");
    assert!(
        store.recovery().torn_tail.is_some(),
        "{:?}",
        store.recovery()
    );
    assert_eq!(store.queues(), vec![("Orders".to_string(), 0)]);
    assert_eq!(store.queue_range("Orders", 0), Some((0, 1)));
    assert_eq!(store.write_offset(), torn.physical_offset);

    // Records recovery could not tell from torn ones are refused at append.
    let mut store = store;
    let mut buf = Vec::new();
    encode("Bad\0", 0, b"x", None, &mut buf);
    let err = store.append(&mut buf, 3).expect_err("refused");
    assert!(matches!(err, StoreError::BadRecord { .. }), "{err}");
}

/// Regression: when an append's writes failed half-way, the bytes that landed stayed behind
/// the log end. The next append reused the offsets, and a reopen (clean or not: recovery
/// rescans from the checkpoint) served the failed records, mixed with the new ones.
#[test]
fn a_failed_append_leaves_nothing_behind() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config(ROOT)).expect("open");
    let record_len = |body: &[u8]| {
        let mut b = Vec::new();
        encode("T", 0, body, None, &mut b);
        b.len() as u64
    };
    let len = record_len(b"failed-1");
    assert_eq!(record_len(b"padding!"), len);
    // Fill segment 0 until one more record fits but not two: the failed batch then writes
    // a BLANK and its first record into segment 0 and its second into segment 1, three
    // writes in one append.
    let mut sent = Vec::new();
    while 4096 - store.write_offset() % 4096 >= 2 * len + BLANK_BYTES as u64 {
        let mut buf = Vec::new();
        encode("T", 0, b"padding!", None, &mut buf);
        store.append(&mut buf, 1).expect("pad");
        sent.push(b"padding!".to_vec());
    }
    let mut batch = Vec::new();
    for body in [b"failed-1", b"failed-2"] {
        encode("T", 0, body, None, &mut batch);
    }
    // The BLANK lands; the first record's write after it fails.
    disk.fail_op(disk.ops() + 1, libc::EIO);
    let err = store.append(&mut batch, 2).expect_err("injected EIO");
    assert!(!err.is_fatal(), "{err}");
    // Exactly as long as the first failed record, so the log would walk on into the others.
    let mut buf = Vec::new();
    encode("U", 0, b"next-one", None, &mut buf);
    store.append(&mut buf, 3).expect("append after the failure");
    sent.push(b"next-one".to_vec());
    store.close().expect("close");
    let store = Store::open(disk, small_config(ROOT)).expect("reopen");
    let state = collect(&store);
    assert_queues_match_log(&state, &scan_log(&store), "after a failed append");
    let bodies: Vec<Vec<u8>> = state.records.values().map(|s| s.body.clone()).collect();
    assert_eq!(bodies, sent);
}

/// ConsumeQueue units are held in memory after an append; when writing them before a
/// checkpoint fails, the store stops (the error is fatal) and a restart rebuilds them from
/// the log: every appended record is served again, in every queue.
#[test]
fn a_failed_consume_queue_write_is_fatal_and_recovery_rebuilds_the_units() {
    let disk = FaultDisk::new();
    let mut store = Store::open(disk.clone(), small_config(ROOT)).expect("open");
    let mut sent = Vec::new();
    for i in 0..5u32 {
        let body = format!("held-{i}").into_bytes();
        let mut buf = Vec::new();
        encode("T", i % 2, &body, None, &mut buf);
        store.append(&mut buf, 1).expect("append");
        sent.push(body);
    }
    assert_eq!(
        store.queue_range("T", 0),
        Some((0, 3)),
        "served from memory"
    );
    // checkpoint(): the log's fdatasync, then the first queue's unit write, which fails.
    disk.fail_op(disk.ops() + 1, libc::EIO);
    let err = store.checkpoint().expect_err("injected EIO");
    assert!(err.is_fatal(), "{err}");
    let mut buf = Vec::new();
    encode("T", 0, b"refused", None, &mut buf);
    assert!(
        store.append(&mut buf, 2).is_err(),
        "a poisoned store refuses appends"
    );
    drop(store); // a crash: the abort marker stays
    let store = Store::open(disk, small_config(ROOT)).expect("reopen");
    assert!(!store.recovery().clean);
    let state = collect(&store);
    assert_queues_match_log(&state, &scan_log(&store), "after the failed unit write");
    let mut bodies: Vec<Vec<u8>> = state.records.values().map(|s| s.body.clone()).collect();
    bodies.sort();
    sent.sort();
    assert_eq!(bodies, sent);
    assert_eq!(store.queue_range("T", 0), Some((0, 3)));
    assert_eq!(store.queue_range("T", 1), Some((0, 2)));
}

/// A crash at every operation of a topic delete: the deleted topic is gone once
/// `delete_topic` returned; before that, what comes back of it is records it really had,
/// never garbage (a queue re-dispatched into deleted files used to start with empty units,
/// and a completed delete used to come back from the log after a crash).
#[test]
fn crash_during_topic_delete() {
    let msgs: Vec<(&str, u32, u8)> = vec![
        ("Del", 0, 3),
        ("Del", 1, 2),
        ("Keep", 0, 2),
        ("Checkpoint", 0, 0),
        ("Del", 0, 2),
        ("Keep", 0, 1),
    ];
    // Runs the script up to the delete and past it; returns what was sent (key -> body),
    // whether the delete returned Ok, and the op count before and after the delete.
    let run = |disk: &FaultDisk| {
        let mut sent: BTreeMap<RecordKey, Vec<u8>> = BTreeMap::new();
        let mut store = Store::open(disk.clone(), small_config(ROOT)).expect("open");
        let mut next: HashMap<(&str, u32), u64> = HashMap::new();
        for &(topic, queue, n) in &msgs {
            if topic == "Checkpoint" {
                store.checkpoint().expect("checkpoint");
                continue;
            }
            for i in 0..n {
                let off = next.entry((topic, queue)).or_insert(0);
                let body = format!("{topic}-{queue}-{off}-{i}").into_bytes();
                let mut buf = Vec::new();
                encode(topic, queue, &body, Some("TagA"), &mut buf);
                store.append(&mut buf, 10).expect("append");
                sent.insert((topic.to_string(), queue, *off), body);
                *off += 1;
            }
        }
        store.sync().expect("sync");
        let before = disk.ops();
        let deleted = store.delete_topic("Del").is_ok();
        (sent, deleted, before, disk.ops())
    };
    let (_, deleted, start, end) = run(&FaultDisk::new());
    assert!(deleted && end > start);
    let mut tried = 0;
    for mode in MODES {
        for n in start..=end {
            let disk = FaultDisk::new();
            disk.crash_at(n);
            let (sent, deleted, _, _) = run(&disk);
            let ctx = format!("delete crashed at op {n} ({start}..{end}), {mode:?}");
            let image = disk.image(mode);
            let store = Store::open(FaultDisk::from_image(&image), small_config(ROOT))
                .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            let state = collect(&store);
            for (key, seen) in &state.records {
                assert_eq!(Some(&seen.body), sent.get(key), "{ctx}: {key:?}");
            }
            let keep: Vec<_> = sent.keys().filter(|k| k.0 == "Keep").collect();
            let kept: Vec<_> = state.records.keys().filter(|k| k.0 == "Keep").collect();
            assert_eq!(kept, keep, "{ctx}: Keep lost records");
            if deleted {
                assert!(
                    state.ranges.keys().all(|(t, _)| t != "Del"),
                    "{ctx}: a deleted topic came back: {:?}",
                    state.ranges
                );
            }
            // The log still holds the deleted records; every served one is where it says.
            let log = scan_log(&store);
            for (key, seen) in &state.records {
                assert_eq!(log.get(key), Some(&seen.physical_offset), "{ctx}: {key:?}");
            }
            tried += 1;
        }
    }
    println!("topic delete: tried {tried} crash points x modes");
}
