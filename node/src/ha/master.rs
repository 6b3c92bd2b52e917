//! The master's view of its slaves on one shard: acknowledged offsets, and the SYNC_MASTER
//! decision for a send whose record ends at `end`.

/// One connected slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub id: u64,
    /// The slave's log end, as it last acknowledged.
    pub acked: u64,
    pub last_ack_ms: i64,
    /// When the slave last had everything the master had.
    pub caught_up_ms: i64,
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
}

impl Replicas {
    /// A slave connected, starting at `start`.
    pub fn add(&mut self, start: u64, now_ms: i64) -> u64 {
        self.next_id += 1;
        self.list.push(Replica {
            id: self.next_id,
            acked: start,
            last_ack_ms: now_ms,
            caught_up_ms: now_ms,
        });
        self.next_id
    }

    pub fn remove(&mut self, id: u64) {
        self.list.retain(|r| r.id != id);
    }

    /// Records an acknowledgement; offsets never move back.
    pub fn ack(&mut self, id: u64, offset: u64, log_end: u64, now_ms: i64) {
        if let Some(r) = self.list.iter_mut().find(|r| r.id == id) {
            r.acked = r.acked.max(offset);
            r.last_ack_ms = now_ms;
            if r.acked >= log_end {
                r.caught_up_ms = now_ms;
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
        let id = r.add(0, 0);
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
    fn joins() {
        assert_eq!(join(0, 0, 0, 100), Join::StartAt { start: 0 });
        assert_eq!(join(0, 0, 4096, 9000), Join::StartAt { start: 4096 });
        assert_eq!(join(0, 50, 0, 100), Join::StartAt { start: 50 });
        assert_eq!(join(0, 150, 0, 100), Join::TruncateTo { to: 100 });
        assert!(matches!(join(0, 50, 4096, 9000), Join::Refuse { .. }));
    }
}
