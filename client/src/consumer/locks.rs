//! Broker-side queue locks of an orderly clustering consumer (LOCK_BATCH_MQ,
//! UNLOCK_BATCH_MQ): a member consumes a queue only while it holds the queue's lock on the
//! queue's broker (master), so no two members consume one queue at once.
//!
//! The broker lets a lock expire `rebalanceLockMaxLiveTime` (60 s by default) after it was
//! last taken or renewed; the owner renews every `lock_renew_interval` (20 s). The client
//! counts its own lock as valid for [`client_lock_live`] (1.5 renew intervals, 30 s by
//! default) after the broker last granted it, and stops calling the listener for a queue
//! once that has passed: that must end before the broker's expiry lets another member take
//! the queue, so the renew interval must stay well below the broker's lock lifetime.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::lock::{LockBatchRequest, LockBatchResponse, MessageQueue as WireQueue};
use tokio::time::Instant;

use crate::error::Result;
use crate::instance::Instance;
use crate::route::MessageQueue;

/// How long after the broker granted (or renewed) a lock the client still trusts it.
pub fn client_lock_live(renew_interval: Duration) -> Duration {
    renew_interval.saturating_mul(3) / 2
}

/// One queue's lock as this client knows it.
#[derive(Debug, Default)]
pub struct QueueLock {
    /// Until when the listener may be called for the queue (`None`: not held).
    valid_until: Mutex<Option<Instant>>,
}

impl QueueLock {
    /// The broker granted or renewed the lock at `at`.
    pub fn granted(&self, at: Instant, live: Duration) {
        *self.lock() = Some(at + live);
    }

    /// The broker did not renew it: the queue is no longer ours.
    pub fn lost(&self) {
        *self.lock() = None;
    }

    /// True while the lock may be trusted.
    pub fn is_valid(&self) -> bool {
        self.lock().is_some_and(|u| Instant::now() < u)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the brokers answered to a lock request.
#[derive(Debug, Default)]
pub struct Locked {
    /// The asked queues this client holds now.
    pub held: BTreeSet<MessageQueue>,
    /// Brokers that did not answer (or refused): nothing is known of their queues.
    pub unanswered: BTreeSet<String>,
}

/// Locks (or renews) `queues` for this client in `group`, one request per broker.
pub async fn lock_queues(inst: &Instance, group: &str, queues: &[MessageQueue]) -> Locked {
    let mut out = Locked::default();
    for (broker, qs) in by_broker(queues) {
        match lock_on_broker(inst, group, &qs, RequestCode::LockBatchMq).await {
            Ok(locked) => out.held.extend(locked),
            Err(e) => {
                log::debug!("locking {} queues of {broker} for {group}: {e}", qs.len());
                out.unanswered.insert(broker);
            }
        }
    }
    out
}

/// Releases `queues` held by this client (failures are logged: the locks then expire).
pub async fn unlock_queues(inst: &Instance, group: &str, queues: &[MessageQueue]) {
    for (broker, qs) in by_broker(queues) {
        if let Err(e) = lock_on_broker(inst, group, &qs, RequestCode::UnlockBatchMq).await {
            log::debug!("unlocking {} queues of {broker} for {group}: {e}", qs.len());
        }
    }
}

fn by_broker(queues: &[MessageQueue]) -> BTreeMap<String, Vec<MessageQueue>> {
    let mut out: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
    for q in queues {
        out.entry(q.broker_name.clone())
            .or_default()
            .push(q.clone());
    }
    out
}

/// One LOCK_BATCH_MQ or UNLOCK_BATCH_MQ to the master of the queues' broker (all of `qs`
/// are of one broker); for a lock, the queues it holds now.
async fn lock_on_broker(
    inst: &Instance,
    group: &str,
    qs: &[MessageQueue],
    code: RequestCode,
) -> Result<Vec<MessageQueue>> {
    let Some(first) = qs.first() else {
        return Ok(Vec::new());
    };
    let (addr, _) = inst.queue_endpoint(first).await?;
    let body = LockBatchRequest {
        consumer_group: group.to_string(),
        client_id: inst.id.clone(),
        queues: qs.iter().map(to_wire).collect(),
    }
    .to_vec()?;
    let answer = inst
        .broker_call(addr, None, code, &Empty, &body, inst.cfg.request_timeout)
        .await
        .and_then(|a| a.expect(&[Status::Success]));
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            // The queues' master may have changed: the next round asks the new one.
            if e.failover_suspect().is_some() {
                inst.refresh_route_after_failure(&first.topic, addr)
                    .await
                    .ok();
            }
            return Err(e);
        }
    };
    if code != RequestCode::LockBatchMq {
        return Ok(Vec::new());
    }
    let asked: BTreeSet<&MessageQueue> = qs.iter().collect();
    let locked: LockBatchResponse = answer.decode_body()?;
    Ok(locked
        .locked
        .into_iter()
        .map(|q| MessageQueue::new(q.topic, q.broker_name, q.queue_id))
        .filter(|q| asked.contains(q))
        .collect())
}

fn to_wire(q: &MessageQueue) -> WireQueue {
    WireQueue {
        topic: q.topic.clone(),
        broker_name: q.broker_name.clone(),
        queue_id: q.queue_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_trusted_for_one_and_a_half_renewals_until_lost() {
        assert_eq!(
            client_lock_live(Duration::from_secs(20)),
            Duration::from_secs(30)
        );
        let l = QueueLock::default();
        assert!(!l.is_valid(), "not held until granted");
        l.granted(Instant::now(), Duration::from_secs(30));
        assert!(l.is_valid());
        l.granted(Instant::now(), Duration::ZERO);
        assert!(!l.is_valid(), "expired: not renewed in time");
        l.granted(Instant::now(), Duration::from_secs(30));
        l.lost();
        assert!(!l.is_valid());
    }

    #[test]
    fn queues_are_grouped_per_broker() {
        let qs = [
            MessageQueue::new("t", "b", 1),
            MessageQueue::new("t", "a", 0),
            MessageQueue::new("u", "b", 0),
        ];
        let g = by_broker(&qs);
        assert_eq!(g.len(), 2);
        assert_eq!(g["b"].len(), 2);
        assert_eq!(g["a"], vec![MessageQueue::new("t", "a", 0)]);
    }
}
