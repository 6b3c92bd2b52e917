//! The master's view of its slaves on one shard: acknowledged offsets, the SYNC_MASTER
//! decision for a send whose record ends at `end`, what the SyncStateSet has confirmed
//! (controller mode), and where a joining slave starts.

use crate::store::epoch::{consistent_point, span_at, EpochEntry, EpochSpan};

/// Most slaves (by broker id) whose last acknowledgement is remembered after their link
/// closed.
pub const GONE_REPLICAS_MAX: usize = 64;

/// One connected slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The link's id on this master.
    pub id: u64,
    /// The slave's broker id (from its HA_SUBSCRIBE).
    pub broker_id: u64,
    /// The slave's log end, as it last acknowledged.
    pub acked: u64,
    pub last_ack_ms: i64,
    /// Since when the slave has been behind, for lag figures: when it last had everything
    /// the master had, or when this link connected if it has not had everything since.
    pub caught_up_ms: i64,
    /// When the slave last had everything the master had, on this link or (for a slave that
    /// reconnected) on its previous one; `None`: not since this master started. Only this
    /// says whether a slave is in sync: a slave that connects far behind is not.
    pub had_all_ms: Option<i64>,
}

/// What a SYNC_MASTER send should wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncDecision {
    /// A slave already has the record.
    Acked,
    /// Wait for an acknowledgement (bounded by `syncFlushTimeout`).
    Wait,
    /// No slave, or every slave is more than `haMaxGapNotInSync` behind: answer
    /// SLAVE_NOT_AVAILABLE (the record stays on the master).
    NotAvailable,
}

/// The slaves of one shard.
#[derive(Debug, Default)]
pub struct Replicas {
    list: Vec<Replica>,
    next_id: u64,
    /// The last state of slaves whose link closed, one per broker id, at most
    /// [`GONE_REPLICAS_MAX`] (the oldest acknowledgement goes first).
    gone: Vec<Replica>,
}

impl Replicas {
    /// Slave `broker_id` connected, starting at `start` while the master's log ends at
    /// `log_end`; returns the link's id.
    pub fn add(&mut self, broker_id: u64, start: u64, log_end: u64, now_ms: i64) -> u64 {
        self.next_id += 1;
        let had_all_ms = if start >= log_end {
            Some(now_ms)
        } else {
            self.member(broker_id).and_then(|r| r.had_all_ms)
        };
        self.list.push(Replica {
            id: self.next_id,
            broker_id,
            acked: start,
            last_ack_ms: now_ms,
            caught_up_ms: now_ms,
            had_all_ms,
        });
        self.next_id
    }

    /// A link closed; its slave's last acknowledgement is remembered (see
    /// [`Self::confirm_offset`]).
    pub fn remove(&mut self, id: u64) {
        let Some(i) = self.list.iter().position(|r| r.id == id) else {
            return;
        };
        let r = self.list.remove(i);
        self.gone.retain(|g| g.broker_id != r.broker_id);
        if self.gone.len() >= GONE_REPLICAS_MAX {
            if let Some(oldest) = (0..self.gone.len()).min_by_key(|&k| self.gone[k].last_ack_ms) {
                self.gone.remove(oldest);
            }
        }
        self.gone.push(r);
    }

    /// The newest state of slave `broker_id`: its live link (the latest one if it has
    /// several), else what it had when its last link closed.
    pub fn member(&self, broker_id: u64) -> Option<&Replica> {
        self.list
            .iter()
            .filter(|r| r.broker_id == broker_id)
            .max_by_key(|r| r.id)
            .or_else(|| self.gone.iter().find(|r| r.broker_id == broker_id))
    }

    /// Whether slave `broker_id` has a live link.
    pub fn is_linked(&self, broker_id: u64) -> bool {
        self.list.iter().any(|r| r.broker_id == broker_id)
    }

    /// RocketMQ's confirmOffset for a SyncStateSet whose slaves are `members` (broker ids;
    /// the master itself is not listed): the smallest of `own_end` and each member's
    /// acknowledged offset. A member without a live link counts with the last offset it
    /// acknowledged on this master (it holds at least that much, as far as acknowledgements
    /// tell); a member never heard of since this master started makes it `None`: the cap
    /// must stay where it was. The value can be below the current cap (a slave that
    /// reconnects after losing unsynced bytes acknowledges less): the caller never moves a
    /// cap back (see `Shard::advance_confirm`).
    pub fn confirm_offset(&self, members: &[u64], own_end: u64) -> Option<u64> {
        let mut confirm = own_end;
        for &m in members {
            confirm = confirm.min(self.member(m)?.acked);
        }
        Some(confirm)
    }

    /// allAckInSyncStateSet: every one of `members` (live link or not) has acknowledged
    /// through `end`. True for no members.
    pub fn all_acked(&self, members: &[u64], end: u64) -> bool {
        members
            .iter()
            .all(|&m| self.member(m).is_some_and(|r| r.acked >= end))
    }

    /// When slave `broker_id` last had everything this master had (for
    /// `haMaxTimeSlaveNotCatchup`); `None` if it has not since this master started.
    pub fn had_all_ms(&self, broker_id: u64) -> Option<i64> {
        self.member(broker_id).and_then(|r| r.had_all_ms)
    }

    /// Records an acknowledgement; offsets never move back.
    pub fn ack(&mut self, id: u64, offset: u64, log_end: u64, now_ms: i64) {
        if let Some(r) = self.list.iter_mut().find(|r| r.id == id) {
            r.acked = r.acked.max(offset);
            r.last_ack_ms = now_ms;
            if r.acked >= log_end {
                r.caught_up_ms = now_ms;
                r.had_all_ms = Some(now_ms);
            }
        }
    }

    /// The highest offset any slave has acknowledged.
    pub fn max_acked(&self) -> Option<u64> {
        self.list.iter().map(|r| r.acked).max()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The slaves, in the order they connected.
    pub fn iter(&self) -> impl Iterator<Item = &Replica> {
        self.list.iter()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// SYNC_MASTER: may a send ending at `end` be acknowledged, must it wait, or is no slave
    /// close enough to count.
    pub fn sync_decision(&self, end: u64, log_end: u64, max_gap: u64) -> SyncDecision {
        let Some(best) = self.max_acked() else {
            return SyncDecision::NotAvailable;
        };
        if best >= end {
            SyncDecision::Acked
        } else if log_end.saturating_sub(best) > max_gap {
            SyncDecision::NotAvailable
        } else {
            SyncDecision::Wait
        }
    }

    /// Replication lag of the best slave: (bytes behind, milliseconds since it was caught up).
    pub fn lag(&self, log_end: u64, now_ms: i64) -> Option<(u64, i64)> {
        self.list.iter().max_by_key(|r| r.acked).map(|r| {
            let bytes = log_end.saturating_sub(r.acked);
            let ms = if bytes == 0 {
                0
            } else {
                (now_ms - r.caught_up_ms).max(0)
            };
            (bytes, ms)
        })
    }
}

/// Where a joining slave starts, and whether it must first cut its log back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Join {
    /// Stream from `start` (the slave's end, or the master's oldest retained byte for an
    /// empty slave).
    StartAt { start: u64 },
    /// The slave is ahead of the master (an unclean master restart): truncate to `to`, then
    /// stream from there.
    TruncateTo { to: u64 },
    /// The slave holds a range the master no longer has: it cannot join without being wiped.
    Refuse { reason: String },
}

/// [`join`] for logs with epochs (controller mode): a slave whose log goes past the last
/// point where its epochs agree with the master's ([`consistent_point`]) is told to
/// truncate to it first, whether it is ahead of the master or not (an old master rejoining
/// with a tail the new master never had). Without epochs on either side this is [`join`].
pub fn join_by_epochs(
    slave_min: u64,
    slave_end: u64,
    slave_epochs: &[EpochEntry],
    master_min: u64,
    master_end: u64,
    master_epochs: &[EpochEntry],
) -> Join {
    if slave_epochs.is_empty() && master_epochs.is_empty() {
        return join(slave_min, slave_end, master_min, master_end);
    }
    let point = consistent_point(slave_epochs, slave_end, master_epochs, master_end)
        .unwrap_or(slave_min)
        .max(slave_min);
    if crate::planted::is(crate::planted::Bug::TruncateTooLittle) {
        // The planted bug: cut back only as far as the master's end, keeping a diverged
        // tail below it.
        let point = point.max(slave_end.min(master_end));
        if slave_end <= point {
            return join(slave_min, slave_end, master_min, master_end);
        }
    }
    if slave_end <= point {
        return join(slave_min, slave_end, master_min, master_end);
    }
    if point < master_min {
        return Join::Refuse {
            reason: format!(
                "the slave's log agrees with the master's only up to {point}, but the master kept only {master_min}..{master_end}: wipe the slave's store to let it catch up from the master's oldest segment"
            ),
        };
    }
    Join::TruncateTo { to: point }
}

/// The epoch of the bytes a transfer from `cursor` carries, and where it must stop: the log
/// end or the next epoch's start, whichever is first (a transfer never crosses an epoch
/// boundary).
pub fn transfer_span(epochs: &[EpochEntry], cursor: u64, end: u64) -> (EpochSpan, u64) {
    let span = span_at(epochs, cursor);
    let stop = span.next_start.map_or(end, |n| n.min(end));
    (span, stop)
}

/// Decides how a slave whose log is `[slave_min, slave_end)` joins a master holding
/// `[master_min, master_end)`.
pub fn join(slave_min: u64, slave_end: u64, master_min: u64, master_end: u64) -> Join {
    if slave_end > master_end {
        return Join::TruncateTo { to: master_end };
    }
    let slave_empty = slave_end == slave_min;
    if slave_empty {
        return Join::StartAt {
            start: master_min.max(slave_end),
        };
    }
    if slave_end < master_min {
        return Join::Refuse {
            reason: format!(
                "the slave's log ends at {slave_end} but the master kept only {master_min}..{master_end}: wipe the slave's store to let it catch up from the master's oldest segment"
            ),
        };
    }
    Join::StartAt { start: slave_end }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_decisions() {
        let mut r = Replicas::default();
        assert_eq!(r.sync_decision(10, 10, 100), SyncDecision::NotAvailable);
        let id = r.add(1, 0, 10, 0);
        assert_eq!(r.sync_decision(10, 10, 100), SyncDecision::Wait);
        r.ack(id, 10, 10, 5);
        assert_eq!(r.sync_decision(10, 10, 100), SyncDecision::Acked);
        r.ack(id, 3, 10, 6);
        assert_eq!(r.max_acked(), Some(10), "acks never move back");
        assert_eq!(
            r.sync_decision(500, 500, 100),
            SyncDecision::NotAvailable,
            "too far behind"
        );
        assert_eq!(r.lag(500, 1000), Some((490, 994)));
        r.remove(id);
        assert!(r.is_empty());
    }

    #[test]
    fn confirm_offsets() {
        let mut r = Replicas::default();
        // No slave in the set: the master's own end.
        assert_eq!(r.confirm_offset(&[], 500), Some(500));
        assert!(r.all_acked(&[], 500));
        // A member never heard of keeps the cap where it was.
        assert_eq!(r.confirm_offset(&[1], 500), None);
        assert!(!r.all_acked(&[1], 10));
        assert_eq!(r.had_all_ms(1), None);
        let a = r.add(1, 100, 500, 0);
        let b = r.add(2, 300, 500, 0);
        assert_eq!(r.had_all_ms(1), None, "connected behind: not in sync");
        r.ack(a, 200, 500, 10);
        assert_eq!(r.confirm_offset(&[1, 2], 500), Some(200));
        assert_eq!(r.confirm_offset(&[2], 500), Some(300));
        assert_eq!(
            r.confirm_offset(&[1, 2], 150),
            Some(150),
            "the master's own end"
        );
        assert!(r.all_acked(&[1, 2], 200));
        assert!(!r.all_acked(&[1, 2], 201));
        r.ack(b, 500, 500, 20);
        assert_eq!(r.had_all_ms(2), Some(20));
        r.ack(a, 500, 500, 25);
        // Slave 1's link closes: it counts with what it acknowledged last.
        r.remove(a);
        assert!(!r.is_linked(1));
        assert_eq!(r.confirm_offset(&[1, 2], 500), Some(500));
        assert_eq!(r.had_all_ms(1), Some(25));
        // It reconnects from 180 (lost unsynced bytes): the live link counts, and it was
        // last in sync when its previous link was.
        let a2 = r.add(1, 180, 500, 30);
        assert_eq!(r.confirm_offset(&[1, 2], 500), Some(180));
        assert_eq!(r.had_all_ms(1), Some(25));
        r.ack(a2, 500, 500, 40);
        assert_eq!(r.confirm_offset(&[1, 2], 600), Some(500));
        assert!(r.all_acked(&[1, 2], 500));
    }

    #[test]
    fn gone_replicas_are_bounded() {
        let mut r = Replicas::default();
        for b in 0..(GONE_REPLICAS_MAX as u64 + 10) {
            let id = r.add(b, b, b, b as i64);
            r.remove(id);
        }
        assert_eq!(r.gone.len(), GONE_REPLICAS_MAX);
        assert!(r.member(0).is_none(), "the oldest went");
        assert!(r.member(GONE_REPLICAS_MAX as u64 + 9).is_some());
    }

    fn e(epoch: u32, start_offset: u64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn joins_by_epochs() {
        // No epochs anywhere: exactly `join`.
        for (se, mm, me) in [(0, 0, 100), (50, 0, 100), (150, 0, 100), (50, 4096, 9000)] {
            assert_eq!(join_by_epochs(0, se, &[], mm, me, &[]), join(0, se, mm, me));
        }
        let new_master = [e(1, 0), e(2, 600)];
        // The old master of epoch 1 wrote to 1000; the new master got 600 of it, and is at
        // 900 now: it is behind the new master's end, yet must cut its tail.
        assert_eq!(
            join_by_epochs(0, 1000, &[e(1, 0)], 0, 900, &new_master),
            Join::TruncateTo { to: 600 }
        );
        assert_eq!(
            join_by_epochs(0, 800, &[e(1, 0)], 0, 900, &new_master),
            Join::TruncateTo { to: 600 }
        );
        // A slave with part of epoch 1 only continues from its end.
        assert_eq!(
            join_by_epochs(0, 400, &[e(1, 0)], 0, 900, &new_master),
            Join::StartAt { start: 400 }
        );
        // A slave in sync with epoch 2.
        assert_eq!(
            join_by_epochs(0, 700, &new_master, 0, 900, &new_master),
            Join::StartAt { start: 700 }
        );
        // A slave from before epochs whose log goes past the master's first epoch.
        assert_eq!(
            join_by_epochs(0, 700, &[], 0, 900, &[e(1, 500)]),
            Join::TruncateTo { to: 500 }
        );
        // An empty slave.
        assert_eq!(
            join_by_epochs(0, 0, &[], 4096, 9000, &new_master),
            Join::StartAt { start: 4096 }
        );
        // The point lies below what the master kept.
        assert!(matches!(
            join_by_epochs(0, 1000, &[e(1, 0)], 4096, 9000, &[e(1, 0), e(2, 600)]),
            Join::Refuse { .. }
        ));
        // Shard 1: offsets from its base; nothing in common means back to the base.
        let base = crate::store::commitlog::shard_base(1);
        assert_eq!(
            join_by_epochs(
                base,
                base + 50,
                &[e(3, base)],
                base,
                base + 90,
                &[e(1, base)]
            ),
            Join::TruncateTo { to: base }
        );
    }

    #[test]
    fn transfers_stop_at_epoch_boundaries() {
        let epochs = [e(1, 100), e(2, 400)];
        let (span, stop) = transfer_span(&epochs, 0, 1000);
        assert_eq!((span.epoch, stop), (0, 100));
        let (span, stop) = transfer_span(&epochs, 150, 1000);
        assert_eq!((span.epoch, span.start_offset, stop), (1, 100, 400));
        let (span, stop) = transfer_span(&epochs, 150, 300);
        assert_eq!((span.epoch, stop), (1, 300));
        let (span, stop) = transfer_span(&epochs, 400, 1000);
        assert_eq!((span.epoch, span.start_offset, stop), (2, 400, 1000));
        let (span, stop) = transfer_span(&[], 7, 1000);
        assert_eq!((span.epoch, span.start_offset, stop), (0, 0, 1000));
    }

    #[test]
    fn joins() {
        assert_eq!(join(0, 0, 0, 100), Join::StartAt { start: 0 });
        assert_eq!(join(0, 0, 4096, 9000), Join::StartAt { start: 4096 });
        assert_eq!(join(0, 50, 0, 100), Join::StartAt { start: 50 });
        assert_eq!(join(0, 150, 0, 100), Join::TruncateTo { to: 100 });
        assert!(matches!(join(0, 50, 4096, 9000), Join::Refuse { .. }));
    }
}
