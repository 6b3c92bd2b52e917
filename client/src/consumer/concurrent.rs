//! Concurrent consumption (the push consumer's default): each pulled batch is split into
//! listener calls of at most `consume_batch_max` messages, run at once (at most
//! `consume_concurrency` calls across all queues).
//!
//! A call that fails (returns [`ConsumeResult::Retry`](super::ConsumeResult::Retry) or
//! panics) in a clustering group has its messages sent back to the broker one by one
//! (delay level 0: the broker picks the next delay, or dead-letters a message retried
//! `max_reconsume_times` times); a message sent back counts as consumed, so the queue's
//! committed offset moves past it. A message whose send-back fails, and every failed message
//! of a broadcasting member (which has no retry topic), is handed to the listener again by
//! this consumer after `redeliver_backoff`, until it succeeds or the queue is released (then
//! the next owner gets it from the committed offset). Nothing is lost either way.

use std::sync::{Arc, Weak};

use super::listener::{Called, ConsumeContext};
use super::push_state::Inner;
use super::queue_state::QueueState;
use super::send_back::{send_back, SendBack, DELAY_LEVEL_BROKER};
use super::MessageModel;
use crate::batch::{MessageBatch, RawMessage};

/// Hands `messages` (pulled from `state`'s queue) to the listener in batches.
pub(crate) fn dispatch(inner: &Arc<Inner>, state: &Arc<QueueState>, messages: Vec<RawMessage>) {
    let max = inner.cfg.consume_batch_max;
    if messages.len() <= max {
        spawn_batch(inner, state, messages);
        return;
    }
    let mut it = messages.into_iter();
    loop {
        let batch: Vec<RawMessage> = it.by_ref().take(max).collect();
        if batch.is_empty() {
            return;
        }
        spawn_batch(inner, state, batch);
    }
}

fn spawn_batch(inner: &Arc<Inner>, state: &Arc<QueueState>, batch: Vec<RawMessage>) {
    if batch.is_empty() {
        return;
    }
    tokio::spawn(consume_batch(
        Arc::downgrade(inner),
        Arc::clone(state),
        MessageBatch::from_raw(batch),
    ));
}

async fn consume_batch(weak: Weak<Inner>, state: Arc<QueueState>, mut batch: MessageBatch) {
    let mut attempt = 0u32;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if state.is_dropped() {
            return;
        }
        let Ok(permit) = Arc::clone(&inner.permits).acquire_owned().await else {
            return;
        };
        if !state.try_begin() {
            return;
        }
        let ctx = ConsumeContext {
            queue: state.mq.clone(),
            attempt,
        };
        // The listener's copy is a reference count: the batch stays here for a retry.
        let called = super::traced::call(&inner, batch.clone(), ctx).await;
        drop(permit);
        match called {
            Called::Success => {
                state.acked(batch.raw().iter().map(|m| m.queue_offset));
                state.end();
                return;
            }
            Called::Aborted => {
                state.end();
                return;
            }
            Called::Retry | Called::Panicked => {}
        }
        if inner.cfg.model == MessageModel::Clustering && !state.is_dropped() {
            batch = send_back_all(&inner, &state, batch).await;
        }
        state.end();
        if batch.is_empty() {
            return;
        }
        attempt = attempt.saturating_add(1);
        for m in batch.raw_mut() {
            m.redelivered = m.redelivered.saturating_add(1);
        }
        let pause = inner.cfg.redeliver_backoff;
        drop(inner);
        if state.sleep_or_dropped(pause).await {
            return;
        }
    }
}

/// Sends every message of a failed batch back to its broker; acknowledges those sent and
/// returns the others (to be retried here).
async fn send_back_all(inner: &Inner, state: &QueueState, batch: MessageBatch) -> MessageBatch {
    let mut kept = Vec::new();
    let mut sent = Vec::new();
    for m in batch.raw() {
        let view = m.view();
        let r = send_back(
            inner.inst(),
            &inner.group.name,
            &state.mq,
            &SendBack::of_view(&view),
            DELAY_LEVEL_BROKER,
            inner.cfg.max_reconsume_times,
        )
        .await;
        match r {
            Ok(()) => sent.push(m.queue_offset),
            Err(e) => {
                log::warn!(
                    "sending {} of {} back failed: {e}; retrying it here",
                    view.msg_id(),
                    state.mq
                );
                kept.push(m.clone());
            }
        }
    }
    state.acked(sent);
    MessageBatch::from_raw(kept)
}
