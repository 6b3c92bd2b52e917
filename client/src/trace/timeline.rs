//! Reading a message's trace back: the trace topic's messages whose key is the message id
//! (QUERY_MESSAGE on every master of the trace topic), their records for that id, paired
//! and sorted into a timeline, and the dead-letter topics of the groups seen consuming it
//! (`%DLQ%<group>`, looked up by the message's unique key: the trace itself does not say
//! that the broker dead-lettered a message).

use std::collections::BTreeSet;

use super::record::{self, MessageType, TraceRecord};
use crate::admin::Admin;
use crate::consumer::dlq_topic;
use crate::error::Result;

/// Trace messages read per broker for one message id.
const TRACE_MESSAGES_MAX: u32 = 256;

/// A message's trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageTrace {
    /// The unique key the trace was read by.
    pub msg_id: String,
    pub sends: Vec<SendEvent>,
    /// Listener calls, by start time.
    pub consumes: Vec<ConsumeEvent>,
    /// Where the message is in a dead-letter topic, one entry per group.
    pub dead_letters: Vec<DeadLetter>,
}

/// A `Pub` record, with where the message is stored when the broker still has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendEvent {
    pub timestamp_ms: i64,
    pub group: String,
    /// The address the trace message came from (the producer's host).
    pub client_host: String,
    pub topic: String,
    pub tags: String,
    pub keys: String,
    pub store_host: String,
    pub offset_msg_id: String,
    pub body_bytes: u32,
    pub cost_ms: i64,
    pub msg_type: MessageType,
    pub success: bool,
    pub stored: Option<StoredAt>,
}

/// Where a message is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAt {
    pub broker_name: String,
    pub queue_id: u32,
    pub queue_offset: u64,
    pub store_timestamp_ms: i64,
}

/// One listener call: a `SubBefore` and, when it was written, its `SubAfter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeEvent {
    pub timestamp_ms: i64,
    pub group: String,
    /// The address the trace message came from (the consumer's host).
    pub client_host: String,
    pub request_id: String,
    /// The message's reconsume times at this delivery.
    pub retry_times: i32,
    /// `None` while no `SubAfter` was found (the call is running, the consumer died, or
    /// the record was dropped).
    pub success: Option<bool>,
    pub cost_ms: Option<i64>,
    /// RocketMQ's `ConsumeReturnType` ordinal of the `SubAfter`.
    pub context_code: Option<i32>,
    pub end_timestamp_ms: Option<i64>,
}

/// The message as stored in a group's dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub group: String,
    pub topic: String,
    pub stored: StoredAt,
    pub reconsume_times: i32,
}

impl Admin {
    /// The trace of the message with unique key `msg_id` in `trace_topic` (RocketMQ's
    /// default: [`TRACE_TOPIC_DEFAULT`](super::TRACE_TOPIC_DEFAULT)). An offset message id
    /// works too when the broker still has the message (its unique key is looked up).
    /// Empty when no record names the message.
    pub async fn message_trace(&self, msg_id: &str, trace_topic: &str) -> Result<MessageTrace> {
        let mut t = self.trace_by_key(msg_id, trace_topic).await?;
        if t.sends.is_empty() && t.consumes.is_empty() && msg_id.len() >= 32 {
            if let Ok(m) = self.view_message(msg_id).await {
                if let Some(u) = m.unique_key().filter(|u| *u != msg_id) {
                    t = self.trace_by_key(u, trace_topic).await?;
                }
            }
        }
        self.add_stored_and_dead_letters(&mut t).await;
        Ok(t)
    }

    async fn trace_by_key(&self, msg_id: &str, trace_topic: &str) -> Result<MessageTrace> {
        let found = self
            .query_by_key(trace_topic, msg_id, TRACE_MESSAGES_MAX)
            .await?;
        let mut t = MessageTrace {
            msg_id: msg_id.to_string(),
            ..MessageTrace::default()
        };
        let mut afters = Vec::new();
        let mut seen = BTreeSet::new();
        for m in found {
            // A message on two brokers' answers is read once.
            if !seen.insert((m.broker_name.clone(), m.physical_offset)) {
                continue;
            }
            let host = m.born_host.to_string();
            let Ok(body) = std::str::from_utf8(&m.body) else {
                continue;
            };
            for r in record::decode(body) {
                if r.msg_id() != msg_id {
                    continue;
                }
                match r {
                    TraceRecord::Pub(p) => t.sends.push(SendEvent {
                        timestamp_ms: p.timestamp_ms,
                        group: p.group,
                        client_host: host.clone(),
                        topic: p.topic,
                        tags: p.tags,
                        keys: p.keys,
                        store_host: p.store_host,
                        offset_msg_id: p.offset_msg_id,
                        body_bytes: p.body_bytes,
                        cost_ms: p.cost_ms,
                        msg_type: p.msg_type,
                        success: p.success,
                        stored: None,
                    }),
                    TraceRecord::SubBefore(b) => t.consumes.push(ConsumeEvent {
                        timestamp_ms: b.timestamp_ms,
                        group: b.group,
                        client_host: host.clone(),
                        request_id: b.request_id,
                        retry_times: b.retry_times,
                        success: None,
                        cost_ms: None,
                        context_code: None,
                        end_timestamp_ms: None,
                    }),
                    TraceRecord::SubAfter(a) => afters.push(a),
                    TraceRecord::EndTransaction(_) | TraceRecord::Recall(_) => {}
                }
            }
        }
        for a in afters {
            if let Some(c) = t
                .consumes
                .iter_mut()
                .find(|c| c.request_id == a.request_id && c.success.is_none())
            {
                c.success = Some(a.success);
                c.cost_ms = Some(a.cost_ms);
                c.context_code = Some(a.context_code);
                c.end_timestamp_ms = a.timestamp_ms;
            }
        }
        t.sends.sort_by_key(|s| s.timestamp_ms);
        t.consumes.sort_by_key(|c| (c.timestamp_ms, c.retry_times));
        Ok(t)
    }

    /// Fills in where each send is stored and looks the message up in the dead-letter
    /// topic of every group seen consuming it (a lookup that fails leaves the field empty).
    async fn add_stored_and_dead_letters(&self, t: &mut MessageTrace) {
        for s in &mut t.sends {
            if s.offset_msg_id.is_empty() {
                continue;
            }
            if let Ok(m) = self.view_message(&s.offset_msg_id).await {
                s.stored = Some(StoredAt {
                    broker_name: m.broker_name,
                    queue_id: m.queue_id,
                    queue_offset: m.queue_offset,
                    store_timestamp_ms: m.store_timestamp_ms,
                });
            }
        }
        let groups: BTreeSet<String> = t.consumes.iter().map(|c| c.group.clone()).collect();
        for group in groups {
            let topic = dlq_topic(&group);
            let Ok(found) = self.query_by_key(&topic, &t.msg_id, 1).await else {
                continue;
            };
            if let Some(m) = found.into_iter().next() {
                t.dead_letters.push(DeadLetter {
                    group,
                    topic,
                    reconsume_times: m.reconsume_times,
                    stored: StoredAt {
                        broker_name: m.broker_name,
                        queue_id: m.queue_id,
                        queue_offset: m.queue_offset,
                        store_timestamp_ms: m.store_timestamp_ms,
                    },
                });
            }
        }
    }
}
