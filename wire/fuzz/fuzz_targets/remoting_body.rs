//! The remoting bodies and headers on arbitrary bytes: the SEND_BATCH_MESSAGE body, every
//! JSON body, and every typed header over an `extFields` map built from the bytes. The
//! first byte picks the decoder. A value that decodes must survive encode -> decode.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use ringmq_wire::remoting::batch;
use ringmq_wire::remoting::body::{self, *};
use ringmq_wire::remoting::ext::{ExtFields, FromExt, ToExt};
use ringmq_wire::remoting::headers::*;

fn check_batch(data: &[u8]) {
    let checked = batch::check(data);
    let mut n = 0;
    for m in batch::iter(data) {
        let Ok(m) = m else {
            assert!(checked.is_err(), "check accepted what iter refused");
            return;
        };
        n += 1;
        let mut again = Vec::new();
        batch::encode(&mut again, m.flag, m.body, m.properties).expect("a decoded message encodes");
        let back = batch::iter(&again).next().expect("one").expect("decodes");
        assert_eq!(back, m);
    }
    assert_eq!(checked, Ok(n));
}

fn check_json<T: JsonBody + PartialEq + Debug>(data: &[u8]) {
    let _ = body::quote_bare_keys(data);
    if let Ok(v) = T::from_json(data) {
        assert_eq!(
            T::from_json(&v.to_json()).expect("re-encoded body decodes"),
            v
        );
    }
}

/// `key \0 value \0 key \0 value ...` as an extFields map (non-UTF-8 parts dropped).
fn ext_from(data: &[u8]) -> ExtFields {
    let parts: Vec<&str> = data
        .split(|b| *b == 0)
        .map(|p| std::str::from_utf8(p).unwrap_or(""))
        .collect();
    parts
        .chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => Some(((*k).to_owned(), (*v).to_owned())),
            _ => None,
        })
        .collect()
}

fn check_header<H: FromExt + ToExt + PartialEq + Debug>(data: &[u8]) {
    let ext = ext_from(data);
    if let Ok(h) = H::from_ext(&ext) {
        assert_eq!(
            H::from_ext(&h.to_ext()).expect("re-encoded header decodes"),
            h
        );
    }
}

fn check_send_v2(data: &[u8]) {
    let ext = ext_from(data);
    if let Ok(h) = SendMessageRequestHeader::from_ext_v2(&ext) {
        assert_eq!(
            SendMessageRequestHeader::from_ext_v2(&h.to_ext_v2()).expect("decodes"),
            h
        );
    }
}

const DECODERS: &[fn(&[u8])] = &[
    check_batch,
    check_json::<HeartbeatData>,
    check_json::<TopicRouteData>,
    check_json::<ClusterInfo>,
    check_json::<LockBatchRequestBody>,
    check_json::<LockBatchResponseBody>,
    check_json::<GetConsumerListByGroupResponseBody>,
    check_send_v2,
    check_header::<SendMessageRequestHeader>,
    check_header::<SendMessageResponseHeader>,
    check_header::<PullMessageRequestHeader>,
    check_header::<PullMessageResponseHeader>,
    check_header::<QueryConsumerOffsetRequestHeader>,
    check_header::<UpdateConsumerOffsetRequestHeader>,
    check_header::<SearchOffsetRequestHeader>,
    check_header::<ConsumerSendMsgBackRequestHeader>,
    check_header::<EndTransactionRequestHeader>,
    check_header::<CheckTransactionStateRequestHeader>,
    check_header::<QueryMessageRequestHeader>,
    check_header::<CreateTopicRequestHeader>,
];

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    DECODERS[usize::from(*first) % DECODERS.len()](rest);
});
