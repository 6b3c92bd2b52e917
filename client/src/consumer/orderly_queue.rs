//! An orderly queue's buffer: the pulled messages not yet consumed, in offset order, and
//! the queue's broker lock. The pull loop fills it (`push_pull.rs`), the consuming task
//! (`orderly.rs`) drains it, the rebalance (`push_queues.rs`) owns it.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Mutex;

use tokio::sync::Notify;

use super::locks::QueueLock;
use crate::batch::{MessageBatch, RawMessage};

/// What an orderly queue holds besides its [`QueueState`](super::queue_state::QueueState): the pulled messages not yet
/// consumed, in offset order, and its lock.
#[derive(Debug, Default)]
pub(crate) struct OrderlyQueue {
    pub lock: QueueLock,
    pending: Mutex<VecDeque<RawMessage>>,
    pub arrived: Notify,
}

impl OrderlyQueue {
    /// Appends pulled messages (pulls come in offset order).
    pub fn push(&self, messages: Vec<RawMessage>) {
        if messages.is_empty() {
            return;
        }
        self.lock_pending().extend(messages);
        self.arrived.notify_one();
    }

    /// The first `n` pending messages (shared with the pull, not copied).
    pub fn front(&self, n: usize) -> MessageBatch {
        MessageBatch::from_raw(self.lock_pending().iter().take(n).cloned().collect())
    }

    /// Forgets the pending messages at `offsets` (consumed or dead-lettered).
    pub fn remove(&self, offsets: &BTreeSet<u64>) {
        self.lock_pending()
            .retain(|m| !offsets.contains(&m.queue_offset));
    }

    /// Counts one more failed delivery of the pending messages at `offsets`.
    pub fn failed(&self, offsets: &BTreeSet<u64>) {
        for m in self.lock_pending().iter_mut() {
            if offsets.contains(&m.queue_offset) {
                m.redelivered = m.redelivered.saturating_add(1);
            }
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, VecDeque<RawMessage>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}
