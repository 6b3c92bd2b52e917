//! Recalled scheduled messages of one shard (see `ringmq_wire::recall`): the set of timer
//! queue offsets whose message must not be delivered, derived from this shard's queue of
//! [`RECALL_TOPIC`] and rebuilt at every open, like the rest of the schedule.
//!
//! A recall record is only written for a message that is still pending (its key
//! `(due_ms, timer queue offset)` at or above the committed progress, see `schedule.rs`), and
//! always after the scheduled record in the log. The delivery loop, taking a due message,
//! skips it when it is in the set, and the append that carries its progress record removes
//! it from the set ([`Store::schedule_forget_recalls`]). So the set holds exactly the
//! recalled messages whose key is at or above the committed progress; indexing a recall
//! record inserts its target only when that holds, which makes the rebuild at open (and a
//! late read of a record) agree with what the running shard had.
//!
//! Invariant: a message is delivered (stored in its real topic) or recalled, never both. A
//! recall and a delivery of one message both run on the shard's thread, each in one turn
//! without a wait between its check and its append, so one of them comes first: the recall
//! first puts the message in the set (the delivery skips it), the delivery first moves the
//! progress past it (the recall answers RECALL_TOO_LATE).

use std::collections::HashSet;

use ringmq_wire::recall::{unpack_tag, RECALL_TOPIC};
use ringmq_wire::schedule::{unpack_tag as unpack_due, TIMER_TOPIC};

use super::consume_queue::{CqUnit, CQ_UNIT_BYTES};
use super::disk::Disk;
use super::{Result, Store};

/// Most recall queue units read to tell a recalled message from a delivered one after its
/// due time (1.3 MB of ConsumeQueue).
pub const RECALL_SEARCH_UNITS_MAX: u64 = 65_536;

/// The recall part of a shard's schedule.
#[derive(Debug, Default)]
pub struct Recalls {
    /// Next offset of this shard's recall queue to read.
    indexed: u64,
    /// Timer queue offsets of recalled messages not yet passed by delivery.
    recalled: HashSet<u64>,
}

impl Recalls {
    /// Whether the message at timer queue offset `cq_offset` is recalled.
    pub(super) fn contains(&self, cq_offset: u64) -> bool {
        self.recalled.contains(&cq_offset)
    }
}

/// Where a scheduled message stands, for a recall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecallState {
    /// Not delivered, not recalled: a recall may be written.
    Pending,
    /// Already recalled (it will not be delivered).
    Recalled,
    /// Delivered (or dropped at its due time): too late.
    Delivered,
}

impl<D: Disk + Clone> Store<D> {
    /// Forgets the recalls (at open): they are read again from the recall queue's start.
    pub(super) fn open_recalls(&mut self) {
        let shard = u32::from(self.cfg.shard);
        let min = self
            .queue(RECALL_TOPIC, shard)
            .map_or(0, |cq| cq.min_offset());
        self.schedule.recalls = Recalls {
            indexed: min,
            recalled: HashSet::new(),
        };
    }

    /// Reads up to `max_units` recall records stored since the last call. True when every
    /// recall record in the log is read (only then may the schedule deliver).
    pub fn schedule_index_recalls(&mut self, max_units: u64) -> Result<bool> {
        let shard = u32::from(self.cfg.shard);
        let Some(cq) = self.queue(RECALL_TOPIC, shard) else {
            return Ok(true);
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        let from = self.schedule.recalls.indexed.max(min);
        let to = max.min(from.saturating_add(max_units));
        if from >= to {
            self.schedule.recalls.indexed = from;
            return Ok(true);
        }
        let mut units = vec![0u8; (to - from) as usize * CQ_UNIT_BYTES];
        cq.read_units(from, &mut units)?;
        let targets: Vec<u64> = units
            .chunks_exact(CQ_UNIT_BYTES)
            .map(|c| CqUnit::decode(c.try_into().expect("chunks_exact yields 20 bytes")))
            .filter(|u| !u.is_empty())
            .filter_map(|u| unpack_tag(u.tag_hash))
            .collect();
        for target in targets {
            if let Some((due_ms, level)) = self.timer_due(target)? {
                if (due_ms, target) >= self.schedule.pending_key_floor()
                    && self.schedule.recalls.recalled.insert(target)
                {
                    self.schedule.count_recall(target, due_ms, level);
                }
            }
        }
        self.schedule.recalls.indexed = to;
        Ok(to == max)
    }

    /// Where the scheduled message at `timer_cq_offset` (stored at `physical_offset`, due at
    /// `due_ms` as its ConsumeQueue unit packs it) stands. Read after
    /// [`Self::schedule_index_recalls`] caught up.
    ///
    /// Past its due time a message was delivered unless a recall record names it; that
    /// record lies after the message in the log, so the recall queue is searched from there,
    /// at most [`RECALL_SEARCH_UNITS_MAX`] units (a recall made after more recalls than that
    /// is reported as delivered).
    pub fn schedule_recall_state(
        &self,
        timer_cq_offset: u64,
        physical_offset: u64,
        due_ms: i64,
    ) -> Result<RecallState> {
        if self.schedule.recalls.recalled.contains(&timer_cq_offset) {
            return Ok(RecallState::Recalled);
        }
        if (due_ms, timer_cq_offset) >= self.schedule.pending_key_floor() {
            return Ok(RecallState::Pending);
        }
        if self.recall_written_for(timer_cq_offset, physical_offset)? {
            Ok(RecallState::Recalled)
        } else {
            Ok(RecallState::Delivered)
        }
    }

    /// Whether a recall record names `timer_cq_offset` (stored at `physical_offset`): the
    /// first recall unit after `physical_offset` is found by bisection, then up to
    /// [`RECALL_SEARCH_UNITS_MAX`] units are read.
    fn recall_written_for(&self, timer_cq_offset: u64, physical_offset: u64) -> Result<bool> {
        let Some(cq) = self.queue(RECALL_TOPIC, u32::from(self.cfg.shard)) else {
            return Ok(false);
        };
        let (mut lo, mut hi) = (cq.min_offset(), cq.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cq.unit(mid)?.physical_offset <= physical_offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let end = cq
            .max_offset()
            .min(lo.saturating_add(RECALL_SEARCH_UNITS_MAX));
        let mut at = lo;
        let mut units = vec![0u8; 1024 * CQ_UNIT_BYTES];
        while at < end {
            let n = (end - at).min(1024) as usize;
            let buf = &mut units[..n * CQ_UNIT_BYTES];
            cq.read_units(at, buf)?;
            let found = buf
                .chunks_exact(CQ_UNIT_BYTES)
                .map(|c| CqUnit::decode(c.try_into().expect("chunks_exact yields 20 bytes")))
                .any(|u| !u.is_empty() && unpack_tag(u.tag_hash) == Some(timer_cq_offset));
            if found {
                return Ok(true);
            }
            at += n as u64;
        }
        Ok(false)
    }

    /// True when the message at `timer_cq_offset` is recalled (the delivery loop skips it).
    pub fn schedule_is_recalled(&self, timer_cq_offset: u64) -> bool {
        self.schedule.recalls.recalled.contains(&timer_cq_offset)
    }

    /// The append carrying the progress past the messages at these timer queue offsets
    /// succeeded: their recalls are spent.
    pub fn schedule_forget_recalls(&mut self, timer_cq_offsets: impl IntoIterator<Item = u64>) {
        if self.schedule.recalls.recalled.is_empty() {
            return;
        }
        for offset in timer_cq_offsets {
            self.schedule.recalls.recalled.remove(&offset);
        }
    }

    /// Recalled messages whose due time has not passed yet.
    pub fn schedule_recalls_pending(&self) -> usize {
        self.schedule.recalls.recalled.len()
    }

    /// The physical offset and due time of the timer queue's unit at `offset`; `None`
    /// outside the queue (never stored, or removed by retention).
    pub fn schedule_timer_unit(&self, offset: u64) -> Result<Option<(u64, i64)>> {
        let Some(cq) = self.queue(TIMER_TOPIC, u32::from(self.cfg.shard)) else {
            return Ok(None);
        };
        if offset < cq.min_offset() || offset >= cq.max_offset() {
            return Ok(None);
        }
        let unit = cq.unit(offset)?;
        Ok((!unit.is_empty()).then(|| (unit.physical_offset, unpack_due(unit.tag_hash).0)))
    }

    /// The due time and level of the timer queue's unit at `offset`.
    fn timer_due(&self, offset: u64) -> Result<Option<(i64, u32)>> {
        let Some(cq) = self.queue(TIMER_TOPIC, u32::from(self.cfg.shard)) else {
            return Ok(None);
        };
        if offset < cq.min_offset() || offset >= cq.max_offset() {
            return Ok(None);
        }
        let unit = cq.unit(offset)?;
        Ok((!unit.is_empty()).then(|| unpack_due(unit.tag_hash)))
    }
}
