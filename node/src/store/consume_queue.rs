//! ConsumeQueue: the index of one (topic, queue) into the CommitLog. Unit `n` (the queue
//! offset) sits at byte `n × 20` of the queue's address space, split into files of
//! `units_per_file` units (300,000 by default) named by their first byte offset, 20 digits,
//! under `consumequeue/<topic>/<queue>/`.
//!
//! | field            | bytes | meaning                                   |
//! |------------------|-------|-------------------------------------------|
//! | physical offset  | 8     | where the record starts in the CommitLog  |
//! | size             | 4     | TOTALSIZE of the record                   |
//! | tag hash         | 8     | Java `String.hashCode()` of TAGS, or 0    |
//!
//! Invariants: units in `[min_offset, max_offset)` are valid and their physical offsets grow
//! strictly; the newest of them, up to [`CQ_PENDING_BYTES_MAX`], may be held in memory
//! (`pending`) and not written yet; bytes after the written units in the last file are zero
//! (recovery zeroes stale units), so "first all-zero unit" marks the end. The queue is
//! rebuildable from the CommitLog: units still in memory at a crash are rebuilt by recovery,
//! which re-dispatches every record from the checkpoint on, and a checkpoint writes every
//! pending unit before it claims the queue covers the log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::disk::Disk;
use super::error::{Result, StoreError};

/// Bytes of one ConsumeQueue unit.
pub const CQ_UNIT_BYTES: usize = 20;
/// Units per ConsumeQueue file by default (RocketMQ's 300,000: 6,000,000 bytes).
pub const CQ_UNITS_PER_FILE_DEFAULT: u64 = 300_000;
/// Committed units a queue keeps in memory before it writes them to its files (204 units).
/// Writing each append's units at once would cost a `pwrite` per unbatched send; held back,
/// they are written in one `pwrite` per 204 units or at the next checkpoint, whichever comes
/// first (docs/perf.md, "Syscalls per send").
pub const CQ_PENDING_BYTES_MAX: usize = 4096 / CQ_UNIT_BYTES * CQ_UNIT_BYTES;

const _: () = assert!(CQ_UNIT_BYTES == 8 + 4 + 8);
const _: () = assert!(CQ_UNITS_PER_FILE_DEFAULT * CQ_UNIT_BYTES as u64 == 6_000_000);

/// One decoded unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqUnit {
    pub physical_offset: u64,
    pub size: u32,
    pub tag_hash: i64,
}

impl CqUnit {
    pub fn encode(&self) -> [u8; CQ_UNIT_BYTES] {
        let mut b = [0u8; CQ_UNIT_BYTES];
        b[..8].copy_from_slice(&self.physical_offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..].copy_from_slice(&self.tag_hash.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; CQ_UNIT_BYTES]) -> Self {
        let mut o = [0u8; 8];
        o.copy_from_slice(&b[..8]);
        let mut s = [0u8; 4];
        s.copy_from_slice(&b[8..12]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[12..]);
        CqUnit {
            physical_offset: u64::from_be_bytes(o),
            size: u32::from_be_bytes(s),
            tag_hash: i64::from_be_bytes(t),
        }
    }

    /// An all-zero unit marks the end of the queue.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// One ConsumeQueue and its files.
#[derive(Debug)]
pub struct ConsumeQueue<D: Disk> {
    disk: D,
    dir: PathBuf,
    units_per_file: u64,
    /// First unit index of each file -> the file.
    files: BTreeMap<u64, D::File>,
    min_offset: u64,
    max_offset: u64,
    /// Units staged by an append in progress, starting at `max_offset`.
    staged: Vec<u8>,
    /// Committed units not written to the files yet: the last `pending.len() / 20` below
    /// `max_offset`.
    pending: Vec<u8>,
    /// Files written since the last sync (by first unit index).
    dirty: Vec<u64>,
    /// A file was created since the last sync: the directory needs an fsync too.
    dir_dirty: bool,
}

impl<D: Disk + Clone> ConsumeQueue<D> {
    /// Opens (or creates, empty) the queue in `dir`; finds its end by scanning the last file
    /// for the first all-zero unit.
    pub fn open(disk: &D, dir: &Path, units_per_file: u64) -> Result<Self> {
        disk.create_dir_all(dir)
            .map_err(|e| StoreError::io(dir, e))?;
        let names = disk.list_dir(dir).map_err(|e| StoreError::io(dir, e))?;
        let mut files = BTreeMap::new();
        let file_bytes = units_per_file * CQ_UNIT_BYTES as u64;
        for name in names {
            let Some(byte_offset) = parse_file_name(&name) else {
                continue;
            };
            if byte_offset % file_bytes != 0 {
                return Err(StoreError::Layout {
                    detail: format!(
                        "{}: ConsumeQueue file {name} is not on a {file_bytes}-byte boundary",
                        dir.display()
                    ),
                });
            }
            let path = dir.join(&name);
            let file = disk
                .open(&path, false)
                .map_err(|e| StoreError::io(&path, e))?;
            let len = disk.file_len(&file).map_err(|e| StoreError::io(&path, e))?;
            if len < file_bytes {
                // A crash (or ENOSPC) between creating the file and sizing it. Units are only
                // written into a fully sized file, so this one holds none: drop it rather
                // than allocate on open (the disk may still be full). It is never the queue's
                // only record of its start: a file is added after an earlier, full one, or
                // it is file 0.
                drop(file);
                disk.remove_file(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
                continue;
            }
            files.insert(byte_offset / CQ_UNIT_BYTES as u64, file);
        }
        let mut cq = ConsumeQueue {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            units_per_file,
            min_offset: files.keys().next().copied().unwrap_or(0),
            max_offset: 0,
            files,
            staged: Vec::new(),
            pending: Vec::new(),
            dirty: Vec::new(),
            dir_dirty: false,
        };
        cq.max_offset = cq.scan_end()?;
        if cq.max_offset < cq.min_offset {
            cq.max_offset = cq.min_offset;
        }
        Ok(cq)
    }

    pub fn min_offset(&self) -> u64 {
        self.min_offset
    }

    pub fn max_offset(&self) -> u64 {
        self.max_offset
    }

    /// Offset the next staged unit will get.
    pub fn next_offset(&self) -> u64 {
        self.max_offset + (self.staged.len() / CQ_UNIT_BYTES) as u64
    }

    /// Physical offset of the first unit this queue holds, if any (decides shard ownership).
    pub fn first_physical_offset(&self) -> Result<Option<u64>> {
        if self.max_offset == self.min_offset {
            return Ok(None);
        }
        Ok(Some(self.unit(self.min_offset)?.physical_offset))
    }

    /// Stages one unit for the append in progress and returns its queue offset. Creates the
    /// file that will hold it when needed.
    pub fn stage(&mut self, unit: CqUnit) -> Result<u64> {
        let offset = self.next_offset();
        self.ensure_file(offset)?;
        self.staged.extend_from_slice(&unit.encode());
        Ok(offset)
    }

    /// Makes the staged units part of the queue (the append's log write succeeded). They
    /// are kept in memory until [`Self::pending_full`] or a checkpoint writes them.
    pub fn commit_staged(&mut self) {
        let n = (self.staged.len() / CQ_UNIT_BYTES) as u64;
        self.pending.extend_from_slice(&self.staged);
        self.max_offset += n;
        self.staged.clear();
    }

    /// Enough units are held in memory that they should be written now.
    pub fn pending_full(&self) -> bool {
        self.pending.len() >= CQ_PENDING_BYTES_MAX
    }

    /// First queue offset not yet written to the files.
    fn written_offset(&self) -> u64 {
        self.max_offset - (self.pending.len() / CQ_UNIT_BYTES) as u64
    }

    /// Writes the units held in memory to their files (one `pwrite` per file touched). On
    /// failure they stay in memory and the error is fatal to the store: it can no longer make
    /// the queue durable.
    pub fn write_pending(&mut self) -> Result<()> {
        let mut at = self.written_offset();
        let mut rest = &self.pending[..];
        while !rest.is_empty() {
            let first = at - at % self.units_per_file;
            let room = (first + self.units_per_file - at) as usize * CQ_UNIT_BYTES;
            let n = room.min(rest.len());
            let file = self.files.get(&first).ok_or_else(|| StoreError::NotFound {
                detail: format!(
                    "{}: no ConsumeQueue file for offset {at}",
                    self.dir.display()
                ),
            })?;
            self.disk
                .write_at(file, (at - first) * CQ_UNIT_BYTES as u64, &rest[..n])
                .map_err(|e| StoreError::Fatal {
                    context: format!("writing ConsumeQueue units to {}", self.dir.display()),
                    source: e,
                })?;
            if !self.dirty.contains(&first) {
                self.dirty.push(first);
            }
            at += (n / CQ_UNIT_BYTES) as u64;
            rest = &rest[n..];
        }
        self.pending.clear();
        Ok(())
    }

    /// Forgets the staged units (the append failed).
    pub fn discard_staged(&mut self) {
        self.staged.clear();
    }

    /// Writes `unit` at `offset` directly (recovery re-dispatch); extends the queue if needed.
    pub fn put_at(&mut self, offset: u64, unit: CqUnit) -> Result<()> {
        self.write_pending()?;
        self.ensure_file(offset)?;
        let first = offset - offset % self.units_per_file;
        let file = self.file_of(offset)?;
        let at = (offset - first) * CQ_UNIT_BYTES as u64;
        self.disk
            .write_at(file, at, &unit.encode())
            .map_err(|e| StoreError::io(&self.dir, e))?;
        if !self.dirty.contains(&first) {
            self.dirty.push(first);
        }
        if offset >= self.max_offset {
            self.max_offset = offset + 1;
        }
        if self.files.len() == 1 && self.min_offset > offset {
            self.min_offset = offset;
        }
        Ok(())
    }

    /// Reads unit `offset`, which must be in `[min_offset, max_offset)`.
    pub fn unit(&self, offset: u64) -> Result<CqUnit> {
        let mut buf = [0u8; CQ_UNIT_BYTES];
        self.read_units(offset, &mut buf)?;
        Ok(CqUnit::decode(&buf))
    }

    /// Reads `buf.len() / 20` units starting at `offset` (all inside one file or several,
    /// the newest from memory).
    pub fn read_units(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let written = self.written_offset();
        let from_files = (written.saturating_sub(offset) as usize * CQ_UNIT_BYTES).min(buf.len());
        let (files_part, memory_part) = buf.split_at_mut(from_files);
        if !memory_part.is_empty() {
            let start = (offset.max(written) - written) as usize * CQ_UNIT_BYTES;
            let held = self
                .pending
                .get(start..start + memory_part.len())
                .ok_or_else(|| StoreError::NotFound {
                    detail: format!(
                        "{}: units {offset}.. are past the queue's end {}",
                        self.dir.display(),
                        self.max_offset
                    ),
                })?;
            memory_part.copy_from_slice(held);
        }
        let mut at = offset;
        let mut rest = files_part;
        while !rest.is_empty() {
            let first = at - at % self.units_per_file;
            let room = (first + self.units_per_file - at) as usize * CQ_UNIT_BYTES;
            let n = room.min(rest.len());
            let file = self.file_of(at)?;
            let (now, later) = rest.split_at_mut(n);
            self.disk
                .read_at(file, (at - first) * CQ_UNIT_BYTES as u64, now)
                .map_err(|e| StoreError::io(&self.dir, e))?;
            at += (n / CQ_UNIT_BYTES) as u64;
            rest = later;
        }
        Ok(())
    }

    /// The files written since the last sync, and the directory when a file was created
    /// since (the caller fdatasyncs the files and fsyncs the directory; they are no longer
    /// counted dirty). Units still in memory are not in them: [`Self::write_pending`] first.
    pub fn take_dirty_files(&mut self) -> (Vec<&D::File>, Option<&Path>) {
        let dirty = std::mem::take(&mut self.dirty);
        let dir = std::mem::take(&mut self.dir_dirty).then_some(self.dir.as_path());
        let files = dirty
            .iter()
            .filter_map(|first| self.files.get(first))
            .collect();
        (files, dir)
    }

    /// fdatasyncs every file written since the last sync (and the directory when a file
    /// was created since).
    pub fn sync(&mut self) -> Result<()> {
        self.write_pending()?;
        if std::mem::take(&mut self.dir_dirty) {
            self.disk
                .sync_dir(&self.dir)
                .map_err(|e| StoreError::Fatal {
                    context: format!("fsync of ConsumeQueue directory {}", self.dir.display()),
                    source: e,
                })?;
        }
        for first in std::mem::take(&mut self.dirty) {
            if let Some(file) = self.files.get(&first) {
                self.disk.sync_data(file).map_err(|e| StoreError::Fatal {
                    context: format!("fdatasync of ConsumeQueue {}", self.dir.display()),
                    source: e,
                })?;
            }
        }
        Ok(())
    }

    /// Drops the tail of units a crash can leave behind (called after recovery re-dispatched
    /// every record from the checkpoint on): from the end back to the last unit whose record
    /// ends below `log_end`, dropping empty units on the way, and zeroes them on disk so they
    /// cannot come back. Empty units appear below later ones when files are synced apart: an
    /// unsynced unit of one file is lost while a later file (synced by a failed append's
    /// undo, say) keeps units whose records the crash cut away.
    pub fn truncate_to_log(&mut self, log_end: u64) -> Result<()> {
        self.write_pending()?;
        let mut new_max = self.max_offset;
        while new_max > self.min_offset {
            let u = self.unit(new_max - 1)?;
            if !u.is_empty() && u.physical_offset + u64::from(u.size) <= log_end {
                break;
            }
            new_max -= 1;
        }
        self.zero_from(new_max)?;
        self.max_offset = new_max;
        Ok(())
    }

    /// Deletes files whose every unit points below `log_min` (but never the one holding the
    /// last unit), and moves `min_offset` to the first non-empty unit at or after it.
    pub fn retain_from(&mut self, log_min: u64) -> Result<()> {
        self.write_pending()?;
        while self.files.len() > 1 {
            let Some((&first, _)) = self.files.iter().next() else {
                break;
            };
            let last_unit = first + self.units_per_file - 1;
            // Keep the file holding the queue's last unit even when every unit has expired:
            // it is what tells a reopened store the queue's end and its shard (a queue whose
            // only file holds no unit looks unowned and vanishes at open).
            if last_unit + 1 >= self.max_offset {
                break;
            }
            if self.unit(last_unit)?.physical_offset >= log_min {
                break;
            }
            let path = self.dir.join(file_name(first));
            self.files.remove(&first);
            self.dirty.retain(|&d| d != first);
            self.disk
                .remove_file(&path)
                .map_err(|e| StoreError::io(&path, e))?;
        }
        let mut min = self.files.keys().next().copied().unwrap_or(self.min_offset);
        min = min.max(self.min_offset);
        // Leading empty units are not units: recovery re-dispatching into a queue whose files
        // are gone (a crash during a topic delete) starts writing mid-file.
        while min < self.max_offset {
            let unit = self.unit(min)?;
            if !unit.is_empty() && unit.physical_offset >= log_min {
                break;
            }
            min += 1;
        }
        self.min_offset = min;
        Ok(())
    }

    /// Deletes every file of this queue.
    pub fn remove(self) -> Result<()> {
        self.disk
            .remove_dir_all(&self.dir)
            .map_err(|e| StoreError::io(&self.dir, e))
    }

    /// End of the queue: the first all-zero unit, looking back from the last file (a file
    /// may be empty when truncation emptied it).
    fn scan_end(&self) -> Result<u64> {
        let mut chunk = vec![0u8; 4096 * CQ_UNIT_BYTES];
        for (i, (&first, file)) in self.files.iter().enumerate().rev() {
            let mut n = 0u64;
            'file: while n < self.units_per_file {
                let units = (self.units_per_file - n).min(4096) as usize;
                let buf = &mut chunk[..units * CQ_UNIT_BYTES];
                self.disk
                    .read_at(file, n * CQ_UNIT_BYTES as u64, buf)
                    .map_err(|e| StoreError::io(&self.dir, e))?;
                for unit in buf.chunks_exact(CQ_UNIT_BYTES) {
                    if unit.iter().all(|&b| b == 0) {
                        break 'file;
                    }
                    n += 1;
                }
            }
            if n > 0 || i == 0 {
                return Ok(first + n);
            }
        }
        Ok(0)
    }

    fn zero_from(&mut self, offset: u64) -> Result<()> {
        let starts: Vec<u64> = self.files.range(..).map(|(&k, _)| k).collect();
        for first in starts {
            let end = first + self.units_per_file;
            if end <= offset {
                continue;
            }
            let from = offset.max(first);
            let file = self.file_of(first)?;
            let len = ((end - from) as usize) * CQ_UNIT_BYTES;
            let mut cur = vec![0u8; len];
            self.disk
                .read_at(file, (from - first) * CQ_UNIT_BYTES as u64, &mut cur)
                .map_err(|e| StoreError::io(&self.dir, e))?;
            if let Some(last) = cur.iter().rposition(|&b| b != 0) {
                let zeros = vec![0u8; last + 1];
                self.disk
                    .write_at(file, (from - first) * CQ_UNIT_BYTES as u64, &zeros)
                    .map_err(|e| StoreError::io(&self.dir, e))?;
                if !self.dirty.contains(&first) {
                    self.dirty.push(first);
                }
            }
        }
        Ok(())
    }

    /// Makes a queue that holds nothing start at `offset` (a slave that joined a master whose
    /// older segments were already removed, so its first record of this queue is not offset
    /// 0). The units before `offset` in its file are RocketMQ's pre-blank units (physical
    /// offset 0, size `i32::MAX`), so a reopen finds the same end; they sit below every
    /// retained log offset, so the queue's minimum is `offset`.
    pub fn start_at(&mut self, offset: u64) -> Result<()> {
        if self.max_offset != 0
            || !self.files.is_empty()
            || !self.staged.is_empty()
            || !self.pending.is_empty()
        {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "{}: cannot start at {offset}, the queue is not empty",
                    self.dir.display()
                ),
            });
        }
        self.ensure_file(offset)?;
        let first = offset - offset % self.units_per_file;
        if offset > first {
            let blank = CqUnit {
                physical_offset: 0,
                size: i32::MAX as u32,
                tag_hash: 0,
            }
            .encode();
            let fill: Vec<u8> = (first..offset).flat_map(|_| blank).collect();
            let file = self.file_of(first)?;
            self.disk
                .write_at(file, 0, &fill)
                .map_err(|e| StoreError::io(&self.dir, e))?;
            if !self.dirty.contains(&first) {
                self.dirty.push(first);
            }
        }
        self.max_offset = offset;
        self.min_offset = offset;
        Ok(())
    }

    fn ensure_file(&mut self, offset: u64) -> Result<()> {
        let first = offset - offset % self.units_per_file;
        if self.files.contains_key(&first) {
            return Ok(());
        }
        let path = self.dir.join(file_name(first));
        let file = self
            .disk
            .open(&path, true)
            .map_err(|e| StoreError::io(&path, e))?;
        self.disk
            .set_len(&file, self.units_per_file * CQ_UNIT_BYTES as u64)
            .map_err(|e| StoreError::io(&path, e))?;
        // The directory is fsynced with the next checkpoint, before it claims these units
        // durable (an fsync here would hold the append up behind the log's write-back).
        // Until then a crash may lose the file; recovery rebuilds it from the log.
        self.dir_dirty = true;
        if self.files.is_empty() {
            self.min_offset = first.max(self.min_offset.min(offset));
            if self.max_offset < first {
                self.max_offset = first;
            }
        }
        self.files.insert(first, file);
        Ok(())
    }

    fn file_of(&self, offset: u64) -> Result<&D::File> {
        let first = offset - offset % self.units_per_file;
        self.files.get(&first).ok_or_else(|| StoreError::NotFound {
            detail: format!(
                "{}: no ConsumeQueue file for offset {offset}",
                self.dir.display()
            ),
        })
    }
}

/// 20-digit name of the file whose first unit is `first_unit`.
pub fn file_name(first_unit: u64) -> String {
    format!("{:020}", first_unit * CQ_UNIT_BYTES as u64)
}

fn parse_file_name(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fault_disk::FaultDisk;

    fn unit(p: u64) -> CqUnit {
        CqUnit {
            physical_offset: p,
            size: 10,
            tag_hash: -5,
        }
    }

    fn write_all(cq: &mut ConsumeQueue<FaultDisk>) {
        cq.commit_staged();
        cq.write_pending().unwrap();
    }

    /// Committed units are read back from memory before they are written, from the files
    /// after, and a read may span both; only written units survive a reopen.
    #[test]
    fn pending_units_are_read_from_memory_until_written() {
        let disk = FaultDisk::new();
        let dir = Path::new("/r/consumequeue/T/1");
        let mut cq = ConsumeQueue::open(&disk, dir, 4).unwrap();
        for i in 0..6 {
            cq.stage(unit(i * 10 + 1)).unwrap();
        }
        write_all(&mut cq);
        for i in 6..9 {
            cq.stage(unit(i * 10 + 1)).unwrap();
        }
        cq.commit_staged();
        assert_eq!(cq.max_offset(), 9);
        assert!(!cq.pending_full());
        // Units 4..9: 4 and 5 from the second file, 6 and 7 in memory (second file's
        // place), 8 in memory (third file's place).
        let mut buf = vec![0u8; 5 * CQ_UNIT_BYTES];
        cq.read_units(4, &mut buf).unwrap();
        let got: Vec<CqUnit> = buf
            .chunks_exact(CQ_UNIT_BYTES)
            .map(|c| CqUnit::decode(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, (4..9).map(|i| unit(i * 10 + 1)).collect::<Vec<_>>());
        assert_eq!(cq.unit(8).unwrap(), unit(81));
        let mut past = vec![0u8; 2 * CQ_UNIT_BYTES];
        assert!(
            cq.read_units(8, &mut past).is_err(),
            "unit 9 does not exist"
        );
        // Not written yet: a reopen (a crash) sees the written 6; recovery rebuilds the rest.
        let reopened = ConsumeQueue::open(&disk, dir, 4).unwrap();
        assert_eq!(reopened.max_offset(), 6);
        cq.write_pending().unwrap();
        let reopened = ConsumeQueue::open(&disk, dir, 4).unwrap();
        assert_eq!(reopened.max_offset(), 9);
        assert_eq!(reopened.unit(8).unwrap(), unit(81));
        // A full buffer asks to be written.
        for i in 9..9 + (CQ_PENDING_BYTES_MAX / CQ_UNIT_BYTES) as u64 {
            cq.stage(unit(i * 10 + 1)).unwrap();
        }
        cq.commit_staged();
        assert!(cq.pending_full());
    }

    #[test]
    fn stage_commit_read_across_files_and_reopen() {
        let disk = FaultDisk::new();
        let dir = Path::new("/r/consumequeue/T/0");
        let mut cq = ConsumeQueue::open(&disk, dir, 4).unwrap();
        for i in 0..10 {
            assert_eq!(cq.stage(unit(i * 10)).unwrap(), i);
        }
        write_all(&mut cq);
        assert_eq!(cq.max_offset(), 10);
        assert_eq!(cq.unit(7).unwrap(), unit(70));
        let mut buf = vec![0u8; 6 * CQ_UNIT_BYTES];
        cq.read_units(2, &mut buf).unwrap();
        assert_eq!(CqUnit::decode(buf[100..120].try_into().unwrap()), unit(70));
        let names = disk.list_dir(dir).unwrap();
        assert_eq!(names.len(), 3);
        assert!(names.contains(&"00000000000000000080".to_string()));
        let cq2 = ConsumeQueue::open(&disk, dir, 4).unwrap();
        assert_eq!((cq2.min_offset(), cq2.max_offset()), (0, 10));
    }

    #[test]
    fn truncate_and_retain() {
        let disk = FaultDisk::new();
        let dir = Path::new("/r/cq");
        let mut cq = ConsumeQueue::open(&disk, dir, 4).unwrap();
        for i in 0..10 {
            cq.stage(unit(i * 10)).unwrap();
        }
        write_all(&mut cq);
        cq.truncate_to_log(65).unwrap();
        assert_eq!(cq.max_offset(), 6);
        let reopened = ConsumeQueue::open(&disk, dir, 4).unwrap();
        assert_eq!(
            reopened.max_offset(),
            6,
            "truncated units are zeroed on disk"
        );
        cq.retain_from(45).unwrap();
        assert_eq!(cq.min_offset(), 5);
        assert_eq!(disk.list_dir(dir).unwrap().len(), 2, "first file removed");
    }
}
