//! POP invisibility on the simulator's clock: invisible times of minutes, which no real-time
//! test waits for. One master (ASYNC_FLUSH), one POP consumer, two messages:
//!
//! 1. both are popped with a 5 min invisible time; "keep" is acked at once, "drop" never;
//! 2. the master is killed (kill -9) and restarted while "drop" is in flight: its checkpoint
//!    is rebuilt from the log;
//! 3. "drop" comes back from the pop retry topic no earlier than 5 min after its pop and
//!    within a second after that (by the master's clock), with its reconsume count raised;
//!    it is popped again (not acked) until the group's limit (2) sends it to `%DLQ%<group>`;
//! 4. an ack with the first delivery's handle after its invisible time is refused;
//! 5. "keep" is never delivered again, and nothing is after the dead letter.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{
    dlq_topic, pop_retry_topic, AckRequest, FilterType, PopInitMode, PopRequest, PopResponse,
    PullRequest, ReceiptHandle, Response,
};
use ringmq_wire::record;

use crate::config::FlushDiskType;
use crate::io::clock;
use crate::io::rt;
use crate::io::sim::{NetConfig, World};
use crate::store::fault_disk::Crash;

use super::client::{self, Rpc, Shared};
use super::cluster::{BrokerNode, LoneMaster, CLIENTS, MASTER_ADDR};

const TOPIC: &str = "SimPop";
const GROUP: &str = "sim-pop-group";
const INVISIBLE_MS: u64 = 5 * 60 * 1000;
/// Longest a redelivery may be stored after its invisible time ended, by the master's clock.
const LATE_MS_MAX: i64 = 1_000;
/// The group's limit (`maxReconsumeTimes`): the third expiry dead-letters.
const MAX_RECONSUME: u32 = 2;

/// One delivery of "drop".
#[derive(Debug, Clone)]
pub struct Delivery {
    pub reconsume_times: i32,
    /// When the pop that handed it out happened (master clock, ms).
    pub popped_ms: i64,
    /// When the copy it came from was stored (0 for the first delivery).
    pub stored_ms: i64,
}

/// What the scenario saw.
#[derive(Debug, Clone, Default)]
pub struct PopReport {
    pub events: u64,
    pub virtual_s: u64,
    pub deliveries: Vec<Delivery>,
    pub dead_lettered: bool,
}

#[derive(Default)]
struct Progress {
    deliveries: Vec<Delivery>,
    /// "drop" is in flight after its first pop: time to crash the master.
    in_flight: bool,
    dead_lettered: bool,
    failure: Option<String>,
    done: bool,
}

/// Runs the scenario (see the module docs); the first broken expectation as text.
pub fn run(seed: u64, scratch: &std::path::Path) -> Result<PopReport, String> {
    let world = World::new(seed, NetConfig::default());
    let _entered = world.enter();
    let mut lone = LoneMaster::start(
        &world,
        scratch,
        "pop",
        seed,
        FlushDiskType::AsyncFlush,
        &format!("maxReconsumeTimes={MAX_RECONSUME}\n"),
    )?;
    let progress: Rc<RefCell<Progress>> = Rc::default();
    let shared = Shared::own_checks(&world);
    world.spawn_on(CLIENTS, consume(shared, Rc::clone(&progress)));
    let result = drive(&world, &mut lone.node, &progress);
    lone.finish(&world);
    let p = progress.borrow();
    result.map(|()| PopReport {
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
    // Three 5-minute invisible times and the checks after them fit in an hour.
    for _ in 0..(60 * 6) {
        world.run_for(Duration::from_secs(10));
        let p = progress.borrow();
        if let Some(f) = &p.failure {
            return Err(f.clone());
        }
        if p.done {
            break;
        }
        let crash_now = p.in_flight && !crashed;
        drop(p);
        if crash_now {
            crashed = true;
            master.crash(world, Crash::KeepWritten);
            master.start(world)?;
        }
    }
    let p = progress.borrow();
    if !p.done {
        return Err(format!(
            "after an hour: {} deliveries, dead-lettered: {}",
            p.deliveries.len(),
            p.dead_lettered
        ));
    }
    if !crashed {
        return Err("the master was never restarted".into());
    }
    Ok(())
}

async fn consume(shared: Shared, progress: Rc<RefCell<Progress>>) {
    if let Err(e) = consume_inner(&shared, &progress).await {
        progress.borrow_mut().failure = Some(e);
    }
}

async fn consume_inner(shared: &Shared, progress: &Rc<RefCell<Progress>>) -> Result<(), String> {
    let mut rpc = Rpc::new(SocketAddr::from(MASTER_ADDR));
    for body in [b"keep".to_vec(), b"drop".to_vec()] {
        while !client::send(
            shared,
            &mut rpc,
            TOPIC,
            0,
            std::slice::from_ref(&body),
            &[],
            false,
        )
        .await
        {
            rt::sleep(Duration::from_millis(500)).await;
        }
    }
    // 1. The first pop hands out both.
    let mut first = Vec::new();
    while first.len() < 2 {
        first.extend(pop(&mut rpc).await);
    }
    let mut first_drop = None;
    for (m, handle, popped_ms) in first {
        let r = record::decode_one(&m).map_err(|e| e.to_string())?;
        if r.body == b"keep" {
            ack_until_answered(&mut rpc, r.topic, r.queue_id, &handle, r.queue_offset, true)
                .await?;
        } else {
            progress.borrow_mut().deliveries.push(Delivery {
                reconsume_times: r.reconsume_times,
                popped_ms,
                stored_ms: 0,
            });
            first_drop = Some((r.topic.to_string(), r.queue_id, handle, r.queue_offset));
        }
    }
    let first_drop = first_drop.ok_or("\"drop\" was not in the first pop")?;
    progress.borrow_mut().in_flight = true;
    // 3. Redeliveries, each due INVISIBLE_MS after the pop before it.
    let mut last_popped = progress.borrow().deliveries[0].popped_ms;
    for n in 1..=MAX_RECONSUME {
        let (m, _, popped_ms) = loop {
            let mut got = pop(&mut rpc).await;
            if let Some(one) = got.pop() {
                break one;
            }
        };
        let r = record::decode_one(&m).map_err(|e| e.to_string())?;
        if r.body != b"drop" {
            return Err(format!("delivery {n}: {:?} came back", r.body));
        }
        if r.topic != pop_retry_topic(GROUP, TOPIC) || r.reconsume_times != n as i32 {
            return Err(format!(
                "delivery {n}: topic {} reconsume times {}",
                r.topic, r.reconsume_times
            ));
        }
        let due = last_popped + INVISIBLE_MS as i64;
        if r.store_timestamp_ms < due {
            return Err(format!(
                "delivery {n} stored {} ms before its invisible time ended",
                due - r.store_timestamp_ms
            ));
        }
        if r.store_timestamp_ms > due + LATE_MS_MAX {
            return Err(format!(
                "delivery {n} stored {} ms after its invisible time ended",
                r.store_timestamp_ms - due
            ));
        }
        progress.borrow_mut().deliveries.push(Delivery {
            reconsume_times: r.reconsume_times,
            popped_ms,
            stored_ms: r.store_timestamp_ms,
        });
        last_popped = popped_ms;
        if n == 1 {
            // 4. The first delivery's handle is stale now.
            let (topic, queue, handle, offset) = &first_drop;
            ack_until_answered(&mut rpc, topic, *queue, handle, *offset, false).await?;
        }
    }
    // The third expiry: the dead-letter topic, and nothing more to pop.
    let dead = loop {
        if let Some(b) = pull_first(&mut rpc, &dlq_topic(GROUP)).await {
            break b;
        }
        rt::sleep(Duration::from_secs(5)).await;
    };
    let r = record::decode_one(&dead).map_err(|e| e.to_string())?;
    if r.body != b"drop" || r.reconsume_times != MAX_RECONSUME as i32 + 1 {
        return Err(format!(
            "dead letter {:?} reconsume times {}",
            r.body, r.reconsume_times
        ));
    }
    let until = clock::now_ms() + 2 * INVISIBLE_MS as i64;
    while clock::now_ms() < until {
        if let Some((m, _, _)) = pop(&mut rpc).await.pop() {
            let r = record::decode_one(&m).map_err(|e| e.to_string())?;
            return Err(format!("{:?} delivered after the dead letter", r.body));
        }
    }
    let mut p = progress.borrow_mut();
    p.dead_lettered = true;
    p.done = true;
    Ok(())
}

/// One pop (long-polling 15 s): each record with its receipt handle and the pop time.
async fn pop(rpc: &mut Rpc) -> Vec<(Vec<u8>, String, i64)> {
    let h = PopRequest {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: -1,
        max_messages: 8,
        invisible_time_ms: INVISIBLE_MS,
        poll_time_ms: 15_000,
        filter_type: FilterType::Tag,
        expression: "*".into(),
        init_mode: PopInitMode::Min,
        order: false,
    };
    let Ok(a) = rpc.call(RequestCode::PopMessage, &h, &[], 25_000).await else {
        rt::sleep(Duration::from_millis(500)).await;
        return Vec::new();
    };
    if a.status != Status::Success {
        if a.status != Status::PullNotFound {
            rt::sleep(Duration::from_millis(500)).await;
        }
        return Vec::new();
    }
    let Some(f) = Response::<PopResponse>::decode(&a.header)
        .ok()
        .and_then(|r| r.fields)
    else {
        return Vec::new();
    };
    let mut first = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for r in record::iter(&a.body).flatten() {
        let start = *first
            .entry((r.topic.to_string(), r.queue_id))
            .or_insert(r.queue_offset);
        let handle = ReceiptHandle {
            start_offset: start,
            pop_time_ms: f.pop_time_ms,
            invisible_time_ms: f.invisible_time_ms,
            revive_shard: f.revive_shard,
            retry: ringmq_wire::command::is_retry_topic(r.topic),
            broker_name: "broker-a".into(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
        };
        out.push((r.bytes.to_vec(), handle.to_string(), f.pop_time_ms));
    }
    out
}

/// Acks until the broker answers; `want_ok`: SUCCESS expected, else INVALID_RECEIPT_HANDLE.
async fn ack_until_answered(
    rpc: &mut Rpc,
    topic: &str,
    queue_id: u32,
    handle: &str,
    offset: u64,
    want_ok: bool,
) -> Result<(), String> {
    let h = AckRequest {
        consumer_group: GROUP.into(),
        topic: topic.into(),
        queue_id,
        extra_info: handle.into(),
        offset,
    };
    loop {
        match rpc.call(RequestCode::AckMessage, &h, &[], 8_000).await {
            Ok(a) if a.status == Status::Success && want_ok => return Ok(()),
            Ok(a) if a.status == Status::InvalidReceiptHandle && !want_ok => return Ok(()),
            Ok(a) if matches!(a.status, Status::Success | Status::InvalidReceiptHandle) => {
                return Err(format!("ack of {handle}: {}", a.status.name()))
            }
            _ => rt::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The first record of queue 0 of `topic` (read by another group), if any.
async fn pull_first(rpc: &mut Rpc, topic: &str) -> Option<Vec<u8>> {
    let h = PullRequest {
        consumer_group: "sim-pop-reader".into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: 0,
        max_messages: 1,
        max_bytes: 1 << 20,
        filter_type: FilterType::Tag,
        expression: "*".into(),
        suspend_timeout_ms: 0,
        commit_offset: None,
    };
    let a = rpc
        .call(RequestCode::PullMessage, &h, &[], 8_000)
        .await
        .ok()?;
    (a.status == Status::Success && !a.body.is_empty()).then_some(a.body)
}
