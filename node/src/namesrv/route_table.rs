//! The route table: broker leases and topic routes, the state RocketMQ keeps in
//! `RouteInfoManager` (broker groups by name, their replicas by broker id, per-topic queue
//! data by broker name, last heartbeat times).
//!
//! Rules, RocketMQ's unless said otherwise:
//! - a broker group is a broker name; it belongs to one cluster and has replicas by broker
//!   id (`MASTER_ID` = 0 is the master). A registration refreshes the replica's lease.
//! - only a master's registration changes topic routes, and only when its `DataVersion`
//!   changed or it is the replica's first registration. ringmq treats that topic list as the
//!   broker's whole table: topics the master no longer lists lose this broker's queues
//!   (RocketMQ does so only with `deleteTopicWithBrokerRegistration`).
//! - an address registered under a new id of the same group replaces the old id (a slave
//!   promoted to master keeps its address).
//! - a replica is expired when `now_ms - last_heartbeat_ms > lease`, where the lease is the
//!   name server's expiry, or the registration's `heartbeat_timeout_ms` if that is shorter
//!   (0 = none asked). Exactly at the lease it is still alive, as in RocketMQ.
//! - when a group's last replica goes (expiry or unregister), its queues leave every topic
//!   and a topic left without queues is removed. While a slave remains, the routes stay, so
//!   consumers can still read from it.

use std::collections::{BTreeMap, BTreeSet};

use ringmq_wire::command::route::{
    perm, BrokerData, BrokerRegistration, BrokerReplica, ClusterInfo, DataVersion, QueueData,
    TopicConfig, TopicList, TopicRoute, MASTER_ID,
};

use super::NamesrvError;
use crate::limits;

/// One replica's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerKey {
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: u64,
}

/// A replica removed by `expire` or `unregister`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedBroker {
    pub key: BrokerKey,
    pub address: String,
    pub last_heartbeat_ms: u64,
    /// Topics removed because this was the last replica holding their only queues.
    pub topics_removed: Vec<String>,
}

/// What a registration changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterOutcome {
    /// First registration of this broker name and id (or first since it expired).
    pub new_broker: bool,
    /// The replica was registered before under another address.
    pub address_changed: bool,
    /// The group was registered under this other cluster before.
    pub cluster_changed_from: Option<String>,
    /// Other ids of the group that had this address and were replaced.
    pub replaced_ids: Vec<u64>,
    /// Topic routes were left as they were: a slave, or a master with an unchanged
    /// `DataVersion`.
    pub topics_unchanged: bool,
    /// Topics that gained this broker's queues.
    pub topics_added: Vec<String>,
    /// Topics whose queue data on this broker changed (counts, permission, placement).
    pub topics_updated: Vec<String>,
    /// Topics that lost this broker's queues (the master no longer lists them).
    pub topics_removed: Vec<String>,
    /// For a slave: its master's address and HA address, when the master is registered.
    pub master_address: Option<String>,
    /// For a slave: where to replicate from.
    pub master_ha_address: Option<String>,
}

/// Broker leases and topic routes. See the module doc for the rules.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    /// Broker name -> group.
    groups: BTreeMap<String, Group>,
    /// Topic -> broker name -> that broker's queues.
    topics: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// Replicas in all groups.
    replica_count: usize,
}

#[derive(Debug, Clone)]
struct Group {
    cluster: String,
    replicas: BTreeMap<u64, Lease>,
}

#[derive(Debug, Clone)]
struct Lease {
    replica: BrokerReplica,
    last_heartbeat_ms: u64,
    /// What the broker asked for; 0 = the name server's expiry.
    heartbeat_timeout_ms: u64,
    data_version: DataVersion,
}

impl Lease {
    fn is_expired(&self, now_ms: u64, expiry_ms: u64) -> bool {
        let lease_ms = match self.heartbeat_timeout_ms {
            0 => expiry_ms,
            asked => asked.min(expiry_ms),
        };
        now_ms.saturating_sub(self.last_heartbeat_ms) > lease_ms
    }
}

impl RouteTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// REGISTER_BROKER: adds or refreshes a replica at `now_ms` and, for a master with a new
    /// `DataVersion`, replaces its topic routes. Refused whole (table unchanged) if the
    /// registration is invalid or would exceed a limit.
    pub fn register(
        &mut self,
        reg: &BrokerRegistration,
        now_ms: u64,
    ) -> Result<RegisterOutcome, NamesrvError> {
        self.check_registration(reg)?;
        let mut out = RegisterOutcome::default();
        let group = self
            .groups
            .entry(reg.broker_name.clone())
            .or_insert_with(|| Group {
                cluster: reg.cluster.clone(),
                replicas: BTreeMap::new(),
            });
        if group.cluster != reg.cluster {
            out.cluster_changed_from =
                Some(std::mem::replace(&mut group.cluster, reg.cluster.clone()));
        }
        let replaced: Vec<u64> = group
            .replicas
            .iter()
            .filter(|(&id, lease)| id != reg.broker_id && lease.replica.address == reg.address)
            .map(|(&id, _)| id)
            .collect();
        for id in &replaced {
            group.replicas.remove(id);
        }
        let lease = Lease {
            replica: reg.replica(),
            last_heartbeat_ms: now_ms,
            heartbeat_timeout_ms: u64::from(reg.heartbeat_timeout_ms),
            data_version: reg.data_version,
        };
        let previous = group.replicas.insert(reg.broker_id, lease);
        let apply_topics = match &previous {
            None => true,
            Some(p) => p.data_version != reg.data_version,
        };
        out.new_broker = previous.is_none();
        out.address_changed = previous.is_some_and(|p| p.replica.address != reg.address);
        out.replaced_ids = replaced;
        if reg.broker_id != MASTER_ID {
            if let Some(master) = group.replicas.get(&MASTER_ID) {
                out.master_address = Some(master.replica.address.clone());
                out.master_ha_address = Some(master.replica.ha_address.clone());
            }
        }
        self.replica_count =
            self.replica_count + usize::from(out.new_broker) - out.replaced_ids.len();
        if reg.broker_id == MASTER_ID && apply_topics {
            self.replace_topics(&reg.broker_name, &reg.topics, &mut out);
        } else {
            out.topics_unchanged = true;
        }
        Ok(out)
    }

    /// BROKER_HEARTBEAT: refreshes a registered replica's lease. `false` = unknown (it
    /// expired or never registered), so the broker must register again.
    pub fn heartbeat(&mut self, broker_name: &str, broker_id: u64, now_ms: u64) -> bool {
        match self.lease_mut(broker_name, broker_id) {
            Some(lease) => {
                lease.last_heartbeat_ms = lease.last_heartbeat_ms.max(now_ms);
                true
            }
            None => false,
        }
    }

    /// UNREGISTER_BROKER: removes the replica if it is registered at `address` in
    /// `cluster` (an old instance cannot remove the one that replaced it).
    pub fn unregister(
        &mut self,
        cluster: &str,
        broker_name: &str,
        broker_id: u64,
        address: &str,
    ) -> Option<DroppedBroker> {
        let group = self.groups.get(broker_name)?;
        let lease = group.replicas.get(&broker_id)?;
        if group.cluster != cluster || lease.replica.address != address {
            return None;
        }
        self.drop_replica(broker_name, broker_id)
    }

    /// The periodic scan: drops every replica silent for longer than its lease (see the
    /// module doc), in broker name and id order.
    pub fn expire(&mut self, now_ms: u64, expiry_ms: u64) -> Vec<DroppedBroker> {
        let expired: Vec<(String, u64)> = self
            .groups
            .iter()
            .flat_map(|(name, group)| {
                group
                    .replicas
                    .iter()
                    .filter(|(_, lease)| lease.is_expired(now_ms, expiry_ms))
                    .map(|(&id, _)| (name.clone(), id))
            })
            .collect();
        expired
            .into_iter()
            .filter_map(|(name, id)| self.drop_replica(&name, id))
            .collect()
    }

    /// GET_ROUTEINFO_BY_TOPIC: the topic's queues and the brokers holding them; `None` =
    /// TOPIC_NOT_EXIST.
    pub fn route_by_topic(&self, topic: &str) -> Option<TopicRoute> {
        let queues = self.topics.get(topic)?;
        let brokers: Vec<BrokerData> = queues
            .keys()
            .filter_map(|name| self.broker_data(name))
            .collect();
        if brokers.is_empty() {
            return None;
        }
        Some(TopicRoute {
            topic: topic.to_owned(),
            brokers,
            queues: queues.values().cloned().collect(),
        })
    }

    /// GET_BROKER_CLUSTER_INFO: every broker group, by broker name.
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            brokers: self
                .groups
                .keys()
                .filter_map(|name| self.broker_data(name))
                .collect(),
        }
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic, sorted.
    pub fn topic_list(&self) -> TopicList {
        TopicList {
            topics: self.topics.keys().cloned().collect(),
        }
    }

    /// GET_TOPICS_BY_CLUSTER: topics with queues on a broker of `cluster`, sorted.
    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let in_cluster =
            |name: &String| self.groups.get(name).is_some_and(|g| g.cluster == cluster);
        TopicList {
            topics: self
                .topics
                .iter()
                .filter(|(_, queues)| queues.keys().any(in_cluster))
                .map(|(topic, _)| topic.clone())
                .collect(),
        }
    }

    /// DELETE_TOPIC_IN_NAMESRV: removes the topic's route, everywhere or only on the brokers
    /// of `cluster`. `false` = nothing was removed. A master re-adds the topic when it next
    /// registers a new `DataVersion` that still lists it.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        let Some(queues) = self.topics.get_mut(topic) else {
            return false;
        };
        let before = queues.len();
        match cluster {
            None => queues.clear(),
            Some(c) => {
                let groups = &self.groups;
                queues.retain(|name, _| groups.get(name).is_none_or(|g| g.cluster != c));
            }
        }
        let removed = queues.len() != before;
        if queues.is_empty() {
            self.topics.remove(topic);
        }
        removed
    }

    /// WIPE_WRITE_PERM_OF_BROKER: producers stop choosing this broker's queues (before a
    /// planned shutdown). Returns how many topics changed.
    pub fn wipe_write_perm(&mut self, broker_name: &str) -> usize {
        self.edit_perm(broker_name, |p| p & !perm::WRITE)
    }

    /// ADD_WRITE_PERM_OF_BROKER: undoes `wipe_write_perm`. Returns how many topics changed.
    pub fn add_write_perm(&mut self, broker_name: &str) -> usize {
        self.edit_perm(broker_name, |p| p | perm::WRITE)
    }

    /// The `DataVersion` a replica last registered (QUERY_DATA_VERSION).
    pub fn data_version(&self, broker_name: &str, broker_id: u64) -> Option<DataVersion> {
        Some(
            self.groups
                .get(broker_name)?
                .replicas
                .get(&broker_id)?
                .data_version,
        )
    }

    /// Registered replicas, all groups together.
    pub fn broker_count(&self) -> usize {
        self.replica_count
    }

    /// Topics with at least one broker's queues.
    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// Panics if an invariant of the module doc is broken; for tests and debug checks.
    pub fn check_invariants(&self) {
        let replicas: usize = self.groups.values().map(|g| g.replicas.len()).sum();
        assert_eq!(replicas, self.replica_count, "replica count drifted");
        for (name, group) in &self.groups {
            assert!(!group.replicas.is_empty(), "group {name} has no replica");
        }
        for (topic, queues) in &self.topics {
            assert!(!queues.is_empty(), "topic {topic} has no queues");
            for (name, queue) in queues {
                assert!(
                    self.groups.contains_key(name),
                    "topic {topic}: no broker {name}"
                );
                assert_eq!(&queue.broker_name, name);
            }
        }
    }

    // ------------------------------------------------------------------------------------

    /// Everything that can refuse a registration, checked before anything changes.
    fn check_registration(&self, reg: &BrokerRegistration) -> Result<(), NamesrvError> {
        check_name("cluster", &reg.cluster)?;
        check_name("broker name", &reg.broker_name)?;
        check_name("broker address", &reg.address)?;
        if !reg.ha_address.is_empty() {
            check_name("broker HA address", &reg.ha_address)?;
        }
        if reg.role.is_master() != (reg.broker_id == MASTER_ID) {
            return Err(NamesrvError::RoleMismatch {
                broker_name: reg.broker_name.clone(),
                broker_id: reg.broker_id,
                role: reg.role.name(),
                expected: if reg.role.is_master() {
                    "broker id 0"
                } else {
                    "a broker id > 0"
                },
            });
        }
        if reg.shard_count == 0 || usize::from(reg.shard_count) > limits::SHARDS_MAX {
            return Err(NamesrvError::BadShardCount {
                broker_name: reg.broker_name.clone(),
                shard_count: reg.shard_count,
                max: limits::SHARDS_MAX,
            });
        }
        let is_new = self.lease(&reg.broker_name, reg.broker_id).is_none();
        if is_new && self.replica_count >= limits::NAMESRV_BROKERS_MAX {
            return Err(full(
                "brokers",
                self.replica_count + 1,
                limits::NAMESRV_BROKERS_MAX,
            ));
        }
        if reg.broker_id == MASTER_ID {
            self.check_topics(reg)?;
        }
        Ok(())
    }

    fn check_topics(&self, reg: &BrokerRegistration) -> Result<(), NamesrvError> {
        if reg.topics.len() > limits::TOPICS_PER_BROKER_MAX {
            return Err(full(
                "topics of one broker",
                reg.topics.len(),
                limits::TOPICS_PER_BROKER_MAX,
            ));
        }
        let mut seen = BTreeSet::new();
        for config in &reg.topics {
            check_topic(config, reg.shard_count)?;
            if !seen.insert(config.topic.as_str()) {
                return Err(NamesrvError::DuplicateTopic {
                    topic: config.topic.clone(),
                });
            }
        }
        let new_topics = seen
            .iter()
            .filter(|t| !self.topics.contains_key(**t))
            .count();
        if self.topics.len() + new_topics > limits::NAMESRV_TOPICS_MAX {
            return Err(full(
                "topics",
                self.topics.len() + new_topics,
                limits::NAMESRV_TOPICS_MAX,
            ));
        }
        Ok(())
    }

    /// Makes `configs` the whole topic table of broker `name`, recording the changes.
    fn replace_topics(&mut self, name: &str, configs: &[TopicConfig], out: &mut RegisterOutcome) {
        let listed: BTreeSet<&str> = configs.iter().map(|c| c.topic.as_str()).collect();
        let gone: Vec<String> = self
            .topics
            .iter()
            .filter(|(topic, queues)| queues.contains_key(name) && !listed.contains(topic.as_str()))
            .map(|(topic, _)| topic.clone())
            .collect();
        for topic in gone {
            self.remove_queues(&topic, name);
            out.topics_removed.push(topic);
        }
        for config in configs {
            let data = QueueData::from_config(name, config);
            let queues = self.topics.entry(config.topic.clone()).or_default();
            match queues.insert(name.to_owned(), data.clone()) {
                None => out.topics_added.push(config.topic.clone()),
                Some(old) if old != data => out.topics_updated.push(config.topic.clone()),
                Some(_) => {}
            }
        }
    }

    /// Removes one replica; the group's routes go with its last replica.
    fn drop_replica(&mut self, name: &str, id: u64) -> Option<DroppedBroker> {
        let group = self.groups.get_mut(name)?;
        let lease = group.replicas.remove(&id)?;
        self.replica_count -= 1;
        let key = BrokerKey {
            cluster: group.cluster.clone(),
            broker_name: name.to_owned(),
            broker_id: id,
        };
        let mut topics_removed = Vec::new();
        if group.replicas.is_empty() {
            self.groups.remove(name);
            let topics: Vec<String> = self
                .topics
                .iter()
                .filter(|(_, queues)| queues.contains_key(name))
                .map(|(topic, _)| topic.clone())
                .collect();
            for topic in topics {
                if self.remove_queues(&topic, name) {
                    topics_removed.push(topic);
                }
            }
        }
        Some(DroppedBroker {
            key,
            address: lease.replica.address,
            last_heartbeat_ms: lease.last_heartbeat_ms,
            topics_removed,
        })
    }

    /// Removes broker `name`'s queues from `topic`; `true` if the topic went with them.
    fn remove_queues(&mut self, topic: &str, name: &str) -> bool {
        let Some(queues) = self.topics.get_mut(topic) else {
            return false;
        };
        queues.remove(name);
        if queues.is_empty() {
            self.topics.remove(topic);
            return true;
        }
        false
    }

    fn edit_perm(&mut self, broker_name: &str, edit: impl Fn(u8) -> u8) -> usize {
        let mut changed = 0;
        for queues in self.topics.values_mut() {
            if let Some(queue) = queues.get_mut(broker_name) {
                let new = edit(queue.perm);
                if new != queue.perm {
                    queue.perm = new;
                    changed += 1;
                }
            }
        }
        changed
    }

    fn broker_data(&self, name: &str) -> Option<BrokerData> {
        let group = self.groups.get(name)?;
        Some(BrokerData {
            cluster: group.cluster.clone(),
            broker_name: name.to_owned(),
            replicas: group
                .replicas
                .iter()
                .map(|(&id, lease)| (id, lease.replica.clone()))
                .collect(),
        })
    }

    fn lease(&self, name: &str, id: u64) -> Option<&Lease> {
        self.groups.get(name)?.replicas.get(&id)
    }

    fn lease_mut(&mut self, name: &str, id: u64) -> Option<&mut Lease> {
        self.groups.get_mut(name)?.replicas.get_mut(&id)
    }
}

fn check_name(what: &'static str, s: &str) -> Result<(), NamesrvError> {
    let detail = if s.is_empty() {
        "empty".to_owned()
    } else if s.len() > limits::NAME_BYTES_MAX {
        format!(
            "{} bytes, over the maximum of {}",
            s.len(),
            limits::NAME_BYTES_MAX
        )
    } else if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
        format!("{c:?} is not allowed in {s:?}")
    } else {
        return Ok(());
    };
    Err(NamesrvError::InvalidName { what, detail })
}

fn check_topic(config: &TopicConfig, shard_count: u16) -> Result<(), NamesrvError> {
    limits::validate_topic_format(&config.topic).map_err(|source| NamesrvError::InvalidTopic {
        topic: config.topic.clone(),
        source,
    })?;
    if config.queue_count() as usize > limits::QUEUES_PER_TOPIC_MAX {
        return Err(NamesrvError::TooManyQueues {
            topic: config.topic.clone(),
            count: config.queue_count(),
            max: limits::QUEUES_PER_TOPIC_MAX,
        });
    }
    config
        .validate(shard_count)
        .map_err(|source| NamesrvError::InvalidTopicConfig {
            topic: config.topic.clone(),
            source,
        })
}

fn full(what: &'static str, count: usize, max: usize) -> NamesrvError {
    NamesrvError::Full { what, count, max }
}

#[cfg(test)]
mod tests;
