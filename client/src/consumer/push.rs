//! The push consumer: for each assigned queue a task long-polls the broker and hands the
//! messages to the listener: concurrently in batches ([`super::concurrent`], the default)
//! or one call at a time per queue in offset order ([`super::orderly`], `orderly(true)`),
//! at most `consume_concurrency` listener calls at once across all queues. At-least-once: a
//! queue's committed offset never passes a message the listener has not succeeded on, or
//! that was not handed back to the broker (retry or dead-letter topic).
//!
//! A concurrent clustering consumer also consumes its group's retry topic
//! (`%RETRY%<group>`), where the messages it handed back come again after a delay.
//!
//! Timers: heartbeat every `heartbeat_interval`, rebalance every `rebalance_interval`, at
//! once when a broker notifies a membership change, and soon again while the last
//! rebalance left queues untaken ([`Inner::unsettled`]); offsets committed every
//! `commit_interval`, when a queue is released, and at shutdown; orderly clustering
//! consumers renew their queue locks every `lock_renew_interval`; while some broker is read
//! from its slave, the master is probed every `master_probe_interval` (see `replica`).
//!
//! A queue whose master is down is pulled from a slave of the same broker name with the
//! queue's in-memory offsets (nothing is re-read); commits go to the slave meanwhile and to
//! the master again once it is back.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use super::listener::{BatchListener, DynListener, MessageListener, Wrap, WrapBatch};
use super::push_queues::{rebalance, release_all, renew_locks};
pub use super::push_state::PushConfig;
use super::push_state::{commit_queue, Inner, Running};
use super::queue_state::QueueState;
use super::send_back::retry_topic;
use super::{
    default_offset_dir, group_setters, join_group, MessageModel, MessageSelector, StartPosition,
};
use crate::background::{ticker, Background};
use crate::error::{Error, Result};
use crate::instance::{client_setters, ClientConfig};
use crate::route::MessageQueue;
use crate::trace::{TraceConfig, TraceStats, Tracer};

/// While a rebalance leaves queues untaken (locked by another member, an unreadable route
/// or member list), the next one comes this soon, doubling up to `rebalance_interval`.
pub const UNSETTLED_REBALANCE_PAUSE: Duration = Duration::from_millis(200);

/// Builds a [`PushConsumer`].
#[derive(Debug, Clone)]
pub struct PushConsumerBuilder {
    client: ClientConfig,
    cfg: PushConfig,
    /// Message trace: `Some` records each listener call ([`crate::trace`]).
    trace: Option<TraceConfig>,
}

impl PushConsumerBuilder {
    client_setters!();
    group_setters!();

    /// Subscribes to `topic` with a selector: a tag expression (`*`, `TagA || TagB`) or
    /// [`MessageSelector::sql`]. Checked by `start`, before any pull.
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        selector: impl Into<MessageSelector>,
    ) -> Self {
        self.cfg.subscriptions.push((topic.into(), selector.into()));
        self
    }

    pub fn consume_concurrency(mut self, n: usize) -> Self {
        self.cfg.consume_concurrency = n;
        self
    }

    pub fn consume_batch_max(mut self, n: usize) -> Self {
        self.cfg.consume_batch_max = n;
        self
    }

    pub fn pull_batch_max(mut self, n: u32) -> Self {
        self.cfg.pull_batch_max = n;
        self
    }

    /// How long the broker may hold a pull that finds nothing (default 15 s).
    pub fn long_poll(mut self, d: Duration) -> Self {
        self.cfg.long_poll = d;
        self
    }

    pub fn queue_outstanding_max(mut self, n: usize) -> Self {
        self.cfg.queue_outstanding_max = n;
        self
    }

    pub fn redeliver_backoff(mut self, d: Duration) -> Self {
        self.cfg.redeliver_backoff = d;
        self
    }

    pub fn pull_error_backoff(mut self, d: Duration) -> Self {
        self.cfg.pull_error_backoff = d;
        self
    }

    /// Offset commit period (default 5 s).
    pub fn commit_interval(mut self, d: Duration) -> Self {
        self.cfg.commit_interval = d;
        self
    }

    pub fn release_wait(mut self, d: Duration) -> Self {
        self.cfg.release_wait = d;
        self
    }

    /// Retries before the dead-letter topic (RocketMQ `maxReconsumeTimes`): a message is
    /// delivered at most `1 + n` times. 0 (the default) leaves it to the group's limit on
    /// the broker (`retryMaxTimes`, 16 by default); an orderly consumer, which counts
    /// retries itself, then uses 16.
    pub fn max_reconsume_times(mut self, n: u32) -> Self {
        self.cfg.max_reconsume_times = n;
        self
    }

    /// Orderly consumption (default false): each queue's messages go to the listener one
    /// call at a time in queue-offset order, and in clustering mode only while this member
    /// holds the queue's broker lock. A failed call suspends the queue
    /// (`suspend_current_queue`) and hands the same messages over again.
    pub fn orderly(mut self, orderly: bool) -> Self {
        self.cfg.orderly = orderly;
        self
    }

    /// How long an orderly queue pauses after a failed call (default 1 s, RocketMQ's
    /// `suspendCurrentQueueTimeMillis`).
    pub fn suspend_current_queue(mut self, d: Duration) -> Self {
        self.cfg.suspend_current_queue = d;
        self
    }

    /// How often an orderly clustering consumer renews its queue locks (default 20 s). The
    /// client trusts a lock for 1.5 times this after the broker granted it, so keep it well
    /// below the broker's `rebalanceLockMaxLiveTime` (60 s by default).
    pub fn lock_renew_interval(mut self, d: Duration) -> Self {
        self.cfg.lock_renew_interval = d;
        self
    }

    /// Message trace (off by default): record each message's listener calls (group, time,
    /// cost, success, reconsume times) to the trace topic `RMQ_SYS_TRACE_TOPIC`, in
    /// RocketMQ's format, through a bounded background queue. See [`crate::trace`].
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on.then(|| self.trace.take().unwrap_or_default());
        self
    }

    /// Message trace to another topic or with another queue size (turns tracing on).
    pub fn trace_config(mut self, cfg: TraceConfig) -> Self {
        self.trace = Some(cfg);
        self
    }

    /// Starts consuming: heartbeats, takes its queues and calls `listener` with batches.
    pub async fn start<L: MessageListener>(self, listener: L) -> Result<PushConsumer> {
        self.start_dyn(Arc::new(Wrap(listener))).await
    }

    /// [`PushConsumerBuilder::start`] with a listener of [`MessageBatch`](crate::MessageBatch)es
    /// read in place: the same calls, retries and ordering, without an owned copy of each
    /// message (for listeners that read a few fields of many messages).
    pub async fn start_batch<L: BatchListener>(self, listener: L) -> Result<PushConsumer> {
        self.start_dyn(Arc::new(WrapBatch(listener))).await
    }

    async fn start_dyn(self, listener: Arc<dyn DynListener>) -> Result<PushConsumer> {
        let cfg = self.cfg;
        if cfg.group.is_empty() {
            return Err(Error::Config("a consumer group is required".into()));
        }
        if cfg.subscriptions.is_empty() {
            return Err(Error::Config("subscribe to at least one topic".into()));
        }
        for (_, s) in &cfg.subscriptions {
            s.check()?;
        }
        if cfg.consume_concurrency == 0 || cfg.consume_batch_max == 0 || cfg.pull_batch_max == 0 {
            return Err(Error::Config(
                "consume_concurrency, consume_batch_max and pull_batch_max must be above zero"
                    .into(),
            ));
        }
        let trace = match &self.trace {
            Some(t) => Some(Tracer::start(self.client.clone(), &cfg.group, t).await?),
            None => None,
        };
        let (group, offsets) = join_group(
            self.client,
            &cfg.group,
            cfg.model,
            cfg.start,
            &cfg.offset_dir,
            true,
        )
        .await?;
        for (t, s) in &cfg.subscriptions {
            group.subscribe(t, s);
        }
        if cfg.model == MessageModel::Clustering && !cfg.orderly {
            group.subscribe(&retry_topic(&cfg.group), &MessageSelector::all());
        }
        // Heartbeat first, so the first rebalance's member list names this member. A
        // subscription a broker refuses (SQL92 it cannot parse or does not filter by) fails
        // the start, before any pull.
        if let Err(e) = group.heartbeat_checked().await {
            group.unregister().await;
            return Err(e);
        }
        let inner = Arc::new(Inner {
            group,
            permits: Arc::new(Semaphore::new(cfg.consume_concurrency)),
            cfg,
            listener,
            offsets,
            queues: Mutex::new(BTreeMap::new()),
            shut: AtomicBool::new(false),
            aborted: watch::channel(false).0,
            trace,
            unsettled: AtomicBool::new(false),
            rebalancing: tokio::sync::Mutex::new(()),
            background: Background::default(),
        });
        rebalance(&inner).await;
        let weak = Arc::downgrade(&inner);
        inner
            .background
            .push(tokio::spawn(heartbeat_timer(weak.clone())));
        inner
            .background
            .push(tokio::spawn(rebalance_timer(weak.clone())));
        if inner.uses_locks() {
            inner
                .background
                .push(tokio::spawn(lock_renew_timer(weak.clone())));
        }
        inner.background.push(tokio::spawn(commit_timer(weak)));
        Ok(PushConsumer { inner })
    }
}

/// A running push consumer. Call [`PushConsumer::shutdown`] to stop it cleanly (offsets
/// committed, group left); dropping it stops it without those steps.
#[derive(Clone)]
pub struct PushConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer")
            .field("group", &self.inner.cfg.group)
            .field("client_id", &self.inner.inst().id)
            .finish()
    }
}

impl PushConsumer {
    pub fn builder() -> PushConsumerBuilder {
        PushConsumerBuilder {
            client: ClientConfig::default(),
            cfg: PushConfig {
                group: String::new(),
                model: MessageModel::Clustering,
                start: StartPosition::Last,
                subscriptions: Vec::new(),
                consume_concurrency: 16,
                consume_batch_max: 32,
                pull_batch_max: 32,
                pull_bytes_max: 4 << 20,
                long_poll: Duration::from_secs(15),
                queue_outstanding_max: 1000,
                redeliver_backoff: Duration::from_secs(1),
                pull_error_backoff: Duration::from_secs(1),
                heartbeat_interval: Duration::from_secs(30),
                rebalance_interval: Duration::from_secs(20),
                commit_interval: Duration::from_secs(5),
                master_probe_interval: Duration::from_secs(5),
                release_wait: Duration::from_secs(5),
                max_reconsume_times: 0,
                orderly: false,
                suspend_current_queue: Duration::from_secs(1),
                lock_renew_interval: Duration::from_secs(20),
                offset_dir: default_offset_dir(),
            },
            trace: None,
        }
    }

    pub fn client_id(&self) -> &str {
        &self.inner.inst().id
    }

    /// The queues this member consumes now (a concurrent clustering member's include its
    /// share of the group's retry topic, `%RETRY%<group>`).
    pub fn assignment(&self) -> Vec<MessageQueue> {
        self.inner.queues().keys().cloned().collect()
    }

    /// Rebalances now instead of at the next timer tick.
    pub async fn rebalance(&self) {
        rebalance(&self.inner).await;
    }

    /// Stops pulling, waits (up to `release_wait`) for running listener calls, commits
    /// every queue's offset, releases the queue locks (orderly), leaves the group and
    /// closes the connections.
    pub async fn shutdown(&self) {
        if self.inner.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.background.abort_all();
        let _g = self.inner.rebalancing.lock().await;
        let all: Vec<MessageQueue> = self.inner.queues().keys().cloned().collect();
        release_all(&self.inner, all, true).await;
        if let Err(e) = self.inner.offsets.flush().await {
            log::warn!("writing offsets at shutdown: {e}");
        }
        self.inner.group.unregister().await;
        self.inner.inst().pool.shutdown();
        if let Some(t) = &self.inner.trace {
            t.shutdown().await;
        }
    }

    /// The tracer's counters, when tracing is on ([`PushConsumerBuilder::trace`]).
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.inner.trace.as_ref().map(|t| t.stats())
    }

    /// Stops at once, as a crashed process would: running listener calls are dropped (at
    /// their next await point), nothing is committed, no lock is released, the group is
    /// not left; the connections are closed (the brokers then drop this member and its
    /// locks). For tests and failure drills.
    pub fn abort(&self) {
        if self.inner.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.aborted.send_replace(true);
        self.inner.background.abort_all();
        let running: Vec<Running> = std::mem::take(&mut *self.inner.queues())
            .into_values()
            .collect();
        for r in running {
            r.state.drop_queue();
            for t in &r.tasks {
                t.abort();
            }
        }
        self.inner.inst().pool.shutdown();
    }
}

async fn heartbeat_timer(weak: Weak<Inner>) {
    let Some((hb, refresh, probe)) = weak.upgrade().map(|i| {
        (
            i.cfg.heartbeat_interval,
            i.inst().cfg.route_refresh_interval,
            i.cfg.master_probe_interval,
        )
    }) else {
        return;
    };
    let Some(mut reconnects) = weak.upgrade().map(|i| i.inst().pool.reconnects()) else {
        return;
    };
    let floor = Duration::from_millis(10);
    let mut hb_tick = ticker(hb.max(floor)).await;
    let mut route_tick = ticker(refresh).await;
    let mut probe_tick = ticker(probe.max(floor)).await;
    loop {
        tokio::select! {
            _ = hb_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.group.heartbeat().await;
            }
            // A broker came back (it may know no member of the group): heartbeat now.
            Ok(()) = reconnects.changed() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.group.heartbeat().await;
            }
            _ = route_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.inst().refresh_all_routes().await;
            }
            _ = probe_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.group.reads.probe(inner.inst()).await;
            }
        }
    }
}

async fn rebalance_timer(weak: Weak<Inner>) {
    let Some((every, changed)) = weak
        .upgrade()
        .map(|i| (i.cfg.rebalance_interval, i.group.changed()))
    else {
        return;
    };
    let every = every.max(Duration::from_millis(10));
    let mut unsettled_pause = UNSETTLED_REBALANCE_PAUSE;
    loop {
        let wait = match weak.upgrade() {
            Some(i) if i.is_unsettled() => {
                let w = unsettled_pause.min(every);
                unsettled_pause = unsettled_pause.saturating_mul(2);
                w
            }
            Some(_) => {
                unsettled_pause = UNSETTLED_REBALANCE_PAUSE;
                every
            }
            None => return,
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = changed.notified() => {
                unsettled_pause = UNSETTLED_REBALANCE_PAUSE;
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        rebalance(&inner).await;
    }
}

async fn lock_renew_timer(weak: Weak<Inner>) {
    let Some(every) = weak.upgrade().map(|i| i.cfg.lock_renew_interval) else {
        return;
    };
    let mut tick = ticker(every.max(Duration::from_millis(10))).await;
    loop {
        tick.tick().await;
        let Some(inner) = weak.upgrade() else { return };
        renew_locks(&inner).await;
    }
}

async fn commit_timer(weak: Weak<Inner>) {
    let Some(every) = weak.upgrade().map(|i| i.cfg.commit_interval) else {
        return;
    };
    let mut tick = ticker(every.max(Duration::from_millis(10))).await;
    loop {
        tick.tick().await;
        let Some(inner) = weak.upgrade() else { return };
        let states: Vec<Arc<QueueState>> = inner
            .queues()
            .values()
            .map(|r| Arc::clone(&r.state))
            .collect();
        for s in states {
            commit_queue(&inner, &s).await;
        }
        if let Err(e) = inner.offsets.flush().await {
            log::warn!("writing offsets: {e}");
        }
    }
}
