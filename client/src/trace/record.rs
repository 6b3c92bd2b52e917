//! Trace records in RocketMQ's text encoding (`TraceDataEncoder`), so RocketMQ's tools read
//! ringmq's traces and ringmq reads traces written by RocketMQ's clients.
//!
//! A trace message's body is a sequence of records, each ended by [`FIELD_SPLITOR`]
//! (char 2); a record's fields are separated by [`CONTENT_SPLITOR`] (char 1), its first
//! field naming the type:
//!
//! | type | fields after the type |
//! |---|---|
//! | `Pub` | timestamp, region, group, topic, msgId, tags, keys, storeHost, bodyLength, costTime, msgType, offsetMsgId, success |
//! | `SubBefore` | timestamp, region, group, requestId, msgId, retryTimes, keys |
//! | `SubAfter` | requestId, msgId, costTime, success, keys, contextCode, timestamp, group |
//! | `EndTransaction` | timestamp, region, group, topic, msgId, tags, keys, storeHost, msgType, transactionId, transactionState, fromTransactionCheck |
//! | `Recall` | timestamp, region, group, topic, msgId, success |
//!
//! `msgId` is the traced message's unique key (`UNIQ_KEY`, RocketMQ's client message id);
//! `offsetMsgId` the store host and physical offset id. Absent tags and keys are written
//! `null`, as Java's `StringBuilder` writes them. Decoding skips records it cannot read
//! instead of failing the whole body (a trace is read by people, not acted upon).

use std::fmt::Write as _;

/// Separates the fields of a record (`TraceConstants.CONTENT_SPLITOR`).
pub const CONTENT_SPLITOR: char = '\u{1}';
/// Ends a record (`TraceConstants.FIELD_SPLITOR`).
pub const FIELD_SPLITOR: char = '\u{2}';
/// The region written when the broker names none (RocketMQ's broker default `regionId`).
pub const DEFAULT_REGION: &str = "DefaultRegion";

/// RocketMQ's `MessageType`, by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    Normal,
    TransactionHalf,
    TransactionCommit,
    Delay,
    Order,
}

impl MessageType {
    fn ordinal(self) -> u8 {
        self as u8
    }

    fn from_ordinal(n: u8) -> Option<Self> {
        Some(match n {
            0 => MessageType::Normal,
            1 => MessageType::TransactionHalf,
            2 => MessageType::TransactionCommit,
            3 => MessageType::Delay,
            4 => MessageType::Order,
            _ => return None,
        })
    }
}

/// A message was sent (RocketMQ `TraceType.Pub`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubTrace {
    pub timestamp_ms: i64,
    pub region: String,
    pub group: String,
    pub topic: String,
    /// The unique key (client message id).
    pub msg_id: String,
    pub tags: String,
    /// Keys, blank-separated.
    pub keys: String,
    /// The broker address the message was sent to.
    pub store_host: String,
    pub body_bytes: u32,
    pub cost_ms: i64,
    pub msg_type: MessageType,
    /// Store host and physical offset id.
    pub offset_msg_id: String,
    pub success: bool,
}

/// A consumer is about to hand a message to its listener (`TraceType.SubBefore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubBeforeTrace {
    pub timestamp_ms: i64,
    pub region: String,
    pub group: String,
    /// Pairs this record with its [`SubAfterTrace`].
    pub request_id: String,
    pub msg_id: String,
    /// The message's reconsume times (0 on first delivery).
    pub retry_times: i32,
    pub keys: String,
}

/// The listener returned (`TraceType.SubAfter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAfterTrace {
    pub request_id: String,
    pub msg_id: String,
    /// The listener call's time divided by its batch size.
    pub cost_ms: i64,
    pub success: bool,
    pub keys: String,
    /// RocketMQ's `ConsumeReturnType` ordinal: 0 success, 1 timeout, 2 exception (panic),
    /// 3 returned null, 4 failed (asked to retry).
    pub context_code: i32,
    /// When the listener returned (absent in records of old RocketMQ clients).
    pub timestamp_ms: Option<i64>,
    pub group: Option<String>,
}

/// A transaction producer decided a half message (`TraceType.EndTransaction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTransactionTrace {
    pub timestamp_ms: i64,
    pub region: String,
    pub group: String,
    pub topic: String,
    pub msg_id: String,
    pub tags: String,
    pub keys: String,
    pub store_host: String,
    pub msg_type: MessageType,
    pub transaction_id: String,
    /// `COMMIT_MESSAGE`, `ROLLBACK_MESSAGE` or `UNKNOW`.
    pub state: String,
    pub from_check: bool,
}

/// A scheduled message was recalled (`TraceType.Recall`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallTrace {
    pub timestamp_ms: i64,
    pub region: String,
    pub group: String,
    pub topic: String,
    pub msg_id: String,
    pub success: bool,
}

/// One trace record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceRecord {
    Pub(PubTrace),
    SubBefore(SubBeforeTrace),
    SubAfter(SubAfterTrace),
    EndTransaction(EndTransactionTrace),
    Recall(RecallTrace),
}

impl TraceRecord {
    /// The traced message's unique key.
    pub fn msg_id(&self) -> &str {
        match self {
            TraceRecord::Pub(r) => &r.msg_id,
            TraceRecord::SubBefore(r) => &r.msg_id,
            TraceRecord::SubAfter(r) => &r.msg_id,
            TraceRecord::EndTransaction(r) => &r.msg_id,
            TraceRecord::Recall(r) => &r.msg_id,
        }
    }

    /// The traced message's keys (blank-separated; empty when none).
    pub fn keys(&self) -> &str {
        match self {
            TraceRecord::Pub(r) => &r.keys,
            TraceRecord::SubBefore(r) => &r.keys,
            TraceRecord::SubAfter(r) => &r.keys,
            TraceRecord::EndTransaction(r) => &r.keys,
            TraceRecord::Recall(_) => "",
        }
    }

    /// Appends the record, [`FIELD_SPLITOR`] included, to `out`.
    pub fn encode_into(&self, out: &mut String) {
        let mut f = Fields(out);
        match self {
            TraceRecord::Pub(r) => {
                f.put("Pub")
                    .put(r.timestamp_ms)
                    .put(&r.region)
                    .put(&r.group);
                f.put(&r.topic).put(&r.msg_id).put(or_null(&r.tags));
                f.put(or_null(&r.keys)).put(&r.store_host).put(r.body_bytes);
                f.put(r.cost_ms)
                    .put(r.msg_type.ordinal())
                    .put(&r.offset_msg_id);
                f.last(r.success);
            }
            TraceRecord::SubBefore(r) => {
                f.put("SubBefore")
                    .put(r.timestamp_ms)
                    .put(&r.region)
                    .put(&r.group);
                f.put(&r.request_id).put(&r.msg_id).put(r.retry_times);
                f.last(or_null(&r.keys));
            }
            TraceRecord::SubAfter(r) => {
                f.put("SubAfter")
                    .put(&r.request_id)
                    .put(&r.msg_id)
                    .put(r.cost_ms);
                f.put(r.success).put(or_null(&r.keys)).put(r.context_code);
                f.put(r.timestamp_ms.unwrap_or(0));
                f.last(r.group.as_deref().unwrap_or(""));
            }
            TraceRecord::EndTransaction(r) => {
                f.put("EndTransaction")
                    .put(r.timestamp_ms)
                    .put(&r.region)
                    .put(&r.group);
                f.put(&r.topic)
                    .put(&r.msg_id)
                    .put(or_null(&r.tags))
                    .put(or_null(&r.keys));
                f.put(&r.store_host)
                    .put(r.msg_type.ordinal())
                    .put(&r.transaction_id);
                f.put(&r.state).last(r.from_check);
            }
            TraceRecord::Recall(r) => {
                f.put("Recall")
                    .put(r.timestamp_ms)
                    .put(&r.region)
                    .put(&r.group);
                f.put(&r.topic).put(&r.msg_id).last(r.success);
            }
        }
    }

    /// The encoded record (one [`FIELD_SPLITOR`]-ended string).
    pub fn encode(&self) -> String {
        let mut s = String::with_capacity(160);
        self.encode_into(&mut s);
        s
    }
}

/// Decodes a trace message's body; records that do not parse are skipped.
pub fn decode(body: &str) -> Vec<TraceRecord> {
    body.split(FIELD_SPLITOR)
        .filter(|r| !r.is_empty())
        .filter_map(|r| {
            let fields: Vec<&str> = r.split(CONTENT_SPLITOR).collect();
            decode_one(&fields)
        })
        .collect()
}

fn decode_one(l: &[&str]) -> Option<TraceRecord> {
    let s = |i: usize| l.get(i).map(|v| from_null(v)).unwrap_or_default();
    let n = |i: usize| l.get(i)?.parse::<i64>().ok();
    let b = |i: usize| l.get(i).map(|v| *v == "true");
    Some(match *l.first()? {
        "Pub" if l.len() >= 13 => TraceRecord::Pub(PubTrace {
            timestamp_ms: n(1)?,
            region: s(2),
            group: s(3),
            topic: s(4),
            msg_id: s(5),
            tags: s(6),
            keys: s(7),
            store_host: s(8),
            body_bytes: u32::try_from(n(9)?).ok()?,
            cost_ms: n(10)?,
            msg_type: MessageType::from_ordinal(u8::try_from(n(11)?).ok()?)?,
            // 13 fields: no offset id (old clients).
            offset_msg_id: if l.len() >= 14 { s(12) } else { String::new() },
            success: if l.len() >= 14 { b(13)? } else { b(12)? },
        }),
        "SubBefore" if l.len() >= 7 => TraceRecord::SubBefore(SubBeforeTrace {
            timestamp_ms: n(1)?,
            region: s(2),
            group: s(3),
            request_id: s(4),
            msg_id: s(5),
            retry_times: i32::try_from(n(6)?).ok()?,
            keys: s(7),
        }),
        "SubAfter" if l.len() >= 5 => TraceRecord::SubAfter(SubAfterTrace {
            request_id: s(1),
            msg_id: s(2),
            cost_ms: n(3)?,
            success: b(4)?,
            keys: s(5),
            context_code: n(6).and_then(|c| i32::try_from(c).ok()).unwrap_or(0),
            timestamp_ms: n(7).filter(|&t| t > 0),
            group: l.get(8).filter(|g| !g.is_empty()).map(|g| g.to_string()),
        }),
        "EndTransaction" if l.len() >= 13 => TraceRecord::EndTransaction(EndTransactionTrace {
            timestamp_ms: n(1)?,
            region: s(2),
            group: s(3),
            topic: s(4),
            msg_id: s(5),
            tags: s(6),
            keys: s(7),
            store_host: s(8),
            msg_type: MessageType::from_ordinal(u8::try_from(n(9)?).ok()?)?,
            transaction_id: s(10),
            state: s(11),
            from_check: b(12)?,
        }),
        "Recall" if l.len() >= 7 => TraceRecord::Recall(RecallTrace {
            timestamp_ms: n(1)?,
            region: s(2),
            group: s(3),
            topic: s(4),
            msg_id: s(5),
            success: b(6)?,
        }),
        _ => return None,
    })
}

/// Writes fields separated by [`CONTENT_SPLITOR`]; `last` ends the record.
struct Fields<'a>(&'a mut String);

impl Fields<'_> {
    fn put(&mut self, v: impl std::fmt::Display) -> &mut Self {
        let _ = write!(self.0, "{v}{CONTENT_SPLITOR}");
        self
    }

    fn last(&mut self, v: impl std::fmt::Display) {
        let _ = write!(self.0, "{v}{FIELD_SPLITOR}");
    }
}

fn or_null(s: &str) -> &str {
    if s.is_empty() {
        "null"
    } else {
        s
    }
}

fn from_null(s: &str) -> String {
    if s == "null" {
        String::new()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pubr() -> TraceRecord {
        TraceRecord::Pub(PubTrace {
            timestamp_ms: 1_700_000_000_000,
            region: DEFAULT_REGION.into(),
            group: "pg".into(),
            topic: "T".into(),
            msg_id: "0A000001000018B4AAC2".into(),
            tags: String::new(),
            keys: "k1 k2".into(),
            store_host: "127.0.0.1:10911".into(),
            body_bytes: 5,
            cost_ms: 3,
            msg_type: MessageType::Normal,
            offset_msg_id: "7F00000100002A9F0000000000000000".into(),
            success: true,
        })
    }

    #[test]
    fn every_type_round_trips() {
        let before = TraceRecord::SubBefore(SubBeforeTrace {
            timestamp_ms: 5,
            region: DEFAULT_REGION.into(),
            group: "cg".into(),
            request_id: "R1".into(),
            msg_id: "M".into(),
            retry_times: 2,
            keys: String::new(),
        });
        let after = TraceRecord::SubAfter(SubAfterTrace {
            request_id: "R1".into(),
            msg_id: "M".into(),
            cost_ms: 7,
            success: false,
            keys: "k".into(),
            context_code: 4,
            timestamp_ms: Some(12),
            group: Some("cg".into()),
        });
        let end = TraceRecord::EndTransaction(EndTransactionTrace {
            timestamp_ms: 1,
            region: "r".into(),
            group: "g".into(),
            topic: "T".into(),
            msg_id: "M".into(),
            tags: "t".into(),
            keys: String::new(),
            store_host: "h:1".into(),
            msg_type: MessageType::TransactionHalf,
            transaction_id: "X".into(),
            state: "COMMIT_MESSAGE".into(),
            from_check: true,
        });
        let recall = TraceRecord::Recall(RecallTrace {
            timestamp_ms: 1,
            region: "r".into(),
            group: "g".into(),
            topic: "T".into(),
            msg_id: "M".into(),
            success: true,
        });
        let all = vec![pubr(), before, after, end, recall];
        let body: String = all.iter().map(TraceRecord::encode).collect();
        assert_eq!(decode(&body), all);
    }

    #[test]
    fn reads_rocketmq_text() {
        // As RocketMQ 5's TraceDataEncoder writes a Pub (null tags) and a SubBefore.
        let body = "Pub\u{1}1700000000000\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}MID\u{1}null\u{1}null\u{1}10.0.0.1:10911\u{1}5\u{1}3\u{1}0\u{1}OFF\u{1}true\u{2}\
                    SubBefore\u{1}1700000000100\u{1}DefaultRegion\u{1}cg\u{1}REQ\u{1}MID\u{1}0\u{1}null\u{2}\
                    SubAfter\u{1}REQ\u{1}MID\u{1}4\u{1}true\u{1}null\u{1}0\u{2}";
        let r = decode(body);
        assert_eq!(r.len(), 3);
        let TraceRecord::Pub(p) = &r[0] else {
            panic!("{r:?}")
        };
        assert_eq!((p.tags.as_str(), p.offset_msg_id.as_str()), ("", "OFF"));
        let TraceRecord::SubAfter(a) = &r[2] else {
            panic!("{r:?}")
        };
        assert_eq!((a.timestamp_ms, a.group.as_deref()), (None, None));
    }

    #[test]
    fn garbage_is_skipped_not_fatal() {
        let good = pubr().encode();
        for junk in [
            "",
            "\u{2}",
            "Pub\u{1}x\u{2}",
            "Nope\u{1}1\u{2}",
            "SubAfter\u{2}",
        ] {
            assert_eq!(decode(&format!("{junk}{good}")).len(), 1, "{junk:?}");
        }
    }
}
