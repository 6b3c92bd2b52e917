//! Topic routes as the client uses them: the queues a producer may write and a consumer may
//! read, each broker group's master address, and the shard that owns each queue (so every
//! request goes straight to the right shard's connection).
//!
//! Queues are ordered by (broker name, queue id): the order queue selectors, sharding-key
//! hashing and rebalancing index into, identical in every client.

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
    /// The master's client address, if a master is registered.
    pub master: Option<SocketAddr>,
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
    /// Queues a consumer may read, in order.
    pub read_queues: Vec<MessageQueue>,
    pub brokers: BTreeMap<String, BrokerEntry>,
}

impl TopicRouteInfo {
    /// Digests a name server route.
    pub fn from_wire(route: &TopicRoute) -> Self {
        let mut brokers = BTreeMap::new();
        for b in &route.brokers {
            let master = b.replicas.get(&MASTER_ID);
            let addr = master.and_then(|m| match m.address.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    log::warn!(
                        "broker {} publishes address {:?}, which is not ip:port",
                        b.broker_name,
                        m.address
                    );
                    None
                }
            });
            brokers.insert(
                b.broker_name.clone(),
                BrokerEntry {
                    name: b.broker_name.clone(),
                    master: addr,
                    shard_count: master.map_or(1, |m| m.shard_count.max(1)),
                    queue_shards: Vec::new(),
                },
            );
        }
        let mut write_queues = Vec::new();
        let mut read_queues = Vec::new();
        for q in &route.queues {
            let Some(entry) = brokers.get_mut(&q.broker_name) else {
                continue;
            };
            entry.queue_shards = q.queue_shards.clone();
            if entry.master.is_none() {
                continue;
            }
            if perm::is_writeable(q.perm) {
                write_queues.extend(
                    (0..q.write_queue_count)
                        .map(|i| MessageQueue::new(&route.topic, &q.broker_name, i)),
                );
            }
            if perm::is_readable(q.perm) {
                read_queues.extend(
                    (0..q.read_queue_count)
                        .map(|i| MessageQueue::new(&route.topic, &q.broker_name, i)),
                );
            }
        }
        write_queues.sort();
        read_queues.sort();
        TopicRouteInfo {
            topic: route.topic.clone(),
            write_queues,
            read_queues,
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

    /// Masters of every broker group of the route.
    pub fn masters(&self) -> Vec<SocketAddr> {
        self.brokers.values().filter_map(|b| b.master).collect()
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
    }
}
