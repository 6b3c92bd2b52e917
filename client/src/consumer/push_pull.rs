//! The pull task of one queue of a push consumer: long-polls the queue's broker (the master,
//! or a slave while the master is down) from the next offset, hands what it gets to the
//! queue's consumption (concurrent batches, or the orderly queue's buffer), and stops pulling
//! while `queue_outstanding_max` messages of the queue are not consumed yet. Messages pulled
//! from the group's retry topic are shown under their original topic.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::concurrent::dispatch;
use super::orderly_queue::OrderlyQueue;
use super::push_state::{commit_queue, Inner};
use super::queue_state::QueueState;
use super::send_back::retry_topic;
use super::{pull_via, MessageModel, PullStatus};

/// Pulls `state`'s queue until it is released or the consumer stops.
pub(crate) async fn pull_loop(
    weak: Weak<Inner>,
    state: Arc<QueueState>,
    orderly: Option<Arc<OrderlyQueue>>,
) {
    let mut next = state.committable();
    // Every message of the group's retry topic is shown under its original topic.
    let from_retry = weak
        .upgrade()
        .is_some_and(|i| state.mq.topic == retry_topic(&i.group.name));
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if state.is_dropped() || inner.is_shut() {
            return;
        }
        if state.outstanding() >= inner.cfg.queue_outstanding_max {
            drop(inner);
            let notified = state.changed.notified();
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
            continue;
        }
        let selector = inner.group.selector(&state.mq.topic);
        let commit = match inner.cfg.model {
            MessageModel::Clustering => Some(state.committable()),
            MessageModel::Broadcasting => None,
        };
        let pull = pull_via(
            inner.inst(),
            &inner.group.reads,
            &inner.group.name,
            &state.mq,
            next,
            inner.cfg.pull_batch_max,
            inner.cfg.pull_bytes_max,
            &selector,
            inner.cfg.long_poll,
            commit,
        );
        let result = tokio::select! {
            r = pull => r,
            _ = state.until_dropped() => return,
        };
        match result {
            Ok(p) if p.slave_behind => {
                // The slave has not replicated up to `next` yet: wait for it (or the master).
                let pause = inner.cfg.pull_error_backoff;
                drop(inner);
                if state.sleep_or_dropped(pause).await {
                    return;
                }
            }
            Ok(r) => match r.status {
                PullStatus::Found => {
                    next = r.next_offset;
                    let mut messages = r.messages;
                    if from_retry {
                        for m in &mut messages {
                            m.retried = true;
                        }
                    }
                    state.received(messages.iter().map(|m| m.queue_offset), next);
                    match &orderly {
                        Some(oq) => oq.push(messages),
                        None => dispatch(&inner, &state, messages),
                    }
                }
                PullStatus::NoNewMessage | PullStatus::NoMatchedMessage => {
                    next = r.next_offset;
                    state.received([], next);
                }
                PullStatus::OffsetIllegal => {
                    log::warn!(
                        "{}: offset {next} is outside {}..{}; continuing at {}",
                        state.mq,
                        r.min_offset,
                        r.max_offset,
                        r.next_offset
                    );
                    next = r.next_offset;
                    state.moved_to(next);
                    commit_queue(&inner, &state).await;
                }
            },
            Err(e) => {
                log::debug!("pulling {}: {e}", state.mq);
                let pause = inner.cfg.pull_error_backoff;
                drop(inner);
                if state.sleep_or_dropped(pause).await {
                    return;
                }
            }
        }
    }
}
