//! The push consumer: for each assigned queue a task long-polls the broker and hands the
//! messages to the listener in batches (at most `consume_concurrency` listener calls at
//! once across all queues). At-least-once: a queue's committed offset never passes a
//! message whose listener has not returned [`ConsumeResult::Success`]; a batch that failed
//! (returned [`ConsumeResult::Retry`], or panicked) is handed over again after
//! `redeliver_backoff`, until it succeeds or the queue is released (then the next owner
//! gets it from the committed offset).
//!
//! Timers: heartbeat every `heartbeat_interval`, rebalance every `rebalance_interval` (and
//! when a broker notifies a membership change), offsets committed every `commit_interval`,
//! when a queue is released, and at shutdown; while some broker is read from its slave, the
//! master is probed every `master_probe_interval` (see `replica`).
//!
//! A queue whose master is down is pulled from a slave of the same broker name with the
//! queue's in-memory offsets (nothing is re-read); commits go to the slave meanwhile and to
//! the master again once it is back.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::group::Group;
use super::offsets::OffsetStore;
use super::queue_state::QueueState;
use super::{
    check_expression, default_offset_dir, group_setters, join_group, pull_via, start_offset,
    ConsumeResult, MessageModel, PullStatus, StartPosition,
};
use crate::background::{ticker, Background};
use crate::error::{Error, Result};
use crate::instance::{client_setters, ClientConfig, Instance};
use crate::message::ReceivedMessage;
use crate::route::MessageQueue;

/// What a listener is told besides the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeContext {
    pub queue: MessageQueue,
    /// 0 on first delivery, then 1, 2, ... for redeliveries of the same batch.
    pub attempt: u32,
}

/// Consumes batches of messages. Implemented for async closures
/// `Fn(Vec<ReceivedMessage>, ConsumeContext) -> impl Future<Output = ConsumeResult>`.
/// A listener that blocks should move its work to `tokio::task::spawn_blocking`.
pub trait MessageListener: Send + Sync + 'static {
    fn consume(
        &self,
        messages: Vec<ReceivedMessage>,
        ctx: ConsumeContext,
    ) -> impl Future<Output = ConsumeResult> + Send;
}

impl<F, Fut> MessageListener for F
where
    F: Fn(Vec<ReceivedMessage>, ConsumeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeResult> + Send,
{
    fn consume(
        &self,
        messages: Vec<ReceivedMessage>,
        ctx: ConsumeContext,
    ) -> impl Future<Output = ConsumeResult> + Send {
        self(messages, ctx)
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ConsumeResult> + Send + 'static>>;

trait DynListener: Send + Sync {
    fn call(self: Arc<Self>, messages: Vec<ReceivedMessage>, ctx: ConsumeContext) -> BoxFuture;
}

struct Wrap<L>(L);

impl<L: MessageListener> DynListener for Wrap<L> {
    fn call(self: Arc<Self>, messages: Vec<ReceivedMessage>, ctx: ConsumeContext) -> BoxFuture {
        Box::pin(async move { self.0.consume(messages, ctx).await })
    }
}

/// Settings of a push consumer.
#[derive(Debug, Clone)]
pub struct PushConfig {
    pub group: String,
    pub model: MessageModel,
    pub start: StartPosition,
    pub subscriptions: Vec<(String, String)>,
    /// Listener calls running at once across all queues (default 16).
    pub consume_concurrency: usize,
    /// Most messages per listener call (default 32).
    pub consume_batch_max: usize,
    /// Most messages per pull (default 32).
    pub pull_batch_max: u32,
    /// Most bytes per pull (default 4 MiB).
    pub pull_bytes_max: u32,
    /// How long the broker may hold a pull with nothing to return (default 15 s).
    pub long_poll: Duration,
    /// A queue stops pulling while this many of its messages are unacknowledged (default 1000).
    pub queue_outstanding_max: usize,
    /// Pause before a failed batch is handed over again (default 1 s).
    pub redeliver_backoff: Duration,
    /// Pause after a failed pull (default 1 s).
    pub pull_error_backoff: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_interval: Duration,
    pub commit_interval: Duration,
    /// While a broker is read from its slave, how often its master is tried again
    /// (default 5 s).
    pub master_probe_interval: Duration,
    /// How long releasing a queue waits for its running listener calls (default 5 s).
    pub release_wait: Duration,
    /// Folder of broadcasting offset files.
    pub offset_dir: PathBuf,
}

/// Builds a [`PushConsumer`].
#[derive(Debug, Clone)]
pub struct PushConsumerBuilder {
    client: ClientConfig,
    cfg: PushConfig,
}

impl PushConsumerBuilder {
    client_setters!();
    group_setters!();

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
    pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.cfg
            .subscriptions
            .push((topic.into(), expression.into()));
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

    /// Starts consuming: heartbeats, takes its queues and calls `listener` with batches.
    pub async fn start<L: MessageListener>(self, listener: L) -> Result<PushConsumer> {
        let cfg = self.cfg;
        if cfg.group.is_empty() {
            return Err(Error::Config("a consumer group is required".into()));
        }
        if cfg.subscriptions.is_empty() {
            return Err(Error::Config("subscribe to at least one topic".into()));
        }
        for (_, e) in &cfg.subscriptions {
            check_expression(e)?;
        }
        if cfg.consume_concurrency == 0 || cfg.consume_batch_max == 0 || cfg.pull_batch_max == 0 {
            return Err(Error::Config(
                "consume_concurrency, consume_batch_max and pull_batch_max must be above zero"
                    .into(),
            ));
        }
        let (group, offsets) = join_group(
            self.client,
            &cfg.group,
            cfg.model,
            cfg.start,
            &cfg.offset_dir,
            true,
        )
        .await?;
        for (t, e) in &cfg.subscriptions {
            group.subscribe(t, e);
        }
        let inner = Arc::new(Inner {
            group,
            permits: Arc::new(Semaphore::new(cfg.consume_concurrency)),
            cfg,
            listener: Arc::new(Wrap(listener)),
            offsets,
            queues: Mutex::new(BTreeMap::new()),
            shut: AtomicBool::new(false),
            rebalancing: tokio::sync::Mutex::new(()),
            background: Background::default(),
        });
        inner.group.heartbeat().await;
        rebalance(&inner).await;
        let weak = Arc::downgrade(&inner);
        inner
            .background
            .push(tokio::spawn(heartbeat_timer(weak.clone())));
        inner
            .background
            .push(tokio::spawn(rebalance_timer(weak.clone())));
        inner.background.push(tokio::spawn(commit_timer(weak)));
        Ok(PushConsumer { inner })
    }
}

struct Running {
    state: Arc<QueueState>,
    task: JoinHandle<()>,
}

struct Inner {
    group: Group,
    cfg: PushConfig,
    listener: Arc<dyn DynListener>,
    offsets: OffsetStore,
    queues: Mutex<BTreeMap<MessageQueue, Running>>,
    permits: Arc<Semaphore>,
    shut: AtomicBool,
    rebalancing: tokio::sync::Mutex<()>,
    background: Background,
}

impl Inner {
    fn inst(&self) -> &Instance {
        &self.group.inst
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, BTreeMap<MessageQueue, Running>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_shut(&self) -> bool {
        self.shut.load(Ordering::Acquire)
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
                offset_dir: default_offset_dir(),
            },
        }
    }

    pub fn client_id(&self) -> &str {
        &self.inner.inst().id
    }

    /// The queues this member consumes now.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        self.inner.queues().keys().cloned().collect()
    }

    /// Rebalances now instead of at the next timer tick.
    pub async fn rebalance(&self) {
        rebalance(&self.inner).await;
    }

    /// Stops pulling, waits (up to `release_wait`) for running listener calls, commits
    /// every queue's offset, leaves the group and closes the connections.
    pub async fn shutdown(&self) {
        if self.inner.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.background.abort_all();
        let _g = self.inner.rebalancing.lock().await;
        let all: Vec<MessageQueue> = self.inner.queues().keys().cloned().collect();
        release_all(&self.inner, all).await;
        if let Err(e) = self.inner.offsets.flush().await {
            log::warn!("writing offsets at shutdown: {e}");
        }
        self.inner.group.unregister().await;
        self.inner.inst().pool.close_all();
    }
}

async fn rebalance(inner: &Arc<Inner>) {
    let _g = inner.rebalancing.lock().await;
    if inner.is_shut() {
        return;
    }
    let current: BTreeSet<MessageQueue> = inner.queues().keys().cloned().collect();
    let target = inner.group.target_assignment(&current).await;
    let removed: Vec<MessageQueue> = current.difference(&target).cloned().collect();
    let added: Vec<MessageQueue> = target.difference(&current).cloned().collect();
    if !removed.is_empty() || !added.is_empty() {
        log::info!(
            "{} rebalanced {}: +{} -{} queues",
            inner.inst().id,
            inner.cfg.group,
            added.len(),
            removed.len()
        );
    }
    release_all(inner, removed).await;
    for mq in added {
        if let Err(e) = start_queue(inner, mq.clone()).await {
            log::warn!("starting {mq}: {e}; retrying at the next rebalance");
        }
    }
}

async fn start_queue(inner: &Arc<Inner>, mq: MessageQueue) -> Result<()> {
    let offset = match inner.offsets.read(&mq).await? {
        Some(o) => o,
        None => start_offset(inner.inst(), &inner.group.reads, &mq, inner.cfg.start).await?,
    };
    log::debug!("{}: consuming {mq} from {offset}", inner.inst().id);
    let state = Arc::new(QueueState::new(mq.clone(), offset));
    let task = tokio::spawn(pull_loop(Arc::downgrade(inner), Arc::clone(&state)));
    inner.queues().insert(mq, Running { state, task });
    Ok(())
}

/// Releases queues: stops their pulls, waits for their listener calls, commits their
/// offsets.
async fn release_all(inner: &Arc<Inner>, mqs: Vec<MessageQueue>) {
    let running: Vec<Running> = {
        let mut q = inner.queues();
        mqs.iter().filter_map(|mq| q.remove(mq)).collect()
    };
    for r in &running {
        r.state.drop_queue();
    }
    for r in running {
        if !r.state.idle_within(inner.cfg.release_wait).await {
            log::warn!(
                "{}: listener calls still running after {:?}",
                r.state.mq,
                inner.cfg.release_wait
            );
        }
        r.task.abort();
        commit_queue(inner, &r.state).await;
    }
}

async fn commit_queue(inner: &Inner, state: &QueueState) {
    let switches = inner.group.reads.switches();
    let Some(offset) = state.commit_due(switches) else {
        return;
    };
    match inner.offsets.write(&state.mq, offset).await {
        Ok(()) => state.mark_committed(offset, switches),
        Err(e) => log::warn!("committing {} at {offset}: {e}", state.mq),
    }
}

async fn pull_loop(weak: Weak<Inner>, state: Arc<QueueState>) {
    let mut next = state.committable();
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if state.is_dropped() || inner.is_shut() {
            return;
        }
        if state.outstanding() >= inner.cfg.queue_outstanding_max {
            drop(inner);
            let notified = state.changed.notified();
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
            continue;
        }
        let expression = inner.group.expression(&state.mq.topic);
        let commit = match inner.cfg.model {
            MessageModel::Clustering => Some(state.committable()),
            MessageModel::Broadcasting => None,
        };
        let pull = pull_via(
            inner.inst(),
            &inner.group.reads,
            &inner.group.name,
            &state.mq,
            next,
            inner.cfg.pull_batch_max,
            inner.cfg.pull_bytes_max,
            &expression,
            inner.cfg.long_poll,
            commit,
        );
        let result = tokio::select! {
            r = pull => r,
            _ = state.until_dropped() => return,
        };
        match result {
            Ok(p) if p.slave_behind => {
                // The slave has not replicated up to `next` yet: wait for it (or the master).
                let pause = inner.cfg.pull_error_backoff;
                drop(inner);
                if state.sleep_or_dropped(pause).await {
                    return;
                }
            }
            Ok(p) => {
                let r = p.result;
                match r.status {
                    PullStatus::Found => {
                        next = r.next_offset;
                        state.received(r.messages.iter().map(|m| m.queue_offset), next);
                        dispatch(&inner, &state, r.messages);
                    }
                    PullStatus::NoNewMessage | PullStatus::NoMatchedMessage => {
                        next = r.next_offset;
                        state.received([], next);
                    }
                    PullStatus::OffsetIllegal => {
                        log::warn!(
                            "{}: offset {next} is outside {}..{}; continuing at {}",
                            state.mq,
                            r.min_offset,
                            r.max_offset,
                            r.next_offset
                        );
                        next = r.next_offset;
                        state.moved_to(next);
                        commit_queue(&inner, &state).await;
                    }
                }
            }
            Err(e) => {
                log::debug!("pulling {}: {e}", state.mq);
                let pause = inner.cfg.pull_error_backoff;
                drop(inner);
                if state.sleep_or_dropped(pause).await {
                    return;
                }
            }
        }
    }
}

fn dispatch(inner: &Arc<Inner>, state: &Arc<QueueState>, messages: Vec<ReceivedMessage>) {
    let mut rest = messages;
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(inner.cfg.consume_batch_max));
        let batch = std::mem::replace(&mut rest, tail);
        tokio::spawn(consume_batch(
            Arc::downgrade(inner),
            Arc::clone(state),
            batch,
        ));
    }
}

async fn consume_batch(weak: Weak<Inner>, state: Arc<QueueState>, mut batch: Vec<ReceivedMessage>) {
    let offsets: Vec<u64> = batch.iter().map(|m| m.queue_offset).collect();
    let mut attempt = 0u32;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if state.is_dropped() {
            return;
        }
        let Ok(permit) = Arc::clone(&inner.permits).acquire_owned().await else {
            return;
        };
        if state.is_dropped() {
            return;
        }
        state.begin();
        let ctx = ConsumeContext {
            queue: state.mq.clone(),
            attempt,
        };
        let call = Arc::clone(&inner.listener).call(batch.clone(), ctx);
        let outcome = tokio::spawn(call).await;
        drop(permit);
        let ok = matches!(outcome, Ok(ConsumeResult::Success));
        if ok {
            state.acked(offsets);
            state.end();
            return;
        }
        state.end();
        match outcome {
            Err(e) => log::warn!("listener panicked on {}: {e}; redelivering", state.mq),
            Ok(_) => log::debug!("listener asked to retry a batch of {}", state.mq),
        }
        attempt = attempt.saturating_add(1);
        for m in &mut batch {
            m.reconsume_times = m.reconsume_times.saturating_add(1);
        }
        let pause = inner.cfg.redeliver_backoff;
        drop(inner);
        if state.sleep_or_dropped(pause).await {
            return;
        }
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
    let Some((every, notify)) = weak
        .upgrade()
        .map(|i| (i.cfg.rebalance_interval, i.inst().pool.peer_requests()))
    else {
        return;
    };
    let mut tick = ticker(every.max(Duration::from_millis(10))).await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = notify.notified() => {}
        }
        let Some(inner) = weak.upgrade() else { return };
        rebalance(&inner).await;
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
