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

/// Builds bodies of one size from a template (one copy per message, no formatting; a
/// send's bodies share one buffer).
#[derive(Debug, Clone)]
pub struct BodyMaker {
    template: Vec<u8>,
}

impl BodyMaker {
    /// `size` must be at least [`HEAD_BYTES`] (the argument parser checks).
    pub fn new(size: usize) -> Self {
        Self::with_filler(size, false)
    }

    /// With `random`, the filler is a fixed pseudo-random byte stream (xorshift64), which
    /// does not compress; else the repeating alphabet, which does.
    pub fn with_filler(size: usize, random: bool) -> Self {
        let size = size.max(HEAD_BYTES);
        let mut template = vec![0u8; size];
        template[..MAGIC.len()].copy_from_slice(MAGIC);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for (i, b) in template[HEAD_BYTES..].iter_mut().enumerate() {
            *b = if random {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            } else {
                b'a' + (i % 26) as u8
            };
        }
        BodyMaker { template }
    }

    pub fn size(&self) -> usize {
        self.template.len()
    }

    /// One body (transactions send one message at a time).
    pub fn body(&self, head: Head) -> Bytes {
        self.bodies(head, 1)
    }

    /// The bodies of `n` messages of one producer from sequence `first.seq` on, one after
    /// another in one buffer (one allocation): body `i` is bytes `i * size .. (i + 1) * size`.
    pub fn bodies(&self, first: Head, n: usize) -> Bytes {
        self.bodies_reusing(first, n, None)
    }

    /// [`BodyMaker::bodies`] written over `old` (an earlier result of this maker) when
    /// nothing else holds it and it has the size: then only the heads are written (the
    /// filler is already there), nothing is allocated or copied.
    pub fn bodies_reusing(&self, first: Head, n: usize, old: Option<Bytes>) -> Bytes {
        let size = self.template.len();
        if let Some(Ok(mut all)) = old.map(Bytes::try_into_mut) {
            if all.len() == n * size {
                for (i, b) in all.chunks_mut(size).enumerate() {
                    b[8..16].copy_from_slice(&first.producer.to_be_bytes());
                    b[16..24].copy_from_slice(&(first.seq + i as u64).to_be_bytes());
                    b[24..32].copy_from_slice(&first.send_us.to_be_bytes());
                }
                return all.freeze();
            }
        }
        let mut all = Vec::with_capacity(n * size);
        for i in 0..n as u64 {
            let at = all.len();
            all.extend_from_slice(&self.template);
            let b = &mut all[at..];
            b[8..16].copy_from_slice(&first.producer.to_be_bytes());
            b[16..24].copy_from_slice(&(first.seq + i).to_be_bytes());
            b[24..32].copy_from_slice(&first.send_us.to_be_bytes());
        }
        Bytes::from(all)
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
    fn bodies_of_a_send() {
        let m = BodyMaker::new(40);
        let first = Head {
            producer: 7,
            seq: 100,
            send_us: 5,
        };
        let all = m.bodies(first, 3);
        assert_eq!(all.len(), 120);
        for (i, body) in all.chunks(40).enumerate() {
            let want = Head {
                seq: 100 + i as u64,
                ..first
            };
            assert_eq!(parse(body), Some(want));
            assert_eq!(&body[32..], &m.template[32..]);
        }
        // Reused when nothing else holds it: same bytes as a fresh build.
        let ptr = all.as_ptr();
        let next = Head { seq: 103, ..first };
        let again = m.bodies_reusing(next, 3, Some(all));
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(again, m.bodies(next, 3));
        // Not reused while a slice of it is alive, nor at another count.
        let held = again.slice(0..40);
        let fresh = m.bodies_reusing(first, 3, Some(again));
        assert_ne!(fresh.as_ptr(), held.as_ptr());
        assert_eq!(fresh, m.bodies(first, 3));
        assert_eq!(m.bodies_reusing(first, 2, Some(fresh)), m.bodies(first, 2));
    }

    #[test]
    fn foreign_bodies_are_not_parsed() {
        assert_eq!(parse(b"hello"), None);
        assert_eq!(parse(&[0u8; 64]), None);
        assert_eq!(BodyMaker::new(1).size(), HEAD_BYTES);
    }
}
