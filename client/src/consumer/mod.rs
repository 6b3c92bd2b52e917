//! Consumers: the [`PushConsumer`] (long-polling pulls per assigned queue, a listener called
//! with batches) and the [`PullConsumer`] (the caller pulls). Both join a consumer group in
//! clustering mode (queues balanced across the members, [`allocate_average`]) or
//! broadcasting mode (every member reads every queue, offsets kept in a local file).
//!
//! This module holds what both share: settings types, the low-level queue calls (pull,
//! offsets), the group membership (`group`), the choice of replica reads go to
//! (`replica`: the master, or a slave of the same broker name while the master is down),
//! and handing failed messages back to the broker (`send_back`: retry and dead-letter
//! topics). The push consumer's parts: its queues (`push_queues`, with the broker locks of
//! `locks`), each queue's pull task (`push_pull`), the listener (`listener`), and the two
//! ways of calling it (`concurrent`, `orderly`).

mod allocate;
mod concurrent;
// The POP consumer of protocol edges (ringmq's gRPC edge).
mod edge;
pub(crate) mod group;
mod listener;
mod locks;
mod offsets;
mod orderly;
mod orderly_queue;
mod pull;
mod pull_ahead;
mod push;
mod push_pull;
mod push_queues;
mod push_state;
mod queue_state;
pub(crate) mod replica;
mod selector;
mod send_back;
mod simple;
mod traced;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{
    Boundary, GetOffsetRequest, OffsetResponse, PullRequest, PullResponse, SearchOffsetRequest,
};

use crate::batch::{split_records, RawMessage};
use crate::error::Result;
use crate::instance::{ClientConfig, Instance};
use crate::message::ReceivedMessage;
use crate::route::MessageQueue;
use group::Group;
use offsets::OffsetStore;
use replica::ReadPath;

pub use allocate::allocate_average;
pub use edge::{EdgeConsumer, PopCall};
pub use listener::{BatchListener, ConsumeContext, MessageListener};
pub(crate) use offsets::committed_offset_in;
pub use orderly::ORDERLY_RECONSUME_TIMES_DEFAULT;
pub use pull::{PullConfig, PullConsumer, PullConsumerBuilder};
pub use push::{PushConfig, PushConsumer, PushConsumerBuilder, UNSETTLED_REBALANCE_PAUSE};
pub use selector::MessageSelector;
pub use send_back::{
    dlq_topic, original_topic, retry_topic, DELAY_LEVEL_BROKER, DELAY_LEVEL_DLQ, DLQ_TOPIC_PREFIX,
    RETRY_TOPIC_PREFIX,
};
pub use simple::{PoppedMessage, SimpleConfig, SimpleConsumer, SimpleConsumerBuilder, RECEIVE_MAX};

/// How a group shares messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageModel {
    /// Each message goes to one member: queues are balanced across the group; offsets are
    /// kept by the broker.
    Clustering,
    /// Each member gets every message: every member reads every queue; offsets are kept in
    /// a local file per member.
    Broadcasting,
}

/// Where a queue with no committed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPosition {
    /// The oldest message still stored.
    First,
    /// Only messages stored from now on.
    Last,
    /// The first message stored at or after this time (ms since the epoch).
    Timestamp(i64),
}

/// What a listener says about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeResult {
    /// Every message of the batch is done: its offsets may be committed.
    Success,
    /// The batch failed. A concurrent clustering consumer hands its messages back to the
    /// broker (they come again from the group's retry topic after a delay, or go to its
    /// dead-letter topic after `max_reconsume_times` retries); an orderly consumer suspends
    /// the queue and hands the same batch over again; a broadcasting consumer (or a failed
    /// send-back) hands it over again after the redelivery backoff.
    Retry,
}

/// How a pull ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages were found (some may have been filtered out by tag on the client).
    Found,
    /// No message at the offset (after any long-poll wait).
    NoNewMessage,
    /// Messages exist but none matched the tag expression.
    NoMatchedMessage,
    /// The offset is outside the queue; continue from `next_offset`.
    OffsetIllegal,
}

/// The answer to a pull.
#[derive(Debug, Clone)]
pub struct PullResult {
    pub status: PullStatus,
    /// Where to pull next.
    pub next_offset: u64,
    pub min_offset: u64,
    /// One past the last stored message.
    pub max_offset: u64,
    pub messages: Vec<ReceivedMessage>,
}

/// Where broadcasting offsets are kept: `dir/<instance>/<group>.offsets`; default dir
/// `$HOME/.ringmq_offsets` (RocketMQ: `~/.rocketmq_offsets`).
pub(crate) fn default_offset_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(".ringmq_offsets")
}

/// The setters both consumer builders have (a `cfg` of [`PullConfig`] or [`PushConfig`]):
/// the group and how it consumes, pull size, timers and the offset folder.
macro_rules! group_setters {
    () => {
        /// The consumer group (required: offsets are committed for it).
        pub fn group(mut self, group: impl Into<String>) -> Self {
            self.cfg.group = group.into();
            self
        }

        /// Clustering (the default) or broadcasting.
        pub fn message_model(mut self, model: $crate::consumer::MessageModel) -> Self {
            self.cfg.model = model;
            self
        }

        /// Where consumption of a queue with no committed offset starts (default
        /// [`StartPosition::Last`]).
        pub fn start_position(mut self, start: $crate::consumer::StartPosition) -> Self {
            self.cfg.start = start;
            self
        }

        /// Most bytes one pull may return (default 4 MiB; at least one message is returned).
        pub fn pull_bytes_max(mut self, n: u32) -> Self {
            self.cfg.pull_bytes_max = n;
            self
        }

        /// Heartbeat period (default 30 s; the broker drops a member silent for 120 s).
        pub fn heartbeat_interval(mut self, d: std::time::Duration) -> Self {
            self.cfg.heartbeat_interval = d;
            self
        }

        /// Rebalance period (default 20 s): the fallback when a membership change is not
        /// notified by a broker (members also rebalance at once on the broker's notice).
        pub fn rebalance_interval(mut self, d: std::time::Duration) -> Self {
            self.cfg.rebalance_interval = d;
            self
        }

        /// While a broker's master is down and its queues are read from a slave, how often
        /// the master is tried again (default 5 s; the route is fetched again at the same
        /// pace).
        pub fn master_probe_interval(mut self, d: std::time::Duration) -> Self {
            self.cfg.master_probe_interval = d;
            self
        }

        /// Folder of broadcasting offset files (default `$HOME/.ringmq_offsets`); the file
        /// is `<dir>/<instance name or DEFAULT>/<group>.offsets`.
        pub fn offset_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
            self.cfg.offset_dir = dir.into();
            self
        }
    };
}
pub(crate) use group_setters;

/// Connects a consumer's client and joins `group`: its membership and its offset store,
/// kept by the brokers (clustering) or in the local file
/// `<offset_dir>/<instance name or DEFAULT>/<group>.offsets` (broadcasting). `push` tells
/// the brokers which kind of consumer this is.
pub(crate) async fn join_group(
    client: ClientConfig,
    group: &str,
    model: MessageModel,
    start: StartPosition,
    offset_dir: &Path,
    push: bool,
) -> Result<(Group, OffsetStore)> {
    let instance_dir = client
        .instance_name
        .clone()
        .unwrap_or_else(|| "DEFAULT".to_string());
    let inst = Instance::new(client).await?;
    let reads = Arc::new(ReadPath::new());
    let offsets = match model {
        MessageModel::Clustering => {
            OffsetStore::remote(Arc::clone(&inst), Arc::clone(&reads), group)
        }
        MessageModel::Broadcasting => {
            OffsetStore::local(
                offset_dir
                    .join(instance_dir)
                    .join(format!("{group}.offsets")),
            )
            .await?
        }
    };
    Ok((Group::new(inst, reads, group, model, start, push), offsets))
}

/// A pull's answer: a [`PullResult`] with its messages not decoded yet.
#[derive(Debug)]
pub(crate) struct Pulled {
    pub status: PullStatus,
    pub next_offset: u64,
    pub min_offset: u64,
    pub max_offset: u64,
    pub messages: Vec<RawMessage>,
    /// A slave answered that the offset is past its end: it is behind the consumer (it has
    /// not replicated what was read from the master yet). Reported as
    /// [`PullStatus::NoNewMessage`] at the same offset; retry after a pause.
    pub slave_behind: bool,
    /// The request carried a commit (`commit`) and the master answered it: the broker
    /// stored that offset for the group before serving the pull.
    pub committed: bool,
}

impl Pulled {
    /// The public answer, messages decoded into owned ones.
    pub fn into_result(self) -> PullResult {
        PullResult {
            status: self.status,
            next_offset: self.next_offset,
            min_offset: self.min_offset,
            max_offset: self.max_offset,
            messages: self
                .messages
                .iter()
                .map(|m| m.view().to_received())
                .collect(),
        }
    }
}

/// Pulls from one queue, from the replica `reads` picks. `suspend` > 0 lets the broker
/// hold the pull until a message arrives (long polling); `commit` piggybacks a consumer
/// offset on the request.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn pull_via(
    inst: &Instance,
    reads: &ReadPath,
    group: &str,
    mq: &MessageQueue,
    offset: u64,
    max_messages: u32,
    max_bytes: u32,
    selector: &MessageSelector,
    suspend: Duration,
    commit: Option<u64>,
) -> Result<Pulled> {
    let header = PullRequest {
        consumer_group: group.to_string(),
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        queue_offset: offset,
        max_messages,
        max_bytes,
        filter_type: selector.filter_type(),
        expression: selector.expression().to_string(),
        suspend_timeout_ms: u32::try_from(suspend.as_millis()).unwrap_or(u32::MAX),
        // A pull a slave serves because the broker suggested it commits nothing: commits
        // keep going to the master.
        commit_offset: commit.filter(|_| !reads.is_slow(mq)),
    };
    let carried = header.commit_offset.is_some();
    let timeout = suspend + inst.cfg.request_timeout;
    let (answer, served) = reads
        .call(inst, mq, RequestCode::PullMessage, &header, timeout)
        .await?;
    let status = answer.status()?;
    let status = match status {
        Status::Success => PullStatus::Found,
        Status::PullNotFound => PullStatus::NoNewMessage,
        Status::PullRetryImmediately => PullStatus::NoMatchedMessage,
        Status::PullOffsetMoved => PullStatus::OffsetIllegal,
        other => return Err(answer.error(other)),
    };
    let fields: PullResponse = answer.required_fields()?;
    reads.note_suggestion(mq, served, fields.suggest_broker_id);
    if status == PullStatus::OffsetIllegal && !served.master && fields.next_begin_offset < offset {
        log::debug!(
            "{mq}: slave {} holds {}..{}, behind offset {offset}; waiting",
            served.addr,
            fields.min_offset,
            fields.max_offset
        );
        return Ok(Pulled {
            status: PullStatus::NoNewMessage,
            next_offset: offset,
            min_offset: fields.min_offset,
            max_offset: fields.max_offset,
            messages: Vec::new(),
            slave_behind: true,
            committed: false,
        });
    }
    let mut messages = Vec::new();
    if status == PullStatus::Found {
        messages = split_records(&answer.body, &Arc::from(mq.broker_name.as_str()))?;
        // The broker filters tags by hash; drop hash collisions here.
        if let Some(tags) = selector.tag_filter() {
            messages.retain(|m| tags.matches(m.view().tag()));
        }
    }
    Ok(Pulled {
        status,
        next_offset: fields.next_begin_offset,
        min_offset: fields.min_offset,
        max_offset: fields.max_offset,
        messages,
        slave_behind: false,
        committed: carried && served.master,
    })
}

/// [`pull_via`] with no memory of earlier requests: from the master, or from a slave when
/// the route lists no master or the master cannot be reached.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn pull_queue(
    inst: &Instance,
    group: &str,
    mq: &MessageQueue,
    offset: u64,
    max_messages: u32,
    max_bytes: u32,
    selector: &MessageSelector,
    suspend: Duration,
    commit: Option<u64>,
) -> Result<PullResult> {
    let reads = ReadPath::new();
    pull_via(
        inst,
        &reads,
        group,
        mq,
        offset,
        max_messages,
        max_bytes,
        selector,
        suspend,
        commit,
    )
    .await
    .map(Pulled::into_result)
}

/// GET_MIN_OFFSET (`max` false) or GET_MAX_OFFSET (`max` true) of a queue.
pub(crate) async fn queue_offset_via(
    inst: &Instance,
    reads: &ReadPath,
    mq: &MessageQueue,
    max: bool,
) -> Result<u64> {
    let code = if max {
        RequestCode::GetMaxOffset
    } else {
        RequestCode::GetMinOffset
    };
    let header = GetOffsetRequest {
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
    };
    let (answer, _) = reads
        .call(inst, mq, code, &header, inst.cfg.request_timeout)
        .await?;
    let answer = answer.expect(&[Status::Success])?;
    Ok(answer.required_fields::<OffsetResponse>()?.offset)
}

/// [`queue_offset_via`] with no memory of earlier requests.
pub(crate) async fn queue_offset(inst: &Instance, mq: &MessageQueue, max: bool) -> Result<u64> {
    queue_offset_via(inst, &ReadPath::new(), mq, max).await
}

/// SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after `timestamp_ms`.
pub(crate) async fn search_offset_via(
    inst: &Instance,
    reads: &ReadPath,
    mq: &MessageQueue,
    timestamp_ms: i64,
) -> Result<u64> {
    let header = SearchOffsetRequest {
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        timestamp_ms,
        boundary: Boundary::Lower,
    };
    let (answer, _) = reads
        .call(
            inst,
            mq,
            RequestCode::SearchOffsetByTimestamp,
            &header,
            inst.cfg.request_timeout,
        )
        .await?;
    let answer = answer.expect(&[Status::Success])?;
    Ok(answer.required_fields::<OffsetResponse>()?.offset)
}

/// [`search_offset_via`] with no memory of earlier requests.
pub(crate) async fn search_offset(
    inst: &Instance,
    mq: &MessageQueue,
    timestamp_ms: i64,
) -> Result<u64> {
    search_offset_via(inst, &ReadPath::new(), mq, timestamp_ms).await
}

/// The offset a queue with no committed offset starts from.
pub(crate) async fn start_offset(
    inst: &Instance,
    reads: &ReadPath,
    mq: &MessageQueue,
    position: StartPosition,
) -> Result<u64> {
    match position {
        StartPosition::First => queue_offset_via(inst, reads, mq, false).await,
        StartPosition::Last => queue_offset_via(inst, reads, mq, true).await,
        StartPosition::Timestamp(t) => search_offset_via(inst, reads, mq, t).await,
    }
}
