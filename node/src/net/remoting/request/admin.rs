//! RocketMQ's admin request codes -> what serves them: a native request with the same
//! meaning where one exists, else an [`admin::Job`](super::admin::Job) that builds the answer
//! from several ([`crate::net::remoting::admin`]). Bad input (a negative queue count, a permission outside `PermName`'s bits,
//! an unreadable JSON or properties body) gets SYSTEM_ERROR naming the field; nothing is
//! changed by a request that did not translate.
//!
//! | remoting code | native request | notes |
//! |---|---|---|
//! | UPDATE_AND_CREATE_TOPIC 17 | UPDATE_AND_CREATE_TOPIC | `attributes` `+key=value` entries; removing one (`-key`) is refused |
//! | DELETE_TOPIC_IN_BROKER 215 | DELETE_TOPIC_IN_BROKER | a topic not on this broker is SUCCESS, as RocketMQ answers |
//! | DELETE_TOPIC_IN_NAMESRV 216 | DELETE_TOPIC_IN_NAMESRV | name server; SUCCESS also when no route is left |
//! | UPDATE_BROKER_CONFIG 25 | UPDATE_BROKER_CONFIG | properties text body; an unknown or read-only key is refused |
//! | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200 | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP | the body's `groupName` and `retryMaxTimes` (the settings ringmq applies) |
//! | DELETE_SUBSCRIPTIONGROUP 207 | DELETE_SUBSCRIPTIONGROUP | a group with no settings is SUCCESS; `cleanOffset` keeps the offsets |
//! | the rest of the admin codes | several | [`crate::net::remoting::admin`] |

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{
    BrokerConfigTable, CreateTopicRequest, DeleteTopicInNamesrvRequest, SubscriptionGroupConfig,
};
use ringmq_wire::remoting::body::{self as rbody, JsonBody};
use ringmq_wire::remoting::code::request as rc;
use ringmq_wire::remoting::ext::ExtFields;
use ringmq_wire::remoting::headers as h;

use super::{native, typed, Refusal, ReplyKind, Result, Translated};
use crate::net::remoting::admin::Job;

/// Most entries in an UPDATE_BROKER_CONFIG body or a topic's `attributes`.
pub const ENTRIES_MAX: usize = 256;

/// The translation of admin request `code`; `None` for a code that is not an admin request.
pub fn translate(code: i32, ext: &ExtFields, body: &[u8]) -> Result<Option<Translated>> {
    let job = |j: Job| Ok(Some(Translated::Admin(j)));
    match code {
        rc::UPDATE_AND_CREATE_TOPIC => {
            let r: h::CreateTopicRequestHeader = typed(code, ext)?;
            let native_h = create_topic(r)?;
            native(
                RequestCode::UpdateAndCreateTopic,
                &native_h,
                &[],
                ReplyKind::Plain,
            )
            .map(Some)
        }
        rc::DELETE_TOPIC_IN_BROKER => {
            let r: h::TopicRequestHeader = typed(code, ext)?;
            job(Job::DeleteTopic { topic: r.topic })
        }
        rc::DELETE_TOPIC_IN_NAMESRV => {
            let r: h::DeleteTopicFromNamesrvRequestHeader = typed(code, ext)?;
            let n = DeleteTopicInNamesrvRequest {
                topic: r.topic,
                cluster: r.cluster_name.filter(|c| !c.is_empty()),
            };
            job(Job::DeleteTopicInNamesrv(n))
        }
        rc::GET_TOPICS_BY_CLUSTER => {
            let r: h::GetTopicsByClusterRequestHeader = typed(code, ext)?;
            job(Job::TopicsByCluster { cluster: r.cluster })
        }
        rc::GET_ALL_TOPIC_CONFIG => job(Job::AllTopicConfig),
        rc::GET_TOPIC_CONFIG => {
            let r: h::TopicRequestHeader = typed(code, ext)?;
            job(Job::TopicConfig { topic: r.topic })
        }
        rc::GET_TOPIC_STATS_INFO => {
            let r: h::TopicRequestHeader = typed(code, ext)?;
            job(Job::TopicStats { topic: r.topic })
        }
        rc::GET_BROKER_CONFIG => job(Job::BrokerConfig),
        rc::UPDATE_BROKER_CONFIG => {
            let entries = properties(body)?;
            let table = BrokerConfigTable { entries }
                .to_vec()
                .map_err(|e| Refusal::bad(format!("broker config: {e}")))?;
            native(
                RequestCode::UpdateBrokerConfig,
                &Empty,
                &table,
                ReplyKind::Plain,
            )
            .map(Some)
        }
        rc::GET_BROKER_RUNTIME_INFO => job(Job::RuntimeInfo),
        rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            let c = rbody::SubscriptionGroupConfig::from_json(body)
                .map_err(|e| Refusal::bad(format!("subscription group body: {e}")))?;
            if c.group_name.is_empty() {
                return Err(Refusal::bad("subscription group body: groupName is empty"));
            }
            let retry_max_times = u32::try_from(c.retry_max_times).map_err(|_| {
                Refusal::bad(format!("retryMaxTimes {} is negative", c.retry_max_times))
            })?;
            let n = SubscriptionGroupConfig {
                group: c.group_name,
                retry_max_times,
                consume_message_orderly: c.consume_message_orderly,
            };
            native(
                RequestCode::UpdateAndCreateSubscriptionGroup,
                &n,
                &[],
                ReplyKind::Plain,
            )
            .map(Some)
        }
        rc::DELETE_SUBSCRIPTIONGROUP => {
            let r: h::DeleteSubscriptionGroupRequestHeader = typed(code, ext)?;
            job(Job::DeleteGroup {
                group: r.group_name,
            })
        }
        rc::DELETE_SUBSCRIPTIONGROUP_LIST => job(Job::DeleteGroups {
            groups: name_list(body, "groupNameList")?,
        }),
        rc::DELETE_TOPIC_IN_BROKER_LIST => job(Job::DeleteTopics {
            topics: name_list(body, "topicList")?,
        }),
        rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => job(Job::AllGroups),
        rc::GET_SUBSCRIPTIONGROUP_CONFIG => {
            let r: h::GroupRequestHeader = typed(code, ext)?;
            job(Job::GroupConfig { group: r.group })
        }
        rc::GET_CONSUME_STATS => {
            let r: h::GetConsumeStatsRequestHeader = typed(code, ext)?;
            let mut topics: Vec<String> = r
                .topic_list
                .as_deref()
                .unwrap_or("")
                .split(';')
                .map(str::to_string)
                .collect();
            topics.extend(r.topic);
            topics.retain(|t| !t.is_empty());
            job(Job::ConsumeStats {
                group: r.consumer_group,
                topics,
            })
        }
        rc::GET_CONSUMER_CONNECTION_LIST => {
            let r: h::GetConsumerConnectionListRequestHeader = typed(code, ext)?;
            job(Job::ConsumerConnection {
                group: r.consumer_group,
            })
        }
        rc::GET_PRODUCER_CONNECTION_LIST => {
            let r: h::GetProducerConnectionListRequestHeader = typed(code, ext)?;
            job(Job::ProducerConnection {
                group: r.producer_group,
            })
        }
        rc::INVOKE_BROKER_TO_RESET_OFFSET => job(Job::ResetOffset(typed(code, ext)?)),
        rc::CLONE_GROUP_OFFSET => job(Job::CloneOffset(typed(code, ext)?)),
        rc::GET_BROKER_CONSUME_STATS => {
            let r: h::GetConsumeStatsInBrokerHeader = typed(code, ext)?;
            job(Job::BrokerConsumeStats {
                is_order: r.is_order.unwrap_or(false),
            })
        }
        rc::QUERY_TOPIC_CONSUME_BY_WHO => {
            let r: h::TopicRequestHeader = typed(code, ext)?;
            job(Job::ConsumeByWho { topic: r.topic })
        }
        rc::QUERY_TOPICS_BY_CONSUMER => {
            let r: h::GroupRequestHeader = typed(code, ext)?;
            job(Job::TopicsByConsumer { group: r.group })
        }
        _ => Ok(None),
    }
}

/// UPDATE_AND_CREATE_TOPIC's header as the native request.
fn create_topic(r: h::CreateTopicRequestHeader) -> Result<CreateTopicRequest> {
    let count = |field: &str, v: i32| {
        u32::try_from(v)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| Refusal::bad(format!("{field} {v} is not a positive queue count")))
    };
    let perm_bits = u8::try_from(r.perm)
        .ok()
        .filter(|p| p & !perm::ALL == 0)
        .ok_or_else(|| Refusal::bad(format!("perm {} is not PermName bits", r.perm)))?;
    Ok(CreateTopicRequest {
        read_queue_count: count("readQueueNums", r.read_queue_nums)?,
        write_queue_count: count("writeQueueNums", r.write_queue_nums)?,
        perm: perm_bits,
        attributes: attributes(r.attributes.as_deref().unwrap_or(""))?,
        topic: r.topic,
    })
}

/// RocketMQ's attribute list (`+key=value,+key2=value2`) as a map.
fn attributes(text: &str) -> Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if out.len() >= ENTRIES_MAX {
            return Err(Refusal::bad(format!("over {ENTRIES_MAX} attributes")));
        }
        let Some(kv) = item.strip_prefix('+') else {
            return Err(Refusal::bad(format!(
                "attribute {item}: only adding (+key=value) is supported"
            )));
        };
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| Refusal::bad(format!("attribute {item} has no value")))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// The names in a list request's JSON body (DELETE_SUBSCRIPTIONGROUP_LIST's
/// `{"groupNameList":[...],"cleanOffset":b}`, DELETE_TOPIC_IN_BROKER_LIST's
/// `{"topicList":[...]}`): at least one and at most [`ENTRIES_MAX`], none empty.
fn name_list(body: &[u8], field: &str) -> Result<Vec<String>> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| Refusal::bad(format!("{field} body: {e}")))?;
    let items = v
        .get(field)
        .and_then(|l| l.as_array())
        .ok_or_else(|| Refusal::bad(format!("the body has no {field} array")))?;
    if items.is_empty() || items.len() > ENTRIES_MAX {
        return Err(Refusal::bad(format!(
            "{field} names {} entries; 1..={ENTRIES_MAX} are allowed",
            items.len()
        )));
    }
    items
        .iter()
        .map(|i| match i.as_str() {
            Some(name) if !name.is_empty() => Ok(name.to_string()),
            _ => Err(Refusal::bad(format!("{field} holds {i}, not a name"))),
        })
        .collect()
}

/// A Java properties text (`key=value` lines, `#` comments) as a map.
pub fn properties(body: &[u8]) -> Result<std::collections::BTreeMap<String, String>> {
    let text =
        std::str::from_utf8(body).map_err(|_| Refusal::bad("broker config body is not UTF-8"))?;
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        if out.len() >= ENTRIES_MAX {
            return Err(Refusal::bad(format!("over {ENTRIES_MAX} config entries")));
        }
        let (k, v) = line
            .split_once(['=', ':'])
            .ok_or_else(|| Refusal::bad(format!("config line {line:?} has no '='")))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    if out.is_empty() {
        return Err(Refusal::bad("broker config body names no key"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_properties_parse_and_refuse_clearly() {
        let a = attributes("+message.type=NORMAL, +x=1").expect("parses");
        assert_eq!(a.get("message.type").map(String::as_str), Some("NORMAL"));
        assert_eq!(a.get("x").map(String::as_str), Some("1"));
        assert!(attributes("-x").is_err());
        assert!(attributes("+x").is_err());
        let p = properties(b"# c\nflushIntervalCommitLog=500\n\nbrokerPermission = 6\n")
            .expect("parses");
        assert_eq!(p.len(), 2);
        assert_eq!(p.get("brokerPermission").map(String::as_str), Some("6"));
        assert!(properties(b"").is_err());
        assert!(properties(b"novalue").is_err());
    }

    #[test]
    fn list_bodies_name_their_entries_or_are_refused() {
        let g = name_list(
            br#"{"groupNameList":["a","b"],"cleanOffset":true}"#,
            "groupNameList",
        )
        .expect("parses");
        assert_eq!(g, vec!["a", "b"]);
        assert!(name_list(br#"{"topicList":[]}"#, "topicList").is_err());
        assert!(name_list(br#"{"topicList":[""]}"#, "topicList").is_err());
        assert!(name_list(br#"{"topicList":[7]}"#, "topicList").is_err());
        assert!(name_list(br#"{"groupNameList":["a"]}"#, "topicList").is_err());
        assert!(name_list(b"{not json", "topicList").is_err());
        let many: Vec<String> = (0..=ENTRIES_MAX).map(|i| format!("\"t{i}\"")).collect();
        let body = format!(r#"{{"topicList":[{}]}}"#, many.join(","));
        assert!(name_list(body.as_bytes(), "topicList").is_err());
    }

    #[test]
    fn a_topic_with_no_queue_or_unknown_perm_bits_is_refused() {
        let mut r = h::CreateTopicRequestHeader {
            topic: "T".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            ..Default::default()
        };
        assert!(create_topic(r.clone()).is_ok());
        r.perm = 16;
        assert!(create_topic(r.clone()).is_err());
        r.perm = 6;
        r.read_queue_nums = 0;
        assert!(create_topic(r).is_err());
    }
}
