//! What the traced paths call: build the records of a send or a listener call and offer
//! them to the [`Tracer`] (nothing here waits).

use std::time::{Duration, Instant};

use super::record::{
    MessageType, PubTrace, SubAfterTrace, SubBeforeTrace, TraceRecord, DEFAULT_REGION,
};
use super::{now_ms, Tracer};
use crate::batch::MessageBatch;
use crate::message::{Message, ReceivedMessage};
use crate::producer::SendResult;

/// Records a `Pub` for every message of a stored send (`msgs[i]` is record `i`); the cost
/// is the send's time divided among its records, as RocketMQ's hook does.
pub(crate) fn record_send(
    t: &Tracer,
    group: &str,
    msgs: &[Message],
    r: &SendResult,
    started_ms: i64,
    cost: Duration,
    ordered: bool,
) {
    let n = msgs.len().max(1);
    let cost_ms = (cost.as_millis() / n as u128) as i64;
    let store_host = ringmq_wire::record::parse_message_id(&r.msg_id)
        .map(|(addr, _)| addr.to_string())
        .unwrap_or_default();
    let (ids, offset_ids) = if msgs.len() == 1 {
        (vec![r.unique_key.clone()], vec![r.msg_id.clone()])
    } else {
        (r.unique_keys(), r.msg_ids())
    };
    for ((m, id), offset_id) in msgs.iter().zip(ids).zip(offset_ids) {
        if m.topic == t.topic() {
            continue; // trace data is not traced (RocketMQ's hook skips it too)
        }
        let msg_type = if m.is_scheduled() {
            MessageType::Delay
        } else if ordered {
            MessageType::Order
        } else {
            MessageType::Normal
        };
        t.record(TraceRecord::Pub(PubTrace {
            timestamp_ms: started_ms,
            region: DEFAULT_REGION.to_string(),
            group: group.to_string(),
            topic: m.topic.clone(),
            msg_id: id,
            tags: m.tag.clone().unwrap_or_default(),
            keys: m.keys.join(" "),
            store_host: store_host.clone(),
            body_bytes: u32::try_from(m.body.len()).unwrap_or(u32::MAX),
            cost_ms,
            msg_type,
            offset_msg_id: offset_id,
            success: true,
        }));
    }
}

/// A listener call (or a popped message until its ack) being traced: its request id, start
/// and messages.
#[derive(Debug, Clone)]
pub(crate) struct ConsumeSpan {
    request_id: String,
    started: Instant,
    /// Each message's id and keys.
    messages: Vec<(String, String)>,
}

/// Records a `SubBefore` for each message of `batch`, before the listener call.
pub(crate) fn consume_begin(t: &Tracer, group: &str, batch: &MessageBatch) -> ConsumeSpan {
    let messages = batch.iter().map(|m| {
        // RocketMQ's consumer message id: the unique key, or the offset id without one.
        let id = m.unique_key().map_or_else(|| m.msg_id(), str::to_string);
        (id, m.keys().join(" "), m.reconsume_times())
    });
    sub_before(t, group, messages)
}

/// Records a `SubBefore` for a received POP message (a simple consumer's delivery; its ack
/// ends the span).
pub(crate) fn pop_begin(t: &Tracer, group: &str, m: &ReceivedMessage) -> ConsumeSpan {
    let id = m
        .unique_key()
        .map_or_else(|| m.msg_id.clone(), str::to_string);
    let keys = m.keys().join(" ");
    sub_before(t, group, std::iter::once((id, keys, m.reconsume_times)))
}

/// One `SubBefore` per (message id, keys, reconsume times), under one request id.
fn sub_before(
    t: &Tracer,
    group: &str,
    messages: impl Iterator<Item = (String, String, i32)>,
) -> ConsumeSpan {
    let request_id = t.request_id();
    let at = now_ms();
    let mut kept = Vec::new();
    for (id, keys, retry_times) in messages {
        t.record(TraceRecord::SubBefore(SubBeforeTrace {
            timestamp_ms: at,
            region: DEFAULT_REGION.to_string(),
            group: group.to_string(),
            request_id: request_id.clone(),
            msg_id: id.clone(),
            retry_times,
            keys: keys.clone(),
        }));
        kept.push((id, keys));
    }
    ConsumeSpan {
        request_id,
        started: Instant::now(),
        messages: kept,
    }
}

/// Records a `SubAfter` for each message of the call; `context_code` is RocketMQ's
/// `ConsumeReturnType` ordinal (0, success, the only one that counts as success).
pub(crate) fn consume_end(t: &Tracer, group: &str, span: ConsumeSpan, context_code: i32) {
    let n = span.messages.len().max(1);
    let cost_ms = (span.started.elapsed().as_millis() / n as u128) as i64;
    let at = now_ms();
    for (id, keys) in span.messages {
        t.record(TraceRecord::SubAfter(SubAfterTrace {
            request_id: span.request_id.clone(),
            msg_id: id,
            cost_ms,
            success: context_code == 0,
            keys,
            context_code,
            timestamp_ms: Some(at),
            group: Some(group.to_string()),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::ClientConfig;
    use crate::trace::TraceConfig;

    /// What a traced send pays: building its `Pub` record and offering it to the queue.
    /// A measurement, not a check (run with `--ignored --nocapture`): prints ns per send.
    /// The name server does not exist, so the dispatcher's sends fail fast and the queue
    /// never fills (nothing is dropped while measuring).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement; prints its figure"]
    async fn enqueue_cost_per_traced_send() {
        const N: usize = 200_000;
        let client = ClientConfig {
            name_servers: vec!["127.0.0.1:1".into()],
            ..ClientConfig::default()
        };
        let cfg = TraceConfig {
            queue_max: N,
            ..TraceConfig::default()
        };
        let t = Tracer::start(client, "bench", &cfg).await.unwrap();
        let msg = Message::new("Orders", "x".repeat(100))
            .with_tag("created")
            .with_key("order-42");
        let r = SendResult::for_test(
            "7F00000100002A9F0000000000000000",
            "7F0000010000AAAABBBBCCCC00000001",
        );
        let started = Instant::now();
        for _ in 0..N {
            record_send(
                &t,
                "order-service",
                std::slice::from_ref(&msg),
                &r,
                1,
                Duration::from_micros(300),
                false,
            );
        }
        let per = started.elapsed().as_nanos() / N as u128;
        let s = t.stats();
        println!(
            "traced send: {per} ns per record built and enqueued ({N} sends; dropped {})",
            s.dropped
        );
    }
}
