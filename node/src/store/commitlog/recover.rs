//! Recovery scan of a CommitLog: from a start offset, walk records and BLANKs, hand each valid
//! record to the caller (to rebuild ConsumeQueues), and find the end of valid data.
//!
//! The end is the first place where the bytes are zero (never written), or where an entry
//! fails its checks ([`has_intact_end`] included). A failed entry below `durable` (bytes
//! that were fdatasync'd before the crash) cannot be a torn write: it is corruption,
//! reported with its offset, and nothing is truncated. Above `durable` it is a torn tail:
//! the log is cut there and the bytes after it are zeroed, so stale records can never
//! reappear after later appends.

use ringmq_wire::record::{self, Entry, RecordView, BLANK_BYTES, BLANK_MAGIC};

use super::{segment_name, CommitLog};
use crate::store::disk::Disk;
use crate::store::error::{Result, StoreError};

/// Chunk used when zeroing a torn tail.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

/// Whether a decoded record's end survived: BODYCRC covers only the body, so a write torn
/// inside the topic or properties still decodes, its missing tail reading as the zeros the
/// segment was pre-written with. Records are only ever written onto zeros, so a record whose
/// last non-zero byte is where it should be was not torn (a tear that only drops trailing
/// zeros loses nothing). The last byte of a non-empty property list is the 0x02 separator;
/// with no properties the record ends with its topic and the zero PROPLEN. The append path
/// refuses records that break this (an empty topic, a NUL in the topic, properties ending in
/// a zero byte), so a stored record failing it is torn.
pub fn has_intact_end(rec: &RecordView<'_>) -> bool {
    let topic = rec.topic.as_bytes();
    !topic.is_empty() && !topic.contains(&0) && rec.properties.last() != Some(&0)
}

/// What the scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanOutcome {
    /// End of valid data: the new write offset.
    pub end: u64,
    /// Records handed to the caller.
    pub records: u64,
    /// Why the scan stopped, when it stopped at a bad entry (a torn tail).
    pub torn: Option<String>,
}

impl<D: Disk + Clone> CommitLog<D> {
    /// Scans from `from` (a record boundary), calling `each` for every valid record, and
    /// sets the write offset to the end of valid data. Truncates a torn tail above
    /// `durable`; reports corruption below it. `clean`: the store was closed cleanly, so
    /// when the scan ends at zeros the bytes after the end are zero (the append path keeps
    /// them so, see `Store::write_or_undo`) and the tail segment is not read through to
    /// check it (up to a whole segment: 0.8 s per GiB from the page cache on the test VM).
    pub fn recover<F>(
        &mut self,
        from: u64,
        durable: u64,
        clean: bool,
        mut each: F,
    ) -> Result<ScanOutcome>
    where
        F: FnMut(&RecordView<'_>) -> Result<()>,
    {
        let mut pos = from.max(self.min_offset());
        let mut records = 0;
        let mut buf = Vec::new();
        let torn = loop {
            if self.segments.is_empty() || pos >= self.min_offset() + self.disk_bytes() {
                break None;
            }
            let seg_end = self.segment_end(pos);
            let room = seg_end - pos;
            if room < BLANK_BYTES as u64 {
                break Some(format!("{room} bytes before the segment end at {pos}"));
            }
            let mut head = [0u8; BLANK_BYTES];
            self.write_offset = seg_end; // allow reading this segment while scanning
            self.read(pos, &mut head)?;
            let (size, magic) = record::peek_header(&head).unwrap_or((0, 0));
            if size == 0 && magic == 0 {
                break None;
            }
            if magic == BLANK_MAGIC {
                if u64::from(size) != room {
                    break Some(format!("BLANK of {size} bytes at {pos}, {room} left"));
                }
                pos = seg_end;
                continue;
            }
            let size = size as usize;
            if !(record::RECORD_BYTES_MIN..=record::RECORD_BYTES_MAX).contains(&size)
                || size as u64 + BLANK_BYTES as u64 > room
            {
                break Some(format!("bad TOTALSIZE {size} at {pos}"));
            }
            buf.resize(size, 0);
            self.read(pos, &mut buf)?;
            let rec = match record::decode(&buf) {
                Ok(Entry::Record(r)) => r,
                Ok(Entry::Blank { .. }) => {
                    break Some(format!("BLANK where a record was expected at {pos}"))
                }
                Err(e) => break Some(format!("record at {pos}: {e}")),
            };
            if !has_intact_end(&rec) {
                break Some(format!("record at {pos} ends in zeros (torn write)"));
            }
            if rec.physical_offset != pos {
                break Some(format!(
                    "record at {pos} claims physical offset {}",
                    rec.physical_offset
                ));
            }
            each(&rec)?;
            records += 1;
            pos += size as u64;
        };
        if let Some(why) = &torn {
            if pos < durable {
                self.write_offset = pos;
                return Err(StoreError::Corrupt {
                    offset: pos,
                    durable,
                    detail: why.clone(),
                });
            }
        }
        self.cut_at(pos, !(clean && torn.is_none()))?;
        Ok(ScanOutcome {
            end: pos,
            records,
            torn,
        })
    }

    /// Makes `end` the end of the log: zeroes the rest of its segment where it is not zero
    /// already, removes later segments, syncs. Afterwards everything below `end` is durable.
    pub(super) fn truncate_at(&mut self, end: u64) -> Result<()> {
        self.cut_at(end, true)
    }

    /// `truncate_at`, reading the rest of the tail segment to zero it only when
    /// `zero_tail` (otherwise the caller knows it is zero). Without `zero_tail` (a clean
    /// close whose scan ended at zeros) the segments after the end's were prepared and
    /// never written, so they are kept: a restart does not prepare them again (with
    /// `warmMapedFileEnable`, 1 GiB of zeros each).
    fn cut_at(&mut self, end: u64, zero_tail: bool) -> Result<()> {
        let seg_end = self.segment_end(end);
        if zero_tail {
            self.zero_from(end, seg_end)?;
        } else if let Some(last) = self.segments.back().filter(|s| s.start >= seg_end) {
            self.next_prepared = self.next_prepared.max(last.start);
        }
        let mut removed = false;
        while zero_tail && self.segments.back().is_some_and(|s| s.start >= seg_end) {
            if let Some(last) = self.segments.pop_back() {
                let path = self.dir.join(segment_name(last.start));
                self.disk
                    .remove_file(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
                removed = true;
            }
        }
        if removed {
            self.disk
                .sync_dir(&self.dir)
                .map_err(|e| StoreError::io(&self.dir, e))?;
        }
        self.write_offset = end;
        self.truncations += 1;
        self.cache_released = self.cache_released.min(end);
        // Everything read back is in the page cache, maybe not on disk yet (a kill -9 leaves
        // dirty pages). Force it, and the zeroing, down before anything new is acknowledged
        // on top of it. Syncing a clean file costs next to nothing.
        for seg in &self.segments {
            self.disk
                .sync_data(&seg.file)
                .map_err(|e| StoreError::Fatal {
                    context: format!("fdatasync of segment {:020} during recovery", seg.start),
                    source: e,
                })?;
        }
        self.synced_offset = end;
        Ok(())
    }

    /// Overwrites the non-zero 1 MiB chunks of `end..seg_end` (the rest of a segment) with
    /// zeros.
    fn zero_from(&mut self, end: u64, seg_end: u64) -> Result<()> {
        // Let the zeroing pass read the whole tail segment.
        self.write_offset = self.min_offset() + self.disk_bytes();
        let mut at = end;
        let mut chunk = vec![0u8; ZERO_CHUNK_BYTES];
        while at < seg_end && self.segment_for(at).is_ok() {
            let n = ((seg_end - at) as usize).min(ZERO_CHUNK_BYTES);
            self.read(at, &mut chunk[..n])?;
            if chunk[..n].iter().any(|&b| b != 0) {
                chunk[..n].fill(0);
                let (file, off) = self.locate(at)?;
                self.disk
                    .write_at(file, off, &chunk[..n])
                    .map_err(|e| StoreError::io(self.dir.join(segment_name(at)), e))?;
            }
            at += n as u64;
        }
        Ok(())
    }
}
