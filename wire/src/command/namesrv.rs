//! Name server requests other than routes and KV: REGISTER_BROKER (103), UNREGISTER_BROKER
//! (104), GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) and
//! DELETE_TOPIC_IN_NAMESRV (216).
//!
//! | request | header | body | response fields | response body |
//! |---|---|---|---|---|
//! | REGISTER_BROKER | `Empty` | [`BrokerRegistration`](crate::command::route::BrokerRegistration) | [`RegisterBrokerResponse`] | - |
//! | UNREGISTER_BROKER | [`UnregisterBrokerRequest`] | - | none | - |
//! | GET_BROKER_CLUSTER_INFO | `Empty` | - | none | [`ClusterInfo`](crate::command::route::ClusterInfo) |
//! | GET_ALL_TOPIC_LIST_FROM_NAMESERVER | `Empty` | - | none | [`TopicList`](crate::command::route::TopicList) |
//! | DELETE_TOPIC_IN_NAMESRV | [`DeleteTopicInNamesrvRequest`] | - | none | - |

crate::wire_struct! {
    /// REGISTER_BROKER response fields: where a slave replicates from (empty strings for a
    /// master, or while its group has no master).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct RegisterBrokerResponse {
        pub master_address: String,
        pub ha_master_address: String,
    }
}

crate::wire_struct! {
    /// UNREGISTER_BROKER request header (a broker shutting down cleanly).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct UnregisterBrokerRequest {
        pub cluster: String,
        pub broker_name: String,
        pub broker_id: u64,
        pub address: String,
    }
}

crate::wire_struct! {
    /// DELETE_TOPIC_IN_NAMESRV request header: drop the topic's route, from every broker or
    /// only from one cluster's.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DeleteTopicInNamesrvRequest {
        pub topic: String,
        pub cluster: Option<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn namesrv_round_trip() {
        let u = UnregisterBrokerRequest {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_id: 1,
            address: "127.0.0.1:10911".into(),
        };
        assert_eq!(
            UnregisterBrokerRequest::decode(&u.to_vec().unwrap()).unwrap(),
            u
        );
        let d = DeleteTopicInNamesrvRequest {
            topic: "t".into(),
            cluster: None,
        };
        assert_eq!(d.to_vec().unwrap(), b"\x00\x01t\x00");
        let r = RegisterBrokerResponse {
            master_address: "127.0.0.1:10911".into(),
            ha_master_address: "127.0.0.1:10912".into(),
        };
        assert_eq!(
            RegisterBrokerResponse::decode(&r.to_vec().unwrap()).unwrap(),
            r
        );
    }
}
