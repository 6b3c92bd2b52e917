//! POP consumption (RocketMQ 5): the broker hands a group's messages to any member, each
//! invisible to the others for an invisible time; the member acks each message, or the
//! message is delivered again once its invisible time ends (its reconsume count raised),
//! and dead-lettered after the group's retry limit.
//!
//! | code | request header | request body | response fields | response body |
//! |---|---|---|---|---|
//! | POP_MESSAGE | [`PopRequest`] | - | [`PopResponse`] | records |
//! | ACK_MESSAGE | [`AckRequest`] | - | [`Empty`](crate::codec::Empty) | - |
//! | BATCH_ACK_MESSAGE | [`BatchAckRequest`] | [`AckHandles`] | [`BatchAckResponse`] | - |
//! | CHANGE_MESSAGE_INVISIBLETIME | [`ChangeInvisibleTimeRequest`] | - | [`ChangeInvisibleTimeResponse`] | - |
//! | GET_POP_STATUS (admin) | [`GetPopStatusRequest`] | - | [`Empty`](crate::codec::Empty) | [`PopStatus`] |
//!
//! A popped message is named by its receipt handle, RocketMQ's `extraInfo` string
//! ([`ReceiptHandle`]): the checkpoint it belongs to (first queue offset of the pop, pop
//! time, invisible time, revive queue = the broker shard that keeps the checkpoint), whether
//! it came from the pop retry topic, the broker name, and its queue and queue offset.
//!
//! The broker keeps what is in flight as [`PopOp`] records of [`POP_STATE_TOPIC`] (queue =
//! shard id) in its own CommitLog, so a restart rebuilds it from the log.

use crate::error::{Result, WireError};

/// Topic of the broker's POP state records ([`PopOp`]); queue = shard id.
pub const POP_STATE_TOPIC: &str = "rmq_sys_pop_state";

/// The topic an unacked POP message goes to when its invisible time ends (RocketMQ 5's
/// `%RETRY%<group>_<topic>`, one queue): popped with the topic itself.
pub fn pop_retry_topic(group: &str, topic: &str) -> String {
    format!("{}{group}_{topic}", super::RETRY_TOPIC_PREFIX)
}

crate::wire_enum! {
    /// Where a group with no stored position starts popping a queue (RocketMQ's
    /// `ConsumeInitMode`).
    pub enum PopInitMode: u8 ("pop init mode") {
        /// The queue's first stored message.
        Min = 0 => "MIN",
        /// The queue's end: only messages stored from now on.
        Max = 1 => "MAX",
    }
}

crate::wire_struct! {
    /// POP_MESSAGE request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PopRequest {
        pub consumer_group: String,
        pub topic: String,
        /// A queue of the topic, or -1 for any queue this broker holds.
        pub queue_id: i32,
        /// At most this many messages (1..=32).
        pub max_messages: u32,
        /// How long the popped messages stay invisible to other pops, in ms.
        pub invisible_time_ms: u64,
        /// Wait up to this long for a message when none is ready (long polling), in ms.
        pub poll_time_ms: u32,
        pub filter_type: super::FilterType,
        pub expression: String,
        pub init_mode: PopInitMode,
        /// Orderly POP: a queue is handed to one pop at a time, its messages in offset order,
        /// acked in that order; when the invisible time ends, the unacked ones are delivered
        /// again from the same queue (their reconsume count raised), not from the retry
        /// topic.
        pub order: bool,
    }
}

crate::wire_struct! {
    /// POP_MESSAGE response fields (SUCCESS and PULL_NOT_FOUND).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct PopResponse {
        /// When the broker popped the messages (ms since the epoch).
        pub pop_time_ms: i64,
        pub invisible_time_ms: u64,
        /// The shard that keeps the checkpoints (RocketMQ's `reviveQid`).
        pub revive_shard: u16,
        /// Messages still ready in the popped queues after this pop.
        pub rest_num: u64,
    }
}

crate::wire_struct! {
    /// ACK_MESSAGE request header (RocketMQ's field names).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AckRequest {
        pub consumer_group: String,
        /// The topic the message was popped from (the pop retry topic for a redelivery).
        pub topic: String,
        pub queue_id: u32,
        /// The receipt handle ([`ReceiptHandle`]).
        pub extra_info: String,
        pub offset: u64,
    }
}

crate::wire_struct! {
    /// BATCH_ACK_MESSAGE request header: the handles in the body are of this group, topic
    /// and queue.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BatchAckRequest {
        pub consumer_group: String,
        pub topic: String,
        pub queue_id: u32,
    }
}

crate::wire_struct! {
    /// BATCH_ACK_MESSAGE request body: receipt handles.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AckHandles {
        pub handles: Vec<String>,
    }
}

crate::wire_struct! {
    /// BATCH_ACK_MESSAGE response fields.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct BatchAckResponse {
        /// Handles acked by this request or already acked.
        pub acked: u32,
        /// Handles whose invisible time had ended, or that name nothing in flight.
        pub refused: u32,
    }
}

crate::wire_struct! {
    /// CHANGE_MESSAGE_INVISIBLETIME request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ChangeInvisibleTimeRequest {
        pub consumer_group: String,
        pub topic: String,
        pub queue_id: u32,
        pub extra_info: String,
        pub offset: u64,
        /// The message stays invisible this long from now, in ms.
        pub invisible_time_ms: u64,
    }
}

crate::wire_struct! {
    /// CHANGE_MESSAGE_INVISIBLETIME response fields: the message's new checkpoint (its new
    /// receipt handle is made from them).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ChangeInvisibleTimeResponse {
        pub pop_time_ms: i64,
        pub invisible_time_ms: u64,
        pub revive_shard: u16,
    }
}

crate::wire_struct! {
    /// GET_POP_STATUS request header: one shard's POP counts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct GetPopStatusRequest {
        pub shard_id: u16,
    }
}

crate::wire_struct! {
    /// One group's POP counts on one shard: in flight now, and since the broker started.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct PopGroupStatus {
        pub group: String,
        /// Messages popped and neither acked nor delivered again yet.
        pub in_flight: u64,
        pub popped: u64,
        pub acked: u64,
        /// Messages stored again in the pop retry topic after their invisible time.
        pub revived: u64,
        pub dead_lettered: u64,
    }
}

crate::wire_struct! {
    /// GET_POP_STATUS response body.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct PopStatus {
        pub groups: Vec<PopGroupStatus>,
    }
}

crate::wire_enum! {
    /// What a [`PopOp`] record says.
    pub enum PopOpKind: u8 ("pop op") {
        /// Messages handed out: `offsets` are invisible until `pop_time_ms +
        /// invisible_time_ms`.
        Checkpoint = 1 => "CHECKPOINT",
        /// `offsets` of the checkpoint are acked.
        Ack = 2 => "ACK",
        /// `offsets` of the checkpoint were stored again in the retry or dead-letter topic.
        Revived = 3 => "REVIVED",
        /// `offsets` of the checkpoint moved to a new checkpoint (an invisible-time change):
        /// the old receipt handle no longer acks them.
        Moved = 4 => "MOVED",
        /// Orderly POP: the invisible time of `offsets` ended; the group's position in the
        /// queue goes back to the first of them, to be delivered again with `counts`.
        Rewound = 5 => "REWOUND",
        /// The group's position in the queue is `start_offset`: set where the group first
        /// pops the queue (by its init mode), or moved past messages its filter skips or
        /// retention removed. Written before any later record of the queue, so a log
        /// that keeps a later message keeps the position too.
        Position = 6 => "POSITION",
        /// A checkpoint made by an invisible-time change: like CHECKPOINT, and its
        /// `offsets` leave whatever other checkpoint of the queue held them open (so a
        /// torn write that kept it and lost the MOVED record after it still moves them).
        Changed = 7 => "CHANGED",
    }
}

crate::wire_struct! {
    /// One POP state record (the body of a [`POP_STATE_TOPIC`] record). A checkpoint is
    /// named by `(group, topic, queue_id, start_offset, pop_time_ms)`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PopOp {
        pub kind: PopOpKind,
        pub group: String,
        pub topic: String,
        pub queue_id: u32,
        pub start_offset: u64,
        pub pop_time_ms: i64,
        pub invisible_time_ms: u64,
        pub offsets: Vec<u64>,
        /// Orderly POP: the checkpoint (or the rewind) holds a queue exclusively.
        pub order: bool,
        /// Orderly POP: each offset's reconsume count (empty: all 0). In a rewind,
        /// [`REWOUND_ACKED`] marks an offset acked before it: passed over, not delivered
        /// again.
        pub counts: Vec<u32>,
    }
}

/// The count of a rewind's offset that was acked before the rewind (see [`PopOp::counts`]).
pub const REWOUND_ACKED: u32 = u32::MAX;

/// `retry` field of a receipt handle: the message came from the topic itself.
pub const HANDLE_NORMAL: &str = "0";
/// `retry` field of a receipt handle: the message came from the pop retry topic.
pub const HANDLE_RETRY: &str = "1";

/// A parsed receipt handle: RocketMQ's `extraInfo`, fields separated by one space:
/// `ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptHandle {
    /// First queue offset of the pop (names the checkpoint).
    pub start_offset: u64,
    pub pop_time_ms: i64,
    pub invisible_time_ms: u64,
    /// The broker shard that keeps the checkpoint.
    pub revive_shard: u16,
    /// Popped from the pop retry topic.
    pub retry: bool,
    pub broker_name: String,
    pub queue_id: u32,
    pub queue_offset: u64,
}

impl ReceiptHandle {
    /// When the message becomes visible again (ms since the epoch).
    pub fn deadline_ms(&self) -> i64 {
        self.pop_time_ms
            .saturating_add(i64::try_from(self.invisible_time_ms).unwrap_or(i64::MAX))
    }

    /// Parses `extra_info`.
    pub fn parse(extra_info: &str) -> Result<Self> {
        let bad = |expected: &'static str| WireError::BadField {
            field: "extraInfo",
            value: extra_info
                .chars()
                .take(crate::error::BAD_VALUE_CHARS_MAX)
                .collect(),
            expected,
        };
        let parts: Vec<&str> = extra_info.split(' ').collect();
        if parts.len() < 8 {
            return Err(bad("a receipt handle of 8 space-separated fields"));
        }
        let num = |i: usize, expected: &'static str| -> Result<i64> {
            parts[i].parse::<i64>().map_err(|_| bad(expected))
        };
        let retry = match parts[4] {
            HANDLE_NORMAL => false,
            HANDLE_RETRY | "2" => true,
            _ => return Err(bad("a receipt handle whose 5th field (retry) is 0, 1 or 2")),
        };
        if parts[5].is_empty() {
            return Err(bad("a receipt handle naming its broker"));
        }
        let unsigned = |i: usize, expected: &'static str| -> Result<u64> {
            u64::try_from(num(i, expected)?).map_err(|_| bad(expected))
        };
        Ok(ReceiptHandle {
            start_offset: unsigned(0, "a receipt handle whose 1st field is a queue offset")?,
            pop_time_ms: num(1, "a receipt handle whose 2nd field is the pop time")?,
            invisible_time_ms: unsigned(
                2,
                "a receipt handle whose 3rd field is the invisible time",
            )?,
            revive_shard: u16::try_from(num(3, "a receipt handle whose 4th field is a shard")?)
                .map_err(|_| bad("a receipt handle whose 4th field is a shard"))?,
            retry,
            broker_name: parts[5].to_string(),
            queue_id: u32::try_from(num(6, "a receipt handle whose 7th field is a queue id")?)
                .map_err(|_| bad("a receipt handle whose 7th field is a queue id"))?,
            queue_offset: unsigned(7, "a receipt handle whose 8th field is a queue offset")?,
        })
    }
}

impl std::fmt::Display for ReceiptHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {} {}",
            self.start_offset,
            self.pop_time_ms,
            self.invisible_time_ms,
            self.revive_shard,
            if self.retry {
                HANDLE_RETRY
            } else {
                HANDLE_NORMAL
            },
            self.broker_name,
            self.queue_id,
            self.queue_offset
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn handles_round_trip_and_bad_ones_are_named() {
        let h = ReceiptHandle {
            start_offset: 7,
            pop_time_ms: 1_700_000_000_000,
            invisible_time_ms: 30_000,
            revive_shard: 1,
            retry: true,
            broker_name: "broker-a".into(),
            queue_id: 3,
            queue_offset: 9,
        };
        let s = h.to_string();
        assert_eq!(s, "7 1700000000000 30000 1 1 broker-a 3 9");
        assert_eq!(ReceiptHandle::parse(&s).unwrap(), h);
        assert_eq!(h.deadline_ms(), 1_700_000_030_000);
        for bad in [
            "",
            "1 2 3",
            "x 2 3 0 0 b 0 0",
            "1 2 3 0 7 b 0 0",
            "1 2 3 0 0  0 0",
        ] {
            let e = ReceiptHandle::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("extraInfo") && e.contains("receipt handle"),
                "{e}"
            );
        }
    }

    #[test]
    fn ops_round_trip() {
        let op = PopOp {
            kind: PopOpKind::Checkpoint,
            group: "g".into(),
            topic: "t".into(),
            queue_id: 2,
            start_offset: 10,
            pop_time_ms: 5,
            invisible_time_ms: 60_000,
            offsets: vec![10, 12],
            order: true,
            counts: vec![0, 2],
        };
        assert_eq!(PopOp::decode(&op.to_vec().unwrap()).unwrap(), op);
        assert_eq!(pop_retry_topic("g", "t"), "%RETRY%g_t");
    }
}
