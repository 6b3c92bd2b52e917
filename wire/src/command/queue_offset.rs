//! GET_MIN_OFFSET (31), GET_MAX_OFFSET (30) and SEARCH_OFFSET_BY_TIMESTAMP (29): positions in
//! one queue. All three answer an [`OffsetResponse`]. The max offset is one past the last
//! stored message (the next offset to be assigned), as in RocketMQ.

crate::wire_enum! {
    /// Which offset a timestamp search returns when several messages share the time
    /// (RocketMQ `BoundaryType`).
    pub enum Boundary: u8 ("boundary") {
        /// The first message stored at or after the timestamp.
        Lower = 0 => "LOWER",
        /// The last message stored at or before the timestamp.
        Upper = 1 => "UPPER",
    }
}

crate::wire_struct! {
    /// GET_MIN_OFFSET / GET_MAX_OFFSET request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetOffsetRequest {
        pub topic: String,
        pub queue_id: u32,
    }
}

crate::wire_struct! {
    /// SEARCH_OFFSET_BY_TIMESTAMP request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SearchOffsetRequest {
        pub topic: String,
        pub queue_id: u32,
        /// Store timestamp to look for, ms since the epoch.
        pub timestamp_ms: i64,
        pub boundary: Boundary,
    }
}

crate::wire_struct! {
    /// Response fields of the three offset requests.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OffsetResponse {
        pub offset: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn queue_offsets_round_trip() {
        let s = SearchOffsetRequest {
            topic: "t".into(),
            queue_id: 0,
            timestamp_ms: -1,
            boundary: Boundary::Upper,
        };
        let bytes = s.to_vec().unwrap();
        assert_eq!(bytes.len(), 3 + 4 + 8 + 1);
        assert_eq!(*bytes.last().unwrap(), 1);
        assert_eq!(SearchOffsetRequest::decode(&bytes).unwrap(), s);
        let g = GetOffsetRequest {
            topic: "t".into(),
            queue_id: 5,
        };
        assert_eq!(GetOffsetRequest::decode(&g.to_vec().unwrap()).unwrap(), g);
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() = 2;
        assert!(SearchOffsetRequest::decode(&bad).is_err());
    }
}
