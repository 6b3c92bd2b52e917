//! GET_PRODUCER_CONNECTION_LIST (204): the live members of a producer group on this broker
//! (the client ids of its last heartbeats, most recently heard first; admin). Response
//! fields: none; body: [`ProducerList`]. An empty list when the broker knows no such group.

crate::wire_struct! {
    /// GET_PRODUCER_CONNECTION_LIST request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetProducerListRequest {
        pub producer_group: String,
    }
}

crate::wire_struct! {
    /// GET_PRODUCER_CONNECTION_LIST response body: client ids.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ProducerList {
        pub client_ids: Vec<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn producer_list_round_trip() {
        let l = ProducerList {
            client_ids: vec!["a".into()],
        };
        assert_eq!(l.to_vec().unwrap(), b"\x00\x00\x00\x01\x00\x01a");
        assert_eq!(ProducerList::decode(&l.to_vec().unwrap()).unwrap(), l);
        let r = GetProducerListRequest {
            producer_group: "pg".into(),
        };
        assert_eq!(
            GetProducerListRequest::decode(&r.to_vec().unwrap()).unwrap(),
            r
        );
    }
}
