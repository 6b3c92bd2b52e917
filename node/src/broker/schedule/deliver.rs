//! The delivery loop of a master's shard: indexes newly stored scheduled messages, and when
//! they are due stores each in its real topic and queue, with a progress record in the same
//! append (so a crash repeats at most the deliveries of one append, and never skips one).
//! It sleeps until the next due time or until a scheduled message is stored. Only masters
//! run it; a slave replicates the scheduled records and the progress records.
//!
//! A recalled message (`store/recall.rs`) is taken like any due message and skipped: the
//! progress record of the same append moves past it, so it is never delivered. The check
//! and the append happen in one turn of the shard, with no wait between them, so a recall
//! (also handled on this shard's thread) lands wholly before or wholly after.

use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::record;

use crate::broker::shard::Shard;
use crate::broker::{schedule, Broker};
use crate::io::rt;
use crate::store::schedule::{Due, INDEX_UNITS_PER_STEP};
use crate::store::StoreError;

/// Most messages stored in one delivery append.
pub const DELIVERY_BATCH_MAX: usize = 256;
/// Most delivery appends in one turn before the loop yields to requests.
const APPENDS_PER_TURN: usize = 8;
/// Wait before retrying after a failed delivery append (a full disk, say).
const RETRY_MS: u64 = 1000;
/// Longest sleep: the wall clock is read again at least this often, so a clock stepped
/// forward is honoured within it (the sleep itself runs on the monotonic clock).
const SLEEP_MS_MAX: u64 = 1000;

/// The delivery loop (see the module docs).
pub async fn run(shard: Rc<Shard>) {
    let gen = shard.master_gen.get();
    loop {
        if !shard.master_running(gen) {
            return;
        }
        let listener = shard.schedule_kick.listen();
        let wait = step(&shard);
        publish(&shard);
        if wait.is_zero() {
            rt::yield_now().await;
        } else {
            rt::timeout(wait, listener).await;
        }
    }
}

/// One turn: index, deliver what is due. Returns how long to sleep (unless kicked).
fn step(shard: &Shard) -> Duration {
    let caught_up = shard
        .store
        .borrow_mut()
        .schedule_index(INDEX_UNITS_PER_STEP);
    match caught_up {
        Ok(true) => {}
        Ok(false) => return Duration::ZERO,
        Err(e) => return failed(shard, "indexing the schedule", e),
    }
    for _ in 0..APPENDS_PER_TURN {
        let now = Broker::now_ms();
        let due = shard
            .store
            .borrow_mut()
            .schedule_due(now, DELIVERY_BATCH_MAX);
        let due = match due {
            Ok(d) if d.is_empty() => break,
            Ok(d) => d,
            Err(e) => return failed(shard, "reading the schedule", e),
        };
        if let Err(e) = deliver(shard, due, now) {
            return failed(shard, "delivering scheduled messages", e);
        }
    }
    let now = Broker::now_ms();
    let next = shard.store.borrow().schedule_next_wake_ms();
    let ms = next.map_or(SLEEP_MS_MAX, |n| {
        (n.saturating_sub(now).max(0) as u64).min(SLEEP_MS_MAX)
    });
    Duration::from_millis(ms)
}

/// Stores `due` in their real topics, plus the progress record, in one append.
fn deliver(shard: &Shard, due: Vec<Due>, now: i64) -> Result<(), StoreError> {
    let broker = &shard.broker;
    let table = broker.topics.snapshot();
    let mut batch = Vec::with_capacity(due.iter().map(|d| d.size as usize + 64).sum());
    let mut targets: Vec<(String, u32)> = Vec::new();
    let mut recalled = 0u64;
    {
        let store = shard.store.borrow();
        for d in &due {
            if store.schedule_is_recalled(d.cq_offset) {
                recalled += 1;
                continue;
            }
            let bytes = match store.read_record(d.physical_offset) {
                Ok(b) => b,
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    log::error!(
                        "shard {}: scheduled message at {} unreadable, dropped: {e}",
                        shard.id,
                        d.physical_offset
                    );
                    continue;
                }
            };
            let rec = match record::decode_one(&bytes) {
                Ok(r) => r,
                Err(e) => {
                    log::error!(
                        "shard {}: scheduled record at {}: {e}",
                        shard.id,
                        d.physical_offset
                    );
                    continue;
                }
            };
            let out = schedule::delivery_record(&rec, broker.addr);
            let topic = rec.property(ringmq_wire::properties::keys::REAL_TOPIC);
            let queue = rec
                .property(ringmq_wire::properties::keys::REAL_QID)
                .and_then(|q| q.parse::<u32>().ok());
            match (out, topic, queue) {
                (Ok(r), Some(t), Some(q)) if broker.owner(&table, t, q) == Some(shard.id) => {
                    batch.extend_from_slice(&r);
                    targets.push((t.to_string(), q));
                }
                (Ok(_), Some(t), Some(q)) => log::warn!(
                    "shard {}: scheduled message for {t} queue {q} dropped: the topic or \
                     queue no longer exists on this shard",
                    shard.id
                ),
                _ => log::warn!(
                    "shard {}: scheduled message at {} dropped: it does not name its real \
                     topic and queue",
                    shard.id,
                    d.physical_offset
                ),
            }
        }
    }
    let delivered = due.len() as u64 - recalled;
    let progress = shard.store.borrow_mut().schedule_progress(now, delivered);
    batch.extend_from_slice(&schedule::progress_record(
        shard.id,
        &progress,
        broker.addr,
        now,
    ));
    let appended = shard.store.borrow_mut().append(&mut batch, now);
    match appended {
        Ok(_) => {
            {
                let mut store = shard.store.borrow_mut();
                let mut m = shard.metrics.borrow_mut();
                for d in due
                    .iter()
                    .filter(|d| !store.schedule_is_recalled(d.cq_offset))
                {
                    m.delivered_late(u64::try_from(now - d.due_ms).unwrap_or(0), 1);
                }
                store.schedule_commit(progress, delivered);
                store.schedule_forget_recalls(due.iter().map(|d| d.cq_offset));
            }
            targets.sort();
            targets.dedup();
            for (t, q) in &targets {
                shard.wake_queue(t, *q);
            }
            shard.log_appended.notify(usize::MAX);
            Ok(())
        }
        Err(e) => {
            shard.store.borrow_mut().schedule_return(due);
            Err(e)
        }
    }
}

fn failed(shard: &Shard, what: &str, e: StoreError) -> Duration {
    if e.is_fatal() {
        crate::fail_stop(&format!("shard {}: {what}: {e}", shard.id));
    }
    log::warn!("shard {}: {what}: {e}; retrying in {RETRY_MS} ms", shard.id);
    Duration::from_millis(RETRY_MS)
}

/// Publishes the schedule's counts for GET_SCHEDULE_STATUS.
fn publish(shard: &Shard) {
    let counts = shard.store.borrow().schedule_counts();
    if let Some(slot) = shard.broker.schedule.get(usize::from(shard.id)) {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = counts;
    }
}
