//! The 16 growing retry delays end to end on the simulator's clock (RocketMQ's default
//! levels 3..=18: 10 s, 30 s, 1 min, 2 min, ... 1 h, 2 h, about 4 h 46 min in all), which no
//! real-time test can wait for. One master (ASYNC_FLUSH), one consumer that fails every
//! delivery of one message:
//!
//! 1. send the message; the consumer pulls it and sends it back (CONSUMER_SEND_MSG_BACK,
//!    delay level 0: the broker picks `3 + reconsume times`);
//! 2. each copy in `%RETRY%<group>` must arrive no earlier than its level's delay after the
//!    send-back was acknowledged, and within a second after it (by the master's clock), with
//!    `RECONSUME_TIME` one higher each time and the original's id, topic and body;
//! 3. halfway, the master is killed (kill -9) and restarted: the pending retry is rebuilt
//!    from the log and still delivered on time;
//! 4. the 16th copy sent back goes to `%DLQ%<group>` at once; nothing more reaches the retry
//!    topic.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::{
    dlq_topic, retry_topic, ConsumeFromWhere, ConsumeType, ConsumerGroupData,
    ConsumerSendBackRequest, FilterType, HeartbeatData, MessageModel, PullRequest, PullResponse,
    Response, Subscription,
};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Entry};

use crate::config::FlushDiskType;
use crate::io::clock;
use crate::io::rt;
use crate::io::sim::{NetConfig, World};
use crate::store::fault_disk::Crash;

use super::client::{self, Rpc, Shared};
use super::cluster::{BrokerNode, LoneMaster, CLIENTS, MASTER_ADDR};

const TOPIC: &str = "SimRetry";
const GROUP: &str = "sim-retry-group";
/// Retries before the dead-letter topic (RocketMQ's default).
const MAX_RECONSUME: u32 = 16;
/// Longest a retry may come after it is due, by the master's clock.
const LATE_MS_MAX: i64 = 1_000;

/// One delivery the consumer saw.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub reconsume_times: i32,
    /// When the send-back that produced it was acknowledged (master clock, ms).
    pub sent_back_ms: i64,
    /// When the copy was stored in the retry topic (its store timestamp).
    pub stored_ms: i64,
}

/// What the scenario saw (for the test's message).
#[derive(Debug, Clone, Default)]
pub struct RetryReport {
    pub events: u64,
    pub virtual_s: u64,
    pub deliveries: Vec<Delivery>,
    pub dead_lettered: bool,
}

#[derive(Default)]
struct Progress {
    deliveries: Vec<Delivery>,
    dead_lettered: bool,
    failure: Option<String>,
    done: bool,
}

/// Runs the scenario (see the module docs); the first broken expectation as text.
pub fn run(seed: u64, scratch: &std::path::Path) -> Result<RetryReport, String> {
    let world = World::new(seed, NetConfig::default());
    let _entered = world.enter();
    let mut lone = LoneMaster::start(
        &world,
        scratch,
        "retry",
        seed,
        FlushDiskType::AsyncFlush,
        "",
    )?;
    let progress: Rc<RefCell<Progress>> = Rc::default();
    let shared = Shared::own_checks(&world);
    world.spawn_on(CLIENTS, consume(shared, Rc::clone(&progress)));
    let result = drive(&world, &mut lone.node, &progress);
    lone.finish(&world);
    let p = progress.borrow();
    result.map(|()| RetryReport {
        events: world.polls(),
        virtual_s: world.now_ns() / 1_000_000_000,
        deliveries: p.deliveries.clone(),
        dead_lettered: p.dead_lettered,
    })
}

fn drive(
    world: &World,
    master: &mut BrokerNode,
    progress: &Rc<RefCell<Progress>>,
) -> Result<(), String> {
    let mut crashed = false;
    // Five hours of virtual time in one-minute steps (the levels add up to ~4 h 46 min).
    for _ in 0..(5 * 60) {
        world.run_for(Duration::from_secs(60));
        let p = progress.borrow();
        if let Some(f) = &p.failure {
            return Err(f.clone());
        }
        if p.done {
            break;
        }
        let halfway = p.deliveries.len() >= 9;
        drop(p);
        if halfway && !crashed {
            crashed = true;
            master.crash(world, Crash::KeepWritten);
            master.start(world)?;
        }
    }
    let p = progress.borrow();
    if !p.done {
        return Err(format!(
            "after 5 h: {} retries delivered, dead-lettered: {}",
            p.deliveries.len(),
            p.dead_lettered
        ));
    }
    if !crashed {
        return Err("the master was never restarted".into());
    }
    Ok(())
}

fn master_now() -> i64 {
    // The broker's clock; the clients' node has the same virtual time (no jumps here).
    clock::now_ms()
}

/// The failing consumer (see the module docs).
async fn consume(shared: Shared, progress: Rc<RefCell<Progress>>) {
    if let Err(e) = consume_inner(&shared, &progress).await {
        progress.borrow_mut().failure = Some(e);
    }
}

async fn consume_inner(shared: &Shared, progress: &Rc<RefCell<Progress>>) -> Result<(), String> {
    let addr = SocketAddr::from(MASTER_ADDR);
    let mut rpc = Rpc::new(addr);
    let levels = crate::config::BrokerConfig::default().message_delay_level_ms;
    let mut props = Vec::new();
    properties::encode([(keys::UNIQ_KEY, "RETRY-ME")], &mut props).map_err(|e| e.to_string())?;
    client::send(
        shared,
        &mut rpc,
        TOPIC,
        0,
        &[b"poison".to_vec()],
        &props,
        false,
    )
    .await;
    heartbeat(&mut rpc).await;
    let (mut topic, mut offset) = (TOPIC.to_string(), 0u64);
    let retry = retry_topic(GROUP);
    let mut sent_back_ms = 0i64;
    for n in 0..=MAX_RECONSUME {
        let (rec_bytes, next) = pull_one(&mut rpc, &topic, offset).await;
        let Ok(Entry::Record(r)) = record::decode(&rec_bytes) else {
            return Err(format!("{topic}: not a record at {offset}"));
        };
        if r.body != b"poison" {
            return Err(format!("{topic}: body {:?}", r.body));
        }
        if n > 0 {
            let want = n.to_string();
            if r.reconsume_times != n as i32
                || r.property(keys::RECONSUME_TIME) != Some(want.as_str())
                || r.property(keys::RETRY_TOPIC) != Some(TOPIC)
                || r.property(keys::ORIGIN_MESSAGE_ID) != Some("RETRY-ME")
            {
                return Err(format!("retry {n}: fields or properties wrong: {r:?}"));
            }
            // Due `level`'s delay after the send-back was stored, which is at or before
            // its acknowledgement (`sent_back_ms`); the round trip is well under a second.
            let level = (3 + n as usize - 1).min(levels.len());
            let delay = levels[level - 1] as i64;
            let due = sent_back_ms + delay;
            if r.store_timestamp_ms > due + LATE_MS_MAX {
                return Err(format!(
                    "retry {n} (level {level}) stored {} ms late",
                    r.store_timestamp_ms - due
                ));
            }
            if r.store_timestamp_ms + LATE_MS_MAX < due {
                return Err(format!(
                    "retry {n} (level {level}) stored {} ms early",
                    due - r.store_timestamp_ms
                ));
            }
            let mut p = progress.borrow_mut();
            p.deliveries.push(Delivery {
                reconsume_times: r.reconsume_times,
                sent_back_ms,
                stored_ms: r.store_timestamp_ms,
            });
        }
        let phys = r.physical_offset;
        send_back(&mut rpc, phys).await;
        sent_back_ms = master_now();
        if n == 0 {
            topic = retry.clone();
            offset = 0;
        } else {
            offset = next;
        }
    }
    // The 16th copy went to the dead-letter topic; nothing more to the retry topic.
    let (dead, _) = pull_one(&mut rpc, &dlq_topic(GROUP), 0).await;
    match record::decode(&dead) {
        Ok(Entry::Record(r)) if r.body == b"poison" => {}
        _ => return Err("the dead letter is not the message".into()),
    }
    rt::sleep(Duration::from_secs(10)).await;
    if let Some(found) = try_pull(&mut rpc, &retry, offset, 0).await {
        return Err(format!(
            "a retry after the dead letter ({} bytes)",
            found.0.len()
        ));
    }
    let mut p = progress.borrow_mut();
    p.dead_lettered = true;
    p.done = true;
    Ok(())
}

async fn heartbeat(rpc: &mut Rpc) {
    let hb = HeartbeatData {
        client_id: "sim-retry-consumer".into(),
        producer_groups: vec![],
        consumer_groups: vec![ConsumerGroupData {
            group: GROUP.into(),
            consume_type: ConsumeType::Passively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::FirstOffset,
            subscriptions: vec![Subscription {
                topic: TOPIC.into(),
                filter_type: FilterType::Tag,
                expression: "*".into(),
                version: 1,
            }],
        }],
    };
    let Ok(body) = hb.to_vec() else { return };
    loop {
        match rpc.call(RequestCode::HeartBeat, &Empty, &body, 8_000).await {
            Ok(a) if a.status == Status::Success => return,
            _ => rt::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Sends a record back until the broker acknowledges it (the master may be restarting).
async fn send_back(rpc: &mut Rpc, physical_offset: u64) {
    let h = ConsumerSendBackRequest {
        consumer_group: GROUP.into(),
        original_topic: TOPIC.into(),
        physical_offset,
        delay_level: 0,
        max_reconsume_times: MAX_RECONSUME,
        original_message_id: "RETRY-ME".into(),
    };
    loop {
        match rpc
            .call(RequestCode::ConsumerSendMsgBack, &h, &[], 8_000)
            .await
        {
            Ok(a) if a.status == Status::Success => return,
            _ => rt::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Pulls one record of queue 0, long-polling until there is one.
async fn pull_one(rpc: &mut Rpc, topic: &str, offset: u64) -> (Vec<u8>, u64) {
    loop {
        if let Some(got) = try_pull(rpc, topic, offset, 15_000).await {
            return got;
        }
        rt::sleep(Duration::from_millis(100)).await;
    }
}

async fn try_pull(
    rpc: &mut Rpc,
    topic: &str,
    offset: u64,
    suspend_ms: u32,
) -> Option<(Vec<u8>, u64)> {
    let h = PullRequest {
        consumer_group: GROUP.to_string(),
        topic: topic.to_string(),
        queue_id: 0,
        queue_offset: offset,
        max_messages: 1,
        max_bytes: 1 << 20,
        filter_type: FilterType::Tag,
        expression: "*".to_string(),
        suspend_timeout_ms: suspend_ms,
        commit_offset: None,
    };
    let a = rpc
        .call(
            RequestCode::PullMessage,
            &h,
            &[],
            8_000 + u64::from(suspend_ms),
        )
        .await
        .ok()?;
    if a.status != Status::Success || a.body.is_empty() {
        return None;
    }
    let next = Response::<PullResponse>::decode(&a.header)
        .ok()?
        .fields?
        .next_begin_offset;
    Some((a.body, next))
}
