//! Verify mode: the acknowledgement log a producer writes and the check a consumer runs
//! against it.
//!
//! The log is text, one acknowledged message per line, appended (one `write` per
//! acknowledged send) as acknowledgements arrive, so a crash of the broker or of perf
//! leaves every line written so far in the file; a torn last line is skipped on reading:
//!
//! ```text
//! # ringmq-perf verify v1: producer sequence broker queue offset
//! 5f3a9c0100000000 0 broker-a 3 1234
//! ```
//!
//! `producer` is 16 hex digits (the id in every perf message's head), `offset` the queue
//! offset the broker acknowledged. With `--recall-ratio`, two more kinds of line name a
//! scheduled message already listed: `producer sequence recall`, written before its recall
//! is sent, and `producer sequence recalled`, once the broker acknowledged the recall:
//!
//! ```text
//! 5f3a9c0100000000 7 recall
//! 5f3a9c0100000000 7 recalled
//! ```
//!
//! The check ([`check`]) compares the deliveries a consumer
//! saw (every listener call, successful or failed on purpose, with its place in time) and
//! the messages found in the group's dead-letter queue at the end with the log, listed
//! messages only (others are sent-but-unacknowledged messages or other runs, and are only
//! counted as `unlisted`). A message counts as delivered once a listener call that held it
//! succeeded, whether from its queue or, after failures, from the group's retry topic:
//! - `received`: acknowledged and delivered;
//! - `lost`: acknowledged, never delivered, not in the dead-letter queue;
//! - `dead_lettered`: acknowledged, never delivered, in the dead-letter queue (not lost);
//! - `duplicates`: successful deliveries of a message beyond its first (failed deliveries
//!   are counted apart, as `failed`);
//! - `out_of_order`, concurrent consumption: in a queue's delivery order (queue offset
//!   order, the order a consumer of that queue reads in), a message that comes after one
//!   acknowledged at a higher offset of the same queue; orderly consumption: a message whose
//!   first delivery (successful or not) began after the first delivery of a message at a
//!   higher offset of its queue (a re-delivery after a rebalance is a duplicate, not
//!   disorder). Deliveries from the retry topic are not part of either;
//! - `concurrent`: listener calls on one queue (of the topic, or of the retry topic) that
//!   began while another call on that queue, by the same member or another, had not ended;
//! - `misplaced`: delivered from the topic at another queue or offset than the one
//!   acknowledged;
//! - `recalled`: acknowledged, its recall acknowledged, never delivered (as it must be);
//!   `recalled_delivered`: the same but delivered (a broken recall: the run fails);
//!   `recall_unsure`: acknowledged, a recall sent without an answer (the broker may or may
//!   not have stored it), never delivered: neither lost nor recalled. Such a message that
//!   was delivered counts as `received`. None of the three counts as `lost` or `received`
//!   otherwise.
//!
//! "Began" and "ended" are positions in one sequence of events every listener call of the
//! run draws from (an atomic counter), not clock readings, so overlap is exact.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Mutex;

const HEADER: &str = "# ringmq-perf verify v1: producer sequence broker queue offset\n";

/// The acknowledgement log, being written.
#[derive(Debug)]
pub struct AckLog {
    file: Mutex<File>,
}

impl AckLog {
    /// Creates (truncates) the log and writes its header line.
    pub fn create(path: &Path) -> io::Result<AckLog> {
        let mut file = File::create(path)?;
        file.write_all(HEADER.as_bytes())?;
        Ok(AckLog {
            file: Mutex::new(file),
        })
    }

    /// Appends a recall line for a listed message: `recall` before the recall is sent,
    /// `recalled` once the broker acknowledged it. One `write` call.
    pub fn append_recall(&self, producer: u64, seq: u64, acknowledged: bool) -> io::Result<()> {
        let word = if acknowledged { "recalled" } else { "recall" };
        let line = format!("{producer:016x} {seq} {word}\n");
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(line.as_bytes())
    }

    /// Appends `n` messages acknowledged together: sequences `seq0..seq0+n` of `producer`
    /// at offsets `offset0..offset0+n` of one queue. One `write` call, so the lines are in
    /// the kernel (and survive a crash of perf) when this returns.
    pub fn append(
        &self,
        producer: u64,
        seq0: u64,
        n: u64,
        broker: &str,
        queue: u32,
        offset0: u64,
    ) -> io::Result<()> {
        use std::fmt::Write as _;
        let mut text = String::with_capacity(48 * n as usize);
        for i in 0..n {
            let _ = writeln!(
                text,
                "{producer:016x} {} {broker} {queue} {}",
                seq0 + i,
                offset0 + i
            );
        }
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(text.as_bytes())
    }
}

/// Queue names as `broker:queue`, interned to small indices.
#[derive(Debug, Default, Clone)]
pub struct QueueNames {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl QueueNames {
    pub fn intern(&mut self, broker: &str, queue: u32) -> u32 {
        let key = format!("{broker}:{queue}");
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(key.clone());
        self.index.insert(key, i);
        i
    }

    pub fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("?", String::as_str)
    }
}

/// Where the log says a message was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    pub queue: u32,
    pub offset: u64,
}

/// The log, read back.
#[derive(Debug, Default)]
pub struct Acked {
    pub by_msg: HashMap<(u64, u64), Ack>,
    pub queues: QueueNames,
    /// Messages whose recall was sent (`recall` lines).
    pub recall_sent: HashSet<(u64, u64)>,
    /// Messages whose recall the broker acknowledged (`recalled` lines).
    pub recalled: HashSet<(u64, u64)>,
    /// A torn last line (a crash mid-write) that was skipped.
    pub torn_tail: bool,
}

impl Acked {
    /// Reads a log. A malformed line is an error unless it is the last one (a torn write).
    pub fn load(path: &Path) -> Result<Acked, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut out = Acked::default();
        let mut bad: Option<(usize, String)> = None;
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
            if let Some((at, text)) = bad.take() {
                return Err(format!(
                    "{}:{}: malformed line {text:?}",
                    path.display(),
                    at + 1
                ));
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            match (parse_line(&line), parse_recall_line(&line)) {
                (Some((p, s, broker, q, off)), _) => {
                    let queue = out.queues.intern(broker, q);
                    out.by_msg
                        .entry((p, s))
                        .or_insert(Ack { queue, offset: off });
                }
                (None, Some((key, acknowledged))) => {
                    out.recall_sent.insert(key);
                    if acknowledged {
                        out.recalled.insert(key);
                    }
                }
                (None, None) => bad = Some((n, line)),
            }
        }
        out.torn_tail = bad.is_some();
        Ok(out)
    }
}

fn parse_line(line: &str) -> Option<(u64, u64, &str, u32, u64)> {
    let mut it = line.split(' ');
    let p = u64::from_str_radix(it.next()?, 16).ok()?;
    let s = it.next()?.parse().ok()?;
    let broker = it.next()?;
    let q = it.next()?.parse().ok()?;
    let off = it.next()?.parse().ok()?;
    if it.next().is_some() || broker.is_empty() {
        return None;
    }
    Some((p, s, broker, q, off))
}

/// A recall line: (producer, sequence) and whether the recall was acknowledged.
fn parse_recall_line(line: &str) -> Option<((u64, u64), bool)> {
    let mut it = line.split(' ');
    let p = u64::from_str_radix(it.next()?, 16).ok()?;
    let s = it.next()?.parse().ok()?;
    let acknowledged = match it.next()? {
        "recall" => false,
        "recalled" => true,
        _ => return None,
    };
    it.next().is_none().then_some(((p, s), acknowledged))
}

/// One delivery a consumer saw: one message of one listener call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Delivery {
    pub producer: u64,
    pub seq: u64,
    /// Index in the consumer's [`QueueNames`] (retry-topic queues are named apart).
    pub queue: u32,
    pub offset: u64,
    /// Read from the group's retry topic (the queue the listener call read from).
    pub retry: bool,
    /// The listener call succeeded.
    pub ok: bool,
    /// When the call began and ended, in the run's event sequence (`begin < end`).
    pub begin: u64,
    pub end: u64,
}

/// Verdict for one queue, or for all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    pub acked: u64,
    /// Listed messages delivered at least once.
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub misplaced: u64,
    /// Never delivered, in the dead-letter queue.
    pub dead_lettered: u64,
    /// Listener calls that overlapped another on the same queue.
    pub concurrent: u64,
    /// Deliveries whose listener call failed (on purpose: --fail-ratio).
    pub failed: u64,
    /// Recall acknowledged, never delivered.
    pub recalled: u64,
    /// Recall acknowledged, delivered all the same.
    pub recalled_delivered: u64,
    /// Recall sent without an answer, never delivered.
    pub recall_unsure: u64,
}

impl Verdict {
    fn add(&mut self, o: &Verdict) {
        self.acked += o.acked;
        self.received += o.received;
        self.lost += o.lost;
        self.duplicates += o.duplicates;
        self.out_of_order += o.out_of_order;
        self.misplaced += o.misplaced;
        self.dead_lettered += o.dead_lettered;
        self.concurrent += o.concurrent;
        self.failed += o.failed;
        self.recalled += o.recalled;
        self.recalled_delivered += o.recalled_delivered;
        self.recall_unsure += o.recall_unsure;
    }

    /// Anything worth a per-queue line.
    pub fn notable(&self) -> bool {
        self.lost
            + self.duplicates
            + self.out_of_order
            + self.misplaced
            + self.concurrent
            + self.recalled_delivered
            > 0
    }
}

/// How the run consumed, for the ordering rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumption {
    Concurrent,
    Orderly,
}

/// The whole check.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub total: Verdict,
    /// By `broker:queue` of the acknowledgement (out_of_order: of the delivery).
    pub per_queue: BTreeMap<String, Verdict>,
    /// Deliveries of messages the log does not list.
    pub unlisted: u64,
    /// A few lost messages, for the report: (producer, sequence, queue, offset).
    pub lost_examples: Vec<(u64, u64, String, u64)>,
    pub torn_tail: bool,
    /// Acknowledged messages that --fail-ratio chose to fail (`None` without it).
    pub fail_chosen: Option<u64>,
}

/// Lost examples kept for the report.
const LOST_EXAMPLES_MAX: usize = 5;

/// Checks `deliveries` (queue indices from `names`) and the dead-letter queue's messages
/// (`dead`: producer, sequence) against `acked`.
pub fn check(
    acked: &Acked,
    names: &QueueNames,
    deliveries: &[Delivery],
    dead: &HashSet<(u64, u64)>,
    mode: Consumption,
) -> Report {
    let mut per: BTreeMap<String, Verdict> = BTreeMap::new();
    // Successful deliveries per listed message.
    let mut times: HashMap<(u64, u64), u32> = HashMap::with_capacity(acked.by_msg.len());
    let mut unlisted = 0u64;
    for d in deliveries {
        let key = (d.producer, d.seq);
        let Some(ack) = acked.by_msg.get(&key) else {
            unlisted += 1;
            continue;
        };
        let v = per
            .entry(acked.queues.name(ack.queue).to_string())
            .or_default();
        if d.ok {
            *times.entry(key).or_insert(0) += 1;
        } else {
            v.failed += 1;
        }
        if !d.retry
            && (names.name(d.queue) != acked.queues.name(ack.queue) || d.offset != ack.offset)
        {
            v.misplaced += 1;
        }
    }
    let mut lost_examples = Vec::new();
    for (key, ack) in &acked.by_msg {
        let v = per
            .entry(acked.queues.name(ack.queue).to_string())
            .or_default();
        v.acked += 1;
        let delivered = times.get(key).copied().unwrap_or(0);
        if acked.recalled.contains(key) {
            match delivered {
                0 => v.recalled += 1,
                _ => v.recalled_delivered += 1,
            }
            continue;
        }
        match delivered {
            0 if dead.contains(key) => v.dead_lettered += 1,
            0 if acked.recall_sent.contains(key) => v.recall_unsure += 1,
            0 => {
                v.lost += 1;
                if lost_examples.len() < LOST_EXAMPLES_MAX {
                    let q = acked.queues.name(ack.queue).to_string();
                    lost_examples.push((key.0, key.1, q, ack.offset));
                }
            }
            n => {
                v.received += 1;
                v.duplicates += u64::from(n - 1);
            }
        }
    }
    lost_examples.sort();
    let disorder = match mode {
        Consumption::Concurrent => out_of_order(acked, names, deliveries),
        Consumption::Orderly => out_of_order_first_delivery(acked, names, deliveries),
    };
    for (queue, n) in disorder {
        per.entry(queue).or_default().out_of_order += n;
    }
    for (queue, n) in concurrent_calls(names, deliveries) {
        per.entry(queue).or_default().concurrent += n;
    }
    let mut total = Verdict::default();
    for v in per.values() {
        total.add(v);
    }
    Report {
        total,
        per_queue: per,
        unlisted,
        lost_examples,
        torn_tail: acked.torn_tail,
        fail_chosen: None,
    }
}

/// Per delivered queue: listed messages that, in queue-offset order, follow a message
/// acknowledged at a higher offset of that same queue (deliveries from the topic only).
fn out_of_order(acked: &Acked, names: &QueueNames, deliveries: &[Delivery]) -> Vec<(String, u64)> {
    let mut by_queue: BTreeMap<&str, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for d in deliveries.iter().filter(|d| !d.retry) {
        if acked.by_msg.contains_key(&(d.producer, d.seq)) {
            by_queue
                .entry(names.name(d.queue))
                .or_default()
                .push((d.offset, d.producer, d.seq));
        }
    }
    let mut out = Vec::new();
    for (queue, mut list) in by_queue {
        list.sort_unstable();
        list.dedup();
        let n = descents(list.into_iter().filter_map(|(_, p, s)| {
            let ack = acked.by_msg.get(&(p, s))?;
            (acked.queues.name(ack.queue) == queue).then_some(ack.offset)
        }));
        if n > 0 {
            out.push((queue.to_string(), n));
        }
    }
    out
}

/// Orderly rule, per acknowledged queue: listed messages whose first delivery from the
/// topic began after the first delivery of a message at a higher offset of that queue.
/// Messages of one listener call are in the call's order (it lists them in offset order).
fn out_of_order_first_delivery(
    acked: &Acked,
    names: &QueueNames,
    deliveries: &[Delivery],
) -> Vec<(String, u64)> {
    // (begin, position in `deliveries`) of each message's first delivery at its queue.
    type FirstAt = (u64, usize);
    let mut first: HashMap<(u64, u64), FirstAt> = HashMap::new();
    for (i, d) in deliveries.iter().enumerate().filter(|(_, d)| !d.retry) {
        let Some(ack) = acked.by_msg.get(&(d.producer, d.seq)) else {
            continue;
        };
        if names.name(d.queue) != acked.queues.name(ack.queue) {
            continue;
        }
        let e = first.entry((d.producer, d.seq)).or_insert((d.begin, i));
        *e = (*e).min((d.begin, i));
    }
    let mut by_queue: BTreeMap<&str, Vec<(FirstAt, u64)>> = BTreeMap::new();
    for (key, at) in first {
        let ack = acked.by_msg[&key];
        by_queue
            .entry(acked.queues.name(ack.queue))
            .or_default()
            .push((at, ack.offset));
    }
    let mut out = Vec::new();
    for (queue, mut list) in by_queue {
        list.sort_unstable();
        let n = descents(list.into_iter().map(|(_, offset)| offset));
        if n > 0 {
            out.push((queue.to_string(), n));
        }
    }
    out
}

/// Offsets in a sequence that are below the highest one before them.
fn descents(offsets: impl Iterator<Item = u64>) -> u64 {
    let mut high: Option<u64> = None;
    let mut n = 0u64;
    for offset in offsets {
        if high.is_some_and(|h| offset < h) {
            n += 1;
        }
        high = Some(high.map_or(offset, |h| h.max(offset)));
    }
    n
}

/// Per delivered queue: listener calls that began before an earlier-begun call on that
/// queue had ended.
fn concurrent_calls(names: &QueueNames, deliveries: &[Delivery]) -> Vec<(String, u64)> {
    let mut calls: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for d in deliveries {
        calls.entry(d.queue).or_default().push((d.begin, d.end));
    }
    let mut out = Vec::new();
    for (queue, mut list) in calls {
        list.sort_unstable();
        list.dedup();
        let mut open_until: Option<u64> = None;
        let mut n = 0u64;
        for (begin, end) in list {
            if open_until.is_some_and(|e| begin < e) {
                n += 1;
            }
            open_until = Some(open_until.map_or(end, |e| e.max(end)));
        }
        if n > 0 {
            out.push((names.name(queue).to_string(), n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_with(lines: &str) -> (tempfile::TempDir, Acked) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        std::fs::write(&path, lines).unwrap();
        let a = Acked::load(&path).unwrap();
        (dir, a)
    }

    #[test]
    fn writer_and_reader_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        let log = AckLog::create(&path).unwrap();
        log.append(0xAB, 10, 3, "broker-a", 2, 100).unwrap();
        log.append(0xAB, 13, 1, "broker-b", 0, 7).unwrap();
        let a = Acked::load(&path).unwrap();
        assert_eq!(a.by_msg.len(), 4);
        let ack = a.by_msg[&(0xAB, 12)];
        assert_eq!((a.queues.name(ack.queue), ack.offset), ("broker-a:2", 102));
        assert!(!a.torn_tail);
    }

    #[test]
    fn torn_last_line_is_skipped_but_a_bad_middle_line_is_an_error() {
        let (_d, a) = log_with(&format!("{HEADER}ab 0 broker-a 1 0\nab 1 brok"));
        assert_eq!(a.by_msg.len(), 1);
        assert!(a.torn_tail);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        std::fs::write(&path, "ab 0 broker-a 1 0\nnonsense\nab 1 broker-a 1 1\n").unwrap();
        assert!(Acked::load(&path).is_err());
    }

    /// A successful delivery from the topic in a call of its own (calls `10 * i` ..
    /// `10 * i + 1`, never overlapping).
    fn d(producer: u64, seq: u64, queue: u32, offset: u64) -> Delivery {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let begin = NEXT.fetch_add(10, std::sync::atomic::Ordering::Relaxed);
        Delivery {
            producer,
            seq,
            queue,
            offset,
            retry: false,
            ok: true,
            begin,
            end: begin + 1,
        }
    }

    fn at(mut x: Delivery, begin: u64, end: u64) -> Delivery {
        x.begin = begin;
        x.end = end;
        x
    }

    fn failed(mut x: Delivery) -> Delivery {
        x.ok = false;
        x
    }

    fn none() -> HashSet<(u64, u64)> {
        HashSet::new()
    }

    #[test]
    fn lost_duplicates_order_and_unlisted() {
        let (_d, a) = log_with("1 0 b 0 0\n1 1 b 0 1\n1 2 b 0 2\n1 3 b 0 3\n2 0 b 1 0\n");
        let mut names = QueueNames::default();
        let q0 = names.intern("b", 0);
        let q1 = names.intern("b", 1);
        let deliveries = vec![
            d(1, 0, q0, 0),
            // 1/2 delivered at offset 1 and 1/1 at offset 2: swapped on the broker.
            d(1, 2, q0, 1),
            d(1, 1, q0, 2),
            d(1, 1, q0, 2), // a consumer-side redelivery
            d(9, 9, q0, 3), // not listed
            d(2, 0, q1, 0),
        ];
        let r = check(&a, &names, &deliveries, &none(), Consumption::Concurrent);
        assert_eq!(r.total.acked, 5);
        assert_eq!(r.total.received, 4);
        assert_eq!(r.total.lost, 1);
        assert_eq!(r.lost_examples, vec![(1, 3, "b:0".to_string(), 3)]);
        assert_eq!(r.total.duplicates, 1);
        assert_eq!(r.total.out_of_order, 1);
        assert_eq!(r.total.misplaced, 3);
        assert_eq!(r.total.concurrent, 0);
        assert_eq!(r.unlisted, 1);
        assert_eq!(
            r.per_queue["b:1"],
            Verdict {
                acked: 1,
                received: 1,
                ..Verdict::default()
            }
        );
    }

    #[test]
    fn retried_messages_are_delivered_and_dead_letters_are_not_lost() {
        let (_d, a) = log_with("1 0 b 0 0\n1 1 b 0 1\n1 2 b 0 2\n");
        let mut names = QueueNames::default();
        let q0 = names.intern("b", 0);
        let retry = names.intern("b/retry", 0);
        let from_retry = |seq, offset, ok| {
            let mut x = d(1, seq, retry, offset);
            x.retry = true;
            x.ok = ok;
            x
        };
        let deliveries = vec![
            d(1, 0, q0, 0),
            // 1/1 fails twice (once from the topic, once from the retry topic), then
            // succeeds from the retry topic.
            failed(d(1, 1, q0, 1)),
            from_retry(1, 0, false),
            from_retry(1, 1, true),
            // 1/2 fails every time and ends in the dead-letter queue.
            failed(d(1, 2, q0, 2)),
            from_retry(2, 2, false),
        ];
        let dead: HashSet<(u64, u64)> = [(1, 2)].into_iter().collect();
        let r = check(&a, &names, &deliveries, &dead, Consumption::Concurrent);
        assert_eq!(r.total.acked, 3);
        assert_eq!(r.total.received, 2);
        assert_eq!(r.total.dead_lettered, 1);
        assert_eq!(r.total.lost, 0);
        assert_eq!(r.total.duplicates, 0);
        assert_eq!(r.total.failed, 4);
        assert_eq!(
            r.total.misplaced, 0,
            "retry deliveries are where they belong"
        );
        assert_eq!(r.total.out_of_order, 0);
        // Without the dead-letter queue's content, 1/2 is lost.
        let r = check(&a, &names, &deliveries, &none(), Consumption::Concurrent);
        assert_eq!((r.total.lost, r.total.dead_lettered), (1, 0));
        assert_eq!(r.lost_examples, vec![(1, 2, "b:0".to_string(), 2)]);
    }

    #[test]
    fn orderly_disorder_is_about_first_deliveries() {
        let (_d, a) = log_with("1 0 b 0 0\n1 1 b 0 1\n1 2 b 0 2\n");
        let mut names = QueueNames::default();
        let q0 = names.intern("b", 0);
        // In order; offset 1 fails once and is redelivered in place; after a rebalance
        // the new owner reads 0..2 again: duplicates, not disorder.
        let deliveries = vec![
            at(d(1, 0, q0, 0), 1, 2),
            at(failed(d(1, 1, q0, 1)), 3, 4),
            at(d(1, 1, q0, 1), 5, 6),
            at(d(1, 2, q0, 2), 7, 8),
            at(d(1, 0, q0, 0), 9, 10),
            at(d(1, 1, q0, 1), 9, 10),
        ];
        let r = check(&a, &names, &deliveries, &none(), Consumption::Orderly);
        assert_eq!(r.total.out_of_order, 0);
        assert_eq!(r.total.duplicates, 2);
        assert_eq!(r.total.concurrent, 0);
        // Offset 2 first delivered before offset 1 was: out of order (offset 1 was
        // skipped, then caught up).
        let deliveries = vec![
            at(d(1, 0, q0, 0), 1, 2),
            at(d(1, 2, q0, 2), 3, 4),
            at(d(1, 1, q0, 1), 5, 6),
        ];
        let r = check(&a, &names, &deliveries, &none(), Consumption::Orderly);
        assert_eq!(r.total.out_of_order, 1);
        // Concurrent consumption reads the same deliveries by queue offset: in order.
        let r = check(&a, &names, &deliveries, &none(), Consumption::Concurrent);
        assert_eq!(r.total.out_of_order, 0);
        // One call with the whole batch, in offset order: in order.
        let batch = vec![
            at(d(1, 0, q0, 0), 1, 2),
            at(d(1, 1, q0, 1), 1, 2),
            at(d(1, 2, q0, 2), 1, 2),
        ];
        let r = check(&a, &names, &batch, &none(), Consumption::Orderly);
        assert_eq!(r.total.out_of_order, 0);
    }

    #[test]
    fn recalled_messages_must_not_be_delivered_and_unanswered_recalls_are_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        let log = AckLog::create(&path).unwrap();
        log.append(1, 0, 5, "b", 0, 0).unwrap();
        for (seq, acknowledged) in [(1, false), (1, true), (2, false), (2, true)] {
            log.append_recall(1, seq, acknowledged).unwrap();
        }
        // 1/3: recall sent, no answer; 1/4: the same, but the message came anyway.
        log.append_recall(1, 3, false).unwrap();
        log.append_recall(1, 4, false).unwrap();
        let a = Acked::load(&path).unwrap();
        assert_eq!(a.by_msg.len(), 5);
        assert_eq!(a.recalled.len(), 2);
        assert_eq!(a.recall_sent.len(), 4);
        let mut names = QueueNames::default();
        let q0 = names.intern("b", 0);
        // 1/1 recalled and not delivered; 1/2 recalled and delivered (wrong).
        let deliveries = vec![d(1, 0, q0, 0), d(1, 2, q0, 2), d(1, 4, q0, 4)];
        let r = check(&a, &names, &deliveries, &none(), Consumption::Concurrent);
        let t = r.total;
        assert_eq!((t.acked, t.received, t.lost), (5, 2, 0));
        assert_eq!(
            (t.recalled, t.recalled_delivered, t.recall_unsure),
            (1, 1, 1)
        );
        assert!(r.per_queue["b:0"].notable());
    }

    #[test]
    fn overlapping_calls_on_a_queue_are_concurrent() {
        let (_d, a) = log_with("1 0 b 0 0\n1 1 b 0 1\n1 2 b 0 2\n2 0 b 1 0\n");
        let mut names = QueueNames::default();
        let q0 = names.intern("b", 0);
        let q1 = names.intern("b", 1);
        let deliveries = vec![
            // Two messages of one call: one call.
            at(d(1, 0, q0, 0), 1, 5),
            at(d(1, 1, q0, 1), 1, 5),
            // Began at 4, before the first call ended at 5: concurrent.
            at(d(1, 2, q0, 2), 4, 6),
            // Another queue at the same time: not concurrent.
            at(d(2, 0, q1, 0), 2, 3),
        ];
        let r = check(&a, &names, &deliveries, &none(), Consumption::Orderly);
        assert_eq!(r.total.concurrent, 1);
        assert_eq!(r.per_queue["b:0"].concurrent, 1);
        // Back to back (the next begins after the last ended): not concurrent.
        let deliveries = vec![at(d(1, 0, q0, 0), 1, 2), at(d(1, 1, q0, 1), 3, 4)];
        let r = check(&a, &names, &deliveries, &none(), Consumption::Orderly);
        assert_eq!(r.total.concurrent, 0);
    }
}
