//! HEART_BEAT (34) and UNREGISTER_CLIENT (35). A client heartbeats every broker it uses
//! every 30 s with its producer and consumer groups and their subscriptions; the broker
//! drops a client silent for 120 s and rebalances its consumer groups.
//!
//! HEART_BEAT header: [`Empty`](crate::codec::Empty); body: [`HeartbeatData`] (it grows with
//! the number of groups and subscriptions). Response fields: none.

use crate::command::pull::FilterType;

crate::wire_enum! {
    /// Pull or push consumer (RocketMQ `ConsumeType`).
    pub enum ConsumeType: u8 ("consume type") {
        /// Pull consumer.
        Actively = 0 => "CONSUME_ACTIVELY",
        /// Push consumer (long polling).
        Passively = 1 => "CONSUME_PASSIVELY",
    }
}

crate::wire_enum! {
    /// How a group shares messages (RocketMQ `MessageModel`).
    pub enum MessageModel: u8 ("message model") {
        /// Each message to one member; queues are balanced across the group.
        Clustering = 0 => "CLUSTERING",
        /// Each message to every member.
        Broadcasting = 1 => "BROADCASTING",
    }
}

crate::wire_enum! {
    /// Where a group with no committed offset starts (RocketMQ `ConsumeFromWhere`).
    pub enum ConsumeFromWhere: u8 ("consume from where") {
        LastOffset = 0 => "CONSUME_FROM_LAST_OFFSET",
        FirstOffset = 1 => "CONSUME_FROM_FIRST_OFFSET",
        Timestamp = 2 => "CONSUME_FROM_TIMESTAMP",
    }
}

crate::wire_struct! {
    /// One topic a consumer group subscribes to.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Subscription {
        pub topic: String,
        pub filter_type: FilterType,
        /// `*`, `TagA || TagB`, or a SQL92 expression.
        pub expression: String,
        /// Bumped by the client when the subscription changes.
        pub version: u64,
    }
}

crate::wire_struct! {
    /// A consumer group this client belongs to.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConsumerGroupData {
        pub group: String,
        pub consume_type: ConsumeType,
        pub message_model: MessageModel,
        pub consume_from_where: ConsumeFromWhere,
        pub subscriptions: Vec<Subscription>,
    }
}

crate::wire_struct! {
    /// HEART_BEAT body.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct HeartbeatData {
        pub client_id: String,
        pub producer_groups: Vec<String>,
        pub consumer_groups: Vec<ConsumerGroupData>,
    }
}

crate::wire_struct! {
    /// UNREGISTER_CLIENT request header: the client leaves a producer and/or consumer group.
    /// Response fields: none.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct UnregisterClientRequest {
        pub client_id: String,
        pub producer_group: Option<String>,
        pub consumer_group: Option<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn heartbeat_round_trip() {
        let hb = HeartbeatData {
            client_id: "10.0.0.1@7".into(),
            producer_groups: vec!["pg".into()],
            consumer_groups: vec![ConsumerGroupData {
                group: "cg".into(),
                consume_type: ConsumeType::Passively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::FirstOffset,
                subscriptions: vec![Subscription {
                    topic: "orders".into(),
                    filter_type: FilterType::Tag,
                    expression: "*".into(),
                    version: 1,
                }],
            }],
        };
        assert_eq!(HeartbeatData::decode(&hb.to_vec().unwrap()).unwrap(), hb);
        let u = UnregisterClientRequest {
            client_id: "c".into(),
            producer_group: None,
            consumer_group: Some("cg".into()),
        };
        assert_eq!(u.to_vec().unwrap(), b"\x00\x01c\x00\x01\x00\x02cg");
        assert_eq!(
            UnregisterClientRequest::decode(&u.to_vec().unwrap()).unwrap(),
            u
        );
    }
}
