//! Recall of scheduled messages (RocketMQ 5.3's RECALL_MESSAGE): the handle a scheduled send
//! returns, and the record the broker writes when a recall is accepted. Pure: the broker's
//! side is `node/src/broker/recall.rs` and `node/src/store/recall.rs`.
//!
//! A handle is RocketMQ's `RecallMessageHandle.HandleV1`: the text
//! `v1 <topic> <brokerName> <deliverAtMs> <messageId>` (one space between fields) in
//! URL-safe base64 with padding. ringmq's message id is the offset message id the send
//! returned (store host + the scheduled record's CommitLog offset), so the broker finds the
//! record from the handle alone; it then checks the record against every other field. A
//! RocketMQ client passes the handle back unread except for the broker name, which picks the
//! broker it sends the recall to.
//!
//! An accepted recall is a record of [`RECALL_TOPIC`] (queue = the shard of the scheduled
//! record) whose body names the scheduled record ([`Recall`]). Its ConsumeQueue unit carries,
//! instead of a tag hash, the scheduled record's offset in the timer queue ([`cq_tag`]), so
//! the schedule learns every recall from the ConsumeQueue alone.

use base64::Engine as _;

use crate::error::{Result, WireError};

/// Topic of recall records; queue = shard id. Only the broker writes it.
pub const RECALL_TOPIC: &str = "rmq_sys_timer_recall";
/// Longest handle accepted (characters of its base64 text).
pub const HANDLE_CHARS_MAX: usize = 1024;
/// The version field of the handles this crate writes and reads.
pub const HANDLE_VERSION: &str = "v1";

/// What a recall handle names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallHandle {
    /// The topic the message was sent to (its real topic, not the timer topic).
    pub topic: String,
    /// The broker that stored it.
    pub broker_name: String,
    /// When it is due, ms since the epoch (the send result's delivery time).
    pub deliver_at_ms: i64,
    /// The send result's message id (the offset message id of the scheduled record).
    pub message_id: String,
}

impl RecallHandle {
    /// The handle text: URL-safe base64 (with padding) of the space-separated fields.
    pub fn encode(&self) -> String {
        let raw = format!(
            "{HANDLE_VERSION} {} {} {} {}",
            self.topic, self.broker_name, self.deliver_at_ms, self.message_id
        );
        base64::engine::general_purpose::URL_SAFE.encode(raw.as_bytes())
    }

    /// Reads a handle. As RocketMQ: fields past the fifth are ignored; an empty handle, one
    /// that is not base64, not UTF-8, of another version or with fewer fields is refused.
    /// ringmq also refuses a delivery time that is not an integer.
    pub fn decode(handle: &str) -> Result<Self> {
        let bad = |detail| WireError::Invalid {
            what: "recall handle",
            detail,
        };
        let handle = handle.trim();
        if handle.is_empty() {
            return Err(bad("empty"));
        }
        if handle.len() > HANDLE_CHARS_MAX {
            return Err(bad("longer than 1024 characters"));
        }
        let raw = base64::engine::general_purpose::URL_SAFE
            .decode(handle.as_bytes())
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(handle.as_bytes()))
            .map_err(|_| bad("not URL-safe base64"))?;
        let text = String::from_utf8(raw).map_err(|_| WireError::NotUtf8 {
            what: "recall handle",
        })?;
        let items: Vec<&str> = text.split(' ').collect();
        if items[0] != HANDLE_VERSION || items.len() < 5 {
            return Err(bad(
                "not a v1 handle (v1 topic brokerName deliverAtMs messageId)",
            ));
        }
        let deliver_at_ms = items[3]
            .parse::<i64>()
            .map_err(|_| bad("its delivery time is not an integer"))?;
        Ok(RecallHandle {
            topic: items[1].to_owned(),
            broker_name: items[2].to_owned(),
            deliver_at_ms,
            message_id: items[4].to_owned(),
        })
    }
}

/// Body of a [`RECALL_TOPIC`] record, 32 bytes, big-endian:
///
/// | offset | field            | bytes |
/// |--------|------------------|-------|
/// | 0      | magic `0x524D_5452` ("RMTR") | 4 |
/// | 4      | version 1        | 4     |
/// | 8      | timer_cq_offset: the scheduled record's offset in the timer queue | 8 |
/// | 16     | physical_offset: its CommitLog offset | 8 |
/// | 24     | due_ms: when it was due | 8 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recall {
    pub timer_cq_offset: u64,
    pub physical_offset: u64,
    pub due_ms: i64,
}

/// Magic of a recall record body.
pub const RECALL_MAGIC: u32 = 0x524D_5452;
/// Bytes of a recall record body.
pub const RECALL_BYTES: usize = 32;

impl Recall {
    pub fn encode(&self) -> [u8; RECALL_BYTES] {
        let mut b = [0u8; RECALL_BYTES];
        b[0..4].copy_from_slice(&RECALL_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        b[8..16].copy_from_slice(&self.timer_cq_offset.to_be_bytes());
        b[16..24].copy_from_slice(&self.physical_offset.to_be_bytes());
        b[24..32].copy_from_slice(&self.due_ms.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let bad = |detail| WireError::Invalid {
            what: "recall record",
            detail,
        };
        if b.len() != RECALL_BYTES {
            return Err(bad("not 32 bytes"));
        }
        if b[0..4] != RECALL_MAGIC.to_be_bytes() || b[4..8] != 1u32.to_be_bytes() {
            return Err(bad("wrong magic or version"));
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        Ok(Recall {
            timer_cq_offset: u64_at(8),
            physical_offset: u64_at(16),
            due_ms: u64_at(24) as i64,
        })
    }
}

/// The ConsumeQueue tag of a recall record: the recalled record's timer queue offset, or -1
/// for a body that does not decode (the schedule ignores it).
pub fn cq_tag(body: &[u8]) -> i64 {
    Recall::decode(body)
        .ok()
        .and_then(|r| i64::try_from(r.timer_cq_offset).ok())
        .unwrap_or(-1)
}

/// The timer queue offset a recall record's ConsumeQueue tag names (`None` for -1).
pub fn unpack_tag(tag: i64) -> Option<u64> {
    u64::try_from(tag).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> RecallHandle {
        RecallHandle {
            topic: "Orders".into(),
            broker_name: "broker-a".into(),
            deliver_at_ms: 1_800_000_000_123,
            message_id: "7F00000100002A9F0000000000001000".into(),
        }
    }

    #[test]
    fn handle_round_trip_is_rocketmqs_text() {
        let h = handle();
        let text = h.encode();
        let raw = base64::engine::general_purpose::URL_SAFE
            .decode(text.as_bytes())
            .unwrap();
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            "v1 Orders broker-a 1800000000123 7F00000100002A9F0000000000001000"
        );
        assert_eq!(RecallHandle::decode(&text).unwrap(), h);
        // Without padding, and with a field past the fifth (ignored, as RocketMQ does).
        let extra = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(b"v1 Orders broker-a 1800000000123 7F00000100002A9F0000000000001000 x");
        assert_eq!(RecallHandle::decode(&extra).unwrap(), h);
    }

    #[test]
    fn bad_handles_are_refused_with_a_reason() {
        let enc = |s: &str| base64::engine::general_purpose::URL_SAFE.encode(s.as_bytes());
        for (text, why) in [
            (String::new(), "empty"),
            ("not base64 !!".to_string(), "base64"),
            (enc("v2 T b 1 id"), "v1"),
            (enc("v1 T b 1"), "v1"),
            (enc("v1 T b soon id"), "integer"),
            ("A".repeat(HANDLE_CHARS_MAX + 4), "1024"),
        ] {
            let e = RecallHandle::decode(&text).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let not_utf8 = base64::engine::general_purpose::URL_SAFE.encode([0xff, 0xfe]);
        assert!(RecallHandle::decode(&not_utf8).is_err());
    }

    #[test]
    fn record_round_trip_and_tag() {
        let r = Recall {
            timer_cq_offset: 42,
            physical_offset: 1 << 50,
            due_ms: 1_800_000_000_000,
        };
        let b = r.encode();
        assert_eq!(Recall::decode(&b).unwrap(), r);
        assert_eq!(unpack_tag(cq_tag(&b)), Some(42));
        let mut torn = b;
        torn[1] ^= 1;
        assert!(Recall::decode(&torn).is_err());
        assert_eq!(unpack_tag(cq_tag(&torn)), None);
        assert!(Recall::decode(&b[..31]).is_err());
    }
}
