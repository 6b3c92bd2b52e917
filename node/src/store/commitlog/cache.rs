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
/// How far ahead of a reader in released bytes they are read back at once.
pub const READ_AHEAD_BYTES: u64 = 16 << 20;
/// Readers (read-ahead windows) followed at once; a reader beyond them takes the place of
/// the one seen longest ago.
pub const READ_AHEAD_READERS_MAX: usize = 16;

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

    /// A reader is at `physical_offset`: if that is in released bytes, the next
    /// [`READ_AHEAD_BYTES`] of them (not past the released end) are asked to be read back
    /// into memory, off the caller's thread, unless they were asked for already and the
    /// reader is not yet in the second half of what was. Each reader position has its own
    /// window (up to [`READ_AHEAD_READERS_MAX`]): consumers at different offsets do not
    /// restart each other's.
    pub fn read_ahead(&self, physical_offset: u64) {
        let released = self.cache_released;
        if physical_offset >= released || physical_offset < self.min_offset() {
            return;
        }
        let mut ends = self.read_ahead_ends.borrow_mut();
        let window = ends
            .iter()
            .position(|&e| physical_offset < e && e - physical_offset <= READ_AHEAD_BYTES);
        let from = match window {
            Some(i) => {
                let end = ends.remove(i);
                if end - physical_offset > READ_AHEAD_BYTES / 2 {
                    ends.push(end);
                    return;
                }
                end
            }
            None => {
                if ends.len() >= READ_AHEAD_READERS_MAX {
                    ends.remove(0);
                }
                physical_offset
            }
        };
        let to = physical_offset
            .saturating_add(READ_AHEAD_BYTES)
            .min(released);
        ends.push(to.max(from));
        if from >= to {
            return;
        }
        for seg in &self.segments {
            let (a, b) = (from.max(seg.start), to.min(seg.start + self.segment_bytes));
            if a < b {
                self.disk.read_ahead(&seg.file, a - seg.start, b - a);
            }
        }
    }

    /// Releases the durable bytes more than `cache_keep_bytes` below `synced_offset` that
    /// were not released yet, once there are [`CACHE_RELEASE_STEP_BYTES`] of them.
    pub(super) fn release_cache(&mut self) {
        if self.cache_keep_bytes == 0 {
            return;
        }
        let upto = self.synced_offset.saturating_sub(self.cache_keep_bytes);
        let from = self.cache_released.max(self.min_offset());
        if upto < from.saturating_add(CACHE_RELEASE_STEP_BYTES) {
            return;
        }
        for seg in &self.segments {
            let (a, b) = (
                from.max(seg.start),
                upto.min(seg.start + self.segment_bytes),
            );
            if a < b {
                self.disk.release_cache(&seg.file, a - seg.start, b - a);
            }
        }
        self.cache_released = upto;
    }
}
