//! Scheduled messages at the broker: a send that asks for a delay level or a delivery time
//! is stored under the timer topic instead of its own (by the send path: `shard/reroute.rs`), acknowledged by the
//! same flush and replication rules as any send, and stored again in its real topic and
//! queue when due ([`delivery_record`], by the shard's delivery loop in
//! `deliver.rs`). The index of what is pending is `store/schedule.rs`.
//!
//! Settings: `messageDelayLevel` (levels), `timerMaxDelaySec` (the furthest delivery time
//! accepted), `timerPrecisionMs` (due times are rounded up to a multiple of it),
//! `timerWheelEnable` (false refuses delivery times; delay levels still work).

pub mod deliver;

use std::net::SocketAddr;

use ringmq_wire::command::{ScheduleLevel, ScheduleStatus};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message, RecordView};
use ringmq_wire::schedule::{self as sched};

use crate::broker::shard::reroute::encode;
use crate::broker::shard::Shard;
use crate::net::reply::Reply;

/// The record that delivers a scheduled one: its real topic and queue, the schedule
/// properties removed (`TIMER_OUT_MS`, `REAL_TOPIC` and `REAL_QID` kept, as RocketMQ keeps
/// them), `ORIGIN_MESSAGE_ID` = the scheduled record's id. `Err` for a record that does not
/// name its real topic and queue.
pub fn delivery_record(stored: &RecordView<'_>, store_host: SocketAddr) -> Result<Vec<u8>, String> {
    let topic = stored
        .property(keys::REAL_TOPIC)
        .ok_or("no REAL_TOPIC property")?;
    let queue_id: u32 = stored
        .property(keys::REAL_QID)
        .and_then(|q| q.parse().ok())
        .ok_or("no REAL_QID property")?;
    // A retried message keeps the id its first copy had; any other gets the id its
    // producer was given (the scheduled record's).
    let origin = match stored.property(keys::ORIGIN_MESSAGE_ID) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => record::message_id(store_host, stored.physical_offset),
    };
    let mut props = Vec::with_capacity(stored.properties.len() + 48);
    let kept = properties::iter(stored.properties)
        .filter_map(|p| p.ok())
        .filter(|(k, _)| !sched::SCHEDULE_KEYS.contains(k) && *k != keys::ORIGIN_MESSAGE_ID);
    properties::encode(
        kept.chain([(keys::ORIGIN_MESSAGE_ID, origin.as_str())]),
        &mut props,
    )
    .map_err(|e| format!("properties: {e}"))?;
    encode(&Message {
        topic,
        queue_id,
        properties: &props,
        ..stored.message()
    })
}

/// A progress record (see `ringmq_wire::schedule::Progress`) for this shard.
pub fn progress_record(
    shard_id: u16,
    progress: &sched::Progress,
    host: SocketAddr,
    now_ms: i64,
) -> Vec<u8> {
    let body = progress.encode();
    encode(&Message {
        topic: sched::TIMER_PROGRESS_TOPIC,
        queue_id: u32::from(shard_id),
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: now_ms,
        born_host: host,
        store_host_v6: host.is_ipv6(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: &body,
        properties: &[],
    })
    .expect("a 40-byte body under a short topic always encodes")
}

/// GET_SCHEDULE_STATUS: the counts every shard's delivery loop published.
pub fn status(shard: &Shard) -> Reply {
    let b = &shard.broker;
    let levels_ms = &b.config.message_delay_level_ms;
    let mut status = ScheduleStatus {
        levels: levels_ms
            .iter()
            .enumerate()
            .map(|(i, &ms)| ScheduleLevel {
                level: i as u32 + 1,
                delay_ms: ms,
                pending: 0,
            })
            .collect(),
        delivering: b.is_master(),
        ..ScheduleStatus::default()
    };
    for c in b.schedule.iter() {
        let s = c.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (level, &n) in s.per_level.iter().enumerate() {
            match level {
                0 => status.timer_pending += n,
                l => {
                    let i = l.min(levels_ms.len()) - 1;
                    if let Some(row) = status.levels.get_mut(i) {
                        row.pending += n;
                    }
                }
            }
        }
        if let Some(due) = s.next_due_ms {
            if status.next_due_ms == 0 || due < status.next_due_ms {
                status.next_due_ms = due;
            }
        }
        status.delivered += s.delivered_since_open;
        status.shards_indexing += u32::from(s.indexing);
    }
    crate::broker::shard::route::encoded_body(status)
}

/// Scheduled messages' hooks: a master's shard runs the delivery loop.
#[derive(Debug)]
pub struct ScheduleRoom;

/// The room, for the broker's list.
pub static ROOM: ScheduleRoom = ScheduleRoom;

impl crate::broker::shard::hooks::Room for ScheduleRoom {
    fn name(&self) -> &'static str {
        "scheduled messages"
    }

    fn become_master(&self, shard: &std::rc::Rc<Shard>) -> Result<(), String> {
        crate::io::rt::spawn(deliver::run(std::rc::Rc::clone(shard)));
        Ok(())
    }
}
