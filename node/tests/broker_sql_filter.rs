//! SQL92 property filters against the real binary (issue #15): with
//! `enablePropertyFilter=true` a pull returns exactly the records whose properties match
//! (missing properties and type mismatches never match); a bad expression is refused when
//! the consumer heartbeats and when it pulls, naming the group, topic and position; with the
//! filter disabled both are refused with PROPERTY_FILTER_DISABLED.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{
    ConsumeFromWhere, ConsumeType, ConsumerGroupData, ConsumerList, GetConsumerListRequest,
    HeartbeatData, MessageModel, PullResponse, Subscription,
};

const TOPIC: &str = "SqlFilter";

fn heartbeat(c: &mut Client, group: &str, expression: &str) -> Resp {
    let hb = HeartbeatData {
        client_id: "sql-client".to_string(),
        producer_groups: vec![],
        consumer_groups: vec![ConsumerGroupData {
            group: group.to_string(),
            consume_type: ConsumeType::Passively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::FirstOffset,
            subscriptions: vec![Subscription {
                topic: TOPIC.to_string(),
                filter_type: FilterType::Sql92,
                expression: expression.to_string(),
                version: 1,
            }],
        }],
    };
    c.call(RequestCode::HeartBeat, &Empty, &hb.to_vec().unwrap())
}

fn members(c: &mut Client, group: &str) -> Vec<String> {
    let r = c.call(
        RequestCode::GetConsumerListByGroup,
        &GetConsumerListRequest {
            consumer_group: group.to_string(),
        },
        &[],
    );
    if r.status() != Status::Success {
        return Vec::new();
    }
    ConsumerList::decode(&r.body).unwrap().client_ids
}

fn sql_pull(c: &mut Client, expression: &str) -> Resp {
    let mut h = pull_request(TOPIC, 0, 0, 32, 0);
    h.consumer_group = "cg".to_string();
    h.filter_type = FilterType::Sql92;
    h.expression = expression.to_string();
    c.call(RequestCode::PullMessage, &h, &[])
}

/// Record i has a = i except: 7 has no `a`, 8 has a = "x"; color alternates red/blue; TAGS
/// TagA on multiples of 3.
fn send_records(c: &mut Client) {
    for i in 0..10u32 {
        let a = i.to_string();
        let color = if i % 2 == 0 { "red" } else { "blue" };
        let mut props = vec![("color", color)];
        match i {
            7 => {}
            8 => props.push(("a", "x")),
            _ => props.push(("a", a.as_str())),
        }
        if i % 3 == 0 {
            props.push(("TAGS", "TagA"));
        }
        c.send_ok(&Msg::new(TOPIC, 0, format!("m{i}")).props(&props));
    }
}

#[test]
fn sql92_pulls_deliver_exactly_the_matching_records() {
    let dir = tempdir("sql-filter");
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--set", "enablePropertyFilter=true"],
    );
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok(TOPIC, 1);
    send_records(&mut c);

    heartbeat(&mut c, "cg", "a > 5").ok();
    assert_eq!(members(&mut c, "cg"), vec!["sql-client"]);
    for (expr, want) in [
        ("a > 5", vec![6u64, 9]),
        ("a >= 0", vec![0, 1, 2, 3, 4, 5, 6, 9]),
        ("NOT (a < 3)", vec![3, 4, 5, 6, 9]),
        ("a BETWEEN 2 AND 6 AND color = 'red'", vec![2, 4, 6]),
        ("a NOT BETWEEN 2 AND 6", vec![0, 1, 9]),
        ("a IS NULL", vec![7]),
        ("a IS NOT NULL AND color <> 'red'", vec![1, 3, 5, 9]),
        ("TAGS IN ('TagA') OR a = 1", vec![0, 1, 3, 6, 9]),
        ("color NOT IN ('red', 'green')", vec![1, 3, 5, 7, 9]),
        ("a = 'x'", vec![8]),
        (
            "missing = 1 OR missing IS NULL",
            vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
    ] {
        let r = sql_pull(&mut c, expr);
        r.ok();
        let got: Vec<u64> = decode_records(&r.body)
            .iter()
            .map(|r| r.queue_offset)
            .collect();
        assert_eq!(got, want, "expression {expr:?}");
        assert_eq!(r.fields::<PullResponse>().unwrap().next_begin_offset, 10);
    }
    // Nothing matches: the pull moves past every record and says so.
    let r = sql_pull(&mut c, "a > 100");
    r.expect_status(Status::PullRetryImmediately);
    assert_eq!(r.fields::<PullResponse>().unwrap().next_begin_offset, 10);
}

#[test]
fn bad_expressions_are_refused_at_subscribe_and_pull() {
    let dir = tempdir("sql-bad");
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--set", "enablePropertyFilter=true"],
    );
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok(TOPIC, 1);
    send_records(&mut c);

    let r = heartbeat(&mut c, "bad-group", "a > ");
    r.expect_status(Status::SubscriptionParseFailed);
    let remark = r.remark();
    for needle in ["bad-group", TOPIC, "at 4: expected a value after '>'"] {
        assert!(remark.contains(needle), "{needle} not in {remark:?}");
    }
    assert!(members(&mut c, "bad-group").is_empty(), "nothing recorded");

    let r = sql_pull(&mut c, "color = 'red' AND IN");
    r.expect_status(Status::SubscriptionParseFailed);
    assert!(
        r.remark().contains("at 18: expected a value after AND"),
        "{}",
        r.remark()
    );
}

#[test]
fn disabled_property_filter_refuses_sql92() {
    let dir = tempdir("sql-off");
    let node = Node::standalone(&dir.path().join("data"), &[]);
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok(TOPIC, 1);
    send_records(&mut c);

    let r = heartbeat(&mut c, "cg", "a > 5");
    r.expect_status(Status::PropertyFilterDisabled);
    assert!(
        r.remark().contains("enablePropertyFilter=false"),
        "{}",
        r.remark()
    );
    assert!(members(&mut c, "cg").is_empty());
    let r = sql_pull(&mut c, "a > 5");
    r.expect_status(Status::PropertyFilterDisabled);
    assert!(decode_records(&r.body).is_empty());
    // Tag subscriptions are unaffected.
    let mut h = pull_request(TOPIC, 0, 0, 32, 0);
    h.expression = "TagA".to_string();
    c.call(RequestCode::PullMessage, &h, &[]).ok();
}
