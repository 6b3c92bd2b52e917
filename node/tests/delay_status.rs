//! `GET_SCHEDULE_STATUS` (what `ringmq-ctl delay status` prints) counts what will be
//! delivered: a recalled message is not pending, and its due time is not the next one.
//! Real process: a standalone node, scheduled messages with a delivery time and with a
//! delay level, half of them recalled.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ringmq_testkit::poll_until;
use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::{RecallRequest, ScheduleStatus};
use ringmq_wire::properties::keys;
use ringmq_wire::recall::RecallHandle;

const TOPIC: &str = "DelayStatus";

fn status(c: &mut Client) -> ScheduleStatus {
    let r = c.call(RequestCode::GetScheduleStatus, &Empty, &[]);
    r.ok();
    ScheduleStatus::decode(&r.body).expect("schedule status body")
}

/// Level 4 is 30 s by default.
fn level_pending(s: &ScheduleStatus, level: u32) -> u64 {
    s.levels
        .iter()
        .find(|l| l.level == level)
        .map_or(0, |l| l.pending)
}

fn send(c: &mut Client, body: &str, prop: (&str, &str)) -> String {
    let s = c.send_ok(&Msg::new(TOPIC, 0, body).props(&[prop]));
    assert!(s.deliver_at_ms > 0, "{body} was not scheduled");
    RecallHandle {
        topic: TOPIC.into(),
        broker_name: "broker-a".into(),
        deliver_at_ms: s.deliver_at_ms,
        message_id: s.message_id(s.first_physical_offset),
    }
    .encode()
}

fn recall(c: &mut Client, handle: &str) {
    let h = RecallRequest {
        producer_group: "pg".into(),
        topic: TOPIC.into(),
        recall_handle: handle.into(),
    };
    c.call(RequestCode::RecallMessage, &h, &[]).ok();
}

#[test]
fn a_recalled_message_is_not_counted_as_pending() {
    let dir = tempdir("delay-status");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "1"]);
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok(TOPIC, 1);
    let due_recalled = now_ms() + 120_000;
    let due_kept = now_ms() + 240_000;
    let recalled_at = send(
        &mut c,
        "at",
        (keys::TIMER_DELIVER_MS, &due_recalled.to_string()),
    );
    send(
        &mut c,
        "kept",
        (keys::TIMER_DELIVER_MS, &due_kept.to_string()),
    );
    let recalled_level = send(&mut c, "level", (keys::DELAY, "4"));
    let slot = |ms: i64| ms - ms.rem_euclid(1000);
    let before = wait_for(Duration::from_secs(20), || {
        let s = status(&mut c);
        (s.timer_pending == 2 && level_pending(&s, 4) == 1).then_some(s)
    })
    .expect("the schedule did not count the three messages");
    assert!(before.next_due_ms > 0 && before.next_due_ms < slot(due_recalled));

    recall(&mut c, &recalled_at);
    recall(&mut c, &recalled_level);
    // The counts are published by the delivery loop, which the recall wakes.
    let after = poll_until(Duration::from_secs(10), || {
        let s = status(&mut c);
        s.timer_pending == 1 && level_pending(&s, 4) == 0
    });
    let s = status(&mut c);
    assert!(after, "recalled messages still counted as pending: {s:?}");
    assert_eq!(
        s.next_due_ms,
        slot(due_kept),
        "the next due time is the kept message's, not a recalled one's: {s:?}"
    );
}
