//! Transactional messages at the broker (RocketMQ's contract): a half message is stored
//! under the half topic, invisible to consumers (the send path reroutes it:
//! `shard/reroute.rs`); END_TRANSACTION commits
//! it (its op record and the copy in its real topic, in one append) or rolls it back (an op
//! record), once ([`end_transaction`]); a half left undecided past `transactionTimeOut` is
//! checked back with a producer of its group, every `transactionCheckInterval`, at most
//! `transactionCheckMax` times, then moved to `TRANS_CHECK_MAX_TIME_TOPIC`
//! (`check.rs`). The state is `store/txn.rs`, rebuilt from the log at every open.
//!
//! A half lives on the shard that owns its real queue (the send path places it there), so
//! its commit is a local append. Every answer follows the flush and replication policy of a
//! send.

pub mod check;

use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::codec::Empty;
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{
    EndTransactionRequest, TransactionGroupPending, TransactionResolution, TransactionStatus,
};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, sys_flag, Message, RecordView};
use ringmq_wire::transaction::{Decision, Op, CHECK_MAX_TOPIC, OP_TOPIC};

use crate::broker::shard::ack::acknowledge;
use crate::broker::shard::reroute::encode;
use crate::broker::shard::route::{forward_or_refuse, store_error, Origin};
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::net::reply::{Outcome, Reply};
use crate::store::commitlog::shard_of_offset;
use crate::store::txn::HalfState;
use crate::store::StoreError;

/// END_TRANSACTION.
pub fn end_transaction(
    shard: &Rc<Shard>,
    h: EndTransactionRequest,
    frame: Vec<u8>,
    origin: Origin,
) -> Outcome {
    let owner = shard_of_offset(h.physical_offset);
    if owner != shard.id {
        if usize::from(owner) < shard.broker.mailboxes.len() {
            return forward_or_refuse(shard, owner, frame, origin);
        }
        return not_a_half(&h).into();
    }
    if let Some(refusal) = shard.broker.controller_refusal() {
        return refusal.into();
    }
    if !shard.broker.is_master() {
        return Reply::error(
            Status::ServiceNotAvailable,
            "this broker is a slave: end transactions on the master",
        )
        .into();
    }
    let decision = match h.resolution {
        TransactionResolution::Commit => Decision::Commit,
        TransactionResolution::Rollback => Decision::Rollback,
        TransactionResolution::Unknown => {
            log::debug!(
                "producer group {}: transaction {} unknown; it will be checked back",
                h.producer_group,
                h.transaction_id
            );
            return Reply::ok(Empty).into();
        }
    };
    let half = match load_half(shard, h.half_queue_offset, Some(h.physical_offset)) {
        Ok(Some(b)) => b,
        Ok(None) => return not_a_half(&h).into(),
        Err(e) => return store_error(shard, e).into(),
    };
    let rec = match record::decode_one(&half) {
        Ok(r) => r,
        Err(_) => return not_a_half(&h).into(),
    };
    let group = rec.property(keys::PRODUCER_GROUP).unwrap_or_default();
    if group != h.producer_group {
        return Reply::error(
            Status::MessageIllegal,
            format!(
                "the half message at queue offset {} belongs to producer group {group}, not {}",
                h.half_queue_offset, h.producer_group
            ),
        )
        .into();
    }
    let state = shard.store.borrow().txn_state(h.half_queue_offset);
    match state {
        HalfState::Unknown => return not_a_half(&h).into(),
        HalfState::Decided(d) if d == decision => {
            return Reply::error(
                Status::Success,
                format!("already {}: nothing changed", done(d)),
            )
            .into()
        }
        HalfState::Decided(d) => {
            return Reply::error(
                Status::MessageIllegal,
                format!(
                    "transaction {} was already {}: a {} now changes nothing",
                    h.transaction_id,
                    done(d),
                    decision.name().to_lowercase()
                ),
            )
            .into()
        }
        HalfState::Pending => {}
    }
    match decide(shard, h.half_queue_offset, &rec, decision, 0) {
        Ok(end) => acknowledge(shard, end, Empty),
        Err(reply) => reply.into(),
    }
}

fn done(d: Decision) -> &'static str {
    match d {
        Decision::Commit => "committed",
        Decision::Rollback => "rolled back",
        Decision::Discarded => "given up after its last check-back (in TRANS_CHECK_MAX_TIME_TOPIC)",
    }
}

fn not_a_half(h: &EndTransactionRequest) -> Reply {
    Reply::error(
        Status::MessageIllegal,
        format!(
            "no half message at queue offset {} / physical offset {} on this broker",
            h.half_queue_offset, h.physical_offset
        ),
    )
}

/// The half record at `half_queue_offset` of this shard (checked against
/// `physical_offset` when given), after indexing every stored half and decision.
pub fn load_half(
    shard: &Shard,
    half_queue_offset: u64,
    physical_offset: Option<u64>,
) -> Result<Option<Vec<u8>>, StoreError> {
    let mut store = shard.store.borrow_mut();
    while !store.txn_index(u64::MAX)? {}
    let Some((phys, _)) = store.txn_half_offset(half_queue_offset)? else {
        return Ok(None);
    };
    if physical_offset.is_some_and(|p| p != phys) {
        return Ok(None);
    }
    store.read_record(phys).map(Some)
}

/// Appends the decision about a pending half (and for a commit the copy in its real topic,
/// for a discard the copy in the check-max topic with the `checks` made) in one write;
/// returns the log end to acknowledge.
pub fn decide(
    shard: &Shard,
    half_queue_offset: u64,
    half: &RecordView<'_>,
    decision: Decision,
    checks: u32,
) -> Result<u64, Reply> {
    let broker = &shard.broker;
    let now = Broker::now_ms();
    let op = Op {
        half_queue_offset,
        decision,
    };
    let mut wake: Option<(String, u32)> = None;
    let copy = match decision {
        Decision::Rollback => None,
        Decision::Commit => {
            let (topic, queue) = real_queue(half)?;
            let table = broker.topics.snapshot();
            if broker.owner(&table, topic, queue) != Some(shard.id) {
                return Err(Reply::error(
                    Status::TopicNotExist,
                    format!(
                        "topic {topic} queue {queue} no longer exists on this broker: the half \
                         stays undecided (roll it back)"
                    ),
                ));
            }
            wake = Some((topic.to_owned(), queue));
            Some(copy_record(
                half,
                topic,
                queue,
                sys_flag::TRANSACTION_COMMIT_TYPE,
                &[],
            )?)
        }
        Decision::Discarded => {
            ensure_check_max_topic(shard)?;
            let checks = checks.to_string();
            Some(copy_record(
                half,
                CHECK_MAX_TOPIC,
                0,
                sys_flag::TRANSACTION_NOT_TYPE,
                &[(keys::TRANSACTION_CHECK_TIMES, checks.as_str())],
            )?)
        }
    };
    // The op first, the copy right after it in the same write (see `store/txn.rs`).
    let mut batch = op_record(shard, &op, now);
    if let Some(c) = &copy {
        batch.extend_from_slice(c);
    }
    let appended = shard.store.borrow_mut().append(&mut batch, now);
    let out = appended.map_err(|e| store_error(shard, e))?;
    shard
        .store
        .borrow_mut()
        .txn_decided(half_queue_offset, decision);
    {
        let mut m = shard.metrics.borrow_mut();
        match decision {
            Decision::Commit => m.txn_commit(),
            Decision::Rollback => m.txn_rollback(),
            Decision::Discarded => m.txn_discard(),
        }
    }
    let c = shard.counters();
    c.msgs_in.fetch_add(
        u64::from(copy.is_some() && decision == Decision::Commit),
        std::sync::atomic::Ordering::Relaxed,
    );
    if let Some((topic, queue)) = wake {
        shard.wake_queue(&topic, queue);
    }
    shard.log_appended.notify(usize::MAX);
    Ok(out.end_offset)
}

/// Stores the copy a commit or discard op calls for alone (the op is already in the log: a
/// copy a crash cut off).
pub fn store_copy_again(
    shard: &Shard,
    half: &RecordView<'_>,
    decision: Decision,
) -> Result<u64, Reply> {
    let checks = shard.broker.config.transaction_check_max.to_string();
    let (topic, queue, mut copy) = match decision {
        Decision::Commit => {
            let (topic, queue) = real_queue(half)?;
            let copy = copy_record(half, topic, queue, sys_flag::TRANSACTION_COMMIT_TYPE, &[])?;
            (topic, queue, copy)
        }
        Decision::Discarded => {
            ensure_check_max_topic(shard)?;
            let copy = copy_record(
                half,
                CHECK_MAX_TOPIC,
                0,
                sys_flag::TRANSACTION_NOT_TYPE,
                &[(keys::TRANSACTION_CHECK_TIMES, checks.as_str())],
            )?;
            (CHECK_MAX_TOPIC, 0, copy)
        }
        Decision::Rollback => return Ok(shard.store.borrow().write_offset()),
    };
    let appended = shard.store.borrow_mut().append(&mut copy, Broker::now_ms());
    let out = appended.map_err(|e| store_error(shard, e))?;
    shard.wake_queue(topic, queue);
    shard.log_appended.notify(usize::MAX);
    Ok(out.end_offset)
}

fn real_queue<'a>(half: &RecordView<'a>) -> Result<(&'a str, u32), Reply> {
    let topic = half.property(keys::REAL_TOPIC);
    let queue = half
        .property(keys::REAL_QID)
        .and_then(|q| q.parse::<u32>().ok());
    match (topic, queue) {
        (Some(t), Some(q)) => Ok((t, q)),
        _ => Err(Reply::error(
            Status::SystemError,
            "the half message does not name its real topic and queue",
        )),
    }
}

/// The copy of a half for `topic`/`queue`: the broker's half properties dropped, `extra`
/// added, the transaction sysflag bits set to `tx_type`.
fn copy_record(
    half: &RecordView<'_>,
    topic: &str,
    queue: u32,
    tx_type: u32,
    extra: &[(&str, &str)],
) -> Result<Vec<u8>, Reply> {
    let mut props = Vec::with_capacity(half.properties.len());
    let kept = properties::iter(half.properties)
        .filter_map(|p| p.ok())
        .filter(|(k, _)| {
            ![keys::REAL_TOPIC, keys::REAL_QID].contains(k) && !extra.iter().any(|(e, _)| e == k)
        });
    properties::encode(kept.chain(extra.iter().copied()), &mut props)
        .map_err(|e| Reply::error(Status::SystemError, format!("properties: {e}")))?;
    let base = half.message();
    encode(&Message {
        topic,
        queue_id: queue,
        properties: &props,
        sys_flag: (base.sys_flag & !sys_flag::TRANSACTION_MASK) | tx_type,
        ..base
    })
    .map_err(|e| Reply::error(Status::SystemError, e))
}

fn op_record(shard: &Shard, op: &Op, now: i64) -> Vec<u8> {
    let mut out = Vec::new();
    shard
        .state_record(OP_TOPIC, &op.encode(), now, &mut out)
        .expect("a 17-byte body under a short topic always encodes");
    out
}

fn ensure_check_max_topic(shard: &Shard) -> Result<(), Reply> {
    let broker = &shard.broker;
    if broker.topics.snapshot().get(CHECK_MAX_TOPIC).is_some() {
        return Ok(());
    }
    broker
        .topics
        .upsert_system(CHECK_MAX_TOPIC, 1, perm::READ, Broker::now_ms())
        .map(|_| {
            broker.topics_changed.notify(usize::MAX);
        })
        .map_err(|e| {
            Reply::error(
                Status::SystemError,
                format!("creating {CHECK_MAX_TOPIC}: {e}"),
            )
        })
}

/// GET_TRANSACTION_STATUS: the counts every shard's check loop published.
pub fn status(shard: &Shard) -> Reply {
    let b = &shard.broker;
    let mut groups: std::collections::BTreeMap<String, (u64, i64)> = Default::default();
    let mut st = TransactionStatus {
        timeout_ms: b.config.transaction_timeout_ms,
        check_interval_ms: b.config.transaction_check_interval_ms,
        check_max: b.config.transaction_check_max,
        checking: b.is_master(),
        ..Default::default()
    };
    for c in &b.txn {
        let c = c.lock().unwrap_or_else(|p| p.into_inner());
        st.checks_sent += c.checks_sent;
        st.checks_unanswerable += c.checks_unanswerable;
        st.moved_to_check_max += c.discarded;
        st.redone += c.redone;
        st.shards_indexing += u32::from(c.indexing);
        for (g, &(n, oldest)) in &c.pending {
            let e = groups.entry(g.clone()).or_insert((0, i64::MAX));
            e.0 += n;
            e.1 = e.1.min(oldest);
        }
    }
    st.groups = groups
        .into_iter()
        .map(
            |(producer_group, (pending, oldest_stored_ms))| TransactionGroupPending {
                producer_group,
                pending,
                oldest_stored_ms,
            },
        )
        .collect();
    crate::broker::shard::route::encoded_body(st)
}

/// Transactions' hooks: a master's shard runs the check-back loop.
#[derive(Debug)]
pub struct TxnRoom;

/// The room, for the broker's list.
pub static ROOM: TxnRoom = TxnRoom;

impl crate::broker::shard::hooks::Room for TxnRoom {
    fn name(&self) -> &'static str {
        "transactions"
    }

    fn become_master(&self, shard: &Rc<Shard>) -> Result<(), String> {
        crate::io::rt::spawn(check::run(Rc::clone(shard)));
        Ok(())
    }
}
