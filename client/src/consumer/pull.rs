//! The pull consumer: the caller decides when to pull. Two ways to use it:
//!
//! - Direct: [`PullConsumer::pull`] / [`PullConsumer::pull_blocking`] any queue from any
//!   offset, and [`PullConsumer::commit`] offsets yourself.
//! - Managed: [`PullConsumer::assign`] queues, or [`PullConsumer::subscribe`] to topics and
//!   let the group balance queues across its members (clustering) or give every queue to
//!   every member (broadcasting); then [`PullConsumer::poll`] returns messages from the
//!   assigned queues, tracking a position per queue, and [`PullConsumer::commit_positions`]
//!   commits those positions (or `auto_commit` does it periodically and at shutdown).
//!   [`PullConsumer::commit_on_next_pull`] commits an offset of your choice without a
//!   request of its own: the queue's next pull carries it.
//!   A position starts at the group's committed offset, or at the start position.
//!
//! A message the application could not process can be handed back to its broker
//! ([`PullConsumer::send_back`]): it comes again from the group's retry topic
//! (`%RETRY%<group>`, which a pull consumer reads only if it subscribes to or assigns it)
//! after a delay, or goes to the group's dead-letter topic.
//!
//! Either way, a queue whose master is down is read from a slave of the same broker name
//! (positions are kept; offsets are committed to the slave meanwhile), and from the master
//! again once it is back (see `replica`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::group::Group;
use super::offsets::OffsetStore;
use super::pull_ahead::Ahead;
use super::replica::ReadPath;
use super::send_back::{send_back, SendBack};
use super::{
    default_offset_dir, group_setters, join_group, pull_via, queue_offset_via, search_offset_via,
    start_offset, MessageModel, MessageSelector, PullResult, PullStatus, Pulled, StartPosition,
};
use crate::background::{ticker, Background};
use crate::batch::{MessageBatch, RawMessage};
use crate::error::{Error, Result};
use crate::instance::{client_setters, ClientConfig, Instance};
use crate::message::ReceivedMessage;
use crate::route::MessageQueue;

/// Pause between rounds of `poll` when no assigned queue had a message.
pub const POLL_IDLE_PAUSE: Duration = Duration::from_millis(20);

/// Settings of a pull consumer.
#[derive(Debug, Clone)]
pub struct PullConfig {
    pub group: String,
    pub model: MessageModel,
    pub start: StartPosition,
    /// Most messages one `poll` returns (default 32).
    pub poll_batch_max: u32,
    pub pull_bytes_max: u32,
    /// Commit positions this often, and at shutdown (default: never, commit yourself).
    pub auto_commit: Option<Duration>,
    /// Pull each assigned queue ahead of the polls (default false).
    pub pull_ahead: bool,
    /// With `pull_ahead`: most answers a queue holds ahead of the polls, the pull in
    /// flight counted (default 2).
    pub pull_ahead_depth: u32,
    pub heartbeat_interval: Duration,
    pub rebalance_interval: Duration,
    /// While a broker is read from its slave, how often its master is tried again
    /// (default 5 s).
    pub master_probe_interval: Duration,
    pub offset_dir: PathBuf,
}

/// Builds a [`PullConsumer`].
#[derive(Debug, Clone)]
pub struct PullConsumerBuilder {
    client: ClientConfig,
    cfg: PullConfig,
}

impl PullConsumerBuilder {
    client_setters!();
    group_setters!();

    pub fn poll_batch_max(mut self, n: u32) -> Self {
        self.cfg.poll_batch_max = n;
        self
    }

    /// Commit positions every `every` and at shutdown.
    pub fn auto_commit(mut self, every: Duration) -> Self {
        self.cfg.auto_commit = Some(every);
        self
    }

    /// Pull each assigned queue ahead of the polls (default off): a queue's next pull
    /// starts from where its last answer ended as soon as that answer arrives, until the
    /// queue holds [`pull_ahead_depth`](Self::pull_ahead_depth) answers, so pulls travel
    /// while the application works on earlier messages, and a member of several queues has
    /// a pull in flight per queue (RocketMQ's lite pull consumer also pulls ahead of
    /// `poll`). Each answer (at most `poll_batch_max` messages) waits for a `poll`. A
    /// commit made with [`PullConsumer::commit_on_next_pull`] rides on the next pull that
    /// starts, after those already in flight or answered.
    pub fn pull_ahead(mut self, on: bool) -> Self {
        self.cfg.pull_ahead = on;
        self
    }

    /// With [`pull_ahead`](Self::pull_ahead): the most answers a queue holds ahead of the
    /// polls, the pull in flight counted (default 2; at least 1). With 1 a queue's next pull
    /// starts only when a poll takes its answer.
    pub fn pull_ahead_depth(mut self, answers: u32) -> Self {
        self.cfg.pull_ahead_depth = answers;
        self
    }

    pub async fn start(self) -> Result<PullConsumer> {
        let cfg = self.cfg;
        if cfg.group.is_empty() {
            return Err(Error::Config("a consumer group is required".into()));
        }
        if cfg.poll_batch_max == 0 {
            return Err(Error::Config("poll_batch_max must be above zero".into()));
        }
        if cfg.pull_ahead_depth == 0 {
            return Err(Error::Config("pull_ahead_depth must be above zero".into()));
        }
        let (group, offsets) = join_group(
            self.client,
            &cfg.group,
            cfg.model,
            cfg.start,
            &cfg.offset_dir,
            false,
        )
        .await?;
        let inner = Arc::new(Inner {
            group,
            cfg,
            offsets,
            positions: Mutex::new(BTreeMap::new()),
            pending: Mutex::new(BTreeMap::new()),
            managed: AtomicBool::new(false),
            round_robin: AtomicUsize::new(0),
            ahead: Arc::new(Ahead::default()),
            shut: AtomicBool::new(false),
            rebalancing: tokio::sync::Mutex::new(()),
            background: Background::default(),
        });
        let weak = Arc::downgrade(&inner);
        inner.background.push(tokio::spawn(timers(weak)));
        Ok(PullConsumer { inner })
    }
}

struct Inner {
    group: Group,
    cfg: PullConfig,
    offsets: OffsetStore,
    /// Assigned queues and their positions (`None`: not read yet).
    positions: Mutex<BTreeMap<MessageQueue, Option<u64>>>,
    /// Commits waiting to ride on their queue's next pull
    /// ([`PullConsumer::commit_on_next_pull`]).
    pending: Mutex<BTreeMap<MessageQueue, u64>>,
    managed: AtomicBool,
    round_robin: AtomicUsize,
    /// Pulls in flight between polls (`pull_ahead`).
    ahead: Arc<Ahead>,
    shut: AtomicBool,
    rebalancing: tokio::sync::Mutex<()>,
    background: Background,
}

impl Inner {
    fn inst(&self) -> &Instance {
        &self.group.inst
    }

    fn reads(&self) -> &ReadPath {
        &self.group.reads
    }

    fn positions(&self) -> std::sync::MutexGuard<'_, BTreeMap<MessageQueue, Option<u64>>> {
        self.positions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, BTreeMap<MessageQueue, u64>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_open(&self) -> Result<()> {
        if self.shut.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }
}

/// A pull consumer. Cheap to clone.
#[derive(Clone)]
pub struct PullConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullConsumer")
            .field("group", &self.inner.cfg.group)
            .field("client_id", &self.inner.inst().id)
            .finish()
    }
}

impl PullConsumer {
    pub fn builder() -> PullConsumerBuilder {
        PullConsumerBuilder {
            client: ClientConfig::default(),
            cfg: PullConfig {
                group: String::new(),
                model: MessageModel::Clustering,
                start: StartPosition::Last,
                poll_batch_max: 32,
                pull_bytes_max: 4 << 20,
                auto_commit: None,
                pull_ahead: false,
                pull_ahead_depth: 2,
                heartbeat_interval: Duration::from_secs(30),
                rebalance_interval: Duration::from_secs(20),
                master_probe_interval: Duration::from_secs(5),
                offset_dir: default_offset_dir(),
            },
        }
    }

    pub fn client_id(&self) -> &str {
        &self.inner.inst().id
    }

    /// The readable queues of a topic, in route order (those of every broker with a master
    /// or a slave).
    pub async fn fetch_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.inner.check_open()?;
        Ok(self.inner.inst().route(topic).await?.consume_queues.clone())
    }

    /// Pulls up to `max_messages` from `offset`, answering at once.
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        offset: u64,
        max_messages: u32,
        selector: impl Into<MessageSelector>,
    ) -> Result<PullResult> {
        self.pull_blocking(mq, offset, max_messages, selector, Duration::ZERO)
            .await
    }

    /// Pulls, letting the broker wait up to `wait` for a message when there is none
    /// (long polling). From the master, or a slave while the master is down (a slave that
    /// has not replicated up to `offset` yet answers [`PullStatus::NoNewMessage`]).
    pub async fn pull_blocking(
        &self,
        mq: &MessageQueue,
        offset: u64,
        max_messages: u32,
        selector: impl Into<MessageSelector>,
        wait: Duration,
    ) -> Result<PullResult> {
        self.inner.check_open()?;
        let selector = selector.into();
        selector.check()?;
        pull_via(
            self.inner.inst(),
            self.inner.reads(),
            &self.inner.cfg.group,
            mq,
            offset,
            max_messages,
            self.inner.cfg.pull_bytes_max,
            &selector,
            wait,
            None,
        )
        .await
        .map(Pulled::into_result)
    }

    /// The group's committed offset of a queue (`None` if never committed).
    pub async fn committed_offset(&self, mq: &MessageQueue) -> Result<Option<u64>> {
        self.inner.check_open()?;
        self.inner.offsets.read(mq).await
    }

    /// Commits the group's offset of a queue (the next offset to consume), a request of
    /// its own. A commit of the queue still pending ([`PullConsumer::commit_on_next_pull`])
    /// is dropped: this one is newer. (A poll already under way may still carry the pending
    /// value and reach the broker after this one: do not commit while polling that queue.)
    pub async fn commit(&self, mq: &MessageQueue, offset: u64) -> Result<()> {
        self.inner.check_open()?;
        self.inner.pending().remove(mq);
        self.inner.offsets.write(mq, offset).await?;
        self.inner.offsets.flush().await
    }

    /// Commits the group's offset of a queue (the next offset to consume) without a request
    /// of its own: the next [`PullConsumer::poll`] that pulls the queue from its master
    /// carries the offset, and the broker stores it before serving the pull (the
    /// `commitOffset` of RocketMQ's pull request). Until then the commit is pending: a later
    /// call for the queue replaces it, [`PullConsumer::commit_pending`] and
    /// [`PullConsumer::shutdown`] write what is pending with requests of their own, and so
    /// does a rebalance that takes the queue away. A broadcasting member's offsets live in
    /// its local file, which only those writes update. A pending commit is held in memory
    /// only: a process that dies first resumes from the last offset the broker stored.
    pub fn commit_on_next_pull(&self, mq: &MessageQueue, offset: u64) -> Result<()> {
        self.inner.check_open()?;
        self.inner.pending().insert(mq.clone(), offset);
        Ok(())
    }

    /// Writes every commit still pending ([`PullConsumer::commit_on_next_pull`]) now, one
    /// request per queue. The first error, if any; what failed stays pending.
    pub async fn commit_pending(&self) -> Result<()> {
        self.inner.check_open()?;
        write_pending(&self.inner, None).await
    }

    /// Hands a message this consumer could not process back to its broker (the master of
    /// the broker it was pulled from) for the group: the broker stores a copy in the group's
    /// retry topic, delivered after a delay (`delay_level` 0: the broker picks the next level
    /// from the message's retries so far; n > 0: that level), or in the group's dead-letter
    /// topic once the message was retried the group's `retryMaxTimes` (16 unless
    /// configured), or at once with `delay_level` -1. A slave refuses it
    /// (SERVICE_NOT_AVAILABLE): while the master is down, keep the message yourself.
    pub async fn send_back(&self, msg: &ReceivedMessage, delay_level: i32) -> Result<()> {
        self.inner.check_open()?;
        let mq = MessageQueue::new(msg.topic.clone(), msg.broker_name.clone(), msg.queue_id);
        send_back(
            self.inner.inst(),
            &self.inner.cfg.group,
            &mq,
            &SendBack::of(msg),
            delay_level,
            0,
        )
        .await
    }

    /// The oldest offset still stored in a queue.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<u64> {
        queue_offset_via(self.inner.inst(), self.inner.reads(), mq, false).await
    }

    /// One past the newest offset of a queue.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<u64> {
        queue_offset_via(self.inner.inst(), self.inner.reads(), mq, true).await
    }

    /// The first offset stored at or after `timestamp_ms`.
    pub async fn offset_for_timestamp(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<u64> {
        search_offset_via(self.inner.inst(), self.inner.reads(), mq, timestamp_ms).await
    }

    /// Manages exactly these queues for [`PullConsumer::poll`] (no group balancing).
    pub fn assign(&self, queues: impl IntoIterator<Item = MessageQueue>) {
        self.inner.managed.store(false, Ordering::Release);
        let mut p = self.inner.positions();
        let keep: BTreeSet<MessageQueue> = queues.into_iter().collect();
        p.retain(|mq, _| keep.contains(mq));
        for mq in keep {
            p.entry(mq).or_insert(None);
        }
    }

    /// Subscribes to a topic with a selector (a tag expression such as `"TagA || TagB"`, or
    /// [`MessageSelector::sql`]); the group decides which of its queues this member polls
    /// (rebalanced every `rebalance_interval`, and at once when a broker says the group's
    /// members changed). A selector that does not parse fails here, before any pull, and so
    /// does one a broker refuses (SQL92 on a broker without `enablePropertyFilter=true`).
    pub async fn subscribe(&self, topic: &str, selector: impl Into<MessageSelector>) -> Result<()> {
        self.select(topic, selector).await?;
        self.inner.managed.store(true, Ordering::Release);
        rebalance(&self.inner).await;
        Ok(())
    }

    /// Sets what [`PullConsumer::poll`] keeps of `topic` (every message by default), checked
    /// as [`PullConsumer::subscribe`] checks it, without taking queues: for queues given to
    /// [`PullConsumer::assign`].
    pub async fn select(&self, topic: &str, selector: impl Into<MessageSelector>) -> Result<()> {
        self.inner.check_open()?;
        let selector = selector.into();
        selector.check()?;
        let before = self.inner.group.subscriptions().remove(topic);
        self.inner.group.subscribe(topic, &selector);
        if let Err(e) = self.inner.group.heartbeat_checked().await {
            match before {
                Some(s) => self.inner.group.subscribe(topic, &s),
                None => self.inner.group.unsubscribe(topic),
            }
            self.inner.group.heartbeat().await;
            return Err(e);
        }
        Ok(())
    }

    /// The queues `poll` reads now.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        self.inner.positions().keys().cloned().collect()
    }

    /// The next offset `poll` reads from a queue, if known yet.
    pub fn position(&self, mq: &MessageQueue) -> Option<u64> {
        self.inner.positions().get(mq).copied().flatten()
    }

    /// Moves a queue's position (the queue must be assigned).
    pub fn seek(&self, mq: &MessageQueue, offset: u64) -> Result<()> {
        match self.inner.positions().get_mut(mq) {
            Some(p) => {
                *p = Some(offset);
                self.inner.ahead.remove(mq);
                Ok(())
            }
            None => Err(Error::Config(format!("{mq} is not assigned"))),
        }
    }

    /// Messages from the assigned queues (at most `poll_batch_max`), waiting up to
    /// `timeout` for some. Positions advance past what is returned.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<ReceivedMessage>> {
        Ok(self.poll_batch(timeout).await?.to_received())
    }

    /// [`PullConsumer::poll`] without copies: the messages as read from the pulled bytes
    /// ([`MessageView`](crate::MessageView)s of a [`MessageBatch`], each queue's in offset
    /// order), nothing allocated per message.
    pub async fn poll_batch(&self, timeout: Duration) -> Result<MessageBatch> {
        self.inner.check_open()?;
        let deadline = Instant::now() + timeout;
        loop {
            let out = if self.inner.cfg.pull_ahead {
                poll_round_ahead(&self.inner, deadline).await
            } else {
                poll_round(&self.inner).await
            };
            if !out.is_empty() {
                return Ok(MessageBatch::from_raw(out));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(MessageBatch::from_raw(out));
            }
            tokio::time::sleep_until((now + POLL_IDLE_PAUSE).min(deadline)).await;
        }
    }

    /// Commits the position of every assigned queue.
    pub async fn commit_positions(&self) -> Result<()> {
        self.inner.check_open()?;
        commit_positions(&self.inner).await
    }

    /// Stops the timers, commits positions if `auto_commit` is set, leaves the group and
    /// closes the connections.
    pub async fn shutdown(&self) {
        if self.inner.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.background.abort_all();
        self.inner.ahead.clear();
        let _g = self.inner.rebalancing.lock().await;
        if let Err(e) = write_pending(&self.inner, None).await {
            log::warn!("writing pending commits at shutdown: {e}");
        }
        if self.inner.cfg.auto_commit.is_some() {
            if let Err(e) = commit_positions(&self.inner).await {
                log::warn!("committing positions at shutdown: {e}");
            }
        }
        if self.inner.managed.load(Ordering::Acquire) {
            self.inner.group.unregister().await;
        }
        self.inner.inst().pool.shutdown();
    }
}

async fn poll_round(inner: &Inner) -> Vec<RawMessage> {
    let queues = rotated(inner);
    let mut out = Vec::new();
    for (mq, pos) in &queues {
        let offset = match pos {
            Some(o) => *o,
            None => match initial_position(inner, mq).await {
                Ok(o) => o,
                Err(e) => {
                    log::debug!("reading the offset of {mq}: {e}");
                    continue;
                }
            },
        };
        let want = inner.cfg.poll_batch_max - out.len() as u32;
        let r = pull_queue(inner, mq, offset, want).await;
        accept(inner, mq, offset, r, &mut out);
        if out.len() as u32 >= inner.cfg.poll_batch_max {
            break;
        }
    }
    out
}

/// `poll_round` with `pull_ahead`: takes the answers of the pulls already in flight (waiting
/// for one until `deadline` when none has come), starting each queue's next pull as soon as
/// its messages are taken. A queue whose pull brought nothing is pulled again by the next
/// round, after `poll`'s pause.
async fn poll_round_ahead(inner: &Arc<Inner>, deadline: Instant) -> Vec<RawMessage> {
    let max = inner.cfg.poll_batch_max as usize;
    let mut out = Vec::new();
    let mut idle = BTreeSet::new();
    let queues = rotated(inner);
    loop {
        {
            let positions = inner.positions();
            inner
                .ahead
                .retain(|mq, from| positions.get(mq).is_some_and(|p| *p == Some(from)));
        }
        for (mq, _) in &queues {
            if idle.contains(mq) {
                continue;
            }
            let room = if out.is_empty() {
                usize::MAX
            } else {
                max - out.len()
            };
            if let Some((from, r)) = inner.ahead.take(mq, room) {
                if accept(inner, mq, from, r, &mut out) {
                    let next = inner.positions().get(mq).copied().flatten();
                    if let Some(next) = next {
                        start_ahead(inner, mq, next);
                    }
                } else {
                    idle.insert(mq.clone());
                }
            } else if !inner.ahead.has(mq) {
                let pos = inner.positions().get(mq).copied();
                let offset = match pos {
                    Some(Some(o)) => o,
                    Some(None) => match initial_position(inner, mq).await {
                        Ok(o) => {
                            let mut p = inner.positions();
                            match p.get_mut(mq) {
                                Some(slot @ None) => *slot = Some(o),
                                _ => continue,
                            }
                            o
                        }
                        Err(e) => {
                            log::debug!("reading the offset of {mq}: {e}");
                            idle.insert(mq.clone());
                            continue;
                        }
                    },
                    None => continue,
                };
                start_ahead(inner, mq, offset);
            }
            if out.len() >= max {
                break;
            }
        }
        if !out.is_empty() || !inner.ahead.in_flight() || !inner.ahead.wait(deadline).await {
            return out;
        }
    }
}

fn start_ahead(inner: &Arc<Inner>, mq: &MessageQueue, offset: u64) {
    let weak = Arc::downgrade(inner);
    let q = mq.clone();
    let want = inner.cfg.poll_batch_max;
    let depth = inner.cfg.pull_ahead_depth as usize;
    inner.ahead.start(mq, offset, depth, move |from| {
        let (weak, q) = (weak.clone(), q.clone());
        async move {
            match weak.upgrade() {
                Some(inner) => pull_queue(&inner, &q, from, want).await,
                None => Err(Error::Shutdown),
            }
        }
    });
}

/// The assigned queues and their positions, starting one further each round.
fn rotated(inner: &Inner) -> Vec<(MessageQueue, Option<u64>)> {
    let mut queues: Vec<(MessageQueue, Option<u64>)> = inner
        .positions()
        .iter()
        .map(|(q, p)| (q.clone(), *p))
        .collect();
    if !queues.is_empty() {
        let start = inner.round_robin.fetch_add(1, Ordering::Relaxed) % queues.len();
        queues.rotate_left(start);
    }
    queues
}

/// Pulls up to `want` messages of `mq` from `offset`, carrying the queue's pending commit
/// (no longer pending once the master stored it).
async fn pull_queue(inner: &Inner, mq: &MessageQueue, offset: u64, want: u32) -> Result<Pulled> {
    let selector = inner.group.selector(&mq.topic);
    let commit = match &inner.offsets {
        OffsetStore::Remote { .. } => inner.pending().get(mq).copied(),
        OffsetStore::Local { .. } => None,
    };
    let r = pull_via(
        inner.inst(),
        inner.reads(),
        &inner.cfg.group,
        mq,
        offset,
        want,
        inner.cfg.pull_bytes_max,
        &selector,
        Duration::ZERO,
        commit,
    )
    .await;
    if let (Ok(r), Some(sent)) = (&r, commit) {
        if r.committed {
            let mut pending = inner.pending();
            if pending.get(mq) == Some(&sent) {
                pending.remove(mq);
            }
        }
    }
    r
}

/// Moves the queue's position past a pull from `offset` and adds its messages to `out`,
/// if the position is still `offset` (or not read yet). True when it brought messages.
fn accept(
    inner: &Inner,
    mq: &MessageQueue,
    offset: u64,
    r: Result<Pulled>,
    out: &mut Vec<RawMessage>,
) -> bool {
    match r {
        Ok(r) => {
            if r.status == PullStatus::OffsetIllegal {
                log::warn!("{mq}: offset {offset} moved to {}", r.next_offset);
            }
            let mut p = inner.positions();
            match p.get_mut(mq) {
                Some(slot) if slot.is_none_or(|o| o == offset) => {
                    *slot = Some(r.next_offset);
                    let brought = !r.messages.is_empty();
                    out.extend(r.messages);
                    brought
                }
                _ => false,
            }
        }
        Err(e) => {
            log::debug!("pulling {mq}: {e}");
            false
        }
    }
}

async fn initial_position(inner: &Inner, mq: &MessageQueue) -> Result<u64> {
    match inner.offsets.read(mq).await? {
        Some(o) => Ok(o),
        None => start_offset(inner.inst(), inner.reads(), mq, inner.cfg.start).await,
    }
}

/// Writes the pending commits (of `only` that queue, or of all), one request per queue; a
/// commit made meanwhile stays pending. The first error; what failed stays pending.
async fn write_pending(inner: &Inner, only: Option<&MessageQueue>) -> Result<()> {
    let pending: Vec<(MessageQueue, u64)> = inner
        .pending()
        .iter()
        .filter(|(q, _)| only.is_none_or(|o| o == *q))
        .map(|(q, o)| (q.clone(), *o))
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    let mut first_err = None;
    for (mq, off) in pending {
        match inner.offsets.write(&mq, off).await {
            Ok(()) => {
                let mut p = inner.pending();
                if p.get(&mq) == Some(&off) {
                    p.remove(&mq);
                }
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    inner.offsets.flush().await?;
    first_err.map_or(Ok(()), Err)
}

async fn commit_positions(inner: &Inner) -> Result<()> {
    let positions: Vec<(MessageQueue, u64)> = inner
        .positions()
        .iter()
        .filter_map(|(q, p)| p.map(|o| (q.clone(), o)))
        .collect();
    let mut first_err = None;
    for (mq, off) in positions {
        // Committing the position replaces a commit pending for the queue.
        inner.pending().remove(&mq);
        if let Err(e) = inner.offsets.write(&mq, off).await {
            first_err.get_or_insert(e);
        }
    }
    inner.offsets.flush().await?;
    first_err.map_or(Ok(()), Err)
}

async fn rebalance(inner: &Inner) {
    let _g = inner.rebalancing.lock().await;
    if inner.shut.load(Ordering::Acquire) || !inner.managed.load(Ordering::Acquire) {
        return;
    }
    let current: BTreeSet<MessageQueue> = inner.positions().keys().cloned().collect();
    let target = inner.group.target_assignment(&current).await.queues;
    let removed: Vec<(MessageQueue, Option<u64>)> = {
        let mut p = inner.positions();
        let gone: Vec<MessageQueue> = current.difference(&target).cloned().collect();
        let removed = gone
            .iter()
            .filter_map(|q| p.remove(q).map(|o| (q.clone(), o)))
            .collect();
        for q in target.difference(&current) {
            p.insert(q.clone(), None);
        }
        removed
    };
    for (mq, _) in &removed {
        inner.ahead.remove(mq);
        if let Err(e) = write_pending(inner, Some(mq)).await {
            log::warn!("writing the pending commit of released {mq}: {e}");
        }
    }
    if inner.cfg.auto_commit.is_some() {
        for (mq, pos) in removed {
            if let Some(off) = pos {
                if let Err(e) = inner.offsets.write(&mq, off).await {
                    log::warn!("committing released {mq} at {off}: {e}");
                }
            }
        }
    }
}

async fn timers(weak: Weak<Inner>) {
    let Some((hb, reb, refresh, commit, probe, changed)) = weak.upgrade().map(|i| {
        (
            i.cfg.heartbeat_interval,
            i.cfg.rebalance_interval,
            i.inst().cfg.route_refresh_interval,
            i.cfg.auto_commit,
            i.cfg.master_probe_interval,
            i.group.changed(),
        )
    }) else {
        return;
    };
    let Some(mut reconnects) = weak.upgrade().map(|i| i.inst().pool.reconnects()) else {
        return;
    };
    let floor = Duration::from_millis(10);
    let mut probe_tick = ticker(probe.max(floor)).await;
    let mut hb_tick = ticker(hb.max(floor)).await;
    let mut reb_tick = ticker(reb.max(floor)).await;
    let mut route_tick = ticker(refresh.max(floor)).await;
    let mut commit_tick = ticker(commit.unwrap_or(Duration::from_secs(3600)).max(floor)).await;
    loop {
        tokio::select! {
            _ = hb_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                if inner.managed.load(Ordering::Acquire) {
                    inner.group.heartbeat().await;
                }
            }
            // A broker came back (it may know no member of the group): heartbeat now.
            Ok(()) = reconnects.changed() => {
                let Some(inner) = weak.upgrade() else { return };
                if inner.managed.load(Ordering::Acquire) {
                    inner.group.heartbeat().await;
                }
            }
            _ = reb_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                rebalance(&inner).await;
            }
            _ = changed.notified() => {
                let Some(inner) = weak.upgrade() else { return };
                rebalance(&inner).await;
            }
            _ = route_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.inst().refresh_all_routes().await;
            }
            _ = probe_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                inner.reads().probe(inner.inst()).await;
            }
            _ = commit_tick.tick() => {
                let Some(inner) = weak.upgrade() else { return };
                if commit.is_some() {
                    if let Err(e) = commit_positions(&inner).await {
                        log::debug!("auto-commit: {e}");
                    }
                }
            }
        }
    }
}
