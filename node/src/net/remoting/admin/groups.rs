//! The consumer-group answers of [`super::Job`]: group configs, consume stats, connections,
//! offset reset, and who consumes what.

use std::collections::{BTreeMap, BTreeSet};

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{
    Boundary, ConsumerGroupInfo, ConsumerGroupList, ConsumerOffsetTable,
    GetAllConsumerOffsetRequest, GetOffsetRequest, GetProducerListRequest, OffsetResponse,
    ProducerList, SearchOffsetRequest, Subscription, UpdateConsumerOffsetRequest,
};
use ringmq_wire::remoting::body::{self as rbody, JsonBody};
use ringmq_wire::remoting::code::response;
use ringmq_wire::remoting::headers::{CloneGroupOffsetRequestHeader, ResetOffsetRequestHeader};

use super::topics::{queue_json, topic_config};
use super::{long, ok, Answer, Failed, Natives, Result};
use crate::net::service::Service;

/// RocketMQ's CONSUMER_NOT_ONLINE: the group has no live member on this broker.
const CONSUMER_NOT_ONLINE: i32 = 206;
/// RocketMQ's SUBSCRIPTION_GROUP_NOT_EXIST.
const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group with settings or live members.
pub(super) async fn all_configs<S: Service + ?Sized>(n: &mut Natives<'_, S>) -> Result<Answer> {
    let list = groups(n).await?;
    let body = rbody::SubscriptionGroupWrapper {
        subscription_group_table: list
            .groups
            .iter()
            .map(|g| (g.group.clone(), group_json(g)))
            .collect(),
        ..Default::default()
    };
    ok(body.to_json())
}

/// GET_SUBSCRIPTIONGROUP_CONFIG: one group's config.
pub(super) async fn config<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
) -> Result<Answer> {
    let list = groups(n).await?;
    match list.groups.iter().find(|g| g.group == group) {
        Some(g) => ok(group_json(g).to_json()),
        None => Err(Failed::new(
            SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("consumer group {group} does not exist on this broker"),
        )),
    }
}

/// GET_CONSUME_STATS: per queue of each topic, the queue's end and the group's offset.
pub(super) async fn consume_stats<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
    topics: Vec<String>,
) -> Result<Answer> {
    let offsets = group_offsets(n, group).await?;
    let topics: BTreeSet<String> = if topics.is_empty() {
        offsets.keys().map(|(t, _)| t.clone()).collect()
    } else {
        topics.into_iter().collect()
    };
    let broker = n.svc.broker_name().unwrap_or_default();
    let mut table = Vec::new();
    for topic in topics {
        // A topic gone from this broker has nothing to report.
        let Ok(c) = topic_config(n, &topic).await else {
            continue;
        };
        let queues = super::view_queues(n.svc, &topic, c.read_queue_count);
        n.budget(queues.len())?;
        for (seen, q) in queues {
            let h = GetOffsetRequest {
                topic: topic.clone(),
                queue_id: q,
            };
            let max: OffsetResponse = n.fields(RequestCode::GetMaxOffset, &h).await?;
            let committed = offsets
                .get(&(topic.clone(), q))
                .map(|&o| long(o))
                .unwrap_or(0);
            table.push((
                queue_json(&topic, &broker, seen),
                rbody::OffsetWrapper {
                    broker_offset: long(max.offset),
                    consumer_offset: committed,
                    pull_offset: committed,
                    last_timestamp: 0,
                },
            ));
        }
    }
    ok(rbody::consume_stats(&table, 0.0))
}

/// GET_CONSUMER_CONNECTION_LIST: the group's live members and subscriptions.
pub(super) async fn consumer_connection<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
) -> Result<Answer> {
    let list = groups(n).await?;
    let g = list
        .groups
        .iter()
        .find(|g| g.group == group && !g.members.is_empty())
        .ok_or_else(|| {
            Failed::new(
                CONSUMER_NOT_ONLINE,
                format!("the consumer group {group} is not online"),
            )
        })?;
    let body = rbody::ConsumerConnection {
        connection_set: g.members.iter().map(|id| client_connection(id)).collect(),
        subscription_table: g
            .subscriptions
            .iter()
            .map(|s| (s.topic.clone(), subscription_json(s)))
            .collect(),
        ..Default::default()
    };
    ok(body.to_json())
}

/// GET_PRODUCER_CONNECTION_LIST: the group's live producers; SYSTEM_ERROR when there is
/// none, as RocketMQ answers.
pub(super) async fn producer_connection<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
) -> Result<Answer> {
    let h = GetProducerListRequest {
        producer_group: group.to_string(),
    };
    let list: ProducerList = n.body(RequestCode::GetProducerConnectionList, &h).await?;
    if list.client_ids.is_empty() {
        return Err(Failed::new(
            response::SYSTEM_ERROR,
            format!("the producer group {group} has no live producer on this broker"),
        ));
    }
    ok(rbody::ProducerConnection {
        connection_set: list
            .client_ids
            .iter()
            .map(|id| client_connection(id))
            .collect(),
    }
    .to_json())
}

/// A client as RocketMQ's `Connection`: ringmq keeps its id, whose first part is its IP;
/// its language and version are not kept (`OTHER`, 0).
fn client_connection(client_id: &str) -> rbody::Connection {
    rbody::Connection {
        client_id: client_id.to_string(),
        client_addr: client_id.split('@').next().unwrap_or_default().to_string(),
        language: "OTHER".to_string(),
        version: 0,
    }
}

/// INVOKE_BROKER_TO_RESET_OFFSET: moves the group's offsets on this broker; answers each
/// queue's new offset.
pub(super) async fn reset_offset<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    h: ResetOffsetRequestHeader,
) -> Result<Answer> {
    let c = topic_config(n, &h.topic).await?;
    let broker = n.svc.broker_name().unwrap_or_default();
    // (the id the caller knows, the broker's id) of the queues it sees.
    let all = super::view_queues(n.svc, &h.topic, c.read_queue_count);
    let one = match (h.queue_id, h.offset) {
        (Some(q), Some(o)) if q >= 0 => {
            let q = u32::try_from(q).unwrap_or(u32::MAX);
            let Some(&pair) = all.get(q as usize) else {
                return Err(Failed::new(
                    response::SYSTEM_ERROR,
                    format!("topic {} has no queue {q}", h.topic),
                ));
            };
            let o = u64::try_from(o).map_err(|_| {
                Failed::new(response::SYSTEM_ERROR, format!("offset {o} is negative"))
            })?;
            Some((pair, o))
        }
        _ => None,
    };
    let queues: Vec<(u32, u32)> = match one {
        Some((pair, _)) => vec![pair],
        None => all,
    };
    n.budget(queues.len() * 2)?;
    let mut table = Vec::with_capacity(queues.len());
    for (seen, q) in queues {
        let offset = match one {
            Some((_, o)) => o,
            None => queue_offset_at(n, &h.topic, q, h.timestamp).await?,
        };
        let set = UpdateConsumerOffsetRequest {
            consumer_group: h.group.clone(),
            topic: h.topic.clone(),
            queue_id: q,
            offset,
        };
        n.call(RequestCode::InvokeBrokerToResetOffset, &set, &[])
            .await?;
        table.push((queue_json(&h.topic, &broker, seen), long(offset)));
    }
    ok(rbody::reset_offset_body(&table))
}

/// GET_BROKER_CONSUME_STATS: each group's `ConsumeStats` on this broker, one per topic, as
/// RocketMQ's broker gathers them: the groups with settings, live members or committed
/// offsets, each topic the group has committed offsets for that is on this broker and, when
/// the group has live members, that they subscribe to. `isOrder` keeps topics marked orderly: ringmq's topics
/// carry no such mark (orderly is a group setting), so it keeps none. `lastTimestamp` is 0,
/// as in GET_CONSUME_STATS; `totalDiff` sums broker minus consumer offset over every queue.
pub(super) async fn broker_consume_stats<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    is_order: bool,
) -> Result<Answer> {
    let list = groups(n).await?;
    let mut committed: BTreeMap<(String, String, u32), u64> = BTreeMap::new();
    for e in all_offsets(n).await? {
        committed.insert((e.consumer_group, e.topic, e.queue_id), e.offset);
    }
    // The groups RocketMQ's broker would hold a config for: with settings, live members
    // (whose heartbeat creates one there) or committed offsets; with their subscriptions.
    let mut names: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for g in &list.groups {
        names
            .entry(g.group.as_str())
            .or_default()
            .extend(g.subscriptions.iter().map(|s| s.topic.as_str()));
    }
    for (group, _, _) in committed.keys() {
        names.entry(group.as_str()).or_default();
    }
    let broker = n.svc.broker_name().unwrap_or_default();
    let mut total_diff: i64 = 0;
    let mut per_group: Vec<String> = Vec::with_capacity(names.len());
    for (group, subscribed) in &names {
        let topics: BTreeSet<&str> = committed
            .keys()
            .filter(|(g, _, _)| g == group)
            .map(|(_, t, _)| t.as_str())
            .collect();
        let mut stats: Vec<String> = Vec::new();
        for topic in topics {
            if is_order || (!subscribed.is_empty() && !subscribed.contains(topic)) {
                continue;
            }
            let Ok(c) = topic_config(n, topic).await else {
                continue;
            };
            let queues = super::view_queues(n.svc, topic, c.read_queue_count);
            n.budget(queues.len())?;
            let mut table = Vec::with_capacity(queues.len());
            for (seen, q) in queues {
                let h = GetOffsetRequest {
                    topic: topic.to_string(),
                    queue_id: q,
                };
                let max: OffsetResponse = n.fields(RequestCode::GetMaxOffset, &h).await?;
                let at = committed
                    .get(&(group.to_string(), topic.to_string(), q))
                    .map(|&o| long(o))
                    .unwrap_or(0);
                total_diff = total_diff.saturating_add(long(max.offset).saturating_sub(at));
                table.push((
                    queue_json(topic, &broker, seen),
                    rbody::OffsetWrapper {
                        broker_offset: long(max.offset),
                        consumer_offset: at,
                        pull_offset: at,
                        last_timestamp: 0,
                    },
                ));
            }
            stats.push(String::from_utf8_lossy(&rbody::consume_stats(&table, 0.0)).into_owned());
        }
        let name = serde_json::to_string(group).unwrap_or_else(|_| "\"\"".to_string());
        per_group.push(format!("{{{name}:[{}]}}", stats.join(",")));
    }
    let body = format!(
        r#"{{"consumeStatsList":[{}],"totalDiff":{total_diff},"totalInflightDiff":0}}"#,
        per_group.join(",")
    );
    ok(body.into_bytes())
}

/// CLONE_GROUP_OFFSET: `destGroup` takes `srcGroup`'s committed offsets on this broker,
/// topic by topic, as RocketMQ's broker does: every topic `srcGroup` has offsets for when
/// no topic is named; a topic not on this broker is passed over, and so, unless `offline`,
/// is a topic that `srcGroup`'s live members do not subscribe to. Queues `srcGroup` has no
/// offset for keep `destGroup`'s.
pub(super) async fn clone_offset<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    h: CloneGroupOffsetRequestHeader,
) -> Result<Answer> {
    if h.src_group.is_empty() || h.dest_group.is_empty() {
        return Err(Failed::new(
            response::SYSTEM_ERROR,
            "srcGroup and destGroup must both be named",
        ));
    }
    let offsets = group_offsets(n, &h.src_group).await?;
    let topics: BTreeSet<String> = match h.topic.filter(|t| !t.trim().is_empty()) {
        Some(t) => BTreeSet::from([t]),
        None => offsets.keys().map(|(t, _)| t.clone()).collect(),
    };
    // The topics the source group's live members subscribe to (None: no check).
    let subscribed: Option<BTreeSet<String>> = if h.offline.unwrap_or(false) {
        None
    } else {
        groups(n)
            .await?
            .groups
            .into_iter()
            .find(|g| g.group == h.src_group && !g.subscriptions.is_empty())
            .map(|g| g.subscriptions.into_iter().map(|s| s.topic).collect())
    };
    for topic in topics {
        if topic_config(n, &topic).await.is_err() {
            continue;
        }
        if subscribed.as_ref().is_some_and(|s| !s.contains(&topic)) {
            continue;
        }
        let queues: Vec<(u32, u64)> = offsets
            .range((topic.clone(), 0)..=(topic.clone(), u32::MAX))
            .map(|((_, q), o)| (*q, *o))
            .collect();
        n.budget(queues.len())?;
        for (queue_id, offset) in queues {
            let set = UpdateConsumerOffsetRequest {
                consumer_group: h.dest_group.clone(),
                topic: topic.clone(),
                queue_id,
                offset,
            };
            n.call(RequestCode::InvokeBrokerToResetOffset, &set, &[])
                .await?;
        }
    }
    ok(Vec::new())
}

/// QUERY_TOPIC_CONSUME_BY_WHO: the groups that subscribe to or have offsets on `topic`.
pub(super) async fn consume_by_who<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topic: &str,
) -> Result<Answer> {
    let mut out = BTreeSet::new();
    for g in groups(n).await?.groups {
        if g.subscriptions.iter().any(|s| s.topic == topic) {
            out.insert(g.group);
        }
    }
    for e in all_offsets(n).await? {
        if e.topic == topic {
            out.insert(e.consumer_group);
        }
    }
    ok(rbody::GroupList {
        group_list: out.into_iter().collect(),
    }
    .to_json())
}

/// QUERY_TOPICS_BY_CONSUMER: the topics `group` subscribes to or has offsets on.
pub(super) async fn topics_by_consumer<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
) -> Result<Answer> {
    let mut out: BTreeSet<String> = group_offsets(n, group)
        .await?
        .into_keys()
        .map(|(t, _)| t)
        .collect();
    for g in groups(n).await?.groups {
        if g.group == group {
            out.extend(g.subscriptions.into_iter().map(|s| s.topic));
        }
    }
    ok(rbody::TopicList {
        topic_list: out.into_iter().collect(),
        broker_addr: None,
    }
    .to_json())
}

/// The offset of queue `q` at `timestamp_ms` (-1: the queue's end).
async fn queue_offset_at<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topic: &str,
    q: u32,
    timestamp_ms: i64,
) -> Result<u64> {
    let r: OffsetResponse = if timestamp_ms < 0 {
        let h = GetOffsetRequest {
            topic: topic.to_string(),
            queue_id: q,
        };
        n.fields(RequestCode::GetMaxOffset, &h).await?
    } else {
        let h = SearchOffsetRequest {
            topic: topic.to_string(),
            queue_id: q,
            timestamp_ms,
            boundary: Boundary::Lower,
        };
        n.fields(RequestCode::SearchOffsetByTimestamp, &h).await?
    };
    Ok(r.offset)
}

async fn groups<S: Service + ?Sized>(n: &mut Natives<'_, S>) -> Result<ConsumerGroupList> {
    n.body(RequestCode::GetAllSubscriptionGroupConfig, &Empty)
        .await
}

/// Every committed offset on this broker (each shard keeps its queues').
async fn all_offsets<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
) -> Result<Vec<ringmq_wire::command::ConsumerOffsetEntry>> {
    let shards = n.shard_count().await?;
    let mut out = Vec::new();
    for shard_id in 0..shards {
        let r = n
            .raw(
                RequestCode::GetAllConsumerOffset,
                &GetAllConsumerOffsetRequest { shard_id },
                &[],
            )
            .await?;
        if r.status != Status::Success {
            return Err(super::failed(&r));
        }
        let t: ConsumerOffsetTable = super::decode_body(RequestCode::GetAllConsumerOffset, &r)?;
        out.extend(t.entries);
    }
    Ok(out)
}

/// `group`'s committed offsets by (topic, queue).
async fn group_offsets<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
) -> Result<BTreeMap<(String, u32), u64>> {
    Ok(all_offsets(n)
        .await?
        .into_iter()
        .filter(|e| e.consumer_group == group)
        .map(|e| ((e.topic, e.queue_id), e.offset))
        .collect())
}

fn group_json(g: &ConsumerGroupInfo) -> rbody::SubscriptionGroupConfig {
    rbody::SubscriptionGroupConfig {
        group_name: g.group.clone(),
        retry_max_times: i32::try_from(g.retry_max_times).unwrap_or(i32::MAX),
        consume_message_orderly: g.consume_message_orderly,
        ..Default::default()
    }
}

fn subscription_json(s: &Subscription) -> rbody::SubscriptionData {
    let sql = s.filter_type == FilterType::Sql92;
    let tags: Vec<String> = if sql || s.expression.trim() == "*" {
        Vec::new()
    } else {
        s.expression
            .split("||")
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect()
    };
    rbody::SubscriptionData {
        class_filter_mode: false,
        topic: s.topic.clone(),
        sub_string: s.expression.clone(),
        code_set: tags
            .iter()
            .map(|t| ringmq_wire::record::tag_hash(t) as i32)
            .collect(),
        tags_set: tags,
        sub_version: long(s.version),
        expression_type: if sql {
            rbody::EXPRESSION_TYPE_SQL92
        } else {
            rbody::EXPRESSION_TYPE_TAG
        }
        .to_string(),
    }
}

/// DELETE_SUBSCRIPTIONGROUP: SUCCESS also when the group has no settings here.
pub(super) async fn delete<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    group: &str,
) -> Result<Answer> {
    let h = ringmq_wire::command::DeleteSubscriptionGroupRequest {
        group: group.to_string(),
    };
    n.absent_ok(
        RequestCode::DeleteSubscriptionGroup,
        &h,
        Status::SubscriptionNotExist,
    )
    .await
}

/// DELETE_SUBSCRIPTIONGROUP_LIST: each group as DELETE_SUBSCRIPTIONGROUP, in turn; the first
/// failure is the answer (the groups before it are deleted).
pub(super) async fn delete_list<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    groups: Vec<String>,
) -> Result<Answer> {
    n.budget(groups.len())?;
    let mut answer = ok(Vec::new())?;
    for group in groups {
        answer = delete(n, &group).await?;
    }
    Ok(answer)
}
