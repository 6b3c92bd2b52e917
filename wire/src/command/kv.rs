//! The name server's small KV config: PUT_KV_CONFIG (100), GET_KV_CONFIG (101) and
//! DELETE_KV_CONFIG (102). GET answers QUERY_NOT_FOUND for a missing key.

crate::wire_struct! {
    /// PUT_KV_CONFIG request header. Response fields: none.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PutKvRequest {
        pub namespace: String,
        pub key: String,
        pub value: String,
    }
}

crate::wire_struct! {
    /// GET_KV_CONFIG and DELETE_KV_CONFIG request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct KvKeyRequest {
        pub namespace: String,
        pub key: String,
    }
}

crate::wire_struct! {
    /// GET_KV_CONFIG response fields.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetKvResponse {
        pub value: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn kv_round_trip() {
        let p = PutKvRequest {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: "orders".into(),
            value: "broker-a:4".into(),
        };
        assert_eq!(PutKvRequest::decode(&p.to_vec().unwrap()).unwrap(), p);
        let k = KvKeyRequest {
            namespace: "ns".into(),
            key: "k".into(),
        };
        assert_eq!(k.to_vec().unwrap(), b"\x00\x02ns\x00\x01k");
        let g = GetKvResponse { value: "v".into() };
        assert_eq!(GetKvResponse::decode(&g.to_vec().unwrap()).unwrap(), g);
    }
}
