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
    /// Appends `len` bytes of `file` from `offset` to `out`, as [`Self::read_at`] into new
    /// room at its end (left as it was on an error). The real disk copies from its mapping
    /// without zeroing the room first.
    fn read_append(
        &self,
        file: &Self::File,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let start = out.len();
        out.resize(start + len, 0);
        let res = self.read_at(file, offset, &mut out[start..]);
        if res.is_err() {
            out.truncate(start);
        }
        res
    }
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn space(&self, dir: &Path) -> io::Result<SpaceInfo>;
    /// Starts making `path` a file of `len` bytes, allocated and pre-written with zeros, off
    /// the caller's path where the implementation can (a background thread on the real disk).
    fn prepare(&self, path: &Path, len: u64);
    /// Returns the file `prepare` made (waiting for it if needed), or makes it now. Its
    /// creation is durable (the parent directory was fsynced after it) when this returns.
    fn take_prepared(&self, path: &Path, len: u64) -> io::Result<Self::File>;
    /// Advice: `len` bytes of `file` from `offset`, already durable, are not needed in memory
    /// soon; their pages may be released (the real disk drops them from the page cache, off
    /// the caller's thread where it can). Contents are unchanged and later reads still see
    /// them. Best effort: nothing to report, and a disk without a cache does nothing.
    fn release_cache(&self, _file: &Self::File, _offset: u64, _len: u64) {}
    /// Advice: `len` bytes of `file` from `offset` will be read soon; the real disk starts
    /// reading them into the page cache off the caller's thread. Best effort, as
    /// [`Self::release_cache`].
    fn read_ahead(&self, _file: &Self::File, _offset: u64, _len: u64) {}
    /// Whether a read of `len` bytes of `file` from `offset` would be served from memory
    /// without waiting for the device (the real disk: every page of the range is in the page
    /// cache). `true` when the disk cannot tell, or has no cache.
    fn resident(&self, _file: &Self::File, _offset: u64, _len: u64) -> bool {
        true
    }
    /// `len` bytes of `file` from `offset` without a copy, valid for as long as the caller
    /// holds them (the real disk: a view of the file's read mapping, which lives while any
    /// view does); `None` where the disk has no such view, and the caller reads a copy.
    /// Only bytes below the store's write offset are asked for: they do not change.
    fn read_shared(&self, _file: &Self::File, _offset: u64, _len: usize) -> Option<bytes::Bytes> {
        None
    }
}
