//! Orderly consumption: each queue has one consuming task that hands its messages to the
//! listener in queue-offset order, one call at a time (calls of different queues still run
//! at once, at most `consume_concurrency`). In a clustering group the task calls the
//! listener only while this member holds the queue's broker lock ([`super::locks`]).
//!
//! A failed call (returned [`ConsumeResult::Retry`](super::ConsumeResult::Retry), or
//! panicked) suspends the queue for `suspend_current_queue`, then the same messages are
//! handed over again, so nothing after them is consumed first. A message that fails again
//! after it was already redelivered `max_reconsume_times` times (16 when the setting is 0,
//! RocketMQ's default limit) is sent to the group's dead-letter topic (send-back with delay
//! level -1) and counts as consumed, and the queue goes on. If that send-back fails, the
//! message stays and is retried in place after the suspension.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::listener::{Called, ConsumeContext};
use super::orderly_queue::OrderlyQueue;
use super::push_state::Inner;
use super::queue_state::QueueState;
use super::send_back::{send_back, SendBack, DELAY_LEVEL_DLQ};
use crate::batch::MessageBatch;

/// The limit an orderly consumer applies when `max_reconsume_times` is 0 (RocketMQ's
/// default `retryMaxTimes`; the client does not ask the broker for the group's value).
pub const ORDERLY_RECONSUME_TIMES_DEFAULT: u32 = 16;

/// How often a queue waiting for its lock looks again.
const LOCK_WAIT_PAUSE: Duration = Duration::from_millis(100);

/// The consuming task of one orderly queue; ends when the queue is released or the consumer
/// stops.
pub(crate) async fn consume_orderly(
    weak: Weak<Inner>,
    state: Arc<QueueState>,
    oq: Arc<OrderlyQueue>,
) {
    let mut attempt = 0u32;
    // After a failure: how many front messages make up the batch handed over again.
    let mut again: Option<usize> = None;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if state.is_dropped() || inner.is_shut() {
            return;
        }
        let batch = oq.front(again.unwrap_or(inner.cfg.consume_batch_max));
        if batch.is_empty() {
            drop(inner);
            tokio::select! {
                _ = oq.arrived.notified() => {}
                _ = state.until_dropped() => return,
            }
            continue;
        }
        if inner.uses_locks() && !oq.lock.is_valid() {
            drop(inner);
            if state.sleep_or_dropped(LOCK_WAIT_PAUSE).await {
                return;
            }
            continue;
        }
        let Ok(permit) = Arc::clone(&inner.permits).acquire_owned().await else {
            return;
        };
        if !state.try_begin() {
            return;
        }
        if inner.uses_locks() && !oq.lock.is_valid() {
            state.end();
            continue;
        }
        let ctx = ConsumeContext {
            queue: state.mq.clone(),
            attempt,
        };
        let called = super::traced::call(&inner, batch.clone(), ctx).await;
        drop(permit);
        let offsets: BTreeSet<u64> = batch.raw().iter().map(|m| m.queue_offset).collect();
        match called {
            Called::Aborted => {
                state.end();
                return;
            }
            Called::Success => {
                oq.remove(&offsets);
                state.acked(offsets);
                state.end();
                attempt = 0;
                again = None;
                continue;
            }
            Called::Retry | Called::Panicked => {}
        }
        let dead = dead_letter(&inner, &state, &batch).await;
        oq.remove(&dead);
        state.acked(dead.iter().copied());
        let alive: BTreeSet<u64> = offsets.difference(&dead).copied().collect();
        oq.failed(&alive);
        state.end();
        if alive.is_empty() {
            attempt = 0;
            again = None;
            continue;
        }
        attempt = attempt.saturating_add(1);
        again = Some(alive.len());
        let pause = inner.cfg.suspend_current_queue;
        drop(inner);
        log::debug!("{}: suspended for {pause:?} after a failed batch", state.mq);
        if state.sleep_or_dropped(pause).await {
            return;
        }
    }
}

/// Sends the messages of a failed batch that were already redelivered the maximum number
/// of times to the dead-letter topic; returns the offsets of those sent.
async fn dead_letter(inner: &Inner, state: &QueueState, batch: &MessageBatch) -> BTreeSet<u64> {
    let limit = match inner.cfg.max_reconsume_times {
        0 => ORDERLY_RECONSUME_TIMES_DEFAULT,
        n => n,
    };
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    let mut sent = BTreeSet::new();
    for m in batch.iter().filter(|m| m.reconsume_times() >= limit) {
        let r = send_back(
            inner.inst(),
            &inner.group.name,
            &state.mq,
            &SendBack::of_view(&m),
            DELAY_LEVEL_DLQ,
            inner.cfg.max_reconsume_times,
        )
        .await;
        match r {
            Ok(()) => {
                log::info!(
                    "{}: {} failed {} times; sent to the dead-letter topic",
                    state.mq,
                    m.msg_id(),
                    m.reconsume_times() + 1
                );
                sent.insert(m.queue_offset());
            }
            Err(e) => log::warn!(
                "{}: dead-lettering {} failed: {e}; retrying it in place",
                state.mq,
                m.msg_id()
            ),
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_records::raw;

    #[test]
    fn pending_messages_keep_offset_order_and_count_failures() {
        let q = OrderlyQueue::default();
        q.push((0..5).map(raw).collect());
        q.push(vec![raw(5)]);
        let front: Vec<u64> = q.front(3).iter().map(|m| m.queue_offset()).collect();
        assert_eq!(front, [0, 1, 2]);
        q.failed(&[0, 1].into());
        q.remove(&[1].into());
        let front = q.front(3);
        assert_eq!(
            front.iter().map(|m| m.queue_offset()).collect::<Vec<_>>(),
            [0, 2, 3]
        );
        // The records say 2 retries by the broker; one local redelivery adds one.
        assert_eq!(
            front
                .iter()
                .map(|m| m.reconsume_times())
                .collect::<Vec<_>>(),
            [3, 2, 2]
        );
        assert_eq!(q.front(100).len(), 5);
    }
}
