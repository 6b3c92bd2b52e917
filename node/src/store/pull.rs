//! Reading a queue: [`Store::get`] looks up ConsumeQueue units from an offset and returns
//! the log runs that hold the matching records (the caller sends them, zero copy where it
//! can). Tag filters need only the unit's tag hash; [`Store::get_where`] also reads each
//! candidate record's properties (SQL92 filters): one copy of the record to look, while the
//! matching runs are still sent from the log.

use super::consume_queue::{CqUnit, CQ_UNIT_BYTES};
use super::disk::Disk;
use super::error::StoreError;
use super::{Result, Store, PULL_SCAN_UNITS_MAX};

/// How a pull ended, RocketMQ's `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    Found,
    /// The offset is the queue's end.
    NoNewMessage,
    /// Units were examined but none matched the filter; `next_offset` moved past them.
    NoMatchedMessage,
    /// The offset is below the queue's minimum (retention removed it).
    OffsetTooSmall,
    /// The offset is past the queue's end.
    OffsetOverflow,
    /// This store has no such queue.
    NoQueue,
}

/// Contiguous record bytes in the log (one or more whole records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub physical_offset: u64,
    pub len: u32,
}

/// Result of [`Store::get`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullResult {
    pub status: PullStatus,
    pub next_offset: u64,
    pub min_offset: u64,
    pub max_offset: u64,
    pub runs: Vec<Run>,
    pub messages: u32,
    pub bytes: u64,
}

impl<D: Disk + Clone> Store<D> {
    /// Looks up to `max_messages` records (and about `max_bytes`, at least one) of a queue
    /// from `offset`, skipping those whose tag hash `filter` rejects.
    pub fn get(
        &self,
        topic: &str,
        queue_id: u32,
        offset: u64,
        max_messages: u32,
        max_bytes: u64,
        filter: impl Fn(i64) -> bool,
    ) -> Result<PullResult> {
        let everything: Option<fn(&[u8]) -> bool> = None;
        self.get_where(
            topic,
            queue_id,
            offset,
            max_messages,
            max_bytes,
            filter,
            everything,
        )
    }

    /// [`Store::get`], and when `properties` is given, only records whose encoded properties
    /// block it accepts (read from the log for each unit the tag filter passed).
    #[allow(clippy::too_many_arguments)]
    pub fn get_where(
        &self,
        topic: &str,
        queue_id: u32,
        offset: u64,
        max_messages: u32,
        max_bytes: u64,
        filter: impl Fn(i64) -> bool,
        properties: Option<impl Fn(&[u8]) -> bool>,
    ) -> Result<PullResult> {
        let Some(cq) = self.queue(topic, queue_id) else {
            return Ok(PullResult::empty(PullStatus::NoQueue, 0, 0, 0));
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        if offset < min {
            return Ok(PullResult::empty(PullStatus::OffsetTooSmall, min, min, max));
        }
        if offset == max {
            return Ok(PullResult::empty(
                PullStatus::NoNewMessage,
                offset,
                min,
                max,
            ));
        }
        if offset > max {
            return Ok(PullResult::empty(PullStatus::OffsetOverflow, max, min, max));
        }
        let scan = (max - offset).min(PULL_SCAN_UNITS_MAX);
        let mut units = vec![0u8; scan as usize * CQ_UNIT_BYTES];
        cq.read_units(offset, &mut units)?;
        let mut result = PullResult::empty(PullStatus::NoMatchedMessage, offset, min, max);
        let log_min = self.log.min_offset();
        let mut record = Vec::new();
        for chunk in units.chunks_exact(CQ_UNIT_BYTES) {
            let unit = CqUnit::decode(chunk.try_into().expect("chunks_exact yields 20 bytes"));
            let fits = result.bytes + u64::from(unit.size) <= max_bytes;
            if result.messages >= max_messages || (result.messages > 0 && !fits) {
                break;
            }
            result.next_offset += 1;
            if unit.physical_offset < log_min || !filter(unit.tag_hash) {
                continue;
            }
            if let Some(accept) = &properties {
                if !self.record_properties(&unit, &mut record, accept)? {
                    continue;
                }
            }
            result.push(unit);
        }
        if result.messages > 0 {
            result.status = PullStatus::Found;
        }
        Ok(result)
    }
}

impl<D: Disk + Clone> Store<D> {
    /// Reads the record of `unit` into `buf` and asks `accept` about its properties.
    fn record_properties(
        &self,
        unit: &CqUnit,
        buf: &mut Vec<u8>,
        accept: &impl Fn(&[u8]) -> bool,
    ) -> Result<bool> {
        buf.resize(unit.size as usize, 0);
        self.read(unit.physical_offset, buf)?;
        let view = ringmq_wire::record::decode_one(buf).map_err(|e| StoreError::Corrupt {
            offset: unit.physical_offset,
            durable: self.synced_offset(),
            detail: format!("record named by a ConsumeQueue unit does not decode: {e}"),
        })?;
        Ok(accept(view.properties))
    }
}

impl PullResult {
    fn empty(status: PullStatus, next_offset: u64, min_offset: u64, max_offset: u64) -> Self {
        PullResult {
            status,
            next_offset,
            min_offset,
            max_offset,
            runs: Vec::new(),
            messages: 0,
            bytes: 0,
        }
    }

    fn push(&mut self, unit: CqUnit) {
        self.messages += 1;
        self.bytes += u64::from(unit.size);
        if let Some(last) = self.runs.last_mut() {
            if last.physical_offset + u64::from(last.len) == unit.physical_offset {
                last.len += unit.size;
                return;
            }
        }
        self.runs.push(Run {
            physical_offset: unit.physical_offset,
            len: unit.size,
        });
    }
}
