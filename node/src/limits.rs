//! Every maximum the node enforces, in one place, with compile-time assertions that relate
//! them to each other and to the codec's hard limits in `ringmq_wire` (bound
//! everything; when full, answer "busy", never grow).
//!
//! Invariants asserted below, so that no limit can be raised into a contradiction:
//! - a full response (one frame) always fits a connection's write queue;
//! - the largest record the codec accepts fits one produce frame, one pull response and
//!   one CommitLog segment (with the BLANK that may follow it);
//! - every topic name fits a v1 record (1-byte topic length), including the retry and
//!   dead-letter topics derived from consumer group names;
//! - the shard count fits the route's placement entries (`route::SHARDS_MAX`).
//!
//! Names carry the unit before `_MAX`: `FRAME_BYTES_MAX`, `LONG_POLL_TIMEOUT_MS_MAX`.
//! Topic and group name validation lives here too, because it is where their lengths are
//! bounded.

use ringmq_wire::command::route;
use ringmq_wire::{frame, record};
use thiserror::Error;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;
const GIB: u64 = 1024 * 1024 * 1024;

// ---------------------------------------------------------------------------------------
// Frames and connections
// ---------------------------------------------------------------------------------------

/// Largest frame the node reads or writes, prefix and header included (RocketMQ's
/// `com.rocketmq.remoting.frameMaxLength`, 16 MiB): the codec's ceiling.
pub const FRAME_BYTES_MAX: usize = frame::FRAME_BYTES_MAX;
/// Largest frame body (a produce batch, a pull response, a registration): what is left
/// once the fixed prefix and the largest header are in.
pub const FRAME_BODY_BYTES_MAX: usize =
    FRAME_BYTES_MAX - frame::PREFIX_BYTES - frame::HEADER_BYTES_MAX;
/// Client and peer connections one process accepts; further ones are closed at accept.
pub const CONNECTIONS_MAX: usize = 4096;
/// Requests one connection may have outstanding (parked pulls included); past it a send
/// waits up to [`SEND_WAIT_MAX`] (the connection is not read until one of them finishes, so
/// TCP slows the client) and any other request is answered SYSTEM_BUSY.
pub const CONNECTION_REQUESTS_IN_FLIGHT_MAX: usize = 256;
/// Longest a send waits for its connection's requests in flight to fall below the limit;
/// then it is answered SYSTEM_BUSY. The default of the broker key `waitTimeMillsInSendQueue`
/// (RocketMQ's: a send waiting that long in the broker's queue is answered "broker busy"),
/// and what the name server uses.
pub const SEND_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(200);
/// Response bytes queued for one connection's socket; past it the connection stops reading.
pub const CONNECTION_QUEUED_BYTES_MAX: usize = 2 * FRAME_BYTES_MAX;
/// Response bytes queued across all connections of one process.
pub const QUEUED_BYTES_TOTAL_MAX: usize = 1024 * MIB;

const _: () = assert!(FRAME_BYTES_MAX <= frame::FRAME_BYTES_MAX);
const _: () = assert!(frame::PREFIX_BYTES + frame::HEADER_BYTES_MAX < FRAME_BYTES_MAX);
const _: () = assert!(CONNECTION_QUEUED_BYTES_MAX >= FRAME_BYTES_MAX);
const _: () = assert!(QUEUED_BYTES_TOTAL_MAX >= CONNECTION_QUEUED_BYTES_MAX);
const _: () = assert!(CONNECTION_REQUESTS_IN_FLIGHT_MAX >= 1);

// ---------------------------------------------------------------------------------------
// Produce
// ---------------------------------------------------------------------------------------

/// Hard cap on `maxMessageSize` (a body's bytes): the codec's limit, never more.
pub const MESSAGE_BODY_BYTES_MAX: usize = record::BODY_BYTES_MAX;
/// Records in one produce batch.
pub const BATCH_RECORDS_MAX: usize = 4096;
/// Bytes of records in one produce batch: one frame body.
pub const BATCH_BYTES_MAX: usize = FRAME_BODY_BYTES_MAX;

const _: () = assert!(BATCH_BYTES_MAX >= record::RECORD_BYTES_MAX);
const _: () = assert!(BATCH_BYTES_MAX <= FRAME_BODY_BYTES_MAX);
const _: () = assert!(BATCH_RECORDS_MAX * record::RECORD_BYTES_MIN <= BATCH_BYTES_MAX);

// ---------------------------------------------------------------------------------------
// Pull and long polling
// ---------------------------------------------------------------------------------------

/// Messages one pull may return (RocketMQ clients ask for 32 by default).
pub const PULL_MESSAGES_MAX: usize = 1024;
/// Record bytes one pull response may carry. At least one record of the largest size, so a
/// consumer is never stuck behind a record it cannot fetch.
pub const PULL_BYTES_MAX: usize = 8 * MIB;
/// Longest a pull may be parked waiting for data (RocketMQ consumers ask for 15 s).
pub const LONG_POLL_TIMEOUT_MS_MAX: u64 = 60_000;
/// Pulls parked on one shard at once; past it new pulls are answered "busy" at once.
pub const PARKED_PULLS_PER_SHARD_MAX: usize = 16_384;
/// Compiled SQL92 subscription expressions one shard keeps (each at most
/// `sql92::EXPRESSION_BYTES_MAX` bytes of text); past it the cache starts over.
pub const SQL_FILTERS_PER_SHARD_MAX: usize = 1024;

const _: () = assert!(PULL_BYTES_MAX >= record::RECORD_BYTES_MAX);
const _: () = assert!(PULL_BYTES_MAX <= FRAME_BODY_BYTES_MAX);
const _: () = assert!(PULL_MESSAGES_MAX * record::RECORD_BYTES_MIN <= FRAME_BODY_BYTES_MAX);
const _: () = assert!(LONG_POLL_TIMEOUT_MS_MAX >= 15_000);
const _: () = assert!(PARKED_PULLS_PER_SHARD_MAX >= CONNECTION_REQUESTS_IN_FLIGHT_MAX);

// ---------------------------------------------------------------------------------------
// Topics, groups and queues
// ---------------------------------------------------------------------------------------

/// Longest topic name (RocketMQ's `TopicValidator.TOPIC_MAX_LENGTH`). Topic names become
/// directory names and always fit a v1 record.
pub const TOPIC_NAME_BYTES_MAX: usize = 127;
/// Prefix of a consumer group's retry topic.
pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic.
pub const DLQ_TOPIC_PREFIX: &str = "%DLQ%";
/// Longest consumer or producer group name. RocketMQ allows 255, but then `%RETRY%<group>`
/// no longer fits a topic name; ringmq keeps every derived topic within
/// `TOPIC_NAME_BYTES_MAX`.
pub const GROUP_NAME_BYTES_MAX: usize = TOPIC_NAME_BYTES_MAX - RETRY_TOPIC_PREFIX.len();
/// Read or write queues one topic may have on one broker.
pub const QUEUES_PER_TOPIC_MAX: usize = 1024;
/// Topics one broker holds.
pub const TOPICS_PER_BROKER_MAX: usize = 100_000;

const _: () = assert!(TOPIC_NAME_BYTES_MAX == record::TOPIC_V1_BYTES_MAX);
const _: () = assert!(TOPIC_NAME_BYTES_MAX <= record::TOPIC_BYTES_MAX);
const _: () = assert!(GROUP_NAME_BYTES_MAX + RETRY_TOPIC_PREFIX.len() <= TOPIC_NAME_BYTES_MAX);
const _: () = assert!(GROUP_NAME_BYTES_MAX + DLQ_TOPIC_PREFIX.len() <= TOPIC_NAME_BYTES_MAX);
const _: () = assert!(
    QUEUES_PER_TOPIC_MAX <= i32::MAX as usize,
    "QUEUEID is an i32"
);

// ---------------------------------------------------------------------------------------
// Shards
// ---------------------------------------------------------------------------------------

/// Shards (pinned event-loop threads) in one broker process: one per core, and ringmq is
/// designed for 64 cores, so 256 leaves room without letting a typo start 60,000 threads.
pub const SHARDS_MAX: usize = 256;
/// Capacity, in messages, of each bounded inter-shard channel (mailbox).
pub const MAILBOX_MESSAGES_MAX: usize = 4096;

const _: () = assert!(
    SHARDS_MAX <= route::SHARDS_MAX,
    "placement entries name the shard"
);
const _: () = assert!(MAILBOX_MESSAGES_MAX >= 1);

// ---------------------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------------------

/// Smallest CommitLog segment: the largest record plus the BLANK that may end a segment.
pub const SEGMENT_BYTES_MIN: u64 = (record::RECORD_BYTES_MAX + record::BLANK_BYTES) as u64;
/// Largest CommitLog segment (`mappedFileSizeCommitLog`; RocketMQ's default is 1 GiB).
pub const SEGMENT_BYTES_MAX: u64 = 64 * GIB;
/// Largest page-cache window kept behind a shard's durable log end
/// (`commitLogCacheKeepBytes`).
pub const COMMIT_LOG_CACHE_KEEP_BYTES_MAX: u64 = 1024 * GIB;
/// Largest distance zeros are written ahead of a shard's appends (`commitLogPrewriteBytes`;
/// 256 KiB by default; past the CPU's cache the appends' copy is cold again).
pub const COMMIT_LOG_PREWRITE_BYTES_MAX: u64 = 64 * MIB as u64;
/// Largest ConsumeQueue file (`mappedFileSizeConsumeQueue`; 6,000,000 bytes by default).
pub const CONSUME_QUEUE_FILE_BYTES_MAX: u64 = GIB;
/// Largest replication batch (`haTransferBatchSize`; 32 KiB by default).
pub const HA_TRANSFER_BATCH_BYTES_MAX: usize = FRAME_BODY_BYTES_MAX;
/// Most log bytes in one HA_TRANSFER when `haTransferBatchSize` is not set.
pub const HA_TRANSFER_BATCH_BYTES_DEFAULT: usize = 1 << 20;
/// Delay levels (`messageDelayLevel`; RocketMQ ships 18).
pub const DELAY_LEVELS_MAX: usize = 64;
/// Recalled scheduled messages one shard holds before their due times pass (8 bytes of
/// memory each, plus the set's overhead); past it a recall is answered LIMIT_EXCEEDED.
pub const RECALLS_PENDING_PER_SHARD_MAX: usize = 1_000_000;

const _: () = assert!(SEGMENT_BYTES_MIN < SEGMENT_BYTES_MAX);
const _: () = assert!(1 << 30 >= SEGMENT_BYTES_MIN, "the 1 GiB default is allowed");
const _: () = assert!(HA_TRANSFER_BATCH_BYTES_MAX >= record::RECORD_BYTES_MAX);
const _: () = assert!(HA_TRANSFER_BATCH_BYTES_DEFAULT <= HA_TRANSFER_BATCH_BYTES_MAX);

// ---------------------------------------------------------------------------------------
// Name server
// ---------------------------------------------------------------------------------------

/// Longest cluster, broker or host name the name server keeps.
pub const NAME_BYTES_MAX: usize = 255;
/// Brokers (cluster, broker name, broker id triples) one name server holds.
pub const NAMESRV_BROKERS_MAX: usize = 4096;
/// Topics one name server holds across all brokers.
pub const NAMESRV_TOPICS_MAX: usize = 1_000_000;
/// Name server addresses one broker or client is configured with.
pub const NAMESRV_ADDRS_MAX: usize = 64;
/// Entries in the name server's KV store, all namespaces together.
pub const NAMESRV_KV_ENTRIES_MAX: usize = 65_536;
/// Longest KV namespace or key.
pub const NAMESRV_KV_KEY_BYTES_MAX: usize = 255;
/// Longest KV value.
pub const NAMESRV_KV_VALUE_BYTES_MAX: usize = 64 * KIB;

const _: () = assert!(NAMESRV_TOPICS_MAX >= TOPICS_PER_BROKER_MAX);
const _: () = assert!(NAME_BYTES_MAX >= TOPIC_NAME_BYTES_MAX);
const _: () = assert!(NAMESRV_KV_VALUE_BYTES_MAX <= FRAME_BODY_BYTES_MAX);

// ---------------------------------------------------------------------------------------
// Topic and group names
// ---------------------------------------------------------------------------------------

/// Topics the broker and RocketMQ's tools reserve (`TopicValidator`): clients may not
/// create them. `rmq_sys_`-prefixed names are reserved as well.
pub const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC",
];
/// Prefix of every reserved system topic.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// Why a topic or group name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopicNameError {
    /// The name is empty.
    #[error("{what} name is empty")]
    Empty { what: &'static str },
    /// The name is longer than its maximum.
    #[error("{what} name is {len} bytes, over the maximum of {max}")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// The name holds a character outside `[A-Za-z0-9_%|-]`.
    #[error("{what} name has {ch:?} at byte {position}; allowed: A-Z a-z 0-9 _ % | -")]
    BadChar {
        what: &'static str,
        ch: char,
        position: usize,
    },
    /// The name is a reserved system topic.
    #[error("topic {name:?} is reserved for the system")]
    Reserved { name: String },
}

/// Checks a topic a client creates or sends to: 1..=127 bytes of `[A-Za-z0-9_%|-]` (so it
/// is a safe directory name: no `/`, `.`, NUL or space) and not a reserved system topic.
pub fn validate_topic_name(name: &str) -> Result<(), TopicNameError> {
    validate_topic_format(name)?;
    if is_system_topic(name) {
        return Err(TopicNameError::Reserved {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Checks length and charset only: for topics the broker itself creates (system, retry and
/// dead-letter topics) and for route lookups.
pub fn validate_topic_format(name: &str) -> Result<(), TopicNameError> {
    validate_chars("topic", name, TOPIC_NAME_BYTES_MAX)
}

/// Checks a consumer or producer group name: 1..=`GROUP_NAME_BYTES_MAX` bytes of the topic
/// charset, so its retry and dead-letter topics are valid topic names.
pub fn validate_group_name(name: &str) -> Result<(), TopicNameError> {
    validate_chars("group", name, GROUP_NAME_BYTES_MAX)
}

/// Whether `name` is a reserved system topic.
pub fn is_system_topic(name: &str) -> bool {
    SYSTEM_TOPICS.contains(&name) || name.starts_with(SYSTEM_TOPIC_PREFIX)
}

fn validate_chars(what: &'static str, name: &str, max: usize) -> Result<(), TopicNameError> {
    if name.is_empty() {
        return Err(TopicNameError::Empty { what });
    }
    if name.len() > max {
        return Err(TopicNameError::TooLong {
            what,
            len: name.len(),
            max,
        });
    }
    match name.char_indices().find(|&(_, c)| !is_name_char(c)) {
        Some((position, ch)) => Err(TopicNameError::BadChar { what, ch, position }),
        None => Ok(()),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '%' | '|' | '-')
}

/// The metrics endpoint (`crate::metrics::http`): connections served at once (more are
/// closed at accept), the largest request head read (larger = 431), and how long one
/// connection may take to send its request head (a silent or trickling client is closed).
pub const METRICS_CONNECTIONS_MAX: usize = 8;
pub const METRICS_REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;
pub const METRICS_REQUEST_TIMEOUT_MS: u64 = 5_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_rocketmq_style_names() {
        for name in [
            "TopicTest",
            "a",
            "order-events_v2",
            "%RETRY%group",
            "%DLQ%g",
            "a|b",
        ] {
            assert_eq!(validate_topic_name(name), Ok(()), "{name}");
        }
        assert_eq!(validate_topic_name(&"x".repeat(127)), Ok(()));
    }

    #[test]
    fn rejects_length() {
        assert_eq!(
            validate_topic_name(""),
            Err(TopicNameError::Empty { what: "topic" })
        );
        assert_eq!(
            validate_topic_name(&"x".repeat(128)),
            Err(TopicNameError::TooLong {
                what: "topic",
                len: 128,
                max: 127
            })
        );
    }

    #[test]
    fn rejects_path_like_and_odd_characters() {
        for (name, ch, position) in [
            ("a/b", '/', 1),
            ("..", '.', 0),
            ("a.b", '.', 1),
            ("a\0", '\0', 1),
            ("a b", ' ', 1),
            ("é", 'é', 0),
            ("a*", '*', 1),
        ] {
            assert_eq!(
                validate_topic_name(name),
                Err(TopicNameError::BadChar {
                    what: "topic",
                    ch,
                    position
                }),
                "{name:?}"
            );
        }
    }

    #[test]
    fn rejects_reserved_but_format_check_allows_them() {
        for name in ["TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"] {
            assert!(matches!(
                validate_topic_name(name),
                Err(TopicNameError::Reserved { .. })
            ));
            assert_eq!(validate_topic_format(name), Ok(()));
        }
        assert!(!is_system_topic("rmq_sy"));
    }

    #[test]
    fn group_names_leave_room_for_retry_and_dlq_topics() {
        let group = "g".repeat(GROUP_NAME_BYTES_MAX);
        assert_eq!(validate_group_name(&group), Ok(()));
        assert_eq!(
            validate_topic_format(&format!("{RETRY_TOPIC_PREFIX}{group}")),
            Ok(())
        );
        assert!(validate_group_name(&format!("{group}g")).is_err());
        assert!(validate_group_name("a/b").is_err());
    }

    #[test]
    fn error_messages_name_the_problem() {
        let err = validate_topic_name("a/b").unwrap_err().to_string();
        assert_eq!(
            err,
            "topic name has '/' at byte 1; allowed: A-Z a-z 0-9 _ % | -"
        );
    }
}
