//! Scheduled messages at the broker: a send that asks for a delay level or a delivery time
//! is stored under the timer topic instead of its own ([`reroute`]), acknowledged by the
//! same flush and replication rules as any send, and stored again in its real topic and
//! queue when due ([`delivery_record`], by the shard's delivery loop in
//! `shard/schedule.rs`). The index of what is pending is `store/schedule.rs`.
//!
//! Settings: `messageDelayLevel` (levels), `timerMaxDelaySec` (the furthest delivery time
//! accepted), `timerPrecisionMs` (due times are rounded up to a multiple of it),
//! `timerWheelEnable` (false refuses delivery times; delay levels still work).

use std::net::SocketAddr;

use ringmq_wire::code::Status;
use ringmq_wire::command::{ScheduleLevel, ScheduleStatus};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message, RecordView};
use ringmq_wire::schedule::{self as sched, Asked, TIMER_TOPIC};

use crate::broker::shard::Shard;
use crate::config::BrokerConfig;
use crate::net::reply::Reply;
use crate::store::CheckedBatch;

/// A send rerouted to the timer topic.
#[derive(Debug)]
pub struct Rerouted {
    pub bytes: Vec<u8>,
    pub checked: CheckedBatch,
    pub due_ms: i64,
}

/// When a message asking for `asked` is due, stored at `now_ms`; `None` to deliver at once.
/// `floor_ms` is the store's schedule floor (see `Store::schedule_floor_ms`).
pub fn due_ms(
    cfg: &BrokerConfig,
    asked: Asked,
    now_ms: i64,
    floor_ms: i64,
) -> Result<Option<(i64, u32)>, String> {
    let (due, level) = match asked {
        Asked::Now => return Ok(None),
        Asked::Level(level) => {
            let levels = &cfg.message_delay_level_ms;
            let i = (level as usize).clamp(1, levels.len()) - 1;
            let delay = i64::try_from(levels[i]).unwrap_or(i64::MAX);
            (now_ms.saturating_add(delay), i as u32 + 1)
        }
        Asked::At(_) | Asked::After(_) if !cfg.timer_wheel_enable => {
            return Err(
                "delivery times are disabled on this broker (timerWheelEnable=false); \
                 delay levels still work"
                    .to_string(),
            )
        }
        Asked::At(at) => (at, 0),
        Asked::After(ms) => (now_ms.saturating_add(ms), 0),
    };
    if level == 0 {
        let max_ms = i64::try_from(cfg.timer_max_delay_sec)
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000);
        if due.saturating_sub(now_ms) > max_ms {
            return Err(format!(
                "delivery {} ms from now is beyond timerMaxDelaySec ({} s)",
                due.saturating_sub(now_ms),
                cfg.timer_max_delay_sec
            ));
        }
    }
    if due <= now_ms {
        return Ok(None);
    }
    let p = i64::try_from(cfg.timer_precision_ms.max(1)).unwrap_or(1);
    let rounded = due
        .checked_add(p - 1)
        .map_or(due, |d| d.div_euclid(p) * p)
        .max(floor_ms);
    Ok(Some((rounded, level)))
}

/// For a send whose (one) record asks for a schedule: the record to store instead, under
/// the timer topic (queue = this shard), with `REAL_TOPIC`, `REAL_QID` and `TIMER_OUT_MS`.
/// `Ok(None)` when the send is stored as it is. A batch with scheduled records, a malformed
/// or too distant schedule are refused with MESSAGE_ILLEGAL, and nothing is stored.
pub fn reroute(
    shard: &Shard,
    body: &[u8],
    checked: &CheckedBatch,
    now_ms: i64,
) -> Result<Option<Rerouted>, Reply> {
    if !checked.metas.iter().any(|m| m.scheduled) {
        return Ok(None);
    }
    let illegal = |detail: String| Reply::error(Status::MessageIllegal, detail);
    if checked.metas.len() > 1 {
        return Err(illegal(
            "a batch cannot carry delayed or timed messages; send them one by one".to_string(),
        ));
    }
    let m = &checked.metas[0];
    let rec = record::decode_one(&body[m.start..m.start + m.len])
        .map_err(|e| illegal(format!("record: {e}")))?;
    let asked = sched::asked(rec.properties).map_err(illegal)?;
    let floor = shard.store.borrow().schedule_floor_ms();
    let Some((due, _level)) =
        due_ms(&shard.broker.config, asked, now_ms, floor).map_err(illegal)?
    else {
        return Ok(None);
    };
    let real_qid = rec.queue_id.to_string();
    let due_text = due.to_string();
    let mut props = Vec::with_capacity(rec.properties.len() + 64);
    let kept = properties::iter(rec.properties)
        .filter_map(|p| p.ok())
        .filter(|(k, _)| ![keys::REAL_TOPIC, keys::REAL_QID, keys::TIMER_OUT_MS].contains(k));
    let added = [
        (keys::REAL_TOPIC, rec.topic),
        (keys::REAL_QID, real_qid.as_str()),
        (keys::TIMER_OUT_MS, due_text.as_str()),
    ];
    properties::encode(kept.chain(added), &mut props)
        .map_err(|e| illegal(format!("properties: {e}")))?;
    let msg = Message {
        topic: TIMER_TOPIC,
        queue_id: u32::from(shard.id),
        properties: &props,
        ..rec.message()
    };
    let bytes = encode(&msg).map_err(illegal)?;
    let checked = CheckedBatch::check(&bytes).map_err(|e| illegal(e.to_string()))?;
    Ok(Some(Rerouted {
        bytes,
        checked,
        due_ms: due,
    }))
}

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
    crate::broker::admin::encoded_body(status)
}

fn encode(msg: &Message<'_>) -> Result<Vec<u8>, String> {
    let len = record::encoded_len(msg).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(len);
    record::encode(msg, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BrokerConfig {
        BrokerConfig::default()
    }

    #[test]
    fn levels_clamp_and_round() {
        let c = cfg();
        let now = 1_000_000;
        assert_eq!(due_ms(&c, Asked::Now, now, 0).unwrap(), None);
        assert_eq!(
            due_ms(&c, Asked::Level(1), now, 0).unwrap(),
            Some((now + 1000, 1))
        );
        // Above the highest level is the highest (2 h).
        assert_eq!(
            due_ms(&c, Asked::Level(99), now, 0).unwrap(),
            Some((now + 7_200_000, 18))
        );
    }

    #[test]
    fn times_in_the_past_are_now_and_beyond_the_maximum_refused() {
        let c = cfg();
        let now = 1_000_000_000;
        assert_eq!(due_ms(&c, Asked::At(now - 5), now, 0).unwrap(), None);
        assert_eq!(due_ms(&c, Asked::After(-1), now, 0).unwrap(), None);
        let three_days = 259_200_000;
        assert!(due_ms(&c, Asked::After(three_days), now, 0)
            .unwrap()
            .is_some());
        let e = due_ms(&c, Asked::After(three_days + 1), now, 0).unwrap_err();
        assert!(e.contains("timerMaxDelaySec"), "{e}");
    }

    #[test]
    fn precision_rounds_up_and_floor_holds() {
        let mut c = cfg();
        c.timer_precision_ms = 1000;
        assert_eq!(
            due_ms(&c, Asked::At(5_001), 10, 0).unwrap(),
            Some((6_000, 0))
        );
        assert_eq!(
            due_ms(&c, Asked::At(5_000), 10, 0).unwrap(),
            Some((5_000, 0))
        );
        // A clock stepped back: the floor wins, never earlier than asked.
        assert_eq!(
            due_ms(&c, Asked::At(5_000), 10, 9_000).unwrap(),
            Some((9_000, 0))
        );
        c.timer_wheel_enable = false;
        assert!(due_ms(&c, Asked::At(5_000), 10, 0).is_err());
        assert!(due_ms(&c, Asked::Level(2), 10, 0).unwrap().is_some());
    }
}
