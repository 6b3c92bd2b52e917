//! The trace dispatcher: a bounded queue of [`TraceRecord`]s and one task that sends them,
//! batched, as ordinary messages to the trace topic through a producer of its own
//! (RocketMQ's `AsyncTraceDispatcher`).
//!
//! The traced path only builds a record and offers it to the queue ([`Tracer::record`],
//! `try_send`): when the queue is full the record is dropped and counted, so tracing never
//! waits for the trace topic. The task takes every record waiting (up to
//! [`RECORDS_PER_FLUSH_MAX`]) and sends them in messages of at most
//! [`TRACE_MESSAGE_BYTES_MAX`] bytes and [`KEYS_PER_MESSAGE_MAX`] keys; each message's keys
//! are the traced messages' ids and keys, so QUERY_MESSAGE by key finds the trace of a
//! message. On shutdown the task sends what is queued (within the producer's send timeout)
//! before the producer stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::record::TraceRecord;
use super::{TraceConfig, TraceStats};
use crate::error::Result;
use crate::instance::ClientConfig;
use crate::message::Message;
use crate::producer::Producer;

/// Largest trace message body (RocketMQ's trace producer `maxMessageSize`, 128,000).
pub const TRACE_MESSAGE_BYTES_MAX: usize = 128_000;
/// Most keys on one trace message (its `KEYS` property stays small).
pub const KEYS_PER_MESSAGE_MAX: usize = 128;
/// Most records one flush takes from the queue.
pub const RECORDS_PER_FLUSH_MAX: usize = 1024;
/// How long shutdown waits for the queued records to be sent.
pub const SHUTDOWN_FLUSH_WAIT: Duration = Duration::from_secs(5);

/// Producer group of a tracer's producer: RocketMQ's prefix, then the traced group.
pub const TRACE_PRODUCER_GROUP_PREFIX: &str = "_INNER_TRACE_PRODUCER";

#[derive(Debug, Default)]
struct Counters {
    recorded: AtomicU64,
    dropped: AtomicU64,
    sent: AtomicU64,
    failed: AtomicU64,
}

/// Records trace events of one producer or consumer and sends them in the background.
#[derive(Debug)]
pub(crate) struct Tracer {
    tx: mpsc::Sender<TraceRecord>,
    counters: Arc<Counters>,
    closing: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
    producer: Producer,
    topic: String,
    /// Request ids pairing SubBefore and SubAfter: this prefix and a counter.
    request_prefix: String,
    request_seq: AtomicU64,
}

impl Tracer {
    /// Starts the producer of trace messages (group `_INNER_TRACE_PRODUCER-<group>`) and
    /// the sending task.
    pub async fn start(
        mut client: ClientConfig,
        group: &str,
        cfg: &TraceConfig,
    ) -> Result<Arc<Tracer>> {
        if let Some(name) = &mut client.instance_name {
            name.push_str("-trace");
        }
        // Boxed: a producer's start and shutdown call a tracer's (whose producer has none).
        let producer = Box::pin(
            Producer::builder()
                .client_config(client)
                .group(format!("{TRACE_PRODUCER_GROUP_PREFIX}-{group}"))
                .message_bytes_max(TRACE_MESSAGE_BYTES_MAX)
                .start(),
        )
        .await?;
        let (tx, rx) = mpsc::channel(cfg.queue_max.max(1));
        let counters = Arc::new(Counters::default());
        let closing = watch::channel(false).0;
        let task = tokio::spawn(run(
            rx,
            closing.subscribe(),
            producer.clone(),
            cfg.topic.clone(),
            Arc::clone(&counters),
        ));
        let request_prefix = format!(
            "{:08X}{:012X}",
            std::process::id(),
            super::now_ms() & 0xFFFF_FFFF_FFFF
        );
        Ok(Arc::new(Tracer {
            tx,
            counters,
            closing,
            task: Mutex::new(Some(task)),
            producer,
            topic: cfg.topic.clone(),
            request_prefix,
            request_seq: AtomicU64::new(0),
        }))
    }

    /// Offers a record to the queue; a full queue drops it (counted in
    /// [`TraceStats::dropped`]). Never waits.
    pub fn record(&self, r: TraceRecord) {
        self.counters.recorded.fetch_add(1, Ordering::Relaxed);
        if self.tx.try_send(r).is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A new request id (pairs a SubBefore with its SubAfter).
    pub fn request_id(&self) -> String {
        let n = self.request_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}{n:08X}", self.request_prefix)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn stats(&self) -> TraceStats {
        let c = &self.counters;
        TraceStats {
            recorded: c.recorded.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            sent: c.sent.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
        }
    }

    /// Sends what is queued (waiting at most [`SHUTDOWN_FLUSH_WAIT`]), then stops the
    /// producer. Records offered afterwards are dropped.
    pub async fn shutdown(&self) {
        self.closing.send_replace(true);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(SHUTDOWN_FLUSH_WAIT, &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
        Box::pin(self.producer.shutdown()).await;
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if let Some(t) = self
            .task
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            t.abort();
        }
    }
}

async fn run(
    mut rx: mpsc::Receiver<TraceRecord>,
    mut closing: watch::Receiver<bool>,
    producer: Producer,
    topic: String,
    counters: Arc<Counters>,
) {
    let mut batch = Vec::new();
    loop {
        let first = tokio::select! {
            r = rx.recv() => r,
            _ = closing.wait_for(|c| *c) => None,
        };
        let Some(first) = first else { break };
        batch.push(first);
        while batch.len() < RECORDS_PER_FLUSH_MAX {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        flush(&producer, &topic, &mut batch, &counters).await;
    }
    // Closing: send what is left.
    rx.close();
    while let Ok(r) = rx.try_recv() {
        batch.push(r);
        if batch.len() >= RECORDS_PER_FLUSH_MAX {
            flush(&producer, &topic, &mut batch, &counters).await;
        }
    }
    flush(&producer, &topic, &mut batch, &counters).await;
}

/// Sends `batch` (emptied) as trace messages.
async fn flush(producer: &Producer, topic: &str, batch: &mut Vec<TraceRecord>, c: &Counters) {
    for (msg, records) in pack(topic, batch.drain(..)) {
        match producer.send(msg).await {
            Ok(_) => c.sent.fetch_add(records, Ordering::Relaxed),
            Err(e) => {
                log::debug!("sending {records} trace records to {topic}: {e}");
                c.failed.fetch_add(records, Ordering::Relaxed)
            }
        };
    }
}

/// Packs records into trace messages, each with the records' message ids and keys as its
/// keys; returns each message and how many records it holds.
fn pack(topic: &str, records: impl Iterator<Item = TraceRecord>) -> Vec<(Message, u64)> {
    let mut out = Vec::new();
    let mut body = String::new();
    let mut keys: Vec<String> = Vec::new();
    let mut n = 0u64;
    for r in records {
        let mut enc = String::with_capacity(160);
        r.encode_into(&mut enc);
        let mut rkeys: Vec<&str> = std::iter::once(r.msg_id())
            .chain(r.keys().split(' '))
            .filter(|k| !k.is_empty())
            .collect();
        rkeys.dedup();
        let full = !body.is_empty()
            && (body.len() + enc.len() > TRACE_MESSAGE_BYTES_MAX
                || keys.len() + rkeys.len() > KEYS_PER_MESSAGE_MAX);
        if full {
            out.push((message(topic, &mut body, &mut keys), n));
            n = 0;
        }
        body.push_str(&enc);
        for k in rkeys {
            if !keys.iter().any(|have| have == k) {
                keys.push(k.to_string());
            }
        }
        n += 1;
    }
    if !body.is_empty() {
        out.push((message(topic, &mut body, &mut keys), n));
    }
    out
}

fn message(topic: &str, body: &mut String, keys: &mut Vec<String>) -> Message {
    let mut m = Message::new(topic, std::mem::take(body).into_bytes());
    m.keys = std::mem::take(keys);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::record::{decode, SubBeforeTrace};

    fn before(id: usize, keys: &str) -> TraceRecord {
        TraceRecord::SubBefore(SubBeforeTrace {
            timestamp_ms: 1,
            region: "r".into(),
            group: "g".into(),
            request_id: "R".into(),
            msg_id: format!("M{id}"),
            retry_times: 0,
            keys: keys.into(),
        })
    }

    #[test]
    fn packs_records_with_their_ids_and_keys() {
        let msgs = pack(
            "T",
            vec![before(1, "a b"), before(1, ""), before(2, "a")].into_iter(),
        );
        assert_eq!(msgs.len(), 1);
        let (m, n) = &msgs[0];
        assert_eq!(*n, 3);
        assert_eq!(m.keys, ["M1", "a", "b", "M2"]);
        let body = std::str::from_utf8(&m.body).unwrap();
        assert_eq!(decode(body).len(), 3);
    }

    #[test]
    fn splits_at_the_key_limit() {
        let records = (0..KEYS_PER_MESSAGE_MAX + 1).map(|i| before(i, ""));
        let msgs = pack("T", records);
        assert_eq!(msgs.len(), 2);
        assert!(msgs
            .iter()
            .all(|(m, _)| m.keys.len() <= KEYS_PER_MESSAGE_MAX));
        assert_eq!(
            msgs.iter().map(|(_, n)| n).sum::<u64>(),
            KEYS_PER_MESSAGE_MAX as u64 + 1
        );
    }
}
