//! Scheduled (delayed) messages on the log: the system topics and the bytes the broker keeps
//! for them. Pure: the broker's schedule lives in `node/src/store/schedule.rs`.
//!
//! A message sent with a delay level (`DELAY`) or a delivery time (`TIMER_DELIVER_MS`,
//! `TIMER_DELAY_SEC`, `TIMER_DELAY_MS`) is stored under [`TIMER_TOPIC`], queue = the
//! shard's id, with `REAL_TOPIC`, `REAL_QID` and `TIMER_OUT_MS` (its due time) added to its
//! properties. The ConsumeQueue unit of such a record carries, instead of a tag hash, the
//! packed due time and level ([`pack_tag`]), so the schedule can be indexed from the
//! ConsumeQueue alone. When it is due the broker stores it again in its real topic and queue,
//! and in the same write a [`Progress`] record under [`TIMER_PROGRESS_TOPIC`] that says how
//! far delivery has come; recovery reads the newest one.

use crate::error::{Result, WireError};
use crate::properties::keys;
use crate::record::RecordView;

/// Topic of scheduled messages (RocketMQ 5's timer topic name); queue = shard id.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// Topic of delivery progress records; queue = shard id.
pub const TIMER_PROGRESS_TOPIC: &str = "rmq_sys_timer_progress";
/// Bits of a packed ConsumeQueue tag that hold the due time (ms since the epoch).
pub const DUE_BITS: u32 = 56;
const DUE_MASK: i64 = (1 << DUE_BITS) - 1;
/// Highest level a packed tag records (levels above are recorded as this).
pub const PACKED_LEVEL_MAX: u32 = 127;

/// True for topics only the broker writes (a producer's send to one is refused).
pub fn is_schedule_topic(topic: &str) -> bool {
    topic == TIMER_TOPIC || topic == TIMER_PROGRESS_TOPIC || topic == crate::recall::RECALL_TOPIC
}

/// The ConsumeQueue tag of a scheduled record: level (0 = a delivery time, no level) in the
/// top byte, due time in the low 56 bits. A due time outside `0..2^56` is clamped.
pub fn pack_tag(due_ms: i64, level: u32) -> i64 {
    (i64::from(level.min(PACKED_LEVEL_MAX)) << DUE_BITS) | due_ms.clamp(0, DUE_MASK)
}

/// `(due_ms, level)` of a packed tag.
pub fn unpack_tag(tag: i64) -> (i64, u32) {
    (tag & DUE_MASK, ((tag >> DUE_BITS) & 0x7F) as u32)
}

/// The ConsumeQueue tag of a record: the packed schedule for [`TIMER_TOPIC`] records, the
/// packed decision for transaction op records (`crate::transaction::op_tag`), the recalled
/// record's timer queue offset for recall records (`crate::recall::cq_tag`), else the tag
/// hash. Recovery and replication rebuild units with this, so it depends on the
/// record's bytes only.
pub fn cq_tag(rec: &RecordView<'_>) -> i64 {
    if rec.topic == crate::transaction::OP_TOPIC {
        return crate::transaction::op_tag(rec.body);
    }
    if rec.topic == crate::recall::RECALL_TOPIC {
        return crate::recall::cq_tag(rec.body);
    }
    if rec.topic != TIMER_TOPIC {
        return rec.tag_hash();
    }
    let due = rec
        .property(keys::TIMER_OUT_MS)
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    let level = rec
        .property(keys::DELAY)
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
        .clamp(0, i64::from(PACKED_LEVEL_MAX)) as u32;
    pack_tag(due, level)
}

/// How far delivery has come on one shard: every scheduled record ordered before
/// `(delivered_below_ms, delivered_below_cq)` (by due time, then ConsumeQueue offset) has
/// been stored in its real topic, in the same write as this record or before it; none at or
/// after it has been delivered, except those delivered after this record was written. All
/// scheduled records not yet delivered have ConsumeQueue offsets at or above `low_cq_offset`.
///
/// Body of a [`TIMER_PROGRESS_TOPIC`] record, 40 bytes, big-endian:
///
/// | offset | field              | bytes |
/// |--------|--------------------|-------|
/// | 0      | magic `0x524D_5450` ("RMTP") | 4 |
/// | 4      | version 1          | 4     |
/// | 8      | delivered_below_ms | 8     |
/// | 16     | delivered_below_cq | 8     |
/// | 24     | low_cq_offset      | 8     |
/// | 32     | delivered (count, since the shard's first delivery) | 8 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub delivered_below_ms: i64,
    pub delivered_below_cq: u64,
    pub low_cq_offset: u64,
    pub delivered: u64,
}

/// Magic of a progress record body.
pub const PROGRESS_MAGIC: u32 = 0x524D_5450;
/// Bytes of a progress record body.
pub const PROGRESS_BYTES: usize = 40;

impl Progress {
    pub fn encode(&self) -> [u8; PROGRESS_BYTES] {
        let mut b = [0u8; PROGRESS_BYTES];
        b[0..4].copy_from_slice(&PROGRESS_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        b[8..16].copy_from_slice(&self.delivered_below_ms.to_be_bytes());
        b[16..24].copy_from_slice(&self.delivered_below_cq.to_be_bytes());
        b[24..32].copy_from_slice(&self.low_cq_offset.to_be_bytes());
        b[32..40].copy_from_slice(&self.delivered.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let bad = |detail| WireError::Invalid {
            what: "schedule progress",
            detail,
        };
        if b.len() != PROGRESS_BYTES {
            return Err(bad("not 40 bytes"));
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        if b[0..4] != PROGRESS_MAGIC.to_be_bytes() || b[4..8] != 1u32.to_be_bytes() {
            return Err(bad("wrong magic or version"));
        }
        Ok(Progress {
            delivered_below_ms: u64_at(8) as i64,
            delivered_below_cq: u64_at(16),
            low_cq_offset: u64_at(24),
            delivered: u64_at(32),
        })
    }
}

/// Property keys that schedule a message.
pub const SCHEDULE_KEYS: [&str; 4] = [
    keys::DELAY,
    keys::TIMER_DELIVER_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELAY_MS,
];

/// What a message's properties ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// No schedule property (or a delay level <= 0): deliver at once.
    Now,
    /// `DELAY`: a level >= 1 (the broker clamps it to its highest level).
    Level(u32),
    /// `TIMER_DELIVER_MS`: this time, ms since the epoch.
    At(i64),
    /// `TIMER_DELAY_SEC` / `TIMER_DELAY_MS`: this many ms after the broker stores it.
    After(i64),
}

/// True if the properties block names any of [`SCHEDULE_KEYS`] (one pass, no parsing).
pub fn has_schedule_property(props: &[u8]) -> bool {
    crate::properties::iter(props)
        .filter_map(|p| p.ok())
        .any(|(k, _)| SCHEDULE_KEYS.contains(&k))
}

/// What the send path must look at in a record's properties, found in one pass: whether it
/// names any of [`SCHEDULE_KEYS`], and whether it names `TRAN_MSG` (a transactional half,
/// or a malformed attempt at one).
pub fn special_properties(props: &[u8]) -> (bool, bool) {
    let s = scan_send(props);
    (s.scheduled, s.tran_msg)
}

/// [`special_properties`] and the `TAGS` value, in one pass over the block (the send path
/// needs all three for every record).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendProperties<'a> {
    pub scheduled: bool,
    pub tran_msg: bool,
    /// The first `TAGS` value, if it is UTF-8 (as [`crate::properties::get`] finds it).
    pub tags: Option<&'a str>,
}

pub fn scan_send(props: &[u8]) -> SendProperties<'_> {
    let mut out = SendProperties::default();
    let mut tags_seen = false;
    for (k, v) in crate::properties::raw_pairs(props) {
        out.scheduled |= SCHEDULE_KEYS.iter().any(|s| s.as_bytes() == k);
        out.tran_msg |= k == keys::TRAN_MSG.as_bytes();
        if !tags_seen && k == keys::TAGS.as_bytes() {
            tags_seen = true;
            out.tags = std::str::from_utf8(v).ok();
        }
    }
    out
}

/// [`cq_tag`] with the record's `TAGS` already found (see [`scan_send`]).
pub fn cq_tag_with(rec: &RecordView<'_>, tags: Option<&str>) -> i64 {
    if rec.topic == crate::transaction::OP_TOPIC
        || rec.topic == TIMER_TOPIC
        || rec.topic == crate::recall::RECALL_TOPIC
    {
        return cq_tag(rec);
    }
    tags.map(crate::record::tag_hash).unwrap_or(0)
}

/// Reads the schedule a message asks for. An error names the property and what is wrong
/// with it: not an integer, out of range, or more than one of them set.
pub fn asked(props: &[u8]) -> std::result::Result<Asked, String> {
    let mut found: Option<(&str, &str)> = None;
    for (k, v) in crate::properties::iter(props).filter_map(|p| p.ok()) {
        if !SCHEDULE_KEYS.contains(&k) {
            continue;
        }
        if let Some((first, _)) = found {
            return Err(format!(
                "{first} and {k} are both set; a message is scheduled by one of {}",
                SCHEDULE_KEYS.join(", ")
            ));
        }
        found = Some((k, v));
    }
    let Some((k, v)) = found else {
        return Ok(Asked::Now);
    };
    let n: i64 = v
        .trim()
        .parse()
        .map_err(|_| format!("{k}={v:?} is not an integer"))?;
    match k {
        keys::DELAY if n <= 0 => Ok(Asked::Now),
        keys::DELAY => Ok(Asked::Level(u32::try_from(n).unwrap_or(u32::MAX))),
        keys::TIMER_DELIVER_MS => Ok(Asked::At(n)),
        keys::TIMER_DELAY_SEC => n
            .checked_mul(1000)
            .map(Asked::After)
            .ok_or_else(|| format!("{k}={n} is out of range")),
        _ => Ok(Asked::After(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_scan_agrees_with_the_lookups() {
        let blocks: [&[u8]; 5] = [
            b"TAGS\x01a\x02DELAY\x013\x02",
            b"KEYS\x01k\x02TRAN_MSG\x01true\x02TAGS\x01b\x02TAGS\x01c\x02",
            b"TAGS\x01\xff\x02TAGS\x01d\x02",
            b"X\x01y\x02BROKEN\x02TAGS\x01e\x02",
            b"",
        ];
        for b in blocks {
            let s = scan_send(b);
            assert_eq!(s.tags, crate::properties::get(b, keys::TAGS), "{b:?}");
            let scheduled = crate::properties::raw_pairs(b)
                .any(|(k, _)| SCHEDULE_KEYS.iter().any(|s| s.as_bytes() == k));
            assert_eq!(s.scheduled, scheduled, "{b:?}");
        }
        assert_eq!(scan_send(blocks[0]).tags, Some("a"));
        assert!(scan_send(blocks[1]).tran_msg);
        assert_eq!(
            scan_send(blocks[3]).tags,
            None,
            "the scan ends at a pair without 0x01"
        );
    }

    #[test]
    fn tags_pack_and_unpack() {
        let due = 1_800_000_000_123;
        assert_eq!(unpack_tag(pack_tag(due, 0)), (due, 0));
        assert_eq!(unpack_tag(pack_tag(due, 18)), (due, 18));
        assert_eq!(unpack_tag(pack_tag(due, 500)), (due, PACKED_LEVEL_MAX));
        assert_eq!(unpack_tag(pack_tag(-5, 3)), (0, 3));
        assert!(pack_tag(due, 127) > 0, "packed tags stay positive");
    }

    fn props(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::properties::encode(pairs.iter().copied(), &mut out).unwrap();
        out
    }

    #[test]
    fn asked_reads_each_property() {
        assert_eq!(asked(&props(&[("TAGS", "a")])).unwrap(), Asked::Now);
        assert_eq!(asked(&props(&[("DELAY", "3")])).unwrap(), Asked::Level(3));
        assert_eq!(asked(&props(&[("DELAY", "0")])).unwrap(), Asked::Now);
        assert_eq!(asked(&props(&[("DELAY", "-2")])).unwrap(), Asked::Now);
        assert_eq!(
            asked(&props(&[("TIMER_DELIVER_MS", "1800000000000")])).unwrap(),
            Asked::At(1_800_000_000_000)
        );
        assert_eq!(
            asked(&props(&[("TIMER_DELAY_SEC", "5")])).unwrap(),
            Asked::After(5000)
        );
        assert_eq!(
            asked(&props(&[("TIMER_DELAY_MS", "250")])).unwrap(),
            Asked::After(250)
        );
        let e = asked(&props(&[("TIMER_DELAY_MS", "soon")])).unwrap_err();
        assert!(
            e.contains("TIMER_DELAY_MS") && e.contains("not an integer"),
            "{e}"
        );
        let e = asked(&props(&[("DELAY", "2"), ("TIMER_DELAY_MS", "5")])).unwrap_err();
        assert!(e.contains("both set"), "{e}");
        assert!(asked(&props(&[("TIMER_DELAY_SEC", "9223372036854775807")])).is_err());
        assert!(has_schedule_property(&props(&[("A", "b"), ("DELAY", "1")])));
        assert!(!has_schedule_property(&props(&[("A", "b")])));
        assert_eq!(
            special_properties(&props(&[("TRAN_MSG", "true"), ("DELAY", "2")])),
            (true, true)
        );
        assert_eq!(special_properties(&props(&[("A", "b")])), (false, false));
    }

    #[test]
    fn progress_round_trip() {
        let p = Progress {
            delivered_below_ms: 1_800_000_000_000,
            delivered_below_cq: 42,
            low_cq_offset: 7,
            delivered: 99,
        };
        assert_eq!(Progress::decode(&p.encode()).unwrap(), p);
        let mut torn = p.encode();
        torn[0] ^= 1;
        assert!(Progress::decode(&torn).is_err());
        assert!(Progress::decode(&torn[..39]).is_err());
    }
}
