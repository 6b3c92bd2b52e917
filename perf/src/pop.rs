//! `--pop`: the group's members are simple consumers (POP consumption). Each loops: receive
//! up to `--pull-batch` (at most 32) messages invisible for `--invisible-time`, record them
//! as delivered, ack them in one batch per queue. A message delivered again after its ack was
//! acknowledged is counted (`acked_redelivered`; it must stay 0).
//!
//! `--pop --orderly`: orderly POP (a queue handed to one receive at a time, in offset order;
//! `--verify` applies the orderly rule to first deliveries). Each member acks what it got one
//! message at a time in a shuffled order, since the broker takes an orderly pop's acks in
//! any order.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringmq_client::{PoppedMessage, ReceivedMessage, SimpleConsumer, StartPosition};

use crate::deliveries::{Deliveries, RecvPlan};

/// The popping members of a run.
#[derive(Debug)]
pub struct Poppers {
    members: Vec<SimpleConsumer>,
    stop: Arc<AtomicBool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub counts: Arc<PopCounts>,
}

/// What the members counted.
#[derive(Debug, Default)]
pub struct PopCounts {
    /// Messages acked (acknowledged by the broker).
    pub acked: AtomicU64,
    /// Acks the broker refused (their invisible time had ended).
    pub ack_refused: AtomicU64,
    /// Deliveries of a message whose ack was acknowledged before.
    pub acked_redelivered: AtomicU64,
    /// Receive or ack calls that failed (connection, broker error).
    pub errors: AtomicU64,
    /// The stored message ([`stored_instance`]) of every acknowledged delivery.
    acked_ids: Mutex<HashSet<String>>,
}

impl Poppers {
    pub async fn start(
        plan: &RecvPlan,
        invisible: Duration,
        sink: Arc<Deliveries>,
    ) -> Result<Poppers, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(PopCounts::default());
        warm_up(plan, &sink, &counts).await?;
        let mut members = Vec::new();
        let mut tasks = Vec::new();
        for i in 0..plan.consumers {
            let c = SimpleConsumer::builder()
                .group(&plan.group)
                .client_config(plan.target.client_config())
                .instance_name(format!("perf-{:012x}-p{i}", plan.run_id))
                .subscribe(&plan.topic, "*")
                .await_duration(Duration::from_secs(2))
                .orderly(plan.orderly)
                .start_position(match plan.from {
                    StartPosition::Last => StartPosition::Last,
                    _ => StartPosition::First,
                })
                .start()
                .await
                .map_err(|e| {
                    format!("starting simple consumer {i} of group {}: {e}", plan.group)
                })?;
            tasks.push(tokio::spawn(member(
                c.clone(),
                plan.orderly.then_some(plan.run_id ^ u64::from(i + 1)),
                plan.pull_batch
                    .clamp(1, ringmq_client::consumer::RECEIVE_MAX),
                invisible,
                Arc::clone(&sink),
                Arc::clone(&counts),
                Arc::clone(&stop),
            )));
            members.push(c);
        }
        Ok(Poppers {
            members,
            stop,
            tasks: Mutex::new(tasks),
            counts,
        })
    }

    pub async fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
        for c in &self.members {
            c.shutdown().await;
        }
    }
}

/// A group's position in a queue is set when the group first pops it (the queue's end for
/// `--from last`). Before the producers start, pops without waiting visit every queue (a
/// broker shard sets all of its queues and hands on to another shard), so no message sent
/// after this is skipped. What they receive (a group that popped before) is recorded and
/// acked as any delivery.
async fn warm_up(plan: &RecvPlan, sink: &Deliveries, counts: &PopCounts) -> Result<(), String> {
    let c = SimpleConsumer::builder()
        .group(&plan.group)
        .client_config(plan.target.client_config())
        .instance_name(format!("perf-{:012x}-pw", plan.run_id))
        .subscribe(&plan.topic, "*")
        .await_duration(Duration::ZERO)
        .orderly(plan.orderly)
        .start_position(match plan.from {
            StartPosition::Last => StartPosition::Last,
            _ => StartPosition::First,
        })
        .start()
        .await
        .map_err(|e| format!("starting a simple consumer of group {}: {e}", plan.group))?;
    for _ in 0..WARM_UP_POPS {
        let got = c
            .receive(1, Duration::from_secs(30))
            .await
            .map_err(|e| format!("group {}: the first pops: {e}", plan.group))?;
        if !got.is_empty() {
            record(sink, &got);
            let (acked, _) = c
                .ack_batch(&got)
                .await
                .map_err(|e| format!("group {}: acking: {e}", plan.group))?;
            counts.acked.fetch_add(u64::from(acked), Ordering::Relaxed);
        }
    }
    c.shutdown().await;
    Ok(())
}

/// Pops of [`warm_up`]: each visits two shards of a broker; enough for 16 shards on each
/// broker the route lists.
const WARM_UP_POPS: usize = 32;

/// One member's loop. `shuffle`: orderly, acks one at a time in an order drawn from this
/// seed.
async fn member(
    c: SimpleConsumer,
    mut shuffle: Option<u64>,
    batch: u32,
    invisible: Duration,
    sink: Arc<Deliveries>,
    counts: Arc<PopCounts>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let got = match c.receive(batch, invisible).await {
            Ok(g) => g,
            Err(e) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                log::debug!("pop: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if got.is_empty() {
            continue;
        }
        let ids: Vec<String> = got.iter().map(stored_instance).collect();
        {
            let acked = counts.acked_ids.lock().unwrap_or_else(|p| p.into_inner());
            let again = ids.iter().filter(|k| acked.contains(*k)).count();
            counts
                .acked_redelivered
                .fetch_add(again as u64, Ordering::Relaxed);
        }
        record(&sink, &got);
        if let Some(seed) = shuffle.as_mut() {
            ack_shuffled(&c, &got, &ids, seed, &counts).await;
            continue;
        }
        match c.ack_batch(&got).await {
            Ok((acked, refused)) => {
                counts.acked.fetch_add(u64::from(acked), Ordering::Relaxed);
                counts
                    .ack_refused
                    .fetch_add(u64::from(refused), Ordering::Relaxed);
                if refused == 0 {
                    let mut set = counts.acked_ids.lock().unwrap_or_else(|p| p.into_inner());
                    set.extend(ids);
                }
            }
            Err(e) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                log::debug!("pop ack: {e}");
            }
        }
    }
}

/// Acks `got` one message at a time in an order drawn from `seed` (xorshift64), counting as
/// [`member`] does; the acknowledged ones join the acked set.
async fn ack_shuffled(
    c: &SimpleConsumer,
    got: &[PoppedMessage],
    ids: &[String],
    seed: &mut u64,
    counts: &PopCounts,
) {
    let mut order: Vec<usize> = (0..got.len()).collect();
    for i in (1..order.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        order.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
    for i in order {
        match c.ack(&got[i]).await {
            Ok(()) => {
                counts.acked.fetch_add(1, Ordering::Relaxed);
                let mut set = counts.acked_ids.lock().unwrap_or_else(|p| p.into_inner());
                set.insert(ids[i].clone());
            }
            Err(e)
                if e.status() == Some(ringmq_client::wire::code::Status::InvalidReceiptHandle) =>
            {
                counts.ack_refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                log::debug!("pop ack: {e}");
            }
        }
    }
}

/// Which stored message a delivery is: a copy the broker made (a POP revive to the retry
/// topic, a dead letter) names its original in `ORIGIN_MESSAGE_ID`, any other delivery is
/// the stored message itself (its offset message id). A message the producer stored twice
/// (a send retried after the broker was killed mid-answer) is two stored messages: each
/// may be delivered once, and `--verify` counts the pair as a duplicate, not as a message
/// delivered again after its ack.
fn stored_instance(m: &PoppedMessage) -> String {
    m.message
        .properties
        .get(ringmq_client::wire::properties::keys::ORIGIN_MESSAGE_ID)
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| m.message.msg_id.clone())
}

/// Records one receive's messages as one listener call each queue topic (the pop retry
/// topic's messages as retries).
fn record(sink: &Deliveries, got: &[PoppedMessage]) {
    let (retry, plain): (Vec<&PoppedMessage>, Vec<&PoppedMessage>) = got
        .iter()
        .partition(|m| ringmq_client::wire::command::is_retry_topic(&m.message.topic));
    for (msgs, is_retry) in [(plain, false), (retry, true)] {
        if msgs.is_empty() {
            continue;
        }
        let msgs: Vec<ReceivedMessage> = msgs.into_iter().map(|m| m.message.clone()).collect();
        let begin = sink.begin_call();
        sink.record(&msgs, begin, true, is_retry);
    }
}
