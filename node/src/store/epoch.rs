//! The epochs of one shard's CommitLog (RocketMQ's EpochFile): which master epoch wrote which
//! part of the log. Entry `(epoch, start_offset)` says the bytes from `start_offset` up to
//! the next entry's start (or the log end) were written by the master of `epoch`. Bytes
//! before the first entry belong to epoch 0: a log written before any epoch was recorded
//! (brokers not in controller mode never record one, and their lists stay empty).
//!
//! Invariants: epochs strictly increase along the list and starts never decrease; every
//! start is a record boundary of this shard's log (`commitlog::shard_base(shard)` and up).
//! An epoch that holds no bytes (its start equals the next one's) is replaced by the next,
//! so starts strictly increase too.
//!
//! Replicas compare their lists to find the last point where their logs agree
//! ([`consistent_point`]), and a replica ahead of that point cuts its log back to it.
//!
//! File `epoch.<shard>` in the store root, rewritten whole on every change (write
//! `epoch.<shard>.tmp`, fdatasync it, fsync the directory, rename it over the file, fsync
//! the directory), so a crash leaves the old list or the new one:
//!
//! | offset     | field        | bytes | meaning                                 |
//! |------------|--------------|-------|-----------------------------------------|
//! | 0          | magic        | 4     | `0x524D_4550` ("RMEP")                  |
//! | 4          | version      | 4     | 1                                       |
//! | 8          | count        | 4     | entries that follow                     |
//! | 12 + 12·i  | epoch        | 4     | entry i: the master epoch               |
//! | 16 + 12·i  | start_offset | 8     | entry i: CommitLog offset it starts at  |
//! | 12 + 12·n  | crc32        | 4     | crc32 of every byte before it           |

use std::path::{Path, PathBuf};

use super::disk::Disk;
use super::error::{Result, StoreError};
use super::Store;

/// Magic of an epoch file.
pub const EPOCH_MAGIC: u32 = 0x524D_4550;
/// Bytes of one entry in the file.
pub const EPOCH_ENTRY_BYTES: usize = 12;
/// Most entries kept: one per master change of this shard's broker set; past it the
/// oldest goes (only a divergence older than a thousand failovers could need it).
pub const EPOCH_ENTRIES_MAX: usize = 1024;
/// Largest epoch file.
pub const EPOCH_FILE_BYTES_MAX: usize = 12 + EPOCH_ENTRY_BYTES * EPOCH_ENTRIES_MAX + 4;

const _: () = assert!(EPOCH_ENTRY_BYTES == 4 + 8);

/// One epoch boundary: the master of `epoch` wrote the log from `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: u32,
    pub start_offset: u64,
}

/// The epoch holding a log offset, and where the next one begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochSpan {
    /// 0 before the first entry.
    pub epoch: u32,
    /// The entry's start (0 for epoch 0).
    pub start_offset: u64,
    /// Start of the next epoch, `None` for the last one.
    pub next_start: Option<u64>,
}

/// The epoch that wrote the byte at `offset` (for `offset` at the log end: the epoch the
/// next append belongs to).
pub fn span_at(entries: &[EpochEntry], offset: u64) -> EpochSpan {
    let i = entries.partition_point(|e| e.start_offset <= offset);
    let next_start = entries.get(i).map(|e| e.start_offset);
    match i.checked_sub(1).map(|j| entries[j]) {
        Some(e) => EpochSpan {
            epoch: e.epoch,
            start_offset: e.start_offset,
            next_start,
        },
        None => EpochSpan {
            epoch: 0,
            start_offset: 0,
            next_start,
        },
    }
}

/// The last offset up to which two replicas' logs agree (RocketMQ's
/// `findLastConsistentPoint`): the newest epoch both lists have with the same start, and
/// the smaller of that epoch's two ends (an epoch ends where the next entry starts, the last
/// one at the log end). The bytes before each list's first entry count as epoch 0 starting
/// at 0 on both sides (a log from before epochs). `None` when even that does not match (one
/// side's first epoch starts at the very beginning of its log, the other's does not): the
/// logs share nothing, the point is the start of the log.
pub fn consistent_point(
    local: &[EpochEntry],
    local_end: u64,
    remote: &[EpochEntry],
    remote_end: u64,
) -> Option<u64> {
    let local = with_epoch_zero(local);
    let remote = with_epoch_zero(remote);
    for (i, l) in local.iter().enumerate().rev() {
        let Some(j) = remote.iter().position(|r| r.epoch == l.epoch) else {
            continue;
        };
        if remote[j].start_offset != l.start_offset {
            continue;
        }
        let end_of = |list: &[EpochEntry], k: usize, log_end: u64| {
            list.get(k + 1)
                .map_or(log_end, |n| n.start_offset.min(log_end))
        };
        return Some(end_of(&local, i, local_end).min(end_of(&remote, j, remote_end)));
    }
    None
}

/// `entries` with an epoch-0 entry at 0 in front when the first entry starts later.
fn with_epoch_zero(entries: &[EpochEntry]) -> Vec<EpochEntry> {
    let mut out = Vec::with_capacity(entries.len() + 1);
    if entries
        .first()
        .is_none_or(|e| e.start_offset > 0 && e.epoch > 0)
    {
        out.push(EpochEntry {
            epoch: 0,
            start_offset: 0,
        });
    }
    out.extend_from_slice(entries);
    out
}

/// Adds `(epoch, start)` to `entries` (the rule of [`EpochFile::record`]); whether the list
/// changed.
pub fn push_entry(
    entries: &mut Vec<EpochEntry>,
    epoch: u32,
    start: u64,
) -> std::result::Result<bool, String> {
    if let Some(last) = entries.last().copied() {
        if epoch == last.epoch && start == last.start_offset {
            return Ok(false);
        }
        if epoch <= last.epoch || start < last.start_offset {
            return Err(format!(
                "epoch {epoch} from offset {start} does not follow the last epoch {} from {}",
                last.epoch, last.start_offset
            ));
        }
        if start == last.start_offset {
            entries.pop();
        }
    }
    if entries.len() >= EPOCH_ENTRIES_MAX {
        entries.remove(0);
    }
    entries.push(EpochEntry {
        epoch,
        start_offset: start,
    });
    Ok(true)
}

/// The entries of one shard and the file that keeps them.
#[derive(Debug)]
pub struct EpochFile {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl EpochFile {
    /// Loads `epoch.<shard>` under `root` (empty when absent), dropping entries that start
    /// past `log_end` (recorded before a crash that lost the bytes after them).
    pub fn open<D: Disk>(disk: &D, root: &Path, shard: u16, log_end: u64) -> Result<Self> {
        let path = root.join(format!("epoch.{shard}"));
        let tmp = tmp_path(&path);
        if disk.exists(&tmp) {
            // A rewrite that crashed before its rename: the file still holds the old list.
            disk.remove_file(&tmp)
                .map_err(|e| StoreError::io(&tmp, e))?;
        }
        let mut entries = Vec::new();
        if disk.exists(&path) {
            let file = disk
                .open(&path, false)
                .map_err(|e| StoreError::io(&path, e))?;
            let len = disk.file_len(&file).map_err(|e| StoreError::io(&path, e))?;
            if len > EPOCH_FILE_BYTES_MAX as u64 {
                return Err(bad_file(&path, format!("{len} bytes")));
            }
            let mut bytes = vec![0u8; len as usize];
            disk.read_at(&file, 0, &mut bytes)
                .map_err(|e| StoreError::io(&path, e))?;
            entries = decode(&bytes).map_err(|why| bad_file(&path, why))?;
        }
        let mut f = EpochFile { path, entries };
        if f.entries.iter().any(|e| e.start_offset > log_end) {
            f.entries.retain(|e| e.start_offset <= log_end);
            f.write(disk)?;
        }
        Ok(f)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Adds `(epoch, start)`: the epoch must be above the last and start at or after it (an
    /// epoch starting where the last one does held no bytes and is replaced). The same last
    /// entry again is a no-op. Durable when it returns.
    pub fn record<D: Disk>(&mut self, disk: &D, epoch: u32, start: u64) -> Result<()> {
        let before = self.entries.clone();
        match push_entry(&mut self.entries, epoch, start) {
            Ok(true) => self.write(disk).inspect_err(|_| self.entries = before),
            Ok(false) => Ok(()),
            Err(detail) => Err(StoreError::BadBatch { detail }),
        }
    }

    /// Drops the entries starting at or after `end` (the log was cut back to `end`).
    /// Durable when it returns.
    pub fn truncate_from<D: Disk>(&mut self, disk: &D, end: u64) -> Result<()> {
        if self.entries.iter().all(|e| e.start_offset < end) {
            return Ok(());
        }
        let before = self.entries.clone();
        self.entries.retain(|e| e.start_offset < end);
        self.write(disk).inspect_err(|_| self.entries = before)
    }

    /// Rewrites the file: temp file, fdatasync, rename, fsync of the directory.
    fn write<D: Disk>(&self, disk: &D) -> Result<()> {
        let bytes = encode(&self.entries);
        let tmp = tmp_path(&self.path);
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        if disk.exists(&tmp) {
            disk.remove_file(&tmp)
                .map_err(|e| StoreError::io(&tmp, e))?;
        }
        let file = disk.open(&tmp, true).map_err(|e| StoreError::io(&tmp, e))?;
        disk.write_at(&file, 0, &bytes)
            .map_err(|e| StoreError::io(&tmp, e))?;
        disk.sync_data(&file).map_err(|e| StoreError::Fatal {
            context: format!("fdatasync of {}", tmp.display()),
            source: e,
        })?;
        drop(file);
        // The temp file's creation is made durable before it replaces the old one: a rename
        // of a file whose own directory entry could still be lost could leave neither.
        disk.sync_dir(dir).map_err(|e| StoreError::io(dir, e))?;
        disk.rename(&tmp, &self.path)
            .map_err(|e| StoreError::io(&self.path, e))?;
        disk.sync_dir(dir).map_err(|e| StoreError::io(dir, e))
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

fn bad_file(path: &Path, why: String) -> StoreError {
    StoreError::Layout {
        detail: format!("{} is not a valid epoch file: {why}", path.display()),
    }
}

/// The file's bytes for `entries`.
pub fn encode(entries: &[EpochEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(12 + EPOCH_ENTRY_BYTES * entries.len() + 4);
    b.extend_from_slice(&EPOCH_MAGIC.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        b.extend_from_slice(&e.epoch.to_be_bytes());
        b.extend_from_slice(&e.start_offset.to_be_bytes());
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

/// Entries from the file's bytes; why not, when they are not a whole, valid file.
pub fn decode(b: &[u8]) -> std::result::Result<Vec<EpochEntry>, String> {
    let u32_at = |i: usize| {
        b.get(i..i + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    };
    let (Some(magic), Some(version), Some(count)) = (u32_at(0), u32_at(4), u32_at(8)) else {
        return Err(format!("{} bytes, shorter than its header", b.len()));
    };
    if magic != EPOCH_MAGIC || version != 1 {
        return Err(format!("magic {magic:#x} version {version}"));
    }
    let count = count as usize;
    if count > EPOCH_ENTRIES_MAX || b.len() != 12 + EPOCH_ENTRY_BYTES * count + 4 {
        return Err(format!("{count} entries in {} bytes", b.len()));
    }
    let body = b.len() - 4;
    if u32_at(body) != Some(crc32fast::hash(&b[..body])) {
        return Err("crc mismatch".into());
    }
    let mut out: Vec<EpochEntry> = Vec::with_capacity(count);
    for i in 0..count {
        let at = 12 + EPOCH_ENTRY_BYTES * i;
        let mut s = [0u8; 8];
        s.copy_from_slice(&b[at + 4..at + 12]);
        let e = EpochEntry {
            epoch: u32_at(at).unwrap_or(0),
            start_offset: u64::from_be_bytes(s),
        };
        if out
            .last()
            .is_some_and(|p| p.epoch >= e.epoch || p.start_offset >= e.start_offset)
        {
            return Err(format!("entry {i} ({e:?}) does not follow the one before"));
        }
        out.push(e);
    }
    Ok(out)
}

impl<D: Disk + Clone> Store<D> {
    /// This shard's epoch boundaries, oldest first.
    pub fn epochs(&self) -> &[EpochEntry] {
        self.epochs.entries()
    }

    /// The newest epoch recorded, 0 when none.
    pub fn last_epoch(&self) -> u32 {
        self.epochs.entries().last().map_or(0, |e| e.epoch)
    }

    /// This store's master starts writing `epoch` at the current log end: records
    /// `(epoch, write_offset)` durably. A lower epoch than the last is refused; the same
    /// epoch again is a no-op.
    pub fn begin_epoch(&mut self, epoch: u32) -> Result<()> {
        self.check_alive()?;
        let last = self.last_epoch();
        if epoch == last && last > 0 {
            return Ok(());
        }
        if epoch < last || epoch == 0 {
            return Err(StoreError::BadBatch {
                detail: format!("cannot begin epoch {epoch}: this log is at epoch {last}"),
            });
        }
        let at = self.log.write_offset();
        let recorded = self.epochs.record(&self.disk, epoch, at);
        self.poison_if_fatal(recorded)
    }

    /// Records that `epoch` starts at `start` (a slave learning a boundary from its master).
    /// `start` must not lie past this log's end. Durable when it returns.
    pub fn record_epoch_at(&mut self, epoch: u32, start: u64) -> Result<()> {
        self.check_alive()?;
        if start > self.log.write_offset() || epoch == 0 {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "epoch {epoch} from {start}: this log ends at {}",
                    self.log.write_offset()
                ),
            });
        }
        let recorded = self.epochs.record(&self.disk, epoch, start);
        self.poison_if_fatal(recorded)
    }

    fn poison_if_fatal(&mut self, r: Result<()>) -> Result<()> {
        if r.as_ref().is_err_and(StoreError::is_fatal) {
            self.poisoned = true;
        }
        r
    }

    /// The epoch that wrote `offset` (see [`span_at`]).
    pub fn epoch_span_at(&self, offset: u64) -> EpochSpan {
        span_at(self.epochs.entries(), offset)
    }
}
