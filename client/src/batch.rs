//! Pulled messages without copies: a [`MessageBatch`] holds the records of a pull as the
//! bytes the broker sent (shared with the pull response, nothing decoded into owned fields),
//! and a [`MessageView`] reads one record in place: fixed fields at once, a property by a
//! scan of the record's properties block when asked, the message id formatted only when
//! asked. [`MessageView::to_received`] makes the owned [`ReceivedMessage`] when one is
//! needed.
//!
//! This is how the push consumer carries messages inside (a failed batch it keeps for a
//! redelivery is a reference count, not a deep copy), and what a listener started with
//! [`PushConsumerBuilder::start_batch`](crate::consumer::PushConsumerBuilder::start_batch)
//! receives; a listener of `Vec<ReceivedMessage>` gets them converted once per call.
//!
//! A record whose body a RocketMQ producer compressed is the one exception to "nothing
//! copied": its body is inflated once, when it is pulled, into a buffer of its own
//! ([`crate::inflate`]); every other body is read in place.
//!
//! Invariant: every record here passed [`record::decode`] (lengths and body CRC) when it was
//! pulled, so reading it again skips the CRC and cannot fail.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, RecordView};

use crate::error::{Error, Result};
use crate::inflate;
use crate::message::{ReceivedMessage, RESERVED_PROPERTIES, RETRY_TOPIC};

/// One pulled record, undecoded: its bytes (a slice of the pull response), where its
/// variable fields lie (found once, when it was pulled), the broker it came from, and what the
/// consumer adds (shown under its original topic, redeliveries).
#[derive(Debug, Clone)]
pub(crate) struct RawMessage {
    /// Exactly the record's bytes, checked when pulled.
    record: Bytes,
    broker_name: Arc<str>,
    /// The record's QUEUEOFFSET (the consumer's bookkeeping uses it often).
    pub queue_offset: u64,
    /// Positions in `record`: STORETIMESTAMP and RECONSUMETIMES (after the hosts, whose
    /// widths vary), and the body, topic and properties as (start, length).
    store_timestamp_at: u16,
    reconsume_times_at: u16,
    body: Body,
    topic: (u32, u32),
    properties: (u32, u32),
    /// Pulled from the group's retry topic: shown under its `RETRY_TOPIC` property.
    pub retried: bool,
    /// Times this consumer handed the message to the listener again (added to the record's
    /// RECONSUMETIMES).
    pub redelivered: i32,
}

/// The body the application sees.
#[derive(Debug, Clone)]
enum Body {
    /// In the record at (start, length): an uncompressed body, or a compressed one that could
    /// not be inflated (see [`crate::inflate`]).
    InRecord(u32, u32),
    /// Inflated from the record's compressed body: the only case that owns a buffer.
    Inflated(Bytes),
}

impl RawMessage {
    /// Notes where `r`'s fields lie in `record` (the bytes `r` was decoded from), and
    /// inflates a compressed body.
    fn new(record: Bytes, r: &RecordView<'_>, broker_name: &Arc<str>) -> RawMessage {
        let host_bytes = |v6: bool| 8 + if v6 { record::HOST_V6_EXTRA_BYTES } else { 0 };
        let store_timestamp_at =
            record::pos::BORN_HOST + host_bytes(r.sys_flag & record::sys_flag::BORNHOST_V6 != 0);
        let reconsume_times_at =
            store_timestamp_at + 8 + host_bytes(r.sys_flag & record::sys_flag::STOREHOST_V6 != 0);
        let base = r.bytes.as_ptr() as usize;
        // Field slices lie inside a record of at most RECORD_BYTES_MAX (< 4 GiB) bytes.
        let range = |f: &[u8]| ((f.as_ptr() as usize - base) as u32, f.len() as u32);
        let body = match inflate::received_body(r, broker_name) {
            Some(inflated) => Body::Inflated(inflated),
            None => {
                let (start, len) = range(r.body);
                Body::InRecord(start, len)
            }
        };
        let raw = RawMessage {
            record,
            broker_name: Arc::clone(broker_name),
            queue_offset: r.queue_offset,
            store_timestamp_at: store_timestamp_at as u16,
            reconsume_times_at: reconsume_times_at as u16,
            body,
            topic: range(r.topic.as_bytes()),
            properties: range(r.properties),
            retried: false,
            redelivered: 0,
        };
        assert_eq!(
            (
                raw.view().store_timestamp_ms(),
                raw.view().reconsume_times()
            ),
            (r.store_timestamp_ms, r.reconsume_times),
            "the record layout read in place agrees with the decoder"
        );
        raw
    }

    pub fn view(&self) -> MessageView<'_> {
        MessageView { raw: self }
    }

    /// The full decode, for the fields read rarely (hosts) and for owned copies.
    fn decode(&self) -> RecordView<'_> {
        record::decode_one_unverified(&self.record)
            .expect("a pulled record was decoded (CRC and lengths checked) when pulled")
    }

    fn slice(&self, (start, len): (u32, u32)) -> &[u8] {
        &self.record[start as usize..(start + len) as usize]
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.record[at..at + 4].try_into().expect("4 bytes"))
    }

    fn u64_at(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.record[at..at + 8].try_into().expect("8 bytes"))
    }
}

/// Decodes a pull body into undecoded messages (each record checked once, CRC included); a
/// record that does not decode fails the whole body, as [`crate::message`]'s decoder does.
pub(crate) fn split_records(body: &Bytes, broker_name: &Arc<str>) -> Result<Vec<RawMessage>> {
    let mut out = Vec::new();
    for r in record::iter(body) {
        let r = r.map_err(|e| Error::InvalidMessage(format!("pulled record: {e}")))?;
        out.push(RawMessage::new(body.slice_ref(r.bytes), &r, broker_name));
    }
    Ok(out)
}

/// Messages of one listener call (or one pull), sharing the pulled bytes. Cloning it is a
/// reference count.
#[derive(Debug, Clone, Default)]
pub struct MessageBatch {
    msgs: Arc<Vec<RawMessage>>,
}

impl MessageBatch {
    pub(crate) fn from_raw(msgs: Vec<RawMessage>) -> MessageBatch {
        MessageBatch {
            msgs: Arc::new(msgs),
        }
    }

    pub(crate) fn raw(&self) -> &[RawMessage] {
        &self.msgs
    }

    /// The messages, for changes (copied first if a listener still holds this batch).
    pub(crate) fn raw_mut(&mut self) -> &mut Vec<RawMessage> {
        Arc::make_mut(&mut self.msgs)
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// The `i`th message, if there is one.
    pub fn get(&self, i: usize) -> Option<MessageView<'_>> {
        self.msgs.get(i).map(RawMessage::view)
    }

    /// The messages in queue-offset order (a listener's batch holds messages of one queue;
    /// a pull consumer's poll may hold several, each queue's in offset order).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = MessageView<'_>> + '_ {
        self.msgs.iter().map(RawMessage::view)
    }

    /// Owned copies of every message.
    pub fn to_received(&self) -> Vec<ReceivedMessage> {
        self.iter().map(|m| m.to_received()).collect()
    }
}

/// One message of a [`MessageBatch`], read in place: what a [`ReceivedMessage`] holds, with
/// nothing copied or allocated until asked for (only [`MessageView::msg_id`],
/// [`MessageView::keys`] and [`MessageView::to_received`] allocate). Fixed fields are read
/// from the record's bytes; a property is a scan of its properties block.
#[derive(Debug, Clone, Copy)]
pub struct MessageView<'a> {
    raw: &'a RawMessage,
}

impl<'a> MessageView<'a> {
    /// The topic, as [`ReceivedMessage::topic`]: a message pulled from the group's retry
    /// topic shows its original topic.
    pub fn topic(&self) -> &'a str {
        if self.raw.retried {
            if let Some(t) = self.property(RETRY_TOPIC) {
                return t;
            }
        }
        self.stored_topic()
    }

    /// The topic the record is stored in (the retry topic, for a retried message).
    fn stored_topic(&self) -> &'a str {
        std::str::from_utf8(self.raw.slice(self.raw.topic)).expect("checked UTF-8 when pulled")
    }

    pub fn broker_name(&self) -> &'a str {
        &self.raw.broker_name
    }

    pub fn queue_id(&self) -> u32 {
        self.raw.u32_at(record::pos::QUEUE_ID)
    }

    pub fn queue_offset(&self) -> u64 {
        self.raw.queue_offset
    }

    pub fn physical_offset(&self) -> u64 {
        self.raw.u64_at(record::pos::PHYSICAL_OFFSET)
    }

    /// Offset message id (store host and physical offset), formatted on each call.
    pub fn msg_id(&self) -> String {
        record::message_id(self.store_host(), self.physical_offset())
    }

    /// The body the producer sent, as [`ReceivedMessage::body`]: in place, or inflated when
    /// the record's body is compressed (see [`crate::inflate`]).
    pub fn body(&self) -> &'a [u8] {
        match &self.raw.body {
            Body::InRecord(start, len) => self.raw.slice((*start, *len)),
            Body::Inflated(b) => b,
        }
    }

    /// The body as shared bytes (no copy).
    pub fn body_bytes(&self) -> Bytes {
        match &self.raw.body {
            Body::InRecord(start, len) => self
                .raw
                .record
                .slice(*start as usize..(start + len) as usize),
            Body::Inflated(b) => b.clone(),
        }
    }

    pub fn flag(&self) -> i32 {
        self.raw.u32_at(record::pos::FLAG) as i32
    }

    /// The record's SYSFLAG, COMPRESSED cleared once the body is inflated.
    pub fn sys_flag(&self) -> u32 {
        let stored = self.raw.u32_at(record::pos::SYS_FLAG);
        inflate::shown_sys_flag(stored, matches!(self.raw.body, Body::Inflated(_)))
    }

    /// As [`ReceivedMessage::body_compressed`]: the record's body is compressed and could not
    /// be inflated; [`MessageView::body`] is the stored bytes.
    pub fn body_compressed(&self) -> bool {
        self.sys_flag() & record::sys_flag::COMPRESSED != 0
    }

    pub fn born_timestamp_ms(&self) -> i64 {
        self.raw.u64_at(record::pos::BORN_TIMESTAMP) as i64
    }

    /// Decodes the record's hosts (not kept in place).
    pub fn born_host(&self) -> SocketAddr {
        self.raw.decode().born_host
    }

    pub fn store_timestamp_ms(&self) -> i64 {
        self.raw.u64_at(usize::from(self.raw.store_timestamp_at)) as i64
    }

    /// Decodes the record's hosts (not kept in place).
    pub fn store_host(&self) -> SocketAddr {
        self.raw.decode().store_host
    }

    /// As [`ReceivedMessage::reconsume_times`]: the broker's count of retries plus this
    /// consumer's local redeliveries.
    pub fn reconsume_times(&self) -> i32 {
        (self.raw.u32_at(usize::from(self.raw.reconsume_times_at)) as i32)
            .saturating_add(self.raw.redelivered)
    }

    fn properties_block(&self) -> &'a [u8] {
        self.raw.slice(self.raw.properties)
    }

    /// One property (reserved ones included), by a scan of the properties block.
    pub fn property(&self, key: &str) -> Option<&'a str> {
        properties::get(self.properties_block(), key)
    }

    /// Every property, reserved ones included, in the record's order (a malformed pair ends
    /// the list, as it ends [`ReceivedMessage::properties`]).
    pub fn properties(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        properties::iter(self.properties_block()).map_while(|p| p.ok())
    }

    /// Properties the application set (reserved ones left out).
    pub fn user_properties(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.properties()
            .filter(|(k, _)| !RESERVED_PROPERTIES.contains(k))
    }

    pub fn tag(&self) -> Option<&'a str> {
        self.property(keys::TAGS)
    }

    pub fn keys(&self) -> Vec<&'a str> {
        self.property(keys::KEYS)
            .map(|k| k.split(' ').filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }

    /// As [`ReceivedMessage::deliver_at_ms`].
    pub fn deliver_at_ms(&self) -> Option<i64> {
        self.property(keys::TIMER_OUT_MS)
            .and_then(|v| v.parse().ok())
    }

    /// The producer's unique key (`UNIQ_KEY`).
    pub fn unique_key(&self) -> Option<&'a str> {
        self.property(keys::UNIQ_KEY)
    }

    /// The owned message, as a `Vec<ReceivedMessage>` listener gets it.
    pub fn to_received(&self) -> ReceivedMessage {
        let r = self.raw.decode();
        let mut m = ReceivedMessage::with_body(
            &r,
            &self.raw.broker_name,
            self.body_bytes(),
            self.sys_flag(),
        );
        m.topic = self.topic().to_string();
        m.reconsume_times = self.reconsume_times();
        m
    }
}

#[cfg(test)]
pub(crate) mod test_records {
    //! Encoded records for the consumer's unit tests.
    use super::*;
    use bytes::BytesMut;
    use ringmq_wire::record::{BrokerFields, Message};

    pub fn encode(
        topic: &str,
        body: &[u8],
        props: &[(&str, &str)],
        offset: u64,
        out: &mut BytesMut,
    ) {
        let host = SocketAddr::from(([127, 0, 0, 1], 9876));
        encode_from(host, topic, body, props, offset, out);
    }

    /// A record born at and stored by `host` (IPv6 hosts widen both fields).
    pub fn encode_from(
        host: SocketAddr,
        topic: &str,
        body: &[u8],
        props: &[(&str, &str)],
        offset: u64,
        out: &mut BytesMut,
    ) {
        encode_with_sys_flag(host, 0, topic, body, props, offset, out);
    }

    /// A record with SYSFLAG `sys_flag` (a compressed body, as RocketMQ producers send).
    pub fn encode_with_sys_flag(
        host: SocketAddr,
        sys_flag: u32,
        topic: &str,
        body: &[u8],
        props: &[(&str, &str)],
        offset: u64,
        out: &mut BytesMut,
    ) {
        let mut block = Vec::new();
        properties::encode(props.iter().copied(), &mut block).unwrap();
        let msg = Message {
            topic,
            queue_id: 3,
            flag: 7,
            sys_flag,
            born_timestamp_ms: 1_000,
            born_host: host,
            store_host_v6: host.is_ipv6(),
            reconsume_times: 2,
            prepared_transaction_offset: 0,
            body,
            properties: &block,
        };
        let start = out.len();
        record::encode(&msg, out).unwrap();
        record::patch_broker_fields(
            &mut out[start..],
            &BrokerFields {
                queue_offset: offset,
                physical_offset: offset * 1000,
                store_timestamp_ms: 2_000,
                store_host: host,
            },
        )
        .unwrap();
    }

    /// One message of topic `t` at queue offset `offset`, as a pull gives it.
    pub fn raw(offset: u64) -> RawMessage {
        let mut buf = BytesMut::new();
        encode("t", b"x", &[], offset, &mut buf);
        split_records(&buf.freeze(), &Arc::from("b"))
            .expect("encoded here")
            .remove(0)
    }
}

#[cfg(test)]
mod tests {
    use super::test_records::{encode, encode_from, encode_with_sys_flag};
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn views_read_what_received_messages_hold() {
        let mut buf = BytesMut::new();
        encode(
            "Orders",
            b"first",
            &[(keys::TAGS, "A"), (keys::KEYS, "k1 k2"), ("color", "red")],
            10,
            &mut buf,
        );
        encode(
            "%RETRY%g",
            b"second",
            &[(RETRY_TOPIC, "Orders"), (keys::TIMER_OUT_MS, "1234")],
            11,
            &mut buf,
        );
        encode_from(
            SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], 10911)),
            "V6",
            b"third",
            &[(keys::UNIQ_KEY, "U3")],
            12,
            &mut buf,
        );
        let body = buf.freeze();
        let broker: Arc<str> = Arc::from("broker-a");
        let mut raw = split_records(&body, &broker).unwrap();
        raw[1].retried = true;
        raw[1].redelivered = 3;
        let batch = MessageBatch::from_raw(raw);
        assert_eq!(batch.len(), 3);
        let old = crate::message::decode_records(&body, "broker-a").unwrap();
        assert_eq!(old.len(), 3);
        for (view, old) in batch.iter().zip(&old) {
            let new = view.to_received();
            assert_eq!(new.queue_offset, old.queue_offset);
            assert_eq!(new.msg_id, old.msg_id);
            assert_eq!(new.properties, old.properties);
            assert_eq!(new.body, old.body);
            assert_eq!(view.body(), &old.body[..]);
            assert_eq!(view.body_bytes(), old.body);
            assert_eq!(view.msg_id(), old.msg_id);
            assert_eq!(view.broker_name(), "broker-a");
            assert_eq!(view.queue_id(), old.queue_id);
            assert_eq!(view.queue_offset(), old.queue_offset);
            assert_eq!(view.physical_offset(), old.physical_offset);
            assert_eq!(view.flag(), old.flag);
            assert_eq!(view.sys_flag(), old.sys_flag);
            assert_eq!(view.born_timestamp_ms(), old.born_timestamp_ms);
            assert_eq!(view.born_host(), old.born_host);
            assert_eq!(view.store_timestamp_ms(), old.store_timestamp_ms);
            assert_eq!(view.store_host(), old.store_host);
            assert_eq!(view.unique_key(), old.unique_key());
            assert_eq!(view.tag(), old.tag());
            assert_eq!(view.properties().count(), old.properties.len());
        }
        let v6 = batch.get(2).unwrap();
        assert!(v6.store_host().is_ipv6());
        assert_eq!(v6.topic(), "V6");
        assert_eq!(v6.reconsume_times(), 2);
        assert_eq!(v6.store_timestamp_ms(), 2_000);
        assert_eq!(
            v6.to_received(),
            old[2],
            "nothing added: the same owned message"
        );
        let first = batch.get(0).unwrap();
        assert_eq!(first.topic(), "Orders");
        assert_eq!(first.tag(), Some("A"));
        assert_eq!(first.keys(), ["k1", "k2"]);
        assert_eq!(first.reconsume_times(), 2);
        assert_eq!(
            first.user_properties().collect::<Vec<_>>(),
            [("color", "red")]
        );
        assert_eq!(first.deliver_at_ms(), None);
        let second = batch.get(1).unwrap();
        assert_eq!(second.topic(), "Orders", "shown under its original topic");
        assert_eq!(second.to_received().topic, "Orders");
        assert_eq!(second.reconsume_times(), 5, "2 from the broker, 3 local");
        assert_eq!(second.to_received().reconsume_times, 5);
        assert_eq!(second.deliver_at_ms(), Some(1234));
        assert!(batch.get(3).is_none());
    }

    #[test]
    fn compressed_bodies_are_inflated_and_lose_the_compressed_bit() {
        use record::sys_flag::{COMPRESSED, COMPRESSION_ZLIB, MULTI_TAGS};
        use std::io::Write;
        let original = b"a body a RocketMQ producer compressed ".repeat(200);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
        z.write_all(&original).unwrap();
        let zlib = z.finish().unwrap();
        let host = SocketAddr::from(([127, 0, 0, 1], 9876));
        let sys = COMPRESSED | COMPRESSION_ZLIB | MULTI_TAGS;
        let mut buf = BytesMut::new();
        encode_with_sys_flag(host, sys, "t", &zlib, &[(keys::TAGS, "A")], 0, &mut buf);
        encode("t", b"plain", &[], 1, &mut buf);
        let mut junk = zlib.clone();
        junk[..4].copy_from_slice(b"junk");
        encode_with_sys_flag(host, sys, "t", &junk, &[], 2, &mut buf);
        let body = buf.freeze();
        let batch = MessageBatch::from_raw(split_records(&body, &Arc::from("b")).unwrap());
        let old = crate::message::decode_records(&body, "b").unwrap();

        let inflated = batch.get(0).unwrap();
        assert_eq!(inflated.body(), &original[..]);
        assert_eq!(inflated.body_bytes(), original[..]);
        assert_eq!(inflated.sys_flag(), COMPRESSION_ZLIB | MULTI_TAGS);
        assert!(!inflated.body_compressed());
        assert_eq!(inflated.tag(), Some("A"));
        assert_eq!(inflated.to_received(), old[0]);
        assert_eq!(old[0].body, original[..]);
        assert!(!old[0].body_compressed());

        let plain = batch.get(1).unwrap();
        assert_eq!(plain.body(), b"plain");
        assert!(
            body.as_ptr_range().contains(&plain.body().as_ptr()),
            "an uncompressed body is read in place"
        );

        let stuck = batch.get(2).unwrap();
        assert_eq!(stuck.body(), &junk[..], "delivered as stored");
        assert_eq!(stuck.sys_flag(), sys);
        assert!(stuck.body_compressed());
        assert_eq!(stuck.to_received(), old[2]);
        assert!(old[2].body_compressed());
        assert!(crate::inflate::inflate_body(old[2].sys_flag, &old[2].body).is_err());
    }

    #[test]
    fn a_bad_record_fails_the_body() {
        let mut buf = BytesMut::new();
        encode("t", b"x", &[], 0, &mut buf);
        let last = buf.len() - 1;
        buf[last] ^= 0xFF;
        let body = buf.freeze();
        assert!(split_records(&body, &Arc::from("b")).is_err());
        let mut buf = BytesMut::new();
        encode("t", b"body", &[], 0, &mut buf);
        let at = buf.len() - 6; // in the body: the CRC catches it
        buf[at] ^= 0xFF;
        assert!(split_records(&buf.freeze(), &Arc::from("b")).is_err());
    }
}
