//! Records: building, batching and decoding them for the tests.

use super::*;

/// What a test sends as one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub topic: String,
    pub queue_id: u32,
    pub body: Vec<u8>,
    /// Encoded properties block (TAGS, KEYS, user properties).
    pub properties: Vec<u8>,
}

impl Msg {
    pub fn new(topic: &str, queue_id: u32, body: impl Into<Vec<u8>>) -> Self {
        Msg {
            topic: topic.to_string(),
            queue_id,
            body: body.into(),
            properties: Vec::new(),
        }
    }

    /// Adds properties (e.g. `("TAGS", "TagA")`, `("KEYS", "k1")`, user keys).
    pub fn props(mut self, pairs: &[(&str, &str)]) -> Self {
        properties::encode(pairs.iter().copied(), &mut self.properties)
            .expect("test properties are valid");
        self
    }

    /// The record bytes a producer sends (broker-owned fields zero, IPv4 store host slot).
    pub fn encode(&self) -> Vec<u8> {
        let m = Message {
            topic: &self.topic,
            queue_id: self.queue_id,
            flag: 7,
            sys_flag: 0,
            born_timestamp_ms: now_ms(),
            born_host: SocketAddr::from(([127, 0, 0, 1], 40000)),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &self.body,
            properties: &self.properties,
        };
        let mut out = Vec::new();
        record::encode(&m, &mut out).expect("test record encodes");
        out
    }
}

/// Records back to back, as a batch body.
pub fn batch_body(msgs: &[Msg]) -> (Vec<u8>, Vec<usize>) {
    let mut body = Vec::new();
    let mut lens = Vec::new();
    for m in msgs {
        let r = m.encode();
        lens.push(r.len());
        body.extend_from_slice(&r);
    }
    (body, lens)
}

/// Decodes every record of a pull or view body; panics on a bad record.
pub fn decode_records(body: &[u8]) -> Vec<RecordView<'_>> {
    record::iter(body)
        .map(|r| r.expect("broker returned a valid record"))
        .collect()
}

/// Checks a stored record against what was sent: the same bytes except the broker-owned
/// fields (queue offset, physical offset, store timestamp, store host), which are patched
/// into a copy of the sent bytes from the stored record before comparing.
pub fn assert_same_record(sent: &[u8], got: &RecordView<'_>) {
    let mut want = sent.to_vec();
    record::patch_broker_fields(
        &mut want,
        &record::BrokerFields {
            queue_offset: got.queue_offset,
            physical_offset: got.physical_offset,
            store_timestamp_ms: got.store_timestamp_ms,
            store_host: got.store_host,
        },
    )
    .expect("patching the sent record");
    assert_eq!(
        want, got.bytes,
        "stored record differs from the sent one beyond the broker-owned fields \
         (queue {} offset {})",
        got.queue_id, got.queue_offset
    );
}
