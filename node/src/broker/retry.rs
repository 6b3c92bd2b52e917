//! Retries and dead letters (CONSUMER_SEND_MSG_BACK, 36). A consumer hands back a message
//! its listener failed; the broker stores a copy in the group's retry topic
//! (`%RETRY%<group>`, one queue) with the next delay level (`3 + reconsume_times`, RocketMQ's
//! rule: 10 s, 30 s, 1 min, ... 2 h with the default levels), delivered by the scheduled-message
//! mechanism; once the message has been reconsumed `max_reconsume_times` times (the
//! client's setting, else the group's `retry_max_times` on this broker, else
//! `maxReconsumeTimes`, 16), or when the consumer asks for it, the
//! copy goes to the dead-letter topic (`%DLQ%<group>`, one queue) at once.
//!
//! The copy keeps body, flag, born time and host, tags, keys, `UNIQ_KEY` and user properties,
//! and records `RETRY_TOPIC` (the topic first consumed), `ORIGIN_MESSAGE_ID`,
//! `RECONSUME_TIME` / the record's reconsume count (n + 1, for a dead letter too) and
//! `MAX_RECONSUME_TIMES`.
//!
//! The request runs on the shard whose log holds the message (forwarded there once); the
//! copy is then stored through the ordinary send path (its checks, its shard forwarding,
//! its flush and replication promise), so the answer is SUCCESS only once the copy is
//! stored as any send would be.

use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{dlq_topic, retry_topic, ConsumerSendBackRequest};
use ringmq_wire::record::{self, Entry};

use crate::broker::shard::copy::{copy_record, ensure_group_topic, store_copy};
use crate::broker::shard::route::{forward_or_refuse, store_error, Origin};
use crate::broker::shard::Shard;
use crate::limits;
use crate::net::reply::{Outcome, Reply};
use crate::store::commitlog::shard_of_offset;

/// The delay level of a message's first retry is this plus its reconsume count.
pub const FIRST_RETRY_LEVEL: u32 = 3;

/// Where a sent-back message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The retry topic, delivered after this delay level.
    Retry {
        level: u32,
    },
    DeadLetter,
}

/// Decides where a message reconsumed `reconsume_times` times goes.
pub fn destination(
    reconsume_times: i32,
    delay_level: i32,
    max_reconsume_times: u32,
    levels: usize,
) -> Destination {
    let n = u32::try_from(reconsume_times).unwrap_or(0);
    if delay_level < 0 || n >= max_reconsume_times {
        return Destination::DeadLetter;
    }
    let level = match u32::try_from(delay_level) {
        Ok(0) | Err(_) => FIRST_RETRY_LEVEL.saturating_add(n),
        Ok(l) => l,
    };
    Destination::Retry {
        level: level.clamp(1, u32::try_from(levels.max(1)).unwrap_or(u32::MAX)),
    }
}

/// CONSUMER_SEND_MSG_BACK.
pub fn send_back(
    shard: &Rc<Shard>,
    h: ConsumerSendBackRequest,
    frame: Vec<u8>,
    origin: Origin,
) -> Outcome {
    if let Err(reply) = check(shard, &h) {
        return reply.into();
    }
    let owner = shard_of_offset(h.physical_offset);
    if owner != shard.id {
        if usize::from(owner) < shard.broker.mailboxes.len() {
            return forward_or_refuse(shard, owner, frame, origin);
        }
        return Reply::error(
            Status::QueryNotFound,
            format!("no message at physical offset {}", h.physical_offset),
        )
        .into();
    }
    let stored = match shard.store.borrow().read_record(h.physical_offset) {
        Ok(bytes) => bytes,
        Err(e) => return store_error(shard, e).into(),
    };
    let view = match record::decode(&stored) {
        Ok(Entry::Record(v)) => v,
        Ok(Entry::Blank { .. }) | Err(_) => {
            return Reply::error(
                Status::QueryNotFound,
                format!("no message at physical offset {}", h.physical_offset),
            )
            .into()
        }
    };
    let max = if h.max_reconsume_times > 0 {
        h.max_reconsume_times
    } else {
        shard.broker.retry_max_times(&h.consumer_group)
    };
    let dest = destination(
        view.reconsume_times,
        h.delay_level,
        max,
        shard.broker.config.message_delay_level_ms.len(),
    );
    let topic = match dest {
        Destination::Retry { .. } => retry_topic(&h.consumer_group),
        Destination::DeadLetter => dlq_topic(&h.consumer_group),
    };
    if let Some(e) = ensure_group_topic(shard, &topic) {
        return Reply::error(Status::SystemError, e).into();
    }
    let level = match dest {
        Destination::Retry { level } => Some(level),
        Destination::DeadLetter => None,
    };
    let copy = match copy_record(
        &view,
        &h.original_topic,
        &h.original_message_id,
        &topic,
        level,
        max,
    ) {
        Ok(c) => c,
        Err(e) => return Reply::error(Status::MessageIllegal, e).into(),
    };
    if dest == Destination::DeadLetter {
        log::info!(
            "message {} of group {} dead-lettered after {} reconsumes",
            h.original_message_id,
            h.consumer_group,
            view.reconsume_times
        );
    }
    let dead = dest == Destination::DeadLetter;
    let group = h.consumer_group;
    match store_copy(shard, topic, copy) {
        Outcome::Now(r) => {
            note_stored(shard, &r, &group, dead);
            answer(r).into()
        }
        Outcome::Later(fut) => {
            let shard = Rc::clone(shard);
            Outcome::later(async move {
                let r = fut.await;
                note_stored(&shard, &r, &group, dead);
                answer(r)
            })
        }
    }
}

/// Counts a copy the retry or dead-letter topic stored (metrics).
fn note_stored(shard: &Shard, send: &Reply, group: &str, dead: bool) {
    if send.status.message_stored() {
        let mut m = shard.metrics.borrow_mut();
        if dead {
            m.dead_lettered(group);
        } else {
            m.retried(group);
        }
    }
}

fn check(shard: &Shard, h: &ConsumerSendBackRequest) -> Result<(), Reply> {
    if let Err(e) = limits::validate_group_name(&h.consumer_group) {
        return Err(Reply::error(Status::MessageIllegal, e.to_string()));
    }
    if h.delay_level < -1 {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "delay level {} is not -1 (dead letter), 0 (next) or a level",
                h.delay_level
            ),
        ));
    }
    if let Some(refusal) = shard.broker.controller_refusal() {
        return Err(refusal);
    }
    if !shard.broker.is_master() {
        return Err(Reply::error(
            Status::ServiceNotAvailable,
            "this broker is a slave: send messages back to the master",
        ));
    }
    Ok(())
}

/// The send-back answer from the copy's send answer: stored (whatever the flush or
/// replication wait said, the copy is in the log) is SUCCESS, anything else is passed on.
fn answer(send: Reply) -> Reply {
    if send.status.message_stored() {
        return Reply::ok(Empty);
    }
    Reply {
        body: Default::default(),
        ..send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_grow_then_dead_letter() {
        assert_eq!(destination(0, 0, 16, 18), Destination::Retry { level: 3 });
        assert_eq!(destination(5, 0, 16, 18), Destination::Retry { level: 8 });
        // Past the highest level: the highest.
        assert_eq!(destination(15, 0, 16, 18), Destination::Retry { level: 18 });
        assert_eq!(destination(16, 0, 16, 18), Destination::DeadLetter);
        assert_eq!(destination(0, -1, 16, 18), Destination::DeadLetter);
        assert_eq!(destination(2, 7, 16, 18), Destination::Retry { level: 7 });
        assert_eq!(destination(0, 0, 0, 18), Destination::DeadLetter);
    }
}
