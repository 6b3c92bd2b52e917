//! Recall across a failover, with real processes: an ASYNC_MASTER and its slave, scheduled
//! messages sent and half of them recalled on the master; once the slave has everything,
//! the master is killed (-9) and the slave's store is started as the master (RocketMQ's
//! manual failover: same brokerName, brokerId 0). The recall records came over with the log,
//! so the new master delivers exactly the messages that were not recalled, answers the
//! recalled ones "already recalled" and a delivered one RECALL_TOO_LATE. A slave refuses a
//! recall (it does not deliver).
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{PullResponse, RecallRequest, RecallResponse};
use ringmq_wire::properties::keys;
use ringmq_wire::recall::RecallHandle;

const TOPIC: &str = "HaRecall";
const QUEUES: u32 = 4;
const N: u32 = 16;

fn recall(c: &mut Client, handle: &str) -> Resp {
    let h = RecallRequest {
        producer_group: "pg".into(),
        topic: TOPIC.into(),
        recall_handle: handle.into(),
    };
    c.call(RequestCode::RecallMessage, &h, &[])
}

/// Bodies delivered to the topic so far (every queue from its first offset).
fn delivered(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    for q in 0..QUEUES {
        let mut at = c.min_offset(TOPIC, q);
        while at < c.max_offset(TOPIC, q) {
            let r = c.pull(TOPIC, q, at, 64, 0);
            let f = r.fields::<PullResponse>().expect("pull fields");
            for rec in decode_records(&r.body) {
                out.push(String::from_utf8(rec.body.to_vec()).unwrap());
            }
            at = f.next_begin_offset;
        }
    }
    out
}

#[test]
fn a_slave_that_becomes_master_never_delivers_what_was_recalled() {
    let dir = tempdir("ha-recall");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "ASYNC_MASTER", 2);
    let mut master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.expect("pinned")));
    let mut scfg = HaBroker::slave(&dir.path().join("slave"), 2, Some(ha));
    let mut slave = scfg.start(nsa);
    let (maddr, saddr) = (master.broker_addr(), slave.broker_addr());
    Client::connect(maddr).create_topic_ok(TOPIC, QUEUES);
    assert!(wait_slaves_connected(maddr, 2, Duration::from_secs(10)));
    assert!(wait_topic_on(saddr, TOPIC, Duration::from_secs(10)));

    // Due far enough ahead for the failover to finish first.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let due = now + 12_000;
    let due_text = due.to_string();
    let mut m = Client::connect(maddr);
    let handles: Vec<String> = (0..N)
        .map(|i| {
            let msg = Msg::new(TOPIC, i % QUEUES, format!("m{i}"))
                .props(&[(keys::TIMER_DELIVER_MS, due_text.as_str())]);
            let s = m.send_ok(&msg);
            assert_eq!(s.deliver_at_ms, due);
            RecallHandle {
                topic: TOPIC.into(),
                broker_name: mcfg.broker_name.clone(),
                deliver_at_ms: due,
                message_id: s.message_id(s.first_physical_offset),
            }
            .encode()
        })
        .collect();
    for i in (0..N).step_by(2) {
        let r = recall(&mut m, &handles[i as usize]);
        r.ok();
        let f = r.fields::<RecallResponse>().expect("recall fields");
        let h = RecallHandle::decode(&handles[i as usize]).unwrap();
        assert_eq!(f.message_id, h.message_id);
    }
    let on_slave = recall(&mut Client::connect(saddr), &handles[1]);
    assert_eq!(
        on_slave.status(),
        Status::ServiceNotAvailable,
        "{}",
        on_slave.remark()
    );
    assert!(
        wait_caught_up(maddr, saddr, Duration::from_secs(20)).is_some(),
        "the slave did not catch up"
    );

    // Failover: the master dies, the slave's store comes back as the master.
    master.kill9();
    slave.term();
    scfg.role = "ASYNC_MASTER";
    scfg.broker_id = 0;
    scfg.ha_listen_port = Some(0);
    scfg.ha_master_address = None;
    let promoted = scfg.start(nsa);
    let mut p = Client::connect(promoted.broker_addr());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(now < due - 1_000, "the failover took until the due time");
    // The recalls came with the log: "already recalled" before the due time.
    let again = recall(&mut p, &handles[0]);
    again.ok();
    assert!(
        again.remark().contains("already recalled"),
        "{}",
        again.remark()
    );
    // A control message due after the others: once it is delivered, so is every other.
    let control = Msg::new(TOPIC, 0, "control")
        .props(&[(keys::TIMER_DELIVER_MS, (due + 200).to_string().as_str())]);
    p.send_ok(&control);
    let got = wait_for(Duration::from_secs(40), || {
        let got = delivered(&mut p);
        got.contains(&"control".to_string()).then_some(got)
    })
    .expect("the control message was not delivered by the promoted master");
    let mut want: Vec<String> = (1..N).step_by(2).map(|i| format!("m{i}")).collect();
    want.push("control".into());
    let mut got_sorted = got.clone();
    got_sorted.sort();
    want.sort();
    assert_eq!(
        got_sorted, want,
        "the promoted master delivers exactly what was not recalled"
    );
    recall(&mut p, &handles[1]).expect_status(Status::RecallTooLate);
    recall(&mut p, &handles[2]).ok();
}
