//! Transactional messages on the log: the system topics and the bytes the broker keeps for
//! them. Pure: the broker's transaction state lives in `node/src/store/txn.rs`.
//!
//! A send with `TRAN_MSG=true` and the prepared sysflag is a *half* message: it is stored
//! under [`HALF_TOPIC`], queue = the shard's id, with `REAL_TOPIC`, `REAL_QID` and the
//! producer group ([`keys::PRODUCER_GROUP`](crate::properties::keys::PRODUCER_GROUP)) added,
//! and no consumer sees it. Each decision about a half is an [`Op`] record under
//! [`OP_TOPIC`] (same queue), whose ConsumeQueue unit carries the packed decision and half
//! offset instead of a tag hash ([`op_tag`]), so decisions are indexed from the ConsumeQueue
//! alone. A commit appends the op record and then, in the same write, the message in its
//! real topic: after a crash the log is a prefix, so a commit op that is the log's last
//! record lost its copy, and recovery stores it again. A half checked `transactionCheckMax`
//! times without an answer is copied to [`CHECK_MAX_TOPIC`] with a [`Decision::Discarded`] op.

use crate::error::{Result, WireError};

/// Topic of half messages (RocketMQ's name); queue = shard id.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Topic of decisions about half messages (RocketMQ's name); queue = shard id.
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Where halves nobody decided go after their last check-back (RocketMQ's name); readable.
pub const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";

/// True for the topics only the broker writes.
pub fn is_transaction_topic(topic: &str) -> bool {
    topic == HALF_TOPIC || topic == OP_TOPIC
}

crate::wire_enum! {
    /// What was decided about a half message.
    pub enum Decision: u8 ("transaction decision") {
        Commit = 1 => "COMMIT",
        Rollback = 2 => "ROLLBACK",
        /// Checked `transactionCheckMax` times without an answer: copied to
        /// [`CHECK_MAX_TOPIC`], never delivered.
        Discarded = 3 => "DISCARDED",
    }
}

/// Bytes of an [`Op`] body.
pub const OP_BYTES: usize = 9;
/// Bits of an op's ConsumeQueue tag that hold the half's queue offset.
pub const OP_OFFSET_BITS: u32 = 56;
const OP_OFFSET_MASK: i64 = (1 << OP_OFFSET_BITS) - 1;

/// A decision about one half message. Body of an [`OP_TOPIC`] record, 9 bytes, big-endian:
///
/// | offset | field               | bytes |
/// |--------|---------------------|-------|
/// | 0      | `half_queue_offset` | 8     |
/// | 8      | `decision`          | 1     |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub half_queue_offset: u64,
    pub decision: Decision,
}

impl Op {
    pub fn encode(&self) -> [u8; OP_BYTES] {
        let mut b = [0u8; OP_BYTES];
        b[..8].copy_from_slice(&self.half_queue_offset.to_be_bytes());
        b[8] = self.decision as u8;
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        if b.len() != OP_BYTES {
            return Err(WireError::Invalid {
                what: "transaction op",
                detail: "body is not 9 bytes",
            });
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        Ok(Op {
            half_queue_offset: u64::from_be_bytes(a),
            decision: Decision::try_from(b[8])?,
        })
    }
}

/// The ConsumeQueue tag of an op record: the decision in the top byte, the half's queue
/// offset in the low 56 bits. A body that is no op gets 0 (no decision).
pub fn op_tag(body: &[u8]) -> i64 {
    match Op::decode(body) {
        Ok(op) => {
            (i64::from(op.decision as u8) << OP_OFFSET_BITS)
                | (op.half_queue_offset as i64 & OP_OFFSET_MASK)
        }
        Err(_) => 0,
    }
}

/// `(half queue offset, decision)` of an op's ConsumeQueue tag; `None` for a tag that holds
/// no decision.
pub fn unpack_op_tag(tag: i64) -> Option<(u64, Decision)> {
    let d = Decision::try_from(((tag >> OP_OFFSET_BITS) & 0xFF) as u8).ok()?;
    Some(((tag & OP_OFFSET_MASK) as u64, d))
}

/// True if a record's sysflag and properties make it a half message (`TRAN_MSG=true` and
/// the prepared type).
pub fn is_half(sys_flag: u32, tran_msg: Option<&str>) -> bool {
    sys_flag & crate::record::sys_flag::TRANSACTION_MASK
        == crate::record::sys_flag::TRANSACTION_PREPARED_TYPE
        && tran_msg.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_round_trips_and_packs() {
        let op = Op {
            half_queue_offset: 41,
            decision: Decision::Commit,
        };
        assert_eq!(Op::decode(&op.encode()).unwrap(), op);
        assert_eq!(
            unpack_op_tag(op_tag(&op.encode())),
            Some((41, Decision::Commit))
        );
        assert_eq!(op_tag(b"short"), 0);
        assert_eq!(unpack_op_tag(0), None);
        let mut bad = op.encode();
        bad[8] = 9;
        assert!(Op::decode(&bad).is_err());
    }

    #[test]
    fn half_needs_both_marks() {
        use crate::record::sys_flag::*;
        assert!(is_half(TRANSACTION_PREPARED_TYPE, Some("true")));
        assert!(!is_half(TRANSACTION_PREPARED_TYPE, None));
        assert!(!is_half(0, Some("true")));
        assert!(!is_half(TRANSACTION_COMMIT_TYPE, Some("true")));
    }
}
