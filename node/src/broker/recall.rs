//! RECALL_MESSAGE: withdraws a scheduled message before it is due, by the handle its send
//! returned (`ringmq_wire::recall`). The handle's message id names the scheduled record (its
//! CommitLog offset, hence its shard); the record is checked against the handle's topic and
//! delivery time, then, on the shard that holds it:
//!
//! - not delivered, not recalled: a recall record is appended (it is what makes the recall
//!   durable and replicated) and the schedule skips the message from then on; the answer
//!   follows the flush and replication policy of a send (`shard::ack::acknowledge`);
//! - already recalled: SUCCESS, with a remark saying so (a retried recall is harmless);
//! - already delivered (or dropped at its due time): RECALL_TOO_LATE.
//!
//! "Delivered" is exact, not a clock comparison: the check, the append and the schedule's
//! update happen in one turn of the shard thread that also runs the delivery loop, so a
//! recall racing the due time is either wholly before the delivery (the message is never
//! delivered) or wholly after it (RECALL_TOO_LATE). See `store/recall.rs`.

use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::command::{RecallRequest, RecallResponse};
use ringmq_wire::properties::keys;
use ringmq_wire::recall::{Recall, RecallHandle, RECALL_TOPIC};
use ringmq_wire::record;
use ringmq_wire::schedule::TIMER_TOPIC;

use crate::broker::shard::ack::acknowledge;
use crate::broker::shard::route::{forward_or_refuse, store_error, Origin};
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::net::reply::{Outcome, Reply};
use crate::store::commitlog::shard_of_offset;
use crate::store::recall::RecallState;
use crate::store::schedule::INDEX_UNITS_PER_STEP;

/// RECALL_MESSAGE (see the module docs).
pub fn recall(shard: &Rc<Shard>, h: RecallRequest, frame: Vec<u8>, origin: Origin) -> Outcome {
    let broker = &shard.broker;
    let illegal = |detail: String| Reply::error(Status::MessageIllegal, detail);
    let handle = match RecallHandle::decode(&h.recall_handle) {
        Ok(handle) => handle,
        Err(e) => return illegal(e.to_string()).into(),
    };
    if handle.topic != h.topic {
        return illegal(format!(
            "the recall handle is for topic {}, the request for {}",
            handle.topic, h.topic
        ))
        .into();
    }
    if handle.broker_name != broker.config.broker_name {
        return illegal(format!(
            "the recall handle is for broker {}, this is {}",
            handle.broker_name, broker.config.broker_name
        ))
        .into();
    }
    let physical_offset = match record::parse_message_id(&handle.message_id) {
        Ok((_, offset)) => offset,
        Err(e) => return illegal(format!("the recall handle's message id: {e}")).into(),
    };
    if broker.is_shutting_down() {
        return Reply::error(Status::ServiceNotAvailable, "broker is shutting down").into();
    }
    if let Some(refusal) = broker.controller_refusal() {
        return refusal.into();
    }
    if !broker.is_master() {
        return Reply::error(
            Status::ServiceNotAvailable,
            "this broker is a slave: recall on the master",
        )
        .into();
    }
    let owner = shard_of_offset(physical_offset);
    if owner != shard.id {
        if usize::from(owner) < broker.mailboxes.len() {
            return forward_or_refuse(shard, owner, frame, origin);
        }
        return not_scheduled(&handle).into();
    }
    match recall_here(shard, &handle, physical_offset) {
        Ok(end) => acknowledge(
            shard,
            if crate::planted::is(crate::planted::Bug::RecallAckBeforeDurable) {
                0
            } else {
                end
            },
            RecallResponse {
                message_id: handle.message_id,
            },
        ),
        Err(reply) => reply.into(),
    }
}

/// On the shard holding the record: checks it, then writes the recall. Returns the log end
/// to acknowledge, or the answer when nothing is written.
fn recall_here(shard: &Shard, handle: &RecallHandle, physical_offset: u64) -> Result<u64, Reply> {
    let fatal_or = |e: crate::store::StoreError, other: Reply| {
        if e.is_fatal() {
            store_error(shard, e)
        } else {
            other
        }
    };
    let bytes = shard
        .store
        .borrow()
        .read_record(physical_offset)
        .map_err(|e| fatal_or(e, not_scheduled(handle)))?;
    let rec = record::decode_one(&bytes).map_err(|_| not_scheduled(handle))?;
    if rec.topic != TIMER_TOPIC
        || rec.queue_id != u32::from(shard.id)
        || rec.property(keys::REAL_TOPIC) != Some(handle.topic.as_str())
    {
        return Err(not_scheduled(handle));
    }
    let timer_cq_offset = rec.queue_offset;
    let unit = shard
        .store
        .borrow()
        .schedule_timer_unit(timer_cq_offset)
        .map_err(|e| fatal_or(e, not_scheduled(handle)))?;
    let Some((unit_offset, due_ms)) = unit else {
        return Err(not_scheduled(handle));
    };
    if unit_offset != physical_offset {
        return Err(not_scheduled(handle));
    }
    if due_ms != handle.deliver_at_ms {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "the recall handle says the message is due at {}, it is due at {due_ms}",
                handle.deliver_at_ms
            ),
        ));
    }
    // Every recall already in the log is known before the state is read.
    loop {
        let caught_up = shard
            .store
            .borrow_mut()
            .schedule_index_recalls(INDEX_UNITS_PER_STEP)
            .map_err(|e| store_error(shard, e))?;
        if caught_up {
            break;
        }
    }
    let state = shard
        .store
        .borrow()
        .schedule_recall_state(timer_cq_offset, physical_offset, due_ms)
        .map_err(|e| store_error(shard, e))?;
    match state {
        RecallState::Pending => {}
        RecallState::Recalled => {
            return Err(Reply::status_fields(
                Status::Success,
                "already recalled: it will not be delivered",
                RecallResponse {
                    message_id: handle.message_id.clone(),
                },
            ))
        }
        RecallState::Delivered => {
            return Err(Reply::error(
                Status::RecallTooLate,
                format!(
                    "message {} of topic {} was delivered at its due time ({due_ms}); \
                     nothing was recalled",
                    handle.message_id, handle.topic
                ),
            ))
        }
    }
    let pending = shard.store.borrow().schedule_recalls_pending();
    if pending >= crate::limits::RECALLS_PENDING_PER_SHARD_MAX {
        return Err(Reply::error(
            Status::LimitExceeded,
            format!(
                "shard {} holds {pending} recalled messages not yet due, its maximum",
                shard.id
            ),
        ));
    }
    let now = Broker::now_ms();
    let mut batch = recall_record(
        shard,
        &Recall {
            timer_cq_offset,
            physical_offset,
            due_ms,
        },
        now,
    );
    let appended = shard.store.borrow_mut().append(&mut batch, now);
    let out = appended.map_err(|e| store_error(shard, e))?;
    // Read the record just appended: the message is in the recalled set before this turn
    // ends, so the delivery loop (same thread) can no longer deliver it.
    let mut store = shard.store.borrow_mut();
    loop {
        if store
            .schedule_index_recalls(INDEX_UNITS_PER_STEP)
            .map_err(|e| store_error(shard, e))?
        {
            break;
        }
    }
    assert!(
        store.schedule_is_recalled(timer_cq_offset),
        "shard {}: a recall record just appended for timer offset {timer_cq_offset} is not \
         in the recalled set",
        shard.id
    );
    drop(store);
    shard.log_appended.notify(usize::MAX);
    // The delivery loop publishes the schedule's counts: wake it, so `delay status` stops
    // counting the message now rather than at its next wake.
    shard.schedule_kick.notify(usize::MAX);
    Ok(out.end_offset)
}

/// The answer to a handle that names no scheduled message of its topic on this broker.
fn not_scheduled(handle: &RecallHandle) -> Reply {
    Reply::error(
        Status::MessageIllegal,
        format!(
            "no scheduled message {} of topic {} on this broker (never sent with a delay, or \
             removed by retention)",
            handle.message_id, handle.topic
        ),
    )
}

fn recall_record(shard: &Shard, recall: &Recall, now: i64) -> Vec<u8> {
    let mut out = Vec::new();
    shard
        .state_record(RECALL_TOPIC, &recall.encode(), now, &mut out)
        .expect("a 32-byte body under a short topic always encodes");
    out
}
