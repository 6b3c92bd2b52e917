//! Structure-aware: the input bytes build a valid value of a wire type (`Sample`), which must
//! encode to `encoded_len` bytes and decode back to itself. The first byte picks the type.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use ringmq_wire::codec::sample::Sample;
use ringmq_wire::codec::{Decode, Encode};
use ringmq_wire::command::Request;

fn round_trip<T: Sample + Decode + Encode + PartialEq + Debug>(data: &[u8]) {
    let value = T::from_bytes(data);
    let bytes = value.to_vec().expect("a sampled value encodes");
    assert_eq!(bytes.len(), value.encoded_len().expect("length"));
    assert_eq!(T::decode(&bytes).expect("an encoded value decodes"), value);
}

fn round_trip_request(data: &[u8]) {
    let req = Request::from_bytes(data);
    let bytes = req.to_vec().expect("a sampled request encodes");
    assert_eq!(Request::decode(req.code(), &bytes).expect("decodes"), req);
}

macro_rules! types {
    ($($t:ty),* $(,)?) => {
        const TYPES: &[fn(&[u8])] = &[round_trip_request, $( round_trip::<$t>, )*];
    };
}

ringmq_wire::for_each_wire_type!(types);

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    TYPES[usize::from(selector) % TYPES.len()](rest);
});
