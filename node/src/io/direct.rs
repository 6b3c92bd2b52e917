//! Reads that skip the page cache (`O_DIRECT`) into buffers of the reader's own, on the
//! loop's io_uring: how a consumer catching up through log bytes released from memory reads
//! them (`broker::shard::catch_up`). A buffered read of such bytes allocates a page-cache
//! page for every 4 KiB, charges it, puts it on the LRU, and something has to drop it again;
//! a direct read is one request the disk fills by DMA into memory that is used again for
//! the next read (docs/perf.md, "Catch-up from the disk").
//!
//! Hand-written: `O_DIRECT` wants the buffer, the file offset and the length aligned to the
//! device's logical block, std has no aligned byte buffer, and the runtime's buffer traits
//! (`compio::buf`) are implemented here for [`AlignedBuf`].

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

use compio::buf::{BufResult, IoBuf, IoBufMut, SetLen};

/// Alignment of direct reads: buffer address, file offset and length (4 KiB covers every
/// logical block size Linux file systems use for `O_DIRECT`).
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed byte buffer aligned to [`DIRECT_ALIGN`], of a fixed capacity (a multiple of it),
/// with a length: the bytes a read filled.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of `cap` bytes rounded up to [`DIRECT_ALIGN`] (at least one block), all
    /// zero, of length 0.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let layout = Layout::from_size_align(cap, DIRECT_ALIGN).expect("a valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr) else {
            std::alloc::handle_alloc_error(layout);
        };
        AlignedBuf { ptr, cap, len: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Sets the length to `len` bytes (at most the capacity; the bytes are always
    /// initialized: the buffer starts zeroed).
    pub fn set_filled(&mut self, len: usize) {
        self.len = len.min(self.cap);
    }

    /// The whole capacity, for filling by a copy (the simulator's disk).
    pub fn spare(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `cap` initialized (zeroed, then written) bytes this value owns.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, DIRECT_ALIGN).expect("a valid layout");
        // SAFETY: allocated in `new` with this same layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the first `len` of the `cap` initialized bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("cap", &self.cap)
            .field("len", &self.len)
            .finish()
    }
}

impl IoBuf for AlignedBuf {
    fn as_init(&self) -> &[u8] {
        self
    }
}

impl SetLen for AlignedBuf {
    unsafe fn set_len(&mut self, len: usize) {
        self.set_filled(len);
    }
}

impl IoBufMut for AlignedBuf {
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: initialized bytes are valid `MaybeUninit<u8>`s, and every byte written
        // through this view is a byte (the buffer never holds anything uninitialized).
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<MaybeUninit<u8>>(), self.cap)
        }
    }
}

/// A file opened for direct reads on this loop's ring.
#[derive(Clone)]
pub struct DirectFile(compio::driver::SharedFd<File>);

impl std::fmt::Debug for DirectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DirectFile")
    }
}

impl DirectFile {
    /// Opens `path` read-only with `O_DIRECT`. Fails where the file system has no direct
    /// I/O (tmpfs before Linux 6.6, for one): EINVAL.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        Ok(DirectFile(compio::driver::SharedFd::new(file)))
    }

    /// Reads into `buf` (its whole capacity) from `offset`, a multiple of [`DIRECT_ALIGN`],
    /// until it is full or the file ends; the buffer's length is what was read.
    pub async fn read_into(
        &self,
        mut buf: AlignedBuf,
        offset: u64,
    ) -> (io::Result<()>, AlignedBuf) {
        if offset % DIRECT_ALIGN as u64 != 0 {
            return (
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("direct read at {offset}, not a multiple of {DIRECT_ALIGN}"),
                )),
                buf,
            );
        }
        buf.set_filled(0);
        let (res, mut buf) = self.read_at(buf, offset).await;
        let mut done = match res {
            Ok(n) => n,
            Err(e) => return (Err(e), buf),
        };
        // A read ends short at the end of the file, or (rarely) part way; read the rest
        // into a buffer of its own (the ring reads into a buffer from its start).
        while done < buf.capacity() && done > 0 && done % DIRECT_ALIGN == 0 {
            let rest = AlignedBuf::new(buf.capacity() - done);
            let (res, mut rest) = self.read_at(rest, offset + done as u64).await;
            match res {
                Ok(0) => break,
                Ok(n) => {
                    let n = n.min(buf.capacity() - done);
                    buf.spare()[done..done + n].copy_from_slice(&rest.spare()[..n]);
                    done += n;
                }
                Err(e) => return (Err(e), buf),
            }
        }
        buf.set_filled(done);
        (Ok(()), buf)
    }

    /// One read into `buf` from its start; the bytes read (EINTR tried again).
    async fn read_at(&self, mut buf: AlignedBuf, offset: u64) -> (io::Result<usize>, AlignedBuf) {
        loop {
            let op = compio::driver::op::ReadAt::new(self.0.clone(), offset, buf);
            let BufResult(res, op) = compio::runtime::submit(op).await;
            buf = compio::buf::IntoInner::into_inner(op);
            match res {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(n) => return (Ok(n.min(buf.capacity())), buf),
                Err(e) => return (Err(e), buf),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn an_aligned_buffer_is_aligned_zeroed_and_as_long_as_what_was_filled() {
        let mut b = AlignedBuf::new(5000);
        assert_eq!(b.capacity(), 2 * DIRECT_ALIGN);
        assert_eq!(b.as_init().as_ptr() as usize % DIRECT_ALIGN, 0);
        assert!(b.is_empty());
        b.spare()[..3].copy_from_slice(b"abc");
        b.set_filled(3);
        assert_eq!(&b[..], b"abc");
        b.set_filled(usize::MAX);
        assert_eq!(b.len(), 2 * DIRECT_ALIGN);
        assert!(b[3..].iter().all(|&x| x == 0));
    }

    #[test]
    fn a_direct_read_returns_the_files_bytes_and_stops_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let data: Vec<u8> = (0..(3 * DIRECT_ALIGN + 100) as u32)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let Ok(file) = DirectFile::open(&path) else {
            // No direct I/O on this file system: the catch-up path is off here too.
            return;
        };
        compio::runtime::Runtime::new().unwrap().block_on(async {
            let (res, buf) = file.read_into(AlignedBuf::new(2 * DIRECT_ALIGN), 0).await;
            res.unwrap();
            assert!(buf[..] == data[..2 * DIRECT_ALIGN]);
            let (res, buf) = file.read_into(buf, 2 * DIRECT_ALIGN as u64).await;
            res.unwrap();
            assert_eq!(buf.len(), DIRECT_ALIGN + 100);
            assert!(buf[..] == data[2 * DIRECT_ALIGN..]);
            let (res, _) = file.read_into(AlignedBuf::new(DIRECT_ALIGN), 10).await;
            assert!(res.is_err(), "an unaligned offset is refused");
        });
    }
}
