//! `StoreError`: what the store can fail with, as values the broker maps to statuses.
//! `Fatal` means the store has poisoned itself (an fsync failed: the page cache may have
//! dropped dirty pages, so nothing it says about durability can be trusted any more).

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Errors of the CommitLog/ConsumeQueue store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The disk is too full to write safely; reads still work. Retry after space returns.
    #[error("disk full: {detail}")]
    DiskFull { detail: String },
    /// A record in the batch failed validation; nothing from the batch was stored.
    #[error("invalid record at batch offset {at}: {source}")]
    BadRecord {
        at: usize,
        #[source]
        source: ringmq_wire::WireError,
    },
    /// The batch was empty or larger than a segment can hold.
    #[error("batch rejected: {detail}")]
    BadBatch { detail: String },
    /// Corruption below the durable offset: reported, never truncated away.
    #[error("corrupt CommitLog at physical offset {offset} (durable up to {durable}): {detail}")]
    Corrupt {
        offset: u64,
        durable: u64,
        detail: String,
    },
    /// An fsync (or another write whose loss cannot be undone) failed; the store refuses all
    /// further writes. The broker must stop.
    #[error("fatal I/O error, store stopped: {context}: {source}")]
    Fatal {
        context: String,
        #[source]
        source: io::Error,
    },
    /// The store was stopped by an earlier fatal error.
    #[error("store stopped after an earlier fatal error")]
    Poisoned,
    /// Ordinary I/O failure with the file it concerned.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The on-disk layout does not match this store's configuration.
    #[error("store layout mismatch: {detail}")]
    Layout { detail: String },
    /// A lookup asked for something that is not there (offset out of range, unknown id).
    #[error("not found: {detail}")]
    NotFound { detail: String },
}

/// Shorthand for store results.
pub type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return StoreError::DiskFull {
                detail: format!("{}: {source}", path.into().display()),
            };
        }
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    /// True for errors after which the store accepts no more writes.
    pub fn is_fatal(&self) -> bool {
        matches!(self, StoreError::Fatal { .. } | StoreError::Poisoned)
    }
}
