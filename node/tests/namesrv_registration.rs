//! Registration after a topic change: the broker re-registers with its name servers at once
//! (not at the next `registerNameServerPeriod`, 30 s by default), so a new topic's route and a
//! deleted topic's absence show up within a moment, even when changes come back to back.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::route::TopicList;
use ringmq_wire::command::DeleteTopicRequest;

/// How long "at once" may take here (far below the 30 s period).
const PROMPT: Duration = Duration::from_secs(3);

/// Regression: `broker::register::run` used to create its `topics_changed` listener only
/// after `register_all` returned, so a change notified while a registration was in flight
/// woke no one and the route waited for the next period (failed about 2 runs in 3).
#[test]
fn topic_changes_reach_the_name_server_at_once() {
    let dir = tempdir("register");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "1"]);
    let mut broker = Client::connect(node.broker_addr());
    let mut ns = Client::connect(node.namesrv_addr());
    // Topics created back to back: each change must be registered, including one that lands
    // while the registration of the previous one is still in flight.
    for i in 0..20 {
        let topic = format!("Reg{i}");
        broker.create_topic_ok(&topic, 2);
        if i % 5 == 4 {
            // Let a registration start, then change again right behind it.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let t = Instant::now();
    for i in 0..20 {
        let topic = format!("Reg{i}");
        let seen = wait_for(PROMPT.saturating_sub(t.elapsed()), || ns.route(&topic));
        assert!(
            seen.is_some(),
            "{topic}: no route {:?} after it was created (registerNameServerPeriod is 30 s: \
             was the change notification lost?)",
            t.elapsed()
        );
    }
    let r = ns.call(RequestCode::GetAllTopicListFromNameserver, &Empty, &[]);
    r.ok();
    let list = TopicList::decode(&r.body).unwrap();
    for i in 0..20 {
        assert!(list.topics.contains(&format!("Reg{i}")));
    }
    // A deleted topic leaves the route at once too.
    broker
        .call(
            RequestCode::DeleteTopicInBroker,
            &DeleteTopicRequest {
                topic: "Reg3".to_string(),
            },
            &[],
        )
        .ok();
    let gone = wait_for(PROMPT, || ns.route("Reg3").is_none().then_some(()));
    assert!(gone.is_some(), "Reg3 still routed after its deletion");
}
