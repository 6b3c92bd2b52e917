//! Releasing durable CommitLog pages from memory (`Disk::release_cache` on the real disk).
//!
//! A shard's log is written once and read mostly near its end, so without release the page
//! cache holds every byte the broker ever wrote until memory runs out. Each page the log
//! grows into is then a page of memory the process touches for the first time. On the
//! project's VM that is about 10x dearer than a page it touched before: a plain `pwrite` loop
//! takes ~28 µs of CPU per 100 KiB while it reuses memory and ~270 µs once it runs into
//! memory the hypervisor has to back first (docs/perf.md, "The append that slows down after a
//! few GB"). Dropping the pages of older, durable log bytes lets the kernel hand them out
//! again for the bytes written next.
//!
//! Releasing 256 MiB costs ~30 ms of kernel time (freeing 65,536 pages), so it runs on a
//! background thread, not the shard's loop: the shard unmaps the range from its own read map
//! (`madvise(MADV_DONTNEED)`: pages mapped by a process are not dropped by `fadvise`), then
//! hands a duplicated descriptor and the range to the thread, which calls
//! `posix_fadvise(POSIX_FADV_DONTNEED)`. The queue is bounded by [`RELEASE_QUEUE_MAX`]; a
//! request that does not fit is dropped (the pages stay until the kernel reclaims them).
//!
//! A second thread reads released ranges back ahead of a reader that reached them
//! (`posix_fadvise(POSIX_FADV_WILLNEED)`, see `CommitLog::read_ahead`): a consumer catching
//! up through released bytes would otherwise fault them in a page at a time, each fault a
//! disk read the shard's loop waits for.

use super::background::Helper;
use std::fs::File;
use std::os::unix::io::AsRawFd;

/// Release requests waiting for the background thread, per disk.
pub const RELEASE_QUEUE_MAX: usize = 16;
/// Page size assumed for rounding release ranges inwards.
const PAGE_BYTES: u64 = 4096;

/// What to tell the kernel about a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// `POSIX_FADV_DONTNEED`: drop its clean pages.
    Release,
    /// `POSIX_FADV_WILLNEED`: start reading it into the page cache.
    ReadAhead,
}

/// The background threads of one disk: releases on one (a helper at the lowest priority,
/// see [`super::background`]: nothing waits for a release), read-ahead on another (free to
/// leave the shard's core but at normal priority: a catch-up reader is faulting in what it
/// has not read ahead, and would starve a lowered thread on a core they share). Dropping it
/// stops the threads and waits for them.
pub struct Releaser {
    release: Helper<(File, u64, u64, Advice)>,
    read_ahead: Helper<(File, u64, u64, Advice)>,
}

impl Releaser {
    pub fn start() -> Self {
        let advise_one = |(file, offset, len, advice): (File, u64, u64, Advice)| {
            advise(&file, offset, len, advice)
        };
        Releaser {
            release: Helper::start("ringmq-release", true, RELEASE_QUEUE_MAX, advise_one),
            read_ahead: Helper::start("ringmq-readahead", false, RELEASE_QUEUE_MAX, advise_one),
        }
    }

    /// Queues `advice` for `len` bytes of `file` from `offset` (its own descriptor, so the
    /// store may close or remove the file meanwhile). False when the queue is full or the
    /// thread could not be started.
    pub fn request(&self, file: File, offset: u64, len: u64, advice: Advice) -> bool {
        let helper = match advice {
            Advice::Release => &self.release,
            Advice::ReadAhead => &self.read_ahead,
        };
        helper.offer((file, offset, len, advice))
    }
}

/// `[offset, offset + len)` shrunk to whole pages: `(start, len)`, `None` when no whole page
/// is inside.
pub fn whole_pages(offset: u64, len: u64) -> Option<(u64, u64)> {
    let start = offset.checked_add(PAGE_BYTES - 1)? / PAGE_BYTES * PAGE_BYTES;
    let end = offset.checked_add(len)? / PAGE_BYTES * PAGE_BYTES;
    (end > start).then(|| (start, end - start))
}

/// `posix_fadvise`: DONTNEED drops the range's clean, unmapped pages from the page cache,
/// WILLNEED reads it in (advice: an error changes nothing and is not reported).
fn advise(file: &File, offset: u64, len: u64, advice: Advice) {
    use nix::fcntl::PosixFadviseAdvice as A;
    let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    let how = match advice {
        Advice::Release => A::POSIX_FADV_DONTNEED,
        Advice::ReadAhead => A::POSIX_FADV_WILLNEED,
    };
    let _ = nix::fcntl::posix_fadvise(file.as_raw_fd(), off, n, how);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_shrink_to_whole_pages() {
        assert_eq!(whole_pages(0, 8192), Some((0, 8192)));
        assert_eq!(whole_pages(1, 8192), Some((4096, 4096)));
        assert_eq!(whole_pages(4096, 4095), None);
        assert_eq!(whole_pages(100, 10), None);
        assert_eq!(whole_pages(u64::MAX - 10, 5), None);
    }
}
