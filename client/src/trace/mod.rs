//! Message trace, as RocketMQ's: an opt-in producer or push consumer records what happened
//! to each message it sends or consumes (who, when, how long, success) to a trace topic
//! (`RMQ_SYS_TRACE_TOPIC` by default), and [`Admin::message_trace`](crate::Admin::message_trace)
//! (`ringmq-ctl msg trace ID`) reads a message's records back as a timeline.
//!
//! - A producer with [`ProducerBuilder::trace`](crate::ProducerBuilder::trace) records a
//!   `Pub` for every stored message of `send`, `send_batch`, `send_to_queue`,
//!   `send_with_selector`, `send_ordered` and the async sends (one-way sends have no answer
//!   and no record, failed sends neither, as in RocketMQ).
//! - A push consumer with
//!   [`PushConsumerBuilder::trace`](crate::consumer::PushConsumerBuilder::trace) records a
//!   `SubBefore` for each message before the listener call and a `SubAfter` after it (cost
//!   = call time / batch size; success; the reason of a failure). A retried message comes
//!   again with its reconsume count.
//!
//! Records go in RocketMQ's text encoding ([`record`]) through a bounded queue to a
//! background task that sends them as ordinary messages ([`dispatch`]); the traced call
//! only builds the record and offers it to the queue. A full queue drops records and
//! counts them ([`TraceStats::dropped`]). The trace messages' keys are the traced
//! messages' unique keys and keys, so the broker's key index finds them.
//!
//! The broker auto-creates `RMQ_SYS_TRACE_TOPIC` on the first trace message when
//! `autoCreateTopicEnable` is on; otherwise create it (or name another topic with
//! [`TraceConfig::topic`]).

pub(crate) mod dispatch;
mod hooks;
pub mod record;
mod timeline;

pub(crate) use dispatch::Tracer;
pub use dispatch::{KEYS_PER_MESSAGE_MAX, TRACE_MESSAGE_BYTES_MAX, TRACE_PRODUCER_GROUP_PREFIX};
pub(crate) use hooks::{consume_begin, consume_end, pop_begin, record_send, ConsumeSpan};
pub use record::TraceRecord;
pub use timeline::{ConsumeEvent, DeadLetter, MessageTrace, SendEvent, StoredAt};

/// RocketMQ's default trace topic (`TopicValidator.RMQ_SYS_TRACE_TOPIC`).
pub const TRACE_TOPIC_DEFAULT: &str = "RMQ_SYS_TRACE_TOPIC";
/// Records waiting to be sent before new ones are dropped (RocketMQ's trace queue, 2048).
pub const TRACE_QUEUE_MAX_DEFAULT: usize = 2048;

/// Where and how a client writes its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceConfig {
    /// The trace topic (default [`TRACE_TOPIC_DEFAULT`]).
    pub topic: String,
    /// Records queued before new ones are dropped (default [`TRACE_QUEUE_MAX_DEFAULT`]).
    pub queue_max: usize,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            topic: TRACE_TOPIC_DEFAULT.to_string(),
            queue_max: TRACE_QUEUE_MAX_DEFAULT,
        }
    }
}

/// Counters of a client's tracer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Records offered to the queue.
    pub recorded: u64,
    /// Records dropped because the queue was full.
    pub dropped: u64,
    /// Records in trace messages the broker stored.
    pub sent: u64,
    /// Records in trace messages whose send failed (not retried past the producer's own
    /// retries).
    pub failed: u64,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
