//! Queue locks for orderly consumption (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42): per
//! (consumer group, queue) at most one client holds a queue, so two members never consume
//! one queue at once while a rebalance moves it. A lock lasts `rebalanceLockMaxLiveTime`
//! (default 60 s) after its last lock or renewal (owners renew every 20 s); it is released
//! at once when its holder unlocks, unregisters or its channel closes, so a crashed
//! member's queues move on within about a second rather than a minute.
//!
//! Control path (a few requests per member every 20 s), behind the broker's mutex. Pure:
//! the caller passes the time.

use std::collections::HashMap;

use ringmq_wire::command::MessageQueue;

#[derive(Debug, Clone)]
struct Held {
    client_id: String,
    renewed_ms: i64,
}

/// The locks of one broker.
#[derive(Debug, Default)]
pub struct QueueLocks {
    held: HashMap<(String, MessageQueue), Held>,
}

impl QueueLocks {
    /// Locks or renews `queues` for `client_id` in `group`; returns those it now holds. A
    /// queue held by another client whose lock is younger than `max_live_ms` is left out.
    pub fn lock(
        &mut self,
        group: &str,
        client_id: &str,
        queues: &[MessageQueue],
        now_ms: i64,
        max_live_ms: i64,
    ) -> Vec<MessageQueue> {
        let mut locked = Vec::new();
        for q in queues {
            let key = (group.to_owned(), q.clone());
            let free = match self.held.get(&key) {
                None => true,
                Some(h) => h.client_id == client_id || now_ms - h.renewed_ms >= max_live_ms,
            };
            if free {
                self.held.insert(
                    key,
                    Held {
                        client_id: client_id.to_owned(),
                        renewed_ms: now_ms,
                    },
                );
                locked.push(q.clone());
            }
        }
        locked
    }

    /// Releases the listed queues `client_id` holds in `group` (others' locks stay).
    pub fn unlock(&mut self, group: &str, client_id: &str, queues: &[MessageQueue]) {
        for q in queues {
            let key = (group.to_owned(), q.clone());
            if self
                .held
                .get(&key)
                .is_some_and(|h| h.client_id == client_id)
            {
                self.held.remove(&key);
            }
        }
    }

    /// Releases every lock of a client (it unregistered, its channel closed or it expired);
    /// returns how many.
    pub fn release_client(&mut self, client_id: &str) -> usize {
        let before = self.held.len();
        self.held.retain(|_, h| h.client_id != client_id);
        before - self.held.len()
    }

    /// Releases every lock a client holds in one group (it left the group).
    pub fn release_group_client(&mut self, group: &str, client_id: &str) {
        self.held
            .retain(|(g, _), h| !(g == group && h.client_id == client_id));
    }

    /// Drops locks older than `max_live_ms` (memory only: an expired lock is already free).
    pub fn expire(&mut self, now_ms: i64, max_live_ms: i64) {
        self.held.retain(|_, h| now_ms - h.renewed_ms < max_live_ms);
    }

    /// Who holds a queue of a group now, if anyone.
    pub fn holder(
        &self,
        group: &str,
        q: &MessageQueue,
        now_ms: i64,
        max_live_ms: i64,
    ) -> Option<&str> {
        self.held
            .get(&(group.to_owned(), q.clone()))
            .filter(|h| now_ms - h.renewed_ms < max_live_ms)
            .map(|h| h.client_id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: u32) -> MessageQueue {
        MessageQueue {
            topic: "t".into(),
            broker_name: "b".into(),
            queue_id: id,
        }
    }

    const LIVE: i64 = 60_000;

    #[test]
    fn one_holder_per_group_and_queue() {
        let mut l = QueueLocks::default();
        assert_eq!(l.lock("g", "a", &[q(0), q(1)], 0, LIVE), vec![q(0), q(1)]);
        assert_eq!(l.lock("g", "b", &[q(1), q(2)], 10, LIVE), vec![q(2)]);
        // Another group is independent.
        assert_eq!(l.lock("h", "b", &[q(1)], 10, LIVE), vec![q(1)]);
        assert_eq!(l.holder("g", &q(1), 10, LIVE), Some("a"));
        assert_eq!(l.holder("g", &q(2), 10, LIVE), Some("b"));
    }

    #[test]
    fn renewal_keeps_and_expiry_frees() {
        let mut l = QueueLocks::default();
        l.lock("g", "a", &[q(0)], 0, LIVE);
        assert_eq!(l.lock("g", "a", &[q(0)], 50_000, LIVE), vec![q(0)]);
        assert!(l.lock("g", "b", &[q(0)], 100_000, LIVE).is_empty());
        assert_eq!(l.lock("g", "b", &[q(0)], 110_000, LIVE), vec![q(0)]);
        assert_eq!(l.holder("g", &q(0), 110_000, LIVE), Some("b"));
        l.expire(170_000, LIVE);
        assert_eq!(l.holder("g", &q(0), 170_000, LIVE), None);
    }

    #[test]
    fn unlock_and_release_only_touch_the_holder() {
        let mut l = QueueLocks::default();
        l.lock("g", "a", &[q(0), q(1)], 0, LIVE);
        l.unlock("g", "b", &[q(0)]);
        assert_eq!(l.holder("g", &q(0), 1, LIVE), Some("a"));
        l.unlock("g", "a", &[q(0)]);
        assert_eq!(l.holder("g", &q(0), 1, LIVE), None);
        assert_eq!(l.release_client("a"), 1);
        assert_eq!(l.lock("g", "b", &[q(1)], 2, LIVE), vec![q(1)]);
    }
}
