//! What one shard has in flight for POP consumers: checkpoints (a pop of one queue: its
//! offsets, invisible until a deadline), each offset open, acked or revived. Rebuilt from the
//! shard's [`POP_STATE_TOPIC`](ringmq_wire::command::POP_STATE_TOPIC) records at open
//! (`super::open`); changed only after the record saying so is appended.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// Checkpoints settled by acks whose acked offsets are remembered, so that an ack sent again
/// (its answer lost) still succeeds: the newest this many.
pub const SETTLED_REMEMBERED: usize = 65_536;

/// A group's queue: (group, topic, queue id).
pub type GroupQueue = (String, String, u32);

/// Names a checkpoint (RocketMQ's key: group, topic, queue, first offset, pop time).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CkKey {
    pub group: String,
    pub topic: String,
    pub queue_id: u32,
    pub start_offset: u64,
    pub pop_time_ms: i64,
}

/// How one popped offset stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Open,
    Acked,
    Revived,
    /// Moved to a new checkpoint by an invisible-time change.
    Moved,
}

#[derive(Debug)]
struct Ck {
    /// When its invisible time ends: acks from then on are refused.
    deadline_ms: i64,
    /// When the revive loop takes it: the deadline, or later after a revive that could not
    /// store everything (its deadline stays: an ack after it is still refused, since copies
    /// may be stored already).
    due_ms: i64,
    /// Queue offset of its checkpoint record in the POP state queue.
    cq_offset: u64,
    marks: BTreeMap<u64, Mark>,
    /// Its deadline passed and the revive loop is storing its open offsets again.
    reviving: bool,
    /// Orderly: it holds its queue until every offset of it is acked or rewound.
    order: bool,
    /// Orderly: reconsume counts of its offsets (absent: 0).
    counts: BTreeMap<u64, u32>,
}

/// Orderly POP: offsets whose invisible time ended, to be delivered again from the queue.
#[derive(Debug, Clone, Default)]
pub struct Rewind {
    /// Queue offset of the rewind record in the POP state queue (holds the watermark).
    pub cq_offset: u64,
    /// Reconsume count of each offset still to be delivered again.
    pub counts: BTreeMap<u64, u32>,
    /// Offsets between them acked before the rewind (acks may come in any order): the
    /// queue is read again from its first rewound offset, and these are passed over.
    pub acked: BTreeSet<u64>,
}

/// Why an ack (or an invisible-time change) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No checkpoint: every message of it was acked or revived, or the handle is not one
    /// this broker gave.
    NotInFlight,
    /// The invisible time ended: the message is (or is being) delivered again.
    Expired { deadline_ms: i64 },
    /// The checkpoint does not hold this offset.
    NotInCheckpoint,
    /// The offset was already stored again (revived).
    Revived,
    /// An invisible-time change gave the message a new receipt handle.
    Moved,
}

impl Refusal {
    pub fn remark(&self, offset: u64) -> String {
        match self {
            Refusal::NotInFlight => format!(
                "no message in flight for this receipt handle (offset {offset}): it was acked, \
                 or its invisible time ended and it was delivered again"
            ),
            Refusal::Expired { deadline_ms } => format!(
                "the invisible time of the message at offset {offset} ended at {deadline_ms} \
                 ms: it is delivered again; ack the new delivery"
            ),
            Refusal::NotInCheckpoint => {
                format!("offset {offset} is not one this receipt handle's pop handed out")
            }
            Refusal::Moved => format!(
                "the message at offset {offset} has a newer receipt handle (its invisible time \
                 was changed); use that one"
            ),
            Refusal::Revived => format!(
                "the message at offset {offset} was already delivered again after its \
                 invisible time; ack the new delivery"
            ),
        }
    }
}

/// Counts per group since the broker started (`ringmq-ctl group progress`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub popped: u64,
    pub acked: u64,
    pub revived: u64,
    pub dead_lettered: u64,
}

/// The state (see the module docs).
#[derive(Debug, Default)]
pub struct PopState {
    cks: HashMap<CkKey, Ck>,
    due: BTreeSet<(i64, CkKey)>,
    by_cq: BTreeMap<u64, CkKey>,
    /// (group, topic, queue) -> when the group last popped it (ms).
    last_pop: HashMap<(String, String, u32), i64>,
    pub counts: BTreeMap<String, GroupCounts>,
    /// Pops served (rotates the queue a pop starts with).
    pub turn: u64,
    /// Any-queue pops received (which shard is asked first: `super::pop`).
    pub spread: u64,
    /// Rebuilt from the log (`super::open`): this shard serves POP as a master, and its
    /// watermark means something.
    pub opened: bool,
    /// Orderly: queues held by an open checkpoint.
    busy: HashSet<GroupQueue>,
    /// Orderly: queues rewound, not yet popped again in full.
    rewinds: HashMap<GroupQueue, Rewind>,
    /// Acked offsets of checkpoints every offset of which was acked (see
    /// [`SETTLED_REMEMBERED`]), oldest first in `settled_order`.
    settled: HashMap<CkKey, Vec<u64>>,
    settled_order: VecDeque<CkKey>,
}

impl PopState {
    /// A checkpoint whose record is at `cq_offset` (a duplicate key keeps the first).
    pub fn insert(&mut self, key: CkKey, invisible_ms: u64, cq_offset: u64, offsets: &[u64]) {
        self.insert_ck(key, invisible_ms, cq_offset, offsets, None);
    }

    /// An orderly checkpoint: it holds its queue; `counts` per offset (missing: 0). The
    /// offsets leave the queue's rewind; acked offsets below its first are forgotten (the
    /// queue cannot go back below it), the ones it passed over are kept for its own rewind.
    pub fn insert_orderly(
        &mut self,
        key: CkKey,
        invisible_ms: u64,
        cq_offset: u64,
        offsets: &[u64],
        counts: &[u32],
    ) {
        let gq = (key.group.clone(), key.topic.clone(), key.queue_id);
        if let (Some(r), Some(&first)) = (self.rewinds.get_mut(&gq), offsets.iter().min()) {
            for o in offsets {
                r.counts.remove(o);
            }
            if crate::planted::is(crate::planted::Bug::PopRewindForgetsAcks) {
                r.acked
                    .retain(|&o| o > offsets.iter().max().copied().unwrap_or(first));
            } else {
                r.acked.retain(|&o| o > first);
            }
            if r.counts.is_empty() && r.acked.is_empty() {
                self.rewinds.remove(&gq);
            }
        }
        let counts = offsets
            .iter()
            .zip(counts.iter().chain(std::iter::repeat(&0)))
            .filter(|(_, c)| **c > 0)
            .map(|(o, c)| (*o, *c))
            .collect();
        self.insert_ck(key, invisible_ms, cq_offset, offsets, Some(counts));
    }

    fn insert_ck(
        &mut self,
        key: CkKey,
        invisible_ms: u64,
        cq_offset: u64,
        offsets: &[u64],
        order: Option<BTreeMap<u64, u32>>,
    ) {
        if self.cks.contains_key(&key) || offsets.is_empty() {
            return;
        }
        if order.is_some() {
            self.busy
                .insert((key.group.clone(), key.topic.clone(), key.queue_id));
        }
        let deadline_ms = key
            .pop_time_ms
            .saturating_add(i64::try_from(invisible_ms).unwrap_or(i64::MAX));
        self.due.insert((deadline_ms, key.clone()));
        self.by_cq.insert(cq_offset, key.clone());
        self.cks.insert(
            key,
            Ck {
                deadline_ms,
                due_ms: deadline_ms,
                cq_offset,
                marks: offsets.iter().map(|&o| (o, Mark::Open)).collect(),
                reviving: false,
                order: order.is_some(),
                counts: order.unwrap_or_default(),
            },
        );
    }

    /// Orderly: whether an open checkpoint holds the queue.
    pub fn is_busy(&self, gq: &GroupQueue) -> bool {
        self.busy.contains(gq)
    }

    /// Orderly: the queue's rewind, if it has one.
    pub fn rewind_of(&self, gq: &GroupQueue) -> Option<&Rewind> {
        self.rewinds.get(gq)
    }

    /// Orderly: a rewind recorded at `cq_offset` (replaces the queue's earlier one, whose
    /// offsets it holds again): the offsets to deliver again with their counts, and the
    /// acked ones among them to pass over.
    pub fn set_rewind(
        &mut self,
        gq: GroupQueue,
        cq_offset: u64,
        counts: BTreeMap<u64, u32>,
        acked: BTreeSet<u64>,
    ) {
        if counts.is_empty() {
            self.rewinds.remove(&gq);
        } else {
            self.rewinds.insert(
                gq,
                Rewind {
                    cq_offset,
                    counts,
                    acked,
                },
            );
        }
    }

    /// The offsets of `key` acked so far.
    pub fn acked_of(&self, key: &CkKey) -> Vec<u64> {
        self.cks.get(key).map_or_else(Vec::new, |ck| {
            ck.marks
                .iter()
                .filter(|(_, m)| **m == Mark::Acked)
                .map(|(o, _)| *o)
                .collect()
        })
    }

    /// Orderly: whether `key` is an orderly checkpoint, and its offsets' counts.
    pub fn orderly_counts(&self, key: &CkKey) -> Option<BTreeMap<u64, u32>> {
        self.cks
            .get(key)
            .filter(|c| c.order)
            .map(|c| c.counts.clone())
    }

    pub fn contains(&self, key: &CkKey) -> bool {
        self.cks.contains_key(key)
    }

    /// Marks `offsets` of `key` (those still open); drops the checkpoint once none is open.
    /// Returns how many were open.
    pub fn mark(&mut self, key: &CkKey, offsets: &[u64], mark: Mark) -> usize {
        let Some(ck) = self.cks.get_mut(key) else {
            return 0;
        };
        let mut changed = 0;
        for o in offsets {
            if let Some(m) = ck.marks.get_mut(o) {
                if *m == Mark::Open {
                    *m = mark;
                    changed += 1;
                }
            }
        }
        if ck.marks.values().all(|m| *m != Mark::Open) {
            let ck = self.cks.remove(key).expect("looked up above");
            let acked: Vec<u64> = ck
                .marks
                .iter()
                .filter(|(_, m)| **m == Mark::Acked)
                .map(|(o, _)| *o)
                .collect();
            if !acked.is_empty() {
                if self.settled_order.len() >= SETTLED_REMEMBERED {
                    if let Some(old) = self.settled_order.pop_front() {
                        self.settled.remove(&old);
                    }
                }
                self.settled_order.push_back(key.clone());
                self.settled.insert(key.clone(), acked);
            }
            self.due.remove(&(ck.due_ms, key.clone()));
            self.by_cq.remove(&ck.cq_offset);
            if ck.order {
                self.busy
                    .remove(&(key.group.clone(), key.topic.clone(), key.queue_id));
            }
        }
        changed
    }

    /// An invisible-time change made `key`: `offsets` still open in another checkpoint of
    /// its queue are marked moved there (an offset is open in one checkpoint at a time).
    pub fn move_out(&mut self, key: &CkKey, offsets: &[u64]) {
        let holders: Vec<(CkKey, u64)> = self
            .cks
            .iter()
            .filter(|(k, _)| {
                *k != key
                    && k.group == key.group
                    && k.topic == key.topic
                    && k.queue_id == key.queue_id
            })
            .flat_map(|(k, ck)| {
                offsets
                    .iter()
                    .filter(|o| ck.marks.get(o) == Some(&Mark::Open))
                    .map(move |o| (k.clone(), *o))
            })
            .collect();
        for (k, o) in holders {
            self.mark(&k, &[o], Mark::Moved);
        }
    }

    /// Whether `offset` of `key` may be acked at `now_ms`: `Ok(true)` when open, `Ok(false)`
    /// when already acked (nothing to do).
    pub fn check_ack(&self, key: &CkKey, offset: u64, now_ms: i64) -> Result<bool, Refusal> {
        let Some(ck) = self.cks.get(key) else {
            return match self.settled.get(key) {
                Some(acked) if acked.contains(&offset) => Ok(false),
                _ => Err(Refusal::NotInFlight),
            };
        };
        match ck.marks.get(&offset) {
            None => Err(Refusal::NotInCheckpoint),
            Some(Mark::Acked) => Ok(false),
            Some(Mark::Revived) => Err(Refusal::Revived),
            Some(Mark::Moved) => Err(Refusal::Moved),
            Some(Mark::Open) if ck.reviving || now_ms >= ck.deadline_ms => Err(Refusal::Expired {
                deadline_ms: ck.deadline_ms,
            }),
            Some(Mark::Open) => Ok(true),
        }
    }

    /// Checkpoints due at `now_ms` (at most `max`), each with its open offsets, marked as
    /// reviving.
    pub fn take_due(&mut self, now_ms: i64, max: usize) -> Vec<(CkKey, Vec<u64>)> {
        let mut out = Vec::new();
        for (deadline, key) in &self.due {
            if *deadline > now_ms || out.len() >= max {
                break;
            }
            let Some(ck) = self.cks.get_mut(key) else {
                continue;
            };
            if ck.reviving {
                continue;
            }
            ck.reviving = true;
            let open = ck
                .marks
                .iter()
                .filter(|(_, m)| **m == Mark::Open)
                .map(|(o, _)| *o)
                .collect();
            out.push((key.clone(), open));
        }
        out
    }

    /// A revive that could not store everything: try again at `retry_at_ms`.
    pub fn revive_later(&mut self, key: &CkKey, retry_at_ms: i64) {
        if let Some(ck) = self.cks.get_mut(key) {
            self.due.remove(&(ck.due_ms, key.clone()));
            ck.due_ms = retry_at_ms;
            ck.reviving = false;
            self.due.insert((retry_at_ms, key.clone()));
        }
    }

    /// The earliest deadline, if anything is in flight.
    pub fn next_deadline(&self) -> Option<i64> {
        self.due
            .iter()
            .find(|(_, k)| self.cks.get(k).is_some_and(|c| !c.reviving))
            .map(|(d, _)| *d)
    }

    /// Where a rebuild must start reading the POP state queue: the oldest open checkpoint's
    /// record, else `end` (the queue's next offset).
    pub fn watermark(&self, end: u64) -> u64 {
        let cks = self.by_cq.keys().next().copied().unwrap_or(end);
        self.rewinds
            .values()
            .map(|r| r.cq_offset)
            .fold(cks, u64::min)
    }

    /// Offsets in flight (open) per group.
    pub fn in_flight(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (k, ck) in &self.cks {
            let open = ck.marks.values().filter(|m| **m == Mark::Open).count() as u64;
            *out.entry(k.group.clone()).or_insert(0) += open;
        }
        out
    }

    pub fn note_pop(&mut self, group: &str, topic: &str, queue_id: u32, now_ms: i64) {
        self.last_pop
            .insert((group.to_string(), topic.to_string(), queue_id), now_ms);
    }

    /// Whether `group` popped the queue within `window_ms` or has messages of it in flight.
    pub fn pops_queue(
        &self,
        group: &str,
        topic: &str,
        queue_id: u32,
        now_ms: i64,
        window_ms: i64,
    ) -> bool {
        let key = (group.to_string(), topic.to_string(), queue_id);
        if self
            .last_pop
            .get(&key)
            .is_some_and(|&t| now_ms.saturating_sub(t) < window_ms)
        {
            return true;
        }
        self.cks
            .keys()
            .any(|k| k.group == group && k.topic == topic && k.queue_id == queue_id)
    }

    pub fn count(&mut self, group: &str) -> &mut GroupCounts {
        self.counts.entry(group.to_string()).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(start: u64, at: i64) -> CkKey {
        CkKey {
            group: "g".into(),
            topic: "t".into(),
            queue_id: 0,
            start_offset: start,
            pop_time_ms: at,
        }
    }

    /// A CHANGED checkpoint replayed without the MOVED record after it (a torn write) still
    /// takes its offset out of the old checkpoint: an ack of the new handle is the last word,
    /// and the old checkpoint never revives the message.
    #[test]
    fn a_change_replayed_alone_moves_the_offset_out_of_the_old_checkpoint() {
        let mut s = PopState::default();
        s.insert(key(10, 1000), 500, 3, &[10, 11]);
        s.move_out(&key(11, 1200), &[11]);
        s.insert(key(11, 1200), 60_000, 4, &[11]);
        assert_eq!(s.check_ack(&key(10, 1000), 11, 1300), Err(Refusal::Moved));
        assert_eq!(s.mark(&key(11, 1200), &[11], Mark::Acked), 1);
        assert_eq!(s.mark(&key(10, 1000), &[10], Mark::Acked), 1);
        assert_eq!(s.take_due(i64::MAX, 10), vec![]);
        assert_eq!(s.in_flight().get("g"), None);
        // Another queue's checkpoint holding the same offset number is not touched.
        let mut other = key(11, 900);
        other.queue_id = 1;
        s.insert(other.clone(), 500, 5, &[11]);
        s.move_out(&key(11, 1500), &[11]);
        assert_eq!(s.check_ack(&other, 11, 1000), Ok(true));
    }

    #[test]
    fn acks_resolve_a_checkpoint_and_expiry_refuses_them() {
        let mut s = PopState::default();
        s.insert(key(10, 1000), 500, 3, &[10, 11]);
        assert_eq!(s.watermark(9), 3);
        assert_eq!(s.check_ack(&key(10, 1000), 10, 1200), Ok(true));
        assert_eq!(
            s.check_ack(&key(10, 1000), 12, 1200),
            Err(Refusal::NotInCheckpoint)
        );
        assert_eq!(
            s.check_ack(&key(10, 1000), 11, 1500),
            Err(Refusal::Expired { deadline_ms: 1500 })
        );
        assert_eq!(s.mark(&key(10, 1000), &[10], Mark::Acked), 1);
        assert_eq!(s.check_ack(&key(10, 1000), 10, 1200), Ok(false));
        assert_eq!(s.in_flight().get("g"), Some(&1));
        assert_eq!(s.take_due(1499, 10), vec![]);
        assert_eq!(s.take_due(1500, 10), vec![(key(10, 1000), vec![11])]);
        // Reviving: an ack now is refused even if the clock went back.
        assert!(matches!(
            s.check_ack(&key(10, 1000), 11, 1000),
            Err(Refusal::Expired { .. })
        ));
        assert_eq!(s.mark(&key(10, 1000), &[11], Mark::Revived), 1);
        assert!(!s.contains(&key(10, 1000)));
        assert_eq!(s.watermark(9), 9);
        assert_eq!(
            s.check_ack(&key(10, 1000), 11, 1000),
            Err(Refusal::NotInFlight)
        );
        // The acked one is remembered: acking it again still succeeds.
        assert_eq!(s.check_ack(&key(10, 1000), 10, 1000), Ok(false));
    }

    /// Orderly: acks in any order; a rewind's acked offsets stay until a pop passes them.
    #[test]
    fn orderly_acks_come_in_any_order_and_a_rewind_passes_over_the_acked() {
        let mut s = PopState::default();
        let gq: GroupQueue = ("g".into(), "t".into(), 0);
        s.insert_orderly(key(4, 1000), 500, 3, &[4, 5, 6], &[]);
        assert!(s.is_busy(&gq));
        assert_eq!(s.check_ack(&key(4, 1000), 5, 1100), Ok(true));
        assert_eq!(s.mark(&key(4, 1000), &[5], Mark::Acked), 1);
        assert_eq!(s.acked_of(&key(4, 1000)), vec![5]);
        // The rewind the revive loop records for it: 4 and 6 again, 5 passed over.
        s.set_rewind(
            gq.clone(),
            9,
            BTreeMap::from([(4, 1), (6, 0)]),
            BTreeSet::from([5]),
        );
        assert_eq!(s.watermark(20), 3);
        s.insert_orderly(key(4, 2000), 500, 10, &[4], &[1]);
        let r = s.rewind_of(&gq).expect("6 is still to come");
        assert_eq!(r.counts, BTreeMap::from([(6, 0)]));
        assert_eq!(r.acked, BTreeSet::from([5]));
        // Delivering 6 passes 5: the rewind is done.
        s.insert_orderly(key(6, 3000), 500, 11, &[6], &[0]);
        assert!(s.rewind_of(&gq).is_none());
        // A pop that passes acked offsets keeps them for its own rewind.
        s.set_rewind(
            gq.clone(),
            12,
            BTreeMap::from([(4, 1), (5, 0), (7, 0)]),
            BTreeSet::from([6]),
        );
        s.insert_orderly(key(4, 3500), 500, 13, &[4, 5, 7, 8], &[1, 0, 0, 0]);
        assert_eq!(
            s.rewind_of(&gq).map(|r| r.acked.clone()),
            Some(BTreeSet::from([6]))
        );
        s.insert_orderly(key(9, 3600), 500, 14, &[9], &[0]);
        assert!(s.rewind_of(&gq).is_none());
        // Acked offsets behind everything left to deliver stay until a pop passes them.
        s.set_rewind(
            gq.clone(),
            12,
            BTreeMap::from([(4, 2)]),
            BTreeSet::from([5, 6]),
        );
        s.insert_orderly(key(4, 4000), 500, 13, &[4], &[2]);
        assert_eq!(
            s.rewind_of(&gq).map(|r| r.acked.clone()),
            Some(BTreeSet::from([5, 6]))
        );
        s.insert_orderly(key(7, 5000), 500, 14, &[7], &[0]);
        assert!(s.rewind_of(&gq).is_none());
    }

    #[test]
    fn a_failed_revive_is_retried_later() {
        let mut s = PopState::default();
        s.insert(key(0, 0), 100, 0, &[0]);
        assert_eq!(s.take_due(100, 10).len(), 1);
        assert_eq!(s.next_deadline(), None);
        s.revive_later(&key(0, 0), 1100);
        assert_eq!(s.next_deadline(), Some(1100));
        // Its copy may be stored already: an ack is still refused.
        assert_eq!(
            s.check_ack(&key(0, 0), 0, 500),
            Err(Refusal::Expired { deadline_ms: 100 })
        );
        assert_eq!(s.take_due(1000, 10).len(), 0);
        assert_eq!(s.take_due(1100, 10).len(), 1);
    }
}
