//! RocketMQ 5's Python SDK (PyPI `rocketmq-python-client` 5.1.2, unchanged) against a real
//! `ringmq standalone` on loopback: the offset-based RPCs and FIFO consumer groups.
//!
//! - `offset_rpcs_share_the_groups_offsets` (`grpc/grpc_offsets.py`, through the SDK's
//!   generated stubs): QueryOffset by BEGINNING, END and TIMESTAMP; PullMessage's stream
//!   (status, messages, next offset; a long poll at the end; ILLEGAL_OFFSET outside the
//!   queue); GetOffset before a commit, UpdateOffset, GetOffset. Then ringmq's native admin
//!   client reads the group's committed offset the gRPC client set (4) and commits 7; the
//!   script, run again, reads 7 with GetOffset and pulls the rest from there.
//! - `fifo_group_consumes_each_message_group_in_order` (`grpc/grpc_fifo.py`): two consumer
//!   groups made orderly with the native admin call `ringmq-ctl group update -o true` makes;
//!   the SDK's PushConsumer is told `fifo` and consumes every message group in send order
//!   (a failed message retried in place), its SimpleConsumer never gets a message while an
//!   earlier one of its group is held unacked. ringmq's side: both groups' POP counts say
//!   every message acked, none in flight.
//!
//! Build the server first: `cargo build -p ringmq-node --bin ringmq`.

#[path = "grpc/harness.rs"]
mod harness;

use std::time::Duration;

use ringmq_client::{Admin, MessageQueue};

const SCRIPT_LIMIT: Duration = Duration::from_secs(170);

#[test]
fn offset_rpcs_share_the_groups_offsets() {
    let dir = ringmq_testkit::tempdir("grpc-offsets");
    let (node, namesrv, grpc) = harness::standalone(dir.path(), &[]);
    let rt = harness::runtime();
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    let (topic, group, n) = ("GrpcOffsets", "grpc-offsets", 10u64);
    rt.block_on(admin.create_topic(topic, 1, Duration::from_secs(10)))
        .expect("creating the topic");
    let args = |rest: &[&str]| -> Vec<String> {
        [grpc.to_string(), topic.into(), group.into(), n.to_string()]
            .into_iter()
            .chain(rest.iter().map(|s| s.to_string()))
            .collect()
    };
    harness::script(
        dir.path(),
        "grpc_offsets.py",
        &args(&["first"]),
        SCRIPT_LIMIT,
        &[&node],
    );

    // The offset the gRPC client committed is the group's, as the native client reads it.
    let mq = MessageQueue::new(topic, "broker-a", 0);
    let committed = rt
        .block_on(admin.committed_offset(group, &mq))
        .expect("reading the group's offset");
    assert_eq!(committed, Some(4), "the offset UpdateOffset committed");
    rt.block_on(admin.commit_offset(group, &mq, 7))
        .expect("committing natively");
    harness::script(
        dir.path(),
        "grpc_offsets.py",
        &args(&["second", "7"]),
        SCRIPT_LIMIT,
        &[&node],
    );
    // Nothing the pulls did moved the group's offset: only commits do.
    let committed = rt
        .block_on(admin.committed_offset(group, &mq))
        .expect("reading the group's offset");
    assert_eq!(committed, Some(7));
    assert_eq!(
        rt.block_on(admin.max_offset(&mq)).expect("max offset"),
        n,
        "messages stored"
    );
}

#[test]
fn fifo_group_consumes_each_message_group_in_order() {
    let dir = ringmq_testkit::tempdir("grpc-fifo");
    let (node, namesrv, grpc) = harness::standalone(dir.path(), &[]);
    let rt = harness::runtime();
    let admin = rt
        .block_on(Admin::connect(&namesrv.to_string()))
        .expect("an admin client");
    let (topic, push_group, simple_group) = ("GrpcFifoOrder", "grpc-fifo-push", "grpc-fifo-simple");
    let (groups, per_group) = (4usize, 10usize);
    rt.block_on(admin.create_topic(topic, 4, Duration::from_secs(10)))
        .expect("creating the topic");
    for g in [push_group, simple_group] {
        let changed = rt
            .block_on(admin.set_group_settings(g, 3, true))
            .unwrap_or_else(|e| panic!("making {g} orderly: {e}"));
        assert_eq!(changed.len(), 1, "brokers that took {g}'s settings");
    }
    let out = harness::script(
        dir.path(),
        "grpc_fifo.py",
        &[
            grpc.to_string(),
            topic.into(),
            push_group.into(),
            simple_group.into(),
            groups.to_string(),
            per_group.to_string(),
        ],
        SCRIPT_LIMIT,
        &[&node],
    );
    assert!(out.contains("ok: push consumer told fifo"));
    assert!(out.contains("ok: done"));
    let total = (groups * per_group) as u64;
    let sent = out.lines().filter(|l| l.starts_with("sent ")).count() as u64;
    assert_eq!(sent, total, "messages the script sent");

    // ringmq's side: each group popped and acked every message once, none in flight.
    for g in [push_group, simple_group] {
        let pop = rt
            .block_on(admin.pop_status(g))
            .unwrap_or_else(|e| panic!("POP status of {g}: {e}"));
        assert_eq!(
            (pop.acked, pop.in_flight, pop.revived),
            (total, 0, 0),
            "POP counts (acked, in flight, revived) of {g}"
        );
    }
}
