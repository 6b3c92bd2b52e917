//! Reading a queue: [`Store::get`] looks up ConsumeQueue units from an offset and returns
//! the log runs that hold the matching records (the caller sends them, zero copy where it
//! can). Tag filters need only the unit's tag hash; [`Store::get_where`] also reads each
//! candidate record's properties (SQL92 filters): the log is copied in windows of up to
//! [`PROPERTY_WINDOW_BYTES`] (one read for many records, not one per record) to look, while
//! the matching runs are still sent from the log.

use super::consume_queue::{CqUnit, CQ_UNIT_BYTES};
use super::disk::Disk;
use super::error::StoreError;
use super::{Result, Store, PULL_SCAN_UNITS_MAX};

/// Largest log window one read copies to look at records' properties (a record larger than
/// this is read alone).
pub const PROPERTY_WINDOW_BYTES: usize = 256 * 1024;

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
        let uncapped = u64::MAX;
        self.get_below(
            topic,
            queue_id,
            (offset, max_messages, max_bytes),
            filter,
            properties,
            uncapped,
        )
    }

    /// [`Store::get_where`] for a reader capped at `visible_end` (a confirmOffset): a record
    /// that ends above it is not there yet; the pull stops before it (`NoNewMessage` when it
    /// is the first one). `(offset, max_messages, max_bytes)` as in [`Store::get`].
    pub fn get_below(
        &self,
        topic: &str,
        queue_id: u32,
        (offset, max_messages, max_bytes): (u64, u32, u64),
        filter: impl Fn(i64) -> bool,
        properties: Option<impl Fn(&[u8]) -> bool>,
        visible_end: u64,
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
        let mut result = PullResult::empty(PullStatus::NoMatchedMessage, offset, min, max);
        let log_min = self.log.min_offset();
        let mut window = Window::default();
        // Units are read in steps, the first as many as the pull asks for, then twice as
        // many each time filters skip units: a catch-up pull of 32 reads 640 bytes of
        // ConsumeQueue, not the whole scan limit (80 KiB, which made zeroing and copying
        // units 2-3 % of a catching-up node's CPU).
        let mut units = Vec::new();
        let mut scanned = 0;
        let mut step = u64::from(max_messages).max(UNITS_FIRST_STEP_MIN);
        'scan: while scanned < scan && result.messages < max_messages {
            let n = step.min(scan - scanned);
            units.clear();
            units.resize(n as usize * CQ_UNIT_BYTES, 0);
            cq.read_units(offset + scanned, &mut units)?;
            scanned += n;
            step = step.saturating_mul(2);
            for chunk in units.chunks_exact(CQ_UNIT_BYTES) {
                let unit = CqUnit::decode(chunk.try_into().expect("chunks_exact yields 20 bytes"));
                let fits = result.bytes + u64::from(unit.size) <= max_bytes;
                if result.messages >= max_messages || (result.messages > 0 && !fits) {
                    break 'scan;
                }
                if unit.physical_offset + u64::from(unit.size) > visible_end {
                    // Units of a queue follow the log: every later one is past the cap too.
                    if result.next_offset == offset {
                        result.status = PullStatus::NoNewMessage;
                    }
                    break 'scan;
                }
                result.next_offset += 1;
                if unit.physical_offset < log_min || !filter(unit.tag_hash) {
                    continue;
                }
                if let Some(accept) = &properties {
                    if !self.record_properties(&unit, &mut window, accept)? {
                        continue;
                    }
                }
                result.push(unit);
            }
        }
        if result.messages > 0 {
            result.status = PullStatus::Found;
            let direct = self.direct_catch_up && properties.is_none();
            if let Some(first) = result.runs.first().filter(|_| !direct) {
                self.log.read_ahead(first.physical_offset);
            }
        }
        Ok(result)
    }
}

impl<D: Disk + Clone> Store<D> {
    /// Finds the record of `unit` (in `window`, reading the log into it when it is not
    /// there) and asks `accept` about its properties.
    fn record_properties(
        &self,
        unit: &CqUnit,
        window: &mut Window,
        accept: &impl Fn(&[u8]) -> bool,
    ) -> Result<bool> {
        let size = unit.size as usize;
        if window.slice(unit.physical_offset, size).is_none() {
            let readable = self.log.contiguous_from(unit.physical_offset)?;
            let len = usize::try_from(readable)
                .unwrap_or(usize::MAX)
                .min(PROPERTY_WINDOW_BYTES)
                .max(size);
            window.start = unit.physical_offset;
            window.bytes.resize(len, 0);
            self.read(unit.physical_offset, &mut window.bytes)?;
        }
        let buf = window
            .slice(unit.physical_offset, size)
            .expect("the window was just read from this record's offset");
        let view = ringmq_wire::record::decode_one(buf).map_err(|e| StoreError::Corrupt {
            offset: unit.physical_offset,
            durable: self.synced_offset(),
            detail: format!("record named by a ConsumeQueue unit does not decode: {e}"),
        })?;
        Ok(accept(view.properties))
    }
}

/// Fewest ConsumeQueue units a pull reads in its first step.
const UNITS_FIRST_STEP_MIN: u64 = 32;

/// A copy of log bytes `start..start + bytes.len()`.
#[derive(Default)]
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    fn slice(&self, physical_offset: u64, len: usize) -> Option<&[u8]> {
        let from = usize::try_from(physical_offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(from..from.checked_add(len)?)
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

#[cfg(test)]
mod tests {
    use ringmq_wire::{properties, record};

    use super::super::fault_disk::FaultDisk;
    use super::super::tests::{encode, small_config};
    use super::*;

    /// A capped read (confirmOffset) returns only whole records ending at or below the cap,
    /// and "no new message" when the first one is above it.
    #[test]
    fn get_below_stops_at_the_cap() {
        let mut store = Store::open(FaultDisk::new(), small_config("/c")).unwrap();
        let mut ends = Vec::new();
        for i in 0..6u8 {
            let mut buf = Vec::new();
            encode("T", 0, &[i; 50], None, &mut buf);
            let out = store.append(&mut buf, 1).unwrap();
            ends.push(out.end_offset);
        }
        let get = |offset: u64, cap: u64| {
            let none: Option<fn(&[u8]) -> bool> = None;
            store
                .get_below("T", 0, (offset, 100, u64::MAX), |_| true, none, cap)
                .unwrap()
        };
        let r = get(0, ends[2]);
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::Found, 3, 3)
        );
        let r = get(0, ends[2] - 1);
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::Found, 2, 2)
        );
        let r = get(3, ends[2]);
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::NoNewMessage, 0, 3)
        );
        let r = get(0, 0);
        assert_eq!((r.status, r.next_offset), (PullStatus::NoNewMessage, 0));
        let r = get(3, u64::MAX);
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::Found, 3, 6)
        );
        // A filter that skips units below the cap moves the offset past them only.
        let none: Option<fn(&[u8]) -> bool> = None;
        let r = store
            .get_below("T", 0, (0, 100, u64::MAX), |_| false, none, ends[1])
            .unwrap();
        assert_eq!((r.status, r.next_offset), (PullStatus::NoMatchedMessage, 2));
    }

    /// A tag filter that skips most units: the pull reads the queue in growing steps, finds
    /// the same matches a scan of everything finds, and stops at the scan limit.
    #[test]
    fn sparse_matches_across_read_steps() {
        let mut store = Store::open(FaultDisk::new(), small_config("/s")).unwrap();
        let n = PULL_SCAN_UNITS_MAX + 600;
        for i in 0..n {
            let mut buf = Vec::new();
            let tag = if i % 97 == 96 || i == PULL_SCAN_UNITS_MAX + 10 {
                "a"
            } else {
                "b"
            };
            encode("T", 0, b"x", Some(tag), &mut buf);
            store.append(&mut buf, 1).unwrap();
        }
        let a = ringmq_wire::record::tag_hash("a");
        let get = |offset: u64, max_messages: u32| {
            store
                .get("T", 0, offset, max_messages, u64::MAX, |h| h == a)
                .unwrap()
        };
        let r = get(0, 3);
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::Found, 3, 291)
        );
        // Past the first steps (32, 64, 128, ...) and up to the limit of one pull's scan.
        let r = get(0, 1000);
        let matches = (0..PULL_SCAN_UNITS_MAX).filter(|i| i % 97 == 96).count() as u32;
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::Found, matches, PULL_SCAN_UNITS_MAX)
        );
        // The next pull goes on from there; nothing matches in a scan: NoMatchedMessage.
        let r = get(PULL_SCAN_UNITS_MAX, 1);
        assert_eq!(
            (r.status, r.messages, r.next_offset),
            (PullStatus::Found, 1, PULL_SCAN_UNITS_MAX + 11)
        );
        let none = store.get("T", 0, 0, 5, u64::MAX, |_| false).unwrap();
        assert_eq!(
            (none.status, none.messages, none.next_offset),
            (PullStatus::NoMatchedMessage, 0, PULL_SCAN_UNITS_MAX)
        );
    }

    /// Property filtering reads records through windows cut at segment ends (4 KiB segments
    /// here): the result is exactly the model's, whatever the batch size.
    #[test]
    fn get_where_matches_a_model_across_segments() {
        let mut store = Store::open(FaultDisk::new(), small_config("/w")).unwrap();
        let mut model: Vec<(u64, u32)> = Vec::new(); // (queue 0 offset, i) of matches
        let mut q0 = 0u64;
        for i in 0..400u32 {
            let q = i % 3 % 2;
            let body = vec![b'b'; 20 + (i as usize * 7) % 150];
            let mut buf = Vec::new();
            encode("T", q, &body, Some(&format!("Tag{}", i % 10)), &mut buf);
            store.append(&mut buf, 1).unwrap();
            if q == 0 {
                if i % 10 == 3 {
                    model.push((q0, i));
                }
                q0 += 1;
            }
        }
        let keep = |props: &[u8]| properties::get(props, "TAGS") == Some("Tag3");
        for max in [1u32, 7, 1000] {
            let (mut offset, mut got) = (0u64, Vec::new());
            while offset < q0 {
                let r = store
                    .get_where("T", 0, offset, max, u64::MAX, |_| true, Some(keep))
                    .unwrap();
                for run in &r.runs {
                    let mut buf = vec![0u8; run.len as usize];
                    store.read(run.physical_offset, &mut buf).unwrap();
                    for rec in record::iter(&buf) {
                        got.push(rec.unwrap().queue_offset);
                    }
                }
                offset = r.next_offset;
            }
            let want: Vec<u64> = model.iter().map(|m| m.0).collect();
            assert_eq!(got, want, "max_messages {max}");
        }
    }
}
