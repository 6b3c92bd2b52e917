//! QUERY_CONSUMER_OFFSET (14) and UPDATE_CONSUMER_OFFSET (15): a consumer group's committed
//! offset in one queue. A query for a group that never committed answers QUERY_NOT_FOUND.

crate::wire_struct! {
    /// QUERY_CONSUMER_OFFSET request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QueryConsumerOffsetRequest {
        pub consumer_group: String,
        pub topic: String,
        pub queue_id: u32,
    }
}

crate::wire_struct! {
    /// QUERY_CONSUMER_OFFSET response fields.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct QueryConsumerOffsetResponse {
        pub offset: u64,
    }
}

crate::wire_struct! {
    /// UPDATE_CONSUMER_OFFSET request header (may be sent ONEWAY). Response fields: none.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct UpdateConsumerOffsetRequest {
        pub consumer_group: String,
        pub topic: String,
        pub queue_id: u32,
        pub offset: u64,
    }
}

crate::wire_struct! {
    /// GET_ALL_CONSUMER_OFFSET request header: the offsets kept by one shard (a slave's
    /// shard asks for its master's same shard). Response: [`ConsumerOffsetTable`] in the body.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetAllConsumerOffsetRequest {
        pub shard_id: u16,
    }
}

crate::wire_struct! {
    /// One committed offset.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConsumerOffsetEntry {
        pub consumer_group: String,
        pub topic: String,
        pub queue_id: u32,
        pub offset: u64,
    }
}

crate::wire_struct! {
    /// GET_ALL_CONSUMER_OFFSET response body.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ConsumerOffsetTable {
        pub entries: Vec<ConsumerOffsetEntry>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn offsets_round_trip() {
        let q = QueryConsumerOffsetRequest {
            consumer_group: "cg".into(),
            topic: "t".into(),
            queue_id: 2,
        };
        assert_eq!(q.to_vec().unwrap(), b"\x00\x02cg\x00\x01t\x00\x00\x00\x02");
        assert_eq!(
            QueryConsumerOffsetRequest::decode(&q.to_vec().unwrap()).unwrap(),
            q
        );
        let u = UpdateConsumerOffsetRequest {
            consumer_group: "cg".into(),
            topic: "t".into(),
            queue_id: 2,
            offset: 9,
        };
        assert_eq!(
            UpdateConsumerOffsetRequest::decode(&u.to_vec().unwrap()).unwrap(),
            u
        );
        let r = QueryConsumerOffsetResponse { offset: 9 };
        assert_eq!(r.to_vec().unwrap(), 9u64.to_be_bytes());
    }
}
