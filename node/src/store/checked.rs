//! A batch of records decoded and checked once, where the frame arrives: every record
//! decodes (CRC included) and would be recognised as intact by recovery. The send path and
//! the store take [`CheckedBatch`] instead of decoding the bytes again.

use ringmq_wire::record;

use super::commitlog;
use super::error::{Result, StoreError};

/// Where one record of a checked batch is, and what the send path needs of it.
#[derive(Debug, Clone, Copy)]
pub struct RecordMeta {
    pub start: usize,
    pub len: usize,
    pub queue_id: u32,
    pub tag_hash: i64,
    pub body_len: usize,
    /// The record names a schedule property (delay level or delivery time).
    pub scheduled: bool,
    /// The record has the prepared transaction sysflag or a `TRAN_MSG` property (a half
    /// message, or a malformed attempt at one).
    pub half: bool,
    topic_start: usize,
    topic_len: usize,
}

impl RecordMeta {
    /// The record's topic, read from the batch it was checked in.
    pub fn topic<'a>(&self, batch: &'a [u8]) -> &'a str {
        let raw = &batch[self.start + self.topic_start..][..self.topic_len];
        std::str::from_utf8(raw).expect("validated as UTF-8 by CheckedBatch::check")
    }
}

/// A batch of records decoded and checked once (every record decodes, CRC included, and
/// would be recognised as intact by recovery); the send path and the store take this type
/// instead of decoding the bytes again. It describes the bytes it was checked against: the
/// broker fields the store patches later are outside what it records.
#[derive(Debug, Clone)]
pub struct CheckedBatch {
    pub metas: Vec<RecordMeta>,
}

impl CheckedBatch {
    /// Checks a batch from a peer: every record, its body CRC included.
    pub fn check(batch: &[u8]) -> Result<Self> {
        scan_batch(batch, Crc::Verify).map(|metas| CheckedBatch { metas })
    }

    /// Checks a batch whose records this process encoded itself (the remoting edge writes a
    /// RocketMQ client's messages as records, computing each body CRC as it goes): every
    /// length, topic and property is checked as by [`Self::check`], the body CRC is taken as
    /// written instead of computed a second time.
    pub fn check_encoded_here(batch: &[u8]) -> Result<Self> {
        scan_batch(batch, Crc::Trust).map(|metas| CheckedBatch { metas })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Crc {
    Verify,
    Trust,
}

/// Decodes every record of a batch (CRC included unless `crc` trusts it) before anything
/// is placed.
fn scan_batch(batch: &[u8], crc: Crc) -> Result<Vec<RecordMeta>> {
    let mut metas = Vec::new();
    let mut at = 0;
    while at < batch.len() {
        let rest = &batch[at..];
        let rec = match crc {
            Crc::Verify => record::decode_one(rest),
            Crc::Trust => record::decode_one_unverified(rest),
        }
        .map_err(|source| StoreError::BadRecord { at, source })?;
        if !commitlog::recover::has_intact_end(&rec) {
            // Recovery would take this record for a torn write.
            return Err(StoreError::BadRecord {
                at,
                source: ringmq_wire::WireError::Invalid {
                    what: "record",
                    detail: "empty topic, NUL in the topic, or properties ending in a zero byte",
                },
            });
        }
        let topic_start = rec.topic.as_ptr() as usize - rec.bytes.as_ptr() as usize;
        let props = ringmq_wire::schedule::scan_send(rec.properties);
        let (scheduled, tran_msg) = (props.scheduled, props.tran_msg);
        metas.push(RecordMeta {
            start: at,
            len: rec.len(),
            queue_id: rec.queue_id,
            tag_hash: ringmq_wire::schedule::cq_tag_with(&rec, props.tags),
            body_len: rec.body.len(),
            scheduled,
            half: rec.sys_flag & record::sys_flag::TRANSACTION_MASK != 0 || tran_msg,
            topic_start,
            topic_len: rec.topic.len(),
        });
        at += rec.len();
    }
    if metas.is_empty() {
        return Err(StoreError::BadBatch {
            detail: "empty batch".to_string(),
        });
    }
    Ok(metas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::encode;

    #[test]
    fn only_a_batch_encoded_here_skips_the_crc() {
        let mut batch = Vec::new();
        encode("T", 0, b"first body", Some("a"), &mut batch);
        let second = batch.len();
        encode("T", 1, b"second body", None, &mut batch);
        let metas = CheckedBatch::check(&batch).expect("intact").metas;
        assert_eq!(metas.len(), 2);
        let trusted = CheckedBatch::check_encoded_here(&batch)
            .expect("intact")
            .metas;
        assert_eq!(
            trusted
                .iter()
                .map(|m| (m.start, m.queue_id))
                .collect::<Vec<_>>(),
            metas
                .iter()
                .map(|m| (m.start, m.queue_id))
                .collect::<Vec<_>>()
        );

        // A body changed after its CRC was computed: a peer's batch is refused at the
        // record, one encoded here is taken as written.
        let last = batch.len() - 1;
        let body_at = batch[second..]
            .windows(6)
            .position(|w| w == b"second")
            .unwrap();
        batch[second + body_at] ^= 0x20;
        assert!(matches!(
            CheckedBatch::check(&batch),
            Err(StoreError::BadRecord {
                at,
                source: ringmq_wire::WireError::BadCrc { .. }
            }) if at == second
        ));
        assert!(CheckedBatch::check_encoded_here(&batch).is_ok());

        // Everything but the CRC is still checked.
        assert!(matches!(
            CheckedBatch::check_encoded_here(&batch[..last]),
            Err(StoreError::BadRecord { at, .. }) if at == second
        ));
        assert!(CheckedBatch::check_encoded_here(&[]).is_err());
    }
}
