//! Every command decoder on arbitrary bytes. The first byte picks the decoder (one per wire
//! type, plus `Request::decode` with a code from the next two bytes). A value that decodes
//! must survive encode -> decode unchanged.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::{Decode, Encode};
use ringmq_wire::command::{self, Request, TagFilter};

fn check<T: Decode + Encode + PartialEq + Debug>(data: &[u8]) {
    if let Ok(value) = T::decode(data) {
        let bytes = value.to_vec().expect("a decoded value re-encodes");
        assert_eq!(T::decode(&bytes).expect("re-encoded value decodes"), value);
    }
}

fn check_request(data: &[u8]) {
    let [a, b, header @ ..] = data else { return };
    let Ok(code) = RequestCode::try_from(u16::from_be_bytes([*a, *b])) else {
        return;
    };
    if let Ok(req) = Request::decode(code, header) {
        let bytes = req.to_vec().expect("a decoded request re-encodes");
        assert_eq!(
            Request::decode(code, &bytes).expect("re-encoded request decodes"),
            req
        );
    }
}

fn check_text(data: &[u8]) {
    let _ = command::read_remark(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = TagFilter::parse(text);
    }
}

macro_rules! decoders {
    ($($t:ty),* $(,)?) => {
        const DECODERS: &[fn(&[u8])] = &[check_request, check_text, $( check::<$t>, )*];
    };
}

ringmq_wire::for_each_wire_type!(decoders);

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    DECODERS[usize::from(selector) % DECODERS.len()](rest);
});
