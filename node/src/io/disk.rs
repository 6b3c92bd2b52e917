//! `RealDisk`: the store's [`Disk`] on real files. Writes and fdatasyncs go through an
//! io_uring owned by the disk (one per shard store; submissions batch every write of an
//! append into one `io_uring_enter`), except appends up to [`INLINE_WRITE_BYTES_MAX`] (every
//! ordinary send), written inline with pwrite: on ext4 the ring only adds a worker thread. Where io_uring is refused (seccomp, old kernel, memlock
//! limit) the same calls fall back to pwrite/fdatasync, and [`RealDisk::driver`] says which.
//! Reads copy from a read-only memory map of the file, or hand out views of it that keep
//! it mapped (`read_shared`: a pull answer sent from the mapping). Segment files are
//! prepared (created, fallocated, and with [`RealDisk::set_warm_segments`] pre-written with
//! zeros) by a background thread so the append path never waits for block allocation.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use bytes::Bytes;
use io_uring::{opcode, types, IoUring};
use memmap2::{Mmap, MmapOptions};

use super::background::Syncer;
use super::release::{whole_pages, Advice, Releaser};
use crate::store::disk::{Disk, SpaceInfo, WriteOp};

/// Submission queue entries of a store's ring.
pub const RING_ENTRIES: u32 = 64;
/// Size of each zero-filled write when pre-writing a segment.
pub const PREWRITE_CHUNK_BYTES: usize = 1 << 20;
/// Appends of at most this many bytes are written with pwrite on the calling thread, not the
/// ring. File systems without async buffered writes (ext4 here) make io_uring hand every
/// buffered write to a kernel worker thread (`iou-wrk`); for a caller that waits anyway, that
/// hand-off is pure cost: a 1-record append took 16.5 µs vs 6.5 µs p50 (`benches/store.rs`),
/// and in batched sends (64 x 1 KiB) the workers were 35 % of the broker's CPU profile, the
/// wake-ups between them and the shard a good part of it; writing inline cut the broker's
/// CPU per message by ~13 % (docs/perf.md, issue #16). Larger writes (several MiB, e.g. a
/// slave applying a replication chunk) still go through the ring in one submission.
pub const INLINE_WRITE_BYTES_MAX: usize = 4 << 20;
/// Slice of a segment being prepared whose writeback is started (and the previous one's
/// awaited) at once.
pub const PREWRITE_SYNC_BYTES: u64 = 8 << 20;

const _: () = assert!(PREWRITE_SYNC_BYTES % PREWRITE_CHUNK_BYTES as u64 == 0);

/// Which mechanism carries the store's writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Driver {
    IoUring,
    /// io_uring could not be set up; the reason the kernel gave.
    Fallback(String),
}

impl std::fmt::Display for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Driver::IoUring => write!(f, "io_uring"),
            Driver::Fallback(why) => {
                write!(f, "pwrite/fdatasync fallback (io_uring unavailable: {why})")
            }
        }
    }
}

/// Real files with io_uring writes. Cloning shares the ring and the preparer thread.
#[derive(Clone)]
pub struct RealDisk {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for RealDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealDisk")
            .field("driver", &self.inner.driver)
            .finish()
    }
}

struct Inner {
    ring: Option<RefCell<IoUring>>,
    driver: Driver,
    preparer: Preparer,
    /// Drops released log pages from the page cache (see [`super::release`]).
    releaser: Releaser,
    /// fdatasyncs no request waits for (see [`super::background`]).
    syncer: Syncer,
    /// Pre-write new segments with zeros (see [`RealDisk::set_warm_segments`]).
    warm: Cell<bool>,
}

/// An open file and, once read, its memory map.
#[derive(Debug)]
pub struct RealFile {
    file: File,
    path: PathBuf,
    map: OnceCell<Option<FileMap>>,
}

/// A file's read-only mapping, and the same mapping as [`Bytes`] for views handed out
/// ([`Disk::read_shared`]): the mapping is unmapped when the file and the last view are gone.
#[derive(Debug)]
struct FileMap {
    map: Arc<Mmap>,
    bytes: Bytes,
}

/// The owner of a [`FileMap`]'s `bytes`.
struct MapOwner(Arc<Mmap>);

impl AsRef<[u8]> for MapOwner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl RealFile {
    /// The descriptor, for zero-copy sends (sendfile/splice) from this file.
    pub fn raw_fd(&self) -> std::os::unix::io::RawFd {
        self.file.as_raw_fd()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file (zero-copy sends duplicate its descriptor).
    pub fn std(&self) -> &File {
        &self.file
    }

    /// Unmaps `offset..offset+len` (whole pages) from the read map when the file is mapped:
    /// the next read of it faults the pages back in. Mapped pages are not dropped from the
    /// page cache (`fadvise`), so releasing a range starts here.
    fn unmap_range(&self, offset: u64, len: u64) {
        let Some(Some(FileMap { map, .. })) = self.map.get() else {
            return;
        };
        let (Ok(start), Ok(n)) = (usize::try_from(offset), usize::try_from(len)) else {
            return;
        };
        let n = n.min(map.len().saturating_sub(start));
        if n == 0 {
            return;
        }
        // SAFETY: a shared, read-only file mapping: MADV_DONTNEED only drops this process's
        // page table entries for the range, and a later access maps the same file bytes
        // again (not zeros, as it would for private or anonymous memory): a view handed out
        // by `read_shared` reads the same bytes after this call as before, and the map stays
        // valid: it is not unmapped or resized.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, n) };
    }

    /// Whether every page of `offset..offset+len` is in the page cache: `mincore(2)` on the
    /// read mapping, whose answer for a file mapping is the page cache's (the process owns
    /// the file). `true` when it cannot tell (no mapping, or the call failed).
    fn resident(&self, offset: u64, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return true;
        };
        if len == 0 {
            return true;
        }
        let Some(bytes) = self.mapped(offset, len) else {
            return true;
        };
        // SAFETY: sysconf reads a constant of the process (no memory is passed).
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as usize,
            _ => return true,
        };
        let mut at = bytes.as_ptr() as usize / page * page;
        let end = bytes.as_ptr() as usize + len;
        // One byte per page, up to 1 MiB of pages per call.
        let mut vec = [0u8; 256];
        while at < end {
            let n = (end - at).min(vec.len() * page);
            // SAFETY: `at..at + n` lies inside the live mapping (rounded down to its page,
            // which the mapping starts on), and `vec` has a byte for each of its pages.
            let rc = unsafe { libc::mincore(at as *mut libc::c_void, n, vec.as_mut_ptr()) };
            if rc != 0 {
                return true;
            }
            if vec[..n.div_ceil(page)].iter().any(|b| b & 1 == 0) {
                return false;
            }
            at += n;
        }
        true
    }

    /// The file's mapping, made at the first read.
    fn file_map(&self) -> Option<&FileMap> {
        self.map
            .get_or_init(|| {
                let len = self.file.metadata().ok()?.len();
                if len == 0 {
                    return None;
                }
                // SAFETY: the store owns its files: nothing truncates a mapped file while the
                // process runs (segments are only removed whole, after being dropped from the
                // store, and the mapping never extends past the length read here), so reads
                // of the mapping cannot fault, through this file or a view that outlives it
                // (a removed file's pages stay while mapped). Concurrent writes through the
                // fd only change bytes at or past the store's write offset, which readers
                // never touch.
                let map =
                    Arc::new(unsafe { MmapOptions::new().len(len as usize).map(&self.file) }.ok()?);
                let bytes = Bytes::from_owner(MapOwner(Arc::clone(&map)));
                Some(FileMap { map, bytes })
            })
            .as_ref()
    }

    /// The mapping if the file is mapped and `offset..offset+len` lies inside it.
    fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        self.file_map()?.map.get(start..start.checked_add(len)?)
    }

    /// A view of `offset..offset+len` of the mapping that keeps it alive (a reference
    /// count, no copy), if the range lies inside it.
    fn shared(&self, offset: u64, len: usize) -> Option<Bytes> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        let m = self.file_map()?;
        (end <= m.bytes.len()).then(|| m.bytes.slice(start..end))
    }
}

impl RealDisk {
    /// A disk with its own ring; falls back to plain syscalls when io_uring is refused.
    pub fn new() -> Self {
        let (ring, driver) = match IoUring::new(RING_ENTRIES) {
            Ok(ring) => (Some(RefCell::new(ring)), Driver::IoUring),
            Err(e) => (None, Driver::Fallback(e.to_string())),
        };
        Self::with(ring, driver)
    }

    /// A disk that never uses io_uring (tests of the fallback path, `RINGMQ_IO=fallback`).
    pub fn fallback(reason: &str) -> Self {
        Self::with(None, Driver::Fallback(reason.to_string()))
    }

    fn with(ring: Option<RefCell<IoUring>>, driver: Driver) -> Self {
        RealDisk {
            inner: Rc::new(Inner {
                ring,
                driver,
                preparer: Preparer::start(),
                releaser: Releaser::start(),
                syncer: Syncer::start(),
                warm: Cell::new(true),
            }),
        }
    }

    /// Queues an fdatasync of `file` (its own descriptor) on the disk's helper thread (see
    /// [`super::background`]); the answer arrives on the returned channel. `None`: the
    /// thread is not running, sync another way.
    pub fn sync_in_background(&self, file: File) -> Option<flume::Receiver<io::Result<()>>> {
        self.inner.syncer.sync(file)
    }

    /// Whether new segments are pre-written with zeros and written back before use
    /// (`warmMapedFileEnable`; on by default for a bare `RealDisk`, off by default in the
    /// broker). Warm segments keep an fdatasync to the appended bytes alone, where a cold
    /// (only fallocated) segment's unwritten extents are also converted by the first
    /// fdatasyncs that cover them (SYNC_FLUSH p50 about 1.7x). The price is writing every
    /// segment twice, and under SYNC_FLUSH the write-back of the next segment's zeros
    /// stalled acks for seconds (docs/perf.md, "SYNC_FLUSH on cold segments").
    /// Applies to preparations requested after the call.
    pub fn set_warm_segments(&self, warm: bool) {
        self.inner.warm.set(warm);
    }

    pub fn driver(&self) -> &Driver {
        &self.inner.driver
    }

    /// Runs `ops` on the ring: one submission, then waits for every completion. Short
    /// writes are finished with pwrite.
    fn uring_writes(
        &self,
        ring: &RefCell<IoUring>,
        ops: &[WriteOp<'_, RealFile>],
    ) -> io::Result<()> {
        let mut ring = ring.borrow_mut();
        for chunk in ops.chunks(RING_ENTRIES as usize) {
            for (i, op) in chunk.iter().enumerate() {
                let len = u32::try_from(op.data.len())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "write over 4 GiB"))?;
                let sqe =
                    opcode::Write::new(types::Fd(op.file.file.as_raw_fd()), op.data.as_ptr(), len)
                        .offset(op.offset)
                        .build()
                        .user_data(i as u64);
                // SAFETY: the buffer and the fd are borrowed from `ops` for this whole call, and
                // the call does not return before every submitted entry has completed, so the
                // kernel never reads freed memory.
                unsafe { ring.submission().push(&sqe) }
                    .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            }
            ring.submit_and_wait(chunk.len())?;
            let mut first_err = None;
            let mut done = 0;
            while done < chunk.len() {
                let cqes: Vec<_> = ring.completion().collect();
                if cqes.is_empty() {
                    ring.submit_and_wait(1)?;
                    continue;
                }
                for cqe in cqes {
                    done += 1;
                    let op = &chunk[cqe.user_data() as usize];
                    let res = cqe.result();
                    if res < 0 {
                        first_err.get_or_insert(io::Error::from_raw_os_error(-res));
                    } else if (res as usize) < op.data.len() {
                        let n = res as usize;
                        if let Err(e) = op
                            .file
                            .file
                            .write_all_at(&op.data[n..], op.offset + n as u64)
                        {
                            first_err.get_or_insert(e);
                        }
                    }
                }
            }
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        Ok(())
    }

    fn uring_fdatasync(&self, ring: &RefCell<IoUring>, file: &RealFile) -> io::Result<()> {
        let mut ring = ring.borrow_mut();
        let sqe = opcode::Fsync::new(types::Fd(file.file.as_raw_fd()))
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(u64::MAX);
        // SAFETY: no buffer is involved; the fd outlives the call, which waits for completion.
        unsafe { ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        ring.submit_and_wait(1)?;
        loop {
            if let Some(cqe) = ring.completion().next() {
                let res = cqe.result();
                return if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(())
                };
            }
            ring.submit_and_wait(1)?;
        }
    }
}

impl Default for RealDisk {
    fn default() -> Self {
        Self::new()
    }
}

impl Disk for RealDisk {
    type File = RealFile;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<RealFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(RealFile {
            file,
            path: path.to_path_buf(),
            map: OnceCell::new(),
        })
    }

    fn file_len(&self, file: &RealFile) -> io::Result<u64> {
        Ok(file.file.metadata()?.len())
    }

    fn set_len(&self, file: &RealFile, len: u64) -> io::Result<()> {
        allocate(&file.file, len)
    }

    fn set_len_sparse(&self, file: &RealFile, len: u64) -> io::Result<()> {
        file.file.set_len(len)
    }

    fn write_at(&self, file: &RealFile, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_all(&[WriteOp { file, offset, data }])
    }

    fn write_all(&self, ops: &[WriteOp<'_, RealFile>]) -> io::Result<()> {
        let total: usize = ops.iter().map(|op| op.data.len()).sum();
        match &self.inner.ring {
            Some(ring) if total > INLINE_WRITE_BYTES_MAX => self.uring_writes(ring, ops),
            _ => {
                for op in ops {
                    op.file.file.write_all_at(op.data, op.offset)?;
                }
                Ok(())
            }
        }
    }

    fn sync_data(&self, file: &RealFile) -> io::Result<()> {
        match &self.inner.ring {
            Some(ring) => self.uring_fdatasync(ring, file),
            None => file.file.sync_data(),
        }
    }

    fn resident(&self, file: &RealFile, offset: u64, len: u64) -> bool {
        file.resident(offset, len)
    }

    fn read_append(
        &self,
        file: &RealFile,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        if let Some(src) = file.mapped(offset, len) {
            out.extend_from_slice(src);
            return Ok(());
        }
        let start = out.len();
        out.resize(start + len, 0);
        let res = file.file.read_exact_at(&mut out[start..], offset);
        if res.is_err() {
            out.truncate(start);
        }
        res
    }

    fn read_shared(&self, file: &RealFile, offset: u64, len: usize) -> Option<Bytes> {
        file.shared(offset, len)
    }

    fn read_at(&self, file: &RealFile, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if let Some(src) = file.mapped(offset, buf.len()) {
            buf.copy_from_slice(src);
            return Ok(());
        }
        file.file.read_exact_at(buf, offset)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn space(&self, dir: &Path) -> io::Result<SpaceInfo> {
        let st = nix::sys::statvfs::statvfs(dir).map_err(io::Error::from)?;
        Ok(space_as_df(
            st.fragment_size() as u64,
            st.blocks() as u64,
            st.blocks_free() as u64,
            st.blocks_available() as u64,
        ))
    }

    fn prepare(&self, path: &Path, len: u64) {
        self.inner
            .preparer
            .request(path, len, self.inner.warm.get());
    }

    fn release_cache(&self, file: &RealFile, offset: u64, len: u64) {
        let Some((start, n)) = whole_pages(offset, len) else {
            return;
        };
        file.unmap_range(start, n);
        if let Ok(dup) = file.file.try_clone() {
            self.inner.releaser.request(dup, start, n, Advice::Release);
        }
    }

    fn read_ahead(&self, file: &RealFile, offset: u64, len: u64) {
        if let Ok(dup) = file.file.try_clone() {
            self.inner
                .releaser
                .request(dup, offset, len, Advice::ReadAhead);
        }
    }

    fn take_prepared(&self, path: &Path, len: u64) -> io::Result<RealFile> {
        self.inner.preparer.wait(path, len, self.inner.warm.get())?;
        self.open(path, false)
    }
}

/// Space as `df` reports it: used = blocks not free; total = used + available to ordinary
/// users. Blocks reserved for root (`bfree - bavail`) are left out of both: counting them as
/// used put a file system with a large reservation (this project's VMs: 252 GiB, 160 GiB
/// reserved, `df` 22 % used) at 72 % used, a few GiB from `diskMaxUsedSpaceRatio`'s
/// clean-at-any-hour threshold, with the forced clean-up of unexpired segments not far above.
fn space_as_df(frsize: u64, blocks: u64, bfree: u64, bavail: u64) -> SpaceInfo {
    let used = blocks.saturating_sub(bfree);
    SpaceInfo {
        total_bytes: used.saturating_add(bavail).saturating_mul(frsize),
        free_bytes: bavail.saturating_mul(frsize),
    }
}

/// Grows (allocating real blocks) or shrinks a file to `len` bytes.
fn allocate(file: &File, len: u64) -> io::Result<()> {
    let cur = file.metadata()?.len();
    if len <= cur {
        return file.set_len(len);
    }
    let flen = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    match nix::fcntl::fallocate(
        file.as_raw_fd(),
        nix::fcntl::FallocateFlags::empty(),
        0,
        flen,
    ) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP) => file.set_len(len),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Creates and allocates `path`, and when `warm` zero-fills it and writes it back (the slow
/// part of a new segment). Stops early, leaving a full-length file that reads as zeros, when
/// `stop` is set.
fn prepare_file(path: &Path, len: u64, warm: bool, stop: &AtomicBool) -> io::Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let existing = file.metadata()?.len();
    if existing == 0 {
        // Make the new name durable now, off the append path (Disk::take_prepared's promise).
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
    }
    if let Err(e) = allocate(&file, len) {
        if existing == 0 {
            // Do not leave an empty segment file behind (ENOSPC): the store would find it
            // at its next open, on a disk that is still full.
            drop(file);
            let _ = std::fs::remove_file(path);
        }
        return Err(e);
    }
    if existing == 0 && warm {
        // Touch every page now so appends land in warm, already-backed pages.
        let zeros = vec![0u8; PREWRITE_CHUNK_BYTES];
        let mut at = 0;
        while at < len {
            if stop.load(Ordering::Relaxed) {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    "segment preparation stopped",
                ));
            }
            let n = (len - at).min(PREWRITE_CHUNK_BYTES as u64) as usize;
            file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
            // Put the zeros (and ext4's unwritten-to-written extent conversion) on disk here,
            // before the segment is used: otherwise the first fdatasync of the segment once it
            // is active writes back every still-dirty zero page of the whole file (measured:
            // SYNC_FLUSH acks of ~0.5-0.65 s at every 256 MiB roll; 63-80 ms p99.9 with this).
            // The price: preparing 256 MiB takes ~0.8 s instead of ~0.2 s, so a producer that
            // fills half a segment faster (ASYNC_FLUSH, large batches) waits at the roll;
            // announcing the file ready before the write-back did not remove the SYNC_FLUSH
            // stalls (docs/perf.md). Streamed: start write-back of each slice and wait for the
            // one before, so zero-filling and disk writes overlap and at most two slices are
            // queued ahead of an appender's fdatasync.
            if at % PREWRITE_SYNC_BYTES == 0 || at == len {
                let slice = (at - 1) / PREWRITE_SYNC_BYTES * PREWRITE_SYNC_BYTES;
                sync_range(&file, slice, at - slice, libc::SYNC_FILE_RANGE_WRITE)?;
                if let Some(prev) = slice.checked_sub(PREWRITE_SYNC_BYTES) {
                    let wait = libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
                    sync_range(&file, prev, PREWRITE_SYNC_BYTES, wait)?;
                }
            }
        }
        // The data is written back; this commits the extent conversions (and reports any
        // write-back error).
        file.sync_data()?;
    }
    Ok(())
}

/// `sync_file_range(2)`: data writeback of a byte range, no metadata (see its man page).
fn sync_range(file: &File, offset: u64, len: u64, flags: libc::c_uint) -> io::Result<()> {
    let off = i64::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let n = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the call takes only integers; the descriptor stays open for its duration.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), off, n, flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

type Prepared = Arc<(Mutex<HashMap<PathBuf, Option<Result<(), String>>>>, Condvar)>;

/// Never set: for preparations made inline on the caller's thread.
static NEVER_STOP: AtomicBool = AtomicBool::new(false);

/// A background thread that prepares segment files ahead of need. Dropping it stops the
/// thread and waits for it: a thread that outlived its disk could still be creating or
/// zero-filling a segment file when a new store opens the same directory (a restart within
/// one process), and write zeros over records the new store appended there.
struct Preparer {
    tx: Option<mpsc::Sender<(PathBuf, u64, bool)>>,
    state: Prepared,
    stop: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Preparer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Preparer {
    fn start() -> Self {
        let state: Prepared = Arc::new((Mutex::new(HashMap::new()), Condvar::new()));
        let (tx, rx) = mpsc::channel::<(PathBuf, u64, bool)>();
        let worker_state = Arc::clone(&state);
        let stop = Arc::new(AtomicBool::new(false));
        let worker_stop = Arc::clone(&stop);
        let spawned = std::thread::Builder::new()
            .name("ringmq-prepare".to_string())
            .spawn(move || {
                super::background::lower_this_thread();
                for (path, len, warm) in rx {
                    if worker_stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let res =
                        prepare_file(&path, len, warm, &worker_stop).map_err(|e| e.to_string());
                    let (lock, cv) = &*worker_state;
                    if let Ok(mut map) = lock.lock() {
                        map.insert(path, Some(res));
                    }
                    cv.notify_all();
                }
            });
        let (tx, worker) = match spawned {
            Ok(handle) => (Some(tx), Some(handle)),
            Err(_) => (None, None),
        };
        Preparer {
            tx,
            state,
            stop,
            worker,
        }
    }

    fn request(&self, path: &Path, len: u64, warm: bool) {
        let Some(tx) = &self.tx else {
            return;
        };
        let (lock, _) = &*self.state;
        let Ok(mut map) = lock.lock() else {
            return;
        };
        if map.contains_key(path) {
            return;
        }
        if tx.send((path.to_path_buf(), len, warm)).is_ok() {
            map.insert(path.to_path_buf(), None);
        }
    }

    /// Waits for a requested preparation, or prepares inline when none was requested.
    fn wait(&self, path: &Path, len: u64, warm: bool) -> io::Result<()> {
        let (lock, cv) = &*self.state;
        let mut map = lock
            .lock()
            .map_err(|_| io::Error::other("segment preparer state poisoned"))?;
        if !map.contains_key(path) {
            drop(map);
            return prepare_file(path, len, warm, &NEVER_STOP);
        }
        loop {
            match map.get(path) {
                Some(Some(_)) => {
                    let done = map.remove(path).flatten();
                    return match done {
                        Some(Ok(())) => Ok(()),
                        // A failed background preparation (e.g. ENOSPC then) is retried here.
                        _ => {
                            drop(map);
                            prepare_file(path, len, warm, &NEVER_STOP)
                        }
                    };
                }
                Some(None) => {
                    map = cv
                        .wait(map)
                        .map_err(|_| io::Error::other("segment preparer state poisoned"))?;
                }
                None => {
                    drop(map);
                    return prepare_file(path, len, warm, &NEVER_STOP);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_is_reckoned_as_df_does() {
        // A machine of this project: 252 GiB, 20 GiB used, 72 GiB available (the rest is
        // reserved): df says 22 % (rounded up), statvfs's blocks-minus-available said 71 %.
        let gib = (1u64 << 30) / 4096;
        let s = space_as_df(4096, 252 * gib, 232 * gib, 72 * gib);
        assert_eq!(s.free_bytes, 72 << 30);
        assert_eq!(s.total_bytes, 92 << 30);
        assert!(
            (s.used_ratio() - 20.0 / 92.0).abs() < 1e-9,
            "{}",
            s.used_ratio()
        );
        // No reservation (tmpfs): plain used / total.
        let s = space_as_df(4096, 1000, 250, 250);
        assert!((s.used_ratio() - 0.75).abs() < 1e-9);
        // A full file system, and an empty statvfs, read as full rather than divide by zero.
        assert_eq!(space_as_df(4096, 1000, 10, 0).used_ratio(), 1.0);
        assert_eq!(space_as_df(4096, 0, 0, 0).used_ratio(), 1.0);
    }

    /// A fresh directory with an empty file opened on a real disk, beside the test binary: on
    /// the build's disk (a tmpfs keeps every page in memory, so nothing could be dropped
    /// there). The caller removes the directory.
    fn scratch_file(name: &str) -> (std::path::PathBuf, RealDisk, RealFile) {
        let exe = std::env::current_exe().unwrap();
        let dir = exe
            .parent()
            .unwrap()
            .join(format!("{name}-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let disk = RealDisk::new();
        let f = disk.open(&dir.join("segment"), true).unwrap();
        (dir, disk, f)
    }

    /// `Disk::resident` tells pages in the page cache from pages that a read would wait for.
    #[test]
    fn a_range_read_back_is_resident_and_a_dropped_one_is_not() {
        let (dir, disk, f) = scratch_file("resident");
        const MIB: u64 = 1 << 20;
        let data: Vec<u8> = (0..16 * MIB).map(|i| (i % 251) as u8).collect();
        disk.set_len(&f, 16 * MIB).unwrap();
        disk.write_at(&f, 0, &data).unwrap();
        disk.sync_data(&f).unwrap();
        let mut buf = vec![0u8; 16 * MIB as usize];
        disk.read_at(&f, 0, &mut buf).unwrap();
        assert!(disk.resident(&f, 0, 16 * MIB), "just read");
        assert!(disk.resident(&f, 100, 5000), "an unaligned range inside it");
        assert!(disk.resident(&f, 0, 0), "nothing is always resident");

        // Drop it all: from the read map, then from the page cache (clean pages after the
        // sync; the whole file, as the kernel drops whole folios only).
        f.unmap_range(0, 16 * MIB);
        // SAFETY: advice on an open descriptor; no memory is passed.
        let rc =
            unsafe { libc::posix_fadvise(f.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        // SAFETY: zeroes are a valid statfs (plain integers), filled by the call below.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a statfs to fill.
        let tmpfs =
            unsafe { libc::statfs(path.as_ptr(), &mut fs) } == 0 && fs.f_type == libc::TMPFS_MAGIC;
        if tmpfs {
            eprintln!(
                "{}: on a tmpfs, pages cannot be dropped; not checked",
                dir.display()
            );
        } else {
            assert!(!disk.resident(&f, 0, 16 * MIB), "dropped");
            assert!(!disk.resident(&f, 12 * MIB, 4096), "a dropped page");
            // One page read back (with whatever the kernel reads around it, far less than
            // 16 MiB).
            let mut page = vec![0u8; 4096];
            disk.read_at(&f, 0, &mut page).unwrap();
            assert_eq!(page[..], data[..4096]);
            assert!(disk.resident(&f, 0, 4096), "the page read back");
            assert!(!disk.resident(&f, 0, 16 * MIB), "the rest is still out");
        }
        disk.read_at(&f, 0, &mut buf).unwrap();
        assert!(buf == data, "the bytes read back are the bytes written");
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `read_append` adds the bytes after what `out` holds, from the mapping or, past it, from
    /// the file; a read past the file's end leaves `out` as it was.
    #[test]
    fn read_append_adds_the_bytes_and_leaves_out_alone_on_an_error() {
        let (dir, disk, f) = scratch_file("read-append");
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
        disk.set_len(&f, data.len() as u64).unwrap();
        disk.write_at(&f, 0, &data).unwrap();
        let mut out = b"head".to_vec();
        disk.read_append(&f, 100, 5000, &mut out).unwrap();
        disk.read_append(&f, 60_000, 5536, &mut out).unwrap();
        let mut want = b"head".to_vec();
        want.extend_from_slice(&data[100..5100]);
        want.extend_from_slice(&data[60_000..]);
        assert!(out == want, "appended bytes differ");
        let err = disk.read_append(&f, 65_000, 1000, &mut out);
        assert!(err.is_err(), "a read past the end fails");
        assert!(out == want, "and leaves out as it was");
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A view from `read_shared` holds the bytes read back, keeps them through a release of
    /// their range (`unmap_range`, then the page cache dropped) and after the file and its
    /// directory are gone; a range past the mapping has no view.
    #[test]
    fn a_shared_view_outlives_its_file_and_reads_the_same_bytes() {
        let (dir, disk, f) = scratch_file("read-shared");
        let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 249) as u8).collect();
        disk.set_len(&f, data.len() as u64).unwrap();
        disk.write_at(&f, 0, &data).unwrap();
        disk.sync_data(&f).unwrap();
        let a = disk
            .read_shared(&f, 4096, 100_000)
            .expect("a view inside the file");
        let b = disk
            .read_shared(&f, 200_000, 62_144)
            .expect("a view at its end");
        assert!(a[..] == data[4096..104_096], "the first view");
        assert!(b[..] == data[200_000..], "the second view");
        assert!(
            disk.read_shared(&f, 200_000, 62_145).is_none(),
            "past the end"
        );
        f.unmap_range(0, data.len() as u64);
        // SAFETY: advice on an open descriptor; no memory is passed.
        let rc =
            unsafe { libc::posix_fadvise(f.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        assert!(
            a[..] == data[4096..104_096],
            "the view after a release of its range"
        );
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            a[..] == data[4096..104_096],
            "the view after its file is gone"
        );
        assert!(b[..] == data[200_000..]);
    }

    #[test]
    fn real_space_matches_df() {
        let dir = std::env::temp_dir();
        let s = RealDisk::new().space(&dir).unwrap();
        assert!(s.total_bytes > 0 && s.free_bytes <= s.total_bytes);
        let out = std::process::Command::new("df")
            .args(["-B1", "--output=used,avail"])
            .arg(&dir)
            .output();
        let Ok(out) = out else {
            return; // no df here: the arithmetic is covered above
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let nums: Vec<u64> = text
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if let [used, avail] = nums[..] {
            let df_ratio = used as f64 / (used + avail) as f64;
            // Other processes write meanwhile: allow a percent.
            assert!(
                (s.used_ratio() - df_ratio).abs() < 0.01,
                "ringmq {:.4} vs df {df_ratio:.4}",
                s.used_ratio()
            );
        }
    }
}
