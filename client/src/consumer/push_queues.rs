//! The queues a push consumer owns: taking them at a rebalance, releasing them, committing
//! their offsets, and (orderly clustering consumers) their broker locks.
//!
//! Rebalance: the group computes the target assignment; queues no longer in it are released
//! first (pulls stop, running listener calls are waited for up to `release_wait`, offsets
//! committed, then, for an orderly consumer, the broker lock released), then new queues are
//! taken. An orderly clustering consumer takes a queue only once the broker has granted it
//! the queue's lock; a queue another member still holds is skipped and asked for again at
//! the next rebalance, which comes soon (see [`Inner::is_unsettled`](super::push_state::Inner::is_unsettled)) rather than a whole
//! `rebalance_interval` later. A released queue whose listener call is still running after
//! `release_wait` is not unlocked: its lock expires on the broker instead, so no other member
//! can consume it while the call runs.
//!
//! Lock renewal (every `lock_renew_interval`): every owned queue's lock is asked for again;
//! a queue the broker no longer grants this member is released without unlocking (another
//! member holds it now); the queues of a broker that does not answer keep their locks until
//! the client-side validity runs out, when their consumption pauses.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::time::Instant;

use super::locks::{client_lock_live, lock_queues, unlock_queues};
use super::orderly::consume_orderly;
use super::orderly_queue::OrderlyQueue;
use super::push_pull::pull_loop;
use super::push_state::{commit_queue, Inner, Running};
use super::queue_state::QueueState;
use super::{start_offset, StartPosition};
use crate::error::Result;
use crate::route::MessageQueue;

/// Brings the owned queues to the group's current assignment.
pub(crate) async fn rebalance(inner: &Arc<Inner>) {
    let _g = inner.rebalancing.lock().await;
    if inner.is_shut() {
        return;
    }
    let current: BTreeSet<MessageQueue> = inner.queues().keys().cloned().collect();
    let assignment = inner.group.target_assignment(&current).await;
    let mut settled = assignment.settled;
    let target = assignment.queues;
    let removed: Vec<MessageQueue> = current.difference(&target).cloned().collect();
    let mut added: Vec<MessageQueue> = target.difference(&current).cloned().collect();
    release_all(inner, removed.clone(), true).await;
    let mut locked_at = None;
    if inner.uses_locks() && !added.is_empty() {
        let asked_at = Instant::now();
        let locked = lock_queues(inner.inst(), &inner.group.name, &added).await;
        let skipped = added.len() - locked.held.len();
        if skipped > 0 {
            log::debug!(
                "{}: {skipped} queues of {} are locked by another member or their broker did \
                 not answer; asking again soon",
                inner.inst().id,
                inner.cfg.group
            );
            settled = false;
        }
        added.retain(|q| locked.held.contains(q));
        locked_at = Some(asked_at);
    }
    if !removed.is_empty() || !added.is_empty() {
        log::info!(
            "{} rebalanced {}: +{} -{} queues",
            inner.inst().id,
            inner.cfg.group,
            added.len(),
            removed.len()
        );
    }
    for mq in added {
        if let Err(e) = start_queue(inner, mq.clone(), locked_at).await {
            log::warn!("starting {mq}: {e}; retrying at the next rebalance");
            settled = false;
        }
    }
    inner.set_unsettled(!settled);
}

/// Starts consuming `mq` from its committed offset (or the start position); `locked_at`:
/// when the broker lock was asked for (orderly clustering consumers).
async fn start_queue(
    inner: &Arc<Inner>,
    mq: MessageQueue,
    locked_at: Option<Instant>,
) -> Result<()> {
    let offset = match inner.offsets.read(&mq).await? {
        Some(o) => o,
        None => {
            // A retry queue holds only what this group sent back: start at its beginning
            // whatever the group's start position (RocketMQ does the same), or retries stored
            // before any member committed there would be skipped.
            let position = if ringmq_wire::command::is_retry_topic(&mq.topic) {
                StartPosition::First
            } else {
                inner.cfg.start
            };
            start_offset(inner.inst(), &inner.group.reads, &mq, position).await?
        }
    };
    log::debug!("{}: consuming {mq} from {offset}", inner.inst().id);
    let state = Arc::new(QueueState::new(mq.clone(), offset));
    let weak = Arc::downgrade(inner);
    let orderly = inner.cfg.orderly.then(|| {
        let oq = Arc::new(OrderlyQueue::default());
        if let Some(at) = locked_at {
            oq.lock
                .granted(at, client_lock_live(inner.cfg.lock_renew_interval));
        }
        oq
    });
    let mut tasks = vec![tokio::spawn(pull_loop(
        weak.clone(),
        Arc::clone(&state),
        orderly.clone(),
    ))];
    if let Some(oq) = &orderly {
        tasks.push(tokio::spawn(consume_orderly(
            weak,
            Arc::clone(&state),
            Arc::clone(oq),
        )));
    }
    inner.queues().insert(
        mq,
        Running {
            state,
            orderly,
            tasks,
        },
    );
    Ok(())
}

/// Releases queues: stops their pulls, waits for their listener calls, commits their
/// offsets; `unlock`: then releases the broker locks of those whose calls all ended.
pub(crate) async fn release_all(inner: &Arc<Inner>, mqs: Vec<MessageQueue>, unlock: bool) {
    let running: Vec<Running> = {
        let mut q = inner.queues();
        mqs.iter().filter_map(|mq| q.remove(mq)).collect()
    };
    for r in &running {
        r.state.drop_queue();
    }
    let mut idle = Vec::new();
    for r in running {
        if r.state.idle_within(inner.cfg.release_wait).await {
            idle.push(r.state.mq.clone());
        } else {
            log::warn!(
                "{}: listener calls still running after {:?}{}",
                r.state.mq,
                inner.cfg.release_wait,
                if inner.uses_locks() {
                    "; its lock is left to expire"
                } else {
                    ""
                }
            );
        }
        for t in &r.tasks {
            t.abort();
        }
        commit_queue(inner, &r.state).await;
    }
    if unlock && inner.uses_locks() && !idle.is_empty() {
        unlock_queues(inner.inst(), &inner.group.name, &idle).await;
    }
}

/// Asks the brokers again for the lock of every owned queue (see the module docs).
pub(crate) async fn renew_locks(inner: &Arc<Inner>) {
    let _g = inner.rebalancing.lock().await;
    if inner.is_shut() || !inner.uses_locks() {
        return;
    }
    let owned: Vec<(MessageQueue, Arc<OrderlyQueue>)> = inner
        .queues()
        .iter()
        .filter_map(|(q, r)| r.orderly.as_ref().map(|o| (q.clone(), Arc::clone(o))))
        .collect();
    if owned.is_empty() {
        return;
    }
    let asked: Vec<MessageQueue> = owned.iter().map(|(q, _)| q.clone()).collect();
    let asked_at = Instant::now();
    let locked = lock_queues(inner.inst(), &inner.group.name, &asked).await;
    let live = client_lock_live(inner.cfg.lock_renew_interval);
    let mut lost = Vec::new();
    for (q, oq) in owned {
        if locked.held.contains(&q) {
            oq.lock.granted(asked_at, live);
        } else if !locked.unanswered.contains(&q.broker_name) {
            log::warn!("{}: lost the lock of {q}; releasing it", inner.inst().id);
            oq.lock.lost();
            lost.push(q);
        }
    }
    if !lost.is_empty() {
        release_all(inner, lost, false).await;
        inner.set_unsettled(true);
    }
}
