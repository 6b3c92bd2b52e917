//! Pulls a pull consumer keeps in flight between polls (`PullConsumerBuilder::pull_ahead`):
//! at most one per queue, started from the offset the queue's next poll reads, its answer
//! held until a poll takes it. The application's work on one poll's messages then overlaps
//! the next pull's round trip, and a consumer of several queues has one pull in flight per
//! queue, as a push consumer does.
//!
//! A slot is keyed by its queue and remembers the offset its pull started from: a poll takes
//! an answer only while the queue's position is still that offset (a seek, a rebalance or
//! shutdown drops the slot and aborts its task).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Pulled;
use crate::error::Result;
use crate::route::MessageQueue;

/// The pulls in flight, or answered and not taken yet, one slot per queue.
#[derive(Debug, Default)]
pub(super) struct Ahead {
    slots: Mutex<BTreeMap<MessageQueue, Slot>>,
    /// Signalled each time a pull answers.
    answered: Notify,
    next_id: AtomicU64,
}

#[derive(Debug)]
struct Slot {
    /// The offset the pull started from.
    offset: u64,
    /// Tells this slot's task from a later one of the same queue and offset.
    id: u64,
    task: Option<JoinHandle<()>>,
    answer: Option<Result<Pulled>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl Ahead {
    fn slots(&self) -> MutexGuard<'_, BTreeMap<MessageQueue, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `pull` (of `mq` from `offset`) unless the queue already has a slot.
    pub fn start<F>(self: &Arc<Self>, mq: &MessageQueue, offset: u64, pull: F)
    where
        F: Future<Output = Result<Pulled>> + Send + 'static,
    {
        let mut slots = self.slots();
        if slots.contains_key(mq) {
            return;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let weak: Weak<Ahead> = Arc::downgrade(self);
        let key = mq.clone();
        let task = tokio::spawn(async move {
            let answer = pull.await;
            let Some(ahead) = weak.upgrade() else { return };
            if let Some(slot) = ahead.slots().get_mut(&key) {
                if slot.id == id {
                    slot.answer = Some(answer);
                    slot.task = None;
                }
            }
            ahead.answered.notify_one();
        });
        slots.insert(
            mq.clone(),
            Slot {
                offset,
                id,
                task: Some(task),
                answer: None,
            },
        );
    }

    /// Whether the queue has a pull in flight or an answer waiting.
    pub fn has(&self, mq: &MessageQueue) -> bool {
        self.slots().contains_key(mq)
    }

    /// The queue's answer, with the offset its pull started from, if it has come: an error,
    /// or messages no more than `room`. A bigger answer stays for a later poll.
    pub fn take(&self, mq: &MessageQueue, room: usize) -> Option<(u64, Result<Pulled>)> {
        let mut slots = self.slots();
        let fits = match slots.get(mq)?.answer.as_ref()? {
            Ok(p) => p.messages.len() <= room,
            Err(_) => true,
        };
        if !fits {
            return None;
        }
        let mut slot = slots.remove(mq)?;
        slot.answer.take().map(|a| (slot.offset, a))
    }

    /// Drops (aborting its pull) the slot of every queue `keep` refuses, given the queue
    /// and the offset its pull started from.
    pub fn retain(&self, keep: impl Fn(&MessageQueue, u64) -> bool) {
        self.slots().retain(|mq, s| keep(mq, s.offset));
    }

    /// Drops the queue's slot, aborting its pull.
    pub fn remove(&self, mq: &MessageQueue) {
        self.slots().remove(mq);
    }

    /// Drops every slot.
    pub fn clear(&self) {
        self.slots().clear();
    }

    /// Whether some pull has not answered yet.
    pub fn in_flight(&self) -> bool {
        self.slots().values().any(|s| s.answer.is_none())
    }

    /// Waits for a pull to answer, until `deadline`. False once the deadline has passed.
    pub async fn wait(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.answered.notified())
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::PullStatus;
    use std::time::Duration;

    fn pulled(n: usize) -> Pulled {
        Pulled {
            status: PullStatus::Found,
            next_offset: n as u64,
            min_offset: 0,
            max_offset: n as u64,
            messages: Vec::new(),
            slave_behind: false,
            committed: false,
        }
    }

    fn mq(i: u32) -> MessageQueue {
        MessageQueue::new("t", "b", i)
    }

    #[tokio::test]
    async fn an_answer_is_taken_once_with_its_offset_and_a_dropped_slot_answers_nothing() {
        let ahead = Arc::new(Ahead::default());
        ahead.start(&mq(0), 7, async { Ok(pulled(0)) });
        // A second start for the same queue is ignored while the first is held.
        ahead.start(&mq(0), 9, async { panic!("a queue has one slot") });
        let deadline = Instant::now() + Duration::from_secs(5);
        while ahead.in_flight() {
            assert!(ahead.wait(deadline).await, "the pull never answered");
        }
        let (from, answer) = ahead.take(&mq(0), 0).expect("answered");
        assert_eq!(from, 7);
        assert_eq!(answer.expect("ok").next_offset, 0);
        assert!(ahead.take(&mq(0), 0).is_none());
        assert!(!ahead.has(&mq(0)));

        // A slot dropped while its pull is in flight never gets the answer, even when a new
        // slot of the same queue and offset is there by then.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        ahead.start(&mq(1), 3, async move {
            let _ = rx.await;
            Ok(pulled(1))
        });
        ahead.retain(|q, _| q != &mq(1));
        assert!(!ahead.has(&mq(1)));
        ahead.start(&mq(1), 3, std::future::pending());
        let _ = tx.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(ahead.in_flight());
        assert!(ahead.take(&mq(1), usize::MAX).is_none());
        ahead.clear();
        assert!(!ahead.in_flight());
    }
}
