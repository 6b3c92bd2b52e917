//! The disk a shard is given: the real one ([`RealDisk`]: io_uring writes, mmap reads) or,
//! in the simulator, a [`FaultDisk`] (in-memory files that crash, tear, fill up) whose
//! fdatasyncs take virtual time. Every store, ConsumeQueue, index and checkpoint operation
//! of a shard goes through it, including the fdatasyncs the shard runs on its loop
//! ([`NodeDisk::sync_file`], [`NodeDisk::sync_dir_async`]), so crash tests and the simulator
//! see the same sync order production runs.

use std::cell::Cell;
use std::io;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::direct::{AlignedBuf, DirectFile};
use super::disk::{RealDisk, RealFile};
use super::net::SharedFile;
use super::rt;
use crate::store::disk::{Disk, SpaceInfo, WriteOp};
use crate::store::fault_disk::{FaultDisk, FaultFile};

/// A shard's disk.
#[derive(Debug, Clone)]
pub enum NodeDisk {
    Real(RealDisk),
    Sim(SimDisk),
}

/// A file of a [`NodeDisk`].
#[derive(Debug)]
pub enum NodeFile {
    Real(RealFile),
    Sim(FaultFile),
}

/// The simulator's disk: a [`FaultDisk`] whose fdatasyncs on the loop take virtual time
/// (a slow disk is a long one).
#[derive(Debug, Clone)]
pub struct SimDisk {
    pub disk: FaultDisk,
    /// Virtual duration of one loop fdatasync, microseconds (shared: the simulator changes it).
    pub sync_us: Rc<Cell<u64>>,
}

/// An owned handle to a file of a [`NodeDisk`], kept across an `.await` while the store
/// (which owns the file) stays borrowable: a duplicated descriptor, or a simulated path.
#[derive(Debug, Clone)]
pub enum FileHandle {
    Real(SharedFile),
    Sim(FaultFile),
}

impl NodeDisk {
    /// A handle for syncing `file` from the loop ([`Self::sync_file`]).
    pub fn handle(&self, file: &NodeFile) -> io::Result<FileHandle> {
        match file {
            NodeFile::Real(f) => Ok(FileHandle::Real(SharedFile::dup(f.std())?)),
            NodeFile::Sim(f) => Ok(FileHandle::Sim(f.clone())),
        }
    }

    /// fdatasync of a file without blocking the loop: on the loop's io_uring for the real
    /// disk, after a virtual delay in the simulator.
    pub async fn sync_file(&self, file: &FileHandle) -> io::Result<()> {
        match (self, file) {
            (NodeDisk::Real(_), FileHandle::Real(f)) => f.sync_data().await,
            (NodeDisk::Sim(d), FileHandle::Sim(f)) => {
                d.delay().await;
                d.disk.sync_data(f)
            }
            _ => Err(mismatch()),
        }
    }

    /// fdatasync of a file no request waits for, on the disk's helper thread (lowered
    /// priority, free to run off the shard's core: see [`crate::io::background`]); as
    /// [`Self::sync_file`] where that thread is not running and in the simulator.
    pub async fn sync_file_background(&self, file: &FileHandle) -> io::Result<()> {
        if let (NodeDisk::Real(d), FileHandle::Real(f)) = (self, file) {
            if let Some(answer) = f
                .try_clone_std()
                .ok()
                .and_then(|std| d.sync_in_background(std))
            {
                return answer
                    .recv_async()
                    .await
                    .unwrap_or_else(|_| Err(io::Error::other("the sync thread stopped")));
            }
        }
        self.sync_file(file).await
    }

    /// fsync of directory `dir` without blocking the loop.
    pub async fn sync_dir_async(&self, dir: &Path) -> io::Result<()> {
        match self {
            NodeDisk::Real(_) => SharedFile::open_dir(dir)?.sync_data().await,
            NodeDisk::Sim(d) => {
                d.delay().await;
                d.disk.sync_dir(dir)
            }
        }
    }
}

/// A file of a [`NodeDisk`] opened for reads that skip the page cache
/// ([`NodeDisk::read_direct`]).
#[derive(Debug, Clone)]
pub enum DirectHandle {
    Real(DirectFile),
    Sim(FaultFile),
}

impl NodeDisk {
    /// Opens `file` for direct reads: `O_DIRECT` on the real disk (an error where the file
    /// system has none), the same simulated file in the simulator.
    pub fn open_direct(&self, file: &NodeFile) -> io::Result<DirectHandle> {
        match file {
            NodeFile::Real(f) => Ok(DirectHandle::Real(DirectFile::open(f.path())?)),
            NodeFile::Sim(f) => Ok(DirectHandle::Sim(f.clone())),
        }
    }

    /// Reads `len` bytes (rounded up to a whole block) from `offset` (a multiple of
    /// [`super::direct::DIRECT_ALIGN`]) into `buf`, which it returns with its length set to
    /// the bytes read (fewer at the end of the file): on the loop's ring without the page
    /// cache for the real disk, after a virtual delay in the simulator.
    pub async fn read_direct(
        &self,
        file: &DirectHandle,
        offset: u64,
        mut buf: AlignedBuf,
    ) -> (io::Result<()>, AlignedBuf) {
        match (self, file) {
            (NodeDisk::Real(_), DirectHandle::Real(f)) => f.read_into(buf, offset).await,
            (NodeDisk::Sim(d), DirectHandle::Sim(f)) => {
                d.delay().await;
                let len = d
                    .disk
                    .file_len(f)
                    .map(|n| n.saturating_sub(offset).min(buf.capacity() as u64) as usize);
                let res = len.and_then(|n| {
                    let r = d.disk.read_at(f, offset, &mut buf.spare()[..n]);
                    buf.set_filled(if r.is_ok() { n } else { 0 });
                    r
                });
                (res, buf)
            }
            _ => (Err(mismatch()), buf),
        }
    }
}

impl FileHandle {
    /// The descriptor for zero-copy sends (real files only).
    pub fn shared(&self) -> io::Result<SharedFile> {
        match self {
            FileHandle::Real(f) => Ok(f.clone()),
            FileHandle::Sim(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "simulated files are sent by copy",
            )),
        }
    }
}

impl SimDisk {
    async fn delay(&self) {
        let us = self.sync_us.get();
        if us > 0 {
            rt::sleep(Duration::from_micros(us)).await;
        }
    }
}

fn mismatch() -> io::Error {
    io::Error::other("a file of one disk used with another")
}

/// Calls `$body` with the inner disk and file of the same kind, or fails on a mix.
macro_rules! both {
    ($self:expr, $file:expr, |$d:ident, $f:ident| $body:expr) => {
        match ($self, $file) {
            (NodeDisk::Real($d), NodeFile::Real($f)) => $body,
            (NodeDisk::Sim(s), NodeFile::Sim($f)) => {
                let $d = &s.disk;
                $body
            }
            _ => Err(mismatch()),
        }
    };
}

/// Calls `$body` with the inner disk.
macro_rules! each {
    ($self:expr, |$d:ident| $body:expr) => {
        match $self {
            NodeDisk::Real($d) => $body,
            NodeDisk::Sim(s) => {
                let $d = &s.disk;
                $body
            }
        }
    };
}

impl Disk for NodeDisk {
    type File = NodeFile;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        each!(self, |d| d.create_dir_all(dir))
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        each!(self, |d| d.list_dir(dir))
    }

    fn exists(&self, path: &Path) -> bool {
        each!(self, |d| d.exists(path))
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<NodeFile> {
        match self {
            NodeDisk::Real(d) => d.open(path, create).map(NodeFile::Real),
            NodeDisk::Sim(s) => s.disk.open(path, create).map(NodeFile::Sim),
        }
    }

    fn file_len(&self, file: &NodeFile) -> io::Result<u64> {
        both!(self, file, |d, f| d.file_len(f))
    }

    fn set_len(&self, file: &NodeFile, len: u64) -> io::Result<()> {
        both!(self, file, |d, f| d.set_len(f, len))
    }

    fn set_len_sparse(&self, file: &NodeFile, len: u64) -> io::Result<()> {
        both!(self, file, |d, f| d.set_len_sparse(f, len))
    }

    fn write_at(&self, file: &NodeFile, offset: u64, data: &[u8]) -> io::Result<()> {
        both!(self, file, |d, f| d.write_at(f, offset, data))
    }

    fn write_all(&self, ops: &[WriteOp<'_, NodeFile>]) -> io::Result<()> {
        match self {
            NodeDisk::Real(d) => {
                let mut real = Vec::with_capacity(ops.len());
                for op in ops {
                    let NodeFile::Real(file) = op.file else {
                        return Err(mismatch());
                    };
                    real.push(WriteOp {
                        file,
                        offset: op.offset,
                        data: op.data,
                    });
                }
                d.write_all(&real)
            }
            NodeDisk::Sim(s) => {
                for op in ops {
                    let NodeFile::Sim(file) = op.file else {
                        return Err(mismatch());
                    };
                    s.disk.write_at(file, op.offset, op.data)?;
                }
                Ok(())
            }
        }
    }

    fn sync_data(&self, file: &NodeFile) -> io::Result<()> {
        both!(self, file, |d, f| d.sync_data(f))
    }

    fn read_at(&self, file: &NodeFile, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        both!(self, file, |d, f| d.read_at(f, offset, buf))
    }

    fn read_append(
        &self,
        file: &NodeFile,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        both!(self, file, |d, f| d.read_append(f, offset, len, out))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        each!(self, |d| d.remove_file(path))
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        each!(self, |d| d.remove_dir_all(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        each!(self, |d| d.rename(from, to))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        each!(self, |d| d.sync_dir(dir))
    }

    fn space(&self, dir: &Path) -> io::Result<SpaceInfo> {
        each!(self, |d| d.space(dir))
    }

    fn prepare(&self, path: &Path, len: u64) {
        each!(self, |d| d.prepare(path, len))
    }

    fn release_cache(&self, file: &NodeFile, offset: u64, len: u64) {
        if let (NodeDisk::Real(d), NodeFile::Real(f)) = (self, file) {
            d.release_cache(f, offset, len);
        }
    }

    fn read_ahead(&self, file: &NodeFile, offset: u64, len: u64) {
        if let (NodeDisk::Real(d), NodeFile::Real(f)) = (self, file) {
            d.read_ahead(f, offset, len);
        }
    }

    fn resident(&self, file: &NodeFile, offset: u64, len: u64) -> bool {
        match (self, file) {
            (NodeDisk::Real(d), NodeFile::Real(f)) => d.resident(f, offset, len),
            _ => true,
        }
    }

    fn read_shared(&self, file: &NodeFile, offset: u64, len: usize) -> Option<bytes::Bytes> {
        match (self, file) {
            (NodeDisk::Real(d), NodeFile::Real(f)) => d.read_shared(f, offset, len),
            _ => None,
        }
    }

    fn take_prepared(&self, path: &Path, len: u64) -> io::Result<NodeFile> {
        match self {
            NodeDisk::Real(d) => d.take_prepared(path, len).map(NodeFile::Real),
            NodeDisk::Sim(s) => s.disk.take_prepared(path, len).map(NodeFile::Sim),
        }
    }
}
