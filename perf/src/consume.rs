//! The receiving half: `consumers` push consumers of one group (queues balanced across
//! them, each queue long-polled, `pull_batch` messages per pull), concurrent or orderly. The
//! listener reads each message's perf head: delivery latency (receipt minus the send time in
//! the head), and in verify mode a [`Delivery`](crate::verify::Delivery) record for the
//! check. With a [`FailPlan`](crate::fail::FailPlan) it fails the chosen messages' deliveries
//! (one message per call then). With churn, one
//! consumer at a time is stopped (cleanly or aborted) and replaced ([`Consumers::churn`]).
//!
//! Every listener call draws a begin and an end position from one counter of the run
//! (between them, in verify mode, it yields once to the runtime, so calls the consumer lets
//! overlap do overlap); the verify check finds overlapping calls on one queue from them. A call the
//! consumer drops unfinished (an abort) ends, as failed, when it is dropped.
//!
//! With `--protocol remoting` the group is perf's remoting pull loops instead
//! ([`crate::remoting::pull`]): no listener calls, deliveries counted and timed in bulk.
//! With `consume --count N` it is pull consumers that take exactly N ([`crate::counted`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::wire::command::retry_topic;
use ringmq_client::{ConsumeContext, ConsumeResult, MessageBatch, MessageView, PushConsumer};

use crate::counted::Counted;
pub use crate::deliveries::{Deliveries, Lateness, RecvPlan};
use crate::pop::Poppers;
use crate::remoting::pull::Pullers;

/// How long perf waits for a group's queues to be spread over its consumers.
const BALANCE_WAIT: Duration = Duration::from_secs(15);

/// One listener call: recorded when it is dropped, as failed unless [`Call::finish`] said
/// otherwise (a call dropped by an abort ends then).
struct Call {
    sink: Arc<Deliveries>,
    msgs: MessageBatch,
    /// The messages come from the group's retry topic.
    retry: bool,
    begin: u64,
    ok: bool,
}

impl Call {
    fn begin(sink: Arc<Deliveries>, msgs: MessageBatch, retry: bool) -> Call {
        let begin = sink.begin_call();
        Call {
            sink,
            msgs,
            retry,
            begin,
            ok: false,
        }
    }

    fn finish(mut self, ok: bool) {
        self.ok = ok;
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let views: Vec<MessageView<'_>> = self.msgs.iter().collect();
        self.sink.record(&views, self.begin, self.ok, self.retry);
    }
}

/// The listener of every consumer of the run. `retry`: the call's messages were read from
/// the group's retry topic (a call's messages all come from one queue).
async fn listen(sink: Arc<Deliveries>, msgs: MessageBatch, retry: bool) -> ConsumeResult {
    let fail = sink.fails_now(&msgs);
    let verify = sink.record.is_some();
    let call = Call::begin(sink, msgs, retry);
    if verify {
        // Lets other tasks of this worker run inside the call: calls the consumer allows
        // to overlap then do overlap, and the verify check can see it. (Only when
        // verifying: a yield costs the generator a trip through the runtime's driver.)
        tokio::task::yield_now().await;
    }
    call.finish(!fail);
    if fail {
        ConsumeResult::Retry
    } else {
        ConsumeResult::Success
    }
}

/// Started consumers; with churn, replaced one at a time.
#[derive(Debug)]
pub struct Consumers {
    plan: RecvPlan,
    sink: Arc<Deliveries>,
    list: Mutex<Vec<PushConsumer>>,
    /// `--protocol remoting`: the pull loops instead of push consumers.
    pullers: Option<Pullers>,
    /// `--pop`: simple consumers instead of push consumers.
    pub poppers: Option<Poppers>,
    /// `consume --count N`: pull consumers that take exactly N.
    counted: Option<Counted>,
    /// What the counted consumers' shutdown reported (a failed poll or commit).
    counted_error: Mutex<Option<String>>,
    /// Index of the next consumer's instance name.
    next: AtomicU32,
    /// Consumers stopped by churn: cleanly, and aborted.
    pub stopped_clean: AtomicU64,
    pub aborted: AtomicU64,
}

impl Consumers {
    /// Starts the group's consumers, then waits until its queues are spread over them
    /// (each queue owned by exactly one member), so no queue changes hands mid-run.
    pub async fn start(plan: &RecvPlan, sink: Arc<Deliveries>) -> Result<Consumers, String> {
        let mut list = Vec::new();
        let mut pullers = None;
        let mut poppers = None;
        let mut counted = None;
        match (plan.remoting, plan.pop, plan.count) {
            (Some(st), _, _) => pullers = Some(Pullers::start(plan, st, Arc::clone(&sink)).await?),
            (None, Some(invisible), _) => {
                poppers = Some(Poppers::start(plan, invisible, Arc::clone(&sink)).await?)
            }
            (None, None, Some(n)) => {
                counted = Some(Counted::start(plan, n, Arc::clone(&sink)).await?)
            }
            (None, None, None) => {
                for i in 0..plan.consumers {
                    list.push(start_one(plan, &sink, i).await?);
                }
            }
        }
        let cs = Consumers {
            plan: plan.clone(),
            sink,
            list: Mutex::new(list),
            pullers,
            poppers,
            counted,
            counted_error: Mutex::new(None),
            next: AtomicU32::new(plan.consumers),
            stopped_clean: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
        };
        cs.balance().await;
        Ok(cs)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PushConsumer>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until every queue has one owner, every member owns some (two or more
    /// members), and with failures on purpose (concurrent consumers) the group's retry
    /// queue is owned too, before anything is sent back to it.
    async fn balance(&self) {
        let list: Vec<PushConsumer> = self.lock().clone();
        let want_retry = self.plan.single && !self.plan.orderly;
        if list.len() < 2 && !want_retry {
            return;
        }
        let retry = retry_topic(&self.plan.group);
        let deadline = Instant::now() + BALANCE_WAIT;
        loop {
            for c in &list {
                c.rebalance().await;
            }
            let mut all: Vec<_> = list.iter().flat_map(|c| c.assignment()).collect();
            let n = all.len();
            all.sort();
            all.dedup();
            let spread = list.iter().filter(|c| !c.assignment().is_empty()).count();
            let retry_owned = !want_retry || all.iter().any(|q| q.topic == retry);
            if n == all.len() && spread == list.len().min(n) && retry_owned {
                return;
            }
            if Instant::now() >= deadline {
                eprintln!("ringmq-perf: the group's queues did not settle within {BALANCE_WAIT:?}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the oldest consumer (`clean`: shutdown; else abort, as a crash) and starts a
    /// new one.
    pub async fn churn(&self, clean: bool) -> Result<(), String> {
        let old = {
            let mut list = self.lock();
            (!list.is_empty()).then(|| list.remove(0))
        };
        if let Some(c) = old {
            if clean {
                c.shutdown().await;
                self.stopped_clean.fetch_add(1, Ordering::Relaxed);
            } else {
                c.abort();
                self.aborted.fetch_add(1, Ordering::Relaxed);
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let c = start_one(&self.plan, &self.sink, i).await?;
        self.lock().push(c);
        Ok(())
    }

    /// Why the counted consumers stopped short (a failed poll or commit), after shutdown.
    pub fn counted_error(&self) -> Option<String> {
        self.counted_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Queues assigned across the group.
    pub fn queues(&self) -> usize {
        let pulled = self.pullers.as_ref().map_or(0, Pullers::queues)
            + self.counted.as_ref().map_or(0, Counted::queues);
        pulled
            + self
                .lock()
                .iter()
                .map(|c| c.assignment().len())
                .sum::<usize>()
    }

    /// Commits offsets and leaves the group.
    pub async fn shutdown(&self) {
        if let Some(p) = &self.pullers {
            p.shutdown();
        }
        if let Some(p) = &self.poppers {
            p.shutdown().await;
        }
        if let Some(c) = &self.counted {
            *self.counted_error.lock().unwrap_or_else(|p| p.into_inner()) = c.shutdown().await;
        }
        let list: Vec<PushConsumer> = std::mem::take(&mut *self.lock());
        for c in &list {
            c.shutdown().await;
        }
    }
}

/// Starts consumer `i` of the plan.
async fn start_one(
    plan: &RecvPlan,
    sink: &Arc<Deliveries>,
    i: u32,
) -> Result<PushConsumer, String> {
    let sink = Arc::clone(sink);
    let batch = if plan.single {
        1
    } else {
        plan.pull_batch as usize
    };
    let mut b = PushConsumer::builder()
        .group(&plan.group)
        .client_config(plan.target.client_config())
        .instance_name(format!("perf-{:012x}-c{i}", plan.run_id))
        .subscribe(&plan.topic, "*")
        .start_position(plan.from)
        .pull_batch_max(plan.pull_batch)
        .consume_batch_max(batch)
        .queue_outstanding_max((plan.pull_batch as usize * 4).max(1000))
        .rebalance_interval(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_secs(5))
        .long_poll(Duration::from_secs(5))
        .orderly(plan.orderly);
    if let Some(n) = plan.max_reconsume {
        b = b.max_reconsume_times(n);
    }
    let retry = retry_topic(&plan.group);
    b.start_batch(move |msgs: MessageBatch, ctx: ConsumeContext| {
        listen(Arc::clone(&sink), msgs, ctx.queue.topic == retry)
    })
    .await
    .map_err(|e| format!("starting consumer {i} of group {}: {e}", plan.group))
}

/// When a consume run ends.
#[derive(Debug, Clone, Copy)]
pub struct StopWhen {
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub idle: Duration,
}

/// Waits until `when` says stop (or `stop` is set).
pub async fn wait(sink: &Deliveries, when: StopWhen, stop: &AtomicBool) {
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if when.count.is_some_and(|n| sink.consumed() >= n) {
            return;
        }
        if when.duration.is_some_and(|d| started.elapsed() >= d) {
            return;
        }
        if sink.idle() >= when.idle {
            return;
        }
    }
}
