//! The schedule of one shard: an index of its scheduled messages by due time, kept on disk,
//! so that millions can be pending at a few bytes of memory each second of the wheel.
//!
//! What is durable is the log, as for every message: a scheduled message is a record of
//! [`TIMER_TOPIC`] (queue = shard id) whose ConsumeQueue unit carries its due time and level
//! (`ringmq_wire::schedule::pack_tag`), and delivery progress is a [`Progress`] record of
//! [`TIMER_PROGRESS_TOPIC`] written in the same append as the deliveries it accounts for.
//! Everything in this file is derived from those two queues and rebuilt at every open:
//!
//! - a wheel of one-second slots in memory (`slots`: slot -> newest entry and count; at most
//!   one per second of `timerMaxDelaySec`, 259,200 by default);
//! - the chain files `timerlog/<shard>/<20-digit first ConsumeQueue offset>`, one 32-byte
//!   [`ChainUnit`] per scheduled message at `(cq_offset - first) * 32`, each pointing to the
//!   previous message of its slot; written when the message is indexed, read when its slot
//!   comes near, removed when every message in them is delivered. Never fsynced: a crash
//!   loses nothing the open does not rebuild;
//! - the messages of the slots due within [`LOAD_AHEAD_MS`], in a heap by (due, offset);
//! - pending counts per 1,024 ConsumeQueue offsets, which give the low watermark.
//!
//! Recalled messages (a set rebuilt from the recall queue) are in `recall.rs`; indexing reads
//! the recalls first, and the delivery loop skips a recalled message it takes. A recalled
//! message stays in the wheel until its slot passes, but it is not pending: the per-level
//! counts leave it out, and `recalled_in_slots` lets the next due time skip it.
//!
//! Invariants: messages are delivered in (due_ms, cq_offset) order; `progress` says every
//! message before `(delivered_below_ms, delivered_below_cq)` in that order is delivered and
//! none after it, except those delivered since; a message is never indexed with a key below
//! the committed progress (the send path clamps due times to [`Store::schedule_floor_ms`]),
//! so a rebuild that skips keys below the progress skips exactly the delivered ones.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::path::{Path, PathBuf};

use ringmq_wire::record;
use ringmq_wire::schedule::{unpack_tag, Progress, TIMER_PROGRESS_TOPIC, TIMER_TOPIC};

use super::consume_queue::{CqUnit, CQ_UNIT_BYTES};
use super::disk::Disk;
use super::{Result, Store, StoreError};

/// Width of a wheel slot.
pub const SLOT_MS: i64 = 1000;
/// A slot's messages are read from the chain files this long before the slot begins, so
/// the first of them are in memory when due.
pub const LOAD_AHEAD_MS: i64 = 300;
/// Entries per chain file (32 MiB, sparse).
pub const CHAIN_UNITS_PER_FILE: u64 = 1 << 20;
/// Bytes of a [`ChainUnit`].
pub const CHAIN_UNIT_BYTES: usize = 32;
/// Pending counts are kept per this many ConsumeQueue offsets.
pub const PENDING_CHUNK_UNITS: u64 = 1024;
/// Most ConsumeQueue units one [`Store::schedule_index`] call reads.
pub const INDEX_UNITS_PER_STEP: u64 = 16_384;

/// One scheduled message as the schedule knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Due {
    pub due_ms: i64,
    pub cq_offset: u64,
    pub physical_offset: u64,
    pub size: u32,
    /// Delay level (0: a delivery time).
    pub level: u32,
}

/// A chain file entry, 32 bytes big-endian: previous entry of the slot (ConsumeQueue
/// offset + 1, 0 = none) 8 | physical offset 8 | due ms 8 | size 4 | level 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ChainUnit {
    prev: u64,
    due: Due,
}

impl ChainUnit {
    fn encode(&self) -> [u8; CHAIN_UNIT_BYTES] {
        let mut b = [0u8; CHAIN_UNIT_BYTES];
        b[0..8].copy_from_slice(&self.prev.to_be_bytes());
        b[8..16].copy_from_slice(&self.due.physical_offset.to_be_bytes());
        b[16..24].copy_from_slice(&self.due.due_ms.to_be_bytes());
        b[24..28].copy_from_slice(&self.due.size.to_be_bytes());
        b[28..32].copy_from_slice(&self.due.level.to_be_bytes());
        b
    }

    fn decode(b: &[u8; CHAIN_UNIT_BYTES], cq_offset: u64) -> Self {
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        ChainUnit {
            prev: u64_at(0),
            due: Due {
                due_ms: u64_at(16) as i64,
                cq_offset,
                physical_offset: u64_at(8),
                size: u32_at(24),
                level: u32_at(28),
            },
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct SlotHead {
    /// Newest entry's ConsumeQueue offset + 1.
    last: u64,
    count: u64,
}

/// The in-memory part of a shard's schedule (see the module docs).
#[derive(Debug)]
pub struct Schedule<F> {
    dir: PathBuf,
    chains: BTreeMap<u64, F>,
    slots: BTreeMap<i64, SlotHead>,
    heap: BinaryHeap<Reverse<Due>>,
    /// Slots up to this one are in `heap`.
    loaded_until: i64,
    /// Next ConsumeQueue offset of the timer queue to index.
    indexed: u64,
    /// The newest progress written to the log (or read from it at open).
    progress: Progress,
    chunk_base: u64,
    chunks: VecDeque<u32>,
    /// Pending messages per level: indexed, not taken for delivery, not recalled.
    per_level: Vec<u64>,
    /// Recalled messages still in a slot of `slots` (slot -> how many).
    recalled_in_slots: BTreeMap<i64, u64>,
    /// Messages delivered since open.
    delivered_since_open: u64,
    /// Recalled messages not yet passed by delivery (see `recall.rs`).
    pub(super) recalls: super::recall::Recalls,
}

/// Counts for `ringmq-ctl delay status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleCounts {
    /// Pending per packed level; index 0 = delivery times.
    pub per_level: Vec<u64>,
    pub next_due_ms: Option<i64>,
    pub indexing: bool,
    pub delivered_since_open: u64,
}

impl<F> Schedule<F> {
    /// The committed progress as a key: every message below it is delivered, none at or
    /// above it (see the module docs).
    pub(super) fn pending_key_floor(&self) -> (i64, u64) {
        (
            self.progress.delivered_below_ms,
            self.progress.delivered_below_cq,
        )
    }

    /// Counts `d` in (or out of) the schedule: its chunk (the low watermark: a recalled
    /// message is still in the wheel) and, unless it is recalled, its level.
    fn add_pending(&mut self, d: &Due, delta: i64) {
        let chunk = d.cq_offset / PENDING_CHUNK_UNITS;
        if chunk < self.chunk_base {
            // Only when indexing re-reads below the base, which it never does.
            return;
        }
        let i = (chunk - self.chunk_base) as usize;
        while self.chunks.len() <= i {
            self.chunks.push_back(0);
        }
        let c = &mut self.chunks[i];
        *c = (i64::from(*c) + delta).max(0) as u32;
        if !self.recalls.contains(d.cq_offset) {
            self.add_level(d.level, delta);
        }
    }

    fn add_level(&mut self, level: u32, delta: i64) {
        let level = level as usize;
        if self.per_level.len() <= level {
            self.per_level.resize(level + 1, 0);
        }
        let l = &mut self.per_level[level];
        *l = (*l as i64 + delta).max(0) as u64;
    }

    /// The message at `cq_offset` (due at `due_ms`, at `level`) was just added to the
    /// recalled set: once indexed it was counted as pending, and no longer is. Messages not
    /// indexed yet are left out of the counts when they are.
    pub(super) fn count_recall(&mut self, cq_offset: u64, due_ms: i64, level: u32) {
        if cq_offset >= self.indexed {
            return;
        }
        self.add_level(level, -1);
        let slot = due_ms.div_euclid(SLOT_MS);
        if slot > self.loaded_until {
            *self.recalled_in_slots.entry(slot).or_insert(0) += 1;
        }
    }

    /// Lowest ConsumeQueue offset that may still be pending.
    fn low_watermark(&mut self) -> u64 {
        while self.chunks.front() == Some(&0)
            && (self.chunk_base + 1) * PENDING_CHUNK_UNITS <= self.indexed
        {
            self.chunks.pop_front();
            self.chunk_base += 1;
        }
        match self.chunks.iter().position(|&c| c > 0) {
            Some(i) => (self.chunk_base + i as u64) * PENDING_CHUNK_UNITS,
            None => self.indexed,
        }
        .max(self.progress.low_cq_offset.min(self.indexed))
    }

    fn chain_file_of(cq_offset: u64) -> u64 {
        cq_offset - cq_offset % CHAIN_UNITS_PER_FILE
    }
}

impl<D: Disk + Clone> Store<D> {
    /// Builds the schedule's empty state at open: the newest progress record of this shard,
    /// fresh chain files. Indexing (from the progress's low watermark) runs later, on the
    /// shard's loop, in steps ([`Self::schedule_index`]).
    pub(super) fn open_schedule(&mut self) -> Result<()> {
        let shard = u32::from(self.cfg.shard);
        let mut progress = Progress::default();
        if let Some(cq) = self.queue(TIMER_PROGRESS_TOPIC, shard) {
            let (min, max) = (cq.min_offset(), cq.max_offset());
            if max > min {
                let unit = cq.unit(max - 1)?;
                let bytes = self.log.read_record(unit.physical_offset)?;
                let rec = record::decode_one(&bytes)
                    .map_err(|source| StoreError::BadRecord { at: 0, source })?;
                progress = Progress::decode(rec.body)
                    .map_err(|source| StoreError::BadRecord { at: 0, source })?;
            }
        }
        let timer_min = self
            .queue(TIMER_TOPIC, shard)
            .map_or(0, |cq| cq.min_offset());
        let indexed = progress.low_cq_offset.max(timer_min);
        let dir = self
            .cfg
            .root
            .join("timerlog")
            .join(self.cfg.shard.to_string());
        if self.disk.exists(&dir) {
            self.disk
                .remove_dir_all(&dir)
                .map_err(|e| StoreError::io(&dir, e))?;
        }
        self.disk
            .create_dir_all(&dir)
            .map_err(|e| StoreError::io(&dir, e))?;
        self.schedule = Schedule {
            dir,
            chains: BTreeMap::new(),
            slots: BTreeMap::new(),
            heap: BinaryHeap::new(),
            loaded_until: i64::MIN,
            indexed,
            progress,
            chunk_base: indexed / PENDING_CHUNK_UNITS,
            chunks: VecDeque::new(),
            per_level: Vec::new(),
            recalled_in_slots: BTreeMap::new(),
            delivered_since_open: 0,
            recalls: Default::default(),
        };
        self.open_recalls();
        Ok(())
    }

    /// Indexes up to `max_units` recall records, then (once they are caught up) up to
    /// `max_units` scheduled messages appended since the last call. True when every recall
    /// and every scheduled message in the log is indexed (only then may
    /// [`Self::schedule_due`] deliver: a message not yet indexed could be due earlier than
    /// those that are, a recall not yet read could name a message about to be delivered).
    pub fn schedule_index(&mut self, max_units: u64) -> Result<bool> {
        if !self.schedule_index_recalls(max_units)? {
            return Ok(false);
        }
        let shard = u32::from(self.cfg.shard);
        let Some(cq) = self.queue(TIMER_TOPIC, shard) else {
            return Ok(true);
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        let from = self.schedule.indexed.max(min);
        let to = max.min(from.saturating_add(max_units));
        if from >= to {
            self.schedule.indexed = from;
            return Ok(true);
        }
        let mut units = vec![0u8; (to - from) as usize * CQ_UNIT_BYTES];
        cq.read_units(from, &mut units)?;
        let floor = self.schedule.pending_key_floor();
        // Chain entries of this step, per chain file: (first offset in the file, bytes).
        let mut writes: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        for (i, chunk) in units.chunks_exact(CQ_UNIT_BYTES).enumerate() {
            let cq_offset = from + i as u64;
            let unit = CqUnit::decode(chunk.try_into().expect("chunks_exact yields 20 bytes"));
            let (due_ms, level) = unpack_tag(unit.tag_hash);
            let due = Due {
                due_ms,
                cq_offset,
                physical_offset: unit.physical_offset,
                size: unit.size,
                level,
            };
            if (due_ms, cq_offset) < floor || unit.is_empty() {
                continue;
            }
            self.schedule.add_pending(&due, 1);
            let slot = due_ms.div_euclid(SLOT_MS);
            if slot <= self.schedule.loaded_until {
                self.schedule.heap.push(Reverse(due));
                continue;
            }
            let head = self
                .schedule
                .slots
                .entry(slot)
                .or_insert(SlotHead { last: 0, count: 0 });
            let entry = ChainUnit {
                prev: head.last,
                due,
            };
            head.last = cq_offset + 1;
            head.count += 1;
            if self.schedule.recalls.contains(cq_offset) {
                *self.schedule.recalled_in_slots.entry(slot).or_insert(0) += 1;
            }
            let file = Schedule::<D::File>::chain_file_of(cq_offset);
            let at = (cq_offset - file) * CHAIN_UNIT_BYTES as u64;
            match writes.last_mut() {
                Some((f, start, buf)) if *f == file && *start + buf.len() as u64 == at => {
                    buf.extend_from_slice(&entry.encode())
                }
                _ => writes.push((file, at, entry.encode().to_vec())),
            }
        }
        for (file, at, buf) in writes {
            self.ensure_chain_file(file)?;
            let f = &self.schedule.chains[&file];
            self.disk
                .write_at(f, at, &buf)
                .map_err(|e| StoreError::io(&self.schedule.dir, e))?;
        }
        self.schedule.indexed = to;
        Ok(to == max)
    }

    /// Takes up to `max` messages due at `now_ms` (in due order) out of the schedule. The
    /// caller stores them in their real topics, with [`Self::schedule_progress`] in the same
    /// append, then calls [`Self::schedule_commit`]; or [`Self::schedule_return`] when that
    /// append fails.
    pub fn schedule_due(&mut self, now_ms: i64, max: usize) -> Result<Vec<Due>> {
        let now_ms = if crate::planted::is(crate::planted::Bug::DeliverEarly) {
            now_ms + 1000
        } else {
            now_ms
        };
        self.load_slots(now_ms)?;
        let mut out = Vec::new();
        while out.len() < max {
            match self.schedule.heap.peek() {
                Some(Reverse(d)) if d.due_ms <= now_ms => {
                    let d = *d;
                    self.schedule.heap.pop();
                    self.schedule.add_pending(&d, -1);
                    out.push(d);
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// Puts back messages [`Self::schedule_due`] took when storing them failed.
    pub fn schedule_return(&mut self, due: Vec<Due>) {
        for d in due {
            self.schedule.add_pending(&d, 1);
            self.schedule.heap.push(Reverse(d));
        }
    }

    /// The progress to write with the deliveries just taken by [`Self::schedule_due`].
    pub fn schedule_progress(&mut self, now_ms: i64, delivered: u64) -> Progress {
        let next_pending = match (self.schedule.heap.peek(), self.schedule.slots.keys().next()) {
            (Some(Reverse(d)), _) => (d.due_ms, d.cq_offset),
            (None, Some(&slot)) => (slot * SLOT_MS, 0),
            (None, None) => (now_ms.saturating_add(1), 0),
        };
        let mut key = next_pending
            .min((now_ms.saturating_add(1), 0))
            .max(self.schedule.pending_key_floor());
        if crate::planted::is(crate::planted::Bug::ProgressAhead) {
            key = key.max((next_pending.0, next_pending.1 + 1));
        }
        Progress {
            delivered_below_ms: key.0,
            delivered_below_cq: key.1,
            low_cq_offset: self.schedule.low_watermark(),
            delivered: self.schedule.progress.delivered + delivered,
        }
    }

    /// The append that carried `progress` succeeded: it is the new floor, and chain files
    /// wholly below its low watermark are removed.
    pub fn schedule_commit(&mut self, progress: Progress, delivered: u64) {
        self.schedule.progress = progress;
        self.schedule.delivered_since_open += delivered;
        let low = progress.low_cq_offset;
        while let Some((&first, _)) = self.schedule.chains.first_key_value() {
            if first + CHAIN_UNITS_PER_FILE > low {
                break;
            }
            self.schedule.chains.remove(&first);
            let path = self
                .schedule
                .dir
                .join(super::consume_queue::file_name(first));
            if let Err(e) = self.disk.remove_file(&path) {
                log::warn!("removing {}: {e}", path.display());
            }
        }
    }

    /// The earliest due time a new scheduled message may get: the committed progress (a
    /// message below it would be taken for delivered by a rebuild). Only a clock stepped
    /// back makes it later than the time asked for.
    pub fn schedule_floor_ms(&self) -> i64 {
        self.schedule.progress.delivered_below_ms
    }

    /// When the delivery loop should look again: the earliest due message in memory, or the
    /// time to load the next slot.
    pub fn schedule_next_wake_ms(&self) -> Option<i64> {
        let heap = self.schedule.heap.peek().map(|Reverse(d)| d.due_ms);
        let slot = self
            .schedule
            .slots
            .keys()
            .next()
            .map(|s| s * SLOT_MS - LOAD_AHEAD_MS);
        match (heap, slot) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Pending counts and the next due time, recalled messages left out.
    pub fn schedule_counts(&self) -> ScheduleCounts {
        let sched = &self.schedule;
        let heap = match sched.heap.peek() {
            Some(Reverse(d)) if sched.recalls.contains(d.cq_offset) => sched
                .heap
                .iter()
                .filter(|Reverse(d)| !sched.recalls.contains(d.cq_offset))
                .map(|Reverse(d)| d.due_ms)
                .min(),
            top => top.map(|Reverse(d)| d.due_ms),
        };
        let slot = sched
            .slots
            .iter()
            .find(|(s, head)| sched.recalled_in_slots.get(s).copied().unwrap_or(0) < head.count)
            .map(|(s, _)| s * SLOT_MS);
        let next_due_ms = match (heap, slot) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let indexing = self
            .queue(TIMER_TOPIC, u32::from(self.cfg.shard))
            .is_some_and(|cq| self.schedule.indexed < cq.max_offset());
        ScheduleCounts {
            per_level: self.schedule.per_level.clone(),
            next_due_ms,
            indexing,
            delivered_since_open: self.schedule.delivered_since_open,
        }
    }

    /// The committed progress (newest progress record).
    pub fn schedule_committed(&self) -> Progress {
        self.schedule.progress
    }

    /// Physical offset below which no pending scheduled message lies (retention keeps it).
    pub(super) fn schedule_keep_from(&self) -> u64 {
        let shard = u32::from(self.cfg.shard);
        let Some(cq) = self.queue(TIMER_TOPIC, shard) else {
            return u64::MAX;
        };
        let low = self.schedule.progress.low_cq_offset.max(cq.min_offset());
        if low >= cq.max_offset() {
            return u64::MAX;
        }
        cq.unit(low).map_or(u64::MAX, |u| u.physical_offset)
    }

    /// Moves every slot that begins within [`LOAD_AHEAD_MS`] of `now_ms` from the chain
    /// files into the heap.
    fn load_slots(&mut self, now_ms: i64) -> Result<()> {
        while let Some((&slot, &head)) = self.schedule.slots.first_key_value() {
            if slot * SLOT_MS - LOAD_AHEAD_MS > now_ms {
                break;
            }
            let mut next = head.last;
            let mut loaded = 0u64;
            while next != 0 && loaded < head.count {
                let cq_offset = next - 1;
                let file = Schedule::<D::File>::chain_file_of(cq_offset);
                let at = (cq_offset - file) * CHAIN_UNIT_BYTES as u64;
                let mut b = [0u8; CHAIN_UNIT_BYTES];
                self.ensure_chain_file(file)?;
                let f = &self.schedule.chains[&file];
                self.disk
                    .read_at(f, at, &mut b)
                    .map_err(|e| StoreError::io(&self.schedule.dir, e))?;
                let unit = ChainUnit::decode(&b, cq_offset);
                self.schedule.heap.push(Reverse(unit.due));
                next = unit.prev;
                loaded += 1;
            }
            self.schedule.slots.remove(&slot);
            self.schedule.recalled_in_slots.remove(&slot);
            self.schedule.loaded_until = self.schedule.loaded_until.max(slot);
        }
        Ok(())
    }

    fn ensure_chain_file(&mut self, first: u64) -> Result<()> {
        if !self.schedule.chains.contains_key(&first) {
            let path = self
                .schedule
                .dir
                .join(super::consume_queue::file_name(first));
            let f = self
                .disk
                .open(&path, true)
                .map_err(|e| StoreError::io(&path, e))?;
            let len = CHAIN_UNITS_PER_FILE * CHAIN_UNIT_BYTES as u64;
            self.disk
                .set_len_sparse(&f, len)
                .map_err(|e| StoreError::io(&path, e))?;
            self.schedule.chains.insert(first, f);
        }
        Ok(())
    }
}

/// An empty schedule (before [`Store::open_schedule`]).
pub(super) fn empty<F>(root: &Path) -> Schedule<F> {
    Schedule {
        dir: root.to_path_buf(),
        chains: BTreeMap::new(),
        slots: BTreeMap::new(),
        heap: BinaryHeap::new(),
        loaded_until: i64::MIN,
        indexed: 0,
        progress: Progress::default(),
        chunk_base: 0,
        chunks: VecDeque::new(),
        per_level: Vec::new(),
        recalled_in_slots: BTreeMap::new(),
        delivered_since_open: 0,
        recalls: Default::default(),
    }
}
