//! Consumer groups: which clients are alive in each group (from heartbeats) and what they
//! subscribe to. Control path only (heartbeats every 30 s), behind a mutex. A client silent
//! for `CLIENT_EXPIRY_MS` leaves its groups, as RocketMQ's channel expiry does.

use std::collections::BTreeMap;

use ringmq_wire::command::heartbeat::{HeartbeatData, Subscription};

/// A client silent this long is dropped from its groups (RocketMQ: 120 s).
pub const CLIENT_EXPIRY_MS: i64 = 120_000;

#[derive(Debug, Clone)]
struct Member {
    last_seen_ms: i64,
    subscriptions: Vec<Subscription>,
}

/// Groups and their live members.
#[derive(Debug, Default)]
pub struct ConsumerGroups {
    groups: BTreeMap<String, BTreeMap<String, Member>>,
    producers: BTreeMap<String, BTreeMap<String, i64>>,
}

impl ConsumerGroups {
    /// Records a heartbeat; returns true if a group's membership changed.
    pub fn heartbeat(&mut self, hb: &HeartbeatData, now_ms: i64) -> bool {
        let mut changed = false;
        for g in &hb.consumer_groups {
            let members = self.groups.entry(g.group.clone()).or_default();
            let fresh = members
                .insert(
                    hb.client_id.clone(),
                    Member {
                        last_seen_ms: now_ms,
                        subscriptions: g.subscriptions.clone(),
                    },
                )
                .is_none();
            changed |= fresh;
        }
        for p in &hb.producer_groups {
            self.producers
                .entry(p.clone())
                .or_default()
                .insert(hb.client_id.clone(), now_ms);
        }
        changed
    }

    /// Removes a client from one group, or from all when `group` is `None`.
    pub fn unregister(&mut self, client_id: &str, group: Option<&str>) {
        for (name, members) in self.groups.iter_mut() {
            if group.is_none_or(|g| g == name) {
                members.remove(client_id);
            }
        }
        self.groups.retain(|_, m| !m.is_empty());
    }

    /// Live members of a group, sorted (the order clients balance queues over).
    pub fn members(&self, group: &str, now_ms: i64) -> Vec<String> {
        self.groups
            .get(group)
            .map(|m| {
                m.iter()
                    .filter(|(_, mem)| now_ms - mem.last_seen_ms < CLIENT_EXPIRY_MS)
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Group names with at least one member.
    pub fn names(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// Drops members silent for `CLIENT_EXPIRY_MS`.
    pub fn expire(&mut self, now_ms: i64) {
        for members in self.groups.values_mut() {
            members.retain(|_, m| now_ms - m.last_seen_ms < CLIENT_EXPIRY_MS);
        }
        self.groups.retain(|_, m| !m.is_empty());
    }

    /// Subscriptions of a group's members (topic -> expressions).
    pub fn subscriptions(&self, group: &str) -> Vec<Subscription> {
        let mut out: Vec<Subscription> = Vec::new();
        if let Some(members) = self.groups.get(group) {
            for m in members.values() {
                for s in &m.subscriptions {
                    if !out.iter().any(|o| o.topic == s.topic) {
                        out.push(s.clone());
                    }
                }
            }
        }
        out
    }
}
