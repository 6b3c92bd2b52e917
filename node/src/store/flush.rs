//! Syncing the log without blocking its owner: [`Store::sync_plan`] says which segment files
//! must be fdatasync'd to make everything appended so far durable; the owner runs those
//! syncs asynchronously (on its event loop's io_uring) while appends continue, then reports
//! them with [`Store::note_synced`]. Bytes appended after the plan was made are not covered.

use super::disk::Disk;
use super::Store;

/// What to fdatasync to make the log durable through `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPlan {
    pub target: u64,
    /// Start offsets of the segments holding bytes in `[synced, target)`.
    pub segments: Vec<u64>,
}

impl<D: Disk + Clone> Store<D> {
    /// The syncs that would make everything appended so far durable (empty when it is).
    pub fn sync_plan(&self) -> SyncPlan {
        let target = self.log.write_offset();
        let synced = self.log.synced_offset();
        let seg = self.log.segment_bytes();
        let segments = self
            .log
            .segments()
            .iter()
            .map(|s| s.start)
            .filter(|&start| start + seg > synced && start < target)
            .collect();
        SyncPlan { target, segments }
    }

    /// The disk this store writes through (for companions such as the key index).
    pub fn disk(&self) -> &D {
        &self.disk
    }

    /// Records that the syncs of a plan succeeded: the log is durable through `target`.
    pub fn note_synced(&mut self, target: u64) {
        self.log.note_synced(target);
    }
}
