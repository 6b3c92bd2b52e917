//! Page-cache release behind the durable end of the log. Once the log is durable through
//! `synced_offset`, the bytes more than `cache_keep_bytes` below it are released from memory
//! with [`Disk::release_cache`] (advice: the bytes stay in their segment files, and reading
//! them reads the files). Consumers near the end and the key index read within the kept
//! window from memory; older bytes come from disk.
//!
//! Why: a log that is never released grows the page cache by every byte written, and each
//! new page is memory the broker touches for the first time. Where that is dear (the
//! project's VM: ~10x a reused page, docs/perf.md "The append that slows down after a few
//! GB"), appends slow down once the memory that was cheap runs out; released pages are
//! handed out again for the next bytes. Only durable (written-back, clean) bytes are
//! released, so durability does not change.

use super::CommitLog;
use crate::store::disk::Disk;

/// Least bytes released at once: fewer, larger requests (at ASYNC_FLUSH's default 500 ms
/// interval a fast producer makes a few hundred MB durable per sync).
pub const CACHE_RELEASE_STEP_BYTES: u64 = 8 << 20;
/// How far below where the last release ended each release starts. The kernel drops only
/// the page-cache folios wholly inside a released range, and a folio can be as large as
/// 2 MiB (x86-64's PMD size): one across the end of a release stays in memory until a later
/// release covers all of it. Releasing bytes already released again costs a lookup.
pub const RELEASE_OVERLAP_BYTES: u64 = 2 << 20;
/// How far ahead of a reader in released bytes they are read back at once.
pub const READ_AHEAD_BYTES: u64 = 16 << 20;
/// Readers (read-ahead windows) followed at once; a reader beyond them takes the place of
/// the one seen longest ago.
pub const READ_AHEAD_READERS_MAX: usize = 16;
/// Pulls in released bytes by other readers after which a reader that made none is taken
/// to have stopped: it no longer keeps what is behind the others in memory.
pub const READ_AHEAD_STALE_TURNS: u64 = 1000;

/// The stretch of released bytes read back for one reader position and not released again.
#[derive(Debug, Clone, Copy)]
pub struct ReadAheadWindow {
    /// Read back from here (bytes below were released again, or never read back).
    start: u64,
    /// Asked to be read back up to here.
    end: u64,
    /// The pull (counted over all readers in released bytes) that last used it.
    turn: u64,
}

impl<D: Disk + Clone> CommitLog<D> {
    /// Keeps `bytes` of durable log in memory behind the durable end and releases older
    /// ones (0 = release nothing).
    pub fn set_cache_keep_bytes(&mut self, bytes: u64) {
        self.cache_keep_bytes = bytes;
    }

    /// Bytes below this offset were released from memory.
    pub fn cache_released(&self) -> u64 {
        self.cache_released
    }

    /// A reader is at `physical_offset` (a pull, unless the broker reads released bytes
    /// itself: `Store::set_direct_catch_up`): if that is in released bytes, the next
    /// [`READ_AHEAD_BYTES`] of them (not past the released end) are asked to be read back
    /// into memory, off the caller's thread, unless they were asked for already and the
    /// reader is not yet in the second half of what was. Each reader position has its own
    /// window (up to [`READ_AHEAD_READERS_MAX`]): consumers at different offsets do not
    /// restart each other's.
    ///
    /// As a window moves on, what its reader read back more than [`READ_AHEAD_BYTES`]
    /// behind it is released again, unless another reader is behind that point: a reader
    /// catching up reads each byte once, and the page cache then recycles the same pages for
    /// the next read-ahead instead of growing by every byte read (pages the machine touches
    /// for the first time are the dear ones; docs/perf.md, "Catch-up reads recycle their
    /// pages").
    pub fn read_ahead(&self, physical_offset: u64) {
        let released = self.cache_released;
        if physical_offset >= released || physical_offset < self.min_offset() {
            return;
        }
        let mut windows = self.read_ahead_ends.borrow_mut();
        let turn = windows.iter().map(|w| w.turn).max().unwrap_or(0) + 1;
        let window = windows
            .iter()
            .position(|w| physical_offset < w.end && w.end - physical_offset <= READ_AHEAD_BYTES);
        let (start, from) = match window {
            Some(i) => {
                let mut w = windows.remove(i);
                w.turn = turn;
                if w.end - physical_offset > READ_AHEAD_BYTES / 2 {
                    windows.push(w);
                    return;
                }
                (w.start, w.end)
            }
            None => {
                if windows.len() >= READ_AHEAD_READERS_MAX {
                    windows.remove(0);
                }
                (physical_offset, physical_offset)
            }
        };
        let to = physical_offset
            .saturating_add(READ_AHEAD_BYTES)
            .min(released);
        // Read back before this reader: release it again unless another reader still
        // pulling is behind that point.
        let behind = physical_offset.saturating_sub(READ_AHEAD_BYTES);
        let other_behind = windows.iter().any(|w| {
            turn - w.turn <= READ_AHEAD_STALE_TURNS
                && w.end.saturating_sub(READ_AHEAD_BYTES) < behind
        });
        let start = if behind > start && !other_behind {
            let from = start.saturating_sub(RELEASE_OVERLAP_BYTES);
            self.each_segment_range(from, behind, |file, a, n| {
                self.disk.release_cache(file, a, n)
            });
            behind
        } else {
            start
        };
        windows.push(ReadAheadWindow {
            start,
            end: to.max(from),
            turn,
        });
        if from >= to {
            return;
        }
        self.each_segment_range(from, to, |file, a, n| self.disk.read_ahead(file, a, n));
    }

    /// Calls `f(file, offset in file, len)` for the part of `[from, to)` in each segment.
    fn each_segment_range(&self, from: u64, to: u64, mut f: impl FnMut(&D::File, u64, u64)) {
        for seg in &self.segments {
            let (a, b) = (from.max(seg.start), to.min(seg.start + self.segment_bytes));
            if a < b {
                f(&seg.file, a - seg.start, b - a);
            }
        }
    }

    /// Releases the durable bytes more than `cache_keep_bytes` below `synced_offset` that
    /// were not released yet, once there are [`CACHE_RELEASE_STEP_BYTES`] of them (or
    /// `cache_keep_bytes`, when that is less).
    pub(super) fn release_cache(&mut self) {
        if self.cache_keep_bytes == 0 {
            return;
        }
        let upto = self.synced_offset.saturating_sub(self.cache_keep_bytes);
        let from = self.cache_released.max(self.min_offset());
        let step = CACHE_RELEASE_STEP_BYTES.min(self.cache_keep_bytes);
        if upto < from.saturating_add(step) {
            return;
        }
        let from = from
            .saturating_sub(RELEASE_OVERLAP_BYTES)
            .max(self.min_offset());
        self.each_segment_range(from, upto, |file, a, n| self.disk.release_cache(file, a, n));
        self.cache_released = upto;
    }
}
