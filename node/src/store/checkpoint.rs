//! The per-shard checkpoint: how far the CommitLog is known durable and how far the
//! ConsumeQueues are known to cover it, so recovery scans only the tail.
//!
//! File `checkpoint.<shard>`, 4 KiB, two 64-byte slots written alternately so a torn write of
//! one slot leaves the other readable; the valid slot with the higher sequence wins.
//!
//! | offset | field             | bytes | meaning                                               |
//! |--------|-------------------|-------|-------------------------------------------------------|
//! | 0      | magic             | 4     | `0x524D_4350` ("RMCP")                                |
//! | 4      | version           | 4     | 1                                                     |
//! | 8      | sequence          | 8     | increases with every write                            |
//! | 16     | log_synced_offset | 8     | CommitLog bytes below this were fdatasync'd           |
//! | 24     | cq_offset         | 8     | ConsumeQueue units of all records below this are durable |
//! | 32     | min_offset        | 8     | first retained CommitLog offset                       |
//! | 40     | reserved          | 20    | zero                                                  |
//! | 60     | crc32             | 4     | crc32 of bytes 0..60                                  |

/// Magic of a checkpoint slot.
pub const CHECKPOINT_MAGIC: u32 = 0x524D_4350;
/// Bytes per slot.
pub const SLOT_BYTES: usize = 64;
/// Size of the checkpoint file.
pub const CHECKPOINT_FILE_BYTES: u64 = 4096;

const _: () = assert!(2 * SLOT_BYTES as u64 <= CHECKPOINT_FILE_BYTES);

/// The values a checkpoint holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    pub sequence: u64,
    pub log_synced_offset: u64,
    pub cq_offset: u64,
    pub min_offset: u64,
}

impl Checkpoint {
    /// The slot this checkpoint goes to (alternating by sequence).
    pub fn slot(&self) -> u64 {
        (self.sequence % 2) * SLOT_BYTES as u64
    }

    pub fn encode(&self) -> [u8; SLOT_BYTES] {
        let mut b = [0u8; SLOT_BYTES];
        b[0..4].copy_from_slice(&CHECKPOINT_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        b[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        b[16..24].copy_from_slice(&self.log_synced_offset.to_be_bytes());
        b[24..32].copy_from_slice(&self.cq_offset.to_be_bytes());
        b[32..40].copy_from_slice(&self.min_offset.to_be_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// Decodes one slot; `None` if it is empty, torn or of another format.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b: &[u8; SLOT_BYTES] = b.get(..SLOT_BYTES)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        if u32_at(0) != CHECKPOINT_MAGIC || u32_at(4) != 1 {
            return None;
        }
        if crc32fast::hash(&b[..60]) != u32_at(60) {
            return None;
        }
        Some(Checkpoint {
            sequence: u64_at(8),
            log_synced_offset: u64_at(16),
            cq_offset: u64_at(24),
            min_offset: u64_at(32),
        })
    }

    /// The newest valid checkpoint among the two slots of a file's first bytes.
    pub fn newest(file_head: &[u8]) -> Option<Self> {
        let a = file_head.get(..SLOT_BYTES).and_then(Self::decode);
        let b = file_head
            .get(SLOT_BYTES..2 * SLOT_BYTES)
            .and_then(Self::decode);
        match (a, b) {
            (Some(a), Some(b)) => Some(if a.sequence >= b.sequence { a } else { b }),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_valid_slot_wins() {
        let c1 = Checkpoint {
            sequence: 1,
            log_synced_offset: 100,
            cq_offset: 90,
            min_offset: 0,
        };
        let c2 = Checkpoint {
            sequence: 2,
            log_synced_offset: 200,
            ..c1
        };
        let mut file = vec![0u8; 128];
        file[c1.slot() as usize..][..64].copy_from_slice(&c1.encode());
        assert_eq!(Checkpoint::newest(&file), Some(c1));
        file[c2.slot() as usize..][..64].copy_from_slice(&c2.encode());
        assert_eq!(Checkpoint::newest(&file), Some(c2));
        // Tear slot of c2: c1 is still there.
        file[c2.slot() as usize + 20] ^= 1;
        assert_eq!(Checkpoint::newest(&file), Some(c1));
        assert_eq!(Checkpoint::newest(&[0u8; 128]), None);
    }
}
