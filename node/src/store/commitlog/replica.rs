//! Placing bytes shipped from a master: the slave's log must end up byte-identical, so
//! entries go exactly where the master put them (same offsets, same BLANKs), and a slave that
//! is ahead of its master (after an unclean master restart) is cut back to the master's end.

use ringmq_wire::record::BLANK_BYTES;

use super::CommitLog;
use crate::store::disk::Disk;
use crate::store::error::{Result, StoreError};

impl<D: Disk + Clone> CommitLog<D> {
    /// Reserves `len` bytes at exactly `at` (the log's end) for a replicated record, or for
    /// a BLANK when `blank` (which must run to the end of its segment).
    pub fn place_replicated(&mut self, at: u64, len: usize, blank: bool) -> Result<()> {
        if at != self.write_offset {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "replicated entry at {at}, but this log ends at {}",
                    self.write_offset
                ),
            });
        }
        self.open_active_segment()?;
        let seg_end = self.segment_end(at);
        let len = len as u64;
        if blank {
            if at + len != seg_end || len < BLANK_BYTES as u64 {
                return Err(StoreError::BadBatch {
                    detail: format!(
                        "BLANK of {len} bytes at {at} does not end the segment at {seg_end}: do master and slave use the same mappedFileSizeCommitLog?"
                    ),
                });
            }
        } else if at + len + BLANK_BYTES as u64 > seg_end {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "record of {len} bytes at {at} crosses the segment end at {seg_end}: do master and slave use the same mappedFileSizeCommitLog?"
                ),
            });
        }
        self.write_offset = at + len;
        Ok(())
    }

    /// Makes an empty log start at `at` (a segment start): a new slave catching up from a
    /// master whose oldest segments were already removed.
    pub fn start_empty_at(&mut self, at: u64) -> Result<()> {
        if !self.segments.is_empty() || self.write_offset != self.base {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "cannot start at {at}: the log is not empty (it ends at {})",
                    self.write_offset
                ),
            });
        }
        if at < self.base || (at - self.base) % self.segment_bytes != 0 {
            return Err(StoreError::BadBatch {
                detail: format!("{at} is not a segment start of this shard"),
            });
        }
        self.write_offset = at;
        self.synced_offset = at;
        Ok(())
    }

    /// Cuts the log back to `end` (a record boundary): zeroes the rest of that segment,
    /// removes later segments, syncs.
    pub fn truncate_to(&mut self, end: u64) -> Result<()> {
        if end < self.min_offset() || end > self.write_offset {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "cannot truncate to {end}: the log holds {}..{}",
                    self.min_offset(),
                    self.write_offset
                ),
            });
        }
        self.truncate_at(end)
    }
}

impl<D: Disk + Clone> CommitLog<D> {
    /// Records a sync done outside (see `Store::sync_plan`); never moves backwards or past
    /// the end.
    pub fn note_synced(&mut self, target: u64) {
        self.synced_offset = self.synced_offset.max(target.min(self.write_offset));
        self.release_cache();
    }
}
