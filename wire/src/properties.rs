//! Message properties in RocketMQ's text form: `key\u{1}value\u{2}key\u{1}value\u{2}…`
//! (NAME_VALUE_SEPARATOR = 0x01, PROPERTY_SEPARATOR = 0x02), at most 32,767 bytes because the
//! record stores the length in a signed 16-bit field.
//!
//! Keys and values may not contain either separator; encoding rejects them rather than
//! producing properties that would decode differently.

use crate::error::{Result, WireError};

/// Separates a key from its value.
pub const NAME_VALUE_SEPARATOR: u8 = 0x01;
/// Ends each key/value pair.
pub const PROPERTY_SEPARATOR: u8 = 0x02;
/// Largest encoded properties block (the record's length field is a Java `short`).
pub const PROPERTIES_BYTES_MAX: usize = i16::MAX as usize;

/// Property keys RocketMQ defines (`MessageConst`) that ringmq reads or writes.
pub mod keys {
    /// Space-separated message keys, indexed for query by key.
    pub const KEYS: &str = "KEYS";
    /// The message tag (one tag; `MULTI_TAGS` is not produced by ringmq).
    pub const TAGS: &str = "TAGS";
    /// The client-generated unique id.
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    /// Delay level 1..=18.
    pub const DELAY: &str = "DELAY";
    /// Absolute delivery time in milliseconds since the epoch.
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// Delivery after this many seconds (from the broker's store time).
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// Delivery after this many milliseconds (from the broker's store time).
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// Set by the broker on a scheduled message: when it is (or was) due, ms since the
    /// epoch, after precision rounding. Kept on the delivered message.
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    /// Set by the broker on a delivered scheduled message: the message id the producer got
    /// back (the scheduled record's offset id).
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// Original topic of a retried or delayed message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Original queue of a retried or delayed message.
    pub const REAL_QID: &str = "REAL_QID";
    /// Transaction half-message marker.
    pub const TRAN_MSG: &str = "TRAN_MSG";
    /// Ordered-send sharding key.
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    /// How many times the message was reconsumed.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// Maximum reconsume count before the dead-letter topic.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// The producer group of a half message (transactions).
    pub const PRODUCER_GROUP: &str = "PGROUP";
    /// The application's transaction id of a half message (RocketMQ `__transactionId__`).
    pub const TRANSACTION_ID: &str = "__transactionId__";
    /// Check-backs made for a half message before it went to the check-max topic.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// The topic a retried or dead-lettered message was first consumed from.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Request-reply: matches a reply to its request (set by the requester, copied into the
    /// reply).
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// Request-reply: the client id of the requester, whose connection the broker pushes
    /// the reply to.
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// Request-reply: how long the requester waits, ms (informational; copied into the
    /// reply).
    pub const TTL: &str = "TTL";
    /// `reply` on a reply message ([`crate::reply::REPLY_MESSAGE_FLAG`]).
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    /// The cluster of the broker a request was sent to: its replies go to that cluster's
    /// reply topic ([`crate::reply::reply_topic`]).
    pub const CLUSTER: &str = "CLUSTER";
}

/// Encodes `pairs` into `out` in RocketMQ's property format. Fails if a key or value
/// contains a separator, a key is empty, or the result would exceed [`PROPERTIES_BYTES_MAX`].
pub fn encode<'a, I>(pairs: I, out: &mut Vec<u8>) -> Result<()>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let start = out.len();
    for (key, value) in pairs {
        if key.is_empty() {
            return Err(WireError::Invalid {
                what: "property key",
                detail: "empty",
            });
        }
        if has_separator(key) || has_separator(value) {
            return Err(WireError::Invalid {
                what: "property",
                detail: "contains a 0x01 or 0x02 separator byte",
            });
        }
        out.reserve(key.len() + value.len() + 2);
        out.extend_from_slice(key.as_bytes());
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(value.as_bytes());
        out.push(PROPERTY_SEPARATOR);
    }
    let len = out.len() - start;
    if len > PROPERTIES_BYTES_MAX {
        out.truncate(start);
        return Err(WireError::TooLong {
            what: "properties",
            len,
            max: PROPERTIES_BYTES_MAX,
        });
    }
    Ok(())
}

/// Iterates over the pairs of an encoded properties block. Malformed pairs (no name/value
/// separator, or not UTF-8) end the iteration with an error item.
pub fn iter(block: &[u8]) -> PropertyIter<'_> {
    PropertyIter { rest: block }
}

/// Looks up one property by key: the value of the first pair whose key is `key`, if that
/// value is UTF-8. Keys are compared as bytes and only the value found is validated, so a
/// lookup costs one pass over the block without decoding the other pairs (it runs for
/// every record on the send path). The scan ends at a pair without a name/value separator,
/// as [`iter`] does.
pub fn get<'a>(block: &'a [u8], key: &str) -> Option<&'a str> {
    raw_pairs(block)
        .find(|(k, _)| *k == key.as_bytes())
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// The pairs of a block as raw bytes (not checked to be UTF-8), up to the first pair
/// without a name/value separator. For scans that compare keys against known ASCII names.
pub fn raw_pairs(block: &[u8]) -> RawPairs<'_> {
    RawPairs { rest: block }
}

/// Iterator returned by [`raw_pairs`].
#[derive(Debug, Clone)]
pub struct RawPairs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for RawPairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let end = memchr(PROPERTY_SEPARATOR, self.rest).unwrap_or(self.rest.len());
        let pair = &self.rest[..end];
        self.rest = self.rest.get(end + 1..).unwrap_or(&[]);
        let Some(split) = memchr(NAME_VALUE_SEPARATOR, pair) else {
            self.rest = &[];
            return None;
        };
        Some((&pair[..split], &pair[split + 1..]))
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

/// Iterator returned by [`iter`].
#[derive(Debug, Clone)]
pub struct PropertyIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for PropertyIter<'a> {
    type Item = Result<(&'a str, &'a str)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let end = memchr(PROPERTY_SEPARATOR, self.rest).unwrap_or(self.rest.len());
        let pair = &self.rest[..end];
        self.rest = self.rest.get(end + 1..).unwrap_or(&[]);
        let Some(split) = memchr(NAME_VALUE_SEPARATOR, pair) else {
            self.rest = &[];
            return Some(Err(WireError::Invalid {
                what: "property",
                detail: "missing the 0x01 name/value separator",
            }));
        };
        let key = std::str::from_utf8(&pair[..split]);
        let value = std::str::from_utf8(&pair[split + 1..]);
        match (key, value) {
            (Ok(k), Ok(v)) => Some(Ok((k, v))),
            _ => {
                self.rest = &[];
                Some(Err(WireError::NotUtf8 { what: "property" }))
            }
        }
    }
}

/// Whether `s` holds 0x01 or 0x02. No early exit, so the loop vectorizes: keys and values
/// are short, and this runs for every pair a producer encodes.
fn has_separator(s: &str) -> bool {
    const _: () = assert!(NAME_VALUE_SEPARATOR == 1 && PROPERTY_SEPARATOR == 2);
    s.bytes()
        .fold(false, |found, b| found | (b.wrapping_sub(1) < 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_lookup() {
        let mut out = Vec::new();
        encode([("TAGS", "TagA"), ("KEYS", "k1 k2")], &mut out).unwrap();
        assert_eq!(out, b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02");
        let pairs: Vec<_> = iter(&out).map(|p| p.unwrap()).collect();
        assert_eq!(pairs, vec![("TAGS", "TagA"), ("KEYS", "k1 k2")]);
        assert_eq!(get(&out, "KEYS"), Some("k1 k2"));
        assert_eq!(get(&out, "NOPE"), None);
    }

    #[test]
    fn get_compares_keys_as_bytes_and_checks_only_the_value_found() {
        let block = b"A\x01\xff\x02TAGS\x01t\x02BAD\x01\xfe\x02";
        assert_eq!(get(block, "TAGS"), Some("t"));
        assert_eq!(
            get(block, "BAD"),
            None,
            "a value that is not UTF-8 is not returned"
        );
        assert_eq!(get(b"A\x01x\x02NOSEP\x02TAGS\x01t\x02", "TAGS"), None);
        let raw: Vec<_> = raw_pairs(b"K\x01\x02L\x01v").collect();
        assert_eq!(raw, vec![(&b"K"[..], &b""[..]), (&b"L"[..], &b"v"[..])]);
    }

    #[test]
    fn rejects_separators_and_oversize() {
        let mut out = Vec::new();
        assert!(encode([("a\x01", "b")], &mut out).is_err());
        assert!(encode([("a", "b\x02")], &mut out).is_err());
        let big = "x".repeat(PROPERTIES_BYTES_MAX);
        assert!(matches!(
            encode([("k", big.as_str())], &mut out),
            Err(WireError::TooLong { .. })
        ));
        assert!(
            out.is_empty(),
            "a failed encode leaves the buffer as it was"
        );
    }

    #[test]
    fn malformed_block_is_an_error_not_a_panic() {
        let items: Vec<_> = iter(b"novalue\x02").collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].is_err());
        let items: Vec<_> = iter(b"k\x01\xff\x02").collect();
        assert!(items[0].is_err());
    }
}
