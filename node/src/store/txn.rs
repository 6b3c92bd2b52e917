//! The transaction state of one shard, derived from the log (`ringmq_wire::transaction`):
//! which half messages are decided (commit, rollback, discarded) and which are pending, with
//! what the check-back needs (producer group, store time, checks made).
//!
//! Nothing here is written to disk: it is rebuilt at every open from the two ConsumeQueues
//! (this shard's queue of the half topic and of the op topic). Decisions are read from the op
//! queue's units alone (the tag packs them); only undecided halves' records are read. The
//! decisions are one byte per half, from the oldest half still stored, so a second
//! END_TRANSACTION for any stored half is answered from memory.
//!
//! A commit is written as its op record followed by the committed copy in one append (one
//! segment). After a crash the log is a prefix of what was written, so only a commit op that
//! is the log's last record can have lost its copy; [`Store::txn_redo`] names it and the
//! broker stores the copy again.

use std::collections::{BTreeMap, VecDeque};

use ringmq_wire::properties::keys;
use ringmq_wire::record;
use ringmq_wire::transaction::{unpack_op_tag, Decision, Op, HALF_TOPIC, OP_TOPIC};

use super::consume_queue::{CqUnit, CQ_UNIT_BYTES};
use super::disk::Disk;
use super::{Result, Store, StoreError};

/// A half message waiting for its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub half_queue_offset: u64,
    pub physical_offset: u64,
    pub size: u32,
    pub producer_group: String,
    pub stored_ms: i64,
    /// Check-backs sent since this broker started.
    pub checks: u32,
    /// Not checked again before this (ms since the epoch).
    pub next_check_ms: i64,
}

/// The state (see the module docs).
#[derive(Debug, Default)]
pub struct Txn {
    half_indexed: u64,
    op_indexed: u64,
    base: u64,
    /// 0 undecided, else a `Decision` as u8; index = half queue offset - `base`.
    decisions: VecDeque<u8>,
    pending: BTreeMap<u64, Pending>,
    /// Set at open: the newest op (a commit or a discard) whose copy was cut off.
    redo: Option<(u64, Decision)>,
}

/// How a half stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfState {
    /// No half of this shard at that queue offset (never, or removed by retention).
    Unknown,
    Pending,
    Decided(Decision),
}

impl<D: Disk + Clone> Store<D> {
    /// Rebuilds the state from the ConsumeQueues (at open): decisions first, then the
    /// undecided halves; notes a commit whose copy a crash cut off.
    pub(super) fn open_txn(&mut self) -> Result<()> {
        self.txn = Txn::default();
        let shard = u32::from(self.cfg.shard);
        if let Some(min) = self.queue(HALF_TOPIC, shard).map(|cq| cq.min_offset()) {
            self.txn.base = min;
            self.txn.half_indexed = min;
        }
        let ops = self
            .queue(OP_TOPIC, shard)
            .map(|cq| (cq.min_offset(), cq.max_offset()));
        if let Some((min, max)) = ops {
            self.txn.op_indexed = min;
            if max > min {
                let cq = self.queue(OP_TOPIC, shard).expect("checked above");
                let last = cq.unit(max - 1)?;
                let is_last = last.physical_offset + u64::from(last.size) >= self.write_offset();
                if is_last {
                    let bytes = self.log.read_record(last.physical_offset)?;
                    let rec = record::decode_one(&bytes)
                        .map_err(|source| StoreError::BadRecord { at: 0, source })?;
                    if let Ok(op) = Op::decode(rec.body) {
                        if op.decision != Decision::Rollback {
                            self.txn.redo = Some((op.half_queue_offset, op.decision));
                        }
                    }
                }
            }
        }
        while !self.txn_index(u64::MAX)? {}
        Ok(())
    }

    /// Indexes up to `max_units` new op units, then (once the ops are caught up) new halves.
    /// True when both queues are caught up.
    pub fn txn_index(&mut self, max_units: u64) -> Result<bool> {
        let shard = u32::from(self.cfg.shard);
        // Retention moved the half queue's start: forget what is gone.
        if let Some(cq) = self.queue(HALF_TOPIC, shard) {
            let min = cq.min_offset();
            while self.txn.base < min {
                self.txn.decisions.pop_front();
                self.txn.base += 1;
            }
            self.txn.pending.retain(|&qo, _| qo >= min);
            self.txn.half_indexed = self.txn.half_indexed.max(min);
        }
        let op_indexed = self.txn.op_indexed;
        let op_units = match self.queue(OP_TOPIC, shard) {
            Some(cq) => {
                let from = op_indexed.max(cq.min_offset());
                let to = cq
                    .max_offset()
                    .min(from.saturating_add(max_units))
                    .max(from);
                let mut units = vec![0u8; (to - from) as usize * CQ_UNIT_BYTES];
                if to > from {
                    cq.read_units(from, &mut units)?;
                }
                (units, to, to < cq.max_offset())
            }
            None => (Vec::new(), op_indexed, false),
        };
        self.txn.op_indexed = op_units.1;
        for chunk in op_units.0.chunks_exact(CQ_UNIT_BYTES) {
            let unit = CqUnit::decode(chunk.try_into().expect("chunks_exact yields 20 bytes"));
            if let Some((qo, d)) = unpack_op_tag(unit.tag_hash) {
                self.txn_set(qo, d);
            }
        }
        if op_units.2 {
            return Ok(false);
        }
        let from = self.txn.half_indexed;
        let Some(cq) = self.queue(HALF_TOPIC, shard) else {
            return Ok(true);
        };
        let to = cq.max_offset().min(from.saturating_add(max_units));
        if to <= from {
            return Ok(true);
        }
        let mut units = vec![0u8; (to - from) as usize * CQ_UNIT_BYTES];
        cq.read_units(from, &mut units)?;
        let caught_up = to >= cq.max_offset();
        self.txn.half_indexed = to;
        for (i, chunk) in units.chunks_exact(CQ_UNIT_BYTES).enumerate() {
            let qo = from + i as u64;
            self.txn_grow(qo);
            if self.txn_state(qo) != HalfState::Pending {
                continue;
            }
            let unit = CqUnit::decode(chunk.try_into().expect("chunks_exact yields 20 bytes"));
            if unit.is_empty() {
                continue;
            }
            let bytes = self.log.read_record(unit.physical_offset)?;
            let rec = record::decode_one(&bytes)
                .map_err(|source| StoreError::BadRecord { at: 0, source })?;
            self.txn.pending.insert(
                qo,
                Pending {
                    half_queue_offset: qo,
                    physical_offset: unit.physical_offset,
                    size: unit.size,
                    producer_group: rec
                        .property(keys::PRODUCER_GROUP)
                        .unwrap_or_default()
                        .to_owned(),
                    stored_ms: rec.store_timestamp_ms,
                    checks: 0,
                    next_check_ms: 0,
                },
            );
        }
        Ok(caught_up)
    }

    fn txn_grow(&mut self, qo: u64) {
        if qo < self.txn.base {
            return;
        }
        let need = (qo - self.txn.base + 1) as usize;
        if self.txn.decisions.len() < need {
            self.txn.decisions.resize(need, 0);
        }
    }

    fn txn_set(&mut self, qo: u64, d: Decision) {
        if qo < self.txn.base {
            return;
        }
        self.txn_grow(qo);
        self.txn.decisions[(qo - self.txn.base) as usize] = d as u8;
        self.txn.pending.remove(&qo);
    }

    /// Records a decision just appended (before the op queue is indexed again).
    pub fn txn_decided(&mut self, half_queue_offset: u64, d: Decision) {
        self.txn_set(half_queue_offset, d);
    }

    /// How the half at `half_queue_offset` stands (index first for an exact answer).
    pub fn txn_state(&self, half_queue_offset: u64) -> HalfState {
        if half_queue_offset < self.txn.base {
            return HalfState::Unknown;
        }
        match self
            .txn
            .decisions
            .get((half_queue_offset - self.txn.base) as usize)
        {
            None => HalfState::Unknown,
            Some(0) => HalfState::Pending,
            Some(&d) => Decision::try_from(d).map_or(HalfState::Unknown, HalfState::Decided),
        }
    }

    /// Pending halves stored before `stored_before_ms` whose next check is due at `now_ms`,
    /// oldest first, at most `max`.
    pub fn txn_due(&self, stored_before_ms: i64, now_ms: i64, max: usize) -> Vec<Pending> {
        self.txn
            .pending
            .values()
            .filter(|p| p.stored_ms <= stored_before_ms && p.next_check_ms <= now_ms)
            .take(max)
            .cloned()
            .collect()
    }

    /// Notes a check-back sent for a half.
    pub fn txn_checked(&mut self, half_queue_offset: u64, next_check_ms: i64) {
        if let Some(p) = self.txn.pending.get_mut(&half_queue_offset) {
            p.checks += 1;
            p.next_check_ms = next_check_ms;
        }
    }

    /// The pending halves (for status).
    pub fn txn_pending(&self) -> impl Iterator<Item = &Pending> {
        self.txn.pending.values()
    }

    /// A commit or discard whose copy the last crash cut off (its half's queue offset and
    /// the decision), until redone.
    pub fn txn_redo(&self) -> Option<(u64, Decision)> {
        self.txn.redo
    }

    /// The cut-off commit's copy is stored again.
    pub fn txn_redone(&mut self) {
        self.txn.redo = None;
    }

    /// The CommitLog offset of this shard's half at `half_queue_offset`, if stored.
    pub fn txn_half_offset(&self, half_queue_offset: u64) -> Result<Option<(u64, u32)>> {
        let Some(cq) = self.queue(HALF_TOPIC, u32::from(self.cfg.shard)) else {
            return Ok(None);
        };
        if half_queue_offset < cq.min_offset() || half_queue_offset >= cq.max_offset() {
            return Ok(None);
        }
        let u = cq.unit(half_queue_offset)?;
        Ok(Some((u.physical_offset, u.size)))
    }

    /// The CommitLog offset from which retention must keep segments for pending halves
    /// (`u64::MAX`: none pending).
    pub(super) fn txn_keep_from(&self) -> u64 {
        self.txn
            .pending
            .values()
            .map(|p| p.physical_offset)
            .min()
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use ringmq_wire::transaction::{Decision, Op, HALF_TOPIC, OP_TOPIC};
    use ringmq_wire::{properties, record};

    use super::super::fault_disk::FaultDisk;
    use super::super::tests::{encode, small_config};
    use super::super::Store;
    use super::HalfState;

    fn half(store: &mut Store<FaultDisk>, group: &str, now: i64) -> u64 {
        let mut props = Vec::new();
        properties::encode([("PGROUP", group)], &mut props).unwrap();
        let msg = record::Message {
            topic: HALF_TOPIC,
            queue_id: 0,
            flag: 0,
            sys_flag: record::sys_flag::TRANSACTION_PREPARED_TYPE,
            born_timestamp_ms: 1,
            born_host: "127.0.0.1:4000".parse().unwrap(),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"half",
            properties: &props,
        };
        let mut buf = Vec::new();
        record::encode(&msg, &mut buf).unwrap();
        store.append(&mut buf, now).unwrap().records[0].queue_offset
    }

    fn op(store: &mut Store<FaultDisk>, qo: u64, d: Decision, copy: bool) {
        let o = Op {
            half_queue_offset: qo,
            decision: d,
        };
        let mut buf = Vec::new();
        encode(OP_TOPIC, 0, &o.encode(), None, &mut buf);
        if copy {
            encode("Real", 0, b"half", None, &mut buf);
        }
        store.append(&mut buf, 5).unwrap();
    }

    #[test]
    fn state_is_rebuilt_from_the_queues_and_a_cut_off_commit_is_named() {
        let disk = FaultDisk::new();
        let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
        let a = half(&mut store, "g", 10);
        let b = half(&mut store, "g", 11);
        let c = half(&mut store, "h", 12);
        op(&mut store, a, Decision::Commit, true);
        op(&mut store, b, Decision::Rollback, false);
        store.txn_index(u64::MAX).unwrap();
        assert_eq!(store.txn_state(a), HalfState::Decided(Decision::Commit));
        assert_eq!(store.txn_state(b), HalfState::Decided(Decision::Rollback));
        assert_eq!(store.txn_state(c), HalfState::Pending);
        assert_eq!(store.txn_state(c + 1), HalfState::Unknown);
        let due = store.txn_due(100, 100, 10);
        assert_eq!(due.len(), 1);
        assert_eq!(
            (due[0].producer_group.as_str(), due[0].stored_ms),
            ("h", 12)
        );
        assert_eq!(store.txn_redo(), None);
        drop(store);

        // Reopened: the same state; a commit op that is the log's last record (its copy cut
        // off) is named for redo.
        let mut store = Store::open(disk.clone(), small_config("/s")).unwrap();
        assert_eq!(store.txn_state(a), HalfState::Decided(Decision::Commit));
        assert_eq!(store.txn_state(c), HalfState::Pending);
        assert_eq!(store.txn_redo(), None);
        op(&mut store, c, Decision::Commit, false);
        drop(store);
        let mut store = Store::open(disk, small_config("/s")).unwrap();
        assert_eq!(store.txn_state(c), HalfState::Decided(Decision::Commit));
        assert_eq!(store.txn_redo(), Some((c, Decision::Commit)));
        store.txn_redone();
        assert_eq!(store.txn_redo(), None);
        assert!(store.txn_due(i64::MAX, i64::MAX, 10).is_empty());
    }
}
