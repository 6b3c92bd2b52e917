//! One shard seen as a broker of its own, for RocketMQ (remoting) clients.
//!
//! RocketMQ's routes name queues per broker name, numbered from 0. A broker with N shards is
//! announced to remoting clients as N brokers, `<brokerName>@<shard>`, each at its shard's
//! own port (`broker::shard::ports`). Shard s's queue j of topic t is the broker's queue
//! `r + j * N`, where r is the smallest queue id the placement rule gives to s
//! (`(fnv1a32(t) + q) % N == s`, `wire::command::route::shard_of`): the queues of s are
//! exactly the ids congruent to r modulo N, in order. A topic with Q queues has
//! `ceil((Q - r) / N)` of them on s (none when Q <= r).
//!
//! Pure arithmetic: nothing is looked up, so a topic that does not exist yet (a send that
//! creates it) maps the same way the placement will place it.

use ringmq_wire::command::route::topic_hash;

/// The view of shard `shard` of `shard_count` (more than one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardView {
    pub shard: u16,
    pub shard_count: u16,
}

impl ShardView {
    /// The name remoting clients know this shard by.
    pub fn broker_name(&self, broker_name: &str) -> String {
        pseudo_name(broker_name, self.shard)
    }

    /// The smallest queue id of `topic` on this shard.
    fn first(&self, topic: &str) -> u32 {
        let n = u32::from(self.shard_count.max(1));
        (u32::from(self.shard) + n - topic_hash(topic) % n) % n
    }

    /// The broker's queue id of this shard's queue `local` of `topic`.
    pub fn global(&self, topic: &str, local: u32) -> u32 {
        let n = u32::from(self.shard_count.max(1));
        local.saturating_mul(n).saturating_add(self.first(topic))
    }

    /// This shard's id of the broker's queue `global` of `topic`; `None` when another shard
    /// owns it.
    pub fn local(&self, topic: &str, global: u32) -> Option<u32> {
        let n = u32::from(self.shard_count.max(1));
        (global % n == self.first(topic)).then_some(global / n)
    }

    /// How many of `topic`'s first `count` queues this shard has.
    pub fn count(&self, topic: &str, count: u32) -> u32 {
        let n = u32::from(self.shard_count.max(1));
        let r = self.first(topic);
        if count > r {
            (count - r).div_ceil(n)
        } else {
            0
        }
    }
}

pub use ringmq_wire::command::route::{
    shard_broker_name as pseudo_name, split_shard_broker_name as split_name,
};

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::command::route::shard_of;

    #[test]
    fn views_partition_the_queues_in_order() {
        for shards in 1u16..=5 {
            for topic in ["", "a", "TopicTest", "%RETRY%g", "orders-7"] {
                for queues in 0u32..=17 {
                    let mut seen = vec![false; queues as usize];
                    for s in 0..shards {
                        let v = ShardView {
                            shard: s,
                            shard_count: shards,
                        };
                        let n = v.count(topic, queues);
                        for j in 0..n {
                            let q = v.global(topic, j);
                            assert!(q < queues, "{topic} {queues} {s} {j}");
                            assert_eq!(shard_of(topic, q, shards), s);
                            assert_eq!(v.local(topic, q), Some(j));
                            assert!(!seen[q as usize]);
                            seen[q as usize] = true;
                            if j > 0 {
                                assert!(v.global(topic, j - 1) < q);
                            }
                        }
                        assert!(v.global(topic, n) >= queues);
                    }
                    assert!(seen.iter().all(|&s| s), "{topic} {queues} {shards}");
                    for q in 0..queues {
                        for s in 0..shards {
                            let v = ShardView {
                                shard: s,
                                shard_count: shards,
                            };
                            assert_eq!(
                                v.local(topic, q).is_some(),
                                shard_of(topic, q, shards) == s
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(pseudo_name("broker-a", 3), "broker-a@3");
        assert_eq!(split_name("broker-a@3"), Some(("broker-a", 3)));
        assert_eq!(split_name("a@b@12"), Some(("a@b", 12)));
        assert_eq!(split_name("broker-a"), None);
        assert_eq!(split_name("broker-a@x"), None);
    }
}
