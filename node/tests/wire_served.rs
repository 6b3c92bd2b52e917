//! docs/wire.md is the protocol's reference: every request code is in its table, and every
//! code it does not mark as sent by the broker to clients or as replication (HA port) is
//! served by the broker or the name server of a real standalone node: a request with a
//! valid header is answered with something other than REQUEST_CODE_NOT_SUPPORTED.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::sample::{Gen, Sample};
use ringmq_wire::codec::Encode;
use ringmq_wire::command::Request;
use ringmq_wire::frame;

/// Codes served elsewhere: the broker sends these to clients, they go to the HA port, or
/// only a name server running a controller serves them (`tests/controller_raft.rs`,
/// `tests/failover.rs`).
const NOT_ON_CLIENT_PORTS: [RequestCode; 12] = [
    RequestCode::CheckTransactionState,
    RequestCode::NotifyConsumerIdsChanged,
    RequestCode::PushReplyMessageToClient,
    RequestCode::HaSubscribe,
    RequestCode::HaTransfer,
    RequestCode::HaAck,
    RequestCode::ControllerBrokerHeartbeat,
    RequestCode::ControllerAlterSyncStateSet,
    RequestCode::ControllerElectMaster,
    RequestCode::ControllerGetReplicaInfo,
    RequestCode::ControllerGetMetadataInfo,
    RequestCode::ControllerRaft,
];

/// A valid header for `code` (sampled, so it decodes).
fn header_for(code: RequestCode) -> Vec<u8> {
    for s in 0u32..100_000 {
        let seed: Vec<u8> = (0..64u32)
            .map(|i| (s.wrapping_mul(2_654_435_761).wrapping_add(i * 97) >> 7) as u8)
            .collect();
        let req = Request::sample(&mut Gen::new(&seed));
        if req.code() == code {
            return req.to_vec().unwrap();
        }
    }
    panic!("no sampled header for {}", code.name());
}

fn raw_call(c: &mut Client, code: RequestCode, header: &[u8]) -> u16 {
    let mut out = Vec::new();
    frame::encode_prefix(
        &mut out,
        u16::from(code),
        frame::Flags::REQUEST,
        9_999,
        header.len(),
        0,
    )
    .unwrap();
    out.extend_from_slice(header);
    c.send_raw(&out).unwrap();
    c.recv(9_999).code
}

#[test]
fn every_request_code_is_documented_and_served_where_the_docs_say() {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/wire.md")).unwrap();
    let dir = tempdir("wire-served");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "1"]);
    let mut unserved = Vec::new();
    for &code in RequestCode::ALL {
        let row = format!("| {} | {} ", u16::from(code), code.name());
        assert!(
            docs.contains(&row),
            "docs/wire.md has no table row starting {row:?}"
        );
        if NOT_ON_CLIENT_PORTS.contains(&code) {
            continue;
        }
        let header = header_for(code);
        // A fresh connection per request: a sampled HELLO may move it to another shard.
        let on_broker = raw_call(&mut Client::connect(node.broker_addr()), code, &header);
        let on_namesrv = raw_call(&mut Client::connect(node.namesrv_addr()), code, &header);
        let not_supported = u16::from(Status::RequestCodeNotSupported);
        if on_broker == not_supported && on_namesrv == not_supported {
            unserved.push(code.name());
        }
    }
    assert!(
        unserved.is_empty(),
        "documented as served, answered REQUEST_CODE_NOT_SUPPORTED by both the broker and \
         the name server: {unserved:?}"
    );
}
