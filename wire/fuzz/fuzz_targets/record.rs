//! The record codec on arbitrary bytes: decode, batch iteration, properties. A record that
//! decodes must re-encode (with its broker fields patched back) to the same bytes, unless
//! its magic is v2 with a short topic (a producer would have chosen v1).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_wire::{properties, record};

fuzz_target!(|data: &[u8]| {
    let _ = properties::iter(data).count();
    let _ = record::iter(data).count();
    let Ok(record::Entry::Record(view)) = record::decode(data) else {
        return;
    };
    assert!(view.len() <= data.len());
    let _ = properties::iter(view.properties).count();
    let v2 = view.bytes[4..8] == record::MAGIC_V2.to_be_bytes();
    if v2 != (view.topic.len() > record::TOPIC_V1_BYTES_MAX) {
        return;
    }
    let mut again = Vec::new();
    let Ok(n) = record::encode(&view.message(), &mut again) else {
        return;
    };
    assert_eq!(n, view.len());
    let fields = record::BrokerFields {
        queue_offset: view.queue_offset,
        physical_offset: view.physical_offset,
        store_timestamp_ms: view.store_timestamp_ms,
        store_host: view.store_host,
    };
    record::patch_broker_fields(&mut again, &fields).expect("same layout as the original");
    assert_eq!(again, view.bytes);
});
