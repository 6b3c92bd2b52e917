//! Pulls a pull consumer makes ahead of its polls (`PullConsumerBuilder::pull_ahead`): per
//! queue, a chain of pulls, each started from the offset the previous answer said comes
//! next, as soon as that answer arrives, until the queue holds `depth` answers (the one in
//! flight counted). A poll takes a queue's oldest answer; the chain goes on from the newest.
//! The application's work on one poll's messages, and the consumer's decoding of one
//! answer, then overlap the next pulls' round trips, and a consumer of several queues has a
//! pull in flight per queue, as a push consumer does. With `depth` 1 a queue's next pull
//! starts only when a poll takes its answer.
//!
//! A chain stops at an answer that brought no message (the queue is read to its end, or an
//! error): the poll that takes it decides what comes next, as a poll without pulls ahead
//! would.
//!
//! A slot is keyed by its queue and remembers the offset each answer's pull started from: a
//! poll takes an answer only while the queue's position is still that offset (a seek, a
//! rebalance or shutdown drops the slot and aborts its task).

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{PullStatus, Pulled};
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
    /// Answers not taken yet, oldest first, each with the offset its pull started from.
    answers: VecDeque<(u64, Result<Pulled>)>,
    /// The pull in flight: the offset it started from, and its task.
    pull: Option<(u64, JoinHandle<()>)>,
    /// Tells this slot's task from a later one of the same queue.
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((_, t)) = self.pull.take() {
            t.abort();
        }
    }
}

impl Slot {
    /// The offset the queue's position must be at for this slot's oldest answer (or its
    /// pull in flight, when it holds none).
    fn first_offset(&self) -> Option<u64> {
        match self.answers.front() {
            Some((from, _)) => Some(*from),
            None => self.pull.as_ref().map(|(from, _)| *from),
        }
    }
}

/// Where a chain goes on after `answer` (of a pull from `from`): the next offset, when the
/// answer brought messages and moved forward.
fn follows(from: u64, answer: &Result<Pulled>) -> Option<u64> {
    match answer {
        Ok(p)
            if p.status == PullStatus::Found && !p.messages.is_empty() && p.next_offset > from =>
        {
            Some(p.next_offset)
        }
        _ => None,
    }
}

impl Ahead {
    fn slots(&self) -> MutexGuard<'_, BTreeMap<MessageQueue, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the queue's chain of pulls (`pull(offset)` makes the pull from `offset`) from
    /// `offset` unless the queue already has a slot; a slot whose chain stopped at `depth`
    /// answers goes on from its newest answer once it holds fewer.
    pub fn start<M, F>(self: &Arc<Self>, mq: &MessageQueue, offset: u64, depth: usize, pull: M)
    where
        M: Fn(u64) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Pulled>> + Send + 'static,
    {
        let depth = depth.max(1);
        let mut slots = self.slots();
        let from = match slots.get(mq) {
            None => offset,
            Some(slot) if slot.pull.is_some() || slot.answers.len() >= depth => return,
            Some(slot) => match slot.answers.back().and_then(|(f, a)| follows(*f, a)) {
                Some(next) => next,
                None => return,
            },
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let weak: Weak<Ahead> = Arc::downgrade(self);
        let key = mq.clone();
        let task = tokio::spawn(async move {
            let mut from = from;
            loop {
                let answer = pull(from).await;
                let Some(ahead) = weak.upgrade() else { return };
                let next = follows(from, &answer);
                let go_on = {
                    let mut slots = ahead.slots();
                    let Some(slot) = slots.get_mut(&key).filter(|s| s.id == id) else {
                        return;
                    };
                    slot.answers.push_back((from, answer));
                    match next.filter(|_| slot.answers.len() < depth) {
                        Some(next) => {
                            if let Some((at, _)) = slot.pull.as_mut() {
                                *at = next;
                            }
                            Some(next)
                        }
                        None => {
                            // The task ends here: forget its handle without aborting it.
                            drop(slot.pull.take());
                            None
                        }
                    }
                };
                ahead.answered.notify_one();
                match go_on {
                    Some(next) => from = next,
                    None => return,
                }
            }
        });
        let slot = slots.entry(mq.clone()).or_insert_with(|| Slot {
            answers: VecDeque::new(),
            pull: None,
            id,
        });
        slot.id = id;
        slot.pull = Some((from, task));
    }

    /// Whether the queue has a pull in flight or an answer waiting.
    pub fn has(&self, mq: &MessageQueue) -> bool {
        self.slots().contains_key(mq)
    }

    /// The queue's oldest answer, with the offset its pull started from, if it has come: an
    /// error, or messages no more than `room`. A bigger answer stays for a later poll.
    pub fn take(&self, mq: &MessageQueue, room: usize) -> Option<(u64, Result<Pulled>)> {
        let mut slots = self.slots();
        let slot = slots.get_mut(mq)?;
        let fits = match &slot.answers.front()?.1 {
            Ok(p) => p.messages.len() <= room,
            Err(_) => true,
        };
        if !fits {
            return None;
        }
        let taken = slot.answers.pop_front();
        if slot.answers.is_empty() && slot.pull.is_none() {
            slots.remove(mq);
        }
        taken
    }

    /// Drops (aborting its pull) the slot of every queue `keep` refuses, given the queue
    /// and the offset its oldest answer's pull (or the pull in flight) started from.
    pub fn retain(&self, keep: impl Fn(&MessageQueue, u64) -> bool) {
        self.slots()
            .retain(|mq, s| s.first_offset().is_some_and(|from| keep(mq, from)));
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
        self.slots().values().any(|s| s.pull.is_some())
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
    use crate::batch::test_records::raw;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// An answer of `n` messages from `from` (none: the queue's end).
    fn pulled(from: u64, n: u64) -> Pulled {
        Pulled {
            status: if n == 0 {
                PullStatus::NoNewMessage
            } else {
                PullStatus::Found
            },
            next_offset: from + n,
            min_offset: 0,
            max_offset: 1_000,
            messages: (from..from + n).map(raw).collect(),
            slave_behind: false,
            committed: false,
        }
    }

    fn mq(i: u32) -> MessageQueue {
        MessageQueue::new("t", "b", i)
    }

    async fn settle(ahead: &Ahead) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while ahead.in_flight() {
            assert!(ahead.wait(deadline).await, "a pull never answered");
        }
    }

    #[tokio::test]
    async fn an_answer_is_taken_once_with_its_offset_and_a_dropped_slot_answers_nothing() {
        let ahead = Arc::new(Ahead::default());
        ahead.start(&mq(0), 7, 1, |_| async { Ok(pulled(7, 0)) });
        // A second start for the same queue is ignored while the first is held.
        ahead.start(&mq(0), 9, 1, |_| async { panic!("a queue has one chain") });
        settle(&ahead).await;
        let (from, answer) = ahead.take(&mq(0), 0).expect("answered");
        assert_eq!(from, 7);
        assert_eq!(answer.expect("ok").next_offset, 7);
        assert!(ahead.take(&mq(0), 0).is_none());
        assert!(!ahead.has(&mq(0)));

        // A slot dropped while its pull is in flight never gets the answer, even when a new
        // slot of the same queue and offset is there by then.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rx = Mutex::new(Some(rx));
        ahead.start(&mq(1), 3, 1, move |_| {
            let rx = rx.lock().unwrap().take();
            async move {
                if let Some(rx) = rx {
                    let _ = rx.await;
                }
                Ok(pulled(3, 1))
            }
        });
        ahead.retain(|q, _| q != &mq(1));
        assert!(!ahead.has(&mq(1)));
        ahead.start(&mq(1), 3, 1, |_| std::future::pending());
        let _ = tx.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(ahead.in_flight());
        assert!(ahead.take(&mq(1), usize::MAX).is_none());
        ahead.clear();
        assert!(!ahead.in_flight());
    }

    #[tokio::test]
    async fn a_chain_pulls_from_where_each_answer_ended_until_it_holds_depth_answers() {
        let ahead = Arc::new(Ahead::default());
        let pulls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&pulls);
        let start = |ahead: &Arc<Ahead>, depth: usize| {
            let counted = Arc::clone(&counted);
            ahead.start(&mq(0), 10, depth, move |from| {
                counted.fetch_add(1, Ordering::Relaxed);
                // The queue ends at 40.
                let n = 40u64.saturating_sub(from).min(10);
                async move { Ok(pulled(from, n)) }
            })
        };
        start(&ahead, 3);
        settle(&ahead).await;
        assert_eq!(pulls.load(Ordering::Relaxed), 3, "three answers held");
        // Taken oldest first, each from where the last one ended.
        let (from, a) = ahead.take(&mq(0), usize::MAX).expect("first");
        assert_eq!((from, a.expect("ok").next_offset), (10, 20));
        // A poll starts the chain again from the newest answer, not from its position.
        start(&ahead, 3);
        settle(&ahead).await;
        // 40 is the queue's end: the chain stops at the empty answer.
        assert_eq!(pulls.load(Ordering::Relaxed), 4);
        let offsets: Vec<(u64, usize)> = std::iter::from_fn(|| ahead.take(&mq(0), usize::MAX))
            .map(|(from, a)| (from, a.expect("ok").messages.len()))
            .collect();
        assert_eq!(offsets, [(20, 10), (30, 10), (40, 0)]);
        assert!(!ahead.has(&mq(0)));
        start(&ahead, 3);
        settle(&ahead).await;
        // A poll whose room is smaller than an answer leaves it; seeking drops the chain.
        assert!(ahead.take(&mq(0), 5).is_none());
        ahead.retain(|_, from| from != 10);
        assert!(!ahead.has(&mq(0)));

        // Depth 1: a queue's next pull waits for a poll to take its answer.
        pulls.store(0, Ordering::Relaxed);
        start(&ahead, 1);
        settle(&ahead).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(pulls.load(Ordering::Relaxed), 1);
    }
}
