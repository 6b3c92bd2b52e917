//! The slave side of replication in the store: append bytes shipped from the master verbatim
//! (every record checked: CRC, its physical offset is where it lands, its queue offset is the
//! next of its queue), rebuild the ConsumeQueues from them, and truncate when the slave is
//! ahead of its master.

use ringmq_wire::record::{self, Entry};

use super::commitlog::shard_base;
use super::consume_queue::CqUnit;
use super::disk::Disk;
use super::error::{Result, StoreError};
use super::Store;

impl<D: Disk + Clone> Store<D> {
    /// Appends `bytes`, which the master stored at `at`, at this log's end (which must be
    /// `at`). All or nothing. Returns the new end of the log.
    pub fn append_replicated(&mut self, at: u64, bytes: &[u8], now_ms: i64) -> Result<u64> {
        self.check_writable(now_ms)?;
        let sp = self.log.save_point();
        let mut touched: Vec<(String, u32)> = Vec::new();
        let result = self.place_replicated(at, bytes, &mut touched);
        match result {
            Ok(()) => {
                self.commit_queues(&touched)?;
                Ok(self.log.write_offset())
            }
            Err(e) => {
                self.log.restore(sp);
                for (topic, q) in &touched {
                    if let Some(cq) = self.queue_mut(topic, *q) {
                        cq.discard_staged();
                    }
                }
                Err(e)
            }
        }
    }

    fn place_replicated(
        &mut self,
        at: u64,
        bytes: &[u8],
        touched: &mut Vec<(String, u32)>,
    ) -> Result<()> {
        // (physical offset, range in `bytes`) of each entry, grouped later per segment.
        let mut pieces: Vec<(u64, usize, usize)> = Vec::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let phys = at + pos as u64;
            let entry = record::decode(&bytes[pos..])
                .map_err(|source| StoreError::BadRecord { at: pos, source })?;
            let len = match entry {
                Entry::Blank { len } => {
                    // Only the 8-byte header travels (the rest of the segment is zeros), and
                    // it ends a shipment: shipments never cross a segment end.
                    if pos + record::BLANK_BYTES != bytes.len() {
                        return Err(StoreError::BadBatch {
                            detail: format!(
                                "BLANK at {phys} is not the last entry of the shipment"
                            ),
                        });
                    }
                    self.log.place_replicated(phys, len, true)?;
                    pieces.push((phys, pos, record::BLANK_BYTES));
                    pos += record::BLANK_BYTES;
                    continue;
                }
                Entry::Record(rec) => {
                    if !super::commitlog::recover::has_intact_end(&rec) {
                        // The master refuses such records; recovery would cut the log here.
                        return Err(StoreError::BadBatch {
                            detail: format!("record at {phys} ends in zeros"),
                        });
                    }
                    if rec.physical_offset != phys {
                        return Err(StoreError::BadBatch {
                            detail: format!(
                                "record at {phys} says physical offset {}",
                                rec.physical_offset
                            ),
                        });
                    }
                    let topic = rec.topic.to_string();
                    let queue_id = rec.queue_id;
                    let unit = CqUnit {
                        physical_offset: phys,
                        size: rec.len() as u32,
                        tag_hash: ringmq_wire::schedule::cq_tag(&rec),
                    };
                    let queue_offset = rec.queue_offset;
                    let len = rec.len();
                    self.log.place_replicated(phys, len, false)?;
                    let joined_mid_way = self.log.min_offset() > shard_base(self.cfg.shard);
                    let cq = self.queue_or_open(&topic, queue_id)?;
                    if joined_mid_way && cq.next_offset() == 0 && queue_offset > 0 {
                        // This slave started at the master's oldest retained segment: the
                        // queue's earlier records are gone on the master too.
                        cq.start_at(queue_offset)?;
                    }
                    if cq.next_offset() != queue_offset {
                        return Err(StoreError::BadBatch {
                            detail: format!(
                                "record at {phys} has queue offset {queue_offset} in {topic}/{queue_id}, which continues at {}",
                                cq.next_offset()
                            ),
                        });
                    }
                    cq.stage(unit)?;
                    if !touched.iter().any(|(t, q)| *t == topic && *q == queue_id) {
                        touched.push((topic, queue_id));
                    }
                    len
                }
            };
            match pieces.last_mut() {
                Some((p, start, l))
                    if *p + *l as u64 == phys
                        && *start + *l == pos
                        && self.log.segment_start(*p) == self.log.segment_start(phys) =>
                {
                    *l += len;
                }
                _ => pieces.push((phys, pos, len)),
            }
            pos += len;
        }
        self.write_append(&[], &pieces, bytes)
    }

    /// Makes an empty store start at `at` (see `CommitLog::start_empty_at`).
    pub fn start_empty_at(&mut self, at: u64) -> Result<()> {
        self.check_alive()?;
        self.log.start_empty_at(at)?;
        self.checkpoint()
    }

    /// Cuts the log, the ConsumeQueues and the epochs back to `end` (a slave ahead of its
    /// master, or a replica past its consistent point with the master: see
    /// [`super::epoch::consistent_point`]). The key index is the owner's to cut (see
    /// `KeyIndex::truncate`); its lookups skip entries past the log end meanwhile. The
    /// schedule and transaction state are rebuilt from what remains, as at open.
    ///
    /// The checkpoint is lowered to `end` first and durably: recovery scans from the
    /// checkpoint, so a crash part-way (or an I/O error that leaves the log zeroed past
    /// `end` but the checkpoint above it) must not make it take the zeros for the log. A
    /// failure after that poisons the store: the cut is half done.
    pub fn truncate_to(&mut self, end: u64) -> Result<()> {
        self.check_alive()?;
        if end < self.log.min_offset() || end > self.log.write_offset() {
            return Err(StoreError::BadBatch {
                detail: format!(
                    "cannot truncate to {end}: the log holds {}..{}",
                    self.log.min_offset(),
                    self.log.write_offset()
                ),
            });
        }
        if let Some(next) = self.write_checkpoint(end)? {
            let synced = self.disk.sync_data(&self.checkpoint_file);
            synced.map_err(|e| self.fatal("fdatasync of the checkpoint", e))?;
            self.checkpoint_written(next);
        }
        let cut = self.cut_to(end);
        if cut.is_err() {
            self.poisoned = true;
        }
        cut?;
        // Scheduled messages and transaction halves past the cut are gone: their state is
        // rebuilt from what remains, as at open.
        self.open_schedule()?;
        self.open_txn()?;
        self.checkpoint()
    }

    /// [`Self::truncate_to`]'s cut of the log, the epochs and the ConsumeQueues.
    fn cut_to(&mut self, end: u64) -> Result<()> {
        self.log.truncate_to(end)?;
        self.epochs.truncate_from(&self.disk, end)?;
        for qs in self.queues.values_mut() {
            for cq in qs.values_mut() {
                cq.truncate_to_log(end)?;
            }
        }
        Ok(())
    }

    /// What to ship from `from` (a record boundary below `to`, the log end): whole entries,
    /// about `max_bytes` at most (at least one entry), never past a segment end. A BLANK
    /// ends a shipment and only its 8-byte header travels.
    pub fn ship_range(&self, from: u64, to: u64, max_bytes: u64) -> Result<ShipRange> {
        let mut pos = from;
        let seg_end = self.log.segment_end(from);
        let mut send_len = 0u64;
        while pos < to && pos < seg_end {
            let mut head = [0u8; record::BLANK_BYTES];
            self.log.read(pos, &mut head)?;
            let (size, magic) = record::peek_header(&head).unwrap_or((0, 0));
            if magic == record::BLANK_MAGIC {
                send_len += record::BLANK_BYTES as u64;
                pos = seg_end;
                break;
            }
            let len = u64::from(size);
            if len < record::RECORD_BYTES_MIN as u64 {
                return Err(StoreError::Corrupt {
                    offset: pos,
                    durable: self.log.synced_offset(),
                    detail: format!("TOTALSIZE {size} while shipping"),
                });
            }
            if pos > from && send_len + len > max_bytes {
                break;
            }
            pos += len;
            send_len += len;
        }
        Ok(ShipRange { end: pos, send_len })
    }
}

/// A shipment of log bytes: `send_len` bytes from its start cover the log up to `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShipRange {
    pub end: u64,
    pub send_len: u64,
}
