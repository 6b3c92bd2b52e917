//! What the store's benches share: the records they append, the clock, their settings.

use std::time::{SystemTime, UNIX_EPOCH};

use ringmq_wire::{properties, record};

/// Body bytes of every record the benches write.
pub const BODY_BYTES: usize = 1024;

/// A 1-record batch for `topic`/`queue`: a 1 KiB body and `props`, as a producer encodes
/// it.
pub fn encode_record(topic: &str, queue: u32, props: &[(&str, &str)]) -> Vec<u8> {
    let body: Vec<u8> = (0..BODY_BYTES).map(|i| (i * 31 + 7) as u8).collect();
    let mut encoded = Vec::new();
    properties::encode(props.iter().copied(), &mut encoded).expect("small properties encode");
    let msg = record::Message {
        topic,
        queue_id: queue,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: now_ms(),
        born_host: "127.0.0.1:4000".parse().expect("literal"),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: &body,
        properties: &encoded,
    };
    let mut out = Vec::new();
    record::encode(&msg, &mut out).expect("a 1 KiB record encodes");
    out
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A whole number from the environment, `default` when unset; anything else stops the
/// bench with a message.
pub fn env_u64(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v} is not a whole number")),
        Err(_) => default,
    }
}
