//! `rocketmq-client-rust` 1.0.0 (crates.io, unchanged, default settings unless a test says
//! otherwise) against a real `ringmq standalone` on loopback: the RocketMQ application's
//! view of ringmq (issue #23, item 6).
//!
//! Each test starts its own node (temp dir, free ports, killed on drop) and its own client
//! runtime, names its own topics and groups, and bounds every wait: a whole test body is
//! cut at 55 s.
//!
//! Four cases need process-wide client settings that the client reads once per process
//! from the environment, so they run in a child process (this test binary again, running
//! the ignored test `child` with the settings in its environment):
//! - `send_message_v2`: `org.apache.rocketmq.client.sendSmartMsg=true`, so single sends are
//!   SEND_MESSAGE_V2 (short header field names) instead of SEND_MESSAGE;
//! - `binary_headers`: `ROCKETMQ_SERIALIZE_TYPE=ROCKETMQ`, so every request header is
//!   RocketMQ's binary serialization instead of JSON;
//! - `broadcasting`: `rocketmq.client.localOffsetStoreDir` in the test's temp dir (a
//!   broadcasting member keeps its offsets in a local file, by default under `$HOME`);
//! - `orderly2`: `rocketmq.client.rebalance.waitInterval` and `.lockInterval` at 2 s (the
//!   defaults, 20 s, would let one missed lock attempt take most of the test's time).

use std::future::Future;
use std::time::Duration;

use ringmq_testkit::Spawn;

#[path = "rust_client/delivery.rs"]
mod delivery;
#[path = "rust_client/groups.rs"]
mod groups;
#[path = "rust_client/mixed.rs"]
mod mixed;
#[path = "rust_client/node.rs"]
mod node;
#[path = "rust_client/offsets.rs"]
mod offsets;
#[path = "rust_client/queries.rs"]
mod queries;
#[path = "rust_client/reply.rs"]
mod reply;
#[path = "rust_client/restart.rs"]
mod restart;
#[path = "rust_client/rmq.rs"]
mod rmq;
#[path = "rust_client/sends.rs"]
mod sends;
#[path = "rust_client/tx.rs"]
mod tx;

use node::Node;
use rmq::TEST_LIMIT;

/// Runs a test body under [`TEST_LIMIT`]; on a timeout, fails with the node's log.
async fn within(node: &Node, body: impl Future<Output = ()>) {
    if tokio::time::timeout(TEST_LIMIT, body).await.is_err() {
        panic!(
            "the test did not finish within {TEST_LIMIT:?}; ringmq's log ends:\n{}",
            node.log_tail()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_async_oneway_and_batch_sends_with_tags_keys_and_properties() {
    let node = Node::start();
    within(&node, sends::roundtrip(&node.namesrv(), sends::Mode::Json)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_async_sends_in_flight() {
    let node = Node::start();
    within(&node, sends::many_async_sends_in_flight(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_far_over_64_kib_once_escaped() {
    let node = Node::start();
    within(&node, sends::huge_escaped_header(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_group_of_two_rebalances_when_a_member_leaves() {
    let node = Node::start();
    within(
        &node,
        groups::rebalance_when_a_member_leaves(&node.namesrv()),
    )
    .await;
}

#[test]
fn broadcasting_delivers_every_message_to_every_member() {
    let node = Node::start();
    let offsets = node.dir.path().join("client-offsets");
    run_child(
        "broadcasting",
        &node,
        &[(
            "rocketmq.client.localOffsetStoreDir",
            offsets.to_string_lossy().as_ref(),
        )],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumption_under_queue_locks() {
    let node = Node::start();
    within(&node, groups::orderly(&node.namesrv())).await;
}

#[test]
fn orderly_consumption_with_two_members_sharing_the_locks() {
    let node = Node::start();
    run_child(
        "orderly2",
        &node,
        &[
            ("rocketmq.client.rebalance.waitInterval", "2000"),
            ("rocketmq.client.rebalance.lockInterval", "2000"),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_level_delivers_after_its_delay() {
    let node = Node::start();
    within(&node, delivery::delay_level(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_delay_and_delivery_time_properties() {
    let node = Node::start();
    within(&node, delivery::timer_delays(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_megabytes_in_one_queue_in_pulls_the_client_accepts() {
    let node = Node::start();
    within(&node, delivery::large_bodies_in_one_queue(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_listener_retries_through_retry_topic_then_dead_letters() {
    let node = Node::start();
    within(&node, delivery::retry_then_dead_letter(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_rollback_and_check_back() {
    let node = Node::start();
    within(&node, tx::commit_rollback_and_check_back(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_subscription_gets_only_matching_messages() {
    let node = Node::start();
    within(&node, delivery::sql92(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_polls_its_tags() {
    let node = Node::start();
    within(&node, delivery::lite_pull(&node.namesrv())).await;
}

#[test]
fn send_message_v2_with_send_smart_msg() {
    let node = Node::start();
    run_child(
        "v2",
        &node,
        &[("org.apache.rocketmq.client.sendSmartMsg", "true")],
    );
}

#[test]
fn binary_rocketmq_headers() {
    let node = Node::start();
    run_child("binary", &node, &[("ROCKETMQ_SERIALIZE_TYPE", "ROCKETMQ")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sent_by_rocketmq_client_consumed_by_native_client() {
    let node = Node::start();
    within(&node, mixed::rocketmq_to_native(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sent_by_native_client_consumed_by_rocketmq_client() {
    let node = Node::start();
    within(&node, mixed::native_to_rocketmq(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_group_with_a_native_and_a_rocketmq_member() {
    let node = Node::start();
    within(&node, mixed::one_group_both_protocols(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_view_by_id_and_query_by_key() {
    let node = Node::start();
    within(&node, queries::offsets_view_and_query(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_and_transactions_across_both_kinds_of_client() {
    let node = Node::start();
    within(
        &node,
        mixed::delays_and_transactions_across_kinds(&node.namesrv()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_body_reaches_both_kinds_of_consumer() {
    let node = Node::start();
    within(&node, mixed::compressed_body_to_both_kinds(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_pull_consumer_sees_every_pull_status_with_its_offsets() {
    let node = Node::start();
    within(&node, offsets::classic_pull(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_group_with_default_start_reads_queues_from_zero() {
    let node = Node::start();
    within(&node, offsets::new_group_default_start(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_resumes_where_it_committed() {
    let node = Node::start();
    within(&node, offsets::resume_where_committed(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_reconnect_after_a_broker_restart() {
    let mut node = Node::start();
    let body = restart::clients_survive_a_broker_restart(&mut node);
    if tokio::time::timeout(TEST_LIMIT, body).await.is_err() {
        panic!(
            "the test did not finish within {TEST_LIMIT:?}; ringmq's log ends:\n{}",
            node.log_tail()
        );
    }
}

/// Runs `case` in a child process (see the module docs) against `node`, with `env`.
fn run_child(case: &str, node: &Node, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().expect("this test binary's path");
    let mut spawn = Spawn::new(&format!("child-{case}"), exe)
        .args([
            "child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("INTEROP_CHILD", case)
        .env("INTEROP_NAMESRV", node.namesrv())
        .log(node.dir.path().join(format!("child-{case}.log")));
    for (k, v) in env {
        spawn = spawn.env(k, v);
    }
    let out = ringmq_testkit::run(spawn, TEST_LIMIT + Duration::from_secs(3));
    assert!(
        out.code == 0 && out.stdout.contains("1 passed"),
        "the child process for {case} failed (exit {}):\n{}\n{}\nringmq's log ends:\n{}",
        out.code,
        ringmq_testkit::tail(&out.stdout, 60),
        ringmq_testkit::tail(&out.stderr, 60),
        node.log_tail()
    );
}

/// The body of a child process started by [`run_child`]; does nothing when run by hand.
#[test]
#[ignore = "run by other tests in a process of its own, with client settings in its environment"]
fn child() {
    let Ok(case) = std::env::var("INTEROP_CHILD") else {
        return;
    };
    let namesrv = std::env::var("INTEROP_NAMESRV").expect("INTEROP_NAMESRV");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async move {
        let body = async {
            match case.as_str() {
                "v2" => sends::roundtrip(&namesrv, sends::Mode::V2).await,
                "binary" => {
                    binary_headers_are_selected();
                    sends::roundtrip(&namesrv, sends::Mode::Binary).await;
                    groups::orderly(&namesrv).await;
                    groups::rebalance_when_a_member_leaves(&namesrv).await;
                    tx::commit_rollback_and_check_back(&namesrv).await;
                    sends::many_async_sends_in_flight(&namesrv).await;
                }
                "broadcasting" => groups::broadcasting(&namesrv).await,
                "orderly2" => groups::orderly_two_members(&namesrv).await,
                other => panic!("unknown child case {other}"),
            }
        };
        tokio::time::timeout(TEST_LIMIT, body)
            .await
            .expect("the child's test body finished in time");
    });
}

/// The client did pick binary headers from the environment (it reads it once, when the
/// first client runtime is made).
fn binary_headers_are_selected() {
    let rmq = rmq::Rmq::new("127.0.0.1:1");
    assert!(
        rmq::binary_default(),
        "ROCKETMQ_SERIALIZE_TYPE was not applied"
    );
    drop(rmq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_rocketmq_requester_native_replier() {
    let node = Node::start();
    within(&node, reply::rocketmq_requester(&node.namesrv())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_native_requester_rocketmq_replier() {
    let node = Node::start();
    within(&node, reply::rocketmq_replier(&node.namesrv())).await;
}
