//! `topic create|update|delete|list|route|status` and `updateTopic`.

use ringmq_client::admin::{TopicSpec, TopicTarget};
use ringmq_client::wire::command::route::perm;
use ringmq_client::Admin;
use serde_json::json;

use super::{topic_of, usage};
use crate::cli::{TopicDeleteArgs, TopicPutArgs};
use crate::error::{Context, CtlError, Result};
use crate::output::{int, json_only, perm as perm_col, text, time, Column, Report, Section};

/// Queues of a new topic when no count is given (RocketMQ's default too).
pub const DEFAULT_QUEUES: u32 = 8;

/// What `put` may do with a topic that exists (or not) on a target broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// `topic create`: refuse if it exists.
    Create,
    /// `topic update`: refuse if it does not exist; keep what is not given.
    Update,
    /// `updateTopic`: create or update.
    Upsert,
}

pub async fn put(admin: &Admin, a: &TopicPutArgs, mode: PutMode) -> Result<Report> {
    let topic = topic_of(&a.topic);
    let given = a.queues.is_some() || a.read_queues.is_some() || a.write_queues.is_some();
    if mode == PutMode::Update && !given && a.perm.is_none() {
        return Err(usage(
            "nothing to change: give --queues, --read-queues, --write-queues or --perm",
        ));
    }
    let target = match (&a.cluster, &a.broker) {
        (Some(c), _) => TopicTarget::Cluster(c.clone()),
        (None, Some(b)) => TopicTarget::Broker(b.clone()),
        (None, None) if mode == PutMode::Update => {
            let route = admin
                .topic_route(&topic)
                .await
                .doing(|| format!("reading the route of {topic}"))?;
            let masters = route.masters();
            if masters.is_empty() {
                return Err(CtlError::Refused(format!("no master has topic {topic}")));
            }
            return put_each(
                admin,
                a,
                mode,
                &topic,
                masters.iter().map(|m| m.to_string()),
            )
            .await;
        }
        (None, None) => TopicTarget::AllMasters,
    };
    let masters = admin
        .target_masters(&target)
        .await
        .doing(|| "finding the target brokers".into())?;
    put_each(
        admin,
        a,
        mode,
        &topic,
        masters.iter().map(|m| m.addr.to_string()),
    )
    .await
}

/// Sets the topic on each broker (by address), one at a time, from its current config.
async fn put_each(
    admin: &Admin,
    a: &TopicPutArgs,
    mode: PutMode,
    topic: &str,
    brokers: impl Iterator<Item = String>,
) -> Result<Report> {
    let mut s = Section::list("topic", topic_columns());
    let wait = admin.config().request_timeout;
    for addr_text in brokers {
        let addr = admin
            .broker_addr(&addr_text)
            .await
            .doing(|| format!("resolving {addr_text}"))?;
        let current = admin
            .topic_config(addr, topic)
            .await
            .doing(|| format!("reading the topics of {addr}"))?;
        let base = match (mode, current) {
            (PutMode::Create, Some(_)) => {
                return Err(CtlError::Refused(format!(
                    "topic {topic} already exists on {addr}; use `topic update` to change it"
                )))
            }
            (PutMode::Update, None) => {
                return Err(CtlError::Refused(format!(
                    "topic {topic} does not exist on {addr}; use `topic create`"
                )))
            }
            (_, Some(c)) => TopicSpec {
                topic: topic.to_string(),
                read_queues: c.read_queue_count,
                write_queues: c.write_queue_count,
                perm: c.perm,
            },
            (_, None) => TopicSpec::new(topic, DEFAULT_QUEUES),
        };
        let spec = TopicSpec {
            topic: topic.to_string(),
            read_queues: a.read_queues.or(a.queues).unwrap_or(base.read_queues),
            write_queues: a.write_queues.or(a.queues).unwrap_or(base.write_queues),
            perm: a.perm.unwrap_or(base.perm),
        };
        let done = admin
            .put_topic(&spec, &TopicTarget::Broker(addr.to_string()), wait)
            .await
            .doing(|| format!("setting topic {topic} on {addr}"))?;
        for (b, cfg) in done {
            s.push(vec![
                json!(b.name),
                json!(b.addr.to_string()),
                json!(cfg.topic),
                json!(cfg.read_queue_count),
                json!(cfg.write_queue_count),
                json!(cfg.perm),
                json!(cfg.queue_shards),
            ]);
        }
    }
    Ok(Report::one(s))
}

fn topic_columns() -> Vec<Column> {
    vec![
        text("BROKER", "broker"),
        text("ADDRESS", "address"),
        text("TOPIC", "topic"),
        int("READ_QUEUES", "read_queues"),
        int("WRITE_QUEUES", "write_queues"),
        perm_col("PERM", "perm"),
        text("QUEUE_SHARDS", "queue_shards"),
    ]
}

pub async fn delete(admin: &Admin, a: &TopicDeleteArgs) -> Result<Report> {
    let topic = topic_of(&a.topic);
    let deleted = admin
        .delete_topic(&topic, a.cluster.as_deref())
        .await
        .doing(|| format!("deleting topic {topic}"))?;
    let mut s = Section::list(
        "deleted",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            text("TOPIC", "topic"),
        ],
    );
    for b in deleted {
        s.push(vec![json!(b.name), json!(b.addr.to_string()), json!(topic)]);
    }
    Ok(Report::one(s))
}

pub async fn list(admin: &Admin) -> Result<Report> {
    let topics = admin.topic_list().await.doing(|| "listing topics".into())?;
    let mut s = Section::list("topics", vec![text("TOPIC", "topic"), text("KIND", "kind")]);
    for t in topics {
        let kind = topic_kind(&t);
        s.push(vec![json!(t), json!(kind)]);
    }
    Ok(Report::one(s))
}

/// `retry` (`%RETRY%group`), `dlq` (`%DLQ%group`), `system` (RocketMQ's reserved names),
/// else `normal`.
pub fn topic_kind(topic: &str) -> &'static str {
    if topic.starts_with("%RETRY%") {
        "retry"
    } else if topic.starts_with("%DLQ%") {
        "dlq"
    } else if topic.starts_with("RMQ_SYS_")
        || topic.starts_with("rmq_sys_")
        || topic.starts_with('%')
        || matches!(
            topic,
            "TBW102" | "SCHEDULE_TOPIC_XXXX" | "OFFSET_MOVED_EVENT"
        )
    {
        "system"
    } else {
        "normal"
    }
}

pub async fn route(admin: &Admin, topic: &str) -> Result<Report> {
    let route = admin
        .topic_route_data(topic)
        .await
        .doing(|| format!("reading the route of {topic}"))?;
    let mut brokers = Section::list(
        "brokers",
        vec![
            text("CLUSTER", "cluster"),
            text("BROKER", "broker"),
            int("ID", "id"),
            text("ADDRESS", "address"),
            text("ROLE", "role"),
            int("SHARDS", "shards"),
            text("VERSION", "version"),
        ],
    );
    for b in &route.brokers {
        for (id, r) in &b.replicas {
            brokers.push(vec![
                json!(b.cluster),
                json!(b.broker_name),
                json!(id),
                json!(r.address),
                json!(r.role.name()),
                json!(r.shard_count),
                json!(r.version),
            ]);
        }
    }
    let mut queues = Section::list(
        "queues",
        vec![
            text("BROKER", "broker"),
            int("READ_QUEUES", "read_queues"),
            int("WRITE_QUEUES", "write_queues"),
            perm_col("PERM", "perm"),
            text("QUEUE_SHARDS", "queue_shards"),
        ],
    );
    for q in &route.queues {
        queues.push(vec![
            json!(q.broker_name),
            json!(q.read_queue_count),
            json!(q.write_queue_count),
            json!(q.perm),
            json!(q.queue_shards),
        ]);
    }
    let mut report = Report::one(brokers).with(queues);
    if route.queues.iter().any(|q| q.perm & perm::WRITE == 0) {
        report
            .notes
            .push(format!("some brokers do not accept writes to {topic}"));
    }
    Ok(report)
}

pub async fn status(admin: &Admin, topic: &str) -> Result<Report> {
    let queues = admin
        .topic_status(topic)
        .await
        .doing(|| format!("reading the queues of {topic}"))?;
    let mut s = Section::list(
        "queues",
        vec![
            text("BROKER", "broker"),
            int("QUEUE", "queue"),
            int("SHARD", "shard"),
            int("MIN_OFFSET[msg]", "min_offset"),
            int("MAX_OFFSET[msg]", "max_offset"),
            time("LAST_UPDATE[UTC]", "last_update_ms"),
            json_only("topic"),
        ],
    );
    for q in queues {
        s.push(vec![
            json!(q.queue.broker_name),
            json!(q.queue.queue_id),
            json!(q.shard),
            json!(q.min_offset),
            json!(q.max_offset),
            json!(q.last_store_ms),
            json!(q.queue.topic),
        ]);
    }
    Ok(Report::one(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(topic_kind("%RETRY%g"), "retry");
        assert_eq!(topic_kind("%DLQ%g"), "dlq");
        assert_eq!(topic_kind("TBW102"), "system");
        assert_eq!(topic_kind("Orders"), "normal");
    }
}
