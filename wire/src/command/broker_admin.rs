//! Broker administration: GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25) and
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201, in ringmq: the consumer groups a broker knows,
//! with their live members and subscriptions).
//!
//! UPDATE_BROKER_CONFIG changes only an allow-list of runtime keys (never paths, ports or
//! anything that starts a process); a key outside it is refused with MESSAGE_ILLEGAL naming
//! it, and nothing of the request is applied. `brokerPermission=4` makes a broker read-only
//! (stop writes before taking it down), `6` read-write again.

use std::collections::BTreeMap;

use super::heartbeat::Subscription;

crate::wire_struct! {
    /// GET_BROKER_CONFIG response body, and UPDATE_BROKER_CONFIG request body: keys in
    /// RocketMQ's spelling, values as in `broker.properties`.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct BrokerConfigTable {
        pub entries: BTreeMap<String, String>,
    }
}

crate::wire_struct! {
    /// One consumer group a broker knows.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConsumerGroupInfo {
        pub group: String,
        /// Live members (client ids, sorted).
        pub members: Vec<String>,
        pub subscriptions: Vec<Subscription>,
        /// The group's retry limit on this broker (its setting, else `maxReconsumeTimes`).
        pub retry_max_times: u32,
        /// The group consumes orderly (its setting; false by default).
        pub consume_message_orderly: bool,
    }
}

crate::wire_struct! {
    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG response body.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ConsumerGroupList {
        pub groups: Vec<ConsumerGroupInfo>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn round_trips() {
        let mut t = BrokerConfigTable::default();
        t.entries.insert("brokerPermission".into(), "4".into());
        assert_eq!(BrokerConfigTable::decode(&t.to_vec().unwrap()).unwrap(), t);
        let g = ConsumerGroupList {
            groups: vec![ConsumerGroupInfo {
                group: "g".into(),
                members: vec!["c1".into()],
                subscriptions: vec![],
                retry_max_times: 16,
                consume_message_orderly: true,
            }],
        };
        assert_eq!(ConsumerGroupList::decode(&g.to_vec().unwrap()).unwrap(), g);
    }
}
