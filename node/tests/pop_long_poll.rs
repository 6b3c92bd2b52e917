//! POP long polling on a broker of two shards (`ringmq standalone --shards 2`, native
//! protocol, each waiting connection handed to one shard by HELLO): a pop of any queue
//! (`queue_id = -1`) parked with a long poll time returns a message that becomes ready on a
//! queue of either shard, whichever shard the request landed on; not PULL_NOT_FOUND once
//! its poll time ends. Plain: a new message. Orderly: the next message of a queue held by an
//! unacked pop, once that pop is acked. Each case runs with the request landing on each
//! shard and the message on each shard's queue, so some case always waits across shards.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{
    AckRequest, FilterType, PopInitMode, PopRequest, PopResponse, ReceiptHandle,
};

/// The parked pops' poll time: far longer than any wake-up takes, shorter than the read
/// timeout below.
const POLL_MS: u32 = 20_000;
const INVISIBLE_MS: u64 = 60_000;

fn pop_request(topic: &str, group: &str, max: u32, poll_ms: u32, order: bool) -> PopRequest {
    PopRequest {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: -1,
        max_messages: max,
        invisible_time_ms: INVISIBLE_MS,
        poll_time_ms: poll_ms,
        filter_type: FilterType::Tag,
        expression: "*".into(),
        init_mode: PopInitMode::Min,
        order,
    }
}

/// A queue of `cfg` on shard `owner`.
fn queue_on(cfg: &ringmq_wire::command::route::TopicConfig, owner: u16) -> u32 {
    let q = cfg.queue_shards.iter().position(|&s| s == owner);
    q.unwrap_or_else(|| panic!("no queue on shard {owner}: {:?}", cfg.queue_shards)) as u32
}

/// Sends a pop with a long poll time on a connection handed to shard `landing`, and waits
/// until the broker counts a parked long poll. Returns the thread that reads its answer.
fn park_pop(
    addr: std::net::SocketAddr,
    admin: &mut Client,
    landing: u16,
    req: PopRequest,
) -> std::thread::JoinHandle<Resp> {
    let mut waiter = Client::connect(addr);
    assert_eq!(waiter.hello(Some(landing)).shard_id, landing);
    waiter.set_read_timeout(Duration::from_secs(u64::from(POLL_MS) / 1000 + 30));
    let id = waiter.send_frame(RequestCode::PopMessage, &req, &[]);
    let handle = std::thread::spawn(move || waiter.recv(id));
    let parked = wait_for(Duration::from_secs(10), || {
        let info = admin.runtime_info();
        (info.shards.iter().map(|s| s.parked_pulls).sum::<u32>() >= 1).then_some(())
    });
    assert!(
        parked.is_some(),
        "the pop that landed on shard {landing} never parked"
    );
    handle
}

/// The records of a SUCCESS pop answer (panics with the status and remark otherwise).
fn popped(r: &Resp, case: &str) -> Vec<(u32, u64, Vec<u8>)> {
    assert_eq!(
        r.status(),
        Status::Success,
        "{case}: the parked pop answered {} ({:?}) instead of the message",
        r.status().name(),
        r.remark()
    );
    decode_records(&r.body)
        .iter()
        .map(|rec| (rec.queue_id, rec.queue_offset, rec.body.to_vec()))
        .collect()
}

#[test]
fn an_any_queue_pop_parked_on_one_shard_takes_a_message_sent_to_either_shard() {
    let dir = tempdir("pop-long-poll");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let addr = node.broker_addr();
    let mut admin = Client::connect(addr);
    for landing in 0..2u16 {
        for owner in 0..2u16 {
            let case = format!("landed on shard {landing}, message on shard {owner}");
            let topic = format!("PopWake-{landing}-{owner}");
            let group = format!("pop-wake-{landing}-{owner}");
            let cfg = admin.create_topic_ok(&topic, 4);
            let q = queue_on(&cfg, owner);
            let t0 = Instant::now();
            let waiter = park_pop(
                addr,
                &mut admin,
                landing,
                pop_request(&topic, &group, 32, POLL_MS, false),
            );
            let body = format!("wake {landing} {owner}");
            let sent = admin.send_ok(&Msg::new(&topic, q, body.clone()));
            let r = waiter.join().unwrap();
            let got = popped(&r, &case);
            assert_eq!(
                got,
                vec![(q, sent.first_queue_offset, body.into_bytes())],
                "{case}"
            );
            eprintln!("{case}: answered after {:?}", t0.elapsed());
            // Popped once: nothing is left for the group.
            let mut again = Client::connect(addr);
            again
                .call(
                    RequestCode::PopMessage,
                    &pop_request(&topic, &group, 32, 0, false),
                    &[],
                )
                .expect_status(Status::PullNotFound);
        }
    }
}

#[test]
fn an_orderly_pop_parked_behind_a_held_queue_takes_its_next_message_once_acked() {
    let dir = tempdir("pop-long-poll-orderly");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let addr = node.broker_addr();
    let mut admin = Client::connect(addr);
    for landing in 0..2u16 {
        for owner in 0..2u16 {
            let case = format!("orderly, landed on shard {landing}, held queue on shard {owner}");
            let topic = format!("PopOrderWake-{landing}-{owner}");
            let group = format!("pop-order-wake-{landing}-{owner}");
            let cfg = admin.create_topic_ok(&topic, 4);
            let q = queue_on(&cfg, owner);
            for i in 0..2 {
                admin.send_ok(&Msg::new(&topic, q, format!("m{i}")));
            }
            // The first pop takes m0 and holds the queue until m0 is acked.
            let mut holder = Client::connect(addr);
            let first = holder.call(
                RequestCode::PopMessage,
                &pop_request(&topic, &group, 1, 0, true),
                &[],
            );
            assert_eq!(
                popped(&first, &case),
                vec![(q, 0, b"m0".to_vec())],
                "{case}"
            );
            let fields: PopResponse = first.fields().unwrap();
            // The second waits: the only queue with messages is held.
            let t0 = Instant::now();
            let waiter = park_pop(
                addr,
                &mut admin,
                landing,
                pop_request(&topic, &group, 32, POLL_MS, true),
            );
            let handle = ReceiptHandle {
                start_offset: 0,
                pop_time_ms: fields.pop_time_ms,
                invisible_time_ms: fields.invisible_time_ms,
                revive_shard: fields.revive_shard,
                retry: false,
                broker_name: "standalone".into(),
                queue_id: q,
                queue_offset: 0,
            };
            holder
                .call(
                    RequestCode::AckMessage,
                    &AckRequest {
                        consumer_group: group.clone(),
                        topic: topic.clone(),
                        queue_id: q,
                        extra_info: handle.to_string(),
                        offset: 0,
                    },
                    &[],
                )
                .ok();
            let r = waiter.join().unwrap();
            assert_eq!(popped(&r, &case), vec![(q, 1, b"m1".to_vec())], "{case}");
            eprintln!("{case}: answered after {:?}", t0.elapsed());
        }
    }
}
