//! QUERY_MESSAGE (12): messages of a topic by key (the `KEYS` and `UNIQ_KEY` properties),
//! looked up in the broker's index within a store-time range. Response body: the matching
//! records back to back (hash collisions already removed by the broker); QUERY_NOT_FOUND when
//! none match.

crate::wire_struct! {
    /// QUERY_MESSAGE request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QueryMessageRequest {
        pub topic: String,
        pub key: String,
        /// At most this many records.
        pub max_messages: u32,
        /// Store-time range, ms since the epoch, inclusive.
        pub begin_timestamp_ms: i64,
        pub end_timestamp_ms: i64,
    }
}

crate::wire_struct! {
    /// QUERY_MESSAGE response fields: how far the index is built.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct QueryMessageResponse {
        pub index_last_update_timestamp_ms: i64,
        pub index_last_update_physical_offset: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn query_round_trip() {
        let q = QueryMessageRequest {
            topic: "orders".into(),
            key: "order-1".into(),
            max_messages: 32,
            begin_timestamp_ms: 0,
            end_timestamp_ms: i64::MAX,
        };
        assert_eq!(
            QueryMessageRequest::decode(&q.to_vec().unwrap()).unwrap(),
            q
        );
        let r = QueryMessageResponse {
            index_last_update_timestamp_ms: 5,
            index_last_update_physical_offset: 6,
        };
        assert_eq!(r.to_vec().unwrap().len(), 16);
    }
}
