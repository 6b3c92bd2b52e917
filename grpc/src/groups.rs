//! What the edge knows of consumer groups' settings on the brokers: whether a group
//! consumes orderly (RocketMQ's `consumeMessageOrderly`, set with `ringmq-ctl group update
//! G -o true` or mqadmin's updateSubGroup) and its retry limit. The Settings a consumer is
//! sent on Telemetry carry them (`fifo`, and `max_attempts` = retry limit + 1, as RocketMQ's
//! proxy computes it), and ReceiveMessage pops a FIFO group's queues orderly.
//!
//! Read from every master's GET_ALL_SUBSCRIPTIONGROUP_CONFIG and kept [`GROUP_TTL`]; a
//! group no master names is concurrent with the broker's default retry limit as the
//! masters report it (16 when no master answers). When the brokers cannot be asked, the
//! last answer is used, else the defaults. Bounded: [`GROUPS_MAX`] groups (all forgotten
//! when full).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringmq_client::Admin;

/// How long an answer is used before the brokers are asked again.
pub(crate) const GROUP_TTL: Duration = Duration::from_secs(5);
/// Most groups remembered.
pub(crate) const GROUPS_MAX: usize = 10_000;
/// RocketMQ's retry limit of a group with no settings (`maxReconsumeTimes`).
const RETRY_MAX_TIMES_DEFAULT: u32 = 16;

/// One group's settings as the edge applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupPolicy {
    pub(crate) orderly: bool,
    pub(crate) retry_max_times: u32,
}

impl Default for GroupPolicy {
    fn default() -> Self {
        GroupPolicy {
            orderly: false,
            retry_max_times: RETRY_MAX_TIMES_DEFAULT,
        }
    }
}

impl GroupPolicy {
    /// Deliveries before the dead-letter topic: the retries plus the first.
    pub(crate) fn max_attempts(&self) -> i32 {
        i32::try_from(self.retry_max_times)
            .unwrap_or(i32::MAX - 1)
            .saturating_add(1)
    }
}

/// The cache (see the module docs).
pub(crate) struct Groups {
    admin: Admin,
    known: Mutex<HashMap<String, (GroupPolicy, Instant)>>,
}

impl Groups {
    pub(crate) fn new(admin: Admin) -> Self {
        Groups {
            admin,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// `group`'s settings: remembered ones younger than [`GROUP_TTL`], else the brokers'.
    pub(crate) async fn policy(&self, group: &str) -> GroupPolicy {
        let last = self.lock().get(group).copied();
        if let Some((p, at)) = last {
            if at.elapsed() < GROUP_TTL {
                return p;
            }
        }
        match self.ask(group).await {
            Some(p) => {
                let mut known = self.lock();
                if known.len() >= GROUPS_MAX && !known.contains_key(group) {
                    known.clear();
                }
                known.insert(group.to_string(), (p, Instant::now()));
                p
            }
            None => last.map(|(p, _)| p).unwrap_or_default(),
        }
    }

    /// What the masters say of `group`; `None` when none could be asked.
    async fn ask(&self, group: &str) -> Option<GroupPolicy> {
        let brokers = match self.admin.brokers().await {
            Ok(b) => b,
            Err(e) => {
                log::warn!("settings of consumer group {group}: listing brokers: {e}");
                return None;
            }
        };
        let mut found: Option<GroupPolicy> = None;
        let mut answered = false;
        for b in brokers.iter().filter(|b| b.is_master()) {
            match self.admin.subscription_groups(b.addr).await {
                Ok(list) => {
                    answered = true;
                    if let Some(g) = list.groups.iter().find(|g| g.group == group) {
                        let p = found.get_or_insert(GroupPolicy {
                            orderly: false,
                            retry_max_times: g.retry_max_times,
                        });
                        p.orderly |= g.consume_message_orderly;
                    }
                }
                Err(e) => log::warn!("settings of consumer group {group} on {}: {e}", b.addr),
            }
        }
        answered.then(|| found.unwrap_or_default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (GroupPolicy, Instant)>> {
        // Every update is one insert or clear: a poisoned map is still whole.
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_the_retries_plus_the_first() {
        assert_eq!(GroupPolicy::default().max_attempts(), 17);
        let p = GroupPolicy {
            orderly: true,
            retry_max_times: 0,
        };
        assert_eq!(p.max_attempts(), 1);
        let big = GroupPolicy {
            orderly: false,
            retry_max_times: u32::MAX,
        };
        assert_eq!(big.max_attempts(), i32::MAX);
    }
}
