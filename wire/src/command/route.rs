//! Route data shared by the broker, the name server and clients: topic configs with their
//! queue-to-shard placement, broker addresses by id, per-broker queue data, a topic's route,
//! cluster info, and the registration a broker sends to every name server. Also the
//! GET_ROUTEINFO_BY_TOPIC request.
//!
//! Placement rule (documented in `docs/wire.md`; the broker calls [`shard_of`]): queue `q`
//! of topic `t` lives on shard `(fnv1a32(t) + q) % shard_count`, stable (it decides which
//! CommitLog holds a queue) and spread so single-queue topics do not all land on shard 0.
//! The broker publishes each topic's placement explicitly ([`TopicConfig::queue_shards`]) so
//! clients never depend on the rule, and a later broker may place queues differently.
//!
//! These types travel in frame *bodies* (they grow with the cluster; a header is capped at
//! 64 KiB), encoded with the same rules as headers ([`crate::codec`]). Decoding checks the
//! format only; [`TopicConfig::validate`] checks the placement against the broker's shards.

use std::collections::BTreeMap;

use crate::error::{Result, WireError};

/// Topic and queue permission bits, RocketMQ's `PermName`.
pub mod perm {
    /// Prefer this broker's queues (RocketMQ PERM_PRIORITY).
    pub const PRIORITY: u8 = 8;
    pub const READ: u8 = 4;
    pub const WRITE: u8 = 2;
    /// A topic inherits this from its template (RocketMQ PERM_INHERIT).
    pub const INHERIT: u8 = 1;
    /// The default for a new topic.
    pub const READ_WRITE: u8 = READ | WRITE;
    /// Every defined bit.
    pub const ALL: u8 = PRIORITY | READ | WRITE | INHERIT;

    pub fn is_readable(perm: u8) -> bool {
        perm & READ != 0
    }

    pub fn is_writeable(perm: u8) -> bool {
        perm & WRITE != 0
    }
}

/// The broker id of a master (RocketMQ `MixAll.MASTER_ID`); slaves have ids 1, 2, ...
pub const MASTER_ID: u64 = 0;

/// Most shards one broker may have (placement entries are u16).
pub const SHARDS_MAX: usize = 1024;

/// FNV-1a (32 bits) of a topic name, the spread term of [`shard_of`].
pub fn topic_hash(topic: &str) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for b in topic.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The shard that owns queue `queue_id` of `topic` on a broker with `shard_count` shards:
/// `(topic_hash(topic) + queue_id) % shard_count` (at least one shard; 0 is treated as 1).
pub fn shard_of(topic: &str, queue_id: u32, shard_count: u16) -> u16 {
    let n = u32::from(shard_count.max(1));
    // The remainder is below shard_count, so it fits in u16.
    ((topic_hash(topic) % n + queue_id % n) % n) as u16
}

/// The broker name RocketMQ (remoting) clients know shard `shard` of broker `broker_name` by,
/// when the broker announces its shards' own addresses ([`BrokerReplica::shard_addresses`]):
/// `<broker_name>@<shard>`.
pub fn shard_broker_name(broker_name: &str, shard: u16) -> String {
    format!("{broker_name}@{shard}")
}

/// The broker name and shard of a name made by [`shard_broker_name`].
pub fn split_shard_broker_name(name: &str) -> Option<(&str, u16)> {
    let (broker, shard) = name.rsplit_once('@')?;
    Some((broker, shard.parse().ok()?))
}

/// The placement [`shard_of`] gives to queues `0..queue_count` of `topic`.
pub fn default_placement(topic: &str, queue_count: u32, shard_count: u16) -> Vec<u16> {
    (0..queue_count)
        .map(|q| shard_of(topic, q, shard_count))
        .collect()
}

crate::wire_enum! {
    /// A broker's replication role (`brokerRole` in broker.properties).
    pub enum BrokerRole: u8 ("broker role") {
        AsyncMaster = 0 => "ASYNC_MASTER",
        SyncMaster = 1 => "SYNC_MASTER",
        Slave = 2 => "SLAVE",
    }
}

impl BrokerRole {
    pub fn is_master(self) -> bool {
        self != BrokerRole::Slave
    }
}

crate::wire_struct! {
    /// Version of a broker's topic table (RocketMQ `DataVersion`): the name server skips
    /// rebuilding routes when a registration carries the version it already has.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub struct DataVersion {
        pub state_version: u64,
        pub timestamp_ms: i64,
        pub counter: u64,
    }
}

crate::wire_struct! {
    /// One topic on one broker.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TopicConfig {
        pub topic: String,
        pub read_queue_count: u32,
        pub write_queue_count: u32,
        /// [`perm`] bits.
        pub perm: u8,
        /// Shard of each queue: entry `q` is the shard of queue `q`; one entry per queue
        /// (`max(read_queue_count, write_queue_count)` entries).
        pub queue_shards: Vec<u16>,
        /// Free-form topic attributes (RocketMQ 5 `attributes`, e.g. `message.type`).
        pub attributes: BTreeMap<String, String>,
    }
}

impl TopicConfig {
    /// A read-write topic with `queue_count` read and write queues placed by [`shard_of`].
    pub fn new(topic: impl Into<String>, queue_count: u32, shard_count: u16) -> Self {
        let topic = topic.into();
        TopicConfig {
            queue_shards: default_placement(&topic, queue_count, shard_count),
            topic,
            read_queue_count: queue_count,
            write_queue_count: queue_count,
            perm: perm::READ_WRITE,
            attributes: BTreeMap::new(),
        }
    }

    /// Number of queues that exist (read or write).
    pub fn queue_count(&self) -> u32 {
        self.read_queue_count.max(self.write_queue_count)
    }

    /// The shard of `queue_id`, if the queue exists.
    pub fn shard_of_queue(&self, queue_id: u32) -> Option<u16> {
        self.queue_shards.get(queue_id as usize).copied()
    }

    /// Checks what decoding cannot: a non-empty topic, known permission bits, one placement
    /// entry per queue, and every shard below `shard_count`.
    pub fn validate(&self, shard_count: u16) -> Result<()> {
        if self.topic.is_empty() {
            return Err(WireError::Invalid {
                what: "topic",
                detail: "empty",
            });
        }
        if self.perm & !perm::ALL != 0 {
            return Err(WireError::Invalid {
                what: "perm",
                detail: "unknown permission bits",
            });
        }
        if self.queue_shards.len() != self.queue_count() as usize {
            return Err(WireError::Invalid {
                what: "queue_shards",
                detail: "needs one entry per queue",
            });
        }
        if self.queue_shards.iter().any(|&s| s >= shard_count) {
            return Err(WireError::Invalid {
                what: "queue_shards",
                detail: "shard out of range",
            });
        }
        Ok(())
    }
}

crate::wire_struct! {
    /// Every topic config of a broker: the body of a GET_ALL_TOPIC_CONFIG response.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct TopicConfigTable {
        pub data_version: DataVersion,
        pub topics: Vec<TopicConfig>,
    }
}

crate::wire_struct! {
    /// One broker process (a master or a slave) of a broker group.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BrokerReplica {
        /// `host:port` clients connect to.
        pub address: String,
        /// `host:port` of its replication listener.
        pub ha_address: String,
        pub role: BrokerRole,
        pub shard_count: u16,
        /// The broker's software version, free-form.
        pub version: String,
        /// `host:port` of each shard's own listener, by shard id (empty with one shard): a
        /// connection there is served by that shard. Remoting routes announce each shard as
        /// a broker of its own at this address.
        pub shard_addresses: Vec<String>,
    }
}

crate::wire_struct! {
    /// A broker group (one broker name): its cluster and its replicas by broker id
    /// ([`MASTER_ID`] is the master).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BrokerData {
        pub cluster: String,
        pub broker_name: String,
        pub replicas: BTreeMap<u64, BrokerReplica>,
    }
}

impl BrokerData {
    /// The master replica, if registered.
    pub fn master(&self) -> Option<&BrokerReplica> {
        self.replicas.get(&MASTER_ID)
    }

    /// Address of broker `id`.
    pub fn address(&self, id: u64) -> Option<&str> {
        self.replicas.get(&id).map(|r| r.address.as_str())
    }
}

crate::wire_struct! {
    /// A topic's queues on one broker group.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QueueData {
        pub broker_name: String,
        pub read_queue_count: u32,
        pub write_queue_count: u32,
        pub perm: u8,
        /// Shard of each queue, as in [`TopicConfig::queue_shards`].
        pub queue_shards: Vec<u16>,
    }
}

impl QueueData {
    /// The queue data a topic config publishes for broker `broker_name`.
    pub fn from_config(broker_name: impl Into<String>, config: &TopicConfig) -> Self {
        QueueData {
            broker_name: broker_name.into(),
            read_queue_count: config.read_queue_count,
            write_queue_count: config.write_queue_count,
            perm: config.perm,
            queue_shards: config.queue_shards.clone(),
        }
    }

    /// The shard of `queue_id`, if the queue exists.
    pub fn shard_of_queue(&self, queue_id: u32) -> Option<u16> {
        self.queue_shards.get(queue_id as usize).copied()
    }
}

crate::wire_struct! {
    /// Where a topic lives: the body of a GET_ROUTEINFO_BY_TOPIC response.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct TopicRoute {
        pub topic: String,
        pub brokers: Vec<BrokerData>,
        pub queues: Vec<QueueData>,
    }
}

crate::wire_struct! {
    /// Every broker known to a name server: the body of a GET_BROKER_CLUSTER_INFO response.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ClusterInfo {
        pub brokers: Vec<BrokerData>,
    }
}

impl ClusterInfo {
    /// Cluster name -> broker names in it.
    pub fn clusters(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut map: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for b in &self.brokers {
            map.entry(b.cluster.as_str())
                .or_default()
                .push(b.broker_name.as_str());
        }
        map
    }
}

crate::wire_struct! {
    /// What a broker tells every name server every 30 s: the body of REGISTER_BROKER.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BrokerRegistration {
        pub cluster: String,
        pub broker_name: String,
        /// [`MASTER_ID`] for a master.
        pub broker_id: u64,
        pub address: String,
        pub ha_address: String,
        pub role: BrokerRole,
        pub shard_count: u16,
        pub version: String,
        /// Drop the broker after this long without a registration (RocketMQ's default is
        /// 120 000 ms).
        pub heartbeat_timeout_ms: u32,
        pub data_version: DataVersion,
        pub topics: Vec<TopicConfig>,
        /// As [`BrokerReplica::shard_addresses`].
        pub shard_addresses: Vec<String>,
    }
}

impl BrokerRegistration {
    /// The replica entry this registration describes.
    pub fn replica(&self) -> BrokerReplica {
        BrokerReplica {
            address: self.address.clone(),
            ha_address: self.ha_address.clone(),
            role: self.role,
            shard_count: self.shard_count,
            version: self.version.clone(),
            shard_addresses: self.shard_addresses.clone(),
        }
    }
}

crate::wire_struct! {
    /// Topic names: the body of a GET_ALL_TOPIC_LIST_FROM_NAMESERVER response.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct TopicList {
        pub topics: Vec<String>,
    }
}

crate::wire_struct! {
    /// GET_ROUTEINFO_BY_TOPIC request header. Response: fields [`Empty`](crate::codec::Empty),
    /// body [`TopicRoute`]; TOPIC_NOT_EXIST if no broker has the topic.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetRouteRequest {
        pub topic: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    fn registration() -> BrokerRegistration {
        BrokerRegistration {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: MASTER_ID,
            address: "127.0.0.1:10911".into(),
            ha_address: "127.0.0.1:10912".into(),
            role: BrokerRole::SyncMaster,
            shard_count: 2,
            version: "0.1.0".into(),
            heartbeat_timeout_ms: 120_000,
            data_version: DataVersion {
                state_version: 1,
                timestamp_ms: 1_700_000_000_000,
                counter: 3,
            },
            topics: vec![TopicConfig::new("orders", 4, 2)],
            shard_addresses: vec!["127.0.0.1:40001".into(), "127.0.0.1:40002".into()],
        }
    }

    #[test]
    fn placement_rule() {
        // Fixed values: changing the rule would move queues between CommitLogs.
        assert_eq!(topic_hash(""), 0x811C_9DC5);
        assert_eq!(topic_hash("a"), 0xE40C_292C);
        assert_eq!(shard_of("x", 7, 0), 0);
        assert_eq!(shard_of("x", 7, 1), 0);
        let p = default_placement("orders", 8, 2);
        assert_eq!(
            p.iter().filter(|&&s| s == 0).count(),
            4,
            "queues spread evenly"
        );
        let firsts: std::collections::BTreeSet<u16> = (0..50)
            .map(|i| shard_of(&format!("topic-{i}"), 0, 4))
            .collect();
        assert!(firsts.len() > 1, "single-queue topics spread over shards");
        let t = TopicConfig::new("t", 8, 3);
        assert_eq!(t.shard_of_queue(5), Some(shard_of("t", 5, 3)));
        assert_eq!(t.shard_of_queue(8), None);
        t.validate(3).unwrap();
        assert!(t.validate(2).is_err());
        let mut bad = t.clone();
        bad.queue_shards.pop();
        assert!(bad.validate(3).is_err());
    }

    #[test]
    fn registration_round_trip() {
        let r = registration();
        let bytes = r.to_vec().unwrap();
        assert_eq!(bytes.len(), r.encoded_len().unwrap());
        assert_eq!(BrokerRegistration::decode(&bytes).unwrap(), r);
    }

    #[test]
    fn route_and_cluster_info() {
        let reg = registration();
        let broker = BrokerData {
            cluster: reg.cluster.clone(),
            broker_name: reg.broker_name.clone(),
            replicas: BTreeMap::from([(MASTER_ID, reg.replica())]),
        };
        let route = TopicRoute {
            topic: "orders".into(),
            brokers: vec![broker.clone()],
            queues: vec![QueueData::from_config("broker-a", &reg.topics[0])],
        };
        let bytes = route.to_vec().unwrap();
        let back = TopicRoute::decode(&bytes).unwrap();
        assert_eq!(back, route);
        assert_eq!(back.brokers[0].address(MASTER_ID), Some("127.0.0.1:10911"));
        assert_eq!(back.queues[0].shard_of_queue(3), Some(1));
        let info = ClusterInfo {
            brokers: vec![broker],
        };
        assert_eq!(
            info.clusters(),
            BTreeMap::from([("DefaultCluster", vec!["broker-a"])])
        );
        assert_eq!(ClusterInfo::decode(&info.to_vec().unwrap()).unwrap(), info);
    }

    #[test]
    fn role_codes() {
        assert_eq!(BrokerRole::try_from(2u8).unwrap(), BrokerRole::Slave);
        assert!(BrokerRole::try_from(3u8).is_err());
        assert!(!BrokerRole::Slave.is_master());
    }
}
