//! `group dlq` and `group resend-dlq`: a consumer group's dead letters (`%DLQ%<group>`) and
//! putting them back into their original topic.
//!
//! The broker writes a dead letter as a copy of the failed message that keeps its body,
//! flag, tag, keys, unique key and user properties and adds `RETRY_TOPIC` (the topic the
//! group subscribed), `ORIGIN_MESSAGE_ID`, `RECONSUME_TIME` and `MAX_RECONSUME_TIMES`.
//! Resending sends a new message to `RETRY_TOPIC` with what the application set (body, flag,
//! tag, keys, user properties) and none of those broker properties, so it starts over as a
//! fresh message (new message id and unique key, reconsume count 0).
//!
//! The resend mark: the group's committed offset on each `%DLQ%<group>` queue. Dead letters
//! below it were resent by an earlier `resend-dlq` (without `--id`); a bulk resend starts at
//! it and moves it past what it resent, one queue at a time, after each message is sent, so
//! an interrupted run resends nothing twice when run again.

use std::collections::BTreeMap;

use ringmq_client::message::RESERVED_PROPERTIES;
use ringmq_client::wire::properties::keys;
use ringmq_client::{Admin, ClientConfig, Error, Message, MessageQueue, Producer, ReceivedMessage};
use serde_json::{json, Value};

use super::group_of;
use super::msg::TOOLS_PRODUCER_GROUP;
use crate::cli::{DlqArgs, ResendDlqArgs};
use crate::error::{Context, CtlError, Result};
use crate::output::{body, int, json_only, text, time, Report, Section};

pub use ringmq_client::wire::command::{dlq_topic, retry_topic};

/// The property a retry or dead-letter copy names its original topic in (RocketMQ's).
const RETRY_TOPIC: &str = keys::RETRY_TOPIC;

/// Properties the broker sets on retry and dead-letter copies, besides the client's
/// reserved ones; a resent message carries none of them.
const BROKER_PROPERTIES: &[&str] = &[RETRY_TOPIC, keys::TIMER_OUT_MS];

/// Messages read per pull while scanning a dead-letter queue.
const SCAN_BATCH: u32 = 256;

/// One queue of a group's dead-letter topic.
#[derive(Debug, Clone)]
pub struct DlqQueue {
    pub mq: MessageQueue,
    /// Oldest offset still stored.
    pub min: u64,
    /// One past the newest dead letter.
    pub max: u64,
    /// The group's committed offset here (the resend mark), if any.
    pub mark: Option<u64>,
}

impl DlqQueue {
    /// Where the dead letters not resent yet start.
    pub fn first_unsent(&self) -> u64 {
        self.mark.unwrap_or(self.min).clamp(self.min, self.max)
    }

    /// Dead letters stored.
    pub fn stored(&self) -> u64 {
        self.max - self.min
    }

    /// Dead letters not resent yet.
    pub fn not_resent(&self) -> u64 {
        self.max - self.first_unsent()
    }
}

/// The queues of `%DLQ%<group>`; `None` when the topic does not exist (the broker creates
/// it at the group's first dead letter).
/// A queue's (min, max) offsets, as the broker reports them.
pub async fn queue_range(admin: &Admin, mq: &ringmq_client::MessageQueue) -> Result<(u64, u64)> {
    let min = admin
        .min_offset(mq)
        .await
        .doing(|| format!("reading the min offset of {mq}"))?;
    let max = admin
        .max_offset(mq)
        .await
        .doing(|| format!("reading the max offset of {mq}"))?;
    Ok((min, max))
}

pub async fn dlq_queues(admin: &Admin, group: &str) -> Result<Option<Vec<DlqQueue>>> {
    let topic = dlq_topic(group);
    let route = match admin.topic_route(&topic).await {
        Ok(r) => r,
        Err(Error::NoRoute { .. }) => return Ok(None),
        Err(e) => return Err(e).doing(|| format!("reading the route of {topic}")),
    };
    let mut out = Vec::new();
    for mq in route.read_queues.iter() {
        let (min, max) = queue_range(admin, mq).await?;
        let mark = admin
            .committed_offset(group, mq)
            .await
            .doing(|| format!("reading the resend mark of group {group} on {mq}"))?;
        out.push(DlqQueue {
            mq: mq.clone(),
            min,
            max: max.max(min),
            mark,
        });
    }
    Ok(Some(out))
}

pub async fn list(admin: &Admin, a: &DlqArgs) -> Result<Report> {
    let group = group_of(&a.group);
    let queues = dlq_queues(admin, &group).await?.unwrap_or_default();
    let mut s = Section::list("dead_letters", dead_letter_columns());
    let mut shown = 0u64;
    for q in &queues {
        let room = u64::from(a.max).saturating_sub(shown);
        let want = q.stored().min(room) as u32;
        if want == 0 {
            continue;
        }
        let msgs = admin
            .read_messages(&q.mq, q.min, want)
            .await
            .doing(|| format!("reading the dead letters in {}", q.mq))?;
        for m in &msgs {
            s.push(dead_letter_row(&q.mq, m, q.first_unsent()));
        }
        shown += msgs.len() as u64;
    }
    let stored: u64 = queues.iter().map(DlqQueue::stored).sum();
    let not_resent: u64 = queues.iter().map(DlqQueue::not_resent).sum();
    let summary = Section::record(
        "summary",
        vec![
            text("GROUP", "group"),
            text("DLQ_TOPIC", "topic"),
            int("DEAD_LETTERS[msg]", "dead_letters"),
            int("NOT_RESENT[msg]", "not_resent"),
            int("SHOWN[msg]", "shown"),
        ],
        vec![
            json!(group),
            json!(dlq_topic(&group)),
            json!(stored),
            json!(not_resent),
            json!(shown),
        ],
    );
    let mut report = Report::one(s).with(summary);
    if queues.is_empty() {
        report.notes.push(format!(
            "group {group} has no dead letters (no topic {}: the broker creates it at the first one)",
            dlq_topic(&group)
        ));
    } else if shown < stored {
        report.notes.push(format!(
            "showing the oldest {shown} of {stored} dead letters (--max)"
        ));
    }
    Ok(report)
}

pub async fn resend(admin: &Admin, cfg: &ClientConfig, a: &ResendDlqArgs) -> Result<Report> {
    let group = group_of(&a.group);
    let Some(queues) = dlq_queues(admin, &group).await? else {
        return Err(CtlError::Refused(format!(
            "group {group} has no dead letters (no topic {})",
            dlq_topic(&group)
        )));
    };
    let producer = Producer::builder()
        .client_config(cfg.clone())
        .group(TOOLS_PRODUCER_GROUP)
        .send_timeout(cfg.request_timeout)
        .start()
        .await
        .doing(|| "starting a producer".into())?;
    let mut run = Resend {
        admin,
        producer: &producer,
        group: &group,
        left: a.max,
        section: Section::list("resent", resent_columns()),
        skipped: Vec::new(),
        matched: 0,
    };
    let result = match &a.id {
        Some(id) => run.by_id(&queues, id).await,
        None => run.unsent(&queues).await,
    };
    producer.shutdown().await;
    result?;
    if let Some(id) = &a.id {
        if run.matched == 0 {
            return Err(CtlError::Refused(format!(
                "no dead letter of group {group} has the id {id} (MSG_ID, UNIQ_KEY or ORIGIN_MESSAGE_ID)"
            )));
        }
    }
    let resent = run.section.rows.len();
    let summary = Section::record(
        "summary",
        vec![
            text("GROUP", "group"),
            int("RESENT[msg]", "resent"),
            int("SKIPPED[msg]", "skipped"),
        ],
        vec![json!(group), json!(resent), json!(run.skipped.len())],
    );
    let mut report = Report::one(run.section).with(summary);
    let skipped = run.skipped.len();
    for (id, why) in run.skipped {
        report
            .notes
            .push(format!("skipped dead letter {id}: {why}"));
    }
    if skipped > 0 {
        report.failed = Some(format!(
            "{skipped} dead letter(s) of group {group} could not be resent ({resent} resent)"
        ));
    }
    Ok(report)
}

/// A resend in progress.
struct Resend<'a> {
    admin: &'a Admin,
    producer: &'a Producer,
    group: &'a str,
    /// Messages this run may still resend.
    left: u32,
    section: Section,
    /// Dead letters that cannot be resent: (MSG_ID, why).
    skipped: Vec<(String, String)>,
    /// Dead letters that matched `--id`.
    matched: u64,
}

impl Resend<'_> {
    /// Every dead letter not resent yet, oldest first; the mark follows each one sent.
    async fn unsent(&mut self, queues: &[DlqQueue]) -> Result<()> {
        for q in queues {
            let mut at = q.first_unsent();
            while at < q.max && self.left > 0 {
                let want = ((q.max - at) as u32).min(SCAN_BATCH).min(self.left);
                let msgs = self.read(&q.mq, at, want).await?;
                let Some(last) = msgs.last() else { break };
                let next = last.queue_offset + 1;
                for m in &msgs {
                    self.one(&q.mq, m).await?;
                    self.admin
                        .commit_offset(self.group, &q.mq, m.queue_offset + 1)
                        .await
                        .doing(|| format!("moving the resend mark on {}", q.mq))?;
                }
                at = next;
            }
        }
        Ok(())
    }

    /// Every dead letter whose MSG_ID, UNIQ_KEY or ORIGIN_MESSAGE_ID is `id`.
    async fn by_id(&mut self, queues: &[DlqQueue], id: &str) -> Result<()> {
        for q in queues {
            let mut at = q.min;
            while at < q.max && self.left > 0 {
                let want = ((q.max - at) as u32).min(SCAN_BATCH);
                let msgs = self.read(&q.mq, at, want).await?;
                let Some(last) = msgs.last() else { break };
                at = last.queue_offset + 1;
                for m in msgs.iter().filter(|m| has_id(m, id)) {
                    self.matched += 1;
                    if self.left > 0 {
                        self.one(&q.mq, m).await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn read(&self, mq: &MessageQueue, at: u64, want: u32) -> Result<Vec<ReceivedMessage>> {
        self.admin
            .read_messages(mq, at, want)
            .await
            .doing(|| format!("reading the dead letters in {mq} from offset {at}"))
    }

    /// Resends one dead letter (or records why it cannot be).
    async fn one(&mut self, mq: &MessageQueue, m: &ReceivedMessage) -> Result<()> {
        let Some(msg) = resend_message(m) else {
            self.skipped.push((
                m.msg_id.clone(),
                format!("no {RETRY_TOPIC} property: its original topic is unknown"),
            ));
            return Ok(());
        };
        let topic = msg.topic.clone();
        let r = self.producer.send(msg).await.doing(|| {
            format!(
                "resending dead letter {} (offset {} of {mq}) to {topic}",
                m.msg_id, m.queue_offset
            )
        })?;
        self.left = self.left.saturating_sub(1);
        self.section.push(vec![
            json!(m.msg_id),
            json!(m.unique_key()),
            json!(m.queue_offset),
            json!(topic),
            json!(r.msg_id),
            json!(r.unique_key),
            json!(r.queue.broker_name),
            json!(r.queue.queue_id),
            json!(r.queue_offset),
        ]);
        Ok(())
    }
}

/// The message that puts a dead letter back: to its `RETRY_TOPIC`, with its body, flag,
/// tag, keys and user properties. `None` without `RETRY_TOPIC`.
pub fn resend_message(m: &ReceivedMessage) -> Option<Message> {
    let topic = m.property(RETRY_TOPIC).filter(|t| !t.is_empty())?;
    let mut msg = Message::new(topic, m.body.clone())
        .with_flag(m.flag)
        .with_keys(m.keys());
    if let Some(tag) = m.tag() {
        msg = msg.with_tag(tag);
    }
    for (k, v) in m.user_properties() {
        if !BROKER_PROPERTIES.contains(&k) && !RESERVED_PROPERTIES.contains(&k) {
            msg = msg.with_property(k, v);
        }
    }
    Some(msg)
}

fn has_id(m: &ReceivedMessage, id: &str) -> bool {
    m.msg_id.eq_ignore_ascii_case(id)
        || m.unique_key().is_some_and(|u| u.eq_ignore_ascii_case(id))
        || m.property(keys::ORIGIN_MESSAGE_ID)
            .is_some_and(|o| o.eq_ignore_ascii_case(id))
}

fn dead_letter_columns() -> Vec<crate::output::Column> {
    vec![
        text("MSG_ID", "msg_id"),
        text("UNIQ_KEY", "unique_key"),
        text("ORIGINAL_TOPIC", "original_topic"),
        int("RECONSUME_TIMES", "reconsume_times"),
        time("STORE_TIME[UTC]", "store_time_ms"),
        int("OFFSET[msg]", "queue_offset"),
        text("RESENT", "resent"),
        text("TAG", "tag"),
        text("KEYS", "keys"),
        int("BODY_SIZE[B]", "body_bytes"),
        body("BODY", "body"),
        json_only("broker"),
        json_only("queue"),
        json_only("born_time_ms"),
        json_only("origin_message_id"),
        json_only("properties"),
    ]
}

fn dead_letter_row(mq: &MessageQueue, m: &ReceivedMessage, first_unsent: u64) -> Vec<Value> {
    let user: BTreeMap<&str, &str> = m.user_properties().collect();
    vec![
        json!(m.msg_id),
        json!(m.unique_key()),
        json!(m.property(RETRY_TOPIC)),
        json!(m.reconsume_times),
        json!(m.store_timestamp_ms),
        json!(m.queue_offset),
        json!(if m.queue_offset < first_unsent {
            "yes"
        } else {
            "no"
        }),
        json!(m.tag()),
        json!(m.keys()),
        json!(m.body.len()),
        json!(String::from_utf8_lossy(&m.body)),
        json!(mq.broker_name),
        json!(mq.queue_id),
        json!(m.born_timestamp_ms),
        json!(m.property(keys::ORIGIN_MESSAGE_ID)),
        json!(user),
    ]
}

fn resent_columns() -> Vec<crate::output::Column> {
    vec![
        text("DLQ_MSG_ID", "dlq_msg_id"),
        text("UNIQ_KEY", "unique_key"),
        int("DLQ_OFFSET[msg]", "dlq_offset"),
        text("TOPIC", "topic"),
        text("NEW_MSG_ID", "msg_id"),
        text("NEW_UNIQ_KEY", "new_unique_key"),
        text("BROKER", "broker"),
        int("QUEUE", "queue"),
        int("OFFSET[msg]", "queue_offset"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead_letter(props: &[(&str, &str)]) -> ReceivedMessage {
        let addr = "127.0.0.1:10911".parse().expect("a literal address");
        ReceivedMessage {
            topic: "%DLQ%g".into(),
            broker_name: "broker-a".into(),
            queue_id: 0,
            queue_offset: 7,
            physical_offset: 4096,
            msg_id: "7F00000100002A9F0000000000001000".into(),
            body: b"payload".to_vec().into(),
            flag: 5,
            sys_flag: 0,
            born_timestamp_ms: 1,
            born_host: addr,
            store_timestamp_ms: 2,
            store_host: addr,
            reconsume_times: 3,
            properties: props
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn resent_copy_keeps_what_the_application_set() {
        let m = dead_letter(&[
            (RETRY_TOPIC, "Orders"),
            (keys::TAGS, "paid"),
            (keys::KEYS, "k1 k2"),
            (keys::UNIQ_KEY, "U1"),
            (keys::ORIGIN_MESSAGE_ID, "O1"),
            (keys::RECONSUME_TIME, "3"),
            (keys::MAX_RECONSUME_TIMES, "3"),
            (keys::TIMER_OUT_MS, "5"),
            ("color", "red"),
        ]);
        let r = resend_message(&m).expect("it has RETRY_TOPIC");
        assert_eq!(r.topic, "Orders");
        assert_eq!(&r.body[..], b"payload");
        assert_eq!(r.flag, 5);
        assert_eq!(r.tag.as_deref(), Some("paid"));
        assert_eq!(r.keys, vec!["k1", "k2"]);
        let props: Vec<(&str, &str)> = r
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(props, vec![("color", "red")]);
        assert!(!r.is_scheduled());
        r.validate(1024).expect("a valid message");
        assert!(resend_message(&dead_letter(&[("color", "red")])).is_none());
        assert!(resend_message(&dead_letter(&[(RETRY_TOPIC, "")])).is_none());
    }

    #[test]
    fn ids_match_msg_id_unique_key_or_origin() {
        let m = dead_letter(&[(keys::UNIQ_KEY, "U1"), (keys::ORIGIN_MESSAGE_ID, "O1")]);
        assert!(has_id(&m, "7f00000100002a9f0000000000001000"));
        assert!(has_id(&m, "U1"));
        assert!(has_id(&m, "O1"));
        assert!(!has_id(&m, "U2"));
    }

    #[test]
    fn the_mark_splits_resent_from_not_resent() {
        let q = |min, max, mark| DlqQueue {
            mq: MessageQueue::new("%DLQ%g", "b", 0),
            min,
            max,
            mark,
        };
        assert_eq!(
            (q(0, 10, None).first_unsent(), q(0, 10, None).not_resent()),
            (0, 10)
        );
        assert_eq!(q(0, 10, Some(4)).not_resent(), 6);
        // A mark below the oldest stored (retention removed some) or past the end.
        assert_eq!(q(5, 10, Some(2)).first_unsent(), 5);
        assert_eq!(q(5, 10, Some(12)).not_resent(), 0);
        assert_eq!(q(5, 10, None).stored(), 5);
    }
}
