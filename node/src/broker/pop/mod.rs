//! POP consumption (RocketMQ 5): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
//! CHANGE_MESSAGE_INVISIBLETIME, and the revive loop that delivers again what was not acked
//! in time.
//!
//! A pop runs on the shard that owns the queue. It reads from the group's position in the
//! queue (its consumer offset, which a pop moves past what it hands out) and from the group's
//! pop retry topic (`%RETRY%<group>_<topic>`) when this shard owns it, appends one
//! checkpoint record per popped queue to the shard's [`POP_STATE_TOPIC`] queue, and answers
//! with the records once that append is as durable as a send's (the flush and replication
//! promise). An ack appends an ack record first. The revive loop (`revive.rs`) stores each
//! offset still open when its checkpoint's invisible time ends again in the pop retry topic
//! with its reconsume count raised (or in `%DLQ%<group>` past the group's retry limit), then
//! appends a revived record. So a kill -9 loses no acknowledged ack and forgets no message
//! in flight: the state is rebuilt from the records at start ([`open`]), from a watermark
//! saved beside the consumer offsets (`config/popState.<shard>.offset`).
//!
//! A pop that finds nothing long-polls (`wait.rs`): a pop of any queue waits on the shard it
//! landed on for any queue of the topic (and of the pop retry topic) on every shard.
//!
//! An ack after the invisible time ended is refused (INVALID_RECEIPT_HANDLE): the message
//! is, or is about to be, delivered again, and an acknowledged ack must mean "never again".
//! A queue a group pops is refused to that group's PULL_MESSAGE, and a pop is refused while
//! the group has queue-based consumers (heartbeats): the two cannot share positions.
//!
//! Orderly POP (`order=true`): a queue is held by one open checkpoint at a time, until every
//! message of it is acked (in any order, as RocketMQ takes them) or its invisible time ends;
//! then the queue is rewound to the first unacked offset (a REWOUND record with the
//! reconsume counts, and the offsets acked behind it, which are passed over) instead of
//! copying to the retry topic; the counts are patched into the records handed out again.

mod revive;
pub mod state;
mod wait;

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use ringmq_wire::code::Status;
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{
    pop_retry_topic, AckHandles, AckRequest, BatchAckRequest, BatchAckResponse,
    ChangeInvisibleTimeRequest, ChangeInvisibleTimeResponse, PopGroupStatus, PopInitMode, PopOp,
    PopOpKind, PopRequest, PopResponse, PopStatus, PullRequest, ReceiptHandle, POP_STATE_TOPIC,
    REWOUND_ACKED,
};
use ringmq_wire::record;

use crate::broker::shard::ack::acknowledge;
use crate::broker::shard::filter::Filter;
use crate::broker::shard::route::{forward_or_refuse, route, store_error, NotLocal, Origin};
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::io::rt;
use crate::limits;
use crate::net::reply::{Body, Outcome, Reply};
use crate::store::PullStatus;

use state::{CkKey, Mark, PopState};

/// What POP keeps per shard: its state and the event that wakes the revive loop.
#[derive(Default)]
pub struct PopShard {
    /// What POP consumers have in flight on this shard's queues.
    state: std::cell::RefCell<PopState>,
    /// Notified when a checkpoint is added (wakes the revive loop).
    kick: event_listener::Event,
}

/// This room's per-shard state, read through the shard.
pub(crate) trait PopOf {
    fn pop(&self) -> &std::cell::RefCell<PopState>;
    fn pop_kick(&self) -> &event_listener::Event;
}

impl PopOf for Shard {
    fn pop(&self) -> &std::cell::RefCell<PopState> {
        &self.room::<PopShard>().state
    }
    fn pop_kick(&self) -> &event_listener::Event {
        &self.room::<PopShard>().kick
    }
}

/// POP's hooks: its state per shard, rebuilt and revived while the shard is a master's, and
/// the watermark saved after the consumer offsets.
#[derive(Debug)]
pub struct PopRoom;

/// The room, for the broker's list.
pub static ROOM: PopRoom = PopRoom;

impl crate::broker::shard::hooks::Room for PopRoom {
    fn name(&self) -> &'static str {
        "POP"
    }

    fn shard_state(&self) -> Option<Box<dyn std::any::Any>> {
        Some(Box::new(PopShard::default()))
    }

    fn become_master(&self, shard: &Rc<Shard>) -> Result<(), String> {
        open(shard).map_err(|e| format!("rebuilding the POP state: {e}"))?;
        rt::spawn(revive::run(Rc::clone(shard)));
        Ok(())
    }

    fn leave_master(&self, shard: &Rc<Shard>) {
        *shard.pop().borrow_mut() = PopState::default();
    }

    fn offsets_saving(&self, shard: &Rc<Shard>) -> Option<crate::broker::shard::hooks::Later> {
        // The watermark before the offsets it goes with (see [`save_watermark`]).
        let mark = watermark(shard)?;
        let shard = Rc::clone(shard);
        Some(Box::pin(
            async move { save_watermark(&shard, Some(mark)).await },
        ))
    }
}

/// Most messages one pop hands out (RocketMQ's limit).
pub const POP_MESSAGES_MAX: u32 = 32;
/// Longest invisible time a pop or a change may ask for (12 h, RocketMQ 5's).
pub const INVISIBLE_MS_MAX: u64 = 12 * 3600 * 1000;
/// A group that popped a queue within this long (or has messages of it in flight) is
/// refused PULL_MESSAGE on it.
pub const POP_GROUP_WINDOW_MS: i64 = 60_000;
/// Every this many pops, the pop retry topic is read before the topic's queues (else
/// after them), so that neither starves.
const RETRY_FIRST_EVERY: u64 = 5;
/// Records read per step when the state is rebuilt.
const REBUILD_STEP_MESSAGES: u32 = 1024;

/// POP_MESSAGE.
pub fn pop(shard: &Rc<Shard>, h: PopRequest, frame: Vec<u8>, origin: Origin) -> Outcome {
    if let Err(reply) = check_pop(shard, &h) {
        return reply.into();
    }
    let table = shard.broker.topics.snapshot();
    let Some(cfg) = table.get(&h.topic) else {
        return Reply::error(
            Status::TopicNotExist,
            format!(
                "topic {} does not exist on broker {}",
                h.topic, shard.broker.config.broker_name
            ),
        )
        .into();
    };
    if !perm::is_readable(cfg.perm) || !perm::is_readable(shard.broker.live.permission()) {
        return Reply::error(
            Status::NoPermission,
            format!("topic {} is not readable", h.topic),
        )
        .into();
    }
    let mut queues: Vec<(String, u32)> = Vec::new();
    if let Ok(q) = u32::try_from(h.queue_id) {
        match route(shard, &h.topic, q) {
            Ok(()) => queues.push((h.topic.clone(), q)),
            Err(NotLocal::Remote(owner)) => return forward_or_refuse(shard, owner, frame, origin),
            Err(NotLocal::Refused(r)) => return r.into(),
        }
    } else {
        for (q, &owner) in cfg.queue_shards.iter().enumerate() {
            if owner == shard.id {
                queues.push((h.topic.clone(), q as u32));
            }
        }
    }
    // Any queue: the other shards that own some of the topic's (or its pop retry topic's),
    // for a pop that finds nothing here.
    let mut elsewhere = wait::Elsewhere::default();
    if h.queue_id < 0 && !origin.forwarded {
        elsewhere.add(&h.topic, cfg.queue_shards.iter().copied(), shard.id);
    }
    // Orderly POP delivers again from the queue itself, never from the retry topic.
    let retry = pop_retry_topic(&h.consumer_group, &h.topic);
    if let Some(&owner) = table.get(&retry).and_then(|c| c.queue_shards.first()) {
        if owner == shard.id && !h.order {
            queues.push((retry, 0));
        } else if !h.order && h.queue_id < 0 && !origin.forwarded {
            elsewhere.add(&retry, [owner], shard.id);
        }
    }
    drop(table);
    let pull_like = PullRequest {
        consumer_group: h.consumer_group.clone(),
        topic: h.topic.clone(),
        queue_id: 0,
        queue_offset: 0,
        max_messages: 0,
        max_bytes: 0,
        filter_type: h.filter_type,
        expression: h.expression.clone(),
        suspend_timeout_ms: 0,
        commit_offset: None,
    };
    let filter = match Filter::for_pull(shard, &pull_like) {
        Ok(f) => f,
        Err(reply) => return reply.into(),
    };
    let others = elsewhere.shards.clone();
    let pop = wait::Pop {
        h,
        queues,
        filter,
        elsewhere,
        origin,
    };
    // Any queue, several shards: one pop in (shards) starts here; the others first take
    // what another shard has ready (it answers at once), so a consumer whose connection
    // landed on one shard is not fed only that shard's queues while they have messages.
    if !others.is_empty() {
        let turn = {
            let mut st = shard.pop().borrow_mut();
            st.spread = st.spread.wrapping_add(1);
            st.spread
        };
        let slot = (turn % (others.len() as u64 + 1)) as usize;
        if slot > 0 {
            if let Some(first) = wait::no_wait_frame(&pop.h, &frame) {
                let to = others[slot - 1];
                let asked = forward_or_refuse(shard, to, first, origin);
                let shard = Rc::clone(shard);
                return Outcome::later(async move {
                    let r = match asked {
                        Outcome::Now(r) => r,
                        Outcome::Later(f) => f.await,
                    };
                    if r.status != Status::PullNotFound {
                        return r;
                    }
                    match wait::pop_here(&shard, pop, frame, Some(to)) {
                        Outcome::Now(r) => r,
                        Outcome::Later(f) => f.await,
                    }
                });
            }
        }
    }
    wait::pop_here(shard, pop, frame, None)
}

fn not_found(shard: &Shard, h: &PopRequest) -> Outcome {
    Reply::status_fields(
        Status::PullNotFound,
        "no message ready to pop",
        PopResponse {
            pop_time_ms: Broker::now_ms(),
            invisible_time_ms: h.invisible_time_ms,
            revive_shard: shard.id,
            rest_num: 0,
        },
    )
    .into()
}

fn check_pop(shard: &Shard, h: &PopRequest) -> Result<(), Reply> {
    let illegal = |m: String| Err(Reply::error(Status::MessageIllegal, m));
    if let Err(e) = limits::validate_group_name(&h.consumer_group) {
        return illegal(e.to_string());
    }
    if let Some(refusal) = shard.broker.controller_refusal() {
        return Err(refusal);
    }
    if !shard.broker.is_master() {
        return Err(Reply::error(
            Status::ServiceNotAvailable,
            "this broker is a slave: pop from the master",
        ));
    }
    if let Some(refusal) = refuse_unopened(shard) {
        return Err(refusal);
    }
    if h.max_messages == 0 || h.max_messages > POP_MESSAGES_MAX {
        return illegal(format!(
            "maxMsgNums {} is outside 1..={POP_MESSAGES_MAX}",
            h.max_messages
        ));
    }
    if h.invisible_time_ms == 0 || h.invisible_time_ms > INVISIBLE_MS_MAX {
        return illegal(format!(
            "invisibleTime {} ms is outside 1..={INVISIBLE_MS_MAX} ms",
            h.invisible_time_ms
        ));
    }
    let members = shard
        .broker
        .groups
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .members(&h.consumer_group, Broker::now_ms());
    if !members.is_empty() {
        return illegal(format!(
            "consumer group {} has queue-based consumers ({}): POP and queue-based (push, \
             pull) consumers cannot share a group; use another group for POP",
            h.consumer_group,
            members.join(", ")
        ));
    }
    Ok(())
}

/// One queue's share of a pop.
struct Taken {
    topic: String,
    queue_id: u32,
    offsets: Vec<u64>,
    /// Orderly: each offset's reconsume count.
    counts: Vec<u32>,
    next: u64,
    bytes: u64,
}

/// Pops from `queues` (this shard's): `Ok(None)` when none has a message for the filter.
fn try_pop(
    shard: &Rc<Shard>,
    h: &PopRequest,
    queues: &[(String, u32)],
    filter: &Filter,
) -> Result<Option<Outcome>, Reply> {
    if queues.is_empty() {
        return Ok(None);
    }
    let now = Broker::now_ms();
    let turn = {
        let mut st = shard.pop().borrow_mut();
        st.turn = st.turn.wrapping_add(1);
        st.turn
    };
    let order = visit_order(queues, turn);
    let mut body: Vec<u8> = Vec::new();
    let mut taken: Vec<Taken> = Vec::new();
    let mut moved: Vec<(String, u32, u64)> = Vec::new();
    let mut rest: u64 = 0;
    let mut remaining = h.max_messages;
    {
        let store = shard.store.borrow();
        let sql = filter
            .sql()
            .map(|e| move |props: &[u8]| e.matches_properties(props));
        for &i in &order {
            let (topic, q) = &queues[i];
            let gq = (h.consumer_group.clone(), topic.clone(), *q);
            if h.order && shard.pop().borrow().is_busy(&gq) {
                // Another pop holds the queue until its messages are acked or expire.
                continue;
            }
            // A queue never written holds nothing yet: its range starts at 0.
            let (min, max) = store.queue_range(topic, *q).unwrap_or((0, 0));
            let stored = shard.offsets.borrow().get(&h.consumer_group, topic, *q);
            let from = match stored {
                Some(o) => o.clamp(min, max),
                // The pop retry topic is always read from its start.
                None if *q == 0 && topic != &h.topic => min,
                None => match h.init_mode {
                    PopInitMode::Min => min,
                    PopInitMode::Max => max,
                },
            };
            if stored != Some(from) {
                moved.push((topic.clone(), *q, from));
            }
            if remaining == 0 || from >= max {
                rest += max.saturating_sub(from);
                continue;
            }
            let budget = (limits::PULL_BYTES_MAX as u64).saturating_sub(body.len() as u64);
            if budget == 0 {
                rest += max.saturating_sub(from);
                continue;
            }
            // Orderly, after a rewind: offsets acked before it are passed over, so as many
            // more are read.
            let passed = if h.order {
                shard.pop().borrow().rewind_of(&gq).map_or(0, |r| {
                    u32::try_from(r.acked.range(from..).count()).unwrap_or(u32::MAX)
                })
            } else {
                0
            };
            let r = store
                .get_below(
                    topic,
                    *q,
                    (from, remaining.saturating_add(passed), budget),
                    |t| filter.tag_matches(t),
                    sql,
                    shard.visible_end(),
                )
                .map_err(|e| store_error(shard, e))?;
            rest += max.saturating_sub(r.next_offset);
            match r.status {
                PullStatus::Found => {}
                PullStatus::NoMatchedMessage => {
                    moved.push((topic.clone(), *q, r.next_offset));
                    continue;
                }
                _ => continue,
            }
            let start = body.len();
            body.resize(start + r.bytes as usize, 0);
            let mut at = start;
            for run in &r.runs {
                let len = run.len as usize;
                store
                    .read(run.physical_offset, &mut body[at..at + len])
                    .map_err(|e| store_error(shard, e))?;
                at += len;
            }
            let mut offsets = Vec::with_capacity(r.messages as usize);
            let mut lens = Vec::with_capacity(r.messages as usize);
            let mut bytes = 0u64;
            let mut next = r.next_offset;
            {
                let st = shard.pop().borrow();
                let acked = st
                    .rewind_of(&gq)
                    .map(|r| &r.acked)
                    .filter(|a| h.order && !a.is_empty());
                let mut keep = start;
                let mut at = start;
                while at < body.len() {
                    let rec = record::decode_one(&body[at..]).map_err(|e| {
                        Reply::error(Status::SystemError, format!("reading {topic}/{q}: {e}"))
                    })?;
                    let (offset, len) = (rec.queue_offset, rec.len());
                    if offsets.len() == remaining as usize {
                        // Read for offsets passed over that were not there: the pop ends
                        // before this one.
                        next = offset;
                        break;
                    }
                    if !acked.is_some_and(|a| a.contains(&offset)) {
                        body.copy_within(at..at + len, keep);
                        keep += len;
                        bytes += len as u64;
                        offsets.push(offset);
                        lens.push(len);
                    }
                    at += len;
                }
                body.truncate(keep);
            }
            rest += r.next_offset.saturating_sub(next);
            if offsets.is_empty() {
                // All of them acked already: the group's position moves past them.
                moved.push((topic.clone(), *q, next));
                continue;
            }
            let mut counts = Vec::new();
            if h.order {
                let st = shard.pop().borrow();
                let rewound = st.rewind_of(&gq).map(|r| &r.counts);
                counts = offsets
                    .iter()
                    .map(|o| rewound.and_then(|c| c.get(o)).copied().unwrap_or(0))
                    .collect();
                // A delivery again shows its count, as a retry copy would.
                let mut at = start;
                for (len, &n) in lens.iter().zip(&counts) {
                    if n > 0 {
                        record::patch_reconsume_times(
                            &mut body[at..at + len],
                            i32::try_from(n).unwrap_or(i32::MAX),
                        )
                        .map_err(|e| Reply::error(Status::SystemError, e.to_string()))?;
                    }
                    at += len;
                }
            }
            remaining = remaining.saturating_sub(offsets.len() as u32);
            taken.push(Taken {
                topic: topic.clone(),
                queue_id: *q,
                offsets,
                counts,
                next,
                bytes,
            });
        }
    }
    // A position the group takes without popping (its first pop of a queue, a skip past
    // messages the filter does not match) is recorded in the log like a checkpoint: the
    // consumer offsets file is saved only every few seconds, and a position lost in a crash
    // would be taken again by the init mode (`Max`: past every message sent meanwhile).
    let positions: Vec<PopOp> = moved
        .iter()
        .map(|(t, q, o)| position_op(&h.consumer_group, t, *q, *o))
        .collect();
    if taken.is_empty() {
        if !positions.is_empty() {
            append_ops(shard, &positions, now)?;
        }
        let mut offsets = shard.offsets.borrow_mut();
        for (t, q, o) in moved {
            offsets.set(&h.consumer_group, &t, q, o);
        }
        return Ok(None);
    }
    // The checkpoints first: nothing is handed out before the log says it is in flight. The
    // positions the pop started from go before them, in the order the replay must apply
    // them (a position after a checkpoint of its queue would take the queue back).
    let first_ck = positions.len();
    let mut ops: Vec<PopOp> = positions;
    ops.extend(taken.iter().map(|t| PopOp {
        kind: PopOpKind::Checkpoint,
        group: h.consumer_group.clone(),
        topic: t.topic.clone(),
        queue_id: t.queue_id,
        start_offset: t.offsets[0],
        pop_time_ms: now,
        invisible_time_ms: h.invisible_time_ms,
        offsets: t.offsets.clone(),
        order: h.order,
        counts: t.counts.clone(),
    }));
    let (end, cq) = append_ops(shard, &ops, now)?;
    let (ops, cq) = (&ops[first_ck..], &cq[first_ck..]);
    {
        let mut st = shard.pop().borrow_mut();
        let mut offsets = shard.offsets.borrow_mut();
        for (t, q, o) in moved {
            offsets.set(&h.consumer_group, &t, q, o);
        }
        for ((t, op), cq) in taken.iter().zip(ops).zip(cq) {
            if h.order {
                st.insert_orderly(key_of(op), h.invisible_time_ms, *cq, &t.offsets, &t.counts);
            } else {
                st.insert(key_of(op), h.invisible_time_ms, *cq, &t.offsets);
            }
            st.note_pop(&h.consumer_group, &t.topic, t.queue_id, now);
            st.count(&h.consumer_group).popped += t.offsets.len() as u64;
            offsets.set(&h.consumer_group, &t.topic, t.queue_id, t.next);
        }
        if crate::planted::is(crate::planted::Bug::PopOffsetBeforeCheckpoint) {
            let _ = offsets.persist();
        }
    }
    let c = shard.counters();
    let mut m = shard.metrics.borrow_mut();
    for t in &taken {
        c.msgs_out
            .fetch_add(t.offsets.len() as u64, Ordering::Relaxed);
        c.bytes_out.fetch_add(t.bytes, Ordering::Relaxed);
        m.pulled(
            &h.consumer_group,
            &t.topic,
            t.queue_id,
            t.next,
            t.offsets.len() as u64,
            t.bytes,
        );
    }
    drop(m);
    shard.pop_kick().notify(usize::MAX);
    let fields = PopResponse {
        pop_time_ms: now,
        invisible_time_ms: h.invisible_time_ms,
        revive_shard: shard.id,
        rest_num: rest,
    };
    Ok(Some(with_body(acknowledge(shard, end, fields), body)))
}

/// The order queues are read in: rotating with `turn`; the pop retry topic (last in
/// `queues` when present) first every [`RETRY_FIRST_EVERY`] turns, else last.
fn visit_order(queues: &[(String, u32)], turn: u64) -> Vec<usize> {
    let has_retry = queues
        .last()
        .is_some_and(|(t, _)| ringmq_wire::command::is_retry_topic(t));
    let plain = queues.len() - usize::from(has_retry);
    let mut order: Vec<usize> = (0..plain)
        .map(|i| (i + (turn as usize) % plain.max(1)) % plain.max(1))
        .collect();
    if has_retry {
        if turn % RETRY_FIRST_EVERY == 0 {
            order.insert(0, plain);
        } else {
            order.push(plain);
        }
    }
    order
}

/// Attaches `body` to the reply once it is SUCCESS (a flush or replication timeout answers
/// without the messages: they stay in flight and are delivered again after their invisible
/// time).
fn with_body(out: Outcome, body: Vec<u8>) -> Outcome {
    let attach = |mut r: Reply| {
        if r.status == Status::Success {
            r.body = Body::Bytes(body);
        }
        r
    };
    match out {
        Outcome::Now(r) => Outcome::Now(attach(r)),
        Outcome::Later(f) => Outcome::later(async move { attach(f.await) }),
    }
}

/// The record of a group's position in a queue (see [`PopOpKind::Position`]).
fn position_op(group: &str, topic: &str, queue_id: u32, offset: u64) -> PopOp {
    PopOp {
        kind: PopOpKind::Position,
        group: group.to_string(),
        topic: topic.to_string(),
        queue_id,
        start_offset: offset,
        pop_time_ms: 0,
        invisible_time_ms: 0,
        offsets: Vec::new(),
        order: false,
        counts: Vec::new(),
    }
}

fn key_of(op: &PopOp) -> CkKey {
    CkKey {
        group: op.group.clone(),
        topic: op.topic.clone(),
        queue_id: op.queue_id,
        start_offset: op.start_offset,
        pop_time_ms: op.pop_time_ms,
    }
}

/// Appends `ops` in one write; returns the log end (for the durability promise) and each
/// op's queue offset in the POP state queue.
fn append_ops(shard: &Shard, ops: &[PopOp], now: i64) -> Result<(u64, Vec<u64>), Reply> {
    let mut batch = Vec::new();
    for op in ops {
        let body = op
            .to_vec()
            .map_err(|e| Reply::error(Status::SystemError, format!("encoding a pop op: {e}")))?;
        shard
            .state_record(POP_STATE_TOPIC, &body, now, &mut batch)
            .map_err(|e| Reply::error(Status::MessageIllegal, format!("a pop op: {e}")))?;
    }
    let out = shard
        .store
        .borrow_mut()
        .append(&mut batch, now)
        .map_err(|e| store_error(shard, e))?;
    shard.log_appended.notify(usize::MAX);
    Ok((
        out.end_offset,
        out.records.iter().map(|r| r.queue_offset).collect(),
    ))
}

/// The checkpoint a receipt handle names, checked against the request's queue and offset.
fn handle_key(
    group: &str,
    topic: &str,
    queue_id: u32,
    extra_info: &str,
    offset: u64,
) -> Result<CkKey, Reply> {
    let h = ReceiptHandle::parse(extra_info)
        .map_err(|e| Reply::error(Status::MessageIllegal, e.to_string()))?;
    if h.queue_id != queue_id || h.queue_offset != offset {
        return Err(Reply::error(
            Status::MessageIllegal,
            format!(
                "the receipt handle names queue {} offset {}, the request queue {queue_id} \
                 offset {offset}",
                h.queue_id, h.queue_offset
            ),
        ));
    }
    Ok(CkKey {
        group: group.to_string(),
        topic: topic.to_string(),
        queue_id,
        start_offset: h.start_offset,
        pop_time_ms: h.pop_time_ms,
    })
}

fn check_owner(
    shard: &Rc<Shard>,
    group: &str,
    topic: &str,
    queue_id: u32,
    frame: Vec<u8>,
    origin: Origin,
) -> Result<(), Outcome> {
    if let Err(e) = limits::validate_group_name(group) {
        return Err(Reply::error(Status::MessageIllegal, e.to_string()).into());
    }
    if let Some(refusal) = shard.broker.controller_refusal() {
        return Err(refusal.into());
    }
    if !shard.broker.is_master() {
        return Err(Reply::error(
            Status::ServiceNotAvailable,
            "this broker is a slave: ack on the master",
        )
        .into());
    }
    match route(shard, topic, queue_id) {
        Ok(()) => refuse_unopened(shard).map_or(Ok(()), |r| Err(r.into())),
        Err(NotLocal::Remote(owner)) => Err(forward_or_refuse(shard, owner, frame, origin)),
        Err(NotLocal::Refused(r)) => Err(r.into()),
    }
}

/// A shard whose POP state is not rebuilt yet takes no pop or ack: in controller mode the
/// broker's role turns master a moment before each shard has become a master's (its state
/// rebuilt from the log, its new epoch begun); a pop served in between would hand out
/// messages from a position the rebuild has not restored, and write its checkpoint into
/// the epoch before.
fn refuse_unopened(shard: &Shard) -> Option<Reply> {
    (!shard.pop().borrow().opened).then(|| {
        Reply::error(
            Status::ServiceNotAvailable,
            "this broker is becoming master: its POP state is being rebuilt; retry",
        )
    })
}

/// ACK_MESSAGE.
/// One popped message a request names (ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME).
struct Named<'a> {
    group: &'a str,
    topic: &'a str,
    queue_id: u32,
    extra_info: &'a str,
    offset: u64,
}

/// The checkpoint of a message a request names, on the shard that owns its queue (else the
/// forward or the refusal), and whether the message is open (`false`: already acked); a
/// handle no longer in flight is answered INVALID_RECEIPT_HANDLE.
fn in_flight(
    shard: &Rc<Shard>,
    m: &Named<'_>,
    now: i64,
    frame: Vec<u8>,
    origin: Origin,
) -> Result<(CkKey, bool), Outcome> {
    check_owner(shard, m.group, m.topic, m.queue_id, frame, origin)?;
    let key =
        handle_key(m.group, m.topic, m.queue_id, m.extra_info, m.offset).map_err(Outcome::from)?;
    let check = shard.pop().borrow().check_ack(&key, m.offset, now);
    match check {
        Ok(open) => Ok((key, open)),
        Err(refusal) => {
            Err(Reply::error(Status::InvalidReceiptHandle, refusal.remark(m.offset)).into())
        }
    }
}

pub fn ack(shard: &Rc<Shard>, h: AckRequest, frame: Vec<u8>, origin: Origin) -> Outcome {
    let now = Broker::now_ms();
    let named = Named {
        group: &h.consumer_group,
        topic: &h.topic,
        queue_id: h.queue_id,
        extra_info: &h.extra_info,
        offset: h.offset,
    };
    let key = match in_flight(shard, &named, now, frame, origin) {
        Err(o) => return o,
        Ok((_, false)) => return Reply::ok(Empty).into(),
        Ok((key, true)) => key,
    };
    let op = ack_op(&key, vec![h.offset]);
    match append_ops(shard, std::slice::from_ref(&op), now) {
        Ok((end, _)) => {
            let mut st = shard.pop().borrow_mut();
            let orderly = st.orderly_counts(&key).is_some();
            st.mark(&key, &[h.offset], Mark::Acked);
            st.count(&key.group).acked += 1;
            drop(st);
            if orderly {
                // The queue may be free for the next orderly pop.
                shard.wake_queue(&key.topic, key.queue_id);
            }
            if crate::planted::is(crate::planted::Bug::PopAckBeforeDurable) {
                return Reply::ok(Empty).into();
            }
            acknowledge(shard, end, Empty)
        }
        Err(r) => r.into(),
    }
}

fn ack_op(key: &CkKey, offsets: Vec<u64>) -> PopOp {
    PopOp {
        kind: PopOpKind::Ack,
        group: key.group.clone(),
        topic: key.topic.clone(),
        queue_id: key.queue_id,
        start_offset: key.start_offset,
        pop_time_ms: key.pop_time_ms,
        invisible_time_ms: 0,
        offsets,
        order: false,
        counts: Vec::new(),
    }
}

/// BATCH_ACK_MESSAGE: one queue's handles in one append.
pub fn batch_ack(
    shard: &Rc<Shard>,
    h: BatchAckRequest,
    body: &[u8],
    frame: Vec<u8>,
    origin: Origin,
) -> Outcome {
    let handles = match AckHandles::decode(body) {
        Ok(b) => b.handles,
        Err(e) => {
            return Reply::error(Status::MalformedRequest, format!("batch ack body: {e}")).into()
        }
    };
    if handles.len() > limits::PULL_MESSAGES_MAX {
        return Reply::error(
            Status::LimitExceeded,
            format!(
                "{} handles in one batch ack, over the maximum of {}",
                handles.len(),
                limits::PULL_MESSAGES_MAX
            ),
        )
        .into();
    }
    if let Err(o) = check_owner(
        shard,
        &h.consumer_group,
        &h.topic,
        h.queue_id,
        frame,
        origin,
    ) {
        return o;
    }
    let now = Broker::now_ms();
    let mut by_key: Vec<(CkKey, Vec<u64>)> = Vec::new();
    let (mut acked, mut refused) = (0u32, 0u32);
    {
        let st = shard.pop().borrow();
        for extra in &handles {
            let parsed = ReceiptHandle::parse(extra);
            let Ok(rh) = parsed else {
                refused += 1;
                continue;
            };
            let key = match handle_key(
                &h.consumer_group,
                &h.topic,
                h.queue_id,
                extra,
                rh.queue_offset,
            ) {
                Ok(k) => k,
                Err(_) => {
                    refused += 1;
                    continue;
                }
            };
            match st.check_ack(&key, rh.queue_offset, now) {
                Ok(true) => {
                    acked += 1;
                    match by_key.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, v)) => v.push(rh.queue_offset),
                        None => by_key.push((key, vec![rh.queue_offset])),
                    }
                }
                Ok(false) => acked += 1,
                Err(_) => refused += 1,
            }
        }
    }
    let fields = BatchAckResponse { acked, refused };
    if by_key.is_empty() {
        return Reply::ok(fields).into();
    }
    let ops: Vec<PopOp> = by_key.iter().map(|(k, o)| ack_op(k, o.clone())).collect();
    match append_ops(shard, &ops, now) {
        Ok((end, _)) => {
            let mut st = shard.pop().borrow_mut();
            for (k, o) in &by_key {
                st.mark(k, o, Mark::Acked);
                st.count(&k.group).acked += o.len() as u64;
            }
            drop(st);
            shard.wake_queue(&h.topic, h.queue_id);
            acknowledge(shard, end, fields)
        }
        Err(r) => r.into(),
    }
}

/// CHANGE_MESSAGE_INVISIBLETIME: a new checkpoint for the one message, invisible from now
/// (a CHANGED record, which by itself takes the message out of the old checkpoint when
/// replayed), and a MOVED record of it in the old one, in one append.
pub fn change_invisible_time(
    shard: &Rc<Shard>,
    h: ChangeInvisibleTimeRequest,
    frame: Vec<u8>,
    origin: Origin,
) -> Outcome {
    if h.invisible_time_ms == 0 || h.invisible_time_ms > INVISIBLE_MS_MAX {
        return Reply::error(
            Status::MessageIllegal,
            format!(
                "invisibleTime {} ms is outside 1..={INVISIBLE_MS_MAX} ms",
                h.invisible_time_ms
            ),
        )
        .into();
    }
    let now = Broker::now_ms();
    let named = Named {
        group: &h.consumer_group,
        topic: &h.topic,
        queue_id: h.queue_id,
        extra_info: &h.extra_info,
        offset: h.offset,
    };
    let key = match in_flight(shard, &named, now, frame, origin) {
        Err(o) => return o,
        Ok((key, true)) => key,
        Ok((_, false)) => {
            return Reply::error(
                Status::InvalidReceiptHandle,
                format!("the message at offset {} is already acked", h.offset),
            )
            .into()
        }
    };
    if shard.pop().borrow().orderly_counts(&key).is_some() {
        return Reply::error(
            Status::MessageIllegal,
            "orderly POP: the invisible time of one message of a held queue cannot change; \
             ack in order, or let the invisible time end (the queue is delivered again from \
             the first unacked message)",
        )
        .into();
    }
    let mut new_key = CkKey {
        start_offset: h.offset,
        pop_time_ms: now,
        ..key.clone()
    };
    while shard.pop().borrow().contains(&new_key) {
        new_key.pop_time_ms += 1;
    }
    let ops = [
        PopOp {
            kind: PopOpKind::Changed,
            group: new_key.group.clone(),
            topic: new_key.topic.clone(),
            queue_id: new_key.queue_id,
            start_offset: new_key.start_offset,
            pop_time_ms: new_key.pop_time_ms,
            invisible_time_ms: h.invisible_time_ms,
            offsets: vec![h.offset],
            order: false,
            counts: Vec::new(),
        },
        PopOp {
            kind: PopOpKind::Moved,
            ..ack_op(&key, vec![h.offset])
        },
    ];
    match append_ops(shard, &ops, now) {
        Ok((end, cq)) => {
            let mut st = shard.pop().borrow_mut();
            st.insert(new_key.clone(), h.invisible_time_ms, cq[0], &[h.offset]);
            st.mark(&key, &[h.offset], Mark::Moved);
            drop(st);
            shard.pop_kick().notify(usize::MAX);
            acknowledge(
                shard,
                end,
                ChangeInvisibleTimeResponse {
                    pop_time_ms: new_key.pop_time_ms,
                    invisible_time_ms: h.invisible_time_ms,
                    revive_shard: shard.id,
                },
            )
        }
        Err(r) => r.into(),
    }
}

/// GET_POP_STATUS: this shard's counts per group.
pub fn status(shard: &Shard) -> Reply {
    let st = shard.pop().borrow();
    let in_flight = st.in_flight();
    let mut groups: Vec<PopGroupStatus> = st
        .counts
        .iter()
        .map(|(g, c)| PopGroupStatus {
            group: g.clone(),
            in_flight: in_flight.get(g).copied().unwrap_or(0),
            popped: c.popped,
            acked: c.acked,
            revived: c.revived,
            dead_lettered: c.dead_lettered,
        })
        .collect();
    for (g, n) in &in_flight {
        if !st.counts.contains_key(g) {
            groups.push(PopGroupStatus {
                group: g.clone(),
                in_flight: *n,
                ..PopGroupStatus::default()
            });
        }
    }
    match (PopStatus { groups }).to_vec() {
        Ok(body) => Reply::ok_body(Empty, Body::Bytes(body)),
        Err(e) => Reply::error(Status::SystemError, format!("encoding the POP status: {e}")),
    }
}

/// PULL_MESSAGE by a group that pops the queue: refused (see the module docs).
pub fn refuse_pull(shard: &Shard, group: &str, topic: &str, queue_id: u32) -> Option<Reply> {
    if group.is_empty() {
        return None;
    }
    let pops = shard.pop().borrow().pops_queue(
        group,
        topic,
        queue_id,
        Broker::now_ms(),
        POP_GROUP_WINDOW_MS,
    );
    pops.then(|| {
        Reply::error(
            Status::MessageIllegal,
            format!(
                "consumer group {group} consumes {topic} queue {queue_id} with POP: POP and \
                 queue-based (push, pull) consumers cannot share a group; use another group"
            ),
        )
    })
}

fn watermark_path(shard: &Shard) -> PathBuf {
    shard
        .broker
        .config
        .store_path_root_dir
        .join("config")
        .join(format!("popState.{}.offset", shard.id))
}

/// The watermark to save after the consumer offsets (see [`save_watermark`]); `None` while
/// this shard's POP state was not rebuilt from the log (a slave): its state is empty, and a
/// watermark at the queue's end would make a later promotion skip the checkpoints of the
/// messages the old master had in flight.
pub fn watermark(shard: &Shard) -> Option<u64> {
    let end = shard
        .store
        .borrow()
        .queue_range(POP_STATE_TOPIC, u32::from(shard.id))
        .map_or(0, |(_, max)| max);
    let st = shard.pop().borrow();
    st.opened.then(|| st.watermark(end))
}

/// Saves `mark`, taken before the consumer offsets that were saved since: every checkpoint
/// below it was popped before those offsets were taken, so they are past its messages, and a
/// rebuild from here loses no position.
pub async fn save_watermark(shard: &Shard, mark: Option<u64>) {
    let Some(mark) = mark else { return };
    let path = watermark_path(shard);
    let bytes = format!("{mark}\n").into_bytes();
    let res = rt::blocking(move || crate::broker::topics::write_atomically(&path, &bytes)).await;
    match res {
        Some(Ok(())) => {}
        Some(Err(e)) => log::warn!("shard {}: saving the POP watermark: {e}", shard.id),
        None => log::warn!(
            "shard {}: saving the POP watermark: the writer panicked",
            shard.id
        ),
    }
}

/// Rebuilds the shard's POP state from its records (at start, before it serves).
pub fn open(shard: &Shard) -> Result<(), String> {
    let path = watermark_path(shard);
    let from = match std::fs::read_to_string(&path) {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|e| format!("{}: {e}", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let q = u32::from(shard.id);
    let store = shard.store.borrow();
    let Some((min, _)) = store.queue_range(POP_STATE_TOPIC, q) else {
        shard.pop().borrow_mut().opened = true;
        return Ok(());
    };
    let mut at = from.max(min);
    let (mut cks, mut ops) = (0usize, 0usize);
    let mut st = shard.pop().borrow_mut();
    let mut offsets = shard.offsets.borrow_mut();
    loop {
        let r = store
            .get(
                POP_STATE_TOPIC,
                q,
                at,
                REBUILD_STEP_MESSAGES,
                limits::PULL_BYTES_MAX as u64,
                |_| true,
            )
            .map_err(|e| e.to_string())?;
        if r.status != PullStatus::Found {
            break;
        }
        let mut bytes = vec![0u8; r.bytes as usize];
        let mut pos = 0;
        for run in &r.runs {
            let len = run.len as usize;
            store
                .read(run.physical_offset, &mut bytes[pos..pos + len])
                .map_err(|e| e.to_string())?;
            pos += len;
        }
        for rec in record::iter(&bytes) {
            let rec = rec.map_err(|e| format!("a POP state record: {e}"))?;
            let op = PopOp::decode(rec.body)
                .map_err(|e| format!("POP state record {}: {e}", rec.queue_offset))?;
            ops += 1;
            let key = key_of(&op);
            match op.kind {
                PopOpKind::Checkpoint => {
                    if op.order {
                        st.insert_orderly(
                            key,
                            op.invisible_time_ms,
                            rec.queue_offset,
                            &op.offsets,
                            &op.counts,
                        );
                    } else {
                        st.insert(key, op.invisible_time_ms, rec.queue_offset, &op.offsets);
                    }
                    cks += 1;
                    if let Some(&last) = op.offsets.iter().max() {
                        let have = offsets.get(&op.group, &op.topic, op.queue_id);
                        if have.is_none_or(|h| h <= last) {
                            offsets.set(&op.group, &op.topic, op.queue_id, last + 1);
                        }
                    }
                }
                PopOpKind::Changed => {
                    st.move_out(&key, &op.offsets);
                    st.insert(key, op.invisible_time_ms, rec.queue_offset, &op.offsets);
                    cks += 1;
                }
                PopOpKind::Ack => {
                    st.mark(&key, &op.offsets, Mark::Acked);
                }
                PopOpKind::Revived => {
                    st.mark(&key, &op.offsets, Mark::Revived);
                }
                PopOpKind::Moved => {
                    st.mark(&key, &op.offsets, Mark::Moved);
                }
                PopOpKind::Position => {
                    offsets.set(&op.group, &op.topic, op.queue_id, op.start_offset);
                }
                PopOpKind::Rewound => {
                    let mut deliver = std::collections::BTreeMap::new();
                    let mut acked = std::collections::BTreeSet::new();
                    let counts = op.counts.iter().copied().chain(std::iter::repeat(0));
                    for (o, n) in op.offsets.iter().copied().zip(counts) {
                        if n == REWOUND_ACKED {
                            acked.insert(o);
                        } else {
                            deliver.insert(o, n);
                        }
                    }
                    let again: Vec<u64> = deliver.keys().copied().collect();
                    st.mark(&key, &again, Mark::Revived);
                    if let Some(&first) = again.first() {
                        offsets.set(&op.group, &op.topic, op.queue_id, first);
                    }
                    st.set_rewind(
                        (op.group.clone(), op.topic.clone(), op.queue_id),
                        rec.queue_offset,
                        deliver,
                        acked,
                    );
                }
            }
        }
        at = r.next_offset;
    }
    st.opened = true;
    let open: u64 = st.in_flight().values().sum();
    if ops > 0 {
        log::info!(
            "shard {}: POP state rebuilt from {ops} record(s) ({cks} checkpoint(s)): {open} \
             message(s) in flight",
            shard.id
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_queue_goes_first_every_fifth_turn() {
        let qs = vec![
            ("t".to_string(), 0),
            ("t".to_string(), 1),
            ("%RETRY%g_t".to_string(), 0),
        ];
        assert_eq!(visit_order(&qs, 1), vec![1, 0, 2]);
        assert_eq!(visit_order(&qs, 2), vec![0, 1, 2]);
        assert_eq!(visit_order(&qs, 5), vec![2, 1, 0]);
        let only_retry = vec![("%RETRY%g_t".to_string(), 0)];
        assert_eq!(visit_order(&only_retry, 3), vec![0]);
    }
}
