//! The topic and broker answers of [`super::Job`]: topic configs, a topic's stats, the broker's
//! configuration and runtime info, and the name server's topics of one cluster.

use std::collections::BTreeMap;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::route::{ClusterInfo, TopicConfig, TopicConfigTable, TopicRoute};
use ringmq_wire::command::{
    BrokerConfigTable, BrokerRuntimeInfo, GetOffsetRequest, GetRouteRequest, OffsetResponse,
    TopicList,
};
use ringmq_wire::remoting::body::{self as rbody, JsonBody};
use ringmq_wire::remoting::code::response;
use ringmq_wire::remoting::ext::ToExt;
use ringmq_wire::remoting::frame::Command;
use ringmq_wire::remoting::headers::GetBrokerConfigResponseHeader;

use super::{long, ok, Answer, Failed, Natives, Result};
use crate::net::reply::Body;
use crate::net::service::Service;
use crate::net::shard_view::ShardView;

/// The RocketMQ version whose admin protocol ringmq answers (`MQVersion.Version.V5_3_3`, its
/// ordinal): tools decide which requests to send by it.
pub const ROCKETMQ_VERSION_DESC: &str = "V5_3_3";
pub const ROCKETMQ_VERSION_ORDINAL: i32 = 479;

/// GET_ALL_TOPIC_CONFIG.
pub(super) async fn all_configs<S: Service + ?Sized>(n: &mut Natives<'_, S>) -> Result<Answer> {
    let t: TopicConfigTable = n.body(RequestCode::GetAllTopicConfig, &Empty).await?;
    let view = n.svc.shard_view();
    let body = rbody::TopicConfigSerializeWrapper {
        topic_config_table: t
            .topics
            .iter()
            .map(|c| (c.topic.clone(), topic_json(c, view)))
            .collect(),
        data_version: version_json(&t.data_version),
        ..Default::default()
    };
    ok(body.to_json())
}

/// GET_TOPIC_CONFIG: one topic's config, TOPIC_NOT_EXIST when it has none here.
pub(super) async fn config<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topic: &str,
) -> Result<Answer> {
    let c = topic_config(n, topic).await?;
    ok(topic_json(&c, n.svc.shard_view()).to_json())
}

/// GET_BROKER_CONFIG: RocketMQ's properties text (`key=value` lines) and its version.
pub(super) async fn broker_config<S: Service + ?Sized>(n: &mut Natives<'_, S>) -> Result<Answer> {
    let t: BrokerConfigTable = n.body(RequestCode::GetBrokerConfig, &Empty).await?;
    let mut text = String::new();
    for (k, v) in &t.entries {
        text.push_str(k);
        text.push('=');
        text.push_str(v);
        text.push('\n');
    }
    let version = serde_json::to_string(&rbody::DataVersion::default()).unwrap_or_default();
    let mut cmd = Command::response(response::SUCCESS, 0, None);
    cmd.ext_fields = GetBrokerConfigResponseHeader { version }.to_ext();
    Ok((cmd, Body::Bytes(text.into_bytes())))
}

/// GET_BROKER_RUNTIME_INFO: a `KVTable` with RocketMQ's keys where ringmq has the figure, and
/// ringmq's own figures beside them.
pub(super) async fn runtime_info<S: Service + ?Sized>(n: &mut Natives<'_, S>) -> Result<Answer> {
    let info: BrokerRuntimeInfo = n.body(RequestCode::GetBrokerRuntimeInfo, &Empty).await?;
    ok(rbody::KvTable {
        table: runtime_table(&info),
    }
    .to_json())
}

/// RocketMQ's runtime keys from ringmq's runtime info.
pub fn runtime_table(info: &BrokerRuntimeInfo) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    let sum = |f: fn(&ringmq_wire::command::ShardStats) -> u64| -> u64 {
        info.shards.iter().map(f).sum()
    };
    let extra = |k: &str| info.extra.get(k).cloned();
    let rate = |suffix: &str| -> u64 {
        info.extra
            .iter()
            .filter(|(k, _)| k.starts_with("shard.") && k.ends_with(suffix))
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum()
    };
    let put_tps = rate(".msgs_in_per_s");
    let get_tps = rate(".msgs_out_per_s");
    let now_ms = crate::io::clock::now_ms();
    let uptime_ms = extra("uptime_ms")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    // A physical offset carries its shard in the top 16 bits: the broker's log is the sum
    // of the shards' logs.
    let in_log = |o: u64| o & ((1u64 << 48) - 1);
    let min_offset: u64 = info
        .shards
        .iter()
        .map(|s| in_log(s.commitlog_min_offset))
        .sum();
    let max_offset: u64 = info
        .shards
        .iter()
        .map(|s| in_log(s.commitlog_max_offset))
        .sum();
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    put("brokerVersionDesc", ROCKETMQ_VERSION_DESC.to_string());
    put("brokerVersion", ROCKETMQ_VERSION_ORDINAL.to_string());
    put("ringmqVersion", extra("version").unwrap_or_default());
    put("brokerActive", "true".to_string());
    // RocketMQ writes "tps of 10 s, 60 s, 600 s"; ringmq measures one rate.
    put("putTps", format!("{put_tps}.0 {put_tps}.0 {put_tps}.0"));
    put(
        "getTransferredTps",
        format!("{get_tps}.0 {get_tps}.0 {get_tps}.0"),
    );
    put(
        "getTotalTps",
        format!("{get_tps}.0 {get_tps}.0 {get_tps}.0"),
    );
    // Totals since start (ringmq keeps no per-day counts): "today" is since start.
    put("msgPutTotalTodayNow", sum(|s| s.msgs_in).to_string());
    put("msgGetTotalTodayNow", sum(|s| s.msgs_out).to_string());
    for k in [
        "msgPutTotalTodayMorning",
        "msgPutTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "msgGetTotalYesterdayMorning",
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "pageCacheLockTimeMills",
        "dispatchBehindBytes",
    ] {
        put(k, "0".to_string());
    }
    put("bootTimestamp", (now_ms - uptime_ms).to_string());
    put("runtime", runtime_text(uptime_ms));
    put("commitLogMinOffset", long(min_offset).to_string());
    put("commitLogMaxOffset", long(max_offset).to_string());
    if let Some(p) = extra("disk_used_percent").and_then(|v| v.parse::<f64>().ok()) {
        put("commitLogDiskRatio", format!("{}", p / 100.0));
    }
    put("earliestMessageTimeStamp", "0".to_string());
    for (k, v) in &info.extra {
        t.insert(format!("ringmq.{k}"), v.clone());
    }
    t
}

/// RocketMQ's `runtime` text: `[ d days, h hours, m minutes, s seconds ]`.
fn runtime_text(uptime_ms: i64) -> String {
    let s = uptime_ms.max(0) / 1000;
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        s / 86_400,
        s / 3600 % 24,
        s / 60 % 60,
        s % 60
    )
}

/// GET_TOPIC_STATS_INFO: each queue's min and max offset.
pub(super) async fn stats<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topic: &str,
) -> Result<Answer> {
    let c = topic_config(n, topic).await?;
    let broker = n.svc.broker_name().unwrap_or_default();
    let queues = super::view_queues(n.svc, topic, c.read_queue_count.max(c.write_queue_count));
    n.budget(queues.len() * 2)?;
    let mut table = Vec::with_capacity(queues.len());
    for (seen, q) in queues {
        let h = GetOffsetRequest {
            topic: topic.to_string(),
            queue_id: q,
        };
        let min: OffsetResponse = n.fields(RequestCode::GetMinOffset, &h).await?;
        let max: OffsetResponse = n.fields(RequestCode::GetMaxOffset, &h).await?;
        table.push((
            queue_json(topic, &broker, seen),
            rbody::TopicOffset {
                min_offset: long(min.offset),
                max_offset: long(max.offset),
                last_update_timestamp: 0,
            },
        ));
    }
    ok(rbody::topic_stats_table(&table, 0.0))
}

/// GET_TOPICS_BY_CLUSTER (name server): the topics with queues on a broker of `cluster`.
pub(super) async fn by_cluster<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    cluster: &str,
) -> Result<Answer> {
    let info: ClusterInfo = n.body(RequestCode::GetBrokerClusterInfo, &Empty).await?;
    let brokers: std::collections::BTreeSet<&str> = info
        .brokers
        .iter()
        .filter(|b| b.cluster == cluster)
        .map(|b| b.broker_name.as_str())
        .collect();
    if brokers.is_empty() {
        return Err(Failed::new(
            response::SYSTEM_ERROR,
            format!("cluster {cluster} has no broker on this name server"),
        ));
    }
    let all: TopicList = n
        .body(RequestCode::GetAllTopicListFromNameserver, &Empty)
        .await?;
    n.budget(all.topics.len())?;
    let mut topics = Vec::new();
    for topic in all.topics {
        let route: TopicRoute = match n
            .body(
                RequestCode::GetRouteInfoByTopic,
                &GetRouteRequest {
                    topic: topic.clone(),
                },
            )
            .await
        {
            Ok(r) => r,
            // Deleted between the two requests.
            Err(_) => continue,
        };
        if route
            .queues
            .iter()
            .any(|q| brokers.contains(q.broker_name.as_str()))
        {
            topics.push(topic);
        }
    }
    ok(rbody::TopicList {
        topic_list: topics,
        broker_addr: None,
    }
    .to_json())
}

/// One topic's config on this broker, TOPIC_NOT_EXIST when it has none.
pub(super) async fn topic_config<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topic: &str,
) -> Result<TopicConfig> {
    let t: TopicConfigTable = n.body(RequestCode::GetAllTopicConfig, &Empty).await?;
    t.topics
        .into_iter()
        .find(|c| c.topic == topic)
        .ok_or_else(|| {
            Failed::new(
                response::TOPIC_NOT_EXIST,
                format!("topic {topic} does not exist on this broker"),
            )
        })
}

/// A topic's config as RocketMQ's JSON; its queue counts in `view` (a shard's share, on a
/// shard's port).
fn topic_json(c: &TopicConfig, view: Option<ShardView>) -> rbody::TopicConfig {
    let count = |v: u32| {
        let v = view.map_or(v, |s| s.count(&c.topic, v));
        i32::try_from(v).unwrap_or(i32::MAX)
    };
    rbody::TopicConfig {
        topic_name: c.topic.clone(),
        read_queue_nums: count(c.read_queue_count),
        write_queue_nums: count(c.write_queue_count),
        perm: i32::from(c.perm),
        attributes: c.attributes.clone(),
        ..Default::default()
    }
}

fn version_json(v: &ringmq_wire::command::route::DataVersion) -> rbody::DataVersion {
    rbody::DataVersion {
        state_version: long(v.state_version),
        timestamp: v.timestamp_ms,
        counter: long(v.counter),
    }
}

pub(super) fn queue_json(topic: &str, broker: &str, q: u32) -> rbody::MessageQueue {
    rbody::MessageQueue {
        topic: topic.to_string(),
        broker_name: broker.to_string(),
        queue_id: i32::try_from(q).unwrap_or(i32::MAX),
    }
}

/// DELETE_TOPIC_IN_BROKER: SUCCESS also when the topic is not on this broker.
pub(super) async fn delete<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topic: &str,
) -> Result<Answer> {
    let h = ringmq_wire::command::DeleteTopicRequest {
        topic: topic.to_string(),
    };
    n.absent_ok(RequestCode::DeleteTopicInBroker, &h, Status::TopicNotExist)
        .await
}

/// DELETE_TOPIC_IN_NAMESRV: SUCCESS also when the name server has no route for the topic
/// (the brokers' re-registration may have removed it first).
pub(super) async fn delete_in_namesrv<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    h: ringmq_wire::command::DeleteTopicInNamesrvRequest,
) -> Result<Answer> {
    n.absent_ok(RequestCode::DeleteTopicInNamesrv, &h, Status::TopicNotExist)
        .await
}

/// DELETE_TOPIC_IN_BROKER_LIST: each topic as DELETE_TOPIC_IN_BROKER, in turn; the first
/// failure is the answer (the topics before it are deleted).
pub(super) async fn delete_list<S: Service + ?Sized>(
    n: &mut Natives<'_, S>,
    topics: Vec<String>,
) -> Result<Answer> {
    n.budget(topics.len())?;
    let mut answer = ok(Vec::new())?;
    for topic in topics {
        answer = delete(n, &topic).await?;
    }
    Ok(answer)
}
