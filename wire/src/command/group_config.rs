//! A consumer group's settings on a broker (RocketMQ `SubscriptionGroupConfig`; only the
//! settings ringmq applies): UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) sets them,
//! DELETE_SUBSCRIPTIONGROUP (207) returns a group to the broker's defaults.
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) reports them with each group
//! ([`ConsumerGroupInfo`](crate::command::ConsumerGroupInfo)).
//!
//! UPDATE header: [`SubscriptionGroupConfig`]; DELETE header: [`DeleteSubscriptionGroupRequest`].
//! Response fields: none.
crate::wire_struct! {
    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SubscriptionGroupConfig {
        pub group: String,
        /// Retries before the dead-letter topic when the consumer does not set its own
        /// limit (RocketMQ `retryMaxTimes`; 0 sends a failed message to the DLQ at once).
        pub retry_max_times: u32,
        /// The group consumes orderly (RocketMQ `consumeMessageOrderly`): RocketMQ 5's
        /// SDKs are told `fifo`, and their POP is orderly.
        pub consume_message_orderly: bool,
    }
}

crate::wire_struct! {
    /// DELETE_SUBSCRIPTIONGROUP request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DeleteSubscriptionGroupRequest {
        pub group: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn group_config_round_trip() {
        let c = SubscriptionGroupConfig {
            group: "cg".into(),
            retry_max_times: 3,
            consume_message_orderly: true,
        };
        assert_eq!(c.to_vec().unwrap(), b"\x00\x02cg\x00\x00\x00\x03\x01");
        assert_eq!(
            SubscriptionGroupConfig::decode(&c.to_vec().unwrap()).unwrap(),
            c
        );
        let d = DeleteSubscriptionGroupRequest { group: "cg".into() };
        assert_eq!(
            DeleteSubscriptionGroupRequest::decode(&d.to_vec().unwrap()).unwrap(),
            d
        );
    }
}
