//! `FaultDisk`: an in-memory [`Disk`] for tests that can fail operations, run out of space,
//! and crash, leaving the image a power loss or a process kill would.
//!
//! Fault model (what a crash can and cannot do here):
//! - Every file keeps two images: `written` (what readers see, the page cache) and `durable`
//!   (what survives power loss). `sync_data` copies written to durable.
//! - Unsynced writes are remembered in order. A crash keeps all of them
//!   ([`Crash::KeepWritten`], a `kill -9`), none of them ([`Crash::DropUnsynced`]), or all
//!   but the last, with the last one cut in half ([`Crash::TearLast`], a torn write).
//! - A file created since the last `sync_dir` of its directory is gone after a power loss
//!   ([`Crash::DropUnsynced`], [`Crash::TearLast`]; a `kill -9` keeps it). Other metadata
//!   (`set_len`, remove, rename, directories) is durable at once: the store syncs directories
//!   after such changes, and modelling lost renames adds nothing the log format depends on.
//! - `crash_at(n)` makes operation `n` (counting every call) and everything after it fail with
//!   EIO, the moment of a power cut; `fail_op(n, errno)` fails one operation only.
//! - `set_capacity(bytes)` bounds the sum of file lengths; going past it is ENOSPC.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::disk::{Disk, SpaceInfo};

/// How a crash treats bytes written but not yet synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    KeepWritten,
    DropUnsynced,
    TearLast,
}

/// Files and directories left on the disk after a crash; start a new `FaultDisk` from it.
#[derive(Debug, Clone, Default)]
pub struct DiskImage {
    files: BTreeMap<PathBuf, Vec<u8>>,
    dirs: BTreeSet<PathBuf>,
}

impl DiskImage {
    /// Mutable access to one file's bytes (for corruption tests).
    pub fn file_mut(&mut self, path: &Path) -> Option<&mut Vec<u8>> {
        self.files.get_mut(path)
    }

    /// All file paths in the image.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.keys().cloned().collect()
    }
}

#[derive(Debug, Default)]
struct FileState {
    written: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<PathBuf, FileState>,
    dirs: BTreeSet<PathBuf>,
    /// Unsynced writes in order: (path, offset, bytes).
    pending: Vec<(PathBuf, u64, Vec<u8>)>,
    /// Files created since their directory was last synced.
    unsynced_creates: BTreeSet<PathBuf>,
    ops: u64,
    /// Bytes handed out by `read_at` so far.
    bytes_read: u64,
    crash_at: Option<u64>,
    fail_once: BTreeMap<u64, i32>,
    capacity_bytes: Option<u64>,
    /// `release_cache` calls: (path, offset, len, whether no unsynced write overlapped).
    released: Vec<(PathBuf, u64, u64, bool)>,
    /// `read_ahead` calls: (path, offset, len).
    read_ahead: Vec<(PathBuf, u64, u64)>,
}

/// The fault-injecting disk. Cloning shares the same files.
#[derive(Debug, Clone, Default)]
pub struct FaultDisk {
    inner: Rc<RefCell<Inner>>,
}

/// A file handle of the fault disk (its path).
#[derive(Debug, Clone)]
pub struct FaultFile {
    path: PathBuf,
}

impl FaultDisk {
    pub fn new() -> Self {
        Self::default()
    }

    /// A disk holding what `image` holds, everything durable.
    pub fn from_image(image: &DiskImage) -> Self {
        let disk = Self::new();
        {
            let mut inner = disk.inner.borrow_mut();
            inner.dirs = image.dirs.clone();
            for (path, bytes) in &image.files {
                inner.files.insert(
                    path.clone(),
                    FileState {
                        written: bytes.clone(),
                        durable: bytes.clone(),
                    },
                );
            }
        }
        disk
    }

    /// Bytes read so far (`read_at`).
    pub fn bytes_read(&self) -> u64 {
        self.inner.borrow().bytes_read
    }

    /// Operations performed so far.
    /// Every `release_cache` call so far: (path, offset, len, whether the range was
    /// durable, i.e. no unsynced write overlapped it).
    pub fn released(&self) -> Vec<(PathBuf, u64, u64, bool)> {
        self.inner.borrow().released.clone()
    }

    /// Every `read_ahead` call so far: (path, offset, len).
    pub fn read_ahead_calls(&self) -> Vec<(PathBuf, u64, u64)> {
        self.inner.borrow().read_ahead.clone()
    }

    pub fn ops(&self) -> u64 {
        self.inner.borrow().ops
    }

    /// Operation `n` (0-based) and every later one fail with EIO.
    pub fn crash_at(&self, n: u64) {
        self.inner.borrow_mut().crash_at = Some(n);
    }

    /// Operation `n` alone fails with `errno`.
    pub fn fail_op(&self, n: u64, errno: i32) {
        self.inner.borrow_mut().fail_once.insert(n, errno);
    }

    /// Bounds the total bytes of all files; `None` removes the bound.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.inner.borrow_mut().capacity_bytes = bytes;
    }

    /// Total bytes of all files.
    pub fn used_bytes(&self) -> u64 {
        self.inner
            .borrow()
            .files
            .values()
            .map(|f| f.written.len() as u64)
            .sum()
    }

    /// What a crash of the given kind leaves behind.
    pub fn image(&self, crash: Crash) -> DiskImage {
        let inner = self.inner.borrow();
        let lose_creates = crash != Crash::KeepWritten;
        let mut files: BTreeMap<PathBuf, Vec<u8>> = inner
            .files
            .iter()
            .filter(|(p, _)| !(lose_creates && inner.unsynced_creates.contains(*p)))
            .map(|(p, f)| {
                let bytes = match crash {
                    Crash::KeepWritten => f.written.clone(),
                    _ => f.durable.clone(),
                };
                (p.clone(), bytes)
            })
            .collect();
        if crash == Crash::TearLast {
            let n = inner.pending.len();
            for (i, (path, offset, data)) in inner.pending.iter().enumerate() {
                let keep = if i + 1 == n {
                    data.len() / 2
                } else {
                    data.len()
                };
                if let Some(bytes) = files.get_mut(path) {
                    apply_write(bytes, *offset, &data[..keep]);
                }
            }
        }
        DiskImage {
            files,
            dirs: inner.dirs.clone(),
        }
    }

    fn op(&self) -> io::Result<()> {
        let mut inner = self.inner.borrow_mut();
        let n = inner.ops;
        inner.ops += 1;
        if inner.crash_at.is_some_and(|c| n >= c) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if let Some(errno) = inner.fail_once.remove(&n) {
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok(())
    }

    fn check_growth(inner: &Inner, path: &Path, new_len: u64) -> io::Result<()> {
        let Some(cap) = inner.capacity_bytes else {
            return Ok(());
        };
        let current: u64 = inner.files.values().map(|f| f.written.len() as u64).sum();
        let old = inner.files.get(path).map_or(0, |f| f.written.len() as u64);
        if new_len > old && current + (new_len - old) > cap {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

fn apply_write(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl Disk for FaultDisk {
    type File = FaultFile;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        for anc in dir.ancestors() {
            if !anc.as_os_str().is_empty() {
                inner.dirs.insert(anc.to_path_buf());
            }
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let inner = self.inner.borrow();
        if !inner.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let mut names = BTreeSet::new();
        let children = inner
            .files
            .keys()
            .chain(inner.dirs.iter())
            .filter(|p| p.parent() == Some(dir));
        for p in children {
            if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                names.insert(name.to_string());
            }
        }
        Ok(names.into_iter().collect())
    }

    fn exists(&self, path: &Path) -> bool {
        let inner = self.inner.borrow();
        inner.files.contains_key(path) || inner.dirs.contains(path)
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<FaultFile> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        if !inner.files.contains_key(path) {
            if !create {
                return Err(not_found(path));
            }
            let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
            if !inner.dirs.contains(&parent) {
                return Err(not_found(&parent));
            }
            inner.files.insert(path.to_path_buf(), FileState::default());
            inner.unsynced_creates.insert(path.to_path_buf());
        }
        Ok(FaultFile {
            path: path.to_path_buf(),
        })
    }

    fn file_len(&self, file: &FaultFile) -> io::Result<u64> {
        let inner = self.inner.borrow();
        let f = inner
            .files
            .get(&file.path)
            .ok_or_else(|| not_found(&file.path))?;
        Ok(f.written.len() as u64)
    }

    fn set_len(&self, file: &FaultFile, len: u64) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        Self::check_growth(&inner, &file.path, len)?;
        let f = inner
            .files
            .get_mut(&file.path)
            .ok_or_else(|| not_found(&file.path))?;
        f.written.resize(len as usize, 0);
        f.durable.resize(len as usize, 0);
        Ok(())
    }

    fn write_at(&self, file: &FaultFile, offset: u64, data: &[u8]) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        let end = offset + data.len() as u64;
        Self::check_growth(&inner, &file.path, end)?;
        let f = inner
            .files
            .get_mut(&file.path)
            .ok_or_else(|| not_found(&file.path))?;
        apply_write(&mut f.written, offset, data);
        if f.durable.len() < f.written.len() {
            // Growth is metadata: durable at once, as zeros.
            let len = f.written.len();
            f.durable.resize(len, 0);
        }
        inner
            .pending
            .push((file.path.clone(), offset, data.to_vec()));
        Ok(())
    }

    fn sync_data(&self, file: &FaultFile) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let f = inner
            .files
            .get_mut(&file.path)
            .ok_or_else(|| not_found(&file.path))?;
        // Durable becomes written by replaying this file's unsynced writes in order (not by
        // copying the whole file: segments are large and syncs frequent).
        inner.pending.retain(|(p, offset, data)| {
            if *p != file.path {
                return true;
            }
            apply_write(&mut f.durable, *offset, data);
            false
        });
        // A write past a later shrink (set_len) is not in the file any more.
        let len = f.written.len();
        f.durable.truncate(len);
        Ok(())
    }

    fn read_at(&self, file: &FaultFile, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut inner = self.inner.borrow_mut();
        let f = inner
            .files
            .get(&file.path)
            .ok_or_else(|| not_found(&file.path))?;
        let start = offset as usize;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| f.written.get(start..end))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        inner.bytes_read += buf.len() as u64;
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        inner.files.remove(path).ok_or_else(|| not_found(path))?;
        inner.pending.retain(|(p, _, _)| p != path);
        inner.unsynced_creates.remove(path);
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        inner.files.retain(|p, _| !p.starts_with(path));
        inner.dirs.retain(|p| !p.starts_with(path));
        inner.pending.retain(|(p, _, _)| !p.starts_with(path));
        inner.unsynced_creates.retain(|p| !p.starts_with(path));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        let f = inner.files.remove(from).ok_or_else(|| not_found(from))?;
        inner.files.insert(to.to_path_buf(), f);
        if inner.unsynced_creates.remove(from) {
            inner.unsynced_creates.insert(to.to_path_buf());
        }
        for pending in inner.pending.iter_mut() {
            if pending.0 == from {
                pending.0 = to.to_path_buf();
            }
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.op()?;
        let mut inner = self.inner.borrow_mut();
        inner.unsynced_creates.retain(|p| p.parent() != Some(dir));
        Ok(())
    }

    fn space(&self, _dir: &Path) -> io::Result<SpaceInfo> {
        let cap = self.inner.borrow().capacity_bytes;
        let used = self.used_bytes();
        let total = cap.unwrap_or(u64::MAX / 2);
        Ok(SpaceInfo {
            total_bytes: total,
            free_bytes: total.saturating_sub(used),
        })
    }

    fn prepare(&self, _path: &Path, _len: u64) {}

    fn release_cache(&self, file: &FaultFile, offset: u64, len: u64) {
        let mut inner = self.inner.borrow_mut();
        let synced = !inner.pending.iter().any(|(p, at, data)| {
            *p == file.path && *at < offset + len && offset < at + data.len() as u64
        });
        inner
            .released
            .push((file.path.clone(), offset, len, synced));
    }

    fn read_ahead(&self, file: &FaultFile, offset: u64, len: u64) {
        self.inner
            .borrow_mut()
            .read_ahead
            .push((file.path.clone(), offset, len));
    }

    fn take_prepared(&self, path: &Path, len: u64) -> io::Result<FaultFile> {
        let file = self.open(path, true)?;
        self.set_len(&file, len)?;
        self.sync_dir(path.parent().unwrap_or(Path::new("/")))?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (FaultDisk, FaultFile) {
        let d = FaultDisk::new();
        d.create_dir_all(Path::new("/s")).unwrap();
        let f = d.open(Path::new("/s/a"), true).unwrap();
        d.sync_dir(Path::new("/s")).unwrap();
        (d, f)
    }

    #[test]
    fn a_create_is_durable_after_its_directory_sync() {
        let (d, _) = setup();
        let b = d.open(Path::new("/s/b"), true).unwrap();
        d.write_at(&b, 0, b"x").unwrap();
        d.sync_data(&b).unwrap();
        let p = Path::new("/s/b");
        assert!(d.image(Crash::KeepWritten).files.contains_key(p));
        assert!(!d.image(Crash::DropUnsynced).files.contains_key(p));
        assert!(!d.image(Crash::TearLast).files.contains_key(p));
        d.sync_dir(Path::new("/other")).unwrap();
        assert!(!d.image(Crash::DropUnsynced).files.contains_key(p));
        d.sync_dir(Path::new("/s")).unwrap();
        assert_eq!(d.image(Crash::DropUnsynced).files[p], b"x");
    }

    #[test]
    fn crash_modes() {
        let (d, f) = setup();
        d.write_at(&f, 0, b"durable!").unwrap();
        d.sync_data(&f).unwrap();
        d.write_at(&f, 8, b"one").unwrap();
        d.write_at(&f, 11, b"twotwo").unwrap();
        let p = Path::new("/s/a");
        let img = d.image(Crash::KeepWritten);
        assert_eq!(img.files[p], b"durable!onetwotwo");
        let img = d.image(Crash::DropUnsynced);
        assert_eq!(&img.files[p][..8], b"durable!");
        assert!(img.files[p][8..].iter().all(|&b| b == 0));
        let img = d.image(Crash::TearLast);
        assert_eq!(&img.files[p][..14], b"durable!onetwo");
        assert!(img.files[p][14..].iter().all(|&b| b == 0));
    }

    #[test]
    fn crash_at_and_capacity() {
        let (d, f) = setup();
        let n = d.ops();
        d.crash_at(n + 1);
        d.write_at(&f, 0, b"ok").unwrap();
        assert!(d.write_at(&f, 2, b"no").is_err());
        assert!(d.sync_data(&f).is_err());

        let (d, f) = setup();
        d.set_capacity(Some(4));
        assert_eq!(
            d.write_at(&f, 0, b"12345").unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
        d.write_at(&f, 0, b"1234").unwrap();
        d.set_capacity(None);
        d.write_at(&f, 4, b"5").unwrap();
    }
}
