//! The receiving half: `consumers` push consumers of one group (queues balanced across
//! them, each queue long-polled, `pull_batch` messages per pull). The listener reads each
//! message's perf head: delivery latency (receipt minus the send time in the head), and in
//! verify mode a [`Delivery`] record for the check.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{ConsumeContext, ConsumeResult, PushConsumer, ReceivedMessage, StartPosition};

use crate::payload;
use crate::stats::{Meter, Percentiles};
use crate::verify::{Delivery, QueueNames};

/// How long perf waits for a group's queues to be spread over its consumers.
const BALANCE_WAIT: Duration = Duration::from_secs(15);

/// How to consume.
#[derive(Debug, Clone)]
pub struct RecvPlan {
    pub namesrv: String,
    pub topic: String,
    pub group: String,
    pub consumers: u32,
    pub from: StartPosition,
    pub pull_batch: u32,
    /// Keep a delivery record per message for the verify check.
    pub verify: bool,
    /// Instance names are `perf-<run id>-c<i>`.
    pub run_id: u64,
}

/// What the listener sees, shared by every consumer of the run.
#[derive(Debug)]
pub struct Deliveries {
    pub meter: Arc<Meter>,
    /// Messages without a perf head (someone else's).
    pub foreign: AtomicU64,
    started: Instant,
    /// µs after `started` of the last delivery (0: none yet).
    last_us: AtomicU64,
    record: Option<Mutex<(QueueNames, Vec<Delivery>)>>,
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
    pub fn new(meter: Arc<Meter>, verify: bool) -> Deliveries {
        Deliveries {
            meter,
            foreign: AtomicU64::new(0),
            started: Instant::now(),
            last_us: AtomicU64::new(0),
            record: verify.then(|| Mutex::new((QueueNames::default(), Vec::new()))),
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

    fn on_batch(&self, msgs: &[ReceivedMessage]) {
        let now = payload::now_us();
        let mut lats = Vec::with_capacity(msgs.len());
        let mut bytes = 0u64;
        let mut mine = Vec::new();
        let mut late = Vec::new();
        for m in msgs {
            bytes += m.body.len() as u64;
            if let Some(due_ms) = m.deliver_at_ms() {
                let due_us = (due_ms.max(0) as u64).saturating_mul(1000);
                if m.store_timestamp_ms < due_ms || now < due_us {
                    self.early.fetch_add(1, Ordering::Relaxed);
                }
                let stored = (m.store_timestamp_ms - due_ms).max(0) as u64 * 1000;
                late.push((now.saturating_sub(due_us), stored));
            }
            match payload::parse(&m.body) {
                Some(h) => {
                    lats.push(now.saturating_sub(h.send_us));
                    if self.record.is_some() {
                        mine.push((h, m.broker_name.as_str(), m.queue_id, m.queue_offset));
                    }
                }
                None => {
                    self.foreign.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.meter.count(msgs.len() as u64, bytes);
        self.meter.record_latencies(&lats);
        if !late.is_empty() {
            let mut h = self.lateness.lock().unwrap_or_else(|p| p.into_inner());
            let mut s = self
                .store_lateness
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for (l, stored) in late {
                h.saturating_record(l.max(1));
                s.saturating_record(stored.max(1));
            }
        }
        if let Some(rec) = &self.record {
            let mut g = rec.lock().unwrap_or_else(|p| p.into_inner());
            let (names, list) = &mut *g;
            for (h, broker, queue, offset) in mine {
                let queue = names.intern(broker, queue);
                list.push(Delivery {
                    producer: h.producer,
                    seq: h.seq,
                    queue,
                    offset,
                });
            }
        }
        let at = (self.started.elapsed().as_micros() as u64).max(1);
        self.last_us.fetch_max(at, Ordering::Relaxed);
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

/// Started consumers.
#[derive(Debug)]
pub struct Consumers {
    list: Vec<PushConsumer>,
}

impl Consumers {
    /// Starts the group's consumers, then waits until its queues are spread over them
    /// (each queue owned by exactly one member), so no queue changes hands mid-run.
    pub async fn start(plan: &RecvPlan, sink: Arc<Deliveries>) -> Result<Consumers, String> {
        let mut list = Vec::new();
        for i in 0..plan.consumers {
            let sink = Arc::clone(&sink);
            let c = PushConsumer::builder()
                .group(&plan.group)
                .name_servers(&plan.namesrv)
                .instance_name(format!("perf-{:012x}-c{i}", plan.run_id))
                .subscribe(&plan.topic, "*")
                .start_position(plan.from)
                .pull_batch_max(plan.pull_batch)
                .consume_batch_max(plan.pull_batch as usize)
                .queue_outstanding_max((plan.pull_batch as usize * 4).max(1000))
                .rebalance_interval(Duration::from_secs(2))
                .heartbeat_interval(Duration::from_secs(5))
                .long_poll(Duration::from_secs(5))
                .start(move |msgs: Vec<ReceivedMessage>, _ctx: ConsumeContext| {
                    let sink = Arc::clone(&sink);
                    async move {
                        sink.on_batch(&msgs);
                        ConsumeResult::Success
                    }
                })
                .await
                .map_err(|e| format!("starting consumer {i} of group {}: {e}", plan.group))?;
            list.push(c);
        }
        let cs = Consumers { list };
        cs.balance().await;
        Ok(cs)
    }

    async fn balance(&self) {
        if self.list.len() < 2 {
            return;
        }
        let deadline = Instant::now() + BALANCE_WAIT;
        loop {
            for c in &self.list {
                c.rebalance().await;
            }
            let mut all: Vec<_> = self.list.iter().flat_map(|c| c.assignment()).collect();
            let n = all.len();
            all.sort();
            all.dedup();
            let spread = self
                .list
                .iter()
                .filter(|c| !c.assignment().is_empty())
                .count();
            if n == all.len() && spread == self.list.len().min(n) {
                return;
            }
            if Instant::now() >= deadline {
                eprintln!("ringmq-perf: the group's queues did not settle within {BALANCE_WAIT:?}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Queues assigned across the group.
    pub fn queues(&self) -> usize {
        self.list.iter().map(|c| c.assignment().len()).sum()
    }

    /// Commits offsets and leaves the group.
    pub async fn shutdown(&self) {
        for c in &self.list {
            c.shutdown().await;
        }
    }
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
