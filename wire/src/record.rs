//! The message record: RocketMQ's CommitLog record, field for field, big-endian. The same
//! bytes are encoded by the producer, stored by the broker, shipped by replication and decoded
//! by the consumer. The broker patches its own fields in place and never re-encodes.
//!
//! | # | field                     | bytes            | offset (IPv4 hosts, v1 topic) |
//! |---|---------------------------|------------------|-------------------------------|
//! | 1 | TOTALSIZE                 | 4                | 0                             |
//! | 2 | MAGICCODE                 | 4                | 4                             |
//! | 3 | BODYCRC                   | 4                | 8                             |
//! | 4 | QUEUEID                   | 4                | 12                            |
//! | 5 | FLAG                      | 4                | 16                            |
//! | 6 | QUEUEOFFSET               | 8                | 20   (broker-owned)           |
//! | 7 | PHYSICALOFFSET            | 8                | 28   (broker-owned)           |
//! | 8 | SYSFLAG                   | 4                | 36                            |
//! | 9 | BORNTIMESTAMP             | 8                | 40                            |
//! |10 | BORNHOST                  | 8 (v4) / 20 (v6) | 48                            |
//! |11 | STORETIMESTAMP            | 8                | 56   (broker-owned)           |
//! |12 | STOREHOSTADDRESS          | 8 (v4) / 20 (v6) | 64   (broker-owned)           |
//! |13 | RECONSUMETIMES            | 4                | 72                            |
//! |14 | PreparedTransactionOffset | 8                | 76                            |
//! |15 | BODY                      | 4 + len          | 84                            |
//! |16 | TOPIC                     | 1 + len (v1) / 2 + len (v2) | 88 + body          |
//! |17 | PROPERTIES                | 2 + len          | after topic                   |
//!
//! Fixed overhead is 91 bytes with IPv4 hosts and a v1 topic; each IPv6 host adds 12, a v2
//! topic length adds 1. A host is its IP bytes followed by the port as a 4-byte integer.
//! MAGICCODE is [`MAGIC_V1`] (1-byte topic length) or [`MAGIC_V2`] (2-byte, for topics over
//! 127 bytes). BODYCRC is `crc32(body) & 0x7FFF_FFFF`. A segment's unused tail is one BLANK
//! entry: `[TOTALSIZE = rest of segment][MAGICCODE = BLANK_MAGIC]`, 8 bytes written.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::BufMut;

use crate::error::{Result, WireError};
use crate::properties;

/// Magic of a record whose topic length is one byte.
pub const MAGIC_V1: u32 = 0xDAA3_20A7;
/// Magic of a record whose topic length is two bytes.
pub const MAGIC_V2: u32 = 0xDAA3_20AB;
/// Magic of the BLANK entry that fills the end of a CommitLog segment.
pub const BLANK_MAGIC: u32 = 0xCBD4_3194;
/// Bytes actually written for a BLANK entry (TOTALSIZE and MAGICCODE).
pub const BLANK_BYTES: usize = 8;
/// Fixed part of a record with IPv4 hosts and a v1 topic length, as RocketMQ computes it.
pub const RECORD_FIXED_BYTES: usize = 91;
/// Extra bytes for each IPv6 host.
pub const HOST_V6_EXTRA_BYTES: usize = 12;
/// Largest body (RocketMQ's `maxMessageSize` default, 4 MiB).
pub const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Longest topic that fits a v1 record.
pub const TOPIC_V1_BYTES_MAX: usize = 127;
/// Longest topic the codec accepts (v2 records; the broker may allow less).
pub const TOPIC_BYTES_MAX: usize = i16::MAX as usize;
/// Largest record the codec accepts: every variable part at its maximum, IPv6 hosts.
pub const RECORD_BYTES_MAX: usize = RECORD_FIXED_BYTES
    + 2 * HOST_V6_EXTRA_BYTES
    + 1
    + BODY_BYTES_MAX
    + TOPIC_BYTES_MAX
    + properties::PROPERTIES_BYTES_MAX;
/// Smallest valid record: the fixed part with empty body, topic and properties.
pub const RECORD_BYTES_MIN: usize = RECORD_FIXED_BYTES;

/// Byte positions of the fields that never move (they precede BORNHOST).
pub mod pos {
    pub const TOTAL_SIZE: usize = 0;
    pub const MAGIC: usize = 4;
    pub const BODY_CRC: usize = 8;
    pub const QUEUE_ID: usize = 12;
    pub const FLAG: usize = 16;
    pub const QUEUE_OFFSET: usize = 20;
    pub const PHYSICAL_OFFSET: usize = 28;
    pub const SYS_FLAG: usize = 36;
    pub const BORN_TIMESTAMP: usize = 40;
    pub const BORN_HOST: usize = 48;
}

/// SYSFLAG bits (`MessageSysFlag`).
pub mod sys_flag {
    /// The body is compressed, as [`COMPRESSION_MASK`] says (see [`super::compression`]).
    pub const COMPRESSED: u32 = 0x1;
    pub const MULTI_TAGS: u32 = 0x2;
    pub const TRANSACTION_MASK: u32 = 0xC;
    pub const TRANSACTION_NOT_TYPE: u32 = 0x0;
    pub const TRANSACTION_PREPARED_TYPE: u32 = 0x4;
    pub const TRANSACTION_COMMIT_TYPE: u32 = 0x8;
    pub const TRANSACTION_ROLLBACK_TYPE: u32 = 0xC;
    pub const BORNHOST_V6: u32 = 0x10;
    pub const STOREHOST_V6: u32 = 0x20;
    pub const NEED_UNWRAP: u32 = 0x40;
    pub const INNER_BATCH: u32 = 0x80;
    /// Compression type, bits 8..10 (`COMPRESSION_TYPE_COMPARATOR`): meaningful only with
    /// [`COMPRESSED`]; 0 there means zlib (RocketMQ 4.x producers set no type).
    pub const COMPRESSION_MASK: u32 = 0x700;
    /// LZ4 frame format (`COMPRESSION_LZ4_TYPE`).
    pub const COMPRESSION_LZ4: u32 = 0x100;
    /// Zstandard frames (`COMPRESSION_ZSTD_TYPE`).
    pub const COMPRESSION_ZSTD: u32 = 0x200;
    /// zlib stream (`COMPRESSION_ZLIB_TYPE`).
    pub const COMPRESSION_ZLIB: u32 = 0x300;
}

/// How a record's body is compressed (RocketMQ's `CompressionType`). The codec only names
/// it: the broker stores and serves compressed bodies as sent, and consumers inflate them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// A zlib stream (RFC 1950), `java.util.zip.Deflater`'s output.
    Zlib,
    /// LZ4 frames, lz4-java's `LZ4FrameOutputStream`'s output.
    Lz4,
    /// Zstandard frames, zstd-jni's `ZstdOutputStream`'s output.
    Zstd,
}

/// The compression of a body whose record has `sys_flag` (RocketMQ's
/// `MessageSysFlag.getCompressionType`): `None` without [`sys_flag::COMPRESSED`]; zlib when
/// no type bits are set (RocketMQ 4.x producers); an error for the types 4..=7, which
/// RocketMQ does not define.
pub fn compression(sys_flag: u32) -> Result<Option<Compression>> {
    if sys_flag & sys_flag::COMPRESSED == 0 {
        return Ok(None);
    }
    match sys_flag & sys_flag::COMPRESSION_MASK {
        0 | sys_flag::COMPRESSION_ZLIB => Ok(Some(Compression::Zlib)),
        sys_flag::COMPRESSION_LZ4 => Ok(Some(Compression::Lz4)),
        sys_flag::COMPRESSION_ZSTD => Ok(Some(Compression::Zstd)),
        other => Err(WireError::UnknownCode {
            what: "compression type",
            code: other >> 8,
        }),
    }
}

// Layout facts the rest of the code relies on.
const _: () = assert!(
    pos::BORN_HOST + 8 == 56,
    "STORETIMESTAMP follows an IPv4 BORNHOST"
);
const _: () = assert!(
    RECORD_FIXED_BYTES == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
);
const _: () = assert!(RECORD_BYTES_MAX < i32::MAX as usize);
const _: () = assert!(
    sys_flag::COMPRESSION_MASK == 0x7 << 8,
    "RocketMQ's COMPRESSION_TYPE_COMPARATOR: the type is bits 8..10"
);

/// A message as a producer encodes it. Broker-owned fields (queue offset, physical offset,
/// store timestamp, store host) are written as zero; `store_host_v6` only sizes that slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub topic: &'a str,
    pub queue_id: u32,
    pub flag: i32,
    /// SYSFLAG bits other than the host-family bits, which the encoder derives.
    pub sys_flag: u32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    /// Reserve a 20-byte (IPv6) STOREHOSTADDRESS slot instead of 8 bytes.
    pub store_host_v6: bool,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: u64,
    pub body: &'a [u8],
    /// Encoded properties (see [`crate::properties`]).
    pub properties: &'a [u8],
}

/// The fields the broker writes into a stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerFields {
    pub queue_offset: u64,
    pub physical_offset: u64,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
}

/// A decoded record borrowing from the buffer it was decoded from (no copy of the body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The whole record, TOTALSIZE included.
    pub bytes: &'a [u8],
    pub body_crc: u32,
    pub queue_id: u32,
    pub flag: i32,
    pub queue_offset: u64,
    pub physical_offset: u64,
    pub sys_flag: u32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: u64,
    pub body: &'a [u8],
    pub topic: &'a str,
    pub properties: &'a [u8],
}

/// One entry of a CommitLog segment: a record or the BLANK filler at a segment's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a> {
    Record(RecordView<'a>),
    /// The rest of the segment (`len` bytes from here) holds no records.
    Blank {
        len: usize,
    },
}

impl<'a> RecordView<'a> {
    /// Length of the whole record in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a record is at least [`RECORD_BYTES_MIN`] bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Value of one property, if present.
    pub fn property(&self, key: &str) -> Option<&'a str> {
        properties::get(self.properties, key)
    }

    /// The message tag (`TAGS` property).
    pub fn tags(&self) -> Option<&'a str> {
        self.property(properties::keys::TAGS)
    }

    /// The ConsumeQueue tag hash of this record (0 when it has no tag).
    pub fn tag_hash(&self) -> i64 {
        self.tags().map(tag_hash).unwrap_or(0)
    }

    /// The message as a producer would encode it (broker fields dropped).
    pub fn message(&self) -> Message<'a> {
        Message {
            topic: self.topic,
            queue_id: self.queue_id,
            flag: self.flag,
            sys_flag: self.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6),
            born_timestamp_ms: self.born_timestamp_ms,
            born_host: self.born_host,
            store_host_v6: self.sys_flag & sys_flag::STOREHOST_V6 != 0,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            body: self.body,
            properties: self.properties,
        }
    }
}

/// `crc32(body) & 0x7FFF_FFFF`, as RocketMQ stores BODYCRC.
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

/// Java's `String.hashCode()` of a tag (over UTF-16 code units), sign-extended to 64 bits as
/// the ConsumeQueue stores it.
pub fn tag_hash(tag: &str) -> i64 {
    let mut h: i32 = 0;
    for unit in tag.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    i64::from(h)
}

/// Encoded length of `msg`, after checking every variable part against its maximum.
pub fn encoded_len(msg: &Message<'_>) -> Result<usize> {
    check_len("body", msg.body.len(), BODY_BYTES_MAX)?;
    check_len("topic", msg.topic.len(), TOPIC_BYTES_MAX)?;
    check_len(
        "properties",
        msg.properties.len(),
        properties::PROPERTIES_BYTES_MAX,
    )?;
    if msg.topic.is_empty() {
        return Err(WireError::Invalid {
            what: "topic",
            detail: "empty",
        });
    }
    let mut len = RECORD_FIXED_BYTES + msg.body.len() + msg.topic.len() + msg.properties.len();
    if msg.born_host.is_ipv6() {
        len += HOST_V6_EXTRA_BYTES;
    }
    if msg.store_host_v6 {
        len += HOST_V6_EXTRA_BYTES;
    }
    if msg.topic.len() > TOPIC_V1_BYTES_MAX {
        len += 1;
    }
    Ok(len)
}

/// Appends the encoding of `msg` to `out` and returns its length. Broker-owned fields are
/// zero; BODYCRC is computed here.
pub fn encode<B: BufMut>(msg: &Message<'_>, out: &mut B) -> Result<usize> {
    let len = encoded_len(msg)?;
    if out.remaining_mut() < len {
        return Err(WireError::BufferTooSmall {
            what: "record",
            need: len,
            have: out.remaining_mut(),
        });
    }
    let mut head = head(msg);
    head.buf[HEAD_LEN_AT..HEAD_LEN_AT + 4].copy_from_slice(&(len as u32).to_be_bytes());
    head.buf[HEAD_CRC_AT..HEAD_CRC_AT + 4].copy_from_slice(&body_crc(msg.body).to_be_bytes());
    let body_len_at = head.len - 4;
    head.buf[body_len_at..head.len].copy_from_slice(&(msg.body.len() as u32).to_be_bytes());
    out.put_slice(head.bytes());
    out.put_slice(msg.body);
    put_topic(msg.topic, out);
    out.put_u16(msg.properties.len() as u16);
    out.put_slice(msg.properties);
    Ok(len)
}

/// Offsets in a record's head of TOTALSIZE, BODYCRC and FLAG.
const HEAD_LEN_AT: usize = 0;
const HEAD_CRC_AT: usize = 8;
const HEAD_FLAG_AT: usize = 16;

/// The fields before BODY, assembled on the stack (written with one put_slice), with
/// TOTALSIZE, BODYCRC and BODYLENGTH left zero for the caller.
fn head(msg: &Message<'_>) -> Stack<HEAD_BYTES_MAX> {
    let v2 = msg.topic.len() > TOPIC_V1_BYTES_MAX;
    let mut sys = msg.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
    if msg.born_host.is_ipv6() {
        sys |= sys_flag::BORNHOST_V6;
    }
    if msg.store_host_v6 {
        sys |= sys_flag::STOREHOST_V6;
    }
    let mut head = Stack::<HEAD_BYTES_MAX>::new();
    head.put(&[0; 4]); // TOTALSIZE
    head.put(&(if v2 { MAGIC_V2 } else { MAGIC_V1 }).to_be_bytes());
    head.put(&[0; 4]); // BODYCRC
    head.put(&msg.queue_id.to_be_bytes());
    head.put(&msg.flag.to_be_bytes());
    head.put(&[0; 16]); // QUEUEOFFSET and PHYSICALOFFSET: broker-owned
    head.put(&sys.to_be_bytes());
    head.put(&msg.born_timestamp_ms.to_be_bytes());
    head.host(msg.born_host);
    head.put(&[0; 8]); // STORETIMESTAMP: broker-owned
                       // STOREHOSTADDRESS: broker-owned, an address of the family reserved and port 0.
    head.put(&[0; 20][..host_len(msg.store_host_v6)]);
    head.put(&msg.reconsume_times.to_be_bytes());
    head.put(&msg.prepared_transaction_offset.to_be_bytes());
    head.put(&[0; 4]); // BODYLENGTH
    head
}

fn put_topic<B: BufMut>(topic: &str, out: &mut B) {
    if topic.len() > TOPIC_V1_BYTES_MAX {
        out.put_u16(topic.len() as u16);
    } else {
        out.put_u8(topic.len() as u8);
    }
    out.put_slice(topic.as_bytes());
}

/// Encodes records that differ only in flag, body and properties, as a batch's do (its
/// messages share topic, queue, hosts and times): the head is assembled and the template
/// checked once, and each record is its head copied with length, CRC, flag and body length
/// patched, then its body, topic and properties. The same bytes as [`encode`] of the
/// template with the record's flag, body and properties.
pub struct BatchEncoder<'t> {
    head: Stack<HEAD_BYTES_MAX>,
    topic: &'t str,
    /// The record's length with an empty body and no properties.
    fixed: usize,
}

impl<'t> BatchEncoder<'t> {
    /// An encoder of records like `template` (its flag, body and properties are not used).
    pub fn new(template: &Message<'t>) -> Result<Self> {
        let fixed = encoded_len(&Message {
            body: &[],
            properties: &[],
            ..template.clone()
        })?;
        Ok(BatchEncoder {
            head: head(template),
            topic: template.topic,
            fixed,
        })
    }

    /// The length of the record of `body_len` and `properties_len` bytes.
    pub fn encoded_len(&self, body_len: usize, properties_len: usize) -> usize {
        self.fixed + body_len + properties_len
    }

    /// Appends the record of `flag`, `body` and `properties` to `out`; returns its length.
    pub fn encode(
        &self,
        flag: i32,
        body: &[u8],
        properties: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        check_len("body", body.len(), BODY_BYTES_MAX)?;
        check_len(
            "properties",
            properties.len(),
            properties::PROPERTIES_BYTES_MAX,
        )?;
        let len = self.encoded_len(body.len(), properties.len());
        out.reserve(len);
        let at = out.len();
        out.extend_from_slice(self.head.bytes());
        let head = &mut out[at..];
        head[HEAD_LEN_AT..HEAD_LEN_AT + 4].copy_from_slice(&(len as u32).to_be_bytes());
        head[HEAD_CRC_AT..HEAD_CRC_AT + 4].copy_from_slice(&body_crc(body).to_be_bytes());
        head[HEAD_FLAG_AT..HEAD_FLAG_AT + 4].copy_from_slice(&flag.to_be_bytes());
        let body_len_at = self.head.len - 4;
        head[body_len_at..body_len_at + 4].copy_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        put_topic(self.topic, out);
        out.extend_from_slice(&(properties.len() as u16).to_be_bytes());
        out.extend_from_slice(properties);
        Ok(len)
    }
}

/// Writes a BLANK entry covering `len` bytes into the first [`BLANK_BYTES`] of `out`.
pub fn encode_blank(len: usize, out: &mut [u8]) -> Result<()> {
    if len < BLANK_BYTES {
        return Err(WireError::TooShort {
            what: "blank entry",
            len,
            min: BLANK_BYTES,
        });
    }
    let Some(head) = out.get_mut(..BLANK_BYTES) else {
        return Err(WireError::BufferTooSmall {
            what: "blank entry",
            need: BLANK_BYTES,
            have: out.len(),
        });
    };
    let size = u32::try_from(len).map_err(|_| WireError::TooLong {
        what: "blank entry",
        len,
        max: u32::MAX as usize,
    })?;
    head[..4].copy_from_slice(&size.to_be_bytes());
    head[4..].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    Ok(())
}

/// Reads TOTALSIZE and MAGICCODE without validating anything else. `None` if fewer than 8
/// bytes are available.
pub fn peek_header(buf: &[u8]) -> Option<(u32, u32)> {
    let size = read_u32(buf, pos::TOTAL_SIZE).ok()?;
    let magic = read_u32(buf, pos::MAGIC).ok()?;
    Some((size, magic))
}

/// Decodes the entry at the start of `buf`: checks TOTALSIZE against the limits and the
/// buffer, the magic, that the fields add up to TOTALSIZE, and the body CRC.
pub fn decode(buf: &[u8]) -> Result<Entry<'_>> {
    decode_entry(buf, true)
}

fn decode_entry(buf: &[u8], verify_crc: bool) -> Result<Entry<'_>> {
    let Some((size, magic)) = peek_header(buf) else {
        return Err(WireError::Truncated {
            what: "record header",
            need: BLANK_BYTES,
            have: buf.len(),
        });
    };
    let size = size as usize;
    match magic {
        BLANK_MAGIC => {
            if size < BLANK_BYTES {
                return Err(WireError::TooShort {
                    what: "blank entry",
                    len: size,
                    min: BLANK_BYTES,
                });
            }
            Ok(Entry::Blank { len: size })
        }
        MAGIC_V1 | MAGIC_V2 => {
            decode_record(buf, size, magic == MAGIC_V2, verify_crc).map(Entry::Record)
        }
        other => Err(WireError::BadMagic {
            magic: other,
            offset: pos::MAGIC,
        }),
    }
}

/// [`decode_one`] without the body CRC: for bytes this process already checked, e.g. a
/// record read back from its own CommitLog below the write offset (the key index). Every
/// length is still checked, so a torn or foreign record is an error, not a panic.
pub fn decode_one_unverified(buf: &[u8]) -> Result<RecordView<'_>> {
    record_only(decode_entry(buf, false)?)
}

/// Decodes a record (not a BLANK) at the start of `buf`.
pub fn decode_one(buf: &[u8]) -> Result<RecordView<'_>> {
    record_only(decode(buf)?)
}

fn record_only(entry: Entry<'_>) -> Result<RecordView<'_>> {
    match entry {
        Entry::Record(r) => Ok(r),
        Entry::Blank { .. } => Err(WireError::Invalid {
            what: "record",
            detail: "BLANK entry where a record was expected",
        }),
    }
}

fn decode_record(buf: &[u8], size: usize, v2: bool, verify_crc: bool) -> Result<RecordView<'_>> {
    if size < RECORD_BYTES_MIN {
        return Err(WireError::TooShort {
            what: "record",
            len: size,
            min: RECORD_BYTES_MIN,
        });
    }
    check_len("record", size, RECORD_BYTES_MAX)?;
    // A match, not `ok_or`: the error is built only on the failing path (measured: ~12 ns
    // per record in `benches/record.rs`).
    let Some(bytes) = buf.get(..size) else {
        return Err(WireError::Truncated {
            what: "record",
            need: size,
            have: buf.len(),
        });
    };
    // The fields before BORNHOST lie at fixed places within the RECORD_BYTES_MIN bytes every
    // record has: one length check for all of them.
    let fixed: &[u8; pos::BORN_HOST] = bytes[..pos::BORN_HOST]
        .try_into()
        .expect("a record is at least RECORD_BYTES_MIN bytes");
    let sys = be_u32(fixed, pos::SYS_FLAG);
    let born_len = host_len(sys & sys_flag::BORNHOST_V6 != 0);
    let store_len = host_len(sys & sys_flag::STOREHOST_V6 != 0);
    let born_host = read_host(bytes, pos::BORN_HOST, born_len)?;
    let mut at = pos::BORN_HOST + born_len;
    let store_timestamp_ms = read_u64(bytes, at)? as i64;
    at += 8;
    let store_host = read_host(bytes, at, store_len)?;
    at += store_len;
    let reconsume_times = read_u32(bytes, at)? as i32;
    let prepared_transaction_offset = read_u64(bytes, at + 4)?;
    at += 12;
    let body_len = read_u32(bytes, at)? as usize;
    check_len("body", body_len, BODY_BYTES_MAX)?;
    let body = read_slice(bytes, at + 4, body_len, "body")?;
    at += 4 + body_len;
    let (topic_len, width) = if v2 {
        (usize::from(read_u16(bytes, at)?), 2)
    } else {
        (usize::from(read_u8(bytes, at)?), 1)
    };
    let topic = read_slice(bytes, at + width, topic_len, "topic")?;
    let topic = std::str::from_utf8(topic).map_err(|_| WireError::NotUtf8 { what: "topic" })?;
    at += width + topic_len;
    let props_len = usize::from(read_u16(bytes, at)?);
    check_len("properties", props_len, properties::PROPERTIES_BYTES_MAX)?;
    let props = read_slice(bytes, at + 2, props_len, "properties")?;
    at += 2 + props_len;
    if at != size {
        return Err(WireError::SizeMismatch {
            declared: size,
            actual: at,
        });
    }
    let stored = be_u32(fixed, pos::BODY_CRC);
    if verify_crc {
        let computed = body_crc(body);
        if stored != computed {
            return Err(WireError::BadCrc { stored, computed });
        }
    }
    Ok(RecordView {
        bytes,
        body_crc: stored,
        queue_id: be_u32(fixed, pos::QUEUE_ID),
        flag: be_u32(fixed, pos::FLAG) as i32,
        queue_offset: be_u64(fixed, pos::QUEUE_OFFSET),
        physical_offset: be_u64(fixed, pos::PHYSICAL_OFFSET),
        sys_flag: sys,
        born_timestamp_ms: be_u64(fixed, pos::BORN_TIMESTAMP) as i64,
        born_host,
        store_timestamp_ms,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties: props,
    })
}

/// Writes the broker-owned fields into an encoded record in place. The record must already
/// be valid (decode it first); the store host's family must match the reserved slot.
pub fn patch_broker_fields(record: &mut [u8], fields: &BrokerFields) -> Result<()> {
    let sys = read_u32(record, pos::SYS_FLAG)?;
    let born_len = host_len(sys & sys_flag::BORNHOST_V6 != 0);
    let slot_v6 = sys & sys_flag::STOREHOST_V6 != 0;
    if slot_v6 != fields.store_host.is_ipv6() {
        return Err(WireError::Invalid {
            what: "store host",
            detail: "address family differs from the record's STOREHOSTADDRESS slot",
        });
    }
    let store_ts_at = pos::BORN_HOST + born_len;
    let need = store_ts_at + 8 + host_len(slot_v6);
    if record.len() < need {
        return Err(WireError::Truncated {
            what: "record",
            need,
            have: record.len(),
        });
    }
    record[pos::QUEUE_OFFSET..pos::QUEUE_OFFSET + 8]
        .copy_from_slice(&fields.queue_offset.to_be_bytes());
    record[pos::PHYSICAL_OFFSET..pos::PHYSICAL_OFFSET + 8]
        .copy_from_slice(&fields.physical_offset.to_be_bytes());
    record[store_ts_at..store_ts_at + 8].copy_from_slice(&fields.store_timestamp_ms.to_be_bytes());
    write_host(&mut record[store_ts_at + 8..need], fields.store_host);
    Ok(())
}

/// Writes RECONSUMETIMES of an encoded record in place (a delivery's count: the body CRC
/// does not cover it). The record must already be valid.
pub fn patch_reconsume_times(record: &mut [u8], reconsume_times: i32) -> Result<()> {
    let sys = read_u32(record, pos::SYS_FLAG)?;
    let at = pos::BORN_HOST
        + host_len(sys & sys_flag::BORNHOST_V6 != 0)
        + 8
        + host_len(sys & sys_flag::STOREHOST_V6 != 0);
    if record.len() < at + 4 {
        return Err(WireError::Truncated {
            what: "record",
            need: at + 4,
            have: record.len(),
        });
    }
    record[at..at + 4].copy_from_slice(&reconsume_times.to_be_bytes());
    Ok(())
}

/// Iterates over a buffer of back-to-back records (a batch body, or a run of a segment). Ends
/// at the end of the buffer or at a BLANK entry; yields one error and stops on a bad record.
pub fn iter(buf: &[u8]) -> RecordIter<'_> {
    RecordIter { rest: buf }
}

/// Iterator returned by [`iter`].
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match decode(self.rest) {
            Ok(Entry::Record(r)) => {
                self.rest = &self.rest[r.len()..];
                Some(Ok(r))
            }
            Ok(Entry::Blank { .. }) => {
                self.rest = &[];
                None
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// RocketMQ's offset message id: upper-case hex of store host IP, port (4 bytes) and physical
/// offset (8 bytes); 32 characters for IPv4.
pub fn message_id(store_host: SocketAddr, physical_offset: u64) -> String {
    let mut out = String::with_capacity(56);
    push_message_id(&mut out, store_host, physical_offset);
    out
}

/// Appends [`message_id`] to `out`.
pub fn push_message_id(out: &mut String, store_host: SocketAddr, physical_offset: u64) {
    push_message_ids(out, store_host, std::iter::once(physical_offset), ',');
}

/// Appends the [`message_id`]s of `offsets` at `store_host` to `out`, `separator` between
/// them (a batch's comma-joined ids). The host and port part is the same for every id, so
/// it is written in hex once and copied; each offset is 8 table lookups. The text goes
/// through a stack buffer that joins `out` a few ids at a time (a `String::push` per digit
/// made a batch's ids 2 % of the remoting send path's CPU).
pub fn push_message_ids(
    out: &mut String,
    store_host: SocketAddr,
    offsets: impl IntoIterator<Item = u64>,
    separator: char,
) {
    let mut raw = [0u8; 20];
    let host_len = match store_host {
        SocketAddr::V4(a) => {
            raw[..4].copy_from_slice(&a.ip().octets());
            4
        }
        SocketAddr::V6(a) => {
            raw[..16].copy_from_slice(&a.ip().octets());
            16
        }
    };
    raw[host_len..host_len + 4].copy_from_slice(&u32::from(store_host.port()).to_be_bytes());
    let mut host = [0u8; 40];
    let host = &mut host[..(host_len + 4) * 2];
    put_upper_hex(host, &raw[..host_len + 4]);
    let mut sep = [0u8; 4];
    let sep = separator.encode_utf8(&mut sep).as_bytes();
    let id_len = host.len() + 16;
    let mut buf = [0u8; 1024];
    let mut used = 0;
    for (i, offset) in offsets.into_iter().enumerate() {
        if used + sep.len() + id_len > buf.len() {
            flush_ascii(out, &buf[..used]);
            used = 0;
        }
        if i > 0 {
            buf[used..used + sep.len()].copy_from_slice(sep);
            used += sep.len();
        }
        buf[used..used + host.len()].copy_from_slice(host);
        used += host.len();
        put_upper_hex(&mut buf[used..used + 16], &offset.to_be_bytes());
        used += 16;
    }
    flush_ascii(out, &buf[..used]);
}

fn flush_ascii(out: &mut String, text: &[u8]) {
    out.push_str(std::str::from_utf8(text).expect("hex digits and a separator are text"));
}

/// Upper-case hex of `raw`, two characters per byte (one allocation: this runs once per
/// message on the send path).
pub fn upper_hex(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len() * 2);
    let mut buf = [0u8; 64];
    for raw in raw.chunks(buf.len() / 2) {
        let hex = &mut buf[..raw.len() * 2];
        put_upper_hex(hex, raw);
        flush_ascii(&mut out, hex);
    }
    out
}

/// Upper-case hex digit pairs of every byte value.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut pairs = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        pairs[b] = [DIGITS[b >> 4], DIGITS[b & 0xF]];
        b += 1;
    }
    pairs
};

/// Writes the hex of `raw` into `out`, which is twice as long.
fn put_upper_hex(out: &mut [u8], raw: &[u8]) {
    for (pair, &b) in out.chunks_exact_mut(2).zip(raw) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
}

/// Parses an offset message id back into store host and physical offset.
pub fn parse_message_id(id: &str) -> Result<(SocketAddr, u64)> {
    let v6 = match id.len() {
        32 => false,
        56 => true,
        _ => {
            return Err(WireError::Invalid {
                what: "message id",
                detail: "must be 32 (IPv4) or 56 (IPv6) hex characters",
            })
        }
    };
    let mut raw = Vec::with_capacity(id.len() / 2);
    for pair in id.as_bytes().chunks(2) {
        let text =
            std::str::from_utf8(pair).map_err(|_| WireError::NotUtf8 { what: "message id" })?;
        let byte = u8::from_str_radix(text, 16).map_err(|_| WireError::Invalid {
            what: "message id",
            detail: "not hexadecimal",
        })?;
        raw.push(byte);
    }
    let hlen = host_len(v6);
    let host = read_host(&raw, 0, hlen)?;
    let offset = read_u64(&raw, hlen)?;
    Ok((host, offset))
}

fn host_len(v6: bool) -> usize {
    if v6 {
        20
    } else {
        8
    }
}

/// Bytes of a record before its BODY (the body's length included) with both hosts IPv6.
const HEAD_BYTES_MAX: usize = 88 + 2 * HOST_V6_EXTRA_BYTES;

/// A buffer on the stack filled front to back: the encoder writes fixed fields here and the
/// result to its output at once, where a `BufMut` would check its capacity per field.
struct Stack<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Stack<N> {
    fn new() -> Self {
        Stack {
            buf: [0; N],
            len: 0,
        }
    }

    /// Appends `bytes`; the callers' fields fit `N` by construction (a panic otherwise).
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// A host as a record stores it: the IP's bytes, then the port as a 4-byte integer.
    fn host(&mut self, host: SocketAddr) {
        match host.ip() {
            IpAddr::V4(ip) => self.put(&ip.octets()),
            IpAddr::V6(ip) => self.put(&ip.octets()),
        }
        self.put(&u32::from(host.port()).to_be_bytes());
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn write_host(out: &mut [u8], host: SocketAddr) {
    let mut tmp = Stack::<20>::new();
    tmp.host(host);
    out.copy_from_slice(tmp.bytes());
}

fn read_host(buf: &[u8], at: usize, len: usize) -> Result<SocketAddr> {
    let raw = read_slice(buf, at, len, "host")?;
    let ip_len = len - 4;
    let ip = if ip_len == 4 {
        let mut o = [0u8; 4];
        o.copy_from_slice(&raw[..4]);
        IpAddr::V4(Ipv4Addr::from(o))
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(&raw[..16]);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    let port = read_u32(raw, ip_len)?;
    // RocketMQ stores the port as an int; anything over 65535 cannot be a port.
    let port = u16::try_from(port).map_err(|_| WireError::Invalid {
        what: "host",
        detail: "port over 65535",
    })?;
    Ok(SocketAddr::new(ip, port))
}

fn check_len(what: &'static str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(WireError::TooLong { what, len, max });
    }
    Ok(())
}

fn read_slice<'a>(buf: &'a [u8], at: usize, len: usize, what: &'static str) -> Result<&'a [u8]> {
    let Some(end) = at.checked_add(len) else {
        return Err(WireError::TooLong {
            what,
            len,
            max: buf.len(),
        });
    };
    match buf.get(at..end) {
        Some(s) => Ok(s),
        None => Err(WireError::Truncated {
            what,
            need: end,
            have: buf.len(),
        }),
    }
}

fn read_array<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N]> {
    let s = read_slice(buf, at, N, "integer field")?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

fn read_u8(buf: &[u8], at: usize) -> Result<u8> {
    Ok(read_array::<1>(buf, at)?[0])
}

fn read_u16(buf: &[u8], at: usize) -> Result<u16> {
    read_array(buf, at).map(u16::from_be_bytes)
}

/// A big-endian u32 at a constant offset of a fixed-size array (the bounds check folds away).
#[inline(always)]
fn be_u32<const N: usize>(a: &[u8; N], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&a[at..at + 4]);
    u32::from_be_bytes(w)
}

/// [`be_u32`] for a u64.
#[inline(always)]
fn be_u64<const N: usize>(a: &[u8; N], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&a[at..at + 8]);
    u64::from_be_bytes(w)
}

fn read_u32(buf: &[u8], at: usize) -> Result<u32> {
    read_array(buf, at).map(u32::from_be_bytes)
}

fn read_u64(buf: &[u8], at: usize) -> Result<u64> {
    read_array(buf, at).map(u64::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)), port)
    }

    fn sample<'a>(topic: &'a str, body: &'a [u8], props: &'a [u8]) -> Message<'a> {
        Message {
            topic,
            queue_id: 3,
            flag: 7,
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: v4(1, 5555),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: props,
        }
    }

    proptest::proptest! {
        /// A batch encoder's record is byte for byte the record `encode` writes.
        #[test]
        fn batch_encoder_writes_what_encode_writes(
            topic_len in 1usize..200,
            v6 in proptest::bool::ANY,
            store_v6 in proptest::bool::ANY,
            sys in proptest::num::u32::ANY,
            messages in proptest::collection::vec(
                (proptest::num::i32::ANY,
                 proptest::collection::vec(proptest::num::u8::ANY, 0..300),
                 proptest::collection::vec(proptest::num::u8::ANY, 0..40)),
                1..5),
        ) {
            let topic = "t".repeat(topic_len);
            let mut template = sample(&topic, b"ignored", b"ignored");
            template.sys_flag = sys;
            template.store_host_v6 = store_v6;
            template.reconsume_times = 9;
            template.prepared_transaction_offset = 77;
            if v6 {
                template.born_host = "[fe80::7]:9876".parse().unwrap();
            }
            let encoder = BatchEncoder::new(&template).unwrap();
            let (mut got, mut want) = (vec![0xAA], vec![0xAA]);
            for (flag, body, props) in &messages {
                let m = Message { flag: *flag, body, properties: props, ..template.clone() };
                let n = encoder.encode(*flag, body, props, &mut got).unwrap();
                proptest::prop_assert_eq!(n, encode(&m, &mut want).unwrap());
                proptest::prop_assert_eq!(n, encoder.encoded_len(body.len(), props.len()));
            }
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn batch_encoder_refuses_what_encode_refuses() {
        assert!(BatchEncoder::new(&sample("", b"", b"")).is_err());
        let too_long = "t".repeat(TOPIC_BYTES_MAX + 1);
        assert!(BatchEncoder::new(&sample(&too_long, b"", b"")).is_err());
        let encoder = BatchEncoder::new(&sample("t", b"", b"")).unwrap();
        let mut out = Vec::new();
        let props = vec![b'p'; properties::PROPERTIES_BYTES_MAX + 1];
        assert!(encoder.encode(0, b"", &props, &mut out).is_err());
        let body = vec![0u8; BODY_BYTES_MAX + 1];
        assert!(encoder.encode(0, &body, b"", &mut out).is_err());
        assert!(out.is_empty(), "nothing written for a refused record");
    }

    #[test]
    fn reconsume_times_patch_in_place() {
        for v6 in [false, true] {
            let mut m = sample("t", b"body", &[]);
            if v6 {
                m.born_host = "[::1]:5".parse().unwrap();
                m.sys_flag |= sys_flag::BORNHOST_V6;
                m.store_host_v6 = true;
            }
            let mut buf = Vec::new();
            encode(&m, &mut buf).unwrap();
            patch_reconsume_times(&mut buf, 7).unwrap();
            let r = decode_one(&buf).unwrap();
            assert_eq!(r.reconsume_times, 7);
            assert_eq!(r.body, b"body");
        }
    }

    #[test]
    fn compression_types_match_rocketmq() {
        use sys_flag::*;
        assert_eq!(compression(0x300), Ok(None), "type bits alone mean nothing");
        assert_eq!(compression(COMPRESSED), Ok(Some(Compression::Zlib)));
        assert_eq!(
            compression(COMPRESSED | COMPRESSION_ZLIB | MULTI_TAGS),
            Ok(Some(Compression::Zlib))
        );
        assert_eq!(
            compression(COMPRESSED | COMPRESSION_LZ4),
            Ok(Some(Compression::Lz4))
        );
        assert_eq!(
            compression(COMPRESSED | COMPRESSION_ZSTD | BORNHOST_V6),
            Ok(Some(Compression::Zstd))
        );
        for t in 4..=7u32 {
            assert_eq!(
                compression(COMPRESSED | t << 8),
                Err(WireError::UnknownCode {
                    what: "compression type",
                    code: t
                })
            );
        }
    }

    #[test]
    fn fixed_layout_matches_rocketmq() {
        let msg = sample("T", b"", b"");
        let mut out = Vec::new();
        let n = encode(&msg, &mut out).unwrap();
        assert_eq!(n, RECORD_FIXED_BYTES + 1);
        assert_eq!(&out[4..8], &MAGIC_V1.to_be_bytes());
        assert_eq!(&out[12..16], &3u32.to_be_bytes());
        assert_eq!(&out[16..20], &7u32.to_be_bytes());
        // BORNHOST at 48: 10.0.0.1 then port 5555 as a 4-byte int.
        assert_eq!(&out[48..56], &[10, 0, 0, 1, 0, 0, 0x15, 0xB3]);
        // BODY length at 84.
        assert_eq!(&out[84..88], &0u32.to_be_bytes());
        assert_eq!(out[88], 1);
        assert_eq!(out[89], b'T');
    }

    #[test]
    fn round_trip_with_patch() {
        let mut props = Vec::new();
        properties::encode([("TAGS", "TagA"), ("KEYS", "order-1")], &mut props).unwrap();
        let msg = sample("orders", b"hello", &props);
        let mut out = Vec::new();
        encode(&msg, &mut out).unwrap();
        let store = v4(9, 10911);
        patch_broker_fields(
            &mut out,
            &BrokerFields {
                queue_offset: 42,
                physical_offset: 4096,
                store_timestamp_ms: 1_700_000_000_123,
                store_host: store,
            },
        )
        .unwrap();
        let r = decode_one(&out).unwrap();
        assert_eq!(r.message(), msg);
        assert_eq!(r.queue_offset, 42);
        assert_eq!(r.physical_offset, 4096);
        assert_eq!(r.store_timestamp_ms, 1_700_000_000_123);
        assert_eq!(r.store_host, store);
        assert_eq!(r.tags(), Some("TagA"));
        assert_eq!(r.tag_hash(), tag_hash("TagA"));
    }

    #[test]
    fn unverified_decode_skips_only_the_crc() {
        let msg = sample("orders", b"hello", b"");
        let mut out = Vec::new();
        encode(&msg, &mut out).unwrap();
        let body_at = out.len() - b"hello".len() - 1 - "orders".len() - 2;
        out[body_at] ^= 0xff;
        assert!(matches!(decode_one(&out), Err(WireError::BadCrc { .. })));
        let r = decode_one_unverified(&out).unwrap();
        assert_eq!((r.topic, r.body.len()), ("orders", 5));
        // Lengths are still checked.
        assert!(decode_one_unverified(&out[..out.len() - 1]).is_err());
        out[pos::MAGIC] ^= 1;
        assert!(decode_one_unverified(&out).is_err());
    }

    #[test]
    fn ipv6_hosts_and_long_topics() {
        let topic = "t".repeat(200);
        let mut msg = sample(&topic, b"x", b"");
        msg.born_host = "[::1]:9000".parse().unwrap();
        msg.store_host_v6 = true;
        let mut out = Vec::new();
        let n = encode(&msg, &mut out).unwrap();
        assert_eq!(n, RECORD_FIXED_BYTES + 24 + 1 + 1 + 200);
        assert_eq!(&out[4..8], &MAGIC_V2.to_be_bytes());
        let r = decode_one(&out).unwrap();
        assert_eq!(r.message(), msg);
        let wrong = BrokerFields {
            queue_offset: 0,
            physical_offset: 0,
            store_timestamp_ms: 0,
            store_host: v4(1, 1),
        };
        assert!(patch_broker_fields(&mut out, &wrong).is_err());
    }

    #[test]
    fn crc_and_size_errors() {
        let mut out = Vec::new();
        encode(&sample("T", b"body", b""), &mut out).unwrap();
        let body_at = 88;
        out[body_at] ^= 0xFF;
        assert!(matches!(decode(&out), Err(WireError::BadCrc { .. })));
        out[body_at] ^= 0xFF;
        assert!(matches!(
            decode(&out[..out.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        let mut longer = out.clone();
        longer.push(0);
        let declared = (out.len() + 1) as u32;
        longer[..4].copy_from_slice(&declared.to_be_bytes());
        assert!(matches!(
            decode(&longer),
            Err(WireError::SizeMismatch { .. })
        ));
    }

    #[test]
    fn blank_entry() {
        let mut seg = vec![0u8; 64];
        encode_blank(64, &mut seg).unwrap();
        assert_eq!(decode(&seg).unwrap(), Entry::Blank { len: 64 });
        assert!(encode_blank(4, &mut seg).is_err());
    }

    #[test]
    fn java_string_hash_code() {
        // Values of "TagA".hashCode() etc. as Java computes them.
        assert_eq!(tag_hash(""), 0);
        assert_eq!(tag_hash("TagA"), 2_598_919);
        assert_eq!(tag_hash("hello"), 99_162_322);
        // Overflowing hash is negative and sign-extended.
        assert_eq!(tag_hash("polygenelubricants"), i64::from(i32::MIN));
        // Non-BMP characters hash as two UTF-16 units.
        assert_eq!(tag_hash("😀"), i64::from(0xD83Di32 * 31 + 0xDE00));
    }

    #[test]
    fn message_id_round_trip() {
        let host = v4(7, 10911);
        let id = message_id(host, 0x0102_0304_0506_0708);
        assert_eq!(id, "0A00000700002A9F0102030405060708");
        assert_eq!(
            parse_message_id(&id).unwrap(),
            (host, 0x0102_0304_0506_0708)
        );
        let h6: SocketAddr = "[fe80::1]:10911".parse().unwrap();
        let id6 = message_id(h6, 99);
        assert_eq!(parse_message_id(&id6).unwrap(), (h6, 99));
        assert!(parse_message_id("zz").is_err());
        assert_eq!(
            id6,
            "FE800000000000000000000000000001\
             00002A9F0000000000000063"
        );
    }

    #[test]
    fn joined_message_ids_are_each_id_in_turn() {
        // More ids than one stack buffer holds, for both address families.
        for host in [v4(7, 10911), "[fe80::1]:10911".parse().unwrap()] {
            let offsets: Vec<u64> = (0..100u64).map(|i| i * 1_157 + (i << 40)).collect();
            let mut joined = String::from("x");
            push_message_ids(&mut joined, host, offsets.iter().copied(), ',');
            let want: Vec<String> = offsets.iter().map(|&o| message_id(host, o)).collect();
            assert_eq!(joined, format!("x{}", want.join(",")));
            let mut one = String::new();
            push_message_ids(&mut one, host, [], ',');
            assert_eq!(one, "");
        }
    }

    #[test]
    fn upper_hex_of_any_length() {
        // Longer than the stack buffer of one append, and not a multiple of it.
        let raw: Vec<u8> = (0..=70u8).map(|i| i.wrapping_mul(37)).collect();
        let want: String = raw.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(upper_hex(&raw), want);
        assert_eq!(upper_hex(&[]), "");
    }

    #[test]
    fn batch_iteration() {
        let mut buf = Vec::new();
        for i in 0..3u8 {
            encode(&sample("T", &[i; 10], b""), &mut buf).unwrap();
        }
        let bodies: Vec<_> = iter(&buf).map(|r| r.unwrap().body[0]).collect();
        assert_eq!(bodies, vec![0, 1, 2]);
        let mut bad = buf.clone();
        bad[4] = 0;
        let items: Vec<_> = iter(&bad).collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].is_err());
    }
}
