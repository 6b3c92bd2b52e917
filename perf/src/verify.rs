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
//! offset the broker acknowledged. The check ([`check`]) compares the deliveries a consumer
//! saw with the log, listed messages only (others are sent-but-unacknowledged messages or
//! other runs, and are only counted as `unlisted`):
//! - `lost`: acknowledged, never delivered;
//! - `duplicates`: deliveries of a message beyond its first;
//! - `out_of_order`: in a queue's delivery order (queue offset order, the order a consumer
//!   of that queue reads in), a message that comes after one acknowledged at a higher
//!   offset of the same queue;
//! - `misplaced`: delivered at another queue or offset than the one acknowledged.

use std::collections::{BTreeMap, HashMap};
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
            match parse_line(&line) {
                Some((p, s, broker, q, off)) => {
                    let queue = out.queues.intern(broker, q);
                    out.by_msg
                        .entry((p, s))
                        .or_insert(Ack { queue, offset: off });
                }
                None => bad = Some((n, line)),
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

/// One delivery a consumer saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Delivery {
    pub producer: u64,
    pub seq: u64,
    /// Index in the consumer's [`QueueNames`].
    pub queue: u32,
    pub offset: u64,
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
}

impl Verdict {
    fn add(&mut self, o: &Verdict) {
        self.acked += o.acked;
        self.received += o.received;
        self.lost += o.lost;
        self.duplicates += o.duplicates;
        self.out_of_order += o.out_of_order;
        self.misplaced += o.misplaced;
    }
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
}

/// Lost examples kept for the report.
const LOST_EXAMPLES_MAX: usize = 5;

/// Checks `deliveries` (queue indices from `names`) against `acked`.
pub fn check(acked: &Acked, names: &QueueNames, deliveries: &[Delivery]) -> Report {
    let mut per: BTreeMap<String, Verdict> = BTreeMap::new();
    let mut times: HashMap<(u64, u64), u32> = HashMap::with_capacity(acked.by_msg.len());
    let mut unlisted = 0u64;
    for d in deliveries {
        let key = (d.producer, d.seq);
        let Some(ack) = acked.by_msg.get(&key) else {
            unlisted += 1;
            continue;
        };
        *times.entry(key).or_insert(0) += 1;
        if names.name(d.queue) != acked.queues.name(ack.queue) || d.offset != ack.offset {
            per.entry(acked.queues.name(ack.queue).to_string())
                .or_default()
                .misplaced += 1;
        }
    }
    let mut lost_examples = Vec::new();
    for (key, ack) in &acked.by_msg {
        let v = per
            .entry(acked.queues.name(ack.queue).to_string())
            .or_default();
        v.acked += 1;
        match times.get(key).copied().unwrap_or(0) {
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
    for (queue, n) in out_of_order(acked, names, deliveries) {
        per.entry(queue).or_default().out_of_order += n;
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
    }
}

/// Per delivered queue: listed messages that, in queue-offset order, follow a message
/// acknowledged at a higher offset of that same queue.
fn out_of_order(acked: &Acked, names: &QueueNames, deliveries: &[Delivery]) -> Vec<(String, u64)> {
    let mut by_queue: BTreeMap<&str, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for d in deliveries {
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
        let mut high: Option<u64> = None;
        let mut n = 0u64;
        for (_, p, s) in list {
            let Some(ack) = acked.by_msg.get(&(p, s)) else {
                continue;
            };
            if acked.queues.name(ack.queue) != queue {
                continue;
            }
            if high.is_some_and(|h| ack.offset < h) {
                n += 1;
            }
            high = Some(high.map_or(ack.offset, |h| h.max(ack.offset)));
        }
        if n > 0 {
            out.push((queue.to_string(), n));
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

    #[test]
    fn lost_duplicates_order_and_unlisted() {
        let (_d, a) = log_with("1 0 b 0 0\n1 1 b 0 1\n1 2 b 0 2\n1 3 b 0 3\n2 0 b 1 0\n");
        let mut names = QueueNames::default();
        let q0 = names.intern("b", 0);
        let q1 = names.intern("b", 1);
        let d = |producer, seq, queue, offset| Delivery {
            producer,
            seq,
            queue,
            offset,
        };
        let deliveries = vec![
            d(1, 0, q0, 0),
            // 1/2 delivered at offset 1 and 1/1 at offset 2: swapped on the broker.
            d(1, 2, q0, 1),
            d(1, 1, q0, 2),
            d(1, 1, q0, 2), // a consumer-side redelivery
            d(9, 9, q0, 3), // not listed
            d(2, 0, q1, 0),
        ];
        let r = check(&a, &names, &deliveries);
        assert_eq!(r.total.acked, 5);
        assert_eq!(r.total.received, 4);
        assert_eq!(r.total.lost, 1);
        assert_eq!(r.lost_examples, vec![(1, 3, "b:0".to_string(), 3)]);
        assert_eq!(r.total.duplicates, 1);
        assert_eq!(r.total.out_of_order, 1);
        assert_eq!(r.total.misplaced, 3);
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
}
