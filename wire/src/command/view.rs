//! VIEW_MESSAGE_BY_ID (33): read one record by its physical offset (the client parses the
//! offset message id with [`crate::record::parse_message_id`] and sends to that store host).
//! Response fields: none; the body is the record. QUERY_NOT_FOUND if no record starts there.

crate::wire_struct! {
    /// VIEW_MESSAGE_BY_ID request header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ViewMessageRequest {
        pub physical_offset: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn view_round_trip() {
        let v = ViewMessageRequest {
            physical_offset: 1 << 60,
        };
        assert_eq!(v.to_vec().unwrap(), (1u64 << 60).to_be_bytes());
        assert_eq!(ViewMessageRequest::decode(&v.to_vec().unwrap()).unwrap(), v);
    }
}
