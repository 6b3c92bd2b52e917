//! The JSON bodies of RocketMQ's admin requests and answers, with RocketMQ's field names:
//! topic configs (`TopicConfig`, `TopicConfigSerializeWrapper`), subscription groups
//! (`SubscriptionGroupConfig`, `SubscriptionGroupWrapper`), `KVTable`, `GroupList`,
//! `TopicList`, connections (`ConsumerConnection`, `ProducerConnection`), and the three
//! tables keyed by a queue (`TopicStatsTable`, `ConsumeStats`, `ResetOffsetBody`).
//!
//! A table keyed by a queue is written as RocketMQ's broker writes it (fastjson): the key is
//! the queue itself as a JSON object, `{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}`.
//! That is not standard JSON; RocketMQ's clients (Java's fastjson, the Rust port's
//! normalizer) read it, and [`queue_keyed`] is the one place that writes it.
//!
//! Every field a RocketMQ client's decoder requires is written, also when empty or zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{lenient, JsonBody, MessageQueue, SubscriptionData};

/// RocketMQ's `DataVersion`: when a table last changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DataVersion {
    pub state_version: i64,
    pub timestamp: i64,
    pub counter: i64,
}

/// RocketMQ's `TopicConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(deserialize_with = "lenient::string")]
    pub topic_name: String,
    #[serde(deserialize_with = "lenient::i32")]
    pub read_queue_nums: i32,
    #[serde(deserialize_with = "lenient::i32")]
    pub write_queue_nums: i32,
    #[serde(deserialize_with = "lenient::i32")]
    pub perm: i32,
    /// `SINGLE_TAG` (RocketMQ's only filter type in use).
    #[serde(deserialize_with = "lenient::string")]
    pub topic_filter_type: String,
    #[serde(deserialize_with = "lenient::i32")]
    pub topic_sys_flag: i32,
    #[serde(deserialize_with = "lenient::bool")]
    pub order: bool,
    pub attributes: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            topic_name: String::new(),
            read_queue_nums: 0,
            write_queue_nums: 0,
            perm: 6,
            topic_filter_type: TOPIC_FILTER_TYPE_SINGLE_TAG.to_owned(),
            topic_sys_flag: 0,
            order: false,
            attributes: BTreeMap::new(),
        }
    }
}

impl JsonBody for TopicConfig {
    const WHAT: &'static str = "TopicConfig";
}

/// RocketMQ's `TopicFilterType.SINGLE_TAG`.
pub const TOPIC_FILTER_TYPE_SINGLE_TAG: &str = "SINGLE_TAG";

/// GET_ALL_TOPIC_CONFIG's answer (`TopicConfigAndMappingSerializeWrapper`: the topic table
/// and the static-topic mapping tables, which ringmq leaves empty).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    pub data_version: DataVersion,
    pub topic_queue_mapping_info_map: BTreeMap<String, serde_json::Value>,
    pub topic_queue_mapping_detail_map: BTreeMap<String, serde_json::Value>,
    pub mapping_data_version: DataVersion,
}

impl JsonBody for TopicConfigSerializeWrapper {
    const WHAT: &'static str = "TopicConfigSerializeWrapper";
}

/// RocketMQ's `SubscriptionGroupConfig`: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body and the
/// entries of GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer. Absent fields take RocketMQ's
/// defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    #[serde(deserialize_with = "lenient::string")]
    pub group_name: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub consume_enable: bool,
    #[serde(deserialize_with = "lenient::bool")]
    pub consume_from_min_enable: bool,
    #[serde(deserialize_with = "lenient::bool")]
    pub consume_broadcast_enable: bool,
    #[serde(deserialize_with = "lenient::bool")]
    pub consume_message_orderly: bool,
    #[serde(deserialize_with = "lenient::i32")]
    pub retry_queue_nums: i32,
    #[serde(deserialize_with = "lenient::i32")]
    pub retry_max_times: i32,
    #[serde(deserialize_with = "lenient::i64")]
    pub broker_id: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub which_broker_when_consume_slowly: i64,
    #[serde(deserialize_with = "lenient::bool")]
    pub notify_consumer_ids_changed_enable: bool,
    #[serde(deserialize_with = "lenient::i32")]
    pub group_sys_flag: i32,
    #[serde(deserialize_with = "lenient::i32")]
    pub consume_timeout_minute: i32,
    pub attributes: BTreeMap<String, String>,
}

/// RocketMQ's default retries before a message goes to the dead-letter queue.
pub const RETRY_MAX_TIMES_DEFAULT: i32 = 16;

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        SubscriptionGroupConfig {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: 1,
            retry_max_times: RETRY_MAX_TIMES_DEFAULT,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            consume_timeout_minute: 15,
            attributes: BTreeMap::new(),
        }
    }
}

impl JsonBody for SubscriptionGroupConfig {
    const WHAT: &'static str = "SubscriptionGroupConfig";
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    /// Group -> topic -> forbidden permission bits; ringmq keeps none.
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    pub data_version: DataVersion,
}

impl JsonBody for SubscriptionGroupWrapper {
    const WHAT: &'static str = "SubscriptionGroupWrapper";
}

/// RocketMQ's `KVTable` (GET_BROKER_RUNTIME_INFO's answer).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    pub table: BTreeMap<String, String>,
}

impl JsonBody for KvTable {
    const WHAT: &'static str = "KVTable";
}

/// RocketMQ's `GroupList` (QUERY_TOPIC_CONSUME_BY_WHO's answer).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GroupList {
    pub group_list: Vec<String>,
}

impl JsonBody for GroupList {
    const WHAT: &'static str = "GroupList";
}

/// RocketMQ's `TopicList` (GET_TOPICS_BY_CLUSTER, QUERY_TOPICS_BY_CONSUMER).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicList {
    pub topic_list: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
}

impl JsonBody for TopicList {
    const WHAT: &'static str = "TopicList";
}

/// One client connection (RocketMQ's `Connection`). `language` is the Java enum's name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Connection {
    pub client_id: String,
    pub client_addr: String,
    pub language: String,
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST's answer. The enums are their Java names; absent when
/// unknown.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerConnection {
    pub connection_set: Vec<Connection>,
    pub subscription_table: BTreeMap<String, SubscriptionData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<String>,
}

impl JsonBody for ConsumerConnection {
    const WHAT: &'static str = "ConsumerConnection";
}

/// GET_PRODUCER_CONNECTION_LIST's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProducerConnection {
    pub connection_set: Vec<Connection>,
}

impl JsonBody for ProducerConnection {
    const WHAT: &'static str = "ProducerConnection";
}

/// A queue's offsets in GET_TOPIC_STATS_INFO's answer (RocketMQ's `TopicOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicOffset {
    pub min_offset: i64,
    pub max_offset: i64,
    pub last_update_timestamp: i64,
}

/// A queue's offsets for a group in GET_CONSUME_STATS's answer (RocketMQ's `OffsetWrapper`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OffsetWrapper {
    pub broker_offset: i64,
    pub consumer_offset: i64,
    pub pull_offset: i64,
    pub last_timestamp: i64,
}

/// GET_TOPIC_STATS_INFO's answer (`TopicStatsTable`).
pub fn topic_stats_table(offsets: &[(MessageQueue, TopicOffset)], put_tps: f64) -> Vec<u8> {
    queue_keyed(offsets, &[("topicPutTps", serde_json::json!(put_tps))])
}

/// GET_CONSUME_STATS's answer (`ConsumeStats`).
pub fn consume_stats(offsets: &[(MessageQueue, OffsetWrapper)], consume_tps: f64) -> Vec<u8> {
    queue_keyed(offsets, &[("consumeTps", serde_json::json!(consume_tps))])
}

/// INVOKE_BROKER_TO_RESET_OFFSET's answer (`ResetOffsetBody`): each queue's new offset.
pub fn reset_offset_body(offsets: &[(MessageQueue, i64)]) -> Vec<u8> {
    queue_keyed(offsets, &[])
}

/// `{"offsetTable":{<queue object>:<value>,...},<extra fields>}` as RocketMQ's broker writes it.
pub fn queue_keyed<V: Serialize>(
    entries: &[(MessageQueue, V)],
    extra: &[(&str, serde_json::Value)],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + entries.len() * 128);
    out.extend_from_slice(b"{\"offsetTable\":{");
    for (i, (q, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // fastjson writes an object's fields in name order.
        let key = serde_json::json!({
            "brokerName": q.broker_name,
            "queueId": q.queue_id,
            "topic": q.topic,
        });
        out.extend_from_slice(&serde_json::to_vec(&key).expect("strings and an integer"));
        out.push(b':');
        out.extend_from_slice(
            &serde_json::to_vec(v).expect("offset tables hold integers and strings"),
        );
    }
    out.push(b'}');
    for (name, value) in extra {
        out.push(b',');
        out.extend_from_slice(&serde_json::to_vec(name).expect("a string"));
        out.push(b':');
        out.extend_from_slice(&serde_json::to_vec(value).expect("a JSON value"));
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: q,
        }
    }

    #[test]
    fn queue_keyed_tables_use_the_queue_object_as_key() {
        let body = topic_stats_table(
            &[(
                mq(0),
                TopicOffset {
                    min_offset: 1,
                    max_offset: 5,
                    last_update_timestamp: 7,
                },
            )],
            0.0,
        );
        assert_eq!(
            String::from_utf8(body).expect("utf-8"),
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"minOffset":1,"maxOffset":5,"lastUpdateTimestamp":7}},"topicPutTps":0.0}"#
        );
        assert_eq!(
            String::from_utf8(reset_offset_body(&[])).expect("utf-8"),
            r#"{"offsetTable":{}}"#
        );
    }

    #[test]
    fn a_group_config_takes_rocketmq_defaults_for_absent_fields() {
        let c = SubscriptionGroupConfig::from_json(br#"{"groupName":"G","retryMaxTimes":"3"}"#)
            .expect("parses");
        assert_eq!(c.group_name, "G");
        assert_eq!(c.retry_max_times, 3);
        assert!(c.consume_enable);
        assert_eq!(c.retry_queue_nums, 1);
    }
}
