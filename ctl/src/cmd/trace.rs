//! `msg trace ID`: a message's trace (RocketMQ's message trace, written by clients with
//! tracing on) as a timeline sorted by time: its send (producer group, client host, cost,
//! status, where it is stored), every listener call (group, client host, reconsume times,
//! cost, status) and, per group seen consuming it, its dead letter. The records are read
//! from the trace topic by key = the message id (`Admin::message_trace`).

use ringmq_client::trace::{MessageTrace, TRACE_TOPIC_DEFAULT};
use ringmq_client::{Admin, Error as ClientError};
use serde_json::{json, Value};

use crate::cli::MsgTraceArgs;
use crate::error::{Context, CtlError, Result};
use crate::output::{int, text, time, Column, Report, Section};

pub async fn trace(admin: &Admin, a: &MsgTraceArgs) -> Result<Report> {
    let id =
        a.id.clone()
            .or_else(|| a.id_opt.clone())
            .unwrap_or_default();
    let topic = a.trace_topic.as_deref().unwrap_or(TRACE_TOPIC_DEFAULT);
    let t = match admin.message_trace(&id, topic).await {
        Err(ClientError::NoRoute { topic: t, .. }) if t == topic => {
            return Err(CtlError::Refused(no_trace_topic(&id, topic)))
        }
        r => r.doing(|| format!("reading the trace of {id} from {topic}"))?,
    };
    let mut report = Report::one(timeline(&t));
    if t.sends.is_empty() && t.consumes.is_empty() {
        report.notes.push(format!(
            "no trace record of {id} in {topic} (are the clients started with tracing on?)"
        ));
    }
    Ok(report)
}

/// The trace topic has no route: no traced client has written to it yet (the broker
/// creates it at the first trace when autoCreateTopicEnable is on), or it is another one.
fn no_trace_topic(id: &str, topic: &str) -> String {
    format!(
        "no trace of {id}: no broker has the trace topic {topic} yet, so no traced client has \
         written one; send with tracing on (ringmq-ctl send --trace, ringmq-perf --trace, a \
         client with .trace(true)); with autoCreateTopicEnable=false create it first \
         (ringmq-ctl topic create {topic}); a client writing to another trace topic: -t TOPIC"
    )
}

fn columns() -> Vec<Column> {
    vec![
        time("TIME[UTC]", "time_ms"),
        text("EVENT", "event"),
        text("GROUP", "group"),
        text("CLIENT", "client_host"),
        text("STATUS", "status"),
        int("COST[ms]", "cost_ms"),
        int("RECONSUME", "reconsume_times"),
        text("BROKER", "broker"),
        int("QUEUE", "queue"),
        int("OFFSET[msg]", "queue_offset"),
        text("TOPIC", "topic"),
        text("MSG_ID", "msg_id").shown(false),
        text("OFFSET_MSG_ID", "offset_msg_id").shown(false),
        text("STORE_HOST", "store_host").shown(false),
        time("END_TIME[UTC]", "end_time_ms").shown(false),
        text("REQUEST_ID", "request_id").shown(false),
    ]
}

/// Every event of the trace as a row, by time (a send before the calls at the same ms).
fn timeline(t: &MessageTrace) -> Section {
    let mut rows: Vec<(i64, u8, Vec<Value>)> = Vec::new();
    for s in &t.sends {
        let st = s.stored.as_ref();
        rows.push((
            s.timestamp_ms,
            0,
            vec![
                json!(s.timestamp_ms),
                json!("send"),
                json!(s.group),
                json!(s.client_host),
                json!(if s.success { "success" } else { "failed" }),
                json!(s.cost_ms),
                Value::Null,
                st.map_or(Value::Null, |x| json!(x.broker_name)),
                st.map_or(Value::Null, |x| json!(x.queue_id)),
                st.map_or(Value::Null, |x| json!(x.queue_offset)),
                json!(s.topic),
                json!(t.msg_id),
                json!(s.offset_msg_id),
                json!(s.store_host),
                Value::Null,
                Value::Null,
            ],
        ));
    }
    for c in &t.consumes {
        let status = match c.success {
            Some(true) => "success",
            Some(false) => "failed",
            None => "no result",
        };
        rows.push((
            c.timestamp_ms,
            1,
            vec![
                json!(c.timestamp_ms),
                json!("consume"),
                json!(c.group),
                json!(c.client_host),
                json!(status),
                json!(c.cost_ms),
                json!(c.retry_times),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                json!(t.msg_id),
                Value::Null,
                Value::Null,
                json!(c.end_timestamp_ms),
                json!(c.request_id),
            ],
        ));
    }
    for d in &t.dead_letters {
        rows.push((
            d.stored.store_timestamp_ms,
            2,
            vec![
                json!(d.stored.store_timestamp_ms),
                json!("dead-letter"),
                json!(d.group),
                Value::Null,
                json!("dead-lettered"),
                Value::Null,
                json!(d.reconsume_times),
                json!(d.stored.broker_name),
                json!(d.stored.queue_id),
                json!(d.stored.queue_offset),
                json!(d.topic),
                json!(t.msg_id),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ],
        ));
    }
    rows.sort_by_key(|(at, order, _)| (*at, *order));
    let mut section = Section::list("trace", columns());
    for (_, _, row) in rows {
        section.push(row);
    }
    section
}
