//! The seam between the store and the operating system. The store does every file operation
//! through `Disk`; `crate::io::disk::RealDisk` implements it with io_uring writes and mmap
//! reads, `super::fault_disk::FaultDisk` with in-memory files that can fail, lose unsynced
//! bytes or tear the last write (a test tool).
//!
//! Durability contract: bytes given to `write_at` may be lost until a later `sync_data` of the
//! same file returns Ok. A failed `sync_data` means the bytes may be lost forever (the store
//! treats it as fatal). File creation, removal and `set_len` are durable once
//! `sync_dir` of the parent returns.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Space on the file system that holds a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceInfo {
    pub total_bytes: u64,
    pub free_bytes: u64,
}

impl SpaceInfo {
    /// Fraction of the file system in use, 0.0..=1.0.
    pub fn used_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            return 1.0;
        }
        1.0 - self.free_bytes as f64 / self.total_bytes as f64
    }
}

/// The log's write offset, published by the appending shard for its segment preparer.
#[derive(Debug, Clone, Default)]
pub struct FillGauge(Arc<AtomicU64>);

impl FillGauge {
    pub fn set(&self, write_offset: u64) {
        self.0.store(write_offset, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// How fast a segment may be pre-written: in step with the filling of the segment before it,
/// so the zeros go to disk spread over that segment's life instead of in one burst that
/// competes with the appenders' fdatasyncs (a 1 GiB burst took 2-5 s on the test VM and cut
/// SYNC_FLUSH throughput by about half meanwhile: docs/perf.md).
#[derive(Debug, Clone)]
pub struct Pace {
    /// The log's write offset.
    pub gauge: FillGauge,
    /// Where the prepared segment starts: the log needs it when it gets there.
    pub needed_at: u64,
}

impl Pace {
    /// For a segment needed at once (nothing to pace by).
    pub fn now(start: u64) -> Pace {
        let gauge = FillGauge::default();
        gauge.set(start);
        Pace {
            gauge,
            needed_at: start,
        }
    }

    /// Bytes of a `len`-byte segment that may be pre-written by now: enough to be done when
    /// the segment before it is half full (a margin for a producer that speeds up), plus a
    /// lead of 1/16 of a segment. A segment needed now (the log is at or past `needed_at`) may
    /// be written in full.
    pub fn allowance(&self, len: u64) -> u64 {
        let at = self.gauge.get();
        if at >= self.needed_at {
            return len;
        }
        let filled = at.saturating_sub(self.needed_at.saturating_sub(len));
        filled.saturating_mul(2).saturating_add(len / 16).min(len)
    }
}

/// One positioned write, for submitting several writes at once.
#[derive(Debug)]
pub struct WriteOp<'a, F> {
    pub file: &'a F,
    pub offset: u64,
    pub data: &'a [u8],
}

/// File operations the store needs. All calls are synchronous from the store's point of view.
pub trait Disk {
    /// An open file.
    type File;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir` (files and directories), unsorted.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    /// Opens an existing file, or creates an empty one when `create` is set.
    fn open(&self, path: &Path, create: bool) -> io::Result<Self::File>;
    fn file_len(&self, file: &Self::File) -> io::Result<u64>;
    /// Sets the length; growing allocates real blocks (fallocate) so later writes inside the
    /// file cannot fail for lack of space.
    fn set_len(&self, file: &Self::File, len: u64) -> io::Result<()>;
    /// Sets the length without allocating blocks (a sparse file: the key index is large and
    /// mostly empty).
    fn set_len_sparse(&self, file: &Self::File, len: u64) -> io::Result<()> {
        self.set_len(file, len)
    }
    fn write_at(&self, file: &Self::File, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Several writes submitted together (one io_uring submission on the real disk).
    fn write_all(&self, ops: &[WriteOp<'_, Self::File>]) -> io::Result<()> {
        for op in ops {
            self.write_at(op.file, op.offset, op.data)?;
        }
        Ok(())
    }
    fn sync_data(&self, file: &Self::File) -> io::Result<()>;
    /// Fills `buf` from `offset`; the range must lie inside the file.
    fn read_at(&self, file: &Self::File, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn space(&self, dir: &Path) -> io::Result<SpaceInfo>;
    /// Starts making `path` a file of `len` bytes, allocated and pre-written with zeros, off
    /// the caller's path where the implementation can (a background thread on the real disk),
    /// no faster than `pace` allows.
    fn prepare(&self, path: &Path, len: u64, pace: Pace);
    /// Returns the file `prepare` made (waiting for it if needed, and lifting its pace), or
    /// makes it now. Its creation is durable (the parent directory was fsynced after it)
    /// when this returns.
    fn take_prepared(&self, path: &Path, len: u64) -> io::Result<Self::File>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(at: u64, needed_at: u64) -> Pace {
        let gauge = FillGauge::default();
        gauge.set(at);
        Pace { gauge, needed_at }
    }

    #[test]
    fn allowance_keeps_a_preparation_in_step_with_the_segment_before() {
        let len = 1 << 30;
        let next = 5 * len;
        // The segment before it just started: only the lead.
        assert_eq!(pace(4 * len, next).allowance(len), len / 16);
        // A quarter full: half of the new one, plus the lead.
        assert_eq!(
            pace(4 * len + len / 4, next).allowance(len),
            len / 2 + len / 16
        );
        // From about 47 % full on, all of it (done by half full at the latest).
        assert_eq!(pace(4 * len + len / 2, next).allowance(len), len);
        assert_eq!(pace(5 * len - 1, next).allowance(len), len);
    }

    #[test]
    fn a_segment_needed_now_is_not_paced() {
        let len = 1 << 20;
        assert_eq!(pace(0, 0).allowance(len), len);
        assert_eq!(pace(3 * len, 3 * len).allowance(len), len);
        assert_eq!(pace(9 * len, 3 * len).allowance(len), len);
    }

    #[test]
    fn the_gauge_is_shared_by_clones() {
        let p = pace(0, 1 << 20);
        let g = p.gauge.clone();
        assert_eq!(p.allowance(1 << 20), 1 << 16);
        g.set(1 << 20);
        assert_eq!(p.allowance(1 << 20), 1 << 20);
    }
}
