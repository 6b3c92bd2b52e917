//! `NamesrvError`: why the name server refused a registration or a KV write. Each variant
//! carries what an operator needs to find the bad broker or value; the request handler
//! maps them to response statuses in one place.

use ringmq_wire::WireError;
use thiserror::Error;

use crate::limits::TopicNameError;

/// A refused name server operation. The table is unchanged when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NamesrvError {
    /// A cluster, broker or address string is empty, too long or has odd characters.
    #[error("{what}: {detail}")]
    InvalidName { what: &'static str, detail: String },
    /// A registered topic's name is not a valid topic name.
    #[error("topic {topic:?}: {source}")]
    InvalidTopic {
        topic: String,
        #[source]
        source: TopicNameError,
    },
    /// A registered topic's config is inconsistent (placement, permission bits).
    #[error("topic {topic:?}: {source}")]
    InvalidTopicConfig {
        topic: String,
        #[source]
        source: WireError,
    },
    /// A registration lists the same topic twice.
    #[error("topic {topic:?} is listed twice in one registration")]
    DuplicateTopic { topic: String },
    /// A topic has more queues than `limits::QUEUES_PER_TOPIC_MAX`.
    #[error("topic {topic:?} has {count} queues, over the maximum of {max}")]
    TooManyQueues {
        topic: String,
        count: u32,
        max: usize,
    },
    /// The broker id and the role disagree (a master has id 0, a slave a larger one).
    #[error("broker {broker_name} id {broker_id}: role {role} needs {expected}")]
    RoleMismatch {
        broker_name: String,
        broker_id: u64,
        role: &'static str,
        expected: &'static str,
    },
    /// The broker's shard count is outside 1..=`limits::SHARDS_MAX`.
    #[error("broker {broker_name}: shard count {shard_count} outside 1..={max}")]
    BadShardCount {
        broker_name: String,
        shard_count: u16,
        max: usize,
    },
    /// Applying the operation would exceed a `limits::NAMESRV_*` maximum.
    #[error("{what}: {count} would exceed the maximum of {max}")]
    Full {
        what: &'static str,
        count: usize,
        max: usize,
    },
}
