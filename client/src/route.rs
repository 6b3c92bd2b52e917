//! Topic routes as the client uses them: the queues a producer may write and a consumer may
//! read, each broker group's master and slave addresses, and the shard that owns each queue
//! (so every request goes straight to the right shard's connection).
//!
//! Write queues are ordered by (broker name, queue id): the order queue selectors and
//! sharding-key hashing index into, identical in every client. Readable queues, which
//! rebalancing indexes into, are ordered as RocketMQ clients of the same group see them (a
//! broker with several shards is one broker per shard to them, `<name>@<shard>`), so a group
//! with members of both kinds splits the queues the same way.
//!
//! Writes go to masters only: [`TopicRouteInfo::write_queues`] lists the queues of broker
//! groups with a registered master. Reads may also go to a slave (which holds the same
//! queues at the same offsets): [`TopicRouteInfo::consume_queues`] lists the readable queues
//! of every broker group with any registered replica, so a group whose master is down (and
//! expired from the name server) keeps its queues while its slave serves them.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use ringmq_wire::command::route::{perm, TopicRoute, MASTER_ID};

/// One queue of a topic on one broker group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageQueue {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: u32,
}

impl MessageQueue {
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: u32) -> Self {
        MessageQueue {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }
}

impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}#{}", self.topic, self.broker_name, self.queue_id)
    }
}

/// A broker group as the route describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEntry {
    pub name: String,
    /// The cluster the broker group belongs to (`brokerClusterName`).
    pub cluster: String,
    /// The master's client address, if a master is registered.
    pub master: Option<SocketAddr>,
    /// Registered slaves' client addresses by broker id (1, 2, ...), lowest id first.
    pub slaves: BTreeMap<u64, SocketAddr>,
    pub shard_count: u16,
    /// Shard of each queue of the topic on this broker.
    pub queue_shards: Vec<u16>,
}

/// A topic's route, digested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRouteInfo {
    pub topic: String,
    /// Queues a producer may write: writable queues of brokers with a master, in order.
    pub write_queues: Vec<MessageQueue>,
    /// Readable queues of brokers with a master, in order.
    pub read_queues: Vec<MessageQueue>,
    /// Readable queues of brokers with a master or a slave, in order: what consumers
    /// balance and read (from the master, or from a slave while the master is down).
    pub consume_queues: Vec<MessageQueue>,
    pub brokers: BTreeMap<String, BrokerEntry>,
}

impl BrokerEntry {
    /// The slave reads fall back to: the one with the lowest broker id.
    pub fn first_slave(&self) -> Option<SocketAddr> {
        self.slaves.values().next().copied()
    }

    /// True when any replica (master or slave) is registered.
    pub fn has_replica(&self) -> bool {
        self.master.is_some() || !self.slaves.is_empty()
    }
}

/// Where a RocketMQ client sorts `q`: by the broker name it sees (a broker announcing its
/// shards' own addresses is one broker per shard to it, `<name>@<shard>`, each numbering its
/// share of the queues from 0 in the broker's order), then by queue id.
fn rocketmq_order(
    brokers: &BTreeMap<String, BrokerEntry>,
    split: &std::collections::BTreeSet<&str>,
    q: &MessageQueue,
) -> (String, u32) {
    if !split.contains(q.broker_name.as_str()) {
        return (q.broker_name.clone(), q.queue_id);
    }
    let shard = brokers
        .get(&q.broker_name)
        .and_then(|b| b.queue_shards.get(q.queue_id as usize).copied())
        .unwrap_or(0);
    (
        ringmq_wire::command::route::shard_broker_name(&q.broker_name, shard),
        q.queue_id,
    )
}

impl TopicRouteInfo {
    /// Digests a name server route.
    pub fn from_wire(route: &TopicRoute) -> Self {
        let mut brokers = BTreeMap::new();
        for b in &route.brokers {
            let mut master = None;
            let mut slaves = BTreeMap::new();
            for (&id, r) in &b.replicas {
                let Some(addr) = parse_address(&b.broker_name, id, &r.address) else {
                    continue;
                };
                if id == MASTER_ID {
                    master = Some(addr);
                } else {
                    slaves.insert(id, addr);
                }
            }
            let shard_count = b
                .replicas
                .get(&MASTER_ID)
                .or_else(|| b.replicas.values().next())
                .map_or(1, |r| r.shard_count.max(1));
            brokers.insert(
                b.broker_name.clone(),
                BrokerEntry {
                    name: b.broker_name.clone(),
                    cluster: b.cluster.clone(),
                    master,
                    slaves,
                    shard_count,
                    queue_shards: Vec::new(),
                },
            );
        }
        let mut write_queues = Vec::new();
        let mut read_queues = Vec::new();
        let mut consume_queues = Vec::new();
        for q in &route.queues {
            let Some(entry) = brokers.get_mut(&q.broker_name) else {
                continue;
            };
            entry.queue_shards = q.queue_shards.clone();
            let queues =
                |n: u32| (0..n).map(|i| MessageQueue::new(&route.topic, &q.broker_name, i));
            if perm::is_readable(q.perm) && entry.has_replica() {
                consume_queues.extend(queues(q.read_queue_count));
            }
            if entry.master.is_none() {
                continue;
            }
            if perm::is_writeable(q.perm) {
                write_queues.extend(queues(q.write_queue_count));
            }
            if perm::is_readable(q.perm) {
                read_queues.extend(queues(q.read_queue_count));
            }
        }
        write_queues.sort();
        // Readable queues in the order RocketMQ clients of the same group allocate them in
        // (see `rocketmq_order`), so a group mixing both splits the queues the same way.
        let split: std::collections::BTreeSet<&str> = route
            .brokers
            .iter()
            .filter(|b| b.replicas.values().any(|r| r.shard_addresses.len() > 1))
            .map(|b| b.broker_name.as_str())
            .collect();
        let order = |q: &MessageQueue| rocketmq_order(&brokers, &split, q);
        read_queues.sort_by_cached_key(order);
        consume_queues.sort_by_cached_key(order);
        TopicRouteInfo {
            topic: route.topic.clone(),
            write_queues,
            read_queues,
            consume_queues,
            brokers,
        }
    }

    /// The master address of a broker group.
    pub fn master(&self, broker_name: &str) -> Option<SocketAddr> {
        self.brokers.get(broker_name).and_then(|b| b.master)
    }

    /// The shard that owns a queue (`None`: unknown, any connection works).
    pub fn shard(&self, mq: &MessageQueue) -> Option<u16> {
        self.brokers
            .get(&mq.broker_name)
            .and_then(|b| b.queue_shards.get(mq.queue_id as usize).copied())
    }

    /// True when some broker group of the route has `addr` as its master.
    pub fn names_master(&self, addr: SocketAddr) -> bool {
        self.brokers.values().any(|b| b.master == Some(addr))
    }

    /// Masters of every broker group of the route.
    pub fn masters(&self) -> Vec<SocketAddr> {
        self.brokers.values().filter_map(|b| b.master).collect()
    }

    /// Slaves of every broker group of the route.
    pub fn slaves(&self) -> Vec<SocketAddr> {
        self.brokers
            .values()
            .flat_map(|b| b.slaves.values().copied())
            .collect()
    }
}

fn parse_address(broker_name: &str, id: u64, address: &str) -> Option<SocketAddr> {
    match address.parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            log::warn!(
                "broker {broker_name} (id {id}) publishes address {address:?}, which is not ip:port"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::command::route::{BrokerData, BrokerReplica, BrokerRole, QueueData};

    fn broker(name: &str, port: u16) -> BrokerData {
        BrokerData {
            cluster: "c".into(),
            broker_name: name.into(),
            replicas: BTreeMap::from([(
                MASTER_ID,
                BrokerReplica {
                    address: format!("127.0.0.1:{port}"),
                    ha_address: String::new(),
                    role: BrokerRole::AsyncMaster,
                    shard_count: 2,
                    version: "0".into(),
                    shard_addresses: Vec::new(),
                },
            )]),
        }
    }

    #[test]
    fn digest_orders_queues_and_places_shards() {
        let route = TopicRoute {
            topic: "t".into(),
            brokers: vec![broker("b", 2), broker("a", 1)],
            queues: vec![
                QueueData {
                    broker_name: "b".into(),
                    read_queue_count: 2,
                    write_queue_count: 1,
                    perm: perm::READ_WRITE,
                    queue_shards: vec![0, 1],
                },
                QueueData {
                    broker_name: "a".into(),
                    read_queue_count: 2,
                    write_queue_count: 2,
                    perm: perm::READ,
                    queue_shards: vec![1, 0],
                },
            ],
        };
        let info = TopicRouteInfo::from_wire(&route);
        assert_eq!(
            info.write_queues,
            vec![MessageQueue::new("t", "b", 0)],
            "broker a is read-only"
        );
        assert_eq!(info.read_queues.len(), 4);
        assert_eq!(info.read_queues[0], MessageQueue::new("t", "a", 0));
        assert_eq!(info.shard(&MessageQueue::new("t", "a", 0)), Some(1));
        assert_eq!(info.master("b"), Some("127.0.0.1:2".parse().unwrap()));
        assert_eq!(info.masters().len(), 2);
        assert!(info.names_master("127.0.0.1:1".parse().unwrap()));
        assert!(!info.names_master("127.0.0.1:3".parse().unwrap()));
        assert_eq!(info.consume_queues, info.read_queues);
    }

    fn replica(port: u16, role: BrokerRole, shard_count: u16) -> BrokerReplica {
        BrokerReplica {
            address: format!("127.0.0.1:{port}"),
            ha_address: String::new(),
            role,
            shard_count,
            version: "0".into(),
            shard_addresses: Vec::new(),
        }
    }

    #[test]
    fn slaves_serve_reads_never_writes() {
        let mut a = broker("a", 1);
        a.replicas.insert(2, replica(13, BrokerRole::Slave, 2));
        a.replicas.insert(1, replica(12, BrokerRole::Slave, 2));
        // broker b's master expired: only its slave is registered.
        let b = BrokerData {
            cluster: "c".into(),
            broker_name: "b".into(),
            replicas: BTreeMap::from([(1, replica(22, BrokerRole::Slave, 4))]),
        };
        let queues = |name: &str| QueueData {
            broker_name: name.into(),
            read_queue_count: 2,
            write_queue_count: 2,
            perm: perm::READ_WRITE,
            queue_shards: vec![0, 1],
        };
        let route = TopicRoute {
            topic: "t".into(),
            brokers: vec![a, b],
            queues: vec![queues("a"), queues("b")],
        };
        let info = TopicRouteInfo::from_wire(&route);
        let of = |name: &str| {
            vec![
                MessageQueue::new("t", name, 0),
                MessageQueue::new("t", name, 1),
            ]
        };
        assert_eq!(info.write_queues, of("a"), "no writes without a master");
        assert_eq!(info.read_queues, of("a"));
        assert_eq!(info.consume_queues, [of("a"), of("b")].concat());
        let a = &info.brokers["a"];
        assert_eq!(a.first_slave(), Some("127.0.0.1:12".parse().unwrap()));
        let b = &info.brokers["b"];
        assert_eq!(b.master, None);
        assert_eq!(b.first_slave(), Some("127.0.0.1:22".parse().unwrap()));
        assert_eq!(b.shard_count, 4, "from the slave when no master is listed");
        assert_eq!(info.masters(), vec!["127.0.0.1:1".parse().unwrap()]);
        assert_eq!(info.slaves().len(), 3);
    }
}
