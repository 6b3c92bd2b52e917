//! Topic administration on a broker: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER
//! (215) and GET_ALL_TOPIC_CONFIG (21). The broker decides the queue-to-shard placement and
//! echoes the resulting [`TopicConfig`]; GET_ALL_TOPIC_CONFIG answers with the body
//! [`TopicConfigTable`](crate::command::route::TopicConfigTable) (request header
//! [`Empty`](crate::codec::Empty), response fields none).

use std::collections::BTreeMap;

use crate::command::route::{self, TopicConfig};

crate::wire_struct! {
    /// UPDATE_AND_CREATE_TOPIC request header. Response fields: the stored [`TopicConfig`]
    /// with its placement.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CreateTopicRequest {
        pub topic: String,
        pub read_queue_count: u32,
        pub write_queue_count: u32,
        /// [`route::perm`] bits.
        pub perm: u8,
        pub attributes: BTreeMap<String, String>,
    }
}

impl CreateTopicRequest {
    /// The config a broker with `shard_count` shards stores for this request (default
    /// placement, [`route::shard_of`]).
    pub fn to_config(&self, shard_count: u16) -> TopicConfig {
        let queues = self.read_queue_count.max(self.write_queue_count);
        TopicConfig {
            topic: self.topic.clone(),
            read_queue_count: self.read_queue_count,
            write_queue_count: self.write_queue_count,
            perm: self.perm,
            queue_shards: route::default_placement(&self.topic, queues, shard_count),
            attributes: self.attributes.clone(),
        }
    }
}

crate::wire_struct! {
    /// DELETE_TOPIC_IN_BROKER request header. Response fields: none.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DeleteTopicRequest {
        pub topic: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn create_topic_round_trip_and_placement() {
        let req = CreateTopicRequest {
            topic: "orders".into(),
            read_queue_count: 4,
            write_queue_count: 4,
            perm: route::perm::READ_WRITE,
            attributes: BTreeMap::new(),
        };
        assert_eq!(
            CreateTopicRequest::decode(&req.to_vec().unwrap()).unwrap(),
            req
        );
        let cfg = req.to_config(2);
        assert_eq!(cfg.queue_shards, vec![0, 1, 0, 1]);
        cfg.validate(2).unwrap();
        let d = DeleteTopicRequest {
            topic: "orders".into(),
        };
        assert_eq!(DeleteTopicRequest::decode(&d.to_vec().unwrap()).unwrap(), d);
    }
}
