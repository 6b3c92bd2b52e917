//! The key index of one shard: RocketMQ's IndexFile layout, so query by key (`KEYS` tokens
//! and `UNIQ_KEY`) finds records without a scan. Files live in `index/<shard>/`, named by the
//! 20-digit physical offset of the first record they index.
//!
//! | part    | bytes            | content                                                        |
//! |---------|------------------|----------------------------------------------------------------|
//! | header  | 40               | beginTimestamp 8, endTimestamp 8, beginPhyOffset 8, endPhyOffset 8, hashSlotCount 4, indexCount 4 |
//! | slots   | slots × 4        | index number (1-based) of the newest entry in the bucket, 0 = empty |
//! | entries | max × 20         | keyHash 4, phyOffset 8, timeDiff 4 (s since beginTimestamp), prevIndex 4 |
//!
//! The key is `topic#key`, hashed with Java's `String.hashCode()` (absolute value); the
//! bucket is `hash % slots`. Entries chain backwards through `prevIndex`. The index is built
//! behind the log (like RocketMQ's dispatch), is rebuildable from it, and is only a hint:
//! a query reads every candidate record and keeps those whose topic and key really match,
//! so hash collisions and entries left behind by a truncated log are harmless.

use std::path::{Path, PathBuf};

use super::disk::Disk;
use super::error::{Result, StoreError};

pub const INDEX_HEADER_BYTES: u64 = 40;
pub const INDEX_SLOT_BYTES: u64 = 4;
pub const INDEX_ENTRY_BYTES: u64 = 20;

const _: () = assert!(INDEX_HEADER_BYTES == 8 + 8 + 8 + 8 + 4 + 4);
const _: () = assert!(INDEX_ENTRY_BYTES == 4 + 8 + 4 + 4);

/// Java `String.hashCode()` of `topic#key`, made non-negative as RocketMQ does.
pub fn key_hash(topic: &str, key: &str) -> u32 {
    let mut h: i32 = 0;
    for unit in topic
        .encode_utf16()
        .chain("#".encode_utf16())
        .chain(key.encode_utf16())
    {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    h.unsigned_abs()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Header {
    begin_ts: i64,
    end_ts: i64,
    begin_phys: u64,
    end_phys: u64,
    slot_count: u32,
    index_count: u32,
}

impl Header {
    fn encode(&self) -> [u8; INDEX_HEADER_BYTES as usize] {
        let mut b = [0u8; INDEX_HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&self.begin_ts.to_be_bytes());
        b[8..16].copy_from_slice(&self.end_ts.to_be_bytes());
        b[16..24].copy_from_slice(&self.begin_phys.to_be_bytes());
        b[24..32].copy_from_slice(&self.end_phys.to_be_bytes());
        b[32..36].copy_from_slice(&self.slot_count.to_be_bytes());
        b[36..40].copy_from_slice(&self.index_count.to_be_bytes());
        b
    }

    fn decode(b: &[u8; INDEX_HEADER_BYTES as usize]) -> Self {
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Header {
            begin_ts: u64_at(0) as i64,
            end_ts: u64_at(8) as i64,
            begin_phys: u64_at(16),
            end_phys: u64_at(24),
            slot_count: u32_at(32),
            index_count: u32_at(36),
        }
    }
}

#[derive(Debug)]
struct IndexFile<F> {
    file: F,
    header: Header,
    dirty: bool,
}

/// The key index of one shard.
#[derive(Debug)]
pub struct KeyIndex<D: Disk> {
    disk: D,
    dir: PathBuf,
    slots: u32,
    max_entries: u32,
    files: Vec<IndexFile<D::File>>,
    /// How far the log was read while no index file exists yet (records without keys):
    /// in memory only, so a restart reads them again, once.
    end_without_files: u64,
    /// The last file's slot table and unwritten entries (see [`Active`]); `None` until the
    /// first put after an open or a truncation.
    active: Option<Active>,
}

/// What the last index file has in memory: its whole slot table, which pages of it changed
/// since they were last written, and the entries put since the last [`KeyIndex::commit`].
/// A put costs no system call: entries go to the file once per indexing step (one
/// contiguous write), changed slot pages once per flush (before the header that counts
/// them), where one write per key per slot used to be two `pwrite`s per key.
#[derive(Debug)]
struct Active {
    slots: Vec<u32>,
    /// One flag per [`SLOT_PAGE_SLOTS`] slots.
    dirty_pages: Vec<bool>,
    /// Encoded entries not yet written, the first numbered `pending_first`.
    pending: Vec<u8>,
    pending_first: u32,
}

/// Slots per 4 KiB page of the slot table: the unit in which changed slots are written.
const SLOT_PAGE_SLOTS: usize = 1024;

impl Active {
    fn new(slots: Vec<u32>) -> Self {
        Active {
            dirty_pages: vec![false; slots.len().div_ceil(SLOT_PAGE_SLOTS)],
            slots,
            pending: Vec::new(),
            pending_first: 0,
        }
    }

    /// Entry `n` if it is still pending.
    fn pending_entry(&self, n: u32) -> Option<&[u8]> {
        let i = n.checked_sub(self.pending_first)? as usize * INDEX_ENTRY_BYTES as usize;
        self.pending.get(i..i + INDEX_ENTRY_BYTES as usize)
    }
}

impl<D: Disk + Clone> KeyIndex<D> {
    /// Opens the index files in `dir` (created when missing).
    pub fn open(disk: &D, dir: &Path, slots: u32, max_entries: u32) -> Result<Self> {
        disk.create_dir_all(dir)
            .map_err(|e| StoreError::io(dir, e))?;
        let mut names: Vec<String> = disk
            .list_dir(dir)
            .map_err(|e| StoreError::io(dir, e))?
            .into_iter()
            .filter(|n| n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        names.sort();
        let mut files = Vec::new();
        for name in names {
            let path = dir.join(&name);
            let file = disk
                .open(&path, false)
                .map_err(|e| StoreError::io(&path, e))?;
            let len = disk.file_len(&file).map_err(|e| StoreError::io(&path, e))?;
            if len < file_bytes(slots, max_entries) {
                // Another slot/entry configuration, or torn at creation: rebuilt from the log.
                drop(file);
                disk.remove_file(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
                continue;
            }
            let mut head = [0u8; INDEX_HEADER_BYTES as usize];
            disk.read_at(&file, 0, &mut head)
                .map_err(|e| StoreError::io(&path, e))?;
            files.push(IndexFile {
                file,
                header: Header::decode(&head),
                dirty: false,
            });
        }
        Ok(KeyIndex {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            slots: slots.max(1),
            max_entries: max_entries.max(1),
            files,
            end_without_files: 0,
            active: None,
        })
    }

    /// The log is indexed below this physical offset (0 = nothing yet).
    pub fn end_offset(&self) -> u64 {
        self.files
            .last()
            .map_or(self.end_without_files, |f| f.header.end_phys)
    }

    /// Indexes `key` of `topic` for the record at `phys` that ends at `record_end`, stored
    /// at `store_ts_ms`.
    pub fn put(
        &mut self,
        topic: &str,
        key: &str,
        phys: u64,
        record_end: u64,
        store_ts_ms: i64,
    ) -> Result<()> {
        let full = self
            .files
            .last()
            .is_none_or(|f| f.header.index_count >= self.max_entries);
        if full {
            self.new_file(phys, store_ts_ms)?;
        }
        self.load_active()?;
        let slots = self.slots;
        let (Some(f), Some(a)) = (self.files.last_mut(), self.active.as_mut()) else {
            return Ok(());
        };
        let hash = key_hash(topic, key);
        let slot = (hash % slots) as usize;
        let prev = a.slots[slot];
        let n = f.header.index_count.max(1);
        let time_diff = ((store_ts_ms - f.header.begin_ts).max(0) / 1000) as u32;
        if a.pending.is_empty() {
            a.pending_first = n;
        }
        a.pending.extend_from_slice(&hash.to_be_bytes());
        a.pending.extend_from_slice(&phys.to_be_bytes());
        a.pending.extend_from_slice(&time_diff.to_be_bytes());
        a.pending.extend_from_slice(&prev.to_be_bytes());
        a.slots[slot] = n;
        a.dirty_pages[slot / SLOT_PAGE_SLOTS] = true;
        if prev == 0 {
            f.header.slot_count += 1;
        }
        f.header.index_count = n + 1;
        f.header.end_ts = f.header.end_ts.max(store_ts_ms);
        f.header.end_phys = f.header.end_phys.max(record_end);
        f.dirty = true;
        Ok(())
    }

    /// Reads the last file's slot table into memory, once (a new file's is all zeros).
    fn load_active(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Ok(());
        }
        let Some(f) = self.files.last() else {
            return Ok(());
        };
        let n = self.slots as usize;
        let mut raw = vec![0u8; n * INDEX_SLOT_BYTES as usize];
        self.disk
            .read_at(&f.file, INDEX_HEADER_BYTES, &mut raw)
            .map_err(|e| StoreError::io(&self.dir, e))?;
        let slots = raw
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        self.active = Some(Active::new(slots));
        Ok(())
    }

    /// Writes the entries put since the last call, in one write. The indexing step calls
    /// it when it is done, so queries read every entry from the file.
    pub fn commit(&mut self) -> Result<()> {
        let (Some(f), Some(a)) = (self.files.last(), self.active.as_mut()) else {
            return Ok(());
        };
        if a.pending.is_empty() {
            return Ok(());
        }
        let at = INDEX_HEADER_BYTES
            + u64::from(self.slots) * INDEX_SLOT_BYTES
            + u64::from(a.pending_first) * INDEX_ENTRY_BYTES;
        self.disk
            .write_at(&f.file, at, &a.pending)
            .map_err(|e| StoreError::io(&self.dir, e))?;
        a.pending.clear();
        Ok(())
    }

    /// Writes the pending entries, then every changed page of the last file's slot table
    /// (consecutive pages in one write): the header written after them counts nothing that
    /// is not in the file.
    fn write_slots(&mut self) -> Result<()> {
        self.commit()?;
        let (Some(f), Some(a)) = (self.files.last(), self.active.as_mut()) else {
            return Ok(());
        };
        let mut page = 0;
        while page < a.dirty_pages.len() {
            if !a.dirty_pages[page] {
                page += 1;
                continue;
            }
            let first = page;
            while page < a.dirty_pages.len() && a.dirty_pages[page] {
                a.dirty_pages[page] = false;
                page += 1;
            }
            let from = first * SLOT_PAGE_SLOTS;
            let to = (page * SLOT_PAGE_SLOTS).min(a.slots.len());
            let bytes: Vec<u8> = a.slots[from..to]
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect();
            let at = INDEX_HEADER_BYTES + from as u64 * INDEX_SLOT_BYTES;
            self.disk
                .write_at(&f.file, at, &bytes)
                .map_err(|e| StoreError::io(&self.dir, e))?;
        }
        Ok(())
    }

    /// Marks the log indexed through `end` (records without keys advance it too).
    pub fn advance(&mut self, end: u64) {
        match self.files.last_mut() {
            Some(f) if end > f.header.end_phys => {
                f.header.end_phys = end;
                f.dirty = true;
            }
            Some(_) => {}
            None => self.end_without_files = self.end_without_files.max(end),
        }
    }

    /// Physical offsets of candidate records for `topic#key` stored within
    /// `[begin_ts, end_ts]` and starting below `log_end`, newest first, at most `max`.
    /// Entries at or past `log_end` are skipped: they name records of a log since cut back
    /// (until [`Self::truncate`] drops them) and must not crowd out real ones.
    pub fn candidates(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        (begin_ts, end_ts): (i64, i64),
        log_end: u64,
    ) -> Result<Vec<u64>> {
        let hash = key_hash(topic, key);
        let mut out = Vec::new();
        let last = self.files.len().saturating_sub(1);
        for (i, f) in self.files.iter().enumerate().rev() {
            let active = self.active.as_ref().filter(|_| i == last);
            if out.len() >= max {
                break;
            }
            if f.header.index_count == 0 || f.header.end_ts < begin_ts || f.header.begin_ts > end_ts
            {
                continue;
            }
            let mut n = match active {
                Some(a) => a.slots[(hash % self.slots) as usize],
                None => {
                    let slot_at =
                        INDEX_HEADER_BYTES + u64::from(hash % self.slots) * INDEX_SLOT_BYTES;
                    let mut slot = [0u8; 4];
                    self.disk
                        .read_at(&f.file, slot_at, &mut slot)
                        .map_err(|e| StoreError::io(&self.dir, e))?;
                    u32::from_be_bytes(slot)
                }
            };
            let mut steps = 0u32;
            while n != 0 && n < f.header.index_count && out.len() < max && steps <= self.max_entries
            {
                steps += 1;
                let at = INDEX_HEADER_BYTES
                    + u64::from(self.slots) * INDEX_SLOT_BYTES
                    + u64::from(n) * INDEX_ENTRY_BYTES;
                let mut e = [0u8; INDEX_ENTRY_BYTES as usize];
                match active.and_then(|a| a.pending_entry(n)) {
                    Some(bytes) => e.copy_from_slice(bytes),
                    None => self
                        .disk
                        .read_at(&f.file, at, &mut e)
                        .map_err(|err| StoreError::io(&self.dir, err))?,
                }
                let h = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
                let mut p = [0u8; 8];
                p.copy_from_slice(&e[4..12]);
                let diff = i64::from(u32::from_be_bytes([e[12], e[13], e[14], e[15]]));
                let prev = u32::from_be_bytes([e[16], e[17], e[18], e[19]]);
                let ts = f.header.begin_ts + diff * 1000;
                // Second resolution: widen the window by one second on each side.
                let phys = u64::from_be_bytes(p);
                if h == hash
                    && phys < log_end
                    && ts + 1000 >= begin_ts
                    && ts <= end_ts.saturating_add(1000)
                {
                    out.push(phys);
                }
                if prev >= n {
                    break;
                }
                n = prev;
            }
        }
        out.dedup();
        Ok(out)
    }

    /// Forgets everything indexed at or past `end` (the log was truncated there): whole
    /// files that begin past it go; the rest is re-indexed from `end` (stale entries are
    /// filtered by every query).
    pub fn truncate(&mut self, end: u64) -> Result<()> {
        while self
            .files
            .last()
            .is_some_and(|f| f.header.begin_phys >= end && f.header.index_count > 0)
        {
            if let Some(f) = self.files.pop() {
                self.active = None;
                let path = self.dir.join(format!("{:020}", f.header.begin_phys));
                drop(f);
                self.disk
                    .remove_file(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
            }
        }
        if let Some(f) = self.files.last_mut() {
            if f.header.end_phys > end {
                f.header.end_phys = end;
                f.dirty = true;
            }
        }
        self.end_without_files = self.end_without_files.min(end);
        Ok(())
    }

    /// Writes the headers that changed and fdatasyncs their files.
    pub fn flush(&mut self) -> Result<()> {
        let (disk, dir) = (self.disk.clone(), self.dir.clone());
        for f in self.write_headers()? {
            disk.sync_data(f).map_err(|e| StoreError::io(&dir, e))?;
        }
        Ok(())
    }

    /// [`Self::flush`] for a caller that fdatasyncs without blocking: writes the header of
    /// every file changed since the last flush and returns those files, for the caller to
    /// fdatasync. They count as flushed from here on (the index is rebuilt from the log
    /// after a crash, so a failed fdatasync loses nothing but time).
    pub fn write_headers(&mut self) -> Result<Vec<&D::File>> {
        self.write_slots()?;
        let mut out = Vec::new();
        for f in self.files.iter_mut().filter(|f| f.dirty) {
            self.disk
                .write_at(&f.file, 0, &f.header.encode())
                .map_err(|e| StoreError::io(&self.dir, e))?;
            f.dirty = false;
            out.push(&f.file);
        }
        Ok(out)
    }

    fn new_file(&mut self, phys: u64, store_ts_ms: i64) -> Result<()> {
        self.flush()?;
        let path = self.dir.join(format!("{phys:020}"));
        let file = self
            .disk
            .open(&path, true)
            .map_err(|e| StoreError::io(&path, e))?;
        self.disk
            .set_len_sparse(&file, file_bytes(self.slots, self.max_entries))
            .map_err(|e| StoreError::io(&path, e))?;
        let header = Header {
            begin_ts: store_ts_ms,
            end_ts: store_ts_ms,
            begin_phys: phys,
            end_phys: phys,
            slot_count: 0,
            index_count: 1,
        };
        self.disk
            .write_at(&file, 0, &header.encode())
            .map_err(|e| StoreError::io(&path, e))?;
        self.disk
            .sync_dir(&self.dir)
            .map_err(|e| StoreError::io(&self.dir, e))?;
        self.files.push(IndexFile {
            file,
            header,
            dirty: true,
        });
        self.active = Some(Active::new(vec![0; self.slots as usize]));
        Ok(())
    }
}

fn file_bytes(slots: u32, max_entries: u32) -> u64 {
    INDEX_HEADER_BYTES
        + u64::from(slots) * INDEX_SLOT_BYTES
        + (u64::from(max_entries) + 1) * INDEX_ENTRY_BYTES
}

/// Most records indexed by one [`index_pending`] call.
pub const INDEX_BATCH_RECORDS_MAX: usize = 10_000;

/// Indexes the records appended since the index's end (at most `max_records`); returns how
/// many it read. Keys are the space-separated `KEYS` tokens and `UNIQ_KEY`.
pub fn index_pending<D: Disk + Clone>(
    store: &super::Store<D>,
    index: &mut KeyIndex<D>,
    max_records: usize,
) -> Result<usize> {
    use ringmq_wire::properties::keys;
    use ringmq_wire::record;
    let end = store.write_offset();
    let seg = store.config().segment_bytes;
    let mut pos = index.end_offset().max(store.min_offset());
    if pos > end {
        index.truncate(end)?;
        pos = index.end_offset().max(store.min_offset());
    }
    let mut n = 0;
    let mut buf = Vec::new();
    while pos < end && n < max_records {
        let mut head = [0u8; record::BLANK_BYTES];
        store.read(pos, &mut head)?;
        let (size, magic) = record::peek_header(&head).unwrap_or((0, 0));
        if magic == record::BLANK_MAGIC || size == 0 {
            pos = pos - pos % seg + seg;
            index.advance(pos.min(end));
            continue;
        }
        if !(record::RECORD_BYTES_MIN..=record::RECORD_BYTES_MAX).contains(&(size as usize)) {
            return Err(StoreError::NotFound {
                detail: format!("no record at physical offset {pos}"),
            });
        }
        buf.resize(size as usize, 0);
        store.read(pos, &mut buf)?;
        // Below the write offset of this process's own log: checked when it was appended
        // (or recovered), so the body's CRC is not computed again.
        let rec = record::decode_one_unverified(&buf).map_err(|e| StoreError::NotFound {
            detail: format!("record at {pos}: {e}"),
        })?;
        if rec.physical_offset != pos {
            return Err(StoreError::NotFound {
                detail: format!("no record starts at physical offset {pos}"),
            });
        }
        let next = pos + rec.len() as u64;
        if let Some(ks) = rec.property(keys::KEYS) {
            for k in ks.split(' ').filter(|k| !k.is_empty()) {
                index.put(rec.topic, k, pos, next, rec.store_timestamp_ms)?;
            }
        }
        if let Some(u) = rec.property(keys::UNIQ_KEY) {
            index.put(rec.topic, u, pos, next, rec.store_timestamp_ms)?;
        }
        index.advance(next);
        pos = next;
        n += 1;
    }
    index.commit()?;
    Ok(n)
}

/// Records of `topic` whose `KEYS` or `UNIQ_KEY` is `key`, stored within
/// `[begin_ts, end_ts]`, newest first, at most `max` (each candidate is read and checked).
/// Only records that end at or below `visible_end` (and the log end) count: a master's
/// confirmOffset caps what readers see.
#[allow(clippy::too_many_arguments)]
pub fn query_by_key<D: Disk + Clone>(
    store: &super::Store<D>,
    index: &KeyIndex<D>,
    topic: &str,
    key: &str,
    max: usize,
    begin_ts: i64,
    end_ts: i64,
    visible_end: u64,
) -> Result<Vec<Vec<u8>>> {
    use ringmq_wire::properties::keys;
    use ringmq_wire::record;
    let mut out = Vec::new();
    let visible_end = visible_end.min(store.write_offset());
    let wanted = max.saturating_mul(4).max(16);
    for phys in index.candidates(topic, key, wanted, (begin_ts, end_ts), visible_end)? {
        if out.len() >= max {
            break;
        }
        let Ok(bytes) = store.read_record(phys) else {
            continue;
        };
        if phys + bytes.len() as u64 > visible_end {
            continue;
        }
        let Ok(rec) = record::decode_one(&bytes) else {
            continue;
        };
        let matches = rec.topic == topic
            && (rec.property(keys::UNIQ_KEY) == Some(key)
                || rec
                    .property(keys::KEYS)
                    .is_some_and(|ks| ks.split(' ').any(|k| k == key)))
            && rec.store_timestamp_ms >= begin_ts
            && rec.store_timestamp_ms <= end_ts;
        if matches {
            out.push(bytes);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fault_disk::FaultDisk;

    #[test]
    fn query_by_key_over_a_store() {
        use ringmq_wire::{properties, record};
        let disk = FaultDisk::new();
        let mut store =
            crate::store::Store::open(disk.clone(), crate::store::tests::small_config("/s"))
                .unwrap();
        for i in 0..30u32 {
            let mut props = Vec::new();
            let keys = format!("order-{} cust-{}", i, i % 3);
            let uniq = format!("U{i}");
            properties::encode(
                [("KEYS", keys.as_str()), ("UNIQ_KEY", uniq.as_str())],
                &mut props,
            )
            .unwrap();
            let body = vec![b'x'; 300];
            let msg = record::Message {
                topic: if i % 5 == 0 { "Other" } else { "T" },
                queue_id: i % 2,
                flag: 0,
                sys_flag: 0,
                born_timestamp_ms: 1,
                born_host: "127.0.0.1:1".parse().unwrap(),
                store_host_v6: false,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: &body,
                properties: &props,
            };
            let mut buf = Vec::new();
            record::encode(&msg, &mut buf).unwrap();
            store
                .append(&mut buf, 10_000 + i64::from(i) * 1000)
                .unwrap();
        }
        let mut idx = KeyIndex::open(&disk, Path::new("/s/index/0"), 11, 8).unwrap();
        assert_eq!(index_pending(&store, &mut idx, 10).unwrap(), 10);
        assert_eq!(index_pending(&store, &mut idx, 1000).unwrap(), 20);
        assert_eq!(idx.end_offset(), store.write_offset());
        let found = query_by_key(&store, &idx, "T", "cust-1", 100, 0, i64::MAX, u64::MAX).unwrap();
        let expected = (0..30).filter(|i| i % 3 == 1 && i % 5 != 0).count();
        assert_eq!(found.len(), expected);
        assert_eq!(
            query_by_key(&store, &idx, "T", "U7", 10, 0, i64::MAX, u64::MAX)
                .unwrap()
                .len(),
            1
        );
        assert!(
            query_by_key(&store, &idx, "T", "U5", 10, 0, i64::MAX, u64::MAX)
                .unwrap()
                .is_empty(),
            "U5 is in topic Other"
        );
        assert_eq!(
            query_by_key(&store, &idx, "T", "cust-1", 100, 20_000, 25_000, u64::MAX)
                .unwrap()
                .len(),
            1
        );
    }

    fn append_keyed(store: &mut crate::store::Store<FaultDisk>, key: &str, n: usize) -> Vec<u64> {
        use ringmq_wire::{properties, record};
        let mut at = Vec::new();
        for _ in 0..n {
            let mut props = Vec::new();
            properties::encode([("KEYS", key)], &mut props).unwrap();
            let msg = record::Message {
                topic: "T",
                queue_id: 0,
                flag: 0,
                sys_flag: 0,
                born_timestamp_ms: 1,
                born_host: "127.0.0.1:1".parse().unwrap(),
                store_host_v6: false,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: b"body",
                properties: &props,
            };
            let mut buf = Vec::new();
            record::encode(&msg, &mut buf).unwrap();
            at.push(store.append(&mut buf, 5_000).unwrap().records[0].physical_offset);
        }
        at
    }

    /// After the log is cut back (a replica past its consistent point), a query never
    /// returns a record that was cut, nor one past the reader's cap; once the index is cut
    /// too, the records that replace the cut ones are found.
    #[test]
    fn queries_skip_what_was_truncated_and_what_is_capped() {
        let disk = FaultDisk::new();
        let cfg = crate::store::tests::small_config("/s");
        let mut store = crate::store::Store::open(disk.clone(), cfg).unwrap();
        let old = append_keyed(&mut store, "k", 10);
        let mut idx = KeyIndex::open(&disk, Path::new("/s/index/0"), 11, 64).unwrap();
        index_pending(&store, &mut idx, 1000).unwrap();
        let all = |store: &crate::store::Store<FaultDisk>, idx: &KeyIndex<FaultDisk>, key, cap| {
            let found = query_by_key(store, idx, "T", key, 100, 0, i64::MAX, cap).unwrap();
            let mut at: Vec<u64> = found
                .iter()
                .map(|b| record::decode_one(b).unwrap().physical_offset)
                .collect();
            at.sort();
            at
        };
        use ringmq_wire::record;
        let cut = old[5];
        store.truncate_to(cut).unwrap();
        // The index has not caught up with the truncation yet.
        assert!(idx.end_offset() > cut);
        assert_eq!(all(&store, &idx, "k", u64::MAX), old[..5].to_vec());
        assert!(idx
            .candidates("T", "k", 100, (0, i64::MAX), store.write_offset())
            .unwrap()
            .iter()
            .all(|&p| p < cut));
        // New records take the cut offsets.
        idx.truncate(cut).unwrap();
        let new = append_keyed(&mut store, "k2", 5);
        assert_eq!(new[0], cut);
        index_pending(&store, &mut idx, 1000).unwrap();
        assert_eq!(all(&store, &idx, "k", u64::MAX), old[..5].to_vec());
        assert_eq!(all(&store, &idx, "k2", u64::MAX), new);
        // A cap that ends after the third old record.
        assert_eq!(all(&store, &idx, "k", old[3]), old[..3].to_vec());
        assert_eq!(all(&store, &idx, "k2", new[2]), new[..2].to_vec());
    }

    #[test]
    fn java_hash_of_topic_and_key() {
        // "T#k".hashCode() = ((84 * 31) + 35) * 31 + 107
        assert_eq!(key_hash("T", "k"), ((84 * 31 + 35) * 31 + 107) as u32);
    }

    #[test]
    fn put_query_roll_reopen_truncate() {
        let disk = FaultDisk::new();
        let dir = Path::new("/r/index/0");
        let mut idx = KeyIndex::open(&disk, dir, 7, 5).unwrap();
        for i in 0..12u64 {
            let key = if i % 2 == 0 { "even" } else { "odd" };
            idx.put(
                "T",
                key,
                i * 100,
                i * 100 + 100,
                1_000_000 + i as i64 * 1000,
            )
            .unwrap();
        }
        idx.flush().unwrap();
        let even = idx
            .candidates("T", "even", 100, (0, i64::MAX), u64::MAX)
            .unwrap();
        for p in [0, 200, 400, 600, 800, 1000] {
            assert!(even.contains(&p), "{p} in {even:?}");
        }
        assert!(
            idx.candidates("T", "even", 2, (0, i64::MAX), u64::MAX)
                .unwrap()
                .len()
                <= 2
        );
        assert_eq!(idx.end_offset(), 1200);
        let reopened = KeyIndex::open(&disk, dir, 7, 5).unwrap();
        assert_eq!(reopened.end_offset(), 1200);
        assert_eq!(
            reopened
                .candidates("T", "odd", 100, (0, i64::MAX), u64::MAX)
                .unwrap()
                .len(),
            6
        );
        let mut idx = reopened;
        idx.truncate(650).unwrap();
        assert!(idx.end_offset() <= 650);
        let late = idx
            .candidates("T", "even", 100, (1_011_000, i64::MAX), u64::MAX)
            .unwrap();
        assert!(late.iter().all(|&p| !(650..1000).contains(&p)));
    }
}
