//! The revive loop: when a checkpoint's invisible time ends, each of its offsets still open
//! is stored again, in the group's pop retry topic with its reconsume count raised, or in
//! `%DLQ%<group>` once it was reconsumed the group's retry limit; then a revived record
//! says so. A crash between the two stores the copy twice (at least once, as RocketMQ).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::command::{
    dlq_topic, pop_retry_topic, PopOp, PopOpKind, RETRY_TOPIC_PREFIX, REWOUND_ACKED,
};
use ringmq_wire::record;

use super::state::{CkKey, Mark};
use super::{append_ops, PopOf};
use crate::broker::shard::copy::{ensure_group_topic, revive_copy, store_copy};
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::io::rt;
use crate::net::reply::Outcome;
use crate::store::PullStatus;

/// Longest sleep between looks at the deadlines.
const TICK_MS: i64 = 200;
/// Checkpoints revived per turn.
const PER_TURN: usize = 64;
/// A checkpoint whose copies could not all be stored is tried again this much later.
const RETRY_AFTER_MS: i64 = 1000;

/// The loop (master role), until the broker stops.
pub async fn run(shard: Rc<Shard>) {
    let gen = shard.master_gen.get();
    loop {
        if !shard.master_running(gen) {
            return;
        }
        let now = Broker::now_ms();
        let next = shard.pop().borrow().next_deadline();
        let wait = next.map_or(TICK_MS, |d| (d - now).clamp(0, TICK_MS));
        if wait > 0 {
            let kick = shard.pop_kick().listen();
            rt::timeout(Duration::from_millis(wait as u64), kick).await;
            continue;
        }
        let due = shard.pop().borrow_mut().take_due(now, PER_TURN);
        for (key, open) in due {
            revive(&shard, &key, &open).await;
        }
    }
}

/// The topic a checkpoint's messages were first consumed from (its pop retry topic's base).
fn first_topic(key: &CkKey) -> &str {
    let prefix_len = RETRY_TOPIC_PREFIX.len() + key.group.len() + 1;
    if key.topic.starts_with(RETRY_TOPIC_PREFIX)
        && key.topic.len() > prefix_len
        && key.topic[RETRY_TOPIC_PREFIX.len()..].starts_with(key.group.as_str())
        && key.topic.as_bytes()[prefix_len - 1] == b'_'
    {
        &key.topic[prefix_len..]
    } else {
        &key.topic
    }
}

async fn revive(shard: &Rc<Shard>, key: &CkKey, open: &[u64]) {
    let orderly = shard.pop().borrow().orderly_counts(key);
    if let Some(counts) = orderly {
        return rewind(shard, key, open, &counts).await;
    }
    let base = first_topic(key).to_string();
    let max = shard.broker.retry_max_times(&key.group);
    let mut revived = Vec::new();
    let mut dead = 0u64;
    let mut failed = false;
    for &offset in open {
        let rec = match read_message(shard, key, offset) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                log::warn!(
                    "POP group {}: {} queue {} offset {offset} is no longer stored; not \
                     delivered again",
                    key.group,
                    key.topic,
                    key.queue_id
                );
                revived.push(offset);
                continue;
            }
            Err(e) => {
                log::warn!("POP group {}: reading a message to revive: {e}", key.group);
                failed = true;
                continue;
            }
        };
        let Ok(view) = record::decode_one(&rec) else {
            revived.push(offset);
            continue;
        };
        let to_dlq = u32::try_from(view.reconsume_times.max(0)).unwrap_or(0) >= max;
        let topic = if to_dlq {
            dlq_topic(&key.group)
        } else {
            pop_retry_topic(&key.group, &base)
        };
        if let Some(e) = ensure_group_topic(shard, &topic) {
            log::warn!("POP group {}: {e}", key.group);
            failed = true;
            continue;
        }
        let copy = match revive_copy(&view, &base, &topic, max) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("POP group {}: copying offset {offset}: {e}", key.group);
                revived.push(offset);
                continue;
            }
        };
        if crate::planted::is(crate::planted::Bug::PopReviveSkips) {
            revived.push(offset);
            continue;
        }
        let reply = match store_copy(shard, topic, copy) {
            Outcome::Now(r) => r,
            Outcome::Later(f) => f.await,
        };
        if reply.status.message_stored() {
            revived.push(offset);
            dead += u64::from(to_dlq);
        } else {
            log::warn!(
                "POP group {}: storing offset {offset} of {} again: {}",
                key.group,
                key.topic,
                reply.remark()
            );
            failed = true;
        }
    }
    if !revived.is_empty() {
        let op = PopOp {
            kind: PopOpKind::Revived,
            group: key.group.clone(),
            topic: key.topic.clone(),
            queue_id: key.queue_id,
            start_offset: key.start_offset,
            pop_time_ms: key.pop_time_ms,
            invisible_time_ms: 0,
            offsets: revived.clone(),
            order: false,
            counts: Vec::new(),
        };
        match append_ops(shard, std::slice::from_ref(&op), Broker::now_ms()) {
            Ok(_) => {
                let mut st = shard.pop().borrow_mut();
                st.mark(key, &revived, Mark::Revived);
                let c = st.count(&key.group);
                c.revived += revived.len() as u64 - dead;
                c.dead_lettered += dead;
            }
            Err(r) => {
                log::warn!(
                    "POP group {}: recording a revive: {}",
                    key.group,
                    r.remark()
                );
                failed = true;
            }
        }
    }
    if failed {
        shard
            .pop()
            .borrow_mut()
            .revive_later(key, Broker::now_ms() + RETRY_AFTER_MS);
    }
}

/// Orderly POP: the queue goes back to the first unacked message, whose reconsume count goes
/// up (the messages behind it, handed out with it, keep theirs); past the group's limit that
/// message goes to `%DLQ%<group>` and the queue goes on after it.
///
/// Acks of an orderly pop may come in any order (as RocketMQ takes them), so messages behind
/// the first unacked one may be acked already: the rewind record lists every offset the queue
/// will deliver again (this checkpoint's open ones, and those of an earlier rewind not yet
/// delivered again) with its count, and the acked offsets between them marked
/// [`REWOUND_ACKED`], which the queue passes over instead of delivering them again.
async fn rewind(shard: &Rc<Shard>, key: &CkKey, open: &[u64], counts: &BTreeMap<u64, u32>) {
    let Some(&first) = open.first() else { return };
    let max = shard.broker.retry_max_times(&key.group);
    let first_count = counts.get(&first).copied().unwrap_or(0).saturating_add(1);
    let mut dead = false;
    if first_count > max {
        match dead_letter(shard, key, first, first_count, max).await {
            Ok(()) => dead = true,
            Err(e) => {
                log::warn!(
                    "POP group {}: dead-lettering offset {first}: {e}",
                    key.group
                );
                shard
                    .pop()
                    .borrow_mut()
                    .revive_later(key, Broker::now_ms() + RETRY_AFTER_MS);
                return;
            }
        }
    }
    let gq = (key.group.clone(), key.topic.clone(), key.queue_id);
    let (mut deliver, mut acked) = {
        let st = shard.pop().borrow();
        let earlier = st.rewind_of(&gq);
        let mut acked: BTreeSet<u64> = earlier.map(|r| r.acked.clone()).unwrap_or_default();
        acked.extend(st.acked_of(key));
        (earlier.map(|r| r.counts.clone()).unwrap_or_default(), acked)
    };
    for &o in open.iter().filter(|&&o| !(dead && o == first)) {
        let n = if o == first {
            first_count
        } else {
            counts.get(&o).copied().unwrap_or(0)
        };
        deliver.insert(o, n);
    }
    // The queue is read again from the first offset to deliver: acked ones below it are
    // behind the group already.
    let from = deliver.keys().next().copied();
    acked.retain(|&o| from.is_some_and(|f| o > f));
    let mut listed: BTreeMap<u64, u32> = deliver.clone();
    listed.extend(acked.iter().map(|&o| (o, REWOUND_ACKED)));
    let op = |kind, offsets: Vec<u64>, counts: Vec<u32>| PopOp {
        kind,
        group: key.group.clone(),
        topic: key.topic.clone(),
        queue_id: key.queue_id,
        start_offset: key.start_offset,
        pop_time_ms: key.pop_time_ms,
        invisible_time_ms: 0,
        offsets,
        order: true,
        counts,
    };
    let mut ops = Vec::new();
    if dead {
        ops.push(op(PopOpKind::Revived, vec![first], Vec::new()));
    }
    if from.is_some() {
        ops.push(op(
            PopOpKind::Rewound,
            listed.keys().copied().collect(),
            listed.values().copied().collect(),
        ));
    }
    match append_ops(shard, &ops, Broker::now_ms()) {
        Ok((_, cq)) => {
            let mut st = shard.pop().borrow_mut();
            st.mark(key, open, Mark::Revived);
            let c = st.count(&key.group);
            if dead {
                c.dead_lettered += 1;
            } else {
                c.revived += 1;
            }
            if let (Some(at), Some(&rewind_cq)) = (from, cq.last()) {
                st.set_rewind(gq, rewind_cq, deliver, acked);
                shard
                    .offsets
                    .borrow_mut()
                    .set(&key.group, &key.topic, key.queue_id, at);
            }
            drop(st);
            shard.wake_queue(&key.topic, key.queue_id);
        }
        Err(r) => {
            log::warn!(
                "POP group {}: recording a rewind: {}",
                key.group,
                r.remark()
            );
            shard
                .pop()
                .borrow_mut()
                .revive_later(key, Broker::now_ms() + RETRY_AFTER_MS);
        }
    }
}

/// Stores the message at `offset` in `%DLQ%<group>` with reconsume count `count`.
async fn dead_letter(
    shard: &Rc<Shard>,
    key: &CkKey,
    offset: u64,
    count: u32,
    max: u32,
) -> Result<(), String> {
    let Some(rec) = read_message(shard, key, offset)? else {
        return Ok(());
    };
    let view = record::decode_one(&rec).map_err(|e| e.to_string())?;
    let topic = dlq_topic(&key.group);
    if let Some(e) = ensure_group_topic(shard, &topic) {
        return Err(e);
    }
    let mut copy = revive_copy(&view, &key.topic, &topic, max)?;
    record::patch_reconsume_times(&mut copy, i32::try_from(count).unwrap_or(i32::MAX))
        .map_err(|e| e.to_string())?;
    let reply = match store_copy(shard, topic, copy) {
        Outcome::Now(r) => r,
        Outcome::Later(f) => f.await,
    };
    if reply.status.message_stored() {
        Ok(())
    } else {
        Err(reply.remark())
    }
}

/// The stored record at `offset` of the checkpoint's queue; `None` when the store no longer
/// has it.
fn read_message(shard: &Shard, key: &CkKey, offset: u64) -> Result<Option<Vec<u8>>, String> {
    let store = shard.store.borrow();
    let r = store
        .get(&key.topic, key.queue_id, offset, 1, 1, |_| true)
        .map_err(|e| e.to_string())?;
    if r.status != PullStatus::Found {
        return Ok(None);
    }
    let Some(run) = r.runs.first() else {
        return Ok(None);
    };
    let mut bytes = vec![0u8; run.len as usize];
    store
        .read(run.physical_offset, &mut bytes)
        .map_err(|e| e.to_string())?;
    let at = record::decode_one(&bytes).map(|v| v.queue_offset);
    Ok((at == Ok(offset)).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_topic_of_a_pop_retry_topic_is_its_base() {
        let key = |t: &str| CkKey {
            group: "g".into(),
            topic: t.into(),
            queue_id: 0,
            start_offset: 0,
            pop_time_ms: 0,
        };
        assert_eq!(first_topic(&key("%RETRY%g_orders")), "orders");
        assert_eq!(first_topic(&key("orders")), "orders");
        assert_eq!(first_topic(&key("%RETRY%g")), "%RETRY%g");
        assert_eq!(first_topic(&key("%RETRY%gx_orders")), "%RETRY%gx_orders");
    }
}
