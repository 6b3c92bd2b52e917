//! The slave's side of a replication link: checks each shipment against its log end and its
//! epochs, and decides what to acknowledge. The shard task does the I/O and the appends.

use crate::store::epoch::EpochEntry;

/// A shipment header as the slave sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Push {
    /// Physical offset of the first shipped byte.
    pub offset: u64,
    /// Log offset the shipment covers up to (past a BLANK: the segment end).
    pub end: u64,
    /// The master's log end when it sent this (for lag).
    pub master_end: u64,
    /// The master epoch that wrote the shipped bytes (0: before any epoch).
    pub epoch: u32,
    /// Where that epoch starts.
    pub epoch_start: u64,
}

/// What to do with a shipment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnPush {
    /// Append the body at `offset` (it continues the slave's log); when `new_epoch`, first
    /// record that the push's epoch starts at its `epoch_start`.
    Append { new_epoch: bool },
    /// A heartbeat (empty body): acknowledge the current end again.
    Heartbeat,
    /// The stream does not continue this log: drop the link and join again.
    Resync { reason: String },
}

/// Checks a shipment against the slave's log end and its newest epoch entry.
pub fn on_push(
    push: &Push,
    body_len: usize,
    local_end: u64,
    local_last: Option<EpochEntry>,
) -> OnPush {
    if body_len == 0 {
        return OnPush::Heartbeat;
    }
    if push.offset != local_end {
        return OnPush::Resync {
            reason: format!(
                "master shipped bytes at {}, this slave's log ends at {local_end}",
                push.offset
            ),
        };
    }
    if push.end < push.offset + body_len as u64 {
        return OnPush::Resync {
            reason: format!("shipment claims to end at {} before its bytes do", push.end),
        };
    }
    let (last_epoch, last_start) = local_last.map_or((0, 0), |e| (e.epoch, e.start_offset));
    if push.epoch < last_epoch
        || (push.epoch == last_epoch && push.epoch > 0 && push.epoch_start != last_start)
    {
        return OnPush::Resync {
            reason: format!(
                "master shipped bytes of epoch {} (from {}) at {}, this slave's log is at epoch {last_epoch} (from {last_start})",
                push.epoch, push.epoch_start, push.offset
            ),
        };
    }
    let new_epoch = push.epoch > last_epoch;
    if new_epoch && (push.epoch_start > push.offset || push.epoch_start < last_start) {
        return OnPush::Resync {
            reason: format!(
                "epoch {} starts at {}, which is not between this slave's last epoch start {last_start} and the shipment at {}",
                push.epoch, push.epoch_start, push.offset
            ),
        };
    }
    OnPush::Append { new_epoch }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(offset: u64, end: u64, epoch: u32, epoch_start: u64) -> Push {
        Push {
            offset,
            end,
            master_end: 300,
            epoch,
            epoch_start,
        }
    }

    #[test]
    fn pushes() {
        let p = push(100, 200, 0, 0);
        let append = OnPush::Append { new_epoch: false };
        assert_eq!(on_push(&p, 100, 100, None), append);
        assert_eq!(on_push(&p, 0, 100, None), OnPush::Heartbeat);
        assert!(matches!(on_push(&p, 100, 90, None), OnPush::Resync { .. }));
        assert!(matches!(on_push(&p, 150, 100, None), OnPush::Resync { .. }));
    }

    #[test]
    fn epochs_of_pushes() {
        let e = |epoch, start_offset| {
            Some(EpochEntry {
                epoch,
                start_offset,
            })
        };
        // The first bytes of epoch 2, which began at 100.
        assert_eq!(
            on_push(&push(100, 200, 2, 100), 100, 100, e(1, 0)),
            OnPush::Append { new_epoch: true }
        );
        // More of epoch 2.
        assert_eq!(
            on_push(&push(150, 200, 2, 100), 50, 150, e(2, 100)),
            OnPush::Append { new_epoch: false }
        );
        // A slave that joined in the middle of epoch 2 learns where it began.
        assert_eq!(
            on_push(&push(150, 200, 2, 100), 50, 150, e(1, 0)),
            OnPush::Append { new_epoch: true }
        );
        // An older epoch than this log's, or epoch 2 from elsewhere: rejoin.
        assert!(matches!(
            on_push(&push(150, 200, 1, 0), 50, 150, e(2, 100)),
            OnPush::Resync { .. }
        ));
        assert!(matches!(
            on_push(&push(150, 200, 2, 120), 50, 150, e(2, 100)),
            OnPush::Resync { .. }
        ));
        // An epoch that would start after the shipped bytes, or before the last epoch.
        assert!(matches!(
            on_push(&push(150, 200, 3, 160), 50, 150, e(2, 100)),
            OnPush::Resync { .. }
        ));
        assert!(matches!(
            on_push(&push(150, 200, 3, 50), 50, 150, e(2, 100)),
            OnPush::Resync { .. }
        ));
        // Heartbeats carry no bytes and change nothing.
        assert_eq!(
            on_push(&push(150, 150, 1, 0), 0, 150, e(2, 100)),
            OnPush::Heartbeat
        );
    }
}
