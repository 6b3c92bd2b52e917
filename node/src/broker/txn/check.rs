//! The check-back loop of a master's shard: stores again a commit whose copy the last crash
//! cut off, indexes new halves and decisions, and asks a live producer of its group about
//! each half still undecided `transactionTimeOut` after it was stored
//! (CHECK_TRANSACTION_STATE, oneway, on the producer's own connection; the producer answers
//! with END_TRANSACTION), every `transactionCheckInterval`, at most `transactionCheckMax`
//! times. After the last check the half is copied to `TRANS_CHECK_MAX_TIME_TOPIC` with a
//! `Discarded` decision and logged: never silently dropped. A check is counted whether or
//! not a producer of the group was there to ask.
//!
//! Checks made are kept in memory: after a restart undecided halves get their checks again.

use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::RequestCode;
use ringmq_wire::command::CheckTransactionRequest;
use ringmq_wire::properties::keys;
use ringmq_wire::record;
use ringmq_wire::transaction::Decision;

use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::io::rt;
use crate::store::txn::Pending;

/// Most halves checked (or discarded) before the loop lets requests in (it goes on at once
/// while more are due).
const CHECKS_PER_TURN: usize = 256;
/// Index step (ConsumeQueue units) per turn.
const INDEX_UNITS_PER_TURN: u64 = 4096;
/// Longest sleep between turns.
const TURN_MS_MAX: u64 = 1000;

/// The loop (see the module docs).
pub async fn run(shard: Rc<Shard>) {
    let gen = shard.master_gen.get();
    loop {
        if !shard.master_running(gen) {
            return;
        }
        let wait = turn(&shard);
        rt::sleep(wait).await;
    }
}

fn turn(shard: &Shard) -> Duration {
    let cfg = &shard.broker.config;
    let every = Duration::from_millis(
        cfg.transaction_check_interval_ms
            .min(cfg.transaction_timeout_ms)
            .clamp(10, TURN_MS_MAX),
    );
    if let Err(e) = redo(shard) {
        log::warn!("shard {}: storing a cut-off commit again: {e}", shard.id);
        return every;
    }
    let caught_up = shard.store.borrow_mut().txn_index(INDEX_UNITS_PER_TURN);
    if let Some(c) = shard.broker.txn.get(usize::from(shard.id)) {
        c.lock().unwrap_or_else(|p| p.into_inner()).indexing = !matches!(caught_up, Ok(true));
    }
    match caught_up {
        Ok(true) => {}
        Ok(false) => return Duration::ZERO,
        Err(e) => {
            log::warn!("shard {}: indexing transactions: {e}", shard.id);
            return every;
        }
    }
    let now = Broker::now_ms();
    let timeout = i64::try_from(cfg.transaction_timeout_ms).unwrap_or(i64::MAX);
    let due = shard
        .store
        .borrow()
        .txn_due(now.saturating_sub(timeout), now, CHECKS_PER_TURN);
    let more = due.len() >= CHECKS_PER_TURN;
    for p in due {
        check(shard, &p, now);
    }
    publish(shard);
    if more {
        // A backlog of due halves: go on after letting requests in, not a whole turn later.
        return Duration::ZERO;
    }
    every
}

/// A commit (or discard) whose copy the last crash cut off: store the copy again.
fn redo(shard: &Shard) -> Result<(), String> {
    let Some((qo, decision)) = shard.store.borrow().txn_redo() else {
        return Ok(());
    };
    let half = super::load_half(shard, qo, None)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("half {qo} is gone"))?;
    let rec = record::decode_one(&half).map_err(|e| e.to_string())?;
    // The op is already in the log; append the copy alone.
    super::store_copy_again(shard, &rec, decision).map_err(|r| r.remark())?;
    shard.store.borrow_mut().txn_redone();
    log::warn!(
        "shard {}: the {} copy of half {qo} was cut off by a crash; stored it again",
        shard.id,
        decision.name()
    );
    if let Some(c) = shard.broker.txn.get(usize::from(shard.id)) {
        c.lock().unwrap_or_else(|p| p.into_inner()).redone += 1;
    }
    Ok(())
}

fn check(shard: &Shard, p: &Pending, now: i64) {
    let cfg = &shard.broker.config;
    let interval = i64::try_from(cfg.transaction_check_interval_ms).unwrap_or(i64::MAX);
    let half = match super::load_half(shard, p.half_queue_offset, Some(p.physical_offset)) {
        Ok(Some(h)) => h,
        Ok(None) => return,
        Err(e) => {
            log::warn!(
                "shard {}: reading half {}: {e}",
                shard.id,
                p.half_queue_offset
            );
            return;
        }
    };
    let Ok(rec) = record::decode_one(&half) else {
        return;
    };
    if p.checks >= cfg.transaction_check_max {
        match super::decide(
            shard,
            p.half_queue_offset,
            &rec,
            Decision::Discarded,
            p.checks,
        ) {
            Ok(_) => {
                log::warn!(
                    "shard {}: transaction {} of producer group {} undecided after {} \
                     check-backs: moved to {}",
                    shard.id,
                    transaction_id(&rec),
                    p.producer_group,
                    p.checks,
                    ringmq_wire::transaction::CHECK_MAX_TOPIC
                );
                if let Some(c) = shard.broker.txn.get(usize::from(shard.id)) {
                    c.lock().unwrap_or_else(|p| p.into_inner()).discarded += 1;
                }
            }
            Err(r) => log::warn!(
                "shard {}: moving half {} to the check-max topic: {}",
                shard.id,
                p.half_queue_offset,
                r.remark()
            ),
        }
        return;
    }
    let producers = shard.broker.lock_groups().producers(&p.producer_group, now);
    let channel = (!producers.is_empty())
        .then(|| producers[p.checks as usize % producers.len()].clone())
        .and_then(|id| shard.broker.lock_groups().channel(&id));
    let header = CheckTransactionRequest {
        half_queue_offset: p.half_queue_offset,
        physical_offset: p.physical_offset,
        message_id: rec
            .property(keys::UNIQ_KEY)
            .map(str::to_owned)
            .unwrap_or_else(|| record::message_id(rec.store_host, rec.physical_offset)),
        transaction_id: transaction_id(&rec),
    };
    let sent = channel.is_some_and(|ch| {
        shard.send_oneway(ch, RequestCode::CheckTransactionState, &header, &half)
    });
    if let Some(c) = shard.broker.txn.get(usize::from(shard.id)) {
        let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
        if sent {
            c.checks_sent += 1;
        } else {
            c.checks_unanswerable += 1;
        }
    }
    if !sent {
        log::debug!(
            "shard {}: no live producer of group {} to check half {}",
            shard.id,
            p.producer_group,
            p.half_queue_offset
        );
    }
    shard
        .store
        .borrow_mut()
        .txn_checked(p.half_queue_offset, now.saturating_add(interval));
}

fn transaction_id(rec: &record::RecordView<'_>) -> String {
    rec.property(keys::TRANSACTION_ID)
        .or_else(|| rec.property(keys::UNIQ_KEY))
        .unwrap_or_default()
        .to_owned()
}

/// Publishes the pending halves per group for status requests.
fn publish(shard: &Shard) {
    let mut pending = std::collections::BTreeMap::<String, (u64, i64)>::new();
    for p in shard.store.borrow().txn_pending() {
        let e = pending
            .entry(p.producer_group.clone())
            .or_insert((0, i64::MAX));
        e.0 += 1;
        e.1 = e.1.min(p.stored_ms);
    }
    if let Some(c) = shard.broker.txn.get(usize::from(shard.id)) {
        c.lock().unwrap_or_else(|p| p.into_inner()).pending = pending;
    }
}
