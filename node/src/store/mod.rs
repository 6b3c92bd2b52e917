//! The store of one shard: its CommitLog, the ConsumeQueues of the queues it owns, its
//! checkpoint, recovery and retention. Pure with respect to the outside world: every file
//! operation goes through [`disk::Disk`], time comes in as `now_ms` arguments, and nothing
//! here knows about sockets, shards or the event loop.
//!
//! Files under the store root (`storePathRootDir`):
//! - `commitlog/<shard>/<20-digit start offset>`: CommitLog segments (see [`commitlog`]).
//! - `consumequeue/<topic>/<queue>/<20-digit start byte>`: ConsumeQueues (see [`consume_queue`]).
//! - `checkpoint.<shard>`: see [`checkpoint`].
//! - `epoch.<shard>`: the master epochs that wrote the log, see [`epoch`].
//! - `abort.<shard>`: present while the shard's store is open; found at start = crash.
//!
//! Durability is the caller's choice at each call: [`Store::append`] leaves bytes in the page
//! cache (what ASYNC_FLUSH acknowledges); [`Store::sync`] makes everything appended so far
//! durable with one fdatasync (what SYNC_FLUSH waits for; appends that share one sync are a
//! group commit); [`Store::checkpoint`] also syncs the ConsumeQueues and records how far
//! recovery may skip.

mod checked;
pub mod checkpoint;
pub mod commitlog;
pub mod consume_queue;
pub mod disk;
pub mod epoch;
pub mod error;
pub mod fault_disk;
pub mod flush;
pub mod index;
mod pull;
mod queues;
pub mod recall;
pub mod replica;
pub mod schedule;
pub mod txn;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ringmq_wire::record::{self, BrokerFields};

pub use self::checked::{CheckedBatch, RecordMeta};
use self::checkpoint::{Checkpoint, CHECKPOINT_FILE_BYTES, SLOT_BYTES};
use self::commitlog::{shard_of_offset, CommitLog};
use self::consume_queue::{ConsumeQueue, CqUnit, CQ_UNITS_PER_FILE_DEFAULT};
use self::disk::{Disk, WriteOp};
pub use self::error::{Result, StoreError};
pub use self::pull::{PullResult, PullStatus, Run};
use self::queues::{open_owned_queues, open_queue, redispatch};

/// Most ConsumeQueue units one pull examines (matching or not).
pub const PULL_SCAN_UNITS_MAX: u64 = 4096;
/// How often the free-space check runs while the disk is not full.
pub const SPACE_CHECK_INTERVAL_MS: i64 = 1000;

/// Configuration of one shard's store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub root: PathBuf,
    pub shard: u16,
    pub segment_bytes: u64,
    pub cq_units_per_file: u64,
    /// Written into STOREHOSTADDRESS of every record.
    pub store_host: SocketAddr,
    /// Appends are refused with `DiskFull` above this used fraction of the file system
    /// (RocketMQ's `diskSpaceWarningLevelRatio`, 0.90).
    pub disk_full_ratio: f64,
    /// Durable log bytes kept in memory behind the durable end; older ones are released
    /// (see `commitlog::cache`). 0 = release nothing.
    pub cache_keep_bytes: u64,
    /// Zeros are written this far ahead of the log's appends, off the shard's thread (see
    /// `crate::io::prewrite`). 0 = off.
    pub prewrite_bytes: u64,
}

impl StoreConfig {
    /// Defaults: 1 GiB segments, 300,000-unit ConsumeQueue files, refuse writes at 90% full,
    /// no page-cache release.
    pub fn new(root: impl Into<PathBuf>, shard: u16, store_host: SocketAddr) -> Self {
        StoreConfig {
            root: root.into(),
            shard,
            segment_bytes: commitlog::SEGMENT_BYTES_DEFAULT,
            cq_units_per_file: CQ_UNITS_PER_FILE_DEFAULT,
            store_host,
            disk_full_ratio: 0.90,
            cache_keep_bytes: 0,
            prewrite_bytes: 0,
        }
    }
}

/// One stored record of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub queue_id: u32,
    pub queue_offset: u64,
    pub physical_offset: u64,
    pub size: u32,
}

/// Result of [`Store::append`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    pub records: Vec<Appended>,
    pub store_timestamp_ms: i64,
    /// Log end after this append: `sync` covers the batch once it has reached this offset.
    pub end_offset: u64,
}

/// What recovery did at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub clean: bool,
    pub scanned_from: u64,
    pub end: u64,
    pub records_scanned: u64,
    pub torn_tail: Option<String>,
}

/// What a retention pass removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    pub removed_segments: u32,
    pub removed_bytes: u64,
}

/// The store of one shard.
#[derive(Debug)]
pub struct Store<D: Disk + Clone> {
    disk: D,
    cfg: StoreConfig,
    log: CommitLog<D>,
    queues: HashMap<String, BTreeMap<u32, ConsumeQueue<D>>>,
    checkpoint: Checkpoint,
    checkpoint_file: D::File,
    poisoned: bool,
    /// Pulls of released bytes are read without the page cache by the caller
    /// ([`Self::set_direct_catch_up`]): no read-ahead into it for them.
    direct_catch_up: bool,
    space_checked_ms: Option<i64>,
    disk_full: bool,
    recovery: RecoveryReport,
    /// The index of scheduled messages (see [`schedule`]).
    schedule: schedule::Schedule<D::File>,
    /// Transaction state (see [`txn`]).
    txn: txn::Txn,
    /// The epochs that wrote the log (see [`epoch`]).
    epochs: epoch::EpochFile,
}

impl<D: Disk + Clone> Store<D> {
    /// Opens the shard's store, recovering from a crash when the abort marker is present.
    pub fn open(disk: D, cfg: StoreConfig) -> Result<Self> {
        let root = cfg.root.clone();
        disk.create_dir_all(&root)
            .map_err(|e| StoreError::io(&root, e))?;
        let log_dir = root.join("commitlog").join(cfg.shard.to_string());
        let mut log = CommitLog::open(&disk, &log_dir, cfg.shard, cfg.segment_bytes)?;
        log.set_cache_keep_bytes(cfg.cache_keep_bytes);
        log.set_prewrite_bytes(cfg.prewrite_bytes);
        let abort = abort_path(&cfg);
        let clean = !disk.exists(&abort);
        let cp_path = root.join(format!("checkpoint.{}", cfg.shard));
        let checkpoint_file = disk
            .open(&cp_path, true)
            .map_err(|e| StoreError::io(&cp_path, e))?;
        let checkpoint = read_checkpoint(&disk, &checkpoint_file, &cp_path)?;
        let mut queues = open_owned_queues(&disk, &cfg)?;

        let from = checkpoint.map_or(log.min_offset(), |c| c.cq_offset);
        let durable = checkpoint.map_or(0, |c| c.log_synced_offset);
        let units_per_file = cfg.cq_units_per_file;
        let scan = log.recover(from, durable, clean, |rec| {
            redispatch(&disk, &root, units_per_file, &mut queues, rec)
        })?;
        for qs in queues.values_mut() {
            for cq in qs.values_mut() {
                // After a clean shutdown every unit is below the log end and the bytes after
                // the last one are zero (the invariant), so the tail need not be read.
                if !clean || scan.torn.is_some() {
                    cq.truncate_to_log(scan.end)?;
                }
                cq.retain_from(log.min_offset())?;
            }
        }
        let epochs = epoch::EpochFile::open(&disk, &root, cfg.shard, scan.end)?;
        let mut store = Store {
            epochs,
            disk,
            log,
            queues,
            checkpoint: checkpoint.unwrap_or_default(),
            checkpoint_file,
            poisoned: false,
            direct_catch_up: false,
            space_checked_ms: None,
            disk_full: false,
            recovery: RecoveryReport {
                clean,
                scanned_from: from,
                end: scan.end,
                records_scanned: scan.records,
                torn_tail: scan.torn,
            },
            schedule: schedule::empty(&root),
            txn: txn::Txn::default(),
            cfg,
        };
        store.checkpoint()?;
        store.open_schedule()?;
        store.open_txn()?;
        let marker = store
            .disk
            .open(&abort, true)
            .map_err(|e| StoreError::io(&abort, e))?;
        drop(marker);
        store
            .disk
            .sync_dir(&root)
            .map_err(|e| StoreError::io(&root, e))?;
        store.log.prepare_next();
        Ok(store)
    }

    /// Validates the records of `batch` (back-to-back encodings, broker fields zero), assigns
    /// queue and physical offsets, patches the broker fields in place and writes the batch and
    /// its ConsumeQueue units. All or nothing: on error nothing of the batch is visible and the
    /// offsets are reused. The bytes are in the page cache, not yet durable: see [`Self::sync`].
    pub fn append(&mut self, batch: &mut [u8], now_ms: i64) -> Result<AppendOutcome> {
        let checked = CheckedBatch::check(batch)?;
        self.append_checked(batch, &checked, now_ms)
    }

    /// [`Self::append`] of a batch already checked by [`CheckedBatch::check`] (the send path
    /// decodes and checks a batch once, where the frame arrives).
    pub fn append_checked(
        &mut self,
        batch: &mut [u8],
        checked: &CheckedBatch,
        now_ms: i64,
    ) -> Result<AppendOutcome> {
        self.check_writable(now_ms)?;
        let metas = &checked.metas;
        let sp = self.log.save_point();
        let mut touched: Vec<(String, u32)> = Vec::new();
        let result = self.place_and_write(batch, metas, now_ms, &mut touched);
        match result {
            Ok(records) => {
                self.commit_queues(&touched)?;
                Ok(AppendOutcome {
                    records,
                    store_timestamp_ms: now_ms,
                    end_offset: self.log.write_offset(),
                })
            }
            Err(e) => {
                self.log.restore(sp);
                for (topic, q) in &touched {
                    if let Some(cq) = self.queue_mut(topic, *q) {
                        cq.discard_staged();
                    }
                }
                if matches!(e, StoreError::DiskFull { .. }) {
                    self.disk_full = true;
                }
                Err(e)
            }
        }
    }

    /// Makes the staged units of the `touched` queues part of them (their records are in the
    /// log) and writes a queue's units held in memory once they fill
    /// [`consume_queue::CQ_PENDING_BYTES_MAX`]. A failed write is fatal.
    fn commit_queues(&mut self, touched: &[(String, u32)]) -> Result<()> {
        let mut written = Ok(());
        for (topic, q) in touched {
            if let Some(cq) = self.queue_mut(topic, *q) {
                cq.commit_staged();
                if cq.pending_full() && written.is_ok() {
                    written = cq.write_pending();
                }
            }
        }
        written.inspect_err(|_| self.poisoned = true)
    }

    /// Writes every ConsumeQueue unit held in memory to its file (before a checkpoint). A
    /// failure is fatal.
    fn write_pending_units(&mut self) -> Result<()> {
        let written = self
            .queues
            .values_mut()
            .flat_map(|qs| qs.values_mut())
            .try_for_each(|cq| cq.write_pending());
        written.inspect_err(|_| self.poisoned = true)
    }

    /// fdatasyncs the log up to everything appended so far and returns that offset. Appends
    /// made before one `sync` share it (group commit). An error is fatal and poisons the
    /// store.
    pub fn sync(&mut self) -> Result<u64> {
        self.check_alive()?;
        self.log.sync().inspect_err(|_| self.poisoned = true)
    }

    /// Syncs the log and the ConsumeQueues, then records a checkpoint so recovery can start
    /// from here. The ASYNC_FLUSH timer calls this.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.check_alive()?;
        let end = self.sync()?;
        self.checkpoint_synced(end)
    }

    /// Syncs the ConsumeQueues and records a checkpoint for a log known durable through
    /// `log_synced` (the caller synced it, e.g. asynchronously: see [`Self::sync_plan`]).
    /// The same steps as [`Self::take_dirty_queue_files`], [`Self::write_checkpoint`] and
    /// [`Self::checkpoint_written`], with the fdatasyncs made here, blocking.
    pub fn checkpoint_synced(&mut self, log_synced: u64) -> Result<()> {
        self.check_alive()?;
        self.write_pending_units()?;
        let disk = &self.disk;
        let mut synced: std::io::Result<()> = Ok(());
        for cq in self.queues.values_mut().flat_map(|qs| qs.values_mut()) {
            let (files, dir) = cq.take_dirty_files();
            synced = files
                .into_iter()
                .try_for_each(|f| disk.sync_data(f))
                .and_then(|()| dir.map_or(Ok(()), |d| disk.sync_dir(d)));
            if synced.is_err() {
                break;
            }
        }
        synced.map_err(|e| self.fatal("fdatasync of a ConsumeQueue", e))?;
        let Some(next) = self.write_checkpoint(log_synced)? else {
            return Ok(());
        };
        let synced = self.disk.sync_data(&self.checkpoint_file);
        synced.map_err(|e| self.fatal("fdatasync of the checkpoint", e))?;
        self.checkpoint_written(next);
        Ok(())
    }

    /// Checkpoint step 1 of 3, for a caller that fdatasyncs without blocking (the shard's
    /// flush timer): writes the ConsumeQueue units held in memory, then returns the files
    /// written since the last call and the directories in which files were created. The
    /// caller must fdatasync every file and fsync every directory (a failure is fatal: the
    /// store no longer knows what is durable) before step 2. An error here is fatal too.
    pub fn take_dirty_queue_files(&mut self) -> Result<(Vec<&D::File>, Vec<&Path>)> {
        self.write_pending_units()?;
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        for cq in self.queues.values_mut().flat_map(|qs| qs.values_mut()) {
            let (f, d) = cq.take_dirty_files();
            files.extend(f);
            dirs.extend(d);
        }
        Ok((files, dirs))
    }

    /// Checkpoint step 2 of 3: writes (without syncing) the checkpoint for a log durable
    /// through `log_synced` and ConsumeQueues synced by step 1. `None` when nothing changed
    /// since the last one. The caller fdatasyncs [`Self::checkpoint_file`], then calls
    /// [`Self::checkpoint_written`].
    pub fn write_checkpoint(&mut self, log_synced: u64) -> Result<Option<Checkpoint>> {
        self.check_alive()?;
        let end = log_synced.min(self.log.synced_offset());
        let next = Checkpoint {
            sequence: self.checkpoint.sequence + 1,
            log_synced_offset: end,
            cq_offset: end,
            min_offset: self.log.min_offset(),
        };
        if next.log_synced_offset == self.checkpoint.log_synced_offset
            && next.min_offset == self.checkpoint.min_offset
            && self.checkpoint.sequence > 0
        {
            return Ok(None);
        }
        let written = self
            .disk
            .write_at(&self.checkpoint_file, next.slot(), &next.encode());
        written.map_err(|e| self.fatal("writing the checkpoint", e))?;
        Ok(Some(next))
    }

    /// A failed write or fdatasync the store cannot recover from: poisons it.
    fn fatal(&mut self, context: &str, source: std::io::Error) -> StoreError {
        self.poisoned = true;
        StoreError::Fatal {
            context: context.to_string(),
            source,
        }
    }

    /// The checkpoint file (for step 2's fdatasync).
    pub fn checkpoint_file(&self) -> &D::File {
        &self.checkpoint_file
    }

    /// Checkpoint step 3 of 3: `next` (from step 2) is durable.
    pub fn checkpoint_written(&mut self, next: Checkpoint) {
        if next.sequence > self.checkpoint.sequence {
            self.checkpoint = next;
        }
    }

    /// Clean shutdown: checkpoint, then remove the abort marker so the next open is fast.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    /// Clean shutdown in place (for an owner that keeps the store borrowed): checkpoint,
    /// remove the abort marker; every later write is refused.
    pub fn shutdown(&mut self) -> Result<()> {
        self.checkpoint()?;
        self.poisoned = true;
        let abort = abort_path(&self.cfg);
        self.disk
            .remove_file(&abort)
            .map_err(|e| StoreError::io(&abort, e))?;
        self.disk
            .sync_dir(&self.cfg.root)
            .map_err(|e| StoreError::io(&self.cfg.root, e))
    }

    /// Copies log bytes (a [`Run`] or part of one) into `buf`.
    pub fn read(&self, physical_offset: u64, buf: &mut [u8]) -> Result<()> {
        self.log.read(physical_offset, buf)
    }

    /// Appends log bytes (a [`Run`] or part of one) to `out`.
    pub fn read_append(&self, physical_offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.log.read_append(physical_offset, len, out)
    }

    /// `len` bytes of the log at `physical_offset` without a copy, where the disk can
    /// ([`Disk::read_shared`]); `None`: read them with [`Store::read_append`].
    pub fn read_shared(&self, physical_offset: u64, len: usize) -> Option<bytes::Bytes> {
        self.log.read_shared(physical_offset, len)
    }

    /// Whether [`Store::read`] of these bytes would be served from memory, without waiting
    /// for the disk ([`Disk::resident`]); `true` when that cannot be told.
    pub fn resident(&self, physical_offset: u64, len: u64) -> bool {
        self.log.resident(physical_offset, len)
    }

    /// The record at a physical offset (message id lookup), validated.
    pub fn read_record(&self, physical_offset: u64) -> Result<Vec<u8>> {
        if shard_of_offset(physical_offset) != self.cfg.shard {
            return Err(StoreError::NotFound {
                detail: format!(
                    "physical offset {physical_offset} belongs to shard {}, not {}",
                    shard_of_offset(physical_offset),
                    self.cfg.shard
                ),
            });
        }
        self.log.read_record(physical_offset)
    }

    /// When the record at `physical_offset` was stored (ms), read from its header alone;
    /// `None` if there is no whole record there.
    pub fn store_time_at(&self, physical_offset: u64) -> Option<i64> {
        use ringmq_wire::record::{pos as field, sys_flag};
        // Up to the store timestamp after an IPv6 born host; every record is longer.
        let mut head = [0u8; field::BORN_HOST + 20 + 8];
        if physical_offset + head.len() as u64 > self.write_offset() {
            return None;
        }
        self.read(physical_offset, &mut head).ok()?;
        let be32 = |at: usize| u32::from_be_bytes(head[at..at + 4].try_into().unwrap_or([0; 4]));
        let magic = be32(field::MAGIC);
        if magic != ringmq_wire::record::MAGIC_V1 && magic != ringmq_wire::record::MAGIC_V2 {
            return None;
        }
        let host = if be32(field::SYS_FLAG) & sys_flag::BORNHOST_V6 != 0 {
            20
        } else {
            8
        };
        let at = field::BORN_HOST + host;
        Some(i64::from_be_bytes(head[at..at + 8].try_into().ok()?))
    }

    /// When the message at `offset` of a queue was stored (ms), if the store has it.
    pub fn store_time_of(&self, topic: &str, queue_id: u32, offset: u64) -> Option<i64> {
        let unit = self.queue(topic, queue_id)?.unit(offset).ok()?;
        self.store_time_at(unit.physical_offset)
    }

    /// `(min, max)` queue offsets of a queue, if this store has it.
    pub fn queue_range(&self, topic: &str, queue_id: u32) -> Option<(u64, u64)> {
        self.queue(topic, queue_id)
            .map(|cq| (cq.min_offset(), cq.max_offset()))
    }

    /// First queue offset whose record was stored at or after `timestamp_ms` (the queue's max
    /// offset when none was).
    pub fn offset_for_timestamp(
        &self,
        topic: &str,
        queue_id: u32,
        timestamp_ms: i64,
    ) -> Result<u64> {
        let Some(cq) = self.queue(topic, queue_id) else {
            return Ok(0);
        };
        let (mut lo, mut hi) = (cq.min_offset(), cq.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let unit = cq.unit(mid)?;
            let bytes = self.log.read_record(unit.physical_offset)?;
            let rec = record::decode_one(&bytes).map_err(|e| StoreError::NotFound {
                detail: format!("record at {}: {e}", unit.physical_offset),
            })?;
            if rec.store_timestamp_ms < timestamp_ms {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The file and file offset of a log position (zero-copy sends).
    pub fn locate(&self, physical_offset: u64) -> Result<(&D::File, u64)> {
        self.log.locate(physical_offset)
    }

    /// Removes log segments whose records are all older than `reserved_ms` (or the oldest ones
    /// regardless of age when `force`, under disk pressure), at most `max_segments`, and moves
    /// the ConsumeQueue minimums after them. The active segment is never removed.
    pub fn remove_expired(
        &mut self,
        now_ms: i64,
        reserved_ms: i64,
        force: bool,
        max_segments: u32,
    ) -> Result<RetentionOutcome> {
        let mut out = RetentionOutcome::default();
        let keep_from = self.schedule_keep_from().min(self.txn_keep_from());
        while out.removed_segments < max_segments && self.log.segments().len() >= 2 {
            let next_start = self.log.segments()[1].start;
            if next_start >= self.log.write_offset() || next_start > keep_from {
                // The segment holds records after the log end, pending scheduled messages
                // (kept whatever their age, until delivered) or pending half messages.
                break;
            }
            let newest_ts = match self.log.read_record(next_start) {
                Ok(bytes) => record::decode_one(&bytes)
                    .map(|r| r.store_timestamp_ms)
                    .unwrap_or(i64::MAX),
                Err(_) => i64::MAX,
            };
            let expired = newest_ts <= now_ms.saturating_sub(reserved_ms);
            if !expired && !force {
                break;
            }
            if self.log.remove_oldest()?.is_none() {
                break;
            }
            out.removed_segments += 1;
            out.removed_bytes += self.log.segment_bytes();
        }
        if out.removed_segments > 0 {
            let min = self.log.min_offset();
            for qs in self.queues.values_mut() {
                for cq in qs.values_mut() {
                    cq.retain_from(min)?;
                }
            }
            self.disk_full = false;
            self.space_checked_ms = None;
            self.checkpoint()?;
        }
        Ok(out)
    }

    /// Drops a topic's ConsumeQueues (its log bytes go with retention). Checkpoints after:
    /// otherwise crash recovery, re-dispatching the log from the previous checkpoint, would
    /// bring back the topic's newer records.
    pub fn delete_topic(&mut self, topic: &str) -> Result<()> {
        if let Some(qs) = self.queues.remove(topic) {
            for cq in qs.into_values() {
                cq.remove()?;
            }
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Fraction of the store's file system in use.
    pub fn disk_used_ratio(&self) -> Result<f64> {
        self.disk
            .space(&self.cfg.root)
            .map(|s| s.used_ratio())
            .map_err(|e| StoreError::io(&self.cfg.root, e))
    }

    pub fn min_offset(&self) -> u64 {
        self.log.min_offset()
    }

    /// Makes the segment the next append writes exist now, waiting for its preparation
    /// (seconds per GiB for a pre-written segment), so that a master's first sends do not
    /// wait for it. Not for an empty slave: it may still move its log's start
    /// (`start_empty_at`). Returns whether a segment was added.
    pub fn open_active_segment(&mut self) -> Result<bool> {
        self.log.open_active_segment()
    }

    pub fn write_offset(&self) -> u64 {
        self.log.write_offset()
    }

    /// Whether the log has zeros to write ahead of its appends ([`Self::prewrite_step`]).
    pub fn prewrite_pending(&self) -> bool {
        !self.poisoned && self.log.prewrite_pending()
    }

    /// One bounded step of zeros ahead of the appends (see [`CommitLog::prewrite_step`]), for
    /// the shard's loop to run when it has nothing else to do. A failure turns it off; it
    /// does not poison the store (no appended byte is involved).
    pub fn prewrite_step(&mut self) -> Result<()> {
        if self.poisoned {
            return Ok(());
        }
        self.log.prewrite_step()
    }

    pub fn synced_offset(&self) -> u64 {
        self.log.synced_offset()
    }

    /// Log bytes below this offset were released from memory (see `commitLogCacheKeepBytes`).
    pub fn cache_released(&self) -> u64 {
        self.log.cache_released()
    }

    /// How many times the log was cut back (see `CommitLog::truncations`): bytes below
    /// [`Self::cache_released`] read while it had its present value are still the log's.
    pub fn log_truncations(&self) -> u64 {
        self.log.truncations()
    }

    /// Log segment size (bytes).
    pub fn segment_bytes(&self) -> u64 {
        self.log.segment_bytes()
    }

    /// The caller reads pulls of released bytes itself, without the page cache: a pull
    /// ([`Self::get_below`] without a property filter) no longer reads them back into it
    /// ahead of the reader.
    pub fn set_direct_catch_up(&mut self, on: bool) {
        self.direct_catch_up = on;
    }

    /// Bytes of CommitLog segment files.
    pub fn log_disk_bytes(&self) -> u64 {
        self.log.disk_bytes()
    }

    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// (topic, queue) pairs this store holds.
    pub fn queues(&self) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for (t, qs) in &self.queues {
            for q in qs.keys() {
                out.push((t.clone(), *q));
            }
        }
        out.sort();
        out
    }

    fn place_and_write(
        &mut self,
        batch: &mut [u8],
        metas: &[RecordMeta],
        now_ms: i64,
        touched: &mut Vec<(String, u32)>,
    ) -> Result<Vec<Appended>> {
        let mut records = Vec::with_capacity(metas.len());
        // (physical offset, batch range) of contiguous pieces, and BLANK positions.
        let mut pieces: Vec<(u64, usize, usize)> = Vec::new();
        let mut blanks: Vec<(u64, [u8; record::BLANK_BYTES])> = Vec::new();
        // The queue of the previous record: a batch usually holds one topic and queue, so
        // the ConsumeQueue is looked up (and the topic copied) once per run of records.
        let mut run: Option<(String, u32, &mut ConsumeQueue<D>)> = None;
        for m in metas {
            let place = self.log.place(m.len)?;
            if let Some(at) = place.blank_at {
                blanks.push((at, self.log.blank_bytes(at)));
            }
            let unit = CqUnit {
                physical_offset: place.physical_offset,
                size: m.len as u32,
                tag_hash: m.tag_hash,
            };
            let same_queue = run
                .as_ref()
                .is_some_and(|(t, q, _)| *q == m.queue_id && t.as_str() == m.topic(batch));
            if !same_queue {
                let topic = m.topic(batch).to_string();
                if !touched.iter().any(|(t, q)| *t == topic && *q == m.queue_id) {
                    touched.push((topic.clone(), m.queue_id));
                }
                let cq = open_queue(
                    &self.disk,
                    &self.cfg.root,
                    self.cfg.cq_units_per_file,
                    &mut self.queues,
                    &topic,
                    m.queue_id,
                )?;
                run = Some((topic, m.queue_id, cq));
            }
            let Some((_, _, cq)) = run.as_mut() else {
                unreachable!("the run was just set");
            };
            let queue_offset = if cq.next_offset() == 4
                && crate::planted::once(crate::planted::Bug::SkipCqWrite)
            {
                // Planted bug: the record gets queue offset 4 but no ConsumeQueue unit.
                cq.next_offset()
            } else {
                cq.stage(unit)?
            };
            let fields = BrokerFields {
                queue_offset,
                physical_offset: place.physical_offset,
                store_timestamp_ms: now_ms,
                store_host: self.cfg.store_host,
            };
            record::patch_broker_fields(&mut batch[m.start..m.start + m.len], &fields).map_err(
                |source| StoreError::BadRecord {
                    at: m.start,
                    source,
                },
            )?;
            match pieces.last_mut() {
                Some((phys, start, len))
                    if place.blank_at.is_none()
                        && *phys + *len as u64 == place.physical_offset
                        && *start + *len == m.start =>
                {
                    *len += m.len;
                }
                _ => pieces.push((place.physical_offset, m.start, m.len)),
            }
            records.push(Appended {
                queue_id: m.queue_id,
                queue_offset,
                physical_offset: place.physical_offset,
                size: m.len as u32,
            });
        }
        let blanks: Vec<(u64, &[u8])> = blanks.iter().map(|(at, b)| (*at, &b[..])).collect();
        self.write_append(&blanks, &pieces, batch).map(|()| records)
    }

    /// Writes one append's log bytes as one submission: BLANK tails `(offset, bytes)`, then
    /// the `pieces` `(physical offset, start, len)` of `bytes`. (Its ConsumeQueue units are
    /// committed after, in memory: see [`Self::commit_queues`].) A failed write must not
    /// leave bytes behind the log end (see `write_or_undo`); a fatal failure poisons the
    /// store.
    fn write_append(
        &mut self,
        blanks: &[(u64, &[u8])],
        pieces: &[(u64, usize, usize)],
        bytes: &[u8],
    ) -> Result<()> {
        let mut ops = Vec::with_capacity(pieces.len() + blanks.len());
        for &(at, blank) in blanks {
            ops.push(self.log.write_op(at, blank)?);
        }
        for &(phys, start, len) in pieces {
            ops.push(self.log.write_op(phys, &bytes[start..start + len])?);
        }
        let written = self.write_or_undo(&ops);
        drop(ops);
        if written.as_ref().is_err_and(StoreError::is_fatal) {
            self.poisoned = true;
        }
        written
    }

    /// Submits the writes of one append. When they fail, some may have landed anyway. Bytes
    /// past the log's write offset and units past a queue's end must stay zero: the next
    /// append reuses these offsets, and recovery (after a clean close too: it rescans from
    /// the checkpoint) would otherwise find these records and units and serve them, mixed
    /// with the records that reuse their offsets. So the zeros are put back, durably (left
    /// in the page cache, a crash could keep the failed writes and tear or drop the zeros
    /// after the offsets were reused). If that fails too, the tail is unknown: `Fatal`, and
    /// the caller poisons the store.
    fn write_or_undo(&self, ops: &[WriteOp<'_, D::File>]) -> Result<()> {
        let Err(e) = self.disk.write_all(ops) else {
            return Ok(());
        };
        if let Err(undo_err) = self.undo_writes(ops) {
            return Err(StoreError::Fatal {
                context: format!("undoing a failed append ({e})"),
                source: undo_err,
            });
        }
        Err(StoreError::io(self.log.dir(), e))
    }

    /// Overwrites the ranges of `ops` with zeros and fdatasyncs the files they touch.
    fn undo_writes(&self, ops: &[WriteOp<'_, D::File>]) -> std::io::Result<()> {
        let longest = ops.iter().map(|op| op.data.len()).max().unwrap_or(0);
        let zeros = vec![0u8; longest];
        let undo: Vec<WriteOp<'_, D::File>> = ops
            .iter()
            .map(|op| WriteOp {
                file: op.file,
                offset: op.offset,
                data: &zeros[..op.data.len()],
            })
            .collect();
        self.disk.write_all(&undo)?;
        let mut synced: Vec<&D::File> = Vec::new();
        for op in ops {
            if !synced.iter().any(|f| std::ptr::eq(*f, op.file)) {
                self.disk.sync_data(op.file)?;
                synced.push(op.file);
            }
        }
        Ok(())
    }

    fn check_alive(&self) -> Result<()> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        Ok(())
    }

    fn check_writable(&mut self, now_ms: i64) -> Result<()> {
        self.check_alive()?;
        let due = match self.space_checked_ms {
            None => true,
            Some(at) => self.disk_full || now_ms - at >= SPACE_CHECK_INTERVAL_MS,
        };
        if due {
            self.space_checked_ms = Some(now_ms);
            let ratio = self.disk_used_ratio()?;
            self.disk_full = ratio > self.cfg.disk_full_ratio;
            if self.disk_full {
                return Err(StoreError::DiskFull {
                    detail: format!(
                        "{} is {:.1}% full, writes refused above {:.1}%",
                        self.cfg.root.display(),
                        ratio * 100.0,
                        self.cfg.disk_full_ratio * 100.0
                    ),
                });
            }
        }
        Ok(())
    }

    fn queue(&self, topic: &str, queue_id: u32) -> Option<&ConsumeQueue<D>> {
        self.queues.get(topic).and_then(|qs| qs.get(&queue_id))
    }

    fn queue_mut(&mut self, topic: &str, queue_id: u32) -> Option<&mut ConsumeQueue<D>> {
        self.queues
            .get_mut(topic)
            .and_then(|qs| qs.get_mut(&queue_id))
    }

    fn queue_or_open(&mut self, topic: &str, queue_id: u32) -> Result<&mut ConsumeQueue<D>> {
        open_queue(
            &self.disk,
            &self.cfg.root,
            self.cfg.cq_units_per_file,
            &mut self.queues,
            topic,
            queue_id,
        )
    }
}

fn abort_path(cfg: &StoreConfig) -> PathBuf {
    cfg.root.join(format!("abort.{}", cfg.shard))
}

fn read_checkpoint<D: Disk>(disk: &D, file: &D::File, path: &Path) -> Result<Option<Checkpoint>> {
    let len = disk.file_len(file).map_err(|e| StoreError::io(path, e))?;
    if len < CHECKPOINT_FILE_BYTES {
        disk.set_len(file, CHECKPOINT_FILE_BYTES)
            .map_err(|e| StoreError::io(path, e))?;
    }
    let mut head = [0u8; 2 * SLOT_BYTES];
    disk.read_at(file, 0, &mut head)
        .map_err(|e| StoreError::io(path, e))?;
    Ok(Checkpoint::newest(&head))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_crash;
#[cfg(test)]
mod tests_epoch;
#[cfg(test)]
mod tests_model;
#[cfg(test)]
mod tests_replica;
