//! The receiving half: `consumers` push consumers of one group (queues balanced across
//! them, each queue long-polled, `pull_batch` messages per pull), concurrent or orderly. The
//! listener reads each message's perf head: delivery latency (receipt minus the send time in
//! the head), and in verify mode a [`Delivery`] record for the check. With a [`FailPlan`]
//! it fails the chosen messages' deliveries (one message per call then). With churn, one
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

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::wire::command::retry_topic;
use ringmq_client::wire::remoting::SerializeType;
use ringmq_client::{
    ConsumeContext, ConsumeResult, MessageBatch, MessageView, PushConsumer, ReceivedMessage,
    StartPosition,
};

use crate::counted::Counted;
use crate::fail::FailPlan;
use crate::payload;
use crate::pop::Poppers;
use crate::remoting::pull::Pullers;
use crate::security::Target;
use crate::stats::{Meter, Percentiles};
use crate::verify::{Delivery, QueueNames};

/// How long perf waits for a group's queues to be spread over its consumers.
const BALANCE_WAIT: Duration = Duration::from_secs(15);

/// How to consume.
#[derive(Debug, Clone)]
pub struct RecvPlan {
    /// Name servers, TLS and credentials.
    pub target: Target,
    pub topic: String,
    pub group: String,
    pub consumers: u32,
    pub from: StartPosition,
    pub pull_batch: u32,
    /// Keep a delivery record per message for the verify check.
    pub verify: bool,
    /// Instance names are `perf-<run id>-c<i>`.
    pub run_id: u64,
    /// The consumers' maxReconsumeTimes (`None`: the group's limit on the broker).
    pub max_reconsume: Option<u32>,
    pub orderly: bool,
    /// One message per listener call (failures on purpose fail only their message).
    pub single: bool,
    /// Pull over RocketMQ's remoting protocol with this header serialization (`None`: the
    /// native protocol's push consumers).
    pub remoting: Option<SerializeType>,
    /// POP consumption with this invisible time (`--pop`): simple consumers.
    pub pop: Option<Duration>,
    /// `consume --count N`: exactly N consumed and committed, by pull consumers
    /// ([`crate::counted`]).
    pub count: Option<u64>,
}

/// What the listener sees, shared by every consumer of the run.
#[derive(Debug)]
pub struct Deliveries {
    pub meter: Arc<Meter>,
    /// Messages without a perf head (someone else's).
    pub foreign: AtomicU64,
    /// Deliveries whose listener call failed (on purpose, or dropped by an abort).
    pub failed: AtomicU64,
    /// Deliveries read from the group's retry topic (successful or not).
    pub retried: AtomicU64,
    fail: Option<FailPlan>,
    /// Positions of listener calls' begins and ends.
    events: AtomicU64,
    started: Instant,
    /// µs after `started` of the last delivery (0: none yet).
    last_us: AtomicU64,
    record: Option<Mutex<(QueueNames, Vec<Delivery>)>>,
    /// Verify mode: the messages delivered successfully at least once (producer, sequence).
    delivered: Option<Mutex<HashSet<(u64, u64)>>>,
    /// Scheduled messages: receipt minus due time (µs), and those delivered early.
    lateness: Mutex<hdrhistogram::Histogram<u64>>,
    /// The broker's part: store time of the delivered copy minus due time (ms resolution).
    store_lateness: Mutex<hdrhistogram::Histogram<u64>>,
    early: AtomicU64,
}

/// How late scheduled messages arrived.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lateness {
    /// Receipt minus due time, µs.
    pub us: Percentiles,
    pub samples: u64,
    /// The broker's part: the delivered copy's store time minus due time, µs (whole ms).
    pub store_us: Percentiles,
    /// Stored in their topic before due (broker clock), or received before due.
    pub early: u64,
}

impl Deliveries {
    pub fn new(meter: Arc<Meter>, verify: bool, fail: Option<FailPlan>) -> Deliveries {
        Deliveries {
            meter,
            foreign: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            fail,
            events: AtomicU64::new(1),
            started: Instant::now(),
            last_us: AtomicU64::new(0),
            record: verify.then(|| Mutex::new((QueueNames::default(), Vec::new()))),
            delivered: verify.then(|| Mutex::new(HashSet::new())),
            lateness: Mutex::new(crate::stats::new_histogram()),
            store_lateness: Mutex::new(crate::stats::new_histogram()),
            early: AtomicU64::new(0),
        }
    }

    /// Lateness of the scheduled messages received so far.
    pub fn lateness(&self) -> Lateness {
        let h = self.lateness.lock().unwrap_or_else(|p| p.into_inner());
        let s = self
            .store_lateness
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Lateness {
            us: crate::stats::percentiles(&h),
            samples: h.len(),
            store_us: crate::stats::percentiles(&s),
            early: self.early.load(Ordering::Relaxed),
        }
    }

    /// Messages the remoting driver pulled (no listener call, no verify record): counted,
    /// timed from their heads.
    pub fn record_pulled(&self, messages: u64, bytes: u64, latencies_us: &[u64], foreign: u64) {
        self.foreign.fetch_add(foreign, Ordering::Relaxed);
        self.meter.count(messages, bytes);
        self.meter.record_latencies(latencies_us);
        let at = (self.started.elapsed().as_micros() as u64).max(1);
        self.last_us.fetch_max(at, Ordering::Relaxed);
    }

    /// Opens a listener call (its position among calls' begins and ends, for verify).
    pub fn begin_call(&self) -> u64 {
        self.events.fetch_add(1, Ordering::Relaxed)
    }

    /// The failure plan, if the run fails messages on purpose.
    pub fn fail_plan(&self) -> Option<&FailPlan> {
        self.fail.as_ref()
    }

    /// Whether this delivery of `msgs` fails on purpose (counted per message).
    fn fails_now(&self, msgs: &MessageBatch) -> bool {
        let Some(plan) = &self.fail else {
            return false;
        };
        let mut fail = false;
        for m in msgs.iter() {
            if let Some(h) = payload::parse(m.body()) {
                fail |= plan.fails_now(&h);
            }
        }
        fail
    }

    /// A listener call's end: a success is measured (count, latency, lateness); every
    /// delivery is recorded for verify with the call's begin and end. One pass over the
    /// messages (each read in place once).
    pub fn record<M: Delivered>(&self, msgs: &[M], begin: u64, ok: bool, retry: bool) {
        let end = self.events.fetch_add(1, Ordering::Relaxed);
        let now = payload::now_us();
        let verify = self.record.is_some();
        let mut lats = Vec::with_capacity(if ok { msgs.len() } else { 0 });
        let mut late = Vec::new();
        let (mut bytes, mut retried, mut foreign) = (0u64, 0u64, 0u64);
        // Verify mode: (head, from the retry topic, the message) of each perf message.
        let mut seen = Vec::with_capacity(if verify { msgs.len() } else { 0 });
        for m in msgs {
            retried += u64::from(retry);
            let head = payload::parse(m.body());
            if ok {
                bytes += m.body().len() as u64;
                if let Some(due_ms) = m.deliver_at_ms() {
                    let due_us = (due_ms.max(0) as u64).saturating_mul(1000);
                    if m.store_timestamp_ms() < due_ms || now < due_us {
                        self.early.fetch_add(1, Ordering::Relaxed);
                    }
                    let stored = (m.store_timestamp_ms() - due_ms).max(0) as u64 * 1000;
                    late.push((now.saturating_sub(due_us), stored));
                }
                match &head {
                    Some(h) => lats.push(now.saturating_sub(h.send_us)),
                    None => foreign += 1,
                }
            }
            if let (true, Some(h)) = (verify, head) {
                seen.push((h, m));
            }
        }
        self.retried.fetch_add(retried, Ordering::Relaxed);
        if ok {
            self.foreign.fetch_add(foreign, Ordering::Relaxed);
            self.meter.count(msgs.len() as u64, bytes);
            self.meter.record_latencies(&lats);
            self.record_lateness(&late);
        } else {
            self.failed.fetch_add(msgs.len() as u64, Ordering::Relaxed);
        }
        if let (Some(set), true) = (&self.delivered, ok) {
            let mut set = set.lock().unwrap_or_else(|p| p.into_inner());
            set.extend(seen.iter().map(|(h, _)| (h.producer, h.seq)));
        }
        if let Some(rec) = &self.record {
            let mut g = rec.lock().unwrap_or_else(|p| p.into_inner());
            let (names, list) = &mut *g;
            for (h, m) in &seen {
                let queue = if retry {
                    names.intern(&format!("{}/retry", m.broker_name()), m.queue_id())
                } else {
                    names.intern(m.broker_name(), m.queue_id())
                };
                list.push(Delivery {
                    producer: h.producer,
                    seq: h.seq,
                    queue,
                    offset: m.queue_offset(),
                    retry,
                    ok,
                    begin,
                    end,
                });
            }
        }
        let at = (self.started.elapsed().as_micros() as u64).max(1);
        self.last_us.fetch_max(at, Ordering::Relaxed);
    }

    /// Scheduled messages' lateness: (receipt minus due, store minus due), µs.
    fn record_lateness(&self, late: &[(u64, u64)]) {
        if late.is_empty() {
            return;
        }
        let mut h = self.lateness.lock().unwrap_or_else(|p| p.into_inner());
        let mut s = self
            .store_lateness
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for &(l, stored) in late {
            h.saturating_record(l.max(1));
            s.saturating_record(stored.max(1));
        }
    }

    /// Messages delivered successfully: distinct ones in verify mode, else every
    /// successful delivery (duplicates included).
    pub fn delivered(&self) -> u64 {
        match &self.delivered {
            Some(set) => set.lock().unwrap_or_else(|p| p.into_inner()).len() as u64,
            None => self.meter.counts().messages,
        }
    }

    /// Time since the last delivery (since the start when none came).
    pub fn idle(&self) -> Duration {
        let last = Duration::from_micros(self.last_us.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }

    /// From the start to the last delivery (the idle tail is not part of the run).
    pub fn active(&self) -> Duration {
        match self.last_us.load(Ordering::Relaxed) {
            0 => self.started.elapsed(),
            us => Duration::from_micros(us),
        }
    }

    /// When the last delivery arrived.
    pub fn last_at(&self) -> Option<Instant> {
        match self.last_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(self.started + Duration::from_micros(us)),
        }
    }

    /// The delivery records (verify mode), taken out.
    pub fn take_record(&self) -> (QueueNames, Vec<Delivery>) {
        match &self.record {
            Some(rec) => std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner())),
            None => Default::default(),
        }
    }
}

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

/// What [`Deliveries::record`] reads of a delivered message: a push consumer's view, or a
/// popped message.
pub trait Delivered {
    fn body(&self) -> &[u8];
    fn deliver_at_ms(&self) -> Option<i64>;
    fn store_timestamp_ms(&self) -> i64;
    fn broker_name(&self) -> &str;
    fn queue_id(&self) -> u32;
    fn queue_offset(&self) -> u64;
}

impl Delivered for MessageView<'_> {
    fn body(&self) -> &[u8] {
        MessageView::body(self)
    }
    fn deliver_at_ms(&self) -> Option<i64> {
        MessageView::deliver_at_ms(self)
    }
    fn store_timestamp_ms(&self) -> i64 {
        MessageView::store_timestamp_ms(self)
    }
    fn broker_name(&self) -> &str {
        MessageView::broker_name(self)
    }
    fn queue_id(&self) -> u32 {
        MessageView::queue_id(self)
    }
    fn queue_offset(&self) -> u64 {
        MessageView::queue_offset(self)
    }
}

impl Delivered for ReceivedMessage {
    fn body(&self) -> &[u8] {
        &self.body
    }
    fn deliver_at_ms(&self) -> Option<i64> {
        ReceivedMessage::deliver_at_ms(self)
    }
    fn store_timestamp_ms(&self) -> i64 {
        self.store_timestamp_ms
    }
    fn broker_name(&self) -> &str {
        &self.broker_name
    }
    fn queue_id(&self) -> u32 {
        self.queue_id
    }
    fn queue_offset(&self) -> u64 {
        self.queue_offset
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
        if when
            .count
            .is_some_and(|n| sink.meter.counts().messages >= n)
        {
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
