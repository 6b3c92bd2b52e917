//! The slave's side of a replication link: checks each shipment against its log end and
//! decides what to acknowledge. The shard task does the I/O and the appends.

/// A shipment header as the slave sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Push {
    /// Physical offset of the first shipped byte.
    pub offset: u64,
    /// Log offset the shipment covers up to (past a BLANK: the segment end).
    pub end: u64,
    /// The master's log end when it sent this (for lag).
    pub master_end: u64,
}

/// What to do with a shipment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnPush {
    /// Append the body at `offset` (it continues the slave's log).
    Append,
    /// A heartbeat (empty body): acknowledge the current end again.
    Heartbeat,
    /// The stream does not continue this log: drop the link and join again.
    Resync { reason: String },
}

/// Checks a shipment against the slave's log end.
pub fn on_push(push: &Push, body_len: usize, local_end: u64) -> OnPush {
    if body_len == 0 {
        return OnPush::Heartbeat;
    }
    if push.offset != local_end {
        return OnPush::Resync {
            reason: format!(
                "master shipped bytes at {}, this slave's log ends at {local_end}",
                push.offset
            ),
        };
    }
    if push.end < push.offset + body_len as u64 {
        return OnPush::Resync {
            reason: format!("shipment claims to end at {} before its bytes do", push.end),
        };
    }
    OnPush::Append
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes() {
        let p = Push {
            offset: 100,
            end: 200,
            master_end: 300,
        };
        assert_eq!(on_push(&p, 100, 100), OnPush::Append);
        assert_eq!(on_push(&p, 0, 100), OnPush::Heartbeat);
        assert!(matches!(on_push(&p, 100, 90), OnPush::Resync { .. }));
        assert!(matches!(on_push(&p, 150, 100), OnPush::Resync { .. }));
    }
}
