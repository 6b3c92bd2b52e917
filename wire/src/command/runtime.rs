//! GET_BROKER_RUNTIME_INFO (28): counters per shard plus free-form key/value pairs (what
//! RocketMQ's `KVTable` carries). Request header: [`Empty`](crate::codec::Empty). Response
//! fields: none; body: [`BrokerRuntimeInfo`].

use std::collections::BTreeMap;

crate::wire_struct! {
    /// Counters of one shard since the broker started.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ShardStats {
        pub shard_id: u16,
        pub msgs_in: u64,
        pub msgs_out: u64,
        pub bytes_in: u64,
        pub bytes_out: u64,
        pub connections: u32,
        pub parked_pulls: u32,
        pub queues: u32,
        /// Bytes of CommitLog segments on disk.
        pub store_bytes: u64,
        pub commitlog_min_offset: u64,
        pub commitlog_max_offset: u64,
    }
}

crate::wire_struct! {
    /// GET_BROKER_RUNTIME_INFO response body.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct BrokerRuntimeInfo {
        pub broker_name: String,
        pub broker_id: u64,
        pub shards: Vec<ShardStats>,
        /// Anything else, as `key -> value` text (versions, disk ratio, uptime, ...).
        pub extra: BTreeMap<String, String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn runtime_info_round_trip() {
        let info = BrokerRuntimeInfo {
            broker_name: "broker-a".into(),
            broker_id: 0,
            shards: vec![ShardStats {
                shard_id: 1,
                msgs_in: 10,
                bytes_in: 1000,
                ..ShardStats::default()
            }],
            extra: BTreeMap::from([("version".to_string(), "0.1.0".to_string())]),
        };
        let bytes = info.to_vec().unwrap();
        assert_eq!(BrokerRuntimeInfo::decode(&bytes).unwrap(), info);
        assert_eq!(<ShardStats as Decode>::MIN_BYTES, 2 + 8 * 4 + 4 * 3 + 8 * 3);
    }
}
