//! Invariants checked on a broker's store (after recovery, at the end of a run) and on the
//! oracle of acknowledged records. Each returns the first violation as text.

use std::collections::BTreeMap;

use ringmq_wire::record::{self, Entry, BLANK_BYTES};

use crate::io::node_disk::NodeDisk;
use crate::store::Store;

use super::client::Oracle;

/// (topic, queue, queue offset).
pub type Key = (String, u32, u64);

/// The log walked from its first record: every entry decodes where the previous one ends,
/// BLANKs fill their segment, records claim their own position; the result maps each
/// record's (topic, queue, queue offset) to its physical offset. A queue offset that
/// appears twice is a violation (the checked topics are never deleted and recreated).
pub fn scan_log(store: &Store<NodeDisk>) -> Result<BTreeMap<Key, u64>, String> {
    let seg = store.config().segment_bytes;
    let (mut pos, end) = (store.min_offset(), store.write_offset());
    let mut out = BTreeMap::new();
    while pos < end {
        let seg_end = pos - pos % seg + seg;
        let mut head = [0u8; BLANK_BYTES];
        store
            .read(pos, &mut head)
            .map_err(|e| format!("log read at {pos}: {e}"))?;
        let (size, _) = record::peek_header(&head).ok_or("short header")?;
        let size = u64::from(size);
        if size < BLANK_BYTES as u64 || pos + size > seg_end {
            return Err(format!("log entry at {pos} has size {size}"));
        }
        let mut buf = vec![0u8; size as usize];
        if pos + size <= end {
            store
                .read(pos, &mut buf)
                .map_err(|e| format!("log read at {pos}: {e}"))?;
        } else {
            buf[..BLANK_BYTES].copy_from_slice(&head);
        }
        match record::decode(&buf).map_err(|e| format!("log garbage at {pos}: {e}"))? {
            Entry::Blank { len } => {
                if pos + len as u64 != seg_end {
                    return Err(format!("BLANK at {pos} does not fill its segment"));
                }
            }
            Entry::Record(rec) => {
                if rec.physical_offset != pos {
                    return Err(format!(
                        "record at {pos} claims physical offset {}",
                        rec.physical_offset
                    ));
                }
                if !rec.topic.starts_with("scratch-") {
                    let key = (rec.topic.to_string(), rec.queue_id, rec.queue_offset);
                    if let Some(first) = out.insert(key.clone(), pos) {
                        return Err(format!(
                            "queue offset {key:?} stored twice: at {first} and at {pos}"
                        ));
                    }
                }
            }
        }
        pos += size;
    }
    if pos != end {
        return Err(format!("log walk ended at {pos}, write offset {end}"));
    }
    Ok(out)
}

/// Every ConsumeQueue entry of the checked topics points at the log record with its
/// (topic, queue, queue offset), the offsets of each queue are dense from its minimum, and
/// every record of the log has its entry.
pub fn queues_match_log(store: &Store<NodeDisk>, log: &BTreeMap<Key, u64>) -> Result<(), String> {
    let mut from_cq: BTreeMap<Key, u64> = BTreeMap::new();
    for (topic, q) in store.queues() {
        if topic.starts_with("scratch-") {
            continue;
        }
        let Some((min, max)) = store.queue_range(&topic, q) else {
            continue;
        };
        for offset in min..max {
            let r = store
                .get(&topic, q, offset, 1, u64::MAX, |_| true)
                .map_err(|e| format!("{topic}/{q}@{offset}: {e}"))?;
            let Some(run) = r.runs.first() else {
                return Err(format!(
                    "{topic}/{q}: no entry at {offset} (range {min}..{max})"
                ));
            };
            let rec = store
                .read_record(run.physical_offset)
                .map_err(|e| format!("{topic}/{q}@{offset}: entry -> {e}"))?;
            let rec = record::decode_one(&rec)
                .map_err(|e| format!("{topic}/{q}@{offset}: entry -> bad record: {e}"))?;
            if rec.topic != topic || rec.queue_id != q || rec.queue_offset != offset {
                return Err(format!(
                    "ConsumeQueue {topic}/{q}@{offset} points at a record of {}/{}@{}",
                    rec.topic, rec.queue_id, rec.queue_offset
                ));
            }
            from_cq.insert((topic.clone(), q, offset), run.physical_offset);
        }
    }
    let log_min = store.min_offset();
    for (key, pos) in log {
        if *pos < log_min {
            continue;
        }
        match from_cq.get(key) {
            Some(p) if p == pos => {}
            Some(p) => {
                return Err(format!(
                    "{key:?}: ConsumeQueue says {p}, the log has it at {pos}"
                ))
            }
            None => return Err(format!("{key:?} at {pos} has no ConsumeQueue entry")),
        }
    }
    Ok(())
}

/// Every acknowledged record the promise covers is in `store` with its body.
pub fn acked_present(store: &Store<NodeDisk>, oracle: &Oracle, what: &str) -> Result<(), String> {
    for (key, acked) in &oracle.acked {
        match body_at(store, key) {
            Some(b) if b == acked.body => {}
            Some(b) => {
                return Err(format!(
                    "{what}: acknowledged {key:?} = {:?} but the store has {:?}",
                    String::from_utf8_lossy(&acked.body),
                    String::from_utf8_lossy(&b)
                ))
            }
            None => {
                return Err(format!(
                    "{what}: acknowledged {key:?} = {:?} is lost",
                    String::from_utf8_lossy(&acked.body)
                ))
            }
        }
    }
    Ok(())
}

/// After a crash whose promise does not cover every acknowledgement (ASYNC_FLUSH and a power
/// loss): forget the acknowledged records the store no longer has (or has replaced), so
/// later checks hold the broker to what it still promises. Returns how many were forgotten.
pub fn forget_lost(store: &Store<NodeDisk>, oracle: &mut Oracle) -> usize {
    let before = oracle.acked.len();
    oracle
        .acked
        .retain(|key, acked| body_at(store, key).is_some_and(|b| b == acked.body));
    let acked = &oracle.acked;
    oracle.scheduled.retain(|key, _| acked.contains_key(key));
    before - oracle.acked.len()
}

/// Scheduled messages: every delivered one (a record of another topic that carries
/// `TIMER_OUT_MS`) was stored no earlier than it was due, by the broker's clock, and was
/// sent by a client; every acknowledged one due at or before `due_by_ms` is delivered (pass
/// `i64::MIN` to check only the first part, e.g. right after a restart).
pub fn schedule_kept(
    store: &Store<NodeDisk>,
    log: &BTreeMap<Key, u64>,
    oracle: &Oracle,
    due_by_ms: i64,
) -> Result<std::collections::BTreeSet<Vec<u8>>, String> {
    use ringmq_wire::properties::keys;
    use ringmq_wire::schedule::is_schedule_topic;
    let mut delivered = std::collections::BTreeSet::new();
    for ((topic, _, _), pos) in log {
        if is_schedule_topic(topic) || *pos < store.min_offset() {
            continue;
        }
        let bytes = store
            .read_record(*pos)
            .map_err(|e| format!("record at {pos}: {e}"))?;
        let rec = record::decode_one(&bytes).map_err(|e| format!("record at {pos}: {e}"))?;
        let Some(due) = rec.property(keys::TIMER_OUT_MS) else {
            continue;
        };
        let due: i64 = due
            .parse()
            .map_err(|_| format!("record at {pos}: TIMER_OUT_MS={due:?}"))?;
        if rec.store_timestamp_ms < due {
            return Err(format!(
                "{topic} record at {pos} delivered at {} ms, before it was due at {due} ms",
                rec.store_timestamp_ms
            ));
        }
        if !oracle.sent.contains(rec.body) {
            return Err(format!(
                "{topic} record at {pos}: delivered a body no client sent: {:?}",
                String::from_utf8_lossy(rec.body)
            ));
        }
        delivered.insert(rec.body.to_vec());
    }
    for (key, (body, due)) in &oracle.scheduled {
        if *due <= due_by_ms && !delivered.contains(body) {
            return Err(format!(
                "scheduled {key:?} = {:?} was due at {due} ms and is not delivered by {due_by_ms} ms",
                String::from_utf8_lossy(body)
            ));
        }
    }
    Ok(delivered)
}

fn body_at(store: &Store<NodeDisk>, key: &Key) -> Option<Vec<u8>> {
    let (topic, q, offset) = key;
    let r = store.get(topic, *q, *offset, 1, u64::MAX, |_| true).ok()?;
    let run = r.runs.first()?;
    let rec = store.read_record(run.physical_offset).ok()?;
    let view = record::decode_one(&rec).ok()?;
    (view.queue_offset == *offset).then(|| view.body.to_vec())
}
