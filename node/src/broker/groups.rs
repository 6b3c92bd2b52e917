//! Consumer groups: which clients are alive in each group (from heartbeats) and what they
//! subscribe to, and each client's channel (the connection its latest heartbeat came on,
//! where the broker sends it requests of its own). Control path only (heartbeats every
//! 30 s), behind a mutex. A client leaves its groups when it unregisters, when its channel
//! closes, or when it has been silent for `CLIENT_EXPIRY_MS` (RocketMQ's channel expiry);
//! every change of a group's membership is returned so the caller can notify the members.

use std::collections::BTreeMap;

use ringmq_wire::command::heartbeat::{HeartbeatData, Subscription};

/// A client silent this long is dropped from its groups (RocketMQ: 120 s).
pub const CLIENT_EXPIRY_MS: i64 = 120_000;

/// A client's channel: the shard serving the connection and the connection's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Channel {
    pub shard: u16,
    pub conn: u64,
}

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
    channels: BTreeMap<String, Channel>,
}

impl ConsumerGroups {
    /// Records a heartbeat that came on `channel`; returns the groups whose membership
    /// changed (this client joined them).
    pub fn heartbeat(
        &mut self,
        hb: &HeartbeatData,
        now_ms: i64,
        channel: Option<Channel>,
    ) -> Vec<String> {
        let mut changed = Vec::new();
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
            if fresh {
                changed.push(g.group.clone());
            }
        }
        for p in &hb.producer_groups {
            self.producers
                .entry(p.clone())
                .or_default()
                .insert(hb.client_id.clone(), now_ms);
        }
        if let Some(ch) = channel {
            self.channels.insert(hb.client_id.clone(), ch);
        }
        changed
    }

    /// Removes a client from one group, or from all when `group` is `None`; returns the
    /// groups it left.
    pub fn unregister(&mut self, client_id: &str, group: Option<&str>) -> Vec<String> {
        let mut left = Vec::new();
        for (name, members) in self.groups.iter_mut() {
            if group.is_none_or(|g| g == name) && members.remove(client_id).is_some() {
                left.push(name.clone());
            }
        }
        self.groups.retain(|_, m| !m.is_empty());
        if !self.is_known(client_id) {
            self.channels.remove(client_id);
        }
        left
    }

    /// A connection closed: every client whose channel it was leaves its consumer and
    /// producer groups. Returns those clients and the consumer groups they left.
    pub fn channel_closed(&mut self, channel: Channel) -> (Vec<String>, Vec<String>) {
        let clients: Vec<String> = self
            .channels
            .iter()
            .filter(|(_, c)| **c == channel)
            .map(|(id, _)| id.clone())
            .collect();
        let mut left = Vec::new();
        for id in &clients {
            self.channels.remove(id);
            for g in self.unregister(id, None) {
                if !left.contains(&g) {
                    left.push(g);
                }
            }
            for members in self.producers.values_mut() {
                members.remove(id);
            }
        }
        self.producers.retain(|_, m| !m.is_empty());
        (clients, left)
    }

    fn is_known(&self, client_id: &str) -> bool {
        self.groups.values().any(|m| m.contains_key(client_id))
            || self.producers.values().any(|m| m.contains_key(client_id))
    }

    /// The channel of a client, if it has one.
    pub fn channel(&self, client_id: &str) -> Option<Channel> {
        self.channels.get(client_id).copied()
    }

    /// Live producers of a producer group, most recently heard first.
    pub fn producers(&self, group: &str, now_ms: i64) -> Vec<String> {
        let mut out: Vec<(i64, String)> = self
            .producers
            .get(group)
            .map(|m| {
                m.iter()
                    .filter(|(_, seen)| now_ms - **seen < CLIENT_EXPIRY_MS)
                    .map(|(id, seen)| (*seen, id.clone()))
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        out.into_iter().map(|(_, id)| id).collect()
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

    /// For metrics: (live producer clients, live consumer clients, live members per
    /// consumer group). A client in several groups counts once.
    pub fn client_counts(&self, now_ms: i64) -> (u64, u64, Vec<(String, u64)>) {
        let live = |seen: i64| now_ms - seen < CLIENT_EXPIRY_MS;
        let producers: std::collections::BTreeSet<&str> = self
            .producers
            .values()
            .flat_map(|m| {
                m.iter()
                    .filter(|(_, s)| live(**s))
                    .map(|(id, _)| id.as_str())
            })
            .collect();
        let mut consumers = std::collections::BTreeSet::new();
        let mut per_group = Vec::with_capacity(self.groups.len());
        for (g, members) in &self.groups {
            let mut n = 0;
            for (id, m) in members {
                if live(m.last_seen_ms) {
                    consumers.insert(id.as_str());
                    n += 1;
                }
            }
            per_group.push((g.clone(), n));
        }
        (producers.len() as u64, consumers.len() as u64, per_group)
    }

    /// Group names with at least one member.
    pub fn names(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// Drops members and producers silent for `CLIENT_EXPIRY_MS`; returns the clients
    /// dropped from every group (their queue locks go too) and the consumer groups that
    /// changed.
    pub fn expire(&mut self, now_ms: i64) -> (Vec<String>, Vec<String>) {
        let mut changed = Vec::new();
        for (name, members) in self.groups.iter_mut() {
            let before = members.len();
            members.retain(|_, m| now_ms - m.last_seen_ms < CLIENT_EXPIRY_MS);
            if members.len() != before {
                changed.push(name.clone());
            }
        }
        self.groups.retain(|_, m| !m.is_empty());
        for members in self.producers.values_mut() {
            members.retain(|_, seen| now_ms - *seen < CLIENT_EXPIRY_MS);
        }
        self.producers.retain(|_, m| !m.is_empty());
        let gone: Vec<String> = self
            .channels
            .keys()
            .filter(|id| !self.is_known(id))
            .cloned()
            .collect();
        for id in &gone {
            self.channels.remove(id);
        }
        (gone, changed)
    }

    /// The channels of a group's live members (but `except`).
    pub fn member_channels(&self, group: &str, now_ms: i64, except: Option<&str>) -> Vec<Channel> {
        self.members(group, now_ms)
            .iter()
            .filter(|id| except != Some(id.as_str()))
            .filter_map(|id| self.channel(id))
            .collect()
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
