//! The head every perf message body starts with, so a consumer can tell who sent a message,
//! in which order, and when, without touching properties (cheap on the hot path):
//!
//! | offset | field      | bytes | meaning                                                  |
//! |--------|------------|-------|----------------------------------------------------------|
//! | 0      | magic      | 8     | `ringmqP1`                                               |
//! | 8      | producer   | 8     | producer id (run id in the high 48 bits, index below)    |
//! | 16     | sequence   | 8     | the producer's sequence number, from 0                   |
//! | 24     | send_us    | 8     | send time, µs since the Unix epoch (the *intended* send time under `--rate`) |
//! | 32     | filler     | rest  | `size - 32` bytes of a fixed pattern                     |
//!
//! Big-endian, like every other byte layout in ringmq. Bodies that do not start with the
//! magic are someone else's messages: counted, never verified.

use bytes::Bytes;

pub const MAGIC: &[u8; 8] = b"ringmqP1";
/// Bytes of the head; the smallest `--size`.
pub const HEAD_BYTES: usize = 32;

const _: () = assert!(HEAD_BYTES == MAGIC.len() + 8 + 8 + 8);

/// What the head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub producer: u64,
    pub seq: u64,
    pub send_us: u64,
}

/// Builds bodies of one size from a template (one copy per message, no formatting).
#[derive(Debug, Clone)]
pub struct BodyMaker {
    template: Vec<u8>,
}

impl BodyMaker {
    /// `size` must be at least [`HEAD_BYTES`] (the argument parser checks).
    pub fn new(size: usize) -> Self {
        let size = size.max(HEAD_BYTES);
        let mut template = vec![0u8; size];
        template[..MAGIC.len()].copy_from_slice(MAGIC);
        for (i, b) in template[HEAD_BYTES..].iter_mut().enumerate() {
            *b = b'a' + (i % 26) as u8;
        }
        BodyMaker { template }
    }

    pub fn size(&self) -> usize {
        self.template.len()
    }

    pub fn body(&self, head: Head) -> Bytes {
        let mut b = self.template.clone();
        b[8..16].copy_from_slice(&head.producer.to_be_bytes());
        b[16..24].copy_from_slice(&head.seq.to_be_bytes());
        b[24..32].copy_from_slice(&head.send_us.to_be_bytes());
        Bytes::from(b)
    }
}

/// The head of a perf body, or `None` for a body perf did not write.
pub fn parse(body: &[u8]) -> Option<Head> {
    if body.len() < HEAD_BYTES || &body[..MAGIC.len()] != MAGIC {
        return None;
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&body[at..at + 8]);
        u64::from_be_bytes(w)
    };
    Some(Head {
        producer: word(8),
        seq: word(16),
        send_us: word(24),
    })
}

/// Wall-clock µs since the Unix epoch (the clock producers and consumers share).
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trip() {
        let m = BodyMaker::new(100);
        let h = Head {
            producer: 0xABCD_0001,
            seq: 42,
            send_us: 1_700_000_000_000_000,
        };
        let body = m.body(h);
        assert_eq!(body.len(), 100);
        assert_eq!(parse(&body), Some(h));
    }

    #[test]
    fn foreign_bodies_are_not_parsed() {
        assert_eq!(parse(b"hello"), None);
        assert_eq!(parse(&[0u8; 64]), None);
        assert_eq!(BodyMaker::new(1).size(), HEAD_BYTES);
    }
}
