//! Where the send path stores a record other than under its own topic: a delayed or timed
//! record under the timer topic (delivered later by the schedule room's loop), a
//! transactional half under the half topic (committed or rolled back by the transaction
//! room). Both are decided before the append, from the record alone, so they belong to the
//! send path itself: RocketMQ's store reroutes delayed messages the same way.

use ringmq_wire::code::Status;
use ringmq_wire::command::SendRequest;
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message};
use ringmq_wire::schedule::{self as sched, Asked, TIMER_TOPIC};
use ringmq_wire::transaction::HALF_TOPIC;

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
pub fn reroute_scheduled(
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

/// Properties a half carries for the broker (dropped from its committed copy).
pub const HALF_KEYS: [&str; 3] = [keys::REAL_TOPIC, keys::REAL_QID, keys::PRODUCER_GROUP];

/// For a send whose record is a half message: the record to store instead, under the half
/// topic (queue = this shard) with `REAL_TOPIC`, `REAL_QID` and `PGROUP`. `Ok(None)` for a
/// plain send. A half in a batch, a half with a delay, a half without `TRAN_MSG=true` and
/// the prepared sysflag both, or one with no producer group is refused, nothing stored.
pub fn reroute_half(
    shard: &Shard,
    h: &SendRequest,
    body: &[u8],
    checked: &CheckedBatch,
) -> Result<Option<Rerouted>, Reply> {
    if !checked.metas.iter().any(|m| m.half) {
        return Ok(None);
    }
    let illegal = |detail: String| Reply::error(Status::MessageIllegal, detail);
    if checked.metas.len() > 1 {
        return Err(illegal(
            "a batch cannot carry transactional (half) messages; send them one by one".into(),
        ));
    }
    let m = &checked.metas[0];
    if m.scheduled {
        return Err(illegal(
            "a transactional message cannot also be delayed or timed".into(),
        ));
    }
    let rec = record::decode_one(&body[m.start..m.start + m.len])
        .map_err(|e| illegal(format!("record: {e}")))?;
    if !ringmq_wire::transaction::is_half(rec.sys_flag, rec.property(keys::TRAN_MSG)) {
        return Err(illegal(
            "a transactional message needs both TRAN_MSG=true and the prepared sysflag (0x4); \
             commit and rollback are END_TRANSACTION requests, not sends"
                .into(),
        ));
    }
    if h.producer_group.is_empty() {
        return Err(illegal(
            "a transactional message needs its producer group (for check-backs)".into(),
        ));
    }
    if let Err(e) = crate::limits::validate_group_name(&h.producer_group) {
        return Err(illegal(e.to_string()));
    }
    let real_qid = rec.queue_id.to_string();
    let mut props = Vec::with_capacity(rec.properties.len() + 64);
    let kept = properties::iter(rec.properties)
        .filter_map(|p| p.ok())
        .filter(|(k, _)| !HALF_KEYS.contains(k));
    let added = [
        (keys::REAL_TOPIC, rec.topic),
        (keys::REAL_QID, real_qid.as_str()),
        (keys::PRODUCER_GROUP, h.producer_group.as_str()),
    ];
    properties::encode(kept.chain(added), &mut props)
        .map_err(|e| illegal(format!("properties: {e}")))?;
    let bytes = encode(&Message {
        topic: HALF_TOPIC,
        queue_id: u32::from(shard.id),
        properties: &props,
        ..rec.message()
    })
    .map_err(illegal)?;
    let checked = CheckedBatch::check(&bytes).map_err(|e| illegal(e.to_string()))?;
    Ok(Some(Rerouted {
        bytes,
        checked,
        due_ms: 0,
    }))
}

/// One record, encoded.
pub fn encode(msg: &Message<'_>) -> Result<Vec<u8>, String> {
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
