//! GET_CONSUMER_LIST_BY_GROUP (38): the live members of a consumer group, which every member
//! needs to rebalance queues. Response fields: none; body: [`ConsumerList`].
//! SUBSCRIPTION_NOT_EXIST if the broker knows no such group.
//!
//! NOTIFY_CONSUMER_IDS_CHANGED (40, broker -> consumer, ONEWAY) tells the members that the
//! group changed so they rebalance at once instead of at their next timer.

crate::wire_struct! {
    /// GET_CONSUMER_LIST_BY_GROUP request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetConsumerListRequest {
        pub consumer_group: String,
    }
}

crate::wire_struct! {
    /// GET_CONSUMER_LIST_BY_GROUP response body: client ids, sorted.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ConsumerList {
        pub client_ids: Vec<String>,
    }
}

crate::wire_struct! {
    /// NOTIFY_CONSUMER_IDS_CHANGED request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NotifyConsumerIdsChanged {
        pub consumer_group: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn consumer_list_round_trip() {
        let l = ConsumerList {
            client_ids: vec!["a".into(), "b".into()],
        };
        assert_eq!(l.to_vec().unwrap(), b"\x00\x00\x00\x02\x00\x01a\x00\x01b");
        assert_eq!(ConsumerList::decode(&l.to_vec().unwrap()).unwrap(), l);
        let r = GetConsumerListRequest {
            consumer_group: "cg".into(),
        };
        assert_eq!(
            GetConsumerListRequest::decode(&r.to_vec().unwrap()).unwrap(),
            r
        );
    }
}
