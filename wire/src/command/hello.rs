//! HELLO (ringmq, 1000): the first request on a connection. The client says who it is and
//! which protocol version it speaks; the broker (or name server) answers with its identity,
//! its shards, and which shard owns this connection. A shard-aware client opens one
//! connection per shard and sends each queue's requests on its shard's connection.

crate::wire_struct! {
    /// HELLO request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct HelloRequest {
        /// The client instance id (RocketMQ's `clientId`, e.g. `ip@pid`).
        pub client_id: String,
        /// [`PROTOCOL_VERSION`](crate::code::PROTOCOL_VERSION) of the client.
        pub protocol_version: u16,
        /// Client software and version, free-form, for logs.
        pub client_version: String,
        /// Ask for the connection to be served by this shard; the broker may hand it over
        /// or ignore the wish, and the response says which shard owns it.
        pub preferred_shard: Option<u16>,
    }
}

crate::wire_struct! {
    /// HELLO response fields. PROTOCOL_VERSION_NOT_SUPPORTED if the versions do not meet.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct HelloResponse {
        /// The version the server will speak on this connection.
        pub protocol_version: u16,
        pub cluster: String,
        /// Broker name; empty for a name server.
        pub broker_name: String,
        pub broker_id: u64,
        /// Shards of this broker (1 for a name server).
        pub shard_count: u16,
        /// The shard that owns this connection.
        pub shard_id: u16,
        /// Largest frame this server accepts (its configured maximum).
        pub frame_bytes_max: u32,
        /// This server binds a TLS connection to the account of the first signed request on
        /// it that verifies: requests after it may come unsigned and are that account's
        /// (`docs/security.md`). False from servers older than the field.
        pub tls_session: crate::codec::Appended<bool>,
    }
}

/// Request id of the HELLO that opens a connection whose opener does not wait for its answer
/// ([`opener_frame`]).
pub const OPENER_REQUEST_ID: u64 = u64::MAX;

/// A HELLO frame that opens a native connection asking for no shard, for peers that need
/// nothing from the answer (calls between nodes, tests). A native connection must open with
/// a ringmq request code ([`crate::remoting::Protocol::detect`]); its answer comes with
/// request id [`OPENER_REQUEST_ID`] and may be skipped.
pub fn opener_frame(client_id: &str) -> Vec<u8> {
    let hello = HelloRequest {
        client_id: client_id.to_string(),
        protocol_version: crate::code::PROTOCOL_VERSION,
        client_version: String::new(),
        preferred_shard: None,
    };
    let mut out = Vec::with_capacity(64);
    // A short client id always fits a frame; an over-long one leaves the frame empty and the
    // request after it is then read as whatever protocol its bytes say.
    let _ = crate::frame::encode_request(
        &mut out,
        crate::code::RequestCode::Hello,
        false,
        OPENER_REQUEST_ID,
        &hello,
        &[],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn hello_round_trip() {
        let req = HelloRequest {
            client_id: "10.0.0.1@42".into(),
            protocol_version: crate::code::PROTOCOL_VERSION,
            client_version: "ringmq-client 0.1".into(),
            preferred_shard: Some(1),
        };
        let bytes = req.to_vec().unwrap();
        assert_eq!(&bytes[..2], &[0, 11]);
        assert_eq!(HelloRequest::decode(&bytes).unwrap(), req);
        let resp = HelloResponse {
            protocol_version: 1,
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            shard_count: 2,
            shard_id: 1,
            frame_bytes_max: 16 << 20,
            tls_session: crate::codec::Appended(true),
        };
        let bytes = resp.to_vec().unwrap();
        assert_eq!(HelloResponse::decode(&bytes).unwrap(), resp);
        // An older server's answer ends before `tls_session`: read as false.
        let older = HelloResponse::decode(&bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(older.tls_session, crate::codec::Appended(false));
        assert_eq!(older.frame_bytes_max, resp.frame_bytes_max);
    }
}
