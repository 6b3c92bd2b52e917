//! The body of SEND_BATCH_MESSAGE: RocketMQ's `MessageDecoder.encodeMessages`, the batch's
//! messages back to back, each carrying only what differs per message (topic, queue and
//! the rest come from the request header). Big-endian:
//!
//! | Offset          | Bytes | Field            | Rule here                                     |
//! |-----------------|-------|------------------|-----------------------------------------------|
//! | 0               | 4     | totalSize        | must equal 22 + bodyLen + propertiesLength    |
//! | 4               | 4     | magicCode        | ignored (clients write 0)                     |
//! | 8               | 4     | bodyCRC          | ignored (clients write 0; the broker computes)|
//! | 12              | 4     | flag             | the application's flag                        |
//! | 16              | 4     | bodyLen          | 0..=[`BODY_BYTES_MAX`]                        |
//! | 20              | n     | body             |                                               |
//! | 20+n            | 2     | propertiesLength | 0..=[`PROPERTIES_BYTES_MAX`] (a Java short)   |
//! | 22+n            | p     | properties       | [`crate::properties`] text form, kept as bytes|
//!
//! Java's broker reads totalSize and skips it; this decoder requires it to agree, so a
//! misframed batch is refused instead of read at the wrong offsets (every known client
//! writes the exact size). The decoder borrows: a message is slices of the body. At most
//! [`BATCH_MESSAGES_MAX`] messages; the next one is an error. The properties are not checked
//! as UTF-8 here: the log keeps them as bytes, as it does a native send's and as RocketMQ's
//! broker does, and readers of properties check their text where they use it.

use crate::error::{Result, WireError};
use crate::properties::PROPERTIES_BYTES_MAX;
use crate::record::BODY_BYTES_MAX;

/// Fixed bytes of one batch entry: totalSize, magicCode, bodyCRC, flag, bodyLen,
/// propertiesLength.
pub const ENTRY_FIXED_BYTES: usize = 4 + 4 + 4 + 4 + 4 + 2;
/// Most messages in one batch (ringmq's native batch limit, `node` `BATCH_RECORDS_MAX`).
pub const BATCH_MESSAGES_MAX: usize = 4096;

const _: () = assert!(ENTRY_FIXED_BYTES == 22);
const _: () = assert!(BODY_BYTES_MAX <= i32::MAX as usize);
const _: () = assert!(PROPERTIES_BYTES_MAX == i16::MAX as usize);

/// One message of a batch, borrowed from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMessage<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    /// In [`crate::properties`] text form, as sent (not checked as UTF-8); read it with
    /// `properties::iter` or `get`.
    pub properties: &'a [u8],
}

/// The messages of a SEND_BATCH_MESSAGE body, in order. Yields an error (and then ends) at
/// the first malformed entry or at message [`BATCH_MESSAGES_MAX`] + 1.
pub fn iter(body: &[u8]) -> BatchIter<'_> {
    BatchIter {
        rest: body,
        offset: 0,
        count: 0,
        failed: false,
    }
}

/// Checks a whole batch body without keeping anything: the message count, or the first
/// error. Lets a caller refuse a bad batch before it stores any of it.
pub fn check(body: &[u8]) -> Result<usize> {
    iter(body).try_fold(0, |n, m| m.map(|_| n + 1))
}

/// How many entries `body` holds as their totalSize fields chain, checking nothing else (at
/// most [`BATCH_MESSAGES_MAX`] + 1): a size hint for a buffer, exact when the body is
/// well-formed. Read the entries with [`iter`], which checks them.
pub fn count_hint(body: &[u8]) -> usize {
    let mut at = 0usize;
    let mut n = 0;
    while n <= BATCH_MESSAGES_MAX {
        let Some(total) = body.get(at..at + 4).map(|b| u32_at(b, 0) as usize) else {
            break;
        };
        if total < ENTRY_FIXED_BYTES {
            break;
        }
        n += 1;
        at = at.saturating_add(total);
    }
    n
}

/// Bytes [`encode`] writes for one message.
pub fn encoded_len(body_len: usize, properties_len: usize) -> usize {
    ENTRY_FIXED_BYTES + body_len + properties_len
}

/// Appends one message to a batch body (as `MessageDecoder.encodeMessage`: magic code and
/// body CRC 0). Fails, writing nothing, if the body or properties are over their maximum.
pub fn encode(
    out: &mut Vec<u8>,
    flag: i32,
    body: &[u8],
    properties: impl AsRef<[u8]>,
) -> Result<()> {
    let properties = properties.as_ref();
    if body.len() > BODY_BYTES_MAX {
        return Err(WireError::TooLong {
            what: "batch message body",
            len: body.len(),
            max: BODY_BYTES_MAX,
        });
    }
    if properties.len() > PROPERTIES_BYTES_MAX {
        return Err(WireError::TooLong {
            what: "batch message properties",
            len: properties.len(),
            max: PROPERTIES_BYTES_MAX,
        });
    }
    let total = encoded_len(body.len(), properties.len());
    let total = u32::try_from(total).expect("under BODY_BYTES_MAX + 64 KiB, which fits");
    let body_len = u32::try_from(body.len()).expect("checked against BODY_BYTES_MAX");
    let props_len = u16::try_from(properties.len()).expect("checked against a Java short");
    out.reserve(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&flag.to_be_bytes());
    out.extend_from_slice(&body_len.to_be_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&props_len.to_be_bytes());
    out.extend_from_slice(properties);
    Ok(())
}

/// Iterator returned by [`iter`].
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    rest: &'a [u8],
    /// Offset of `rest` in the whole body, for errors.
    offset: usize,
    count: usize,
    failed: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchMessage<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let item = self.entry();
        self.failed = item.is_err();
        Some(item)
    }
}

impl<'a> BatchIter<'a> {
    /// Parses the entry at the front of `rest` and steps past it.
    fn entry(&mut self) -> Result<BatchMessage<'a>> {
        if self.count == BATCH_MESSAGES_MAX {
            return Err(WireError::TooLong {
                what: "batch message count",
                len: self.count + 1,
                max: BATCH_MESSAGES_MAX,
            });
        }
        let rest = self.rest;
        let fixed = rest.get(..20).ok_or(WireError::Truncated {
            what: "batch message header",
            need: 20,
            have: rest.len(),
        })?;
        let total = u32_at(fixed, 0) as usize;
        let flag = i32::from_be_bytes([fixed[12], fixed[13], fixed[14], fixed[15]]);
        let body_len = u32_at(fixed, 16) as usize;
        if body_len > BODY_BYTES_MAX {
            return Err(WireError::TooLong {
                what: "batch message body",
                len: body_len,
                max: BODY_BYTES_MAX,
            });
        }
        // 20 + body_len + 2 cannot overflow: body_len is at most BODY_BYTES_MAX.
        let props_at = 20 + body_len;
        let props_len_bytes = rest
            .get(props_at..props_at + 2)
            .ok_or(WireError::Truncated {
                what: "batch message",
                need: props_at + 2,
                have: rest.len(),
            })?;
        let props_len = i16::from_be_bytes([props_len_bytes[0], props_len_bytes[1]]);
        let props_len = usize::try_from(props_len).map_err(|_| WireError::Invalid {
            what: "batch message propertiesLength",
            detail: "negative",
        })?;
        let actual = encoded_len(body_len, props_len);
        if total != actual {
            return Err(WireError::SizeMismatch {
                declared: total,
                actual,
            });
        }
        let entry = rest.get(..actual).ok_or(WireError::Truncated {
            what: "batch message",
            need: actual,
            have: rest.len(),
        })?;
        let message = BatchMessage {
            flag,
            body: &entry[20..props_at],
            properties: &entry[props_at + 2..],
        };
        self.rest = &rest[actual..];
        self.offset += actual;
        self.count += 1;
        Ok(message)
    }

    /// Offset in the whole body of the next entry (where an error was found, after one).
    pub fn offset(&self) -> usize {
        self.offset
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_count_hint_follows_the_sizes() {
        let mut body = Vec::new();
        assert_eq!(super::count_hint(&body), 0);
        for i in 0..5 {
            super::encode(&mut body, 0, &vec![7u8; i * 10], "K\u{1}v\u{2}").expect("encodes");
        }
        assert_eq!(super::count_hint(&body), 5);
        assert_eq!(super::check(&body), Ok(5));
        // A cut body: the last entry still counts (its size is there), the check refuses it.
        assert_eq!(super::count_hint(&body[..body.len() - 1]), 5);
        assert!(super::check(&body[..body.len() - 1]).is_err());
        // A size below the fixed part ends the hint.
        body[0..4].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(super::count_hint(&body), 0);
    }

    use super::*;

    fn batch(items: &[(i32, &[u8], &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (flag, body, props) in items {
            encode(&mut out, *flag, body, props).expect("encodes");
        }
        out
    }

    #[test]
    fn java_layout() {
        // MessageDecoder.encodeMessage of flag 7, body "hi", properties "K\u1v\u2".
        let bytes = batch(&[(7, b"hi", "K\u{1}v\u{2}")]);
        let want: &[u8] = &[
            0, 0, 0, 28, // totalSize
            0, 0, 0, 0, // magicCode
            0, 0, 0, 0, // bodyCRC
            0, 0, 0, 7, // flag
            0, 0, 0, 2, b'h', b'i', // body
            0, 4, b'K', 1, b'v', 2, // properties
        ];
        assert_eq!(bytes, want);
        let got: Vec<_> = iter(&bytes).collect::<Result<_>>().expect("decodes");
        assert_eq!(
            got,
            vec![BatchMessage {
                flag: 7,
                body: b"hi",
                properties: b"K\x01v\x02"
            }]
        );
    }

    #[test]
    fn round_trip_and_check() {
        let items: [(i32, &[u8], &str); 3] =
            [(0, b"", ""), (-1, b"abc", "A\u{1}1\u{2}"), (5, b"x", "")];
        let bytes = batch(&items);
        assert_eq!(check(&bytes), Ok(3));
        for (m, (flag, body, props)) in iter(&bytes).zip(items) {
            let m = m.expect("decodes");
            assert_eq!(
                (m.flag, m.body, m.properties),
                (flag, body, props.as_bytes())
            );
        }
        assert_eq!(check(&[]), Ok(0));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = batch(&[(1, b"body", "P\u{1}q\u{2}"), (2, b"b2", "")]);
        let first = encoded_len(4, 4);
        for cut in 1..bytes.len() {
            let r = check(&bytes[..cut]);
            if cut == first {
                assert_eq!(r, Ok(1));
            } else {
                assert!(r.is_err(), "cut at {cut} decoded");
            }
        }
    }

    #[test]
    fn bad_lengths_are_errors() {
        let good = batch(&[(1, b"body", "")]);
        let mut wrong_total = good.clone();
        wrong_total[3] += 1;
        assert!(matches!(
            check(&wrong_total),
            Err(WireError::SizeMismatch { .. })
        ));
        let mut huge_body = good.clone();
        huge_body[16..20].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(check(&huge_body), Err(WireError::TooLong { .. })));
        let mut negative_props = good.clone();
        negative_props[24..26].copy_from_slice(&(-1i16).to_be_bytes());
        assert!(matches!(
            check(&negative_props),
            Err(WireError::Invalid { .. })
        ));
        // Properties are bytes: text that is not UTF-8 is kept as sent, as the log keeps it.
        let mut not_utf8 = batch(&[(1, b"", "ab")]);
        let last = not_utf8.len() - 1;
        not_utf8[last] = 0xff;
        let got: Vec<_> = iter(&not_utf8).collect::<Result<_>>().expect("a batch");
        assert_eq!(got[0].properties, b"a\xff");
        // After an error the iterator ends.
        let mut it = iter(&wrong_total);
        assert!(matches!(it.next(), Some(Err(_))));
        assert!(it.next().is_none());
    }

    #[test]
    fn count_is_capped() {
        let mut bytes = Vec::new();
        for _ in 0..BATCH_MESSAGES_MAX {
            encode(&mut bytes, 0, b"", "").expect("encodes");
        }
        assert_eq!(check(&bytes), Ok(BATCH_MESSAGES_MAX));
        encode(&mut bytes, 0, b"", "").expect("encodes");
        assert!(matches!(
            check(&bytes),
            Err(WireError::TooLong {
                what: "batch message count",
                ..
            })
        ));
    }

    #[test]
    fn encode_refuses_oversized_parts() {
        let mut out = Vec::new();
        let props = "k".repeat(PROPERTIES_BYTES_MAX + 1);
        assert!(encode(&mut out, 0, b"", &props).is_err());
        assert!(out.is_empty());
    }
}
