//! `group list|progress|reset-offset|connections` and `consumerProgress`. Progress shows the group's
//! retry topic (`%RETRY%<group>`) and dead-letter topic (`%DLQ%<group>`, lag = dead letters
//! not resent) beside its own topics, with their lags apart in the summary, and its POP
//! counts (in flight now; acked, revived and dead-lettered since each broker started).

use ringmq_client::admin::{OffsetReset, QueueProgress, ResetTo};
use ringmq_client::{Admin, Error, MessageQueue};
use serde_json::{json, Value};

use super::dlq::{dlq_queues, dlq_topic, retry_topic, DlqQueue};
use super::{group_of, now_ms, usage};
use crate::cli::{GroupUpdateArgs, ResetOffsetArgs};
use crate::error::{Context, CtlError, Result};
use crate::output::{float, int, json_only, text, Report, Section};

/// RocketMQ's retry limit of a group whose update names none (`SubscriptionGroupConfig`).
const RETRY_MAX_TIMES_DEFAULT: u32 = 16;

pub async fn list(admin: &Admin) -> Result<Report> {
    let groups = admin
        .group_list()
        .await
        .doing(|| "listing consumer groups".into())?;
    let mut s = Section::list(
        "groups",
        vec![
            text("GROUP", "group"),
            int("MEMBERS", "member_count"),
            text("SUBSCRIPTIONS", "subscriptions"),
            text("OFFSET_TOPICS", "offset_topics"),
            text("BROKERS", "brokers"),
            json_only("members"),
        ],
    );
    for g in groups {
        s.push(vec![
            json!(g.group),
            json!(g.members.len()),
            json!(g.subscriptions),
            json!(g.offset_topics),
            json!(g.brokers),
            json!(g.members),
        ]);
    }
    Ok(Report::one(s))
}

pub async fn progress(admin: &Admin, group: &str, topic: Option<&str>) -> Result<Report> {
    let mut p = admin
        .group_progress(group, topic)
        .await
        .doing(|| format!("reading the progress of group {group}"))?;
    let retry = retry_topic(group);
    let dlq = dlq_topic(group);
    // The dead-letter queues get their own rows below (lag: not resent yet).
    p.queues.retain(|q| q.queue.topic != dlq);
    let mut has_retry = p.queues.iter().any(|q| q.queue.topic == retry);
    if !has_retry {
        match admin.group_progress(group, Some(&retry)).await {
            Ok(r) => {
                has_retry = true;
                p.queues.extend(r.queues);
            }
            // No retry topic (yet): the broker creates it for a clustering group.
            Err(Error::NoRoute { .. }) => {}
            Err(e) => return Err(e).doing(|| format!("reading the progress of {retry}")),
        }
    }
    let dlq_queues = dlq_queues(admin, group).await?;
    let pop = admin
        .pop_status(group)
        .await
        .doing(|| format!("reading the POP counts of group {group}"))?;
    let mut queues = Section::list(
        "queues",
        vec![
            text("TOPIC", "topic"),
            text("BROKER", "broker"),
            int("QUEUE", "queue"),
            int("BROKER_OFFSET[msg]", "broker_offset"),
            int("CONSUMER_OFFSET[msg]", "consumer_offset"),
            int("LAG[msg]", "lag"),
            float("LAG_AGE[s]", "lag_age_s"),
            text("MEMBER", "member"),
        ],
    );
    // Lag age: how long the oldest message not consumed has waited (0 with no lag).
    let now = now_ms();
    let age_s = |q: &QueueProgress| -> Option<f64> {
        match (q.lag, q.oldest_unconsumed_ms) {
            (Some(0), _) => Some(0.0),
            (_, Some(t)) => Some((now - t).max(0) as f64 / 1e3),
            _ => None,
        }
    };
    for q in &p.queues {
        queues.push(vec![
            json!(q.queue.topic),
            json!(q.queue.broker_name),
            json!(q.queue.queue_id),
            json!(q.broker_max_offset),
            json!(q.committed_offset),
            json!(q.lag),
            json!(age_s(q)),
            json!(q.member),
        ]);
    }
    for q in dlq_queues.iter().flatten() {
        queues.push(vec![
            json!(q.mq.topic),
            json!(q.mq.broker_name),
            json!(q.mq.queue_id),
            json!(q.max),
            json!(q.mark),
            json!(q.not_resent()),
            Value::Null,
            Value::Null,
        ]);
    }
    let mut members = Section::list(
        "members",
        vec![
            text("MEMBER", "member"),
            int("QUEUES", "queue_count"),
            text("ASSIGNED", "queues"),
        ],
    );
    for (m, qs) in p.assignment() {
        let names: Vec<String> = qs.iter().map(ToString::to_string).collect();
        members.push(vec![json!(m), json!(qs.len()), json!(names)]);
    }
    let lag_of = |retry_only: bool| -> u64 {
        p.queues
            .iter()
            .filter(|q| (q.queue.topic == retry) == retry_only)
            .filter_map(|q| q.lag)
            .sum()
    };
    let summary = Section::record(
        "summary",
        vec![
            text("GROUP", "group"),
            int("MEMBERS", "member_count"),
            int("TOTAL_LAG[msg]", "total_lag"),
            int("RETRY_LAG[msg]", "retry_lag"),
            int("DLQ_LAG[msg]", "dlq_lag"),
            float("MAX_LAG_AGE[s]", "max_lag_age_s"),
            int("POP_INFLIGHT[msg]", "pop_in_flight"),
            int("POP_REVIVED[msg]", "pop_revived"),
            int("POP_ACKED[msg]", "pop_acked"),
            int("POP_DEAD[msg]", "pop_dead_lettered"),
        ],
        vec![
            json!(p.group),
            json!(p.members.len()),
            json!(lag_of(false)),
            json!(has_retry.then(|| lag_of(true))),
            json!(dlq_queues.map(|qs| qs.iter().map(DlqQueue::not_resent).sum::<u64>())),
            json!(p
                .queues
                .iter()
                .filter(|q| q.queue.topic != retry)
                .filter_map(age_s)
                .reduce(f64::max)),
            json!(pop.in_flight),
            json!(pop.revived),
            json!(pop.acked),
            json!(pop.dead_lettered),
        ],
    );
    Ok(Report::one(queues).with(members).with(summary))
}

/// `group update`: a group's retry limit and orderly flag on every master.
pub async fn update(admin: &Admin, a: &GroupUpdateArgs) -> Result<Report> {
    let group = group_of(&a.group);
    let set = (!a.reset).then(|| {
        (
            a.retry_max_times.unwrap_or(RETRY_MAX_TIMES_DEFAULT),
            a.orderly.unwrap_or(false),
        )
    });
    let brokers = match set {
        Some((n, orderly)) => admin
            .set_group_settings(&group, n, orderly)
            .await
            .doing(|| format!("setting the settings of group {group}"))?,
        None => admin
            .delete_group_settings(&group)
            .await
            .doing(|| format!("dropping the settings of group {group}"))?,
    };
    let mut s = Section::list(
        "brokers",
        vec![
            text("BROKER", "broker"),
            text("ADDR", "addr"),
            text("RETRY_MAX_TIMES", "retry_max_times"),
            text("ORDERLY", "orderly"),
        ],
    );
    let (retry, orderly) = match set {
        Some((n, o)) => (json!(n), json!(o)),
        None => (json!("default"), json!("default")),
    };
    for b in &brokers {
        s.push(vec![
            json!(b.name),
            json!(b.addr.to_string()),
            retry.clone(),
            orderly.clone(),
        ]);
    }
    let mut report = Report::one(s);
    if brokers.is_empty() {
        report
            .notes
            .push(format!("group {group} had no settings on any master"));
    }
    Ok(report)
}

pub async fn reset(admin: &Admin, a: &ResetOffsetArgs) -> Result<Report> {
    let group = group_of(&a.group);
    let to = match a.offset {
        Some(_) => None,
        None => Some(parse_reset_to(
            a.to.as_deref()
                .or(a.timestamp.as_deref())
                .unwrap_or_default(),
        )?),
    };
    let route = admin
        .topic_route(&a.topic)
        .await
        .doing(|| format!("reading the route of {}", a.topic))?;
    let members = admin
        .group_members(&group, &route.masters())
        .await
        .doing(|| format!("reading the members of group {group}"))?;
    let changes = match (to, a.offset, a.queue) {
        (Some(to), _, _) => admin
            .reset_offset(&group, &a.topic, to)
            .await
            .doing(|| format!("resetting the offsets of group {group} on {}", a.topic))?,
        (None, Some(offset), Some(queue)) => {
            vec![reset_one(admin, &group, a, queue, offset).await?]
        }
        _ => return Err(usage("give --to, --timestamp, or --offset with --queue")),
    };
    let mut s = Section::list(
        "offsets",
        vec![
            text("TOPIC", "topic"),
            text("BROKER", "broker"),
            int("QUEUE", "queue"),
            int("OLD_OFFSET[msg]", "old_offset"),
            int("NEW_OFFSET[msg]", "new_offset"),
        ],
    );
    for c in changes {
        s.push(vec![
            json!(c.queue.topic),
            json!(c.queue.broker_name),
            json!(c.queue.queue_id),
            json!(c.old),
            json!(c.new),
        ]);
    }
    let mut report = Report::one(s);
    if !members.is_empty() {
        report.notes.push(format!(
            "warning: group {group} has {} live member(s); they will commit their own positions over this reset unless stopped",
            members.len()
        ));
    }
    Ok(report)
}

/// `reset-offset --offset N --queue Q [--broker B]`: one readable queue of the topic to
/// an offset between its min and max offset.
async fn reset_one(
    admin: &Admin,
    group: &str,
    a: &ResetOffsetArgs,
    queue: u32,
    offset: u64,
) -> Result<OffsetReset> {
    let route = admin
        .topic_route(&a.topic)
        .await
        .doing(|| format!("reading the route of {}", a.topic))?;
    let found: Vec<&MessageQueue> = route
        .read_queues
        .iter()
        .filter(|mq| mq.queue_id == queue)
        .filter(|mq| a.broker.as_deref().is_none_or(|b| mq.broker_name == b))
        .collect();
    let mq = match found.as_slice() {
        [mq] => (*mq).clone(),
        [] => {
            return Err(usage(format!(
                "{} has no readable queue {queue}{}",
                a.topic,
                a.broker
                    .as_deref()
                    .map(|b| format!(" on broker {b}"))
                    .unwrap_or_default()
            )))
        }
        _ => {
            return Err(usage(format!(
                "queue {queue} of {} is on {} brokers: give --broker",
                a.topic,
                found.len()
            )))
        }
    };
    let min = admin
        .min_offset(&mq)
        .await
        .doing(|| format!("reading the min offset of {mq}"))?;
    let max = admin
        .max_offset(&mq)
        .await
        .doing(|| format!("reading the max offset of {mq}"))?;
    if offset < min || offset > max {
        return Err(CtlError::Refused(format!(
            "offset {offset} is outside queue {queue} of {} on {}: its messages are {min}..{max}",
            a.topic, mq.broker_name
        )));
    }
    let old = admin
        .committed_offset(group, &mq)
        .await
        .doing(|| format!("reading the offset of group {group} on {mq}"))?;
    admin
        .reset_queue_offset(group, &mq, offset)
        .await
        .doing(|| format!("resetting the offset of group {group} on {mq}"))?;
    Ok(OffsetReset {
        queue: mq,
        old,
        new: offset,
    })
}

/// `group connections`: the consumer group's live members and the producer group's live
/// producers, per master.
pub async fn connections(admin: &Admin, group: &str) -> Result<Report> {
    let masters: Vec<_> = admin
        .brokers()
        .await
        .doing(|| "listing the brokers".into())?
        .into_iter()
        .filter(|b| b.is_master())
        .collect();
    let columns = || {
        vec![
            text("BROKER", "broker"),
            text("CLIENT_ID", "client_id"),
            text("CLIENT_HOST", "client_host"),
        ]
    };
    let mut consumers = Section::list("consumers", columns());
    for b in &masters {
        let ids = admin
            .group_members(group, &[b.addr])
            .await
            .doing(|| format!("reading the consumers of group {group} on {}", b.name))?;
        for id in ids {
            consumers.push(connection_row(&b.name, &id));
        }
    }
    let mut producers = Section::list("producers", columns());
    for (b, ids) in admin
        .producer_connections(group)
        .await
        .doing(|| format!("reading the producers of group {group}"))?
    {
        for id in ids {
            producers.push(connection_row(&b.name, &id));
        }
    }
    let mut report = Report::one(consumers).with(producers);
    if masters.is_empty() {
        report.notes.push("no master is registered".into());
    }
    Ok(report)
}

/// A client id is `HOST@instance[…]` (RocketMQ's clients put their IP first): its host is
/// the part before the first `@`.
fn connection_row(broker: &str, client_id: &str) -> Vec<Value> {
    let addr = client_id.split('@').next().unwrap_or_default();
    vec![json!(broker), json!(client_id), json!(addr)]
}

/// `earliest`, `latest`, ms since the epoch, or RFC 3339.
pub fn parse_reset_to(s: &str) -> Result<ResetTo> {
    match s {
        "earliest" | "first" => return Ok(ResetTo::Earliest),
        "latest" | "last" => return Ok(ResetTo::Latest),
        _ => {}
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ResetTo::Timestamp(ms));
    }
    match s.parse::<jiff::Timestamp>() {
        Ok(t) => Ok(ResetTo::Timestamp(t.as_millisecond())),
        Err(e) => Err(usage(format!(
            "--to {s:?}: use earliest, latest, ms since the epoch or RFC 3339 ({e})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_targets() {
        assert!(matches!(parse_reset_to("earliest"), Ok(ResetTo::Earliest)));
        assert!(matches!(parse_reset_to("latest"), Ok(ResetTo::Latest)));
        assert!(matches!(
            parse_reset_to("1700000000000"),
            Ok(ResetTo::Timestamp(1_700_000_000_000))
        ));
        assert!(matches!(
            parse_reset_to("2023-11-14T22:13:20Z"),
            Ok(ResetTo::Timestamp(1_700_000_000_000))
        ));
        assert!(matches!(
            parse_reset_to("2023-11-14T23:13:20+01:00"),
            Ok(ResetTo::Timestamp(1_700_000_000_000))
        ));
        assert!(parse_reset_to("yesterday").is_err());
    }
}
