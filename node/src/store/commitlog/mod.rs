//! The CommitLog of one shard: fixed-size segment files under `commitlog/<shard>/`, named by
//! the 20-digit physical offset of their first byte, preallocated and pre-written with zeros
//! before use (the next one is prepared while the current one fills).
//!
//! Invariants:
//! - Physical offsets of shard `s` start at `s << SHARD_OFFSET_BITS`, so they are unique per
//!   broker and a message id names its shard.
//! - A record never spans two segments. When a record (plus room for a BLANK) does not fit,
//!   the rest of the segment becomes one BLANK entry and the record starts the next segment.
//! - Bytes in `[min_offset, write_offset)` are records and BLANKs; bytes after `write_offset`
//!   in the active segment are zero. Nobody reads at or past `write_offset`.
//! - `synced_offset <= write_offset`, and everything below `synced_offset` was fdatasync'd.

pub mod cache;
pub mod recover;
pub mod replica;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use ringmq_wire::record::{self, BLANK_BYTES};

use super::disk::{Disk, WriteOp};
use super::error::{Result, StoreError};

/// Bits of a physical offset below the shard id.
pub const SHARD_OFFSET_BITS: u32 = 48;
/// Default segment size, RocketMQ's 1 GiB.
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
/// Smallest segment size accepted (tests use a few KiB-MiB).
pub const SEGMENT_BYTES_MIN: u64 = 4096;

const _: () = assert!(SEGMENT_BYTES_DEFAULT < 1 << SHARD_OFFSET_BITS);

/// First physical offset of a shard.
pub fn shard_base(shard: u16) -> u64 {
    u64::from(shard) << SHARD_OFFSET_BITS
}

/// Shard that owns a physical offset.
pub fn shard_of_offset(physical_offset: u64) -> u16 {
    (physical_offset >> SHARD_OFFSET_BITS) as u16
}

/// One segment file.
#[derive(Debug)]
pub struct Segment<F> {
    pub start: u64,
    pub file: F,
}

/// Where a record was placed by [`CommitLog::place`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub physical_offset: u64,
    /// A BLANK written at this offset (end of the previous segment) before the record.
    pub blank_at: Option<u64>,
}

/// Most zeros [`CommitLog::prewrite_step`] writes per call: bounds how long a request that
/// arrives meanwhile waits for the shard (~20 µs).
pub const PREWRITE_STEP_BYTES: usize = 256 << 10;
/// Fewest zeros a step writes (unless the distance is smaller): small appends (unbatched
/// sends) then pay for a step once every few dozen requests, not each time.
pub const PREWRITE_STEP_MIN_BYTES: u64 = 64 << 10;
static PREWRITE_ZEROS: [u8; PREWRITE_STEP_BYTES] = [0; PREWRITE_STEP_BYTES];

/// State to roll back to when an append fails after placing records.
#[derive(Debug, Clone, Copy)]
pub struct SavePoint {
    write_offset: u64,
}

/// The CommitLog of one shard.
#[derive(Debug)]
pub struct CommitLog<D: Disk> {
    disk: D,
    dir: PathBuf,
    segment_bytes: u64,
    base: u64,
    segments: VecDeque<Segment<D::File>>,
    write_offset: u64,
    synced_offset: u64,
    /// Start of the next segment already asked for (see `prepare_when_half_full`).
    next_prepared: u64,
    /// Durable bytes kept in memory behind `synced_offset`; older ones are released (see
    /// [`cache`]). 0 = release nothing.
    cache_keep_bytes: u64,
    /// Bytes below this offset were released.
    cache_released: u64,
    /// Times the log was cut back ([`Self::truncations`]).
    truncations: u64,
    /// The stretches of released bytes asked to be read back and not released again
    /// (start, end), one per reader position seen lately, most recent last (see
    /// [`Self::read_ahead`]).
    read_ahead_ends: std::cell::RefCell<Vec<cache::ReadAheadWindow>>,
    /// How far ahead of the write offset zeros are written (see [`Self::write_ahead`]);
    /// 0 = not at all.
    prewrite_bytes: u64,
    /// Zeros were asked for up to this offset.
    prewritten_to: u64,
}

/// Whether a segment file of `len` bytes starts with a record (a non-zero TOTALSIZE): the
/// store appends from a segment's start, so one that does not holds none.
fn holds_a_record<D: Disk>(disk: &D, file: &D::File, len: u64) -> std::io::Result<bool> {
    if len < 4 {
        return Ok(false);
    }
    let mut head = [0u8; 4];
    disk.read_at(file, 0, &mut head)?;
    Ok(head != [0u8; 4])
}

impl<D: Disk + Clone> CommitLog<D> {
    /// Opens the segments in `dir` (no recovery: see [`recover`]). `write_offset` starts at
    /// the first segment's start until recovery sets it.
    pub fn open(disk: &D, dir: &Path, shard: u16, segment_bytes: u64) -> Result<Self> {
        if !(SEGMENT_BYTES_MIN..1 << SHARD_OFFSET_BITS).contains(&segment_bytes) {
            return Err(StoreError::Layout {
                detail: format!(
                    "segment size {segment_bytes} bytes is outside {SEGMENT_BYTES_MIN}..2^{SHARD_OFFSET_BITS}"
                ),
            });
        }
        disk.create_dir_all(dir)
            .map_err(|e| StoreError::io(dir, e))?;
        let base = shard_base(shard);
        let mut starts = Vec::new();
        for name in disk.list_dir(dir).map_err(|e| StoreError::io(dir, e))? {
            if let Some(start) = parse_segment_name(&name) {
                starts.push(start);
            }
        }
        starts.sort_unstable();
        let mut segments = VecDeque::new();
        for (i, &start) in starts.iter().enumerate() {
            let misplaced = start < base
                || (start - base) % segment_bytes != 0
                || shard_of_offset(start) != shard;
            let gap = i > 0 && start != starts[i - 1] + segment_bytes;
            if misplaced || gap {
                return Err(StoreError::Layout {
                    detail: format!(
                        "{}: segment {start:020} does not follow a {segment_bytes}-byte layout for shard {shard} (was the segment size changed?)",
                        dir.display()
                    ),
                });
            }
            let path = dir.join(segment_name(start));
            let file = disk
                .open(&path, false)
                .map_err(|e| StoreError::io(&path, e))?;
            let len = disk.file_len(&file).map_err(|e| StoreError::io(&path, e))?;
            if len < segment_bytes && i + 1 == starts.len() {
                // A crash (or ENOSPC) while the next segment was being prepared. The store
                // writes only into fully prepared segments, so it holds nothing: remove it
                // instead of allocating on open, which fails while the disk is still full.
                // One that starts with a record is a segment of a smaller size (the
                // operator changed `mappedFileSizeCommitLog`): refused, never removed.
                if holds_a_record(disk, &file, len).map_err(|e| StoreError::io(&path, e))? {
                    return Err(StoreError::Layout {
                        detail: format!(
                            "{}: {len} bytes holding records, expected {segment_bytes} (was the segment size changed? set mappedFileSizeCommitLog back to the size the log was written with)",
                            path.display()
                        ),
                    });
                }
                drop(file);
                disk.remove_file(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
                disk.sync_dir(dir).map_err(|e| StoreError::io(dir, e))?;
                break;
            } else if len < segment_bytes {
                // Cannot come from the store (a later segment exists, so this one was
                // prepared): finish preparing it.
                disk.set_len(&file, segment_bytes)
                    .map_err(|e| StoreError::io(&path, e))?;
            } else if len > segment_bytes {
                return Err(StoreError::Layout {
                    detail: format!(
                        "{}: {len} bytes, expected {segment_bytes} (was the segment size changed?)",
                        path.display()
                    ),
                });
            }
            segments.push_back(Segment { start, file });
        }
        let first = segments.front().map_or(base, |s| s.start);
        Ok(CommitLog {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            segment_bytes,
            base,
            segments,
            write_offset: first,
            synced_offset: first,
            next_prepared: 0,
            cache_keep_bytes: 0,
            cache_released: first,
            truncations: 0,
            read_ahead_ends: std::cell::RefCell::default(),
            prewrite_bytes: 0,
            prewritten_to: first,
        })
    }

    /// Zeros written up to `bytes` ahead of the appends (`commitLogPrewriteBytes`); 0 = off.
    pub fn set_prewrite_bytes(&mut self, bytes: u64) {
        self.prewrite_bytes = bytes;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many times the log was cut back (recovery of a torn tail, a slave's truncation).
    /// Log bytes below the durable end never change otherwise, so a copy of them read while
    /// this count had the value it has now is still what the log holds.
    pub fn truncations(&self) -> u64 {
        self.truncations
    }

    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// First retained physical offset.
    pub fn min_offset(&self) -> u64 {
        self.segments.front().map_or(self.base, |s| s.start)
    }

    /// Next physical offset to be written (the end of the log).
    pub fn write_offset(&self) -> u64 {
        self.write_offset
    }

    pub fn synced_offset(&self) -> u64 {
        self.synced_offset
    }

    pub fn segments(&self) -> &VecDeque<Segment<D::File>> {
        &self.segments
    }

    /// Bytes of log files on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.segments.len() as u64 * self.segment_bytes
    }

    pub fn save_point(&self) -> SavePoint {
        SavePoint {
            write_offset: self.write_offset,
        }
    }

    /// Undoes placements made after `sp` (their bytes were never acknowledged).
    pub fn restore(&mut self, sp: SavePoint) {
        self.write_offset = sp.write_offset;
    }

    /// Reserves `len` bytes for a record, rolling to a new segment (after a BLANK) when the
    /// record plus a BLANK's room does not fit in the active one.
    pub fn place(&mut self, len: usize) -> Result<Placement> {
        let len = len as u64;
        if len + BLANK_BYTES as u64 > self.segment_bytes {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "record of {len} bytes does not fit a {}-byte segment",
                    self.segment_bytes
                ),
            });
        }
        self.open_active_segment()?;
        let seg_end = self.segment_end(self.write_offset);
        let mut blank_at = None;
        if self.write_offset + len + BLANK_BYTES as u64 > seg_end {
            blank_at = Some(self.write_offset);
            if self.segments.back().map(|s| s.start) < Some(seg_end) {
                self.add_segment(seg_end)?;
            }
            self.write_offset = seg_end;
        }
        let physical_offset = self.write_offset;
        self.write_offset += len;
        self.prepare_when_half_full();
        Ok(Placement {
            physical_offset,
            blank_at,
        })
    }

    /// Write operations for `bytes` placed contiguously at `physical_offset` (one segment).
    pub fn write_op<'a>(
        &'a self,
        physical_offset: u64,
        bytes: &'a [u8],
    ) -> Result<WriteOp<'a, D::File>> {
        let seg = self.segment_for(physical_offset)?;
        Ok(WriteOp {
            file: &seg.file,
            offset: physical_offset - seg.start,
            data: bytes,
        })
    }

    /// The BLANK header that fills the segment from `at` to its end.
    pub fn blank_bytes(&self, at: u64) -> [u8; BLANK_BYTES] {
        let mut b = [0u8; BLANK_BYTES];
        let len = (self.segment_end(at) - at) as usize;
        record::encode_blank(len, &mut b)
            .expect("a BLANK is only placed with at least 8 bytes of room");
        b
    }

    /// fdatasyncs every segment holding bytes in `[synced_offset, write_offset)`. A failure
    /// is fatal: the caller must stop the store.
    pub fn sync(&mut self) -> Result<u64> {
        let target = self.write_offset;
        if target == self.synced_offset {
            return Ok(target);
        }
        for seg in &self.segments {
            let seg_end = seg.start + self.segment_bytes;
            if seg_end <= self.synced_offset || seg.start >= target {
                continue;
            }
            self.disk
                .sync_data(&seg.file)
                .map_err(|e| StoreError::Fatal {
                    context: format!("fdatasync of segment {:020}", seg.start),
                    source: e,
                })?;
        }
        self.synced_offset = target;
        self.release_cache();
        Ok(target)
    }

    /// Copies `buf.len()` bytes at `physical_offset` (inside one segment, below the write
    /// offset) into `buf`.
    pub fn read(&self, physical_offset: u64, buf: &mut [u8]) -> Result<()> {
        let (seg, at) = self.span(physical_offset, buf.len())?;
        self.disk
            .read_at(&seg.file, at, buf)
            .map_err(|e| StoreError::io(self.dir.join(segment_name(seg.start)), e))
    }

    /// Appends `len` bytes at `physical_offset` (as [`CommitLog::read`]) to `out`.
    pub fn read_append(&self, physical_offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        let (seg, at) = self.span(physical_offset, len)?;
        self.disk
            .read_append(&seg.file, at, len, out)
            .map_err(|e| StoreError::io(self.dir.join(segment_name(seg.start)), e))
    }

    /// `len` bytes at `physical_offset` without a copy ([`Disk::read_shared`]); `None` when
    /// the disk has no view of them or they are not all in one segment below the write
    /// offset (the caller reads a copy, which reports why).
    pub fn read_shared(&self, physical_offset: u64, len: usize) -> Option<bytes::Bytes> {
        let (seg, at) = self.span(physical_offset, len).ok()?;
        self.disk.read_shared(&seg.file, at, len)
    }

    /// The segment holding `len` bytes at `physical_offset` and their offset in its file;
    /// NotFound outside the log or across a segment end.
    fn span(&self, physical_offset: u64, len: usize) -> Result<(&Segment<D::File>, u64)> {
        let end = physical_offset + len as u64;
        if physical_offset < self.min_offset() || end > self.write_offset {
            return Err(StoreError::NotFound {
                detail: format!(
                    "bytes {physical_offset}..{end} are outside the log {}..{}",
                    self.min_offset(),
                    self.write_offset
                ),
            });
        }
        let seg = self.segment_for(physical_offset)?;
        if end > seg.start + self.segment_bytes {
            return Err(StoreError::NotFound {
                detail: format!("bytes {physical_offset}..{end} cross a segment end"),
            });
        }
        Ok((seg, physical_offset - seg.start))
    }

    /// Whether `len` bytes at `physical_offset` are in memory (see [`Disk::resident`]);
    /// `true` for a range outside the log or across a segment end, which a read refuses.
    pub fn resident(&self, physical_offset: u64, len: u64) -> bool {
        match self.segment_for(physical_offset) {
            Ok(seg) => self
                .disk
                .resident(&seg.file, physical_offset - seg.start, len),
            Err(_) => true,
        }
    }

    /// How many bytes one [`CommitLog::read`] can take from `physical_offset`: up to the end
    /// of its segment or the write offset, whichever comes first.
    pub fn contiguous_from(&self, physical_offset: u64) -> Result<u64> {
        let seg = self.segment_for(physical_offset)?;
        let end = (seg.start + self.segment_bytes).min(self.write_offset);
        Ok(end.saturating_sub(physical_offset))
    }

    /// Reads and validates the record at `physical_offset`.
    pub fn read_record(&self, physical_offset: u64) -> Result<Vec<u8>> {
        let mut head = [0u8; BLANK_BYTES];
        self.read(physical_offset, &mut head)?;
        let (size, _magic) = record::peek_header(&head).unwrap_or((0, 0));
        let size = size as usize;
        if !(record::RECORD_BYTES_MIN..=record::RECORD_BYTES_MAX).contains(&size) {
            return Err(StoreError::NotFound {
                detail: format!("no record at physical offset {physical_offset}"),
            });
        }
        let mut buf = vec![0u8; size];
        self.read(physical_offset, &mut buf)?;
        let rec = record::decode_one(&buf).map_err(|e| StoreError::NotFound {
            detail: format!("no valid record at physical offset {physical_offset}: {e}"),
        })?;
        if rec.physical_offset != physical_offset {
            return Err(StoreError::NotFound {
                detail: format!("no record starts at physical offset {physical_offset}"),
            });
        }
        Ok(buf)
    }

    /// The segment holding `physical_offset` and the offset inside its file (for zero-copy
    /// sends of record runs).
    pub fn locate(&self, physical_offset: u64) -> Result<(&D::File, u64)> {
        let seg = self.segment_for(physical_offset)?;
        Ok((&seg.file, physical_offset - seg.start))
    }

    /// Removes the oldest segment (retention). Never the one being written.
    pub fn remove_oldest(&mut self) -> Result<Option<u64>> {
        if self.segments.len() < 2 {
            return Ok(None);
        }
        let active_start = self.segment_start(self.write_offset);
        let Some(front) = self.segments.front() else {
            return Ok(None);
        };
        if front.start >= active_start {
            return Ok(None);
        }
        let start = front.start;
        let path = self.dir.join(segment_name(start));
        self.disk
            .remove_file(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        self.segments.pop_front();
        self.disk
            .sync_dir(&self.dir)
            .map_err(|e| StoreError::io(&self.dir, e))?;
        Ok(Some(start))
    }

    pub fn segment_start(&self, physical_offset: u64) -> u64 {
        physical_offset - (physical_offset - self.base) % self.segment_bytes
    }

    pub fn segment_end(&self, physical_offset: u64) -> u64 {
        self.segment_start(physical_offset) + self.segment_bytes
    }

    fn segment_for(&self, physical_offset: u64) -> Result<&Segment<D::File>> {
        let first = self.min_offset();
        if physical_offset < first {
            return Err(StoreError::NotFound {
                detail: format!("physical offset {physical_offset} is below the log start {first}"),
            });
        }
        let idx = ((physical_offset - first) / self.segment_bytes) as usize;
        self.segments.get(idx).ok_or_else(|| StoreError::NotFound {
            detail: format!("no segment holds physical offset {physical_offset}"),
        })
    }

    fn add_segment(&mut self, start: u64) -> Result<()> {
        let path = self.dir.join(segment_name(start));
        let file = self
            .disk
            .take_prepared(&path, self.segment_bytes)
            .map_err(|e| StoreError::io(&path, e))?;
        // take_prepared's file is already durable in the directory (the preparer fsynced it
        // off this thread: here it would wait behind the log's write-back).
        self.segments.push_back(Segment { start, file });
        // Prepare the next one now: preparing (allocate, pre-write, write back) takes about
        // as long as filling a segment at full speed, so waiting until half full made fast
        // producers stall at rolls (docs/perf.md).
        let next = start + self.segment_bytes;
        if self.next_prepared < next {
            self.next_prepared = next;
            self.disk
                .prepare(&self.dir.join(segment_name(next)), self.segment_bytes);
        }
        Ok(())
    }

    /// Whether [`Self::prewrite_step`] has zeros to write.
    pub fn prewrite_pending(&self) -> bool {
        self.prewrite_bytes > 0
            && self.prewrite_target().saturating_sub(self.prewrite_from())
                >= PREWRITE_STEP_MIN_BYTES.min(self.prewrite_bytes)
            && self.segment_for(self.write_offset).is_ok()
    }

    /// Writes zeros after the write offset, at most [`PREWRITE_STEP_BYTES`] per call, until
    /// `prewrite_bytes` past it (inside the active segment) hold zeros. The shard's loop calls
    /// it when it has nothing else to do (`crate::io::rt::set_idle_work`), so the appends that
    /// follow land in page-cache pages that are already allocated and dirty: the append's
    /// `pwrite` is then mostly its copy (docs/perf.md, "Zeros ahead of the append"). The bytes
    /// are what the fallocated segment reads as anyway, and only this thread writes the log,
    /// so zeros never land on appended bytes. A failed write turns it off and is returned.
    pub fn prewrite_step(&mut self) -> Result<()> {
        if !self.prewrite_pending() {
            return Ok(());
        }
        let from = self.prewrite_from();
        let to = self
            .prewrite_target()
            .min(from + PREWRITE_STEP_BYTES as u64);
        if to <= from {
            return Ok(());
        }
        let Ok(seg) = self.segment_for(from) else {
            return Ok(());
        };
        let written = self.disk.write_at(
            &seg.file,
            from - seg.start,
            &PREWRITE_ZEROS[..(to - from) as usize],
        );
        if let Err(e) = written {
            let path = self.dir.join(segment_name(seg.start));
            self.prewrite_bytes = 0;
            return Err(StoreError::io(path, e));
        }
        self.prewritten_to = to;
        Ok(())
    }

    /// Where the next zeros go: after those already written, unless the write offset passed
    /// them or moved back out of their segment (a truncation).
    fn prewrite_from(&self) -> u64 {
        let end = self.segment_end(self.write_offset);
        if (self.write_offset..=end).contains(&self.prewritten_to) {
            self.prewritten_to
        } else {
            self.write_offset
        }
    }

    /// Where zeros should reach: `prewrite_bytes` past the write offset, not past its segment.
    fn prewrite_target(&self) -> u64 {
        (self.write_offset + self.prewrite_bytes).min(self.segment_end(self.write_offset))
    }

    /// Once the active segment is half full, starts preparing the next one (off the append
    /// path), so it is ready when needed without holding two idle segments per shard.
    fn prepare_when_half_full(&mut self) {
        let start = self.segment_start(self.write_offset);
        let next = start + self.segment_bytes;
        if self.next_prepared < next && self.write_offset - start >= self.segment_bytes / 2 {
            self.next_prepared = next;
            self.disk
                .prepare(&self.dir.join(segment_name(next)), self.segment_bytes);
        }
    }

    /// Adds the segment the next append writes when it does not exist yet, waiting for its
    /// preparation. Returns whether it had to.
    pub fn open_active_segment(&mut self) -> Result<bool> {
        let Some(start) = self.missing_active_segment() else {
            return Ok(false);
        };
        self.add_segment(start)?;
        Ok(true)
    }

    /// Start of the segment the next append writes, when it is not open yet.
    fn missing_active_segment(&self) -> Option<u64> {
        let current = self.segment_start(self.write_offset);
        self.segments
            .back()
            .is_none_or(|s| s.start < current)
            .then_some(current)
    }

    /// Starts preparing the segment that the next append will write when it does not exist
    /// yet, and the one after it when the active one is already half full (called after open).
    pub fn prepare_next(&mut self) {
        if let Some(start) = self.missing_active_segment() {
            self.disk
                .prepare(&self.dir.join(segment_name(start)), self.segment_bytes);
        }
        self.prepare_when_half_full();
    }
}

/// 20-digit file name of the segment starting at `start`.
pub fn segment_name(start: u64) -> String {
    format!("{start:020}")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}
