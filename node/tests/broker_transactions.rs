//! Transactional messages against the real binary, on raw frames: half messages hidden from
//! consumers, END_TRANSACTION commit and rollback resolved once, check-back pushed on the
//! producer's own connection and answered, the check-max topic after the last check, and a
//! kill -9 with halves pending and decided.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::{
    CheckTransactionRequest, EndTransactionRequest, HeartbeatData, SendResponse,
    TransactionResolution,
};
use ringmq_wire::properties::keys;
use ringmq_wire::record::{self, sys_flag, Message};

const TOPIC: &str = "TxnTopic";
const GROUP: &str = "it-producers";

fn half(body: &str, id: &str) -> Vec<u8> {
    let mut props = Vec::new();
    ringmq_wire::properties::encode([(keys::TRAN_MSG, "true"), (keys::UNIQ_KEY, id)], &mut props)
        .unwrap();
    encode_with(body, &props, sys_flag::TRANSACTION_PREPARED_TYPE)
}

fn encode_with(body: &str, props: &[u8], flag: u32) -> Vec<u8> {
    let m = Message {
        topic: TOPIC,
        queue_id: 0,
        flag: 0,
        sys_flag: flag,
        born_timestamp_ms: now_ms(),
        born_host: std::net::SocketAddr::from(([127, 0, 0, 1], 40000)),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.as_bytes(),
        properties: props,
    };
    let mut out = Vec::new();
    record::encode(&m, &mut out).unwrap();
    out
}

fn producer_heartbeat(c: &mut Client, client_id: &str) {
    let hb = HeartbeatData {
        client_id: client_id.to_string(),
        producer_groups: vec![GROUP.to_string()],
        consumer_groups: vec![],
    };
    c.call(RequestCode::HeartBeat, &Empty, &hb.to_vec().unwrap())
        .ok();
}

fn end(c: &mut Client, sent: &SendResponse, resolution: TransactionResolution) -> Resp {
    end_as(
        c,
        GROUP,
        sent.first_queue_offset,
        sent.first_physical_offset,
        resolution,
        false,
    )
}

fn end_as(
    c: &mut Client,
    group: &str,
    half_queue_offset: u64,
    physical_offset: u64,
    resolution: TransactionResolution,
    from_check: bool,
) -> Resp {
    let h = EndTransactionRequest {
        producer_group: group.to_string(),
        resolution,
        half_queue_offset,
        physical_offset,
        message_id: String::new(),
        transaction_id: String::new(),
        from_transaction_check: from_check,
    };
    c.call(RequestCode::EndTransaction, &h, &[])
}

/// Bodies delivered in TOPIC queue 0 (everything from offset 0).
fn delivered(c: &mut Client, topic: &str) -> Vec<String> {
    let r = c.pull(topic, 0, 0, 64, 0);
    if r.status() != Status::Success {
        return Vec::new();
    }
    decode_records(&r.body)
        .iter()
        .map(|r| String::from_utf8_lossy(r.body).into_owned())
        .collect()
}

#[test]
fn halves_are_hidden_until_committed_and_resolved_once() {
    let dir = tempdir("txn-basic");
    let node = Node::standalone(
        &dir.path().join("data"),
        // No check-back during this test: the first check would come after an hour.
        &["--shards", "2", "--set", "transactionTimeOut=3600000"],
    );
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok(TOPIC, 1);

    let r = c.send_bytes(TOPIC, 0, &half("one", "T1"));
    r.ok();
    let one: SendResponse = r.fields().unwrap();
    assert_eq!(one.queue_id, 0, "the answer names the real queue");
    let two: SendResponse = c.send_bytes(TOPIC, 0, &half("two", "T2")).fields().unwrap();
    assert!(delivered(&mut c, TOPIC).is_empty(), "a half is visible");
    assert_eq!(c.max_offset(TOPIC, 0), 0);

    end(&mut c, &one, TransactionResolution::Commit).ok();
    assert_eq!(delivered(&mut c, TOPIC), vec!["one"]);
    let got = c.pull(TOPIC, 0, 0, 1, 0);
    let rec = decode_records(&got.body).remove(0);
    assert_eq!(
        rec.sys_flag & sys_flag::TRANSACTION_MASK,
        sys_flag::TRANSACTION_COMMIT_TYPE
    );
    assert_eq!(rec.property(keys::UNIQ_KEY), Some("T1"));
    assert_eq!(rec.property(keys::REAL_TOPIC), None);

    // A second commit: already done, nothing more stored; a rollback now: refused.
    let again = end(&mut c, &one, TransactionResolution::Commit);
    again.ok();
    assert!(
        again.remark().contains("already committed"),
        "{}",
        again.remark()
    );
    let late = end(&mut c, &one, TransactionResolution::Rollback);
    late.expect_status(Status::MessageIllegal);
    assert!(
        late.remark().contains("already committed"),
        "{}",
        late.remark()
    );

    // Rollback: never delivered; a commit afterwards is refused.
    end(&mut c, &two, TransactionResolution::Rollback).ok();
    end(&mut c, &two, TransactionResolution::Commit).expect_status(Status::MessageIllegal);
    assert_eq!(delivered(&mut c, TOPIC), vec!["one"]);

    // Wrong group, wrong offsets: refused, nothing changes.
    let three: SendResponse = c
        .send_bytes(TOPIC, 0, &half("three", "T3"))
        .fields()
        .unwrap();
    end_as(
        &mut c,
        "someone-else",
        three.first_queue_offset,
        three.first_physical_offset,
        TransactionResolution::Commit,
        false,
    )
    .expect_status(Status::MessageIllegal);
    end_as(
        &mut c,
        GROUP,
        three.first_queue_offset + 5,
        three.first_physical_offset,
        TransactionResolution::Commit,
        false,
    )
    .expect_status(Status::MessageIllegal);
    end_as(
        &mut c,
        GROUP,
        three.first_queue_offset,
        three.first_physical_offset + 1,
        TransactionResolution::Commit,
        false,
    )
    .expect_status(Status::MessageIllegal);
    // "Unknown" is accepted and changes nothing.
    end(&mut c, &three, TransactionResolution::Unknown).ok();
    assert_eq!(delivered(&mut c, TOPIC), vec!["one"]);

    // Malformed attempts at a half: TRAN_MSG without the prepared flag, a half in a batch,
    // a send to the half topic.
    let mut props = Vec::new();
    ringmq_wire::properties::encode([(keys::TRAN_MSG, "true")], &mut props).unwrap();
    c.send_bytes(TOPIC, 0, &encode_with("bad", &props, 0))
        .expect_status(Status::MessageIllegal);
    let mut batch = half("b1", "B1");
    batch.extend_from_slice(&half("b2", "B2"));
    let h = Client::send_request(TOPIC, 0, true, 2);
    c.call(RequestCode::SendBatchMessage, &h, &batch)
        .expect_status(Status::MessageIllegal);
    c.send_bytes(
        "RMQ_SYS_TRANS_HALF_TOPIC",
        0,
        &Msg::new("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"x".to_vec()).encode(),
    )
    .expect_status(Status::NoPermission);

    // kill -9 with one half pending (three) and two decided: after the restart the decided
    // stay as they were, the pending one can still be committed, exactly once.
    let mut node = node;
    node.kill9();
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "2", "--set", "transactionTimeOut=3600000"],
    );
    let mut c = Client::connect(node.broker_addr());
    assert_eq!(delivered(&mut c, TOPIC), vec!["one"]);
    end(&mut c, &one, TransactionResolution::Commit).ok();
    end(&mut c, &two, TransactionResolution::Commit).expect_status(Status::MessageIllegal);
    end(&mut c, &three, TransactionResolution::Commit).ok();
    end(&mut c, &three, TransactionResolution::Commit).ok();
    assert_eq!(delivered(&mut c, TOPIC), vec!["one", "three"]);
}

#[test]
fn undecided_halves_are_checked_back_then_moved_to_the_check_max_topic() {
    let dir = tempdir("txn-check");
    let node = Node::standalone(
        &dir.path().join("data"),
        &[
            "--shards",
            "1",
            "--set",
            "transactionTimeOut=200",
            "--set",
            "transactionCheckInterval=300",
            "--set",
            "transactionCheckMax=2",
        ],
    );
    let mut p = Client::connect(node.broker_addr());
    producer_heartbeat(&mut p, "producer-1");
    p.create_topic_ok(TOPIC, 1);
    let sent: SendResponse = p
        .send_bytes(TOPIC, 0, &half("checked", "C1"))
        .fields()
        .unwrap();

    // The broker asks this producer on its own connection; it answers commit.
    let pushed = p.wait_pushed(Duration::from_secs(10));
    let check = pushed
        .iter()
        .find(|f| f.code == RequestCode::CheckTransactionState as u16)
        .expect("no CHECK_TRANSACTION_STATE within 10 s");
    let h = CheckTransactionRequest::decode(&check.header).unwrap();
    assert_eq!(h.half_queue_offset, sent.first_queue_offset);
    assert_eq!(h.physical_offset, sent.first_physical_offset);
    assert_eq!(h.message_id, "C1");
    let body_rec = record::decode_one(&check.body).unwrap();
    assert_eq!(body_rec.body, b"checked");
    end_as(
        &mut p,
        GROUP,
        h.half_queue_offset,
        h.physical_offset,
        TransactionResolution::Commit,
        true,
    )
    .ok();
    assert_eq!(delivered(&mut p, TOPIC), vec!["checked"]);

    // A half nobody answers: checked twice, then in TRANS_CHECK_MAX_TIME_TOPIC, not delivered.
    let lost: SendResponse = p
        .send_bytes(TOPIC, 0, &half("ignored", "C2"))
        .fields()
        .unwrap();
    let moved = wait_for(Duration::from_secs(15), || {
        let r = p.pull("TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 8, 0);
        (r.status() == Status::Success && !r.body.is_empty()).then(|| r.body.clone())
    })
    .expect("the unanswered half did not reach the check-max topic within 15 s");
    let rec = decode_records(&moved).remove(0);
    assert_eq!(rec.body, b"ignored");
    assert_eq!(rec.property(keys::TRANSACTION_CHECK_TIMES), Some("2"));
    let checks = p
        .take_pushed()
        .iter()
        .filter(|f| f.code == RequestCode::CheckTransactionState as u16)
        .count();
    assert!(checks >= 1, "the unanswered half was never checked");
    // It is decided now: a late commit is refused and it is never delivered.
    end(&mut p, &lost, TransactionResolution::Commit).expect_status(Status::MessageIllegal);
    assert_eq!(delivered(&mut p, TOPIC), vec!["checked"]);
}

#[test]
fn transaction_status_counts_pending_halves_per_group() {
    use ringmq_wire::command::TransactionStatus;
    let dir = tempdir("txn-status");
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "1", "--set", "transactionTimeOut=3600000"],
    );
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok(TOPIC, 1);
    c.send_bytes(TOPIC, 0, &half("a", "S1")).ok();
    c.send_bytes(TOPIC, 0, &half("b", "S2")).ok();
    let st = wait_for(Duration::from_secs(10), || {
        let r = c.call(RequestCode::GetTransactionStatus, &Empty, &[]);
        let st = TransactionStatus::decode(&r.ok().body).unwrap();
        (st.groups.iter().map(|g| g.pending).sum::<u64>() == 2).then_some(st)
    })
    .expect("the status did not show 2 pending halves within 10 s");
    assert_eq!(st.groups.len(), 1);
    assert_eq!(st.groups[0].producer_group, GROUP);
    assert!(st.groups[0].oldest_stored_ms > 0);
    assert_eq!((st.timeout_ms, st.check_max), (3_600_000, 15));
    assert!(st.checking);
}

/// SYNC_MASTER: a half and its decisions are acknowledged once the slave has them. With the
/// master killed, the slave serves the committed message and never the rolled-back one.
#[test]
fn a_slave_has_halves_and_decisions() {
    use std::net::SocketAddr;
    let dir = tempdir("txn-ha");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "SYNC_MASTER", 1);
    let mut master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.unwrap()));
    let slave = HaBroker::slave(&dir.path().join("slave"), 1, Some(ha)).start(nsa);
    let (maddr, saddr) = (master.broker_addr(), slave.broker_addr());
    let mut mc = Client::connect(maddr);
    mc.create_topic_ok(TOPIC, 1);
    assert!(wait_slaves_connected(maddr, 1, Duration::from_secs(10)));
    assert!(wait_topic_on(saddr, TOPIC, Duration::from_secs(10)));

    let kept: SendResponse = mc
        .send_bytes(TOPIC, 0, &half("kept", "H1"))
        .fields()
        .unwrap();
    let dropped: SendResponse = mc
        .send_bytes(TOPIC, 0, &half("dropped", "H2"))
        .fields()
        .unwrap();
    end(&mut mc, &kept, TransactionResolution::Commit).ok();
    end(&mut mc, &dropped, TransactionResolution::Rollback).ok();
    // SUCCESS under SYNC_MASTER: the slave has both decisions.
    master.kill9();
    let mut sc = Client::connect(saddr);
    assert_eq!(delivered(&mut sc, TOPIC), vec!["kept"]);
    // A slave does not decide.
    end(&mut sc, &dropped, TransactionResolution::Commit)
        .expect_status(Status::ServiceNotAvailable);
}
