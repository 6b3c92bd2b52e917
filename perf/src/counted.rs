//! `consume --count N`: exactly N messages consumed, and the group's offsets committed
//! exactly through them. A push consumer hands its listener whole batches and commits what
//! the listener finished, so a run stopped at N by the listener's count still consumed (and
//! committed) the batches in flight past it. Here the group's `consumers` are pull consumers
//! instead (subscribed, queues balanced across them as the push consumers' are), each
//! pulling its queues ahead of its polls (`pull_ahead`, `--pull-ahead` answers deep), as a
//! push consumer pulls ahead of its listener: each poll takes no more than what is left of N (a shared count claimed atomically), and each
//! queue is committed just past the last message taken: on a later pull of the queue (the
//! request carries the offset, no round trip of its own), and with a request of its own once
//! the count is reached. Messages polled past N, and those pulled ahead, are neither counted
//! nor committed: the group's next reader gets them. With verify, a message delivered again
//! (after a broker restart, a queue that moved to a member reading the group's older
//! committed offset) is taken and recorded but does not count: N is N distinct messages, so
//! a run that met duplicates still reads to the end of what was acknowledged.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{MessageQueue, MessageView, PullConsumer};
use tokio::task::JoinHandle;

use crate::deliveries::{Delivered, Deliveries, RecvPlan};
use crate::payload;

/// How long one poll waits for messages before the task looks at the stop flag again.
const POLL_WAIT: Duration = Duration::from_millis(200);
/// How long perf waits for the group's queues to be spread over its consumers.
const BALANCE_WAIT: Duration = Duration::from_secs(15);

/// The group's pull consumers and their polling tasks.
#[derive(Debug)]
pub struct Counted {
    consumers: Vec<PullConsumer>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    done: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
}

impl Counted {
    /// Starts `plan.consumers` pull consumers of the group, waits until its queues are
    /// spread over them, then polls until `count` messages are taken or [`Counted::shutdown`].
    pub async fn start(
        plan: &RecvPlan,
        count: u64,
        sink: Arc<Deliveries>,
    ) -> Result<Counted, String> {
        let mut consumers = Vec::new();
        for i in 0..plan.consumers {
            let c = PullConsumer::builder()
                .group(&plan.group)
                .client_config(plan.target.client_config())
                .instance_name(format!("perf-{:012x}-c{i}", plan.run_id))
                .start_position(plan.from)
                .poll_batch_max(plan.pull_batch)
                .pull_ahead(true)
                .pull_ahead_depth(plan.pull_ahead)
                .rebalance_interval(Duration::from_secs(2))
                .heartbeat_interval(Duration::from_secs(5))
                .start()
                .await
                .map_err(|e| format!("starting consumer {i} of group {}: {e}", plan.group))?;
            c.subscribe(&plan.topic, "*")
                .await
                .map_err(|e| format!("subscribing consumer {i} to {}: {e}", plan.topic))?;
            consumers.push(c);
        }
        balance(&consumers, &plan.topic).await;
        let budget = Arc::new(Mutex::new(Budget {
            remaining: count,
            counted: plan.verify.then(HashSet::new),
        }));
        let done = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let tasks = consumers
            .iter()
            .map(|c| {
                tokio::spawn(poll_loop(Loop {
                    consumer: c.clone(),
                    topic: plan.topic.clone(),
                    budget: Arc::clone(&budget),
                    done: Arc::clone(&done),
                    error: Arc::clone(&error),
                    sink: Arc::clone(&sink),
                }))
            })
            .collect();
        Ok(Counted {
            consumers,
            tasks: Mutex::new(tasks),
            done,
            error,
        })
    }

    /// Queues assigned across the group.
    pub fn queues(&self) -> usize {
        self.consumers.iter().map(|c| c.assignment().len()).sum()
    }

    /// Stops polling (a poll in progress takes nothing more), waits for the last commits,
    /// leaves the group. The first poll or commit error, if any.
    pub async fn shutdown(&self) -> Option<String> {
        self.done.store(true, Ordering::Relaxed);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
        for c in &self.consumers {
            c.shutdown().await;
        }
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What one polling task shares with the run.
struct Loop {
    consumer: PullConsumer,
    topic: String,
    budget: Arc<Mutex<Budget>>,
    done: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    sink: Arc<Deliveries>,
}

/// What is left of N and, with verify, the messages counted so far, under one lock: two
/// members polling the same message (a queue read by both while a rebalance settles) count
/// it once.
struct Budget {
    remaining: u64,
    counted: Option<HashSet<(u64, u64)>>,
}

impl Budget {
    /// The longest prefix of `msgs` whose fresh messages fit in what is left (all of `msgs`
    /// when they do), counted; 0 when the first fresh message finds nothing left. A message
    /// perf did not send is always fresh; with verify, one counted before is not.
    fn take<M: Delivered>(&mut self, msgs: &[M]) -> usize {
        let mut k = 0;
        for m in msgs {
            let key = payload::parse(m.body()).map(|h| (h.producer, h.seq));
            let fresh = match (&self.counted, key) {
                (Some(set), Some(key)) => !set.contains(&key),
                _ => true,
            };
            if fresh {
                if self.remaining == 0 {
                    break;
                }
                self.remaining -= 1;
                if let (Some(set), Some(key)) = (&mut self.counted, key) {
                    set.insert(key);
                }
            }
            k += 1;
        }
        k
    }
}

impl Loop {
    fn fail(&self, e: String) {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.done.store(true, Ordering::Relaxed);
    }
}

async fn poll_loop(l: Loop) {
    poll_until_done(&l).await;
    // What the last polls took rides on no further pull: written here, so the group's
    // offsets end exactly past the messages taken.
    if let Err(e) = l.consumer.commit_pending().await {
        l.fail(format!("committing the last offsets of {}: {e}", l.topic));
    }
}

async fn poll_until_done(l: &Loop) {
    while !l.done.load(Ordering::Relaxed) {
        let batch = match l.consumer.poll_batch(POLL_WAIT).await {
            Ok(b) => b,
            Err(e) => return l.fail(format!("polling {}: {e}", l.topic)),
        };
        if batch.is_empty() || l.done.load(Ordering::Relaxed) {
            continue;
        }
        let views: Vec<MessageView<'_>> = batch.iter().collect();
        // Only fresh messages count toward N (with verify, a redelivery does not).
        let k = l
            .budget
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(&views);
        if k == 0 {
            return;
        }
        let taken = &views[..k];
        let begin = l.sink.begin_call();
        l.sink.record(taken, begin, true, false);
        for (mq, offset) in next_offsets(&l.topic, taken) {
            if let Err(e) = l.consumer.commit_on_next_pull(&mq, offset) {
                return l.fail(format!("committing offset {offset} of {mq}: {e}"));
            }
        }
        if k < views.len() {
            return;
        }
    }
}

/// Per queue, the offset just past the last message taken.
fn next_offsets(topic: &str, taken: &[MessageView<'_>]) -> BTreeMap<MessageQueue, u64> {
    let mut next: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    for m in taken {
        let e = next.entry((m.broker_name(), m.queue_id())).or_insert(0);
        *e = (*e).max(m.queue_offset() + 1);
    }
    next.into_iter()
        .map(|((broker, queue), o)| (MessageQueue::new(topic, broker, queue), o))
        .collect()
}

/// Waits until every queue has one owner and every member owns some (two or more members).
async fn balance(consumers: &[PullConsumer], topic: &str) {
    if consumers.len() < 2 {
        return;
    }
    let deadline = Instant::now() + BALANCE_WAIT;
    loop {
        let mut all: Vec<MessageQueue> = consumers.iter().flat_map(|c| c.assignment()).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        let spread = consumers
            .iter()
            .filter(|c| !c.assignment().is_empty())
            .count();
        if n > 0 && n == all.len() && spread == consumers.len().min(n) {
            return;
        }
        if Instant::now() >= deadline {
            eprintln!("ringmq-perf: the group's queues did not settle within {BALANCE_WAIT:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for c in consumers {
            // Subscribing again runs a rebalance now instead of at the next tick.
            if let Err(e) = c.subscribe(topic, "*").await {
                log::warn!("rebalancing: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliveries::testing::msg;

    /// With verify, a message two members poll (a queue both read while a rebalance
    /// settles) is counted once, so the count ends at N distinct messages: the prefix taken
    /// stops at the first fresh message past N and takes the duplicates before it.
    #[test]
    fn a_message_polled_twice_counts_once() {
        let mut b = Budget {
            remaining: 4,
            counted: Some(HashSet::new()),
        };
        assert_eq!(b.take(&[msg(0), msg(1)]), 2, "member A");
        assert_eq!(
            b.take(&[msg(0), msg(1), msg(2)]),
            3,
            "member B: two of them again"
        );
        assert_eq!(b.remaining, 1);
        assert_eq!(
            b.take(&[msg(2), msg(3), msg(4)]),
            2,
            "up to msg 3; msg 4 is past N"
        );
        assert_eq!(b.remaining, 0);
        assert_eq!(
            b.take(&[msg(3), msg(5)]),
            1,
            "a duplicate is taken, a fresh one is not"
        );
        assert_eq!(b.take(&[msg(5)]), 0);

        let mut plain = Budget {
            remaining: 3,
            counted: None,
        };
        assert_eq!(
            plain.take(&[msg(0), msg(0)]),
            2,
            "without verify every delivery counts"
        );
        assert_eq!(plain.take(&[msg(0), msg(1)]), 1);
        assert_eq!(plain.take(&[msg(1)]), 0);
    }
}
