//! Which shard owns queue `q` of topic `t`: `(fnv1a32(t) + q) % shards`. Stable across
//! restarts and versions (it decides which CommitLog holds a queue's records), spread so that
//! single-queue topics do not all land on shard 0, and published in every route
//! (`TopicConfig::queue_shards`) so clients never need to compute it.

/// FNV-1a, 32 bits, of the topic name.
pub fn topic_hash(topic: &str) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for b in topic.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The shard that owns `queue_id` of `topic` on a broker with `shard_count` shards.
pub fn shard_of(topic: &str, queue_id: u32, shard_count: u16) -> u16 {
    let n = u32::from(shard_count.max(1));
    ((topic_hash(topic) % n + queue_id % n) % n) as u16
}

/// The placement of every queue of a topic.
pub fn queue_shards(topic: &str, queue_count: u32, shard_count: u16) -> Vec<u16> {
    (0..queue_count)
        .map(|q| shard_of(topic, q, shard_count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_spread() {
        // Fixed values: changing the rule would move queues between CommitLogs.
        assert_eq!(topic_hash(""), 0x811C_9DC5);
        assert_eq!(topic_hash("a"), 0xE40C_292C);
        assert_eq!(shard_of("anything", 5, 1), 0);
        let p = queue_shards("orders", 8, 2);
        assert_eq!(p.iter().filter(|&&s| s == 0).count(), 4);
        assert_eq!(p.iter().filter(|&&s| s == 1).count(), 4);
        let firsts: std::collections::BTreeSet<u16> = (0..50)
            .map(|i| shard_of(&format!("topic-{i}"), 0, 4))
            .collect();
        assert!(firsts.len() > 1, "single-queue topics spread over shards");
    }
}
