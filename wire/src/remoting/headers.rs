//! RocketMQ's custom command headers, one struct each, with RocketMQ's exact `extFields` key
//! names (`remoting/protocol/header/*.java` at apache/rocketmq 8fc57f1). Every struct reads
//! ([`FromExt`]) and writes ([`ToExt`]) its keys, so the broker and a test client share one
//! definition; `decode(encode(x)) == x` holds for every header.
//!
//! Field types follow the Java field ([`super::ext`] has the parsing rules): a `@CFNotNull`
//! field is required (absent is [`WireError::MissingField`](crate::WireError::MissingField)),
//! a nullable one is an `Option`, and a `Boolean` that Java reads as false when absent is a
//! plain `bool`. Keys a header does not list are ignored on read.
//!
//! Java names kept as they are, typos included: `clientID` (UNREGISTER_CLIENT),
//! `indexLastUpdatePhyoffset` (QUERY_MESSAGE), `proxyFrowardClientId` (PULL_MESSAGE). The
//! broker name of a request travels as `bname` (from `RpcRequestHeader`), except in
//! SEND_MESSAGE_V2 where it is `n`.

use super::ext::{ExtFields, ExtValue, FromExt, ToExt};
use crate::error::Result;

/// Declares a header struct whose fields map one-to-one to `extFields` keys.
macro_rules! ext_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $key:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The `extFields` keys of this header, in declaration order.
            pub const KEYS: &'static [&'static str] = &[$($key),*];
        }

        impl FromExt for $name {
            #[allow(unused_variables)]
            fn from_ext(ext: &ExtFields) -> Result<Self> {
                Ok(Self { $( $field: <$ty as ExtValue>::get(ext, $key)?, )* })
            }
        }

        impl ToExt for $name {
            fn to_ext(&self) -> ExtFields {
                let mut ext = ExtFields::with_capacity(24 * Self::KEYS.len(), Self::KEYS.len());
                self.put_ext(&mut ext);
                ext
            }

            #[allow(unused_variables)]
            fn put_ext(&self, ext: &mut ExtFields) {
                $( ExtValue::put(&self.$field, ext, $key); )*
            }
        }
    };
}

/// RocketMQ's `MessageSysFlag`: the `sysFlag` of a send and of a stored record, and the
/// `commitOrRollback` of END_TRANSACTION.
pub mod message_sys_flag {
    pub const COMPRESSED_FLAG: i32 = 0x1;
    pub const MULTI_TAGS_FLAG: i32 = 0x1 << 1;
    /// Not a transaction message (also "unknown" in END_TRANSACTION).
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
    pub const BORNHOST_V6_FLAG: i32 = 0x1 << 4;
    pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x1 << 5;
    pub const NEED_UNWRAP_FLAG: i32 = 0x1 << 6;
    pub const INNER_BATCH_FLAG: i32 = 0x1 << 7;
    pub const COMPRESSION_LZ4_TYPE: i32 = 0x1 << 8;
    pub const COMPRESSION_ZSTD_TYPE: i32 = 0x2 << 8;
    pub const COMPRESSION_ZLIB_TYPE: i32 = 0x3 << 8;
    pub const COMPRESSION_TYPE_COMPARATOR: i32 = 0x7 << 8;

    /// The transaction bits of `flag` (`MessageSysFlag.getTransactionValue`): one of
    /// `TRANSACTION_{NOT,PREPARED,COMMIT,ROLLBACK}_TYPE`.
    pub const fn transaction_value(flag: i32) -> i32 {
        flag & TRANSACTION_ROLLBACK_TYPE
    }

    /// `flag` with its transaction bits replaced by `kind`
    /// (`MessageSysFlag.resetTransactionValue`).
    pub const fn reset_transaction_value(flag: i32, kind: i32) -> i32 {
        (flag & !TRANSACTION_ROLLBACK_TYPE) | kind
    }
}

/// RocketMQ's `PullSysFlag`: the `sysFlag` of PULL_MESSAGE and LITE_PULL_MESSAGE.
pub mod pull_sys_flag {
    /// The request carries `commitOffset` for the broker to store.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may hold the pull for `suspendTimeoutMillis` (long polling).
    pub const SUSPEND: i32 = 0x1 << 1;
    /// The request carries `subscription`/`expressionType`; without it the broker uses the
    /// group's subscription from its last heartbeat.
    pub const SUBSCRIPTION: i32 = 0x1 << 2;
    pub const CLASS_FILTER: i32 = 0x1 << 3;
    pub const LITE_PULL_MESSAGE: i32 = 0x1 << 4;
}

ext_header! {
    /// SEND_MESSAGE (10), SEND_BATCH_MESSAGE (320) and, through
    /// [`from_ext_v2`](Self::from_ext_v2), SEND_MESSAGE_V2 (310).
    pub struct SendMessageRequestHeader {
        pub producer_group: String = "producerGroup",
        pub topic: String = "topic",
        /// `TBW102`: the topic a new topic's route is copied from (autoCreateTopic).
        pub default_topic: String = "defaultTopic",
        pub default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// The target queue; negative asks the broker to choose (RocketMQ picks at random).
        pub queue_id: i32 = "queueId",
        /// [`message_sys_flag`] bits.
        pub sys_flag: i32 = "sysFlag",
        pub born_timestamp: i64 = "bornTimestamp",
        /// The application's message flag, stored as is.
        pub flag: i32 = "flag",
        /// Properties in RocketMQ's text form ([`crate::properties`]).
        pub properties: Option<String> = "properties",
        /// Java reads absent as 0.
        pub reconsume_times: Option<i32> = "reconsumeTimes",
        pub unit_mode: bool = "unitMode",
        pub batch: bool = "batch",
        pub max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        pub broker_name: Option<String> = "bname",
    }
}

/// SEND_MESSAGE_V2's one-letter keys, in [`SendMessageRequestHeader`] field order
/// (`SendMessageRequestHeaderV2`: `l` is maxReconsumeTimes, `n` the broker name).
pub const SEND_V2_KEYS: [(&str, &str); 14] = [
    ("a", "producerGroup"),
    ("b", "topic"),
    ("c", "defaultTopic"),
    ("d", "defaultTopicQueueNums"),
    ("e", "queueId"),
    ("f", "sysFlag"),
    ("g", "bornTimestamp"),
    ("h", "flag"),
    ("i", "properties"),
    ("j", "reconsumeTimes"),
    ("k", "unitMode"),
    ("l", "maxReconsumeTimes"),
    ("m", "batch"),
    ("n", "bname"),
];

impl SendMessageRequestHeader {
    /// Reads SEND_MESSAGE_V2's short keys (`a`..`n`). A V2 request without `n` falls back
    /// to `bname`, which the Java client also sets.
    pub fn from_ext_v2(ext: &ExtFields) -> Result<Self> {
        Ok(Self {
            producer_group: ExtValue::get(ext, "a")?,
            topic: ExtValue::get(ext, "b")?,
            default_topic: ExtValue::get(ext, "c")?,
            default_topic_queue_nums: ExtValue::get(ext, "d")?,
            queue_id: ExtValue::get(ext, "e")?,
            sys_flag: ExtValue::get(ext, "f")?,
            born_timestamp: ExtValue::get(ext, "g")?,
            flag: ExtValue::get(ext, "h")?,
            properties: ExtValue::get(ext, "i")?,
            reconsume_times: ExtValue::get(ext, "j")?,
            unit_mode: ExtValue::get(ext, "k")?,
            max_reconsume_times: ExtValue::get(ext, "l")?,
            batch: ExtValue::get(ext, "m")?,
            broker_name: match <Option<String>>::get(ext, "n")? {
                Some(name) => Some(name),
                None => ExtValue::get(ext, "bname")?,
            },
        })
    }

    /// Writes SEND_MESSAGE_V2's short keys (`a`..`n`).
    pub fn to_ext_v2(&self) -> ExtFields {
        let mut ext = ExtFields::new();
        self.producer_group.put(&mut ext, "a");
        self.topic.put(&mut ext, "b");
        self.default_topic.put(&mut ext, "c");
        self.default_topic_queue_nums.put(&mut ext, "d");
        self.queue_id.put(&mut ext, "e");
        self.sys_flag.put(&mut ext, "f");
        self.born_timestamp.put(&mut ext, "g");
        self.flag.put(&mut ext, "h");
        self.properties.put(&mut ext, "i");
        self.reconsume_times.put(&mut ext, "j");
        self.unit_mode.put(&mut ext, "k");
        self.max_reconsume_times.put(&mut ext, "l");
        self.batch.put(&mut ext, "m");
        self.broker_name.put(&mut ext, "n");
        ext
    }
}

ext_header! {
    /// The answer to SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE.
    pub struct SendMessageResponseHeader {
        /// The offset message id (a batch's ids comma-joined).
        pub msg_id: String = "msgId",
        pub queue_id: i32 = "queueId",
        /// The ConsumeQueue offset of the (first) message.
        pub queue_offset: i64 = "queueOffset",
        pub transaction_id: Option<String> = "transactionId",
        pub batch_uniq_id: Option<String> = "batchUniqId",
        /// 5.x RECALL_MESSAGE handle.
        pub recall_handle: Option<String> = "recallHandle",
    }
}

ext_header! {
    /// PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): the same Java class.
    pub struct PullMessageRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub queue_offset: i64 = "queueOffset",
        pub max_msg_nums: i32 = "maxMsgNums",
        /// [`pull_sys_flag`] bits.
        pub sys_flag: i32 = "sysFlag",
        /// Meaningful when `sys_flag` has [`pull_sys_flag::COMMIT_OFFSET`].
        pub commit_offset: i64 = "commitOffset",
        pub suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        /// The filter expression; meaningful with [`pull_sys_flag::SUBSCRIPTION`].
        pub subscription: Option<String> = "subscription",
        pub sub_version: i64 = "subVersion",
        /// `TAG` or `SQL92`; absent means `TAG`.
        pub expression_type: Option<String> = "expressionType",
        pub max_msg_bytes: Option<i32> = "maxMsgBytes",
        pub request_source: Option<i32> = "requestSource",
        /// Sic: RocketMQ spells it `Froward`.
        pub proxy_forward_client_id: Option<String> = "proxyFrowardClientId",
        pub broker_name: Option<String> = "bname",
    }
}

/// LITE_PULL_MESSAGE (361) uses PULL_MESSAGE's header.
pub type LitePullMessageRequestHeader = PullMessageRequestHeader;

impl PullMessageRequestHeader {
    pub fn has_commit_offset(&self) -> bool {
        self.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0
    }
    pub fn has_suspend(&self) -> bool {
        self.sys_flag & pull_sys_flag::SUSPEND != 0
    }
    pub fn has_subscription(&self) -> bool {
        self.sys_flag & pull_sys_flag::SUBSCRIPTION != 0
    }
    pub fn has_class_filter(&self) -> bool {
        self.sys_flag & pull_sys_flag::CLASS_FILTER != 0
    }
    pub fn has_lite_pull(&self) -> bool {
        self.sys_flag & pull_sys_flag::LITE_PULL_MESSAGE != 0
    }
}

ext_header! {
    /// The answer to a pull, on every status (PULL_NOT_FOUND and PULL_OFFSET_MOVED too: the
    /// clients read the four offsets before they look at the code).
    pub struct PullMessageResponseHeader {
        /// 0 = the master; a slave id when the client should read from a slave.
        pub suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        pub next_begin_offset: i64 = "nextBeginOffset",
        pub min_offset: i64 = "minOffset",
        pub max_offset: i64 = "maxOffset",
        pub offset_delta: Option<i64> = "offsetDelta",
        pub topic_sys_flag: Option<i32> = "topicSysFlag",
        pub group_sys_flag: Option<i32> = "groupSysFlag",
        pub forbidden_type: Option<i32> = "forbiddenType",
    }
}

ext_header! {
    /// QUERY_CONSUMER_OFFSET (14).
    pub struct QueryConsumerOffsetRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        /// For a group with no stored offset, RocketMQ answers offset 0 when the queue's
        /// min offset is 0 and its first message is still in memory, else QUERY_NOT_FOUND;
        /// `Some(false)` asks for QUERY_NOT_FOUND always. Absent acts as true.
        pub set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// UPDATE_CONSUMER_OFFSET (15), often oneway.
    pub struct UpdateConsumerOffsetRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub commit_offset: i64 = "commitOffset",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        /// Java: absent means true (only offsets the slaves have too, in a dledger group).
        pub committed: Option<bool> = "committed",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// GET_MIN_OFFSET (31).
    pub struct GetMinOffsetRequestHeader {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29).
    pub struct SearchOffsetRequestHeader {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        /// Milliseconds since the epoch.
        pub timestamp: i64 = "timestamp",
        /// `LOWER` or `UPPER` (any case, RocketMQ `BoundaryType.getType`); absent or
        /// anything else is LOWER.
        pub boundary_type: Option<String> = "boundaryType",
        pub broker_name: Option<String> = "bname",
    }
}

impl SearchOffsetRequestHeader {
    /// Whether the search wants the last offset stored at or before `timestamp` (UPPER)
    /// rather than the first at or after it (LOWER, the default).
    pub fn is_upper(&self) -> bool {
        self.boundary_type
            .as_deref()
            .is_some_and(|b| b.eq_ignore_ascii_case("upper"))
    }
}

ext_header! {
    /// GET_EARLIEST_MSG_STORETIME (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// The answer to QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET and
    /// SEARCH_OFFSET_BY_TIMESTAMP: RocketMQ's four response headers are this one field.
    pub struct OffsetResponseHeader {
        pub offset: i64 = "offset",
    }
}

/// QUERY_CONSUMER_OFFSET's answer.
pub type QueryConsumerOffsetResponseHeader = OffsetResponseHeader;
/// GET_MAX_OFFSET's answer.
pub type GetMaxOffsetResponseHeader = OffsetResponseHeader;
/// GET_MIN_OFFSET's answer.
pub type GetMinOffsetResponseHeader = OffsetResponseHeader;
/// SEARCH_OFFSET_BY_TIMESTAMP's answer.
pub type SearchOffsetResponseHeader = OffsetResponseHeader;

ext_header! {
    /// The answer to GET_EARLIEST_MSG_STORETIME.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Milliseconds since the epoch.
        pub timestamp: i64 = "timestamp",
    }
}

ext_header! {
    /// CONSUMER_SEND_MSG_BACK (36): a consumer returns a message it failed to consume.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// The CommitLog offset of the message.
        pub offset: i64 = "offset",
        pub group: String = "group",
        /// -1 sends it straight to `%DLQ%`; 0 lets the broker pick 3 + reconsume times.
        pub delay_level: i32 = "delayLevel",
        pub origin_msg_id: Option<String> = "originMsgId",
        pub origin_topic: Option<String> = "originTopic",
        pub unit_mode: bool = "unitMode",
        pub max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// END_TRANSACTION (37), oneway: the producer's decision on a half message.
    pub struct EndTransactionRequestHeader {
        pub topic: Option<String> = "topic",
        pub producer_group: String = "producerGroup",
        /// The half message's ConsumeQueue offset.
        pub tran_state_table_offset: i64 = "tranStateTableOffset",
        /// The half message's CommitLog offset.
        pub commit_log_offset: i64 = "commitLogOffset",
        /// [`message_sys_flag::TRANSACTION_COMMIT_TYPE`], `_ROLLBACK_TYPE` or `_NOT_TYPE`
        /// (unknown: leave it to the check-back).
        pub commit_or_rollback: i32 = "commitOrRollback",
        /// True when this answers a CHECK_TRANSACTION_STATE.
        pub from_transaction_check: bool = "fromTransactionCheck",
        /// The half message's id (the client sends the offset id or the unique key).
        pub msg_id: String = "msgId",
        pub transaction_id: Option<String> = "transactionId",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// RECALL_MESSAGE (370): withdraw a scheduled message by its send's `recallHandle`.
    pub struct RecallMessageRequestHeader {
        pub producer_group: Option<String> = "producerGroup",
        pub topic: String = "topic",
        pub recall_handle: String = "recallHandle",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// The answer to RECALL_MESSAGE.
    pub struct RecallMessageResponseHeader {
        /// The recalled message's id.
        pub msg_id: String = "msgId",
    }
}

ext_header! {
    /// CHECK_TRANSACTION_STATE (39), broker -> producer, oneway; the body is the half
    /// message in the stored record layout.
    pub struct CheckTransactionStateRequestHeader {
        pub topic: Option<String> = "topic",
        pub tran_state_table_offset: i64 = "tranStateTableOffset",
        pub commit_log_offset: i64 = "commitLogOffset",
        /// The unique key (`UNIQ_KEY`) of the half message.
        pub msg_id: Option<String> = "msgId",
        pub transaction_id: Option<String> = "transactionId",
        pub offset_msg_id: Option<String> = "offsetMsgId",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker -> consumer, oneway: rebalance now.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> requester; the body is the reply's
    /// body (compressed when `sysFlag` says so).
    pub struct ReplyMessageRequestHeader {
        pub producer_group: String = "producerGroup",
        pub topic: String = "topic",
        pub default_topic: String = "defaultTopic",
        pub default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        pub queue_id: i32 = "queueId",
        pub sys_flag: i32 = "sysFlag",
        pub born_timestamp: i64 = "bornTimestamp",
        pub flag: i32 = "flag",
        pub properties: Option<String> = "properties",
        pub reconsume_times: Option<i32> = "reconsumeTimes",
        pub unit_mode: bool = "unitMode",
        /// `host:port` of the replier.
        pub born_host: String = "bornHost",
        /// `host:port` of the broker.
        pub store_host: String = "storeHost",
        pub store_timestamp: i64 = "storeTimestamp",
    }
}

ext_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38); the answer is a JSON body
    /// ([`super::body::GetConsumerListByGroupResponseBody`]) with no header fields.
    pub struct GetConsumerListByGroupRequestHeader {
        pub consumer_group: String = "consumerGroup",
    }
}

ext_header! {
    /// UNREGISTER_CLIENT (35).
    pub struct UnregisterClientRequestHeader {
        /// Sic: `clientID`, capital D, unlike `clientId` elsewhere.
        pub client_id: String = "clientID",
        pub producer_group: Option<String> = "producerGroup",
        pub consumer_group: Option<String> = "consumerGroup",
    }
}

ext_header! {
    /// QUERY_MESSAGE (12): messages by key from the IndexFile.
    pub struct QueryMessageRequestHeader {
        pub topic: String = "topic",
        pub key: String = "key",
        pub max_num: i32 = "maxNum",
        pub begin_timestamp: i64 = "beginTimestamp",
        pub end_timestamp: i64 = "endTimestamp",
    }
}

ext_header! {
    /// The answer to QUERY_MESSAGE; the body is the found records back to back.
    pub struct QueryMessageResponseHeader {
        pub index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        /// Sic: lower-case `o` in `Phyoffset`.
        pub index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

ext_header! {
    /// VIEW_MESSAGE_BY_ID (33): the record at a CommitLog offset (from an offset message
    /// id); the answer's body is the record, with no header fields.
    pub struct ViewMessageRequestHeader {
        pub topic: Option<String> = "topic",
        pub offset: i64 = "offset",
    }
}

ext_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105), to the name server.
    pub struct GetRouteInfoRequestHeader {
        pub topic: String = "topic",
        /// 5.x clients ask for quoted integer keys; ringmq always sends standard JSON.
        pub accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

ext_header! {
    /// HEART_BEAT (34), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42) and every request whose
    /// Java header has no fields of its own: everything is in the body.
    pub struct EmptyHeader {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireError;

    fn ext(pairs: &[(&str, &str)]) -> ExtFields {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn java_send_v1() -> ExtFields {
        // What the Java 4.9 client sends for a plain sync send (plus fields it adds).
        ext(&[
            ("producerGroup", "pg"),
            ("topic", "T"),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "3"),
            ("sysFlag", "0"),
            ("bornTimestamp", "1700000000000"),
            ("flag", "0"),
            ("properties", "TAGS\u{1}a\u{2}"),
            ("reconsumeTimes", "0"),
            ("unitMode", "false"),
            ("batch", "false"),
            ("bname", "broker-a"),
            ("lo", "false"),
            ("ns", "x"),
        ])
    }

    #[test]
    fn send_v1_and_v2_read_the_same_struct() {
        let v1 = SendMessageRequestHeader::from_ext(&java_send_v1()).expect("v1");
        assert_eq!(v1.topic, "T");
        assert_eq!(v1.queue_id, 3);
        assert_eq!(v1.born_timestamp, 1_700_000_000_000);
        assert_eq!(v1.broker_name.as_deref(), Some("broker-a"));
        assert_eq!(v1.max_reconsume_times, None);
        let short = v1.to_ext_v2();
        assert_eq!(short.get("b"), Some("T"));
        assert_eq!(
            SendMessageRequestHeader::from_ext_v2(&short),
            Ok(v1.clone())
        );
        // Keys of the V2 table are the V1 keys of the same fields.
        let long = v1.to_ext();
        for (short_key, long_key) in SEND_V2_KEYS {
            assert_eq!(short.get(short_key), long.get(long_key), "{short_key}");
        }
    }

    #[test]
    fn v2_falls_back_to_bname() {
        let mut short = SendMessageRequestHeader::from_ext(&java_send_v1())
            .expect("v1")
            .to_ext_v2();
        short.remove("n");
        short.insert("bname", "b2");
        let h = SendMessageRequestHeader::from_ext_v2(&short).expect("v2");
        assert_eq!(h.broker_name.as_deref(), Some("b2"));
    }

    #[test]
    fn required_fields_are_required() {
        for key in SendMessageRequestHeader::KEYS {
            let mut e = java_send_v1();
            e.remove(key);
            let got = SendMessageRequestHeader::from_ext(&e);
            let optional = [
                "properties",
                "reconsumeTimes",
                "unitMode",
                "batch",
                "maxReconsumeTimes",
                "bname",
            ];
            if optional.contains(key) {
                assert!(got.is_ok(), "{key}");
            } else {
                assert_eq!(got, Err(WireError::MissingField { field: key }), "{key}");
            }
        }
        let mut e = java_send_v1();
        e.insert("queueId", "three");
        assert!(matches!(
            SendMessageRequestHeader::from_ext(&e),
            Err(WireError::BadField {
                field: "queueId",
                ..
            })
        ));
    }

    #[test]
    fn pull_flags() {
        let h = PullMessageRequestHeader {
            sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
            ..Default::default()
        };
        assert!(h.has_suspend() && h.has_subscription());
        assert!(!h.has_commit_offset() && !h.has_class_filter() && !h.has_lite_pull());
        let back = PullMessageRequestHeader::from_ext(&h.to_ext()).expect("round trip");
        assert_eq!(back, h);
        assert!(!h.to_ext().contains_key("subscription"));
    }

    #[test]
    fn transaction_flags() {
        use message_sys_flag::*;
        assert_eq!(TRANSACTION_COMMIT_TYPE, 8);
        assert_eq!(TRANSACTION_ROLLBACK_TYPE, 12);
        assert_eq!(TRANSACTION_PREPARED_TYPE, 4);
        let f = TRANSACTION_PREPARED_TYPE | COMPRESSED_FLAG;
        assert_eq!(transaction_value(f), TRANSACTION_PREPARED_TYPE);
        assert_eq!(
            reset_transaction_value(f, TRANSACTION_COMMIT_TYPE),
            TRANSACTION_COMMIT_TYPE | COMPRESSED_FLAG
        );
        let end = EndTransactionRequestHeader::from_ext(&ext(&[
            ("producerGroup", "pg"),
            ("tranStateTableOffset", "7"),
            ("commitLogOffset", "4096"),
            ("commitOrRollback", "8"),
            ("fromTransactionCheck", "TRUE"),
            ("msgId", "AC1100..."),
        ]))
        .expect("end transaction");
        assert!(end.from_transaction_check);
        assert_eq!(end.commit_or_rollback, TRANSACTION_COMMIT_TYPE);
        assert_eq!(end.transaction_id, None);
    }

    #[test]
    fn odd_java_names() {
        let u = UnregisterClientRequestHeader {
            client_id: "c".into(),
            ..Default::default()
        };
        assert!(u.to_ext().contains_key("clientID"));
        let q = QueryMessageResponseHeader::default().to_ext();
        assert!(q.contains_key("indexLastUpdatePhyoffset"));
        assert!(EmptyHeader::default().to_ext().is_empty());
        assert_eq!(EmptyHeader::from_ext(&java_send_v1()), Ok(EmptyHeader {}));
    }

    #[test]
    fn search_boundary() {
        let mut h = SearchOffsetRequestHeader::default();
        assert!(!h.is_upper());
        h.boundary_type = Some("UPPER".into());
        assert!(h.is_upper());
        h.boundary_type = Some("lower".into());
        assert!(!h.is_upper());
    }
}

ext_header! {
    /// POP_MESSAGE (200050), RocketMQ 5.
    pub struct PopMessageRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        /// -1: any queue of the broker.
        pub queue_id: i32 = "queueId",
        pub max_msg_nums: i32 = "maxMsgNums",
        pub invisible_time: i64 = "invisibleTime",
        pub poll_time: i64 = "pollTime",
        pub born_time: i64 = "bornTime",
        /// `ConsumeInitMode`: 0 = MIN, 1 = MAX.
        pub init_mode: i32 = "initMode",
        pub exp_type: Option<String> = "expType",
        pub exp: Option<String> = "exp",
        pub order: Option<bool> = "order",
        pub attempt_id: Option<String> = "attemptId",
    }
}

ext_header! {
    /// The answer to POP_MESSAGE. Without `startOffsetInfo`/`msgOffsetInfo` a client makes
    /// each message's receipt handle from the first popped offset of its queue.
    pub struct PopMessageResponseHeader {
        pub pop_time: i64 = "popTime",
        pub invisible_time: i64 = "invisibleTime",
        pub revive_qid: i32 = "reviveQid",
        pub rest_num: i64 = "restNum",
        pub start_offset_info: Option<String> = "startOffsetInfo",
        pub msg_offset_info: Option<String> = "msgOffsetInfo",
        pub order_count_info: Option<String> = "orderCountInfo",
    }
}

ext_header! {
    /// ACK_MESSAGE (200051).
    pub struct AckMessageRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub extra_info: String = "extraInfo",
        pub offset: i64 = "offset",
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053).
    pub struct ChangeInvisibleTimeRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub extra_info: String = "extraInfo",
        pub offset: i64 = "offset",
        pub invisible_time: i64 = "invisibleTime",
    }
}

ext_header! {
    /// The answer to CHANGE_MESSAGE_INVISIBLETIME: the message's new checkpoint.
    pub struct ChangeInvisibleTimeResponseHeader {
        pub pop_time: i64 = "popTime",
        pub invisible_time: i64 = "invisibleTime",
        pub revive_qid: i32 = "reviveQid",
    }
}

// The admin requests' headers (topics, groups, offsets, connections, broker config).
mod admin;
pub use admin::*;
