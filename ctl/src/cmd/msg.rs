//! `msg id|key|dump|recall`, `send`, `consume`, `queryMsgById`, `queryMsgByKey`: messages in
//! and out. Every message prints with the same columns ([`message_columns`]). `send` may
//! schedule its message (a delay level, a delay or a delivery time; clap lets through at
//! most one) and prints the due time the broker set and the handle `msg recall` takes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringmq_client::trace::TRACE_TOPIC_DEFAULT;
use ringmq_client::{
    Admin, ClientConfig, Message, MessageModel, MessageQueue, MessageSelector, Producer,
    PullConsumer, ReceivedMessage, SendStatus,
};
use serde_json::{json, Value};

use super::usage;
use crate::cli::{ConsumeArgs, DumpArgs, MsgIdArgs, MsgKeyArgs, MsgTimeArgs, RecallArgs, SendArgs};
use crate::error::{Context, CtlError, Result};
use crate::output::{body, int, json_only, text, time, Column, Report, Section};

/// Producer group of `send` (RocketMQ's tools use the same name).
pub const TOOLS_PRODUCER_GROUP: &str = "TOOLS_PRODUCER";

/// Most messages one `consume` poll returns.
pub const CONSUME_BATCH_MAX: u32 = 32;

pub async fn by_id(admin: &Admin, a: &MsgIdArgs) -> Result<Report> {
    let id =
        a.id.clone()
            .or_else(|| a.id_opt.clone())
            .unwrap_or_default();
    let m = admin
        .view_message(&id)
        .await
        .doing(|| format!("reading message {id}"))?;
    Ok(Report::one(Section::record(
        "message",
        message_columns(true),
        message_row(&m),
    )))
}

pub async fn by_key(admin: &Admin, a: &MsgKeyArgs) -> Result<Report> {
    let mut pos = a.args.iter().cloned();
    let topic = a.topic.clone().or_else(|| pos.next());
    let key = a.key.clone().or_else(|| pos.next());
    let (Some(topic), Some(key)) = (topic, key) else {
        return Err(usage("give TOPIC and KEY (or -t TOPIC -k KEY)"));
    };
    if pos.next().is_some() {
        return Err(usage("too many arguments: TOPIC KEY"));
    }
    let msgs = admin
        .query_by_key(&topic, &key, a.max)
        .await
        .doing(|| format!("looking up key {key} in {topic}"))?;
    Ok(messages_report(&msgs))
}

/// `msg time TOPIC --begin T [--end T]`: messages stored in the range, oldest first.
pub async fn by_time(admin: &Admin, a: &MsgTimeArgs) -> Result<Report> {
    let begin =
        crate::parse::parse_time_ms(&a.begin).map_err(|e| usage(format!("--begin: {e}")))?;
    let end = match &a.end {
        Some(e) => crate::parse::parse_time_ms(e).map_err(|e| usage(format!("--end: {e}")))?,
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(i64::MAX, |d| d.as_millis() as i64),
    };
    if end < begin {
        return Err(CtlError::Refused(format!(
            "the range ends ({end} ms) before it begins ({begin} ms)"
        )));
    }
    let msgs = admin
        .messages_in_time_range(&a.topic, begin, end, a.max)
        .await
        .doing(|| format!("reading {} between {begin} and {end} ms", a.topic))?;
    let mut report = messages_report(&msgs);
    if msgs.is_empty() {
        report
            .notes
            .push(format!("no message of {} stored in that range", a.topic));
    }
    Ok(report)
}

pub async fn dump(admin: &Admin, a: &DumpArgs) -> Result<Report> {
    let topic = super::topic_of(&a.topic);
    let route = admin
        .topic_route(&topic)
        .await
        .doing(|| format!("reading the route of {topic}"))?;
    let names: Vec<&String> = route.brokers.keys().collect();
    let broker = match &a.broker {
        Some(b) => match route
            .brokers
            .values()
            .find(|e| &e.name == b || e.master.is_some_and(|m| m.to_string() == *b))
        {
            Some(e) => e.name.clone(),
            None => {
                return Err(CtlError::Refused(format!(
                    "broker {b} does not have topic {topic} (brokers: {})",
                    join(&names)
                )))
            }
        },
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(usage(format!(
                "topic {topic} is on several brokers ({}): pick one with --broker",
                join(&names)
            )))
        }
    };
    let mq = MessageQueue::new(&topic, &broker, a.queue);
    let msgs = admin
        .read_messages(&mq, a.offset, a.count)
        .await
        .doing(|| format!("reading {mq} from offset {}", a.offset))?;
    Ok(messages_report(&msgs))
}

/// The queue `send --queue Q [--broker B]` or `send --broker B` names, from the topic's
/// writable queues.
async fn pick_queue(
    producer: &Producer,
    topic: &str,
    queue: Option<u32>,
    broker: Option<&str>,
) -> Result<MessageQueue> {
    let queues = producer
        .write_queues(topic)
        .await
        .doing(|| format!("reading the route of {topic}"))?;
    let brokers: std::collections::BTreeSet<&str> =
        queues.iter().map(|q| q.broker_name.as_str()).collect();
    let broker = match broker {
        Some(b) if brokers.contains(b) => b.to_string(),
        Some(b) => {
            return Err(CtlError::Refused(format!(
                "broker {b} has no writable queue of {topic} (it is on: {})",
                brokers.into_iter().collect::<Vec<_>>().join(", ")
            )))
        }
        None if brokers.len() == 1 => brokers
            .iter()
            .next()
            .map_or(String::new(), |b| b.to_string()),
        None => {
            return Err(CtlError::Refused(format!(
                "{topic} is on several brokers ({}): name one with --broker",
                brokers.into_iter().collect::<Vec<_>>().join(", ")
            )))
        }
    };
    let mine: Vec<&MessageQueue> = queues.iter().filter(|q| q.broker_name == broker).collect();
    match queue {
        Some(id) => mine
            .iter()
            .find(|q| q.queue_id == id)
            .map(|q| (*q).clone())
            .ok_or_else(|| {
                CtlError::Refused(format!(
                    "{topic} has no writable queue {id} on broker {broker} ({} queues)",
                    mine.len()
                ))
            }),
        None => {
            let i = (SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()) as usize)
                % mine.len().max(1);
            mine.get(i).map(|q| (*q).clone()).ok_or_else(|| {
                CtlError::Refused(format!("broker {broker} has no writable queue of {topic}"))
            })
        }
    }
}

pub async fn send(cfg: &ClientConfig, a: &SendArgs) -> Result<Report> {
    let producer = Producer::builder()
        .client_config(cfg.clone())
        .group(TOOLS_PRODUCER_GROUP)
        .send_timeout(cfg.request_timeout)
        .trace(a.trace)
        .start()
        .await
        .doing(|| "starting a producer".into())?;
    let mut msg =
        Message::new(&a.topic, a.body.clone().into_bytes()).with_keys(a.keys.iter().cloned());
    if let Some(t) = &a.tag {
        msg = msg.with_tag(t);
    }
    for (k, v) in &a.properties {
        msg = msg.with_property(k, v);
    }
    if let Some(level) = a.delay_level {
        msg = msg.with_delay_level(level);
    }
    if let Some(delay) = a.delay {
        msg = msg.with_delay(delay);
    }
    if let Some(at_ms) = a.deliver_at {
        msg = msg.with_deliver_at_ms(at_ms);
    }
    let result = match (&a.sharding_key, a.queue, &a.broker) {
        (Some(key), _, _) => producer.send_ordered(msg, key).await,
        (None, None, None) => producer.send(msg).await,
        (None, queue, broker) => {
            match pick_queue(&producer, &a.topic, queue, broker.as_deref()).await {
                Ok(mq) => producer.send_to_queue(msg, &mq).await,
                Err(e) => {
                    producer.shutdown().await;
                    return Err(e);
                }
            }
        }
    };
    // Shutting down flushes the trace record (when tracing), so its count is final after.
    producer.shutdown().await;
    let r = result.doing(|| format!("sending to {}", a.topic))?;
    if let Some(stats) = producer.trace_stats() {
        if stats.sent < stats.recorded {
            return Err(CtlError::Refused(format!(
                "sent {} (UNIQ_KEY {}) but the broker did not store its trace in {TRACE_TOPIC_DEFAULT}: \
                 create the topic (ringmq-ctl topic create {TRACE_TOPIC_DEFAULT}) or turn \
                 autoCreateTopicEnable on, then send again",
                r.msg_id, r.unique_key
            )));
        }
    }
    let status = match r.status {
        SendStatus::Ok => "SEND_OK",
        SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
    };
    Ok(Report::one(Section::record(
        "sent",
        vec![
            text("MSG_ID", "msg_id"),
            text("UNIQ_KEY", "unique_key"),
            text("TOPIC", "topic"),
            text("BROKER", "broker"),
            int("QUEUE", "queue"),
            int("OFFSET[msg]", "queue_offset"),
            time("STORE_TIME[UTC]", "store_time_ms"),
            // Only a scheduled message has a due time; the JSON says null otherwise.
            time("DELIVER_AT[UTC]", "deliver_at_ms").shown(r.deliver_at_ms.is_some()),
            text("RECALL_HANDLE", "recall_handle").shown(r.recall_handle.is_some()),
            text("STATUS", "status"),
        ],
        vec![
            json!(r.msg_id),
            json!(r.unique_key),
            json!(r.queue.topic),
            json!(r.queue.broker_name),
            json!(r.queue.queue_id),
            json!(r.queue_offset),
            json!(r.store_timestamp_ms),
            json!(r.deliver_at_ms),
            json!(r.recall_handle),
            json!(status),
        ],
    )))
}

/// `msg recall --topic T HANDLE`: withdraws a scheduled message (see `Producer::recall`).
pub async fn recall(cfg: &ClientConfig, a: &RecallArgs) -> Result<Report> {
    let handle = ringmq_client::wire::recall::RecallHandle::decode(&a.handle)
        .map_err(|e| usage(format!("HANDLE is not a recall handle: {e}")))?;
    if handle.topic != a.topic {
        return Err(CtlError::Refused(format!(
            "the handle is for topic {}, not {}",
            handle.topic, a.topic
        )));
    }
    let producer = Producer::builder()
        .client_config(cfg.clone())
        .group(TOOLS_PRODUCER_GROUP)
        .send_timeout(cfg.request_timeout)
        .start()
        .await
        .doing(|| "starting a producer".into())?;
    let result = producer.recall_in(&a.topic, &a.handle).await;
    producer.shutdown().await;
    let msg_id = result.doing(|| {
        format!(
            "recalling message {} of {} on broker {}",
            handle.message_id, handle.topic, handle.broker_name
        )
    })?;
    Ok(Report::one(Section::record(
        "recalled",
        vec![
            text("MSG_ID", "msg_id"),
            text("TOPIC", "topic"),
            text("BROKER", "broker"),
            time("DUE_AT[UTC]", "deliver_at_ms"),
        ],
        vec![
            json!(msg_id),
            json!(handle.topic),
            json!(handle.broker_name),
            json!(handle.deliver_at_ms),
        ],
    )))
}

/// Pause between rounds of pulls when no queue had a message.
const CONSUME_IDLE_PAUSE: Duration = Duration::from_millis(20);

/// `consume TOPIC [-g G]`: pulls every readable queue directly from its position (the
/// group's committed offset, else the first stored message; `--from-time`: the first
/// stored at or after it) until `--count` messages or `--wait` without one. A queue that
/// cannot be read (its broker unreachable, a refused pull) fails the command: an empty
/// table means the queues were read and held nothing. With `-g`, commits each queue's
/// offset exactly through the last message printed. Without it the group is a throwaway
/// broadcasting one: no retry topic, nothing committed.
pub async fn consume(admin: &Admin, cfg: &ClientConfig, a: &ConsumeArgs) -> Result<Report> {
    let commit = a.group.is_some();
    let group = a.group.clone().unwrap_or_else(|| {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        format!("ringmq-ctl-{}-{ms}", std::process::id())
    });
    let from_ms = match &a.from_time {
        Some(t) => {
            Some(crate::parse::parse_time_ms(t).map_err(|e| usage(format!("--from-time: {e}")))?)
        }
        None => None,
    };
    let selector = match &a.sql {
        Some(expr) => {
            let s = MessageSelector::sql(expr);
            s.check()
                .map_err(|e| CtlError::Refused(format!("--sql: {e}")))?;
            Some(s)
        }
        None => None,
    };
    let route = admin
        .topic_route(&a.topic)
        .await
        .doing(|| format!("reading the route of {}", a.topic))?;
    // A clustering member makes its broker create `%RETRY%<group>` when it registers (the
    // SQL filter registers it); a throwaway group must leave nothing behind.
    let model = if commit {
        MessageModel::Clustering
    } else {
        MessageModel::Broadcasting
    };
    let consumer = PullConsumer::builder()
        .client_config(cfg.clone())
        .group(&group)
        .message_model(model)
        .start()
        .await
        .doing(|| "starting a consumer".into())?;
    let result = pull_queues(&consumer, a, &route.read_queues, selector, from_ms).await;
    let result = match result {
        Ok(read) if commit => commit_read(&consumer, &read, &group).await.map(|()| read),
        other => other,
    };
    consumer.shutdown().await;
    let read = result?;
    let mut report = messages_report(&read.messages);
    if commit {
        report.notes.push(format!(
            "{} message(s); offsets committed for group {group}",
            read.messages.len()
        ));
    }
    Ok(report)
}

/// What `consume` read: the messages, and per queue the offset after the last one taken.
struct Read {
    messages: Vec<ReceivedMessage>,
    next: BTreeMap<MessageQueue, u64>,
    moved: BTreeSet<MessageQueue>,
}

async fn pull_queues(
    consumer: &PullConsumer,
    a: &ConsumeArgs,
    queues: &[MessageQueue],
    selector: Option<MessageSelector>,
    from_ms: Option<i64>,
) -> Result<Read> {
    if let Some(s) = &selector {
        consumer
            .select(&a.topic, s)
            .await
            .doing(|| format!("filtering {} with --sql", a.topic))?;
    }
    let selector = selector.unwrap_or_else(MessageSelector::all);
    let mut read = Read {
        messages: Vec::new(),
        next: BTreeMap::new(),
        moved: BTreeSet::new(),
    };
    for mq in queues {
        let at = start_offset(consumer, mq, from_ms, a.group.is_some()).await?;
        read.next.insert(mq.clone(), at);
    }
    let mut last_message = Instant::now();
    let count = a.count as usize;
    while read.messages.len() < count {
        let mut got_any = false;
        for mq in queues {
            let room = count - read.messages.len();
            if room == 0 {
                break;
            }
            let offset = read.next.get(mq).copied().unwrap_or(0);
            let want = u32::try_from(room).map_or(CONSUME_BATCH_MAX, |r| r.min(CONSUME_BATCH_MAX));
            let r = consumer
                .pull(mq, offset, want, &selector)
                .await
                .doing(|| format!("consuming {mq} from offset {offset}"))?;
            let taken = r.messages.len().min(room);
            let next = if taken == r.messages.len() {
                r.next_offset
            } else {
                r.messages[taken - 1].queue_offset + 1
            };
            if next != offset {
                read.moved.insert(mq.clone());
                read.next.insert(mq.clone(), next);
            }
            got_any |= taken > 0;
            read.messages.extend(r.messages.into_iter().take(taken));
        }
        if got_any {
            last_message = Instant::now();
        } else if last_message.elapsed() >= a.wait {
            break;
        } else {
            tokio::time::sleep(CONSUME_IDLE_PAUSE.min(a.wait)).await;
        }
    }
    Ok(read)
}

/// Where `consume` starts reading a queue.
async fn start_offset(
    consumer: &PullConsumer,
    mq: &MessageQueue,
    from_ms: Option<i64>,
    group: bool,
) -> Result<u64> {
    if let Some(t) = from_ms {
        return consumer
            .offset_for_timestamp(mq, t)
            .await
            .doing(|| format!("finding the offset of {mq} at {t} ms"));
    }
    if group {
        let committed = consumer
            .committed_offset(mq)
            .await
            .doing(|| format!("reading the committed offset of {mq}"))?;
        if let Some(o) = committed {
            return Ok(o);
        }
    }
    consumer
        .min_offset(mq)
        .await
        .doing(|| format!("reading the first offset of {mq}"))
}

/// Commits each queue `consume` moved through, exactly past the last message it took.
async fn commit_read(consumer: &PullConsumer, read: &Read, group: &str) -> Result<()> {
    for mq in &read.moved {
        let offset = read.next.get(mq).copied().unwrap_or(0);
        consumer
            .commit(mq, offset)
            .await
            .doing(|| format!("committing the offset of {mq} for group {group}"))?;
    }
    Ok(())
}

fn messages_report(msgs: &[ReceivedMessage]) -> Report {
    let mut s = Section::list("messages", message_columns(false));
    for m in msgs {
        s.push(message_row(m));
    }
    Report::one(s)
}

/// The columns of a message; `full` shows every field in the table (one message), else
/// the extra fields are JSON-only.
pub fn message_columns(full: bool) -> Vec<Column> {
    vec![
        text("MSG_ID", "msg_id"),
        text("TOPIC", "topic"),
        text("BROKER", "broker"),
        int("QUEUE", "queue"),
        int("OFFSET[msg]", "queue_offset"),
        time("STORE_TIME[UTC]", "store_time_ms"),
        text("TAG", "tag"),
        text("KEYS", "keys"),
        int("BODY_SIZE[B]", "body_bytes"),
        body("BODY", "body"),
        text("UNIQ_KEY", "unique_key").shown(full),
        time("BORN_TIME[UTC]", "born_time_ms").shown(full),
        time("DELIVER_AT[UTC]", "deliver_at_ms").shown(full),
        text("BORN_HOST", "born_host").shown(full),
        text("STORE_HOST", "store_host").shown(full),
        int("PHYSICAL_OFFSET[B]", "physical_offset").shown(full),
        int("RECONSUME_TIMES", "reconsume_times").shown(full),
        int("FLAG", "flag").shown(full),
        int("SYS_FLAG", "sys_flag").shown(full),
        text("PROPERTIES", "properties").shown(full),
        json_only("body_utf8"),
    ]
}

fn message_row(m: &ReceivedMessage) -> Vec<Value> {
    let utf8 = std::str::from_utf8(&m.body).is_ok();
    vec![
        json!(m.msg_id),
        json!(m.topic),
        json!(m.broker_name),
        json!(m.queue_id),
        json!(m.queue_offset),
        json!(m.store_timestamp_ms),
        json!(m.tag()),
        json!(m.keys()),
        json!(m.body.len()),
        json!(String::from_utf8_lossy(&m.body)),
        json!(m.unique_key()),
        json!(m.born_timestamp_ms),
        json!(m.deliver_at_ms()),
        json!(m.born_host.to_string()),
        json!(m.store_host.to_string()),
        json!(m.physical_offset),
        json!(m.reconsume_times),
        json!(m.flag),
        json!(m.sys_flag),
        json!(m.properties),
        json!(utf8),
    ]
}

fn join(names: &[&String]) -> String {
    names
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
