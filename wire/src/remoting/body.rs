//! The JSON bodies of RocketMQ's remoting commands (`RemotingSerializable`, fastjson on the
//! Java side), with RocketMQ's camelCase field names: the heartbeat, a topic's route, the
//! cluster table, queue-lock sets and a group's consumer ids.
//!
//! Encoding produces standard JSON (quoted keys, `"brokerAddrs":{"0":"host:port"}`) with
//! every field the Java, Go, C++ and Rust clients' decoders read, also when it is empty.
//!
//! Decoding is tolerant the way a Java broker is, because each client writes the same body
//! a little differently:
//! - unknown fields are ignored; a missing or `null` field takes its default;
//! - numbers may arrive as JSON strings (the C++ client sends `"subVersion":"1700..."`) and
//!   codes as strings (Go's `codeSet`);
//! - enums may be the Java name (`"CLUSTERING"`) or its ordinal;
//! - fastjson's bare integer map keys (`{0:"127.0.0.1:10911"}`) are quoted before parsing.
//!
//! Limits: a body over [`JSON_BODY_BYTES_MAX`] is refused before parsing; every decoded list
//! and map has a named maximum ([`GROUPS_MAX`], [`SUBSCRIPTIONS_MAX`], [`TAGS_MAX`],
//! [`QUEUES_MAX`], [`BROKERS_MAX`], [`BROKER_ADDRS_MAX`], [`CLIENT_IDS_MAX`]) and one item
//! over it is an error, not an allocation; nesting is capped by serde_json (128 levels).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Result, WireError};

/// Largest JSON body decoded: RocketMQ's frame maximum (16 MiB).
pub const JSON_BODY_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Producer or consumer groups in one heartbeat.
pub const GROUPS_MAX: usize = 4096;
/// Topics one consumer group subscribes to, in one heartbeat.
pub const SUBSCRIPTIONS_MAX: usize = 4096;
/// Tags (and tag hash codes) in one subscription.
pub const TAGS_MAX: usize = 1024;
/// Queues in a lock set, or queue entries in a route.
pub const QUEUES_MAX: usize = 65_536;
/// Broker names in a route or the cluster table (and clusters in the cluster table).
pub const BROKERS_MAX: usize = 4096;
/// Addresses per broker name (master and slaves), and filter servers per broker.
pub const BROKER_ADDRS_MAX: usize = 64;
/// Client ids in a consumer list.
pub const CLIENT_IDS_MAX: usize = 65_536;
/// Longest serde_json message kept in a [`WireError::BadJson`].
const DETAIL_CHARS_MAX: usize = 200;
/// Deepest nesting the bare-key pass follows (serde_json's own recursion limit).
const NESTING_MAX: usize = 128;

/// A remoting JSON body.
pub trait JsonBody: Serialize + DeserializeOwned {
    /// The Java class name, for errors.
    const WHAT: &'static str;

    /// Decodes a body sent by any RocketMQ client (see the module doc for the tolerance).
    fn from_json(bytes: &[u8]) -> Result<Self> {
        if bytes.len() > JSON_BODY_BYTES_MAX {
            return Err(WireError::TooLong {
                what: Self::WHAT,
                len: bytes.len(),
                max: JSON_BODY_BYTES_MAX,
            });
        }
        let text = quote_bare_keys(bytes);
        serde_json::from_slice(&text).map_err(|e| WireError::BadJson {
            what: Self::WHAT,
            detail: e.to_string().chars().take(DETAIL_CHARS_MAX).collect(),
        })
    }

    /// Encodes as standard JSON.
    fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self)
            .expect("bodies hold only strings, integers, booleans and string/integer-keyed maps")
    }
}

/// Declares a Java enum carried by name, read from its name or its ordinal.
macro_rules! json_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) { $( $(#[$vmeta:meta])* $variant:ident = $java:literal ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $( $(#[$vmeta])* $variant, )* }

        impl $name {
            /// Every variant, in Java's ordinal order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The Java enum constant's name.
            pub fn java_name(self) -> &'static str {
                match self { $( $name::$variant => $java, )* }
            }

            /// The variant named `name` (exact case, as fastjson matches it).
            pub fn from_java_name(name: &str) -> Option<Self> {
                match name { $( $java => Some($name::$variant), )* _ => None }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.java_name())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                d.deserialize_any(lenient::EnumVisitor::<$name>::new($what, $name::ALL, $name::from_java_name))
            }
        }
    };
}

json_enum! {
    /// Pull or push consumer (RocketMQ `ConsumeType`).
    pub enum ConsumeType ("consumeType") {
        Actively = "CONSUME_ACTIVELY",
        Passively = "CONSUME_PASSIVELY",
        Pop = "CONSUME_POP",
    }
}

json_enum! {
    /// How a group shares messages (RocketMQ `MessageModel`; BROADCASTING is ordinal 0).
    pub enum MessageModel ("messageModel") {
        Broadcasting = "BROADCASTING",
        Clustering = "CLUSTERING",
    }
}

json_enum! {
    /// Where a group with no stored offset starts (RocketMQ `ConsumeFromWhere`).
    pub enum ConsumeFromWhere ("consumeFromWhere") {
        LastOffset = "CONSUME_FROM_LAST_OFFSET",
        /// Deprecated in RocketMQ; acts as LastOffset.
        LastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        /// Deprecated in RocketMQ; acts as LastOffset.
        MinOffset = "CONSUME_FROM_MIN_OFFSET",
        /// Deprecated in RocketMQ; acts as LastOffset.
        MaxOffset = "CONSUME_FROM_MAX_OFFSET",
        FirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        Timestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// HEART_BEAT's body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HeartbeatData {
    #[serde(rename = "clientID", deserialize_with = "lenient::string")]
    pub client_id: String,
    #[serde(deserialize_with = "lenient::seq::<_, _, GROUPS_MAX>")]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(deserialize_with = "lenient::seq::<_, _, GROUPS_MAX>")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x: a hash of the rest, for heartbeats that skip unchanged subscriptions.
    #[serde(deserialize_with = "lenient::i32")]
    pub heartbeat_fingerprint: i32,
    /// 5.x: this heartbeat leaves out the subscriptions (they did not change).
    #[serde(alias = "isWithoutSub", deserialize_with = "lenient::bool")]
    pub without_sub: bool,
}

impl JsonBody for HeartbeatData {
    const WHAT: &'static str = "HeartbeatData";
}

/// A producer group in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProducerData {
    #[serde(deserialize_with = "lenient::string")]
    pub group_name: String,
}

/// A consumer group in a heartbeat. The enums are `None` when a client leaves them out.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerData {
    #[serde(deserialize_with = "lenient::string")]
    pub group_name: String,
    pub consume_type: Option<ConsumeType>,
    pub message_model: Option<MessageModel>,
    pub consume_from_where: Option<ConsumeFromWhere>,
    #[serde(deserialize_with = "lenient::seq::<_, _, SUBSCRIPTIONS_MAX>")]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(deserialize_with = "lenient::bool")]
    pub unit_mode: bool,
}

/// One topic a consumer group subscribes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(deserialize_with = "lenient::bool")]
    pub class_filter_mode: bool,
    #[serde(deserialize_with = "lenient::string")]
    pub topic: String,
    /// `*`, `TagA || TagB`, or a SQL92 expression.
    #[serde(deserialize_with = "lenient::string")]
    pub sub_string: String,
    #[serde(deserialize_with = "lenient::seq::<_, _, TAGS_MAX>")]
    pub tags_set: Vec<String>,
    /// Java `String.hashCode` of each tag.
    #[serde(deserialize_with = "lenient::code_set")]
    pub code_set: Vec<i32>,
    #[serde(deserialize_with = "lenient::i64")]
    pub sub_version: i64,
    /// `TAG` (the default when absent) or `SQL92`.
    #[serde(deserialize_with = "lenient::string_or_tag")]
    pub expression_type: String,
}

/// RocketMQ `ExpressionType.TAG`, a subscription's default.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// RocketMQ `ExpressionType.SQL92`.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

impl Default for SubscriptionData {
    fn default() -> Self {
        SubscriptionData {
            class_filter_mode: false,
            topic: String::new(),
            sub_string: String::new(),
            tags_set: Vec::new(),
            code_set: Vec::new(),
            sub_version: 0,
            expression_type: EXPRESSION_TYPE_TAG.to_owned(),
        }
    }
}

/// GET_ROUTEINFO_BY_TOPIC's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicRouteData {
    /// `brokerName:queueNums;...` for an ordered topic's KV config; usually absent.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub order_topic_conf: Option<String>,
    #[serde(deserialize_with = "lenient::seq::<_, _, QUEUES_MAX>")]
    pub queue_datas: Vec<QueueData>,
    #[serde(deserialize_with = "lenient::seq::<_, _, BROKERS_MAX>")]
    pub broker_datas: Vec<BrokerData>,
    /// Broker address -> filter server addresses; always `{}` from ringmq, and always sent
    /// (some clients' decoders require it).
    #[serde(deserialize_with = "lenient::map::<_, _, _, BROKERS_MAX>")]
    pub filter_server_table: BTreeMap<String, FilterServers>,
}

impl JsonBody for TopicRouteData {
    const WHAT: &'static str = "TopicRouteData";
}

/// The filter servers of one broker (`List<String>`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FilterServers(
    #[serde(deserialize_with = "lenient::seq::<_, _, BROKER_ADDRS_MAX>")] pub Vec<String>,
);

/// A topic's queues on one broker name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueData {
    #[serde(deserialize_with = "lenient::string")]
    pub broker_name: String,
    #[serde(deserialize_with = "lenient::i32")]
    pub read_queue_nums: i32,
    #[serde(deserialize_with = "lenient::i32")]
    pub write_queue_nums: i32,
    /// `PermName` bits: 4 read, 2 write (6 both), 1 inherit.
    #[serde(deserialize_with = "lenient::i32")]
    pub perm: i32,
    #[serde(deserialize_with = "lenient::i32")]
    pub topic_sys_flag: i32,
}

/// One broker name's addresses: broker id (0 = master) -> `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BrokerData {
    #[serde(deserialize_with = "lenient::string")]
    pub cluster: String,
    #[serde(deserialize_with = "lenient::string")]
    pub broker_name: String,
    #[serde(deserialize_with = "lenient::map::<_, _, _, BROKER_ADDRS_MAX>")]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub zone_name: Option<String>,
    #[serde(deserialize_with = "lenient::bool")]
    pub enable_acting_master: bool,
}

/// GET_BROKER_CLUSTER_INFO's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Broker name -> its addresses.
    #[serde(deserialize_with = "lenient::map::<_, _, _, BROKERS_MAX>")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name -> its broker names.
    #[serde(deserialize_with = "lenient::map::<_, _, _, BROKERS_MAX>")]
    pub cluster_addr_table: BTreeMap<String, BrokerNames>,
}

impl JsonBody for ClusterInfo {
    const WHAT: &'static str = "ClusterInfo";
}

/// The broker names of one cluster (`Set<String>`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerNames(
    #[serde(deserialize_with = "lenient::seq::<_, _, BROKERS_MAX>")] pub Vec<String>,
);

/// A queue (RocketMQ `MessageQueue`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MessageQueue {
    #[serde(deserialize_with = "lenient::string")]
    pub topic: String,
    #[serde(deserialize_with = "lenient::string")]
    pub broker_name: String,
    #[serde(deserialize_with = "lenient::i32")]
    pub queue_id: i32,
}

/// LOCK_BATCH_MQ's body (UNLOCK_BATCH_MQ's has the same fields).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    #[serde(deserialize_with = "lenient::string")]
    pub consumer_group: String,
    #[serde(deserialize_with = "lenient::string")]
    pub client_id: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub only_this_broker: bool,
    #[serde(deserialize_with = "lenient::seq::<_, _, QUEUES_MAX>")]
    pub mq_set: Vec<MessageQueue>,
}

impl JsonBody for LockBatchRequestBody {
    const WHAT: &'static str = "LockBatchRequestBody";
}

/// UNLOCK_BATCH_MQ's body: the fields of LOCK_BATCH_MQ's.
pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// LOCK_BATCH_MQ's answer: the queues this client now holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    #[serde(
        rename = "lockOKMQSet",
        deserialize_with = "lenient::seq::<_, _, QUEUES_MAX>"
    )]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl JsonBody for LockBatchResponseBody {
    const WHAT: &'static str = "LockBatchResponseBody";
}

/// GET_CONSUMER_LIST_BY_GROUP's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GetConsumerListByGroupResponseBody {
    #[serde(deserialize_with = "lenient::seq::<_, _, CLIENT_IDS_MAX>")]
    pub consumer_id_list: Vec<String>,
}

impl JsonBody for GetConsumerListByGroupResponseBody {
    const WHAT: &'static str = "GetConsumerListByGroupResponseBody";
}

/// Quotes fastjson's bare integer object keys (`{0:"a",-1:"b"}` -> `{"0":"a","-1":"b"}`),
/// borrowing `input` when it has none. Strings and array elements are left alone. Input
/// nested deeper than serde_json follows is returned as is (serde_json then rejects it).
pub fn quote_bare_keys(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Vec<u8> = Vec::new();
    let mut copied = 0;
    let mut in_object: Vec<bool> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while let Some(&c) = input.get(i) {
        match c {
            b'"' => {
                i = string_end(input, i + 1);
                expect_key = false;
                continue;
            }
            b'{' | b'[' => {
                if in_object.len() == NESTING_MAX {
                    return Cow::Borrowed(input);
                }
                in_object.push(c == b'{');
                expect_key = c == b'{';
            }
            b'}' | b']' => {
                in_object.pop();
                expect_key = false;
            }
            b',' => expect_key = in_object.last() == Some(&true),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'-' | b'0'..=b'9' if expect_key => {
                let end = input[i..]
                    .iter()
                    .position(|b| !(b.is_ascii_digit() || *b == b'-'))
                    .map_or(input.len(), |n| i + n);
                out.extend_from_slice(&input[copied..i]);
                out.push(b'"');
                out.extend_from_slice(&input[i..end]);
                out.push(b'"');
                copied = end;
                i = end;
                expect_key = false;
                continue;
            }
            _ => expect_key = false,
        }
        i += 1;
    }
    if copied == 0 {
        return Cow::Borrowed(input);
    }
    out.extend_from_slice(&input[copied..]);
    Cow::Owned(out)
}

/// The index just past the closing quote of the string whose contents start at `from`
/// (or the end of input for an unterminated string).
fn string_end(input: &[u8], mut from: usize) -> usize {
    while let Some(&c) = input.get(from) {
        match c {
            b'\\' => from += 2,
            b'"' => return from + 1,
            _ => from += 1,
        }
    }
    input.len()
}

mod admin;
mod lenient;

pub use admin::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_heartbeat_decodes() {
        // fastjson output of a Java 4.9 push consumer's heartbeat (abridged).
        let java = br#"{"clientID":"10.0.0.1@123","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2653],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;
        let hb = HeartbeatData::from_json(java).expect("decodes");
        assert_eq!(hb.client_id, "10.0.0.1@123");
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.consume_type, Some(ConsumeType::Passively));
        assert_eq!(c.message_model, Some(MessageModel::Clustering));
        assert_eq!(c.consume_from_where, Some(ConsumeFromWhere::LastOffset));
        let s = &c.subscription_data_set[0];
        assert_eq!((s.topic.as_str(), s.sub_string.as_str()), ("T", "TagA"));
        assert_eq!(s.code_set, vec![2653]);
        assert_eq!(s.sub_version, 1_700_000_000_000);
        assert_eq!(HeartbeatData::from_json(&hb.to_json()), Ok(hb));
    }

    #[test]
    fn cpp_and_go_heartbeats_decode() {
        // C++ 2.x: subVersion as a string, no expressionType, no unitMode.
        let cpp = br#"{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"BROADCASTING","subscriptionDataSet":[{"topic":"T","subString":"*","subVersion":"1700000000001"}]}]}"#;
        let hb = HeartbeatData::from_json(cpp).expect("cpp");
        let s = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(s.sub_version, 1_700_000_000_001);
        assert_eq!(s.expression_type, EXPRESSION_TYPE_TAG);
        assert!(hb.producer_data_set.is_empty());
        // Go-style: null lists, codes as strings, enum ordinals.
        let go = br#"{"clientID":"g","producerDataSet":null,"consumerDataSet":[{"groupName":"g","consumeType":1,"messageModel":0,"consumeFromWhere":4,"subscriptionDataSet":[{"topic":"T","subString":"a||b","tagsSet":["a","b"],"codeSet":["97","98"],"subVersion":0,"expressionType":null}],"unitMode":"false"}],"unknown":{"x":[1,2]}}"#;
        let hb = HeartbeatData::from_json(go).expect("go");
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.consume_type, Some(ConsumeType::Passively));
        assert_eq!(c.message_model, Some(MessageModel::Broadcasting));
        assert_eq!(c.consume_from_where, Some(ConsumeFromWhere::FirstOffset));
        assert_eq!(c.subscription_data_set[0].code_set, vec![97, 98]);
        assert_eq!(c.subscription_data_set[0].expression_type, "TAG");
    }

    #[test]
    fn bad_enums_and_numbers_are_errors() {
        for body in [
            &br#"{"consumerDataSet":[{"consumeType":"CONSUME_SOMETIMES"}]}"#[..],
            br#"{"consumerDataSet":[{"messageModel":2}]}"#,
            br#"{"consumerDataSet":[{"subscriptionDataSet":[{"subVersion":"1.5"}]}]}"#,
            br#"{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":[2147483648]}]}]}"#,
            br#"[1,2]"#,
            b"",
        ] {
            assert!(
                matches!(
                    HeartbeatData::from_json(body),
                    Err(WireError::BadJson { .. })
                ),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn route_encodes_with_every_field() {
        let route = TopicRouteData {
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "b".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0,
            }],
            broker_datas: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: BTreeMap::from([(0, "127.0.0.1:10911".into())]),
                zone_name: None,
                enable_acting_master: false,
            }],
            filter_server_table: BTreeMap::new(),
        };
        let text = String::from_utf8(route.to_json()).expect("utf-8");
        assert_eq!(
            text,
            r#"{"queueDatas":[{"brokerName":"b","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],"brokerDatas":[{"cluster":"c","brokerName":"b","brokerAddrs":{"0":"127.0.0.1:10911"},"enableActingMaster":false}],"filterServerTable":{}}"#
        );
        assert_eq!(TopicRouteData::from_json(text.as_bytes()), Ok(route));
    }

    #[test]
    fn fastjson_bare_keys_decode() {
        let java = br#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b","cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
        let route = TopicRouteData::from_json(java).expect("decodes");
        assert_eq!(
            route.broker_datas[0]
                .broker_addrs
                .get(&1)
                .map(String::as_str),
            Some("127.0.0.1:10921")
        );
        assert_eq!(route.queue_datas[0].read_queue_nums, 8);
    }

    #[test]
    fn bare_key_pass_leaves_strings_and_arrays_alone() {
        let cases: [(&[u8], &[u8]); 5] = [
            (br#"{"a":[1,2,{3:4}]}"#, br#"{"a":[1,2,{"3":4}]}"#),
            (
                br#"{ -1 : "x" , 22:"{5:6}"}"#,
                br#"{ "-1" : "x" , "22":"{5:6}"}"#,
            ),
            (br#"{"k\"{1:":[0]}"#, br#"{"k\"{1:":[0]}"#),
            (br#"[{},{7:[8,9]}]"#, br#"[{},{"7":[8,9]}]"#),
            (b"{\"unterminated", b"{\"unterminated"),
        ];
        for (input, want) in cases {
            assert_eq!(
                &*quote_bare_keys(input),
                want,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
        assert!(matches!(quote_bare_keys(br#"{"a":1}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn collections_are_capped() {
        let ids: Vec<String> = (0..=CLIENT_IDS_MAX).map(|i| format!("\"{i}\"")).collect();
        let body = format!(r#"{{"consumerIdList":[{}]}}"#, ids.join(","));
        let err = GetConsumerListByGroupResponseBody::from_json(body.as_bytes());
        assert!(
            matches!(&err, Err(WireError::BadJson { detail, .. }) if detail.contains("maximum")),
            "{err:?}"
        );
        let addrs: Vec<String> = (0..=BROKER_ADDRS_MAX)
            .map(|i| format!("{i}:\"a\""))
            .collect();
        let body = format!(
            r#"{{"brokerDatas":[{{"brokerAddrs":{{{}}}}}]}}"#,
            addrs.join(",")
        );
        assert!(TopicRouteData::from_json(body.as_bytes()).is_err());
        let ok = format!(
            r#"{{"consumerIdList":[{}]}}"#,
            ids[..CLIENT_IDS_MAX].join(",")
        );
        assert!(GetConsumerListByGroupResponseBody::from_json(ok.as_bytes()).is_ok());
    }

    #[test]
    fn lock_bodies() {
        let java = br#"{"clientId":"c1","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":1,"topic":"T"},{"brokerName":"b","queueId":2,"topic":"T"}],"onlyThisBroker":true}"#;
        let req = LockBatchRequestBody::from_json(java).expect("decodes");
        assert!(req.only_this_broker);
        assert_eq!(req.mq_set[1].queue_id, 2);
        let resp = LockBatchResponseBody {
            lock_ok_mq_set: req.mq_set.clone(),
        };
        let text = String::from_utf8(resp.to_json()).expect("utf-8");
        assert!(text.starts_with(r#"{"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":1}"#));
        assert_eq!(LockBatchResponseBody::from_json(text.as_bytes()), Ok(resp));
    }

    #[test]
    fn cluster_info_round_trips() {
        let b = BrokerData {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_addrs: BTreeMap::from([(0, "h:1".into())]),
            zone_name: Some("z".into()),
            enable_acting_master: true,
        };
        let info = ClusterInfo {
            broker_addr_table: BTreeMap::from([("b".into(), b)]),
            cluster_addr_table: BTreeMap::from([("c".into(), BrokerNames(vec!["b".into()]))]),
        };
        let text = String::from_utf8(info.to_json()).expect("utf-8");
        assert!(text.contains(r#""clusterAddrTable":{"c":["b"]}"#), "{text}");
        assert_eq!(ClusterInfo::from_json(text.as_bytes()), Ok(info));
    }

    #[test]
    fn oversized_body_is_refused_before_parsing() {
        let big = vec![b' '; JSON_BODY_BYTES_MAX + 1];
        assert!(matches!(
            ClusterInfo::from_json(&big),
            Err(WireError::TooLong { .. })
        ));
    }
}
