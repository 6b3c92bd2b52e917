//! `--pop`: the group's members are simple consumers (POP consumption). Each loops: receive
//! up to `--pull-batch` (at most 32) messages invisible for `--invisible-time`, record them
//! as delivered, ack them in one batch per queue. A message delivered again after its ack was
//! acknowledged is counted (`acked_redelivered`; it must stay 0): the same stored message
//! again, or a copy revived from it (the same original, a higher reconsume count). A second
//! copy of one revive (the broker's revive stores a copy, then records it; a kill between
//! the two stores the copy again on restart, at least once as RocketMQ does) has the count of
//! its twin and is counted apart (`twin_copies`).
//!
//! `--pop --orderly`: orderly POP (a queue handed to one receive at a time, in offset order;
//! `--verify` applies the orderly rule to first deliveries). Each member acks what it got one
//! message at a time in a shuffled order, since the broker takes an orderly pop's acks in
//! any order.

use std::collections::{HashMap, HashSet};
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
    /// Deliveries of a second copy of one revive after its twin's ack (see the module doc).
    pub twin_copies: AtomicU64,
    /// Receive or ack calls that failed (connection, broker error).
    pub errors: AtomicU64,
    /// Every acknowledged delivery, by original.
    acked_ids: Mutex<Acked>,
}

/// The acknowledged deliveries of each original message ([`stored_instance`]): the stored
/// messages acked (offset ids) and the lowest reconsume count among them.
#[derive(Debug, Default)]
struct Acked(HashMap<String, (i32, HashSet<String>)>);

/// What a delivery is to the acknowledged ones.
#[derive(Debug, PartialEq, Eq)]
enum Again {
    /// Nothing of it was acked.
    No,
    /// A stored message acked before, or a copy revived from one.
    AfterAck,
    /// Another copy of an original one of whose copies was acked, with no higher count.
    Twin,
}

impl Acked {
    fn add(&mut self, m: &PoppedMessage) {
        self.add_delivery(
            stored_instance(m),
            &m.message.msg_id,
            m.message.reconsume_times,
        );
    }

    fn again(&self, m: &PoppedMessage) -> Again {
        self.delivery(
            &stored_instance(m),
            &m.message.msg_id,
            m.message.reconsume_times,
        )
    }

    /// An acknowledged delivery of stored message `id`, a copy of `original` (or `original`
    /// itself) delivered `count` times before.
    fn add_delivery(&mut self, original: String, id: &str, count: i32) {
        let e = self.0.entry(original).or_insert((count, HashSet::new()));
        e.0 = e.0.min(count);
        e.1.insert(id.to_owned());
    }

    fn delivery(&self, original: &str, id: &str, count: i32) -> Again {
        match self.0.get(original) {
            None => Again::No,
            Some((acked_count, ids)) if ids.contains(id) || count > *acked_count => Again::AfterAck,
            Some(_) => Again::Twin,
        }
    }
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
        {
            let acked = counts.acked_ids.lock().unwrap_or_else(|p| p.into_inner());
            for m in &got {
                match acked.again(m) {
                    Again::No => {}
                    Again::AfterAck => {
                        counts.acked_redelivered.fetch_add(1, Ordering::Relaxed);
                    }
                    Again::Twin => {
                        counts.twin_copies.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        record(&sink, &got);
        if let Some(seed) = shuffle.as_mut() {
            ack_shuffled(&c, &got, seed, &counts).await;
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
                    for m in &got {
                        set.add(m);
                    }
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
                set.add(&got[i]);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_after_an_ack_is_told_from_a_twin_copy() {
        let mut acked = Acked::default();
        assert_eq!(acked.delivery("M", "M", 0), Again::No);
        // A copy revived from M (count 1), acked.
        acked.add_delivery("M".into(), "C1", 1);
        // The same stored copy again, or a copy revived from it: after the ack.
        assert_eq!(acked.delivery("M", "C1", 1), Again::AfterAck);
        assert_eq!(acked.delivery("M", "C3", 2), Again::AfterAck);
        // A second copy of the same revive (count 1, another stored message): a twin.
        assert_eq!(acked.delivery("M", "C2", 1), Again::Twin);
        // M itself acked: M again is after the ack, whatever its count.
        acked.add_delivery("N".into(), "N", 0);
        assert_eq!(acked.delivery("N", "N", 0), Again::AfterAck);
        assert_eq!(acked.delivery("other", "N", 0), Again::No);
    }
}
