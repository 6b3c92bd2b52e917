//! What the receiving half of a run counts, whoever consumes (push consumers in
//! `consume.rs`, pull consumers in `counted.rs`, simple consumers in `pop.rs`, remoting pull
//! loops in `remoting/pull.rs`): how to consume ([`RecvPlan`]) and the deliveries seen
//! ([`Deliveries`]: meter, failures on purpose, lateness of scheduled messages, and in verify
//! mode a [`Delivery`] record per message). Below all four, so none of them imports another.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::wire::remoting::SerializeType;
use ringmq_client::{MessageBatch, MessageView, ReceivedMessage, StartPosition};

use crate::fail::FailPlan;
use crate::payload;
use crate::security::Target;
use crate::stats::{Meter, Percentiles};
use crate::verify::{Delivery, QueueNames};

/// How to consume.
#[derive(Debug, Clone)]
pub struct RecvPlan {
    /// Name servers, TLS and credentials.
    pub target: Target,
    pub topic: String,
    pub group: String,
    pub consumers: u32,
    pub from: StartPosition,
    pub pull_batch: u32,
    /// `consume --count`: answers each queue holds ahead of the polls.
    pub pull_ahead: u32,
    /// Keep a delivery record per message for the verify check.
    pub verify: bool,
    /// Instance names are `perf-<run id>-c<i>`.
    pub run_id: u64,
    /// The consumers' maxReconsumeTimes (`None`: the group's limit on the broker).
    pub max_reconsume: Option<u32>,
    pub orderly: bool,
    /// One message per listener call (failures on purpose fail only their message).
    pub single: bool,
    /// Pull over RocketMQ's remoting protocol with this header serialization (`None`: the
    /// native protocol's push consumers).
    pub remoting: Option<SerializeType>,
    /// POP consumption with this invisible time (`--pop`): simple consumers.
    pub pop: Option<Duration>,
    /// `consume --count N`: exactly N consumed and committed, by pull consumers
    /// ([`crate::counted`]).
    pub count: Option<u64>,
}

/// What the listener sees, shared by every consumer of the run.
#[derive(Debug)]
pub struct Deliveries {
    pub meter: Arc<Meter>,
    /// Messages without a perf head (someone else's).
    pub foreign: AtomicU64,
    /// Deliveries whose listener call failed (on purpose, or dropped by an abort).
    pub failed: AtomicU64,
    /// Deliveries read from the group's retry topic (successful or not).
    pub retried: AtomicU64,
    fail: Option<FailPlan>,
    /// Positions of listener calls' begins and ends.
    events: AtomicU64,
    started: Instant,
    /// µs after `started` of the last delivery (0: none yet).
    last_us: AtomicU64,
    pub(crate) record: Option<Mutex<(QueueNames, Vec<Delivery>)>>,
    /// Verify mode: the messages delivered successfully at least once (producer, sequence).
    delivered: Option<Mutex<HashSet<(u64, u64)>>>,
    /// Verify mode: successful deliveries that were the message's first (messages perf did
    /// not send count each time), what `--count` counts.
    first_deliveries: AtomicU64,
    /// Scheduled messages: receipt minus due time (µs), and those delivered early.
    lateness: Mutex<hdrhistogram::Histogram<u64>>,
    /// The broker's part: store time of the delivered copy minus due time (ms resolution).
    store_lateness: Mutex<hdrhistogram::Histogram<u64>>,
    early: AtomicU64,
}

/// How late scheduled messages arrived.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lateness {
    /// Receipt minus due time, µs.
    pub us: Percentiles,
    pub samples: u64,
    /// The broker's part: the delivered copy's store time minus due time, µs (whole ms).
    pub store_us: Percentiles,
    /// Stored in their topic before due (broker clock), or received before due.
    pub early: u64,
}

impl Deliveries {
    pub fn new(meter: Arc<Meter>, verify: bool, fail: Option<FailPlan>) -> Deliveries {
        Deliveries {
            meter,
            foreign: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            fail,
            events: AtomicU64::new(1),
            started: Instant::now(),
            last_us: AtomicU64::new(0),
            record: verify.then(|| Mutex::new((QueueNames::default(), Vec::new()))),
            delivered: verify.then(|| Mutex::new(HashSet::new())),
            first_deliveries: AtomicU64::new(0),
            lateness: Mutex::new(crate::stats::new_histogram()),
            store_lateness: Mutex::new(crate::stats::new_histogram()),
            early: AtomicU64::new(0),
        }
    }

    /// Lateness of the scheduled messages received so far.
    pub fn lateness(&self) -> Lateness {
        let h = self.lateness.lock().unwrap_or_else(|p| p.into_inner());
        let s = self
            .store_lateness
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Lateness {
            us: crate::stats::percentiles(&h),
            samples: h.len(),
            store_us: crate::stats::percentiles(&s),
            early: self.early.load(Ordering::Relaxed),
        }
    }

    /// Messages the remoting driver pulled (no listener call, no verify record): counted,
    /// timed from their heads.
    pub fn record_pulled(&self, messages: u64, bytes: u64, latencies_us: &[u64], foreign: u64) {
        self.foreign.fetch_add(foreign, Ordering::Relaxed);
        self.meter.count(messages, bytes);
        self.meter.record_latencies(latencies_us);
        let at = (self.started.elapsed().as_micros() as u64).max(1);
        self.last_us.fetch_max(at, Ordering::Relaxed);
    }

    /// Opens a listener call (its position among calls' begins and ends, for verify).
    pub fn begin_call(&self) -> u64 {
        self.events.fetch_add(1, Ordering::Relaxed)
    }

    /// The failure plan, if the run fails messages on purpose.
    pub fn fail_plan(&self) -> Option<&FailPlan> {
        self.fail.as_ref()
    }

    /// Whether this delivery of `msgs` fails on purpose (counted per message).
    pub(crate) fn fails_now(&self, msgs: &MessageBatch) -> bool {
        let Some(plan) = &self.fail else {
            return false;
        };
        let mut fail = false;
        for m in msgs.iter() {
            if let Some(h) = payload::parse(m.body()) {
                fail |= plan.fails_now(&h);
            }
        }
        fail
    }

    /// Messages consumed, as `--count` counts them: successful deliveries, and with verify
    /// only each message's first (a redelivery is reported as a duplicate, not counted).
    pub fn consumed(&self) -> u64 {
        if self.delivered.is_some() {
            self.first_deliveries.load(Ordering::Relaxed)
        } else {
            self.meter.counts().messages
        }
    }

    /// A listener call's end: a success is measured (count, latency, lateness); every
    /// delivery is recorded for verify with the call's begin and end. One pass over the
    /// messages (each read in place once).
    pub fn record<M: Delivered>(&self, msgs: &[M], begin: u64, ok: bool, retry: bool) {
        let end = self.events.fetch_add(1, Ordering::Relaxed);
        let now = payload::now_us();
        let verify = self.record.is_some();
        let mut lats = Vec::with_capacity(if ok { msgs.len() } else { 0 });
        let mut late = Vec::new();
        let (mut bytes, mut retried, mut foreign) = (0u64, 0u64, 0u64);
        // Verify mode: (head, from the retry topic, the message) of each perf message.
        let mut seen = Vec::with_capacity(if verify { msgs.len() } else { 0 });
        for m in msgs {
            retried += u64::from(retry);
            let head = payload::parse(m.body());
            if ok {
                bytes += m.body().len() as u64;
                if let Some(due_ms) = m.deliver_at_ms() {
                    let due_us = (due_ms.max(0) as u64).saturating_mul(1000);
                    if m.store_timestamp_ms() < due_ms || now < due_us {
                        self.early.fetch_add(1, Ordering::Relaxed);
                    }
                    let stored = (m.store_timestamp_ms() - due_ms).max(0) as u64 * 1000;
                    late.push((now.saturating_sub(due_us), stored));
                }
                match &head {
                    Some(h) => lats.push(now.saturating_sub(h.send_us)),
                    None => foreign += 1,
                }
            }
            if let (true, Some(h)) = (verify, head) {
                seen.push((h, m));
            }
        }
        self.retried.fetch_add(retried, Ordering::Relaxed);
        if ok {
            self.foreign.fetch_add(foreign, Ordering::Relaxed);
            self.meter.count(msgs.len() as u64, bytes);
            self.meter.record_latencies(&lats);
            self.record_lateness(&late);
        } else {
            self.failed.fetch_add(msgs.len() as u64, Ordering::Relaxed);
        }
        if let (Some(set), true) = (&self.delivered, ok) {
            let mut set = set.lock().unwrap_or_else(|p| p.into_inner());
            let mut first = foreign;
            for (h, _) in &seen {
                first += u64::from(set.insert((h.producer, h.seq)));
            }
            self.first_deliveries.fetch_add(first, Ordering::Relaxed);
        }
        if let Some(rec) = &self.record {
            let mut g = rec.lock().unwrap_or_else(|p| p.into_inner());
            let (names, list) = &mut *g;
            for (h, m) in &seen {
                let queue = if retry {
                    names.intern(&format!("{}/retry", m.broker_name()), m.queue_id())
                } else {
                    names.intern(m.broker_name(), m.queue_id())
                };
                list.push(Delivery {
                    producer: h.producer,
                    seq: h.seq,
                    queue,
                    offset: m.queue_offset(),
                    retry,
                    ok,
                    begin,
                    end,
                });
            }
        }
        let at = (self.started.elapsed().as_micros() as u64).max(1);
        self.last_us.fetch_max(at, Ordering::Relaxed);
    }

    /// Scheduled messages' lateness: (receipt minus due, store minus due), µs.
    fn record_lateness(&self, late: &[(u64, u64)]) {
        if late.is_empty() {
            return;
        }
        let mut h = self.lateness.lock().unwrap_or_else(|p| p.into_inner());
        let mut s = self
            .store_lateness
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for &(l, stored) in late {
            h.saturating_record(l.max(1));
            s.saturating_record(stored.max(1));
        }
    }

    /// Messages delivered successfully: distinct ones in verify mode, else every
    /// successful delivery (duplicates included).
    pub fn delivered(&self) -> u64 {
        match &self.delivered {
            Some(set) => set.lock().unwrap_or_else(|p| p.into_inner()).len() as u64,
            None => self.meter.counts().messages,
        }
    }

    /// Verify mode: how many of `keys` (producer, sequence) no listener call took
    /// successfully yet (0 without verify).
    pub fn undelivered<'a>(&self, keys: impl Iterator<Item = &'a (u64, u64)>) -> u64 {
        let Some(set) = &self.delivered else {
            return 0;
        };
        let set = set.lock().unwrap_or_else(|p| p.into_inner());
        keys.filter(|k| !set.contains(k)).count() as u64
    }

    /// Time since the last delivery (since the start when none came).
    pub fn idle(&self) -> Duration {
        let last = Duration::from_micros(self.last_us.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }

    /// From the start to the last delivery (the idle tail is not part of the run).
    pub fn active(&self) -> Duration {
        match self.last_us.load(Ordering::Relaxed) {
            0 => self.started.elapsed(),
            us => Duration::from_micros(us),
        }
    }

    /// When the last delivery arrived.
    pub fn last_at(&self) -> Option<Instant> {
        match self.last_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(self.started + Duration::from_micros(us)),
        }
    }

    /// The delivery records (verify mode), taken out.
    pub fn take_record(&self) -> (QueueNames, Vec<Delivery>) {
        match &self.record {
            Some(rec) => std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner())),
            None => Default::default(),
        }
    }
}

/// What [`Deliveries::record`] reads of a delivered message: a push consumer's view, or a
/// popped message.
pub trait Delivered {
    fn body(&self) -> &[u8];
    fn deliver_at_ms(&self) -> Option<i64>;
    fn store_timestamp_ms(&self) -> i64;
    fn broker_name(&self) -> &str;
    fn queue_id(&self) -> u32;
    fn queue_offset(&self) -> u64;
}

impl Delivered for MessageView<'_> {
    fn body(&self) -> &[u8] {
        MessageView::body(self)
    }
    fn deliver_at_ms(&self) -> Option<i64> {
        MessageView::deliver_at_ms(self)
    }
    fn store_timestamp_ms(&self) -> i64 {
        MessageView::store_timestamp_ms(self)
    }
    fn broker_name(&self) -> &str {
        MessageView::broker_name(self)
    }
    fn queue_id(&self) -> u32 {
        MessageView::queue_id(self)
    }
    fn queue_offset(&self) -> u64 {
        MessageView::queue_offset(self)
    }
}

impl Delivered for ReceivedMessage {
    fn body(&self) -> &[u8] {
        &self.body
    }
    fn deliver_at_ms(&self) -> Option<i64> {
        ReceivedMessage::deliver_at_ms(self)
    }
    fn store_timestamp_ms(&self) -> i64 {
        self.store_timestamp_ms
    }
    fn broker_name(&self) -> &str {
        &self.broker_name
    }
    fn queue_id(&self) -> u32 {
        self.queue_id
    }
    fn queue_offset(&self) -> u64 {
        self.queue_offset
    }
}

/// A delivered message for unit tests: a body and a queue offset.
#[cfg(test)]
pub(crate) mod testing {
    use super::Delivered;
    use crate::payload::{BodyMaker, Head};

    pub struct M(pub Vec<u8>, pub u64);

    impl Delivered for M {
        fn body(&self) -> &[u8] {
            &self.0
        }
        fn deliver_at_ms(&self) -> Option<i64> {
            None
        }
        fn store_timestamp_ms(&self) -> i64 {
            0
        }
        fn broker_name(&self) -> &str {
            "b"
        }
        fn queue_id(&self) -> u32 {
            0
        }
        fn queue_offset(&self) -> u64 {
            self.1
        }
    }

    /// Message `seq` of perf producer 7, at offset `seq`.
    pub fn msg(seq: u64) -> M {
        let head = Head {
            producer: 7,
            seq,
            send_us: 0,
        };
        M(BodyMaker::new(64).body(head).to_vec(), seq)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{msg, M};
    use super::*;

    /// With verify, `--count` counts each message's first delivery: a redelivery leaves
    /// `consumed` where it was (it is still measured and recorded); a
    /// failed delivery does not count; without verify every delivery counts.
    #[test]
    fn with_verify_a_redelivery_is_not_counted() {
        let d = Deliveries::new(Arc::new(Meter::default()), true, None);
        let first = [msg(0), msg(1), msg(2)];
        d.record(&first[..2], d.begin_call(), true, false);
        d.record(&first[2..], d.begin_call(), false, false);
        assert_eq!(d.consumed(), 2, "a failed delivery does not count");
        let again = [msg(1), msg(2), msg(3), M(b"not from perf".to_vec(), 9)];
        d.record(&again, d.begin_call(), true, false);
        assert_eq!(d.consumed(), 5, "0, 1, 2, 3 and the foreign one");
        assert_eq!(
            d.meter.counts().messages,
            6,
            "every successful delivery measured"
        );

        let plain = Deliveries::new(Arc::new(Meter::default()), false, None);
        plain.record(&first, plain.begin_call(), true, false);
        plain.record(&first, plain.begin_call(), true, false);
        assert_eq!(plain.consumed(), 6);
    }
}
